//! `cpu`: floating-point and integer arithmetic on every CPU of the load
//! (the Siemens CE 3.0 assessment's math load): N threads per CPU, each pinned, never
//! sleeping; or, given a real-time policy (`cpu:2@fifo:50`), the same at
//! that policy and priority, spinning (RT throttling on) or periodic
//! (`cpu:2@fifo:50:period=10ms,busy=3ms`: busy 3 ms of every 10 ms, the NT
//! real-time study's periodic instance).

use super::{Intensity, LoadCtx, LoadSpec, Running, Workload, periodic};
use anyhow::Result;
use rtscope_model::characterisation::Target;
use std::hint::black_box;

pub struct Cpu;

impl Workload for Cpu {
    fn name(&self) -> &'static str {
        "cpu"
    }
    fn about(&self) -> &'static str {
        "floating-point and integer math, never sleeping; intensity: threads per CPU (1); @fifo:50 or \
         @rr:40[:period=T,busy=T]: at that policy and priority, spinning or busy T of every period"
    }
    fn intensity(&self) -> Option<Intensity> {
        Some(Intensity { unit: "threads per CPU", min: 1, max: 16, default: |_| 1 })
    }
    fn policy(&self) -> Option<bool> {
        Some(false)
    }
    fn check(&self, spec: &LoadSpec) -> Result<()> {
        spec.rt.as_ref().map_or(Ok(()), |rt| periodic::check_throttling(&spec.label, rt))
    }
    fn start(&self, spec: &LoadSpec, run: &mut Running) -> Result<()> {
        let n = spec.intensity as usize;
        for &c in &spec.cpus {
            for i in 0..n {
                let name = format!("cpu{c}");
                match spec.rt {
                    None => run.spawn(&name, &[c], math)?,
                    Some(rt) => {
                        let prio = rt.priority(i, n);
                        run.spawn_rt(&name, &[c], periodic::policy(rt.policy), prio, move |ctx| match rt.periodic {
                            Some((period, busy)) => periodic::run(ctx, period, busy),
                            None => math(ctx),
                        })?
                    }
                }
            }
        }
        Ok(())
    }
    /// Its CPUs 100 % busy; at a real-time policy, its threads' busy share
    /// (at most 100 %).
    fn target(&self, spec: &LoadSpec) -> Option<Target> {
        let (share, why) = match &spec.rt {
            Some(rt) if rt.periodic.is_some() => (
                spec.intensity as f64 * rt.duty(),
                format!(
                    " ({} per CPU at {} each)",
                    rtscope_model::units::plural(spec.intensity as usize, "thread"),
                    rt.describe()
                ),
            ),
            _ => (1.0, String::new()),
        };
        Some(super::cpu_target(spec, share, super::CPU_BUSY_LIMIT, &why))
    }
}

/// About a millisecond of arithmetic per round, between stop checks.
fn math(ctx: &LoadCtx) {
    let mut x = 1.000_1f64;
    let mut n = 0x9e37_79b9_7f4a_7c15u64;
    while !ctx.stopping() {
        for i in 0..20_000u64 {
            x = (x * 1.000_000_1 + 0.5).sqrt() + (i as f64).mul_add(1e-9, 0.25);
            n = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            n ^= n >> 29;
            n = n.wrapping_add(n / ((i | 1) + 7));
        }
        black_box((x, n));
    }
}
