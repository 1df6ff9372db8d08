//! The result model: a run, its series (one per probe, metric and CPU),
//! their checkpoint intervals and exceedances.

use crate::characterisation::{Characterisation, CpuScore};
use crate::episode::{Episode, TraceSummary};
use crate::hist::{Hist, Packed, Stats, Summary, Summer, Tally};
use crate::inventory::{Inventory, Warning};
use serde::{Deserialize, Serialize};

/// A run's state in the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Measuring now (or died without a trace: see `Partial`).
    Running,
    /// Ran to its planned end.
    Complete,
    /// Stopped early by SIGINT/SIGTERM or a threshold; all data kept.
    Interrupted,
    /// The process died (SIGKILL, power loss); data up to the last checkpoint.
    Partial,
    /// Ended by an error.
    Failed,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Partial => "partial",
            RunStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<RunStatus> {
        Some(match s {
            "running" => RunStatus::Running,
            "complete" => RunStatus::Complete,
            "interrupted" => RunStatus::Interrupted,
            "partial" => RunStatus::Partial,
            "failed" => RunStatus::Failed,
            _ => return None,
        })
    }
}

/// Everything about a run but its data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunHeader {
    /// Local id in this store (renumbered on import).
    #[serde(default)]
    pub id: i64,
    /// Global identity; import refuses a run already present.
    pub uuid: String,
    pub tool_version: String,
    pub command_line: Vec<String>,
    /// The subcommand that made it (`wakeup`, `run`, ...).
    pub kind: String,
    pub hostname: String,
    /// CLOCK_REALTIME at the start, ns since the Unix epoch.
    pub started_unix_ns: i64,
    pub ended_unix_ns: Option<i64>,
    /// CLOCK_MONOTONIC at the start; every stored timestamp is on this clock.
    pub start_mono_ns: u64,
    pub status: RunStatus,
    pub exit_code: Option<i32>,
    pub pid: u32,
    /// False when the run could not use real-time scheduling.
    pub representative: bool,
    pub warnings: Vec<Warning>,
    /// Events worth knowing (threshold breach, lost data, ...).
    #[serde(default)]
    pub notes: Vec<String>,
    /// rtscope's own peak resident memory, kB.
    #[serde(default)]
    pub peak_rss_kb: Option<u64>,
}

impl RunHeader {
    /// A run of `kind` by this process and build, `uuid`, on `hostname`,
    /// started at `started_unix_ns` (CLOCK_REALTIME) and `start_mono_ns`
    /// (CLOCK_MONOTONIC): running, representative, with no command line,
    /// warnings or notes yet. Set what else differs with `..`.
    pub fn new(kind: &str, uuid: String, hostname: &str, started_unix_ns: i64, start_mono_ns: u64) -> RunHeader {
        RunHeader {
            id: 0,
            uuid,
            // The workspace's version, the binary's too.
            tool_version: env!("CARGO_PKG_VERSION").into(),
            command_line: vec![],
            kind: kind.into(),
            hostname: hostname.into(),
            started_unix_ns,
            ended_unix_ns: None,
            start_mono_ns,
            status: RunStatus::Running,
            exit_code: None,
            pid: std::process::id(),
            representative: true,
            warnings: vec![],
            notes: vec![],
            peak_rss_kb: None,
        }
    }
}

/// Identifies a series in a run.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SeriesKey {
    pub probe: String,
    pub metric: String,
    /// The CPU measured, or -1 for a series not tied to one.
    pub cpu: i64,
    /// The workload it was measured under, in an assessment (`rtscope
    /// run`): `idle`, `cpu`, `net:1000@1`, ...; None for a single probe's
    /// run, which knows nothing of what else ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<String>,
}

impl SeriesKey {
    /// A key without a load (a single probe's run).
    pub fn new(probe: &str, metric: &str, cpu: i64) -> SeriesKey {
        SeriesKey { probe: probe.into(), metric: metric.into(), cpu, load: None }
    }

    /// `probe/metric cpu N` (`thread TID` for a watched thread) and
    /// ` under LOAD` when there is one, for messages.
    pub fn describe(&self) -> String {
        let word = if crate::descriptor::per_thread(&self.probe) { "thread" } else { "cpu" };
        match &self.load {
            Some(l) => format!("{}/{} {word} {} under {l}", self.probe, self.metric, self.cpu),
            None => format!("{}/{} {word} {}", self.probe, self.metric, self.cpu),
        }
    }
}

