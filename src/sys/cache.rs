//! Evicting the CPU's private caches before a sample (`--cache-flush`):
//! a buffer sized from the cache topology in sysfs.

use crate::sys::clock;
use rtscope_model::units::parse_size;

/// A buffer twice the size of a CPU's private caches (L1 and L2, not the
/// shared last-level cache, which would take milliseconds per sample to
/// evict from user space); reading it evicts the measuring thread's and the
/// kernel's working set from those caches. `--flush-size` sets another size
/// (e.g. 64M to evict a 32 MB L3, with an interval long enough for it).
#[derive(Clone, Debug)]
pub struct FlushBuffer {
    buf: std::sync::Arc<Vec<u8>>,
}

impl FlushBuffer {
    /// Allocates it fallibly: a size the machine cannot give is an error,
    /// never an abort (callers check `--flush-size` against
    /// [`mem::check_share`](crate::sys::mem::check_share) first).
    pub fn new(bytes: Option<usize>) -> Result<FlushBuffer, String> {
        let size = bytes.unwrap_or_else(|| 2 * largest_private_cache_bytes().unwrap_or(1 << 20)).max(64 << 10);
        let mut buf: Vec<u8> = Vec::new();
        buf.try_reserve_exact(size).map_err(|e| {
            format!("cannot allocate the cache-flush buffer of {}: {e}", crate::sys::mem::human_bytes(size as u64))
        })?;
        buf.extend((0..size).map(|i| i as u8));
        Ok(FlushBuffer { buf: std::sync::Arc::new(buf) })
    }

    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Reads one byte per cache line.
    #[inline(never)]
    pub fn flush(&self) {
        let mut acc = 0u8;
        let mut i = 0;
        while i < self.buf.len() {
            acc = acc.wrapping_add(self.buf[i]);
            i += 64;
        }
        std::hint::black_box(acc);
    }

    /// Reads one byte of each of `lines` cache lines from line `from`
    /// on, wrapping round the buffer; returns the line to go on from (a
    /// memory-touching workload, `task --memory`).
    #[inline(never)]
    pub fn touch(&self, from: usize, lines: u64) -> usize {
        let n = (self.buf.len() / 64).max(1);
        let mut line = from % n;
        let mut acc = 0u8;
        for _ in 0..lines {
            acc = acc.wrapping_add(self.buf[line * 64]);
            line += 1;
            if line == n {
                line = 0;
            }
        }
        std::hint::black_box(acc);
        line
    }

    /// The slowest of a few flushes, ns.
    pub fn cost_ns(&self) -> u64 {
        (0..5)
            .map(|_| {
                let t = clock::now();
                self.flush();
                clock::now() - t
            })
            .max()
            .unwrap_or(0)
    }
}

/// The largest cache of CPU 0 that no other core shares.
fn largest_private_cache_bytes() -> Option<usize> {
    let cpu = "/sys/devices/system/cpu/cpu0";
    let siblings =
        std::fs::read_to_string(format!("{cpu}/topology/thread_siblings_list")).unwrap_or_else(|_| "0".into());
    let mut best = None;
    for entry in std::fs::read_dir(format!("{cpu}/cache")).ok()?.flatten() {
        let read = |f: &str| std::fs::read_to_string(entry.path().join(f)).ok().map(|s| s.trim().to_string());
        let (Some(size), Some(shared)) = (read("size"), read("shared_cpu_list")) else { continue };
        if shared != siblings.trim() {
            continue;
        }
        best = best.max(parse_size(&size));
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flush_buffer_sizes() {
        let f = FlushBuffer::new(None).unwrap();
        assert!(f.bytes() >= 64 << 10);
        assert!(f.cost_ns() > 0);
        assert_eq!(FlushBuffer::new(Some(3 << 20)).unwrap().bytes(), 3 << 20);
        // Touching wraps round the buffer's lines.
        assert_eq!(FlushBuffer::new(Some(64 << 10)).unwrap().touch(1000, 100), 76);
        // More than the address space: an error, not an abort.
        assert!(FlushBuffer::new(Some(usize::MAX)).unwrap_err().contains("cannot allocate"));
        assert_eq!(parse_size("99999999999999999G"), None, "no wrap-around");
    }
}
