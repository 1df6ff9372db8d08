//! Where an episode's time went: the stages of the wake-up path, the
//! causes (who had the CPU meanwhile) and the timeline's slices.

use crate::descriptor::WakePath;
use serde::{Deserialize, Serialize};

/// The stages of one wake-up, each relative to the previous one; they add
/// up to the latency.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stages {
    /// Programmed time -> timer interrupt entry.
    pub irq_ns: u64,
    /// Interrupt entry -> the probe's hrtimer callback starts.
    pub handler_ns: u64,
    /// Callback start -> `sched_waking` of the probe thread.
    pub wake_ns: u64,
    /// Waking -> `sched_switch` into the probe thread.
    pub thread_ns: u64,
    /// Switch-in -> the probe's own timestamp (return to user space).
    pub user_ns: u64,
}

impl Stages {
    pub const NAMES: [&'static str; 5] = ["irq", "handler", "wake", "thread", "user"];

    /// The stage series of a traced run: the five relative stages, then
    /// the absolute times (from the programmed time) at which the handler,
    /// the wake-up and the switch-in began (irq's absolute is itself, and
    /// user's is the latency).
    pub const SERIES: [&'static str; 8] =
        ["irq", "handler", "wake", "thread", "user", "handler_abs", "wake_abs", "thread_abs"];

    /// The five stages of a received datagram's path to its thread
    /// (`netlat`): queue = kernel receive timestamp -> the NET_RX softirq
    /// that delivers it starts, stack -> `sched_waking` of the receiver
    /// (protocol work, other datagrams' included), softirq -> that softirq
    /// ends, thread -> switch-in of the receiver, user -> recvmsg returns.
    /// They fill the same five slots as the timer stages.
    pub const NET_NAMES: [&'static str; 5] = ["queue", "stack", "softirq", "thread", "user"];

    /// The stage series of a traced `netlat` run, as [`Stages::SERIES`].
    pub const NET_SERIES: [&'static str; 8] =
        ["queue", "stack", "softirq", "thread", "user", "stack_abs", "softirq_abs", "thread_abs"];

    /// The stage names and series of a wake-up along `path`.
    pub fn of_path(path: WakePath) -> (&'static [&'static str; 5], &'static [&'static str; 8]) {
        match path {
            WakePath::Timer => (&Self::NAMES, &Self::SERIES),
            WakePath::NetRx => (&Self::NET_NAMES, &Self::NET_SERIES),
        }
    }

    /// The stage names and series of `probe`'s traced samples: along its
    /// wake-up path (a datagram's receive path for `netlat`), a timer's for
    /// a probe of no known path.
    pub fn of_probe(probe: &str) -> (&'static [&'static str; 5], &'static [&'static str; 8]) {
        Self::of_path(crate::descriptor::wake_path(probe))
    }

    /// Whether `metric` is a stage series (of any probe), not a measured
    /// metric.
    pub fn is_series(metric: &str) -> bool {
        Self::SERIES.contains(&metric) || Self::NET_SERIES.contains(&metric)
    }

    /// The values of [`Stages::SERIES`].
    pub fn series_values(&self) -> [u64; 8] {
        let [a, b, c, d, e] = self.values();
        [a, b, c, d, e, a + b, a + b + c, a + b + c + d]
    }

    pub fn values(&self) -> [u64; 5] {
        [self.irq_ns, self.handler_ns, self.wake_ns, self.thread_ns, self.user_ns]
    }

    /// The instants at which each stage begins, from the programmed time
    /// `p`, and the wake-up last.
    pub fn marks(&self, p: u64) -> [u64; 6] {
        let mut m = [p; 6];
        for (i, v) in self.values().into_iter().enumerate() {
            m[i + 1] = m[i] + v;
        }
        m
    }

    pub fn total(&self) -> u64 {
        self.values().iter().sum()
    }

    /// The longest stage: (name, ns).
    pub fn largest(&self) -> (&'static str, u64) {
        let v = self.values();
        let i = (0..5).max_by_key(|&i| (v[i], 5 - i)).unwrap_or(0);
        (Self::NAMES[i], v[i])
    }
}

/// The name of a [`CauseKind::User`] cause that is not the return to
/// user space: a datagram that came while its receiver was running, and
/// waited in the socket while the receiver handled the ones before it.
pub const BUSY_RECEIVER: &str = "busy with earlier datagrams";

/// What held the CPU during part of a sample's latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CauseKind {
    /// Another thread ran while the probe thread was runnable.
    Thread,
    /// A hard interrupt handler (device IRQ or interrupt vector).
    Irq,
    Softirq,
    /// The probe's own timer interrupt and hrtimer path.
    Timer,
    /// Switch-in to the probe's timestamp: the return to user space (or,
    /// named [`BUSY_RECEIVER`], a receiver busy with earlier datagrams).
    User,
    /// Time no event covers: interrupts off, the hypervisor, SMI, hardware.
    Unaccounted,
    /// The wake-up was still on its way from another CPU (named `cpuN`,
    /// where its `sched_waking` was recorded): what ran on the probe's CPU
    /// meanwhile did not delay it.
    Remote,
}

impl CauseKind {
    /// Every kind, in order.
    pub const ALL: [CauseKind; 7] = [
        CauseKind::Thread,
        CauseKind::Irq,
        CauseKind::Softirq,
        CauseKind::Timer,
        CauseKind::User,
        CauseKind::Unaccounted,
        CauseKind::Remote,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CauseKind::Thread => "thread",
            CauseKind::Irq => "irq",
            CauseKind::Softirq => "softirq",
            CauseKind::Timer => "timer",
            CauseKind::User => "user",
            CauseKind::Unaccounted => "unaccounted",
            CauseKind::Remote => "remote",
        }
    }
}

