//! The recording path. A [`Recorder`] lives on a measuring thread: it
//! records into a preallocated histogram and hands each finished checkpoint
//! interval, and every sample above the exceedance threshold, to the writer
//! thread through lock-free single-producer rings (`rtrb`). It never
//! allocates, locks, formats or does I/O. The [`Writer`] owns the run store.

use crate::sys::tracemark::Marker;
use rtscope_model::episode::Episode;
use rtscope_model::hist::{Tally, quantile};
use rtscope_model::run::{Exceedance, Interval, SeriesKey};
use rtscope_model::store::Store;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::Receiver;

/// Histograms per series: the one being filled and spares the writer
/// returns. Two spares ride out a writer stalled for two intervals; after
/// that the interval in progress grows until one comes back (no loss).
const POOL: usize = 3;
/// Exceedances in flight per series (128 kB). The writer drains every
/// 50 ms; during the adaptive bootstrap every sample passes, which at a
/// 50 us interval fills 1000 slots per drain. What does not fit is counted.
const EXCEED_RING: usize = 1 << 13;
/// Samples the writer collects before the first adaptive threshold.
const BOOTSTRAP_SAMPLES: u64 = 1000;
/// The adaptive threshold's quantile: the running p99.9.
const ADAPTIVE_QUANTILE: f64 = 0.999;

/// A finished checkpoint interval on its way to the writer.
pub struct IntervalMsg {
    pub seq: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub tally: Box<Tally>,
    pub overruns: u64,
    pub lost_exceedances: u64,
}

/// Figures the progress line and the live per-CPU view read, one cache
/// line per series: relaxed stores by the measuring thread, each figure
/// on its own (a reader may see a sample's count before its sum).
#[repr(align(64))]
#[derive(Default)]
pub struct Live {
    pub count: AtomicU64,
    pub max: AtomicU64,
    /// The last sample (signed series: its value, negative or not).
    pub cur: AtomicI64,
    /// The smallest sample (meaningless while `count` is 0).
    pub min: AtomicI64,
    /// The samples' sum, for their mean.
    pub sum: AtomicI64,
}

/// How samples above the threshold are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExceedMode {
    /// The running p99.9 of the series.
    Adaptive,
    /// A fixed threshold, ns.
    Fixed(u64),
}

impl ExceedMode {
    pub fn describe(self) -> String {
        match self {
            ExceedMode::Adaptive => "adaptive p99.9".into(),
            ExceedMode::Fixed(ns) => format!("fixed {ns}"),
        }
    }
}

/// The counters of the interval being recorded, besides its histogram.
#[derive(Default)]
struct Open {
    seq: u32,
    start_ns: u64,
    overruns: u64,
    lost: u64,
}

impl Open {
    /// Ends this interval at `now` with `tally` and opens the next one.
    fn close(&mut self, tally: Box<Tally>, now: u64) -> IntervalMsg {
        let msg = IntervalMsg {
            seq: self.seq,
            start_ns: self.start_ns,
            end_ns: now,
            tally,
            overruns: std::mem::take(&mut self.overruns),
            lost_exceedances: std::mem::take(&mut self.lost),
        };
        self.seq += 1;
        self.start_ns = now;
        msg
    }
}

/// A sample as the probe recorded it: taken at `t_ns`, `value_ns` after
/// the instant it was due (for `wakeup`, its programmed time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub seq: u64,
    pub t_ns: u64,
    pub value_ns: u64,
}

/// Episodes on their way to the writer.
pub enum EpisodeMsg {
    Keep(Box<Episode>),
    /// (probe, metric, cpu, sample) pushed out of the worst-N.
    Drop(String, String, i64, u64),
    /// (probe, metric, cpu) had a sample above the cause threshold not kept
    /// as an episode, whose largest cause was of this class (a monitor's
    /// counters, `TraceOpts::classify_all`).
    Class(String, String, i64, rtscope_model::episode::CauseKind),
    /// What the whole window's timeline settled since its last part: stored
    /// as it comes, so that a run killed before its end keeps it.
    Timeline(Box<rtscope_model::episode::timeline::Part>),
    /// One traced CPU's interrupt and softirq runtimes over an interval
    /// ([`crate::trace::irqtime`]).
    Runtime(Box<RuntimeBatch>),
}

