//! `hwlat`: the time hardware, firmware (SMIs) or a hypervisor takes from a
//! CPU that runs nothing else, as rt-tests' `hwlatdetect` measures it: the
//! kernel's hwlat tracer spins on a CPU with interrupts off for `--width`
//! of every `--window`, reading the clock; a gap between two reads (inner)
//! or between two turns of its loop (outer) above `--min` can only be
//! something Linux does not see. Each window's longest gap above it is one
//! sample, recorded on the CPU it was measured on (metric `latency`, the
//! longer of the two, and `inner` and `outer`).
//!
//! The tracer runs in rtscope's instance `rtscope-<pid>-hwlat`, its
//! settings (`hwlat_detector/width`, `window`, `mode`, `tracing_thresh`)
//! written back when it stops, or by the janitor should rtscope be killed
//! (`trace::ktracer`). Each measuring thread sleeps and reads its CPU's
//! buffer every 100 ms: it measures nothing itself.

use super::{Probe, ThreadCtx};
use crate::recorder::Recorder;
use crate::sys::{clock, sched::Policy};
use crate::trace::ktracer::{CpuReader, KernelTracer, Rec, Setting, Tracer};
use anyhow::{Result, anyhow};
use rtscope_model::descriptor::{self, Descriptor};
use rtscope_model::extra::hwlat;
use rtscope_model::hist::Tally;
use rtscope_model::inventory::Warning;
use rtscope_model::units;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering::Acquire, Ordering::Release};
use std::sync::{Arc, Mutex};

/// How often a thread reads its CPU's buffer.
const POLL_NS: u64 = 100_000_000;
/// The tracer's buffer per CPU, kB: a sample per window fits for hours.
const BUFFER_KB: u64 = 256;

/// Extra slots each thread reports (see `row_extras`).
const SLOT_READ: usize = 0;
const SLOT_SEQ_MAX: usize = 1;
const SLOT_NMI_COUNT: usize = 2;
const SLOT_NMI_NS: usize = 3;
const SLOT_GAPS: usize = 4;
const SLOT_LOST: usize = 5;
/// The instance's `tracing_max_latency` once the tracer stopped (thread 0),
/// plus one (0: not read).
const SLOT_KERNEL_MAX: usize = 6;

/// Where hwlat's thread spins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum HwlatMode {
    /// One thread, moved to the next measured CPU each window (the
    /// kernel's default, hwlatdetect's).
    RoundRobin,
    /// A thread on every measured CPU at once.
    PerCpu,
}

impl HwlatMode {
    fn kernel(self) -> &'static str {
        match self {
            HwlatMode::RoundRobin => "round-robin",
            HwlatMode::PerCpu => "per-cpu",
        }
    }
}

#[derive(Clone, Serialize)]
pub struct Hwlat {
    /// Time spinning with interrupts off per window, ns.
    pub width_ns: u64,
    pub window_ns: u64,
    /// A gap at or below this is not a sample (`tracing_thresh`), ns.
    pub min_ns: u64,
    pub mode: HwlatMode,
    #[serde(skip)]
    shared: Arc<Shared>,
}

/// What the tracer's set-up hands the measuring threads.
#[derive(Default)]
struct Shared {
    /// Each CPU's buffer, taken by its measuring thread; filled while the
    /// tracer is set up (`start_helpers`).
    readers: Mutex<Vec<Option<CpuReader>>>,
    /// The tracer's instance: thread 0 turns tracing on at the start and
    /// off at the end, then reads its `tracing_max_latency`.
    dir: Mutex<Option<std::path::PathBuf>>,
    /// Tracing is off: the others drain their buffers a last time.
    off: AtomicBool,
}

/// The tracer set up, stopped (its settings written back) when the cell
/// drops it.
struct Running {
    _tracer: KernelTracer,
    shared: Arc<Shared>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shared.readers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        *self.shared.dir.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}

impl Hwlat {
    pub fn new(width_ns: u64, window_ns: u64, min_ns: u64, mode: HwlatMode) -> Hwlat {
        Hwlat { width_ns, window_ns, min_ns, mode, shared: Arc::default() }
    }

