//! `rtscope watch`: the latency of the machine's own real-time threads.
//! Nothing is injected: rtscope's tracefs instance records the scheduler's
//! events of every CPU, and one reader thread (at the priority and on the
//! CPUs the user chose) follows each watched thread through them
//! ([`crate::trace::watch`]), recording per thread its wake-up latency,
//! period, runtime and response into the run's series, with checkpoints,
//! as a probe's. Threads are found at the start and as they appear (their
//! first switch onto a CPU); a thread that exits ends its series there.

use crate::recorder::{self, EpisodeMsg, ExceedMode, Recorder, Sample, Tap, Writer};
use crate::session::{CellOutcome, OpenRun, OwnCell};
use crate::sys::{clock, sched};
use crate::trace::decompose::{self, CauseThreshold, CpuTrace, Names, Out, WakePath};
use crate::trace::event::{Decoder, Ev, Task};
use crate::trace::format::PageLayout;
use crate::trace::instance::Instance;
use crate::trace::reader::{Buffer, ReaderReport, policy_of};
use crate::trace::timeline::CpuFold;
use crate::trace::watch::{Merge, Obs, Tracker, shown};
use crate::trace::{self, CodeReport, StacksMode, TraceClock, TraceOpts};
use anyhow::Result;
use rtscope_model::episode::timeline::Timeline;
use rtscope_model::episode::{self, CauseKind, Markers, TraceCpu, TraceSummary};
use rtscope_model::extra::watch as figure;
use rtscope_model::hist::{Tally, quantile};
use rtscope_model::inventory::Warning;
use rtscope_model::run::SeriesKey;
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// The series of each watched thread, in this order.
pub const METRICS: [&str; 4] = ["latency", "period", "runtime", "response"];
/// `SeriesKey::probe` of a watched thread's series.
pub const NAME: &str = "watch";

/// How often the buffers are read.
const PASS: Duration = Duration::from_millis(10);
/// An event is merged once every CPU's buffer was read this long after it.
const GRACE_NS: u64 = 5_000_000;
/// How often exited threads are looked for.
const EXIT_CHECK_NS: u64 = 1_000_000_000;

mod identity;
mod profile;
#[cfg(test)]
use identity::read_trim;
pub use identity::{Filter, Identity, identify, scan};

/// What `rtscope watch` was asked.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Settings {
    pub filter: Filter,
    pub duration_ns: Option<u64>,
    pub checkpoint_ns: u64,
    #[serde(skip)]
    pub exceed: ExceedMode,
    /// The period to judge the jitter against [default: each thread's median].
    pub period_ns: Option<u64>,
    /// The deadline of every activation, from its release [default: a
    /// SCHED_DEADLINE thread's own].
    pub deadline_ns: Option<u64>,
    /// Cause episodes for wake-ups above this latency.
    pub cause_threshold_ns: Option<u64>,
    pub max_episodes: usize,
    pub buffer_kb: u64,
    /// Threads with series at most (each costs about [`THREAD_BYTES`]).
    pub max_threads: usize,
    /// Samples per second of each watched thread's CPU time (0: none):
    /// its late periods' functions against its on-time ones.
    pub sample_hz: u64,
    /// Every wake-up above the cause threshold is explained and its class
    /// counted, not only the worst kept (`monitor --watch`'s counters).
    #[serde(skip)]
    pub classify_all: bool,
    /// Runs until stopped (a monitor): a thread's series are let go once it
    /// has exited and they are committed, and --max-threads counts the
    /// threads watched now, not every one since the start.
    #[serde(skip)]
    pub until_stopped: bool,
}

/// The memory of one watched thread's four series (their histograms and
/// rings), about.
pub const THREAD_BYTES: u64 = 4 << 20;

impl Settings {
    /// One line: which threads, and what they are judged against.
    pub fn describe(&self) -> String {
        let f = &self.filter;
        let policies: Vec<&str> = f.policies.iter().map(|&p| sched::policy_name(p)).collect();
        let mut parts = vec![policies.join("/")];
        if !f.comms.is_empty() {
            parts.push(format!("named {}", f.comms.join(", ")));
        }
        let ids = |v: &[i32]| v.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ");
        if !f.pids.is_empty() {
            parts.push(format!("of pid {}", ids(&f.pids)));
        }
        if !f.tids.is_empty() {
            parts.push(format!("of tid {}", ids(&f.tids)));
        }
        if let Some(c) = &f.cpus {
            parts.push(format!("on CPUs {}", rtscope_model::inventory::format_cpu_list(c)));
        }
        let mut out = format!("threads: {}", parts.join(" "));
        if let Some(p) = self.period_ns {
            out += &format!("; period {}", rtscope_model::units::human(p));
        }
        if let Some(d) = self.deadline_ns {
            out += &format!("; deadline {}", rtscope_model::units::human(d));
        }
        if let Some(c) = self.cause_threshold_ns {
            out += &format!("; causes above {}", rtscope_model::units::human(c));
        }
        if self.sample_hz > 0 {
            out += &format!("; sampled at {} Hz", self.sample_hz);
        }
        out
    }