/// One traced CPU's interrupt and softirq runtimes over one interval, per
/// series metric (`irq:local_timer`, `softirq:NET_RX`), for `probe`'s
/// series on `cpu`.
pub struct RuntimeBatch {
    pub probe: String,
    pub cpu: i64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub series: Vec<(String, Tally)>,
}

/// The interrupt-runtime series the writer declared: (probe, metric, CPU)
/// -> (series id, next interval's sequence number).
pub type RuntimeSeries = std::collections::HashMap<(String, String, i64), (i64, u32)>;

/// Stores a batch of runtimes as intervals of their series, declaring a
/// series (under the cell's `load`) the first time it comes; tells the tap.
fn store_runtime(
    (store, known, tap): (&mut Store, &mut RuntimeSeries, Option<&Arc<dyn Tap>>),
    run_id: i64,
    load: &Option<String>,
    b: RuntimeBatch,
) -> anyhow::Result<()> {
    let mut intervals = Vec::with_capacity(b.series.len());
    for (metric, tally) in &b.series {
        let id = (b.probe.clone(), metric.clone(), b.cpu);
        let (sid, seq) = match known.get_mut(&id) {
            Some(v) => v,
            None => {
                let key = SeriesKey { probe: b.probe.clone(), metric: metric.clone(), cpu: b.cpu, load: load.clone() };
                let sid = store.add_series(run_id, &key, "ns", "none")?;
                if let Some(tap) = tap {
                    tap.series(sid, &key);
                }
                known.entry(id).or_insert((sid, 0))
            }
        };
        intervals.push((*sid, Interval::new(*seq, b.start_ns, b.end_ns, tally, 0, 0)));
        *seq += 1;
    }
    let ivs: Vec<(i64, &Interval)> = intervals.iter().map(|(s, iv)| (*s, iv)).collect();
    let committed = store.commit_checkpoint(&ivs, &[]);
    if let Some(tap) = tap {
        match &committed {
            Ok(()) => {
                for ((sid, _), (_, t)) in intervals.iter().zip(&b.series) {
                    tap.committed(*sid, t, 0, 0, b.end_ns);
                }
            }
            Err(_) => tap.store_failed(),
        }
    }
    committed
}

/// A copy of every sample for the tracer (`--trace`): the reader thread
/// matches them with the kernel's events. A full ring drops the copy (the
/// histogram has the sample) and counts it.
pub struct Mirror {
    pub tx: rtrb::Producer<Sample>,
    pub lost: Arc<AtomicU64>,
}

/// The measuring thread's end of one series.
pub struct Recorder {
    mirror: Option<Mirror>,
    marker: Option<Marker>,
    cur: Box<Tally>,
    open: Open,
    next_checkpoint: u64,
    checkpoint_ns: u64,
    total_max: u64,
    /// The smallest sample and the sum, for [`Live`].
    total_min: i64,
    total_sum: i64,
    total_count: u64,
    /// Samples offered to [`Recorder::record`], the warm-up's too.
    offered: u64,
    /// Samples taken before this instant are a warm-up: not recorded.
    from_ns: u64,
    /// No sample at or after `from_ns` yet: overruns are the warm-up's too.
    warming: bool,
    threshold: Arc<AtomicU64>,
    live: Arc<Live>,
    full_tx: rtrb::Producer<IntervalMsg>,
    free_rx: rtrb::Consumer<Box<Tally>>,
    exc_tx: rtrb::Producer<Exceedance>,
}

