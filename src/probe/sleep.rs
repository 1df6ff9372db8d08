//! `sleep`: how accurate a relative sleep is (the NT real-time study's SleepEx()
//! test).
//!
//! Each thread sleeps in turn through every chosen API (`--api`) for every
//! chosen length (`--sleep`), each pair its own metric `<api>@<length>`.
//! Before each sleep it busy-waits a random time in [0, min(`--phase`,
//! length)), so that the sleeps do not stay in phase with the timer
//! interrupt (the stroboscopic effect the NT real-time study describes), and the
//! real-time thread is busy at most about a third of the time even with
//! short sleeps. The deviation is signed:
//!
//! ```text
//! deviation = (CLOCK_MONOTONIC after the call returns
//!              - CLOCK_MONOTONIC just before the call) - requested
//! ```
//!
//! so an early wake-up is negative. The thread's timer slack
//! (`PR_GET_TIMERSLACK`, after `--timer-slack` if given) is stored with
//! each series.
//!
//! `epoll-wait` sleeps in epoll_pwait2 (ns timeouts); on a kernel without
//! it (before Linux 5.11, found once when the probe is made) in epoll_wait
//! with the timeout in milliseconds rounded up, as a program must, with a
//! stored warning. A call that fails is counted per metric (`failed_calls`,
//! and a note with the run); an API that fails `MAX_FAILURES_IN_A_ROW` times
//! in a row ends the run with an error rather than loop on it at real-time
//! priority. A setup that fails (the epoll set, the timerfd,
//! `--timer-slack`) ends it before measuring.

use super::{Probe, ThreadCtx};
use crate::disturb::Rng;
use crate::recorder::Recorder;
use crate::sys::clock;
use crate::sys::timers::{self, SleepApi, Sleeper};
use rtscope_model::descriptor::{self, Descriptor};
use rtscope_model::extra::{self, sleep};
use rtscope_model::hist::Tally;
use rtscope_model::inventory::Warning;
use rtscope_model::units;
use serde::Serialize;

const SLOT_SLACK: usize = 0;
/// Then per metric: failed calls (after the warm-up), the last one's errno,
/// and failures since the last success.
const SLOTS_PER_METRIC: usize = 3;
const FAILED: usize = 0;
const ERRNO: usize = 1;
const IN_A_ROW: usize = 2;
/// Failures in a row of one metric's calls that end the run.
pub const MAX_FAILURES_IN_A_ROW: u64 = 10;

fn slot(metric: usize, what: usize) -> usize {
    1 + metric * SLOTS_PER_METRIC + what
}

#[derive(Clone, Debug, Serialize)]
pub struct Sleep {
    pub apis: Vec<SleepApi>,
    pub lengths_ns: Vec<u64>,
    /// Random busy wait in [0, phase) before each sleep.
    pub phase_ns: u64,
    /// `--timer-slack`: set on each measuring thread before measuring.
    pub timer_slack_ns: Option<u64>,
    /// The kernel has epoll_pwait2 (else `epoll-wait` sleeps in epoll_wait,
    /// milliseconds rounded up).
    pub epoll_pwait2: bool,
    /// `<api>@<length>` for every pair, API-major: made once per process.
    #[serde(skip)]
    pub metrics: &'static [&'static str],
}

impl Sleep {
    /// `epoll_pwait2`: whether the kernel has it ([`timers::has_epoll_pwait2`]).
    pub fn new(
        apis: Vec<SleepApi>,
        lengths_ns: Vec<u64>,
        phase_ns: u64,
        timer_slack_ns: Option<u64>,
        epoll_pwait2: bool,
    ) -> Sleep {
        let names: Vec<&'static str> = apis
            .iter()
            .flat_map(|a| lengths_ns.iter().map(move |&l| format!("{}@{}", a.name(), units::human(l))))
            // The Probe trait hands out 'static names; a command makes one
            // probe, so these few bytes live as long as the process anyway.
            .map(|n| &*Box::leak(n.into_boxed_str()))
            .collect();
        Sleep { apis, lengths_ns, phase_ns, timer_slack_ns, epoll_pwait2, metrics: Box::leak(names.into_boxed_slice()) }
    }

    /// The random busy wait before a sleep of `len` is in [0, this): at
    /// most the sleep's own length.
    fn phase(&self, len: u64) -> u64 {
        self.phase_ns.min(len)
    }

    /// Whether `epoll-wait` is measured through the millisecond fallback.
    fn epoll_in_ms(&self) -> bool {
        !self.epoll_pwait2 && self.apis.contains(&SleepApi::EpollWait)
    }

