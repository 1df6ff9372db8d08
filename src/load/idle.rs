//! `idle`: nothing runs; the machine as it is (the baseline column).

use super::{Intensity, LoadSpec, Running, Workload};
use anyhow::Result;
use rtscope_model::characterisation::{Measure, Target};

pub struct Idle;

impl Workload for Idle {
    fn name(&self) -> &'static str {
        rtscope_model::run::IDLE_LOAD
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
    fn target(&self, spec: &LoadSpec) -> Option<Target> {
        Some(Target {
            load: spec.label.clone(),
            cpus: spec.cpus.clone(),
            measure: Measure::OthersBusy,
            asked: 0.0,
            limit: super::IDLE_LIMIT_PCT,
            asked_text: "no process but rtscope's own on its CPUs".into(),
            devices: Vec::new(),
        })
    }
}
