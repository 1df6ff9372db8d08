//! The tuning checks of an inventory: each gives a [`Warning`] (a problem
//! that distorts the figures, or a note about the setup) or none.

use super::{Inventory, PRIVILEGES_FIX, format_cpu_list};
use serde::{Deserialize, Serialize};

/// One reason why a latency figure may not be what the machine can do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// Short stable identifier, one of the `TOPIC_*` constants.
    pub topic: String,
    /// One line: what is wrong.
    pub message: String,
    /// One line: the concrete fix.
    pub fix: String,
}

pub const TOPIC_PRIVILEGES: &str = "privileges";
pub const TOPIC_GOVERNOR: &str = "governor";
pub const TOPIC_SMT: &str = "smt";
pub const TOPIC_ISOLATION: &str = "isolation";
pub const TOPIC_RT_THROTTLING: &str = "rt-throttling";
pub const TOPIC_KERNEL: &str = "kernel";
pub const TOPIC_PREEMPT_MODE: &str = "preempt-mode";
pub const TOPIC_CLOCKSOURCE: &str = "clocksource";
pub const TOPIC_HYPERVISOR: &str = "hypervisor";
pub const TOPIC_CSTATES: &str = "cstates";

/// Topics that are notes about the setup rather than problems with the run.
const INFORMATIONAL_TOPICS: &[&str] =
    &[TOPIC_ISOLATION, TOPIC_RT_THROTTLING, TOPIC_KERNEL, TOPIC_HYPERVISOR, TOPIC_CSTATES];

impl Warning {
    pub(super) fn new(topic: &str, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Warning { topic: topic.to_string(), message: message.into(), fix: fix.into() }
    }

    /// True for notes (no isolation, RT throttling on, not PREEMPT_RT,
    /// hypervisor, C-states) rather than problems that distort the figures.
    pub fn is_informational(&self) -> bool {
        INFORMATIONAL_TOPICS.contains(&self.topic.as_str())
    }
}

impl Inventory {
    /// Warnings a real-time engineer wants to see before trusting a latency
    /// figure measured on `measured_cpus` (empty: all online CPUs), most
    /// serious first. Use [`Warning::is_informational`] to tell notes apart.
    pub fn warnings(&self, measured_cpus: &[usize]) -> Vec<Warning> {
        let mut measured: Vec<usize> =
            if measured_cpus.is_empty() { self.online_cpus() } else { measured_cpus.to_vec() };
        measured.sort_unstable();
        measured.dedup();
        CHECKS.iter().filter_map(|check| check(self, &measured)).collect()
    }

    /// The preemption model, "unknown" when not known.
    fn model(&self) -> &str {
        if self.preempt_model.is_empty() { "unknown" } else { self.preempt_model.as_str() }
    }
}

/// One check of an inventory for the measured CPUs (sorted, each once):
/// its warning, or None.
type Check = fn(&Inventory, &[usize]) -> Option<Warning>;

/// Every check, in the order [`Inventory::warnings`] gives them: the
/// problems that distort the figures, most serious first, then the notes.
const CHECKS: [Check; 11] = [
    privileges,
    governor,
    smt,
    preempt_dynamic,
    preempt_built,
    clocksource,
    isolation,
    rt_throttling,
    kernel,
    hypervisor,
    cstates,
];

/// Not root and no CAP_SYS_NICE: the probes run at SCHED_OTHER.
fn privileges(inv: &Inventory, _: &[usize]) -> Option<Warning> {
    (!inv.representative()).then(|| {
        Warning::new(
            TOPIC_PRIVILEGES,
            "not root and no CAP_SYS_NICE: probes run at SCHED_OTHER; results are not representative",
            PRIVILEGES_FIX,
        )
    })
}

