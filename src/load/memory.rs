//! `memory`: cache and memory-bandwidth thrash: on every CPU of the load,
//! a thread moves one half of its buffer onto the other and back (large
//! `memmove`s, far beyond the caches).

use super::{Intensity, LoadCtx, LoadSpec, Running, Workload};
use anyhow::Result;
use rtscope_model::characterisation::Target;

pub struct Memory;

impl Workload for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }
    fn about(&self) -> &'static str {
        "memmove through a buffer far larger than the caches on each CPU; intensity: MiB per CPU (64)"
    }
    fn intensity(&self) -> Option<Intensity> {
        Some(Intensity { unit: "MiB per CPU", min: 1, max: 4096, default: |_| 64 })
    }
    fn start(&self, spec: &LoadSpec, run: &mut Running) -> Result<()> {
        let bytes = spec.intensity as usize * (1 << 20);
        for &c in &spec.cpus {
            run.spawn(&format!("memory{c}"), &[c], move |ctx| thrash(ctx, bytes))?;
        }
        Ok(())
    }
    fn target(&self, spec: &LoadSpec) -> Option<Target> {
        Some(super::cpu_target(spec, 1.0, super::CPU_BUSY_LIMIT, ""))
    }
}

/// Moves 1 MiB blocks between the halves of the buffer, checking for a
/// stop between blocks.
fn thrash(ctx: &LoadCtx, bytes: usize) {
    const BLOCK: usize = 1 << 20;
    let half = (bytes / 2).max(BLOCK);
    let mut buf: Vec<u8> = (0..2 * half).map(|i| i as u8).collect();
    let mut forward = true;
    while !ctx.stopping() {
        let mut at = 0;
        while at < half && !ctx.stopping() {
            let len = BLOCK.min(half - at);
            let (from, to) = if forward { (at, half + at) } else { (half + at, at) };
            buf.copy_within(from..from + len, to);
            at += len;
        }
        forward = !forward;
        std::hint::black_box(&buf);
    }
}
