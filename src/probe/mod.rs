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
pub mod serial;
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
use rtscope_model::settings::InstancesMode;
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

/// Makes the calling thread a responder's (netlat's `--serve`, `rtscope
/// respond`) as the measuring threads are made: the stop signals blocked
/// (the main thread takes them), pinned to `cpu`, at `policy`/`priority`,
/// its stack present; a refusal names `flag`.
pub fn responder_thread(flag: &str, cpu: usize, policy: Policy, priority: u8) -> Result<()> {
    use anyhow::Context;
    signals::block_in_this_thread();
    cpu::pin_self(&[cpu]).with_context(|| format!("{flag}: cannot pin to CPU {cpu}"))?;
    sched::set_self(policy, priority).with_context(|| format!("{flag}: cannot set priority {priority}"))?;
    mem::prefault_stack(64 * 1024);
    Ok(())
}

/// Settings every probe shares, already validated.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Common {
    pub cpus: Vec<usize>,
    pub policy: Policy,
    pub priority: u8,
    /// `--policy deadline`: the measuring threads' SCHED_DEADLINE
    /// reservation (they start at `policy`, SCHED_OTHER, and the probe
    /// sets it at the common start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<sched::Deadline>,
    pub duration_ns: Option<u64>,
    pub loops: Option<u64>,
    pub checkpoint_ns: u64,
    #[serde(skip)]
    pub exceed: ExceedMode,
    pub threshold_ns: Option<u64>,
    pub db: PathBuf,
    pub json: Option<PathBuf>,
    pub quiet: bool,
    /// `--ns`: what the terminal's tables show times in.
    #[serde(skip)]
    pub unit: rtscope_model::units::ShownIn,
    /// What `/dev/cpu_dma_latency` is held at (None: left alone).
    pub dma_latency: Option<rtscope_model::settings::DmaLatency>,
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
    /// measured into one run at `policy` (empty: one, at `priority`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<u8>,
    /// How `instances` are measured: together (the default) or one after
    /// the other (`--instances-in-turn`); stored as the run's `instances`.
    #[serde(skip)]
    pub instances_mode: InstancesMode,
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

    /// These settings for each instance of `probe` in `instances` (at
    /// `policy`), named as [`instance_name`] names them.
    pub fn each_instance(&self, probe: &dyn Probe) -> Vec<Common> {
        let mut names: Vec<String> = Vec::new();
        for &priority in &self.instances {
            names.push(instance_name(probe.name(), priority, &names));
        }
        self.instances
            .iter()
            .zip(names)
            .map(|(&priority, name)| Common { priority, instance: Some(name), instances: Vec::new(), ..self.clone() })
            .collect()
    }
}

/// The name an instance of probe `base` at `priority` is stored under,
/// after the instances named `earlier`: `wakeup@80`, and for a second one
/// at the same priority `wakeup@80#2`, a third `wakeup@80#3`.
pub fn instance_name<S: AsRef<str>>(base: &str, priority: u8, earlier: &[S]) -> String {
    let first = format!("{base}@{priority}");
    let again = format!("{first}#");
    let n = earlier.iter().filter(|e| e.as_ref() == first || e.as_ref().starts_with(&again)).count();
    if n == 0 { first } else { format!("{first}#{}", n + 1) }
}

