//! Probes, one file each behind [`Probe`], and the one way to measure
//! them: a [`Session`](crate::session::Session) opens the store and the
//! machine's settings, becomes an [`OpenRun`], and each [`Cell`] (one
//! probe, under one load in an assessment) owns pinning, priority, start,
//! duration, stop and recording into it. A single probe's run (one cell,
//! then the summary) is `commands::probes::run_probe`. Only
//! [`Probe::measure`] runs on the real-time thread.

mod beside;
pub mod hwlat;
pub mod netlat;
pub mod noise;
pub mod ptimer;
pub mod sleep;
pub mod task;
mod threads;
mod traced;
pub mod wakeup;

use crate::progress::{self, CellProgress, Status};
use crate::recorder::{self, ExceedMode, Live, Mirror, Recorder, Sample, Tap, Writer};
use crate::session::{CellOutcome, OpenRun};
use crate::sys::mem::{STACK_PREFAULT, STACK_SIZE};
use crate::sys::tracemark::Marker;
use crate::sys::{clock, cpu, mem, sched, sched::Policy, signals};
use crate::trace::decompose::WakePath;
use crate::trace::instance::Instance;
use crate::trace::reader::ReaderReport;
use crate::trace::{CodeReport, TraceOpts};
use anyhow::{Result, anyhow};
use beside::Side;
pub use beside::{Beside, KernelTracerMode, RouteCtx};
use rtscope_model::analysis::usage::Usage;
use rtscope_model::descriptor::{Descriptor, Trace};
use rtscope_model::episode::Stages;
use rtscope_model::hist::Tally;
use rtscope_model::inventory::Warning;
use rtscope_model::run::SeriesKey;
use rtscope_model::units;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::Duration;
use threads::*;
use traced::{TraceThreads, code_parts, start_trace};

/// The writer's stack: SQLite's recursion stays far below this.
const WRITER_STACK: usize = 1024 * 1024;
/// Measuring threads start together this long after they are created.
const START_DELAY_NS: u64 = 100_000_000;