    /// What makes a period late (`--sample-hz`), in words.
    fn late_when(&self) -> String {
        let mut when = vec![match self.deadline_ns {
            Some(d) => format!("its response above the deadline {}", rtscope_model::units::human(d)),
            None => "its response above its own SCHED_DEADLINE deadline".to_string(),
        }];
        if let Some(c) = self.cause_threshold_ns {
            when.push(format!("its wake-up latency above the cause threshold {}", rtscope_model::units::human(c)));
        }
        when.join(", or ")
    }
}

/// The tracer, ready: made before the run is stored, so that its warnings
/// go with the run.
pub struct Watch {
    pub settings: Settings,
    instance: Instance,
    cpus: Vec<usize>,
    /// The threads found at the start.
    pub found: Vec<Identity>,
}

/// Creates the tracefs instance on every online CPU (a thread may be woken
/// from any) and finds the threads to watch now.
pub fn prepare(settings: Settings, warnings: &mut Vec<Warning>) -> Result<Watch> {
    let cpus = crate::sys::cpu::online();
    let (instance, w) =
        Instance::create(&cpus, settings.buffer_kb, TraceClock::Mono.as_str()).map_err(anyhow::Error::msg)?;
    if !instance.enabled.iter().any(|e| e == "sched/sched_switch")
        || !instance.enabled.iter().any(|e| e == "sched/sched_waking")
    {
        anyhow::bail!(
            "rtscope watch needs the trace events sched/sched_waking and sched/sched_switch ({}); use a kernel with \
             CONFIG_FTRACE and the scheduler's trace events",
            instance.missing.join("; ")
        );
    }
    warnings.extend(w);
    let found = scan(&settings.filter);
    Ok(Watch { settings, instance, cpus, found })
}

/// A watched thread's recording.
struct Watched {
    id: Identity,
    sids: Vec<i64>,
    /// Its series' recorders: None until its first wake-up in sight, and
    /// once it exited (or the run ended).
    recs: Option<Vec<Recorder>>,
    /// No more series: it exited, or came beyond --max-threads.
    ended: bool,
    /// Its series were let go (`until_stopped`), their extras stored.
    released: bool,
    cpus: Vec<usize>,
    activations: u64,
    deadline_ns: Option<u64>,
    misses: u64,
    /// Wake-ups whose switch onto a CPU was not traced.
    unmatched: u64,
    /// The wake-up latency of its activation in progress.
    last_latency: u64,
    found_ns: u64,
    exited_ns: Option<u64>,
}

impl Watched {
    fn new(id: Identity, now: u64, deadline_ns: Option<u64>) -> Watched {
        let deadline_ns = deadline_ns.or((id.dl_deadline_ns > 0).then_some(id.dl_deadline_ns));
        Watched {
            id,
            sids: Vec::new(),
            recs: None,
            ended: false,
            released: false,
            cpus: Vec::new(),
            activations: 0,
            deadline_ns,
            misses: 0,
            unmatched: 0,
            last_latency: 0,
            found_ns: now,
            exited_ns: None,
        }
    }

    /// Its identity and counts, for each of its series' `extra`; `period`:
    /// its period series, judged against `period_ns` or its median.
    fn extra(&self, start: u64, period: Option<&Tally>, period_ns: Option<u64>) -> Map<String, Value> {
        let id = &self.id;
        let mut extra = Map::new();
        let mut put = |k: &str, v: Value| {
            extra.insert(k.to_string(), v);
        };
        put(figure::THREAD.key, id.label().into());
        put("tid", id.tid.into());
        put("pid", id.pid.into());
        put("comm", id.comm.clone().into());
        put("process", id.process.clone().into());
        put(figure::SCHED.key, id.sched().into());
        put("policy", sched::policy_name(id.policy).into());
        put("priority", id.priority.into());
        if id.dl_deadline_ns > 0 {
            put("dl_runtime_ns", id.dl_runtime_ns.into());
            put("dl_deadline_ns", id.dl_deadline_ns.into());
            put("dl_period_ns", id.dl_period_ns.into());
        }
        put(figure::CPUS.key, self.cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",").into());
        put("activations", self.activations.into());
        put("unmatched", self.unmatched.into());
        put("found_ns", self.found_ns.into());
        put("appeared", (self.found_ns > start).into());
        if let Some(x) = self.exited_ns {
            put("exited_ns", x.into());
        }
        if let Some(d) = self.deadline_ns {
            put(figure::DEADLINE.key, d.into());
            put(figure::DEADLINE_MISSES.key, self.misses.into());
        }
        if let Some(p) = period.filter(|p| p.stats.count > 0) {
            let median = quantile(&p.hist, &p.stats, 0.5);
            let reference = period_ns.unwrap_or(median);
            put("period_median_ns", median.into());
            put("period_ref_ns", reference.into());
            put("jitter_ns", p.stats.max.saturating_sub(reference).max(reference.saturating_sub(p.stats.min)).into());
        }
        extra
    }
}