/// One checkpoint interval of one series.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    pub seq: u32,
    /// CLOCK_MONOTONIC ns.
    pub start_ns: u64,
    pub end_ns: u64,
    pub stats: Stats,
    /// Periods missed because a wake-up came later than the next one.
    pub overruns: u64,
    /// Exceedances that did not fit in the ring to the writer.
    pub lost_exceedances: u64,
    /// The interval's histogram, HdrHistogram V2 + DEFLATE: a few hundred
    /// bytes where the decoded histogram takes 230 kB, so that a 12-hour
    /// run's thousands of intervals fit in memory. [`Interval::hist`]
    /// decodes it. In a signed series: the values >= 0 only.
    pub hdr: Vec<u8>,
    /// A signed series' negative values as magnitudes; None when unsigned
    /// (boxed: a long run's reads keep every interval's statistics).
    pub neg: Option<Box<NegHalf>>,
}

/// The negative half of a signed series' interval: statistics and
/// histogram of the magnitudes of its values below zero.
#[derive(Clone, Debug, PartialEq)]
pub struct NegHalf {
    pub stats: Stats,
    pub hdr: Vec<u8>,
}

impl Interval {
    /// An interval from what a recorder measured.
    pub fn new(seq: u32, start_ns: u64, end_ns: u64, tally: &Tally, overruns: u64, lost_exceedances: u64) -> Interval {
        Interval {
            seq,
            start_ns,
            end_ns,
            stats: tally.stats,
            overruns,
            lost_exceedances,
            hdr: crate::hist::encode(&tally.hist),
            neg: tally.neg.as_ref().map(|n| Box::new(NegHalf { stats: n.stats, hdr: crate::hist::encode(&n.hist) })),
        }
    }

    /// The decoded histogram.
    pub fn hist(&self) -> Result<Hist, String> {
        crate::hist::decode(&self.hdr)
    }

    /// The decoded tally, with its negative half when signed.
    pub fn tally(&self) -> Result<Tally, String> {
        let neg = match &self.neg {
            Some(n) => Some(Box::new(checked_tally(self.seq, n.stats, &n.hdr, "negative half of ")?)),
            None => None,
        };
        Ok(Tally { neg, ..checked_tally(self.seq, self.stats, &self.hdr, "")? })
    }
}

/// Decodes `hdr` and checks it against `stats`.
fn checked_tally(seq: u32, stats: Stats, hdr: &[u8], what: &str) -> Result<Tally, String> {
    if stats.count > 0 && stats.min > stats.max {
        return Err(format!("{what}interval {seq}: min above max"));
    }
    let hist = crate::hist::decode(hdr).map_err(|e| format!("{what}interval {seq}: {e}"))?;
    if hist.len() + stats.overflows != stats.count {
        return Err(format!(
            "{what}interval {seq}: histogram holds {} samples but count is {}",
            hist.len() + stats.overflows,
            stats.count
        ));
    }
    Ok(Tally { hist, stats, neg: None })
}

/// A sum of interval histograms of one sign (see [`Summer`]) with their
/// statistics; an interval [`Summer`] cannot read is decoded and added as
/// before.
struct SumHalf {
    summer: Summer,
    stats: Stats,
    decoded: Option<Hist>,
}

impl SumHalf {
    fn new() -> SumHalf {
        SumHalf { summer: Summer::new(), stats: Stats::new(), decoded: None }
    }

    /// Adds one interval's half, checked as [`checked_tally`] checks it,
    /// with its messages.
    fn add(&mut self, seq: u32, stats: Stats, hdr: &[u8], what: &str) -> Result<(), String> {
        if stats.count > 0 && stats.min > stats.max {
            return Err(format!("{what}interval {seq}: min above max"));
        }
        match self.summer.add_encoded(hdr) {
            Some(len) if len + stats.overflows != stats.count => {
                return Err(format!(
                    "{what}interval {seq}: histogram holds {} samples but count is {}",
                    len + stats.overflows,
                    stats.count
                ));
            }
            Some(_) => {}
            None => {
                let t = checked_tally(seq, stats, hdr, what)?;
                let sum = self.decoded.get_or_insert_with(crate::hist::new_hist);
                sum.add(&t.hist).expect("rtscope histograms share bounds");
            }
        }
        self.stats.merge(&stats);
        Ok(())
    }

    fn add_sum(&mut self, other: &SumHalf) {
        self.summer.add(&other.summer);
        self.stats.merge(&other.stats);
        if let Some(h) = &other.decoded {
            self.decoded.get_or_insert_with(crate::hist::new_hist).add(h).expect("rtscope histograms share bounds");
        }
    }

    fn tally(&self) -> Tally {
        let mut hist = self.summer.hist();
        if let Some(h) = &self.decoded {
            hist.add(h).expect("rtscope histograms share bounds");
        }
        Tally { hist, stats: self.stats, neg: None }
    }

