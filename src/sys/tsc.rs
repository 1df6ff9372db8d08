//! The CPU's own counter for busy loops (`noise`): `rdtsc` on x86_64, the
//! virtual counter `cntvct_el0` on aarch64, CLOCK_MONOTONIC elsewhere. It
//! is calibrated against CLOCK_MONOTONIC; the calibration is stored with
//! the run.

use super::clock;
use serde::Serialize;

/// What [`read`] reads on this architecture.
#[cfg(target_arch = "x86_64")]
pub const SOURCE: &str = "rdtsc";
#[cfg(target_arch = "aarch64")]
pub const SOURCE: &str = "cntvct_el0";
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub const SOURCE: &str = "clock_gettime(CLOCK_MONOTONIC)";

/// The counter now, in ticks.
#[inline(always)]
pub fn read() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions; every x86_64 CPU has it.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let v: u64;
        // SAFETY: reading the virtual counter, which Linux lets user space read.
        unsafe { core::arch::asm!("mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack)) };
        v
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        clock::now()
    }
}

/// Ticks to nanoseconds, measured against CLOCK_MONOTONIC.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Calibration {
    pub source: &'static str,
    /// Counter frequency, Hz.
    pub ticks_per_s: f64,
    /// How long the calibration measured, ns of CLOCK_MONOTONIC.
    pub window_ns: u64,
    /// Uncertainty of the CLOCK_MONOTONIC readings at both ends, ns.
    pub error_ns: u64,
    /// Whether the kernel says the counter runs at a constant rate across
    /// frequency changes and idle states (x86 `constant_tsc nonstop_tsc`).
    pub invariant: bool,
    /// ns per tick in 32.32 fixed point.
    #[serde(skip)]
    mult: u64,
}

/// CLOCK_MONOTONIC and the counter read together: the counter between two
/// clock reads, the closest pair of a few tries.
fn pair() -> (u64, u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..8 {
        let a = clock::now();
        let t = read();
        let b = clock::now();
        if b - a < best.0 {
            best = (b - a, a + (b - a) / 2, t);
        }
    }
    best
}

/// Measures the counter against CLOCK_MONOTONIC over `window_ns`.
pub fn calibrate(window_ns: u64) -> Calibration {
    let (e0, m0, t0) = pair();
    clock::sleep_until(m0 + window_ns);
    let (e1, m1, t1) = pair();
    let ticks = t1.saturating_sub(t0).max(1);
    let ns = m1 - m0;
    let ns_per_tick = ns as f64 / ticks as f64;
    Calibration {
        source: SOURCE,
        ticks_per_s: 1e9 / ns_per_tick,
        window_ns: ns,
        error_ns: e0 + e1,
        invariant: invariant(),
        mult: (ns_per_tick * (1u64 << 32) as f64).round().max(1.0) as u64,
    }
}

impl Calibration {
    /// `ticks` in ns.
    #[inline(always)]
    pub fn ns(&self, ticks: u64) -> u64 {
        ((u128::from(ticks) * u128::from(self.mult)) >> 32) as u64
    }

    /// `ns` in ticks (at least 1).
    pub fn ticks(&self, ns: u64) -> u64 {
        (((u128::from(ns) << 32) / u128::from(self.mult)) as u64).max(1)
    }
}

fn invariant() -> bool {
    if cfg!(target_arch = "x86_64") {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let flags = info.lines().find(|l| l.starts_with("flags")).unwrap_or("");
        let has = |f: &str| flags.split_whitespace().any(|w| w == f);
        has("constant_tsc") && has("nonstop_tsc")
    } else {
        // The Arm generic timer and CLOCK_MONOTONIC run at a fixed rate.
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_matches_the_monotonic_clock() {
        let c = calibrate(20_000_000);
        assert!(c.ticks_per_s > 1e6, "{c:?}");
        let (m0, t0) = (clock::now(), read());
        clock::spin_until(m0 + 5_000_000);
        let (m1, t1) = (clock::now(), read());
        let measured = c.ns(t1 - t0) as f64;
        let truth = (m1 - m0) as f64;
        assert!(
            (measured - truth).abs() < truth * 0.01 + 2_000.0,
            "{measured} ns by the counter, {truth} by the clock"
        );
        assert!(c.ns(c.ticks(1_000_000)).abs_diff(1_000_000) < 10);
    }
}
