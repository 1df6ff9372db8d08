//! Who had the CPU through a sample's delay: each nanosecond from the
//! programmed time to the wake-up given to the task, hard IRQ, softirq or
//! unaccounted time that held it, and the episode's slices from them.

use super::*;

/// Who had the CPU from `p` to `w`, and the timeline from `start` to `w`.
#[allow(clippy::too_many_arguments)]
pub(super) fn attribute(
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
pub(super) fn wake_ipi(win: &[Ev], c: &Chain, names: &Names) -> Option<u64> {
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
pub(super) struct Acc {
    ns: [u64; 6],
    in_kernel: bool,
    kernel_ns: u64,
}

/// One sample's time being attributed: who had the CPU over [p, w), by
/// cause and stage, and the timeline's slices, merged by owner.
pub(super) struct Attribution<'a> {
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
pub(super) fn classify(
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

pub(super) fn slice_of(owner: Owner, a: u64, b: u64, names: &Names) -> Slice {
    let (lane, name) = match owner {
        Owner::Task(pid) => (Lane::Task, format!("{} ({pid})", names.comm(pid))),
        Owner::Frame(Frame::Timer(true)) => (Lane::Irq, "local_timer (probe's timer)".into()),
        Owner::Frame(f @ Frame::Irq(n)) => (Lane::Irq, format!("{} (irq {n})", names.frame(f))),
        Owner::Frame(f @ Frame::Soft(_)) => (Lane::Softirq, names.frame(f)),
        Owner::Frame(f) => (Lane::Irq, names.frame(f)),
    };
    Slice { lane, name, start_ns: a, dur_ns: b.saturating_sub(a) }
}
