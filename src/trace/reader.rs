//! The reader thread: at SCHED_OTHER, off the measured CPUs when it can,
//! it drains every traced CPU's `trace_pipe_raw` (non-blocking, one page
//! per read) every few milliseconds, decodes the records, takes the
//! probe's samples from their rings, and hands the stages to their
//! recorders and the episodes to the writer.

use super::TraceClock;
use super::decompose::{CpuTrace, Names, Out};
use super::event::{Decoder, Ev, Kind};
use super::format::PageLayout;
use super::irqtime::CpuRuntimes;
use super::page::Page;
use super::remainder::Gap;
use super::stacks::{self, StackDecoder};
use super::symbols::{Counts, RawCode, Sink, SymMsg};
use super::timeline::{self, CpuFold};
use crate::recorder::{EpisodeMsg, Recorder, Sample};
use crate::sys::clock;
use crate::sys::cpuidle::{self, IdleState};
use crate::sys::perf::{MapEvent, MapWatch, Sampler};
use rtscope_model::episode::timeline::Timeline;
use rtscope_model::episode::{CauseKind, Episode, Marker, Markers, Stages, TraceCpu};
use rtscope_model::hist::{Tally, quantile};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering::Acquire};
use std::time::Duration;

/// How often the buffers are drained.
const PERIOD: Duration = Duration::from_millis(10);

/// One CPU's binary buffer (`per_cpu/cpuN/trace_pipe_raw`), read
/// non-blocking a page at a time, and what reading it cost.
pub struct Buffer {
    file: File,
    /// Mapping of the `local` trace clock; None when it is `mono`.
    clock: Option<LocalClock>,
    pub bytes: u64,
    /// Events the kernel says it lost before a page (the page's flag).
    pub missed: u64,
    pub read_errors: u64,
}

impl Buffer {
    pub fn new(file: File, clock: TraceClock) -> Buffer {
        let clock = (clock == TraceClock::Local).then(LocalClock::default);
        Buffer { file, clock, bytes: 0, missed: 0, read_errors: 0 }
    }

    /// [`Buffer::drain`], the application's markers kept apart in
    /// `markers` (`cpu`'s, their texts taken from the decoder).
    pub fn drain_marked(
        &mut self,
        layout: &PageLayout,
        decoder: &mut Decoder,
        page: &mut [u8],
        (cpu, markers): (u32, &mut Markers),
        mut each: impl FnMut(Ev),
    ) {
        let mut got: Vec<(u64, i32, u32)> = Vec::new();
        self.drain(layout, decoder, page, |e| match e.kind {
            // Its text is the decoder's until the drain is over.
            Kind::Marker(i) => got.push((e.ts, e.pid, i)),
            _ => each(e),
        });
        let mut texts = std::mem::take(&mut decoder.markers);
        for (t_ns, pid, i) in got {
            let text = texts.get_mut(i as usize).map(std::mem::take).unwrap_or_default();
            markers.push(Marker { t_ns, cpu, pid, text });
        }
    }

