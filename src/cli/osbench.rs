//! `rtscope osbench`'s arguments, and their checks: they resolve into
//! osbench's [`Settings`], the [`Plan`] of `rtscope osbench` and the
//! [`Cell`] of an assessment.

use super::*;
use crate::osbench::{CELL_TESTS, Cell, Plan, Priorities, Settings, other_than, select};

#[derive(Args, Debug)]
pub struct OsbenchArgs {
    /// List every test: its id, name, parties and exactly what is timed (from which event to which event).
    #[arg(long)]
    pub list: bool,
    /// Run only this test: an id (wake.futex-intra), a number from --list, an id prefix (wake, atomic) or a group
    /// (locks, wakeup, ping, calls, ssc); repeatable [default: all]
    #[arg(long = "test", short = 't', value_name = "ID")]
    pub test: Vec<String>,
    /// Samples per test [default: 10000; 5000 for ssc.fork, 2000 for ssc.spawn]; each takes 24 bytes while its test
    /// runs, at most half of the memory available (MemAvailable).
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
    /// Priorities of the two parties of the wake-up and mutex-handoff tests (the other tests run as they are
    /// defined); `equal` times what rt-tests' ptsematest, pmqtest, svsematest and sigwaittest time.
    #[arg(long, value_enum, value_name = "MODE", default_value = "test")]
    pub priorities: Priorities,
    /// Also write one CSV row per test (times in us) to FILE ('-' for stdout).
    #[arg(long, short = 'o', value_name = "FILE.csv")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub out: super::OutputArgs,
    #[command(flatten)]
    pub dma: super::DmaArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

impl OsbenchArgs {
    /// Checks the measuring options; `default_tests` when `-t` picks
    /// none.
    pub fn settings(&self, default_tests: &[&str]) -> Result<Settings> {
        let tests = if self.test.is_empty() && !default_tests.is_empty() {
            select(&default_tests.iter().map(|t| t.to_string()).collect::<Vec<_>>())?
        } else {
            select(&self.test)?
        };
        let cpu_ = match self.cpu {
            Some(c) => {
                cpu::check("--cpu", &[c])?;
                c
            }
            None => *cpu::home().last().unwrap_or(&0),
        };
        if self.other_cpu.is_some() && !self.cross_cpu {
            bail!("--other-cpu only means something with --cross-cpu");
        }
        if let Some(o) = self.other_cpu {
            cpu::check("--other-cpu", &[o])?;
        }
        if self.priorities != Priorities::Test && !tests.iter().any(|t| t.equal.is_some()) {
            bail!(
                "--priorities {}: none of the tests picked has an equal-priority variant; it applies to the wake-up tests (-t wakeup) and the mutex handoff (-t mutex.handoff-intra), see rtscope osbench --list",
                self.priorities.name()
            );
        }
        if self.policy.is_rt() && !(11..=99).contains(&self.priority) {
            bail!("--priority must be 11..99: the lower party runs 10 below it (e.g. --priority 90)");
        }
        if let Some(n) = self.samples {
            // A test keeps (t, raw) and an empty-loop timing per sample.
            let per = (std::mem::size_of::<(u64, u64)>() + std::mem::size_of::<u64>()) as u64;
            crate::sys::mem::check_share("--samples", n.saturating_mul(per), "give fewer --samples (e.g. -n 100000)")
                .map_err(anyhow::Error::msg)?;
        }
        let other_cpu = match (self.cross_cpu, self.other_cpu) {
            (false, _) => None,
            (true, Some(o)) if o == cpu_ => bail!("--other-cpu {o} is the measured CPU (--cpu); pick another"),
            (true, Some(o)) => Some(o),
            (true, None) => Some(other_than(cpu_, &[])?),
        };
        Ok(Settings {
            tests,
            n: self.samples,
            ips: self.ips,
            cache_flush: self.cache_flush,
            cross_cpu: self.cross_cpu,
            cpu: cpu_,
            other_cpu,
            policy: self.policy,
            priority: self.priority,
            priorities: self.priorities,
            cpu_given: self.cpu.is_some(),
            other_given: self.other_cpu.is_some(),
        })
    }

    /// `rtscope osbench`'s plan: the settings, and where the results go.
    pub fn plan(&self) -> Result<Plan> {
        let settings = self.settings(&[])?;
        check_store_and_outputs(
            &self.store.db,
            &[("--json", self.out.json.as_deref()), ("--output", self.output.as_deref())],
        )?;
        Ok(Plan {
            settings,
            csv: self.output.clone(),
            json: self.out.json.clone(),
            db: self.store.db.clone(),
            quiet: self.out.quiet,
            dma_latency: self.dma.held(),
        })
    }

    /// osbench as a cell of the assessment: without `-t`, [`CELL_TESTS`].
    pub fn cell(&self) -> Result<Cell> {
        for (flag, given) in [
            ("--list", self.list),
            ("--output", self.output.is_some()),
            ("--json", self.out.json.is_some()),
            ("--no-dma-latency", self.dma.no_dma_latency),
            ("--dma-latency", self.dma.dma_latency.is_some()),
        ] {
            if given {
                bail!(
                    "{flag} is not an option of osbench's cell: the assessment stores, prints and holds C-states for every cell (rtscope run --help)"
                );
            }
        }
        Ok(Cell::new(self.settings(&CELL_TESTS)?))
    }
}