/// A cell's settings as the run stores them (its plan, or one of its
/// `cells`), with the scheduling it got on this machine.
pub fn cell_plan(probe: &dyn Probe, common: &Common, (policy, priority): (Policy, u8)) -> serde_json::Value {
    serde_json::json!({
        "probe": common.series_name(probe),
        "metrics": probe.metrics(),
        "common": common,
        "exceed": common.exceed.describe(),
        "effective_policy": if common.deadline.is_some() { serde_json::json!("deadline") } else { serde_json::json!(policy) },
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
    /// Its index among the cell's threads, of every instance.
    thread: usize,
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
            self.breach.thread.store(self.thread as u64, Relaxed);
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
    /// The thread's index among the cell's (of every instance).
    thread: AtomicU64,
    value_ns: AtomicU64,
    t_ns: AtomicU64,
}

impl Breach {
    /// The cell's breach line, when a sample went above `--threshold`
    /// (`threshold_ns`); with instances measured together, `instances`
    /// (each its first thread's index and its name) name the one.
    fn describe(&self, threshold_ns: Option<u64>, instances: &[(usize, &str)]) -> Option<String> {
        self.hit.load(Relaxed).then(|| {
            let thread = self.thread.load(Relaxed) as usize;
            let who = match instances.iter().rev().find(|(first, _)| *first <= thread) {
                Some((_, name)) if instances.len() > 1 => format!("{name} "),
                _ => String::new(),
            };
            format!(
                "stopped at --threshold {}us: {who}CPU {} measured {}us at CLOCK_MONOTONIC {} ns",
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
    /// The instances measured together: one, or several of a probe, each
    /// its own threads at its own scheduling (`wakeup@95,wakeup@80`).
    parts: Vec<Part<'a>>,
    load: Option<String>,
    /// The first instance's trace (`--trace` follows one instance).
    instance: Option<Instance>,
    tap: Option<Arc<dyn Tap>>,
    /// The kernel tracer beside the first instance, or why not.
    side: Option<Side>,
}

/// One instance of a cell's probe: its settings, its scheduling on this
/// machine, its trace markers and helpers.
struct Part<'a> {
    probe: &'a dyn Probe,
    common: &'a Common,
    policy: Policy,
    priority: u8,
    markers: Vec<Marker>,
    /// Stopped when the part drops, after its threads.
    _helpers: Box<dyn Send>,
}

/// Instances measured together are refused with what follows one
/// instance only and cannot be left to the first: `--trace` (its
/// attribution follows one thread per CPU) and a kernel tracer that must
/// run beside the probe (`--timerlat on` or `user`, `--osnoise on`); one
/// that may be left out (`auto`) runs beside the first instance only.
/// `in_turn` names the option that measures them one after the other.
pub fn check_together(parts: &[(&dyn Probe, &Common)], in_turn: &str) -> Result<()> {
    if parts.len() < 2 {
        return Ok(());
    }
    let names: Vec<&str> = parts.iter().map(|(p, c)| c.series_name(*p)).collect();
    if parts.iter().any(|(_, c)| c.trace.is_some()) {
        return Err(anyhow!(
            "--trace follows one instance at a time, and {} are measured together: measure them one after the \
             other ({in_turn}), or drop --trace",
            names.join(", ")
        ));
    }
    let required = |(p, c): &(&dyn Probe, &Common)| p.beside(c).and_then(|b| b.required.map(|f| (b.tracer, f)));
    if let Some((part, (tracer, flag))) = parts.iter().find_map(|part| Some((part, required(part)?))) {
        return Err(anyhow!(
            "{}: {flag}: the kernel's {} tracer follows one instance at a time, and {} are measured together: \
             measure them one after the other ({in_turn}), or leave {flag} out",
            part.1.series_name(part.0),
            tracer.name(),
            names.join(", ")
        ));
    }
    Ok(())
}

/// `--tracemark`: a marker per CPU of the instance, or none (a warning
/// says why).
fn markers(probe: &dyn Probe, common: &Common, warnings: &mut Vec<Warning>) -> Vec<Marker> {
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
                    return Vec::new();
                }
            }
        }
    }
    markers
}

/// `--trace` on a probe that cannot be traced yet is refused.
pub fn check_trace(probe: &dyn Probe, common: &Common) -> Result<()> {
    if common.trace.is_some() && probe.trace_stages().is_none() {
        return Err(anyhow!("--trace is not supported by `{}` yet; run without --trace", probe.name()));
    }
    let staged = probe.trace_stages() == Some(true) && probe.wake_path() == WakePath::Timer;
    if common.trace.as_ref().is_some_and(|t| t.stop.any()) && !staged {
        return Err(anyhow!(
            "--stop-irq and --stop-thread stop on a timer wake-up's stages, which `{}` has not: use them with \
             `rtscope wakeup --trace`, or --threshold",
            probe.name()
        ));
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
        let markers = markers(probe, common, warnings);
        let side = Side::prepare(probe, common)?;
        let helpers = probe.start_helpers(&common.cpus, policy, priority)?;
        let part = Part { probe, common, policy, priority, markers, _helpers: helpers };
        Ok(Cell { parts: vec![part], load, instance, tap: None, side })
    }

    /// This cell with the instances `others` measured together with its
    /// own: each its own threads at its own scheduling on the same CPUs,
    /// all started at one instant, each its own series; their trace
    /// markers and helpers set up here. Refused (see [`check_together`])
    /// where one is traced or must have a kernel tracer beside it; one
    /// that may be left out runs beside this cell's instance only.
    pub fn with(
        mut self,
        others: &[(&'a dyn Probe, &'a Common, (Policy, u8))],
        in_turn: &str,
        warnings: &mut Vec<Warning>,
    ) -> Result<Cell<'a>> {
        let mut all: Vec<(&dyn Probe, &Common)> = self.parts.iter().map(|p| (p.probe, p.common)).collect();
        all.extend(others.iter().map(|&(p, c, _)| (p, c)));
        check_together(&all, in_turn)?;
        for &(probe, common, (policy, priority)) in others {
            check_trace(probe, common)?;
            warnings.extend(probe.warnings());
            let markers = markers(probe, common, warnings);
            let helpers = probe.start_helpers(&common.cpus, policy, priority)?;
            self.parts.push(Part { probe, common, policy, priority, markers, _helpers: helpers });
        }
        Ok(self)
    }

    /// Tells `tap` of every series and committed interval (a monitor).
    pub fn set_tap(&mut self, tap: Arc<dyn Tap>) {
        self.tap = Some(tap);
    }

    /// The cell's settings, for the run's plan.
    pub fn plan(&self) -> serde_json::Value {
        let first = &self.parts[0];
        let mut plan = cell_plan(first.probe, first.common, (first.policy, first.priority));
        plan["trace"] = serde_json::json!(self.instance.as_ref().map(|i| serde_json::json!({
            "instance": i.name,
            "options": first.common.trace,
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
        let Cell { mut parts, load, mut instance, tap, side } = self;
        let (probe, common) = (parts[0].probe, parts[0].common);
        let run_id = run.run_id;
        let side_metrics = side.as_ref().map_or(&[][..], Side::metrics);
        // A previous cell's helpers mapped memory locked on touch: this
        // cell's histograms and rings are read in whole again.
        let relocked_before = mem::lock_populated();
        // Each instance's series; the trace and the kernel tracer beside
        // follow the first.
        let mut all = Series::default();
        let (mut layout, mut at) = (Vec::new(), Lanes::default());
        for (k, part) in parts.iter_mut().enumerate() {
            let first = k == 0;
            let series = Series::create(
                run.store()?,
                run_id,
                (part.probe, part.common, if first { side_metrics } else { &[] }),
                &load,
                if first { instance.as_ref() } else { None },
                std::mem::take(&mut part.markers),
                tap.as_ref(),
            )?;
            layout.push(at);
            let n = part.common.cpus.len();
            at = Lanes { thread: at.thread + n, extra: at.extra + n * part.probe.extra_slots(), sink: at.sink };
            at.sink += series.sinks.len();
            all.append(series);
        }
        let label = parts.iter().map(|p| p.common.series_name(p.probe)).collect::<Vec<_>>().join(" + ");
        let Series { recorders, sinks, lives, mirror_lost, lane_parts, explained, side_recs } = all;
        let (episode_tx, episode_rx) = std::sync::mpsc::channel();
        let shared = Shared::new(at.thread, at.extra);
        for (part, lanes) in parts.iter().zip(&layout) {
            let n = part.common.cpus.len();
            for i in 0..n {
                shared.phases[lanes.thread + i].store(part.probe.first_offset(i, n), Relaxed);
            }
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
        let first_threads = common.cpus.len();
        match side {
            Some(Side::Running(run)) if parts.len() > 1 => {
                out.notes.push(format!(
                    "{}: beside {} only, the first of the instances measured together ({label})",
                    run.0.tracer.name(),
                    common.series_name(probe)
                ));
                side_align = run.0.align;
                side_run = Some(*run);
            }
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
            let mut threads = Vec::new();
            let mut recorders = recorders.into_iter();
            for (part, lanes) in parts.iter().zip(&layout) {
                let recs: Vec<Vec<Recorder>> = recorders.by_ref().take(part.common.cpus.len()).collect();
                let scheduling = (part.probe, part.common, part.policy, part.priority);
                threads.extend(spawn_measuring(scope, scheduling, recs, (&shared, lanes), &mut out));
            }
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
                // Beside the first instance's threads.
                let from = (&shared.tids[..first_threads], start_ns + common.warmup_ns);
                let expiry = &shared.expiry[..first_threads];
                beside::spawn(scope, run, (side_recs, expiry), from, &shared.reader_done, &mut out.notes)
            });
            if let (Some(align), Some(_)) = (side_align, &side_thread) {
                let (expiry, phases) = (&shared.expiry[..first_threads], &shared.phases[..first_threads]);
                beside::align(align, start_ns, expiry, phases, &mut out.notes);
            }
            shared.start_at.store(start_ns, Release);
            follow((probe, common, &label, &load), &lives, start_ns, (&threads, &writer_thread), signal, &shared.stop);
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
        let parts: Vec<(&dyn Probe, &Common)> = parts.into_iter().map(|p| (p.probe, p.common)).collect();
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
        for (&(probe, common), lanes) in parts.iter().zip(&layout) {
            let name = common.series_name(probe);
            let store_ok = store_error.is_none();
            let mine = (&values[lanes.extra..], &writer.sinks[lanes.sink..]);
            per_thread_results((probe, common), mine, (store_ok, &mut writer.store), (name, &load), &mut out)?;
        }
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
        let instances: Vec<(usize, &str)> =
            parts.iter().zip(&layout).map(|(&(p, c), lanes)| (lanes.thread, c.series_name(p))).collect();
        out.breach = shared.breach.describe(common.threshold_ns, &instances).or_else(|| {
            let stop = common.trace.as_ref().map(|t| t.stop).unwrap_or_default();
            shared.stage_hit.describe(&stop)
        });
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
            thread: 0,
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

#[cfg(test)]
mod tests {
    use super::instance_name;

    #[test]
    fn instances_at_one_priority_are_named_apart() {
        let mut names: Vec<String> = Vec::new();
        for p in [80, 95, 80, 80] {
            names.push(instance_name("wakeup", p, &names));
        }
        assert_eq!(names, ["wakeup@80", "wakeup@95", "wakeup@80#2", "wakeup@80#3"]);
        assert_eq!(instance_name("noise", 80, &["wakeup@80"]), "noise@80");
    }
}
