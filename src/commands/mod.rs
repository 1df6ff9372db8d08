//! The subcommands: [`main`] parses the command line and dispatches; each
//! subcommand (or group) has its file, which acts and maps the outcome to
//! an exit code (0 ok, 1 error, 2 a requirement or threshold failed).
//! `assess` is the assessment that `run` and `load` drive.

mod analyze;
pub mod assess;
mod disturb;
mod fleet;
pub mod monitor;
mod osbench;
mod probes;
mod report;
mod run;
mod store;
mod watch;

use crate::cli::Cmd;
use crate::probe::{netlat, wakeup};
use crate::report::{Format, Input};
use crate::sys::signals;
use anyhow::{Context, Result, bail};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub fn main() -> Result<i32> {
    // The CPUs rtscope was started on, taken before anything pins a thread.
    crate::sys::cpu::home();
    let cli = match crate::cli::parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            return Ok(code);
        }
    };
    signals::default_sigpipe();
    let signal = Arc::new(AtomicBool::new(false));
    // Only measuring commands finish cleanly on a signal; the others (and
    // the second process) keep the default actions.
    if matches!(
        cli.cmd,
        Cmd::Run(_)
            | Cmd::Load(_)
            | Cmd::Probe(_)
            | Cmd::Disturb(_)
            | Cmd::Osbench(_)
            | Cmd::Watch(_)
            | Cmd::Monitor(_)
            | Cmd::Respond(_)
    ) {
        signals::install(&signal).context("installing signal handlers")?;
    }
    let result = dispatch(cli.cmd, &signal);
    // A store damaged past its first pages opens fine and fails on a read
    // or a write: say so, as for one that does not open.
    result.map_err(|e| {
        let said = e.chain().any(|c| c.to_string().contains("is corrupt or not an SQLite file"));
        if rtscope_model::store::corrupt(&e) && !said {
            e.context(
                "the run store (--db) is damaged: SQLite cannot read all of it; `sqlite3 DB .recover | sqlite3 NEW.db` \
                 copies what it still can, or point --db at another store",
            )
        } else if let Some(words) = rtscope_model::store::sqlite_in_words(&e) {
            // SQLite's numbers never reach the user without their words.
            e.context(words)
        } else {
            e
        }
    })
}

fn dispatch(cmd: Cmd, signal: &Arc<AtomicBool>) -> Result<i32> {
    let signal = signal.clone();
    match cmd {
        Cmd::Run(a) => run::run(a, &signal),
        Cmd::Load(a) => run::load(a, &signal),
        Cmd::Probe(p) => probes::main(&p, &signal),
        Cmd::Osbench(a) => osbench::main(a, &signal),
        Cmd::Runs(a) => store::runs(a),
        Cmd::Show(a) => store::show(a),
        Cmd::Export(a) => store::export(a),
        Cmd::Import(a) => store::import(a),
        Cmd::Analyze(a) => analyze::main(a),
        Cmd::Report(a) => report::report(a),
        Cmd::Compare(a) => report::compare(a),
        Cmd::Disturb(a) => disturb::main(a, &signal),
        Cmd::Watch(a) => watch::main(a, &signal),
        Cmd::Monitor(a) => monitor::main(a, &signal),
        Cmd::Respond(a) => {
            crate::probe::serial::respond(a.resolve()?, &signal)?;
            Ok(0)
        }
        Cmd::SecondProcess(a) => {
            let cpus = rtscope_model::inventory::parse_cpu_list(&a.cpus).map_err(anyhow::Error::msg)?;
            wakeup::second_process(&cpus, a.interval_ns, a.priority)?;
            Ok(0)
        }
        Cmd::NetlatSender(a) => {
            if !(netlat::MIN_SIZE..=netlat::MAX_SIZE).contains(&a.size) {
                bail!("--size {} must be {}..{} bytes", a.size, netlat::MIN_SIZE, netlat::MAX_SIZE);
            }
            let cfg = netlat::SenderCfg { size: a.size, session: a.session };
            netlat::sender_process(a.cpu, a.policy, a.priority, cfg)?;
            Ok(0)
        }
    }
}

/// Ends a run of one cell: stores its trace summary, its status from the
/// outcome (and `signal`), and loads it back. Returns the run and its exit
/// code; a store error during the cell fails it, after the run is ended.
pub(crate) fn finish_one(
    run: crate::session::OpenRun,
    outcome: crate::session::CellOutcome,
    signal: &AtomicBool,
) -> Result<(rtscope_model::run::Run, i32)> {
    finish_cells(run, vec![outcome], signal)
}

/// [`finish_one`] for a run of several cells (a probe's `--instances`): the
/// cells' trace summaries added up.
pub(crate) fn finish_cells(
    mut run: crate::session::OpenRun,
    mut outcomes: Vec<crate::session::CellOutcome>,
    signal: &AtomicBool,
) -> Result<(rtscope_model::run::Run, i32)> {
    let run_id = run.run_id;
    let mut trace: Option<rtscope_model::episode::TraceSummary> = None;
    for t in outcomes.iter().filter_map(|o| o.trace.as_ref()) {
        trace.get_or_insert_with(Default::default).absorb(t);
    }
    if let (Some(summary), false) = (&trace, outcomes.iter().any(|o| o.store_error.is_some())) {
        run.store()?.put_run_data(run_id, "trace", &serde_json::to_value(summary)?)?;
    }
    let (status, exit_code, notes) = crate::session::verdict(&mut outcomes, signal);
    let loaded = run.finish(status, exit_code, &notes);
    if let Some(e) = outcomes.iter_mut().find_map(|o| o.store_error.take()) {
        return Err(e.context(format!("run {run_id} ended failed")));
    }
    Ok((loaded?, exit_code))
}

/// Writes the files asked for (each a flag, a format and a path or `-`
/// for stdout: `--json`, osbench's `-o FILE.csv`). Returns whether one went
/// to stdout.
pub(crate) fn write_files(input: &Input, files: &[(&str, &dyn Format, Option<&Path>)]) -> Result<bool> {
    let mut on_stdout = false;
    for &(flag, format, path) in files {
        if let Some(path) = path {
            crate::report::write(flag, path, format, input)?;
            on_stdout |= path == Path::new("-");
        }
    }
    Ok(on_stdout)
}

/// What every measuring command does once its run is stored: writes the
/// files asked for ([`write_files`]), then, unless one of them went to
/// stdout, prints the text summary and where the run is stored (in `db`):
/// `--quiet` too, as cyclictest's `-q` prints its summary at the end.
/// Returns whether it printed.
pub(crate) fn write_run(input: &Input, files: &[(&str, &dyn Format, Option<&Path>)], db: &Path) -> Result<bool> {
    if write_files(input, files)? {
        return Ok(false);
    }
    let mut out = std::io::stdout().lock();
    crate::report::TEXT.write(&Input { colour: crate::report::colour_on_stdout(), ..*input }, &mut out)?;
    writeln!(out, "{}", crate::report::stored_line(input.run()?.header.id, db))?;
    Ok(true)
}
