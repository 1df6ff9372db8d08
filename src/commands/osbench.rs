//! `rtscope osbench`: the list of tests, or a run of its own that measures
//! the plan's tests (osbench's [`Bench`]), stores them and prints the
//! tables.

use crate::cli::OsbenchArgs;
use crate::osbench::{self, Bench, Measured, Plan};
use crate::report::{self, Report};
use crate::sys::cache::FlushBuffer;
use crate::sys::{clock, cpu, dma::DmaLatency, inventory, ipc::Janitor, mem, sched, sched::Policy};
use anyhow::{Result, bail};
use rtscope_model::inventory::{PRIVILEGES_FIX, Warning};
use rtscope_model::run::RunStatus;
use rtscope_model::store::Store;
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

/// Runs the plan, stores the run, prints the tables. Returns the exit code.
fn run(plan: &Plan, signal: &Arc<AtomicBool>) -> Result<i32> {
    // The janitor first, while rtscope has one thread and no file open
    // that it should not hold.
    let janitor = Janitor::start()?;
    let settings = &plan.settings;
    let inv = inventory::collect();
    let measured: Vec<usize> = std::iter::once(settings.cpu).chain(settings.other_cpu).collect();
    let mut warnings = inv.warnings(&measured);
    let mut policy = settings.policy;
    let mut representative = inv.representative();
    if policy.is_rt() && !sched::can_use_rt(settings.priority) {
        warnings.insert(
            0,
            Warning {
                topic: "privileges".into(),
                message: format!(
                    "cannot use SCHED_{} priorities: measuring at SCHED_OTHER, where the higher-priority party does not preempt the lower one; the run is NOT representative",
                    format!("{policy:?}").to_uppercase()
                ),
                fix: PRIVILEGES_FIX.into(),
            },
        );
        policy = Policy::Other;
        representative = false;
    }
    if let Err(e) = mem::lock_all() {
        warnings.push(Warning {
            topic: "memory".into(),
            message: format!("mlockall failed ({e}): page faults may add latency"),
            fix: PRIVILEGES_FIX.into(),
        });
    }
    let _dma = if plan.dma_latency {
        match DmaLatency::hold(0) {
            Ok(d) => Some(d),
            Err(e) => {
                warnings.push(Warning {
                    topic: "cstates".into(),
                    message: format!("cannot hold /dev/cpu_dma_latency at 0 ({e}): deep C-states may add exit latency"),
                    fix: "run as root, or pass --no-dma-latency to measure with C-states on purpose".into(),
                });
                None
            }
        }
    } else {
        None
    };
    if !plan.quiet {
        for w in warnings.iter().filter(|w| !w.is_informational()) {
            eprintln!("rtscope: warning: {} (fix: {})", w.message, w.fix);
        }
    }
    let housekeeping = cpu::housekeeping(&cpu::online(), &measured, &inv.siblings);
    if !housekeeping.is_empty() {
        let _ = cpu::pin_self(&housekeeping);
    }
    let flush = settings.flushes().then(|| FlushBuffer::new(None)).transpose().map_err(anyhow::Error::msg)?;
    let describe = settings.describe(policy);
    let plan_doc = json!({
        "probe": "osbench",
        "metrics": settings.metrics(),
        "effective_policy": policy,
        "effective_priority": if policy.is_rt() { settings.priority } else { 0 },
        "describe": describe,
        "housekeeping_cpus": rtscope_model::inventory::format_cpu_list(&housekeeping),
        "settings": settings.json(flush.as_ref()),
    });
    let mut store = Store::open(&plan.db)?;
    let header = crate::session::new_header("osbench", std::env::args().collect(), representative, warnings);
    let run_id = store.create_run(&header, &inv, &plan_doc)?;
    crate::sys::signals::recording(run_id);
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
    let Measured { mut notes, failed, jobs } = bench.measure(&mut store, run_id)?;
    let interrupted = signal.load(Relaxed);
    if interrupted {
        notes.push("stopped by a signal (SIGINT/SIGTERM) before its planned end; the tests done are stored".into());
    }
    let status = if interrupted { RunStatus::Interrupted } else { RunStatus::Complete };
    store.finish_run(run_id, status, Some(0), clock::now_unix(), &notes, mem::peak_rss_kb())?;
    crate::sys::signals::stored(run_id);
    drop(janitor);
    mem::unlock_all();
    let run = store.load_run(run_id)?;
    if let Some(path) = &plan.json {
        report::write_file(path, &report::Json, &run)?;
    }
    if let Some(path) = &plan.csv {
        report::write_file(path, &report::OsbenchCsv, &run)?;
    }
    let to_stdout = |p: &Option<std::path::PathBuf>| p.as_deref() == Some(std::path::Path::new("-"));
    if !to_stdout(&plan.json) && !to_stdout(&plan.csv) {
        let mut out = std::io::stdout().lock();
        report::Text { describe }.write(&run, &mut out)?;
        println!("{}", report::stored_line(run_id, &plan.db));
    }
    if failed > 0 && failed == jobs {
        bail!("no test could be measured (see the warnings above)");
    }
    Ok(0)
}