/// The writer's end of one series.
pub struct SeriesSink {
    pub series_id: i64,
    full_rx: rtrb::Consumer<IntervalMsg>,
    free_tx: rtrb::Producer<Box<Tally>>,
    exc_rx: rtrb::Consumer<Exceedance>,
    threshold: Arc<AtomicU64>,
    mode: ExceedMode,
    cumulative: Tally,
    /// Exceedances drained but not yet committed.
    pending: Vec<Exceedance>,
    /// End of the last interval handed to the store: exceedances after it
    /// wait for their own interval, so that the store never holds a sample
    /// its histograms lack.
    shipped_until: u64,
    /// Adaptive mode before the first threshold: every sample, to estimate it.
    bootstrap: Option<Vec<Exceedance>>,
    finished: bool,
}

/// Creates the two ends of a series. Allocates everything up front.
pub fn channel(series_id: i64, checkpoint_ns: u64, mode: ExceedMode) -> (Recorder, SeriesSink, Arc<Live>) {
    channel_with(series_id, checkpoint_ns, mode, false)
}

/// [`channel`] of a signed series when `signed`: its recorder takes
/// [`Recorder::record_signed`].
pub fn channel_with(
    series_id: i64,
    checkpoint_ns: u64,
    mode: ExceedMode,
    signed: bool,
) -> (Recorder, SeriesSink, Arc<Live>) {
    let tally = || Box::new(if signed { Tally::new_signed() } else { Tally::new() });
    let (full_tx, full_rx) = rtrb::RingBuffer::new(POOL);
    let (mut free_tx, free_rx) = rtrb::RingBuffer::new(POOL);
    for _ in 1..POOL {
        assert!(free_tx.push(tally()).is_ok(), "the pool fits its ring");
    }
    let (exc_tx, exc_rx) = rtrb::RingBuffer::new(EXCEED_RING);
    let initial = match mode {
        ExceedMode::Adaptive => 0,
        ExceedMode::Fixed(ns) => ns,
    };
    let threshold = Arc::new(AtomicU64::new(initial));
    let live = Arc::new(Live::default());
    let rec = Recorder {
        mirror: None,
        marker: None,
        cur: tally(),
        open: Open::default(),
        next_checkpoint: u64::MAX,
        checkpoint_ns,
        total_max: 0,
        total_min: i64::MAX,
        total_sum: 0,
        total_count: 0,
        offered: 0,
        from_ns: 0,
        warming: false,
        threshold: Arc::clone(&threshold),
        live: Arc::clone(&live),
        full_tx,
        free_rx,
        exc_tx,
    };
    let sink = SeriesSink {
        series_id,
        full_rx,
        free_tx,
        exc_rx,
        threshold,
        mode,
        cumulative: Tally::new(),
        pending: Vec::with_capacity(1024),
        shipped_until: 0,
        bootstrap: (mode == ExceedMode::Adaptive).then(|| Vec::with_capacity(2 * BOOTSTRAP_SAMPLES as usize)),
        finished: false,
    };
    (rec, sink, live)
}

impl Recorder {
    /// Starts the first interval at `now`.
    pub fn start(&mut self, now: u64) {
        self.start_after_warmup(now);
    }

    /// Starts the first interval at `from`; samples taken before it (a
    /// warm-up) are dropped.
    pub fn start_after_warmup(&mut self, from: u64) {
        self.from_ns = from;
        self.warming = true;
        self.open.start_ns = from;
        self.next_checkpoint = from.saturating_add(self.checkpoint_ns);
    }

    /// Copies every sample to the tracer from now on.
    pub fn set_mirror(&mut self, m: Mirror) {
        self.mirror = Some(m);
    }

    /// Writes every exceedance to `trace_marker` from now on.
    pub fn set_marker(&mut self, m: Marker) {
        self.marker = Some(m);
    }

