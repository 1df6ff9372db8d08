//! `ptimer`: periodic timer drift (the NT real-time study's multimedia-timer test).
//!
//! Each thread arms periodic timers of every chosen kind (`--timer`) on
//! CLOCK_MONOTONIC with the same `--period` and the same grid, start + k x
//! period, and waits for each in turn:
//!
//! - `timerfd`: a periodic timerfd, waited in read(2);
//! - `posix-signal`: `timer_create` with `SIGEV_SIGNAL` (a process-directed
//!   real-time signal, one per measuring thread), waited in sigwaitinfo(2);
//! - `posix-thread`: `timer_create` with `SIGEV_THREAD_ID` (a signal to the
//!   measuring thread itself), waited in sigwaitinfo(2).
//!
//! Drift of event k = CLOCK_MONOTONIC when the wait returns - (start + k x
//! period), signed. When expirations were missed (the timerfd's expiration
//! count above 1, `timer_getoverrun` above 0), they count as `missed` and k
//! is the latest expiration. In an assessment's cell, `missed` counts only
//! after the warm-up, as the recorded events and `overruns` do.
//!
//! A timer that cannot be created or armed, or a wait that fails, ends the
//! run with an error naming the timer kind and the call.
//!
//! The kinds expire together; the order they are waited in rotates every
//! period, so that no kind is always the one seen after the others (seeing
//! one costs a microsecond or two). They share one grid rather than being
//! spread over the period because on the 6.18 KVM guest this was built on,
//! staggered hrtimers of one CPU can stay late by the distance to the next
//! one for seconds after a stall (a kernel or hypervisor effect that a plain
//! C-style program with three timerfds shows too): spread, the kinds would
//! measure each other.
//!
//! The signals are blocked in every thread of the process while the run
//! lasts and ignored (so a stray one cannot end it), and left as they were
//! afterwards; SIGINT/SIGTERM are not touched.

use super::{Probe, ThreadCtx};
use crate::recorder::Recorder;
use crate::sys::clock;
use crate::sys::sched::Policy;
use crate::sys::timers::{self, PosixTimer, ReservedSignals, SigSet, TimerFd};
use anyhow::{Context, Result};
use rtscope_model::descriptor::{self, Descriptor};
use rtscope_model::extra;
use rtscope_model::hist::Tally;
use rtscope_model::units;
use serde::Serialize;

/// The kinds of periodic timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum TimerKind {
    /// timerfd_create(CLOCK_MONOTONIC), periodic, waited in read(2).
    Timerfd,
    /// timer_create with SIGEV_SIGNAL, waited in sigwaitinfo(2).
    PosixSignal,
    /// timer_create with SIGEV_THREAD_ID, waited in sigwaitinfo(2).
    PosixThread,
}

impl TimerKind {
    pub const ALL: [TimerKind; 3] = [TimerKind::Timerfd, TimerKind::PosixSignal, TimerKind::PosixThread];

    pub fn name(self) -> &'static str {
        match self {
            TimerKind::Timerfd => "timerfd",
            TimerKind::PosixSignal => "posix-signal",
            TimerKind::PosixThread => "posix-thread",
        }
    }
}

/// The real-time signal (SIGRTMIN + n) of every thread's `posix-thread`
/// timer; thread i's `posix-signal` timer uses SIGRTMIN + 3 + i.
const THREAD_SIGNAL: i32 = 2;
const FIRST_PROCESS_SIGNAL: i32 = 3;

/// How many measuring threads can have a `posix-signal` timer.
pub fn max_signal_threads() -> usize {
    (timers::rt_signals() - FIRST_PROCESS_SIGNAL).max(0) as usize
}