/// Frequency scaling on a measured CPU.
fn governor(inv: &Inventory, measured: &[usize]) -> Option<Warning> {
    let slow: Vec<String> = measured
        .iter()
        .filter_map(|&c| {
            let g = inv.governor_of(c)?.governor.as_deref()?;
            (g != "performance").then(|| format!("cpu{c}={g}"))
        })
        .collect();
    (!slow.is_empty()).then(|| {
        Warning::new(
            TOPIC_GOVERNOR,
            format!(
                "cpufreq governor is not performance on measured CPUs ({}): frequency ramps add latency",
                abbreviate(&slow, 8)
            ),
            "cpupower frequency-set -g performance (or echo performance > /sys/devices/system/cpu/cpuN/cpufreq/scaling_governor)",
        )
    })
}

/// SMT siblings of measured CPUs doing other work.
fn smt(inv: &Inventory, measured: &[usize]) -> Option<Warning> {
    if inv.smt_active != Some(true) {
        return None;
    }
    let isolated = inv.isolated_cpus();
    let mut busy: Vec<usize> = measured
        .iter()
        .flat_map(|&c| inv.siblings_of(c))
        .filter(|s| !measured.contains(s) && !isolated.contains(s))
        .collect();
    busy.sort_unstable();
    busy.dedup();
    (!busy.is_empty()).then(|| {
        Warning::new(
            TOPIC_SMT,
            format!(
                "SMT is active and sibling {} {} of the measured CPUs {} neither measured nor isolated: they share \
                 the core",
                if busy.len() == 1 { "CPU" } else { "CPUs" },
                format_cpu_list(&busy),
                if busy.len() == 1 { "is" } else { "are" }
            ),
            format!(
                "boot with nosmt (or echo off > /sys/devices/system/cpu/smt/control), or isolate CPUs {}",
                format_cpu_list(&busy)
            ),
        )
    })
}

/// A PREEMPT_DYNAMIC kernel running in a mode that does not preempt kernel code.
fn preempt_dynamic(inv: &Inventory, _: &[usize]) -> Option<Warning> {
    let mode @ ("none" | "voluntary") = inv.preempt_dynamic_mode()? else { return None };
    Some(Warning::new(
        TOPIC_PREEMPT_MODE,
        format!("PREEMPT_DYNAMIC kernel running in preempt={mode} mode: kernel code is not preempted for RT tasks"),
        "boot with preempt=full (or echo full > /sys/kernel/debug/sched/preempt)",
    ))
}

/// A kernel built without preemption of kernel code (never PREEMPT_DYNAMIC,
/// so never together with [`preempt_dynamic`]'s warning).
fn preempt_built(inv: &Inventory, _: &[usize]) -> Option<Warning> {
    let model = inv.model();
    matches!(model, "NONE" | "VOLUNTARY").then(|| {
        Warning::new(
            TOPIC_PREEMPT_MODE,
            format!("kernel is built with preemption model {model}: kernel code is not preempted for RT tasks"),
            "use a PREEMPT or PREEMPT_RT kernel (e.g. Debian's linux-image-rt-*)",
        )
    })
}

/// Another clocksource than the TSC on x86_64.
fn clocksource(inv: &Inventory, _: &[usize]) -> Option<Warning> {
    (inv.arch == "x86_64" && !inv.clocksource.is_empty() && inv.clocksource != "tsc").then(|| {
        Warning::new(
            TOPIC_CLOCKSOURCE,
            format!(
                "clocksource is {} rather than tsc: clock reads are slower and timestamps coarser",
                inv.clocksource
            ),
            "boot with clocksource=tsc once the TSC is known stable (check dmesg for \"TSC unstable\")",
        )
    })
}

