//! The command line: one subcommand per probe and per action.

use crate::probe::Common;
use crate::probe::netlat::{self, NetPath, Netlat};
use crate::probe::noise::{self, Noise};
use crate::probe::ptimer::{self, Ptimer, TimerKind};
use crate::probe::sleep::Sleep;
use crate::probe::wakeup::{FlushBuffer, SpinnerOpt, Wakeup};
use crate::recorder::ExceedMode;
use crate::sys::timers;
use crate::sys::{cpu, sched::Policy};
use crate::trace::decompose::CauseThreshold;
use crate::trace::{TraceClock, TraceOpts};
use anyhow::{Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

const ABOUT: &str = "How real-time is this Linux machine, under the load it will really carry, and why not more?";

#[derive(Parser, Debug)]
#[command(name = "rtscope", version, about = ABOUT, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
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
    /// Timer interrupt to thread latency (like cyclictest and IntrTime): one SCHED_FIFO thread per CPU sleeps to an
    /// absolute CLOCK_MONOTONIC instant; latency = wake time - programmed time.
    Wakeup(WakeupArgs),
    /// OS noise (like oslat and rtla osnoise, the references' preemption test): one SCHED_FIFO thread per CPU
    /// busy-loops reading the CPU counter; a gap between two reads longer than --ratio x the shortest (reference)
    /// iteration is an interruption, recorded as its length minus the reference.
    Noise(NoiseArgs),
    /// Sleep accuracy (the references' SleepEx test): relative sleeps through nanosleep, clock_nanosleep, poll,
    /// epoll_wait, select and a one-shot timerfd; deviation = actual - requested, signed.
    Sleep(SleepArgs),
    /// Periodic timer drift (the references' multimedia timers): timerfd and POSIX timers (SIGEV_SIGNAL,
    /// SIGEV_THREAD_ID); drift = event seen - programmed expiry, signed, and missed expirations.
    Ptimer(PtimerArgs),
    /// UDP/IP stack latency (the references' network stack test): a sender and a real-time receiver per CPU over
    /// loopback or a veth pair between two namespaces; rx_stack = send call -> kernel receive timestamp, rx_wake ->
    /// recvmsg returns, tx_sched / tx_sw = send call -> queued / handed to the driver. --serve / --peer: round trip
    /// to a responder on another host.
    Netlat(NetlatArgs),
    /// List the runs in the store.
    Runs(StoreArgs),
    /// Summarise a stored run (its machine, warnings and figures).
    Show(ShowArgs),
    /// Export a stored run: json (lossless, re-importable), csv (per histogram bucket) or hdr (HdrHistogram interval log).
    Export(ExportArgs),
    /// Import a run exported with `rtscope export --format json` (from this or another machine).
    Import(ImportArgs),
    /// Turn a stored run (or a sample file) into engineering answers: statistics, the expected worst case per
    /// hour/day/week (peaks over threshold), MTTF against buffering, schedulability, verdicts (--profile, --require).
    Analyze(AnalyzeArgs),
    /// Write a report of runs: one self-contained HTML file (plots as inline SVG, nothing fetched: it opens offline
    /// and prints) or, with --format md, a Markdown summary for an issue or a wiki.
    Report(ReportArgs),
    /// Compare runs side by side: per series and figure, each run against the first, with a bootstrap interval of the
    /// ratio and whether the difference is beyond the runs' noise; --max-regression gates a CI pipeline (exit code 2).
    Compare(CompareArgs),
    /// The cost and wake-up latency of OS services (CEBench / OSBench and the SSC benchmark): locks, wake-up
    /// primitives, ping-pongs, yield, system calls, clock reads, atomics, task creation, queues, memory; intra- and
    /// inter-process. `--list` says exactly what each test times.
    Osbench(OsbenchArgs),
    /// Inject a known disturbance: a SCHED_FIFO spinner of known period and length on a known CPU (ground truth).
    Disturb(DisturbArgs),
    #[command(name = "__second-process", hide = true)]
    SecondProcess(SecondArgs),
    #[command(name = "__netlat-sender", hide = true)]
    NetlatSender(NetlatSenderArgs),
}

fn flush_size(s: &str) -> Result<usize, String> {
    crate::probe::wakeup::parse_size(s)
        .filter(|&n| n >= 4096)
        .ok_or_else(|| format!("'{s}' is not a size of at least 4K (e.g. 2M, 64M)"))
}

/// A duration with a unit: 250ns, 500us, 1ms, 1.5ms, 10s, 5m, 12h.
pub fn dur(s: &str) -> Result<u64, String> {
    rtscope_model::units::parse_duration(s)
}

#[derive(Args, Debug, Clone)]
pub struct StoreArgs {
    /// The run store (SQLite, created if missing).
    #[arg(long, value_name = "PATH", default_value = "rtscope.db")]
    pub db: PathBuf,
}