    /// Its CPU's reader, taken once.
    fn take(&self, cpu: usize) -> Option<CpuReader> {
        let mut r = self.shared.readers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        r.iter_mut().find(|x| x.as_ref().is_some_and(|x| x.cpu == cpu)).and_then(Option::take)
    }

    /// The tracer's instance directory, while it is set up.
    fn dir(&self) -> Option<std::path::PathBuf> {
        self.shared.dir.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl Hwlat {
    /// Turns tracing off (thread 0, which holds `dir`), or waits until it
    /// is (the others, for a second at most): every sample the tracer made
    /// is then in the buffers for the last read.
    fn stop_tracing(&self, dir: Option<&std::path::Path>) {
        match dir {
            Some(d) => {
                let _ = crate::sys::tracefs::write(&d.join("tracing_on"), "0");
                self.shared.off.store(true, Release);
            }
            None => {
                let until = clock::now() + 1_000_000_000;
                while !self.shared.off.load(Acquire) && clock::now() < until {
                    clock::sleep_until(clock::now() + 1_000_000);
                }
            }
        }
    }
}

impl Probe for Hwlat {
    fn descriptor(&self) -> &'static Descriptor {
        &descriptor::HWLAT
    }

    fn metrics(&self) -> &'static [&'static str] {
        &["latency", "inner", "outer"]
    }

