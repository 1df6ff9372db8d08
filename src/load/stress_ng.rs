//! `stress-ng:'ARGS'`: stress-ng with the given arguments, when it is
//! installed, restarted when it exits (give it no --timeout, or a long one).

use super::{Intensity, LoadSpec, Running, Workload, quiet_command, supervise};
use crate::sys::process;
use anyhow::{Result, bail};

pub struct StressNg;

impl Workload for StressNg {
    fn name(&self) -> &'static str {
        "stress-ng"
    }
    fn about(&self) -> &'static str {
        "stress-ng with these arguments (stress-ng:'--cpu 2 --io 1'), when installed"
    }
    fn intensity(&self) -> Option<Intensity> {
        None
    }
    fn takes_argument(&self) -> bool {
        true
    }
    fn check(&self, spec: &LoadSpec) -> Result<()> {
        if process::on_path("stress-ng").is_none() {
            bail!(
                "load {} needs stress-ng, which is not installed: apt-get install stress-ng (Debian package stress-ng)",
                spec.label
            );
        }
        Ok(())
    }
    fn commands(&self) -> bool {
        true
    }
    fn start(&self, spec: &LoadSpec, run: &mut Running) -> Result<()> {
        let args = spec.arg.clone().unwrap_or_default();
        run.spawn("stress-ng", &spec.cpus, move |ctx| {
            // Through the shell, so that the arguments are split as typed.
            supervise(ctx, &format!("stress-ng {args}"), true, || {
                let mut c = quiet_command("/bin/sh");
                c.arg("-c").arg(format!("exec stress-ng {args}"));
                c
            });
        })
    }
}
