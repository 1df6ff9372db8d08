//! Counting a kernel tracepoint with perf_event_open(2), opened through
//! perf.rs (`Attr::tracepoint`, `open`; the sampling profiler is there
//! too): the system calls
//! entered (`raw_syscalls:sys_enter`) on every online CPU, for the
//! workload characterisation's "system calls/s" (the NT real-time study's
//! table 3 row). A counting event (no sampling, no ring buffer, no PMU):
//! the kernel adds one at each system call entry while the counter is open,
//! which costs each call a few tens of nanoseconds. The counters close
//! with their file descriptors, on any exit.

use crate::sys::perf::{self, Attr};
use std::fs::File;
use std::io::Read;

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
        let attr = Attr::tracepoint(id);
        let mut fds = Vec::with_capacity(cpus.len());
        for &cpu in cpus {
            let fd = perf::open(&attr, cpu).map_err(|e| {
                format!(
                    "perf_event_open(raw_syscalls:sys_enter, CPU {cpu}) failed ({e}): system calls are counted as \
                     root (or with CAP_PERFMON)"
                )
            })?;
            fds.push(File::from(fd));
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
