//! Real-time load threads (`cpu@fifo:50`, `threads:16@fifo:10-60`): the
//! bounds that keep such a load from starving the machine, and the
//! periodic thread's loop (the NT real-time study's periodic instance: busy
//! B of every period P, at a real-time priority).
//!
//! Bounds: a periodic load keeps each of its CPUs at most
//! [`MAX_RT_SHARE`] busy (its threads' busy / period added up); a spinning
//! one (no period) runs only where the kernel's RT throttling is on
//! (`/proc/sys/kernel/sched_rt_runtime_us` not -1), which leaves the other
//! threads 5 % of each CPU. The threads are rtscope's own: they end with
//! the load, and with rtscope however it ends.

use super::LoadCtx;
use crate::sys::{clock, sched as syssched};
use anyhow::{Result, bail};
use rtscope_model::rtload::{RtLoad, RtPolicy};

/// The most of each CPU a periodic real-time load may ask.
pub const MAX_RT_SHARE: f64 = 0.9;

/// The kernel's policy for `p`.
pub fn policy(p: RtPolicy) -> syssched::Policy {
    match p {
        RtPolicy::Fifo => syssched::Policy::Fifo,
        RtPolicy::Rr => syssched::Policy::Rr,
    }
}

/// Refuses a periodic load whose threads (`per_cpu` of them on each CPU,
/// on average) would keep a CPU more than [`MAX_RT_SHARE`] busy.
pub fn check_share(text: &str, flag: &str, rt: &RtLoad, per_cpu: f64) -> Result<()> {
    if rt.periodic.is_some() && per_cpu * rt.duty() > MAX_RT_SHARE {
        bail!(
            "{flag}: '{text}': its threads would keep each CPU {:.0} % busy at real-time priority (at most {:.0} %): \
             give fewer threads, a shorter busy or a longer period",
            100.0 * per_cpu * rt.duty(),
            100.0 * MAX_RT_SHARE
        );
    }
    Ok(())
}

/// A spinning real-time load runs only where RT throttling is on.
pub fn check_throttling(label: &str, rt: &RtLoad) -> Result<()> {
    if rt.periodic.is_some() {
        return Ok(());
    }
    let runtime = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap_or_default();
    if runtime.trim() == "-1" {
        bail!(
            "load '{label}': a real-time load that never sleeps needs RT throttling, which is off \
             (/proc/sys/kernel/sched_rt_runtime_us is -1): give it a period (e.g. {label}:period=10ms,busy=3ms) or \
             turn throttling on (echo 950000 > /proc/sys/kernel/sched_rt_runtime_us)"
        );
    }
    Ok(())
}

/// Busy `busy_ns` of every `period_ns` (on a fixed grid of
/// CLOCK_MONOTONIC instants) until the load stops; a period missed (the
/// thread preempted beyond it) is skipped, not caught up. No allocation.
pub fn run(ctx: &LoadCtx, period_ns: u64, busy_ns: u64) {
    let mut next = clock::now();
    while !ctx.stopping() {
        let woke = clock::now();
        clock::spin_until(woke + busy_ns);
        next += period_ns;
        let now = clock::now();
        if next <= now {
            next = now + period_ns - (now - next) % period_ns;
        }
        clock::sleep_until(next);
    }
}