#[derive(Args, Debug, Clone)]
pub struct CommonArgs {
    /// CPUs to measure, e.g. 0,2-3 [default: all online]
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Scheduling policy of the measuring threads.
    #[arg(long, value_enum, default_value = "fifo")]
    pub policy: Policy,
    /// Real-time priority of the measuring threads (1..99; ignored with --policy other).
    #[arg(long, short = 'p', default_value_t = 95, value_parser = clap::value_parser!(u8).range(0..=99))]
    pub priority: u8,
    /// Stop after this long (e.g. 30s, 5m, 12h) [default: until Ctrl-C, or --loops]
    #[arg(long, short = 'D', value_name = "DUR", value_parser = dur)]
    pub duration: Option<u64>,
    /// Stop each thread after N samples.
    #[arg(long, short = 'l', value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub loops: Option<u64>,
    /// Commit histograms, maxima and exceedances to the store this often.
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = dur)]
    pub checkpoint: u64,
    /// Keep the raw (time, value) of every sample above DUR [default: adaptive, the running p99.9]
    #[arg(long, value_name = "DUR", value_parser = dur)]
    pub exceed: Option<u64>,
    /// Stop at the first sample above DUR, store the run and exit with code 2 (cyclictest -b).
    #[arg(long, short = 'b', value_name = "DUR", value_parser = dur)]
    pub threshold: Option<u64>,
    /// Also write the results as JSON to FILE ('-' for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print nothing but errors.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Do not hold /dev/cpu_dma_latency at 0 (measure with deep C-states allowed).
    #[arg(long)]
    pub no_dma_latency: bool,
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
    #[arg(long, value_name = "DUR", value_parser = dur, requires = "trace")]
    pub cause_threshold: Option<u64>,
    /// With --trace: keep the worst N episodes per CPU.
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=10000))]
    pub episodes: u64,
    /// With --trace: the kernel ring buffer per traced CPU (e.g. 4M); events that overflow it are counted as lost.
    #[arg(long, value_name = "SIZE", default_value = "4M", value_parser = trace_buffer)]
    pub trace_buffer: usize,
    /// With --trace: the kernel's trace clock. local (sched_clock) costs least per event; rtscope maps it to
    /// CLOCK_MONOTONIC with each hrtimer expiry's own CLOCK_MONOTONIC reading (its `now`), so event and probe times
    /// share one clock. mono reads CLOCK_MONOTONIC in every event: exact without mapping, slower where that read is
    /// slow (VMs).
    #[arg(long, value_enum, default_value = "local")]
    pub trace_clock: TraceClock,
    /// Write each sample above the exceedance threshold (--exceed) to the kernel's trace_marker, so that a tracer
    /// running beside rtscope (trace-cmd, perf) sees it.
    #[arg(long)]
    pub tracemark: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

fn trace_buffer(s: &str) -> Result<usize, String> {
    crate::probe::wakeup::parse_size(s)
        .filter(|&n| (64 << 10..=1 << 30).contains(&n))
        .ok_or_else(|| format!("'{s}' is not a size between 64K and 1G (e.g. 4M)"))
}

