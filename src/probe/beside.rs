//! A kernel tracer run beside a probe's measuring threads (timerlat beside
//! `wakeup`, osnoise's tracepoints beside `noise`): started with the cell,
//! its records read by a thread of its own (`rtscope-ktrace`, SCHED_OTHER
//! on rtscope's CPUs) into series of the run, one per metric and CPU, like
//! the probe's own; stopped, and its settings written back, with the cell.
//! Where the kernel cannot run it, the run says why.

use super::{Common, Probe};
use crate::recorder::Recorder;
use crate::sys::{clock, sched, sched::Policy, signals};
use crate::trace::ktracer::{Context, CpuReader, KernelTracer, Rec, Setting, Tracer};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering::Acquire, Ordering::Relaxed};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::Duration;

/// How often the reader drains the tracer's buffers.
const PERIOD: Duration = Duration::from_millis(20);
/// The tracer's buffer per CPU, kB.
const BUFFER_KB: u64 = 1024;

/// Whether to run a kernel tracer beside a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum KernelTracerMode {
    /// Where the kernel has it; the run says why not elsewhere.
    Auto,
    /// Always: a kernel without it fails the run.
    On,
    Off,
}

/// Which of a tracer's series a record goes to, and its value (ns); None:
/// not recorded.
pub type Route = fn(&Rec, &RouteCtx) -> Option<(usize, u64)>;

/// What a [`Route`] may ask about the threads a record names.
pub struct RouteCtx<'a> {
    /// The probe's measuring threads.
    own: &'a [i32],
    /// Whether a thread can run while the probe's thread is runnable.
    outranks: &'a dyn Fn(i32) -> bool,
}

impl RouteCtx<'_> {
    /// Whether `tid` is one of the probe's measuring threads.
    pub fn own(&self, tid: i32) -> bool {
        tid > 0 && self.own.contains(&tid)
    }

    /// Whether thread `tid` (not the probe's) runs ahead of the probe's
    /// threads: a real-time priority at or above theirs, or any thread
    /// when they are SCHED_OTHER. False for a thread gone.
    pub fn outranks(&self, tid: i32) -> bool {
        (self.outranks)(tid)
    }
}

/// What a probe asks of a kernel tracer beside it.
pub struct Beside {
    pub tracer: Tracer,
    /// Its global settings (written back after).
    pub settings: Vec<Setting>,
    /// The events decoded (the tracer's own `ftrace/NAME`, osnoise's
    /// tracepoints), enabled in its instance.
    pub events: &'static [&'static str],
    /// The series it records per CPU, in order.
    pub metrics: &'static [&'static str],
    /// Which metric a record goes to and its value (ns); None: not
    /// recorded. `own`: the probe's measuring threads' ids.
    pub route: Route,
    /// Asked for by name, the flag as given (`--timerlat on`): a kernel
    /// that cannot run it fails the cell, rather than a note saying why
    /// not.
    pub required: Option<&'static str>,
    /// The scheduling its workload threads get (timerlat's), None: the
    /// kernel's.
    pub threads_at: Option<(Policy, u8)>,
    /// The period of its workload's timer (timerlat's), ns, where the
    /// probe's threads wake at the same period: each of them then starts
    /// half a period away from the tracer's wake-ups on its CPU, so that
    /// neither delays the other.
    pub align: Option<u64>,
    /// What it adds, for the run's note (after "the kernel's TRACER tracer
    /// ran beside the probe").
    pub what: String,
    /// Whether its IRQ records are of a timer of its own, beside the
    /// probe's (timerlat's threads beside `wakeup`): timer interrupts
    /// rtscope caused ([`crate::recorder::own_timers`]).
    pub own_timer: bool,
}

/// A cell's kernel tracer: running, or why not.
pub(super) enum Side {
    Running(Box<(Beside, KernelTracer)>),
    /// Why it could not start (a note of the run, and the plan's).
    Refused(Tracer, String),
}

impl Side {
    /// Starts `probe`'s tracer on the cell's CPUs, if it asks for one;
    /// an error where it was required and cannot run.
    pub(super) fn prepare(probe: &dyn Probe, common: &Common) -> anyhow::Result<Option<Side>> {
        let Some(b) = probe.beside(common) else { return Ok(None) };
        let started = KernelTracer::start(b.tracer, &common.cpus, &b.settings, b.events, BUFFER_KB)
            .and_then(|k| probe.tracer_started(common, k.root()).map(|()| k));
        match (started, b.required) {
            (Ok(k), _) => Ok(Some(Side::Running(Box::new((b, k))))),
            (Err(e), Some(flag)) => Err(anyhow::anyhow!("{flag}: the {} tracer cannot run: {e}", b.tracer.name())),
            (Err(e), None) => Ok(Some(Side::Refused(b.tracer, e))),
        }
    }