#[derive(Clone, Debug, Serialize)]
pub struct Ptimer {
    /// Its timer's period, stored as the model reads it.
    #[serde(flatten)]
    pub timer: rtscope_model::settings::TimerPeriod,
    pub kinds: Vec<TimerKind>,
    /// Thread i's `posix-signal` signal; the `posix-thread` signal.
    pub process_signals: Vec<i32>,
    pub thread_signal: i32,
    #[serde(skip)]
    pub metrics: &'static [&'static str],
    #[serde(skip)]
    all_signals: SigSet,
}

impl Ptimer {
    /// `threads` measuring threads (one per CPU). Fails when there are
    /// not enough real-time signals.
    pub fn new(period_ns: u64, kinds: Vec<TimerKind>, threads: usize) -> Option<Ptimer> {
        let process_signals = if kinds.contains(&TimerKind::PosixSignal) {
            (0..threads).map(|i| timers::rt_signal(FIRST_PROCESS_SIGNAL + i as i32)).collect::<Option<Vec<_>>>()?
        } else {
            Vec::new()
        };
        let names: Vec<&'static str> = kinds.iter().map(|k| k.name()).collect();
        let mut p = Ptimer {
            timer: rtscope_model::settings::TimerPeriod { period_ns },
            kinds,
            process_signals,
            thread_signal: timers::rt_signal(THREAD_SIGNAL)?,
            metrics: Box::leak(names.into_boxed_slice()),
            all_signals: SigSet::of(&[]),
        };
        p.all_signals = SigSet::of(&p.signals());
        Some(p)
    }

    fn signals(&self) -> Vec<i32> {
        let mut all = self.process_signals.clone();
        if self.kinds.contains(&TimerKind::PosixThread) {
            all.push(self.thread_signal);
        }
        all
    }
}

/// A timer armed on one measuring thread.
enum Armed {
    Fd(TimerFd),
    Posix(PosixTimer, SigSet),
}

impl Armed {
    /// Waits for the next expiry; returns the expirations it stands for.
    #[inline]
    fn wait(&self) -> std::io::Result<u64> {
        match self {
            Armed::Fd(fd) => fd.wait(),
            Armed::Posix(t, set) => {
                set.wait()?;
                Ok(1 + t.overrun())
            }
        }
    }

    /// Creates a timer of `kind` that expires at `base` and every `period`
    /// after, for thread `index`. The error names the kind and the call.
    fn arm(p: &Ptimer, kind: TimerKind, index: usize, base: u64, period: u64) -> Result<Armed, String> {
        let fail = |call: &str, e: std::io::Error| format!("--timer {}: {call} failed: {e}", kind.name());
        Ok(match kind {
            TimerKind::Timerfd => {
                let fd = TimerFd::new().map_err(|e| fail("timerfd_create(CLOCK_MONOTONIC)", e))?;
                fd.arm_periodic(base, period).map_err(|e| fail("timerfd_settime", e))?;
                Armed::Fd(fd)
            }
            TimerKind::PosixSignal | TimerKind::PosixThread => {
                let (signo, t) = if kind == TimerKind::PosixSignal {
                    let s = p.process_signals[index];
                    (s, PosixTimer::to_process(s))
                } else {
                    (p.thread_signal, PosixTimer::to_this_thread(p.thread_signal))
                };
                let t = t.map_err(|e| fail("timer_create(CLOCK_MONOTONIC)", e))?;
                t.arm_periodic(base, period).map_err(|e| fail("timer_settime", e))?;
                Armed::Posix(t, SigSet::of(&[signo]))
            }
        })
    }
}

