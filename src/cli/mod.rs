//! The command line: one subcommand per probe and per action.

use crate::probe::Common;
use crate::probe::netlat::{self, NetPath, Netlat};
use crate::probe::noise::Noise;
use crate::probe::ptimer::{self, Ptimer, TimerKind};
use crate::probe::sleep::Sleep;
use crate::probe::task::Task;
use crate::probe::wakeup::{SpinnerOpt, Wakeup};
use crate::recorder::ExceedMode;
use crate::report::{self, Format, Use};
use crate::sys::cache::FlushBuffer;
use crate::sys::timers;
use crate::sys::{cpu, sched::Policy};
use crate::trace::decompose::CauseThreshold;
use crate::trace::{StacksMode, TraceClock, TraceOpts};
use anyhow::{Result, bail};
use clap::builder::TypedValueParser;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use rtscope_model::analysis::usage::Usage;
use rtscope_model::settings::{CellDuration, Checkpoint, InstancesMode, RunDuration, Warmup};
use std::path::PathBuf;

mod analyze;
mod fleet;
mod habits;
mod monitor;
mod osbench;
mod probes;
pub mod registry;
mod serial;
mod shared;
mod watch;
pub use analyze::*;
pub use fleet::{FleetSpec, PrometheusArgs};
pub use habits::{Cyclictest, HistogramOpts, dur_us, dur_us_above_0};
pub use monitor::{MonitorArgs, MonitorPlan, monitor_probes};
pub use osbench::*;
pub use probes::*;
pub use serial::*;
pub use shared::*;
pub use watch::*;

const ABOUT: &str = "How real-time is this Linux machine, under the load it will really carry, and why not more?";

const AFTER_HELP: &str = "Every command that reads or writes runs takes --db PATH (the run store, default ./rtscope.db), \
before or after the command, or the variable RTSCOPE_DB.";

#[derive(Parser, Debug)]
#[command(name = "rtscope", version, about = ABOUT, long_about = None, propagate_version = true, after_help = AFTER_HELP)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// Parses rtscope's command line (`args` with the program's name first):
/// the habits of cyclictest and rtla users taken (see `habits`), every
/// duration's value may start with `-`, and every other value may be a
/// negative number, so that `-D -5s` gets "must be positive" from the
/// duration's parser and `-p -1` the priority's range, rather than clap's
/// "unexpected argument '-1'".
pub fn parse_from(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Cli, clap::Error> {
    parse_plain(habits::rewrite(args.into_iter().collect()))
}

/// [`parse_from`] without the habits' rewriting: for the arguments a plan,
/// `--probe-args` or `--watch` gives a command, which read the same way.
pub fn parse_plain(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Cli, clap::Error> {
    let (mut cmd, mut matches) = matches(args)?;
    Cli::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut cmd))
}

