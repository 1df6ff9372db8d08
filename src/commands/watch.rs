//! `rtscope watch`: the machine's own threads, watched into a run of
//! their own; then the summary, as a probe's run.

use crate::cli::WatchArgs;
use crate::report::{self, Input};
use crate::session::Session;
use crate::sys::{cpu, sched};
use anyhow::Result;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub fn main(args: WatchArgs, signal: &Arc<AtomicBool>) -> Result<i32> {
    let (settings, place) = args.resolve()?;
    // cpu_dma_latency stays as found: nothing of the machine is changed.
    let watched_cpus = settings.filter.cpus.clone().unwrap_or_default();
    let mut session = Session::open(&args.store.db, &watched_cpus, None)?;
    let watch = crate::watch::prepare(settings, &mut session.warnings)?;
    // The reader: where the user said, else off the watched CPUs.
    let reader_cpus = match &place.cpus {
        Some(c) => {
            cpu::pin_self(c).map_err(|e| anyhow::anyhow!("--reader-cpus: cannot pin rtscope's reader: {e}"))?;
            rtscope_model::inventory::format_cpu_list(c)
        }
        None if watched_cpus.is_empty() => "any (no --cpus: the watched threads may run anywhere)".to_string(),
        None => session.pin_housekeeping(&watched_cpus),
    };
    let reader_sched = match place.priority {
        Some(p) => {
            sched::set_self(sched::Policy::Fifo, p).map_err(|e| {
                anyhow::anyhow!("--reader-priority {p}: cannot set SCHED_FIFO {p}: {e} (run as root, or drop it)")
            })?;
            format!("SCHED_FIFO {p}")
        }
        None => "SCHED_OTHER".to_string(),
    };
    if !args.out.quiet {
        session.print_warnings();
        eprintln!(
            "rtscope watch: {} threads found; reader on CPUs {reader_cpus} at {reader_sched}; Ctrl-C ends",
            watch.found.len()
        );
    }
    let mut plan = watch.plan();
    plan["reader_cpus"] = reader_cpus.into();
    plan["reader_sched"] = reader_sched.into();
    let mut run = session.create("watch", &plan)?;
    let outcome = watch.measure(&mut run, None, signal, None)?;
    let db = run.db.clone();
    let (loaded, exit_code) = super::finish_one(run, outcome, signal)?;
    let files = [("--json", report::JSON, args.out.json.as_deref())];
    super::write_run(&Input::one(&loaded), &files, &db)?;
    Ok(exit_code)
}