    /// Reads every page the kernel has for this CPU; `each` takes its
    /// events in time order (CLOCK_MONOTONIC).
    pub fn drain(&mut self, layout: &PageLayout, decoder: &mut Decoder, page: &mut [u8], mut each: impl FnMut(Ev)) {
        loop {
            match self.file.read(page) {
                Ok(0) => break,
                Ok(n) => {
                    self.bytes += n as u64;
                    let Ok(p) = Page::parse(layout, &page[..n]) else {
                        self.read_errors += 1;
                        continue;
                    };
                    self.missed += p.missed.unwrap_or(0);
                    // The kernel lost events before this page: said where.
                    if p.missed.is_some() {
                        let mut e = Ev { ts: p.base_ts, pid: -1, kind: Kind::Lost };
                        if let Some(clock) = &mut self.clock {
                            e.ts = clock.peek(e.ts).unwrap_or(0).max(clock.last_ts);
                        }
                        each(e);
                    }
                    for r in p.records() {
                        let Some(mut e) = decoder.decode(r) else { continue };
                        if let Some(clock) = &mut self.clock {
                            let Some(ts) = clock.map(&e) else { continue };
                            e.ts = ts;
                        }
                        each(e);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.read_errors += 1;
                    break;
                }
            }
        }
    }
}

/// One traced CPU of a probe.
pub struct Lane {
    buffer: Buffer,
    trace: CpuTrace,
    samples: rtrb::Consumer<Sample>,
    /// The stage series, in [`Stages::SERIES`] order.
    stages: Vec<Recorder>,
    /// `--stacks`: this CPU's buffer of the stack instance.
    stacks: Option<(File, StackDecoder)>,
    stack_lost: u64,
    /// `--sample-hz`: the profiler on this CPU.
    sampler: Option<Sampler>,
    /// The processes whose user code this pass's wake-up stacks show, each
    /// with its first user address, for the symbols thread to read their
    /// mappings while they live (again after an `exec`). Not the
    /// profiler's: it samples every process on the CPU, and reading a
    /// process's maps costs kernel time on the CPUs measured (tens of us
    /// for a large one, not preemptible on a kernel without full
    /// preemption); a wake-up's interrupted process is the one an episode
    /// names.
    seen: Vec<(i32, u64)>,
    /// The application's markers read from this CPU's buffer (the first
    /// [`Markers::MAX`], and how many came after them).
    markers: Markers,
    /// This CPU's events folded into the run's timeline.
    fold: CpuFold,
    /// The probe's samples' name in the timeline (`wakeup latency`).
    label: String,
    /// This CPU's interrupt and softirq runtimes.
    runtimes: CpuRuntimes,
}

impl Lane {
    pub fn new(
        buffer: File,
        trace: CpuTrace,
        samples: rtrb::Consumer<Sample>,
        stages: Vec<Recorder>,
        (clock, checkpoint_ns): (TraceClock, u64),
    ) -> Lane {
        Lane {
            buffer: Buffer::new(buffer, clock),
            samples,
            stages,
            stacks: None,
            stack_lost: 0,
            sampler: None,
            seen: Vec::new(),
            markers: Markers::default(),
            fold: CpuFold::new(u32::try_from(trace.cpu).unwrap_or(u32::MAX)),
            label: format!("{} {}", trace.probe, trace.metric),
            runtimes: CpuRuntimes::new(trace.cpu, checkpoint_ns),
            trace,
        }
    }

    /// Adds this CPU's stack buffer (`--stacks`).
    pub fn with_stacks(mut self, buffer: File, decoder: StackDecoder) -> Lane {
        self.stacks = Some((buffer, decoder));
        self
    }

    /// Adds this CPU's profiler (`--sample-hz`); its period in ns.
    pub fn with_sampler(mut self, sampler: Sampler) -> Lane {
        // cpu-clock samples every period; cycles at that mean frequency.
        self.trace.period_ns = sampler.period_ns.max(1);
        self.sampler = Some(sampler);
        self
    }

    /// Whether this lane has stacks or samples to name.
    pub fn has_code(&self) -> bool {
        self.stacks.is_some() || self.sampler.is_some()
    }

    /// The profiler, to start and stop it.
    pub fn sampler(&self) -> Option<&Sampler> {
        self.sampler.as_ref()
    }

    /// Reads the stack buffer and the profiler's ring.
    fn drain_code(&mut self, layout: &PageLayout, page: &mut [u8], last: bool) {
        if let Some((buffer, dec)) = &mut self.stacks {
            let clock = &self.buffer.clock;
            let map = |ts: u64| match clock {
                Some(c) => c.peek(ts),
                None => Some(ts),
            };
            let mut got = VecDeque::new();
            let (bytes, lost) = stacks::drain(buffer, layout, page, dec, &map, &mut got);
            if last {
                dec.flush(&mut got);
            }
            self.buffer.bytes += bytes;
            self.stack_lost += lost;
            for w in got {
                if let Some(&first) = w.user.first()
                    && self.seen.last().is_none_or(|&(pid, _)| pid != w.tgid)
                {
                    self.seen.push((w.tgid, first));
                }
                self.trace.push_stack(w);
            }
        }
        if let Some(s) = &mut self.sampler {
            let trace = &mut self.trace;
            s.drain(&mut |x| trace.push_profile(x));
        }
    }

