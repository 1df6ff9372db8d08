//! `noise`: what a busy real-time thread loses to everything else on its
//! CPU (the NT real-time study's preemption/interrupt disturbance test; rtla
//! osnoise, oslat).
//!
//! Each thread busy-loops reading the CPU's counter (`rdtsc`, `cntvct_el0`,
//! or CLOCK_MONOTONIC elsewhere, and where the counter is not invariant),
//! calibrated against CLOCK_MONOTONIC. The
//! reference iteration is the shortest one seen in a warm-up of the same
//! loop. A gap between two consecutive reads longer than `--ratio` times
//! the reference (or than `--gap`) is an interruption; its length minus the
//! reference is recorded. The loop is active for `--active`, then sleeps
//! `--pause`, so that a real-time spinner never starves the machine.
//! In an assessment's cell, the active time, the iterations and the
//! interruptions all start with the recording, after the cell's warm-up.
//!
//! `--trace` attributes each interruption (the window `[t - length, t]` on
//! CLOCK_MONOTONIC that a sample stands for) to the IRQs, softirqs and
//! threads the CPU's trace shows in it, and the rest to unaccounted time
//! (interrupt entry and exit, NMI, SMI, hypervisor), like rtla osnoise.

use super::{Beside, Common, KernelTracerMode, Probe, RouteCtx, ThreadCtx};
use crate::recorder::Recorder;
use crate::sys::clock;
use crate::sys::tsc::{self, Calibration, Counter};
use crate::trace::ktracer::{Rec, Setting, Source, Tracer};
use rtscope_model::descriptor::{self, Descriptor};
use rtscope_model::extra::noise;
use rtscope_model::hist::Tally;
use rtscope_model::inventory::Warning;
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
    /// Why the busy loop reads CLOCK_MONOTONIC rather than the CPU's
    /// counter (the counter is not invariant), stored with the run.
    pub counter_fallback: Option<String>,
    /// `--osnoise`: the kernel's osnoise tracepoints beside the probe.
    pub osnoise: KernelTracerMode,
}