#[derive(Args, Debug)]
pub struct WakeupArgs {
    /// Period of each thread.
    #[arg(long, short = 'i', value_name = "DUR", default_value = "1ms", value_parser = dur)]
    pub interval: u64,
    /// Add DUR to each further thread's interval (cyclictest -d, whose default is 500us; rtscope's is 0).
    #[arg(long, short = 'd', value_name = "DUR", default_value = "0", value_parser = dur)]
    pub distance: u64,
    /// N background busy threads per measured CPU at priority PRIO (0: SCHED_OTHER), busy --spin-active then
    /// idle --spin-pause; `N@PRIO:sys` spins in system calls (IntrTime's idle threads).
    #[arg(long, value_name = "N@PRIO", value_parser = SpinnerOpt::parse)]
    pub spinners: Option<SpinnerOpt>,
    /// Spinners' busy time per cycle.
    #[arg(long, value_name = "DUR", default_value = "33ms", value_parser = dur)]
    pub spin_active: u64,
    /// Spinners' idle time per cycle.
    #[arg(long, value_name = "DUR", default_value = "33ms", value_parser = dur)]
    pub spin_pause: u64,
    /// Run a second process that wakes on the same CPUs half a period apart, so that every wake-up switches address
    /// spaces (IntrTime -sp).
    #[arg(long)]
    pub second_process: bool,
    /// Evict the caches after each sample, outside the timed part: read a buffer twice the size of the CPU's private
    /// caches (L1/L2).
    #[arg(long)]
    pub cache_flush: bool,
    /// Bytes read per --cache-flush (e.g. 64M to evict a 32 MB L3 too; needs a long --interval).
    #[arg(long, value_name = "SIZE", requires = "cache_flush", value_parser = flush_size)]
    pub flush_size: Option<usize>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct NoiseArgs {
    /// An interruption is a gap between two consecutive counter reads longer than RATIO x the reference iteration
    /// (the shortest mean iteration over the 1 ms windows of a 20 ms warm-up of the same loop); it is recorded as
    /// its length minus the reference (metric `interruption`).
    #[arg(long, value_name = "RATIO", default_value_t = 4.0)]
    pub ratio: f64,
    /// Instead of --ratio: an interruption is a gap longer than DUR (e.g. 1us, as oslat's buckets).
    #[arg(long, value_name = "DUR", value_parser = dur)]
    pub gap: Option<u64>,
    /// Busy-loop this long per cycle.
    #[arg(long, value_name = "DUR", default_value = "33ms", value_parser = dur)]
    pub active: u64,
    /// Then sleep this long, so that a real-time spinner never starves the machine (0: no pause; RT throttling
    /// then still stops the thread for what it reserves, which shows as interruptions).
    #[arg(long, value_name = "DUR", default_value = "33ms", value_parser = dur)]
    pub pause: u64,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct SleepArgs {
    /// The APIs to time, each its own metric `<api>@<length>`: from CLOCK_MONOTONIC read just before the call to
    /// CLOCK_MONOTONIC read when it returns, minus the requested length (signed: an early wake-up is negative).
    /// poll uses ppoll and epoll_wait uses epoll_pwait2 (ns timeouts); select rounds up to 1us.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "API,...",
        default_value = "nanosleep,clock-nanosleep,poll,epoll-wait,select,timerfd"
    )]
    pub api: Vec<timers::SleepApi>,
    /// Sleep lengths, e.g. 100us,1ms,5ms.
    #[arg(long, value_name = "DUR,...", value_delimiter = ',', default_value = "5ms", value_parser = dur)]
    pub sleep: Vec<u64>,
    /// Busy-wait a random time in [0, DUR) before each sleep, so that the sleeps do not stay in phase with the
    /// timer interrupt.
    #[arg(long, value_name = "DUR", default_value = "1ms", value_parser = dur)]
    pub phase: u64,
    /// Set the measuring threads' timer slack (PR_SET_TIMERSLACK) [default: leave it; the value in force is stored]
    #[arg(long, value_name = "DUR", value_parser = dur)]
    pub timer_slack: Option<u64>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct PtimerArgs {
    /// Timer period (1ms: the OMAC cycle; the reference used 5ms).
    #[arg(long, value_name = "DUR", default_value = "1ms", value_parser = dur)]
    pub period: u64,
    /// The timer kinds, each its own metric: drift = CLOCK_MONOTONIC when the wait returns (read(2) of the timerfd,
    /// sigwaitinfo(2) for the POSIX timers) minus the programmed expiry start + k x period, signed.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "KIND,...",
        default_value = "timerfd,posix-signal,posix-thread"
    )]
    pub timer: Vec<TimerKind>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct NetlatArgs {
    /// Send one datagram every DUR per measured CPU (the reference's 10 ms; 100us..10s).
    #[arg(long, short = 'i', value_name = "DUR", default_value = "10ms", value_parser = dur)]
    pub interval: u64,
    /// UDP payload bytes (the reference's 54; 52..1472, one Ethernet frame at most).
    #[arg(long, value_name = "BYTES", default_value_t = 54,
          value_parser = clap::value_parser!(u16).range(netlat::MIN_SIZE as i64..=netlat::MAX_SIZE as i64))]
    pub size: u16,
    /// loopback (127.0.0.1, the loopback driver); netns (a veth pair between two network namespaces rtscope creates
    /// and the kernel removes with rtscope, on any exit); iface:NAME (with --peer or --serve: through interface
    /// NAME, hardware timestamps noted where it has them).
    #[arg(long, value_name = "PATH", default_value = "loopback", value_parser = NetPath::parse)]
    pub path: NetPath,
    /// Run each sender as its own process (the receive then crosses address spaces), not a thread.
    #[arg(long)]
    pub processes: bool,
    /// Pin every sender to CPU N [default: its receiver's CPU, so that the receive softirq runs there]
    #[arg(long, value_name = "N")]
    pub sender_cpu: Option<usize>,
    /// Be the responder on the target: echo every rtscope datagram arriving at ADDR:PORT at --priority on the first
    /// of --cpus [default: the last CPU], with the target's own receive and send timing. Runs until Ctrl-C or
    /// --duration; stores nothing (the --peer side does).
    #[arg(long, value_name = "ADDR:PORT", conflicts_with_all = ["peer", "processes", "sender_cpu"])]
    pub serve: Option<std::net::SocketAddrV4>,
    /// Measure the round trip to an `rtscope netlat --serve ADDR:PORT` on the target (it must answer a hello
    /// first): rtt, transit, rx_wake and the target's target_wake, target_turnaround, target_tx_sw.
    #[arg(long, value_name = "ADDR:PORT", conflicts_with_all = ["processes", "sender_cpu"])]
    pub peer: Option<std::net::SocketAddrV4>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct NetlatSenderArgs {
    #[arg(long)]
    pub cpu: usize,
    #[arg(long, value_enum)]
    pub policy: Policy,
    #[arg(long)]
    pub priority: u8,
    #[arg(long)]
    pub size: usize,
    #[arg(long)]
    pub session: u32,
}

