//! The unaccounted time of an episode, named where the evidence allows:
//! idle exit, interrupts off, the hypervisor; what stays unknown says why.

use rtscope_model::episode::{CodeStack, Frame, Remainder};

/// Unaccounted time of an episode and the facts about it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gap {
    pub ns: u64,
    /// The idle task was running when the interrupt finally came.
    pub idle: bool,
    /// The profiler's samples inside the unaccounted stretch, what its
    /// period would give there, and those taken with interrupts off.
    pub samples: u64,
    pub expected: f64,
    pub irqs_off: Option<u64>,
    /// Steal time the kernel counted on this CPU so far in the run (ns),
    /// and the run's length so far.
    pub steal_ns: u64,
    pub run_ns: u64,
    /// The idle states this CPU entered so far in the run (cpuidle's
    /// counters); empty: none counted (no cpuidle driver, or an idle loop
    /// that bypasses it); `None`: not read.
    pub idle_states: Option<Vec<crate::sys::cpuidle::IdleState>>,
    /// The kernel's idle loop polls (`idle=poll`), bypassing cpuidle.
    pub idle_poll: bool,
}

/// The kernel's functions that turn interrupts back on after a lock held
/// with them off: a timer interrupt they held off is taken on their
/// `popf`/`sti`, so it interrupts them.
const IRQS_ON: [&str; 6] = [
    "_raw_spin_unlock_irqrestore",
    "_raw_spin_unlock_irq",
    "_raw_read_unlock_irqrestore",
    "_raw_read_unlock_irq",
    "_raw_write_unlock_irqrestore",
    "_raw_write_unlock_irq",
];

/// Where the late timer interrupt came, from the wake-up's stacks.
#[derive(Debug, PartialEq)]
enum Landing<'a> {
    /// Where the kernel turned interrupts back on: that function, and the
    /// code that called it (which held them off).
    IrqsOn(&'a Frame, Option<&'a Frame>),
    /// In user code, where interrupts are always on.
    User(&'a Frame),
}

/// None: elsewhere in the kernel (interrupts may have come back on just
/// before, in code inlined there: nothing to tell), or no stack.
fn landing(s: &CodeStack) -> Option<Landing<'_>> {
    let below = s.interrupted_kernel();
    match below.first() {
        Some(f) => f
            .function
            .as_deref()
            .is_some_and(|n| IRQS_ON.contains(&n.split('.').next().unwrap_or(n)))
            .then(|| Landing::IrqsOn(f, below.get(1))),
        None if s.interrupted_user() => s.user.first().map(Landing::User),
        None => None,
    }
}