    /// The sum packed, without making its histogram when the summer holds
    /// all of it.
    fn packed(&self) -> Packed {
        match self.decoded {
            None => Packed { stats: self.stats, hdr: self.summer.encoded(), neg: None },
            Some(_) => Packed::of(&self.tally()),
        }
    }
}

/// A sum of intervals: values >= 0, and a signed series' negative half.
struct Sum {
    pos: SumHalf,
    neg: Option<SumHalf>,
}

impl Sum {
    fn new() -> Sum {
        Sum { pos: SumHalf::new(), neg: None }
    }

    /// Adds an interval, checked as [`Interval::tally`] checks it.
    fn add(&mut self, iv: &Interval) -> Result<(), String> {
        if let Some(n) = &iv.neg {
            self.neg.get_or_insert_with(SumHalf::new).add(iv.seq, n.stats, &n.hdr, "negative half of ")?;
        }
        self.pos.add(iv.seq, iv.stats, &iv.hdr, "")
    }

    fn add_sum(&mut self, other: &Sum) {
        self.pos.add_sum(&other.pos);
        if let Some(n) = &other.neg {
            self.neg.get_or_insert_with(SumHalf::new).add_sum(n);
        }
    }

    fn tally(&self) -> Tally {
        Tally { neg: self.neg.as_ref().map(|n| Box::new(n.tally())), ..self.pos.tally() }
    }

    fn packed(&self) -> Packed {
        Packed { neg: self.neg.as_ref().map(|n| Box::new(n.packed())), ..self.pos.packed() }
    }
}

/// The first and second half of a series in time, summed when the series
/// is built (the analysis compares their tails).
#[derive(Clone, Debug, PartialEq)]
pub struct Halves {
    /// The first interval of the second half: the first whose middle is
    /// at or past the middle of the series' time span.
    pub split: usize,
    pub first: Packed,
    pub second: Packed,
}

/// A raw sample above the exceedance threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exceedance {
    /// CLOCK_MONOTONIC ns of the sample.
    pub t_ns: u64,
    pub value_ns: u64,
}

/// One probe's metric on one CPU over the whole run.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub key: SeriesKey,
    pub unit: String,
    /// Exceedance threshold in force: `adaptive` or a fixed value in ns.
    pub exceed: String,
    pub intervals: Vec<Interval>,
    pub exceedances: Vec<Exceedance>,
    /// The probe's own per-series figures (e.g. `noise`'s `available_pct`),
    /// stored when measuring ends; they extend the result row.
    pub extra: serde_json::Map<String, serde_json::Value>,
    total: Tally,
    halves: Option<Halves>,
    /// Exceedances stored but not kept in `exceedances` (a read that
    /// keeps only those its analysis reads, see
    /// [`Series::keep_exceedances_from`]).
    exceedances_dropped: u64,
    /// What such a read kept: the lowest value kept (none below it is in
    /// `exceedances`) and the level above which the stored exceedances
    /// are complete, found from all of them before it dropped any.
    exceedances_kept: Option<KeptExceedances>,
}

/// What a read kept of a series' stored exceedances
/// ([`Series::keep_exceedances_from`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KeptExceedances {
    /// `exceedances` holds every stored exceedance at or above this
    /// value and none below it.
    pub from: f64,
    /// The level above which the stored exceedances hold (nearly) every
    /// sample above it (`analysis::obs::Obs::timed_from`), of all of them.
    pub complete_from: f64,
}

impl Series {
    /// A series; sums its intervals once (and each half of it, see
    /// [`Series::halves`]), checking that each histogram decodes and holds
    /// as many samples as its count says.
    pub fn new(
        key: SeriesKey,
        unit: String,
        exceed: String,
        intervals: Vec<Interval>,
        exceedances: Vec<Exceedance>,
    ) -> Result<Series, String> {
        for pair in intervals.windows(2) {
            if pair[1].seq <= pair[0].seq {
                return Err(format!(
                    "interval {} follows interval {}: sequence numbers must increase",
                    pair[1].seq, pair[0].seq
                ));
            }
        }
        let split = half_split(&intervals);
        let mut sums = [Sum::new(), Sum::new()];
        for (i, iv) in intervals.iter().enumerate() {
            if iv.start_ns > iv.end_ns {
                return Err(format!("interval {}: start after end", iv.seq));
            }
            let half = usize::from(split.is_some_and(|s| i >= s));
            sums[half].add(iv)?;
        }
        let halves = split.map(|split| Halves { split, first: sums[0].packed(), second: sums[1].packed() });
        let [mut all, second] = sums;
        all.add_sum(&second);
        let total = all.tally();
        Ok(Series {
            key,
            unit,
            exceed,
            intervals,
            exceedances,
            extra: Default::default(),
            total,
            halves,
            exceedances_dropped: 0,
            exceedances_kept: None,
        })
    }

