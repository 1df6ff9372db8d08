//! Comparing runs: per series and figure, each run's value, its ratio to
//! the first run's, and whether the difference is beyond the runs' sampling
//! noise; per count the runs store (missed periods, lost datagrams, noise
//! interruptions), its rate and whether that changed beyond chance.
//!
//! Three tests, each where it works:
//!
//! - **Bootstrap** (mean and percentiles with at least [`MIN_TAIL`] samples
//!   above them in both runs): a 95 % interval of the ratio. A run with at
//!   least [`MIN_INTERVALS`] checkpoint intervals holding samples is
//!   resampled by whole intervals (grouped into at most [`MAX_BLOCKS`]
//!   consecutive blocks), so that bursts of latency stay together and the
//!   interval is as wide as the run's own variation over time. A shorter
//!   run is resampled by single samples: a percentile of a resample is an
//!   order statistic of the run's own histogram, the k-th smallest of n
//!   values drawn with replacement being the original's `ceil(n U)`-th
//!   smallest with `U ~ Beta(k, n + 1 - k)`; the mean's replicate is normal
//!   with the histogram's variance.
//! - **Exceedance** (the maximum, and a percentile too far in the tail for
//!   the bootstrap): the samples of the later run above the baseline's
//!   figure against those of the baseline (none, for the maximum). If both
//!   runs came from one distribution, each of the `m` samples above that
//!   value is the later run's with probability `n_B / (n_A + n_B)`: the
//!   count is Binomial(m, n_B / (n_A + n_B)), the exact conditional test of
//!   two rates (the large-sample limit of the permutation test of the runs'
//!   ranks). A single sample beyond the baseline's maximum is then as
//!   likely as not (p = 1); a new population of spikes is not.
//! - **Poisson** (counts): `k` events over an exposure `t` per run; under
//!   one rate, given the total, the later run's count is Binomial with the
//!   share of the exposure as its probability.
//!
//! Each is two-sided at 1 - [`CONFIDENCE`]. The tests see sampling noise
//! only: two runs of the same machine also differ by what changed between
//! them (the host, the time of day). A gate therefore asks for a difference
//! beyond the noise, larger than a practical margin and than an absolute
//! floor, on chosen rows, as `rtscope compare --max-regression` does.

use crate::descriptor::{self, Count};
use crate::episode::Stages;
use crate::hist::{Tally, signed_buckets};
use crate::run::{Run, RunStatus, Series};
use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, DiscreteCDF};

mod fold;
mod gate;
mod stats;
pub use fold::RunBlocks;
pub use gate::*;
pub use stats::*;

/// The load a series was measured under (`rtscope run`'s assessments store
/// it); a run of a single probe has one implicit load (the machine as it
/// was), named by the empty string. Series group by this key in reports and
/// comparisons.
pub fn load_of(series: &Series) -> &str {
    series.key.load.as_deref().unwrap_or("")
}

/// Bootstrap replicates per interval: the 2.5 % and 97.5 % points of 2000
/// replicates move by about 1 % of the interval's width between seeds.
pub const REPLICATES: usize = 2000;
/// The bootstraps' seed ("rtscope"): every comparison is reproducible.
const SEED: u64 = 0x0072_7473_636f_7065;
/// Two-sided coverage of the ratio's interval; every test's level is 1 - this.
pub const CONFIDENCE: f64 = 0.95;
/// A percentile gets a bootstrap interval only when at least this many
/// samples lie above it in both runs; with fewer the exceedance test
/// judges it.
pub const MIN_TAIL: f64 = 10.0;
/// A run is bootstrapped by whole checkpoint intervals when at least this
/// many of the row's intervals hold samples; by single samples otherwise.
pub const MIN_INTERVALS: usize = 10;
/// At most this many blocks of consecutive intervals are resampled (a
/// 12-hour run's 4320 intervals of 10 s make 99 blocks of 44): the cost of
/// a replicate stays bounded and a block spans more of a long run's
/// dependence.
pub const MAX_BLOCKS: usize = 100;
/// `--min-delta`'s default: a figure that moved by less than 1 us never
/// fails the gate.
pub const DEFAULT_MIN_DELTA_NS: u64 = 1_000;

