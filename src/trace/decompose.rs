//! Matching a probe's samples with its CPU's kernel events: the stages of
//! each wake-up and, for the worst samples, the causes (who had the CPU) and
//! a timeline. Pure: events and samples in, [`Out`]s out.
//!
//! The wake-up path of a sample (programmed `P`, woke `W`), searched
//! backwards from `W` among the events after the previous wake-up:
//! `sched_switch` into the probe thread (`S`), before it the
//! `sched_waking` of that thread (`K`), before it the `hrtimer_expire_entry`
//! that ran the wake-up (`X`), before it the timer interrupt's entry (`I`).
//! Stages: irq = I - P, handler = X - I, wake = K - X, thread = S - K,
//! user = W - S. Each mark is clamped to the previous one, so the stages
//! always add up to W - P.
//!
//! A received datagram's path ([`WakePath::NetRx`], `netlat`): its sample
//! runs from the kernel's receive timestamp `P` to the receiver's recvmsg
//! returning `W`. Backwards from `W`: the switch-in `S`, the receiver's
//! `sched_waking` `K`, the NET_RX softirq entry `E` enclosing `K`, and that
//! softirq's exit `X` after `K`. Stages (in the five slots, named
//! [`Stages::NET_NAMES`]): queue = E - P, stack = K - E, softirq = X - K,
//! thread = S - X, user = W - S, clamped alike.

use super::event::{Decoder, Ev, Kind, SOFTIRQ_NAMES};
use super::remainder::Gap;
use super::stacks::WakeStack;
use super::symbols::{Counts, RawCode};
use crate::recorder::Sample;
use crate::sys::perf::PerfSample;
use rtscope_model::episode::{self, Cause, CauseKind, Episode, Host, KindTotal, Lane, Slice, Stages};
use rtscope_model::hist::{Tally, quantile};
use std::collections::{BTreeMap, VecDeque};

/// How samples are chosen for an episode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CauseThreshold {
    /// The running maximum for the first 1000 samples of a CPU, then its
    /// running p99.9, and its p99.99 from 10000 samples on.
    Adaptive,
    Fixed(u64),
}

impl CauseThreshold {
    pub fn describe(self) -> String {
        match self {
            CauseThreshold::Adaptive => "adaptive (running maximum, p99.9 from 1000 samples, p99.99 from 10000)".into(),
            CauseThreshold::Fixed(ns) => format!("fixed {}us", rtscope_model::units::us(ns)),
        }
    }
}

/// What processing a sample yields.
#[derive(Clone, Debug, PartialEq)]
pub enum Out {
    /// The stages of a sample taken at `t_ns`.
    Stages { t_ns: u64, stages: Stages },
    /// A new episode to keep, with its stacks and samples still to name.
    Keep(Box<Episode>, Box<RawCode>),
    /// An episode pushed out of the worst-N by a worse one.
    Drop { cpu: i64, sample: u64 },
    /// A sample above the threshold not kept as an episode (weaker than the
    /// worst-N; with `classify_all`): the class of its largest cause.
    Class { cpu: i64, kind: CauseKind },
}

/// Events before the window start of an episode are summarised into the
/// CPU context only; this bounds a window when samples are far apart.
const RETAIN_NS: u64 = 2_000_000_000;
/// A sample is processed once events after it were read, or once a read
/// pass that started this long after it has ended.
pub const GRACE_NS: u64 = 5_000_000;
/// Events of the wake-up path may carry a time a little before `P` (the
/// trace clock is CLOCK_MONOTONIC's NMI-safe reading).
const EARLY_NS: u64 = 2_000;
/// Per-CPU bound on events held while no sample claims them.
const MAX_HELD: usize = 1 << 21;
/// Slices kept per episode (the last ones before the wake-up).
const MAX_SLICES: usize = 2_000;
/// Profiler samples held with their user stacks, at most (4 MB of stacks
/// per CPU at 8 KiB each, a second of samples at 2 kHz, while the probe's
/// next sample is awaited: a probe held off for seconds). Past it every
/// other one lets its stack go, and from then on only every other new one
/// keeps its own: a long window keeps unwindable samples spread evenly over
/// it; the others' user stacks are the frame-pointer walk.
const MAX_STACKS_HELD: usize = 512;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Frame {
    /// A local timer interrupt; `true` when it ran the probe's wake-up.
    Timer(bool),
    Vector(u8),
    Irq(i32),
    Soft(u8),
}

/// A CPU's context: the current task and the interrupt frames above it.
#[derive(Clone, Debug)]
struct Ctx {
    task: i32,
    frames: Vec<Frame>,
    /// The open softirq frame was entered from the task's own kernel code
    /// (`local_bh_enable`), not on an interrupt's return.
    soft_in_kernel: bool,
    /// The time of the last event, when it ended an interrupt.
    exit_ts: Option<u64>,
}

impl Default for Ctx {
    fn default() -> Ctx {
        Ctx { task: -1, frames: Vec::with_capacity(8), soft_in_kernel: false, exit_ts: None }
    }
}

/// A softirq that begins within this of an interrupt's end, with no event
/// between, runs on that interrupt's return.
const ON_RETURN_NS: u64 = 2_000;

impl Ctx {
    /// Applies an event. Its `pid` (the task current when it was recorded)
    /// also corrects the task when a `sched_switch` was not traced (some
    /// kernels do not trace the switch out of the idle task).
    fn apply(&mut self, e: &Ev, ours: bool) {
        if e.pid >= 0 {
            self.task = e.pid;
        }
        let exit_ts = self.exit_ts.take();
        match e.kind {
            Kind::TimerEntry => self.push(Frame::Timer(ours)),
            Kind::TimerExit => self.pop_to(|f| matches!(f, Frame::Timer(_))),
            Kind::VectorEntry(v) => self.push(Frame::Vector(v)),
            Kind::VectorExit(v) => self.pop_to(|f| f == Frame::Vector(v)),
            Kind::IrqEntry(n) => self.push(Frame::Irq(n)),
            Kind::IrqExit(n) => self.pop_to(|f| f == Frame::Irq(n)),
            Kind::SoftEntry(v) => {
                self.soft_in_kernel = self.frames.is_empty() && exit_ts.is_none_or(|t| e.ts > t + ON_RETURN_NS);
                self.push(Frame::Soft(v));
            }
            Kind::SoftExit(v) => self.pop_to(|f| f == Frame::Soft(v)),
            // A switch happens in task context: no frame is open (any
            // left are from lost exit events).
            Kind::Switch { next, .. } => {
                self.task = next;
                self.frames.clear();
            }
            // A marker is written in task context (the reader keeps them
            // apart: one here changes nothing but the task).
            Kind::ExpireEntry { .. } | Kind::ExpireExit { .. } | Kind::Waking { .. } | Kind::Marker(_) => {}
            // Recorded on another CPU: it changes nothing here.
            Kind::RemoteWaking { .. } => self.exit_ts = exit_ts,
        }
        if matches!(e.kind, Kind::TimerExit | Kind::VectorExit(_) | Kind::IrqExit(_)) {
            self.exit_ts = Some(e.ts);
        }
    }

