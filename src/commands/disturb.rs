//! `rtscope disturb`: the known disturbance of the ground-truth tests, and
//! its burst log.

use crate::cli::DisturbArgs;
use crate::disturb::{self, SpinSpec};
use crate::sys::{clock, cpu, mem, sched, signals};
use anyhow::{Context, Result, bail};
use rtscope_model::inventory::format_cpu_list;
use rtscope_model::units;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// `rtscope disturb`.
pub fn main(a: DisturbArgs, signal: &Arc<AtomicBool>) -> Result<i32> {
    cpu::check("--cpu", &[a.cpu])?;
    if a.spin >= a.period {
        bail!("--spin ({}) must be shorter than --period ({})", units::human(a.spin), units::human(a.period));
    }
    if a.phase_jitter + a.spin > a.period {
        bail!("--phase-jitter + --spin must fit in --period");
    }
    if let Some(path) = &a.log {
        // disturb keeps no store, but the one the other commands use is
        // not to be written over.
        crate::cli::check_output("--log", path, &crate::cli::default_store())?;
    }
    if let Some(fix) = sched::rt_refused(a.priority) {
        bail!("disturb needs SCHED_FIFO: {fix}");
    }
    let _ = mem::lock_all();
    let spec = SpinSpec {
        cpu: a.cpu,
        policy: sched::Policy::Fifo,
        priority: a.priority,
        period_ns: a.period,
        spin_ns: a.spin,
        phase_ns: a.phase_jitter,
        kind: crate::disturb::SpinKind::User,
    };
    let what = format!(
        "{} every {} on CPU {} at SCHED_FIFO {}",
        units::human(a.spin),
        units::human(a.period),
        format_cpu_list(&[a.cpu]),
        a.priority
    );
    let (mut log, mut tx) = match &a.log {
        Some(path) => {
            let (log, tx) = disturb::BurstLog::create(path, &format!("rtscope disturb: spins of {what}"))
                .with_context(|| format!("--log {}: cannot write it", path.display()))?;
            (Some(log), Some(tx))
        }
        None => (None, None),
    };
    let until = a.duration.map_or(u64::MAX, |d| clock::now() + d.ns());
    let spinner = {
        let signal = Arc::clone(signal);
        std::thread::Builder::new().name("rtscope-disturb".into()).spawn(move || {
            signals::block_in_this_thread();
            cpu::pin_self(&[spec.cpu])?;
            sched::set_self(spec.policy, spec.priority)?;
            let mut full = 0u64;
            let spins = disturb::spin_loop(&spec, &signal, until, |b| {
                if let Some(tx) = tx.as_mut() {
                    full += u64::from(tx.push(b).is_err());
                }
            });
            Ok::<(u64, u64), std::io::Error>((spins, full))
        })?
    };
    // The log is written from here, off the disturbed CPU where there is
    // another, so that writing it disturbs nothing but the bursts do.
    if let Some(log) = log.as_mut() {
        let others: Vec<usize> = cpu::home().into_iter().filter(|&c| c != a.cpu).collect();
        if !others.is_empty() {
            let _ = cpu::pin_self(&others);
        }
        while !spinner.is_finished() {
            std::thread::sleep(std::time::Duration::from_millis(20));
            log.drain().context("--log: writing the bursts")?;
        }
    }
    let (spins, full) = spinner.join().map_err(|_| anyhow::anyhow!("the spinner panicked"))??;
    if let Some(log) = log.as_mut() {
        log.drain().context("--log: writing the bursts")?;
        if full > 0 {
            bail!("--log: {full} bursts did not fit the ring to the log's writer and are missing from it");
        }
    }
    eprintln!("rtscope disturb: {spins} spins of {what}");
    Ok(0)
}
