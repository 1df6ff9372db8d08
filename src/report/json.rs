//! The common JSON shape: `run_id`, `status`, `results` (one row per probe,
//! metric and CPU, with its whole-run histogram), and the run header; with
//! [`Input::full`] every interval and exceedance too, and a traced run's
//! timeline of its whole window (lossless: what `rtscope import` reads);
//! for an assessment with requirements or a task set ([`Input::judged`]),
//! its verdicts after it; and the summary's own
//! block (`summary`: the verdict, the worst case and p99.9 per probe and
//! load, the worst load and why, the machine, what to do next). The document's structs
//! are the model crate's (`rtscope_model::export`), which reads it back.

use super::{Format, Input, Use, Written};
use anyhow::Result;
use rtscope_model::export;
use serde::Serialize;
use std::io::Write;

pub struct Json;

impl Format for Json {
    fn name(&self) -> &'static str {
        "json"
    }

    fn extension(&self) -> &'static str {
        "json"
    }

    fn description(&self) -> &'static str {
        "Self-contained and lossless: every interval's histogram, every exceedance; `rtscope import` reads it back"
    }

    fn uses(&self) -> &'static [Use] {
        &[Use::Summary, Use::Export]
    }

    fn streams_intervals(&self) -> bool {
        true
    }

    fn reads_timeline(&self) -> bool {
        true
    }

    fn write(&self, input: &Input, out: &mut dyn Write) -> Result<Written> {
        let run = input.run()?;
        // The summary's own block: what the first screen of the terminal
        // and of the report shows (absent for a run without samples).
        let summary = Some(super::run_summary(input)?).filter(|s| !s.is_empty());
        #[derive(Serialize)]
        struct Doc<'a, D: Serialize> {
            #[serde(flatten)]
            doc: D,
            #[serde(skip_serializing_if = "Option::is_none")]
            summary: Option<super::summary::Summary>,
            // The keys of `rtscope analyze RUN --json` that judge it:
            // `requirements_from`, `verdicts`, `schedulability`, `passed`.
            #[serde(flatten, skip_serializing_if = "Option::is_none")]
            judged: Option<&'a crate::judge::Judged<'a>>,
        }
        let judged = input.judged;
        if input.full {
            // Every series' intervals and exceedances as they are read
            // (from the store where it gives them), and the traced
            // window's timeline, for import.
            let rows = input.rows.unwrap_or(run);
            let doc = export::streamed_doc(run, rows, input.timeline);
            serde_json::to_writer(&mut *out, &Doc { doc, summary, judged })?;
        } else {
            let doc = export::run_doc(run, false);
            serde_json::to_writer(&mut *out, &Doc { doc, summary, judged })?;
        }
        out.write_all(b"\n")?;
        Ok(Written::default())
    }
}
