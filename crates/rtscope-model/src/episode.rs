//! Cause episodes: a sample above the cause threshold, with the kernel
//! events of its CPU turned into stages (where the time went along the
//! wake-up path) and causes (who had the CPU meanwhile), a one-line
//! verdict, and a timeline for Perfetto. Also the per-run trace summary and
//! the "top causes" table over a run's episodes.

use crate::descriptor::WakePath;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
}

impl CauseKind {
    /// Every kind, in order.
    pub const ALL: [CauseKind; 6] = [
        CauseKind::Thread,
        CauseKind::Irq,
        CauseKind::Softirq,
        CauseKind::Timer,
        CauseKind::User,
        CauseKind::Unaccounted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CauseKind::Thread => "thread",
            CauseKind::Irq => "irq",
            CauseKind::Softirq => "softirq",
            CauseKind::Timer => "timer",
            CauseKind::User => "user",
            CauseKind::Unaccounted => "unaccounted",
        }
    }
}

/// The class of an episode: the kind of its largest cause (unaccounted
/// when nothing was attributed).
pub fn class_of(causes: &[Cause]) -> CauseKind {
    causes.iter().min_by_key(|c| std::cmp::Reverse(c.ns)).map_or(CauseKind::Unaccounted, |c| c.kind)
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
    pub ns: u64,
}

impl Cause {
    /// `kworker/1:2 (pid 77, SCHED_OTHER)`, `virtio0-input (irq 24)`.
    pub fn label(&self) -> String {
        match self.kind {
            CauseKind::Thread => match (&self.pid, &self.sched) {
                (Some(p), Some(s)) => format!("{} (pid {p}, {s})", self.name),
                (Some(p), None) => format!("{} (pid {p})", self.name),
                _ => self.name.clone(),
            },
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

/// One explained sample.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    pub probe: String,
    /// The workload, in an assessment (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<String>,
    pub metric: String,
    pub cpu: i64,
    /// The sample's number on its CPU, from 1.
    pub sample: u64,
    /// When the probe should have run (CLOCK_MONOTONIC ns).
    pub programmed_ns: u64,
    /// When it did (its own timestamp).
    pub woke_ns: u64,
    pub latency_ns: u64,
    /// The stages, when every event of the wake-up path was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Stages>,
    /// Who had the CPU from the programmed time to the wake-up, largest
    /// first; they add up to the latency.
    pub causes: Vec<Cause>,
    pub verdict: String,
    /// The CPU's timeline from the probe's previous wake-up to this one.
    #[serde(default)]
    pub slices: Vec<Slice>,
    /// The kernel and user stacks of what ran on the CPU when the probe's
    /// timer woke it (`--stacks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<CodeStack>,
    /// The stacks of the thread that held the CPU longest (the main cause,
    /// when a thread) while it ran: the profiler's middle sample of it in
    /// the window, one in its own (user) code where there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocker: Option<CodeStack>,
    /// The sampling profiler's samples inside the window from the
    /// programmed time to the wake-up (`--sample-hz`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<WindowSamples>,
    /// The unaccounted time, named where the evidence allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remainder: Option<Remainder>,
}

/// One frame of a stack, innermost first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// The address (a return address, the first the interrupted one).
    pub addr: u64,
    /// The function, when it could be named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// Bytes into the function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// `kernel`, a kernel module's name, or the mapped file (e.g. `libc.so.6`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// Source file and line, from DWARF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

impl Frame {
    /// The function (or the address), e.g. `dup_mmap`, `0x7f3a12c0`.
    pub fn name(&self) -> String {
        self.function.clone().unwrap_or_else(|| format!("{:#x}", self.addr))
    }

    /// `dup_mmap+0x1a4 (kernel)`, `spin_burst+0x20 (rtscope) src/disturb.rs:120`.
    pub fn label(&self) -> String {
        let mut s = self.name();
        if let (Some(_), Some(o)) = (&self.function, self.offset) {
            s.push_str(&format!("+{o:#x}"));
        }
        if let Some(m) = &self.module {
            s.push_str(&format!(" ({m})"));
        }
        if let Some(f) = &self.file {
            s.push_str(&format!(" {f}"));
            if let Some(l) = self.line {
                s.push_str(&format!(":{l}"));
            }
        }
        s
    }
}

/// The stacks of the context that ran on the probe's CPU at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeStack {
    /// How it was taken: `wake-up` (the probe's `sched_waking`, in the
    /// interrupt that woke it, on top of what that interrupt interrupted)
    /// or `profiler sample`.
    #[serde(default)]
    pub taken: String,
    /// When (CLOCK_MONOTONIC ns).
    pub t_ns: u64,
    /// The task that was running (0: idle), and its name.
    pub pid: i32,
    pub comm: String,
    /// Kernel frames, innermost first: at a wake-up, the interrupt's own
    /// frames first, then the interrupted code's, if it was in the kernel;
    /// of a profiler sample, the interrupted code's only.
    pub kernel: Vec<Frame>,
    /// User frames of that task, innermost first (frame-pointer walk: the
    /// first is exact, the rest need frame pointers).
    #[serde(default)]
    pub user: Vec<Frame>,
    /// Why frames could not be named, with the fix.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl CodeStack {
    /// `taken` of a profiler sample's stacks.
    pub const SAMPLE: &'static str = "profiler sample";
    /// `taken` of the stacks at the probe's wake-up.
    pub const WAKE_UP: &'static str = "wake-up";

    /// Whether a profiler sample's (no interrupt frames on top), not the
    /// wake-up's.
    pub fn is_sample(&self) -> bool {
        self.taken == Self::SAMPLE
    }

    /// The interrupted code: of a stack taken at the wake-up, the kernel
    /// frames below the interrupt's entry (those after its entry frames:
    /// x86's `asm_*` since 5.8, its older stubs, arm64's exception
    /// vectors), empty when user space was interrupted; of a profiler
    /// sample, its whole kernel chain (perf walks it from the interrupted
    /// registers, without the sampling interrupt's frames).
    pub fn interrupted_kernel(&self) -> &[Frame] {
        if self.is_sample() {
            return &self.kernel;
        }
        let entry = |f: &Frame| f.function.as_deref().is_some_and(is_interrupt_entry);
        let Some(first) = self.kernel.iter().position(entry) else { return &[] };
        let last = first + self.kernel[first..].iter().take_while(|f| entry(f)).count() - 1;
        &self.kernel[last + 1..]
    }
}

/// Whether `function` is an interrupt's entry from the vector: x86's
/// `asm_*` (5.8 on), the handlers those call by the vector's name, x86's
/// older stubs, and arm64's exception vectors (`el1h_64_irq` and kin).
fn is_interrupt_entry(function: &str) -> bool {
    const OLD_X86: [&str; 8] = [
        "common_interrupt",
        "apic_timer_interrupt",
        "reschedule_interrupt",
        "call_function_interrupt",
        "call_function_single_interrupt",
        "irq_work_interrupt",
        "error_interrupt",
        "spurious_interrupt",
    ];
    function.starts_with("asm_")
        || OLD_X86.contains(&function)
        || function
            .strip_prefix("el1h_64_")
            .or_else(|| function.strip_prefix("el0t_64_"))
            .is_some_and(|v| matches!(v, "irq" | "fiq" | "error"))
}

/// How many of a window's samples fell in one function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleRow {
    pub function: String,
    /// `kernel`, a module, or the mapped file.
    pub module: String,
    pub samples: u64,
}

