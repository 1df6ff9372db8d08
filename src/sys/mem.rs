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

/// A field of /proc/self/status in kB (`VmHWM`, `VmRSS`).
fn status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// This process's peak resident set (VmHWM), kB.
pub fn peak_rss_kb() -> Option<u64> {
    status_kb("VmHWM")
}

/// This process's resident set now (VmRSS), bytes.
pub fn resident_bytes() -> Option<u64> {
    status_kb("VmRSS").map(|kb| kb * 1024)
}

/// MemAvailable from /proc/meminfo: what can be allocated without
/// swapping, bytes.
pub fn available_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok()?.checked_mul(1024)
}

/// The share of MemAvailable that one buffer sized by the user may take:
/// a half, so that rtscope never pushes the machine it measures into
/// swapping or the OOM killer.
pub const SHARE: &str = "half of the memory available (MemAvailable)";

/// Refuses `bytes` (of `what`: the flag as given, e.g. `--flush-size
/// 20G`) beyond [`SHARE`], with `fix`; accepts where MemAvailable is
/// unknown (the allocation itself is fallible).
pub fn check_share(what: &str, bytes: u64, fix: &str) -> Result<(), String> {
    match available_bytes() {
        Some(avail) if bytes > avail / 2 => Err(format!(
            "{what}: {} is more than {SHARE} allows ({} of {} available now): {fix}",
            human_bytes(bytes),
            human_bytes(avail / 2),
            human_bytes(avail)
        )),
        _ => Ok(()),
    }
}

/// `512 KiB`, `1.5 GiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || v.fract() == 0.0 { format!("{v:.0} {}", UNITS[u]) } else { format!("{v:.1} {}", UNITS[u]) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn shares_of_available_memory() {
        let avail = super::available_bytes().expect("MemAvailable");
        assert!(super::check_share("--x 1", 1, "fix").is_ok());
        let e = super::check_share("--x 9E", avail, "give a smaller --x").unwrap_err();
        assert!(e.contains("--x 9E") && e.contains("half") && e.contains("give a smaller --x"), "{e}");
        assert_eq!(super::human_bytes(512 << 10), "512 KiB");
        assert_eq!(super::human_bytes(3 << 29), "1.5 GiB");
        assert_eq!(super::human_bytes(100), "100 B");
    }

    #[test]
    fn peak_rss_is_known() {
        super::prefault_stack(64 * 1024);
        assert!(super::peak_rss_kb().unwrap() > 0);
        assert!(super::resident_bytes().unwrap() > 0);
    }
}