    /// The task a softirq on top of the context runs on: (pid, whether
    /// from its own kernel code), when the top frame is a softirq.
    fn host(&self) -> Option<(i32, bool)> {
        matches!(self.frames.last(), Some(Frame::Soft(_))).then_some((self.task, self.soft_in_kernel))
    }

    fn push(&mut self, f: Frame) {
        if self.frames.len() < 16 {
            self.frames.push(f);
        }
    }

    fn pop_to(&mut self, is: impl Fn(Frame) -> bool) {
        if let Some(i) = self.frames.iter().rposition(|&f| is(f)) {
            self.frames.truncate(i);
        }
    }

    fn owner(&self) -> Owner {
        match self.frames.last() {
            Some(&f) => Owner::Frame(f),
            None => Owner::Task(self.task),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Frame(Frame),
    Task(i32),
}

/// Which path a sample's wake-up took (a probe's row in the descriptor
/// table says which).
pub use rtscope_model::descriptor::WakePath;

/// The wake-up path found in a window: event indices.
#[derive(Clone, Copy, Debug)]
struct Chain {
    /// None when the kernel has no `local_timer_entry`.
    irq: Option<usize>,
    expire: usize,
    waking: usize,
    switch_in: usize,
    /// No `sched_switch` into the probe thread was seen (some kernels do
    /// not trace the switch out of the idle task): the switch-in is taken
    /// to be the last interrupt exit before the wake-up.
    inferred: bool,
    /// NetRx: the exit of the softirq that woke the thread (`expire` is
    /// its entry).
    end: Option<usize>,
    /// NetRx: the waking was recorded on this other CPU (the softirq ran
    /// there): no stages here, and this CPU's time before it is
    /// [`CauseKind::Remote`].
    remote: Option<u16>,
}

/// The kernel's scheduling of a task, from its priority in the trace and
/// its policy when known (1 FIFO, 2 RR, 3 BATCH, 5 IDLE, 6 DEADLINE).
pub fn sched_label(prio: i32, policy: Option<u32>) -> String {
    match (prio, policy) {
        (p, _) if p < 0 => "SCHED_DEADLINE".into(),
        (p, Some(2)) if p < 100 => format!("SCHED_RR {}", 99 - p),
        (p, _) if p < 100 => format!("SCHED_FIFO {}", 99 - p),
        (_, Some(3)) => "SCHED_BATCH".into(),
        (_, Some(5)) => "SCHED_IDLE".into(),
        (120, _) => "SCHED_OTHER".into(),
        (p, _) => format!("SCHED_OTHER nice {}", p - 120),
    }
}

/// Settings shared by every CPU's decomposer.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub cause_threshold: CauseThreshold,
    /// Episodes kept per CPU: the worst.
    pub max_episodes: usize,
    /// False when this kernel has no `local_timer_entry`: the irq stage
    /// then runs to the hrtimer callback, and handler is 0.
    pub timer_entry: bool,
    /// Whether samples have a wake-up path to split (wakeup) or only a
    /// window to attribute (an interruption of the noise probe).
    pub stages: bool,
    /// Which wake-up path to follow when `stages`.
    pub path: WakePath,
    /// Every sample above the threshold is attributed and its class sent
    /// ([`Out::Class`]), not only those kept (a monitor's counters).
    pub classify_all: bool,
}

/// One CPU's decomposer.
pub struct CpuTrace {
    pub cpu: i64,
    pub probe: String,
    pub metric: &'static str,
    /// The probe thread on this CPU.
    pub tid: i32,
    settings: Settings,
    events: VecDeque<Ev>,
    /// The context before `events[0]`.
    front: Ctx,
    newest_ts: u64,
    samples: VecDeque<Sample>,
    prev_woke: u64,
    seen: Tally,
    threshold: u64,
    /// Kept episodes: (latency, sample).
    kept: Vec<(u64, u64)>,
    pub events_in: u64,
    pub samples_in: u64,
    pub decomposed: u64,
    pub incomplete: u64,
    /// Samples whose switch-in was inferred (see `Chain::inferred`).
    pub inferred: u64,
    pub episodes_built: u64,
    /// In window mode, every sample's causes by kind.
    pub by_kind: Vec<KindTotal>,
    /// `--stacks`: the probe's wake-ups with their stacks, in time order.
    stacks: VecDeque<WakeStack>,
    /// Wake-ups with stacks seen, and what the stacks cost (ns, from the
    /// waking record to the kernel stack's).
    pub stacks_taken: u64,
    pub stack_cost: Tally,
    pub stacks_matched: u64,
    /// The profiler's samples not yet past a processed sample, in time
    /// order, and its period (0: no profiler).
    prof: VecDeque<PerfSample>,
    pub period_ns: u64,
    /// Samples in `prof` with their user stacks, and which of the new ones
    /// keep theirs: every `stack_stride`-th (see [`MAX_STACKS_HELD`]).
    stacks_held: usize,
    stack_stride: u64,
    stack_arrivals: u64,
    /// Every profiler sample's innermost frame, inside episodes or not.
    pub counts: Counts,
    pub prof_samples: u64,
    pub prof_inside: u64,
    /// Where the probe thread's wakings on other CPUs are read
    /// ([`crate::trace::wakes`]): the time up to which they are all in (a
    /// sample waits for it), and how many were read.
    pub remote_upto: Option<u64>,
    pub remote_in: u64,
}

impl CpuTrace {
    pub fn new(cpu: i64, probe: &str, metric: &'static str, tid: i32, settings: Settings) -> CpuTrace {
        CpuTrace {
            cpu,
            probe: probe.to_string(),
            metric,
            tid,
            settings,
            events: VecDeque::with_capacity(1 << 14),
            front: Ctx::default(),
            newest_ts: 0,
            samples: VecDeque::with_capacity(1 << 10),
            prev_woke: 0,
            seen: Tally::new(),
            threshold: 0,
            kept: Vec::new(),
            events_in: 0,
            samples_in: 0,
            decomposed: 0,
            incomplete: 0,
            inferred: 0,
            episodes_built: 0,
            by_kind: Vec::new(),
            stacks: VecDeque::new(),
            stacks_taken: 0,
            stack_cost: Tally::new(),
            stacks_matched: 0,
            prof: VecDeque::new(),
            period_ns: 0,
            stacks_held: 0,
            stack_stride: 1,
            stack_arrivals: 0,
            counts: Counts::default(),
            prof_samples: 0,
            prof_inside: 0,
            remote_upto: None,
            remote_in: 0,
        }
    }

