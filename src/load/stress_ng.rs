//! `stress-ng:'ARGS'`: stress-ng with the given arguments, when it is
//! installed, restarted when it exits (give it no --timeout, or a long one).

use super::{Intensity, LoadSpec, Running, Workload, quiet_command, supervise};
use crate::sys::process;
use anyhow::{Result, bail};
use rtscope_model::characterisation::Target;

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
    /// `--cpu N` (`-c N`; 0: every CPU) asks N of its CPUs busy, times
    /// `--cpu-load P` %; other stressors state no CPU target.
    fn target(&self, spec: &LoadSpec) -> Option<Target> {
        let (workers, load) = cpu_stressors(spec.arg.as_deref().unwrap_or_default())?;
        let n = spec.cpus.len().max(1) as u64;
        let workers = if workers == 0 { n } else { workers.min(n) };
        let share = workers as f64 / n as f64 * load.clamp(1, 100) as f64 / 100.0;
        let why = format!(
            " with stress-ng --cpu {workers}{}",
            if load < 100 { format!(" --cpu-load {load}") } else { String::new() }
        );
        Some(super::cpu_target(spec, share, super::CPU_BUSY_LIMIT, &why))
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

/// stress-ng's CPU workers (`--cpu N`, `-c N`, `--cpu=N`) and their load
/// (`--cpu-load P`, 100 unless given); None without CPU workers.
fn cpu_stressors(args: &str) -> Option<(u64, u64)> {
    let words: Vec<&str> = args.split_whitespace().collect();
    let value = |names: &[&str]| {
        words.iter().enumerate().find_map(|(i, w)| {
            names.iter().find_map(|n| match w.strip_prefix(n) {
                Some("") => words.get(i + 1).and_then(|v| v.parse::<u64>().ok()),
                Some(rest) => rest.strip_prefix('=').and_then(|v| v.parse::<u64>().ok()),
                None => None,
            })
        })
    };
    let workers = value(&["--cpu", "-c"])?;
    Some((workers, value(&["--cpu-load", "-l"]).unwrap_or(100)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_workers_are_read_from_the_arguments() {
        assert_eq!(super::cpu_stressors("--cpu 2 --io 1"), Some((2, 100)));
        assert_eq!(super::cpu_stressors("-c 0 --cpu-load 50"), Some((0, 50)));
        assert_eq!(super::cpu_stressors("--cpu=3 --timeout 60"), Some((3, 100)));
        assert_eq!(super::cpu_stressors("--io 2 --cpu-method all"), None);
        assert_eq!(super::cpu_stressors("--vm 1"), None);
    }
}
