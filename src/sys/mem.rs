//! Memory locking and prefaulting: no page fault on a measuring thread.

use rustix::mm::{MlockAllFlags, mlockall};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// [`lock_all`] locked memory (until [`unlock_all`]).
static LOCKED: AtomicBool = AtomicBool::new(false);
/// Pages mapped from now on are locked as they are touched, not read in
/// by the mapping ([`lock_future_on_touch`]).
static ON_TOUCH: AtomicBool = AtomicBool::new(false);

/// Stack of every measuring thread (all of it locked by mlockall) and the
/// part prefaulted before measuring.
pub const STACK_SIZE: usize = 512 * 1024;
pub const STACK_PREFAULT: usize = 256 * 1024;

/// Locks all current and future pages in memory, every page of a future
/// mapping read in (or zeroed) by the mapping itself.
pub fn lock_all() -> std::io::Result<()> {
    mlockall(MlockAllFlags::CURRENT | MlockAllFlags::FUTURE)?;
    LOCKED.store(true, Relaxed);
    ON_TOUCH.store(false, Relaxed);
    Ok(())
}

/// Once the measuring threads hold every page they will touch (their
/// stacks prefaulted, their histograms and rings allocated): pages mapped
/// from now on are locked as they are first touched (`MCL_ONFAULT`), not
/// read in whole by `mmap`. The helpers map files: the trace's symbols
/// thread maps whole ELF files, tens of megabytes with debug information.
/// Under `MCL_FUTURE` alone each `mmap` read its whole file in, inside the
/// kernel, where a `preempt=none` kernel held a SCHED_FIFO probe off for
/// half a millisecond, and pinned it (a traced run with stacks kept 155 MB
/// resident). Nothing where memory is not locked.
pub fn lock_future_on_touch() {
    if LOCKED.load(Relaxed) && mlockall(MlockAllFlags::FUTURE | MlockAllFlags::ONFAULT).is_ok() {
        ON_TOUCH.store(true, Relaxed);
    }
}

/// Once a cell's helpers are done, and before measuring threads are set
/// up again: what was locked on touch since [`lock_future_on_touch`] is
/// read in and locked, and future mappings are populated again. The
/// error where `mlockall` refuses (its limit, without CAP_IPC_LOCK).
pub fn lock_populated() -> std::io::Result<()> {
    if ON_TOUCH.load(Relaxed) {
        lock_all()?;
    }
    Ok(())
}

/// Unlocks everything once measuring is over, so that loading and
/// printing a long run does not pin its memory.
pub fn unlock_all() {
    let _ = rustix::mm::munlockall();
    LOCKED.store(false, Relaxed);
    ON_TOUCH.store(false, Relaxed);
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

    /// Pages of a fresh anonymous mapping of `PAGES` pages that are
    /// resident right after `mmap` (mincore). Allocates nothing: it runs
    /// in a child forked from the multi-threaded test process.
    fn resident_after_mmap() -> usize {
        // SAFETY: sysconf has no preconditions.
        let len = PAGES * unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let mut v = [0u8; PAGES];
        // SAFETY: a fresh private anonymous mapping, unmapped below; the
        // array has one byte per page, as mincore writes.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED || libc::mincore(p, len, v.as_mut_ptr()) != 0 {
                return usize::MAX;
            }
            libc::munmap(p, len);
        }
        v.iter().filter(|&&b| b & 1 == 1).count()
    }

    const PAGES: usize = 64;

    /// In a child (the lock modes are the whole process's): a mapping made
    /// under `lock_all` is read in by `mmap`, one made after
    /// `lock_future_on_touch` is not, one after `lock_populated` is again,
    /// and one after `unlock_all` is not.
    #[test]
    fn after_the_measuring_threads_are_ready_new_mappings_are_locked_as_touched() {
        let child = crate::sys::ipc::fork_child(|| {
            if super::lock_all().is_err() {
                return 2;
            }
            let populated = resident_after_mmap();
            super::lock_future_on_touch();
            let on_touch = resident_after_mmap();
            if super::lock_populated().is_err() {
                return 3;
            }
            let again = resident_after_mmap();
            super::unlock_all();
            let unlocked = resident_after_mmap();
            i32::from((populated, on_touch, again, unlocked) != (PAGES, 0, PAGES, 0)) * 4
        })
        .expect("fork");
        let state = crate::sys::ipc::wait_child(child).expect("wait");
        // CAP_IPC_LOCK (bit 14): without it mlockall is held to
        // RLIMIT_MEMLOCK, root or not (a container's default set).
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let may_lock = rtscope_model::inventory::cap_eff_has(&status, 14);
        match state {
            crate::sys::ipc::ChildState::Exited(2) if !may_lock => {
                eprintln!("skipped: mlockall refused here (needs CAP_IPC_LOCK, or a larger RLIMIT_MEMLOCK)")
            }
            s => assert_eq!(
                s,
                crate::sys::ipc::ChildState::Exited(0),
                "2: mlockall refused, 3: refused again, 4: pages resident not as expected"
            ),
        }
    }

    #[test]
    fn peak_rss_is_known() {
        super::prefault_stack(64 * 1024);
        assert!(super::peak_rss_kb().unwrap() > 0);
        assert!(super::resident_bytes().unwrap() > 0);
    }
}