    /// Adds a wake-up's stacks (in time order).
    pub fn push_stack(&mut self, w: WakeStack) {
        self.stacks_taken += 1;
        if !w.kernel.is_empty() {
            self.stack_cost.record(w.cost_ns);
        }
        self.stacks.push_back(w);
    }

    /// Adds a profiler sample of this CPU (in time order), its user stack
    /// kept within [`MAX_STACKS_HELD`].
    pub fn push_profile(&mut self, mut s: PerfSample) {
        self.prof_samples += 1;
        if s.stack.is_some() {
            if self.stack_arrivals.is_multiple_of(self.stack_stride) {
                self.stacks_held += 1;
            } else {
                s.stack = None;
            }
            self.stack_arrivals += 1;
        }
        self.prof.push_back(s);
        if self.stacks_held > MAX_STACKS_HELD {
            let mut keep = true;
            for x in self.prof.iter_mut().filter(|x| x.stack.is_some()) {
                if !keep {
                    x.stack = None;
                    self.stacks_held -= 1;
                }
                keep = !keep;
            }
            self.stack_stride *= 2;
        }
    }

    fn count_profile(&mut self, t: u64, window: Option<(u64, u64)>) {
        let before = self.prof.iter().take_while(|s| s.t_ns <= t).filter(|s| s.stack.is_some()).count();
        count_profile(&mut self.prof, &mut self.counts, &mut self.prof_inside, t, window);
        self.stacks_held -= before.min(self.stacks_held);
        if self.stacks_held == 0 {
            (self.stack_stride, self.stack_arrivals) = (1, 0);
        }
    }

    /// Episodes kept now.
    pub fn kept(&self) -> usize {
        self.kept.len()
    }

    /// Adds an event of this CPU (in time order; before the other CPUs'
    /// wakings read ahead of it).
    pub fn push_event(&mut self, e: Ev) {
        self.newest_ts = self.newest_ts.max(e.ts);
        match self.events.back() {
            Some(b) if b.ts > e.ts => {
                let at = self.events.partition_point(|x| x.ts <= e.ts);
                self.events.insert(at, e);
            }
            _ => self.events.push_back(e),
        }
        self.events_in += 1;
    }

    /// Adds a waking of the probe thread recorded on CPU `cpu` at `ts`,
    /// among this CPU's events in time order.
    pub fn push_remote_waking(&mut self, ts: u64, pid: i32, cpu: u16) {
        self.remote_in += 1;
        let at = self.events.partition_point(|e| e.ts <= ts);
        self.events.insert(at, Ev { ts, pid: -1, kind: Kind::RemoteWaking { pid, cpu } });
    }

    pub fn push_sample(&mut self, s: Sample) {
        self.samples.push_back(s);
        self.samples_in += 1;
    }

    /// Processes every sample whose events are all in: those before the
    /// newest event read, or `GRACE_NS` before `pass_start` (the start of
    /// the last complete read of this CPU's buffer); all when `last`.
    pub fn process(&mut self, pass_start: u64, last: bool, names: &Names, out: &mut impl FnMut(Out)) {
        while let Some(&s) = self.samples.front() {
            // Its wakings on other CPUs all read, where they are.
            let remote_in = self.remote_upto.is_none_or(|u| s.t_ns.saturating_add(GRACE_NS) <= u);
            let ready =
                last || remote_in && (s.t_ns <= self.newest_ts || s.t_ns.saturating_add(GRACE_NS) <= pass_start);
            if !ready {
                break;
            }
            self.samples.pop_front();
            self.one(s, names, out);
            self.drop_until(s.t_ns);
            self.prev_woke = s.t_ns;
        }
        if self.samples.is_empty() {
            let horizon = self.newest_ts.saturating_sub(RETAIN_NS);
            self.drop_until(horizon);
            self.count_profile(horizon, None);
        }
        while self.events.len() > MAX_HELD {
            if let Some(e) = self.events.pop_front() {
                self.front.apply(&e, false);
            }
        }
    }

    /// Folds events up to `t` into the front context.
    fn drop_until(&mut self, t: u64) {
        while self.stacks.front().is_some_and(|w| w.ts <= t) {
            self.stacks.pop_front();
        }
        while self.events.front().is_some_and(|e| e.ts <= t) {
            if let Some(e) = self.events.pop_front() {
                self.front.apply(&e, false);
            }
        }
    }

    fn cause_threshold(&mut self) -> u64 {
        match self.settings.cause_threshold {
            CauseThreshold::Fixed(t) => t,
            CauseThreshold::Adaptive => {
                let n = self.seen.stats.count;
                if n < 1000 {
                    // Record breakers: every new maximum.
                    if n == 0 { 0 } else { self.seen.stats.max.max(1) }
                } else {
                    if n.is_multiple_of(1000) || self.threshold == 0 {
                        let q = if n < 10_000 { 0.999 } else { 0.9999 };
                        self.threshold = quantile(&self.seen.hist, &self.seen.stats, q);
                    }
                    self.threshold
                }
            }
        }
    }

