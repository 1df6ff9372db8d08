//! The reader thread: at SCHED_OTHER, off the measured CPUs when it can,
//! it drains every traced CPU's `trace_pipe_raw` (non-blocking, one page
//! per read) every few milliseconds, decodes the records, takes the
//! probe's samples from their rings, and hands the stages to their
//! recorders and the episodes to the writer.

use super::TraceClock;
use super::decompose::{CpuTrace, Names, Out};
use super::event::{Decoder, Ev, Kind};
use super::format::PageLayout;
use super::page::Page;
use crate::recorder::{EpisodeMsg, Recorder, Sample};
use crate::sys::clock;
use rtscope_model::episode::{Stages, TraceCpu};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering::Acquire};
use std::sync::mpsc::Sender;
use std::time::Duration;

/// How often the buffers are drained.
const PERIOD: Duration = Duration::from_millis(10);

/// One CPU's binary buffer (`per_cpu/cpuN/trace_pipe_raw`), read
/// non-blocking a page at a time, and what reading it cost.
pub struct Buffer {
    file: File,
    /// Mapping of the `local` trace clock; None when it is `mono`.
    clock: Option<LocalClock>,
    pub bytes: u64,
    /// Events the kernel says it lost before a page (the page's flag).
    pub missed: u64,
    pub read_errors: u64,
}

impl Buffer {
    pub fn new(file: File, clock: TraceClock) -> Buffer {
        let clock = (clock == TraceClock::Local).then(LocalClock::default);
        Buffer { file, clock, bytes: 0, missed: 0, read_errors: 0 }
    }

    /// Reads every page the kernel has for this CPU; `each` takes its
    /// events in time order (CLOCK_MONOTONIC).
    pub fn drain(&mut self, layout: &PageLayout, decoder: &mut Decoder, page: &mut [u8], mut each: impl FnMut(Ev)) {
        loop {
            match self.file.read(page) {
                Ok(0) => break,
                Ok(n) => {
                    self.bytes += n as u64;
                    let Ok(p) = Page::parse(layout, &page[..n]) else {
                        self.read_errors += 1;
                        continue;
                    };
                    self.missed += p.missed.unwrap_or(0);
                    for r in p.records() {
                        let Some(mut e) = decoder.decode(r) else { continue };
                        if let Some(clock) = &mut self.clock {
                            let Some(ts) = clock.map(&e) else { continue };
                            e.ts = ts;
                        }
                        each(e);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.read_errors += 1;
                    break;
                }
            }
        }
    }
}

/// One traced CPU of a probe.
pub struct Lane {
    buffer: Buffer,
    trace: CpuTrace,
    samples: rtrb::Consumer<Sample>,
    /// The stage series, in [`Stages::SERIES`] order.
    stages: Vec<Recorder>,
}

impl Lane {
    pub fn new(
        buffer: File,
        trace: CpuTrace,
        samples: rtrb::Consumer<Sample>,
        stages: Vec<Recorder>,
        clock: TraceClock,
    ) -> Lane {
        Lane { buffer: Buffer::new(buffer, clock), trace, samples, stages }
    }

    /// Reads every page the kernel has for this CPU, and the probe's samples.
    fn drain(&mut self, layout: &PageLayout, decoder: &mut Decoder, page: &mut [u8]) {
        let trace = &mut self.trace;
        self.buffer.drain(layout, decoder, page, |e| trace.push_event(e));
        while let Ok(s) = self.samples.pop() {
            self.trace.push_sample(s);
        }
    }
}

/// The `local` trace clock (sched_clock) mapped to CLOCK_MONOTONIC by the
/// hrtimer expiries, whose `now` field is CLOCK_MONOTONIC.
#[derive(Default)]
struct LocalClock {
    /// CLOCK_MONOTONIC - trace clock, once an expiry was seen.
    offset: Option<i64>,
    /// Trace-clock time of the last anchor.
    anchor_ts: u64,
    /// The last mapped time: mapped times never go backwards on a CPU.
    last_ts: u64,
}

/// How fast the mapping may drift down between anchors: 50 ppm.
const DRIFT_DIVISOR: u64 = 20_000;

impl LocalClock {
    /// The CLOCK_MONOTONIC time of `e`, None before the first anchor. Each
    /// anchor (`now`, read by the hrtimer code, and the trace time of its
    /// event, a little later) underestimates the offset by that delay, so
    /// the mapping keeps the largest recent one, letting it drift down by
    /// at most 50 ppm.
    fn map(&mut self, e: &Ev) -> Option<u64> {
        if let Kind::ExpireEntry { now, .. } = e.kind {
            self.offset = Some(next_offset(self.offset, self.anchor_ts, now, e.ts));
            self.anchor_ts = e.ts;
        }
        let ts = ((e.ts as i64 + self.offset?) as u64).max(self.last_ts);
        self.last_ts = ts;
        Some(ts)
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
pub fn policy_of(pid: i32) -> Option<u32> {
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
        loop {
            let last = done.load(Acquire);
            let pass_start = clock::now();
            for lane in &mut self.lanes {
                lane.drain(&self.layout, &mut self.decoder, &mut page);
            }
            let names = Names { decoder: &self.decoder, policy: &policy };
            for lane in &mut self.lanes {
                let (stages, tx) = (&mut lane.stages, &self.episodes);
                let (probe, metric) = (lane.trace.probe.clone(), lane.trace.metric);
                lane.trace.process(pass_start, last, &names, &mut |o| match o {
                    Out::Stages { t_ns, stages: st } => record_stages(stages, t_ns, &st),
                    Out::Keep(e) => {
                        let _ = tx.send(EpisodeMsg::Keep(e));
                    }
                    Out::Drop { cpu, sample } => {
                        let _ = tx.send(EpisodeMsg::Drop(probe.clone(), metric.into(), cpu, sample));
                    }
                    // Not asked for (`classify_all` is a watch's in a monitor).
                    Out::Class { .. } => {}
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
            episodes_kept: 0,
            unknown_records: self.decoder.unknown,
        };
        for lane in self.lanes {
            for r in lane.stages {
                r.finish(now);
            }
            let t = &lane.trace;
            report.episodes_built += t.episodes_built;
            report.episodes_kept += t.kept() as u64;
            report.per_cpu.push(TraceCpu {
                cpu: t.cpu,
                events: t.events_in,
                lost: lane.buffer.missed,
                bytes: lane.buffer.bytes,
                samples: t.samples_in,
                decomposed: t.decomposed,
                incomplete: t.incomplete,
                read_errors: lane.buffer.read_errors,
                switch_inferred: t.inferred,
                samples_dropped: 0,
                by_kind: t.by_kind.clone(),
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
