//! Workload characterisation (the NT real-time study's workload table): what the
//! kernel counted while a load ran, as per-second rates. The binary reads
//! the /proc files once a second; parsing them, the deltas and the rates
//! are here, pure. Also the short CPU score stored with an assessment.

use serde::{Deserialize, Serialize};
mod accumulator;
mod counters;
mod parse;
mod rates;

pub use accumulator::*;
pub use counters::*;
pub use parse::*;
pub use rates::*;

/// The short CPU score: an integer and string loop in the spirit of
/// Dhrystone, on one thread, so that machines can be compared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuScore {
    /// Thousands of loop iterations per second: the median of the slices.
    pub score: u64,
    /// What one iteration does, and the version of that loop (a new
    /// version is a new scale).
    pub method: String,
    pub version: u32,
    /// The CPU it ran on, at SCHED_OTHER.
    pub cpu: usize,
    pub slices: u32,
    pub slice_ms: u64,
    /// The slowest and fastest slice, thousands of iterations per second.
    pub min: u64,
    pub max: u64,
}

#[cfg(test)]
mod tests;