/// What clap matched in `args` (see [`parse_plain`]), with the command
/// that matched them.
pub(crate) fn matches(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Result<(clap::Command, clap::ArgMatches), clap::Error> {
    fn signed_values(cmd: clap::Command) -> clap::Command {
        cmd.mut_args(|a| {
            let duration = a.get_value_names().is_some_and(|names| names.iter().any(|n| n.starts_with("DUR")));
            if duration {
                a.allow_hyphen_values(true)
            } else if a.get_action().takes_values() {
                a.allow_negative_numbers(true)
            } else {
                a
            }
        })
        .mut_subcommands(signed_values)
    }
    let mut cmd = signed_values(Cli::command());
    let matches = cmd.try_get_matches_from_mut(args)?;
    Ok((cmd, matches))
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// The main job: assess this machine. Every probe under every load (one cell each), all in one stored run; prints
    /// the matrix (worst case and p99.9 per probe metric and load), the loads' characterisation (kernel counters per
    /// second) and a CPU score. Without arguments: the embedded default, about five minutes.
    Run(RunArgs),
    /// Run loads alone (a stressor beside other tools): characterised from the kernel's counters and stored.
    #[command(after_help = crate::load::help_table())]
    Load(LoadArgs),
    // The per-CPU probes (`wakeup`, `noise`, ...), one subcommand each, in
    // this place of the list: [`ProbeCmd`].
    #[command(flatten)]
    Probe(ProbeCmd),
    /// List the runs in the store.
    Runs(StoreArgs),
    /// Summarise a stored run (its machine, warnings and figures).
    Show(ShowArgs),
    #[command(about = export_about())]
    Export(ExportArgs),
    /// Import a run exported with `rtscope export --format json` (from this or another machine).
    Import(ImportArgs),
    /// Turn a stored run (or a sample file) into engineering answers: statistics, the expected worst case per
    /// hour/day/week (peaks over threshold), MTTF against buffering, schedulability, verdicts (--profile, --require).
    Analyze(AnalyzeArgs),
    /// Write a report of runs: one self-contained HTML file (plots as inline SVG, nothing fetched: it opens offline
    /// and prints) or, with --format md, a Markdown summary for an issue or a wiki. The summary first (verdict, worst
    /// case and p99.9 per probe and load, the worst load and why, the machine, what next), the rest collapsed;
    /// verdicts against --profile / --require, else the requirements stored with the run, else the profile omac as
    /// a yardstick (--profile none: no yardstick).
    Report(ReportArgs),
    /// Compare runs side by side: per series and figure, each run against the first, with a bootstrap interval of the
    /// ratio and whether the difference is beyond the runs' noise; --max-regression gates a CI pipeline (exit code 2).
    Compare(CompareArgs),
    /// The cost and wake-up latency of OS services (CEBench / OSBench and the SSC benchmark): locks, wake-up
    /// primitives, ping-pongs, yield, system calls, clock reads, atomics, task creation, queues, memory; intra- and
    /// inter-process. `--list` says exactly what each test times.
    Osbench(OsbenchArgs),
    /// Watch the machine's own real-time threads through the scheduler's events, nothing injected: per thread, the
    /// wake-up latency, period and jitter, runtime and deadline misses, stored as a run (analyze, report, compare,
    /// --require work on it); --cause-threshold explains the worst wake-ups.
    Watch(WatchArgs),
    /// Monitor latency continuously for Prometheus: the probes run until stopped at a low, stated duty, each CPU's
    /// histogram, interval maxima, exceedance counts and lost samples served on /metrics (localhost by default); the
    /// monitor's own store keeps every interval for --retain, then summarises it.
    Monitor(MonitorArgs),
    /// Inject a known disturbance: a SCHED_FIFO spinner of known period and length on a known CPU (ground truth).
    Disturb(DisturbArgs),
    /// The machine under test's side of a serial round trip: a real-time thread answers each stimulus that
    /// `rtscope serial-rtt` (on the instrument, at the line's other end) sends, writing it back at once; stores
    /// nothing (the instrument's run holds the measurement). The port's settings are put back as found.
    Respond(RespondArgs),
    #[command(name = "__second-process", hide = true)]
    SecondProcess(SecondArgs),
    #[command(name = "__netlat-sender", hide = true)]
    NetlatSender(NetlatSenderArgs),
}

fn flush_size(s: &str) -> Result<usize, String> {
    rtscope_model::units::parse_size(s)
        .filter(|&n| n >= 4096)
        .ok_or_else(|| format!("'{s}' is not a size of at least 4K (e.g. 2M, 64M)"))
}

/// `--max-answer`: a size of at least 4K.
fn answer_size(s: &str) -> Result<usize, String> {
    rtscope_model::units::parse_size(s)
        .filter(|&n| n >= 4096)
        .ok_or_else(|| format!("'{s}' is not a size of at least 4K (e.g. 64M, 1G)"))
}

fn mttf_axis(s: &str) -> Result<report::tailplot::MttfAxis, String> {
    match s {
        "buffers" => Ok(report::tailplot::MttfAxis::Buffers),
        "buffering" => Ok(report::tailplot::MttfAxis::Buffering),
        _ => Err(format!("'{s}': write buffers (the number n) or buffering (the total buffering time n x period)")),
    }
}

/// A duration with a unit: 250ns, 500us, 1ms, 1.5ms, 10s, 5m, 12h.
/// `--usage`: hours of use a day, days a week.
pub(crate) fn usage(s: &str) -> Result<Usage, String> {
    Usage::parse("--usage", s)
}

pub fn dur(s: &str) -> Result<u64, String> {
    rtscope_model::units::parse_duration(s)
}

/// A duration above 0 (a period, a spin, a target).
pub fn dur_above_0(s: &str) -> Result<u64, String> {
    match dur(s)? {
        0 => Err(format!("'{s}' must be above 0 (e.g. 1ms)")),
        d => Ok(d),
    }
}

/// The probes whose measuring threads can run under SCHED_DEADLINE.
pub const DEADLINE_PROBES: [&str; 1] = ["wakeup"];

/// `--policy`: how the measuring threads are scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MeasurePolicy {
    /// SCHED_FIFO: runs until it blocks or a higher priority preempts it.
    Fifo,
    /// SCHED_RR: like FIFO, with round-robin among equal priorities.
    Rr,
    /// SCHED_OTHER: the normal time-sharing policy (priority ignored).
    Other,
    /// SCHED_DEADLINE (wakeup only): a runtime (--dl-runtime) every period (--interval); each job ends in
    /// sched_yield and the kernel releases the thread at its next period, as cyclicdeadline does. Needs the
    /// measured CPU to be its own root domain (isolcpus=domain or a cpuset partition).
    Deadline,
}

impl MeasurePolicy {
    pub fn is_rt(self) -> bool {
        matches!(self, MeasurePolicy::Fifo | MeasurePolicy::Rr)
    }

