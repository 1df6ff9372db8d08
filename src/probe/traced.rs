//! `--trace` set up for a cell: the code's parts (`--stacks`' buffers,
//! `--sample-hz`'s profilers), the reader's lanes, one per traced CPU, and
//! the trace's threads (the reader and the symbols thread) started.

use super::{Common, LanePart, Probe, Shared, WRITER_STACK};
use crate::recorder::EpisodeMsg;
use crate::session::CellOutcome;
use crate::sys::perf::Sampler;
use crate::sys::signals;
use crate::trace::decompose::{CpuTrace, Settings};
use crate::trace::instance::Instance;
use crate::trace::reader::{Lane, Reader, ReaderReport};
use crate::trace::stacks::StackDecoder;
use crate::trace::symbols::{Sink, SymReport};
use crate::trace::{CodeReport, TraceClock, TraceOpts};
use rtscope_model::episode::timeline::Timeline;
use std::sync::atomic::AtomicI32;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::Sender;
use std::thread::{Scope, ScopedJoinHandle};

/// What the code's trace adds to each lane: `--stacks`' buffers and
/// decoders, `--sample-hz`'s profilers (one per CPU, or none).
pub(super) struct CodeParts {
    pub(super) stacks: Option<Vec<(std::fs::File, StackDecoder)>>,
    pub(super) samplers: Option<Vec<Sampler>>,
}

/// `--stacks`, timed on the probe's threads while they wait to start, and
/// `--sample-hz`'s profilers; neither without a trace instance.
pub(super) fn code_parts(
    instance: Option<&mut Instance>,
    (probe, common): (&dyn Probe, &Common),
    shared: &Shared,
    code: &mut CodeReport,
) -> CodeParts {
    let traced = instance.is_some();
    let mut stacks = None;
    if let (Some(inst), Some(opts)) = (instance, common.trace)
        && probe.trace_stages() == Some(true)
        && !shared.stop.load(Relaxed)
    {
        let tids: Vec<i32> = shared.tids.iter().map(|t| t.load(Relaxed)).collect();
        stacks = crate::trace::code::stacks(inst, &common.cpus, &tids, opts.stacks, code);
    }
    let samplers = match common.trace.map(|o| o.sample_hz) {
        Some(hz) if traced && hz > 0 => crate::trace::code::samplers(&common.cpus, hz, code),
        _ => None,
    };
    CodeParts { stacks, samplers }
}

/// The trace's threads: the reader and, when a lane has code to name, the
/// symbols thread between it and the writer.
#[derive(Default)]
pub(super) struct TraceThreads<'scope> {
    pub(super) reader: Option<ScopedJoinHandle<'scope, ReaderReport>>,
    pub(super) symbols: Option<ScopedJoinHandle<'scope, SymReport>>,
}

/// `--trace`: one lane per CPU, the episodes' way to the writer (through
/// the symbols thread when there is code to name), the profilers enabled,
/// the tracer on and the reader started; returns them and the measuring's
/// start, START_DELAY_NS after they are set up. A thread that cannot
/// start, or a tracer that cannot be turned on, is an error of the cell and
/// stops the measuring threads before they start.
pub(super) fn start_trace<'scope>(
    scope: &'scope Scope<'scope, '_>,
    (probe, common): (&dyn Probe, &Common),
    (inst, opts): (&mut Instance, TraceOpts),
    (lane_parts, parts): (Vec<LanePart>, CodeParts),
    episode_tx: &Sender<EpisodeMsg>,
    shared: &'scope Shared,
    out: &mut CellOutcome,
) -> (TraceThreads<'scope>, u64) {
    let mut threads = TraceThreads::default();
    let stop_on = opts.stop;
    let lanes = trace_lanes((probe, common), (inst, opts), lane_parts, &shared.tids, parts);
    let hw = lanes.iter().any(|l| l.sampler().is_some_and(|s| s.source == crate::sys::perf::Source::Cycles));
    let writer_tx = episode_tx.clone();
    let sink = if lanes.iter().any(Lane::has_code) {
        let (sym_tx, sym_rx) = std::sync::mpsc::channel();
        // /proc/kallsyms read and the symbolizer set up before the probe's
        // threads start, not in their first milliseconds on the CPUs they
        // measure: this waits for it.
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        match std::thread::Builder::new().name("rtscope-symbols".into()).stack_size(WRITER_STACK).spawn_scoped(
            scope,
            move || {
                signals::block_in_this_thread();
                let mut symbols = crate::trace::symbols::Symbols::new();
                symbols.warm();
                let _ = ready_tx.send(());
                crate::trace::symbols::run(symbols, sym_rx, writer_tx, hw)
            },
        ) {
            Ok(t) => {
                // A vmlinux with DWARF can take seconds; past that, go on.
                let waited = ready_rx.recv_timeout(std::time::Duration::from_secs(10));
                if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = waited {
                    out.notes.push(
                        "--trace: the symbols thread took over 10 s to read the kernel's symbols: the probe started \
                         while it went on"
                            .into(),
                    );
                }
                threads.symbols = Some(t);
            }
            Err(e) => {
                out.errors.push(format!("--trace: cannot start the symbols thread: {e}"));
                shared.stop.store(true, Relaxed);
            }
        }
        Sink::Symbols(sym_tx)
    } else {
        Sink::Writer(writer_tx)
    };
    let start_ns = crate::sys::clock::now() + super::START_DELAY_NS;
    for l in &lanes {
        if let Some(s) = l.sampler()
            && let Err(e) = s.enable(true)
        {
            out.notes.push(format!("--sample-hz: {e}"));
        }
    }
    let maps =
        if matches!(sink, Sink::Symbols(_)) { crate::trace::code::map_watches(&mut out.notes) } else { Vec::new() };
    let wakes = remote_wakes((probe, common), inst, &shared.tids, &mut out.notes);
    let reader = Reader {
        stop_on,
        stage_hit: None,
        layout: inst.layout,
        decoder: std::mem::take(&mut inst.decoder),
        lanes,
        episodes: sink,
        maps,
        told: vec![],
        wakes,
        timeline: match common.trace.as_ref().is_some_and(|t| t.timeline) {
            true => Timeline::new(Timeline::MAX_ITEMS),
            false => Timeline::off(),
        },
    };
    if let Err(e) = inst.set_on(true) {
        out.errors.push(format!("--trace: {e}"));
        shared.stop.store(true, Relaxed);
    }
    let done = &shared.reader_done;
    let spawned = std::thread::Builder::new().name("rtscope-trace".into()).stack_size(WRITER_STACK).spawn_scoped(
        scope,
        move || {
            signals::block_in_this_thread();
            reader.run(start_ns, done, (&shared.stop, &shared.stage_hit))
        },
    );
    match spawned {
        Ok(t) => threads.reader = Some(t),
        Err(e) => {
            out.errors.push(format!("--trace: cannot start the reader thread: {e}"));
            shared.stop.store(true, Relaxed);
        }
    }
    (threads, start_ns)
}