/// A measurement that runs one real-time thread per selected CPU.
pub trait Probe: Sync {
    /// Its row in the descriptor table (`rtscope_model::descriptor`): its
    /// name, what its values are, what `--trace` makes of them.
    fn descriptor(&self) -> &'static Descriptor;
    /// The probe's name, as in the CLI and the store.
    fn name(&self) -> &'static str {
        self.descriptor().name
    }
    /// The metrics each thread records, one series per metric and CPU.
    fn metrics(&self) -> &'static [&'static str];
    /// The probe's own settings, stored with the run.
    fn plan(&self) -> serde_json::Value;
    /// A line for the summary header, e.g. "interval 1ms".
    fn describe(&self) -> String;
    /// Starts what must run beside the measuring threads (background
    /// spinners, a second process); stopped when the returned value drops.
    fn start_helpers(&self, _cpus: &[usize], _policy: Policy, _priority: u8) -> Result<Box<dyn Send>> {
        Ok(Box::new(()))
    }
    /// Whether `--trace` can explain this probe's samples: `Some(true)` when
    /// a sample is a timer wake-up (split into stages), `Some(false)` when
    /// it is only a window of lost time to attribute, `None` when not yet.
    /// Its row's, unless its settings change it.
    fn trace_stages(&self) -> Option<bool> {
        match self.descriptor().trace {
            Trace::No => None,
            Trace::Windows => Some(false),
            Trace::Stages(_) => Some(true),
        }
    }
    /// With `trace_stages() == Some(true)`: which path the wake-up takes
    /// (a timer's, or a received datagram's NET_RX softirq).
    fn wake_path(&self) -> WakePath {
        self.descriptor().wake_path()
    }
    /// The measuring loop, on a pinned real-time thread: no allocation,
    /// lock, formatting or I/O. Records one sample per `rec` per turn until
    /// `ctx.done` says stop.
    fn measure(&self, ctx: &ThreadCtx, rec: &mut [Recorder]);
    /// Whether the metrics' values are signed (a deviation that may be
    /// negative): then `measure` records with `Recorder::record_signed`.
    fn signed(&self) -> bool {
        self.descriptor().signed
    }
    /// How many per-thread figures `measure` reports with
    /// [`ThreadCtx::set_extra`] (e.g. a calibration, an active time).
    fn extra_slots(&self) -> usize {
        0
    }
    /// The probe's own fields of the result row of metric `metric` (an
    /// index into `metrics()`), from its thread's extra slots and the
    /// series' whole-run tally; stored with the series when measuring ends.
    fn row_extras(&self, _metric: usize, _slots: &[u64], _total: &Tally) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }
    /// Why the thread on `cpu` failed although it ran (e.g. nothing arrived
    /// to measure, a helper gave up), from its extra slots and its series'
    /// whole-run tallies (in `metrics()` order): the cell fails with it.
    fn thread_error(&self, _cpu: usize, _slots: &[u64], _totals: &[&Tally]) -> Option<String> {
        None
    }
    /// Notes on one thread's measuring from its extra slots (e.g. calls
    /// that failed), for the run's notes; each is prefixed with the CPU.
    fn notes(&self, _slots: &[u64]) -> Vec<String> {
        Vec::new()
    }
    /// What the probe's settings degrade or leave unusual (a fallback for a
    /// missing kernel feature, a setting that can disturb the machine):
    /// stored with the run's warnings, as the cell's others.
    fn warnings(&self) -> Vec<Warning> {
        Vec::new()
    }
    /// How long after the common start the `index`-th of `threads`
    /// measuring threads begins its first period (0: all at once).
    fn first_offset(&self, _index: usize, _threads: usize) -> u64 {
        0
    }
    /// A kernel tracer to run beside the measuring threads (timerlat beside
    /// `wakeup`, osnoise's tracepoints beside `noise`), whose records become
    /// series of the run; None: none.
    fn beside(&self, _common: &Common) -> Option<Beside> {
        None
    }
    /// Its [`Probe::beside`] tracer started in the tracefs at `root`, before
    /// the measuring threads start (which may open its files); an error
    /// says why the probe cannot use it (the tracer is stopped again).
    fn tracer_started(&self, _common: &Common, _root: &std::path::Path) -> Result<(), String> {
        Ok(())
    }
}

/// Settings every probe shares, already validated.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Common {
    pub cpus: Vec<usize>,
    pub policy: Policy,
    pub priority: u8,
    pub duration_ns: Option<u64>,
    pub loops: Option<u64>,
    pub checkpoint_ns: u64,
    #[serde(skip)]
    pub exceed: ExceedMode,
    pub threshold_ns: Option<u64>,
    pub db: PathBuf,
    pub json: Option<PathBuf>,
    pub quiet: bool,
    pub dma_latency: bool,
    /// The subcommand that made the run (`wakeup`, `run`).
    pub kind: String,
    /// `--trace`: stages and cause episodes.
    pub trace: Option<TraceOpts>,
    pub tracemark: bool,
    /// Samples before this much time from the start are a warm-up, not
    /// recorded (an assessment's cells; 0 for a single probe).
    pub warmup_ns: u64,
    /// One of several instances of the probe in a run, at its own priority
    /// (`wakeup@80`): its series are stored under this name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// A probe command's `--instances`: the priorities of its instances,
    /// measured one after the other into one run (empty: one, at `priority`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<u8>,
    /// `--usage`: what a day and a week of the run's return levels are,
    /// stored as the plan's `usage`.
    #[serde(skip)]
    pub usage: Usage,
}

impl Common {
    /// The name the probe's series are stored under: its instance's
    /// (`wakeup@80`), else the probe's.
    pub fn series_name<'a>(&'a self, probe: &'a dyn Probe) -> &'a str {
        self.instance.as_deref().unwrap_or(probe.name())
    }

    /// These settings for the instance of `probe` at SCHED_FIFO `priority`.
    pub fn at(&self, probe: &dyn Probe, priority: u8) -> Common {
        Common {
            policy: Policy::Fifo,
            priority,
            instance: Some(format!("{}@{priority}", probe.name())),
            instances: Vec::new(),
            ..self.clone()
        }
    }
}