    fn one(&mut self, s: Sample, names: &Names, out: &mut impl FnMut(Out)) {
        let threshold = self.cause_threshold();
        self.seen.record(s.value_ns);
        let p = s.t_ns.saturating_sub(s.value_ns);
        let upto = self.events.make_contiguous().partition_point(|e| e.ts <= s.t_ns);
        let (chain, stages) = {
            let win = &self.events.make_contiguous()[..upto];
            wake_path(win, self.tid, self.prev_woke, self.settings, p, s.t_ns)
        };
        if self.settings.stages {
            self.count_stages(chain.as_ref(), stages, s.t_ns, out);
        }
        let choice = self.choose(s.value_ns, threshold);
        let keep = choice.keep;
        // The profiler's samples up to this wake-up: inside its window if
        // it makes an episode.
        let prof: Vec<PerfSample> = if keep {
            self.prof.iter().filter(|x| x.t_ns >= p && x.t_ns <= s.t_ns).cloned().collect()
        } else {
            Vec::new()
        };
        self.count_profile(s.t_ns, keep.then_some((p, s.t_ns)));
        // Windows of lost time are all attributed (their totals by kind);
        // wake-ups only when they make an episode or are to be classed.
        let windows = !self.settings.stages;
        if !keep && !windows && !choice.classify {
            return;
        }
        // An episode's timeline starts at the previous sample.
        let start = if keep { self.prev_woke.max(s.t_ns.saturating_sub(RETAIN_NS)) } else { p };
        let wakeup = self.settings.stages;
        let path = self.settings.path;
        let (causes, mut slices) = attribute(
            &self.events.make_contiguous()[..upto],
            &self.front,
            chain.as_ref(),
            stages.as_ref(),
            path,
            self.tid,
            p,
            s.t_ns,
            start,
            wakeup,
            names,
        );
        if windows {
            KindTotal::add(&mut self.by_kind, &causes);
        }
        if !keep {
            if choice.classify {
                out(Out::Class { cpu: self.cpu, kind: episode::class_of(&causes) });
            }
            return;
        }
        if let Some(st) = stages.as_ref() {
            stage_slices(path, st, p, &mut slices);
        }
        let raw = self.raw_code(&s, p, stages.as_ref(), &causes, prof, names);
        let ep = self.episode(&s, p, stages, causes, slices);
        self.keep(&s, choice, ep, raw, out);
    }

    /// Counts a wake-up decomposed into its stages (sent on to the stage
    /// series) or left incomplete.
    fn count_stages(&mut self, chain: Option<&Chain>, stages: Option<Stages>, t_ns: u64, out: &mut impl FnMut(Out)) {
        match stages {
            Some(st) => {
                self.decomposed += 1;
                self.inferred += u64::from(chain.is_some_and(|c| c.inferred));
                out(Out::Stages { t_ns, stages: st });
            }
            None => self.incomplete += 1,
        }
    }

    /// Whether a sample of `value_ns` makes an episode (it reaches the
    /// cause threshold and is worse than the weakest kept when they are
    /// `max_episodes` already), or is only to be classed.
    fn choose(&self, value_ns: u64, threshold: u64) -> Choice {
        let wanted = value_ns >= threshold && value_ns > 0;
        let full = self.kept.len() >= self.settings.max_episodes;
        let weakest = (0..self.kept.len()).min_by_key(|&i| self.kept[i].0);
        let worse_than_kept = !full || weakest.is_some_and(|i| value_ns > self.kept[i].0);
        let keep = wanted && worse_than_kept;
        let classify = wanted && !keep && self.settings.classify_all;
        Choice { keep, classify, full, weakest }
    }

    /// The episode of sample `s`, programmed at `p`, with its verdict.
    fn episode(&self, s: &Sample, p: u64, stages: Option<Stages>, causes: Vec<Cause>, slices: Vec<Slice>) -> Episode {
        let verdict = episode::verdict_named(
            Stages::of_path(self.settings.path).0,
            self.cpu,
            s.seq,
            self.metric,
            s.value_ns,
            stages.as_ref(),
            &causes,
        );
        Episode {
            probe: self.probe.clone(),
            load: None,
            metric: self.metric.to_string(),
            cpu: self.cpu,
            sample: s.seq,
            programmed_ns: p,
            woke_ns: s.t_ns,
            latency_ns: s.value_ns,
            // A datagram's stages have other names: they are in the verdict,
            // the Stage slices and the stage series, not in the timer fields.
            stages: stages.filter(|_| self.settings.path != WakePath::NetRx),
            causes,
            verdict,
            slices,
            stack: None,
            blocker: None,
            samples: None,
            remainder: None,
        }
    }

    /// Keeps episode `ep` of sample `s`, the weakest kept dropped first
    /// when they are `max_episodes` already.
    fn keep(&mut self, s: &Sample, choice: Choice, ep: Episode, raw: RawCode, out: &mut impl FnMut(Out)) {
        self.episodes_built += 1;
        if choice.full
            && let Some(i) = choice.weakest
        {
            let (_, sample) = self.kept.swap_remove(i);
            out(Out::Drop { cpu: self.cpu, sample });
        }
        self.kept.push((s.value_ns, s.seq));
        out(Out::Keep(Box::new(ep), Box::new(raw)));
    }

