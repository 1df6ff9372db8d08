//! The measurements rtscope makes, described: one row per probe (and one
//! for osbench, the OS-service benchmark), in one table that the reports,
//! the assessment's matrix, the analysis and the dispatch read. A probe is
//! its measuring file, its subcommand's arguments and its row here; nothing
//! else matches on a probe's name.
//!
//! Plain data about a probe's stored series: what its values are and how
//! they are labelled, which of its settings is the period of its timer,
//! what `--trace` makes of its samples, which counts its series carry. It
//! lives in the model crate so that the analysis and the reports of the
//! binary (and other tools reading runs) read the same rows; the binary's
//! probes take their row from here, and its command line builds them by
//! name.

use crate::extra::{Figure, MEAN_ABS, MISSED, hwlat, netlat, noise, serial, sleep, watch};

/// One measurement, as the rest of rtscope sees it.
#[derive(Debug)]
pub struct Descriptor {
    /// Its name: its subcommand, `SeriesKey::probe` in the store, a plan's
    /// `probe`.
    pub name: &'static str,
    /// In the default assessment (`rtscope run` without --probes).
    pub default: bool,
    /// A per-CPU probe (one measuring thread per CPU): its subcommand takes
    /// the assessment's common options (`--cpus`, `--duration`,
    /// `--checkpoint`, `--trace`). Else a measurement with its own runner
    /// (osbench), which gets only `--db` and `--quiet`.
    pub per_cpu: bool,
    /// What its rows in the assessment's matrix are.
    pub rows: &'static str,
    /// What its values are, for axis labels and section titles.
    pub value_name: &'static str,
    /// Follows a metric's name in its matrix row ("nanosleep@1ms deviation").
    pub row_suffix: &'static str,
    /// Its tables in the text and document reports.
    pub layout: Layout,
    /// A document report's paragraph on what its values are, where the
    /// layout's `what` says nothing.
    pub explain: &'static str,
    /// Its values may be negative (a deviation, a drift): recorded signed.
    pub signed: bool,
    /// What `--trace` makes of its samples.
    pub trace: Trace,
    /// The metrics its `--threshold` stops on; None: every one.
    pub threshold_metrics: Option<&'static [&'static str]>,
    /// The period of the timer it waits for, from its plan's settings.
    pub timer_period: Option<TimerPeriod>,
    /// Its metric that is a periodic thread's release jitter (wakeup's
    /// latency): the series the MTTF curves, the schedulability of a task
    /// set and an mttf requirement without `series=` take.
    pub release_jitter: Option<&'static str>,
    /// Counts its series carry (in `Series::extra`), compared as rates.
    pub counts: &'static [Count],
    /// Its samples are events whose rate is compared too (noise's
    /// interruptions per second), over this time of `Series::extra` (the
    /// time it measured) where it is above 0, else over the series' intervals.
    pub rate_over: Option<Figure>,
    /// A periodic task that counts its deadline misses (`task`): where its
    /// settings and counts are, so that the analysis can predict its miss
    /// rate from its release delay and set it beside the observed one.
    pub misses: Option<Misses>,
    /// How `rtscope monitor` runs it, where it can (until stopped, at a low
    /// duty); None: the monitor refuses it.
    pub monitor: Option<Monitored>,
    /// What its metrics' values are, where they are not latencies: (metric,
    /// meaning), the first entry whose metric is the series' or "" (any
    /// metric) holding; the monitor's Prometheus families are named by it
    /// (`metrics::families`).
    pub meanings: &'static [(&'static str, Meaning)],
}

/// What a series' values are, as the monitor's Prometheus families name
/// them: one family per meaning, so that a query over a family never mixes
/// latencies with interruption lengths or periods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Meaning {
    /// How late something happened after it should have (a wake-up, a
    /// timer, a packet's delivery, a stage of one).
    Latency,
    /// How long a busy loop was interrupted (noise).
    Interruption,
    /// A signed deviation from a requested instant or length (sleep, ptimer).
    Deviation,
    /// The time between two releases of a watched thread.
    Period,
    /// CPU time of one activation: a watched thread's, an interrupt handler's.
    Runtime,
    /// A watched thread's release to its sleeping again.
    Response,
}

