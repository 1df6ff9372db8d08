//! The probes' subcommands (`wakeup`, `noise`, `sleep`, `ptimer`,
//! `netlat`): a single probe's run, one cell in a run of its own, then the
//! summary; and netlat's `--serve` responder.

use crate::cli::{HistogramOpts, NetlatArgs, NetlatPlan};
use crate::probe::{Cell, Common, Probe, check_trace, netlat};
use crate::report::{self, Report};
use crate::session::{Session, verdict};
use crate::sys::{clock, sched};
use anyhow::{Result, anyhow};
use rtscope_model::inventory::PRIVILEGES_FIX;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Runs `probe` on `common.cpus` to the end and stores it. Prints the
/// summary at the end (quiet too, as cyclictest -q; not when the JSON goes
/// to stdout). Returns the exit code: 2 when `--threshold` was crossed.
pub fn run_probe(probe: &dyn Probe, common: &Common, signal: &Arc<AtomicBool>) -> Result<i32> {
    run_probe_with(probe, common, signal, None)
}

/// [`run_probe`], ending with cyclictest's histogram of the probe's first
/// metric (`--histogram`): on stdout instead of the summary, or in its
/// `--histfile` beside the summary.
pub fn run_probe_with(
    probe: &dyn Probe,
    common: &Common,
    signal: &Arc<AtomicBool>,
    histogram: Option<&HistogramOpts>,
) -> Result<i32> {
    // Refused before the store is opened: nothing is created.
    check_trace(probe, common)?;
    let mut session = Session::open(&common.db, &common.cpus, common.dma_latency)?;
    let effective = session.effective(common.policy, common.priority);
    // Helpers start before the run is stored, so that a failure leaves no
    // run behind.
    let cell = Cell::prepare(probe, common, effective, None, &mut session.warnings)?;
    if !common.quiet {
        session.print_warnings();
    }
    // rtscope's own threads stay off the measured CPUs and their siblings.
    let housekeeping = session.pin_housekeeping(&common.cpus);
    let mut plan = cell.plan();
    plan["housekeeping_cpus"] = housekeeping.into();
    let mut run = session.create(&common.kind, &plan)?;
    let run_id = run.run_id;
    let mut outcomes = [cell.measure(&mut run, signal)?];
    if let (Some(summary), None) = (&outcomes[0].trace, &outcomes[0].store_error) {
        run.store()?.put_run_data(run_id, "trace", &serde_json::to_value(summary)?)?;
    }
    let errors = outcomes[0].errors.clone();
    let (status, exit_code, notes) = verdict(&mut outcomes, signal);
    let db = run.db.clone();
    let loaded = run.finish(status, exit_code, &notes);
    if let Some(e) = outcomes[0].store_error.take() {
        return Err(e.context(format!("run {run_id} ended failed")));
    }
    let loaded = loaded?;
    if let Some(path) = &common.json {
        report::write_file(path, &report::Json, &loaded)?;
    }
    let json_on_stdout = common.json.as_deref() == Some(std::path::Path::new("-"));
    if let Some(h) = histogram {
        let hist = report::CyclictestHist { metric: probe.metrics()[0], buckets_us: h.buckets_us, all: h.all_column };
        match &h.file {
            Some(path) => report::write_to("--histfile", path, |out| hist.write(&loaded, out))?,
            None if !json_on_stdout => {
                hist.write(&loaded, &mut std::io::stdout().lock())?;
                // As cyclictest's: the histogram replaces the summary on stdout.
                eprintln!("{}", report::stored_line(run_id, &db));
            }
            None => {}
        }
    }
    let histogram_on_stdout = histogram.is_some_and(|h| h.file.is_none());
    if !json_on_stdout && !histogram_on_stdout {
        let mut out = std::io::stdout().lock();
        report::Text { describe: probe.describe() }.write(&loaded, &mut out)?;
        println!("{}", report::stored_line(run_id, &db));
    }
    if !errors.is_empty() {
        return Err(anyhow!("{}", errors.join("; ")));
    }
    Ok(exit_code)
}

/// `rtscope netlat`: a measuring run, or the responder of `--serve`.
pub fn netlat(a: NetlatArgs, signal: &Arc<AtomicBool>) -> Result<i32> {
    match a.resolve("netlat")? {
        NetlatPlan::Measure(common, probe, warnings) => {
            if !common.quiet {
                for w in &warnings {
                    eprintln!("rtscope: warning: {w}");
                }
            }
            run_probe(&probe, &common, signal)
        }
        NetlatPlan::Serve { addr, iface, cpu, hw_wanted, common } => {
            let (mut policy, mut priority) = (common.policy, common.priority);
            if policy.is_rt() && !sched::can_use_rt(priority) {
                eprintln!(
                    "rtscope: warning: cannot use real-time priority {priority}: serving at SCHED_OTHER (fix: {PRIVILEGES_FIX})"
                );
                (policy, priority) = (sched::Policy::Other, 0);
            }
            let until = common.duration_ns.map_or(u64::MAX, |d| clock::now() + d);
            let opts = netlat::Serve {
                addr,
                iface: iface.as_deref(),
                cpu,
                policy,
                priority,
                until_ns: until,
                quiet: common.quiet,
                dma_latency: common.dma_latency,
                hw_wanted,
            };
            netlat::serve(opts, signal)?;
            Ok(0)
        }
    }
}
