//! `noise`: what a busy real-time thread loses to everything else on its
//! CPU (the references' preemption/interrupt disturbance test; rtla
//! osnoise, oslat).
//!
//! Each thread busy-loops reading the CPU's counter (`rdtsc`, `cntvct_el0`,
//! or CLOCK_MONOTONIC elsewhere), calibrated against CLOCK_MONOTONIC. The
//! reference iteration is the shortest one seen in a warm-up of the same
//! loop. A gap between two consecutive reads longer than `--ratio` times
//! the reference (or than `--gap`) is an interruption; its length minus the
//! reference is recorded. The loop is active for `--active`, then sleeps
//! `--pause`, so that a real-time spinner never starves the machine.
//!
//! `--trace` attributes each interruption (the window `[t - length, t]` on
//! CLOCK_MONOTONIC that a sample stands for) to the IRQs, softirqs and
//! threads the CPU's trace shows in it, and the rest to unaccounted time
//! (interrupt entry and exit, NMI, SMI, hypervisor), like rtla osnoise.

use super::{Probe, ThreadCtx};
use crate::recorder::Recorder;
use crate::sys::clock;
use crate::sys::tsc::{self, Calibration};
use rtscope_model::hist::Tally;
use rtscope_model::units;
use serde::Serialize;

/// How long the warm-up that finds the reference iteration lasts: this
/// many windows of `WARMUP_WINDOW_NS`.
pub const WARMUP_NS: u64 = 20_000_000;
const WARMUP_WINDOW_NS: u64 = 1_000_000;
/// How often, at most, the loop looks at the stop flag, ns.
const CHECK_NS: u64 = 1_000_000;

/// Extra slots each thread reports (see `row_extras`).
const SLOT_ACTIVE: usize = 0;
/// The reference iteration in thousandths of a tick.
const SLOT_REFERENCE: usize = 1;
const SLOT_THRESHOLD: usize = 2;
const SLOT_ITERATIONS: usize = 3;

#[derive(Clone, Debug, Serialize)]
pub struct Noise {
    /// A gap longer than `ratio` x the reference iteration is an interruption.
    pub ratio: f64,
    /// Or, when given, a gap longer than this.
    pub gap_ns: Option<u64>,
    pub active_ns: u64,
    pub pause_ns: u64,
    pub warmup_ns: u64,
    /// The counter against CLOCK_MONOTONIC, measured before the run.
    pub calibration: Calibration,
}

/// What one active window measured.
struct Window {
    /// Ticks spent in the loop (interruptions included, bookkeeping not).
    active: u64,
    iterations: u64,
    /// A stop was asked for (or the duration or loop count is reached).
    done: bool,
}

impl Noise {
    /// The threshold in ticks for a reference iteration of `reference` ticks.
    fn threshold(&self, reference: f64) -> u64 {
        let t = match self.gap_ns {
            Some(gap) => self.calibration.ticks(gap),
            None => (reference * self.ratio).ceil() as u64,
        };
        t.max(reference.ceil() as u64 + 1)
    }

    /// Busy-loops from now until tick `end` (or a stop), recording every
    /// gap above `threshold` ticks into `rec` (none when `rec` is None: the
    /// warm-up). `mono0` is CLOCK_MONOTONIC at tick `t0`, to time-stamp
    /// interruptions.
    #[inline(always)]
    fn spin(
        &self,
        ctx: &ThreadCtx,
        mut rec: Option<&mut Recorder>,
        end: u64,
        threshold: u64,
        reference_ns: u64,
    ) -> Window {
        let cal = &self.calibration;
        let check = cal.ticks(CHECK_NS);
        let t0 = tsc::read();
        let mono0 = clock::now();
        let mut prev = t0;
        let mut excluded = 0u64;
        let mut iterations = 0u64;
        let mut next_check = t0.saturating_add(check).min(end);
        let mut done = false;
        loop {
            let now = tsc::read();
            let d = now.wrapping_sub(prev);
            prev = now;
            iterations += 1;
            if d > threshold
                && let Some(rec) = rec.as_deref_mut()
            {
                let len = cal.ns(d).saturating_sub(reference_ns);
                let t = mono0 + cal.ns(now - t0);
                // The interruption spans [t - len, t] on CLOCK_MONOTONIC:
                // `--trace` attributes that window of this CPU's trace.
                rec.record(t, len);
                if ctx.breached(t, len) || ctx.done(t, rec.count()) {
                    done = true;
                    break;
                }
                // Recording is not part of the loop: leave it out.
                let after = tsc::read();
                excluded += after - now;
                prev = after;
            }
            if now >= next_check {
                if now >= end || ctx.stopping() {
                    break;
                }
                next_check = now.saturating_add(check).min(end);
            }
        }
        Window { active: prev.wrapping_sub(t0).saturating_sub(excluded), iterations, done }
    }
}