/// What `rtscope netlat` is asked to do.
pub enum NetlatPlan {
    Measure(Common, Netlat, Vec<String>),
    Serve { addr: std::net::SocketAddrV4, iface: Option<String>, cpu: usize, common: Common },
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// A campaign file (TOML: probes, loads, durations, each probe's options; see plans/ and the README) [default: the
    /// embedded default assessment, about five minutes]. Flags given here override its keys.
    #[arg(value_name = "PLAN.toml")]
    pub plan: Option<PathBuf>,
    /// A short assessment, under a minute: every probe under idle, cpu and net, 3 s per cell.
    #[arg(long, conflicts_with = "plan")]
    pub quick: bool,
    /// The probes, each in its own cell under each load (default plan: wakeup,noise,sleep,ptimer).
    #[arg(long, value_name = "PROBE,...", value_delimiter = ',')]
    pub probes: Option<Vec<String>>,
    /// The loads, each NAME[:INTENSITY][@CPUS] (`rtscope load --help` lists them), e.g. idle,cpu,net:1000,disk,
    /// cmd:'make -j2'. Each starts before its cells and ramps up (--ramp-up).
    #[arg(long, value_name = "LOAD,...")]
    pub loads: Option<String>,
    /// How long each cell (one probe under one load) is recorded.
    #[arg(long, short = 'D', value_name = "DUR", value_parser = dur)]
    pub duration: Option<u64>,
    /// Each cell measures this long first without recording (its warm-up).
    #[arg(long, value_name = "DUR", value_parser = dur)]
    pub warmup: Option<u64>,
    /// A load runs this long before its first cell, unmeasured.
    #[arg(long, value_name = "DUR", value_parser = dur)]
    pub ramp_up: Option<u64>,
    /// Measure the cells in a random order (a load restarts, and ramps up, whenever the next cell has another one).
    #[arg(long)]
    pub shuffle: bool,
    /// The seed of --shuffle (stored with the run), to repeat an order.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// CPUs to measure [default: all online]
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// CPUs the loads run on, unless a load names its own (@CPUS) [default: all online]
    #[arg(long, value_name = "LIST")]
    pub load_cpus: Option<String>,
    /// Trace the probes that can be traced (wakeup: its stages become rows of the matrix; cause episodes per load).
    #[arg(long)]
    pub trace: bool,
    /// Do not hold /dev/cpu_dma_latency at 0 (measure with deep C-states allowed).
    #[arg(long)]
    pub no_dma_latency: bool,
    /// Also write the results as JSON to FILE ('-' for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print nothing but errors.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// The loads, run together, each NAME[:INTENSITY][@CPUS] (see below), e.g. cpu,net:1000@1,cmd:'make -j2'.
    #[arg(value_name = "LOAD,...")]
    pub loads: String,
    /// Stop after DUR [default: until Ctrl-C]
    #[arg(long, short = 'D', value_name = "DUR", value_parser = dur)]
    pub duration: Option<u64>,
    /// CPUs the loads run on, unless a load names its own (@CPUS) [default: all online]
    #[arg(long, value_name = "LIST")]
    pub load_cpus: Option<String>,
    /// Also write the run (its characterisation) as JSON to FILE ('-' for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print nothing but errors.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// A run id, or `last`.
    #[arg(default_value = "last")]
    pub run: String,
    /// Print the common JSON shape instead of text.
    #[arg(long)]
    pub json: bool,
    /// Print every cause episode of a --trace run (worst first) and the top causes.
    #[arg(long)]
    pub episodes: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Self-contained and lossless: every interval's histogram, every exceedance; `rtscope import` reads it back.
    Json,
    /// One row per non-empty histogram bucket of each series.
    Csv,
    /// HdrHistogram interval log (tags probe.metric.cpuN, values in ns): HdrHistogram's own tools read it.
    Hdr,
    /// The cause episodes of a --trace run as a timeline (Chrome JSON trace): open it in ui.perfetto.dev.
    Perfetto,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// A run id, or `last`.
    pub run: String,
    #[arg(long, short = 'f', value_enum, default_value = "json")]
    pub format: ExportFormat,
    /// Output file ('-' for stdout).
    #[arg(long, short = 'o', value_name = "FILE", default_value = "-")]
    pub output: PathBuf,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// One self-contained HTML file with inline SVG plots.
    Html,
    /// Markdown: the tables, verdicts and warnings, without the plots.
    Md,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Run ids, `last`, or files written by `rtscope export RUN --format json`; a chapter each.
    #[arg(required = true, value_name = "RUN")]
    pub runs: Vec<String>,
    /// Output file ('-' for stdout).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: PathBuf,
    /// [default: md when FILE ends in .md, else html]
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<ReportFormat>,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Two or more run ids (or `last`, or files written by `rtscope export RUN --format json`); the first is the
    /// baseline.
    #[arg(required = true, num_args = 2.., value_name = "RUN")]
    pub runs: Vec<String>,
    /// Print the comparison as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the comparison as a self-contained HTML page, with every run's exceedance curve overlaid.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Exit with code 2 when any compared figure (mean, p50, p99, p99.9, p99.99 of any series) of a later run is
    /// higher than the first run's by more than PCT percent and the difference is beyond the runs' noise (its
    /// bootstrap interval lies above 1). The maximum, one sample, is shown but not gated.
    #[arg(long, value_name = "PCT", value_parser = percent)]
    pub max_regression: Option<f64>,
    #[command(flatten)]
    pub store: StoreArgs,
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
    #[arg(long, value_name = "DUR", default_value = "20ms", value_parser = dur)]
    pub period: u64,
    /// Busy-spin this long each period.
    #[arg(long, value_name = "DUR", default_value = "400us", value_parser = dur)]
    pub spin: u64,
    /// Start each spin at a random offset in [0, DUR) of its period, to avoid staying in phase with a probe.
    #[arg(long, value_name = "DUR", default_value = "0", value_parser = dur)]
    pub phase_jitter: u64,
    /// Stop after DUR [default: until Ctrl-C]
    #[arg(long, short = 'D', value_name = "DUR", value_parser = dur)]
    pub duration: Option<u64>,
}

