//! `--trace`: where the latency comes from. rtscope's own tracefs instance
//! records the kernel's interrupt, timer and scheduler events with the
//! `mono` clock; a reader thread decodes the per-CPU binary buffers and
//! splits each sample into stages and, for the worst samples, into causes.

pub mod decompose;
pub mod event;
pub mod format;
pub mod instance;
pub mod mark;
pub mod page;
pub mod reader;