/// Thread `t`'s identity and counts on each of its series.
fn store_extra(t: &Watched, start: u64, period_ns: Option<u64>, writer: &mut Writer) -> Result<()> {
    let period = writer.sinks.iter().find(|s| s.series_id == t.sids[1]).map(|s| s.total());
    let extra = t.extra(start, period, period_ns);
    for &sid in &t.sids {
        writer.store.set_series_extra(sid, &extra)?;
    }
    Ok(())
}

/// A thread looked up and not taken: its name and priority in the trace
/// then, and the CPU it was seen on where that CPU alone was not one of
/// --cpus. Looked up again when the trace shows it otherwise (a thread
/// that names itself, becomes real-time, or runs on one of --cpus later).
struct Rejected {
    task: Task,
    cpu: Option<usize>,
}

/// A task the trace has not named: a normal one.
static UNKNOWN: Task = Task { comm: String::new(), prio: 120 };

/// The threads being watched, and those looked at and left.
struct Threads<'a> {
    settings: &'a Settings,
    run_id: i64,
    load: Option<&'a str>,
    start: u64,
    list: Vec<Watched>,
    by_tid: HashMap<i32, usize>,
    /// Threads looked up and not taken, with the trace's view of each then.
    rejected: HashMap<i32, Rejected>,
    tracker: Tracker,
    found_at_start: usize,
    /// Threads that ran beyond --max-threads.
    over_max: u64,
    /// `--sample-hz`: each watched thread's sampler.
    profiler: Option<profile::Profiler>,
}

impl<'a> Threads<'a> {
    fn new(settings: &'a Settings, run_id: i64, load: Option<&'a str>, start: u64, found: Vec<Identity>) -> Self {
        let mut t = Threads {
            settings,
            run_id,
            load,
            start,
            list: Vec::new(),
            by_tid: HashMap::new(),
            rejected: HashMap::new(),
            tracker: Tracker::default(),
            found_at_start: found.len(),
            over_max: 0,
            profiler: (settings.sample_hz > 0).then(|| profile::Profiler::new(settings.sample_hz)),
        };
        for id in found {
            t.take(id, start, None);
        }
        t
    }

    /// Watches `id` from `now`; `running`: on a CPU since then.
    fn take(&mut self, id: Identity, now: u64, running: Option<u64>) {
        self.tracker.watch(id.tid, running);
        if let Some(p) = &mut self.profiler {
            p.add(id.tid, id.pid, id.label());
        }
        self.by_tid.insert(id.tid, self.list.len());
        self.list.push(Watched::new(id, now, self.settings.deadline_ns));
    }

    /// A thread the trace shows on `cpu` at `now` (see [`shown`]; on the
    /// CPU since then where `running`) that is not watched: taken if the
    /// filter takes it. `tasks`: the trace's view of each task. A thread is
    /// looked up in /proc once per view the trace gives of it ([`Rejected`]).
    fn discover(&mut self, tid: i32, tasks: &HashMap<i32, Task>, cpu: usize, now: u64, running: bool) {
        if tid <= 0 || self.tracker.watched(tid) {
            return;
        }
        let (filter, task) = (&self.settings.filter, tasks.get(&tid).unwrap_or(&UNKNOWN));
        // Left for its CPU alone: known on that CPU and on any other not of --cpus.
        let elsewhere = |c: usize| c == cpu || filter.cpus.as_ref().is_some_and(|cs| !cs.contains(&cpu));
        let known = |r: &Rejected| r.task == *task && r.cpu.is_none_or(elsewhere);
        if !filter.may_take(task.prio) || self.rejected.get(&tid).is_some_and(known) {
            return;
        }
        let own = std::process::id() as i32;
        match identify(tid).filter(|id| id.pid != own) {
            Some(id) if filter.takes(&id, cpu) && !self.by_tid.contains_key(&tid) => {
                self.take(id, now, running.then_some(now))
            }
            id => {
                let cpu = id.filter(|id| filter.takes_on_its_cpus(id) && !self.by_tid.contains_key(&tid)).map(|_| cpu);
                self.rejected.insert(tid, Rejected { task: task.clone(), cpu });
            }
        }
    }