    /// For the cell's plan.
    pub(super) fn plan(&self) -> serde_json::Value {
        match self {
            Side::Running(r) => serde_json::json!({
                "tracer": r.0.tracer, "instance": r.1.name, "metrics": r.0.metrics, "what": r.0.what,
            }),
            Side::Refused(t, why) => serde_json::json!({ "tracer": t, "not_used": why }),
        }
    }

    /// The metrics it records per CPU (none when it did not start).
    pub(super) fn metrics(&self) -> &'static [&'static str] {
        match self {
            Side::Running(r) => r.0.metrics,
            Side::Refused(..) => &[],
        }
    }
}

/// What the reader counted, per CPU (the tracer's order): records per
/// metric recorded (past the warm-up).
pub(super) struct SideReport {
    pub(super) counts: Vec<(usize, Vec<u64>)>,
}

/// What the reader gives back: the tracer (stopped by [`finish`]) and its
/// counts.
pub(super) type SideEnd = (Beside, KernelTracer, Vec<CpuReader>, SideReport);

/// Turns the tracer on, gives its workload threads their scheduling and
/// starts its reader: it records each CPU's records into `recs` (per CPU,
/// per metric) from `from_ns` until `done`, then drains what is left and
/// finishes them. Returns the tracer with the report for the notes.
pub(super) fn spawn<'scope>(
    scope: &'scope Scope<'scope, '_>,
    (b, mut k): (Beside, KernelTracer),
    (mut recs, expiry): (Vec<Vec<Recorder>>, &'scope [AtomicU64]),
    (tids, from_ns): (&'scope [AtomicI32], u64),
    done: &'scope AtomicBool,
    notes: &mut Vec<String>,
) -> Option<ScopedJoinHandle<'scope, SideEnd>> {
    if let Err(e) = k.set_on(true) {
        notes.push(format!("{}: not used: {e}", b.tracer.name()));
        return None;
    }
    let mut at = String::new();
    if let Some((policy, prio)) = b.threads_at {
        let threads = k.threads();
        let set: Vec<String> = threads
            .iter()
            .filter(|(tid, _)| sched::set_thread(*tid, policy, prio).is_ok())
            .map(|(_, c)| c.clone())
            .collect();
        if !set.is_empty() {
            at = format!(" ({} at {} {prio})", set.join(", "), policy.kernel_name());
        }
    }
    notes.push(format!(
        "{}: the kernel's {} tracer ran beside the probe{at}: {}",
        b.tracer.name(),
        b.tracer.name(),
        b.what
    ));
    let name = b.tracer.name();
    let spawned = std::thread::Builder::new().name("rtscope-ktrace".into()).spawn_scoped(scope, move || {
        signals::block_in_this_thread();
        for per_cpu in &mut recs {
            for r in per_cpu.iter_mut() {
                r.start_after_warmup(from_ns);
            }
        }
        let own: Vec<i32> = tids.iter().map(|t| t.load(Relaxed)).collect();
        let probe = own.first().and_then(|&t| sched::attr_of(t));
        let cache = std::cell::RefCell::new(std::collections::HashMap::<i32, bool>::new());
        let outranks = |tid: i32| {
            *cache.borrow_mut().entry(tid).or_insert_with(|| {
                let (Some(p), Some(t)) = (probe, sched::attr_of(tid)) else { return false };
                let rt = |a: &sched::Attr| matches!(a.policy, sched::SCHED_FIFO | sched::SCHED_RR);
                !rt(&p) || (rt(&t) && t.priority >= p.priority) || t.policy == sched::SCHED_DEADLINE
            })
        };
        let cx = RouteCtx { own: &own, outranks: &outranks };
        let mut readers = k.readers();
        let mut page = vec![0u8; readers.first().map_or(4096, CpuReader::page_size)];
        let mut report = SideReport { counts: k.cpus.iter().map(|&c| (c, vec![0; b.metrics.len()])).collect() };
        let route = b.route;
        let (own_timer, cpus) = (b.own_timer, k.cpus.clone());
        loop {
            let last = done.load(Acquire);
            for (i, (per_cpu, reader)) in recs.iter_mut().zip(&mut readers).enumerate() {
                let counts = &mut report.counts[i].1;
                reader.drain(&mut page, |t, rec| {
                    // Where its timer expired: the probe's threads keep away.
                    if let (Rec::Timerlat { context: Context::Irq, latency_ns, .. }, Some(e)) = (rec, expiry.get(i)) {
                        e.store(t.saturating_sub(latency_ns), Relaxed);
                        if own_timer {
                            crate::recorder::own_timers::add(cpus[i], 1);
                        }
                    }
                    if let Some((m, v)) = route(&rec, &cx).filter(|&(m, _)| m < per_cpu.len()) {
                        if t >= from_ns {
                            counts[m] += 1;
                        }
                        per_cpu[m].record(t, v);
                        per_cpu[m].maybe_checkpoint(t);
                    }
                });
            }
            if last {
                break;
            }
            std::thread::sleep(PERIOD);
        }
        let now = clock::now();
        for per_cpu in recs {
            for r in per_cpu {
                r.finish(now);
            }
        }
        (b, k, readers, report)
    });
    match spawned {
        Ok(t) => Some(t),
        Err(e) => {
            notes.push(format!("{name}: its reader thread could not start ({e}): no series"));
            None
        }
    }
}