/// Values that are latencies (every metric not listed otherwise).
const LATENCIES: &[(&str, Meaning)] = &[];

/// A probe in `rtscope monitor`: its duty there, where it spins for part
/// of each window, unless `--probe-args` sets it; and how far below the
/// monitor's `--priority` it runs (noise spins one below wakeup, which
/// preempts it).
#[derive(Debug)]
pub struct Monitored {
    pub duty: Option<Duty>,
    pub priority_below: u8,
}

/// A spinning probe's duty: it spins `on_ns` of every `every_ns` (noise's
/// --active and --pause, hwlat's --width and --window).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Duty {
    pub on_ns: u64,
    pub every_ns: u64,
}

/// A monitored probe at its own settings and the monitor's priority.
const MONITORED: Option<Monitored> = Some(Monitored { duty: None, priority_below: 0 });

/// A periodic task's deadline misses: its release-delay metric and the
/// count of missed deadlines in each series' `extra` (what they are
/// judged by is its stored [`crate::settings::TaskModel`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Misses {
    pub release: &'static str,
    pub missed: Figure,
}

/// How a probe's series are laid out in the reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// A row per CPU (and metric, with several) in these columns, then the
    /// power-of-two histogram; `what` says what a metric's values are
    /// ("" for the metric's own name).
    PerCpu { columns: &'static [Column], what: &'static str },
    /// A row per OS-service test, in a table per group (osbench's tables
    /// and CSV), the groups in this order; its series get the tail
    /// analysis only when a requirement names the probe.
    Tests { groups: &'static [TestGroup] },
    /// A row per watched thread (its tid is `SeriesKey::cpu`; who it is in
    /// `Series::extra`), in these columns.
    PerThread { columns: &'static [Column], what: &'static str },
}

/// A group of OS-service tests: the name its series carry (`group` in
/// `Series::extra`) and its table's title.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestGroup {
    pub name: &'static str,
    pub title: &'static str,
}

/// A column of a probe's result table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    /// The sample count, under this header.
    Count(&'static str),
    Min,
    Mean,
    P50,
    P90,
    P99,
    P999,
    P9999,
    Max,
    Jitter,
    Overruns,
    /// A probe's own figure (`Series::extra`): key and header.
    Extra(Figure, &'static str),
    /// The same, shown only when a row has it above 0 (a count that is
    /// nearly always 0).
    Nonzero(Figure, &'static str),
}

impl Column {
    pub fn header(self) -> &'static str {
        match self {
            Column::Count(h) | Column::Extra(_, h) | Column::Nonzero(_, h) => h,
            Column::Min => "min",
            Column::Mean => "mean",
            Column::P50 => "p50",
            Column::P90 => "p90",
            Column::P99 => "p99",
            Column::P999 => "p99.9",
            Column::P9999 => "p99.99",
            Column::Max => "max",
            Column::Jitter => "jitter",
            Column::Overruns => "overruns",
        }
    }
}

/// The columns of a probe without its own (and of a series of no known
/// probe).
pub const COLUMNS: &[Column] = {
    use Column::*;
    &[Count("samples"), Min, Mean, P50, P90, P99, P999, P9999, Max, Jitter, Overruns]
};

/// What `--trace` makes of a probe's samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trace {
    /// Not supported yet: `--trace` is refused (left out in an assessment).
    No,
    /// A sample is a window of lost time, attributed to its causes.
    Windows,
    /// A sample is a wake-up along this path, split into stages.
    Stages(WakePath),
}

/// Which path a sample's wake-up took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WakePath {
    /// A timer: interrupt, hrtimer callback, waking, switch.
    #[default]
    Timer,
    /// A received datagram: NET_RX softirq, waking, switch.
    NetRx,
}

impl WakePath {
    /// The metric its five stages add up to.
    pub fn total(self) -> &'static str {
        match self {
            WakePath::Timer => "latency",
            WakePath::NetRx => "rx_wake",
        }
    }
}

/// Which of the model's types a probe's stored settings hold the period
/// of its timer in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerPeriod {
    /// [`crate::settings::WakeupTimer`] (none with `--distance`).
    Wakeup,
    /// [`crate::settings::TimerPeriod`].
    Periodic,
    /// [`crate::settings::TaskModel`].
    Task,
}