    /// The series' first and second half in time: None with fewer than
    /// two intervals.
    pub fn halves(&self) -> Option<&Halves> {
        self.halves.as_ref()
    }

    /// Whether the series' values are signed (its intervals have a negative half).
    pub fn is_signed(&self) -> bool {
        self.total.is_signed()
    }

    /// The whole run's histogram and statistics.
    pub fn total(&self) -> &Tally {
        &self.total
    }

    pub fn overruns(&self) -> u64 {
        self.intervals.iter().map(|i| i.overruns).sum()
    }

    pub fn lost_exceedances(&self) -> u64 {
        self.intervals.iter().map(|i| i.lost_exceedances).sum()
    }

    /// The exceedances the store holds of this series: those in
    /// `exceedances` and those a read did not keep.
    pub fn exceedance_count(&self) -> u64 {
        self.exceedances.len() as u64 + self.exceedances_dropped
    }

    /// Keeps only the exceedances whose value is at least `kept.from`
    /// (those the analysis reads, see `analysis::pot::exceedances_read`),
    /// still counting the others in [`Series::exceedance_count`]; the
    /// analysis takes `kept.complete_from` as the level above which they
    /// are complete, which it can no longer find from those kept.
    pub fn keep_exceedances_from(&mut self, kept: KeptExceedances) {
        let before = self.exceedances.len();
        self.exceedances.retain(|e| e.value_ns as f64 >= kept.from);
        self.exceedances.shrink_to_fit();
        self.exceedances_dropped += (before - self.exceedances.len()) as u64;
        self.exceedances_kept = match self.exceedances_kept {
            Some(k) => Some(KeptExceedances { from: k.from.max(kept.from), complete_from: k.complete_from }),
            None => Some(kept),
        };
    }

    /// What a read kept of the series' exceedances; None when it kept
    /// them all.
    pub fn exceedances_kept(&self) -> Option<KeptExceedances> {
        self.exceedances_kept
    }

    /// The common result row of every probe's JSON.
    pub fn result(&self) -> ResultRow {
        let total = self.total();
        ResultRow {
            probe: self.key.probe.clone(),
            metric: self.key.metric.clone(),
            cpu: self.key.cpu,
            load: self.key.load.clone(),
            summary: total.summary(),
            overruns: self.overruns(),
            lost_exceedances: self.lost_exceedances(),
            exceedances: self.exceedance_count(),
            intervals: self.intervals.len() as u64,
            extra: self.extra.clone(),
        }
    }
}

/// A series built as its intervals are read, one at a time and in order:
/// each interval's histograms are summed into the series' total (and into
/// the half of the series it falls in) and then dropped, so that reading a
/// run takes memory for its intervals' statistics and times, not for their
/// histograms. [`Series::new`] sums intervals it keeps whole.
pub struct SeriesFold {
    key: SeriesKey,
    unit: String,
    exceed: String,
    /// The middle of the series' time span, where its second half starts.
    mid: u64,
    intervals: Vec<Interval>,
    split: Option<usize>,
    sums: [Sum; 2],
}

impl SeriesFold {
    /// A series whose first interval starts at `span.0` and whose last
    /// ends at `span.1` (the halves are found as the intervals come).
    pub fn new(key: SeriesKey, unit: String, exceed: String, span: (u64, u64)) -> SeriesFold {
        SeriesFold {
            key,
            unit,
            exceed,
            mid: middle(span.0, span.1),
            intervals: Vec::new(),
            split: None,
            sums: [Sum::new(), Sum::new()],
        }
    }

    /// Adds the next interval, checked as [`Series::new`] checks it; its
    /// histograms are summed and not kept (its `hdr` is left empty).
    pub fn add(&mut self, mut iv: Interval) -> Result<(), String> {
        if let Some(prev) = self.intervals.last()
            && iv.seq <= prev.seq
        {
            return Err(format!("interval {} follows interval {}: sequence numbers must increase", iv.seq, prev.seq));
        }
        if iv.start_ns > iv.end_ns {
            return Err(format!("interval {}: start after end", iv.seq));
        }
        if self.split.is_none() && !self.intervals.is_empty() && middle(iv.start_ns, iv.end_ns) >= self.mid {
            self.split = Some(self.intervals.len());
        }
        self.sums[usize::from(self.split.is_some())].add(&iv)?;
        iv.hdr = Vec::new();
        if let Some(n) = &mut iv.neg {
            n.hdr = Vec::new();
        }
        self.intervals.push(iv);
        Ok(())
    }

