//! The probes' subcommands (`wakeup`, `noise`, `sleep`, `ptimer`,
//! `netlat`, every [`ProbeCmd`]): a single probe's run, one cell in a run
//! of its own, then the summary; and netlat's `--serve` responder.

use crate::cli::{HistogramOpts, ProbeCmd, ProbePlan};
use crate::probe::{Cell, Common, Probe, cell_plan, check_together, check_trace, netlat};
use crate::report::{self, Input};
use crate::session::{CellOutcome, Session};
use crate::sys::{clock, sched};
use anyhow::{Result, anyhow};
use rtscope_model::settings::InstancesMode;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// The option of a probe's command that measures its instances one after
/// the other.
const IN_TURN: &str = "--instances-in-turn";

/// Runs `probe` on `common.cpus` to the end and stores it. Prints the
/// summary at the end (quiet too, as cyclictest -q; not when the JSON goes
/// to stdout), or cyclictest's histogram of the probe's first metric
/// (`--histogram`): on stdout instead of the summary, or in its
/// `--histfile` beside it. Returns the exit code: 2 when `--threshold` was
/// crossed.
pub fn run_probe(
    probe: &dyn Probe,
    common: &Common,
    signal: &Arc<AtomicBool>,
    histogram: Option<&HistogramOpts>,
) -> Result<i32> {
    // Refused before the store is opened: nothing is created.
    check_trace(probe, common)?;
    if let Some(refusal) = common.deadline.as_ref().and_then(|dl| sched::dl_refused(&common.cpus, dl)) {
        return Err(anyhow!("{refusal}"));
    }
    if !common.instances.is_empty() && histogram.is_some() {
        return Err(anyhow!("--instances: cyclictest's histogram (-h) is of one instance: give one priority with -p"));
    }
    // --instances: one cell per priority into one run: together, or one
    // after the other.
    let cells: Vec<Common> =
        if common.instances.is_empty() { vec![common.clone()] } else { common.each_instance(probe) };
    let together = cells.len() > 1 && common.instances_mode == InstancesMode::Together;
    if together {
        let parts: Vec<(&dyn Probe, &Common)> = cells.iter().map(|c| (probe, c)).collect();
        check_together(&parts, IN_TURN)?;
    }
    let mut session = Session::open(&common.db, &common.cpus, common.dma_latency)?;
    let effective: Vec<_> = cells.iter().map(|c| session.effective(c.policy, c.priority)).collect();
    // Helpers start before the run is stored, so that a failure leaves no
    // run behind.
    let mut cell = Cell::prepare(probe, &cells[0], effective[0], None, &mut session.warnings)?;
    if together {
        let others: Vec<_> = cells.iter().zip(&effective).skip(1).map(|(c, &e)| (probe, c, e)).collect();
        cell = cell.with(&others, IN_TURN, &mut session.warnings)?;
    }
    if !common.quiet {
        session.print_warnings();
    }
    // rtscope's own threads stay off the measured CPUs and their siblings.
    let housekeeping = session.pin_housekeeping(&common.cpus);
    let mut plan = cell.plan();
    if cells.len() > 1 {
        plan["probe"] = probe.name().into();
        plan["cells"] = cells.iter().zip(&effective).map(|(c, &e)| cell_plan(probe, c, e)).collect();
        plan["instances"] = serde_json::to_value(common.instances_mode)?;
        if !common.quiet {
            let names: Vec<&str> = cells.iter().map(|c| c.series_name(probe)).collect();
            eprintln!("rtscope {}: {} ({})", common.kind, common.instances_mode.describe(), names.join(", "));
        }
    }
    plan["housekeeping_cpus"] = housekeeping.into();
    plan["usage"] = serde_json::to_value(common.usage)?;
    let mut run = session.create(&common.kind, &plan)?;
    let run_id = run.run_id;
    let mut outcomes = vec![cell.measure(&mut run, signal)?];
    for (c, &e) in cells.iter().zip(&effective).skip(1).filter(|_| !together) {
        let last = outcomes.last().expect("one measured");
        if signal.load(Relaxed) || last.store_error.is_some() || last.breach.is_some() {
            break;
        }
        let mut warnings = Vec::new();
        let name = c.series_name(probe);
        let mut outcome = match Cell::prepare(probe, c, e, None, &mut warnings) {
            Ok(cell) => cell.measure(&mut run, signal)?,
            Err(err) => CellOutcome { errors: vec![format!("{name}: {err:#}")], ..Default::default() },
        };
        outcome.notes.extend(warnings.iter().map(|w| format!("{name}: {} (fix: {})", w.message, w.fix)));
        outcomes.push(outcome);
    }
    let errors: Vec<String> = outcomes.iter().flat_map(|o| o.errors.iter().cloned()).collect();
    let db = run.db.clone();
    let (loaded, exit_code) = super::finish_cells(run, outcomes, signal)?;
    let json_on_stdout = common.json.as_deref() == Some(std::path::Path::new("-"));
    let histogram_on_stdout = histogram.is_some_and(|h| h.file.is_none()) && !json_on_stdout;
    if let Some(h) = histogram {
        let hist = report::CyclictestHist { metric: probe.metrics()[0], buckets_us: h.buckets_us, all: h.all_column };
        match &h.file {
            Some(path) => report::write_to("--histfile", path, |out| hist.write(&loaded, out))?,
            None if histogram_on_stdout => {
                report::to_stdout(|out| hist.write(&loaded, out))?;
                // As cyclictest's: the histogram replaces the summary on stdout.
                eprintln!("{}", report::stored_line(run_id, &db));
            }
            None => {}
        }
    }
    let files = [("--json", report::JSON, common.json.as_deref())];
    if histogram_on_stdout {
        super::write_files(&Input::one(&loaded), &files)?;
    } else if common.quiet && !json_on_stdout {
        // As cyclictest -q: a line per series at the end, and where it is.
        super::write_files(&Input::one(&loaded), &files)?;
        let mut out = std::io::stdout().lock();
        report::quiet::write(&loaded, common.unit, &mut out)?;
        writeln!(out, "{}", report::stored_line(run_id, &db))?;
    } else {
        super::write_run(&Input { unit: common.unit, ..Input::one(&loaded) }, &files, &db)?;
    }
    if !errors.is_empty() {
        return Err(anyhow!("{}", errors.join("; ")));
    }
    Ok(exit_code)
}

/// `rtscope <probe>`: a measuring run, or netlat's `--serve` responder.
pub fn main(cmd: &ProbeCmd, signal: &Arc<AtomicBool>) -> Result<i32> {
    match cmd.resolve(cmd.descriptor().name)? {
        ProbePlan::Measure(common, probe, warnings) => {
            if !common.quiet {
                for w in &warnings {
                    eprintln!("rtscope: warning: {w}");
                }
            }
            run_probe(probe.as_ref(), &common, signal, cmd.histogram().as_ref())
        }
        ProbePlan::Serve { addr, iface, cpu, hw_wanted, common } => {
            let (mut policy, mut priority) = (common.policy, common.priority);
            if let Some(fix) = policy.is_rt().then(|| sched::rt_refused(priority)).flatten() {
                eprintln!(
                    "rtscope: warning: cannot use real-time priority {priority}: serving at SCHED_OTHER (fix: {fix})"
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