    /// Reads every page the kernel has for this CPU, its stacks and
    /// samples, and the probe's samples; the events and samples folded
    /// into `timeline` too.
    fn drain(&mut self, layout: &PageLayout, decoder: &mut Decoder, page: &mut [u8], timeline: &mut Timeline) {
        let (trace, fold, runtimes) = (&mut self.trace, &mut self.fold, &mut self.runtimes);
        let cpu = u32::try_from(trace.cpu).unwrap_or(u32::MAX);
        self.buffer.drain_marked(layout, decoder, page, (cpu, &mut self.markers), |e| {
            runtimes.event(&e);
            if e.kind == Kind::Lost {
                return;
            }
            fold.event(&e);
            trace.push_event(e)
        });
        fold.flush(decoder, timeline);
        self.drain_code(layout, page, false);
        while let Ok(s) = self.samples.pop() {
            timeline::sample(timeline, (self.trace.cpu, self.trace.tid, &self.label), s.t_ns, s.value_ns);
            self.trace.push_sample(s);
        }
    }
}

/// The `local` trace clock (sched_clock) mapped to CLOCK_MONOTONIC by the
/// hrtimer expiries, whose `now` field is CLOCK_MONOTONIC.
#[derive(Default)]
struct LocalClock {
    /// CLOCK_MONOTONIC - trace clock, once an expiry was seen.
    offset: Option<i64>,
    /// Trace-clock time of the last anchor.
    anchor_ts: u64,
    /// The last mapped time: mapped times never go backwards on a CPU.
    last_ts: u64,
}

/// How fast the mapping may drift down between anchors: 50 ppm.
const DRIFT_DIVISOR: u64 = 20_000;

impl LocalClock {
    /// The CLOCK_MONOTONIC time of `e`, None before the first anchor. Each
    /// anchor (`now`, read by the hrtimer code, and the trace time of its
    /// event, a little later) underestimates the offset by that delay, so
    /// the mapping keeps the largest recent one, letting it drift down by
    /// at most 50 ppm.
    fn map(&mut self, e: &Ev) -> Option<u64> {
        if let Kind::ExpireEntry { now, .. } = e.kind {
            self.offset = Some(next_offset(self.offset, self.anchor_ts, now, e.ts));
            self.anchor_ts = e.ts;
        }
        let ts = ((e.ts as i64 + self.offset?) as u64).max(self.last_ts);
        self.last_ts = ts;
        Some(ts)
    }

