//! `sleep`: how accurate a relative sleep is (the references' SleepEx()
//! test).
//!
//! Each thread sleeps in turn through every chosen API (`--api`) for every
//! chosen length (`--sleep`), each pair its own metric `<api>@<length>`.
//! Before each sleep it busy-waits a random time in [0, `--phase`), so that
//! the sleeps do not stay in phase with the timer interrupt (the
//! stroboscopic effect the reference describes). The deviation is signed:
//!
//! ```text
//! deviation = (CLOCK_MONOTONIC after the call returns
//!              - CLOCK_MONOTONIC just before the call) - requested
//! ```
//!
//! so an early wake-up is negative. The thread's timer slack
//! (`PR_GET_TIMERSLACK`, after `--timer-slack` if given) is stored with
//! each series.

use super::{Probe, ThreadCtx};
use crate::disturb::Rng;
use crate::recorder::Recorder;
use crate::sys::clock;
use crate::sys::timers::{self, SleepApi, Sleeper};
use rtscope_model::hist::Tally;
use rtscope_model::units;
use serde::Serialize;

const SLOT_SLACK: usize = 0;
const SLOT_ERRORS: usize = 1;

#[derive(Clone, Debug, Serialize)]
pub struct Sleep {
    pub apis: Vec<SleepApi>,
    pub lengths_ns: Vec<u64>,
    /// Random busy wait in [0, phase) before each sleep.
    pub phase_ns: u64,
    /// `--timer-slack`: set on each measuring thread before measuring.
    pub timer_slack_ns: Option<u64>,
    /// `<api>@<length>` for every pair, API-major: made once per process.
    #[serde(skip)]
    pub metrics: &'static [&'static str],
}

impl Sleep {
    pub fn new(apis: Vec<SleepApi>, lengths_ns: Vec<u64>, phase_ns: u64, timer_slack_ns: Option<u64>) -> Sleep {
        let names: Vec<&'static str> = apis
            .iter()
            .flat_map(|a| lengths_ns.iter().map(move |&l| format!("{}@{}", a.name(), units::human(l))))
            // The Probe trait hands out 'static names; a command makes one
            // probe, so these few bytes live as long as the process anyway.
            .map(|n| &*Box::leak(n.into_boxed_str()))
            .collect();
        Sleep { apis, lengths_ns, phase_ns, timer_slack_ns, metrics: Box::leak(names.into_boxed_slice()) }
    }

    /// The API and length of metric `i`.
    fn pair(&self, i: usize) -> (SleepApi, u64) {
        let n = self.lengths_ns.len();
        (self.apis[i / n], self.lengths_ns[i % n])
    }
}

impl Probe for Sleep {
    fn name(&self) -> &'static str {
        "sleep"
    }

    fn metrics(&self) -> &'static [&'static str] {
        self.metrics
    }

    fn plan(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn describe(&self) -> String {
        let lengths: Vec<String> = self.lengths_ns.iter().map(|&l| units::human(l)).collect();
        let mut s = format!(
            "{} API(s), sleeps of {}, random phase [0, {})",
            self.apis.len(),
            lengths.join(","),
            units::human(self.phase_ns)
        );
        if let Some(t) = self.timer_slack_ns {
            s += &format!(", timer slack {}", units::human(t));
        }
        s
    }

    fn signed(&self) -> bool {
        true
    }

    fn extra_slots(&self) -> usize {
        2
    }

    fn row_extras(&self, _metric: usize, slots: &[u64], total: &Tally) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("timer_slack_ns".into(), slots[SLOT_SLACK].into());
        m.insert("mean_abs_ns".into(), ((total.mean_abs() * 1000.0).round() / 1000.0).into());
        if slots[SLOT_ERRORS] > 0 {
            m.insert("failed_calls".into(), slots[SLOT_ERRORS].into());
        }
        m
    }

    fn measure(&self, ctx: &ThreadCtx, rec: &mut [Recorder]) {
        let sleeper = Sleeper::new().expect("sleep: cannot create the epoll set and timerfd");
        if let Some(slack) = self.timer_slack_ns {
            timers::set_timer_slack(slack).expect("sleep: cannot set --timer-slack");
        }
        ctx.set_extra(SLOT_SLACK, timers::timer_slack().unwrap_or(0));
        let mut rng = Rng::seeded();
        let n = rec.len();
        let mut errors = 0;
        clock::sleep_until(ctx.start_ns);
        for i in (0..n).cycle() {
            let (api, len) = self.pair(i);
            clock::spin_until(clock::now() + rng.below(self.phase_ns));
            let t0 = clock::now();
            let ok = sleeper.sleep(api, len).is_ok();
            let t1 = clock::now();
            if ok {
                let deviation = (t1 - t0) as i64 - len as i64;
                rec[i].record_signed(t1, deviation);
                if deviation > 0 && ctx.breached(t1, deviation as u64) {
                    break;
                }
            } else {
                errors += 1;
                ctx.set_extra(SLOT_ERRORS, errors);
            }
            // --loops counts rounds: every metric gets that many samples.
            if ctx.done(t1, if i == n - 1 { rec[i].count() } else { 0 }) {
                break;
            }
            rec[i].maybe_checkpoint(t1);
        }
    }
}
