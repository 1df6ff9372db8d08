//! `idle`: nothing runs; the machine as it is (the baseline column).

use super::{Intensity, LoadSpec, Running, Workload};
use anyhow::Result;

pub struct Idle;

impl Workload for Idle {
    fn name(&self) -> &'static str {
        "idle"
    }
    fn about(&self) -> &'static str {
        "nothing: the machine as it is (the baseline)"
    }
    fn intensity(&self) -> Option<Intensity> {
        None
    }
    fn start(&self, _spec: &LoadSpec, _run: &mut Running) -> Result<()> {
        Ok(())
    }
}