    /// The value of `--policy`.
    pub fn flag_value(self) -> &'static str {
        match self {
            MeasurePolicy::Fifo => "fifo",
            MeasurePolicy::Rr => "rr",
            MeasurePolicy::Other => "other",
            MeasurePolicy::Deadline => "deadline",
        }
    }

    /// The policy the measuring threads are set to as they start:
    /// deadline threads start at SCHED_OTHER and the probe gives them
    /// SCHED_DEADLINE at the common start.
    pub fn threads_start_at(self) -> Policy {
        match self {
            MeasurePolicy::Fifo => Policy::Fifo,
            MeasurePolicy::Rr => Policy::Rr,
            MeasurePolicy::Other | MeasurePolicy::Deadline => Policy::Other,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    #[command(flatten)]
    pub measure: CpusArgs,
    /// Scheduling policy of the measuring threads.
    #[arg(long, value_enum, default_value = "fifo")]
    pub policy: MeasurePolicy,
    /// With --policy deadline: each measuring thread's SCHED_DEADLINE runtime, its budget per period (the period
    /// and deadline are the probe's --interval; rtla timerlat's -P d:RUNTIME:PERIOD) [default: a tenth of the
    /// interval]
    #[arg(long, value_name = "DUR", value_parser = dur_above_0)]
    pub dl_runtime: Option<u64>,
    /// Real-time priority of the measuring threads (1..99; ignored with --policy other).
    #[arg(long, short = 'p', default_value_t = 95, value_parser = clap::value_parser!(u8).range(0..=99))]
    pub priority: u8,
    /// Several instances of the probe in one run, one at each priority (at --policy fifo or rr), measured together
    /// on the same CPUs for --duration, each disturbing the others, their series stored apart as PROBE@PRIO (e.g.
    /// --instances 95,80: wakeup@95 and wakeup@80, two rows; --instances 80,80: wakeup@80 and wakeup@80#2). In
    /// `rtscope run`, name them in --probes (wakeup@95,wakeup@80) instead.
    #[arg(long, value_name = "PRIO,...", value_delimiter = ',', conflicts_with = "priority",
          value_parser = clap::value_parser!(u8).range(1..=99))]
    pub instances: Vec<u8>,
    /// With --instances: measure the instances one after the other, each for --duration, instead of together.
    #[arg(long, requires = "instances")]
    pub instances_in_turn: bool,
    /// Stop after this long (e.g. 30s, 5m, 12h; a bare number is seconds, as cyclictest's -D) [default: until Ctrl-C,
    /// or --loops]
    #[arg(long, short = 'D', value_name = "DUR", value_parser = RunDuration::parse)]
    pub duration: Option<RunDuration>,
    /// Stop each thread after N samples.
    #[arg(long, short = 'l', value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub loops: Option<u64>,
    /// Commit histograms, maxima and exceedances to the store this often (100ms..1h) [default: 10s]
    #[arg(long, value_name = "DUR", value_parser = Checkpoint::parse)]
    pub checkpoint: Option<Checkpoint>,
    /// Keep the raw (time, value) of every sample above DUR [default: adaptive, the running p99.9]
    #[arg(long, value_name = "DUR", value_parser = dur)]
    pub exceed: Option<u64>,
    /// Stop at the first sample above DUR, store the run and exit with code 2 (cyclictest -b; a bare number is
    /// microseconds, as there).
    #[arg(long, short = 'b', value_name = "DUR", value_parser = dur_us_above_0)]
    pub threshold: Option<u64>,
    #[command(flatten)]
    pub out: OutputArgs,
    /// The summary's tables, histogram and -q lines in whole nanoseconds instead of microseconds (cyclictest's -N,
    /// rtla's --nano); the store keeps nanoseconds either way.
    #[arg(long, short = 'N', visible_alias = "nano")]
    pub ns: bool,
    #[command(flatten)]
    pub dma: DmaArgs,
    /// Allow settings that are usually mistakes (e.g. an interval below 50us).
    #[arg(long)]
    pub force: bool,
    /// Find where the latency comes from: record the kernel's interrupt, timer and scheduler events in rtscope's own
    /// tracefs instance; wakeup: split each sample into stages (irq, handler, wake, thread, user); noise: attribute
    /// every interruption to IRQs, softirqs, threads or unaccounted time; both: explain the worst samples (cause
    /// episodes: `rtscope show RUN --episodes`). Needs root; sleep and ptimer do not support it yet.
    #[arg(long)]
    pub trace: bool,
    /// With --trace: explain every sample above DUR [default: adaptive: each new maximum for the first 1000 samples
    /// of a CPU, then its running p99.9, and p99.99 from 10000 samples on]
    #[arg(long, value_name = "DUR", value_parser = dur)]
    pub cause_threshold: Option<u64>,
    /// With --trace: stop at the first wake-up whose IRQ latency (programmed time -> timer interrupt entry) is
    /// above DUR, store the run and exit with code 2 (rtla timerlat's -i; a bare number is microseconds). wakeup only
    #[arg(long, value_name = "DUR", value_parser = dur_us_above_0)]
    pub stop_irq: Option<u64>,
    /// With --trace: stop at the first wake-up whose thread latency (programmed time -> switch into the probe's
    /// thread) is above DUR, store the run and exit with code 2 (rtla timerlat's -T; a bare number is
    /// microseconds). wakeup only
    #[arg(long, value_name = "DUR", value_parser = dur_us_above_0)]
    pub stop_thread: Option<u64>,
    /// With --trace: keep the worst N episodes per CPU [default: 50]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10000))]
    pub episodes: Option<u64>,
    /// With --trace: the kernel ring buffer per traced CPU (e.g. 4M); events that overflow it are counted as lost.
    /// One per online CPU: together at most half of the memory available (MemAvailable) [default: 4M]
    #[arg(long, value_name = "SIZE", value_parser = trace_buffer)]
    pub trace_buffer: Option<usize>,
    /// With --trace: the kernel's trace clock. local (sched_clock) costs least per event; rtscope maps it to
    /// CLOCK_MONOTONIC with each hrtimer expiry's own CLOCK_MONOTONIC reading (its `now`), so event and probe times
    /// share one clock. mono reads CLOCK_MONOTONIC in every event: exact without mapping, slower where that read is
    /// slow (VMs) [default: local]
    #[arg(long, value_enum)]
    pub trace_clock: Option<TraceClock>,
    /// With --trace: record the kernel and user stacks of what ran on the probe's CPU when its timer woke it
    /// (`rtscope show RUN --episodes` prints them). auto, the default: when that costs at most 0.5us per wake-up,
    /// timed on the probe's threads in the 60 ms before measuring starts (the kernel's unwind runs on the wake-up
    /// path; the run says what it found). `--stacks` alone: on, whatever it costs; off: never (docs/trace.md)
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "on")]
    pub stacks: Option<StacksMode>,
    /// With --trace: sample each measured CPU HZ times a second with perf_event_open (kernel and user call chains;
    /// hardware cycles through the NMI where there is a PMU, else software cpu-clock); each episode lists the samples
    /// in its window (2000 suits wake-up probes; noise's loop would count each sample as an interruption). 0: off, the
    /// default: the profiler's interrupts land on the measured CPUs (docs/trace.md)
    #[arg(long, value_name = "HZ", value_parser = clap::value_parser!(u64).range(0..=20000))]
    pub sample_hz: Option<u64>,
    /// Write each sample above the exceedance threshold (--exceed) to the kernel's trace_marker, so that a tracer
    /// running beside rtscope (trace-cmd, perf) sees it.
    #[arg(long)]
    pub tracemark: bool,
    #[command(flatten)]
    pub days: UsageArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

