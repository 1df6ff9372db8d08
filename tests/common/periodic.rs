//! A real-time thread of the test itself, of known period and runtime,
//! that logs its own timestamps: what `rtscope watch` (and a monitor's
//! `--watch`) is judged against.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub const PERIOD_NS: u64 = 2_000_000;
pub const SPIN_NS: u64 = 100_000;

pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One activation as the thread saw it: programmed, its clock read on
/// waking, and its clock read just before it went back to sleep.
#[derive(Clone, Copy, Debug)]
pub struct Own {
    pub programmed: u64,
    pub woke: u64,
    pub slept: u64,
}

/// A SCHED_FIFO 80 thread named `name` on `cpu` that wakes every 2 ms
/// (clock_nanosleep, TIMER_ABSTIME) and spins 100 us, for `length`.
/// Returns its tid and, when joined, its own log. Dropped, it stops the
/// thread at its next period.
pub fn periodic(name: &str, cpu: usize, length: Duration) -> Periodic {
    let name = std::ffi::CString::new(name).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let handle = std::thread::spawn(move || {
        // SAFETY: plain system calls on this thread, with valid arguments.
        unsafe {
            libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0);
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            assert_eq!(libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set), 0);
        }
        // SAFETY: gettid has no preconditions.
        tx.send(unsafe { libc::gettid() }).unwrap();
        let n = (length.as_nanos() as u64 / PERIOD_NS) as usize;
        let mut log: Vec<Own> = Vec::with_capacity(n);
        let param = libc::sched_param { sched_priority: 80 };
        // SAFETY: pid 0 is this thread; `param` is valid.
        assert_eq!(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) }, 0);
        let mut next = now_ns() + PERIOD_NS;
        for _ in 0..n {
            if stopped.load(Ordering::Relaxed) {
                break;
            }
            let ts = libc::timespec { tv_sec: (next / 1_000_000_000) as i64, tv_nsec: (next % 1_000_000_000) as i64 };
            if let Some(last) = log.last_mut() {
                last.slept = now_ns();
            }
            // SAFETY: an absolute sleep on CLOCK_MONOTONIC; no remainder.
            unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
            let woke = now_ns();
            while now_ns() < woke + SPIN_NS {}
            log.push(Own { programmed: next, woke, slept: 0 });
            next += PERIOD_NS;
            // A long stall of the host: the next instant stays ahead.
            while next <= now_ns() {
                next += PERIOD_NS;
            }
        }
        if let Some(last) = log.last_mut() {
            last.slept = now_ns();
        }
        log
    });
    Periodic { tid: rx.recv().unwrap(), handle: Some(handle), stop }
}

pub struct Periodic {
    pub tid: i32,
    handle: Option<std::thread::JoinHandle<Vec<Own>>>,
    stop: Arc<AtomicBool>,
}

impl Periodic {
    /// Waits for the end of its loop; its log.
    pub fn join(mut self) -> Vec<Own> {
        self.handle.take().unwrap().join().unwrap()
    }

    /// Stops it at its next period; its log.
    pub fn stop(self) -> Vec<Own> {
        self.stop.store(true, Ordering::Relaxed);
        self.join()
    }
}

impl Drop for Periodic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