/// A cell's settings as the run stores them (its plan, or one of its
/// `cells`), with the scheduling it got on this machine.
pub fn cell_plan(probe: &dyn Probe, common: &Common, (policy, priority): (Policy, u8)) -> serde_json::Value {
    serde_json::json!({
        "probe": common.series_name(probe),
        "metrics": probe.metrics(),
        "common": common,
        "exceed": common.exceed.describe(),
        "effective_policy": policy,
        "effective_priority": priority,
        "settings": probe.plan(),
        "describe": probe.describe(),
    })
}

/// Samples in flight from a measuring thread to the trace reader: 65 s at
/// 1 kHz, 3 s at a 50 us interval; a full ring drops the copy and counts it.
const MIRROR_RING: usize = 1 << 16;

fn trace_warning(message: String, fix: &str) -> Warning {
    Warning { topic: "trace".into(), message, fix: fix.into() }
}

/// What a measuring thread knows about its run.
pub struct ThreadCtx<'a> {
    /// Index of this thread among the probe's threads.
    pub index: usize,
    pub cpu: usize,
    /// CLOCK_MONOTONIC instant at which every thread starts.
    pub start_ns: u64,
    /// CLOCK_MONOTONIC instant at which recording starts: the end of the
    /// warm-up (`start_ns` without one). Samples taken before it are
    /// dropped by the recorders; a probe's own counters (active time,
    /// missed periods) must leave that part out too.
    pub record_from_ns: u64,
    end_ns: u64,
    loops: u64,
    limit_ns: u64,
    stop: &'a AtomicBool,
    breach: &'a Breach,
    extras: &'a [AtomicU64],
    expiry: &'a AtomicU64,
    /// Why the thread could not measure (see [`ThreadCtx::fail`]).
    failure: std::cell::RefCell<Option<String>>,
}

impl ThreadCtx<'_> {
    /// Reports per-thread figure `slot` (< `Probe::extra_slots`).
    #[inline]
    pub fn set_extra(&self, slot: usize, value: u64) {
        self.extras[slot].store(value, Relaxed);
    }

    /// Per-thread figure `slot`, as last set.
    #[inline]
    pub fn extra(&self, slot: usize) -> u64 {
        self.extras[slot].load(Relaxed)
    }

    /// The last expiry (CLOCK_MONOTONIC) of the timer of the kernel tracer
    /// beside the probe on this thread's CPU, as the kernel timestamped it
    /// (timerlat's: its IRQ record's time less its latency); 0 until its
    /// reader has seen one.
    #[inline(always)]
    pub fn tracer_expiry(&self) -> u64 {
        self.expiry.load(Relaxed)
    }

    /// CLOCK_MONOTONIC instant at which `--duration` ends (u64::MAX: none).
    pub fn end_ns(&self) -> u64 {
        self.end_ns
    }

    /// Whether a sample taken at `now` is recorded (past the warm-up).
    #[inline(always)]
    pub fn recording(&self, now: u64) -> bool {
        now >= self.record_from_ns
    }

    /// Ends the run with an error: the thread could not set up (a timer, a
    /// setting) or its calls keep failing. `message` names the flag or API
    /// and what failed; the run ends `failed` with it, every thread stops.
    /// Formats and allocates: only before or instead of measuring.
    #[cold]
    pub fn fail(&self, message: String) {
        self.stop.store(true, Relaxed);
        let mut f = self.failure.borrow_mut();
        if f.is_none() {
            *f = Some(message);
        }
    }

    /// Whether a stop was requested (a signal, a breach elsewhere).
    #[inline(always)]
    pub fn stopping(&self) -> bool {
        self.stop.load(Relaxed)
    }

    /// Whether to stop after a sample at `now` (the `count`-th).
    #[inline(always)]
    pub fn done(&self, now: u64, count: u64) -> bool {
        now >= self.end_ns || count >= self.loops || self.stop.load(Relaxed)
    }

    /// Checks `value` against `--threshold`; on a breach records it and
    /// stops every thread. Returns true on a breach.
    #[inline(always)]
    pub fn breached(&self, now: u64, value: u64) -> bool {
        if value <= self.limit_ns {
            return false;
        }
        if !self.breach.hit.swap(true, Relaxed) {
            self.breach.cpu.store(self.cpu as u64, Relaxed);
            self.breach.value_ns.store(value, Relaxed);
            self.breach.t_ns.store(now, Relaxed);
        }
        self.stop.store(true, Relaxed);
        true
    }
}