/// The figures compared, in order: (name, what it is).
pub const FIGURES: [(&str, Figure); 6] = [
    ("mean", Figure::Mean),
    ("p50", Figure::Quantile(0.5)),
    ("p99", Figure::Quantile(0.99)),
    ("p99.9", Figure::Quantile(0.999)),
    ("p99.99", Figure::Quantile(0.9999)),
    ("max", Figure::Max),
];

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Figure {
    Mean,
    Quantile(f64),
    Max,
}

/// What a run's figure did against the first run's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// The first run: what the others are compared with.
    Baseline,
    /// Higher beyond the noise: the interval of the ratio lies above 1, or
    /// the exceedance or Poisson test says so.
    Worse,
    /// Lower beyond the noise.
    Better,
    /// The difference is within the runs' noise.
    WithinNoise,
    /// No test: a ratio undefined (a baseline at or below 0, a negative value).
    Untested,
    /// The series is not in this run (or the baseline lacks it).
    Missing,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Baseline => "baseline",
            Change::Worse => "worse",
            Change::Better => "better",
            Change::WithinNoise => "within noise",
            Change::Untested => "untested",
            Change::Missing => "missing",
        }
    }
}

/// Which test judged a figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Test {
    /// A bootstrap interval of the ratio.
    Bootstrap,
    /// Samples above a figure counted in both runs.
    Exceedance,
    /// Two event counts over their exposures.
    Poisson,
}

impl Test {
    pub fn as_str(self) -> &'static str {
        match self {
            Test::Bootstrap => "bootstrap",
            Test::Exceedance => "exceedance",
            Test::Poisson => "poisson",
        }
    }
}

/// How a run was resampled for the bootstrap of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resampling {
    /// Whole checkpoint intervals (blocks of them).
    Intervals,
    /// Single samples (fewer than MIN_INTERVALS intervals hold samples).
    Samples,
}

/// One figure of one series across the runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FigureCmp {
    pub figure: String,
    /// Per run, ns (None: the run lacks the series).
    pub values_ns: Vec<Option<f64>>,
    /// Per run, value / the first run's (None where undefined).
    pub ratios: Vec<Option<f64>>,
    /// Per run, the bootstrap interval of the ratio (bootstrap test only).
    pub intervals: Vec<Option<[f64; 2]>>,
    /// Per run, the test that judged it (None: the baseline, missing, untested).
    pub tests: Vec<Option<Test>>,
    /// Per run, the exceedance test's two-sided p-value.
    pub p_values: Vec<Option<f64>>,
    /// Per run, what the exceedance test counted.
    pub tails: Vec<Option<TailCount>>,
    pub changes: Vec<Change>,
}

/// One series (or the merge of a probe's CPUs) across the runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeriesCmp {
    pub load: String,
    pub probe: String,
    pub metric: String,
    /// The CPU, or None for all CPUs of the run merged.
    pub cpu: Option<i64>,
    /// Whether this row is the metric's summary: its CPUs merged, or its
    /// only CPU.
    pub summary: bool,
    /// Whether `--max-regression` gates on this row.
    pub gated: bool,
    pub counts: Vec<Option<u64>>,
    /// Per run, how the bootstrap resampled it.
    pub resampled: Vec<Option<Resampling>>,
    pub figures: Vec<FigureCmp>,
}

fn row_label(probe: &str, metric: &str, cpu: Option<i64>, load: &str) -> String {
    // A watched thread's series is keyed by its thread id, not a CPU.
    let cpu = match (cpu, descriptor::per_thread(probe)) {
        (None, false) => "all CPUs".to_string(),
        (None, true) => "all threads".to_string(),
        (Some(c), false) => format!("cpu{c}"),
        (Some(c), true) => format!("tid{c}"),
    };
    let load = if load.is_empty() { String::new() } else { format!(" [{load}]") };
    format!("{probe} {metric} {cpu}{load}")
}