    /// The series, as [`Series::new`] would build it but for the
    /// intervals' histograms; None when its second half cannot be told as
    /// the intervals come (one in the middle starts before the first, or
    /// the span given was not theirs): build it with [`Series::new`] then.
    pub fn finish(mut self, exceedances: Vec<Exceedance>) -> Option<Series> {
        self.intervals.shrink_to_fit();
        let ivs = &self.intervals;
        let span_holds = match (ivs.first(), ivs.last()) {
            (Some(a), Some(b)) => middle(a.start_ns, b.end_ns) == self.mid,
            _ => true,
        };
        if !span_holds || (ivs.len() >= 2 && self.split.is_none()) {
            return None;
        }
        let [mut all, second] = self.sums;
        let halves = self.split.map(|split| Halves { split, first: all.packed(), second: second.packed() });
        all.add_sum(&second);
        let total = all.tally();
        Some(Series {
            key: self.key,
            unit: self.unit,
            exceed: self.exceed,
            intervals: self.intervals,
            exceedances,
            extra: Default::default(),
            total,
            halves,
            exceedances_dropped: 0,
            exceedances_kept: None,
        })
    }
}

impl Halves {
    /// The halves as two intervals that stand for them (what the store
    /// keeps of a finished run's series, see [`Series::from_halves`]): each
    /// with the seq and start of its first interval of `intervals` (those
    /// the halves were summed from), the end of its last, its sums, and
    /// its histograms plain V2-encoded.
    pub fn as_intervals(&self, intervals: &[Interval]) -> Option<[Interval; 2]> {
        let (first, second) = (intervals.first()?, intervals.get(self.split)?);
        let of = |p: &Packed, from: &Interval, to: &Interval| Interval {
            seq: from.seq,
            start_ns: from.start_ns,
            end_ns: to.end_ns,
            stats: p.stats,
            overruns: 0,
            lost_exceedances: 0,
            hdr: p.hdr.clone(),
            neg: p.neg.as_ref().map(|n| Box::new(NegHalf { stats: n.stats, hdr: n.hdr.clone() })),
        };
        Some([of(&self.first, first, &intervals[self.split - 1]), of(&self.second, second, intervals.last()?)])
    }
}

/// A sum of consecutive intervals as one interval that stands for them
/// (a chunk of a series, see the store's `series_chunks`): the seq and
/// start of the first, the end of the last, their statistics, missed
/// periods and lost exceedances summed, and their histograms summed,
/// plain V2-encoded (as [`Halves::as_intervals`] lays out a half).
pub struct IntervalSum {
    sum: Sum,
    first: Option<(u32, u64)>,
    end_ns: u64,
    overruns: u64,
    lost_exceedances: u64,
}

impl Default for IntervalSum {
    fn default() -> IntervalSum {
        IntervalSum { sum: Sum::new(), first: None, end_ns: 0, overruns: 0, lost_exceedances: 0 }
    }
}

impl IntervalSum {
    /// Adds the next interval (or a sum of intervals), checked as
    /// [`Interval::tally`] checks it.
    pub fn add(&mut self, iv: &Interval) -> Result<(), String> {
        self.sum.add(iv)?;
        self.first.get_or_insert((iv.seq, iv.start_ns));
        self.end_ns = iv.end_ns;
        self.overruns += iv.overruns;
        self.lost_exceedances += iv.lost_exceedances;
        Ok(())
    }

    /// The sum as an interval; None before the first is added.
    pub fn interval(&self) -> Option<Interval> {
        let (seq, start_ns) = self.first?;
        let p = self.sum.packed();
        Some(Interval {
            seq,
            start_ns,
            end_ns: self.end_ns,
            stats: p.stats,
            overruns: self.overruns,
            lost_exceedances: self.lost_exceedances,
            hdr: p.hdr,
            neg: p.neg.map(|n| Box::new(NegHalf { stats: n.stats, hdr: n.hdr })),
        })
    }
}

/// Where the second half of a series of `intervals` (statistics and times
/// enough) starts, as [`SeriesFold`] finds it: the first interval but the
/// first whose middle is at or past the middle of their span; None when
/// none is.
pub fn fold_split(intervals: &[Interval]) -> Option<usize> {
    let (first, last) = (intervals.first()?, intervals.last()?);
    let mid = middle(first.start_ns, last.end_ns);
    (1..intervals.len()).find(|&i| middle(intervals[i].start_ns, intervals[i].end_ns) >= mid)
}

/// The statistics of `ivs` merged: of their values >= 0, and of their
/// negative halves (None when none has one).
pub fn merged_stats(ivs: &[Interval]) -> (Stats, Option<Stats>) {
    let mut pos = Stats::new();
    let mut neg: Option<Stats> = None;
    for iv in ivs {
        pos.merge(&iv.stats);
        if let Some(n) = &iv.neg {
            neg.get_or_insert_with(Stats::new).merge(&n.stats);
        }
    }
    (pos, neg)
}