/// A stack folded root first (`main;run;spin_burst`) and its samples, as
/// flame graphs take them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Folded {
    pub stack: String,
    pub samples: u64,
}

/// The sampling profiler's samples inside an episode's window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowSamples {
    pub samples: u64,
    /// What the sampling period would give over the window on a CPU that
    /// never stops (fewer seen: the sampling interrupt was held off).
    pub expected: f64,
    /// Samples taken where interrupts were off (NMI sampling only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irqs_off: Option<u64>,
    /// Each sample's innermost named function, most samples first.
    pub rows: Vec<SampleRow>,
    /// Each sample's whole stack, kernel below user, root first.
    pub folded: Vec<Folded>,
}

/// The unaccounted time of an episode, named where the evidence allows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remainder {
    pub ns: u64,
    /// `idle exit`, `late in idle poll`, `interrupts off`, `hypervisor`,
    /// `interrupts off or hypervisor` or `unknown` (docs/json.md).
    pub verdict: String,
    /// The evidence, or why there is none.
    pub why: String,
}

fn us(ns: u64) -> String {
    format!("{:.1}us", ns as f64 / 1000.0)
}

/// Causes smaller than this are left out of a verdict (they stay stored).
const VERDICT_MIN_NS: u64 = 500;

/// The one-line verdict, e.g. `cpu1 #8412 latency 842.1us: thread 815.0us,
/// blocked by kworker/1:2 (pid 77, SCHED_OTHER) 790.3us; irq 12.0us
/// (virtio0-input 10.1us); softirq NET_RX 8.2us; unaccounted 3.1us`.
pub fn verdict(
    cpu: i64,
    sample: u64,
    metric: &str,
    latency_ns: u64,
    stages: Option<&Stages>,
    causes: &[Cause],
) -> String {
    verdict_named(&Stages::NAMES, cpu, sample, metric, latency_ns, stages, causes)
}