/// A count in a series' `extra`, compared between runs as a rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Count {
    pub key: Figure,
    /// Counted per CPU rather than per metric (then shown under the metric
    /// `datagrams`).
    pub per_cpu: bool,
    /// Absent means 0 (else an absent count is not compared).
    pub absent_zero: bool,
}

impl Descriptor {
    /// The path a traced sample's wake-up takes (a timer's where it has
    /// no stages).
    pub fn wake_path(&self) -> WakePath {
        match self.trace {
            Trace::Stages(p) => p,
            _ => WakePath::Timer,
        }
    }

    /// The period of its timer from its `settings` (a plan's, or an
    /// assessment cell's), ns.
    pub fn timer_period(&self, settings: &serde_json::Value) -> Option<u64> {
        use crate::settings::{self, stored};
        match self.timer_period? {
            TimerPeriod::Wakeup => stored::<settings::WakeupTimer>(settings)?.period(),
            TimerPeriod::Periodic => Some(stored::<settings::TimerPeriod>(settings)?.period_ns),
            TimerPeriod::Task => Some(stored::<settings::TaskModel>(settings)?.period_ns),
        }
    }

    /// Whether its `--threshold` stops on `metric`.
    pub fn threshold_holds(&self, metric: &str) -> bool {
        self.threshold_metrics.is_none_or(|m| m.contains(&metric))
    }

    /// Whether its series are OS-service tests (osbench's tables).
    pub fn per_test(&self) -> bool {
        matches!(self.layout, Layout::Tests { .. })
    }

    /// Its groups of tests, in order (none for a per-CPU probe).
    pub fn test_groups(&self) -> &'static [TestGroup] {
        match self.layout {
            Layout::Tests { groups } => groups,
            Layout::PerCpu { .. } | Layout::PerThread { .. } => &[],
        }
    }
}

/// Every measurement, in the order of the matrix's rows.
pub static PROBES: &[&Descriptor] = &[&WAKEUP, &NOISE, &SLEEP, &PTIMER, &TASK, &NETLAT, &OSBENCH, &HWLAT, &SERIAL_RTT];

pub static WAKEUP: Descriptor = Descriptor {
    name: "wakeup",
    default: true,
    per_cpu: true,
    rows: "latency (and its stages with --trace)",
    value_name: "latency",
    row_suffix: "",
    layout: Layout::PerCpu { columns: COLUMNS, what: "" },
    explain: "latency = CLOCK_MONOTONIC read on waking - the programmed instant of clock_nanosleep(TIMER_ABSTIME): \
              timer interrupt, hrtimer handler, wake-up, context switch and return to user space",
    signed: false,
    trace: Trace::Stages(WakePath::Timer),
    threshold_metrics: None,
    timer_period: Some(TimerPeriod::Wakeup),
    release_jitter: Some("latency"),
    counts: &[],
    rate_over: None,
    misses: None,
    monitor: MONITORED,
    meanings: LATENCIES,
};

pub static NOISE: Descriptor = Descriptor {
    name: "noise",
    default: true,
    per_cpu: true,
    rows: "interruption length",
    value_name: "interruption length",
    row_suffix: " (noise max)",
    layout: Layout::PerCpu {
        columns: {
            use Column::*;
            &[
                Count("interrupts"),
                Extra(noise::PER_S, "per s"),
                Min,
                P50,
                P90,
                P99,
                Max,
                Extra(noise::NOISE, "noise"),
                Extra(noise::AVAILABLE, "avail %"),
                Extra(noise::REFERENCE, "ref ns"),
                Extra(noise::THRESHOLD, "thresh ns"),
            ]
        },
        what: "interruption length (us): gap in the busy loop - reference iteration",
    },
    explain: "",
    signed: false,
    trace: Trace::Windows,
    threshold_metrics: None,
    timer_period: None,
    release_jitter: None,
    counts: &[],
    rate_over: Some(noise::ACTIVE),
    misses: None,
    monitor: Some(Monitored { duty: Some(Duty { on_ns: 50_000_000, every_ns: 1_000_000_000 }), priority_below: 1 }),
    meanings: &[("", Meaning::Interruption)],
};

