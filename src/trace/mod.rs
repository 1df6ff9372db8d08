//! `--trace`: where the latency comes from. rtscope's own tracefs instance
//! records the kernel's interrupt, timer and scheduler events with the
//! `mono` clock; a reader thread decodes the per-CPU binary buffers and
//! splits each sample into stages and, for the worst samples, into causes.

pub mod code;
pub mod decompose;
use decompose::CauseThreshold;
use instance::Instance;
use reader::ReaderReport;
use rtscope_model::episode::{ProfileSummary, StacksSummary, TraceCpu, TraceSummary};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub mod event;
pub mod format;
pub mod instance;
pub mod irqtime;
pub mod ktracer;
pub mod page;
pub mod procmaps;
pub mod reader;
pub mod remainder;
pub mod stacks;
pub mod symbols;
pub mod symcache;
pub mod timeline;
pub mod unwind;
pub mod vdso;
pub mod wakes;
pub mod watch;

/// The tracefs clock of the instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceClock {
    /// sched_clock: cheapest per event; rtscope maps it to CLOCK_MONOTONIC
    /// with each hrtimer expiry's own CLOCK_MONOTONIC reading.
    Local,
    /// CLOCK_MONOTONIC in every event.
    Mono,
}

impl TraceClock {
    /// The name tracefs uses.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceClock::Local => "local",
            TraceClock::Mono => "mono",
        }
    }
}

/// `--stacks`: whether to record the stacks at the probe's wake-ups (those
/// whose timer interrupted a task).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StacksMode {
    /// When recording them costs at most 0.5 us per wake-up, measured on
    /// the probe's threads before measuring starts.
    // (0.5 us: CHEAP_STACKS_NS; this text is `--help`'s, which names no
    // constant.)
    Auto,
    On,
    Off,
}

/// What `--stacks auto` accepts per wake-up: the kernel's unwind, timed
/// by the trace itself.
pub const CHEAP_STACKS_NS: u64 = 500;

/// `--trace` settings.
#[derive(Clone, Copy, Debug)]
pub struct TraceOpts {
    pub cause_threshold: CauseThreshold,
    /// Episodes kept per CPU (the worst).
    pub max_episodes: usize,
    pub buffer_kb: u64,
    pub clock: TraceClock,
    pub stacks: StacksMode,
    /// The profiler's samples per second per CPU (0: none, the default:
    /// its interrupts land on the measured CPUs).
    pub sample_hz: u64,
    /// Every sample above the cause threshold is attributed and its class
    /// counted, not only the kept episodes (a monitor's counters).
    pub classify_all: bool,
    /// The whole window's timeline is folded and stored (not by a monitor:
    /// its window is its whole life, and the store would be rewritten
    /// every second without end).
    pub timeline: bool,
    /// `--stop-irq` / `--stop-thread`: the run stops at the first wake-up
    /// whose stage is above its limit.
    pub stop: StageStop,
}

/// rtla timerlat's `-i` and `-T` as a traced wakeup's stop thresholds
/// (`--stop-irq`, `--stop-thread`): the run stops at the first wake-up
/// whose IRQ latency (programmed time -> timer interrupt entry) or thread
/// latency (programmed time -> switch into the probe thread) is above its
/// limit, ns. Checked by the trace reader as it splits each sample, never
/// on a measuring thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageStop {
    pub irq_ns: Option<u64>,
    pub thread_ns: Option<u64>,
}

impl StageStop {
    /// Whether either limit is set.
    pub fn any(&self) -> bool {
        self.irq_ns.is_some() || self.thread_ns.is_some()
    }

    /// The stage of `st` above its limit, if one is: (its flag, its
    /// value, ns); the IRQ's first.
    pub fn breached(&self, st: &rtscope_model::episode::Stages) -> Option<(&'static str, u64)> {
        let thread = st.irq_ns + st.handler_ns + st.wake_ns + st.thread_ns;
        match (self.irq_ns, self.thread_ns) {
            (Some(l), _) if st.irq_ns > l => Some(("--stop-irq", st.irq_ns)),
            (_, Some(l)) if thread > l => Some(("--stop-thread", thread)),
            _ => None,
        }
    }

    /// The limit of `flag`, ns.
    fn limit(&self, flag: &str) -> u64 {
        if flag == "--stop-irq" { self.irq_ns } else { self.thread_ns }.unwrap_or(0)
    }
}

/// The first wake-up above a [`StageStop`] limit, as the trace reader saw
/// it: the run's note, and its exit code 2, as `--threshold`'s.
#[derive(Default)]
pub struct StageHit {
    hit: std::sync::OnceLock<(&'static str, i64, u64, u64)>,
}

impl StageHit {
    /// Keeps the first: `flag`'s stage measured `value_ns` on `cpu`, its
    /// sample at `t_ns` (CLOCK_MONOTONIC).
    pub fn record(&self, flag: &'static str, cpu: i64, value_ns: u64, t_ns: u64) {
        let _ = self.hit.set((flag, cpu, value_ns, t_ns));
    }

