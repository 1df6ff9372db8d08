//! rtscope's result model: runs, histograms, the run store and the JSON
//! document (written by rtscope, read back here), plus the pure analysis
//! that reads them. No unsafe, no libc:
//! other tools can link this crate to read rtscope runs.
#![forbid(unsafe_code)]

pub mod analysis;
pub mod characterisation;
pub mod compare;
pub mod descriptor;
pub mod episode;
pub mod export;
pub mod extra;
pub mod hist;
pub mod inventory;
pub mod irqtime;
pub mod metrics;
mod par;
pub mod rtload;
pub mod run;
pub mod settings;
pub mod store;
pub mod units;