    /// Makes the series of thread `i` at its first wake-up in sight (a
    /// thread that never runs costs nothing), up to --max-threads.
    fn series(&mut self, i: usize, now: u64, writer: &mut Writer) -> Result<()> {
        if !self.list[i].sids.is_empty() || self.list[i].ended {
            return Ok(());
        }
        let watched = if self.settings.until_stopped {
            self.list.iter().filter(|t| t.recs.is_some()).count()
        } else {
            writer.sinks.len() / METRICS.len()
        };
        let t = &mut self.list[i];
        if watched >= self.settings.max_threads {
            t.ended = true;
            self.over_max += 1;
            return Ok(());
        }
        let s = self.settings;
        let mut recs = Vec::new();
        for m in METRICS {
            let key = SeriesKey { load: self.load.map(str::to_string), ..SeriesKey::new(NAME, m, t.id.tid as i64) };
            let sid = writer.store.add_series(self.run_id, &key, "ns", &s.exceed.describe())?;
            if let Some(tap) = &writer.tap {
                tap.thread(sid, &key, t.id.tid, &t.id.comm);
            }
            let (mut rec, sink, _) = recorder::channel(sid, s.checkpoint_ns, s.exceed);
            rec.start(now);
            t.sids.push(sid);
            recs.push(rec);
            writer.sinks.push(sink);
        }
        t.recs = Some(recs);
        Ok(())
    }

    /// Records what the events said of a watched thread; a wake-up above
    /// the cause threshold goes to `causes`.
    fn observe(&mut self, o: Obs, now: u64, writer: &mut Writer, causes: &mut Causes, names: &Names) -> Result<()> {
        let tid = match o {
            Obs::Latency { tid, .. } | Obs::Period { tid, .. } | Obs::Done { tid, .. } | Obs::Unmatched { tid } => tid,
        };
        let Some(&i) = self.by_tid.get(&tid) else { return Ok(()) };
        self.series(i, now, writer)?;
        let t = &mut self.list[i];
        let recs = t.recs.as_mut();
        match o {
            Obs::Latency { cpu, waking_ns, ran_ns, .. } => {
                let lat = ran_ns - waking_ns;
                if let Some(r) = recs {
                    r[0].record(ran_ns, lat);
                }
                t.last_latency = lat;
                t.activations += 1;
                if !t.cpus.contains(&(cpu as usize)) {
                    t.cpus.push(cpu as usize);
                }
                let (tap, sid) = (&writer.tap, t.sids.first().copied());
                let mut class = |kind: CauseKind| {
                    if let (Some(tap), Some(sid)) = (tap, sid) {
                        tap.episode(sid, kind);
                    }
                };
                causes.explain(t, (cpu as usize, waking_ns, ran_ns), names, &mut class);
            }
            Obs::Period { t_ns, period_ns, .. } => {
                if let Some(r) = recs {
                    r[1].record(t_ns, period_ns);
                }
            }
            Obs::Unmatched { .. } => t.unmatched += 1,
            Obs::Done { release_ns, end_ns, runtime_ns, .. } => {
                let response = end_ns - release_ns;
                if let Some(r) = recs {
                    r[2].record(end_ns, runtime_ns);
                    r[3].record(end_ns, response);
                }
                let missed = t.deadline_ns.is_some_and(|d| response > d);
                t.misses += u64::from(missed);
                if let Some(p) = &mut self.profiler {
                    let slow = self.settings.cause_threshold_ns.is_some_and(|c| t.last_latency > c);
                    p.period(tid, release_ns, end_ns, missed || slow);
                }
            }
        }
        Ok(())
    }

    /// Ends the series of the threads that exited (all at the `last` pass).
    fn check_exits(&mut self, now: u64, last: bool) {
        for t in self.list.iter_mut().filter(|t| !t.ended || t.recs.is_some()) {
            if last || !std::path::Path::new(&format!("/proc/{}/task/{}", t.id.pid, t.id.tid)).exists() {
                if !last && t.exited_ns.is_none() {
                    t.exited_ns = Some(now);
                    self.tracker.forget(t.id.tid);
                }
                t.ended = true;
                for r in t.recs.take().into_iter().flatten() {
                    r.finish(now);
                }
            }
        }
    }

    fn checkpoint(&mut self, now: u64) {
        for r in self.list.iter_mut().filter_map(|t| t.recs.as_mut()).flatten() {
            r.maybe_checkpoint(now);
        }
    }

    /// Each thread's identity and counts, on each of its series.
    fn store_extras(&self, writer: &mut Writer) -> Result<()> {
        for t in self.list.iter().filter(|t| !t.sids.is_empty() && !t.released) {
            store_extra(t, self.start, self.settings.period_ns, writer)?;
        }
        Ok(())
    }

