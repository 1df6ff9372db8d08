//! The flags that several commands share, each declared once as a group
//! that the commands flatten into theirs: the run store (`--db`), the
//! measuring commands' output (`--json FILE`, `--quiet`), the reading
//! commands' `--json`, the measured CPUs (`--cpus`), the loads' CPUs
//! (`--load-cpus`), `--no-dma-latency` and `--usage`. A flag's words,
//! type and range are here, once; where the command puts it to use, its
//! own code.

use clap::Args;
use rtscope_model::analysis::usage::Usage;
use rtscope_model::settings::{CpuList, DmaLatency};
use std::path::PathBuf;

/// The run store's path when neither `--db` nor `RTSCOPE_DB` gives one.
pub const DEFAULT_DB: &str = "rtscope.db";

#[derive(Args, Debug, Clone)]
pub struct StoreArgs {
    /// The run store (SQLite, created if missing); before or after the command.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_DB, env = "RTSCOPE_DB")]
    pub db: PathBuf,
}

/// What a measuring command prints while it measures, and the JSON it
/// writes at its end.
#[derive(Args, Debug, Clone, Default)]
pub struct OutputArgs {
    /// Also write the results as JSON to FILE ('-' for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No progress, banner or warnings while measuring: only the summary at the end (as cyclictest -q and rtla
    /// -q); with --json - (or another output on stdout) only that. The warnings are stored with the run (rtscope
    /// show).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// A reading command's output: text, or JSON.
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct JsonArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The CPUs a command measures on.
#[derive(Args, Debug, Clone, Default)]
pub struct CpusArgs {
    /// CPUs to measure, e.g. 0,2-3 [default: every online CPU that the cpuset of rtscope's cgroup allows]
    #[arg(long, value_name = "LIST", value_parser = CpuList::parse)]
    pub cpus: Option<CpuList>,
}

/// The CPUs the loads run on.
#[derive(Args, Debug, Clone, Default)]
pub struct LoadCpusArgs {
    /// CPUs the loads run on, unless a load names its own (@CPUS) [default: the CPUs rtscope was started on]
    #[arg(long, value_name = "LIST", value_parser = CpuList::parse)]
    pub load_cpus: Option<CpuList>,
}

/// What a measuring command holds `/dev/cpu_dma_latency` at: 0 unless
/// told otherwise, or nothing.
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct DmaArgs {
    /// Hold /dev/cpu_dma_latency at US microseconds while measuring (rtla's --dma-latency, cyclictest's --latency;
    /// 0..10000, e.g. 20 to allow the shallow C-states); the kernel restores its own at exit [default: 0]
    #[arg(long, value_name = "US", value_parser = DmaLatency::parse, conflicts_with = "no_dma_latency")]
    pub dma_latency: Option<DmaLatency>,
    /// Do not hold /dev/cpu_dma_latency (measure with deep C-states allowed).
    #[arg(long)]
    pub no_dma_latency: bool,
}

impl DmaArgs {
    /// The target to hold, None with --no-dma-latency.
    pub fn held(&self) -> Option<DmaLatency> {
        (!self.no_dma_latency).then(|| self.dma_latency.unwrap_or(DmaLatency::ZERO))
    }
}

/// What "per day" and "per week" mean.
#[derive(Args, Debug, Clone, Default)]
pub struct UsageArgs {
    /// What "per day" and "per week" of the expected worst cases mean: hours of use a day and days a week, e.g.
    /// 8h/day,5d/week (the WDM latency study's working day and week), or continuous; ,x10 for a stress load that
    /// counts tenfold (an hour measured stands for 10 hours of use). A measuring command stores it with the run;
    /// analyze and report use the stored one unless given [default: continuous operation, 24h/day,7d/week]
    #[arg(long, value_name = "H/day,D/week[,xN]", value_parser = super::usage)]
    pub usage: Option<Usage>,
}