pub static SLEEP: Descriptor = Descriptor {
    name: "sleep",
    default: true,
    per_cpu: true,
    rows: "deviation per sleep API",
    value_name: "deviation",
    row_suffix: " deviation",
    layout: Layout::PerCpu {
        columns: {
            use Column::*;
            &[
                Count("samples"),
                Min,
                Mean,
                P50,
                P90,
                P99,
                P999,
                Max,
                Extra(MEAN_ABS, "mean |d|"),
                Extra(sleep::TIMER_SLACK, "slack"),
            ]
        },
        what: "deviation (us): actual sleep - requested, signed",
    },
    explain: "",
    signed: true,
    trace: Trace::No,
    threshold_metrics: None,
    timer_period: None,
    release_jitter: None,
    counts: &[Count { key: sleep::FAILED_CALLS, per_cpu: false, absent_zero: true }],
    rate_over: None,
    misses: None,
    monitor: MONITORED,
    meanings: &[("", Meaning::Deviation)],
};

pub static PTIMER: Descriptor = Descriptor {
    name: "ptimer",
    default: true,
    per_cpu: true,
    rows: "drift per timer kind",
    value_name: "drift",
    row_suffix: " drift",
    layout: Layout::PerCpu {
        columns: {
            use Column::*;
            &[
                Count("events"),
                Extra(MISSED, "missed"),
                Min,
                Mean,
                Extra(MEAN_ABS, "mean |d|"),
                P50,
                P99,
                P999,
                Max,
                Jitter,
            ]
        },
        what: "drift (us): event seen - (start + k x period), signed",
    },
    explain: "",
    signed: true,
    trace: Trace::No,
    threshold_metrics: None,
    timer_period: Some(TimerPeriod::Periodic),
    release_jitter: None,
    counts: &[Count { key: MISSED, per_cpu: false, absent_zero: false }],
    rate_over: None,
    misses: None,
    monitor: MONITORED,
    meanings: &[("", Meaning::Deviation)],
};

pub static TASK: Descriptor = Descriptor {
    name: "task",
    default: false,
    per_cpu: true,
    rows: "a periodic job's release delay, response time and lateness",
    value_name: "time",
    row_suffix: "",
    layout: Layout::PerCpu {
        columns: {
            use Column::*;
            &[Count("jobs"), Extra(MISSED, "missed"), Min, Mean, P50, P90, P99, P999, P9999, Max]
        },
        what: "periodic task (us): release = job start - release instant, response = completion - release, \
               lateness = completion - deadline (signed); missed: completions later than the deadline plus \
               (buffers - 1) periods",
    },
    explain: "",
    signed: true,
    trace: Trace::No,
    threshold_metrics: Some(&["response"]),
    timer_period: Some(TimerPeriod::Task),
    release_jitter: Some("release"),
    counts: &[Count { key: MISSED, per_cpu: false, absent_zero: false }],
    rate_over: None,
    misses: Some(Misses { release: "release", missed: MISSED }),
    monitor: None,
    meanings: LATENCIES,
};

pub static NETLAT: Descriptor = Descriptor {
    name: "netlat",
    default: true,
    per_cpu: true,
    rows: "UDP stack latency (rx_wake, rx_stack, ...)",
    value_name: "UDP latency",
    row_suffix: "",
    layout: Layout::PerCpu {
        columns: {
            use Column::*;
            &[
                Count("packets"),
                Min,
                Mean,
                P50,
                P90,
                P99,
                P999,
                P9999,
                Max,
                Extra(netlat::SENT, "sent"),
                Extra(netlat::LOST, "lost"),
                Extra(netlat::REORDERED, "reord"),
                Nonzero(netlat::SKIPPED, "skipped"),
                Nonzero(netlat::DUPLICATES, "dup"),
                Nonzero(netlat::NO_RX_TIMESTAMP, "no stamp"),
                Nonzero(netlat::NO_HW_TIMESTAMP, "no hw stamp"),
                Nonzero(netlat::CLOCK_CLAMPED, "clamped"),
                Nonzero(netlat::STRAYS, "strays"),
                Nonzero(netlat::SOCKET_ERRORS, "sock err"),
            ]
        },
        what: "UDP latency (us): rx_* from the send call (stack: to the kernel's receive timestamp, wake: from it to \
               recvmsg returning), tx_* from the send call to queued (sched) / handed to the driver (sw); peer mode: \
               rtt and the target's own timing",
    },
    explain: "",
    signed: false,
    // Local mode; in peer mode the round trip is a window (the probe says so).
    trace: Trace::Stages(WakePath::NetRx),
    threshold_metrics: Some(&["rx_total", "rtt"]),
    timer_period: None,
    release_jitter: None,
    counts: &[
        Count { key: netlat::LOST, per_cpu: true, absent_zero: false },
        Count { key: netlat::REORDERED, per_cpu: true, absent_zero: false },
        Count { key: netlat::DUPLICATES, per_cpu: true, absent_zero: false },
    ],
    rate_over: None,
    misses: None,
    monitor: None,
    meanings: LATENCIES,
};

