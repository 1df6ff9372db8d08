//! The Rust twin of burst.c, built as a release build is by default: `rustc
//! -C opt-level=3 -g`, no frame pointers, no crates. Its burst is a function
//! of its own, never inlined, that loops on the C library's clock_gettime()
//! (the vDSO below it), as a program does through the libc crate. (Through
//! `Instant::now()` a frame-pointer walk would find it: Rust's standard
//! library is built with frame pointers, and its frames between the C
//! library and the burst lead the walk back to it.) Same arguments and log.
//!
//! burst CPU PRIORITY PERIOD_NS BURST_NS SECONDS LOG

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

unsafe extern "C" {
    fn sched_setaffinity(pid: i32, size: usize, mask: *const u64) -> i32;
    fn sched_setscheduler(pid: i32, policy: i32, param: *const i32) -> i32;
    fn prctl(option: i32, arg: u64, ...) -> i32;
    fn clock_gettime(clock: i32, t: *mut Timespec) -> i32;
    fn clock_nanosleep(clock: i32, flags: i32, t: *const Timespec, rem: *mut Timespec) -> i32;
    fn gettid() -> i32;
    fn signal(sig: i32, handler: extern "C" fn(i32)) -> usize;
}

const CLOCK_MONOTONIC: i32 = 1;
const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
const TIMER_ABSTIME: i32 = 1;
const SCHED_FIFO: i32 = 1;
const PR_SET_PDEATHSIG: i32 = 1;
const SIGKILL: u64 = 9;
const SIGTERM: i32 = 15;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: i32) {
    STOP.store(true, Ordering::Relaxed);
}

fn ns(clock: i32) -> i64 {
    let mut t = Timespec { sec: 0, nsec: 0 };
    // SAFETY: a valid timespec to fill.
    unsafe { clock_gettime(clock, &mut t) };
    t.sec * 1_000_000_000 + t.nsec
}

/// The function the stacks must name: it calls the C library's
/// clock_gettime() until `end`.
#[inline(never)]
fn rtscope_test_burst(end: i64) -> u64 {
    let mut reads = 0u64;
    let mut t = Timespec { sec: 0, nsec: 0 };
    loop {
        // SAFETY: a valid timespec to fill.
        unsafe { clock_gettime(CLOCK_MONOTONIC, &mut t) };
        reads += 1;
        if t.sec * 1_000_000_000 + t.nsec >= end {
            return reads;
        }
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 7 {
        eprintln!("usage: burst CPU PRIORITY PERIOD_NS BURST_NS SECONDS LOG");
        std::process::exit(2);
    }
    let n = |i: usize| a[i].parse::<i64>().expect("a number");
    let (cpu, prio, period, burst, seconds) = (n(1), n(2) as i32, n(3), n(4), n(5));
    let mut log = std::fs::File::create(&a[6]).expect("the log");
    let mask: [u64; 16] = std::array::from_fn(|i| if i as i64 == cpu / 64 { 1 << (cpu % 64) } else { 0 });
    // SAFETY: plain system calls on this process with valid arguments.
    unsafe {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        signal(SIGTERM, on_term);
        if sched_setaffinity(0, std::mem::size_of_val(&mask), mask.as_ptr()) != 0
            || sched_setscheduler(0, SCHED_FIFO, &prio) != 0
        {
            eprintln!("burst: affinity or SCHED_FIFO: {}", std::io::Error::last_os_error());
            std::process::exit(1);
        }
    }
    writeln!(log, "# start_ns end_ns tid cpu_ns due_ns").unwrap();
    // SAFETY: no arguments.
    let tid = unsafe { gettid() };
    let mut t = ns(CLOCK_MONOTONIC);
    let until = t + seconds * 1_000_000_000;
    let mut total = 0;
    while !STOP.load(Ordering::Relaxed) && t < until {
        t += period;
        let due = Timespec { sec: t / 1_000_000_000, nsec: t % 1_000_000_000 };
        // SAFETY: a valid timespec; no remainder with TIMER_ABSTIME.
        if unsafe { clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, std::ptr::null_mut()) } != 0 {
            continue;
        }
        let (c0, start) = (ns(CLOCK_THREAD_CPUTIME_ID), ns(CLOCK_MONOTONIC));
        total += rtscope_test_burst(start + burst);
        let (end, c1) = (ns(CLOCK_MONOTONIC), ns(CLOCK_THREAD_CPUTIME_ID));
        writeln!(log, "{start} {end} {tid} {} {t}", c1 - c0).unwrap();
    }
    std::process::exit(if total > 0 { 0 } else { 1 });
}
