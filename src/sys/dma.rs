//! `/dev/cpu_dma_latency`: holding 0 keeps CPUs out of deep C-states for
//! as long as the file stays open; closing it restores the old value.

use std::fs::File;
use std::io::Write;

/// Open while the run lasts; dropping it releases the request.
pub struct DmaLatency {
    _file: File,
}

impl DmaLatency {
    /// Requests `us` microseconds of maximum wake-up latency.
    pub fn hold(us: i32) -> std::io::Result<DmaLatency> {
        let mut file = std::fs::OpenOptions::new().write(true).open("/dev/cpu_dma_latency")?;
        file.write_all(&us.to_ne_bytes())?;
        Ok(DmaLatency { _file: file })
    }
}

/// /dev/cpu_dma_latency held at 0 while a responder serves, when `wanted`
/// (as measuring does); a warning on stderr unless `quiet` when it cannot be.
pub fn hold_zero(wanted: bool, quiet: bool) -> Option<DmaLatency> {
    match wanted.then(|| DmaLatency::hold(0)) {
        Some(Err(e)) if !quiet => {
            eprintln!(
                "rtscope: warning: cannot hold /dev/cpu_dma_latency at 0 ({e}): deep C-states may add exit latency"
            );
            None
        }
        Some(Ok(d)) => Some(d),
        _ => None,
    }
}