pub static SERIAL_RTT: Descriptor = Descriptor {
    name: "serial-rtt",
    // It needs a serial line to a machine running `rtscope respond`.
    default: false,
    per_cpu: true,
    rows: "serial round trip to `rtscope respond` on another machine",
    value_name: "serial round trip",
    row_suffix: " (serial)",
    layout: Layout::PerCpu {
        columns: {
            use Column::*;
            &[
                Count("answers"),
                Min,
                Mean,
                P50,
                P90,
                P99,
                P999,
                Max,
                Extra(serial::SENT, "sent"),
                Extra(serial::LOST, "lost"),
                Nonzero(serial::LATE, "late"),
                Nonzero(serial::STRAYS, "strays"),
                Nonzero(serial::JUNK, "junk B"),
                Nonzero(serial::ERRORS, "errors"),
            ]
        },
        what: "serial round trip (us): a stimulus frame written to the port -> its answer read back from `rtscope \
               respond` on the other machine (both wires, both UARTs and drivers, and the responder's real-time \
               thread), timed on this machine's CLOCK_MONOTONIC",
    },
    explain: "the instrument's side of a two-machine measurement: every --interval the measuring thread writes a \
              numbered 4-byte frame to the serial port and takes CLOCK_MONOTONIC before the write and when the \
              answer's last byte is read; `rtscope respond` on the machine under test answers each at once from a \
              real-time thread. A stimulus without an answer within --timeout is lost, counted and named in the \
              run's notes",
    signed: false,
    trace: Trace::No,
    threshold_metrics: Some(&["rtt"]),
    timer_period: None,
    release_jitter: None,
    counts: &[Count { key: serial::LOST, per_cpu: false, absent_zero: false }],
    rate_over: None,
    misses: None,
    monitor: None,
    meanings: LATENCIES,
};

pub static OSBENCH: Descriptor = Descriptor {
    name: "osbench",
    default: true,
    per_cpu: false,
    rows: "OS-service wake-up time per test (futex, PI mutex, pipe, eventfd, mq, signal, unix socket)",
    value_name: "time per operation",
    row_suffix: "",
    layout: Layout::Tests {
        groups: &[
            TestGroup { name: "locks", title: "locks: pthread mutexes, handoff, blocking, priority inversion" },
            TestGroup {
                name: "wakeup",
                title: "wake-up primitives: signal in the lower-priority party -> the blocked higher-priority one runs",
            },
            TestGroup { name: "ping", title: "ping-pong round trips and yield between parties of equal priority" },
            TestGroup { name: "calls", title: "calls: system call, call into another process, clock reads, atomics" },
            TestGroup { name: "ssc", title: "the SSC set: task creation, suspend/resume, queues, events, memory" },
        ],
    },
    explain: "",
    signed: false,
    trace: Trace::No,
    threshold_metrics: None,
    timer_period: None,
    release_jitter: None,
    counts: &[],
    rate_over: None,
    misses: None,
    monitor: None,
    meanings: LATENCIES,
};

