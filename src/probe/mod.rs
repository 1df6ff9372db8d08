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
            let (summary, trace_notes) = crate::trace::summarize(inst, report, &opts, &mirror_lost, windows, code);
            out.notes.extend(trace_notes);
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

/// What the cell's threads and the main thread share, made before any
/// thread starts: the start line (see [`StartLine`]), each measuring
/// thread's id (the trace follows it) and figures (`Probe::extra_slots`
/// each), and the word that tells the trace reader to finish.
struct Shared {
    stop: AtomicBool,
    breach: Breach,
    ready: AtomicUsize,
    start_at: AtomicU64,
    tids: Vec<AtomicI32>,
    /// Per thread: how long after the common start its first period
    /// begins ([`Probe::first_offset`]; beside a kernel tracer whose
    /// wake-ups it keeps away from, [`Beside::align`]'s).
    phases: Vec<AtomicU64>,
    extras: Vec<AtomicU64>,
    /// Per thread's CPU: the kernel tracer's last timer expiry there
    /// ([`ThreadCtx::tracer_expiry`]).
    expiry: Vec<AtomicU64>,
    reader_done: AtomicBool,
}

impl Shared {
    fn new(threads: usize, slots: usize) -> Shared {
        Shared {
            stop: AtomicBool::new(false),
            breach: Breach::default(),
            ready: AtomicUsize::new(0),
            start_at: AtomicU64::new(0),
            tids: (0..threads).map(|_| AtomicI32::new(0)).collect(),
            phases: (0..threads).map(|_| AtomicU64::new(0)).collect(),
            extras: (0..slots * threads).map(|_| AtomicU64::new(0)).collect(),
            expiry: (0..threads).map(|_| AtomicU64::new(0)).collect(),
            reader_done: AtomicBool::new(false),
        }
    }
}

/// The writer thread: hands the recorders' intervals (and the trace's
/// episodes) to the store every 50 ms until every recorder has finished,
/// or the store fails.
fn spawn_writer<'scope>(
    scope: &'scope Scope<'scope, '_>,
    writer: Writer,
) -> std::io::Result<ScopedJoinHandle<'scope, WriterEnd>> {
    std::thread::Builder::new().name("rtscope-writer".into()).stack_size(WRITER_STACK).spawn_scoped(scope, || {
        let mut writer = writer;
        signals::block_in_this_thread();
        loop {
            match writer.poll() {
                Ok(true) => return (writer, None),
                Ok(false) => std::thread::sleep(Duration::from_millis(50)),
                Err(e) => return (writer, Some(e)),
            }
        }
    })
}

/// One measuring thread per CPU, each with its recorders; a thread that
/// cannot be spawned is an error of the cell and stops the others before
/// they start.
fn spawn_measuring<'scope>(
    scope: &'scope Scope<'scope, '_>,
    (probe, common, policy, priority): (&'scope dyn Probe, &'scope Common, Policy, u8),
    recorders: Vec<Vec<Recorder>>,
    shared: &'scope Shared,
    out: &mut CellOutcome,
) -> Vec<Measuring<'scope>> {
    let slots = probe.extra_slots();
    let mut threads = Vec::new();
    for (index, (recs, &c)) in recorders.into_iter().zip(&common.cpus).enumerate() {
        let plan = ThreadPlan {
            probe,
            common,
            policy,
            priority,
            index,
            cpu: c,
            tid: &shared.tids[index],
            phase: &shared.phases[index],
            expiry: &shared.expiry[index],
            extras: &shared.extras[index * slots..(index + 1) * slots],
            line: StartLine {
                stop: &shared.stop,
                breach: &shared.breach,
                ready: &shared.ready,
                start_at: &shared.start_at,
            },
        };
        let spawned = std::thread::Builder::new()
            .name(format!("rtscope-{}{c}", probe.name()))
            .stack_size(STACK_SIZE)
            .spawn_scoped(scope, move || measuring_thread(plan, recs));
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                out.errors.push(format!("CPU {c}: cannot start the measuring thread: {e}"));
                shared.stop.store(true, Relaxed);
                break;
            }
        }
    }
    threads
}

