//! `fork`: a fork/exec storm: loops that start `/bin/true` and wait for
//! it, as fast as they can.

use super::{Intensity, LoadSpec, Running, Workload, quiet_command};
use crate::sys::process;
use anyhow::{Result, bail};
use rtscope_model::characterisation::{Measure, Target};

pub struct Fork;

const PROGRAM: &str = "/bin/true";

impl Workload for Fork {
    fn name(&self) -> &'static str {
        "fork"
    }
    fn about(&self) -> &'static str {
        "fork + exec of /bin/true and wait, in a loop; intensity: parallel loops (one per CPU)"
    }
    fn intensity(&self) -> Option<Intensity> {
        Some(Intensity { unit: "parallel loops", min: 1, max: 256, default: |cpus| cpus as u64 })
    }
    fn check(&self, spec: &LoadSpec) -> Result<()> {
        if !std::path::Path::new(PROGRAM).exists() {
            bail!("load {}: {PROGRAM} is missing (Debian package coreutils)", spec.label);
        }
        Ok(())
    }
    fn start(&self, spec: &LoadSpec, run: &mut Running) -> Result<()> {
        for i in 0..spec.intensity {
            run.spawn(&format!("fork{i}"), &spec.cpus, |ctx| {
                while !ctx.stopping() {
                    match process::spawn_tied(&mut quiet_command(PROGRAM)) {
                        Ok(mut child) => {
                            let _ = child.wait();
                        }
                        Err(e) => {
                            ctx.error(format!("fork: cannot start {PROGRAM}: {e}"));
                            ctx.pause(std::time::Duration::from_millis(100));
                        }
                    }
                }
            })?;
        }
        Ok(())
    }
    /// At least 20 processes/s per loop: a fork, exec and wait of
    /// /bin/true takes about a millisecond.
    fn target(&self, spec: &LoadSpec) -> Option<Target> {
        let limit = 20.0 * spec.intensity as f64;
        Some(Target {
            load: spec.label.clone(),
            cpus: spec.cpus.clone(),
            measure: Measure::Forks,
            asked: limit,
            limit,
            asked_text: format!(
                "{} loops of fork, exec and wait of {PROGRAM} (flagged below {limit} processes/s)",
                spec.intensity
            ),
            devices: Vec::new(),
        })
    }
}