pub static HWLAT: Descriptor = Descriptor {
    name: "hwlat",
    // It spins with interrupts off: only when asked for.
    default: false,
    per_cpu: true,
    rows: "hardware/firmware/hypervisor latency (the kernel's hwlat tracer)",
    value_name: "hardware latency",
    row_suffix: " (hwlat)",
    layout: Layout::PerCpu {
        columns: {
            use Column::*;
            &[
                Count("samples"),
                Min,
                Mean,
                P50,
                P90,
                P99,
                Max,
                Extra(hwlat::GAPS, "gaps"),
                Nonzero(hwlat::NMI_COUNT, "NMIs"),
                Nonzero(hwlat::RECORDS_LOST, "lost"),
            ]
        },
        what: "hardware latency (us): per hwlat window above --min, the longest gap in the kernel's clock reads with \
               interrupts off (latency = the longer of inner, between two reads, and outer, between two turns of its \
               loop); gaps: reads above --min in those windows",
    },
    explain: "the kernel's hwlat tracer spins on a CPU with interrupts off for --width of every --window, reading the \
              clock; a gap between two reads can only be the hardware's, the firmware's (SMIs) or the hypervisor's: \
              each window's longest gap above --min is one sample, as rt-tests' hwlatdetect reports them",
    signed: false,
    trace: Trace::No,
    threshold_metrics: Some(&["latency"]),
    timer_period: None,
    release_jitter: None,
    counts: &[Count { key: hwlat::GAPS, per_cpu: false, absent_zero: true }],
    rate_over: None,
    misses: None,
    // Interrupts off 10 ms of every second, one CPU at a time.
    monitor: Some(Monitored { duty: Some(Duty { on_ns: 10_000_000, every_ns: 1_000_000_000 }), priority_below: 0 }),
    meanings: LATENCIES,
};

/// A probe's place in [`PROBES`] (wakeup first), then the other
/// [`SOURCES`], unknown ones last: the order of the summary's rows and of
/// the report's probe sections.
pub fn rank(name: &str) -> usize {
    PROBES.iter().chain(SOURCES).position(|d| d.name == name).unwrap_or(usize::MAX)
}

/// Series sources that are not probes of the assessment: `watch`, the
/// machine's own threads.
pub static SOURCES: &[&Descriptor] = &[&WATCH];

/// `rtscope watch`: a row per watched thread and metric.
pub static WATCH: Descriptor = Descriptor {
    name: "watch",
    default: false,
    per_cpu: false,
    rows: "the machine's own threads: wake-up latency, period, runtime, response",
    value_name: "time",
    row_suffix: "",
    layout: Layout::PerThread {
        columns: {
            use Column::*;
            &[
                Extra(watch::THREAD, "thread"),
                Extra(watch::SCHED, "sched"),
                Count("count"),
                Min,
                P50,
                P99,
                P999,
                Max,
                Extra(watch::CPUS, "CPUs"),
                Nonzero(watch::DEADLINE_MISSES, "misses"),
            ]
        },
        what: "per thread (us): latency = sched_waking -> sched_switch onto a CPU; period = release to release; \
               runtime = time on a CPU per activation; response = release -> it sleeps again",
    },
    explain: "",
    signed: false,
    trace: Trace::No,
    threshold_metrics: None,
    timer_period: None,
    release_jitter: None,
    counts: &[Count { key: watch::DEADLINE_MISSES, per_cpu: false, absent_zero: true }],
    rate_over: None,
    misses: None,
    monitor: None,
    meanings: &[("period", Meaning::Period), ("runtime", Meaning::Runtime), ("response", Meaning::Response)],
};

/// The row of `name`, if it is a measurement rtscope knows: a probe's name,
/// or one instance of it at a priority (`wakeup@80`, see [`instance`]).
pub fn find(name: &str) -> Option<&'static Descriptor> {
    let base = instance(name).map_or(name, |(b, _)| b);
    PROBES.iter().chain(SOURCES).copied().find(|d| d.name == base)
}

/// An instance of a probe at its own priority, as `run --probes` and a
/// plan's `probes` name it: `wakeup@80` is (`wakeup`, 80), and so are a
/// second instance at that priority, `wakeup@80#2`, and one at a policy,
/// `wakeup@80:rr`. Its series are stored under that whole name (less the
/// policy), apart from another instance's.
pub fn instance(name: &str) -> Option<(&str, u8)> {
    let (base, rest) = name.split_once('@')?;
    let prio = rest.split(['#', ':']).next()?;
    Some((base, prio.parse().ok()?))
}

