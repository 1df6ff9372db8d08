//! The common JSON shape: `run_id`, `status`, `results` (one row per probe,
//! metric and CPU, with its whole-run histogram), and the run header.

use super::Report;
use anyhow::Result;
use rtscope_model::export;
use rtscope_model::run::Run;
use std::io::Write;

pub struct Json;

impl Report for Json {
    fn write(&self, run: &Run, out: &mut dyn Write) -> Result<()> {
        export::write_json(run, false, out)
    }
}