    /// The CLOCK_MONOTONIC time of a trace-clock time `ts` of another
    /// buffer of this CPU (the stack instance's), by the current mapping.
    fn peek(&self, ts: u64) -> Option<u64> {
        Some((ts as i64 + self.offset?) as u64)
    }
}

/// The offset (CLOCK_MONOTONIC - trace clock) after an anchor `now` at
/// trace time `ts`, given the previous offset and its anchor's time.
fn next_offset(prev: Option<i64>, prev_ts: u64, now: i64, ts: u64) -> i64 {
    let candidate = now - ts as i64;
    match prev {
        Some(o) => candidate.max(o - (ts.saturating_sub(prev_ts) / DRIFT_DIVISOR) as i64),
        None => candidate,
    }
}

pub struct Reader {
    pub layout: PageLayout,
    pub decoder: Decoder,
    pub lanes: Vec<Lane>,
    /// To the symbols thread, which names the kept episodes' code and
    /// forwards them to the writer, or to the writer itself.
    pub episodes: Sink,
    /// The kernel's records of forks, execs and executable mappings, one
    /// per online CPU, where the symbols thread names user code (else
    /// none), and those read but not handed over yet (time, record).
    pub maps: Vec<MapWatch>,
    pub told: Vec<(u64, MapEvent)>,
    /// The probe threads' wakings on the CPUs not traced
    /// ([`crate::trace::wakes`]): each CPU's buffer.
    pub wakes: Vec<(usize, Buffer)>,
    /// The whole window's timeline ([`Timeline::MAX_ITEMS`] at most).
    pub timeline: Timeline,
    /// `--stop-irq` / `--stop-thread`, and the first sample above one:
    /// (its flag, CPU, value and time), for [`Reader::run`] to tell.
    pub stop_on: super::StageStop,
    pub stage_hit: Option<(&'static str, i64, u64, u64)>,
}

/// What the reader reports at the end.
pub struct ReaderReport {
    pub per_cpu: Vec<TraceCpu>,
    pub cpu_ns: u64,
    pub wall_ns: u64,
    pub episodes_built: u64,
    pub episodes_kept: u64,
    pub unknown_records: u64,
    /// `--stacks`: wake-ups with stacks, episodes with one, the unwind's
    /// cost (p50, max) and events the stack instance lost.
    pub stacks: Option<(u64, u64, u64, u64, u64)>,
    /// `--sample-hz`: the profiler's event, rate, samples, samples inside
    /// episodes and samples lost.
    pub profile: Option<(crate::sys::perf::Source, u64, u64, u64, u64)>,
    /// rtscope's own helper threads that were an episode's main cause
    /// (thread time, or unaccounted time while they ran): (kind, name) ->
    /// (episodes, the most such time in one, ns); and under
    /// [`UNWIND`] the episodes whose stacks took a tenth of their latency
    /// or more to record, inside the interrupt that woke the probe (counted
    /// as they are built: also those a worse one later pushed out).
    pub own: OwnHelpers,
    /// Real-time threads that held a probe off from a priority at or above
    /// its own (an IRQ's thread at SCHED_FIFO 50 over a probe at 40): see
    /// [`note_above_probe`].
    pub above: AboveProbe,
    /// Mapping records the kernel could not write (their rings full).
    pub maps_lost: u64,
    /// The application's markers of every CPU, in time order.
    pub markers: Markers,
    /// The traced window's timeline, to store with the run.
    pub timeline: Option<Timeline>,
}

/// (thread name, its scheduling) -> (episodes it led, the most time it
/// held the probe off in one, ns, its CPUs, the probe threads' scheduling).
pub type AboveProbe = BTreeMap<(String, String), (u64, u64, std::collections::BTreeSet<i64>, String)>;

/// A thread's real-time priority from its scheduling as an episode names it
/// (`SCHED_FIFO 50`); None for the other policies.
fn rt_priority(sched: &str) -> Option<u32> {
    let (policy, prio) = sched.split_once(' ')?;
    matches!(policy, "SCHED_FIFO" | "SCHED_RR").then(|| prio.parse().ok()).flatten()
}

/// Counts `e` in `above` when its main cause is a real-time thread at a
/// priority at or above the probe thread's (`probe`, its scheduling as the
/// kernel holds it): one it cannot preempt.
fn note_above_probe(e: &Episode, probe: Option<&crate::sys::sched::Attr>, above: &mut AboveProbe) {
    let Some(probe) = probe.filter(|a| matches!(a.policy, crate::sys::sched::SCHED_FIFO | crate::sys::sched::SCHED_RR))
    else {
        return;
    };
    let Some(main) = rtscope_model::episode::main_cause(&e.causes) else { return };
    let Some(sched) = main.sched.as_deref().filter(|_| main.kind == CauseKind::Thread) else { return };
    if rt_priority(sched).is_some_and(|p| p >= probe.priority) {
        let own = format!("{} {}", crate::sys::sched::policy_name(probe.policy), probe.priority);
        let o = above.entry((main.name.clone(), sched.to_string())).or_insert_with(|| (0, 0, Default::default(), own));
        o.0 += 1;
        o.1 = o.1.max(main.ns);
        o.2.insert(e.cpu);
    }
}

/// rtscope's helper threads, which are not part of what it measures (its
/// loads, disturber, osbench parties and netlat senders are).
const HELPERS: [&str; 5] = ["rtscope-writer", "rtscope-trace", "rtscope-symbols", "rtscope-progress", "rtscope-proc"];

/// Counts `e` in `own` when its main cause is one of rtscope's own helper
/// threads (a thread of this process, by a name of [`HELPERS`] as the
/// kernel keeps it, 15 bytes): its thread time, or unaccounted time while
/// it ran (the probe's timer interrupt late in its system call, or the
/// host's).
fn note_own_helper(e: &Episode, raw: &RawCode, own: &mut OwnHelpers) {
    if let Some((w, _)) = &raw.stack
        && w.unwind_ns.saturating_mul(10) >= e.latency_ns
    {
        let o = own.entry((UNWIND.0, UNWIND.1.into())).or_default();
        (o.0, o.1) = (o.0 + 1, o.1.max(w.unwind_ns));
    }
    let Some(main) = rtscope_model::episode::main_cause(&e.causes) else { return };
    let helper = HELPERS.iter().any(|h| h.get(..15).unwrap_or(h) == main.name);
    if !matches!(main.kind, CauseKind::Thread | CauseKind::Unaccounted) || !helper {
        return;
    }
    if let Some(tid) = main.pid.filter(|&t| t > 0)
        && std::path::Path::new(&format!("/proc/self/task/{tid}")).exists()
    {
        let o = own.entry((main.kind, main.name.clone())).or_default();
        (o.0, o.1) = (o.0 + 1, o.1.max(main.ns));
    }
}

/// See [`ReaderReport::own`].
pub type OwnHelpers = BTreeMap<(CauseKind, String), (u64, u64)>;
/// The key of `--stacks`' own unwinds in [`OwnHelpers`].
pub const UNWIND: (CauseKind, &str) = (CauseKind::Timer, "--stacks");

/// What a CPU has counted: its steal time (ns) and its idle states'
/// entries. Read at the start of the run, and at most once a pass after
/// it (when a kept episode has unaccounted time), to say what the CPU
/// counted during the run.
struct Counted {
    steal_ns: u64,
    idle: Vec<IdleState>,
}

impl Counted {
    fn of(cpu: i64) -> Counted {
        Counted { steal_ns: steal_ns(cpu), idle: usize::try_from(cpu).map(cpuidle::states).unwrap_or_default() }
    }