    /// The API and length of metric `i`.
    fn pair(&self, i: usize) -> (SleepApi, u64) {
        let n = self.lengths_ns.len();
        (self.apis[i / n], self.lengths_ns[i % n])
    }
}

impl Probe for Sleep {
    fn descriptor(&self) -> &'static Descriptor {
        &descriptor::SLEEP
    }

    fn metrics(&self) -> &'static [&'static str] {
        self.metrics
    }

    fn plan(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn describe(&self) -> String {
        let lengths: Vec<String> = self.lengths_ns.iter().map(|&l| units::human(l)).collect();
        let phase = if self.lengths_ns.iter().any(|&l| l < self.phase_ns) {
            format!("min({}, sleep)", units::human(self.phase_ns))
        } else {
            units::human(self.phase_ns)
        };
        let mut s = format!("{} API(s), sleeps of {}, random phase [0, {phase})", self.apis.len(), lengths.join(","));
        if let Some(t) = self.timer_slack_ns {
            s += &format!(", timer slack {}", units::human(t));
        }
        if self.epoll_in_ms() {
            s += ", epoll_wait in ms (rounded up: no epoll_pwait2)";
        }
        s
    }

    fn extra_slots(&self) -> usize {
        1 + self.metrics.len() * SLOTS_PER_METRIC
    }

    fn row_extras(&self, metric: usize, slots: &[u64], total: &Tally) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        sleep::TIMER_SLACK.put(&mut m, slots[SLOT_SLACK]);
        extra::MEAN_ABS.put(&mut m, (total.mean_abs() * 1000.0).round() / 1000.0);
        if slots[slot(metric, FAILED)] > 0 {
            sleep::FAILED_CALLS.put(&mut m, slots[slot(metric, FAILED)]);
        }
        m
    }

    fn notes(&self, slots: &[u64]) -> Vec<String> {
        (0..self.metrics.len())
            .filter(|&i| slots[slot(i, FAILED)] > 0)
            .map(|i| {
                let (api, _) = self.pair(i);
                let last = std::io::Error::from_raw_os_error(slots[slot(i, ERRNO)] as i32);
                format!(
                    "{}: {} call(s) of {} failed and were not recorded (the last: {last})",
                    self.metrics[i],
                    slots[slot(i, FAILED)],
                    api.calls(self.epoll_pwait2)
                )
            })
            .collect()
    }

    fn warnings(&self) -> Vec<Warning> {
        if !self.epoll_in_ms() {
            return Vec::new();
        }
        vec![Warning {
            topic: "sleep".into(),
            message:
                "this kernel has no epoll_pwait2 (Linux 5.11): epoll_wait@* is timed through epoll_wait(2), whose \
                      timeout is in milliseconds, rounded up (a 100us sleep asks for 1ms), as any program on it must"
                    .into(),
            fix: "compare epoll_wait with other kernels only at whole milliseconds, or run Linux 5.11 or later".into(),
        }]
    }

    fn measure(&self, ctx: &ThreadCtx, rec: &mut [Recorder]) {
        match Sleeper::new(self.epoll_pwait2) {
            Ok(sleeper) => self.run(ctx, rec, &sleeper),
            Err(e) => ctx.fail(format!("cannot create the epoll set and the timerfd the sleeps need: {e}")),
        }
    }
}