/// The class of an episode: the kind of its main cause ([`main_cause`];
/// unaccounted when nothing was attributed).
pub fn class_of(causes: &[Cause]) -> CauseKind {
    main_cause(causes).map_or(CauseKind::Unaccounted, |c| c.kind)
}

/// Whether softirq `s` ran from thread `t`'s own kernel code (it is
/// [`Host::in_kernel`] on `t`): part of what `t` did, as a send on loopback
/// runs the receive path's NET_RX inline.
pub fn run_by(s: &Cause, t: &Cause) -> bool {
    s.kind == CauseKind::Softirq
        && t.kind == CauseKind::Thread
        && t.pid.is_some()
        && s.host.as_ref().is_some_and(|h| h.in_kernel && Some(h.pid) == t.pid)
}

/// The cause that leads an episode: the largest, a thread counted with the
/// softirqs it ran from its own kernel code (which then go with it); the
/// first of equals.
pub fn main_cause(causes: &[Cause]) -> Option<&Cause> {
    let weight = |c: &Cause| c.ns + causes.iter().filter(|s| run_by(s, c)).map(|s| s.ns).sum::<u64>();
    causes
        .iter()
        .filter(|c| !causes.iter().any(|t| run_by(c, t)))
        .fold(None, |best: Option<(&Cause, u64)>, c| match best {
            Some((_, w)) if w >= weight(c) => best,
            _ => Some((c, weight(c))),
        })
        .map(|(c, _)| c)
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    pub kind: CauseKind,
    /// Thread comm, IRQ name (`virtio0-input`, `reschedule`), softirq
    /// vector (`NET_RX`), or what ran during unaccounted time.
    pub name: String,
    /// The thread (or, for unaccounted time, the thread that was current).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// IRQ number for device interrupts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq: Option<i32>,
    /// Scheduling of a thread, e.g. `SCHED_FIFO 99`, `SCHED_OTHER`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched: Option<String>,
    /// The stage in which most of this time fell, when the stages are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// A softirq's: the task it ran on top of, when one other than the
    /// probe's and the idle task (a thread that ran it in its own kernel
    /// code, on an interrupt's return to it, or ksoftirqd).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<Host>,
    /// A thread's: the part of its time that it held the CPU in the kernel
    /// with the probe runnable (it ran on after an interrupt returned to it
    /// while the probe waited: a kernel that preempts user space there did
    /// not preempt it), and the time from the first such return to when it
    /// gave the CPU up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_ns: Option<u64>,
    pub ns: u64,
}

/// What a kernel thread of PREEMPT_RT (and of `threadirqs`) is, by its
/// name: `irq/3-ttyS1` is IRQ 3's handler, threaded (ttyS1's); `ktimers/N`
/// runs the timer softirqs on an RT kernel; `ksoftirqd/N` the softirqs
/// deferred; `rcuc/N` RCU's callbacks on a CPU without `rcu_nocbs`;
/// `irq_work/N` the work an interrupt deferred (on PREEMPT_RT). None for
/// any other name.
pub fn kernel_thread(comm: &str) -> Option<String> {
    let cpu =
        |prefix: &str| comm.strip_prefix(prefix).filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if let Some(rest) = comm.strip_prefix("irq/")
        && let Some((line, dev)) = rest.split_once('-')
        && line.parse::<u32>().is_ok()
    {
        // The comm is cut at 15 bytes: the device's name may be too.
        return Some(format!("the threaded handler of IRQ {line} ({dev})"));
    }
    if cpu("ktimers/").is_some() {
        return Some(
            "the RT kernel's timer softirq thread: hrtimers not marked hard and timer wheels expire here".into(),
        );
    }
    if cpu("ksoftirqd/").is_some() {
        return Some("the softirqs deferred to a thread".into());
    }
    if cpu("rcuc/").is_some() {
        return Some("RCU's callbacks on this CPU (rcu_nocbs= moves them off it)".into());
    }
    if cpu("irq_work/").is_some() {
        return Some("work deferred from interrupts (irq_work), threaded on PREEMPT_RT".into());
    }
    None
}

/// An `irq/N-dev` thread's IRQ line.
pub fn irq_thread_line(comm: &str) -> Option<u32> {
    comm.strip_prefix("irq/")?.split_once('-')?.0.parse().ok()
}

/// The task a softirq ran on top of (see [`Cause::host`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    pub pid: i32,
    pub name: String,
    /// It ran from the task's own kernel code (`local_bh_enable`, as a
    /// send path on loopback does), not on an interrupt's return: the task
    /// was in the kernel.
    pub in_kernel: bool,
}

impl Cause {
    /// `kworker/1:2 (pid 77, SCHED_OTHER)`, `virtio0-input (irq 24)`.
    pub fn label(&self) -> String {
        match self.kind {
            CauseKind::Thread => {
                let role = kernel_thread(&self.name).map(|r| format!(": {r}")).unwrap_or_default();
                match (&self.pid, &self.sched) {
                    (Some(p), Some(s)) => format!("{} (pid {p}, {s}{role})", self.name),
                    (Some(p), None) => format!("{} (pid {p}{role})", self.name),
                    _ if !role.is_empty() => format!("{} ({})", self.name, &role[2..]),
                    _ => self.name.clone(),
                }
            }
            CauseKind::Irq => match self.irq {
                Some(n) => format!("{} (irq {n})", self.name),
                None => self.name.clone(),
            },
            _ => self.name.clone(),
        }
    }
}

/// A lane of the episode timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lane {
    Task,
    Irq,
    Softirq,
    Stage,
}

/// One bar of the timeline (CLOCK_MONOTONIC ns).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slice {
    pub lane: Lane,
    pub name: String,
    pub start_ns: u64,
    pub dur_ns: u64,
}
