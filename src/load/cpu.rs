//! `cpu`: floating-point and integer arithmetic on every CPU of the load
//! (the Siemens CE 3.0 assessment's math load): N threads per CPU, each pinned, never
//! sleeping.

use super::{Intensity, LoadCtx, LoadSpec, Running, Workload};
use anyhow::Result;
use rtscope_model::characterisation::Target;
use std::hint::black_box;

pub struct Cpu;

impl Workload for Cpu {
    fn name(&self) -> &'static str {
        "cpu"
    }
    fn about(&self) -> &'static str {
        "floating-point and integer math, never sleeping; intensity: threads per CPU (1)"
    }
    fn intensity(&self) -> Option<Intensity> {
        Some(Intensity { unit: "threads per CPU", min: 1, max: 16, default: |_| 1 })
    }
    fn start(&self, spec: &LoadSpec, run: &mut Running) -> Result<()> {
        for &c in &spec.cpus {
            for _ in 0..spec.intensity {
                run.spawn(&format!("cpu{c}"), &[c], math)?;
            }
        }
        Ok(())
    }
    fn target(&self, spec: &LoadSpec) -> Option<Target> {
        Some(super::cpu_target(spec, 1.0, super::CPU_BUSY_LIMIT, ""))
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
