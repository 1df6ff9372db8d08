//! `sched`: many threads ping-ponging one byte through Unix socket pairs,
//! like hackbench: a storm of wake-ups and context switches.

use super::{Intensity, LoadSpec, Running, Workload};
use anyhow::Result;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

pub struct Sched;

/// Thread pairs per group.
const PAIRS: u64 = 8;

impl Workload for Sched {
    fn name(&self) -> &'static str {
        "sched"
    }
    fn about(&self) -> &'static str {
        "thread pairs ping-ponging a byte through Unix sockets, like hackbench; intensity: groups of 8 pairs (2)"
    }
    fn intensity(&self) -> Option<Intensity> {
        Some(Intensity { unit: "groups of 8 thread pairs", min: 1, max: 64, default: |_| 2 })
    }
    fn start(&self, spec: &LoadSpec, run: &mut Running) -> Result<()> {
        for i in 0..spec.intensity * PAIRS {
            let (mut a, mut b) = UnixStream::pair()?;
            for s in [&a, &b] {
                s.set_read_timeout(Some(Duration::from_millis(100)))?;
            }
            run.spawn(&format!("ping{i}"), &spec.cpus, move |ctx| {
                let mut byte = [1u8];
                while !ctx.stopping() {
                    if a.write_all(&byte).is_err() {
                        return;
                    }
                    // A timeout (the partner stopping) is not an error.
                    let _ = a.read(&mut byte);
                }
            })?;
            run.spawn(&format!("pong{i}"), &spec.cpus, move |ctx| {
                let mut byte = [0u8];
                while !ctx.stopping() {
                    if let Ok(1) = b.read(&mut byte)
                        && b.write_all(&byte).is_err()
                    {
                        return;
                    }
                }
            })?;
        }
        Ok(())
    }
}