    /// Lets go of the series of the threads that exited once all of them
    /// is committed (their extras stored first): a monitor's memory stays
    /// that of the threads watched now.
    fn release(&mut self, writer: &mut Writer) -> Result<()> {
        for t in self.list.iter_mut().filter(|t| t.ended && t.recs.is_none() && !t.sids.is_empty() && !t.released) {
            if !writer.sinks.iter().filter(|s| t.sids.contains(&s.series_id)).all(|s| s.done()) {
                continue;
            }
            store_extra(t, self.start, self.settings.period_ns, writer)?;
            writer.sinks.retain(|s| !t.sids.contains(&s.series_id));
            t.released = true;
        }
        Ok(())
    }

    /// The run's notes on what was watched and what the trace lacked.
    fn notes(&self, summary: &TraceSummary, wall_ns: u64) -> Vec<String> {
        let list = &self.list;
        let events: u64 = summary.per_cpu.iter().map(|c| c.events).sum();
        let mut notes = vec![format!(
            "watch: {} threads ({} found at the start, {} appeared, {} exited), {} of them woken in sight; the reader \
             decoded {events} events ({:.0}/s) on its own CPU time of {:.2}% of one CPU; {} events lost",
            list.len(),
            self.found_at_start,
            list.len() - self.found_at_start,
            list.iter().filter(|t| t.exited_ns.is_some()).count(),
            list.iter().filter(|t| !t.sids.is_empty()).count(),
            events as f64 / (wall_ns.max(1) as f64 / 1e9),
            summary.reader_cpu_pct,
            summary.lost()
        )];
        if self.tracker.inferred > 0 {
            notes.push(format!(
                "watch: {} switches onto a CPU were not traced (this kernel does not trace the switch out of idle): \
                 each was taken at the last event its CPU recorded in idle, a few microseconds early",
                self.tracker.inferred
            ));
        }
        if self.over_max > 0 {
            notes.push(format!(
                "watch: {} threads that ran were not watched: beyond --max-threads {} (narrow the threads with \
                 --comm, --pid, --tid or --policy, or raise it)",
                self.over_max, self.settings.max_threads
            ));
        }
        let unmatched: u64 = list.iter().map(|t| t.unmatched).sum();
        if unmatched > 0 {
            notes.push(format!(
                "watch: {unmatched} wake-ups had no switch onto a CPU in the trace (lost events): left out of the \
                 latency, runtime and response series"
            ));
        }
        if list.is_empty() {
            notes.push(
                "watch: no thread matched (default: every SCHED_FIFO, SCHED_RR and SCHED_DEADLINE thread); see \
                 --pid, --comm, --policy"
                    .into(),
            );
        }
        notes
    }
}

/// `--cause-threshold`: each CPU's events, and an episode for each
/// wake-up above the threshold.
struct Causes {
    threshold: Option<u64>,
    traces: Vec<CpuTrace>,
    index_of_cpu: HashMap<usize, usize>,
    seq: u64,
    pass_start: u64,
    tx: std::sync::mpsc::Sender<EpisodeMsg>,
}

impl Causes {
    /// Each CPU's event window for the cause episodes (kept only with a
    /// threshold); the episodes go to `tx`.
    fn new(settings: &Settings, timer_entry: bool, cpus: &[usize], tx: std::sync::mpsc::Sender<EpisodeMsg>) -> Causes {
        let cause_settings = decompose::Settings {
            cause_threshold: CauseThreshold::Fixed(settings.cause_threshold_ns.unwrap_or(0)),
            max_episodes: settings.max_episodes,
            timer_entry,
            stages: true,
            path: WakePath::Timer,
            classify_all: settings.classify_all,
        };
        Causes {
            threshold: settings.cause_threshold_ns,
            traces: cpus.iter().map(|&c| CpuTrace::new(c as i64, NAME, METRICS[0], 0, cause_settings)).collect(),
            index_of_cpu: cpus.iter().enumerate().map(|(i, &c)| (c, i)).collect(),
            seq: 0,
            pass_start: 0,
            tx,
        }
    }

    fn push_event(&mut self, cpu_index: usize, e: Ev) {
        if self.threshold.is_some() {
            self.traces[cpu_index].push_event(e);
        }
    }