impl Probe for Noise {
    fn name(&self) -> &'static str {
        "noise"
    }

    fn metrics(&self) -> &'static [&'static str] {
        &["interruption"]
    }

    fn plan(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn describe(&self) -> String {
        let rule = match self.gap_ns {
            Some(g) => format!("gap > {}", units::human(g)),
            None => format!("gap > {} x reference", self.ratio),
        };
        format!(
            "active {} / pause {}, {rule}, {} at {:.3} GHz",
            units::human(self.active_ns),
            units::human(self.pause_ns),
            self.calibration.source,
            self.calibration.ticks_per_s / 1e9
        )
    }

    fn extra_slots(&self) -> usize {
        4
    }

    /// An interruption is a window of lost time to attribute, not a
    /// wake-up to split into stages.
    fn trace_stages(&self) -> Option<bool> {
        Some(false)
    }

    fn row_extras(&self, _metric: usize, slots: &[u64], total: &Tally) -> serde_json::Map<String, serde_json::Value> {
        let ns_per_tick = 1e9 / self.calibration.ticks_per_s;
        let r3 = |x: f64| (x * 1000.0).round() / 1000.0;
        let active_ns = self.calibration.ns(slots[SLOT_ACTIVE]);
        let noise_ns = total.stats.sum;
        let mut m = serde_json::Map::new();
        m.insert("active_ns".into(), active_ns.into());
        m.insert("reference_ns".into(), r3(slots[SLOT_REFERENCE] as f64 / 1000.0 * ns_per_tick).into());
        m.insert("threshold_ns".into(), r3(slots[SLOT_THRESHOLD] as f64 * ns_per_tick).into());
        m.insert("noise_ns".into(), noise_ns.into());
        if active_ns > 0 {
            m.insert("per_s".into(), r3(total.count() as f64 * 1e9 / active_ns as f64).into());
            m.insert(
                "available_pct".into(),
                r3(100.0 * active_ns.saturating_sub(noise_ns) as f64 / active_ns as f64).into(),
            );
        }
        m.insert("iterations".into(), slots[SLOT_ITERATIONS].into());
        m
    }

    fn measure(&self, ctx: &ThreadCtx, rec: &mut [Recorder]) {
        let rec = &mut rec[0];
        let cal = &self.calibration;
        // Warm-up before the common start: the same loop, nothing recorded;
        // its shortest mean iteration over short windows is the reference.
        let mut reference = f64::MAX;
        for _ in 0..self.warmup_ns / WARMUP_WINDOW_NS {
            let w = self.spin(ctx, None, tsc::read() + cal.ticks(WARMUP_WINDOW_NS), u64::MAX, 0);
            reference = reference.min(w.active as f64 / w.iterations.max(1) as f64);
        }
        let reference_ns = (reference * 1e9 / cal.ticks_per_s).round() as u64;
        let threshold = self.threshold(reference);
        ctx.set_extra(SLOT_REFERENCE, (reference * 1000.0).round() as u64);
        ctx.set_extra(SLOT_THRESHOLD, threshold);
        let (mut active, mut iterations) = (0u64, 0u64);
        let mut begin = ctx.start_ns;
        loop {
            if begin > clock::now() {
                clock::sleep_until(begin);
            }
            let now = clock::now();
            let left = ctx.end_ns().saturating_sub(now);
            let end = tsc::read().saturating_add(cal.ticks(self.active_ns.min(left)));
            let w = self.spin(ctx, Some(rec), end, threshold, reference_ns);
            active += w.active;
            iterations += w.iterations;
            ctx.set_extra(SLOT_ACTIVE, active);
            ctx.set_extra(SLOT_ITERATIONS, iterations);
            let now = clock::now();
            if w.done || ctx.done(now, rec.count()) {
                break;
            }
            rec.maybe_checkpoint(now);
            begin = now + self.pause_ns;
        }
    }
}
