//! A cell's threads: what they share, the writer, the measuring threads
//! and their start line, following the measured threads, joining them,
//! and each thread's series at the end. `Cell::run` (in `mod.rs`) drives
//! them.

use super::*;

/// What the cell's threads and the main thread share, made before any
/// thread starts: the start line (see [`StartLine`]), each measuring
/// thread's id (the trace follows it) and figures (`Probe::extra_slots`
/// each), and the word that tells the trace reader to finish.
pub(super) struct Shared {
    pub(super) stop: AtomicBool,
    pub(super) breach: Breach,
    /// The first wake-up the trace reader found above `--stop-irq` or
    /// `--stop-thread`.
    pub(super) stage_hit: crate::trace::StageHit,
    pub(super) ready: AtomicUsize,
    pub(super) start_at: AtomicU64,
    pub(super) tids: Vec<AtomicI32>,
    /// Per thread: how long after the common start its first period
    /// begins ([`Probe::first_offset`]; beside a kernel tracer whose
    /// wake-ups it keeps away from, [`Beside::align`]'s).
    pub(super) phases: Vec<AtomicU64>,
    pub(super) extras: Vec<AtomicU64>,
    /// Per thread's CPU: the kernel tracer's last timer expiry there
    /// ([`ThreadCtx::tracer_expiry`]).
    pub(super) expiry: Vec<AtomicU64>,
    pub(super) reader_done: AtomicBool,
}

/// Where one instance's threads begin in a cell of several: its first
/// thread's index, its first figure ([`Shared::extras`]) and its first
/// series sink (the writer's).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Lanes {
    pub(super) thread: usize,
    pub(super) extra: usize,
    pub(super) sink: usize,
}

impl Shared {
    /// For `threads` measuring threads with `extras` figures in all.
    pub(super) fn new(threads: usize, extras: usize) -> Shared {
        Shared {
            stop: AtomicBool::new(false),
            breach: Breach::default(),
            stage_hit: Default::default(),
            ready: AtomicUsize::new(0),
            start_at: AtomicU64::new(0),
            tids: (0..threads).map(|_| AtomicI32::new(0)).collect(),
            phases: (0..threads).map(|_| AtomicU64::new(0)).collect(),
            extras: (0..extras).map(|_| AtomicU64::new(0)).collect(),
            expiry: (0..threads).map(|_| AtomicU64::new(0)).collect(),
            reader_done: AtomicBool::new(false),
        }
    }
}

/// The writer thread: hands the recorders' intervals (and the trace's
/// episodes) to the store every 50 ms until every recorder has finished,
/// or the store fails.
pub(super) fn spawn_writer<'scope>(
    scope: &'scope Scope<'scope, '_>,
    writer: Writer,
) -> std::io::Result<ScopedJoinHandle<'scope, WriterEnd>> {
    std::thread::Builder::new().name("rtscope-writer".into()).stack_size(WRITER_STACK).spawn_scoped(scope, || {
        let mut writer = writer;
        signals::block_in_this_thread();
        loop {
            match writer.poll() {
                Ok(true) => return (writer, None),
                Ok(false) => std::thread::sleep(Duration::from_millis(50)),
                Err(e) => return (writer, Some(e)),
            }
        }
    })
}

/// One measuring thread per CPU of one instance, each with its
/// recorders, in the shared figures from `lanes` on; a thread that cannot
/// be spawned is an error of the cell and stops the others before they
/// start.
pub(super) fn spawn_measuring<'scope>(
    scope: &'scope Scope<'scope, '_>,
    (probe, common, policy, priority): (&'scope dyn Probe, &'scope Common, Policy, u8),
    recorders: Vec<Vec<Recorder>>,
    (shared, lanes): (&'scope Shared, &Lanes),
    out: &mut CellOutcome,
) -> Vec<Measuring<'scope>> {
    let slots = probe.extra_slots();
    let mut threads = Vec::new();
    for (index, (recs, &c)) in recorders.into_iter().zip(&common.cpus).enumerate() {
        let (t, x) = (lanes.thread + index, lanes.extra + index * slots);
        let plan = ThreadPlan {
            probe,
            common,
            policy,
            priority,
            index,
            thread: t,
            cpu: c,
            tid: &shared.tids[t],
            phase: &shared.phases[t],
            expiry: &shared.expiry[t],
            extras: &shared.extras[x..x + slots],
            line: StartLine {
                stop: &shared.stop,
                breach: &shared.breach,
                ready: &shared.ready,
                start_at: &shared.start_at,
            },
        };
        let spawned = std::thread::Builder::new()
            .name(format!("rtscope-{}{c}", probe.name()))
            .stack_size(STACK_SIZE)
            .spawn_scoped(scope, move || measuring_thread(plan, recs));
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                out.errors.push(format!("CPU {c}: cannot start the measuring thread: {e}"));
                shared.stop.store(true, Relaxed);
                break;
            }
        }
    }
    threads
}