/// The first sample above `--threshold`.
#[derive(Default)]
pub struct Breach {
    hit: AtomicBool,
    cpu: AtomicU64,
    value_ns: AtomicU64,
    t_ns: AtomicU64,
}

impl Breach {
    /// The cell's breach line, when a sample went above `--threshold`
    /// (`threshold_ns`).
    fn describe(&self, threshold_ns: Option<u64>) -> Option<String> {
        self.hit.load(Relaxed).then(|| {
            format!(
                "stopped at --threshold {}us: CPU {} measured {}us at CLOCK_MONOTONIC {} ns",
                units::us(threshold_ns.unwrap_or(0)),
                self.cpu.load(Relaxed),
                units::us(self.value_ns.load(Relaxed)),
                self.t_ns.load(Relaxed)
            )
        })
    }
}

/// One probe measured on its CPUs (under one load, in an assessment):
/// what it needs beside its threads, set up before it starts.
pub struct Cell<'a> {
    probe: &'a dyn Probe,
    common: &'a Common,
    policy: Policy,
    priority: u8,
    load: Option<String>,
    instance: Option<Instance>,
    markers: Vec<Marker>,
    helpers: Box<dyn Send>,
    tap: Option<Arc<dyn Tap>>,
    /// The kernel tracer beside the probe, or why not.
    side: Option<Side>,
}

/// `--trace` on a probe that cannot be traced yet is refused.
pub fn check_trace(probe: &dyn Probe, common: &Common) -> Result<()> {
    if common.trace.is_some() && probe.trace_stages().is_none() {
        return Err(anyhow!("--trace is not supported by `{}` yet; run without --trace", probe.name()));
    }
    Ok(())
}