/// A note: measured CPUs that are neither isolated nor tickless.
fn isolation(inv: &Inventory, measured: &[usize]) -> Option<Warning> {
    let isolated = inv.isolated_cpus();
    let nohz = inv.nohz_full_cpus();
    let housekeeping: Vec<usize> =
        measured.iter().copied().filter(|c| !isolated.contains(c) && !nohz.contains(c)).collect();
    if housekeeping.is_empty() {
        return None;
    }
    // Never suggest isolating every CPU: keep the first one for
    // housekeeping.
    let online = inv.online_cpus();
    let mut to_isolate = housekeeping.clone();
    if online.len() > 1 && online.iter().all(|c| to_isolate.contains(c)) {
        to_isolate.retain(|&c| c != online[0]);
    }
    let fix = if online.len() == 1 || to_isolate.is_empty() {
        "isolation needs a second CPU for housekeeping; measure on a machine with more CPUs".to_string()
    } else {
        format!(
            "boot with isolcpus=domain,managed_irq,{0} nohz_full={0} rcu_nocbs={0} and measure those",
            format_cpu_list(&to_isolate)
        )
    };
    Some(Warning::new(
        TOPIC_ISOLATION,
        format!(
            "measured {} {} {} not in isolcpus/nohz_full: per-CPU figures include housekeeping noise",
            if housekeeping.len() == 1 { "CPU" } else { "CPUs" },
            format_cpu_list(&housekeeping),
            if housekeeping.len() == 1 { "is" } else { "are" }
        ),
        fix,
    ))
}

/// A note: RT throttling is on.
fn rt_throttling(inv: &Inventory, _: &[usize]) -> Option<Warning> {
    let rt = inv.rt_runtime_us.filter(|&rt| rt >= 0)?;
    let period = inv.rt_period_us.map_or_else(|| "rt_period_us".to_string(), |p| format!("{p} us"));
    Some(Warning::new(
        TOPIC_RT_THROTTLING,
        format!("RT throttling on: a SCHED_FIFO thread is throttled after {rt} us per {period}"),
        "echo -1 > /proc/sys/kernel/sched_rt_runtime_us (only if you know what you do: a runaway RT thread then hangs the CPU)",
    ))
}

/// A note: the kernel is not PREEMPT_RT.
fn kernel(inv: &Inventory, _: &[usize]) -> Option<Warning> {
    let model = inv.model();
    (model != "PREEMPT_RT").then(|| {
        Warning::new(
            TOPIC_KERNEL,
            format!("kernel is {model}, not PREEMPT_RT: expect worse tails than PREEMPT_RT"),
            "use a PREEMPT_RT kernel (e.g. Debian's linux-image-rt-*, or CONFIG_PREEMPT_RT=y on 6.12+)",
        )
    })
}

/// A note: a hypervisor can preempt the machine.
fn hypervisor(inv: &Inventory, _: &[usize]) -> Option<Warning> {
    let h = inv.hypervisor.as_ref()?;
    Some(Warning::new(
        TOPIC_HYPERVISOR,
        format!(
            "running under a hypervisor ({h}): the host can preempt this VM; spikes of milliseconds are the host's, not Linux's"
        ),
        "measure on bare metal, or pin and isolate the vCPUs on the host",
    ))
}

/// A note: deep C-states allowed on bare metal (in a VM the host decides).
fn cstates(inv: &Inventory, _: &[usize]) -> Option<Warning> {
    (inv.hypervisor.is_none()
        && inv.max_cstate_hint.is_none()
        && matches!(inv.cpu_idle_driver.as_deref(), Some("intel_idle" | "acpi_idle")))
    .then(|| {
        Warning::new(
            TOPIC_CSTATES,
            "deep C-states are allowed: waking from them adds tens of us to the first wake-ups after idle",
            "boot with intel_idle.max_cstate=1 processor.max_cstate=1, or hold /dev/cpu_dma_latency at 0",
        )
    })
}

/// `a, b, c, ... (+N more)` for long lists.
fn abbreviate(items: &[String], max: usize) -> String {
    if items.len() <= max {
        items.join(", ")
    } else {
        format!("{}, ... (+{} more)", items[..max].join(", "), items.len() - max)
    }
}