    /// The stacks recorded at this sample's wake-up, the profiler's samples
    /// in its window, and the facts about its unaccounted time.
    fn raw_code(
        &mut self,
        s: &Sample,
        p: u64,
        stages: Option<&Stages>,
        causes: &[Cause],
        prof: Vec<PerfSample>,
        names: &Names,
    ) -> RawCode {
        let floor = p.saturating_sub(EARLY_NS).max(self.prev_woke.saturating_add(1));
        let stack = self
            .stacks
            .iter()
            .rev()
            .find(|w| w.woken == self.tid && w.ts >= floor && w.ts <= s.t_ns)
            .map(|w| (w.clone(), names.comm(w.pid)));
        self.stacks_matched += u64::from(stack.is_some());
        let unaccounted: Vec<&Cause> = causes.iter().filter(|c| c.kind == CauseKind::Unaccounted).collect();
        let ns: u64 = unaccounted.iter().map(|c| c.ns).sum();
        // Named when it matters: 10 us and a tenth of the latency.
        let gap = (ns >= 10_000 && ns * 10 >= s.value_ns).then(|| {
            // The stretch before the timer interrupt (a wake-up's irq
            // stage), else the whole window.
            let end = stages.map_or(s.t_ns, |st| p + st.irq_ns).max(p + 1);
            let inside = prof.iter().filter(|x| x.t_ns >= p && x.t_ns <= end);
            let (samples, irqs_off) = inside.fold((0u64, None::<u64>), |(n, off), x| {
                (n + 1, x.irqs_off.map(|o| off.unwrap_or(0) + u64::from(o)).or(off))
            });
            let main = unaccounted.iter().max_by_key(|c| c.ns);
            Gap {
                ns,
                idle: main.is_some_and(|c| c.pid == Some(0)),
                samples,
                expected: if self.period_ns > 0 { (end - p) as f64 / self.period_ns as f64 } else { 0.0 },
                irqs_off,
                steal_ns: 0,
                run_ns: 0,
                idle_states: None,
                idle_poll: false,
            }
        });
        // The main cause's own stacks while it ran: the profiler's middle
        // sample of it in its own code (user space) in the window, else in
        // the kernel.
        let main = episode::main_cause(causes).filter(|c| c.kind == CauseKind::Thread);
        let blocker = main.and_then(|c| c.pid).and_then(|pid| {
            let theirs: Vec<&PerfSample> = prof.iter().filter(|x| x.tid == pid).collect();
            let user: Vec<&PerfSample> = theirs.iter().copied().filter(|x| x.kernel.is_empty()).collect();
            let pick = user.get(user.len() / 2).or(theirs.get(theirs.len() / 2));
            pick.map(|x| ((*x).clone(), names.comm(pid)))
        });
        RawCode { stack, blocker, samples: prof, period_ns: self.period_ns, gap }
    }
}

/// What becomes of a sample: an episode (`keep`), only its class
/// (`classify`); the kept episodes are `full`, the `weakest` of them.
#[derive(Clone, Copy)]
struct Choice {
    keep: bool,
    classify: bool,
    full: bool,
    weakest: Option<usize>,
}

/// The wake-up path of a sample programmed at `p` and woken at `w` in `win`
/// (its events up to the wake-up), and its stages; none where the trace
/// does not follow the stages.
fn wake_path(win: &[Ev], tid: i32, after: u64, settings: Settings, p: u64, w: u64) -> (Option<Chain>, Option<Stages>) {
    let net = settings.path == WakePath::NetRx;
    let chain = match (settings.stages, net) {
        (false, _) => None,
        (true, false) => find_chain(win, tid, p, after, settings),
        (true, true) => find_net_chain(win, tid, p, after),
    };
    // A waking on another CPU: the stages before it ran there, unseen.
    let stages = chain
        .filter(|c| c.remote.is_none())
        .map(|c| if net { net_stages_of(win, &c, p, w) } else { stages_of(win, &c, p, w) });
    (chain, stages)
}

/// An episode's Stage slices on its timeline: each stage of `path` that
/// took time, from its mark.
fn stage_slices(path: WakePath, st: &Stages, p: u64, slices: &mut Vec<Slice>) {
    let marks = st.marks(p);
    for (i, (name, ns)) in Stages::of_path(path).0.iter().zip(st.values()).enumerate() {
        if ns > 0 {
            slices.push(Slice { lane: Lane::Stage, name: (*name).to_string(), start_ns: marks[i], dur_ns: ns });
        }
    }
}

/// Counts the profiler's samples up to `t`, inside `[a, b]` (an episode's
/// window) or outside, and lets them go.
fn count_profile(
    prof: &mut VecDeque<PerfSample>,
    counts: &mut Counts,
    inside_n: &mut u64,
    t: u64,
    window: Option<(u64, u64)>,
) {
    while prof.front().is_some_and(|s| s.t_ns <= t) {
        if let Some(s) = prof.pop_front() {
            let inside = window.is_some_and(|(a, b)| s.t_ns >= a && s.t_ns <= b);
            *inside_n += u64::from(inside);
            counts.add(&s, inside);
        }
    }
}

/// Finds the wake-up path of a sample programmed at `p` in `win` (the
/// events up to its wake-up), among events after `after` (the previous
/// wake-up) and not earlier than `p` (less a small tolerance).
fn find_chain(win: &[Ev], tid: i32, p: u64, after: u64, settings: Settings) -> Option<Chain> {
    let floor = p.saturating_sub(EARLY_NS).max(after.saturating_add(1));
    let valid = |i: usize| win[i].ts >= floor;
    let (s, k, inferred) = switch_and_waking(win, tid, floor)?;
    if matches!(win[k].kind, Kind::RemoteWaking { .. }) {
        return None;
    }
    let x = win[..k].iter().rposition(|e| matches!(e.kind, Kind::ExpireEntry { .. })).filter(|&i| valid(i))?;
    let irq = if settings.timer_entry {
        let i = win[..x].iter().rposition(|e| matches!(e.kind, Kind::TimerEntry | Kind::TimerExit))?;
        (win[i].kind == Kind::TimerEntry && valid(i)).then_some(i)
    } else {
        None
    };
    if settings.timer_entry && irq.is_none() {
        return None;
    }
    Some(Chain { irq, expire: x, waking: k, switch_in: s, inferred, end: None, remote: None })
}

/// The switch-in of `tid` at or before the end of `win`, its waking before
/// it, or (no switch traced) the waking and the last event after it that
/// ends an interrupt; both not before `floor`.
fn switch_and_waking(win: &[Ev], tid: i32, floor: u64) -> Option<(usize, usize, bool)> {
    let valid = |i: usize| win[i].ts >= floor;
    let switch =
        win.iter().rposition(|e| matches!(e.kind, Kind::Switch { next, .. } if next == tid)).filter(|&i| valid(i));
    let waking = |end: usize| {
        win[..end]
            .iter()
            .rposition(|e| matches!(e.kind, Kind::Waking { pid } | Kind::RemoteWaking { pid, .. } if pid == tid))
            .filter(|&i| valid(i))
    };
    match switch {
        Some(s) => Some((s, waking(s)?, false)),
        None => {
            let k = waking(win.len())?;
            let exit = win[k..].iter().rposition(|e| {
                matches!(
                    e.kind,
                    Kind::TimerExit
                        | Kind::IrqExit(_)
                        | Kind::SoftExit(_)
                        | Kind::VectorExit(_)
                        | Kind::ExpireExit { .. }
                )
            });
            Some((exit.map_or(k, |i| k + i), k, true))
        }
    }
}

/// The NET_RX softirq vector.
const NET_RX: u8 = 3;

/// Finds a received datagram's path to the thread `tid` (stamped by the
/// kernel at `p`): the switch-in, the waking, and the NET_RX softirq that
/// ran the waking (its entry may precede `p`: a softirq already running
/// when the datagram was stamped, as in a NIC's NAPI poll). Where the
/// waking was recorded on another CPU (the softirq ran there), the chain
/// has no softirq and says which CPU; None when no waking was seen.
fn find_net_chain(win: &[Ev], tid: i32, p: u64, after: u64) -> Option<Chain> {
    let floor = p.saturating_sub(EARLY_NS).max(after.saturating_add(1));
    let (s, k, inferred) = switch_and_waking(win, tid, floor)?;
    if let Kind::RemoteWaking { cpu, .. } = win[k].kind {
        return Some(Chain { irq: None, expire: k, waking: k, switch_in: s, inferred, end: None, remote: Some(cpu) });
    }
    let mut depth = 0u32;
    let mut entry = None;
    for i in (0..k).rev() {
        match win[i].kind {
            Kind::SoftExit(NET_RX) => depth += 1,
            Kind::SoftEntry(NET_RX) if depth == 0 => {
                entry = Some(i);
                break;
            }
            Kind::SoftEntry(NET_RX) => depth -= 1,
            // A switch happens in task context: no softirq encloses what
            // comes after it.
            Kind::Switch { .. } => break,
            _ => {}
        }
    }
    let e = entry.filter(|&i| win[i].ts > after)?;
    let end = win[k..=s.max(k)].iter().position(|e| e.kind == Kind::SoftExit(NET_RX)).map(|i| k + i);
    Some(Chain { irq: None, expire: e, waking: k, switch_in: s, inferred, end, remote: None })
}

/// A datagram's stages: queue, stack, softirq, thread, user; each mark
/// clamped to the one before, so they add up to `w - p`.
fn net_stages_of(win: &[Ev], c: &Chain, p: u64, w: u64) -> Stages {
    let m1 = win[c.expire].ts.max(p);
    let m2 = win[c.waking].ts.max(m1);
    let m3 = c.end.map_or(m2, |x| win[x].ts).max(m2);
    let m4 = win[c.switch_in].ts.max(m3);
    let m5 = w.max(m4);
    Stages { irq_ns: m1 - p, handler_ns: m2 - m1, wake_ns: m3 - m2, thread_ns: m4 - m3, user_ns: m5 - m4 }
}

/// Each mark is clamped to the one before, so the stages add up to `w - p`.
fn stages_of(win: &[Ev], c: &Chain, p: u64, w: u64) -> Stages {
    let m1 = win[c.irq.unwrap_or(c.expire)].ts.max(p);
    let m2 = win[c.expire].ts.max(m1);
    let m3 = win[c.waking].ts.max(m2);
    let m4 = win[c.switch_in].ts.max(m3);
    let m5 = w.max(m4);
    Stages { irq_ns: m1 - p, handler_ns: m2 - m1, wake_ns: m3 - m2, thread_ns: m4 - m3, user_ns: m5 - m4 }
}

/// Names the decomposer shows: tasks, IRQs, vectors, and a task's policy.
pub struct Names<'a> {
    pub decoder: &'a Decoder,
    /// A task's scheduling policy (from /proc), when it can be read.
    pub policy: &'a dyn Fn(i32) -> Option<u32>,
}