    /// Records one sample taken at `t_ns`. Never allocates or blocks.
    #[inline(always)]
    pub fn record(&mut self, t_ns: u64, value: u64) {
        self.offered += 1;
        if self.warming {
            if t_ns < self.from_ns {
                return;
            }
            self.warming = false;
        }
        self.cur.record(value);
        self.total_count += 1;
        if let Some(m) = &mut self.mirror
            && m.tx.push(Sample { seq: self.total_count, t_ns, value_ns: value }).is_err()
        {
            m.lost.fetch_add(1, Relaxed);
        }
        self.live_figures(value as i64);
        if value > self.total_max {
            self.total_max = value;
            self.live.max.store(value, Relaxed);
        }
        let threshold = self.threshold.load(Relaxed);
        // While the adaptive threshold is being estimated (0), every sample
        // is offered and most will be discarded: a full ring loses nothing
        // that counts then.
        if value > threshold {
            if self.exc_tx.push(Exceedance { t_ns, value_ns: value }).is_err() && threshold != 0 {
                self.open.lost += 1;
            }
            if let Some(m) = &self.marker
                && threshold != 0
            {
                m.mark(self.total_count, value);
            }
        }
    }

    /// Records one sample of a signed series (made by [`channel_with`]). A
    /// value >= 0 takes the path of [`Recorder::record`]; a negative one
    /// goes to the series' negative half and is never an exceedance (the
    /// exceedances are the high tail). Never allocates or blocks.
    #[inline(always)]
    pub fn record_signed(&mut self, t_ns: u64, value: i64) {
        if value >= 0 {
            return self.record(t_ns, value as u64);
        }
        self.offered += 1;
        if self.warming {
            if t_ns < self.from_ns {
                return;
            }
            self.warming = false;
        }
        self.cur.record_signed(value);
        self.total_count += 1;
        self.live_figures(value);
    }

    /// The live view's figures after a sample of `value` (counted).
    #[inline(always)]
    fn live_figures(&mut self, value: i64) {
        self.total_sum = self.total_sum.wrapping_add(value);
        self.live.cur.store(value, Relaxed);
        self.live.sum.store(self.total_sum, Relaxed);
        if value < self.total_min {
            self.total_min = value;
            self.live.min.store(value, Relaxed);
        }
        self.live.count.store(self.total_count, Relaxed);
    }

    /// Counts `n` missed periods (none during the warm-up).
    #[inline]
    pub fn overrun(&mut self, n: u64) {
        if !self.warming {
            self.open.overruns += n;
        }
    }

    /// The interval being recorded (for tests: a recorder that never
    /// checkpoints holds every sample here).
    #[cfg(test)]
    pub fn current(&self) -> &Tally {
        &self.cur
    }

    /// Samples recorded so far.
    #[inline]
    pub fn count(&self) -> u64 {
        self.total_count
    }

    /// Samples offered so far, the warm-up's too.
    pub fn offered(&self) -> u64 {
        self.offered
    }

    /// Ends the interval if its time has come. Call outside the timed part.
    #[inline]
    pub fn maybe_checkpoint(&mut self, now: u64) {
        if now >= self.next_checkpoint {
            self.checkpoint(now);
        }
    }

    #[cold]
    fn checkpoint(&mut self, now: u64) {
        // No spare histogram: the writer is behind. Keep filling this one;
        // the interval simply lasts longer. Nothing is lost.
        if let Ok(fresh) = self.free_rx.pop() {
            self.ship(fresh, now);
        }
    }

    fn ship(&mut self, fresh: Box<Tally>, now: u64) {
        let full = std::mem::replace(&mut self.cur, fresh);
        // The ring holds the whole pool and this thread always keeps one
        // histogram, so it is never full.
        let _ = self.full_tx.push(self.open.close(full, now));
        self.next_checkpoint = now.saturating_add(self.checkpoint_ns);
    }

    /// Ships the last interval. Called once measuring is over; stopped
    /// within the warm-up (a signal), the series keeps one empty interval
    /// of no length where recording would have begun.
    pub fn finish(mut self, now: u64) {
        let o = &self.open;
        if self.cur.count() == 0 && o.overruns == 0 && o.lost == 0 && o.seq > 0 {
            return;
        }
        let end = now.max(o.start_ns);
        let _ = self.full_tx.push(self.open.close(self.cur, end));
    }
}

