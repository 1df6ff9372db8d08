//! `/dev/cpu_dma_latency`: holding a target (0 by default) keeps CPUs out
//! of the idle states slower to leave than it for as long as the file stays
//! open; closing it (at exit too) restores the old value.

use std::fs::File;
use std::io::Write;

/// Open while the run lasts; dropping it releases the request.
pub struct DmaLatency {
    _file: File,
}

impl DmaLatency {
    /// Requests `target` microseconds of maximum wake-up latency, written
    /// as the binary s32 the kernel reads.
    pub fn hold(target: rtscope_model::settings::DmaLatency) -> std::io::Result<DmaLatency> {
        let us = i32::try_from(target.us()).unwrap_or(i32::MAX);
        let mut file = std::fs::OpenOptions::new().write(true).open("/dev/cpu_dma_latency")?;
        file.write_all(&us.to_ne_bytes())?;
        Ok(DmaLatency { _file: file })
    }
}

/// /dev/cpu_dma_latency held at `wanted` while a responder serves (as
/// measuring does; None: not held); a warning on stderr unless `quiet`
/// when it cannot be.
pub fn hold_for(wanted: Option<rtscope_model::settings::DmaLatency>, quiet: bool) -> Option<DmaLatency> {
    match wanted.map(DmaLatency::hold) {
        Some(Err(e)) if !quiet => {
            eprintln!("rtscope: warning: cannot hold /dev/cpu_dma_latency ({e}): deep C-states may add exit latency");
            None
        }
        Some(Ok(d)) => Some(d),
        _ => None,
    }
}