/// The path a traced sample of `probe` takes (a timer's for a probe of no
/// known wake-up path).
pub fn wake_path(probe: &str) -> WakePath {
    find(probe).map_or(WakePath::Timer, Descriptor::wake_path)
}

/// Whether `probe`'s series are OS-service tests (osbench's tables).
pub fn per_test(probe: &str) -> bool {
    find(probe).is_some_and(Descriptor::per_test)
}

/// Whether `probe`'s series are per thread (`SeriesKey::cpu` a thread id).
pub fn per_thread(probe: &str) -> bool {
    find(probe).is_some_and(|d| matches!(d.layout, Layout::PerThread { .. }))
}

/// What `probe`'s `SeriesKey::cpu` is, as a label: `CPU`, or `thread`
/// for a watched thread's id.
pub fn key_word(probe: &str) -> &'static str {
    if per_thread(probe) { "thread" } else { "CPU" }
}

/// The release-jitter series (probe, metric): wakeup's latency.
pub fn release_jitter() -> Option<(&'static str, &'static str)> {
    PROBES.iter().find_map(|d| Some((d.name, d.release_jitter?)))
}

/// What the values of `probe`'s `metric` are: an interrupt's runtime (a
/// traced series, [`crate::irqtime`]), else what its row says, else a
/// latency.
pub fn meaning(probe: &str, metric: &str) -> Meaning {
    if crate::irqtime::is_series(metric) {
        return Meaning::Runtime;
    }
    find(probe)
        .and_then(|d| d.meanings.iter().find(|(m, _)| m.is_empty() || *m == metric))
        .map_or(Meaning::Latency, |&(_, k)| k)
}

/// Whether `probe`'s `metric` is the release-jitter series.
pub fn is_release_jitter(probe: &str, metric: &str) -> bool {
    find(probe).is_some_and(|d| d.release_jitter == Some(metric))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_the_timer_periods_come_from_the_settings() {
        for (i, d) in PROBES.iter().enumerate() {
            assert!(PROBES[..i].iter().all(|e| e.name != d.name), "{} twice", d.name);
            assert!(std::ptr::eq(find(d.name).unwrap(), *d));
        }
        let w = find("wakeup").unwrap();
        assert_eq!(w.timer_period(&serde_json::json!({"interval_ns": 500000, "distance_ns": 0})), Some(500_000));
        assert_eq!(w.timer_period(&serde_json::json!({"interval_ns": 500000})), Some(500_000));
        assert_eq!(w.timer_period(&serde_json::json!({"interval_ns": 500000, "distance_ns": 10})), None);
        assert_eq!(find("ptimer").unwrap().timer_period(&serde_json::json!({"period_ns": 1000})), Some(1000));
        assert_eq!(find("noise").unwrap().timer_period(&serde_json::json!({"period_ns": 1000})), None);
        assert_eq!(release_jitter(), Some(("wakeup", "latency")));
        assert!(find("netlat").unwrap().threshold_holds("rtt") && !find("netlat").unwrap().threshold_holds("tx_sw"));
        assert!(find("sleep").unwrap().threshold_holds("nanosleep@1ms"));
        assert_eq!(wake_path("netlat"), WakePath::NetRx);
        assert_eq!(wake_path("nope"), WakePath::Timer);
        assert_eq!(instance("wakeup@80#2"), Some(("wakeup", 80)));
        assert_eq!(instance("wakeup@80:rr"), Some(("wakeup", 80)));
        assert!(per_test("osbench") && !per_test("wakeup"));
        // An instance at a priority is its probe's row, under its own name.
        assert_eq!(instance("wakeup@80"), Some(("wakeup", 80)));
        assert_eq!(instance("wakeup"), None);
        assert!(std::ptr::eq(find("wakeup@80").unwrap(), &WAKEUP));
        assert!(find("nope@80").is_none());
        assert!(is_release_jitter("wakeup@95", "latency"));
        // watch is a source of series, not a probe of the assessment.
        assert!(find("watch").is_some() && PROBES.iter().all(|d| d.name != "watch"));
    }
}
