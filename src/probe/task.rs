//! `task`: a periodic real-time task that counts its missed deadlines (the
//! periodic-task model the Win98/WDM latency study proposed to validate its
//! quality-of-service predictions).
//!
//! Each thread releases a job at start + k x period (k = 1, 2, ...). A job
//! starts at its release (the thread sleeps to it with `clock_nanosleep`,
//! TIMER_ABSTIME), or at once when the previous job ended after it (a
//! backlog: jobs are never skipped), runs a calibrated amount of work of
//! `--compute` length (a busy loop, or with `--memory` one byte read per
//! cache line of a buffer), and records at its completion:
//!
//! - `release`: job start - release instant (the wake-up latency, plus any
//!   backlog);
//! - `response`: completion - release instant;
//! - `lateness`: completion - (release instant + deadline), signed.
//!
//! A job whose completion comes more than `--buffers` - 1 periods after its
//! deadline is a miss (an audio or modem buffer lets a job finish that
//! late); misses after the warm-up are counted, `missed` on each result.
//!
//! The work is calibrated before the run on the main thread (the fastest of
//! repeated trials, so that an interruption cannot lengthen it): a job's
//! work is then fixed, and what stretches its response time is what takes
//! the CPU from it.

use super::{Probe, ThreadCtx};
use crate::recorder::Recorder;
use crate::sys::cache::FlushBuffer;
use crate::sys::clock;
use rtscope_model::descriptor::{self, Descriptor};
use rtscope_model::extra::{self, task};
use rtscope_model::hist::Tally;
use rtscope_model::settings::TaskModel;
use rtscope_model::units;
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Task {
    /// Its period, work, deadline and buffers, stored as the model reads
    /// them (the analysis of its misses).
    #[serde(flatten)]
    pub model: TaskModel,
    /// `--memory`: the buffer a job reads, one byte per cache line.
    pub memory_bytes: Option<usize>,
    /// Units of work per job (busy-loop iterations, or cache lines read).
    pub work_units: u64,
    /// The calibration: ns per unit of work (the fastest trial's).
    pub unit_ns: f64,
    #[serde(skip)]
    pub memory: Option<FlushBuffer>,
}

/// The busy loop's unit of work: a few dependent integer operations the
/// compiler cannot fold or vectorise.
#[inline(never)]
fn spin(units: u64) {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..units {
        x = std::hint::black_box(x.rotate_left(5) ^ 0x2545_f491_4f6c_dd1d).wrapping_mul(3);
    }
    std::hint::black_box(x);
}

/// Does `units` of work; returns the cache line to go on from.
#[inline(always)]
fn work(memory: Option<&FlushBuffer>, units: u64, line: usize) -> usize {
    match memory {
        Some(m) => m.touch(line, units),
        None => {
            spin(units);
            line
        }
    }
}

/// ns per unit of work: the fastest of repeated trials of about 200 us
/// each (an interruption only lengthens a trial).
pub fn calibrate(memory: Option<&FlushBuffer>) -> f64 {
    let mut units = 1_000u64;
    let mut line = 0;
    // Grow a trial to about 200 us.
    loop {
        let t = clock::now();
        line = work(memory, units, line);
        let took = clock::now() - t;
        if took >= 200_000 || units >= 1 << 40 {
            break;
        }
        units = units.saturating_mul(if took < 20_000 { 10 } else { 2 });
    }
    let mut best = u64::MAX;
    for _ in 0..30 {
        let t = clock::now();
        line = work(memory, units, line);
        best = best.min(clock::now() - t);
    }
    best.max(1) as f64 / units as f64
}

impl Task {
    /// A task of `compute_ns` of work per `period_ns`, calibrated here.
    pub fn new(period_ns: u64, compute_ns: u64, deadline_ns: u64, buffers: u32, memory: Option<FlushBuffer>) -> Task {
        let unit_ns = calibrate(memory.as_ref());
        let work_units = ((compute_ns as f64 / unit_ns).round() as u64).max(1);
        Task {
            model: TaskModel { period_ns, compute_ns, deadline_ns, buffers },
            memory_bytes: memory.as_ref().map(FlushBuffer::bytes),
            work_units,
            unit_ns,
            memory,
        }
    }

    /// How late after its release a job may complete before it is a miss.
    pub fn allowed_ns(&self) -> u64 {
        self.model.allowed_ns()
    }
}