impl Names<'_> {
    /// An interrupt frame's name: `local_timer`, `reschedule`, an IRQ's
    /// name, a softirq vector.
    fn frame(&self, f: Frame) -> String {
        match f {
            Frame::Timer(_) => "local_timer".into(),
            Frame::Vector(v) => self.decoder.vector_name(v).to_string(),
            Frame::Irq(n) => self.decoder.irq_names.get(&n).cloned().unwrap_or_else(|| format!("irq{n}")),
            Frame::Soft(v) => SOFTIRQ_NAMES.get(v as usize).map_or_else(|| format!("softirq{v}"), |s| s.to_string()),
        }
    }

    fn comm(&self, pid: i32) -> String {
        match pid {
            -1 => "unknown".into(),
            _ => self.decoder.tasks.get(&pid).map_or_else(|| format!("pid {pid}"), |t| t.comm.clone()),
        }
    }
}

/// Who had the CPU from `p` to `w`, and the timeline from `start` to `w`.
#[allow(clippy::too_many_arguments)]
fn attribute(
    win: &[Ev],
    front: &Ctx,
    chain: Option<&Chain>,
    stages: Option<&Stages>,
    path: WakePath,
    tid: i32,
    p: u64,
    w: u64,
    start: u64,
    wakeup: bool,
    names: &Names,
) -> (Vec<Cause>, Vec<Slice>) {
    let waking = chain.map(|c| win[c.waking].ts);
    // When the wake-up reached this CPU: a timer's waking here; a remote
    // waking's IPI (none where it came without one). A datagram's waking
    // by a softirq here can wait for threads: no such mark.
    let arrival = match chain {
        Some(c) if path == WakePath::Timer => Some(win[c.waking].ts),
        Some(c) if c.remote.is_some() => wake_ipi(win, c, names),
        _ => None,
    };
    let mut at = Attribution {
        p,
        w,
        tid,
        wakeup,
        // Before the wake-up reached this CPU, a running thread cannot have
        // delayed it (unaccounted: interrupts off, or the hypervisor).
        waking_ts: arrival,
        remote: chain.and_then(|c| c.remote.map(|cpu| (win[c.waking].ts, cpu))),
        runnable_at: arrival.or(waking),
        delivery: chain
            .filter(|c| path == WakePath::NetRx && c.remote.is_none())
            .map(|c| (win[c.expire].ts, c.end.map_or(u64::MAX, |x| win[x].ts))),
        probe_prio: names.decoder.tasks.get(&tid).map(|t| t.prio),
        held: None,
        marks: stages.map(|st| st.marks(p)),
        names,
        by: BTreeMap::new(),
        slices: Vec::new(),
        open: None,
    };
    at.walk(win, front, chain, path, start);
    at.finish(path)
}

/// The first IPI that can carry a remote wake-up (`reschedule`, or
/// `call_function_single` where the wakee's CPU queues it itself) between
/// `c`'s waking and its switch-in: when the wake-up reached this CPU.
fn wake_ipi(win: &[Ev], c: &Chain, names: &Names) -> Option<u64> {
    let carries =
        |v: u8| matches!(names.decoder.vector_name(v), "reschedule" | "call_function_single" | "call_function");
    win[c.waking..=c.switch_in.max(c.waking)]
        .iter()
        .find(|e| matches!(e.kind, Kind::VectorEntry(v) if carries(v)))
        .map(|e| e.ts)
}