/// Puts each measuring thread's first period (`phases`, per thread) half
/// of `period` away from the tracer's timer on its CPU, as its first
/// expiries (`expiry`, per CPU, set by the reader) show; waits for them
/// until 10 ms before `start_ns`. Where one is not seen by then, that
/// thread keeps the common start, and a note says so.
pub(super) fn align(period: u64, start_ns: u64, expiry: &[AtomicU64], phases: &[AtomicU64], notes: &mut Vec<String>) {
    let until = start_ns.saturating_sub(10_000_000);
    while expiry.iter().any(|e| e.load(Relaxed) == 0) && clock::now() < until {
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut unseen = 0;
    for (e, p) in expiry.iter().zip(phases) {
        match e.load(Relaxed) {
            0 => unseen += 1,
            e => p.store(phase(e, period, start_ns), Relaxed),
        }
    }
    if unseen > 0 {
        notes.push(format!(
            "timerlat: its timer was not seen on {unseen} CPU(s) before the start: there the probe's wake-ups may \
             coincide with timerlat's, and each delays the other"
        ));
    }
}

/// How long after `start_ns` a thread of period `period` starts so that
/// it wakes half a period away from a timer that expired at `expiry` with
/// the same period.
fn phase(expiry: u64, period: u64, start_ns: u64) -> u64 {
    let want = i128::from(expiry) + i128::from(period / 2) - i128::from(start_ns);
    want.rem_euclid(i128::from(period.max(1))) as u64
}

/// The notes on what the tracer recorded, then it is stopped and its
/// settings written back (dropped).
pub(super) fn finish((b, k, readers, report): SideEnd, notes: &mut Vec<String>) {
    let _ = k.set_on(false);
    let name = b.tracer.name();
    let per_cpu: Vec<String> = report
        .counts
        .iter()
        .map(|(c, n)| {
            let each: Vec<String> = b.metrics.iter().zip(n).map(|(m, n)| format!("{n} {m}")).collect();
            format!("CPU {c}: {}", each.join(", "))
        })
        .collect();
    notes.push(format!("{name}: recorded {}", per_cpu.join("; ")));
    let flagged: u64 = readers.iter().map(|r| r.lost).sum();
    let lost: u64 = k.cpus.iter().map(|&c| k.lost_on(c)).sum::<u64>().max(flagged);
    if lost > 0 {
        notes.push(format!("{name}: the kernel lost {lost} of its records (ring buffer full)"));
    }
    let (unknown, errors): (u64, u64) =
        readers.iter().map(|r| (r.unknown, r.read_errors)).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    if unknown + errors > 0 {
        notes.push(format!("{name}: {unknown} records not decoded, {errors} pages unreadable"));
    }
    // Its buffers closed first: the kernel keeps an instance whose files
    // are open.
    drop(readers);
    drop(k);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe's wake-ups (its start plus whole periods after the phase)
    /// fall half a period from the tracer's, whichever comes first.
    #[test]
    fn the_phase_keeps_half_a_period_away() {
        let period = 1_000_000;
        for (expiry, start) in [(5_300_000u64, 7_000_000u64), (9_900_000, 7_000_000), (7_000_000, 7_000_000)] {
            let p = phase(expiry, period, start);
            assert!(p < period);
            let wake = start + p + period;
            let from_tracer = (wake as i128 - expiry as i128).rem_euclid(period as i128);
            assert_eq!(from_tracer, 500_000, "expiry {expiry} start {start}: phase {p}");
        }
    }
}