/// The main thread while the measuring threads run: stops them on a
/// signal or when the writer has ended (the store failed), and shows the
/// progress line: elapsed, remaining and the running worst case; on a
/// terminal, the live per-CPU view under it ([`progress::cpu_table`]).
pub(super) fn follow(
    (probe, common, name, load): (&dyn Probe, &Common, &str, &Option<String>),
    lives: &[(usize, Arc<Live>)],
    start_ns: u64,
    (threads, writer): (&[Measuring<'_>], &ScopedJoinHandle<'_, WriterEnd>),
    signal: &AtomicBool,
    stop: &AtomicBool,
) {
    let warmup = common.warmup_ns;
    let label = match load {
        Some(l) => format!("{name} under {l}"),
        None => name.to_string(),
    };
    let mut status = Status::new(!common.quiet, progress::stderr_is_tty(), common.duration_ns);
    while threads.iter().any(|t| !t.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
        if signal.load(Relaxed) || writer.is_finished() {
            stop.store(true, Relaxed);
        }
        let now = clock::now();
        if status.due(now.saturating_sub(start_ns)) && !stop.load(Relaxed) {
            let worst = lives.iter().map(|(c, live)| (live.max.load(Relaxed), *c)).filter(|&(max, _)| max > 0).max();
            let line = CellProgress {
                label: &label,
                metric: probe.metrics()[0],
                elapsed_ns: now.saturating_sub(start_ns + warmup),
                warmup_left_ns: (start_ns + warmup).saturating_sub(now),
                planned_ns: common.duration_ns,
                loops: common.loops,
                samples: lives.iter().map(|(_, live)| live.count.load(Relaxed)).sum(),
                worst,
            }
            .line();
            if status.on_tty() {
                // The live per-CPU view (rtla timerlat top's), under it.
                let rows: Vec<_> = lives.iter().map(|(c, live)| (*c, figures(live))).collect();
                let mut block = vec![line];
                let room = progress::tty_height().saturating_sub(2);
                block.extend(progress::cpu_table(probe.metrics()[0], common.unit, &rows, room));
                status.show_block(now.saturating_sub(start_ns), &block);
            } else {
                status.show(now.saturating_sub(start_ns), &line);
            }
        }
    }
    status.clear();
}

/// A series' live figures as they are now (None before its first
/// sample): each read on its own, as the measuring thread stores them.
fn figures(live: &Live) -> Option<progress::CpuFigures> {
    let count = live.count.load(Relaxed);
    (count > 0).then(|| progress::CpuFigures {
        count,
        cur: live.cur.load(Relaxed),
        min: live.min.load(Relaxed),
        mean: live.sum.load(Relaxed) as f64 / count as f64,
        max: live.max.load(Relaxed),
    })
}

/// Joins the measuring threads, then tells the trace reader to finish and
/// joins it, the symbols thread (its report into `code`) and the writer.
pub(super) fn join_all<'scope>(
    threads: Vec<Measuring<'scope>>,
    (traced, side, side_end): (TraceThreads<'scope>, Option<SideThread<'scope>>, &mut Option<beside::SideEnd>),
    writer: ScopedJoinHandle<'scope, WriterEnd>,
    reader_done: &AtomicBool,
    out: &mut CellOutcome,
    code: &mut CodeReport,
) -> Result<Ended> {
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => out.errors.push(e),
            Err(_) => out.errors.push("a measuring thread panicked".into()),
        }
    }
    reader_done.store(true, Release);
    match side.map(|t| t.join()) {
        Some(Ok(end)) => *side_end = Some(end),
        Some(Err(_)) => out.errors.push("the kernel tracer's reader thread panicked".into()),
        None => {}
    }
    let report = match traced.reader.map(|t| t.join()) {
        Some(Ok(r)) => Some(r),
        Some(Err(_)) => {
            out.errors.push("the trace reader thread panicked".into());
            None
        }
        None => None,
    };
    if let Some(t) = traced.symbols {
        match t.join() {
            Ok(r) => code.symbols = r,
            Err(_) => out.errors.push("the symbols thread panicked".into()),
        }
    }
    let writer = writer.join().map_err(|_| anyhow!("the writer thread panicked"))?;
    Ok((writer, report))
}