/// The main thread while the measuring threads run: stops them on a
/// signal or when the writer has ended (the store failed), and shows the
/// progress line: elapsed, remaining and the running worst case.
fn follow(
    (probe, common, load): (&dyn Probe, &Common, &Option<String>),
    lives: &[(usize, Arc<Live>)],
    start_ns: u64,
    (threads, writer): (&[Measuring<'_>], &ScopedJoinHandle<'_, WriterEnd>),
    signal: &AtomicBool,
    stop: &AtomicBool,
) {
    let name = common.series_name(probe);
    let warmup = common.warmup_ns;
    let label = match load {
        Some(l) => format!("{name} under {l}"),
        None => name.to_string(),
    };
    let mut status = Status::new(!common.quiet, progress::stderr_is_tty(), common.duration_ns);
    while threads.iter().any(|t| !t.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
        if signal.load(Relaxed) || writer.is_finished() {
            stop.store(true, Relaxed);
        }
        let now = clock::now();
        if status.due(now.saturating_sub(start_ns)) && !stop.load(Relaxed) {
            let worst = lives.iter().map(|(c, live)| (live.max.load(Relaxed), *c)).filter(|&(max, _)| max > 0).max();
            let line = CellProgress {
                label: &label,
                metric: probe.metrics()[0],
                elapsed_ns: now.saturating_sub(start_ns + warmup),
                warmup_left_ns: (start_ns + warmup).saturating_sub(now),
                planned_ns: common.duration_ns,
                loops: common.loops,
                samples: lives.iter().map(|(_, live)| live.count.load(Relaxed)).sum(),
                worst,
            }
            .line();
            status.show(now.saturating_sub(start_ns), &line);
        }
    }
    status.clear();
}

/// Joins the measuring threads, then tells the trace reader to finish and
/// joins it, the symbols thread (its report into `code`) and the writer.
fn join_all<'scope>(
    threads: Vec<Measuring<'scope>>,
    (traced, side, side_end): (TraceThreads<'scope>, Option<SideThread<'scope>>, &mut Option<beside::SideEnd>),
    writer: ScopedJoinHandle<'scope, WriterEnd>,
    reader_done: &AtomicBool,
    out: &mut CellOutcome,
    code: &mut CodeReport,
) -> Result<Ended> {
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => out.errors.push(e),
            Err(_) => out.errors.push("a measuring thread panicked".into()),
        }
    }
    reader_done.store(true, Release);
    match side.map(|t| t.join()) {
        Some(Ok(end)) => *side_end = Some(end),
        Some(Err(_)) => out.errors.push("the kernel tracer's reader thread panicked".into()),
        None => {}
    }
    let report = match traced.reader.map(|t| t.join()) {
        Some(Ok(r)) => Some(r),
        Some(Err(_)) => {
            out.errors.push("the trace reader thread panicked".into());
            None
        }
        None => None,
    };
    if let Some(t) = traced.symbols {
        match t.join() {
            Ok(r) => code.symbols = r,
            Err(_) => out.errors.push("the symbols thread panicked".into()),
        }
    }
    let writer = writer.join().map_err(|_| anyhow!("the writer thread panicked"))?;
    Ok((writer, report))
}

/// After the threads: each thread's error from its figures and totals,
/// the extra columns of the probe's own series (not where the store
/// failed) and the probe's notes per CPU. `values`: every thread's
/// figures (`Probe::extra_slots` each).
fn per_thread_results(
    (probe, common): (&dyn Probe, &Common),
    values: &[u64],
    store_ok: bool,
    writer: &mut Writer,
    (name, load): (&str, &Option<String>),
    out: &mut CellOutcome,
) -> Result<()> {
    let metrics = probe.metrics().len();
    let slots = probe.extra_slots();
    for (index, &c) in common.cpus.iter().enumerate() {
        let totals: Vec<&Tally> = writer.sinks.iter().skip(index * metrics).take(metrics).map(|s| s.total()).collect();
        if let Some(e) = probe.thread_error(c, &values[index * slots..(index + 1) * slots], &totals) {
            out.errors.push(format!("CPU {c}: {e}"));
        }
    }
    if store_ok {
        let Writer { store, sinks, .. } = writer;
        // The probe's own series come first; the trace's stage series after.
        for (i, sink) in sinks.iter().enumerate().take(common.cpus.len() * metrics) {
            let thread = &values[i / metrics * slots..(i / metrics + 1) * slots];
            let row = probe.row_extras(i % metrics, thread, sink.total());
            if !row.is_empty() {
                store.set_series_extra(sink.series_id, &row)?;
            }
        }
    }
    let under = load.as_ref().map(|l| format!(" under {l}")).unwrap_or_default();
    for (i, &c) in common.cpus.iter().enumerate() {
        for n in probe.notes(&values[i * slots..(i + 1) * slots]) {
            out.notes.push(format!("{name} CPU {c}{under}: {n}"));
        }
    }
    Ok(())
}

