//! The common JSON shape: `run_id`, `status`, `results` (one row per probe,
//! metric and CPU, with its whole-run histogram), and the run header; for
//! an assessment with requirements or a task set, its verdicts after it.

use super::Report;
use anyhow::Result;
use rtscope_model::export;
use rtscope_model::run::Run;
use serde::Serialize;
use std::io::Write;

pub struct Json;

impl Report for Json {
    fn write(&self, run: &Run, out: &mut dyn Write) -> Result<()> {
        export::write_json(run, false, out)
    }
}

/// The run's document followed by the keys of `rtscope analyze RUN --json`
/// that judge it: `requirements_from`, `verdicts`, `schedulability`, `passed`.
pub fn write_judged(run: &Run, judged: &crate::judge::Judged, out: &mut dyn Write) -> Result<()> {
    #[derive(Serialize)]
    struct Doc<'a> {
        #[serde(flatten)]
        doc: export::RunDoc,
        #[serde(flatten)]
        judged: &'a crate::judge::Judged<'a>,
    }
    serde_json::to_writer(&mut *out, &Doc { doc: export::run_doc(run, false), judged })?;
    out.write_all(b"\n")?;
    Ok(())
}
