//! The clocks rtscope can read, side by side (the NT real-time study's
//! tables 1 and 2: each timer's resolution and the cost of reading it):
//! per clock, the resolution the kernel states (clock_getres), the
//! smallest step seen between two consecutive reads, and the mean cost of
//! one read. Measured once per run, off any measuring thread, and stored
//! with the inventory.

use super::{clock, tsc};
use rtscope_model::inventory::ClockSource;
use std::hint::black_box;

/// Reads per timed batch.
const BATCH: u64 = 1_000;
/// Batches; the cost is the cheapest batch's (the one least disturbed).
const BATCHES: usize = 20;
/// How long a clock is read at most while looking for its step (a coarse
/// clock steps once a tick: 1 to 10 ms).
const STEP_WINDOW_NS: u64 = 25_000_000;

/// The POSIX clocks measured, with their names.
const CLOCKS: [(&str, libc::clockid_t); 8] = [
    ("CLOCK_MONOTONIC", libc::CLOCK_MONOTONIC),
    ("CLOCK_MONOTONIC_RAW", libc::CLOCK_MONOTONIC_RAW),
    ("CLOCK_MONOTONIC_COARSE", libc::CLOCK_MONOTONIC_COARSE),
    ("CLOCK_BOOTTIME", libc::CLOCK_BOOTTIME),
    ("CLOCK_REALTIME", libc::CLOCK_REALTIME),
    ("CLOCK_REALTIME_COARSE", libc::CLOCK_REALTIME_COARSE),
    ("CLOCK_TAI", libc::CLOCK_TAI),
    ("CLOCK_THREAD_CPUTIME_ID", libc::CLOCK_THREAD_CPUTIME_ID),
];

/// `clock` now, ns (the vDSO where the C library has it).
#[inline(always)]
fn read(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec; an unknown clock leaves it at zero.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// clock_getres of `clock`, ns; None where the kernel does not have it.
fn resolution(clock: libc::clockid_t) -> Option<f64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec.
    let rc = unsafe { libc::clock_getres(clock, &mut ts) };
    (rc == 0).then_some(ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64)
}

/// The mean cost of one `read()`, ns: the cheapest of [`BATCHES`] batches
/// of [`BATCH`] reads, timed with CLOCK_MONOTONIC.
fn cost(read: impl Fn() -> u64) -> f64 {
    (0..BATCHES)
        .map(|_| {
            let t0 = clock::now();
            for _ in 0..BATCH {
                black_box(read());
            }
            (clock::now() - t0) as f64 / BATCH as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// The smallest positive difference between two consecutive reads, in
/// the clock's units, read for at most [`STEP_WINDOW_NS`]; None when it
/// never moved.
fn step(read: impl Fn() -> u64) -> Option<u64> {
    let end = clock::now() + STEP_WINDOW_NS;
    let mut best: Option<u64> = None;
    let mut last = read();
    let (mut n, mut steps) = (0u64, 0u32);
    loop {
        let now = read();
        if now > last {
            best = Some(best.map_or(now - last, |b| b.min(now - last)));
            steps += 1;
        }
        last = now;
        n += 1;
        // The window is checked every 64 reads; 3 steps and 10000 reads are
        // plenty (a coarse clock's steps are a tick each, or two where a
        // tick was skipped).
        if n.is_multiple_of(64) && (clock::now() >= end || (steps >= 3 && n >= 10_000)) {
            return best;
        }
    }
}

/// Every clock's resolution, step and read cost, and the CPU's counter
/// (rdtsc, cntvct_el0) where the architecture has one, in ns through its
/// calibration against CLOCK_MONOTONIC.
pub fn measure() -> Vec<ClockSource> {
    let mut out: Vec<ClockSource> = CLOCKS
        .iter()
        .filter_map(|&(name, id)| {
            let res = resolution(id)?;
            Some(ClockSource {
                name: name.into(),
                resolution_ns: res,
                step_ns: step(|| read(id)).map(|s| s as f64),
                read_ns: cost(|| read(id)),
            })
        })
        .collect();
    if tsc::SOURCE != tsc::MONOTONIC {
        let cal = tsc::calibrate(20_000_000);
        if cal.ticks_per_s > 0.0 {
            let tick_ns = 1e9 / cal.ticks_per_s;
            out.push(ClockSource {
                name: tsc::SOURCE.into(),
                resolution_ns: tick_ns,
                step_ns: step(tsc::read).map(|s| s as f64 * tick_ns),
                read_ns: cost(tsc::read),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_clock_has_a_resolution_a_step_and_a_cost() {
        let list = measure();
        let names: Vec<&str> = list.iter().map(|c| c.name.as_str()).collect();
        for want in ["CLOCK_MONOTONIC", "CLOCK_MONOTONIC_RAW", "CLOCK_MONOTONIC_COARSE", "CLOCK_BOOTTIME"] {
            assert!(names.contains(&want), "{names:?}");
        }
        for c in &list {
            assert!(c.resolution_ns > 0.0 && c.read_ns > 0.0, "{c:?}");
            // A read costs less than a millisecond on any machine.
            assert!(c.read_ns < 1e6, "{c:?}");
        }
        let get = |n: &str| list.iter().find(|c| c.name == n).unwrap();
        // The coarse clock states the tick (1 to 10 ms) as its resolution;
        // the fine one no more, and it moves between two reads. (A coarse
        // step is not checked against the tick: a late tick shortens the
        // next step.)
        let (fine, coarse) = (get("CLOCK_MONOTONIC"), get("CLOCK_MONOTONIC_COARSE"));
        assert!(coarse.resolution_ns >= 1e6 && fine.resolution_ns <= coarse.resolution_ns, "{list:?}");
        assert!(fine.step_ns.is_some(), "{fine:?}");
    }
}
