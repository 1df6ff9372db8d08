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
            Kind::ExpireEntry { .. } | Kind::ExpireExit { .. } | Kind::Waking { .. } | Kind::Marker(_) | Kind::Lost => {
            }
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

#[path = "decompose_attr.rs"]
mod attr;
use attr::*;
#[path = "decompose_path.rs"]
mod path;
use path::*;

#[cfg(test)]
#[path = "decompose_tests.rs"]
mod tests;
