//! `threads`: many periodic threads across real-time priorities, as
//! Windows CE's tests ran 1 to hundreds of threads at varying priorities
//! (`threads:16@fifo:10-60`: 16 threads, their priorities spread evenly
//! from 10 to 60, each busy 0.5 ms of every 10 ms unless
//! `:period=T,busy=T` says otherwise). The threads share the load's CPUs
//! (not pinned one by one: the scheduler places them, as an application's
//! would be).

use super::{Intensity, LoadSpec, Running, Workload, periodic};
use anyhow::Result;
use rtscope_model::characterisation::Target;

pub struct Threads;

/// A thread's period and busy time when none is given, ns.
pub const DEFAULT_PERIODIC: (u64, u64) = (10_000_000, 500_000);

impl Workload for Threads {
    fn name(&self) -> &'static str {
        "threads"
    }
    fn about(&self) -> &'static str {
        "periodic threads over a range of real-time priorities, e.g. threads:16@fifo:10-60 (busy 0.5 ms of every \
         10 ms each; :period=T,busy=T to change it); intensity: threads (16)"
    }
    fn intensity(&self) -> Option<Intensity> {
        Some(Intensity { unit: "threads", min: 1, max: 256, default: |_| 16 })
    }
    fn policy(&self) -> Option<bool> {
        Some(true)
    }
    fn start(&self, spec: &LoadSpec, run: &mut Running) -> Result<()> {
        let Some(rt) = spec.rt else { anyhow::bail!("threads: no policy (the parser requires one)") };
        let (period, busy) = rt.periodic.unwrap_or(DEFAULT_PERIODIC);
        let n = spec.intensity as usize;
        for i in 0..n {
            let prio = rt.priority(i, n);
            run.spawn_rt(&format!("thr{i}-{prio}"), &spec.cpus, periodic::policy(rt.policy), prio, move |ctx| {
                periodic::run(ctx, period, busy)
            })?;
        }
        Ok(())
    }
    /// Its CPUs busy with its threads' busy shares added up.
    fn target(&self, spec: &LoadSpec) -> Option<Target> {
        let rt = spec.rt?;
        let share = spec.intensity as f64 * rt.duty() / spec.cpus.len().max(1) as f64;
        Some(super::cpu_target(
            spec,
            share,
            super::CPU_BUSY_LIMIT,
            &format!(" ({} threads at {})", spec.intensity, rt.describe()),
        ))
    }
}