/// osnoise's records that are interruptions of the probe's loop: an IRQ,
/// softirq or NMI whose interrupted task was a probe thread, and a thread
/// that outranks the probe's (the idle task and the probe's own runs are
/// not noise).
fn osnoise_route(r: &Rec, cx: &RouteCtx) -> Option<(usize, u64)> {
    let Rec::Noise { source, duration_ns, pid, current } = *r else { return None };
    match source {
        Source::Irq => cx.own(current).then_some((0, duration_ns)),
        Source::Softirq => cx.own(current).then_some((1, duration_ns)),
        Source::Thread => (pid > 0 && !cx.own(pid) && cx.outranks(pid)).then_some((2, duration_ns)),
        Source::Nmi => cx.own(current).then_some((3, duration_ns)),
    }
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
    /// The probe, reading the counter `measured` calibrated, or
    /// CLOCK_MONOTONIC when that counter is not invariant.
    pub fn new(ratio: f64, gap_ns: Option<u64>, active_ns: u64, pause_ns: u64, measured: Calibration) -> Noise {
        let (calibration, counter_fallback) = measured.or_monotonic();
        Noise {
            ratio,
            gap_ns,
            active_ns,
            pause_ns,
            warmup_ns: WARMUP_NS,
            calibration,
            counter_fallback,
            osnoise: KernelTracerMode::Auto,
        }
    }

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
    fn spin<R: Fn() -> u64>(
        &self,
        read: &R,
        ctx: &ThreadCtx,
        mut rec: Option<&mut Recorder>,
        end: u64,
        threshold: u64,
        reference_ns: u64,
    ) -> Window {
        let cal = &self.calibration;
        let check = cal.ticks(CHECK_NS);
        let t0 = read();
        let mono0 = clock::now();
        let mut prev = t0;
        let mut excluded = 0u64;
        let mut iterations = 0u64;
        let mut next_check = t0.saturating_add(check).min(end);
        let mut done = false;
        loop {
            let now = read();
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
                let after = read();
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
    fn descriptor(&self) -> &'static Descriptor {
        &descriptor::NOISE
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

    /// osnoise's tracepoints on the probe's CPUs, without osnoise's own
    /// workload (which would compete with the probe's loop): each
    /// interference as the kernel accounts it, as `rtla osnoise` counts
    /// them per source.
    fn beside(&self, common: &Common) -> Option<Beside> {
        if self.osnoise == KernelTracerMode::Off {
            return None;
        }
        let list = rtscope_model::inventory::format_cpu_list(&common.cpus);
        Some(Beside {
            tracer: Tracer::Osnoise,
            settings: vec![
                Setting::File("osnoise/cpus", list.clone()),
                Setting::OsnoiseOption("OSNOISE_WORKLOAD", false),
            ],
            events: &["osnoise/irq_noise", "osnoise/softirq_noise", "osnoise/thread_noise", "osnoise/nmi_noise"],
            metrics: &["osnoise_irq", "osnoise_softirq", "osnoise_thread", "osnoise_nmi"],
            route: osnoise_route,
            required: (self.osnoise == KernelTracerMode::On).then_some("--osnoise on"),
            threads_at: None,
            align: None,
            own_timer: false,
            what: format!(
                "its tracepoints timed each interference on CPUs {list} as the kernel accounts it (what nested in it \
                 taken out), without osnoise's own workload (OSNOISE_WORKLOAD off: its busy threads would compete \
                 with the probe's loop): osnoise_irq, osnoise_softirq and osnoise_nmi are the IRQs, softirqs (on \
                 PREEMPT_RT most run in threads) and NMIs whose interrupted task was the probe's thread, \
                 osnoise_thread the runs of threads that outrank the probe's, wherever in the run they fell (its \
                 pauses too); osnoise's hardware noise needs its workload: with --trace, the probe's unaccounted time \
                 is that part"
            ),
        })
    }

    fn warnings(&self) -> Vec<Warning> {
        let mut w = Vec::new();
        if self.pause_ns == 0 {
            w.push(Warning {
                topic: "noise".into(),
                message: "--pause 0: the busy loop never sleeps; RT throttling (/proc/sys/kernel/sched_rt_runtime_us) \
                          still stops it for the time it reserves each period, which shows as interruptions"
                    .into(),
                fix: "give a --pause (e.g. --pause 33ms, the default) unless the throttling's interruptions are wanted"
                    .into(),
            });
        }
        if let Some(why) = &self.counter_fallback {
            w.push(Warning {
                topic: "noise".into(),
                message: format!("noise: {why}"),
                fix: "compare such a run only with runs that read the same clock (the run's calibration names it)"
                    .into(),
            });
        }
        w
    }

    /// An interruption is a window of lost time to attribute, not a
    /// wake-up to split into stages.
    fn row_extras(&self, _metric: usize, slots: &[u64], total: &Tally) -> serde_json::Map<String, serde_json::Value> {
        let ns_per_tick = 1e9 / self.calibration.ticks_per_s;
        let r3 = |x: f64| (x * 1000.0).round() / 1000.0;
        let active_ns = self.calibration.ns(slots[SLOT_ACTIVE]);
        let noise_ns = total.stats.sum;
        let mut m = serde_json::Map::new();
        noise::ACTIVE.put(&mut m, active_ns);
        noise::REFERENCE.put(&mut m, r3(slots[SLOT_REFERENCE] as f64 / 1000.0 * ns_per_tick));
        noise::THRESHOLD.put(&mut m, r3(slots[SLOT_THRESHOLD] as f64 * ns_per_tick));
        noise::NOISE.put(&mut m, noise_ns);
        if active_ns > 0 {
            noise::PER_S.put(&mut m, r3(total.count() as f64 * 1e9 / active_ns as f64));
            noise::AVAILABLE.put(&mut m, r3(100.0 * active_ns.saturating_sub(noise_ns) as f64 / active_ns as f64));
        }
        noise::ITERATIONS.put(&mut m, slots[SLOT_ITERATIONS]);
        m
    }

    fn measure(&self, ctx: &ThreadCtx, rec: &mut [Recorder]) {
        // One loop per clock, so that the busy loop has no branch on it.
        match self.calibration.counter() {
            Counter::Cpu => self.run(&tsc::read, ctx, &mut rec[0]),
            Counter::Monotonic => self.run(&clock::now, ctx, &mut rec[0]),
        }
    }
}

impl Noise {
    #[inline(always)]
    fn run<R: Fn() -> u64>(&self, read: &R, ctx: &ThreadCtx, rec: &mut Recorder) {
        let cal = &self.calibration;
        // Warm-up before the common start: the same loop, nothing recorded;
        // its shortest mean iteration over short windows is the reference.
        let mut reference = f64::MAX;
        for _ in 0..self.warmup_ns / WARMUP_WINDOW_NS {
            let w = self.spin(read, ctx, None, read() + cal.ticks(WARMUP_WINDOW_NS), u64::MAX, 0);
            reference = reference.min(w.active as f64 / w.iterations.max(1) as f64);
        }
        let reference_ns = (reference * 1e9 / cal.ticks_per_s).round() as u64;
        let threshold = self.threshold(reference);
        ctx.set_extra(SLOT_REFERENCE, (reference * 1000.0).round() as u64);
        ctx.set_extra(SLOT_THRESHOLD, threshold);
        let (mut active, mut iterations) = (0u64, 0u64);
        let from = ctx.record_from_ns;
        let mut begin = ctx.start_ns;
        loop {
            if begin > clock::now() {
                clock::sleep_until(begin);
            }
            let now = clock::now();
            let len = self.active_ns.min(ctx.end_ns().saturating_sub(now));
            let t = read();
            // A cell's warm-up is measured as the rest (its interruptions
            // are dropped by the recorder) but not counted: a window that
            // starts in it is split where recording starts, and only what
            // follows counts, so that active time, iterations and
            // interruptions cover the same span.
            let straddles = now < from && from < now.saturating_add(len);
            if straddles {
                let w =
                    self.spin(read, ctx, Some(rec), t.saturating_add(cal.ticks(from - now)), threshold, reference_ns);
                if w.done {
                    break;
                }
            }
            let end = t.saturating_add(cal.ticks(len));
            let w = self.spin(read, ctx, Some(rec), end, threshold, reference_ns);
            if straddles || now >= from {
                active += w.active;
                iterations += w.iterations;
                ctx.set_extra(SLOT_ACTIVE, active);
                ctx.set_extra(SLOT_ITERATIONS, iterations);
            }
            let now = clock::now();
            if w.done || ctx.done(now, rec.count()) {
                break;
            }
            rec.maybe_checkpoint(now);
            begin = now + self.pause_ns;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::TestThread;

    /// In a cell, the warm-up before recording starts is measured like the
    /// rest but its active time and iterations are not counted: they cover
    /// the recorded part only, as the interruptions do.
    #[test]
    fn active_time_and_iterations_cover_only_the_recorded_part() {
        let _machine = crate::machine_lock();
        let noise = Noise::new(4.0, None, 20_000_000, 10_000_000, tsc::calibrate(20_000_000));
        let t = TestThread::new(noise.extra_slots());
        // After the 20 ms reference warm-up; then 300 ms of a cell's warm-up
        // and 300 ms recorded.
        let start = clock::now() + 40_000_000;
        let from = start + 300_000_000;
        let end = from + 300_000_000;
        let ctx = t.ctx(start, from, end);
        let mut rec = [TestThread::recorder(false, from)];
        noise.measure(&ctx, &mut rec);
        assert!(clock::now() >= end, "measured until the end");
        let slots = t.extras();
        let active = noise.calibration.ns(slots[SLOT_ACTIVE]);
        // 20 ms of every 30 ms of the 300 ms recorded: 200 ms, less when
        // this unprivileged test thread wakes late from its pauses (on a
        // busy machine by tens of ms: one window at least); counting the
        // warm-up too would give about 400 ms.
        assert!((20_000_000..=230_000_000).contains(&active), "active {active} ns for 300 ms recorded at 20/10 ms");
        let (iterations, reference) = (slots[SLOT_ITERATIONS], slots[SLOT_REFERENCE] as f64 / 1000.0);
        // The iterations of the recorded part only: at the reference's
        // length they fill the active time, not twice it. The reference is
        // the shortest window mean of a 20 ms warm-up, so a host that ran
        // this CPU slower then makes it a few % long (2.3 % was seen
        // beside a build; a core shared with another guest's busy thread
        // through the whole warm-up, tens of %); counting the warm-up's
        // iterations would double them: 1.5 lies between.
        assert!(iterations > 0 && iterations as f64 * reference <= slots[SLOT_ACTIVE] as f64 * 1.5, "{slots:?}");
        let row = noise.row_extras(0, &slots, &Tally::new());
        assert_eq!(row["active_ns"], active);
        assert_eq!(row["available_pct"], 100.0);
    }

    #[test]
    fn pause_zero_and_a_clock_fallback_are_stored_warnings() {
        let c = Calibration::monotonic();
        assert!(Noise::new(4.0, None, 33_000_000, 33_000_000, c).warnings().is_empty());
        let w = Noise::new(4.0, None, 33_000_000, 0, c).warnings();
        assert_eq!(w.len(), 1);
        assert!(w[0].message.contains("--pause 0") && w[0].message.contains("RT throttling"), "{w:?}");
        assert!(!w[0].is_informational());
        let mut n = Noise::new(4.0, None, 33_000_000, 33_000_000, c);
        n.counter_fallback = Some("rdtsc is not invariant".into());
        assert!(n.warnings()[0].message.contains("rdtsc is not invariant"));
    }

    /// The CLOCK_MONOTONIC loop (a counter that is not invariant) measures
    /// with one tick per ns.
    #[test]
    fn the_monotonic_loop_measures_in_ns() {
        let _machine = crate::machine_lock();
        let noise = Noise::new(4.0, None, 10_000_000, 5_000_000, Calibration::monotonic());
        let t = TestThread::new(noise.extra_slots());
        let start = clock::now() + 40_000_000;
        let end = start + 100_000_000;
        let ctx = t.ctx(start, start, end);
        let mut rec = [TestThread::recorder(false, start)];
        noise.measure(&ctx, &mut rec);
        let slots = t.extras();
        // 10 ms of every 15 ms: about 66 ms, less when this unprivileged
        // thread wakes late from its pauses on a busy machine (one window
        // at least).
        assert!((10_000_000..=100_000_000).contains(&slots[SLOT_ACTIVE]), "{slots:?}");
        // clock_gettime through the vDSO: tens of ns; a threshold 4 times that.
        let reference = slots[SLOT_REFERENCE] as f64 / 1000.0;
        assert!((1.0..5_000.0).contains(&reference), "{slots:?}");
        assert!(slots[SLOT_THRESHOLD] >= (4.0 * reference) as u64, "{slots:?}");
    }
}
