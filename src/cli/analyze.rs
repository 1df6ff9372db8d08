//! `rtscope analyze`'s arguments.

use super::*;
use crate::judge::{RequireSpec, TasksSpec};
use rtscope_model::units::TimeUnit;

/// A tail threshold: `auto` (None) or a duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Threshold(pub Option<u64>);

fn threshold(s: &str) -> Result<Threshold, String> {
    if s == "auto" { Ok(Threshold(None)) } else { dur(s).map(|d| Threshold(Some(d))) }
}

fn rate(s: &str) -> Result<f64, String> {
    s.parse::<f64>().ok().filter(|r| r.is_finite() && *r > 0.0 && *r <= 1e9).ok_or_else(|| {
        format!("'{s}' is not a sample rate in Hz above 0 and at most 1e9, a sample a nanosecond (e.g. 1000)")
    })
}

fn error_rate(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|r| *r > 0.0 && *r < 1.0)
        .ok_or_else(|| format!("'{s}' is not a probability between 0 and 1 (e.g. 1e-6)"))
}

/// The requirements a run is judged against (`analyze`, `report`, `run`).
#[derive(Args, Debug, Clone, Default)]
pub struct RequireArgs {
    /// Judge the run against a profile: omac (wake-up latency and 1 ms timer jitter <= 100us), audio (48 kHz with
    /// 64/128/256 frames, 2 and 3 periods: MTTF > 24h with half the period as compute time), audio64, audio128,
    /// audio256. Repeatable. `run` stores them with the run (over the plan's profiles and require keys); given to
    /// `analyze` or `report` they replace the requirements stored with the run. Without them (and without stored
    /// ones) omac is shown as a yardstick that never changes the exit code; `--profile none` turns it off.
    #[arg(long = "profile", value_name = "NAME")]
    pub profiles: Vec<String>,
    /// A requirement, e.g. 'wakeup.latency.p99.99 < 50us' (PROBE.METRIC.STAT with STAT min, max, mean, jitter,
    /// pNN.NNN, hour, day, week) or 'mttf(n=3,t=2.67ms,c=1ms) > 24h'. Repeatable; a failed one exits with code 2.
    #[arg(long = "require", value_name = "EXPR")]
    pub requires: Vec<String>,
    /// Let a requirement that had not enough data to be judged (too few samples for a percentile or a return
    /// level, a series the run came out without) pass; without it such a requirement fails the gate (exit code 2),
    /// so that a gate cannot pass by judging nothing. A requirement on a probe or metric the plan or run cannot
    /// produce is refused before anything is measured (exit code 1).
    #[arg(long)]
    pub allow_insufficient: bool,
}

impl RequireArgs {
    /// What the flags ask for, as the judge takes it.
    pub fn spec(&self) -> RequireSpec {
        RequireSpec {
            profiles: self.profiles.clone(),
            requires: self.requires.clone(),
            allow_insufficient: self.allow_insufficient,
        }
    }
}

/// A task set to judge a run's schedulability with (`run`, `analyze`, `report`).
#[derive(Args, Debug, Clone, Default)]
pub struct TasksArgs {
    /// A task set (TOML: [[task]] tables, as `analyze rta --tasks`): its response times with the run's wake-up
    /// latency at --error-rate as every task's release jitter (the pseudo worst case), and the deadline-miss
    /// probability per hour; a set that misses a deadline exits with code 2. `run` stores it with the run (over the
    /// plan's tasks or [[task]]); given to `analyze` or `report` it replaces the set stored with the run.
    #[arg(long, value_name = "FILE")]
    pub tasks: Option<PathBuf>,
    /// The permissible probability that one wake-up exceeds the pseudo worst case [default: the plan's or stored
    /// error_rate, else 1e-5]
    #[arg(long, value_name = "EPS", value_parser = error_rate)]
    pub error_rate: Option<f64>,
}

impl TasksArgs {
    /// What the flags ask for, as the judge takes it.
    pub fn spec(&self) -> TasksSpec {
        TasksSpec { tasks: self.tasks.clone(), error_rate: self.error_rate }
    }
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct AnalyzeArgs {
    #[command(subcommand)]
    pub cmd: Option<AnalyzeCmd>,
    /// A run id, or `last`.
    #[arg(default_value = "last")]
    pub run: String,
    #[command(flatten)]
    pub print: super::JsonArgs,
    /// The tail threshold: auto (the highest value leaving at least 100 exceedances) or a duration.
    #[arg(long, value_name = "DUR|auto", default_value = "auto", value_parser = threshold)]
    pub threshold: Threshold,
    #[command(flatten)]
    pub days: super::UsageArgs,
    #[command(flatten)]
    pub req: RequireArgs,
    #[command(flatten)]
    pub sched: TasksArgs,
    /// Buffer periods of the MTTF table [default: 1.333ms,2.667ms,5.333ms,1ms: 48 kHz audio with 64/128/256
    /// frames, and the 1 ms cycle]
    #[arg(long, value_name = "DUR,...", value_delimiter = ',', value_parser = super::dur_above_0)]
    pub period: Vec<u64>,
    /// Buffer counts of the MTTF table [default: 2,3,4]
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=64))]
    pub buffers: Vec<u32>,
    /// Compute time per period in the MTTF table [default: half the period]
    #[arg(long, value_name = "DUR", value_parser = dur)]
    pub compute: Option<u64>,
    /// The MTTF the table's "smallest n" must reach.
    #[arg(long, value_name = "DUR", default_value = "24h", value_parser = super::dur_above_0)]
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

