//! `rtscope load`: loads alone, characterised, stored as a run.

use super::Options;
use crate::load::sampler::Sampler;
use crate::load::{self, LoadSpec, Running};
use crate::report::{self, Input};
use crate::session::Session;
use crate::sys::clock;
use anyhow::{Context, Result, anyhow};
use rtscope_model::characterisation::Accumulator;
use rtscope_model::inventory::format_cpu_list;
use rtscope_model::run::RunStatus;
use rtscope_model::units;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

/// `rtscope load`: runs `loads` together for `duration_ns` (or until a
/// signal), characterises them and stores that as a run.
pub fn loads_only(
    loads: &[LoadSpec],
    duration_ns: Option<u64>,
    opts: &Options,
    signal: &Arc<AtomicBool>,
) -> Result<i32> {
    load::remove_stale_temp_dirs();
    let session = Session::open_unmeasured(&opts.db)?;
    let label = loads.iter().map(|l| l.label.as_str()).collect::<Vec<_>>().join(",");
    let mut cpus: Vec<usize> = loads.iter().flat_map(|l| l.cpus.iter().copied()).collect();
    cpus.sort_unstable();
    cpus.dedup();
    let plan = serde_json::json!({
        "loads": loads,
        "duration_ns": duration_ns,
        "describe": format!("loads {label} on CPUs {}", format_cpu_list(&cpus)),
    });
    let mut run = session.create("load", &plan)?;
    if !opts.quiet {
        eprintln!(
            "rtscope load: {label} on CPUs {}{} (Ctrl-C stops)",
            format_cpu_list(&cpus),
            duration_ns.map(|d| format!(" for {}", units::human(d))).unwrap_or_default()
        );
    }
    let mut running = Vec::new();
    let mut notes = Vec::new();
    let mut failed = None;
    for spec in loads {
        match Running::start(spec, signal) {
            Ok(r) => running.push(r),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let mut acc = Accumulator::new(&label, &cpus);
    if failed.is_none() {
        let sampler = Sampler::start(acc).context("starting the /proc sampler")?;
        // Until the end, a signal, or a load that fails (its command cannot
        // start, or keeps failing at once).
        let end = clock::now().saturating_add(duration_ns.unwrap_or(u64::MAX / 2));
        while clock::now() < end && !signal.load(Relaxed) && running.iter().all(|r| r.failure().is_none()) {
            std::thread::sleep(Duration::from_millis(20));
        }
        acc = sampler.stop();
    }
    let mut load_failures = Vec::new();
    for r in running {
        let l = r.label.clone();
        if let Some(f) = r.failure() {
            load_failures.push(format!("load {l} failed: {f}"));
        }
        notes.extend(r.stop().into_iter().map(|e| format!("load {l}: {e}")));
    }
    let mut characterisation = acc.finish();
    if load_failures.is_empty() {
        characterisation.checks = loads.iter().filter_map(load::target).map(|t| characterisation.check(&t)).collect();
    } else {
        characterisation.failure = Some(load_failures.join("; "));
    }
    notes.extend(characterisation.checks.iter().filter(|k| k.flagged).map(|k| format!("load check: {}", k.message)));
    if failed.is_none() && !load_failures.is_empty() {
        failed = Some(anyhow!("{}", load_failures.join("; ")));
    }
    let characterisation = vec![characterisation];
    let run_id = run.run_id;
    run.store()?.put_run_data(run_id, "characterisation", &serde_json::to_value(&characterisation)?)?;
    let (status, code) = match &failed {
        Some(e) => {
            notes.push(format!("{e:#}"));
            (RunStatus::Failed, 1)
        }
        None if signal.load(Relaxed) && duration_ns.is_some() => {
            notes.push("stopped by a signal (SIGINT/SIGTERM) before its planned end".into());
            (RunStatus::Interrupted, 0)
        }
        None => (RunStatus::Complete, 0),
    };
    let loaded = run.finish(status, code, &notes)?;
    if let Some(e) = failed {
        return Err(e);
    }
    crate::commands::write_run(&Input::one(&loaded), &[("--json", report::JSON, opts.json.as_deref())], &opts.db)?;
    Ok(code)
}