impl Series {
    /// The series from its intervals without their histograms (as
    /// [`SeriesFold`] leaves them) and the two intervals that stand for its
    /// halves ([`Halves::as_intervals`], stored when its run finished):
    /// what [`SeriesFold`] gives, without reading a histogram of an
    /// interval. None when the halves no longer agree with the intervals
    /// (the retention merged or dropped some since, or they are out of
    /// order): each half must start at the interval where the fold would
    /// start it, and its statistics must be those of its intervals merged;
    /// fold the intervals then.
    pub fn from_halves(
        key: SeriesKey,
        unit: String,
        exceed: String,
        intervals: Vec<Interval>,
        exceedances: Vec<Exceedance>,
        halves: [Interval; 2],
    ) -> Option<Series> {
        let ordered = intervals.windows(2).all(|p| p[1].seq > p[0].seq);
        if !ordered || intervals.iter().any(|iv| iv.start_ns > iv.end_ns) {
            return None;
        }
        let split = fold_split(&intervals)?;
        let [a, b] = &halves;
        let agree = |h: &Interval, ivs: &[Interval]| {
            ivs.first().is_some_and(|f| f.seq == h.seq)
                && merged_stats(ivs) == (h.stats, h.neg.as_ref().map(|n| n.stats))
        };
        if !agree(a, &intervals[..split]) || !agree(b, &intervals[split..]) {
            return None;
        }
        let mut sums = [Sum::new(), Sum::new()];
        for (sum, h) in sums.iter_mut().zip(&halves) {
            sum.add(h).ok()?;
        }
        let packed = |h: &Interval| Packed {
            stats: h.stats,
            hdr: h.hdr.clone(),
            neg: h.neg.as_ref().map(|n| Box::new(Packed { stats: n.stats, hdr: n.hdr.clone(), neg: None })),
        };
        let halves = Halves { split, first: packed(a), second: packed(b) };
        let [mut all, second] = sums;
        all.add_sum(&second);
        let total = all.tally();
        Some(Series {
            key,
            unit,
            exceed,
            intervals,
            exceedances,
            extra: Default::default(),
            total,
            halves: Some(halves),
            exceedances_dropped: 0,
            exceedances_kept: None,
        })
    }
}

/// The middle of `a..b` (wrapping: an interval that ends before it starts
/// is refused after this, in its turn).
fn middle(a: u64, b: u64) -> u64 {
    a.wrapping_add(b.wrapping_sub(a) / 2)
}

/// Where the second half of `intervals` starts: at the first interval
/// whose middle is at or past the middle of their time span (never the
/// first); None with fewer than two.
fn half_split(intervals: &[Interval]) -> Option<usize> {
    let (first, last) = (intervals.first()?, intervals.last()?);
    if intervals.len() < 2 {
        return None;
    }
    let mid = middle(first.start_ns, last.end_ns);
    Some(intervals.iter().position(|iv| middle(iv.start_ns, iv.end_ns) >= mid).unwrap_or(1).max(1))
}

/// `{probe, metric, cpu, count, min_ns, mean_ns, p50_ns, ..., max_ns,
/// overflows}` plus probe-specific fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultRow {
    pub probe: String,
    pub metric: String,
    pub cpu: i64,
    /// The workload, in an assessment's rows (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<String>,
    #[serde(flatten)]
    pub summary: Summary,
    pub overruns: u64,
    pub lost_exceedances: u64,
    pub exceedances: u64,
    pub intervals: u64,
    /// The probe's own fields ([`Series::extra`]).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// A whole run as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    pub header: RunHeader,
    pub inventory: Inventory,
    /// What was asked for: the probe's settings, as JSON.
    pub plan: serde_json::Value,
    pub series: Vec<Series>,
    /// Cause episodes of a traced run, worst first.
    pub episodes: Vec<Episode>,
    /// What the tracer did, for a traced run.
    pub trace: Option<TraceSummary>,
    /// Per workload, what the kernel counted while it ran (an assessment
    /// or `rtscope load`); empty otherwise.
    pub characterisation: Vec<Characterisation>,
    /// The short CPU score measured with the run, when it was.
    pub cpu_score: Option<CpuScore>,
}

impl Run {
    pub fn results(&self) -> Vec<ResultRow> {
        self.series.iter().map(Series::result).collect()
    }