/// [`verdict`] with the stages named `names` (e.g. [`Stages::NET_NAMES`]).
pub fn verdict_named(
    names: &[&str; 5],
    cpu: i64,
    sample: u64,
    metric: &str,
    latency_ns: u64,
    stages: Option<&Stages>,
    causes: &[Cause],
) -> String {
    let mut s = format!("cpu{cpu} #{sample} {metric} {}", us(latency_ns));
    let main = causes.iter().max_by_key(|c| c.ns);
    let mut parts: Vec<String> = Vec::new();
    // The stage the main cause fell in (else the longest), as the head.
    let mut first = String::new();
    if let Some(st) = stages {
        let named = main.and_then(|m| m.stage.as_deref()).and_then(|n| names.iter().position(|x| *x == n));
        let (name, ns) = match named {
            Some(i) => (names[i], st.values()[i]),
            None => {
                let (largest, ns) = st.largest();
                (Stages::NAMES.iter().position(|x| *x == largest).map_or(largest, |i| names[i]), ns)
            }
        };
        first = format!("{name} {}", us(ns));
    }
    if let Some(m) = main {
        let what = match m.kind {
            CauseKind::Thread => format!("blocked by {}", m.label()),
            CauseKind::Irq => format!("in irq {}", m.label()),
            CauseKind::Softirq => format!("in softirq {}", m.name),
            CauseKind::Timer => "in the probe's timer interrupt".to_string(),
            CauseKind::User if m.name == BUSY_RECEIVER => {
                "queued behind earlier datagrams (the receiver was still handling them)".to_string()
            }
            CauseKind::User => "returning to user space".to_string(),
            CauseKind::Unaccounted if m.pid.is_some_and(|p| p != 0) => {
                format!("unaccounted (interrupts off, hypervisor or SMI; {} was running)", m.name)
            }
            CauseKind::Unaccounted => "unaccounted (interrupts off, hypervisor, SMI or idle exit)".to_string(),
        };
        let head = if first.is_empty() { what } else { format!("{first}, {what}") };
        parts.push(format!("{head} {}", us(m.ns)));
    } else if !first.is_empty() {
        parts.push(first);
    }
    // The rest, grouped by kind, largest first.
    let mut groups: BTreeMap<CauseKind, Vec<&Cause>> = BTreeMap::new();
    for c in causes.iter().filter(|c| Some(*c) != main && c.ns >= VERDICT_MIN_NS) {
        groups.entry(c.kind).or_default().push(c);
    }
    let mut rest: Vec<(u64, String)> = groups
        .into_iter()
        .map(|(kind, list)| {
            let total: u64 = list.iter().map(|c| c.ns).sum();
            let top = list.iter().max_by_key(|c| c.ns).map(|c| (c.name.clone(), c.ns));
            let text = match (kind, top) {
                (CauseKind::Softirq, Some((name, _))) if list.len() == 1 => format!("softirq {name} {}", us(total)),
                (CauseKind::Timer | CauseKind::User | CauseKind::Unaccounted, _) => {
                    format!("{} {}", kind.as_str(), us(total))
                }
                (_, Some((name, ns))) => format!("{} {} ({name} {})", kind.as_str(), us(total), us(ns)),
                (_, None) => format!("{} {}", kind.as_str(), us(total)),
            };
            (total, text)
        })
        .collect();
    rest.sort_by_key(|r| std::cmp::Reverse(r.0));
    parts.extend(rest.into_iter().map(|(_, t)| t));
    if !parts.is_empty() {
        s.push_str(": ");
        s.push_str(&parts.join("; "));
    }
    s
}

/// One row of the top-causes table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopCause {
    pub kind: CauseKind,
    pub name: String,
    /// Episodes in which this was the largest cause.
    pub main_in: u64,
    /// Episodes in which it appears at all.
    pub seen_in: u64,
    pub total_ns: u64,
    /// Its share of all episodes' latency, %.
    pub share_pct: f64,
    pub max_ns: u64,
}

/// Aggregates episodes by cause (kind and name; threads by comm), largest
/// total first: which sources account for how much of the tail.
pub fn top_causes(episodes: &[Episode]) -> Vec<TopCause> {
    let all: u64 = episodes.iter().map(|e| e.latency_ns).sum();
    let mut by: BTreeMap<(CauseKind, String), TopCause> = BTreeMap::new();
    for e in episodes {
        let main = e.causes.iter().max_by_key(|c| c.ns);
        let mut seen: Vec<(CauseKind, String)> = Vec::new();
        for c in &e.causes {
            let key = (c.kind, c.name.clone());
            let row = by.entry(key.clone()).or_insert_with(|| TopCause {
                kind: c.kind,
                name: c.name.clone(),
                main_in: 0,
                seen_in: 0,
                total_ns: 0,
                share_pct: 0.0,
                max_ns: 0,
            });
            row.total_ns += c.ns;
            row.max_ns = row.max_ns.max(c.ns);
            if !seen.contains(&key) {
                row.seen_in += 1;
                if main.is_some_and(|m| m.kind == c.kind && m.name == c.name) {
                    row.main_in += 1;
                }
                seen.push(key);
            }
        }
    }
    let mut rows: Vec<TopCause> = by.into_values().collect();
    for r in &mut rows {
        r.share_pct = if all == 0 { 0.0 } else { 100.0 * r.total_ns as f64 / all as f64 };
    }
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    rows
}

