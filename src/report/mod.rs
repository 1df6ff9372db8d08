//! Output formats, one file each behind [`Report`].

pub mod analyze;
mod code;
pub mod comparison;
mod doc;
mod flame;
pub mod html;
pub mod json;
mod judged;
pub mod markdown;
mod matrix;
mod osbench_csv;
mod perfetto;
mod schedule;
mod sections;
mod svg;
mod tailplot;
mod text;

pub use comparison::Comparison;
pub use html::Html;
pub use json::Json;
pub use markdown::Markdown;
pub use osbench_csv::OsbenchCsv;
pub use perfetto::Perfetto;
pub use text::{Text, write_episodes};

use crate::judge::{RequireSpec, TasksSpec};
use anyhow::{Context, Result};
use rtscope_model::run::Run;
use std::io::Write;
use std::path::Path;

/// Renders a stored run.
pub trait Report {
    fn write(&self, run: &Run, out: &mut dyn Write) -> Result<()>;
}

/// The report of `runs` as a document: a chapter per run, each judged
/// against the requirements of `req` (else those stored with it, else the
/// default yardstick) and the task set of `tasks` (else the one stored with
/// it). Also returns whether a requirement asked for (given or stored, not
/// the yardstick) failed, or the task set missed a deadline.
pub fn run_doc(runs: &[Run], req: &RequireSpec, tasks: &TasksSpec) -> Result<(doc::Doc, bool)> {
    let ids: Vec<String> = runs.iter().map(|r| r.header.id.to_string()).collect();
    let title = match runs {
        [one] => format!("rtscope report: run {} ({}, {})", one.header.id, one.header.kind, one.header.hostname),
        _ => format!("rtscope report: runs {}", ids.join(", ")),
    };
    let mut chapters = Vec::new();
    let mut failed = false;
    for (i, r) in runs.iter().enumerate() {
        let set = crate::judge::asked_set(r, tasks)?;
        let a = judged::Analysed::new(r, crate::judge::asked(r, req, true)?, set);
        failed |= a.failed();
        chapters.push(sections::chapter(&a, &format!("r{}", i + 1)));
    }
    Ok((doc::Doc { title, chapters }, failed))
}

/// Writes `report` of `run` to `path` (`-` for stdout).
pub fn write_file(path: &Path, report: &dyn Report, run: &Run) -> Result<()> {
    if path == Path::new("-") {
        return report.write(run, &mut std::io::stdout().lock());
    }
    let mut file = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?,
    );
    report.write(run, &mut file)?;
    file.flush().with_context(|| format!("cannot write {}", path.display()))
}

/// Runs `write` on `path` (`-` for stdout), naming `flag` and the file when it cannot be written.
pub fn write_to(flag: &str, path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    if path == Path::new("-") {
        return write(&mut std::io::stdout().lock());
    }
    let mut file = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("{flag} {}: cannot write it", path.display()))?,
    );
    write(&mut file)?;
    file.flush().with_context(|| format!("{flag} {}: cannot write it", path.display()))
}

/// The line after a stored run: where it is and what to run next on it
/// (`--db` named unless it is the default store).
pub fn stored_line(run_id: i64, db: &Path) -> String {
    let at = if db == Path::new("rtscope.db") { String::new() } else { format!(" --db {}", db.display()) };
    format!(
        "run {run_id} stored in {}: rtscope report {run_id}{at} -o run{run_id}.html (plots, verdicts), \
         rtscope analyze {run_id}{at} (worst case per hour/day/week), rtscope show {run_id}{at}",
        db.display()
    )
}