impl SeriesSink {
    /// Whether its recorder has finished and everything it sent, its raw
    /// exceedances included, is committed.
    pub fn done(&self) -> bool {
        self.finished && self.pending.is_empty()
    }

    /// Everything committed so far: the whole series once it has finished.
    pub fn total(&self) -> &Tally {
        &self.cumulative
    }

    /// Moves what the ring holds into `pending` (adaptive bootstrap aside).
    fn drain_exceedances(&mut self) {
        let n = self.exc_rx.slots();
        let Ok(chunk) = self.exc_rx.read_chunk(n) else { return };
        let (a, b) = chunk.as_slices();
        if let Some(held) = &mut self.bootstrap {
            held.extend(a.iter().chain(b));
        } else {
            let t = self.threshold.load(Relaxed);
            self.pending.extend(a.iter().chain(b).filter(|e| e.value_ns > t));
        }
        chunk.commit_all();
        if self.bootstrap.as_ref().is_some_and(|held| held.len() as u64 >= BOOTSTRAP_SAMPLES) {
            self.end_bootstrap();
        }
    }

    /// The first threshold: the p99.9 of the samples held so far (their
    /// maximum when there are fewer than 1000); keeps those at or above it.
    fn end_bootstrap(&mut self) {
        if let Some(held) = self.bootstrap.take() {
            let mut seen = Tally::new();
            for e in &held {
                seen.record(e.value_ns);
            }
            let t = quantile(&seen.hist, &seen.stats, ADAPTIVE_QUANTILE);
            self.threshold.store(t, Relaxed);
            // `>=`: a short run keeps at least its maximum.
            self.pending.extend(held.into_iter().filter(|e| e.value_ns >= t));
        }
    }

    fn adapt(&mut self) {
        if self.mode == ExceedMode::Adaptive && self.bootstrap.is_none() {
            let c = &self.cumulative;
            self.threshold.store(quantile(&c.hist, &c.stats, ADAPTIVE_QUANTILE), Relaxed);
        }
    }
}

/// Sees each interval once the store has committed it: a monitor's live
/// counters (`rtscope monitor`). Called on the writer thread.
pub trait Tap: Send + Sync {
    /// Series `series_id`, keyed `key`, was declared.
    fn series(&self, series_id: i64, key: &SeriesKey);
    /// An interval of series `series_id` was committed: its samples, its
    /// missed periods and lost exceedances, and its end (CLOCK_MONOTONIC).
    fn committed(&self, series_id: i64, tally: &Tally, missed: u64, lost: u64, end_ns: u64);
    /// A commit failed: what was not committed is not counted.
    fn store_failed(&self);
    /// Series `series_id` is a watched thread's (`monitor --watch`), thread
    /// `tid` named `comm`; declared as [`Tap::series`] otherwise.
    fn thread(&self, series_id: i64, key: &SeriesKey, tid: i32, comm: &str) {
        let _ = (tid, comm);
        self.series(series_id, key);
    }
    /// A sample of series `series_id` above the cause threshold was
    /// explained: its largest cause was of `kind`.
    fn episode(&self, series_id: i64, kind: rtscope_model::episode::CauseKind) {
        let _ = (series_id, kind);
    }
    /// Series `series_id` is a traced probe's: its samples above the cause
    /// threshold are explained ([`Tap::episode`]).
    fn explained(&self, series_id: i64) {
        let _ = series_id;
    }
    /// Series `series_id` finished (its recorder ended: a watched thread
    /// exited) and all of it is committed.
    fn ended(&self, series_id: i64) {
        let _ = series_id;
    }
}

/// The writer thread's state: every series' sink and the store.
pub struct Writer {
    pub store: Store,
    pub sinks: Vec<SeriesSink>,
    pub lost_exceedances: u64,
    /// A traced run's episodes, from the reader thread: (run id, channel).
    pub episodes: Option<(i64, Receiver<EpisodeMsg>)>,
    /// The load the episodes were measured under (an assessment's cell).
    pub load: Option<String>,
    /// Told of every committed interval (a monitor).
    pub tap: Option<Arc<dyn Tap>>,
    /// The series a traced probe's episodes belong to, by (probe, metric,
    /// CPU), for the tap's counts per cause class.
    pub explained: Vec<((String, String, i64), i64)>,
    /// The interrupt-runtime series declared so far.
    pub runtime: RuntimeSeries,
}