/// After the threads: each thread's error from its figures and totals,
/// the extra columns of the probe's own series (not where the store
/// failed) and the probe's notes per CPU. `values`: the instance's
/// threads' figures (`Probe::extra_slots` each) and `sinks` its series,
/// the probe's own first (each from the instance's first on).
pub(super) fn per_thread_results(
    (probe, common): (&dyn Probe, &Common),
    (values, sinks): (&[u64], &[recorder::SeriesSink]),
    (store_ok, store): (bool, &mut rtscope_model::store::Store),
    (name, load): (&str, &Option<String>),
    out: &mut CellOutcome,
) -> Result<()> {
    let metrics = probe.metrics().len();
    let slots = probe.extra_slots();
    for (index, &c) in common.cpus.iter().enumerate() {
        let totals: Vec<&Tally> = sinks.iter().skip(index * metrics).take(metrics).map(|s| s.total()).collect();
        if let Some(e) = probe.thread_error(c, &values[index * slots..(index + 1) * slots], &totals) {
            out.errors.push(format!("CPU {c}: {e}"));
        }
    }
    if store_ok {
        // The probe's own series come first; the trace's stage series after.
        for (i, sink) in sinks.iter().enumerate().take(common.cpus.len() * metrics) {
            let thread = &values[i / metrics * slots..(i / metrics + 1) * slots];
            let row = probe.row_extras(i % metrics, thread, sink.total());
            if !row.is_empty() {
                store.set_series_extra(sink.series_id, &row)?;
            }
        }
    }
    let under = load.as_ref().map(|l| format!(" under {l}")).unwrap_or_default();
    for (i, &c) in common.cpus.iter().enumerate() {
        for n in probe.notes(&values[i * slots..(i + 1) * slots]) {
            out.notes.push(format!("{name} CPU {c}{under}: {n}"));
        }
    }
    Ok(())
}

/// A cell's series, created in the store before any thread starts: per
/// CPU the probe's recorders (their sinks for the writer, their live
/// figures for the progress line) and, with `--trace`, the ring that
/// mirrors each sample to the reader with the stage series it records.
#[derive(Default)]
pub(super) struct Series {
    pub(super) recorders: Vec<Vec<Recorder>>,
    pub(super) sinks: Vec<recorder::SeriesSink>,
    pub(super) lives: Vec<(usize, Arc<Live>)>,
    pub(super) mirror_lost: Vec<Arc<AtomicU64>>,
    /// Per traced CPU: the CPU, its trace buffer, the mirrored samples and
    /// the stage series' recorders.
    pub(super) lane_parts: Vec<LanePart>,
    /// A traced probe's main series by (probe, metric, CPU), whose
    /// episodes a monitor counts per cause class.
    pub(super) explained: Vec<((String, String, i64), i64)>,
    /// The kernel tracer's series beside the probe's, per CPU and metric.
    pub(super) side_recs: Vec<Vec<Recorder>>,
}

/// One traced CPU's part of a lane: the CPU, its trace buffer, the
/// mirrored samples and the stage series' recorders.
pub(super) type LanePart = (usize, std::fs::File, rtrb::Consumer<Sample>, Vec<Recorder>);