impl Sleep {
    fn run(&self, ctx: &ThreadCtx, rec: &mut [Recorder], sleeper: &Sleeper) {
        if let Some(slack) = self.timer_slack_ns
            && let Err(e) = timers::set_timer_slack(slack)
        {
            ctx.fail(format!("--timer-slack {}: PR_SET_TIMERSLACK failed: {e}", units::human(slack)));
            return;
        }
        ctx.set_extra(SLOT_SLACK, timers::timer_slack().unwrap_or(0));
        let mut rng = Rng::seeded();
        let n = rec.len();
        clock::sleep_until(ctx.start_ns);
        for i in (0..n).cycle() {
            let (api, len) = self.pair(i);
            clock::spin_until(clock::now() + rng.below(self.phase(len)));
            let t0 = clock::now();
            let result = sleeper.sleep(api, len);
            let t1 = clock::now();
            match result {
                Ok(()) => {
                    ctx.set_extra(slot(i, IN_A_ROW), 0);
                    let deviation = (t1 - t0) as i64 - len as i64;
                    rec[i].record_signed(t1, deviation);
                    if deviation > 0 && ctx.breached(t1, deviation as u64) {
                        break;
                    }
                }
                Err(e) => {
                    if ctx.recording(t1) {
                        ctx.set_extra(slot(i, FAILED), ctx.extra(slot(i, FAILED)) + 1);
                    }
                    ctx.set_extra(slot(i, ERRNO), e.raw_os_error().unwrap_or(0) as u64);
                    let in_a_row = ctx.extra(slot(i, IN_A_ROW)) + 1;
                    ctx.set_extra(slot(i, IN_A_ROW), in_a_row);
                    if in_a_row >= MAX_FAILURES_IN_A_ROW {
                        ctx.fail(format!(
                            "--api {}: {} failed {in_a_row} times in a row ({e}); measuring stopped rather than \
                             retry a failing call at real-time priority (leave {} out of --api)",
                            api.flag(),
                            api.calls(self.epoll_pwait2),
                            api.flag()
                        ));
                        break;
                    }
                }
            }
            // --loops counts rounds: every metric gets that many samples.
            if ctx.done(t1, if i == n - 1 { rec[i].count() } else { 0 }) {
                break;
            }
            rec[i].maybe_checkpoint(t1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::TestThread;

    fn probe() -> Sleep {
        Sleep::new(vec![SleepApi::Nanosleep, SleepApi::EpollWait], vec![200_000], 1_000_000, None, true)
    }

    /// An API whose calls keep failing ends the run with an error naming
    /// it, after a few calls, not at the end of --duration; the other APIs
    /// are recorded until then, and the failures counted per metric.
    #[test]
    fn an_api_that_keeps_failing_stops_the_run_with_an_error_naming_it() {
        let s = probe();
        let t = TestThread::new(s.extra_slots());
        let now = clock::now();
        let ctx = t.ctx(now, now, now + 10_000_000_000);
        let mut rec = [TestThread::recorder(true, now), TestThread::recorder(true, now)];
        s.run(&ctx, &mut rec, &Sleeper::with_failing_epoll());
        assert!(clock::now() - now < 2_000_000_000, "stopped long before --duration");
        let f = ctx.failure.take().unwrap();
        assert!(f.contains("--api epoll-wait: epoll_pwait2(2) failed 10 times in a row"), "{f}");
        assert_eq!((rec[0].count(), rec[1].count()), (MAX_FAILURES_IN_A_ROW, 0));
        let slots = t.extras();
        assert_eq!(slots[slot(1, FAILED)], MAX_FAILURES_IN_A_ROW);
        assert_eq!(s.row_extras(1, &slots, &Tally::new_signed())["failed_calls"], MAX_FAILURES_IN_A_ROW);
        assert!(s.row_extras(0, &slots, &Tally::new_signed()).get("failed_calls").is_none());
        let notes = s.notes(&slots);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].starts_with("epoll_wait@200us: 10 call(s) of epoll_pwait2(2) failed"), "{notes:?}");
        assert!(notes[0].contains("Invalid argument"), "{notes:?}");
    }

    /// Failures in a cell's warm-up stop a failing API too, but are not
    /// counted with the recorded part.
    #[test]
    fn failures_in_a_warm_up_are_not_counted() {
        let s = probe();
        let t = TestThread::new(s.extra_slots());
        let now = clock::now();
        let ctx = t.ctx(now, now + 5_000_000_000, now + 10_000_000_000);
        let mut rec = [TestThread::recorder(true, now + 5_000_000_000), TestThread::recorder(true, now)];
        s.run(&ctx, &mut rec, &Sleeper::with_failing_epoll());
        assert!(ctx.failure.take().is_some());
        assert_eq!(t.extras()[slot(1, FAILED)], 0);
        assert!(s.notes(&t.extras()).is_empty());
    }

    #[test]
    fn the_phase_is_capped_at_the_sleep_length_and_the_epoll_fallback_is_said() {
        let s = Sleep::new(vec![SleepApi::EpollWait], vec![100_000, 5_000_000], 1_000_000, None, false);
        assert_eq!((s.phase(100_000), s.phase(5_000_000)), (100_000, 1_000_000));
        let d = s.describe();
        assert!(d.contains("random phase [0, min(1ms, sleep))") && d.contains("epoll_wait in ms"), "{d}");
        let w = s.warnings();
        assert_eq!(w.len(), 1);
        assert!(w[0].message.contains("epoll_pwait2") && w[0].message.contains("rounded up"), "{w:?}");
        // Without epoll-wait, or with epoll_pwait2, nothing to say.
        assert!(Sleep::new(vec![SleepApi::Poll], vec![100_000], 1_000_000, None, false).warnings().is_empty());
        let s = Sleep::new(vec![SleepApi::EpollWait], vec![5_000_000], 1_000_000, None, true);
        assert!(s.warnings().is_empty());
        assert!(s.describe().contains("random phase [0, 1ms)") && !s.describe().contains("in ms"));
    }
}