/// A cell's series, created in the store before any thread starts: per
/// CPU the probe's recorders (their sinks for the writer, their live
/// figures for the progress line) and, with `--trace`, the ring that
/// mirrors each sample to the reader with the stage series it records.
struct Series {
    recorders: Vec<Vec<Recorder>>,
    sinks: Vec<recorder::SeriesSink>,
    lives: Vec<(usize, Arc<Live>)>,
    mirror_lost: Vec<Arc<AtomicU64>>,
    /// Per traced CPU: the CPU, its trace buffer, the mirrored samples and
    /// the stage series' recorders.
    lane_parts: Vec<LanePart>,
    /// A traced probe's main series by (probe, metric, CPU), whose
    /// episodes a monitor counts per cause class.
    explained: Vec<((String, String, i64), i64)>,
    /// The kernel tracer's series beside the probe's, per CPU and metric.
    side_recs: Vec<Vec<Recorder>>,
}

/// One traced CPU's part of a lane: the CPU, its trace buffer, the
/// mirrored samples and the stage series' recorders.
type LanePart = (usize, std::fs::File, rtrb::Consumer<Sample>, Vec<Recorder>);

impl Series {
    fn create(
        store: &mut rtscope_model::store::Store,
        run_id: i64,
        (probe, common, side_metrics): (&dyn Probe, &Common, &[&str]),
        load: &Option<String>,
        instance: Option<&Instance>,
        markers: Vec<Marker>,
        tap: Option<&Arc<dyn Tap>>,
    ) -> Result<Series> {
        let name = common.series_name(probe);
        let key = |metric: &str, c: usize| SeriesKey {
            probe: name.into(),
            metric: metric.into(),
            cpu: c as i64,
            load: load.clone(),
        };
        let mut recorders: Vec<Vec<Recorder>> = Vec::new();
        let mut sinks = Vec::new();
        let mut lives: Vec<(usize, Arc<Live>)> = Vec::new();
        let mut explained = Vec::new();
        for &c in &common.cpus {
            let mut per_thread = Vec::new();
            for (i, metric) in probe.metrics().iter().enumerate() {
                let sid = store.add_series(run_id, &key(metric, c), "ns", &common.exceed.describe())?;
                if let Some(tap) = tap {
                    tap.series(sid, &key(metric, c));
                    // The reader explains the first metric's samples.
                    if i == 0 && instance.is_some() {
                        tap.explained(sid);
                        explained.push(((name.to_string(), metric.to_string(), c as i64), sid));
                    }
                }
                let (rec, sink, live) =
                    recorder::channel_with(sid, common.checkpoint_ns, common.exceed, probe.signed());
                per_thread.push(rec);
                sinks.push(sink);
                if lives.iter().all(|(cpu, _)| *cpu != c) {
                    lives.push((c, live));
                }
            }
            recorders.push(per_thread);
        }
        // --trace: every sample is mirrored to the reader, which records the
        // stage series itself.
        let mut mirror_lost: Vec<Arc<AtomicU64>> = Vec::new();
        let mut lane_parts = Vec::new();
        if let Some(inst) = instance {
            let buffers = inst.buffers(&common.cpus).map_err(anyhow::Error::msg)?;
            for ((recs, &c), buffer) in recorders.iter_mut().zip(&common.cpus).zip(buffers) {
                let (tx, rx) = rtrb::RingBuffer::<Sample>::new(MIRROR_RING);
                let lost = Arc::new(AtomicU64::new(0));
                recs[0].set_mirror(Mirror { tx, lost: Arc::clone(&lost) });
                mirror_lost.push(lost);
                let mut stage_recs = Vec::new();
                if probe.trace_stages() == Some(true) && inst.can_follow(probe.wake_path()) {
                    for &metric in Stages::of_path(probe.wake_path()).1 {
                        let sid = store.add_series(run_id, &key(metric, c), "ns", &common.exceed.describe())?;
                        let (rec, sink, _) = recorder::channel(sid, common.checkpoint_ns, common.exceed);
                        stage_recs.push(rec);
                        sinks.push(sink);
                    }
                }
                lane_parts.push((c, buffer, rx, stage_recs));
            }
        }
        for (recs, marker) in recorders.iter_mut().zip(markers) {
            recs[0].set_marker(marker);
        }
        // The kernel tracer's series come last: per_thread_results takes
        // the probe's own first.
        let mut side_recs = Vec::new();
        if !side_metrics.is_empty() {
            for &c in &common.cpus {
                let mut per_cpu = Vec::new();
                for metric in side_metrics {
                    let sid = store.add_series(run_id, &key(metric, c), "ns", &common.exceed.describe())?;
                    if let Some(tap) = tap {
                        tap.series(sid, &key(metric, c));
                    }
                    let (rec, sink, _) = recorder::channel(sid, common.checkpoint_ns, common.exceed);
                    per_cpu.push(rec);
                    sinks.push(sink);
                }
                side_recs.push(per_cpu);
            }
        }
        Ok(Series { recorders, sinks, lives, mirror_lost, lane_parts, explained, side_recs })
    }
}