/// A datagram's wake-up made on another CPU (`netlat --sender-cpu`): the
/// probe threads' wakings there, read from an instance of their own
/// ([`crate::trace::wakes`]), so that the time before the wake-up is not
/// blamed on what ran on the receiver's CPU. None for a timer's wake-up
/// (always on the probe's CPU), or where the instance cannot be made (a
/// note says why).
fn remote_wakes(
    (probe, common): (&dyn Probe, &Common),
    inst: &mut Instance,
    tids: &[AtomicI32],
    notes: &mut Vec<String>,
) -> Vec<(usize, crate::trace::reader::Buffer)> {
    if probe.wake_path() != crate::trace::decompose::WakePath::NetRx || !inst.can_follow(probe.wake_path()) {
        return Vec::new();
    }
    let tids: Vec<i32> = tids.iter().map(|t| t.load(Relaxed)).collect();
    let made =
        inst.add_wakes(&common.cpus, &tids).and_then(|()| inst.wakes.as_ref().map_or(Ok(vec![]), |w| w.buffers()));
    match made {
        // Read unmapped: the reader maps them by the woken thread's CPU.
        Ok(b) => b.into_iter().map(|(cpu, f)| (cpu, crate::trace::reader::Buffer::new(f, TraceClock::Mono))).collect(),
        Err(e) => {
            notes.push(format!(
                "--trace: the receiver's wake-ups on other CPUs are not recorded ({e}): where another CPU wakes it, \
                 the time before its wake-up shows as what ran on the receiver's CPU"
            ));
            Vec::new()
        }
    }
}

/// The trace reader's lanes, one per traced CPU: the probe's thread
/// followed in its buffer (split into stages where the instance can follow
/// the probe's wake-up path), with its stacks and profiler when the code
/// is traced.
pub(super) fn trace_lanes(
    (probe, common): (&dyn Probe, &Common),
    (inst, opts): (&Instance, TraceOpts),
    lane_parts: Vec<LanePart>,
    tids: &[AtomicI32],
    parts: CodeParts,
) -> Vec<Lane> {
    let path = probe.wake_path();
    let settings = Settings {
        cause_threshold: opts.cause_threshold,
        max_episodes: opts.max_episodes,
        timer_entry: inst.timer_entry,
        stages: probe.trace_stages() == Some(true) && inst.can_follow(path),
        path,
        classify_all: opts.classify_all,
    };
    let name = common.series_name(probe);
    let metric = probe.metrics()[0];
    let mut stack_parts = parts.stacks.map(Vec::into_iter);
    let mut samplers = parts.samplers.map(Vec::into_iter);
    lane_parts
        .into_iter()
        .zip(tids)
        .map(|((c, buffer, samples, stage_recs), tid)| {
            let trace = CpuTrace::new(c as i64, name, metric, tid.load(Relaxed), settings);
            let mut lane = Lane::new(buffer, trace, samples, stage_recs, (opts.clock, common.checkpoint_ns));
            if let Some((file, dec)) = stack_parts.as_mut().and_then(Iterator::next) {
                lane = lane.with_stacks(file, dec);
            }
            if let Some(s) = samplers.as_mut().and_then(Iterator::next) {
                lane = lane.with_sampler(s);
            }
            lane
        })
        .collect()
}