    /// Whether the run is an assessment (series under loads) or a
    /// loads-only run (`rtscope load`), rather than one probe's run.
    pub fn is_matrix(&self) -> bool {
        self.series.iter().any(|s| s.key.load.is_some()) || !self.characterisation.is_empty()
    }

    /// The loads in the plan's order (then any other seen in the series).
    pub fn loads(&self) -> Vec<String> {
        let mut out: Vec<String> = self.plan["assessment"]["loads"]
            .as_array()
            .map(|a| a.iter().filter_map(|l| l["load"].as_str().map(String::from)).collect())
            .unwrap_or_default();
        for s in &self.series {
            if let Some(l) = &s.key.load
                && !out.contains(l)
            {
                out.push(l.clone());
            }
        }
        out
    }
}

/// The name of the load that is no load: the machine as it is.
pub const IDLE_LOAD: &str = "idle";

/// The series of `list` merged into one tally (every CPU together); None
/// when none has a sample.
pub fn pooled(list: &[&Series]) -> Option<Tally> {
    let mut iter = list.iter().filter(|s| s.total().count() > 0);
    let mut t = iter.next()?.total().clone();
    for s in iter {
        t.merge(s.total());
    }
    Some(t)
}

/// The worst case of a series: the sample farthest from zero, with its
/// sign. For an unsigned metric it is the maximum; for a signed one (sleep
/// deviation, timer drift) an early wake-up or a negative drift of a
/// larger magnitude than the latest sample shows as a negative value.
pub fn farthest(min_ns: i64, max_ns: i64) -> i64 {
    if min_ns.unsigned_abs() > max_ns.unsigned_abs() { min_ns } else { max_ns }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What summing the intervals by decoding each gives.
    fn merged(ivs: &[Interval]) -> Tally {
        let mut t = Tally::new();
        for iv in ivs {
            t.merge(&iv.tally().unwrap());
        }
        t
    }

    fn intervals(signed: bool) -> Vec<Interval> {
        let mut rng = fastrand::Rng::with_seed(7);
        (0..9u32)
            .map(|seq| {
                let mut t = if signed { Tally::new_signed() } else { Tally::new() };
                for _ in 0..rng.usize(1..300) {
                    let v = (rng.f64().powi(3) * 2e6) as i64 - if signed { 200_000 } else { 0 };
                    t.record_signed(v);
                }
                let start = u64::from(seq) * 1_000 + if seq == 8 { 500 } else { 0 };
                let mut iv = Interval::new(seq, start, start + 1_000, &t, 0, 0);
                if seq == 4 {
                    // An interval of other bounds: decoded and added as before.
                    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 10_000_000, 2).unwrap();
                    h.record(5_000).unwrap();
                    iv.hdr = crate::hist::encode(&h);
                    iv.stats = Stats { count: 1, min: 5_000, max: 5_000, sum: 5_000, overflows: 0 };
                }
                iv
            })
            .collect()
    }

    #[test]
    fn a_series_sums_its_intervals_and_halves_as_decoding_them_would() {
        for signed in [false, true] {
            let ivs = intervals(signed);
            let s =
                Series::new(SeriesKey::new("p", "m", 0), "ns".into(), "adaptive".into(), ivs.clone(), vec![]).unwrap();
            assert!(format!("{:?}", s.total()) == format!("{:?}", merged(&ivs)), "signed {signed}: total");
            let h = s.halves().unwrap();
            // The span is 0 .. 9500 ns: the middle 4750 is passed by interval 5's middle (5500).
            assert_eq!(h.split, 5);
            let same = |a: Tally, b: Tally| format!("{a:?}") == format!("{b:?}");
            assert!(same(h.first.unpack(), merged(&ivs[..5])), "signed {signed}: first half");
            assert!(same(h.second.unpack(), merged(&ivs[5..])), "signed {signed}: second half");
            let one = Series::new(SeriesKey::new("p", "m", 0), "ns".into(), "a".into(), ivs[..1].to_vec(), vec![]);
            assert!(one.unwrap().halves().is_none());
        }
    }

    /// [`SeriesFold`] of `ivs`, their span taken from them.
    fn folded(ivs: &[Interval]) -> Option<Series> {
        let span = (ivs.first().map_or(0, |i| i.start_ns), ivs.last().map_or(0, |i| i.end_ns));
        let mut f = SeriesFold::new(SeriesKey::new("p", "m", 0), "ns".into(), "adaptive".into(), span);
        for iv in ivs {
            f.add(iv.clone()).unwrap();
        }
        f.finish(vec![Exceedance { t_ns: 1, value_ns: 2 }])
    }

    #[test]
    fn a_series_from_its_stored_halves_is_the_series_folded() {
        for signed in [false, true] {
            let ivs = intervals(signed);
            for n in [2, 3, 9] {
                let f = folded(&ivs[..n]).unwrap();
                let halves = f.halves().unwrap().as_intervals(&f.intervals).unwrap();
                let from = |ivs: Vec<Interval>, halves: [Interval; 2]| {
                    let ex = vec![Exceedance { t_ns: 1, value_ns: 2 }];
                    Series::from_halves(SeriesKey::new("p", "m", 0), "ns".into(), "adaptive".into(), ivs, ex, halves)
                };
                let s = from(f.intervals.clone(), halves.clone()).unwrap();
                let same = |a: &Tally, b: &Tally| format!("{a:?}") == format!("{b:?}");
                assert!(same(f.total(), s.total()), "signed {signed}, {n} intervals: total");
                assert_eq!(f.halves(), s.halves(), "signed {signed}, {n} intervals: halves");
                assert_eq!(f, s, "signed {signed}, {n} intervals");
                // An interval dropped, or two merged across the halves' boundary: refused.
                let mut fewer = f.intervals.clone();
                fewer.remove(0);
                assert!(from(fewer, halves.clone()).is_none(), "signed {signed}, {n}: one dropped");
                if n > 2 {
                    let mut merged = f.intervals.clone();
                    let split = f.halves().unwrap().split;
                    let b = merged.remove(split);
                    merged[split - 1].end_ns = b.end_ns;
                    merged[split - 1].stats.merge(&b.stats);
                    assert!(from(merged, halves.clone()).is_none(), "signed {signed}, {n}: merged");
                }
            }
        }
    }

    #[test]
    fn a_series_folded_as_read_is_the_series_but_for_its_intervals_histograms() {
        for signed in [false, true] {
            let ivs = intervals(signed);
            for n in [0, 1, 2, 9] {
                let s = Series::new(
                    SeriesKey::new("p", "m", 0),
                    "ns".into(),
                    "adaptive".into(),
                    ivs[..n].to_vec(),
                    vec![Exceedance { t_ns: 1, value_ns: 2 }],
                )
                .unwrap();
                let f = folded(&ivs[..n]).unwrap();
                let same = |a: &Tally, b: &Tally| format!("{a:?}") == format!("{b:?}");
                assert!(same(f.total(), s.total()), "signed {signed}, {n} intervals: total");
                assert_eq!(f.halves(), s.halves(), "signed {signed}, {n} intervals: halves");
                assert_eq!(f.result(), s.result());
                assert!(
                    f.intervals.iter().all(|iv| iv.hdr.is_empty() && iv.neg.as_ref().is_none_or(|n| n.hdr.is_empty()))
                );
            }
        }
        // An interval in the middle that starts before the first: its
        // halves cannot be told as read.
        let mut ivs = intervals(false)[..2].to_vec();
        (ivs[0].start_ns, ivs[0].end_ns) = (5_000, 6_000);
        (ivs[1].start_ns, ivs[1].end_ns) = (0, 6_000);
        assert!(folded(&ivs).is_none());
        // Out of order, or ending before it starts: refused as Series::new refuses.
        let mut f = SeriesFold::new(SeriesKey::new("p", "m", 0), "ns".into(), "a".into(), (0, 9_500));
        let ivs = intervals(false);
        f.add(ivs[1].clone()).unwrap();
        assert_eq!(f.add(ivs[0].clone()), Err("interval 0 follows interval 1: sequence numbers must increase".into()));
        let mut bad = ivs[2].clone();
        bad.end_ns = bad.start_ns - 1;
        assert_eq!(f.add(bad), Err("interval 2: start after end".into()));
    }

    #[test]
    fn a_series_refuses_bad_intervals_as_decoding_them_would() {
        let new = |ivs: Vec<Interval>| {
            Series::new(SeriesKey::new("p", "m", 0), "ns".into(), "adaptive".into(), ivs, vec![]).map(|_| ())
        };
        let bad = |change: &dyn Fn(&mut Interval)| {
            let mut ivs = intervals(true);
            change(&mut ivs[2]);
            let want = ivs[2].tally().map(|_| ()).unwrap_err();
            assert_eq!(new(ivs), Err(want));
        };
        bad(&|iv| iv.hdr = b"garbage".to_vec());
        bad(&|iv| iv.stats.count += 1);
        bad(&|iv| iv.neg.as_mut().unwrap().stats.count += 1);
        bad(&|iv| iv.neg.as_mut().unwrap().hdr.truncate(10));
        bad(&|iv| (iv.stats.min, iv.stats.max) = (10, 5));
        let mut ivs = intervals(false);
        ivs[3].end_ns = ivs[3].start_ns - 1;
        assert_eq!(new(ivs), Err("interval 3: start after end".into()));
    }
}
