//! An episode's code: the stacks at the wake-up and of the thread that
//! blocked it, the profiler's samples in its window, and the unaccounted
//! time named where the evidence allows.

use serde::{Deserialize, Serialize};

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
    /// A user frame that could not be named: where it lies in its mapped
    /// file (the file offset; for most shared objects and position-
    /// independent programs the address `addr2line -e FILE` takes), so
    /// that debug symbols installed later name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_offset: Option<u64>,
}

impl Frame {
    /// The function (or the address), e.g. `dup_mmap`, `0x7f3a12c0`.
    pub fn name(&self) -> String {
        self.function.clone().unwrap_or_else(|| format!("{:#x}", self.addr))
    }

    /// `dup_mmap+0x1a4 (kernel)`, `spin_burst+0x20 (rtscope) src/disturb.rs:120`,
    /// `0x7f3a12c0f6f1 (libapt-pkg.so.6.0.0+0x12f6f1)` (unnamed: its file offset).
    pub fn label(&self) -> String {
        let mut s = self.name();
        if let (Some(_), Some(o)) = (&self.function, self.offset) {
            s.push_str(&format!("+{o:#x}"));
        }
        match (&self.module, self.file_offset.filter(|_| self.function.is_none())) {
            (Some(m), Some(o)) => s.push_str(&format!(" ({m}+{o:#x})")),
            (Some(m), None) => s.push_str(&format!(" ({m})")),
            (None, _) => {}
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
    /// User frames of that task, innermost first: the first exact, the rest
    /// return addresses, walked as `unwinder` says.
    #[serde(default)]
    pub user: Vec<Frame>,
    /// Which walk gave the user frames: `dwarf` (every step by the mapped
    /// files' own unwind tables, `.eh_frame` or `.debug_frame`), `dwarf+fp`
    /// (some steps by frame pointers: code whose file has no tables, or
    /// past the end of the stack copied with the sample) or `fp` (the
    /// kernel's frame-pointer walk, which skips every caller of code built
    /// without frame pointers). None in runs stored before it was kept
    /// (all `fp`) or without user frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unwinder: Option<String>,
    /// Why frames could not be named, with the fix.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// At a wake-up: how long recording these stacks took, inside the
    /// interrupt that woke the probe (rtscope's own cost, part of the
    /// episode's `timer` cause on the timer's path), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unwind_ns: Option<u64>,
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

    /// Of a wake-up's stacks: whether the interrupt came in user space (its
    /// entry frames found, no kernel frame below them). False where they
    /// were not found (kernel frames unnamed, an unwind cut short): then
    /// nothing says where it came.
    pub fn interrupted_user(&self) -> bool {
        let entry = |f: &Frame| f.function.as_deref().is_some_and(is_interrupt_entry);
        !self.is_sample() && self.kernel.iter().any(entry) && self.interrupted_kernel().is_empty()
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
    /// The samples' user stacks by the walk that gave them (`dwarf`,
    /// `dwarf+fp`, `fp`: see [`CodeStack::unwinder`]).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub unwinders: std::collections::BTreeMap<String, u64>,
}

/// The unaccounted time of an episode, named where the evidence allows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remainder {
    pub ns: u64,
    /// `idle exit`, `late in idle poll`, `interrupts off`, `hypervisor`,
    /// `hypervisor or SMI`, `interrupts off or hypervisor` or `unknown`
    /// (docs/json.md).
    pub verdict: String,
    /// The evidence, or why there is none.
    pub why: String,
}