    /// The line the run's notes take, when a wake-up went above a limit
    /// of `stop`.
    pub fn describe(&self, stop: &StageStop) -> Option<String> {
        let &(flag, cpu, value, t) = self.hit.get()?;
        let what = if flag == "--stop-irq" { "an IRQ latency" } else { "a thread latency" };
        Some(format!(
            "stopped at {flag} {}us: CPU {cpu} measured {what} of {}us (its sample at CLOCK_MONOTONIC {t} ns)",
            rtscope_model::units::us(stop.limit(flag)),
            rtscope_model::units::us(value),
        ))
    }
}

impl serde::Serialize for TraceOpts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        serde_json::json!({
            "cause_threshold": self.cause_threshold.describe(),
            "max_episodes": self.max_episodes,
            "buffer_kb": self.buffer_kb,
            "clock": self.clock.as_str(),
            "stacks": format!("{:?}", self.stacks).to_lowercase(),
            "sample_hz": self.sample_hz,
            "stop_irq_ns": self.stop.irq_ns,
            "stop_thread_ns": self.stop.thread_ns,
        })
        .serialize(s)
    }
}

/// What `--stacks` and `--sample-hz` did beside the trace: the stacks'
/// calibration and what the symbols thread found.
#[derive(Default)]
pub struct CodeReport {
    /// The notes on stacks: their cost timed before the start, a decision
    /// of `auto`, a failure.
    pub stack_notes: Vec<String>,
    pub profile_notes: Vec<String>,
    /// Why the profiler samples cpu-clock and not cycles, when it does.
    pub cycles_refused: Option<String>,
    pub symbols: symbols::SymReport,
}

/// What the tracer did, for the run, and the notes it deserves. Stops
/// tracing and removes the instance. `mirror_lost`: per traced CPU, the
/// samples that did not fit the ring to the reader. `windows`: the samples
/// are windows of lost time, attributed without stages.
pub fn summarize(
    inst: Instance,
    report: ReaderReport,
    opts: &TraceOpts,
    mirror_lost: &[Arc<AtomicU64>],
    windows: bool,
    code: CodeReport,
) -> (TraceSummary, Vec<String>) {
    let mut summary = TraceSummary {
        instance: inst.name.clone(),
        clock: match opts.clock {
            TraceClock::Mono => "mono".into(),
            TraceClock::Local => "local, mapped to CLOCK_MONOTONIC by each hrtimer expiry's 'now'".into(),
        },
        buffer_kb_per_cpu: inst.buffer_kb,
        events: inst.enabled.clone(),
        missing: inst.missing.clone(),
        per_cpu: report.per_cpu,
        reader_cpu_ns: report.cpu_ns,
        reader_cpu_pct: 100.0 * report.cpu_ns as f64 / report.wall_ns.max(1) as f64,
        cause_threshold: opts.cause_threshold.describe(),
        episodes_built: report.episodes_built,
        episodes_kept: report.episodes_kept,
        windows,
        stacks: None,
        profile: None,
        markers: inst.markers.then(|| report.markers.clone()),
        watch_profile: None,
    };
    let mut notes = Vec::new();
    let sym_notes = code.symbols.notes;
    if let Some((taken, episodes, p50, max, lost)) = report.stacks {
        let mut n = code.stack_notes.clone();
        n.extend(sym_notes.iter().cloned());
        if lost > 0 {
            n.push(format!("the stack instance lost {lost} records (ring buffer full)"));
        }
        summary.stacks = Some(StacksSummary { taken, episodes, cost_p50_ns: p50, cost_max_ns: max, lost, notes: n });
    } else if !code.stack_notes.is_empty() {
        notes.extend(code.stack_notes.iter().map(|n| format!("--stacks: {n}")));
    }
    if let Some((source, hz, samples, inside, lost)) = report.profile {
        let mut n = code.profile_notes.clone();
        n.extend(code.symbols.unwound.clone());
        if report.stacks.is_none() {
            n.extend(sym_notes.iter().cloned());
        }
        if lost > 0 {
            notes.push(format!("--sample-hz: the kernel lost {lost} profiler samples (ring full)"));
        }
        summary.profile = Some(ProfileSummary {
            event: source.name().into(),
            hz,
            blind_spot: match &code.cycles_refused {
                Some(why) => format!("{}; {why}", source.blind_spot()),
                None => source.blind_spot().into(),
            },
            samples,
            in_episodes: inside,
            lost,
            over: code.symbols.over,
            notes: n,
            over_of: 0,
        });
    } else {
        notes.extend(code.profile_notes.iter().map(|n| format!("--sample-hz: {n}")));
    }
    let _ = inst.set_on(false);
    for (c, lost) in summary.per_cpu.iter_mut().zip(mirror_lost) {
        c.lost = c.lost.max(inst.lost(c.cpu as usize));
        c.samples_dropped = lost.load(Relaxed);
    }
    drop(inst);
    let lost = summary.lost();
    if lost > 0 {
        notes.push(format!(
            "--trace: the kernel lost {lost} trace events (ring buffer full): some samples have no stages or \
             episode; use a larger --trace-buffer"
        ));
    }
    let dropped: u64 = summary.per_cpu.iter().map(|c| c.samples_dropped).sum();
    if dropped > 0 {
        notes.push(format!("--trace: {dropped} samples did not reach the trace reader in time (not explained)"));
    }
    if report.maps_lost > 0 {
        notes.push(format!(
            "--trace: the kernel lost {} records of processes' code mappings (their rings full): a process that \
             lived under 10 ms may have its frames unnamed",
            report.maps_lost
        ));
    }
    if let Some(n) = own_helpers_note(&report.own, &summary.per_cpu) {
        notes.push(n);
    }
    notes.extend(above_probe_notes(&report.above));
    if let Some((n, most)) = report.own.get(&(reader::UNWIND.0, reader::UNWIND.1.into())) {
        notes.push(format!(
            "--stacks: recording the stacks took a tenth of the latency or more in {n} episodes (up to {}), inside \
             the interrupt that woke the probe: their latencies include --stacks' own cost; measure the tail \
             without --stacks, and use it to find the causes",
            rtscope_model::units::human(*most)
        ));
    }
    if report.unknown_records > 0 {
        notes.push(format!("--trace: {} records of unknown events were skipped", report.unknown_records));
    }
    (summary, notes)
}