    /// A cause episode for `t`'s wake-up (waking at `waking_ns`, on `cpu`
    /// at `ran_ns`) if it is above the threshold; `class` is told the class
    /// of each wake-up explained (with `classify_all`, of every one above
    /// the threshold).
    fn explain(
        &mut self,
        t: &Watched,
        (cpu, waking_ns, ran_ns): (usize, u64, u64),
        names: &Names,
        class: &mut dyn FnMut(CauseKind),
    ) {
        let lat = ran_ns - waking_ns;
        let (Some(thr), Some(&ci)) = (self.threshold, self.index_of_cpu.get(&cpu)) else { return };
        if lat < thr || lat == 0 {
            return;
        }
        self.seq += 1;
        let ct = &mut self.traces[ci];
        ct.tid = t.id.tid;
        ct.push_sample(Sample { seq: self.seq, t_ns: ran_ns, value_ns: lat });
        let (label, tx) = (t.id.label(), &self.tx);
        ct.process(self.pass_start, true, names, &mut |o| match o {
            // No stacks or samples here: the raw code evidence is empty.
            Out::Keep(mut ep, _) => {
                class(episode::class_of(&ep.causes));
                ep.verdict = format!("{label}: {}", ep.verdict);
                let _ = tx.send(EpisodeMsg::Keep(ep));
            }
            Out::Drop { cpu, sample } => {
                let _ = tx.send(EpisodeMsg::Drop(NAME.into(), METRICS[0].into(), cpu, sample));
            }
            Out::Class { kind, .. } => class(kind),
            Out::Stages { .. } => {}
        });
    }

    /// Lets go of the events older than an episode's window.
    fn trim(&mut self, names: &Names) {
        if self.threshold.is_some() {
            for ct in &mut self.traces {
                ct.process(self.pass_start, false, names, &mut |_| {});
            }
        }
    }
}

impl Watch {
    /// The run's plan.
    pub fn plan(&self) -> serde_json::Value {
        serde_json::json!({
            "probe": NAME,
            "metrics": METRICS,
            "settings": self.settings,
            "describe": self.settings.describe(),
            "exceed": self.settings.exceed.describe(),
            "found_at_start": self.found.iter().map(|i| format!("{} {}", i.label(), i.sched())).collect::<Vec<_>>(),
            "trace": {
                "instance": self.instance.name,
                "events": self.instance.enabled,
                "clock": "mono",
                "record_cmd": self.instance.record_cmd.describe(),
            },
        })
    }

    /// Watches until `signal` or the duration, recording into `run`.
    /// `load`: the assessment's load the series are keyed with; `tap`: told
    /// of each thread's series and committed intervals (a monitor).
    pub fn measure(
        self,
        run: &mut OpenRun,
        load: Option<&str>,
        signal: &Arc<AtomicBool>,
        tap: Option<Arc<dyn Tap>>,
    ) -> Result<CellOutcome> {
        let Watch { settings, mut instance, cpus, found } = self;
        let mut out = CellOutcome::default();
        // A watch until stopped (a monitor's) keeps no timeline.
        let timeline = if settings.until_stopped { Timeline::off() } else { Timeline::new(Timeline::MAX_ITEMS) };
        let mut feed = Feed::open(&mut instance, cpus, timeline)?;
        let (tx, episode_rx) = std::sync::mpsc::channel();
        let threshold = settings.cause_threshold_ns;
        let mut writer = Writer {
            store: run.take_store()?,
            sinks: Vec::new(),
            lost_exceedances: 0,
            episodes: threshold.map(|_| (run.run_id, episode_rx)),
            load: load.map(str::to_string),
            tap,
            explained: Vec::new(),

            runtime: Default::default(),
        };
        let mut causes = Causes::new(&settings, instance.timer_entry, &feed.cpus, tx);
        let (cpu0, wall0) = (clock::thread_cpu_ns(), clock::now());
        instance.set_on(true).map_err(anyhow::Error::msg)?;
        let start = clock::now();
        let end = settings.duration_ns.map_or(u64::MAX, |d| start + d);
        let mut threads = Threads::new(&settings, run.run_id, load, start, found);
        let followed = follow(&mut feed, &instance, &mut threads, &mut causes, &mut writer, (signal, end));
        let _ = instance.set_on(false);
        if let Err(e) = followed {
            out.store_error = Some(e);
        }
        threads.check_exits(clock::now(), true);
        let profile = threads.profiler.take().map(|p| p.finish(settings.late_when(), load));
        drop(causes.tx);
        drain_writer(&mut writer, &mut out);
        let wall_ns = clock::now().saturating_sub(wall0);
        let reader_cpu_ns = clock::thread_cpu_ns().saturating_sub(cpu0);
        if out.store_error.is_none()
            && let Err(e) = threads.store_extras(&mut writer)
        {
            out.store_error = Some(e);
        }
        out.lost_exceedances = writer.lost_exceedances;
        run.put_store(writer.store);

        let mut report = feed.report(&causes.traces, reader_cpu_ns, wall_ns);
        let timeline = report.timeline.take();
        let opts = TraceOpts {
            cause_threshold: CauseThreshold::Fixed(threshold.unwrap_or(0)),
            max_episodes: if threshold.is_some() { settings.max_episodes } else { 0 },
            buffer_kb: settings.buffer_kb,
            clock: TraceClock::Mono,
            stacks: StacksMode::Off,
            sample_hz: 0,
            classify_all: settings.classify_all,
            timeline: !settings.until_stopped,
            stop: Default::default(),
        };
        let zeros: Vec<Arc<AtomicU64>> = report.per_cpu.iter().map(|_| Arc::new(AtomicU64::new(0))).collect();
        let (summary, trace_notes) = trace::summarize(instance, report, &opts, &zeros, false, CodeReport::default());
        out.notes = threads.notes(&summary, wall_ns);
        out.notes.extend(trace_notes);
        run.store_timeline(timeline, &mut out.notes);
        if let Some(p) = &profile {
            out.notes.push(format!(
                "watch: {} threads sampled at {} Hz ({}); {} late periods ({}) against {} on time",
                p.threads.len(),
                p.hz,
                p.event,
                p.threads.iter().map(|t| t.late_periods).sum::<u64>(),
                p.late_when,
                p.threads.iter().map(|t| t.on_time_periods).sum::<u64>()
            ));
        }
        let mut summary = summary;
        summary.watch_profile = profile;
        out.trace = Some(summary);
        Ok(out)
    }
}

