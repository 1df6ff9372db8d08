//! The CPU's own counter for busy loops (`noise`): `rdtsc` on x86_64, the
//! virtual counter `cntvct_el0` on aarch64, CLOCK_MONOTONIC elsewhere. It
//! is calibrated against CLOCK_MONOTONIC; the calibration is stored with
//! the run. A counter that is not invariant (its rate follows the CPU
//! frequency or stops in idle states) gives way to CLOCK_MONOTONIC
//! ([`Calibration::or_monotonic`]).

use super::clock;
use serde::Serialize;

/// What [`read`] reads on this architecture.
#[cfg(target_arch = "x86_64")]
pub const SOURCE: &str = "rdtsc";
#[cfg(target_arch = "aarch64")]
pub const SOURCE: &str = "cntvct_el0";
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub const SOURCE: &str = MONOTONIC;
/// The clock a busy loop reads when the CPU's counter cannot be trusted.
pub const MONOTONIC: &str = "clock_gettime(CLOCK_MONOTONIC)";

/// What a busy loop reads: [`read`] or CLOCK_MONOTONIC ([`clock::now`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    Cpu,
    Monotonic,
}

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
    #[serde(skip)]
    counter: Counter,
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
        counter: Counter::Cpu,
    }
}

impl Calibration {
    /// CLOCK_MONOTONIC itself: one tick per ns, nothing to measure.
    pub fn monotonic() -> Calibration {
        Calibration {
            source: MONOTONIC,
            ticks_per_s: 1e9,
            window_ns: 0,
            error_ns: 0,
            invariant: true,
            mult: 1 << 32,
            counter: Counter::Monotonic,
        }
    }

    /// What a busy loop with this calibration reads.
    pub fn counter(&self) -> Counter {
        self.counter
    }

    /// This calibration when its counter is invariant; else CLOCK_MONOTONIC,
    /// with the reason (a counter whose rate follows the CPU frequency, or
    /// that stops in idle states, would turn a frequency change into
    /// interruptions or hide them).
    pub fn or_monotonic(self) -> (Calibration, Option<String>) {
        if self.invariant || self.counter == Counter::Monotonic {
            return (self, None);
        }
        let why = format!(
            "{} is not invariant (the CPU flags lack constant_tsc or nonstop_tsc): the busy loop reads {MONOTONIC} instead, \
             whose iterations are longer (a higher reference and detection threshold)",
            self.source
        );
        (Calibration::monotonic(), Some(why))
    }

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

    #[test]
    fn a_counter_that_is_not_invariant_gives_way_to_the_monotonic_clock() {
        let c = calibrate(2_000_000);
        let (kept, why) = Calibration { invariant: true, ..c }.or_monotonic();
        assert_eq!((kept.counter(), kept.source, why), (Counter::Cpu, SOURCE, None));
        let (fallback, why) = Calibration { invariant: false, ..c }.or_monotonic();
        assert_eq!(fallback.counter(), Counter::Monotonic);
        assert_eq!(fallback.source, MONOTONIC);
        let why = why.unwrap();
        assert!(why.contains("not invariant") && why.contains(MONOTONIC), "{why}");
        // One tick per ns, both ways.
        assert_eq!(fallback.ticks_per_s, 1e9);
        for ns in [1, 999, 33_000_000, 10_000_000_000] {
            assert_eq!(fallback.ns(ns), ns);
            assert_eq!(fallback.ticks(ns), ns);
        }
    }
}