#[derive(Args, Debug)]
pub struct OsbenchArgs {
    /// List every test: its id, name, parties and exactly what is timed (from which event to which event).
    #[arg(long)]
    pub list: bool,
    /// Run only this test: an id (wake.futex-intra), a number from --list, an id prefix (wake, atomic) or a group
    /// (locks, wakeup, ping, calls, ssc); repeatable [default: all]
    #[arg(long = "test", short = 't', value_name = "ID")]
    pub test: Vec<String>,
    /// Samples per test [default: 10000; 5000 for ssc.fork, 2000 for ssc.spawn]
    #[arg(short = 'n', long = "samples", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub samples: Option<u64>,
    /// Iterations per sample of the tests that loop (operations shorter than a few hundred ns: mutex fast paths,
    /// atomics, clock reads, system calls, malloc/free): a sample is the loop's time minus the timing overhead,
    /// divided by N [default: each test's own, 100 or 1000]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub ips: Option<u32>,
    /// Run every test of 1 iteration per sample again with the CPU's private caches flushed before each sample
    /// (outside the timed part; by both parties, each on its own CPU).
    #[arg(long)]
    pub cache_flush: bool,
    /// Run the two-party tests again with the other party on another CPU (--other-cpu), besides the default where
    /// both share --cpu.
    #[arg(long)]
    pub cross_cpu: bool,
    /// The CPU of the measured party (and of both by default) [default: the last online CPU]
    #[arg(long, value_name = "CPU")]
    pub cpu: Option<usize>,
    /// With --cross-cpu: the other party's CPU [default: the first other online CPU]
    #[arg(long, value_name = "CPU")]
    pub other_cpu: Option<usize>,
    /// Scheduling policy of the parties.
    #[arg(long, value_enum, default_value = "fifo")]
    pub policy: Policy,
    /// The "higher" priority of the tests (11..99); "medium" is 5 below it, "lower" 10 below.
    #[arg(long, short = 'p', default_value_t = 90, value_parser = clap::value_parser!(u8).range(1..=99))]
    pub priority: u8,
    /// Also write one CSV row per test (times in us) to FILE ('-' for stdout).
    #[arg(long, short = 'o', value_name = "FILE.csv")]
    pub output: Option<PathBuf>,
    /// Also write the results as JSON to FILE ('-' for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print nothing but errors.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Do not hold /dev/cpu_dma_latency at 0 (measure with deep C-states allowed).
    #[arg(long)]
    pub no_dma_latency: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct SecondArgs {
    #[arg(long)]
    pub cpus: String,
    #[arg(long)]
    pub interval_ns: u64,
    #[arg(long)]
    pub priority: u8,
}

impl CommonArgs {
    /// Validates everything that can be checked before measuring.
    pub fn resolve(&self, kind: &str) -> Result<Common> {
        let cpus = match &self.cpus {
            Some(list) => cpu::parse_selection("--cpus", list)?,
            None => cpu::online(),
        };
        if self.checkpoint < 100_000_000 {
            bail!("--checkpoint must be at least 100ms (e.g. --checkpoint 10s)");
        }
        if self.checkpoint > 3_600_000_000_000 {
            bail!(
                "--checkpoint must be at most 1h: a crash loses up to one checkpoint interval (e.g. --checkpoint 10s)"
            );
        }
        if let Some(0) = self.duration {
            bail!("--duration must be longer than 0 (e.g. --duration 30s)");
        }
        if self.policy.is_rt() && self.priority == 0 {
            bail!("--priority must be 1..99 for --policy {:?} (0 is only for --policy other)", self.policy);
        }
        check_writable("--db", &self.store.db)?;
        if let Some(json) = self.json.as_deref().filter(|p| *p != std::path::Path::new("-")) {
            check_writable("--json", json)?;
        }
        Ok(Common {
            cpus,
            policy: self.policy,
            priority: if self.policy.is_rt() { self.priority } else { 0 },
            duration_ns: self.duration,
            loops: self.loops,
            checkpoint_ns: self.checkpoint,
            exceed: self.exceed.map_or(ExceedMode::Adaptive, ExceedMode::Fixed),
            threshold_ns: self.threshold,
            db: self.store.db.clone(),
            json: self.json.clone(),
            quiet: self.quiet,
            dma_latency: !self.no_dma_latency,
            kind: kind.into(),
            trace: self.trace.then(|| TraceOpts {
                cause_threshold: self.cause_threshold.map_or(CauseThreshold::Adaptive, CauseThreshold::Fixed),
                max_episodes: self.episodes as usize,
                buffer_kb: (self.trace_buffer >> 10) as u64,
                clock: self.trace_clock,
            }),
            tracemark: self.tracemark,
            warmup_ns: 0,
        })
    }
}

/// Fails early, naming `flag`, when `path` cannot be created or written.
pub fn check_writable(flag: &str, path: &std::path::Path) -> Result<()> {
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

impl WakeupArgs {
    pub fn resolve(&self, kind: &str) -> Result<(Common, Wakeup)> {
        const MIN_INTERVAL: u64 = 50_000;
        if self.interval == 0 {
            bail!("--interval must be longer than 0 (e.g. --interval 1ms)");
        }
        if let Some(d) = self.common.duration.filter(|&d| d < self.interval) {
            bail!(
                "--duration {} is shorter than --interval {}: no sample would be taken",
                rtscope_model::units::human(d),
                rtscope_model::units::human(self.interval)
            );
        }
        if self.interval < MIN_INTERVAL && !self.common.force {
            bail!(
                "--interval {} is below 50us: the probe would mostly measure itself and can starve the CPU; add --force if you mean it",
                rtscope_model::units::human(self.interval)
            );
        }
        if self.spinners.is_some() && (self.spin_active == 0 || self.spin_pause == 0) && !self.common.force {
            bail!(
                "--spin-active and --spin-pause must both be above 0 so that spinners cannot starve the machine (or add --force)"
            );
        }
        let common = self.common.resolve(kind)?;
        const MAX_PERIOD: u64 = 10_000_000_000;
        let longest = (common.cpus.len() as u64 - 1).saturating_mul(self.distance).saturating_add(self.interval);
        if longest > MAX_PERIOD {
            bail!(
                "--interval (plus --distance per further thread) must stay within 10s: a thread only sees a stop request when it wakes"
            );
        }
        let flush = self.cache_flush.then(|| FlushBuffer::new(self.flush_size));
        if let Some(f) = &flush {
            let cost = f.cost_ns();
            if cost > self.interval / 2 && !self.common.force {
                bail!(
                    "--cache-flush reads {} KiB in {} per sample, more than half of --interval {}: use a longer --interval or a smaller --flush-size (or --force)",
                    f.bytes() >> 10,
                    rtscope_model::units::human(cost),
                    rtscope_model::units::human(self.interval)
                );
            }
        }
        Ok((
            common,
            Wakeup {
                interval_ns: self.interval,
                distance_ns: self.distance,
                spinners: self.spinners,
                spin_active_ns: self.spin_active,
                spin_pause_ns: self.spin_pause,
                second_process: self.second_process,
                cache_flush: self.cache_flush,
                flush_bytes: flush.as_ref().map(FlushBuffer::bytes),
                flush,
            },
        ))
    }
}

/// Refuses a `--duration` shorter than `what` (`flag` `len`): no sample would be taken.
fn check_duration_covers(common: &CommonArgs, flag: &str, len: u64) -> Result<()> {
    if let Some(d) = common.duration.filter(|&d| d < len) {
        bail!(
            "--duration {} is shorter than {flag} {}: no sample would be taken",
            rtscope_model::units::human(d),
            rtscope_model::units::human(len)
        );
    }
    Ok(())
}

/// At most 10 s: a thread only sees a stop request between two of them.
fn check_at_most_10s(flag: &str, ns: u64) -> Result<()> {
    if ns > 10_000_000_000 {
        bail!("{flag} must be at most 10s: a thread only sees a stop request between two of them (e.g. {flag} 33ms)");
    }
    Ok(())
}

impl NetlatArgs {
    pub fn resolve(&self, kind: &str) -> Result<NetlatPlan> {
        use rtscope_model::units::human;
        if self.interval < netlat::MIN_INTERVAL_NS {
            bail!(
                "--interval {} is below 100us: netlat sends at most 10000 datagrams per second per CPU (e.g. --interval 1ms)",
                human(self.interval)
            );
        }
        check_at_most_10s("--interval", self.interval)?;
        check_duration_covers(&self.common, "--interval", self.interval)?;
        let common = self.common.resolve(kind)?;
        if let Some(c) = self.sender_cpu {
            cpu::parse_selection("--sender-cpu", &c.to_string())?;
        }
        let iface = match &self.path {
            NetPath::Iface(n) => Some(n.clone()),
            _ => None,
        };
        if let Some(addr) = self.serve {
            if self.path == NetPath::Netns {
                bail!(
                    "--serve with --path netns: run the responder inside a namespace of your own instead (ip netns exec NS rtscope netlat --serve ...)"
                );
            }
            let cpu = match &self.common.cpus {
                Some(_) => common.cpus[0],
                None => *common.cpus.last().unwrap_or(&0),
            };
            return Ok(NetlatPlan::Serve { addr, iface, cpu, common });
        }
        let (probe, warnings) = match self.peer {
            Some(peer) => Netlat::peer(self.interval, self.size as usize, self.path.clone(), peer, &common.cpus)?,
            None => Netlat::local(
                self.interval,
                self.size as usize,
                self.path.clone(),
                self.processes,
                self.sender_cpu,
                &common.cpus,
            )?,
        };
        Ok(NetlatPlan::Measure(common, probe, warnings))
    }
}

impl NoiseArgs {
    pub fn resolve(&self, kind: &str) -> Result<(Common, Noise)> {
        if !(1.0..=1000.0).contains(&self.ratio) {
            bail!("--ratio must be between 1 and 1000 (e.g. --ratio 4, the reference's)");
        }
        if self.active < 100_000 {
            bail!("--active must be at least 100us (e.g. --active 33ms)");
        }
        check_at_most_10s("--active", self.active)?;
        check_at_most_10s("--pause", self.pause)?;
        if let Some(g) = self.gap.filter(|&g| g < 10 || g >= self.active) {
            bail!("--gap {} must be between 10ns and --active (e.g. --gap 1us)", rtscope_model::units::human(g));
        }
        check_duration_covers(&self.common, "--active", self.active)?;
        let common = self.common.resolve(kind)?;
        if self.pause == 0 && !common.quiet {
            eprintln!(
                "rtscope: warning: --pause 0: the busy loop never sleeps; RT throttling (/proc/sys/kernel/sched_rt_runtime_us) still stops it for the time it reserves each period, which shows as interruptions"
            );
        }
        let throttling_off =
            std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").map(|s| s.trim() == "-1").unwrap_or(false);
        if self.pause == 0 && common.policy.is_rt() && throttling_off && !self.common.force {
            bail!(
                "--pause 0 at --policy {:?} with RT throttling off (sched_rt_runtime_us = -1) would starve everything else on the measured CPUs: give a --pause, use --policy other, or add --force",
                common.policy
            );
        }
        let calibration = crate::sys::tsc::calibrate(50_000_000);
        Ok((
            common,
            Noise {
                ratio: self.ratio,
                gap_ns: self.gap,
                active_ns: self.active,
                pause_ns: self.pause,
                warmup_ns: noise::WARMUP_NS,
                calibration,
            },
        ))
    }
}

impl SleepArgs {
    pub fn resolve(&self, kind: &str) -> Result<(Common, Sleep)> {
        let mut apis = self.api.clone();
        dedup(&mut apis);
        let mut lengths = self.sleep.clone();
        dedup(&mut lengths);
        if let Some(&l) = lengths.iter().find(|&&l| l == 0) {
            bail!("--sleep {l}: every sleep length must be longer than 0 (e.g. --sleep 100us,1ms,5ms)");
        }
        for &l in &lengths {
            check_at_most_10s("--sleep", l)?;
        }
        check_at_most_10s("--phase", self.phase)?;
        if self.timer_slack == Some(0) {
            bail!(
                "--timer-slack 0 would reset the slack to the thread's default (a kernel rule); use --timer-slack 1ns for the least"
            );
        }
        check_duration_covers(&self.common, "--sleep", lengths.iter().copied().min().unwrap_or(0))?;
        let common = self.common.resolve(kind)?;
        Ok((common, Sleep::new(apis, lengths, self.phase, self.timer_slack)))
    }
}

impl PtimerArgs {
    pub fn resolve(&self, kind: &str) -> Result<(Common, Ptimer)> {
        const MIN_PERIOD: u64 = 50_000;
        if self.period == 0 {
            bail!("--period must be longer than 0 (e.g. --period 1ms)");
        }
        if self.period < MIN_PERIOD && !self.common.force {
            bail!(
                "--period {} is below 50us: the probe would mostly measure itself and can starve the CPU; add --force if you mean it",
                rtscope_model::units::human(self.period)
            );
        }
        check_at_most_10s("--period", self.period)?;
        check_duration_covers(&self.common, "--period", self.period)?;
        let mut kinds = self.timer.clone();
        dedup(&mut kinds);
        let common = self.common.resolve(kind)?;
        let probe = Ptimer::new(self.period, kinds, common.cpus.len()).ok_or_else(|| {
            anyhow::anyhow!(
                "--timer posix-signal needs one real-time signal per measured CPU and this system has {} for {} CPUs: measure fewer --cpus or leave posix-signal out of --timer",
                ptimer::max_signal_threads(),
                common.cpus.len()
            )
        })?;
        Ok((common, probe))
    }
}

/// Removes repeats, keeping the first of each.
fn dedup<T: PartialEq + Copy>(v: &mut Vec<T>) {
    let mut seen = Vec::new();
    v.retain(|x| {
        let new = !seen.contains(x);
        seen.push(*x);
        new
    });
}

/// A tail threshold: `auto` (None) or a duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Threshold(pub Option<u64>);

fn threshold(s: &str) -> Result<Threshold, String> {
    if s == "auto" { Ok(Threshold(None)) } else { dur(s).map(|d| Threshold(Some(d))) }
}

fn rate(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|r| r.is_finite() && *r > 0.0)
        .ok_or_else(|| format!("'{s}' is not a sample rate in Hz above 0 (e.g. 1000)"))
}

fn error_rate(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|r| *r > 0.0 && *r < 1.0)
        .ok_or_else(|| format!("'{s}' is not a probability between 0 and 1 (e.g. 1e-6)"))
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct AnalyzeArgs {
    #[command(subcommand)]
    pub cmd: Option<AnalyzeCmd>,
    /// A run id, or `last`.
    #[arg(default_value = "last")]
    pub run: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// The tail threshold: auto (the highest value leaving at least 100 exceedances) or a duration.
    #[arg(long, value_name = "DUR|auto", default_value = "auto", value_parser = threshold)]
    pub threshold: Threshold,
    /// Judge the run against a profile: omac (wake-up latency and 1 ms timer jitter <= 100us), audio (48 kHz with
    /// 64/128/256 frames, 2 and 3 periods: MTTF > 24h with half the period as compute time), audio64, audio128,
    /// audio256. Repeatable.
    #[arg(long = "profile", value_name = "NAME")]
    pub profiles: Vec<String>,
    /// A requirement, e.g. 'wakeup.latency.p99.99 < 50us' (PROBE.METRIC.STAT with STAT min, max, mean, jitter,
    /// pNN.NNN, hour, day, week) or 'mttf(n=3,t=2.67ms,c=1ms) > 24h'. Repeatable; a failed one exits with code 2.
    #[arg(long = "require", value_name = "EXPR")]
    pub requires: Vec<String>,
    /// Buffer periods of the MTTF table [default: 1.333ms,2.667ms,5.333ms,1ms: 48 kHz audio with 64/128/256
    /// frames, and the 1 ms cycle]
    #[arg(long, value_name = "DUR,...", value_delimiter = ',', value_parser = dur)]
    pub period: Vec<u64>,
    /// Buffer counts of the MTTF table [default: 2,3,4]
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=64))]
    pub buffers: Vec<u32>,
    /// Compute time per period in the MTTF table [default: half the period]
    #[arg(long, value_name = "DUR", value_parser = dur)]
    pub compute: Option<u64>,
    /// The MTTF the table's "smallest n" must reach.
    #[arg(long, value_name = "DUR", default_value = "24h", value_parser = dur)]
    pub target: u64,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Subcommand, Debug)]