impl Probe for Ptimer {
    fn descriptor(&self) -> &'static Descriptor {
        &descriptor::PTIMER
    }

    fn metrics(&self) -> &'static [&'static str] {
        self.metrics
    }

    fn plan(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn describe(&self) -> String {
        let names: Vec<&str> = self.kinds.iter().map(|k| k.name()).collect();
        format!("period {}, {}", units::human(self.timer.period_ns), names.join(", "))
    }

    fn extra_slots(&self) -> usize {
        self.kinds.len()
    }

    fn row_extras(&self, metric: usize, slots: &[u64], total: &Tally) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        extra::MISSED.put(&mut m, slots[metric]);
        extra::MEAN_ABS.put(&mut m, (total.mean_abs() * 1000.0).round() / 1000.0);
        m
    }

    fn start_helpers(&self, _cpus: &[usize], _policy: Policy, _priority: u8) -> Result<Box<dyn Send>> {
        // Before any measuring or writer thread exists: they inherit the mask.
        Ok(Box::new(ReservedSignals::reserve(&self.signals()).context("reserving the POSIX timers' signals")?))
    }

    fn measure(&self, ctx: &ThreadCtx, rec: &mut [Recorder]) {
        let p = self.timer.period_ns;
        let n = self.kinds.len();
        // Made here (a SIGEV_THREAD_ID timer names this thread), before
        // measuring; no allocation but on a failure, which ends the run.
        let mut timers: [Option<(Armed, u64)>; 3] = [None, None, None];
        for (j, &kind) in self.kinds.iter().enumerate() {
            let base = ctx.start_ns + p;
            match Armed::arm(self, kind, ctx.index, base, p) {
                Ok(armed) => timers[j] = Some((armed, base)),
                Err(e) => {
                    ctx.fail(e);
                    drop(timers);
                    self.all_signals.drain();
                    return;
                }
            }
        }
        let mut seen = [0u64; 3];
        let mut missed = [0u64; 3];
        let mut first = 0;
        'run: loop {
            let mut now = 0;
            for j in (first..n).chain(0..first) {
                let Some((timer, base)) = &timers[j] else { continue };
                let expirations = match timer.wait() {
                    Ok(n) => n,
                    Err(e) => {
                        let call = if matches!(timer, Armed::Fd(_)) { "read(2)" } else { "sigwaitinfo(2)" };
                        ctx.fail(format!("--timer {}: {call} failed while measuring: {e}", self.kinds[j].name()));
                        break 'run;
                    }
                };
                now = clock::now();
                seen[j] += expirations;
                let due = base + (seen[j] - 1) * p;
                let drift = now as i64 - due as i64;
                rec[j].record_signed(now, drift);
                if expirations > 1 {
                    rec[j].overrun(expirations - 1);
                    // As the recorder's overruns: none in a warm-up.
                    if ctx.recording(now) {
                        missed[j] += expirations - 1;
                        ctx.set_extra(j, missed[j]);
                    }
                }
                if drift > 0 && ctx.breached(now, drift as u64) {
                    break 'run;
                }
            }
            if ctx.done(now, rec[0].count()) {
                break;
            }
            first = (first + 1) % n;
            for r in rec.iter_mut() {
                r.maybe_checkpoint(now);
            }
        }
        // Disarm, then take what the last expiries left pending, so that no
        // signal outlives the run.
        drop(timers);
        self.all_signals.drain();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::TestThread;

    /// A timer the kernel refuses ends the thread with an error naming the
    /// kind and the call, and stops the run: no panic.
    #[test]
    fn a_timer_that_cannot_be_made_is_an_error_naming_it() {
        let mut p = Ptimer::new(1_000_000, vec![TimerKind::Timerfd, TimerKind::PosixSignal], 1).unwrap();
        // No such signal: timer_create says EINVAL.
        p.process_signals = vec![1000];
        let t = TestThread::new(p.extra_slots());
        let now = clock::now();
        let ctx = t.ctx(now, now, now + 2_000_000_000);
        let mut rec = [TestThread::recorder(true, now), TestThread::recorder(true, now)];
        p.measure(&ctx, &mut rec);
        assert!(clock::now() - now < 1_000_000_000, "it does not measure");
        assert!(ctx.stopping());
        let f = ctx.failure.take().unwrap();
        assert!(f.contains("--timer posix-signal: timer_create(CLOCK_MONOTONIC) failed"), "{f}");
        assert_eq!(rec[0].count(), 0);
    }
}