/// What a cause's time is kept under: its kind, name, id (the thread's
/// pid, the IRQ's number) and, for a softirq, the task it ran on.
type Key = (CauseKind, String, Option<i32>, Option<i32>);

/// A cause's time in each of the five stages, then in all; for a softirq,
/// whether any of it ran from its task's own kernel code; for a thread,
/// its time held in the kernel (see [`Cause::kernel_ns`]).
#[derive(Default)]
struct Acc {
    ns: [u64; 6],
    in_kernel: bool,
    kernel_ns: u64,
}

/// One sample's time being attributed: who had the CPU over [p, w), by
/// cause and stage, and the timeline's slices, merged by owner.
struct Attribution<'a> {
    p: u64,
    w: u64,
    tid: i32,
    wakeup: bool,
    /// When the wake-up reached this CPU (a timer's waking, a remote
    /// waking's IPI), before which a running thread cannot have delayed it.
    waking_ts: Option<u64>,
    /// A datagram's waking recorded on another CPU (its time, the CPU):
    /// before it, the wake-up was on its way there.
    remote: Option<(u64, u16)>,
    /// From when the probe thread was runnable (its waking).
    runnable_at: Option<u64>,
    /// A datagram's own NET_RX softirq on this CPU (entry, exit): the path
    /// measured, not a blocker, whatever task it ran on.
    delivery: Option<(u64, u64)>,
    /// The probe thread's kernel priority, when the trace showed it.
    probe_prio: Option<i32>,
    /// A thread of lower priority than the probe's that an interrupt (or
    /// softirq) returned to while the probe was runnable, and from when:
    /// a kernel that preempts there did not, so it was in the kernel.
    held: Option<(i32, u64)>,
    /// Stage boundaries, to tell in which stage each cause's time fell.
    marks: Option<[u64; 6]>,
    names: &'a Names<'a>,
    by: BTreeMap<Key, Acc>,
    slices: Vec<Slice>,
    /// The timeline's run of one owner not yet closed: its owner and start.
    open: Option<(Owner, u64)>,
}

impl Attribution<'_> {
    /// [a, b) owned by `owner` (a softirq on `host`): its part inside
    /// [p, w) to its cause, and the timeline.
    fn seg(&mut self, a: u64, b: u64, owner: Owner, host: Option<(i32, bool)>, busy: bool) {
        if b <= a {
            return;
        }
        // A remote waking splits the stretch: before it, the wake-up was
        // still on its way.
        if let Some((k, _)) = self.remote
            && a < k
            && k < b
        {
            self.seg(a, k, owner, host, busy);
            self.seg(k, b, owner, host, busy);
            return;
        }
        // Attribution over [p, w).
        let (x, y) = (a.max(self.p), b.min(self.w));
        if y > x {
            let remote = self.remote.filter(|&(k, _)| x < k);
            let (kind, name, id) = classify(owner, x, self.waking_ts, remote, self.tid, self.wakeup, busy, self.names);
            let delivering = self.delivery.is_some_and(|(e, x)| x > e && a >= e && b <= x);
            let host_pid =
                host.map(|h| h.0).filter(|&h| kind == CauseKind::Softirq && h > 0 && h != self.tid && !delivering);
            let held = match (owner, self.held) {
                (Owner::Task(t), Some((h, since))) if kind == CauseKind::Thread && t == h => {
                    y.saturating_sub(since.max(x))
                }
                _ => 0,
            };
            let acc = self.by.entry((kind, name, id, host_pid)).or_default();
            acc.ns[5] += y - x;
            acc.in_kernel |= host_pid.is_some() && host.is_some_and(|h| h.1);
            acc.kernel_ns += held;
            if let Some(m) = &self.marks {
                for i in 0..5 {
                    acc.ns[i] += y.min(m[i + 1]).saturating_sub(x.max(m[i]));
                }
            }
        }
        // The timeline: merge runs of one owner.
        match self.open {
            Some((o, _)) if o == owner => {}
            Some((o, s0)) => {
                self.slices.push(slice_of(o, s0, a, self.names));
                self.open = Some((owner, a));
            }
            None => self.open = Some((owner, a)),
        }
    }

    /// Notes, after `e` was applied to `ctx`, a thread of lower priority
    /// than the probe's that an interrupt or softirq returned to while the
    /// probe was runnable (see [`Attribution::held`]); a switch ends it.
    fn note_held(&mut self, e: &Ev, ctx: &Ctx) {
        if matches!(e.kind, Kind::Switch { .. }) {
            self.held = None;
            return;
        }
        let returned = matches!(e.kind, Kind::TimerExit | Kind::VectorExit(_) | Kind::IrqExit(_) | Kind::SoftExit(_));
        if !returned || !ctx.frames.is_empty() || self.runnable_at.is_none_or(|r| e.ts < r) {
            return;
        }
        let t = ctx.task;
        if t <= 0 || t == self.tid || self.held.is_some_and(|(h, _)| h == t) {
            return;
        }
        let prio = self.names.decoder.tasks.get(&t).map(|x| x.prio);
        if let (Some(theirs), Some(ours)) = (prio, self.probe_prio)
            && theirs > ours
        {
            self.held = Some((t, e.ts));
        }
    }

    /// The walk over the window's events from `front`'s context: each
    /// stretch between two events to the owner the context shows, from
    /// `start` to `w`.
    fn walk(&mut self, win: &[Ev], front: &Ctx, chain: Option<&Chain>, path: WakePath, start: u64) {
        let (p, tid) = (self.p, self.tid);
        let ours = chain.and_then(|c| c.irq);
        let mut ctx = front.clone();
        let mut last = start;
        let inferred_at = chain.filter(|c| c.inferred).map(|c| c.switch_in);
        // A lost window starts with the probe thread running (it measured just
        // before): a context still showing the idle task there missed the
        // probe's untraced switch-in after its pause.
        let mut at_p = self.wakeup;
        // A datagram that came while the receiver was running: it waited in
        // the socket while the receiver handled the ones before it, until the
        // receiver was switched in anew (then it is its return to user space).
        let mut busy = false;
        let mut busy_known = path != WakePath::NetRx;
        // The events, then an end mark (None) for the window start to be seen.
        for (i, e) in win.iter().map(Some).chain([None]).enumerate() {
            if !busy_known && e.is_none_or(|e| e.ts > p) {
                busy_known = true;
                busy = ctx.task == tid;
            }
            if !at_p && e.is_none_or(|e| e.ts > p) {
                at_p = true;
                if p > last && p > start {
                    self.seg(last, p, ctx.owner(), ctx.host(), false);
                    last = p;
                }
                if ctx.task <= 0 {
                    ctx.task = tid;
                }
            }
            let Some(e) = e else { break };
            if e.ts > start && e.ts > last {
                // The idle task's switch out was not traced: the idle loop
                // switches as soon as the interrupt that woke the task returns,
                // so the whole gap belongs to the task this event shows.
                let owner = match ctx.owner() {
                    Owner::Task(0) if e.pid > 0 => Owner::Task(e.pid),
                    o => o,
                };
                self.seg(last, e.ts, owner, ctx.host(), busy);
                last = e.ts;
            }
            if matches!(e.kind, Kind::Switch { next, .. } if next == tid) {
                busy = false;
            }
            ctx.apply(e, Some(i) == ours);
            if Some(i) == inferred_at {
                ctx.task = tid;
            }
            self.note_held(e, &ctx);
        }
        self.seg(last, self.w, ctx.owner(), ctx.host(), busy);
    }

    /// The causes, largest first, each with the stage most of its time fell
    /// in, and the timeline's last `MAX_SLICES` slices.
    fn finish(mut self, path: WakePath) -> (Vec<Cause>, Vec<Slice>) {
        let names = self.names;
        if let Some((o, s0)) = self.open {
            self.slices.push(slice_of(o, s0, self.w.max(s0), names));
        }
        if self.slices.len() > MAX_SLICES {
            self.slices.drain(..self.slices.len() - MAX_SLICES);
        }
        let staged = self.marks.is_some();
        let mut causes: Vec<Cause> = self
            .by
            .into_iter()
            .map(|((kind, name, pid, host), acc)| {
                let ns = acc.ns[5];
                let stage = (staged && ns > 0)
                    .then(|| (0..5).max_by_key(|&i| (acc.ns[i], 5 - i)).map(|i| Stages::of_path(path).0[i].to_string()))
                    .flatten();
                let (pid, irq) = if kind == CauseKind::Irq { (None, pid) } else { (pid, None) };
                let sched = (kind == CauseKind::Thread)
                    .then(|| {
                        pid.and_then(|p| names.decoder.tasks.get(&p).map(|t| sched_label(t.prio, (names.policy)(p))))
                    })
                    .flatten();
                let host = host.map(|h| Host { pid: h, name: names.comm(h), in_kernel: acc.in_kernel });
                let kernel_ns = (acc.kernel_ns > 0).then_some(acc.kernel_ns);
                Cause { kind, name, pid, irq, sched, stage, host, kernel_ns, ns }
            })
            .collect();
        causes.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.name.cmp(&b.name)));
        (causes, self.slices)
    }
}