impl Series {
    /// Adds `other`'s series after these (another instance's).
    pub(super) fn append(&mut self, other: Series) {
        self.recorders.extend(other.recorders);
        self.sinks.extend(other.sinks);
        self.lives.extend(other.lives);
        self.mirror_lost.extend(other.mirror_lost);
        self.lane_parts.extend(other.lane_parts);
        self.explained.extend(other.explained);
        self.side_recs.extend(other.side_recs);
    }

    pub(super) fn create(
        store: &mut rtscope_model::store::Store,
        run_id: i64,
        (probe, common, side_metrics): (&dyn Probe, &Common, &[&str]),
        load: &Option<String>,
        instance: Option<&Instance>,
        markers: Vec<Marker>,
        tap: Option<&Arc<dyn Tap>>,
    ) -> Result<Series> {
        let name = common.series_name(probe);
        let key = |metric: &str, c: usize| SeriesKey {
            probe: name.into(),
            metric: metric.into(),
            cpu: c as i64,
            load: load.clone(),
        };
        let mut recorders: Vec<Vec<Recorder>> = Vec::new();
        let mut sinks = Vec::new();
        let mut lives: Vec<(usize, Arc<Live>)> = Vec::new();
        let mut explained = Vec::new();
        for &c in &common.cpus {
            let mut per_thread = Vec::new();
            for (i, metric) in probe.metrics().iter().enumerate() {
                let sid = store.add_series(run_id, &key(metric, c), "ns", &common.exceed.describe())?;
                if let Some(tap) = tap {
                    tap.series(sid, &key(metric, c));
                    // The reader explains the first metric's samples.
                    if i == 0 && instance.is_some() {
                        tap.explained(sid);
                        explained.push(((name.to_string(), metric.to_string(), c as i64), sid));
                    }
                }
                let (rec, sink, live) =
                    recorder::channel_with(sid, common.checkpoint_ns, common.exceed, probe.signed());
                per_thread.push(rec);
                sinks.push(sink);
                if lives.iter().all(|(cpu, _)| *cpu != c) {
                    lives.push((c, live));
                }
            }
            recorders.push(per_thread);
        }
        // --trace: every sample is mirrored to the reader, which records the
        // stage series itself.
        let mut mirror_lost: Vec<Arc<AtomicU64>> = Vec::new();
        let mut lane_parts = Vec::new();
        if let Some(inst) = instance {
            let buffers = inst.buffers(&common.cpus).map_err(anyhow::Error::msg)?;
            for ((recs, &c), buffer) in recorders.iter_mut().zip(&common.cpus).zip(buffers) {
                let (tx, rx) = rtrb::RingBuffer::<Sample>::new(MIRROR_RING);
                let lost = Arc::new(AtomicU64::new(0));
                recs[0].set_mirror(Mirror { tx, lost: Arc::clone(&lost) });
                mirror_lost.push(lost);
                let mut stage_recs = Vec::new();
                if probe.trace_stages() == Some(true) && inst.can_follow(probe.wake_path()) {
                    for &metric in Stages::of_path(probe.wake_path()).1 {
                        let sid = store.add_series(run_id, &key(metric, c), "ns", &common.exceed.describe())?;
                        let (rec, sink, _) = recorder::channel(sid, common.checkpoint_ns, common.exceed);
                        stage_recs.push(rec);
                        sinks.push(sink);
                    }
                }
                lane_parts.push((c, buffer, rx, stage_recs));
            }
        }
        for (recs, marker) in recorders.iter_mut().zip(markers) {
            recs[0].set_marker(marker);
        }
        // The kernel tracer's series come last: per_thread_results takes
        // the probe's own first.
        let mut side_recs = Vec::new();
        if !side_metrics.is_empty() {
            for &c in &common.cpus {
                let mut per_cpu = Vec::new();
                for metric in side_metrics {
                    let sid = store.add_series(run_id, &key(metric, c), "ns", &common.exceed.describe())?;
                    if let Some(tap) = tap {
                        tap.series(sid, &key(metric, c));
                    }
                    let (rec, sink, _) = recorder::channel(sid, common.checkpoint_ns, common.exceed);
                    per_cpu.push(rec);
                    sinks.push(sink);
                }
                side_recs.push(per_cpu);
            }
        }
        Ok(Series { recorders, sinks, lives, mirror_lost, lane_parts, explained, side_recs })
    }
}