    /// What was counted between `self` (the start) and `now`, into `gap`:
    /// the steal time, and the idle states entered when the CPU was idle.
    fn since(&self, now: &Counted, gap: &mut Gap) {
        gap.steal_ns = now.steal_ns.saturating_sub(self.steal_ns);
        if gap.idle {
            gap.idle_states = Some(cpuidle::entered(&self.idle, &now.idle));
            gap.idle_poll = cpuidle::polls_in_idle();
        }
    }
}

/// Steal time the kernel counted on `cpu` (/proc/stat, ns).
fn steal_ns(cpu: i64) -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let want = format!("cpu{cpu} ");
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    stat.lines()
        .find(|l| l.starts_with(&want))
        .and_then(|l| l.split_whitespace().nth(8))
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(0, |t| t * (1_000_000_000 / hz))
}

/// A task's scheduling policy from `/proc/<pid>/stat` (field 41).
pub fn policy_of(pid: i32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(38)?.parse().ok()
}

impl Reader {
    /// Runs until `done` (set once every measuring thread has finished),
    /// then drains what is left and finishes the stage series. A sample
    /// above a [`super::StageStop`] limit is kept in `hit` and sets `stop`,
    /// which ends the measuring threads.
    pub fn run(
        mut self,
        start_ns: u64,
        done: &AtomicBool,
        (stop, hit): (&AtomicBool, &super::StageHit),
    ) -> ReaderReport {
        let cpu0 = clock::thread_cpu_ns();
        let wall0 = clock::now();
        for lane in &mut self.lanes {
            for r in &mut lane.stages {
                r.start(start_ns);
            }
            lane.runtimes.start(wall0);
        }
        let cache: RefCell<HashMap<i32, Option<u32>>> = RefCell::new(HashMap::new());
        let policy = |pid: i32| *cache.borrow_mut().entry(pid).or_insert_with(|| policy_of(pid));
        let mut page = vec![0u8; self.layout.page_size];
        let base: Vec<Counted> = self.lanes.iter().map(|l| Counted::of(l.trace.cpu)).collect();
        let mut own = BTreeMap::new();
        let mut above = BTreeMap::new();
        let probes: Vec<Option<crate::sys::sched::Attr>> =
            self.lanes.iter().map(|l| crate::sys::sched::attr_of(l.trace.tid)).collect();
        loop {
            let last = done.load(Acquire);
            self.pass((start_ns, last), &mut page, &policy, &base, (&mut own, &mut above, &probes));
            if let Some((flag, cpu, value, t)) = self.stage_hit.take() {
                hit.record(flag, cpu, value, t);
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            if last {
                break;
            }
            std::thread::sleep(PERIOD);
        }
        let now = clock::now();
        let mut report = ReaderReport {
            per_cpu: Vec::new(),
            cpu_ns: clock::thread_cpu_ns().saturating_sub(cpu0),
            wall_ns: now.saturating_sub(wall0),
            episodes_built: 0,
            episodes_kept: 0,
            unknown_records: self.decoder.unknown,
            stacks: None,
            profile: None,
            own,
            above,
            maps_lost: self.maps.iter().map(MapWatch::lost).sum(),
            markers: Markers::default(),
            timeline: None,
        };
        self.code_totals(&mut report);
        self.finish(now, report)
    }

    /// One pass: every lane's buffer drained (its code's too on the `last`
    /// pass) and its events decomposed; the stage series recorded, the
    /// episodes, drops and classes sent on. `base`: what each lane's CPU had
    /// counted at the start; `own`: the episodes rtscope's own helper
    /// threads caused (see [`note_own_helper`]).
    fn pass(
        &mut self,
        (start_ns, last): (u64, bool),
        page: &mut [u8],
        policy: &dyn Fn(i32) -> Option<u32>,
        base: &[Counted],
        (own, above, probes): (&mut OwnHelpers, &mut AboveProbe, &[Option<crate::sys::sched::Attr>]),
    ) {
        let pass_start = clock::now();
        self.drain_wakes(pass_start, page);
        for lane in &mut self.lanes {
            lane.drain(&self.layout, &mut self.decoder, page, &mut self.timeline);
            if last {
                lane.drain_code(&self.layout, page, true);
            }
        }
        let now = clock::now();
        for lane in &mut self.lanes {
            if let Some(m) = lane.runtimes.ship(&lane.trace.probe, &self.decoder, now, last) {
                self.episodes.send(SymMsg::Pass(m));
            }
        }
        self.hand_over_told(last);
        if let Some(part) = self.timeline.part() {
            self.episodes.send(SymMsg::Pass(EpisodeMsg::Timeline(Box::new(part))));
        }
        // The processes the wake-ups interrupted, before their episodes: a
        // short-lived one may be gone when those are named.
        let seen: Vec<(i32, u64)> =
            self.lanes.iter_mut().flat_map(|l| l.seen.drain(..)).filter(|&(p, _)| p > 0).collect();
        if !seen.is_empty() {
            self.episodes.send(SymMsg::Seen(seen));
        }
        let names = Names { decoder: &self.decoder, policy };
        let (stop_on, stage_hit) = (self.stop_on, &mut self.stage_hit);
        for ((lane, base), probe_attr) in self.lanes.iter_mut().zip(base).zip(probes) {
            let (stages, tx) = (&mut lane.stages, &self.episodes);
            let (probe, metric, cpu) = (lane.trace.probe.clone(), lane.trace.metric, lane.trace.cpu);
            let mut now: Option<Counted> = None;
            lane.trace.process(pass_start, last, &names, &mut |o| match o {
                Out::Stages { t_ns, stages: st } => {
                    record_stages(stages, t_ns, &st);
                    if stage_hit.is_none()
                        && let Some((flag, v)) = stop_on.breached(&st)
                    {
                        *stage_hit = Some((flag, cpu, v, t_ns));
                    }
                }
                Out::Keep(e, mut raw) => {
                    if let Some(g) = raw.gap.as_mut() {
                        base.since(now.get_or_insert_with(|| Counted::of(e.cpu)), g);
                        g.run_ns = e.woke_ns.saturating_sub(start_ns);
                    }
                    note_own_helper(&e, &raw, own);
                    note_above_probe(&e, probe_attr.as_ref(), above);
                    tx.send(SymMsg::Keep(e, raw));
                }
                Out::Drop { cpu, sample } => {
                    tx.send(SymMsg::Pass(EpisodeMsg::Drop(probe.clone(), metric.into(), cpu, sample)));
                }
                // A monitor's count of a sample explained but not kept.
                Out::Class { cpu, kind } => {
                    tx.send(SymMsg::Pass(EpisodeMsg::Class(probe.clone(), metric.into(), cpu, kind)));
                }
            });
        }
    }

    /// Puts the probe threads' wakings recorded on other CPUs, all of them
    /// up to `upto` (read after it), among their own CPUs' events. Their
    /// buffers are read unmapped: a `local` trace clock (sched_clock, the
    /// same on every CPU where the TSC is stable) is mapped to
    /// CLOCK_MONOTONIC by the woken thread's CPU's mapping; a waking read
    /// before that CPU has one is left out.
    fn drain_wakes(&mut self, upto: u64, page: &mut [u8]) {
        if self.wakes.is_empty() {
            return;
        }
        let lanes = &mut self.lanes;
        for (cpu, buffer) in &mut self.wakes {
            let cpu = u16::try_from(*cpu).unwrap_or(u16::MAX);
            buffer.drain(&self.layout, &mut self.decoder, page, |e| {
                if let Kind::Waking { pid } = e.kind
                    && let Some(l) = lanes.iter_mut().find(|l| l.trace.tid == pid)
                    && let Some(ts) = l.buffer.clock.as_ref().map_or(Some(e.ts), |c| c.peek(e.ts))
                {
                    l.trace.push_remote_waking(ts, pid, cpu);
                }
            });
        }
        for l in lanes.iter_mut() {
            l.trace.remote_upto = Some(upto);
        }
    }

    /// The forks, execs and mappings the kernel told, to the symbols thread
    /// before the wake-ups that may show them, in one order over the CPUs:
    /// those older than this pass's start now, the later ones (another
    /// ring may still be writing their predecessors) at the next pass, all
    /// at the `last`; then a mark where the kernel lost some.
    fn hand_over_told(&mut self, last: bool) {
        let cut = if last { u64::MAX } else { clock::now() };
        let lost = |maps: &[MapWatch]| maps.iter().map(MapWatch::lost).sum::<u64>();
        let before = lost(&self.maps);
        let told = &mut self.told;
        for w in &mut self.maps {
            w.drain(&mut |t, m| told.push((t, m)));
        }
        told.sort_by_key(|x| x.0);
        let later = told.partition_point(|x| x.0 < cut);
        let mut now: Vec<MapEvent> = told.drain(..later).map(|x| x.1).collect();
        if lost(&self.maps) > before {
            now.push(MapEvent::Lost);
        }
        if !now.is_empty() {
            self.episodes.send(SymMsg::Mapped(now));
        }
    }

    /// The code's figures over every lane: `--stacks`' wake-ups, matches,
    /// unwind cost and losses, `--sample-hz`'s samples; the run's sample
    /// counts go to the symbols thread.
    fn code_totals(&mut self, report: &mut ReaderReport) {
        let mut counts = Counts::default();
        let mut cost = Tally::new();
        for lane in &mut self.lanes {
            let t = &mut lane.trace;
            if lane.stacks.is_some() {
                let s = report.stacks.get_or_insert((0, 0, 0, 0, 0));
                s.0 += t.stacks_taken;
                s.1 += t.stacks_matched;
                s.4 += lane.stack_lost;
                cost.merge(&t.stack_cost);
            }
            if let Some(sampler) = &lane.sampler {
                let p = report.profile.get_or_insert((sampler.source, sampler.hz, 0, 0, 0));
                p.2 += t.prof_samples;
                p.3 += t.prof_inside;
                p.4 += sampler.lost();
                counts.merge(std::mem::take(&mut t.counts));
            }
        }
        if let Some(s) = report.stacks.as_mut()
            && cost.stats.count > 0
        {
            s.2 = quantile(&cost.hist, &cost.stats, 0.5);
            s.3 = cost.stats.max;
        }
        if report.profile.is_some() {
            self.episodes.send(SymMsg::Finish(counts));
        }
    }

    /// The stage series finished at `now`, and each lane's figures.
    fn finish(mut self, now: u64, mut report: ReaderReport) -> ReaderReport {
        for lane in &mut self.lanes {
            lane.fold.finish(&self.decoder, &mut self.timeline);
        }
        report.timeline = Some(std::mem::take(&mut self.timeline).finish());
        for mut lane in self.lanes {
            let m = std::mem::take(&mut lane.markers);
            report.markers.extend(m.list, m.dropped);
            for r in lane.stages {
                r.finish(now);
            }
            let t = &lane.trace;
            report.episodes_built += t.episodes_built;
            report.episodes_kept += t.kept() as u64;
            report.per_cpu.push(TraceCpu {
                cpu: t.cpu,
                events: t.events_in,
                lost: lane.buffer.missed,
                bytes: lane.buffer.bytes,
                samples: t.samples_in,
                decomposed: t.decomposed,
                incomplete: t.incomplete,
                read_errors: lane.buffer.read_errors,
                switch_inferred: t.inferred,
                remote_wakings: t.remote_in,
                samples_dropped: 0,
                by_kind: t.by_kind.clone(),
            });
        }
        report
    }
}

fn record_stages(recs: &mut [Recorder], t_ns: u64, st: &Stages) {
    for (r, v) in recs.iter_mut().zip(st.series_values()) {
        r.record(t_ns, v);
        r.maybe_checkpoint(t_ns);
    }
}

#[cfg(test)]
mod tests {
    /// An episode whose main cause is one of rtscope's helper threads, by
    /// name and by a thread of this process, counts; a load, a thread of
    /// another process and a lesser cause do not.
    #[test]
    fn counts_the_episodes_rtscope_itself_caused() {
        use rtscope_model::episode::CauseKind;
        let mine = crate::sys::sched::thread_id();
        let with_main = |name: &str, pid: i32| {
            let mut e = crate::report::fixtures::code_episode();
            e.causes[0].name = name.into();
            e.causes[0].pid = Some(pid);
            e
        };
        let none = super::RawCode::default();
        let mut own = std::collections::BTreeMap::new();
        super::note_own_helper(&with_main("rtscope-writer", mine), &none, &mut own);
        super::note_own_helper(&with_main("rtscope-writer", mine), &none, &mut own);
        super::note_own_helper(&with_main("rtscope-symbols", mine), &none, &mut own);
        super::note_own_helper(&with_main("load-memory", mine), &none, &mut own);
        super::note_own_helper(&with_main("rtscope-writer", 1), &none, &mut own);
        let mut lesser = with_main("forker", 20092);
        lesser.causes[1] = rtscope_model::episode::Cause {
            kind: CauseKind::Thread,
            name: "rtscope-trace".into(),
            pid: Some(mine),
            ..lesser.causes[1].clone()
        };
        super::note_own_helper(&lesser, &none, &mut own);
        let mut late = with_main("forker", 20092);
        late.causes[0].kind = CauseKind::Irq;
        (late.causes[1].name, late.causes[1].pid) = ("rtscope-trace".into(), Some(mine));
        late.causes[1].ns = 900_000;
        super::note_own_helper(&late, &none, &mut own);
        // Stacks that took a tenth of the latency to record count as
        // --stacks' own, whatever the cause; a quicker unwind does not.
        let e = with_main("forker", 20092);
        let stack = |unwind_ns| super::RawCode {
            stack: Some((super::stacks::WakeStack { unwind_ns, ..Default::default() }, "forker".into())),
            ..Default::default()
        };
        super::note_own_helper(&e, &stack(e.latency_ns / 10), &mut own);
        super::note_own_helper(&e, &stack(e.latency_ns / 10 - 1), &mut own);
        let ns = with_main("x", 0).causes[0].ns;
        let key = |k, n: &str| (k, n.to_string());
        assert_eq!(
            own.into_iter().collect::<Vec<_>>(),
            vec![
                (key(CauseKind::Thread, "rtscope-symbols"), (1, ns)),
                (key(CauseKind::Thread, "rtscope-writer"), (2, ns)),
                (key(CauseKind::Timer, "--stacks"), (1, e.latency_ns / 10)),
                (key(CauseKind::Unaccounted, "rtscope-trace"), (1, 900_000)),
            ]
        );
    }

    /// The offset keeps the anchor with the shortest delay, and follows a
    /// real drift down by at most 50 ppm.
    #[test]
    fn anchors_keep_the_best_offset() {
        let mut off: Option<i64> = None;
        let mut at = 0u64;
        let mut anchor = |now: i64, ts: u64| {
            let o = super::next_offset(off, at, now, ts);
            (off, at) = (Some(o), ts);
            o
        };
        assert_eq!(anchor(1_000_000, 999_000), 1_000);
        // An anchor delayed by 1.8 us, 1 ms later, does not pull the mapping
        // back by 1.8 us: only by 50 ppm of 1 ms.
        assert_eq!(anchor(2_000_000, 2_000_800), 950);
        // A prompt anchor brings it back up at once.
        assert_eq!(anchor(3_000_000, 2_999_000), 1_000);
    }
}
