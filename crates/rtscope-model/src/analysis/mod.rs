//! The analysis of measured tails: statistics, peaks over threshold with
//! the extremal index and return levels, diagnostics, MTTF against
//! buffering, response-time analysis and verdicts. Pure code.

pub mod diagnostics;
pub mod extremal;
pub mod gev;
pub mod gpd;
pub mod misses;
pub mod mttf;
pub mod nm;
pub mod obs;
pub mod pot;
pub mod rta;
pub mod series;
pub mod verdict;
