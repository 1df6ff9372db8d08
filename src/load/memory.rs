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
        "memmove through a buffer far larger than the caches on each CPU; intensity: MiB per CPU (64; all CPUs together at most half of MemAvailable)"
    }
    fn intensity(&self) -> Option<Intensity> {
        Some(Intensity { unit: "MiB per CPU", min: 1, max: 4096, default: |_| 64 })
    }
    /// Every CPU of the load gets its buffer: together at most half of
    /// the memory available, so that the load thrashes caches, not swap.
    fn check(&self, spec: &LoadSpec) -> Result<()> {
        let total = buffer_bytes(spec.intensity as usize) as u64 * spec.cpus.len() as u64;
        crate::sys::mem::check_share(
            &format!("load '{}'", spec.label),
            total,
            &format!("its MiB per CPU x {} CPUs; give a smaller intensity (e.g. memory:64)", spec.cpus.len()),
        )
        .map_err(anyhow::Error::msg)
    }
    fn start(&self, spec: &LoadSpec, run: &mut Running) -> Result<()> {
        let mib = spec.intensity as usize;
        for &c in &spec.cpus {
            run.spawn(&format!("memory{c}"), &[c], move |ctx| thrash(ctx, mib))?;
        }
        Ok(())
    }
    fn target(&self, spec: &LoadSpec) -> Option<Target> {
        Some(super::cpu_target(spec, 1.0, super::CPU_BUSY_LIMIT, ""))
    }
}

const BLOCK: usize = 1 << 20;

/// The buffer of one CPU for `mib` MiB: two halves of at least a block.
fn buffer_bytes(mib: usize) -> usize {
    2 * (mib.saturating_mul(1 << 20) / 2).max(BLOCK)
}

/// Moves 1 MiB blocks between the halves of a buffer of `mib` MiB,
/// checking for a stop between blocks.
fn thrash(ctx: &LoadCtx, mib: usize) {
    let size = buffer_bytes(mib);
    let half = size / 2;
    let mut buf: Vec<u8> = Vec::new();
    if let Err(e) = buf.try_reserve_exact(size) {
        ctx.error(format!("memory: cannot allocate {}: {e}", crate::sys::mem::human_bytes(size as u64)));
        return;
    }
    buf.extend((0..size).map(|i| i as u8));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_beyond_half_the_available_memory_is_refused() {
        let spec = |cpus: usize| LoadSpec {
            label: "memory:4096".into(),
            kind: &Memory,
            intensity: 4096,
            cpus: (0..cpus).collect(),
            arg: None,
            rt: None,
        };
        // 4 GiB on each of 100000 CPUs: more than any machine has.
        let e = Memory.check(&spec(100_000)).unwrap_err().to_string();
        assert!(e.contains("memory:4096") && e.contains("half") && e.contains("smaller intensity"), "{e}");
        assert_eq!(buffer_bytes(1), 2 << 20, "two halves of a block at least");
        assert_eq!(buffer_bytes(64), 64 << 20);
    }
}
