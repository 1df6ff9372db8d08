//! `--tracemark`: the probe's samples above the exceedance threshold are
//! written to the top-level `trace_marker`, so a tracer running beside
//! rtscope (trace-cmd, perf, another rtscope) sees them in its own trace.
//! Written from the measuring thread after the sample is taken: one
//! `write` of a line built in a stack buffer, no allocation or formatting
//! machinery.

use std::fs::File;
use std::path::Path;

const PREFIX_MAX: usize = 64;

pub struct Marker {
    file: File,
    prefix: [u8; PREFIX_MAX],
    len: usize,
}

/// Appends the decimal digits of `v` to `buf` at `at`; returns the new end.
fn put_u64(buf: &mut [u8], mut at: usize, v: u64) -> usize {
    let mut digits = [0u8; 20];
    let mut n = 0;
    let mut x = v;
    loop {
        digits[n] = b'0' + (x % 10) as u8;
        n += 1;
        x /= 10;
        if x == 0 {
            break;
        }
    }
    while n > 0 && at < buf.len() {
        n -= 1;
        buf[at] = digits[n];
        at += 1;
    }
    at
}

fn put(buf: &mut [u8], at: usize, s: &[u8]) -> usize {
    let n = s.len().min(buf.len() - at);
    buf[at..at + n].copy_from_slice(&s[..n]);
    at + n
}

impl Marker {
    /// The top-level `trace_marker` of a mounted tracefs, for the series
    /// `probe`/`metric` on `cpu`.
    pub fn open(probe: &str, metric: &str, cpu: usize) -> Result<Marker, String> {
        let path = ["/sys/kernel/tracing/trace_marker", "/sys/kernel/debug/tracing/trace_marker"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .ok_or("tracefs is not mounted, so no tracer is running to see the markers")?;
        let file =
            std::fs::OpenOptions::new().write(true).open(path).map_err(|e| format!("cannot open {path}: {e}"))?;
        let text = format!("rtscope {probe} {metric} cpu{cpu} #");
        let mut prefix = [0u8; PREFIX_MAX];
        let len = put(&mut prefix, 0, text.as_bytes());
        Ok(Marker { file, prefix, len })
    }

    /// The line for sample `seq` of `value_ns`.
    fn line(&self, buf: &mut [u8; 128], seq: u64, value_ns: u64) -> usize {
        let mut at = put(buf, 0, &self.prefix[..self.len]);
        at = put_u64(buf, at, seq);
        at = put(buf, at, b" ");
        at = put_u64(buf, at, value_ns);
        put(buf, at, b" ns\n")
    }

    /// Writes the marker of sample `seq`.
    #[inline]
    pub fn mark(&self, seq: u64, value_ns: u64) {
        let mut buf = [0u8; 128];
        let n = self.line(&mut buf, seq, value_ns);
        let _ = rustix::io::write(&self.file, &buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_lines() {
        let file = tempfile::tempfile().unwrap();
        let mut prefix = [0u8; PREFIX_MAX];
        let len = put(&mut prefix, 0, b"rtscope wakeup latency cpu1 #");
        let m = Marker { file, prefix, len };
        let mut buf = [0u8; 128];
        let n = m.line(&mut buf, 8412, 842_123);
        assert_eq!(&buf[..n], b"rtscope wakeup latency cpu1 #8412 842123 ns\n");
        let n = m.line(&mut buf, 0, u64::MAX);
        assert_eq!(&buf[..n], b"rtscope wakeup latency cpu1 #0 18446744073709551615 ns\n");
    }
}