impl Writer {
    /// A writer of `sinks` into `store` with nothing else: no episodes, no
    /// load, no tap.
    pub fn plain(store: Store, sinks: Vec<SeriesSink>) -> Writer {
        Writer {
            store,
            sinks,
            lost_exceedances: 0,
            episodes: None,
            load: None,
            tap: None,
            explained: Vec::new(),
            runtime: RuntimeSeries::new(),
        }
    }

    /// Drains every ring once and commits finished intervals. Returns true
    /// when every recorder has finished and everything is committed.
    pub fn poll(&mut self) -> anyhow::Result<bool> {
        // Episodes may still come (named on their way) until every sender
        // has gone.
        let mut done = self.store_episodes()?;
        let mut intervals: Vec<(i64, Interval)> = Vec::new();
        let mut tapped: Vec<(i64, Tally, u64, u64, u64)> = Vec::new();
        let mut ended = Vec::new();
        for sink in &mut self.sinks {
            sink.drain_exceedances();
            while let Ok(msg) = sink.full_rx.pop() {
                sink.cumulative.merge(&msg.tally);
                self.lost_exceedances += msg.lost_exceedances;
                sink.shipped_until = msg.end_ns;
                let mut tally = msg.tally;
                if self.tap.is_some() {
                    tapped.push((sink.series_id, (*tally).clone(), msg.overruns, msg.lost_exceedances, msg.end_ns));
                }
                intervals.push((
                    sink.series_id,
                    Interval::new(msg.seq, msg.start_ns, msg.end_ns, &tally, msg.overruns, msg.lost_exceedances),
                ));
                tally.clear();
                let _ = sink.free_tx.push(tally);
                sink.adapt();
            }
            if !sink.finished && sink.full_rx.is_abandoned() && sink.full_rx.is_empty() {
                sink.drain_exceedances();
                sink.end_bootstrap();
                sink.finished = true;
                ended.push(sink.series_id);
            }
            done &= sink.finished;
        }
        if !intervals.is_empty() || done {
            let ivs: Vec<(i64, &Interval)> = intervals.iter().map(|(s, iv)| (*s, iv)).collect();
            let mut ready: Vec<(i64, Vec<Exceedance>)> = Vec::new();
            for s in &mut self.sinks {
                let until = if done { u64::MAX } else { s.shipped_until };
                let (now, later): (Vec<Exceedance>, Vec<Exceedance>) =
                    s.pending.drain(..).partition(|e| e.t_ns <= until);
                s.pending = later;
                if !now.is_empty() {
                    ready.push((s.series_id, now));
                }
            }
            let exc: Vec<(i64, &[Exceedance])> = ready.iter().map(|(id, list)| (*id, list.as_slice())).collect();
            let committed = self.store.commit_checkpoint(&ivs, &exc);
            if let Some(tap) = &self.tap {
                match &committed {
                    Ok(()) => {
                        for (sid, t, missed, lost, end) in &tapped {
                            tap.committed(*sid, t, *missed, *lost, *end);
                        }
                    }
                    Err(_) => tap.store_failed(),
                }
            }
            committed?;
        }
        if let Some(tap) = &self.tap {
            for sid in ended {
                tap.ended(sid);
            }
        }
        if done {
            // The reader sent its last episodes before finishing its series.
            self.store_episodes()?;
        }
        Ok(done)
    }

    /// Stores the episodes the reader kept or dropped since the last poll.
    /// Tells the tap of an explained sample of (probe, metric, cpu).
    fn count_class(&self, probe: &str, metric: &str, cpu: i64, kind: rtscope_model::episode::CauseKind) {
        let Some(tap) = &self.tap else { return };
        let sid = self.explained.iter().find(|((p, m, c), _)| p == probe && m == metric && *c == cpu).map(|x| x.1);
        if let Some(sid) = sid {
            tap.episode(sid, kind);
        }
    }