pub enum AnalyzeCmd {
    /// Fit the tail of a sample file: threshold, Generalized Pareto shape and scale, extremal index, return levels
    /// for an hour, a day and a week with 95 % intervals, and the diagnostics.
    Tail(TailArgs),
    /// Mean time to a buffer underrun: n buffers of period t and compute time c leave a slack (n-1) t - c; an
    /// underrun is a latency above it; MTTF = t / (theta p).
    Mttf(MttfArgs),
    /// Fixed-priority response-time analysis of a task set (TOML), with release jitter and blocking; with
    /// --jitter-from, the measured wake-up latency at --error-rate becomes every task's release jitter.
    Rta(RtaArgs),
}

#[derive(Args, Debug)]
pub struct TailArgs {
    /// One value per line in nanoseconds, or two columns `timestamp_ns value_ns`; '#' starts a comment.
    #[arg(long, value_name = "FILE")]
    pub samples: PathBuf,
    /// Samples per second, for a file without timestamps.
    #[arg(long, value_name = "HZ", value_parser = rate)]
    pub rate: Option<f64>,
    /// The tail threshold: auto (the highest value leaving at least 100 exceedances) or a duration.
    #[arg(long, value_name = "DUR|auto", default_value = "auto", value_parser = threshold)]
    pub threshold: Threshold,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["run", "samples"])))]
