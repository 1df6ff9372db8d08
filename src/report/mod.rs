//! Output formats, one file each behind [`Report`].

mod json;
mod matrix;
mod perfetto;
mod text;

pub use json::Json;
pub use perfetto::Perfetto;
pub use text::{Text, write_episodes};

use anyhow::{Context, Result};
use rtscope_model::run::Run;
use std::io::Write;
use std::path::Path;

/// Renders a stored run.
pub trait Report {
    fn write(&self, run: &Run, out: &mut dyn Write) -> Result<()>;
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