/// The real-time threads that held a probe off from a priority at or above
/// its own, and what to do: above all an IRQ's thread (PREEMPT_RT, or
/// `threadirqs`) over an application, the classic misconfiguration of an
/// RT kernel.
fn above_probe_notes(above: &reader::AboveProbe) -> Vec<String> {
    use rtscope_model::episode::{irq_thread_line, kernel_thread};
    use rtscope_model::inventory::format_cpu_list;
    let mut notes = Vec::new();
    for ((name, sched), (episodes, most, cpus, own)) in above {
        let on: Vec<usize> = cpus.iter().filter_map(|&c| usize::try_from(c).ok()).collect();
        let head = format!(
            "--trace: {name} ({sched}{}) ran at a priority at or above the probe's threads ({own}) and held them off \
             in {episodes} episodes on CPU {} (up to {})",
            kernel_thread(name).map(|r| format!(", {r}")).unwrap_or_default(),
            format_cpu_list(&on),
            rtscope_model::units::human(*most)
        );
        let prio: u32 = sched.rsplit(' ').next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let note = match irq_thread_line(name) {
            Some(line) => {
                let rest: Vec<usize> = crate::sys::cpu::online().into_iter().filter(|c| !on.contains(c)).collect();
                let away = if rest.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", or move IRQ {line} off CPU {} (echo {} > /proc/irq/{line}/smp_affinity_list)",
                        format_cpu_list(&on),
                        format_cpu_list(&rest)
                    )
                };
                format!(
                    "{head}: on a PREEMPT_RT kernel (or with threadirqs) a device's interrupts run in its IRQ thread, \
                     and a thread below it waits for every interrupt of that device. Where the application does not \
                     wait on that device, run it above the IRQ thread (SCHED_FIFO {} or more: chrt -f -p {} PID; \
                     rtscope --priority {}), or put the IRQ thread below the application (chrt -f -p {} $(pgrep -x \
                     {name})){away}; where it waits on that device, the order is right and the device's interrupts are \
                     its latency",
                    prio + 1,
                    prio + 1,
                    prio + 1,
                    own.rsplit(' ').next().and_then(|p| p.parse::<u32>().ok()).unwrap_or(2).saturating_sub(1).max(1),
                )
            }
            None => format!(
                "{head}: a real-time thread at or above the probe's priority runs first; where the application must not \
                 wait for it, give the application the higher priority (SCHED_FIFO {} or more)",
                prio + 1
            ),
        };
        notes.push(note);
    }
    notes
}