impl SeriesCmp {
    /// `wakeup latency cpu1`, `wakeup latency all CPUs`, with the load when there is one.
    pub fn label(&self) -> String {
        row_label(&self.probe, &self.metric, self.cpu, &self.load)
    }
}

/// A count a run stores (missed periods, lost datagrams, interruptions)
/// across the runs, as a rate over its exposure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RateCmp {
    pub load: String,
    pub probe: String,
    /// The metric the count belongs to (`datagrams` for netlat's per-CPU counts).
    pub metric: String,
    /// What is counted: `overruns`, `missed`, `lost`, `reordered`, `rate` (noise interruptions) ...
    pub figure: String,
    pub cpu: Option<i64>,
    pub summary: bool,
    pub gated: bool,
    pub counts: Vec<Option<u64>>,
    /// Per run, the time the count accrued over, s.
    pub exposure_s: Vec<Option<f64>>,
    pub rates_per_s: Vec<Option<f64>>,
    /// Per run, its rate / the baseline's (None: undefined, a baseline of 0).
    pub ratios: Vec<Option<f64>>,
    /// Per run, the Poisson test's two-sided p-value.
    pub p_values: Vec<Option<f64>>,
    pub changes: Vec<Change>,
}

impl RateCmp {
    pub fn label(&self) -> String {
        row_label(&self.probe, &self.metric, self.cpu, &self.load)
    }
}

/// Every row of a comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Compared {
    pub series: Vec<SeriesCmp>,
    pub rates: Vec<RateCmp>,
}

/// The key of a compared row: (load, probe, metric, cpu or None for all).
type Key = (String, String, String, Option<i64>);

/// A row's data in one run: the whole-run tally and its checkpoint
/// intervals folded into blocks (per CPU: by sequence number, merged
/// across CPUs).
#[derive(Clone)]
struct RowData {
    tally: Tally,
    intervals: BlockFold,
}