impl<'a> Cell<'a> {
    /// Sets up the trace instance, the trace markers and the probe's
    /// helpers (last, so that a failure leaves nothing running). What
    /// degrades is added to `warnings`.
    pub fn prepare(
        probe: &'a dyn Probe,
        common: &'a Common,
        (policy, priority): (Policy, u8),
        load: Option<String>,
        warnings: &mut Vec<Warning>,
    ) -> Result<Cell<'a>> {
        check_trace(probe, common)?;
        warnings.extend(probe.warnings());
        let mut instance = None;
        if let Some(opts) = &common.trace {
            match Instance::create(&common.cpus, opts.buffer_kb, opts.clock.as_str()) {
                Ok((inst, w)) => {
                    warnings.extend(w);
                    instance = Some(inst);
                }
                Err(e) => warnings.push(trace_warning(
                    format!("--trace: {e}; measuring without the stage split and cause episodes"),
                    "run as root on a kernel with tracefs (CONFIG_FTRACE), or drop --trace",
                )),
            }
        }
        let mut markers: Vec<Marker> = Vec::new();
        if common.tracemark {
            let metric = probe.metrics()[0];
            for &c in &common.cpus {
                match Marker::open(common.series_name(probe), metric, c) {
                    Ok(m) => markers.push(m),
                    Err(e) => {
                        warnings.push(trace_warning(
                            format!("--tracemark: {e}; no markers written"),
                            "start the tracer first (e.g. trace-cmd record), as root",
                        ));
                        markers.clear();
                        break;
                    }
                }
            }
        }
        let side = Side::prepare(probe, common)?;
        let helpers = probe.start_helpers(&common.cpus, policy, priority)?;
        Ok(Cell { probe, common, policy, priority, load, instance, markers, helpers, tap: None, side })
    }

    /// Tells `tap` of every series and committed interval (a monitor).
    pub fn set_tap(&mut self, tap: Arc<dyn Tap>) {
        self.tap = Some(tap);
    }

    /// The cell's settings, for the run's plan.
    pub fn plan(&self) -> serde_json::Value {
        let mut plan = cell_plan(self.probe, self.common, (self.policy, self.priority));
        plan["trace"] = serde_json::json!(self.instance.as_ref().map(|i| serde_json::json!({
            "instance": i.name,
            "options": self.common.trace,
            "events": i.enabled,
            "missing": i.missing,
            "record_cmd": i.record_cmd.describe(),
        })));
        if let Some(side) = &self.side {
            plan["kernel_tracer"] = side.plan();
        }
        plan
    }

    /// Measures the cell into `run`, its series keyed by the cell's load:
    /// warm-up (`common.warmup_ns`), then `common.duration_ns` or until a
    /// signal, a breach or `--loops`. Stops the helpers and the tracer.
    pub fn measure(self, run: &mut OpenRun, signal: &Arc<AtomicBool>) -> Result<CellOutcome> {
        let Cell { probe, common, policy, priority, load, mut instance, markers, helpers, tap, side } = self;
        let run_id = run.run_id;
        let side_metrics = side.as_ref().map_or(&[][..], Side::metrics);
        // A previous cell's helpers mapped memory locked on touch: this
        // cell's histograms and rings are read in whole again.
        let relocked_before = mem::lock_populated();
        let Series { recorders, sinks, lives, mirror_lost, lane_parts, explained, side_recs } = Series::create(
            run.store()?,
            run_id,
            (probe, common, side_metrics),
            &load,
            instance.as_ref(),
            markers,
            tap.as_ref(),
        )?;
        let (episode_tx, episode_rx) = std::sync::mpsc::channel();
        let shared = Shared::new(common.cpus.len(), probe.extra_slots());
        for (i, p) in shared.phases.iter().enumerate() {
            p.store(probe.first_offset(i, common.cpus.len()), Relaxed);
        }
        let writer = Writer {
            store: run.take_store()?,
            sinks,
            lost_exceedances: 0,
            episodes: instance.is_some().then_some((run_id, episode_rx)),
            load: load.clone(),
            tap,
            explained,

            runtime: Default::default(),
        };
        let mut out = CellOutcome::default();
        if let Err(e) = relocked_before {
            out.notes.push(format!(
                "mlockall failed before the cell ({e}): its new mappings are locked only as they are touched, so \
                 page faults may add latency"
            ));
        }
        let mut code = CodeReport::default();
        let mut side_run = None;
        let mut side_align = None;
        match side {
            Some(Side::Running(run)) => {
                side_align = run.0.align;
                side_run = Some(*run);
            }
            Some(Side::Refused(t, why)) => out.notes.push(format!("{}: not used: {why}", t.name())),
            None => {}
        }
        let mut side_end = None;
        let ended = std::thread::scope(|scope| -> Result<Ended> {
            let writer_thread = spawn_writer(scope, writer)?;
            let threads = spawn_measuring(scope, (probe, common, policy, priority), recorders, &shared, &mut out);
            while shared.ready.load(Acquire) < threads.len() && !shared.stop.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
            }
            // The measuring threads touch nothing new from here on; the
            // helpers started next map files (the symbols thread's ELF
            // files) that are then only read in where they are read.
            mem::lock_future_on_touch();
            let parts = code_parts(instance.as_mut(), (probe, common), &shared, &mut code);
            // The start comes after the trace's threads are set up (the
            // symbols thread's can take over START_DELAY_NS), or the first
            // instants would lie in the past.
            let (traced, start_ns) = match (instance.as_mut(), common.trace) {
                (Some(inst), Some(opts)) => start_trace(
                    scope,
                    (probe, common),
                    (inst, opts),
                    (lane_parts, parts),
                    &episode_tx,
                    &shared,
                    &mut out,
                ),
                _ => (TraceThreads::default(), clock::now() + START_DELAY_NS),
            };
            drop(episode_tx);
            let side_thread = side_run.take().and_then(|run| {
                let from = (&shared.tids[..], start_ns + common.warmup_ns);
                beside::spawn(scope, run, (side_recs, &shared.expiry), from, &shared.reader_done, &mut out.notes)
            });
            if let (Some(align), Some(_)) = (side_align, &side_thread) {
                beside::align(align, start_ns, &shared.expiry, &shared.phases, &mut out.notes);
            }
            shared.start_at.store(start_ns, Release);
            follow((probe, common, &load), &lives, start_ns, (&threads, &writer_thread), signal, &shared.stop);
            join_all(
                threads,
                (traced, side_thread, &mut side_end),
                writer_thread,
                &shared.reader_done,
                &mut out,
                &mut code,
            )
        });
        if let Some(end) = side_end {
            beside::finish(end, &mut out.notes);
        }
        drop(helpers);
        // The helpers are gone: memory is read in whole again for what
        // runs next (a cell with its own runner, such as osbench's).
        let relocked = mem::lock_populated();
        let ((mut writer, store_error), report) = ended?;
        if let Err(e) = relocked {
            out.notes.push(format!(
                "mlockall failed after the cell ({e}): later cells' new mappings are locked only as they are \
                 touched, so page faults may add latency"
            ));
        }
        let values: Vec<u64> = shared.extras.iter().map(|v| v.load(Relaxed)).collect();
        let name = common.series_name(probe);
        per_thread_results((probe, common), &values, store_error.is_none(), &mut writer, (name, &load), &mut out)?;
        let mut timeline = None;
        if let (Some(inst), Some(mut report), Some(opts)) = (instance.take(), report, common.trace) {
            let windows = probe.trace_stages() == Some(false);
            timeline = report.timeline.take();
            let masked = crate::trace::irqtime::irqs_off_note_once(&inst.root);
            let (summary, trace_notes) = crate::trace::summarize(inst, report, &opts, &mirror_lost, windows, code);
            out.notes.extend(trace_notes);
            out.notes.extend(masked);
            out.trace = Some(summary);
        }
        out.breach = shared.breach.describe(common.threshold_ns);
        out.lost_exceedances = writer.lost_exceedances;
        out.store_error = store_error;
        run.put_store(writer.store);
        run.store_timeline(timeline, &mut out.notes);
        Ok(out)
    }
}

