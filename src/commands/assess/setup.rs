//! The assessment's start: the measurements with their own runner
//! started, the session opened, each probe's scheduling on this machine,
//! the CPU score, the run created.

use super::Options;
use super::plan::Plan;
use crate::cli::registry::Built;
use crate::session::{OpenRun, Session};
use crate::sys::process;
use crate::sys::sched::Policy;
use anyhow::{Context, Result};

/// Starts the measurements with their own runner, while rtscope has one
/// thread, no store open and no load running (osbench forks the process
/// that removes its IPC objects should rtscope die).
pub(super) fn start_own(plan: &mut Plan) -> Result<()> {
    for b in &mut plan.probes {
        if let Built::Own(o) = b {
            let name = o.name();
            o.start().with_context(|| format!("starting {name}"))?;
        }
    }
    Ok(())
}

/// Each probe's plan as the run stores it, and the scheduling it gets on
/// this machine, in the plan's order of probes.
fn cell_plans(plan: &Plan, session: &mut Session) -> (Vec<serde_json::Value>, Vec<(Policy, u8)>) {
    let mut cell_plans = Vec::new();
    let mut effective = Vec::new();
    for b in &plan.probes {
        match b {
            Built::PerCpu(common, probe) => {
                let e = session.effective(common.policy, common.priority);
                effective.push(e);
                cell_plans.push(crate::probe::cell_plan(probe.as_ref(), common, e));
            }
            Built::Own(o) => {
                let (policy, priority) = o.scheduling();
                let e = session.effective(policy, priority);
                effective.push(e);
                cell_plans.push(serde_json::json!({
                    "probe": o.name(),
                    "metrics": o.metrics(),
                    "effective_policy": e.0,
                    "effective_priority": e.1,
                    "settings": o.plan(),
                    "describe": o.describe(),
                }));
            }
        }
    }
    (cell_plans, effective)
}

/// Opens the session, resolves each probe's scheduling on this machine,
/// pins rtscope's own threads off the measured CPUs, measures the CPU
/// score and creates the run with it. Returns the run and each probe's
/// effective scheduling, in the plan's order of probes.
pub(super) fn set_up(plan: &Plan, opts: &Options) -> Result<(OpenRun, Vec<(Policy, u8)>)> {
    let mut session = Session::open(&opts.db, &plan.cpus, opts.dma_latency)?;
    // rtscope's own non-RT threads (writer, trace reader, /proc sampler)
    // run ahead of the loads where allowed; the loads reset their nice.
    let _ = process::set_nice(-5);
    let (cell_plans, effective) = cell_plans(plan, &mut session);
    if !opts.quiet {
        session.print_warnings();
    }
    let housekeeping = session.pin_housekeeping(&plan.cpus);
    // The CPU score, on an idle machine, on the first measured CPU.
    let slices = (plan.score_ns / 200_000_000).clamp(1, 50) as u32;
    let score = crate::score::measure(plan.cpus[0], slices, plan.score_ns / u64::from(slices) / 1_000_000);
    let mut run = session.create("run", &plan.json(&cell_plans, &housekeeping))?;
    let run_id = run.run_id;
    run.store()?.put_run_data(run_id, "cpu_score", &serde_json::to_value(&score)?)?;
    Ok((run, effective))
}