/// Lines up the summary rows across runs: where the runs measured a metric
/// on other CPUs (or threads: a restarted program's), or some merged
/// several CPUs and others had one, each run with a single row of that
/// metric gets a merged row equal to it. Else a 1-CPU run's row, or one on
/// another CPU, would meet the baseline's merged row nowhere, and the gate
/// would judge neither. Runs that all measured the same one CPU are left
/// as they are. `key`/`cpu`/`merged`/`renamed` read and rewrite an item's
/// key (`merged`: the key with no CPU).
fn align_merged<T, K: PartialEq + Clone>(
    per_run: &mut [Vec<T>],
    key: impl Fn(&T) -> &K,
    cpu: impl Fn(&K) -> Option<i64>,
    merged: impl Fn(&K) -> K,
    renamed: impl Fn(&T, K) -> T,
) {
    let mut groups: Vec<K> = Vec::new();
    for k in per_run.iter().flatten().map(&key) {
        let g = merged(k);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    for g in groups {
        let cpus = |list: &Vec<T>| -> Vec<i64> {
            let mut c: Vec<i64> = list.iter().map(&key).filter(|k| merged(k) == g).filter_map(&cpu).collect();
            c.sort_unstable();
            c
        };
        let sets: Vec<Vec<i64>> = per_run.iter().map(cpus).collect();
        let any_merged = per_run.iter().flatten().any(|t| *key(t) == g);
        if !any_merged && sets.windows(2).all(|w| w[0] == w[1]) {
            continue;
        }
        for (list, set) in per_run.iter_mut().zip(&sets) {
            if set.len() != 1 || list.iter().any(|t| *key(t) == g) {
                continue;
            }
            let one = list.iter().find(|t| merged(key(t)) == g).map(|t| renamed(t, g.clone()));
            list.extend(one);
        }
    }
}

/// A run's side of a row, ready to test.
pub struct Sample {
    pub ranks: Ranks,
    /// Its intervals in blocks, when there are enough.
    pub blocks: Option<Blocks>,
}

impl Sample {
    /// A sample resampled by single samples only.
    pub fn of(t: &Tally) -> Sample {
        Sample { ranks: Ranks::new(t), blocks: None }
    }

    /// With its checkpoint intervals, in time order.
    pub fn with_intervals(t: &Tally, intervals: &[IntervalPoints]) -> Sample {
        Sample { ranks: Ranks::new(t), blocks: Blocks::new(intervals) }
    }

    pub fn resampling(&self) -> Resampling {
        if self.blocks.is_some() { Resampling::Intervals } else { Resampling::Samples }
    }

    /// Bootstrap replicates of each of [`FIGURES`] that the run can be
    /// tested on (None for the others).
    fn replicates(&self, rng: &mut Rng) -> Vec<Option<Vec<f64>>> {
        let testable: Vec<bool> = FIGURES.iter().map(|(_, f)| self.ranks.testable(*f)).collect();
        match &self.blocks {
            Some(b) => {
                let figures: Vec<Figure> = FIGURES.iter().map(|(_, f)| *f).collect();
                let all = b.replicates(&figures, REPLICATES, rng);
                all.into_iter().zip(testable).map(|(r, t)| t.then_some(r)).collect()
            }
            None => FIGURES
                .iter()
                .zip(testable)
                .map(|(&(_, f), t)| t.then(|| (0..REPLICATES).map(|_| self.ranks.replicate(f, rng)).collect()))
                .collect(),
        }
    }
}

/// The order rows appear in: per load and probe, the measured metrics in
/// the order the first run's probe made them, then the stage series of a
/// traced run; per metric the CPUs in order and the merged row last.
fn sort_keys<T>(keys: &mut [T], runs: &[&Run], key: impl Fn(&T) -> (&str, &str, &str, Option<i64>, &str)) {
    let planned: Vec<&str> = runs
        .first()
        .and_then(|r| r.plan["metrics"].as_array())
        .map(|a| a.iter().filter_map(|m| m.as_str()).collect())
        .unwrap_or_default();
    let stage = |m: &str| Stages::SERIES.iter().chain(&Stages::NET_SERIES).position(|s| *s == m);
    let rank = |m: &str| match (planned.iter().position(|p| *p == m), stage(m)) {
        (Some(i), _) => (0, i),
        (None, None) => (1, 0),
        (None, Some(i)) => (2, i),
    };
    keys.sort_by(|a, b| {
        let (a, b) = (key(a), key(b));
        (a.0, a.1, rank(a.2), a.2, a.3.is_none(), a.3, a.4).cmp(&(b.0, b.1, rank(b.2), b.2, b.3.is_none(), b.3, b.4))
    });
}

/// Marks the summary row of each (load, probe, metric): the merged row,
/// or the metric's only CPU.
fn mark_summaries<'a>(rows: impl Iterator<Item = (&'a str, &'a str, &'a str, Option<i64>, &'a mut bool)>) {
    let rows: Vec<_> = rows.collect();
    let groups: Vec<(&str, &str, &str, bool)> = rows.iter().map(|r| (r.0, r.1, r.2, r.3.is_none())).collect();
    for (i, row) in rows.into_iter().enumerate() {
        let (l, p, m) = (groups[i].0, groups[i].1, groups[i].2);
        let merged_exists = groups.iter().any(|g| g.0 == l && g.1 == p && g.2 == m && g.3);
        *row.4 = row.3.is_none() || !merged_exists;
    }
}

/// Compares `runs` (the first is the baseline): a row per series any of
/// them has, per CPU and merged over CPUs, in the first run's order, and a
/// row per count they store. No row is gated yet: see [`Compared::gate_rows`].
/// The runs hold their intervals' histograms (see [`compare_blocks`] for
/// runs read summed).
pub fn compare(runs: &[&Run]) -> Compared {
    compare_blocks(runs, runs.iter().map(|r| RunBlocks::of_run(r)).collect())
}