/// What the writer thread gives back: the writer (its store, its sinks'
/// totals) and the store's error that stopped it.
type WriterEnd = (Writer, Option<anyhow::Error>);
/// The cell's threads joined: the writer's end and the trace reader's report.
type Ended = (WriterEnd, Option<ReaderReport>);
/// A measuring thread: it ends with the error that stopped it, if any.
type Measuring<'scope> = ScopedJoinHandle<'scope, std::result::Result<(), String>>;
/// The kernel tracer's reader.
type SideThread<'scope> = ScopedJoinHandle<'scope, beside::SideEnd>;

/// A measuring thread's context for the probes' unit tests, which call
/// `measure` directly on the test's thread.
#[cfg(test)]
pub(crate) struct TestThread {
    stop: AtomicBool,
    breach: Breach,
    extras: Vec<AtomicU64>,
    expiry: AtomicU64,
}

#[cfg(test)]
impl TestThread {
    pub fn new(slots: usize) -> TestThread {
        TestThread {
            stop: AtomicBool::new(false),
            breach: Breach::default(),
            extras: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            expiry: AtomicU64::new(0),
        }
    }

    /// Starts at `start_ns`, records from `record_from_ns`, ends at `end_ns`.
    pub fn ctx(&self, start_ns: u64, record_from_ns: u64, end_ns: u64) -> ThreadCtx<'_> {
        ThreadCtx {
            index: 0,
            cpu: 0,
            start_ns,
            record_from_ns,
            end_ns,
            loops: u64::MAX,
            limit_ns: u64::MAX,
            stop: &self.stop,
            breach: &self.breach,
            extras: &self.extras,
            expiry: &self.expiry,
            failure: Default::default(),
        }
    }

    pub fn extras(&self) -> Vec<u64> {
        self.extras.iter().map(|v| v.load(Relaxed)).collect()
    }

    /// A recorder of a series nobody reads, warm-up until `from_ns`.
    pub fn recorder(signed: bool, from_ns: u64) -> Recorder {
        let (mut rec, _sink, _live) = recorder::channel_with(0, u64::MAX / 4, ExceedMode::Fixed(u64::MAX), signed);
        rec.start_after_warmup(from_ns);
        rec
    }
}
