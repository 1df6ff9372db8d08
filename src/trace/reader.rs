//! The reader thread: at SCHED_OTHER, off the measured CPUs when it can,
//! it drains every traced CPU's `trace_pipe_raw` (non-blocking, one page
//! per read) every few milliseconds, decodes the records, takes the
//! probe's samples from their rings, and hands the stages to their
//! recorders and the episodes to the writer.

use super::decompose::{CpuTrace, Names, Out, Sample};
use super::event::{Decoder, Kind};
use super::format::PageLayout;
use super::page::Page;
use crate::recorder::Recorder;
use crate::sys::clock;
use rtscope_model::episode::{Episode, Stages, TraceCpu};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering::Acquire};
use std::sync::mpsc::Sender;
use std::time::Duration;

/// How often the buffers are drained.
const PERIOD: Duration = Duration::from_millis(10);

/// Episodes on their way to the writer.
pub enum EpisodeMsg {
    Keep(Box<Episode>),
    /// (probe, metric, cpu, sample) pushed out of the worst-N.
    Drop(String, String, i64, u64),
}

/// One traced CPU.
pub struct Lane {
    pub buffer: File,
    pub trace: CpuTrace,
    pub samples: rtrb::Consumer<Sample>,
    /// The stage series, in [`Stages::SERIES`] order.
    pub stages: Vec<Recorder>,
    pub bytes: u64,
    pub missed: u64,
    pub read_errors: u64,
    /// CLOCK_MONOTONIC - trace clock, from the last hrtimer expiry (its
    /// `now` field) when the trace clock is `local`.
    pub offset: Option<i64>,
    /// Trace-clock time of the last anchor, and the last mapped event time.
    pub anchor_ts: u64,
    pub last_ts: u64,
}

/// How fast the mapping may drift down between anchors: 50 ppm.
const DRIFT_DIVISOR: u64 = 20_000;

impl Lane {
    /// A new anchor: `now` (CLOCK_MONOTONIC, read by the hrtimer code) and
    /// the trace-clock time of its event, taken a little later. Each anchor
    /// underestimates the offset by that delay, so the mapping keeps the
    /// largest recent one, letting it drift down by at most 50 ppm.
    fn anchor(&mut self, now: i64, ts: u64) {
        self.offset = Some(next_offset(self.offset, self.anchor_ts, now, ts));
        self.anchor_ts = ts;
    }
}

/// The offset (CLOCK_MONOTONIC - trace clock) after an anchor `now` at
/// trace time `ts`, given the previous offset and its anchor's time.
fn next_offset(prev: Option<i64>, prev_ts: u64, now: i64, ts: u64) -> i64 {
    let candidate = now - ts as i64;
    match prev {
        Some(o) => candidate.max(o - (ts.saturating_sub(prev_ts) / DRIFT_DIVISOR) as i64),
        None => candidate,
    }
}

pub struct Reader {
    /// The trace clock is `mono`: event times are CLOCK_MONOTONIC already.
    pub mono: bool,
    pub layout: PageLayout,
    pub decoder: Decoder,
    pub lanes: Vec<Lane>,
    pub episodes: Sender<EpisodeMsg>,
}

/// What the reader reports at the end.
pub struct ReaderReport {
    pub per_cpu: Vec<TraceCpu>,
    pub cpu_ns: u64,
    pub wall_ns: u64,
    pub episodes_built: u64,
    pub episodes_kept: u64,
    pub unknown_records: u64,
}

/// A task's scheduling policy from `/proc/<pid>/stat` (field 41).
fn policy_of(pid: i32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(38)?.parse().ok()
}

