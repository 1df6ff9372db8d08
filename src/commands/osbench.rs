//! `rtscope osbench`: the list of tests, or a run of its own that measures
//! the plan's tests (osbench's [`Bench`]) through the session's lifecycle
//! (as every probe's run: [`Session`] -> `OpenRun` -> finish), stores them
//! and prints the tables.

use crate::cli::OsbenchArgs;
use crate::osbench::{self, Bench, Measured, Plan};
use crate::report::{self, Input};
use crate::session::Session;
use crate::sys::cache::FlushBuffer;
use crate::sys::ipc::Janitor;
use anyhow::{Result, bail};
use rtscope_model::descriptor::OSBENCH;
use rtscope_model::run::RunStatus;
use serde_json::json;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// `rtscope osbench`: `--list`, or the plan of its arguments measured.
pub fn main(a: OsbenchArgs, signal: &Arc<AtomicBool>) -> Result<i32> {
    if a.list {
        osbench::list(&mut std::io::stdout().lock())?;
        return Ok(0);
    }
    let plan = a.plan()?;
    run(&plan, signal)
}

/// Runs the plan in a run of its own (the session's lifecycle, as every
/// probe's), prints the tables. Returns the exit code.
fn run(plan: &Plan, signal: &Arc<AtomicBool>) -> Result<i32> {
    // The janitor first, while rtscope has one thread and no file open
    // that it should not hold.
    let janitor = Janitor::start()?;
    let settings = &plan.settings;
    let measured: Vec<usize> = std::iter::once(settings.cpu).chain(settings.other_cpu).collect();
    let mut session = Session::open(&plan.db, &measured, plan.dma_latency)?;
    let (policy, priority) = session.effective_parties(settings.policy, settings.priority);
    if !plan.quiet {
        session.print_warnings();
    }
    let housekeeping = session.pin_housekeeping_cpus(&measured);
    let flush = settings.flushes().then(|| FlushBuffer::new(None)).transpose().map_err(anyhow::Error::msg)?;
    let describe = settings.describe(policy);
    let plan_doc = json!({
        "probe": OSBENCH.name,
        "metrics": settings.metrics(),
        "effective_policy": policy,
        "effective_priority": if policy.is_rt() { priority } else { 0 },
        "describe": describe,
        "housekeeping_cpus": rtscope_model::inventory::format_cpu_list(&housekeeping),
        "settings": settings.json(flush.as_ref()),
    });
    let mut run = session.create(OSBENCH.name, &plan_doc)?;
    let run_id = run.run_id;
    let bench = Bench {
        settings,
        policy,
        janitor: &janitor,
        flush: flush.as_ref(),
        signal,
        load: None,
        budget_ns: None,
        progress: !plan.quiet && std::io::stderr().is_terminal(),
        quiet: plan.quiet,
    };
    let Measured { mut notes, failed, jobs } = bench.measure(run.store()?, run_id)?;
    let interrupted = signal.load(Relaxed);
    if interrupted {
        notes.push("stopped by a signal (SIGINT/SIGTERM) before its planned end; the tests done are stored".into());
    }
    let status = if interrupted { RunStatus::Interrupted } else { RunStatus::Complete };
    let run = run.finish(status, 0, &notes)?;
    drop(janitor);
    let files =
        [("--json", report::JSON, plan.json.as_deref()), ("--output", report::OSBENCH_CSV, plan.csv.as_deref())];
    super::write_run(&Input::one(&run), &files, &plan.db)?;
    if failed > 0 && failed == jobs {
        bail!("no test could be measured (see the warnings above)");
    }
    Ok(0)
}