/// What the measuring threads and the main thread share: each thread
/// counts itself `ready`, then waits for the common start instant
/// (`start_at`, 0: not yet) or for `stop` (a failed set-up or spawn: nobody
/// measures); `breach` takes the first sample above `--threshold`.
struct StartLine<'s> {
    stop: &'s AtomicBool,
    breach: &'s Breach,
    ready: &'s AtomicUsize,
    start_at: &'s AtomicU64,
}

/// What one measuring thread is given.
struct ThreadPlan<'s> {
    probe: &'s dyn Probe,
    common: &'s Common,
    policy: Policy,
    priority: u8,
    /// Its index among the probe's threads, and its CPU.
    index: usize,
    cpu: usize,
    /// Where it publishes its thread id (the trace follows it).
    tid: &'s AtomicI32,
    /// Its first period's offset from the common start.
    phase: &'s AtomicU64,
    /// Its CPU's last timer expiry as a kernel tracer beside the probe
    /// timestamped it (0: none yet).
    expiry: &'s AtomicU64,
    /// Its per-thread figures (`Probe::extra_slots`).
    extras: &'s [AtomicU64],
    line: StartLine<'s>,
}

/// One measuring thread: pins itself to its CPU at the cell's policy,
/// counts itself ready, waits for the common start, measures into `recs`
/// (warm-up, then the duration, the loops or a stop) and finishes them.
fn measuring_thread(plan: ThreadPlan<'_>, mut recs: Vec<Recorder>) -> std::result::Result<(), String> {
    let ThreadPlan {
        index,
        cpu: c,
        tid,
        phase: shared_phase,
        expiry,
        extras,
        line: StartLine { stop, breach, ready, start_at },
        ..
    } = plan;
    let warmup = plan.common.warmup_ns;
    let loops = plan.common.loops.unwrap_or(u64::MAX);
    signals::block_in_this_thread();
    let mut err = None;
    if let Err(e) = cpu::pin_self(&[c]) {
        err = Some(format!("CPU {c}: cannot pin: {e}"));
    } else if let Err(e) = sched::set_self(plan.policy, plan.priority) {
        err = Some(format!("CPU {c}: cannot set {} {}: {e}", plan.policy.kernel_name(), plan.priority));
    }
    if err.is_some() {
        stop.store(true, Relaxed);
    }
    mem::prefault_stack(STACK_PREFAULT);
    tid.store(sched::thread_id(), Relaxed);
    ready.fetch_add(1, Release);
    let start = loop {
        let at = start_at.load(Acquire);
        if at != 0 || stop.load(Relaxed) {
            break at;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    if start != 0 && !stop.load(Relaxed) {
        let ctx = ThreadCtx {
            index,
            cpu: c,
            start_ns: start + shared_phase.load(Relaxed),
            record_from_ns: start + warmup,
            end_ns: plan.common.duration_ns.map_or(u64::MAX, |d| start + warmup + d),
            loops,
            limit_ns: plan.common.threshold_ns.unwrap_or(u64::MAX),
            stop,
            breach,
            extras,
            expiry,
            failure: Default::default(),
        };
        for r in recs.iter_mut() {
            r.start_after_warmup(start + warmup);
        }
        plan.probe.measure(&ctx, &mut recs);
        // A timed wake-up is one timer expiry on this CPU, the warm-up's too.
        if plan.probe.trace_stages() == Some(true) && plan.probe.wake_path() == WakePath::Timer {
            crate::recorder::own_timers::add(c, recs.first().map_or(0, Recorder::offered));
        }
        if let Some(f) = ctx.failure.take() {
            err = err.or(Some(format!("CPU {c}: {f}")));
        }
    }
    let now = clock::now();
    for r in recs {
        r.finish(now);
    }
    err.map_or(Ok(()), Err)
}

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