/// [`compare`] of `runs` whose intervals were folded into `blocks` (one
/// per run, in order: [`RunBlocks::of_run`], or [`RunBlocks::streamed`]
/// for a run read summed). Of the runs it reads each series' total,
/// extra figures and intervals' times (the counts' exposure), not their
/// histograms.
pub fn compare_blocks(runs: &[&Run], blocks: Vec<RunBlocks>) -> Compared {
    assert_eq!(runs.len(), blocks.len(), "a run's blocks per run");
    let mut per_run: Vec<Vec<(Key, RowData)>> = runs.iter().zip(blocks).map(|(r, b)| fold::row_data(r, b)).collect();
    align_merged(
        &mut per_run,
        |(k, _)| k,
        |k| k.3,
        |k| (k.0.clone(), k.1.clone(), k.2.clone(), None),
        |(_, d), k| (k, d.clone()),
    );
    let mut keys: Vec<Key> = Vec::new();
    for list in &per_run {
        for (k, _) in list {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    sort_keys(&mut keys, runs, |k| (&k.0, &k.1, &k.2, k.3, ""));
    let rows: Vec<(usize, Key)> = keys.into_iter().enumerate().collect();
    // Each row on its own generator, seeded by its place: the same figures
    // however many threads share the rows.
    let mut series: Vec<SeriesCmp> = crate::par::map_into(rows, |(i, k)| {
        let mut rng = Rng::new(SEED ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let samples: Vec<Option<Sample>> = per_run
            .iter()
            .map(|list| {
                list.iter()
                    .find(|(x, _)| *x == k)
                    .map(|(_, d)| Sample { ranks: Ranks::new(&d.tally), blocks: d.intervals.blocks() })
            })
            .collect();
        let refs: Vec<Option<&Sample>> = samples.iter().map(Option::as_ref).collect();
        SeriesCmp {
            load: k.0,
            probe: k.1,
            metric: k.2,
            cpu: k.3,
            summary: false,
            gated: false,
            counts: samples.iter().map(|s| s.as_ref().map(|s| s.ranks.count())).collect(),
            resampled: samples.iter().map(|s| s.as_ref().map(Sample::resampling)).collect(),
            figures: compare_figures(&refs, &mut rng),
        }
    });
    mark_summaries(
        series.iter_mut().map(|s| (s.load.as_str(), s.probe.as_str(), s.metric.as_str(), s.cpu, &mut s.summary)),
    );
    let mut rates = compare_rates(runs);
    mark_summaries(
        rates.iter_mut().map(|r| (r.load.as_str(), r.probe.as_str(), r.metric.as_str(), r.cpu, &mut r.summary)),
    );
    Compared { series, rates }
}

/// Every figure of a row: the runs' samples (None: the run lacks it).
pub fn compare_figures(samples: &[Option<&Sample>], rng: &mut Rng) -> Vec<FigureCmp> {
    let samples: Vec<Option<&Sample>> = samples.iter().map(|s| s.filter(|s| s.ranks.n > 0)).collect();
    let reps: Vec<Option<Vec<Option<Vec<f64>>>>> = samples.iter().map(|s| s.map(|s| s.replicates(rng))).collect();
    FIGURES
        .iter()
        .enumerate()
        .map(|(fi, &(name, f))| {
            let reps: Vec<Option<&Vec<f64>>> = reps.iter().map(|r| r.as_ref().and_then(|r| r[fi].as_ref())).collect();
            compare_figure(name, f, &samples, &reps)
        })
        .collect()
}

fn compare_figure(name: &str, f: Figure, samples: &[Option<&Sample>], reps: &[Option<&Vec<f64>>]) -> FigureCmp {
    let n = samples.len();
    let mut cmp = FigureCmp {
        figure: name.into(),
        values_ns: samples.iter().map(|s| s.map(|s| s.ranks.value(f))).collect(),
        ratios: vec![None; n],
        intervals: vec![None; n],
        tests: vec![None; n],
        p_values: vec![None; n],
        tails: vec![None; n],
        changes: vec![Change::Missing; n],
    };
    let Some(base) = samples.first().copied().flatten() else { return cmp };
    cmp.changes[0] = Change::Baseline;
    cmp.ratios[0] = Some(1.0);
    let b0 = base.ranks.value(f);
    for (i, other) in samples.iter().enumerate().skip(1) {
        let Some(other) = other else { continue };
        let v = other.ranks.value(f);
        if b0 <= 0.0 || v < 0.0 {
            cmp.changes[i] = Change::Untested;
            continue;
        }
        cmp.ratios[i] = Some(v / b0);
        if let (Some(ra), Some(rb)) = (reps[0], reps[i]) {
            let mut ratios: Vec<f64> =
                ra.iter().zip(rb).map(|(a, b)| if *a > 0.0 { b / a } else { f64::INFINITY }).collect();
            ratios.sort_by(f64::total_cmp);
            let tail = (1.0 - CONFIDENCE) / 2.0;
            let at = |p: f64| ratios[((p * ratios.len() as f64) as usize).min(ratios.len() - 1)];
            let (lo, hi) = (at(tail), at(1.0 - tail));
            cmp.intervals[i] = Some([lo, hi]);
            cmp.tests[i] = Some(Test::Bootstrap);
            cmp.changes[i] = if lo > 1.0 {
                Change::Worse
            } else if hi < 1.0 {
                Change::Better
            } else {
                Change::WithinNoise
            };
        } else if f == Figure::Mean {
            // Fewer than 2 samples: no spread to test against.
            cmp.changes[i] = Change::Untested;
        } else {
            let (p, change, counted) = tail_test(&base.ranks, &other.ranks, f);
            cmp.tests[i] = Some(Test::Exceedance);
            cmp.p_values[i] = Some(p);
            cmp.tails[i] = Some(counted);
            cmp.changes[i] = change;
        }
    }
    cmp
}

/// The key of a rate row: (load, probe, metric, figure, cpu or None).
type RateKey = (String, String, String, String, Option<i64>);

/// A series' measured time, ns: its intervals' lengths.
fn exposure_ns(s: &Series) -> u64 {
    s.intervals.iter().map(|i| i.end_ns.saturating_sub(i.start_ns)).sum()
}

/// The counts of a run: (key, count, exposure ns), per CPU and merged.
fn rate_data(run: &Run) -> Vec<(RateKey, u64, u64)> {
    let mut out: Vec<(RateKey, u64, u64)> = Vec::new();
    for s in &run.series {
        if crate::irqtime::from_trace(&s.key.metric) {
            continue;
        }
        let load = load_of(s).to_string();
        let (probe, metric, cpu) = (s.key.probe.clone(), s.key.metric.clone(), Some(s.key.cpu));
        let t = exposure_ns(s);
        out.push(((load.clone(), probe.clone(), metric.clone(), "overruns".into(), cpu), s.overruns(), t));
        // The probe's counts, and the rate of its samples, as its row says.
        let Some(d) = descriptor::find(&probe) else { continue };
        if let Some(time) = d.rate_over {
            let active = time.get(&s.extra).and_then(|v| v.as_u64()).filter(|&a| a > 0).unwrap_or(t);
            out.push(((load.clone(), probe.clone(), metric.clone(), "rate".into(), cpu), s.total().count(), active));
        }
        for &Count { key, per_cpu, absent_zero } in d.counts {
            let Some(k) = key.get(&s.extra).and_then(|v| v.as_u64()).or(absent_zero.then_some(0)) else { continue };
            let m = if per_cpu { "datagrams".to_string() } else { metric.clone() };
            let rk = (load.clone(), probe.clone(), m, key.key.to_string(), cpu);
            // A per-CPU count is stored on each of the CPU's metrics: once.
            if !out.iter().any(|(x, _, _)| *x == rk) {
                out.push((rk, k, t));
            }
        }
    }
    let mut merged: Vec<(RateKey, u64, u64, usize)> = Vec::new();
    for (k, c, t) in &out {
        let mk = (k.0.clone(), k.1.clone(), k.2.clone(), k.3.clone(), None);
        match merged.iter_mut().find(|(x, ..)| *x == mk) {
            Some((_, mc, mt, n)) => {
                *mc += c;
                *mt += t;
                *n += 1;
            }
            None => merged.push((mk, *c, *t, 1)),
        }
    }
    out.extend(merged.into_iter().filter(|m| m.3 > 1).map(|(k, c, t, _)| (k, c, t)));
    out
}

fn compare_rates(runs: &[&Run]) -> Vec<RateCmp> {
    let mut per_run: Vec<Vec<(RateKey, u64, u64)>> = runs.iter().map(|r| rate_data(r)).collect();
    align_merged(
        &mut per_run,
        |(k, ..)| k,
        |k| k.4,
        |k| (k.0.clone(), k.1.clone(), k.2.clone(), k.3.clone(), None),
        |&(_, c, t), k| (k, c, t),
    );
    let mut keys: Vec<RateKey> = Vec::new();
    for list in &per_run {
        for (k, _, _) in list {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    // Overruns only where some run had one: every series stores them.
    keys.retain(|k| {
        k.3 != "overruns" || per_run.iter().flatten().any(|(x, c, _)| x.1 == k.1 && x.2 == k.2 && x.3 == k.3 && *c > 0)
    });
    sort_keys(&mut keys, runs, |k| (&k.0, &k.1, &k.2, k.4, &k.3));
    keys.into_iter()
        .map(|k| {
            let got: Vec<Option<(u64, f64)>> = per_run
                .iter()
                .map(|l| l.iter().find(|(x, _, _)| *x == k).map(|(_, c, t)| (*c, *t as f64 / 1e9)))
                .collect();
            let n = got.len();
            let rate = |g: Option<(u64, f64)>| g.filter(|g| g.1 > 0.0).map(|(c, t)| c as f64 / t);
            let mut row = RateCmp {
                load: k.0.clone(),
                probe: k.1.clone(),
                metric: k.2.clone(),
                figure: k.3.clone(),
                cpu: k.4,
                summary: false,
                gated: false,
                counts: got.iter().map(|g| g.map(|g| g.0)).collect(),
                exposure_s: got.iter().map(|g| g.map(|g| g.1)).collect(),
                rates_per_s: got.iter().map(|g| rate(*g)).collect(),
                ratios: vec![None; n],
                p_values: vec![None; n],
                changes: vec![Change::Missing; n],
            };
            if let Some(Some((ka, ta))) = got.first().copied().filter(|g| g.is_some_and(|g| g.1 > 0.0)) {
                row.changes[0] = Change::Baseline;
                row.ratios[0] = Some(1.0);
                for (i, g) in got.iter().enumerate().skip(1) {
                    let Some((kb, tb)) = g.filter(|g| g.1 > 0.0) else { continue };
                    let (ra, rb) = (ka as f64 / ta, kb as f64 / tb);
                    row.ratios[i] = if ra > 0.0 {
                        Some(rb / ra)
                    } else if rb == 0.0 {
                        Some(1.0)
                    } else {
                        None
                    };
                    let (p, change) = counts_verdict(ka, ta, kb, tb);
                    row.p_values[i] = Some(p);
                    row.changes[i] = change;
                }
            }
            row
        })
        .collect()
}

/// The runs that did not run to their planned end: (index, status).
pub fn incomplete(runs: &[&Run]) -> Vec<(usize, RunStatus)> {
    runs.iter()
        .enumerate()
        .filter(|(_, r)| r.header.status != RunStatus::Complete)
        .map(|(i, r)| (i, r.header.status))
        .collect()
}

#[cfg(test)]
mod tests;
