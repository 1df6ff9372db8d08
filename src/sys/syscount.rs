//! Counting a kernel tracepoint with perf_event_open(2) (the sampling
//! profiler is perf.rs): the system calls
//! entered (`raw_syscalls:sys_enter`) on every online CPU, for the
//! workload characterisation's "system calls/s" (the NT real-time study's
//! table 3 row). A counting event (no sampling, no ring buffer, no PMU):
//! the kernel adds one at each system call entry while the counter is open,
//! which costs each call a few tens of nanoseconds. The counters close
//! with their file descriptors, on any exit.

use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};

/// PERF_TYPE_TRACEPOINT.
const TYPE_TRACEPOINT: u32 = 2;
/// PERF_FLAG_FD_CLOEXEC.
const FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// The size of the first published `perf_event_attr` (PERF_ATTR_SIZE_VER0).
const ATTR_SIZE_VER0: u32 = 64;

/// The first 64 bytes of `struct perf_event_attr`: all a counting
/// tracepoint event needs (the kernel reads the size it is given).
#[repr(C)]
#[derive(Default)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// disabled, inherit, pinned, exclusive, exclude_user, ... : all 0, so
    /// the counter counts from its opening, user and kernel.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// The system calls entered on each CPU, counted.
pub struct SyscallCounter {
    fds: Vec<File>,
}

impl SyscallCounter {
    /// Opens a counter on each of `cpus` (every process and thread on it).
    /// Needs root or CAP_PERFMON (perf_event_paranoid allowing system-wide
    /// events otherwise); the error says why not.
    pub fn open(cpus: &[usize]) -> Result<SyscallCounter, String> {
        let id = crate::sys::tracefs::event_id("raw_syscalls/sys_enter")?;
        let attr = Attr { kind: TYPE_TRACEPOINT, size: ATTR_SIZE_VER0, config: id, ..Default::default() };
        let mut fds = Vec::with_capacity(cpus.len());
        for &cpu in cpus {
            // SAFETY: `attr` is a valid perf_event_attr of the size it
            // states; pid -1 with a CPU counts every task on that CPU; no
            // group; the returned descriptor is owned below.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_perf_event_open,
                    &attr as *const Attr,
                    -1 as libc::pid_t,
                    cpu as libc::c_int,
                    -1 as libc::c_int,
                    FLAG_FD_CLOEXEC,
                )
            };
            if fd < 0 {
                let e = std::io::Error::last_os_error();
                return Err(format!(
                    "perf_event_open(raw_syscalls:sys_enter, CPU {cpu}) failed ({e}): system calls are counted as \
                     root (or with CAP_PERFMON)"
                ));
            }
            // SAFETY: a descriptor perf_event_open just returned, owned by nobody else.
            fds.push(File::from(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) }));
        }
        Ok(SyscallCounter { fds })
    }

    /// The system calls entered on the counted CPUs since the counter
    /// was opened; None if a counter cannot be read.
    pub fn read(&mut self) -> Option<u64> {
        let mut total = 0u64;
        for f in &mut self.fds {
            let mut buf = [0u8; 8];
            f.read_exact(&mut buf).ok()?;
            total += u64::from_ne_bytes(buf);
        }
        Some(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As root: the counter sees at least the system calls this thread makes.
    #[test]
    fn counts_this_threads_system_calls() {
        let cpus = crate::sys::cpu::online();
        let mut c = match SyscallCounter::open(&cpus) {
            Ok(c) => c,
            // Not root: no system-wide counter (the message says why).
            Err(e) => {
                assert!(!rustix::process::geteuid().is_root(), "as root: {e}");
                eprintln!("skipped: {e}");
                return;
            }
        };
        let before = c.read().unwrap();
        for _ in 0..1000 {
            std::hint::black_box(rustix::process::getppid());
        }
        let after = c.read().unwrap();
        // getppid is a real system call (no vDSO); others may run beside it.
        assert!(after - before >= 1000, "{before} -> {after}");
    }
}