    /// Returns whether no more can come (every sender has gone).
    fn store_episodes(&mut self) -> anyhow::Result<bool> {
        let Some((run_id, rx)) = &self.episodes else { return Ok(true) };
        let mut keep: Vec<Episode> = Vec::new();
        let mut drop = Vec::new();
        let mut closed = false;
        loop {
            let msg = match rx.try_recv() {
                Ok(msg) => msg,
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    closed = true;
                    break;
                }
            };
            match msg {
                EpisodeMsg::Keep(mut e) => {
                    self.count_class(&e.probe, &e.metric, e.cpu, rtscope_model::episode::class_of(&e.causes));
                    e.load.clone_from(&self.load);
                    keep.push(*e)
                }
                EpisodeMsg::Class(probe, metric, cpu, kind) => self.count_class(&probe, &metric, cpu, kind),
                EpisodeMsg::Timeline(part) => self.store.add_timeline_part(*run_id, &part)?,
                EpisodeMsg::Runtime(b) => {
                    store_runtime((&mut self.store, &mut self.runtime, self.tap.as_ref()), *run_id, &self.load, *b)?
                }
                EpisodeMsg::Drop(probe, metric, cpu, sample) => {
                    let pending = keep
                        .iter()
                        .position(|e| e.cpu == cpu && e.sample == sample && e.probe == probe && e.metric == metric);
                    match pending {
                        Some(i) => {
                            keep.swap_remove(i);
                        }
                        None => drop.push((self.load.clone(), probe, metric, cpu, sample)),
                    }
                }
            }
        }
        if !keep.is_empty() || !drop.is_empty() {
            self.store.store_episodes(*run_id, &keep, &drop)?;
        }
        Ok(closed)
    }
}

pub mod own_timers {
    //! The timer interrupts rtscope itself causes on each CPU: its probes'
    //! timed wake-ups (one timer expiry each, the warm-up's too) and the timer
    //! of a kernel tracer beside them (timerlat's). The session subtracts them
    //! from a measured CPU's local timer interrupts to tell what else fired
    //! there (the tick, other programs' timers). Counted once per thread when
    //! it has measured, and by the tracer's reader: never on a measuring turn.

    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    /// CPUs counted (Debian's NR_CPUS); a CPU beyond counts nothing.
    const CPUS: usize = 8192;

    static OWN: [AtomicU64; CPUS] = [const { AtomicU64::new(0) }; CPUS];

    /// Counts `n` timer expiries of rtscope's on `cpu`.
    pub fn add(cpu: usize, n: u64) {
        if let Some(c) = OWN.get(cpu) {
            c.fetch_add(n, Relaxed);
        }
    }