/// The cause key of time owned by `owner` at `t`. For IRQs the third field
/// carries the IRQ number; otherwise the pid. `wakeup`: the sample is a
/// wake-up (the probe's own time is its return to user space); else it is
/// a window the probe thread lost, and time the trace shows as still the
/// probe's was taken by nothing the kernel traces: interrupt entry and
/// exit, NMIs, SMIs or the hypervisor. `busy`: a datagram's receiver
/// has been running since the datagram came (handling the ones before it).
/// `remote`: the probe's waking was recorded on another CPU after `t`.
#[allow(clippy::too_many_arguments)]
fn classify(
    owner: Owner,
    t: u64,
    waking_ts: Option<u64>,
    remote: Option<(u64, u16)>,
    tid: i32,
    wakeup: bool,
    busy: bool,
    names: &Names,
) -> (CauseKind, String, Option<i32>) {
    match owner {
        Owner::Task(pid) if pid == tid && busy => (CauseKind::User, episode::BUSY_RECEIVER.into(), None),
        _ if remote.is_some() => (CauseKind::Remote, format!("cpu{}", remote.map_or(0, |r| r.1)), None),
        Owner::Task(pid) if pid == tid && !wakeup => (CauseKind::Unaccounted, names.comm(pid), Some(pid)),
        Owner::Frame(Frame::Timer(true)) => (CauseKind::Timer, "timer".into(), None),
        Owner::Frame(f @ Frame::Soft(_)) => (CauseKind::Softirq, names.frame(f), None),
        Owner::Frame(f @ Frame::Irq(n)) => (CauseKind::Irq, names.frame(f), Some(n)),
        Owner::Frame(f) => (CauseKind::Irq, names.frame(f), None),
        Owner::Task(pid) if pid == tid => (CauseKind::User, "return to user".into(), None),
        Owner::Task(pid) if pid <= 0 => (CauseKind::Unaccounted, names.comm(pid), (pid == 0).then_some(0)),
        Owner::Task(pid) => {
            // Before the probe was woken, a running thread cannot delay the
            // timer interrupt unless interrupts were off (or the hypervisor
            // held the CPU): that time is unaccounted.
            if waking_ts.is_some_and(|k| t < k) {
                (CauseKind::Unaccounted, names.comm(pid), Some(pid))
            } else {
                (CauseKind::Thread, names.comm(pid), Some(pid))
            }
        }
    }
}

fn slice_of(owner: Owner, a: u64, b: u64, names: &Names) -> Slice {
    let (lane, name) = match owner {
        Owner::Task(pid) => (Lane::Task, format!("{} ({pid})", names.comm(pid))),
        Owner::Frame(Frame::Timer(true)) => (Lane::Irq, "local_timer (probe's timer)".into()),
        Owner::Frame(f @ Frame::Irq(n)) => (Lane::Irq, format!("{} (irq {n})", names.frame(f))),
        Owner::Frame(f @ Frame::Soft(_)) => (Lane::Softirq, names.frame(f)),
        Owner::Frame(f) => (Lane::Irq, names.frame(f)),
    };
    Slice { lane, name, start_ns: a, dur_ns: b.saturating_sub(a) }
}

#[cfg(test)]
#[path = "decompose_tests.rs"]
mod tests;