/// The trace as the reader holds it: each CPU's buffer, the decoder, and
/// the merge of their events in time order.
struct Feed {
    cpus: Vec<usize>,
    buffers: Vec<Buffer>,
    decoder: Decoder,
    page: Vec<u8>,
    merge: Merge,
    /// Events read per CPU.
    events_on: Vec<u64>,
    /// The application's markers.
    markers: Markers,
    /// Each CPU's events folded into the whole window's timeline.
    folds: Vec<CpuFold>,
    timeline: Timeline,
}

impl Feed {
    /// Opens every CPU's buffer of `instance` and takes its decoder.
    fn open(instance: &mut Instance, cpus: Vec<usize>, timeline: Timeline) -> Result<Feed> {
        let buffers = instance
            .buffers(&cpus)
            .map_err(anyhow::Error::msg)?
            .into_iter()
            .map(|f| Buffer::new(f, TraceClock::Mono))
            .collect();
        Ok(Feed {
            events_on: vec![0; cpus.len()],
            folds: cpus.iter().map(|&c| CpuFold::new(u32::try_from(c).unwrap_or(u32::MAX))).collect(),
            cpus,
            buffers,
            decoder: std::mem::take(&mut instance.decoder),
            page: vec![0u8; instance.layout.page_size],
            merge: Merge::default(),
            markers: Markers::default(),
            timeline,
        })
    }

    /// Reads every CPU's buffer once into the merge.
    fn drain(&mut self, layout: &PageLayout) {
        for (i, b) in self.buffers.iter_mut().enumerate() {
            let (m, n, fold) = (&mut self.merge, &mut self.events_on[i], &mut self.folds[i]);
            let cpu = u32::try_from(self.cpus[i]).unwrap_or(u32::MAX);
            b.drain_marked(layout, &mut self.decoder, &mut self.page, (cpu, &mut self.markers), |e| {
                if e.kind == crate::trace::event::Kind::Lost {
                    return;
                }
                *n += 1;
                fold.event(&e);
                m.push(i as u32, e)
            });
            fold.flush(&self.decoder, &mut self.timeline);
        }
    }

    /// What was read, per CPU; closes the buffers (before the instance is
    /// removed).
    fn report(mut self, traces: &[CpuTrace], cpu_ns: u64, wall_ns: u64) -> ReaderReport {
        for f in &mut self.folds {
            f.finish(&self.decoder, &mut self.timeline);
        }
        let per_cpu = self
            .cpus
            .iter()
            .zip(&self.buffers)
            .zip(&self.events_on)
            .map(|((&c, b), &events)| TraceCpu {
                cpu: c as i64,
                events,
                lost: b.missed,
                bytes: b.bytes,
                samples: 0,
                decomposed: 0,
                incomplete: 0,
                switch_inferred: 0,
                samples_dropped: 0,
                read_errors: b.read_errors,
                remote_wakings: 0,
                by_kind: Vec::new(),
            })
            .collect();
        ReaderReport {
            per_cpu,
            cpu_ns,
            wall_ns,
            episodes_built: traces.iter().map(|t| t.episodes_built).sum(),
            episodes_kept: traces.iter().map(|t| t.kept() as u64).sum(),
            unknown_records: self.decoder.unknown,
            stacks: None,
            profile: None,
            above: Default::default(),
            own: Default::default(),
            maps_lost: 0,
            // In time order over the CPUs.
            markers: {
                let mut m = Markers::default();
                m.extend(self.markers.list, self.markers.dropped);
                m
            },
            timeline: Some(self.timeline.finish()),
        }
    }
}