    /// The timer expiries of rtscope's on `cpu` so far.
    pub fn own_on(cpu: usize) -> u64 {
        OWN.get(cpu).map_or(0, |c| c.load(Relaxed))
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn counts_per_cpu_and_ignores_cpus_beyond() {
            super::add(8191, 3);
            super::add(8191, 2);
            super::add(9000, 7);
            assert_eq!(super::own_on(8191), 5);
            assert_eq!(super::own_on(9000), 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer_with(mode: ExceedMode) -> (tempfile::TempDir, Writer, Recorder, i64) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        let header = crate::session::new_header("wakeup", vec![], true, vec![]);
        let run = store.create_run(&header, &Default::default(), &serde_json::Value::Null).unwrap();
        let key = SeriesKey::new("wakeup", "latency", 0);
        let sid = store.add_series(run, &key, "ns", "x").unwrap();
        let (rec, sink, _live) = channel(sid, 1_000, mode);
        (dir, Writer::plain(store, vec![sink]), rec, run)
    }

    /// A signal within the warm-up: the series is stored, empty, and the
    /// run stays valid (its interval does not end before it starts).
    #[test]
    fn stopped_within_the_warmup_stores_an_empty_series() {
        let (_dir, mut w, mut rec, run) = writer_with(ExceedMode::Fixed(5_000));
        rec.start_after_warmup(1_000_000);
        rec.record(400_000, 7_000);
        rec.finish(500_000);
        while !w.poll().unwrap() {}
        let loaded = w.store.load_run(run).unwrap();
        let s = &loaded.series[0];
        assert_eq!(s.total().stats.count, 0);
        assert!(s.exceedances.is_empty());
        assert!(s.intervals.iter().all(|i| i.start_ns <= i.end_ns), "{:?}", s.intervals);
    }

    #[test]
    fn intervals_and_fixed_exceedances_reach_the_store() {
        let (_dir, mut w, mut rec, run) = writer_with(ExceedMode::Fixed(5_000));
        rec.start(0);
        let mut t = 0;
        for round in 0..3u64 {
            for v in 0..100u64 {
                t += 10;
                rec.record(t, 1_000 + v * 50 + round);
                rec.maybe_checkpoint(t);
            }
            w.poll().unwrap();
        }
        rec.overrun(2);
        rec.finish(t + 1);
        while !w.poll().unwrap() {}
        let loaded = w.store.load_run(run).unwrap();
        let s = &loaded.series[0];
        assert_eq!(s.total().stats.count, 300);
        assert!(s.intervals.len() >= 3, "{}", s.intervals.len());
        assert_eq!(s.overruns(), 2);
        // values above 5000: v*50 > 4000 - round, v in 81..100 (+ 80 when round > 0)
        assert_eq!(s.exceedances.len(), 19 + 20 + 20);
        assert!(s.exceedances.iter().all(|e| e.value_ns > 5_000));
    }

    #[test]
    fn signed_samples_reach_the_store_negative() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("t.db")).unwrap();
        let header = crate::session::new_header("sleep", vec![], true, vec![]);
        let run = store.create_run(&header, &Default::default(), &serde_json::Value::Null).unwrap();
        let key = SeriesKey::new("sleep", "nanosleep@1ms", 0);
        let sid = store.add_series(run, &key, "ns", "x").unwrap();
        let (mut rec, sink, _live) = channel_with(sid, 1_000, ExceedMode::Fixed(50_000), true);
        let mut w = Writer::plain(store, vec![sink]);
        rec.start(0);
        for i in 0..1_000i64 {
            rec.record_signed(i as u64 * 10, i * 100 - 20_000);
            rec.maybe_checkpoint(i as u64 * 10);
        }
        rec.finish(10_001);
        while !w.poll().unwrap() {}
        assert_eq!(w.sinks[0].total().count(), 1_000);
        let s = &w.store.load_run(run).unwrap().series[0];
        let r = s.result();
        assert_eq!(r.summary.count, 1_000);
        assert_eq!(r.summary.min_ns, -20_000);
        assert_eq!(r.summary.max_ns, 79_900);
        assert_eq!(s.total().neg.as_ref().unwrap().stats.count, 200);
        assert!(s.intervals.len() >= 3);
        // Only the high tail is kept raw: 50_100 ..= 79_900.
        assert_eq!(s.exceedances.len(), 299);
    }

    #[test]
    fn adaptive_threshold_keeps_about_a_thousandth() {
        let (_dir, mut w, mut rec, run) = writer_with(ExceedMode::Adaptive);
        rec.start(0);
        for i in 0..20_000u64 {
            rec.record(i, 1_000 + (i * 7919) % 10_000);
            rec.maybe_checkpoint(i * 10);
            if i % 500 == 0 {
                w.poll().unwrap();
            }
        }
        rec.finish(200_001);
        while !w.poll().unwrap() {}
        let s = &w.store.load_run(run).unwrap().series[0];
        assert_eq!(s.total().stats.count, 20_000);
        let n = s.exceedances.len();
        assert!((5..=60).contains(&n), "{n} exceedances");
        assert!(s.exceedances.iter().all(|e| e.value_ns >= 10_000), "{:?}", &s.exceedances[..3]);
    }
}