/// What rtscope's own helper threads cost the probes, when they were an
/// episode's main cause (see `ReaderReport::own`), and how to keep them
/// off the measured CPUs.
fn own_helpers_note(own: &reader::OwnHelpers, lanes: &[TraceCpu]) -> Option<String> {
    use rtscope_model::episode::CauseKind;
    let part = |kind: CauseKind, what: &str, why: &str| {
        let of: Vec<(&String, &(u64, u64))> = own.iter().filter(|(k, _)| k.0 == kind).map(|(k, o)| (&k.1, o)).collect();
        let most = of.iter().map(|(_, o)| o.1).max()?;
        let names: Vec<String> = of.iter().map(|(n, o)| format!("{n} {}", o.0)).collect();
        let episodes: u64 = of.iter().map(|(_, o)| o.0).sum();
        Some(format!("{what} in {episodes} ({}; up to {}{why})", names.join(", "), rtscope_model::units::human(most)))
    };
    let parts: Vec<String> = [
        part(CauseKind::Thread, "held a probe off", ""),
        part(
            CauseKind::Unaccounted,
            "ran while a probe's timer interrupt came late",
            ": interrupts off in their system calls, or the host's",
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        return None;
    }
    // rtscope pins them off the measured CPUs and their SMT siblings, where
    // any CPU is left (Session::pin_housekeeping).
    let measured: Vec<usize> = lanes.iter().filter_map(|c| usize::try_from(c.cpu).ok()).collect();
    let home = crate::sys::cpu::home();
    let none_left = crate::sys::cpu::housekeeping(&home, &measured, &crate::sys::cpu::siblings()).is_empty();
    Some(format!(
        "--trace: rtscope's own threads were the main cause of episodes: {}{}",
        parts.join("; "),
        if none_left {
            "; no CPU is left for them (every CPU is measured, or an SMT sibling of one), so they share the \
             measured CPUs at SCHED_OTHER: leave a core (both its SMT threads) out of --cpus and rtscope pins \
             them there"
        } else {
            ""
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IRQ thread above the probe is named by its line and device, with
    /// the priority order and the fixes; another real-time thread above it
    /// with the priority to give the application.
    #[test]
    fn threads_above_the_probe_are_named_with_the_fix() {
        let mut above = reader::AboveProbe::new();
        above.insert(("irq/3-ttyS1".into(), "SCHED_FIFO 50".into()), (12, 812_300, [1].into(), "SCHED_FIFO 40".into()));
        above.insert(("spin".into(), "SCHED_FIFO 60".into()), (1, 2_000, [1].into(), "SCHED_FIFO 40".into()));
        let n = above_probe_notes(&above);
        assert_eq!(n.len(), 2, "{n:?}");
        let irq = &n[0];
        for part in [
            "irq/3-ttyS1 (SCHED_FIFO 50, the threaded handler of IRQ 3 (ttyS1)) ran at a priority at or above the \
             probe's threads (SCHED_FIFO 40) and held them off in 12 episodes on CPU 1 (up to 812.3us)",
            "SCHED_FIFO 51 or more",
            "chrt -f -p 39 $(pgrep -x irq/3-ttyS1)",
        ] {
            assert!(irq.contains(part), "{part}:\n{irq}");
        }
        assert!(n[1].contains("spin (SCHED_FIFO 60) ran") && n[1].contains("SCHED_FIFO 61 or more"), "{}", n[1]);
    }

    /// The note names each helper, the worst hold, and the fix only where
    /// every CPU was measured.
    #[test]
    fn the_own_threads_note_says_what_to_do() {
        use rtscope_model::episode::CauseKind;
        let own: reader::OwnHelpers = [
            ((CauseKind::Thread, "rtscope-symbols".to_string()), (1, 59_900)),
            ((CauseKind::Thread, "rtscope-writer".to_string()), (2, 14_200)),
            ((CauseKind::Unaccounted, "rtscope-trace".to_string()), (3, 90_716)),
        ]
        .into();
        let lane = |cpu| TraceCpu { cpu, ..Default::default() };
        let every: Vec<TraceCpu> = crate::sys::cpu::online().into_iter().map(|c| lane(c as i64)).collect();
        let n = own_helpers_note(&own, &every).unwrap();
        assert!(n.starts_with("--trace: rtscope's own threads were the main cause of episodes: "), "{n}");
        assert!(n.contains("held a probe off in 3 (rtscope-symbols 1, rtscope-writer 2; up to 59.9us)"), "{n}");
        assert!(n.contains("came late in 3 (rtscope-trace 3; up to 90.716us: interrupts off"), "{n}");
        assert!(
            n.contains("no CPU is left for them") && n.contains("leave a core (both its SMT threads) out of --cpus"),
            "{n}"
        );
        let none: Vec<TraceCpu> = vec![lane(1 << 20)];
        assert!(!own_helpers_note(&own, &none).unwrap().contains("leave"));
        assert_eq!(own_helpers_note(&Default::default(), &every), None);
    }
}