/// The unaccounted time named from the evidence.
pub fn remainder(gap: &Gap, stack: Option<&CodeStack>, source_hw: bool) -> Remainder {
    let steal = if gap.run_ns > 0 {
        format!(
            "; steal time on this CPU so far: {:.1} ms in {:.1} s",
            gap.steal_ns as f64 / 1e6,
            gap.run_ns as f64 / 1e9
        )
    } else {
        String::new()
    };
    let back_in = stack.and_then(|s| {
        let k = s.interrupted_kernel();
        k.first().or(s.user.first()).map(|f| format!("{} ({})", f.name(), s.comm))
    });
    let landed = stack.and_then(|s| landing(s).map(|l| (l, s.comm.as_str())));
    // The kernel's polling state is named POLL by every cpuidle driver; a
    // halting state may declare 0 us too (acpi_idle's HLT without _CST).
    let polled = gap.idle_states.as_deref().is_some_and(|s| !s.is_empty() && s.iter().all(|x| x.name == "POLL"));
    let (verdict, why) = if gap.idle && (polled || gap.idle_poll) {
        let how = match gap.idle_states.as_deref().and_then(crate::sys::cpuidle::describe) {
            Some(d) if polled => format!("the idle states it entered so far: {d}"),
            _ => "the kernel's idle=poll".to_string(),
        };
        (
            "late in idle poll",
            format!(
                "the CPU was idle but polling, not halted ({how}): no exit latency, the timer interrupt came late to \
                 a running CPU; on a VM the host's (its timer emulation or its other work), on bare metal an SMI{steal}"
            ),
        )
    } else if gap.idle {
        let states = match gap.idle_states.as_deref() {
            Some([]) => {
                "; cpuidle counted no idle state entered on this CPU so far (it has no cpuidle driver, or the idle \
                 loop bypasses it)"
                    .to_string()
            }
            Some(s) => crate::sys::cpuidle::describe(s)
                .map(|d| format!("; idle states this CPU entered so far: {d}"))
                .unwrap_or_default(),
            None => String::new(),
        };
        (
            "idle exit",
            format!(
                "the CPU was idle when the timer interrupt came: the time is the idle state's exit, on a VM the host \
                 waking the halted vCPU{states}{steal}"
            ),
        )
    } else if gap.irqs_off.is_some_and(|n| n > 0) {
        (
            "interrupts off",
            format!(
                "{} of {} NMI samples in the stretch had interrupts off{}",
                gap.irqs_off.unwrap_or(0),
                gap.samples,
                back_in.as_ref().map(|b| format!("; interrupts came back in {b}")).unwrap_or_default()
            ),
        )
    } else if source_hw && gap.samples == 0 && gap.expected >= 2.0 {
        (
            "hypervisor",
            format!("no cycles sample in the stretch ({:.1} expected): the guest did not run{steal}", gap.expected),
        )
    } else if let Some((Landing::IrqsOn(f, caller), comm)) = &landed
        // NMI samples in the stretch, none with interrupts off, say otherwise.
        && !(gap.irqs_off == Some(0) && gap.samples > 0)
    {
        (
            "interrupts off",
            format!(
                "the timer interrupt came where {comm} turned interrupts back on, in {}{}: the code before it held \
                 them off{steal}",
                f.name(),
                caller.map(|c| format!(" called from {}", c.name())).unwrap_or_default()
            ),
        )
    } else if let Some((Landing::User(f), comm)) = &landed {
        (
            "hypervisor or SMI",
            format!(
                "the timer interrupt came in user code of {comm} ({}), where interrupts are always on: this CPU's \
                 kernel was not holding it off (unless on its short way back to user space, or in NMI handlers), \
                 so the time was taken outside it: on a VM the host (its other work, or handling this vCPU's \
                 exit), on bare metal an SMI{steal}",
                f.name()
            ),
        )
    } else if gap.expected >= 2.0 && (gap.samples as f64) < gap.expected / 4.0 {
        (
            "interrupts off or hypervisor",
            format!(
                "{} of {:.1} expected cpu-clock samples in the stretch: the sampling interrupt was held off too \
                 (cpu-clock cannot tell interrupts off from the hypervisor){}{steal}",
                gap.samples,
                gap.expected,
                back_in.as_ref().map(|b| format!("; the interrupt came in {b}")).unwrap_or_default()
            ),
        )
    } else {
        (
            "unknown",
            format!(
                "{}{}",
                if gap.expected == 0.0 {
                    "no profiler ran to tell (--sample-hz)".to_string()
                } else if gap.expected < 2.0 {
                    "too short for the sampling period to tell".to_string()
                } else {
                    format!("{} of {:.1} expected samples seen", gap.samples, gap.expected)
                },
                back_in.as_ref().map(|b| format!("; the interrupt came in {b}")).unwrap_or_default()
            ) + &steal,
        )
    };
    Remainder { ns: gap.ns, verdict: verdict.into(), why }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_remainder_names_idle_and_held_off_sampling() {
        let idle = Gap { ns: 700_000, idle: true, ..Default::default() };
        assert_eq!(remainder(&idle, None, false).verdict, "idle exit");
        let c6 = crate::sys::cpuidle::IdleState { name: "C6".into(), exit_us: 133, usage: 4 };
        let deep = Gap { idle_states: Some(vec![c6]), ..idle.clone() };
        let r = remainder(&deep, None, false);
        assert!(r.why.contains("idle states this CPU entered so far: C6 4 times (exit 133 us)"), "{r:?}");
        let none = Gap { idle_states: Some(Vec::new()), ..idle.clone() };
        assert!(remainder(&none, None, false).why.contains("no idle state entered"));
        assert_eq!(remainder(&none, None, false).verdict, "idle exit");
        let poll = crate::sys::cpuidle::IdleState { name: "POLL".into(), exit_us: 0, usage: 900 };
        let polled = Gap { idle_states: Some(vec![poll]), ..idle };
        let r = remainder(&polled, None, false);
        assert_eq!(r.verdict, "late in idle poll", "{r:?}");
        assert!(r.why.contains("POLL 900 times (exit 0 us)"), "{r:?}");
        // idle=poll: the loop polls without cpuidle, whose counters stay still.
        let r = remainder(&Gap { idle_poll: true, ..none }, None, false);
        assert_eq!(r.verdict, "late in idle poll", "{r:?}");
        assert!(r.why.contains("idle=poll"), "{r:?}");
        let held = Gap { ns: 700_000, samples: 0, expected: 2.8, ..Default::default() };
        assert_eq!(remainder(&held, None, false).verdict, "interrupts off or hypervisor");
        assert_eq!(remainder(&held, None, true).verdict, "hypervisor");
        let off = Gap { irqs_off: Some(3), samples: 3, expected: 2.8, ..held.clone() };
        assert_eq!(remainder(&off, None, true).verdict, "interrupts off");
        let short = Gap { ns: 20_000, expected: 0.1, ..Default::default() };
        let r = remainder(&short, None, false);
        assert!(r.verdict == "unknown" && r.why.contains("too short"), "{r:?}");
        let unsampled = Gap { ns: 20_000, ..Default::default() };
        assert!(remainder(&unsampled, None, false).why.contains("no profiler ran"));
    }

    fn frame(function: &str) -> Frame {
        Frame { addr: 0xffff_ffff_8100_0000, function: Some(function.into()), ..Default::default() }
    }

    /// The wake-up's stacks: the timer interrupt's frames on top of `below`
    /// (the interrupted kernel code, innermost first) and `user`.
    fn woke_in(below: &[&str], user: &[&str]) -> CodeStack {
        let kernel: Vec<Frame> =
            ["try_to_wake_up", "hrtimer_interrupt", "sysvec_apic_timer_interrupt", "asm_sysvec_apic_timer_interrupt"]
                .iter()
                .chain(below)
                .map(|f| frame(f))
                .collect();
        CodeStack {
            taken: CodeStack::WAKE_UP.into(),
            comm: "apt-cache".into(),
            kernel,
            user: user.iter().map(|f| Frame { addr: 0x7f00_0000_1000, ..frame(f) }).collect(),
            ..Default::default()
        }
    }

    /// Where the late timer interrupt came tells: where a lock turned
    /// interrupts back on (its caller held them off), or in user code,
    /// where they are on (the time was taken outside the kernel); anywhere
    /// else it tells nothing, and stronger evidence (NMI samples, idle)
    /// comes first.
    #[test]
    fn the_remainder_reads_where_the_interrupt_came() {
        let short = Gap { ns: 215_000, expected: 0.2, samples: 0, ..Default::default() };
        let unlock = woke_in(&["_raw_spin_unlock_irqrestore", "__rmqueue_pcplist", "get_page_from_freelist"], &[]);
        let r = remainder(&short, Some(&unlock), false);
        assert_eq!(r.verdict, "interrupts off", "{r:?}");
        assert!(
            r.why.contains(
                "apt-cache turned interrupts back on, in _raw_spin_unlock_irqrestore called from __rmqueue_pcplist"
            ),
            "{r:?}"
        );
        let isra = woke_in(&["_raw_spin_unlock_irq.isra.0"], &[]);
        assert_eq!(remainder(&short, Some(&isra), false).verdict, "interrupts off");
        let user = woke_in(&[], &["LZ4_decompress_safe"]);
        let r = remainder(&short, Some(&user), false);
        assert_eq!(r.verdict, "hypervisor or SMI", "{r:?}");
        assert!(r.why.contains("user code of apt-cache (LZ4_decompress_safe)"), "{r:?}");
        let elsewhere = woke_in(&["lock_vma_under_rcu", "exc_page_fault"], &["main"]);
        let r = remainder(&short, Some(&elsewhere), false);
        assert_eq!(r.verdict, "unknown", "{r:?}");
        assert!(r.why.contains("the interrupt came in lock_vma_under_rcu (apt-cache)"), "{r:?}");
        // No kernel stack recorded, or its frames unnamed: nothing proves
        // where it came.
        let bare = CodeStack { kernel: Vec::new(), ..user.clone() };
        assert_eq!(remainder(&short, Some(&bare), false).verdict, "unknown");
        let unnamed = CodeStack { kernel: vec![Frame { function: None, ..frame("") }; 4], ..user.clone() };
        assert_eq!(remainder(&short, Some(&unnamed), false).verdict, "unknown");
        // A profiler's sample (its kernel chain has no interrupt frames) is
        // no wake-up's stack.
        let sample = CodeStack { taken: CodeStack::SAMPLE.into(), ..user.clone() };
        assert_eq!(remainder(&short, Some(&sample), false).verdict, "unknown");
        // NMI samples in the stretch with interrupts on outweigh the lock.
        let nmi_on = Gap { irqs_off: Some(0), samples: 1, ..short.clone() };
        let r = remainder(&nmi_on, Some(&unlock), true);
        assert_eq!(r.verdict, "unknown", "{r:?}");
        assert!(r.why.contains("the interrupt came in _raw_spin_unlock_irqrestore"), "{r:?}");
        // Idle and NMI evidence first.
        let idle = Gap { idle: true, ..short.clone() };
        assert_eq!(remainder(&idle, Some(&user), false).verdict, "idle exit");
        let nmi = Gap { irqs_off: Some(2), samples: 3, expected: 2.5, ..short };
        assert_eq!(remainder(&nmi, Some(&user), true).verdict, "interrupts off");
    }
}