/// What the tracer did during a run, stored with it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TraceSummary {
    /// The tracefs instance used.
    pub instance: String,
    pub clock: String,
    pub buffer_kb_per_cpu: u64,
    pub events: Vec<String>,
    /// Events asked for that this kernel lacks, with what is lost.
    pub missing: Vec<String>,
    pub per_cpu: Vec<TraceCpu>,
    /// CPU time of the reader thread and its share of the run's wall time.
    pub reader_cpu_ns: u64,
    pub reader_cpu_pct: f64,
    pub cause_threshold: String,
    /// Episodes built, and kept (the worst, per CPU).
    pub episodes_built: u64,
    pub episodes_kept: u64,
    /// The samples are windows of lost time (the noise probe's
    /// interruptions), attributed without a stage split.
    pub windows: bool,
    /// `--stacks`: what the stack instance recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stacks: Option<StacksSummary>,
    /// `--sample-hz`: the sampling profiler.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileSummary>,
}

/// What `--stacks` recorded during a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StacksSummary {
    /// The probe's wake-ups whose stacks were recorded, and the episodes
    /// that got one.
    pub taken: u64,
    pub episodes: u64,
    /// What one wake-up's stacks cost on the wake-up path: from the
    /// `sched_waking` record to the kernel stack's (the kernel's unwind).
    pub cost_p50_ns: u64,
    pub cost_max_ns: u64,
    /// Stack records the kernel could not write (the stack instance's ring
    /// full): wake-ups without their stacks.
    pub lost: u64,
    /// Symbolisation problems and their fixes.
    pub notes: Vec<String>,
}

/// The sampling profiler of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProfileSummary {
    /// `cycles (hardware, NMI)` or `cpu-clock (software, timer interrupt)`.
    pub event: String,
    pub hz: u64,
    /// What its samples cannot see, and, for cpu-clock, why not cycles.
    pub blind_spot: String,
    pub samples: u64,
    /// Samples inside episodes' windows.
    pub in_episodes: u64,
    /// Samples the kernel could not hand over (ring full).
    pub lost: u64,
    /// Functions more frequent inside episodes than outside them.
    pub over: Vec<OverRow>,
    pub notes: Vec<String>,
    /// After [`TraceSummary::absorb`]: the samples inside episodes of the
    /// cell whose ranking `over` is (0: this summary's own).
    #[serde(skip)]
    pub over_of: u64,
}

impl ProfileSummary {
    /// The samples inside episodes behind the ranking `over`.
    fn ranked_on(&self) -> u64 {
        if self.over_of > 0 { self.over_of } else { self.in_episodes }
    }
}

/// A function's share of samples inside episodes against outside.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverRow {
    pub function: String,
    pub module: String,
    pub inside: u64,
    pub outside: u64,
    /// (inside / all inside) / (outside / all outside), outside counted
    /// at least once.
    pub ratio: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TraceCpu {
    pub cpu: i64,
    pub events: u64,
    /// Events the kernel lost (ring buffer overrun or dropped).
    pub lost: u64,
    pub bytes: u64,
    /// Samples the probe handed to the tracer, and those it split into stages.
    pub samples: u64,
    pub decomposed: u64,
    /// Samples whose wake-up path was not (fully) in the trace.
    pub incomplete: u64,
    /// Samples whose switch into the probe thread was not traced (some
    /// kernels skip the switch out of idle) and was taken at the last
    /// interrupt exit before the wake-up.
    pub switch_inferred: u64,
    /// Samples the tracer could not take (its ring from the probe was full).
    pub samples_dropped: u64,
    /// Reads of the CPU's buffer that failed or returned an unreadable page.
    pub read_errors: u64,
    /// When samples are windows of lost time (the noise probe), every one
    /// of them attributed, per kind of cause (like rtla osnoise's IRQ,
    /// softirq, thread and HW noise columns); empty otherwise.
    pub by_kind: Vec<KindTotal>,
}

/// One kind of cause over all of a CPU's samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KindTotal {
    pub kind: CauseKind,
    /// Samples in which it took part, and in which it was the largest.
    pub samples: u64,
    pub main: u64,
    /// Its time over all samples.
    pub ns: u64,
}

impl KindTotal {
    /// Adds one sample's causes to the totals.
    pub fn add(totals: &mut Vec<KindTotal>, causes: &[Cause]) {
        let main = causes.iter().max_by_key(|c| c.ns).map(|c| c.kind);
        let mut seen: Vec<CauseKind> = Vec::with_capacity(causes.len());
        for c in causes.iter().filter(|c| c.ns > 0) {
            let i = match totals.iter().position(|t| t.kind == c.kind) {
                Some(i) => i,
                None => {
                    totals.push(KindTotal { kind: c.kind, samples: 0, main: 0, ns: 0 });
                    totals.len() - 1
                }
            };
            let t = &mut totals[i];
            t.ns += c.ns;
            if !seen.contains(&c.kind) {
                seen.push(c.kind);
                t.samples += 1;
                t.main += u64::from(main == Some(c.kind));
            }
        }
        totals.sort_by_key(|t| std::cmp::Reverse(t.ns));
    }
}

impl TraceSummary {
    pub fn lost(&self) -> u64 {
        self.per_cpu.iter().map(|c| c.lost).sum()
    }