    fn plan(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn describe(&self) -> String {
        format!(
            "hwlat tracer: width {} per window {}, samples above {}, {}",
            units::human(self.width_ns),
            units::human(self.window_ns),
            units::human(self.min_ns),
            self.mode.kernel()
        )
    }

    fn warnings(&self) -> Vec<Warning> {
        vec![Warning {
            topic: "hwlat".into(),
            message: format!(
                "hwlat: the kernel's hwlat thread spins with interrupts off for {} of every {} on {}: nothing else \
                 runs there meanwhile, and interrupts wait",
                units::human(self.width_ns),
                units::human(self.window_ns),
                match self.mode {
                    HwlatMode::RoundRobin => "one measured CPU at a time",
                    HwlatMode::PerCpu => "every measured CPU",
                }
            ),
            fix: "run hwlat on a machine out of service, or give a shorter --width".into(),
        }]
    }

    /// Starts the tracer on `cpus` and hands each CPU's buffer to its
    /// measuring thread; a kernel without it fails the run, saying why.
    fn start_helpers(&self, cpus: &[usize], _policy: Policy, _priority: u8) -> Result<Box<dyn Send>> {
        let us = |ns: u64| (ns / 1000).to_string();
        let settings = [
            Setting::File("hwlat_detector/window", us(self.window_ns)),
            Setting::File("hwlat_detector/width", us(self.width_ns)),
            Setting::File("hwlat_detector/mode", self.mode.kernel().into()),
            Setting::File("tracing_thresh", us(self.min_ns)),
        ];
        let mut tracer = KernelTracer::start(Tracer::Hwlat, cpus, &settings, &["ftrace/hwlat"], BUFFER_KB)
            .map_err(|e| anyhow!("hwlat: {e}"))?;
        let readers = tracer.readers();
        *self.shared.readers.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            readers.into_iter().map(Some).collect();
        // Tracing starts with the measuring threads (the first turns it on).
        *self.shared.dir.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(tracer.dir.clone());
        self.shared.off.store(false, Release);
        Ok(Box::new(Running { _tracer: tracer, shared: Arc::clone(&self.shared) }))
    }

    fn extra_slots(&self) -> usize {
        7
    }

    /// Every 100 ms, the samples the tracer made on this CPU since: no
    /// timing here, the kernel's thread measured them. The first thread
    /// turns tracing on at the start, and off at the end before every
    /// thread's last read, so that the run holds every sample the tracer
    /// made.
    fn measure(&self, ctx: &ThreadCtx, rec: &mut [Recorder]) {
        let Some(mut reader) = self.take(ctx.cpu) else {
            ctx.fail("hwlat: the tracer's buffer for this CPU is not open".into());
            return;
        };
        let dir = if ctx.index == 0 { self.dir() } else { None };
        if let Some(d) = &dir
            && let Err(e) = crate::sys::tracefs::write(&d.join("tracing_on"), "1")
        {
            ctx.fail(format!("hwlat: {e}"));
            return;
        }
        let mut page = vec![0u8; reader.page_size()];
        let (mut read, mut seq_max, mut nmis, mut nmi_ns, mut gaps) = (0u64, 0u64, 0u64, 0u64, 0u64);
        let mut next = ctx.start_ns;
        let mut stop = false;
        while !stop {
            next += POLL_NS;
            clock::sleep_until(next.min(ctx.end_ns()));
            let now = clock::now();
            stop = ctx.done(now, rec[0].count());
            if stop {
                self.stop_tracing(dir.as_deref());
            }
            reader.drain(&mut page, |t, r| {
                let Rec::Hwlat { seq, inner_us, outer_us, nmi_ns: n_ns, nmi_count, count } = r else { return };
                read += 1;
                seq_max = seq_max.max(u64::from(seq));
                if !ctx.recording(t) {
                    return;
                }
                nmis += u64::from(nmi_count);
                nmi_ns += n_ns;
                gaps += u64::from(count);
                let (inner, outer) = (inner_us * 1000, outer_us * 1000);
                rec[0].record(t, inner.max(outer));
                rec[1].record(t, inner);
                rec[2].record(t, outer);
                if ctx.breached(t, inner.max(outer)) {
                    stop = true;
                }
            });
            for r in rec.iter_mut() {
                r.maybe_checkpoint(now);
            }
        }
        for (slot, v) in [
            (SLOT_READ, read),
            (SLOT_SEQ_MAX, seq_max),
            (SLOT_NMI_COUNT, nmis),
            (SLOT_NMI_NS, nmi_ns),
            (SLOT_GAPS, gaps),
        ] {
            ctx.set_extra(slot, v);
        }
        ctx.set_extra(SLOT_LOST, reader.lost + reader.read_errors + reader.unknown);
        if let Some(max) = dir.and_then(|d| std::fs::read_to_string(d.join("tracing_max_latency")).ok()) {
            // One more than the file's value: 0 is "not read", and a
            // maximum under a millisecond reads 0 (below).
            if let Ok(v) = max.trim().parse::<u64>() {
                ctx.set_extra(SLOT_KERNEL_MAX, v + 1);
            }
        }
    }

    fn row_extras(&self, metric: usize, slots: &[u64], _total: &Tally) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        if metric == 0 {
            hwlat::TRACER_RECORDS.put(&mut m, slots[SLOT_READ]);
            hwlat::TRACER_SEQ_MAX.put(&mut m, slots[SLOT_SEQ_MAX]);
            hwlat::NMI_COUNT.put(&mut m, slots[SLOT_NMI_COUNT]);
            hwlat::NMI_NS.put(&mut m, slots[SLOT_NMI_NS]);
            hwlat::GAPS.put(&mut m, slots[SLOT_GAPS]);
            hwlat::RECORDS_LOST.put(&mut m, slots[SLOT_LOST]);
            // hwlat keeps its samples' microseconds in the instance's
            // maximum, which tracing_max_latency prints divided by 1000.
            if let Some(v) = slots[SLOT_KERNEL_MAX].checked_sub(1) {
                hwlat::TRACER_MAX_LATENCY_FILE.put(&mut m, v);
            }
        }
        m
    }

    fn notes(&self, slots: &[u64]) -> Vec<String> {
        let mut n = Vec::new();
        if slots[SLOT_LOST] > 0 {
            n.push(format!("hwlat: {} of the tracer's records were lost or not decoded", slots[SLOT_LOST]));
        }
        if slots[SLOT_NMI_COUNT] > 0 {
            n.push(format!(
                "hwlat: {} NMIs came during the tracer's windows ({} in them): an NMI's time is counted in the gap it \
                 made",
                slots[SLOT_NMI_COUNT],
                units::human(slots[SLOT_NMI_NS])
            ));
        }
        n
    }
}
