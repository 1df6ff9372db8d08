//! CLOCK_MONOTONIC everywhere, in u64 nanoseconds.

use rustix::thread::clock_nanosleep_absolute;
use rustix::time::{ClockId, Timespec, clock_gettime};

/// CLOCK_MONOTONIC now, ns (vDSO: no system call).
#[inline(always)]
pub fn now() -> u64 {
    let t = clock_gettime(ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// CLOCK_REALTIME now, ns since the Unix epoch.
pub fn now_unix() -> i64 {
    let t = clock_gettime(ClockId::Realtime);
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// CPU time this thread has used, ns.
pub fn thread_cpu_ns() -> u64 {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// CPU time this process has used (all its threads), ns.
pub fn process_cpu_ns() -> u64 {
    let t = clock_gettime(ClockId::ProcessCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns` (TIMER_ABSTIME),
/// resuming after signals: an absolute sleep never wakes early. Any other
/// error (none is possible with a valid timespec) returns at once rather
/// than spin at real-time priority.
#[inline(always)]
pub fn sleep_until(deadline_ns: u64) {
    let ts = Timespec { tv_sec: (deadline_ns / 1_000_000_000) as i64, tv_nsec: (deadline_ns % 1_000_000_000) as _ };
    while let Err(rustix::io::Errno::INTR) = clock_nanosleep_absolute(ClockId::Monotonic, &ts) {}
}

/// Busy-waits until CLOCK_MONOTONIC reaches `deadline_ns`.
#[inline]
pub fn spin_until(deadline_ns: u64) {
    while now() < deadline_ns {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_at_least_until_the_deadline() {
        let t0 = now();
        sleep_until(t0 + 2_000_000);
        assert!(now() >= t0 + 2_000_000);
        spin_until(now() + 100_000);
        assert!(now_unix() > 1_600_000_000_000_000_000);
    }
}