pub struct MttfArgs {
    /// A stored run (id or `last`): its wakeup latency series (or --series), every CPU.
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
    /// Latency samples: one value per line in ns, or `timestamp_ns value_ns`.
    #[arg(long, value_name = "FILE")]
    pub samples: Option<PathBuf>,
    /// Samples per second of --samples (required unless the file has timestamps).
    #[arg(long, value_name = "HZ", value_parser = rate)]
    pub rate: Option<f64>,
    /// Buffer period t.
    #[arg(long, value_name = "DUR", value_parser = dur)]
    pub period: u64,
    /// Number of buffers n (at least 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub buffers: u32,
    /// Compute time per period c.
    #[arg(long, value_name = "DUR", value_parser = dur, required_unless_present = "compute_samples")]
    pub compute: Option<u64>,
    /// Instead of --compute: a file of measured compute times (one ns value per line), as a distribution.
    #[arg(long, value_name = "FILE", conflicts_with = "compute")]
    pub compute_samples: Option<PathBuf>,
    /// The MTTF to reach: also print the smallest n that reaches it.
    #[arg(long, value_name = "DUR", default_value = "24h", value_parser = dur)]
    pub target: u64,
    /// With --run: the series to use, PROBE.METRIC [default: wakeup.latency, else the run's first]
    #[arg(long, value_name = "PROBE.METRIC")]
    pub series: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct RtaArgs {
    /// The task set: [[task]] tables with name, wcet, period and optionally deadline (default: period), blocking,
    /// jitter (durations with units) and priority (higher = more urgent; without: file order, most urgent first).
    #[arg(long, value_name = "FILE")]
    pub tasks: PathBuf,
    /// A stored run (id or `last`) whose wake-up latency at --error-rate becomes every task's release jitter.
    #[arg(long, value_name = "RUN", requires = "error_rate")]
    pub jitter_from: Option<String>,
    /// The permissible probability that one wake-up exceeds the pseudo worst case (e.g. 1e-6).
    #[arg(long, value_name = "EPS", value_parser = error_rate, requires = "jitter_from")]
    pub error_rate: Option<f64>,
    /// With --jitter-from: the series, PROBE.METRIC [default: wakeup.latency]
    #[arg(long, value_name = "PROBE.METRIC")]
    pub series: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}