pub(crate) fn trace_buffer(s: &str) -> Result<usize, String> {
    rtscope_model::units::parse_size(s)
        .filter(|&n| (64 << 10..=1 << 30).contains(&n))
        .ok_or_else(|| format!("'{s}' is not a size between 64K and 1G (e.g. 4M)"))
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// A campaign file (TOML: probes, loads, durations, each probe's options; see plans/ and docs/run.md) [default: the
    /// embedded default assessment, about five minutes]. Flags given here override its keys.
    #[arg(value_name = "PLAN.toml")]
    pub plan: Option<PathBuf>,
    /// A short assessment, under a minute: every probe under idle, cpu and net, 2 s per cell.
    #[arg(long, conflicts_with = "plan")]
    pub quick: bool,
    /// The probes, each in its own cell under each load (default plan: wakeup,noise,sleep,ptimer,netlat,osbench;
    /// osbench's cell runs 13 wake-up tests, each for its share of the cell, unless the plan's [args] pick others).
    /// PROBE@PRIO[:rr] is an instance of a per-CPU probe at SCHED_FIFO (or SCHED_RR) PRIO, its series stored apart;
    /// a probe's instances are measured together in one cell (e.g. wakeup@95,wakeup@80: one cell, two rows;
    /// wakeup@80:rr,wakeup@80:rr: rows wakeup@80 and wakeup@80#2), or one after the other with --instances-in-turn.
    #[arg(long, value_name = "PROBE,...", value_delimiter = ',')]
    pub probes: Option<Vec<String>>,
    /// Watch the machine's own threads as another row of the matrix, under each load (`rtscope watch`): KEY=VALUE,...
    /// of its flags, e.g. comm=myloop, pid=4242, policy=fifo, deadline=1ms (repeatable). Without --probes, the
    /// assessment is these threads alone.
    #[arg(long, value_name = "KEY=VALUE,...")]
    pub watch: Vec<String>,
    /// The loads, each NAME[:INTENSITY][@CPUS] (`rtscope load --help` lists them), e.g. idle,cpu,net:1000,disk,
    /// cmd:'make -j2'. Each starts before its cells and ramps up (--ramp-up).
    #[arg(long, value_name = "LOAD,...")]
    pub loads: Option<String>,
    /// How long each cell (one probe under one load) is recorded, at least 1s (a bare number is seconds).
    #[arg(long, short = 'D', value_name = "DUR", value_parser = CellDuration::parse)]
    pub duration: Option<CellDuration>,
    /// Each cell measures this long first without recording (its warm-up; at most 10m).
    #[arg(long, value_name = "DUR", value_parser = Warmup::parse)]
    pub warmup: Option<Warmup>,
    /// Commit each cell's histograms, maxima and exceedances this often (100ms..1h); each interval gives the tail's
    /// diagnostics (Ljung-Box, runs, KPSS, GEV) one interval maximum, and they need 20 to 40 per cell [default: the
    /// plan's: 250ms in the default plan, 100ms with --quick; 10s in a campaign file without it]
    #[arg(long, value_name = "DUR", value_parser = Checkpoint::parse)]
    pub checkpoint: Option<Checkpoint>,
    /// A load runs this long before its first cell, unmeasured (at most 10m).
    #[arg(long, value_name = "DUR", value_parser = Warmup::parse)]
    pub ramp_up: Option<Warmup>,
    /// Measure the cells in a random order (a load restarts, and ramps up, whenever the next cell has another one).
    #[arg(long)]
    pub shuffle: bool,
    /// Measure the instances of a probe (wakeup@95,wakeup@80) one after the other, each in its own cell, instead of
    /// together in one (the plan's instances = "in-turn").
    #[arg(long)]
    pub instances_in_turn: bool,
    /// The seed of --shuffle (stored with the run), to repeat an order.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub measure: CpusArgs,
    #[command(flatten)]
    pub loads_on: LoadCpusArgs,
    /// Trace the probes that can be traced (wakeup: its stages become rows of the matrix; cause episodes per load).
    #[arg(long)]
    pub trace: bool,
    #[command(flatten)]
    pub dma: DmaArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub days: UsageArgs,
    // Stored with the run (over the plan's profiles and require keys): the verdicts are printed at the end, a failed
    // one exits with code 2, and `rtscope analyze` and `rtscope report` apply them without flags.
    #[command(flatten)]
    pub req: RequireArgs,
    // Stored with the run (over the plan's tasks / [[task]] and error_rate): the schedulability is printed at the
    // end, a set that misses a deadline exits with code 2.
    #[command(flatten)]
    pub sched: TasksArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// The loads, run together, each NAME[:INTENSITY][@CPUS] (see below), e.g. cpu,net:1000@1,cmd:'make -j2'.
    #[arg(value_name = "LOAD,...")]
    pub loads: String,
    /// Stop after DUR (a bare number is seconds) [default: until Ctrl-C]
    #[arg(long, short = 'D', value_name = "DUR", value_parser = RunDuration::parse)]
    pub duration: Option<RunDuration>,
    #[command(flatten)]
    pub loads_on: LoadCpusArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// A run id, or `last`.
    #[arg(default_value = "last")]
    pub run: String,
    #[command(flatten)]
    pub print: JsonArgs,
    /// Print every cause episode of a --trace run (worst first) and the top causes.
    #[arg(long)]
    pub episodes: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `rtscope export`'s line in `--help`: its formats, from report's table.
fn export_about() -> String {
    let names: Vec<&str> = report::offered(Use::Export).map(|f| f.name()).collect();
    format!("Export a stored run for other tools: --format {} (json: lossless, re-importable)", names.join(", "))
}

/// `--format`'s values: the formats that `u` offers, from report's table,
/// each with its description for `--help`.
fn format_of(u: Use) -> impl TypedValueParser<Value = &'static dyn Format> {
    let values = report::offered(u).map(|f| clap::builder::PossibleValue::new(f.name()).help(f.description()));
    clap::builder::PossibleValuesParser::new(values)
        .map(|name: String| report::named(&name).expect("a value the parser offered"))
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// A run id, or `last`.
    pub run: String,
    #[arg(long, short = 'f', value_parser = format_of(Use::Export), default_value = "json")]
    pub format: &'static dyn Format,
    /// Output file ('-' for stdout).
    #[arg(long, short = 'o', value_name = "FILE", default_value = "-")]
    pub output: PathBuf,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Run ids, `last`, or files written by `rtscope export RUN --format json`; a chapter each.
    #[arg(required_unless_present = "prometheus", value_name = "RUN")]
    pub runs: Vec<String>,
    /// Output file ('-' for stdout) [with --prometheus: default the text on stdout].
    #[arg(long, short = 'o', value_name = "FILE", required_unless_present = "prometheus")]
    pub output: Option<PathBuf>,
    /// [default: by FILE's extension, else html]
    #[arg(long, short = 'f', value_parser = format_of(Use::Report))]
    pub format: Option<&'static dyn Format>,
    // The Verdicts section's requirements [default: those stored with the run, else the profile omac as a yardstick].
    /// The x-axis of the MTTF plots: the number of buffers n, or the total buffering time n x period (as the WDM
    /// latency study draws its curves).
    #[arg(long, value_name = "AXIS", default_value = "buffers", value_parser = mttf_axis)]
    pub mttf_axis: report::tailplot::MttfAxis,
    #[command(flatten)]
    pub days: UsageArgs,
    #[command(flatten)]
    pub req: RequireArgs,
    // The Schedulability section's task set [default: the one stored with the run, if any].
    #[command(flatten)]
    pub sched: TasksArgs,
    #[command(flatten)]
    pub prom: PrometheusArgs,
    /// With --prometheus: also write the fleet report as JSON to FILE ('-' for stdout).
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Two or more run ids (or `last`, or files written by `rtscope export RUN --format json`); the first is the
    /// baseline.
    #[arg(required_unless_present = "prometheus", num_args = 2.., value_name = "RUN")]
    pub runs: Vec<String>,
    #[command(flatten)]
    pub print: JsonArgs,
    /// Also write the comparison as a self-contained HTML page, with every run's exceedance curve overlaid.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Exit with code 2 when a gated figure (mean, p50, p99, p99.9, p99.99, max) or count rate of a later run is
    /// higher than the first run's by more than PCT percent, beyond the runs' noise (bootstrap interval above 1,
    /// or the exceedance or Poisson test at 5%) and, for a figure, by at least --min-delta; or when a run did not
    /// complete. Gated by default: each metric's merged-CPU row (or its only CPU), not the trace's stage series.
    #[arg(long, value_name = "PCT", value_parser = percent)]
    pub max_regression: Option<f64>,
    /// With --max-regression: a figure that rose by less than DUR never fails the gate, whatever its ratio.
    #[arg(long, value_name = "DUR", default_value = "1us", value_parser = dur, requires = "max_regression")]
    pub min_delta: u64,
    /// With --max-regression: gate only on the figures picked (repeatable): PROBE[.METRIC[.FIGURE[.CPU]]], `*` a
    /// wildcard, CPU `all` (default: the merged row), `cpuN` or `cpu*`; e.g. wakeup.latency.p99, wakeup.latency,
    /// netlat.*.max, ptimer.*.missed, wakeup.latency.max.cpu*.
    #[arg(long, value_name = "SELECTOR", value_parser = gate_selector, requires = "max_regression")]
    pub gate: Vec<rtscope_model::compare::Selector>,
    /// With --max-regression: a run that did not complete (interrupted, partial, failed, still running) does not
    /// fail the gate.
    #[arg(long, requires = "max_regression")]
    pub allow_incomplete: bool,
    #[command(flatten)]
    pub prom: PrometheusArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

fn gate_selector(s: &str) -> Result<rtscope_model::compare::Selector, String> {
    rtscope_model::compare::Selector::parse(s)
}

fn percent(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim_end_matches('%').parse().map_err(|_| format!("'{s}' is not a percentage (e.g. 10 or 2.5)"))?;
    if !(0.0..=100_000.0).contains(&v) {
        return Err(format!("'{s}' must be between 0 and 100000 (percent)"));
    }
    Ok(v)
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// A file written by `rtscope export RUN --format json`.
    pub file: PathBuf,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct DisturbArgs {
    /// The CPU to disturb.
    #[arg(long)]
    pub cpu: usize,
    /// SCHED_FIFO priority of the spinner (1..99).
    #[arg(long, short = 'p', default_value_t = 99, value_parser = clap::value_parser!(u8).range(1..=99))]
    pub priority: u8,
    /// One spin every DUR.
    #[arg(long, value_name = "DUR", default_value = "20ms", value_parser = dur_above_0)]
    pub period: u64,
    /// Busy-spin this long each period.
    #[arg(long, value_name = "DUR", default_value = "400us", value_parser = dur_above_0)]
    pub spin: u64,
    /// Start each spin at a random offset in [0, DUR) of its period, to avoid staying in phase with a probe.
    #[arg(long, value_name = "DUR", default_value = "0", value_parser = dur)]
    pub phase_jitter: u64,
    /// Stop after DUR (a bare number is seconds) [default: until Ctrl-C]
    #[arg(long, short = 'D', value_name = "DUR", value_parser = RunDuration::parse)]
    pub duration: Option<RunDuration>,
    /// Write each burst to FILE as it happens: `start_ns end_ns tid cpu_ns due_ns` (CLOCK_MONOTONIC), the
    /// disturbance's own timestamps to judge a measurement against, the CPU time the spinner got in the burst,
    /// and the instant its sleep was programmed to end (its own wake-up took start_ns - due_ns).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
}

impl CommonArgs {
    /// Takes the settings a plan or the monitor gives the probe it builds
    /// (typed, never text again), refusing those the probe's own arguments
    /// set as well: they are the plan's or the monitor's.
    /// `set`: the ids of the flags the probe's own arguments set; a
    /// default priority yields to theirs.
    pub fn take(&mut self, given: &registry::Given, set: &[String]) -> Result<()> {
        let owner = given.owner;
        for (flag, set) in [
            ("--cpus", self.measure.cpus.is_some() && given.cpus.is_some()),
            ("--duration", self.duration.is_some() && given.duration.is_some()),
            ("--checkpoint", self.checkpoint.is_some()),
        ] {
            if set {
                bail!("{flag} is {owner}'s own setting, not a probe's: give it to {owner} (see its --help)");
            }
        }
        if given.cpus.is_some() {
            self.measure.cpus = given.cpus.clone();
        }
        if given.duration.is_some() {
            self.duration = given.duration;
        }
        if let Some(p) = given.priority.filter(|_| !probes::is_set(set, "priority")) {
            self.priority = p;
        }
        self.checkpoint = Some(given.checkpoint);
        self.trace |= given.trace;
        self.store.db = given.db.clone();
        self.out.quiet = given.quiet;
        match given.dma_latency {
            None => self.dma = DmaArgs { dma_latency: None, no_dma_latency: true },
            Some(t) if self.dma.held().is_some() => self.dma.dma_latency = self.dma.dma_latency.or(Some(t)),
            Some(_) => {}
        }
        Ok(())
    }

    /// Validates everything that can be checked before measuring.
    pub fn resolve(&self, kind: &str) -> Result<Common> {
        let cpus = match &self.measure.cpus {
            Some(list) => cpu::selected("--cpus", list)?,
            None => cpu::measurable(),
        };
        if self.dl_runtime.is_some() && self.policy != MeasurePolicy::Deadline {
            bail!("--dl-runtime is a setting of --policy deadline: add --policy deadline (or leave --dl-runtime out)");
        }
        if self.policy == MeasurePolicy::Deadline && !DEADLINE_PROBES.contains(&kind) {
            bail!(
                "--policy deadline: {kind} does not measure under SCHED_DEADLINE (the probes that do: {}); use \
                 --policy fifo, rr or other",
                DEADLINE_PROBES.join(", ")
            );
        }
        if !self.instances.is_empty() && !self.policy.is_rt() {
            bail!(
                "--instances measures at real-time priorities: give --policy fifo (the default) or rr, not --policy {}",
                self.policy.flag_value()
            );
        }
        if self.policy.is_rt() && self.priority == 0 {
            bail!("--priority must be 1..99 for --policy {} (0 is only for --policy other)", self.policy.flag_value());
        }
        // What only --trace uses needs it (a plan or the monitor may give
        // it: checked once, on what came of both).
        let only_traced = [
            ("--cause-threshold", self.cause_threshold.is_some()),
            ("--episodes", self.episodes.is_some()),
            ("--trace-buffer", self.trace_buffer.is_some()),
            ("--trace-clock", self.trace_clock.is_some()),
            ("--stacks", self.stacks.is_some()),
            ("--sample-hz", self.sample_hz.is_some()),
            ("--stop-irq", self.stop_irq.is_some()),
            ("--stop-thread", self.stop_thread.is_some()),
        ];
        if let Some((flag, _)) = only_traced.iter().find(|f| f.1 && !self.trace) {
            bail!("{flag} is a setting of --trace: add --trace (or leave {flag} out)");
        }
        let trace_buffer = self.trace_buffer.unwrap_or(4 << 20);
        if self.trace {
            // The kernel keeps one ring of --trace-buffer per online CPU.
            let cpus = cpu::online().len().max(1) as u64;
            crate::sys::mem::check_share(
                "--trace-buffer",
                (trace_buffer as u64).saturating_mul(cpus),
                &format!("its size per CPU x {cpus} CPUs is kernel memory; give a smaller --trace-buffer (e.g. 4M)"),
            )
            .map_err(anyhow::Error::msg)?;
        }
        check_store_and_outputs(&self.store.db, &[("--json", self.out.json.as_deref())])?;
        Ok(Common {
            cpus,
            policy: self.policy.threads_start_at(),
            priority: if self.policy.is_rt() { self.priority } else { 0 },
            deadline: None,
            duration_ns: self.duration.map(RunDuration::ns),
            loops: self.loops,
            checkpoint_ns: self.checkpoint.unwrap_or(Checkpoint::DEFAULT).ns(),
            exceed: self.exceed.map_or(ExceedMode::Adaptive, ExceedMode::Fixed),
            threshold_ns: self.threshold,
            db: self.store.db.clone(),
            json: self.out.json.clone(),
            quiet: self.out.quiet,
            unit: rtscope_model::units::ShownIn::of(self.ns),
            dma_latency: self.dma.held(),
            kind: kind.into(),
            trace: self.trace.then(|| TraceOpts {
                cause_threshold: self.cause_threshold.map_or(CauseThreshold::Adaptive, CauseThreshold::Fixed),
                max_episodes: self.episodes.unwrap_or(50) as usize,
                buffer_kb: (trace_buffer >> 10) as u64,
                clock: self.trace_clock.unwrap_or(TraceClock::Local),
                stacks: self.stacks.unwrap_or(StacksMode::Auto),
                sample_hz: self.sample_hz.unwrap_or(0),
                classify_all: false,
                timeline: true,
                stop: crate::trace::StageStop { irq_ns: self.stop_irq, thread_ns: self.stop_thread },
            }),
            tracemark: self.tracemark,
            warmup_ns: 0,
            instance: None,
            instances: self.instances.clone(),
            instances_mode: if self.instances_in_turn { InstancesMode::InTurn } else { InstancesMode::Together },
            usage: self.days.usage.unwrap_or_default(),
        })
    }
}

/// Fails early, naming `flag`, when the output `path` (`-`: stdout) cannot
/// be written or is the run store `db` or one of its journals: written, it
/// would replace the store, every run in it.
pub fn check_output(flag: &str, path: &std::path::Path, db: &std::path::Path) -> Result<()> {
    if path == std::path::Path::new("-") {
        return Ok(());
    }
    for tail in ["", "-wal", "-journal", "-shm"] {
        let mut file = db.as_os_str().to_owned();
        file.push(tail);
        if crate::sys::fs::same_file(path, std::path::Path::new(&file)) {
            bail!(
                "{flag} {} is the run store (--db {}){}: writing it would replace every run stored there; pick \
                 another {flag} FILE",
                path.display(),
                db.display(),
                if tail.is_empty() { String::new() } else { format!(", its {tail} file") }
            );
        }
    }
    check_writable(flag, path)
}

/// [`check_output`] for each of a command's outputs given (`None`: the
/// flag left out), and two of them may not be one file, nor both stdout.
pub fn check_outputs(outputs: &[(&str, Option<&std::path::Path>)], db: &std::path::Path) -> Result<()> {
    let given: Vec<(&str, &std::path::Path)> = outputs.iter().filter_map(|&(flag, p)| Some((flag, p?))).collect();
    let stdout = std::path::Path::new("-");
    // Two names of one regular file (not /dev/null, a pipe, a tty).
    let regular = |p: &std::path::Path| std::fs::metadata(p).map_or(true, |m| m.is_file());
    for (i, &(flag, path)) in given.iter().enumerate() {
        check_output(flag, path, db)?;
        for &(other, p) in &given[..i] {
            if path == stdout && p == stdout {
                bail!("{other} - and {flag} - would both write to stdout: give one of them a FILE");
            }
            if path != stdout && regular(path) && crate::sys::fs::same_file(path, p) {
                bail!("{other} and {flag} both name {}: give each its own file", path.display());
            }
        }
    }
    Ok(())
}

/// The checks of a command that writes the run store `db`: the store
/// writable, and its outputs ([`check_outputs`]).
pub fn check_store_and_outputs(db: &std::path::Path, outputs: &[(&str, Option<&std::path::Path>)]) -> Result<()> {
    check_writable("--db", db)?;
    check_outputs(outputs, db)
}

/// The run store the commands use when `--db` is left out: `RTSCOPE_DB`,
/// else `./rtscope.db` ([`StoreArgs`]'s default), for a command that keeps
/// none but must not write over it (`disturb --log`).
pub fn default_store() -> PathBuf {
    std::env::var_os("RTSCOPE_DB").map_or_else(|| PathBuf::from(DEFAULT_DB), PathBuf::from)
}

/// Fails early, naming `flag`, when the output `path` would overwrite one
/// of the runs read from files (`inputs`: run ids or exported files).
pub fn check_not_input(flag: &str, path: &std::path::Path, inputs: &[String]) -> Result<()> {
    // Only inputs that are files: a run id (`last`, `3`) names no file.
    let file = |i: &&String| std::path::Path::new(i.as_str()).is_file();
    if let Some(input) = inputs
        .iter()
        .filter(file)
        .find(|i| path != std::path::Path::new("-") && crate::sys::fs::same_file(path, std::path::Path::new(i)))
    {
        bail!(
            "{flag} {} is the run read from {input}: writing it would replace that export; pick another {flag} FILE",
            path.display()
        );
    }
    Ok(())
}

/// Fails early, naming `flag`, when `path` cannot be created or written.
pub fn check_writable(flag: &str, path: &std::path::Path) -> Result<()> {
    if flag == "--db" {
        rtscope_model::store::check_path(path)?;
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        bail!(
            "{flag} {}: directory {} does not exist (create it or pick another {flag})",
            path.display(),
            dir.display()
        );
    }
    if path.is_dir() {
        bail!("{flag} {} is a directory; name a file in it", path.display());
    }
    let probe = if path.exists() {
        std::fs::OpenOptions::new().append(true).open(path).map(|_| ())
    } else {
        let tmp = dir.join(format!(".rtscope-write-check-{}", std::process::id()));
        let r = std::fs::File::create(&tmp).map(|_| ());
        let _ = std::fs::remove_file(&tmp);
        r
    };
    probe.map_err(|e| anyhow::anyhow!("{flag} {}: not writable ({e}); pick a writable {flag} PATH", path.display()))
}
