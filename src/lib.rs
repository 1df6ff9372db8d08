//! rtscope's binary crate, as a library: `main.rs` calls
//! [`commands::main`], and benches and tests reach the real recording path.
//! Everything that touches the OS lives here; the result model and the pure
//! analysis are in `rtscope-model`.

pub mod analyze;
pub mod assess;
pub mod cli;
pub mod commands;
pub mod disturb;
pub mod load;
pub mod osbench;
pub mod probe;
pub mod recorder;
pub mod report;
pub mod score;
pub mod sys;
pub mod trace;