impl Reader {
    /// Runs until `done` (set once every measuring thread has finished),
    /// then drains what is left and finishes the stage series.
    pub fn run(mut self, start_ns: u64, done: &AtomicBool) -> ReaderReport {
        let cpu0 = clock::thread_cpu_ns();
        let wall0 = clock::now();
        for lane in &mut self.lanes {
            for r in &mut lane.stages {
                r.start(start_ns);
            }
        }
        let cache: RefCell<HashMap<i32, Option<u32>>> = RefCell::new(HashMap::new());
        let policy = |pid: i32| *cache.borrow_mut().entry(pid).or_insert_with(|| policy_of(pid));
        let mut page = vec![0u8; self.layout.page_size];
        let mut kept = 0u64;
        loop {
            let last = done.load(Acquire);
            let pass_start = clock::now();
            for lane in &mut self.lanes {
                loop {
                    match lane.buffer.read(&mut page) {
                        Ok(0) => break,
                        Ok(n) => {
                            lane.bytes += n as u64;
                            match Page::parse(&self.layout, &page[..n]) {
                                Ok(p) => {
                                    lane.missed += p.missed.unwrap_or(0);
                                    for r in p.records() {
                                        let Some(mut e) = self.decoder.decode(r) else { continue };
                                        if !self.mono {
                                            // The `local` clock (sched_clock) is mapped to CLOCK_MONOTONIC by
                                            // the latest hrtimer expiry, whose `now` is CLOCK_MONOTONIC.
                                            if let Kind::ExpireEntry { now, .. } = e.kind {
                                                lane.anchor(now, e.ts);
                                            }
                                            let Some(o) = lane.offset else { continue };
                                            // Mapped times never go backwards on a CPU.
                                            e.ts = ((e.ts as i64 + o) as u64).max(lane.last_ts);
                                            lane.last_ts = e.ts;
                                        }
                                        lane.trace.push_event(e);
                                    }
                                }
                                Err(_) => lane.read_errors += 1,
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(_) => {
                            lane.read_errors += 1;
                            break;
                        }
                    }
                }
                while let Ok(s) = lane.samples.pop() {
                    lane.trace.push_sample(s);
                }
            }
            let names = Names { decoder: &self.decoder, policy: &policy };
            for lane in &mut self.lanes {
                let (stages, tx) = (&mut lane.stages, &self.episodes);
                let (probe, metric) = (lane.trace.probe, lane.trace.metric);
                lane.trace.process(pass_start, last, &names, &mut |o| match o {
                    Out::Stages { t_ns, stages: st } => record_stages(stages, t_ns, &st),
                    Out::Keep(e) => {
                        kept += 1;
                        let _ = tx.send(EpisodeMsg::Keep(e));
                    }
                    Out::Drop { cpu, sample } => {
                        kept = kept.saturating_sub(1);
                        let _ = tx.send(EpisodeMsg::Drop(probe.into(), metric.into(), cpu, sample));
                    }
                });
            }
            if last {
                break;
            }
            std::thread::sleep(PERIOD);
        }
        let now = clock::now();
        let mut report = ReaderReport {
            per_cpu: Vec::new(),
            cpu_ns: clock::thread_cpu_ns().saturating_sub(cpu0),
            wall_ns: now.saturating_sub(wall0),
            episodes_built: 0,
            episodes_kept: kept,
            unknown_records: self.decoder.unknown,
        };
        for lane in self.lanes {
            for r in lane.stages {
                r.finish(now);
            }
            let t = &lane.trace;
            report.episodes_built += t.episodes_built;
            report.per_cpu.push(TraceCpu {
                cpu: t.cpu,
                events: t.events_in,
                lost: lane.missed,
                bytes: lane.bytes,
                samples: t.samples_in,
                decomposed: t.decomposed,
                incomplete: t.incomplete,
                switch_inferred: t.inferred,
                samples_dropped: 0,
            });
        }
        report
    }
}

fn record_stages(recs: &mut [Recorder], t_ns: u64, st: &Stages) {
    for (r, v) in recs.iter_mut().zip(st.series_values()) {
        r.record(t_ns, v);
        r.maybe_checkpoint(t_ns);
    }
}

#[cfg(test)]
mod tests {
    /// The offset keeps the anchor with the shortest delay, and follows a
    /// real drift down by at most 50 ppm.
    #[test]
    fn anchors_keep_the_best_offset() {
        let mut off: Option<i64> = None;
        let mut at = 0u64;
        let mut anchor = |now: i64, ts: u64| {
            let o = super::next_offset(off, at, now, ts);
            (off, at) = (Some(o), ts);
            o
        };
        assert_eq!(anchor(1_000_000, 999_000), 1_000);
        // An anchor delayed by 1.8 us, 1 ms later, does not pull the mapping
        // back by 1.8 us: only by 50 ppm of 1 ms.
        assert_eq!(anchor(2_000_000, 2_000_800), 950);
        // A prompt anchor brings it back up at once.
        assert_eq!(anchor(3_000_000, 2_999_000), 1_000);
    }
}
