//! The assessment (`rtscope run`): every probe under every load, one cell
//! each, all in one stored run; then the matrix (worst case and p99.9 per
//! probe metric and load), the loads' characterisation and a CPU score.
//! Also `rtscope load`: loads alone, characterised.
//!
//! A run: the CPU score on an idle machine; then for each cell in order
//! (load by load, or shuffled): start its load if another one runs (it
//! ramps up for `ramp_up` before anything is measured, and the /proc
//! sampler characterises it from then until it stops), then measure the
//! probe under it for `warmup` (not recorded) + `duration`.
//!
//! The module, in the order of a run: file.rs (the plan as written, the
//! embedded plans), plan.rs (the plan checked and built), setup.rs (the
//! session, the scheduling, the CPU score, the run created), matrix.rs
//! (the cells under their loads), finish.rs (characterisation, status,
//! verdicts, printing); loads.rs is `rtscope load`.

mod file;
mod finish;
mod loads;
mod matrix;
mod plan;
mod setup;
#[cfg(test)]
mod tests;

pub use file::{DEFAULT_PLAN, PlanFile, QUICK_PLAN};
pub use loads::loads_only;
pub use plan::Plan;

use anyhow::Result;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// What `rtscope run` was asked, beyond the plan.
pub struct Options {
    pub db: PathBuf,
    pub json: Option<PathBuf>,
    pub quiet: bool,
    /// What `/dev/cpu_dma_latency` is held at (None: left alone).
    pub dma_latency: Option<rtscope_model::settings::DmaLatency>,
}

/// Runs the assessment `plan` and prints it. Returns the exit code.
pub fn run(mut plan: Plan, opts: &Options, signal: &Arc<AtomicBool>) -> Result<i32> {
    setup::start_own(&mut plan)?;
    crate::load::remove_stale_temp_dirs();
    if !opts.quiet {
        eprintln!("rtscope run ({}): {}", plan.source, plan.describe());
    }
    let (mut run, effective) = setup::set_up(&plan, opts)?;
    let mut matrix = matrix::Matrix::new(&plan);
    let result = matrix.measure(&plan, &effective, &mut run, opts, signal);
    finish::finish(&plan, matrix, run, result, opts, signal)
}