    /// Adds what the tracer did in another part of the same run (an
    /// assessment traces each cell with its own instance): counts add up
    /// per CPU, the reader's CPU share is over both parts' wall time.
    pub fn absorb(&mut self, other: &TraceSummary) {
        if self.instance.is_empty() {
            *self = other.clone();
            return;
        }
        let wall = |t: &TraceSummary| {
            if t.reader_cpu_pct > 0.0 { t.reader_cpu_ns as f64 * 100.0 / t.reader_cpu_pct } else { 0.0 }
        };
        let walls = wall(self) + wall(other);
        self.reader_cpu_ns += other.reader_cpu_ns;
        self.reader_cpu_pct = if walls > 0.0 { 100.0 * self.reader_cpu_ns as f64 / walls } else { 0.0 };
        for e in &other.events {
            if !self.events.contains(e) {
                self.events.push(e.clone());
            }
        }
        for m in &other.missing {
            if !self.missing.contains(m) {
                self.missing.push(m.clone());
            }
        }
        for c in &other.per_cpu {
            match self.per_cpu.iter_mut().find(|x| x.cpu == c.cpu) {
                Some(x) => {
                    x.events += c.events;
                    x.lost += c.lost;
                    x.bytes += c.bytes;
                    x.samples += c.samples;
                    x.decomposed += c.decomposed;
                    x.incomplete += c.incomplete;
                    x.switch_inferred += c.switch_inferred;
                    x.samples_dropped += c.samples_dropped;
                    x.read_errors += c.read_errors;
                }
                None => self.per_cpu.push(c.clone()),
            }
        }
        self.episodes_built += other.episodes_built;
        self.episodes_kept += other.episodes_kept;
        match (&mut self.stacks, &other.stacks) {
            (Some(a), Some(b)) => {
                a.taken += b.taken;
                a.episodes += b.episodes;
                a.cost_p50_ns = a.cost_p50_ns.max(b.cost_p50_ns);
                a.cost_max_ns = a.cost_max_ns.max(b.cost_max_ns);
                a.lost += b.lost;
                a.notes.extend(b.notes.iter().filter(|n| !a.notes.contains(n)).cloned().collect::<Vec<_>>());
            }
            (None, Some(b)) => self.stacks = Some(b.clone()),
            _ => {}
        }
        match (&mut self.profile, &other.profile) {
            (Some(a), Some(b)) => {
                // Each cell ranks its own (the rows are its top ones only,
                // so they cannot be summed): the ranking from the cell with
                // the most samples inside episodes is kept.
                let kept = a.ranked_on();
                if b.ranked_on() > kept {
                    a.over.clone_from(&b.over);
                    a.over_of = b.ranked_on();
                } else {
                    a.over_of = kept;
                }
                a.samples += b.samples;
                a.in_episodes += b.in_episodes;
                a.lost += b.lost;
            }
            (None, Some(b)) => self.profile = Some(b.clone()),
            _ => {}
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn trace_summaries_of_two_cells_add_up() {
        let a = TraceSummary {
            instance: "rtscope-1".into(),
            events: vec!["sched:sched_switch".into()],
            per_cpu: vec![TraceCpu { cpu: 0, events: 10, lost: 1, ..Default::default() }],
            reader_cpu_ns: 1_000,
            reader_cpu_pct: 1.0,
            episodes_kept: 2,
            ..Default::default()
        };
        let mut sum = TraceSummary::default();
        sum.absorb(&a);
        let mut b = a.clone();
        b.reader_cpu_pct = 0.5;
        b.per_cpu.push(TraceCpu { cpu: 1, events: 5, ..Default::default() });
        sum.absorb(&b);
        assert_eq!(sum.per_cpu[0].events, 20);
        assert_eq!(sum.per_cpu[1].events, 5);
        assert_eq!(sum.lost(), 2);
        assert_eq!(sum.episodes_kept, 4);
        assert_eq!(sum.events.len(), 1);
        // 2000 ns of reader CPU over 100_000 + 200_000 ns of wall time.
        assert!((sum.reader_cpu_pct - 2000.0 * 100.0 / 300_000.0).abs() < 1e-9, "{}", sum.reader_cpu_pct);
    }

    #[test]
    fn the_ranking_from_more_samples_inside_episodes_is_kept() {
        let row = |f: &str| OverRow { function: f.into(), module: "kernel".into(), inside: 1, outside: 1, ratio: 1.0 };
        let cell = |inside: u64, f: &str| TraceSummary {
            instance: "rtscope-1".into(),
            profile: Some(ProfileSummary {
                samples: 1_000,
                in_episodes: inside,
                over: vec![row(f)],
                ..Default::default()
            }),
            ..Default::default()
        };
        let ranked = |cells: &[(u64, &str)]| {
            let mut sum = TraceSummary::default();
            for (inside, f) in cells {
                sum.absorb(&cell(*inside, f));
            }
            let p = sum.profile.unwrap();
            assert_eq!(p.in_episodes, cells.iter().map(|c| c.0).sum::<u64>());
            assert_eq!(p.samples, 1_000 * cells.len() as u64);
            p.over[0].function.clone()
        };
        assert_eq!(ranked(&[(5, "small"), (40, "large"), (30, "middle")]), "large");
        // Against the kept cell's count, not the sum so far.
        assert_eq!(ranked(&[(10, "a"), (20, "b"), (25, "c")]), "c");
        assert_eq!(ranked(&[(30, "a"), (20, "b"), (25, "c")]), "a");
    }

    #[test]
    fn the_interrupted_kernel_code_lies_below_the_entry_frames() {
        let stack = |names: &[&str]| CodeStack {
            kernel: names.iter().map(|n| Frame { function: Some(n.to_string()), ..Default::default() }).collect(),
            ..Default::default()
        };
        let names = |s: &CodeStack| s.interrupted_kernel().iter().map(Frame::name).collect::<Vec<_>>();
        // x86 since 5.8: a device interrupt in the kernel's fork path.
        let x86 = stack(&["handle_irq_event", "common_interrupt", "asm_common_interrupt", "dup_mmap", "copy_process"]);
        assert_eq!(names(&x86), ["dup_mmap", "copy_process"]);
        // x86 before 5.8, and arm64.
        let old = stack(&["hrtimer_interrupt", "smp_apic_timer_interrupt", "apic_timer_interrupt", "dup_mmap"]);
        assert_eq!(names(&old), ["dup_mmap"]);
        let arm = stack(&["hrtimer_interrupt", "el1_interrupt", "el1h_64_irq_handler", "el1h_64_irq", "dup_mmap"]);
        assert_eq!(names(&arm), ["dup_mmap"]);
        // User space interrupted: nothing below the entry.
        assert!(stack(&["hrtimer_interrupt", "el0t_64_irq"]).interrupted_kernel().is_empty());
        assert!(stack(&["hrtimer_interrupt", "asm_sysvec_apic_timer_interrupt"]).interrupted_kernel().is_empty());
        assert!(stack(&["schedule"]).interrupted_kernel().is_empty());
        // A profiler sample's chain starts at the interrupted code.
        let sample = CodeStack { taken: "profiler sample".into(), ..stack(&["dup_mmap", "copy_process"]) };
        assert_eq!(names(&sample), ["dup_mmap", "copy_process"]);
    }

    fn cause(kind: CauseKind, name: &str, ns: u64) -> Cause {
        Cause { kind, name: name.into(), pid: None, irq: None, sched: None, stage: None, ns }
    }

    #[test]
    fn kind_totals_count_a_sample_once_per_kind() {
        use CauseKind::*;
        let mut totals = Vec::new();
        KindTotal::add(&mut totals, &[cause(Irq, "local_timer", 5), cause(Irq, "eth0", 3), cause(Thread, "spin", 200)]);
        KindTotal::add(&mut totals, &[cause(Unaccounted, "noise", 40)]);
        KindTotal::add(&mut totals, &[cause(Irq, "local_timer", 9), cause(Unaccounted, "noise", 0)]);
        let got: Vec<(CauseKind, u64, u64, u64)> = totals.iter().map(|t| (t.kind, t.samples, t.main, t.ns)).collect();
        assert_eq!(got, [(Thread, 1, 1, 200), (Unaccounted, 1, 1, 40), (Irq, 2, 1, 17)]);
    }

    pub(crate) fn sample_episode() -> Episode {
        let causes = vec![
            Cause {
                kind: CauseKind::Thread,
                name: "kworker/1:2".into(),
                pid: Some(77),
                irq: None,
                sched: Some("SCHED_OTHER".into()),
                stage: Some("thread".into()),
                ns: 790_300,
            },
            Cause { irq: Some(24), ..cause(CauseKind::Irq, "virtio0-input", 10_100) },
            cause(CauseKind::Irq, "reschedule", 1_900),
            cause(CauseKind::Softirq, "NET_RX", 8_200),
            cause(CauseKind::Unaccounted, "swapper/1", 3_100),
            cause(CauseKind::Timer, "timer", 300),
        ];
        let stages = Stages { irq_ns: 3_000, handler_ns: 12_000, wake_ns: 2_000, thread_ns: 815_000, user_ns: 10_100 };
        let latency = stages.total();
        Episode {
            probe: "wakeup".into(),
            load: None,
            metric: "latency".into(),
            cpu: 1,
            sample: 8412,
            programmed_ns: 1_000_000,
            woke_ns: 1_000_000 + latency,
            latency_ns: latency,
            verdict: verdict(1, 8412, "latency", latency, Some(&stages), &causes),
            stages: Some(stages),
            causes,
            slices: vec![],
            stack: None,
            blocker: None,
            samples: None,
            remainder: None,
        }
    }

    #[test]
    fn verdict_reads_like_rtla_auto_analysis() {
        let e = sample_episode();
        assert_eq!(
            e.verdict,
            "cpu1 #8412 latency 842.1us: thread 815.0us, blocked by kworker/1:2 (pid 77, SCHED_OTHER) 790.3us; \
             irq 12.0us (virtio0-input 10.1us); softirq NET_RX 8.2us; unaccounted 3.1us"
        );
        let v = verdict(0, 3, "latency", 5_000, None, &[cause(CauseKind::Unaccounted, "swapper/0", 5_000)]);
        assert_eq!(v, "cpu0 #3 latency 5.0us: unaccounted (interrupts off, hypervisor, SMI or idle exit) 5.0us");
        assert_eq!(verdict(0, 1, "latency", 10, None, &[]), "cpu0 #1 latency 0.0us");
    }

    #[test]
    fn top_causes_aggregate_by_source() {
        let a = sample_episode();
        let mut b = sample_episode();
        b.causes[0].pid = Some(78);
        b.causes[0].ns = 100;
        b.latency_ns = 50_000;
        let rows = top_causes(&[a.clone(), b]);
        assert_eq!(rows[0].name, "kworker/1:2");
        assert_eq!((rows[0].seen_in, rows[0].main_in, rows[0].total_ns), (2, 1, 790_400));
        let irq = rows.iter().find(|r| r.name == "virtio0-input").unwrap();
        assert_eq!(irq.seen_in, 2);
        assert_eq!(irq.main_in, 1, "b's largest cause is its irq");
        let share: f64 = rows.iter().map(|r| r.share_pct).sum();
        assert!(share > 0.0 && share <= 100.0 + 1e-9, "{share}");
        assert!(top_causes(&[]).is_empty());
    }

    #[test]
    fn net_verdicts_name_the_net_stages() {
        let st = Stages { irq_ns: 1_000, handler_ns: 2_000, wake_ns: 40_000, thread_ns: 3_000, user_ns: 1_000 };
        let c = Cause { stage: Some("softirq".into()), ..cause(CauseKind::Softirq, "NET_RX", 42_000) };
        let v = verdict_named(&Stages::NET_NAMES, 1, 7, "rx_wake", st.total(), Some(&st), &[c]);
        assert_eq!(v, "cpu1 #7 rx_wake 47.0us: softirq 40.0us, in softirq NET_RX 42.0us");
        let v = verdict_named(&Stages::NET_NAMES, 1, 7, "rx_wake", st.total(), Some(&st), &[]);
        assert_eq!(v, "cpu1 #7 rx_wake 47.0us: softirq 40.0us");
    }

    #[test]
    fn stages_add_up() {
        let s = sample_episode().stages.unwrap();
        assert_eq!(s.largest(), ("thread", 815_000));
        assert_eq!(s.total(), 842_100);
    }

    fn frame(function: &str, offset: u64, module: &str) -> Frame {
        let addr = 0xffff_ffff_8110_0000 + offset;
        Frame {
            addr,
            function: Some(function.into()),
            offset: Some(offset),
            module: Some(module.into()),
            ..Default::default()
        }
    }

    /// [`sample_episode`] with its code: the kworker blocking the probe ran
    /// fbdev's damage worker (its frames from the interrupted kernel down,
    /// one with its source line), the profiler's samples in the window, and
    /// the unaccounted time too short to name.
    pub(crate) fn code_episode() -> Episode {
        let worker = || {
            let below = ["process_one_work", "worker_thread", "kthread", "ret_from_fork"];
            let mut f = vec![
                frame("memcpy_toio", 0x52, "kernel"),
                Frame {
                    file: Some("drivers/gpu/drm/drm_format_helper.c".into()),
                    line: Some(302),
                    ..frame("drm_fb_memcpy", 0x95, "drm_kms_helper")
                },
                frame("drm_fb_helper_damage_work", 0x8a, "drm_kms_helper"),
            ];
            f.extend(below.iter().map(|n| frame(n, 0x40, "kernel")));
            f
        };
        let irq = ["try_to_wake_up", "hrtimer_wakeup", "__hrtimer_run_queues", "hrtimer_interrupt"];
        let mut kernel: Vec<Frame> = irq.iter().map(|n| frame(n, 0x1e, "kernel")).collect();
        kernel.push(frame("asm_sysvec_apic_timer_interrupt", 0x1a, "kernel"));
        kernel.extend(worker());
        let stack = CodeStack {
            taken: "wake-up".into(),
            t_ns: 1_003_100,
            pid: 77,
            comm: "kworker/1:2".into(),
            kernel,
            user: vec![],
            notes: vec!["1 frame in a module without symbols: sysctl kernel.kptr_restrict=1 names it".into()],
        };
        let mut blocker =
            CodeStack { taken: "profiler sample".into(), t_ns: 1_400_000, notes: vec![], ..stack.clone() };
        blocker.kernel = worker();
        let chain =
            "ret_from_fork [k];kthread [k];worker_thread [k];process_one_work [k];drm_fb_helper_damage_work [k]";
        let row = |function: &str, module: &str, samples| SampleRow {
            function: function.into(),
            module: module.into(),
            samples,
        };
        let samples = WindowSamples {
            samples: 8,
            expected: 8.4,
            irqs_off: Some(0),
            rows: vec![row("memcpy_toio", "kernel", 6), row("drm_fb_memcpy", "drm_kms_helper", 2)],
            folded: vec![
                Folded { stack: format!("{chain};drm_fb_memcpy [k];memcpy_toio [k]"), samples: 6 },
                Folded { stack: format!("{chain};drm_fb_memcpy [k]"), samples: 2 },
            ],
        };
        let why = "too short for the sampling period to tell; the interrupt came in memcpy_toio (kworker/1:2)";
        Episode {
            stack: Some(stack),
            blocker: Some(blocker),
            samples: Some(samples),
            remainder: Some(Remainder { ns: 3_100, verdict: "unknown".into(), why: why.into() }),
            ..sample_episode()
        }
    }

    /// The keys of a JSON object.
    fn keys(v: &serde_json::Value) -> Vec<&str> {
        let mut k: Vec<&str> = v.as_object().expect("an object").keys().map(String::as_str).collect();
        k.sort_unstable();
        k
    }

    /// The keys docs/json.md names for an episode's code, no more, no less.
    #[test]
    fn an_episodes_code_round_trips_with_the_documented_keys() {
        let e = code_episode();
        let text = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<Episode>(&text).unwrap(), e);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let stack = ["comm", "kernel", "notes", "pid", "t_ns", "taken", "user"];
        assert_eq!(keys(&v["stack"]), stack);
        assert_eq!(
            keys(&v["blocker"]),
            ["comm", "kernel", "pid", "t_ns", "taken", "user"],
            "a profiler sample keeps no notes"
        );
        assert_eq!(v["stack"]["taken"], "wake-up");
        assert_eq!(v["blocker"]["taken"], "profiler sample");
        assert_eq!(keys(&v["stack"]["kernel"][0]), ["addr", "function", "module", "offset"]);
        assert_eq!(keys(&v["blocker"]["kernel"][1]), ["addr", "file", "function", "line", "module", "offset"]);
        assert_eq!(v["blocker"]["kernel"][1]["module"], "drm_kms_helper");
        let w = &v["samples"];
        assert_eq!(keys(w), ["expected", "folded", "irqs_off", "rows", "samples"]);
        assert_eq!(keys(&w["rows"][0]), ["function", "module", "samples"]);
        assert_eq!(keys(&w["folded"][0]), ["samples", "stack"]);
        assert!(w["folded"][0]["stack"].as_str().unwrap().ends_with(";memcpy_toio [k]"), "root first: {w}");
        assert_eq!(keys(&v["remainder"]), ["ns", "verdict", "why"]);
        // An episode without code (an untraced stack, an older run) has none of the keys, and reads back.
        let bare = serde_json::to_value(sample_episode()).unwrap();
        for k in ["stack", "blocker", "samples", "remainder"] {
            assert!(bare.get(k).is_none(), "{k}: {bare}");
        }
        assert_eq!(serde_json::from_value::<Episode>(bare).unwrap(), sample_episode());
    }

    /// The run's `trace.stacks` and `trace.profile` with docs/json.md's
    /// keys, through the whole document and back.
    #[test]
    fn a_runs_stacks_and_profiler_round_trip_with_the_documented_keys() {
        let mut run = crate::store::tests_support::sample_run();
        run.episodes = vec![code_episode()];
        let t = run.trace.as_mut().unwrap();
        t.stacks = Some(StacksSummary {
            taken: 4001,
            episodes: 1,
            cost_p50_ns: 2_900,
            cost_max_ns: 10_400,
            lost: 2,
            notes: vec!["kernel addresses are hidden: sysctl kernel.kptr_restrict=1".into()],
        });
        t.profile = Some(ProfileSummary {
            event: "cycles (hardware, NMI)".into(),
            hz: 10_000,
            blind_spot: "time the hypervisor takes".into(),
            samples: 60_000,
            in_episodes: 8,
            lost: 0,
            over: vec![OverRow {
                function: "memcpy_toio".into(),
                module: "kernel".into(),
                inside: 6,
                outside: 40,
                ratio: 1124.8,
            }],
            notes: vec![],
            over_of: 0,
        });
        let text = serde_json::to_string(&crate::export::run_doc(&run, true)).unwrap();
        let back = crate::export::read_json(&text, "code.json").unwrap();
        assert_eq!((&back.trace, &back.episodes), (&run.trace, &run.episodes));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(keys(&v["trace"]["stacks"]), ["cost_max_ns", "cost_p50_ns", "episodes", "lost", "notes", "taken"]);
        let p = &v["trace"]["profile"];
        assert_eq!(keys(p), ["blind_spot", "event", "hz", "in_episodes", "lost", "notes", "over", "samples"]);
        assert_eq!(keys(&p["over"][0]), ["function", "inside", "module", "outside", "ratio"]);
        assert_eq!(v["episodes"][0]["samples"]["rows"][0]["function"], "memcpy_toio");
        // Without --stacks and the profiler: neither key.
        let bare = serde_json::to_value(TraceSummary::default()).unwrap();
        assert!(bare.get("stacks").is_none() && bare.get("profile").is_none(), "{bare}");
    }
}