impl Probe for Task {
    fn descriptor(&self) -> &'static Descriptor {
        &descriptor::TASK
    }

    fn metrics(&self) -> &'static [&'static str] {
        &["release", "response", "lateness"]
    }

    fn plan(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn describe(&self) -> String {
        let what = match self.memory_bytes {
            Some(b) => format!("reading {} one line at a time", crate::sys::mem::human_bytes(b as u64)),
            None => "busy loop".into(),
        };
        format!(
            "period {}, compute {} ({what}), deadline {}, {} buffer{}",
            units::human(self.model.period_ns),
            units::human(self.model.compute_ns),
            units::human(self.model.deadline_ns),
            self.model.buffers,
            if self.model.buffers == 1 { "" } else { "s" }
        )
    }

    fn extra_slots(&self) -> usize {
        1
    }

    fn row_extras(&self, _metric: usize, slots: &[u64], _total: &Tally) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        extra::MISSED.put(&mut m, slots[0]);
        task::ALLOWED.put(&mut m, self.allowed_ns());
        m
    }

    fn measure(&self, ctx: &ThreadCtx, rec: &mut [Recorder]) {
        let (p, d, allowed) = (self.model.period_ns, self.model.deadline_ns, self.allowed_ns());
        let memory = self.memory.as_ref();
        // Each thread reads its own part of the buffer first.
        let mut line = ctx.index * 4096;
        let mut release = ctx.start_ns;
        let mut missed = 0u64;
        loop {
            release += p;
            if clock::now() < release {
                clock::sleep_until(release);
            }
            let start = clock::now();
            line = work(memory, self.work_units, line);
            let end = clock::now();
            let response = end - release;
            rec[0].record_signed(end, start.saturating_sub(release) as i64);
            rec[1].record_signed(end, response as i64);
            rec[2].record_signed(end, end as i64 - (release + d) as i64);
            if response > allowed {
                rec[2].overrun(1);
                if ctx.recording(end) {
                    missed += 1;
                    ctx.set_extra(0, missed);
                }
            }
            if ctx.breached(end, response) || ctx.done(end, rec[0].count()) {
                break;
            }
            for r in rec.iter_mut() {
                r.maybe_checkpoint(end);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::TestThread;

    /// Jobs released every 2 ms with 200 us of work: each job's three
    /// samples, no miss on a deadline far beyond any stall of the host; a
    /// deadline shorter than the work makes every job a miss, and buffers
    /// move the limit by whole periods.
    #[test]
    fn jobs_are_timed_and_misses_counted() {
        let t = Task::new(2_000_000, 200_000, 2_000_000, 1, None);
        assert!(t.work_units > 0 && t.unit_ns > 0.0);
        assert_eq!(Task { model: TaskModel { buffers: 3, ..t.model }, ..t.clone() }.allowed_ns(), 6_000_000);
        let run = |task: &Task| {
            let th = TestThread::new(1);
            let now = clock::now();
            let ctx = th.ctx(now, now, now + 40_100_000);
            let mut rec =
                [TestThread::recorder(true, now), TestThread::recorder(true, now), TestThread::recorder(true, now)];
            task.measure(&ctx, &mut rec);
            (rec.iter().map(|r| r.count()).collect::<Vec<_>>(), th.extras()[0], rec[1].current().max())
        };
        let (counts, missed, worst) = run(&t);
        // Three samples per job, and at most the 20 jobs released in the
        // 40.1 ms. Fewer when this unprivileged thread got little of a busy
        // CPU: then the jobs fell behind their releases, and the last one,
        // released at n x 2 ms, ended after the window's end; its response
        // time says so (the thread's own clock, not the CPU's share).
        let n = counts[0];
        assert!(counts.iter().all(|&c| c == n) && (1..=20).contains(&n), "{counts:?}");
        assert!(n == 20 || worst >= 40_100_000 - 2_000_000 * n as i64, "{n} jobs, the worst response {worst} ns");
        assert!(missed <= n);
        let (counts, missed, _) = run(&Task { model: TaskModel { deadline_ns: 100_000, ..t.model }, ..t.clone() });
        assert_eq!(missed, counts[0]);
        let m = Task::new(2_000_000, 100_000, 2_000_000, 1, Some(FlushBuffer::new(Some(1 << 20)).unwrap()));
        assert!(m.describe().contains("reading 1 MiB"), "{}", m.describe());
    }
}