/// The units of a sample file's columns.
#[derive(Args, Debug, Clone, Copy)]
pub struct SampleUnits {
    /// The unit of the sample files' values: ns, us, ms or s (other tools write us or ms); decimals are accepted and
    /// rounded to the nearest ns.
    #[arg(long, value_name = "UNIT", default_value = "ns", value_parser = TimeUnit::parse)]
    pub unit: TimeUnit,
    /// The unit of the timestamps of a two-column file: ns, us, ms or s (e.g. s for seconds since the epoch)
    /// [default: --unit]
    #[arg(long, value_name = "UNIT", value_parser = TimeUnit::parse)]
    pub time_unit: Option<TimeUnit>,
}

#[derive(Args, Debug)]
pub struct TailArgs {
    /// One value per line, or two columns `timestamp value` (space or comma apart), in nanoseconds unless --unit
    /// (and --time-unit) say otherwise, decimals rounded to the nearest ns; '#' starts a comment.
    #[arg(long, value_name = "FILE")]
    pub samples: PathBuf,
    #[command(flatten)]
    pub units: SampleUnits,
    /// Samples per second, for a file without timestamps.
    #[arg(long, value_name = "HZ", value_parser = rate)]
    pub rate: Option<f64>,
    /// The tail threshold: auto (the highest value leaving at least 100 exceedances) or a duration.
    #[arg(long, value_name = "DUR|auto", default_value = "auto", value_parser = threshold)]
    pub threshold: Threshold,
    #[command(flatten)]
    pub print: super::JsonArgs,
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["run", "samples"])))]
pub struct MttfArgs {
    /// A stored run (id or `last`): its wakeup latency series (or --series), every CPU.
    #[arg(long, value_name = "RUN")]
    pub run: Option<String>,
    /// Latency samples: one value per line, or `timestamp value`, in ns unless --unit (and --time-unit) say
    /// otherwise, decimals rounded to the nearest ns.
    #[arg(long, value_name = "FILE")]
    pub samples: Option<PathBuf>,
    #[command(flatten)]
    pub units: SampleUnits,
    /// Samples per second of --samples (required unless the file has timestamps).
    #[arg(long, value_name = "HZ", value_parser = rate)]
    pub rate: Option<f64>,
    /// Buffer period t. Left out (with --buffers and --compute) for --run of a periodic task (`rtscope task`): its
    /// own period, deadline, buffers and compute time, and its predicted miss rate beside the observed.
    #[arg(long, value_name = "DUR", value_parser = super::dur_above_0)]
    pub period: Option<u64>,
    /// Number of buffers n (at least 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub buffers: Option<u32>,
    /// Compute time per period c.
    #[arg(long, value_name = "DUR", value_parser = dur)]
    pub compute: Option<u64>,
    /// Instead of --compute: a file of measured compute times (one value per line, in --unit), as a distribution.
    #[arg(long, value_name = "FILE", conflicts_with = "compute")]
    pub compute_samples: Option<PathBuf>,
    /// The MTTF to reach: also print the smallest n that reaches it.
    #[arg(long, value_name = "DUR", default_value = "24h", value_parser = super::dur_above_0)]
    pub target: u64,
    /// With --run: the series to use, PROBE.METRIC, a traced run's stage too (e.g. wakeup.thread) [default: the
    /// release jitter, wakeup.latency or task.release, else the run's first]
    #[arg(long, value_name = "PROBE.METRIC")]
    pub series: Option<String>,
    #[command(flatten)]
    pub print: super::JsonArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Args, Debug)]
pub struct RtaArgs {
    /// The task set: [[task]] tables with name, wcet, period and optionally deadline (default: period), blocking,
    /// jitter (durations with units) and priority (higher = more urgent; without: file order, most urgent first).
    /// Left out with --jitter-from a periodic task's run (`rtscope task`): that task, its deadline plus its
    /// buffers' periods, and its observed misses beside the bound.
    #[arg(long, value_name = "FILE", required_unless_present = "jitter_from")]
    pub tasks: Option<PathBuf>,
    /// A stored run (id or `last`) whose wake-up latency at --error-rate becomes every task's release jitter.
    #[arg(long, value_name = "RUN", requires = "error_rate")]
    pub jitter_from: Option<String>,
    /// The permissible probability that one wake-up exceeds the pseudo worst case (e.g. 1e-6).
    #[arg(long, value_name = "EPS", value_parser = error_rate, requires = "jitter_from")]
    pub error_rate: Option<f64>,
    /// With --jitter-from: the series, PROBE.METRIC [default: wakeup.latency or task.release; a run with neither
    /// must name one]
    #[arg(long, value_name = "PROBE.METRIC")]
    pub series: Option<String>,
    #[command(flatten)]
    pub print: super::JsonArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}
