//! Memory locking and prefaulting: no page fault on a measuring thread.

use rustix::mm::{MlockAllFlags, mlockall};

/// Stack of every measuring thread (all of it locked by mlockall) and the
/// part prefaulted before measuring.
pub const STACK_SIZE: usize = 512 * 1024;
pub const STACK_PREFAULT: usize = 256 * 1024;

/// Locks all current and future pages in memory.
pub fn lock_all() -> std::io::Result<()> {
    mlockall(MlockAllFlags::CURRENT | MlockAllFlags::FUTURE).map_err(Into::into)
}

/// Unlocks everything once measuring is over, so that loading and
/// printing a long run does not pin its memory.
pub fn unlock_all() {
    let _ = rustix::mm::munlockall();
}

/// Touches `bytes` of the calling thread's stack so that its pages are
/// present before measuring starts.
#[inline(never)]
pub fn prefault_stack(bytes: usize) {
    const CHUNK: usize = 4096;
    fn touch(left: usize) {
        let mut page = [0u8; CHUNK];
        std::hint::black_box(&mut page);
        if left > CHUNK {
            touch(left - CHUNK);
        }
        std::hint::black_box(&page);
    }
    touch(bytes);
}

/// This process's peak resident set (VmHWM), kB.
pub fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn peak_rss_is_known() {
        super::prefault_stack(64 * 1024);
        assert!(super::peak_rss_kb().unwrap() > 0);
    }
}
