//! The subcommands: [`main`] parses the command line and dispatches; each
//! subcommand (or group) has its file, which acts and maps the outcome to
//! an exit code (0 ok, 1 error, 2 a requirement or threshold failed).
//! `assess` is the assessment that `run` and `load` drive.

mod analyze;
pub mod assess;
mod disturb;
mod osbench;
mod probes;
mod report;
mod run;
mod store;

use crate::cli::{Cli, Cmd};
use crate::probe::{netlat, wakeup};
use crate::report::{Format, Input};
use crate::sys::signals;
use anyhow::{Context, Result, bail};
use clap::Parser;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub fn main() -> Result<i32> {
    let cli = match Cli::try_parse() {
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
    if matches!(cli.cmd, Cmd::Run(_) | Cmd::Load(_) | Cmd::Probe(_) | Cmd::Disturb(_) | Cmd::Osbench(_)) {
        signals::install(&signal).context("installing signal handlers")?;
    }
    match cli.cmd {
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

/// What a measuring command (a probe's, `osbench`, `run`, `load`) does once
/// its run is finished and stored: writes each file asked for (`flag`,
/// format, path or `-` for stdout: `--json`, osbench's `-o FILE.csv`), then,
/// unless `quiet` or a file went to stdout, prints the text summary and
/// where the run is stored (in `db`). Returns whether it printed.
pub(crate) fn write_run(
    input: &Input,
    files: &[(&str, &dyn Format, Option<&Path>)],
    quiet: bool,
    db: &Path,
) -> Result<bool> {
    let mut on_stdout = false;
    for &(flag, format, path) in files {
        if let Some(path) = path {
            crate::report::write(flag, path, format, input)?;
            on_stdout |= path == Path::new("-");
        }
    }
    if quiet || on_stdout {
        return Ok(false);
    }
    let mut out = std::io::stdout().lock();
    crate::report::TEXT.write(input, &mut out)?;
    writeln!(out, "{}", crate::report::stored_line(input.run()?.header.id, db))?;
    Ok(true)
}