/// The reader's loop: every [`PASS`], reads the buffers, follows the
/// watched threads through the events older than [`GRACE_NS`] (all at the
/// last pass), ends the series of the threads that exited and hands the
/// finished intervals to the store; until the signal or `end`.
fn follow(
    feed: &mut Feed,
    instance: &Instance,
    threads: &mut Threads<'_>,
    causes: &mut Causes,
    writer: &mut Writer,
    (signal, end): (&AtomicBool, u64),
) -> Result<()> {
    let policy_cache: RefCell<HashMap<i32, Option<u32>>> = RefCell::new(HashMap::new());
    let policy = |pid: i32| *policy_cache.borrow_mut().entry(pid).or_insert_with(|| policy_of(pid));
    let mut next_exit_check = threads.start + EXIT_CHECK_NS;
    let mut obs = Vec::new();
    // The task each CPU's events showed current last in this pass: looked
    // at once (the trace's view of a task holds for a pass: every event of
    // it is decoded before any is followed).
    let mut current = vec![0i32; feed.cpus.len()];
    loop {
        let last = signal.load(Relaxed) || clock::now() >= end;
        let pass_start = clock::now();
        causes.pass_start = pass_start;
        feed.drain(&instance.layout);
        // The samples up to now, before the events that end their periods.
        if let Some(p) = &mut threads.profiler {
            p.drain();
        }
        let watermark = if last { u64::MAX } else { pass_start.saturating_sub(GRACE_NS) };
        let names = Names { decoder: &feed.decoder, policy: &policy };
        current.fill(0);
        for (ci, e) in feed.merge.take_until(watermark) {
            let cpu = feed.cpus[ci as usize];
            let [now_on, next] = shown(&e);
            if std::mem::replace(&mut current[ci as usize], now_on) != now_on {
                threads.discover(now_on, &feed.decoder.tasks, cpu, e.ts, true);
            }
            threads.discover(next, &feed.decoder.tasks, cpu, e.ts, false);
            causes.push_event(ci as usize, e);
            threads.tracker.event(cpu as i64, &e, &mut |o| obs.push(o));
            for o in obs.drain(..) {
                crate::trace::timeline::watched(&mut feed.timeline, &feed.decoder, &o);
                threads.observe(o, e.ts, writer, causes, &names)?;
            }
        }
        causes.trim(&names);
        // What the timeline settled, stored now (episodes or none).
        if let Some(part) = feed.timeline.part() {
            writer.store.add_timeline_part(threads.run_id, &part)?;
        }
        let now = clock::now();
        if now >= next_exit_check || last {
            next_exit_check = now + EXIT_CHECK_NS;
            threads.check_exits(now, last);
        }
        threads.checkpoint(now);
        writer.poll()?;
        if threads.settings.until_stopped {
            threads.release(writer)?;
        }
        if last {
            return Ok(());
        }
        std::thread::sleep(PASS);
    }
}

/// Waits until the writer has committed everything the recorders sent
/// (not after a store error).
fn drain_writer(writer: &mut Writer, out: &mut CellOutcome) {
    while out.store_error.is_none() {
        match writer.poll() {
            Ok(true) => break,
            Ok(false) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => out.store_error = Some(e),
        }
    }
}

/// The watched threads as a cell of the assessment (`rtscope run --watch`,
/// or `watch` in a plan's probes): watched under each load for the cell's
/// length, each cell with a tracefs instance of its own.
pub struct WatchCell {
    pub settings: Settings,
}

impl OwnCell for WatchCell {
    fn name(&self) -> &'static str {
        NAME
    }

    fn plan(&self) -> serde_json::Value {
        serde_json::to_value(&self.settings).unwrap_or_default()
    }

    fn metrics(&self) -> Vec<String> {
        METRICS.iter().map(|m| m.to_string()).collect()
    }

    fn describe(&self) -> String {
        format!("wake-up latency, period, runtime, response per thread; {}", self.settings.describe())
    }

    fn measure(
        &self,
        run: &mut OpenRun,
        load: &str,
        duration_ns: u64,
        _effective: (sched::Policy, u8),
        signal: &Arc<AtomicBool>,
    ) -> Result<CellOutcome> {
        let mut settings = self.settings.clone();
        settings.duration_ns = Some(duration_ns);
        let mut warnings = Vec::new();
        let watch = prepare(settings, &mut warnings)?;
        let mut out = watch.measure(run, Some(load), signal, None)?;
        for n in &mut out.notes {
            if let Some(rest) = n.strip_prefix("watch: ") {
                *n = format!("watch under {load}: {rest}");
            }
        }
        out.notes.extend(warnings.into_iter().map(|w| format!("watch under {load}: {}", w.message)));
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