/// What the measuring threads and the main thread share: each thread
/// counts itself `ready`, then waits for the common start instant
/// (`start_at`, 0: not yet) or for `stop` (a failed set-up or spawn: nobody
/// measures); `breach` takes the first sample above `--threshold`.
pub(super) struct StartLine<'s> {
    pub(super) stop: &'s AtomicBool,
    pub(super) breach: &'s Breach,
    pub(super) ready: &'s AtomicUsize,
    pub(super) start_at: &'s AtomicU64,
}

/// What one measuring thread is given.
pub(super) struct ThreadPlan<'s> {
    pub(super) probe: &'s dyn Probe,
    pub(super) common: &'s Common,
    pub(super) policy: Policy,
    pub(super) priority: u8,
    /// Its index among the instance's threads, among the cell's, and its
    /// CPU.
    pub(super) index: usize,
    pub(super) thread: usize,
    pub(super) cpu: usize,
    /// Where it publishes its thread id (the trace follows it).
    pub(super) tid: &'s AtomicI32,
    /// Its first period's offset from the common start.
    pub(super) phase: &'s AtomicU64,
    /// Its CPU's last timer expiry as a kernel tracer beside the probe
    /// timestamped it (0: none yet).
    pub(super) expiry: &'s AtomicU64,
    /// Its per-thread figures (`Probe::extra_slots`).
    pub(super) extras: &'s [AtomicU64],
    pub(super) line: StartLine<'s>,
}

/// One measuring thread: pins itself to its CPU at the cell's policy,
/// counts itself ready, waits for the common start, measures into `recs`
/// (warm-up, then the duration, the loops or a stop) and finishes them.
pub(super) fn measuring_thread(plan: ThreadPlan<'_>, mut recs: Vec<Recorder>) -> std::result::Result<(), String> {
    let ThreadPlan {
        index,
        thread,
        cpu: c,
        tid,
        phase: shared_phase,
        expiry,
        extras,
        line: StartLine { stop, breach, ready, start_at },
        ..
    } = plan;
    let warmup = plan.common.warmup_ns;
    let loops = plan.common.loops.unwrap_or(u64::MAX);
    signals::block_in_this_thread();
    let mut err = None;
    if let Err(e) = cpu::pin_self(&[c]) {
        err = Some(format!("CPU {c}: cannot pin: {e}"));
    } else if let Err(e) = sched::set_self(plan.policy, plan.priority) {
        err = Some(format!("CPU {c}: cannot set {} {}: {e}", plan.policy.kernel_name(), plan.priority));
    }
    if err.is_some() {
        stop.store(true, Relaxed);
    }
    mem::prefault_stack(STACK_PREFAULT);
    tid.store(sched::thread_id(), Relaxed);
    ready.fetch_add(1, Release);
    let start = loop {
        let at = start_at.load(Acquire);
        if at != 0 || stop.load(Relaxed) {
            break at;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    if start != 0 && !stop.load(Relaxed) {
        let ctx = ThreadCtx {
            index,
            thread,
            cpu: c,
            start_ns: start + shared_phase.load(Relaxed),
            record_from_ns: start + warmup,
            end_ns: plan.common.duration_ns.map_or(u64::MAX, |d| start + warmup + d),
            loops,
            limit_ns: plan.common.threshold_ns.unwrap_or(u64::MAX),
            stop,
            breach,
            extras,
            expiry,
            failure: Default::default(),
        };
        for r in recs.iter_mut() {
            r.start_after_warmup(start + warmup);
        }
        plan.probe.measure(&ctx, &mut recs);
        // A timed wake-up is one timer expiry on this CPU, the warm-up's too.
        if plan.probe.trace_stages() == Some(true) && plan.probe.wake_path() == WakePath::Timer {
            crate::recorder::own_timers::add(c, recs.first().map_or(0, Recorder::offered));
        }
        if let Some(f) = ctx.failure.take() {
            err = err.or(Some(format!("CPU {c}: {f}")));
        }
    }
    let now = clock::now();
    for r in recs {
        r.finish(now);
    }
    err.map_or(Ok(()), Err)
}
