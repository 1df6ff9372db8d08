//! `rtscope watch`'s arguments, resolved into [`crate::watch::Settings`].

use super::{StoreArgs, check_store_and_outputs, dur, dur_above_0, trace_buffer};
use crate::recorder::ExceedMode;
use crate::sys::{cpu, sched};
use crate::watch::{Filter, Settings};
use anyhow::{Result, bail};
use rtscope_model::settings::CpuList;
use rtscope_model::settings::{Checkpoint, RunDuration};

/// A policy to watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WatchPolicy {
    /// SCHED_FIFO
    Fifo,
    /// SCHED_RR
    Rr,
    /// SCHED_DEADLINE
    Deadline,
    /// SCHED_OTHER (and BATCH, IDLE): only with --pid, --tid or --comm.
    Other,
}

#[derive(clap::Args, Debug)]
pub struct WatchArgs {
    /// Watch this thread, or every thread of this process (repeatable).
    #[arg(long, value_name = "PID")]
    pub pid: Vec<i32>,
    /// Watch this thread alone (repeatable; a process's other threads are not taken, as --pid takes them).
    #[arg(long, value_name = "TID")]
    pub tid: Vec<i32>,
    /// Watch threads of this name, or every thread of a process of this name (repeatable; as `comm`, at most 15
    /// characters).
    #[arg(long, value_name = "NAME")]
    pub comm: Vec<String>,
    /// The scheduling policies to watch.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "fifo,rr,deadline")]
    pub policy: Vec<WatchPolicy>,
    /// Watch only threads that run on these CPUs, e.g. 2,3 [default: any]
    #[arg(long, value_name = "LIST", value_parser = CpuList::parse)]
    pub cpus: Option<CpuList>,
    /// Stop after this long (e.g. 30s, 5m, 12h; a bare number is seconds) [default: until Ctrl-C]
    #[arg(long, short = 'D', value_name = "DUR", value_parser = RunDuration::parse)]
    pub duration: Option<RunDuration>,
    /// Judge each thread's period jitter against DUR [default: the thread's own median period]
    #[arg(long, value_name = "DUR", value_parser = dur_above_0)]
    pub period: Option<u64>,
    /// Count a deadline miss when an activation has not ended (the thread slept again) DUR after its release
    /// [default: a SCHED_DEADLINE thread's own deadline; none for the others]
    #[arg(long, value_name = "DUR", value_parser = dur_above_0)]
    pub deadline: Option<u64>,
    /// Explain every wake-up whose latency is above DUR: a cause episode (who had the CPU from the wake-up to the
    /// switch onto it), as --trace gives a probe's samples (`rtscope show RUN --episodes`).
    #[arg(long, value_name = "DUR", value_parser = dur_above_0)]
    pub cause_threshold: Option<u64>,
    /// With --cause-threshold: keep the worst N episodes per CPU.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 50,
        requires = "cause_threshold",
        value_parser = clap::value_parser!(u64).range(1..=10000)
    )]
    pub episodes: u64,
    /// Sample each watched thread HZ times a second of its CPU time with perf_event_open (bound to the thread, not
    /// to a CPU; kernel and user stacks, user stacks unwound with the program's own unwind tables), and set the
    /// functions of its late periods (response above --deadline, or wake-up latency above --cause-threshold) against
    /// its on-time ones (`rtscope show RUN`, the JSON's trace.watch_profile, the HTML report's flame graph). 0: off,
    /// the default
    #[arg(long, value_name = "HZ", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=20000))]
    pub sample_hz: u64,
    /// The CPUs of rtscope's reader [default: the CPUs not watched (--cpus) and their SMT siblings, where there are
    /// any]
    #[arg(long, value_name = "LIST", value_parser = CpuList::parse)]
    pub reader_cpus: Option<CpuList>,
    /// SCHED_FIFO priority of rtscope's reader (1..99) [default: SCHED_OTHER]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub reader_priority: Option<u8>,
    /// The kernel's ring buffer per CPU (e.g. 4M); events that overflow it are counted as lost.
    #[arg(long, value_name = "SIZE", default_value = "4M", value_parser = trace_buffer)]
    pub trace_buffer: usize,
    /// Commit histograms, maxima and exceedances to the store this often (100ms..1h) [default: 10s]
    #[arg(long, value_name = "DUR", value_parser = Checkpoint::parse)]
    pub checkpoint: Option<Checkpoint>,
    /// Keep the raw (time, value) of every sample above DUR [default: adaptive, each series' running p99.9]
    #[arg(long, value_name = "DUR", value_parser = dur)]
    pub exceed: Option<u64>,
    /// Watch at most N threads (those first woken); each costs about 4 MB of memory (its series' histograms).
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=100000))]
    pub max_threads: u64,
    #[command(flatten)]
    pub out: super::OutputArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Where and how rtscope's reader runs.
#[derive(Clone, Debug)]
pub struct ReaderPlace {
    /// None: the housekeeping CPUs of the watched ones.
    pub cpus: Option<Vec<usize>>,
    pub priority: Option<u8>,
}

impl WatchArgs {
    pub fn resolve(&self) -> Result<(Settings, ReaderPlace)> {
        let cpus = self.cpus.as_ref().map(|l| cpu::selected("--cpus", l)).transpose()?;
        let reader_cpus = self.reader_cpus.as_ref().map(|l| cpu::selected("--reader-cpus", l)).transpose()?;
        if self.sample_hz > 0
            && self.deadline.is_none()
            && self.cause_threshold.is_none()
            && !self.policy.contains(&WatchPolicy::Deadline)
        {
            bail!(
                "--sample-hz sets each thread's late periods against its on-time ones: say what is late with \
                 --deadline DUR (its response) or --cause-threshold DUR (its wake-up latency), e.g. --deadline 1ms"
            );
        }
        // pid_max: no id above it can exist (4194304 where it cannot be read).
        let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|m| m.trim().parse::<i32>().ok())
            .unwrap_or(4_194_304);
        if let Some(p) = self.pid.iter().find(|&&p| p <= 0 || p >= pid_max) {
            bail!("--pid {p} is not a thread or process id (1..{pid_max}, kernel.pid_max): see `ps -eLf`");
        }
        if let Some(t) = self.tid.iter().find(|&&t| t <= 0 || t >= pid_max) {
            bail!("--tid {t} is not a thread id (1..{pid_max}, kernel.pid_max): see `ps -eLf`");
        }
        if let Some(c) = self.comm.iter().find(|c| c.is_empty() || c.len() > 15) {
            bail!("--comm '{c}': a thread's name has 1..15 characters (as /proc/PID/comm shows it)");
        }
        let mut policies = Vec::new();
        for p in &self.policy {
            match p {
                WatchPolicy::Fifo => policies.push(sched::SCHED_FIFO),
                WatchPolicy::Rr => policies.push(sched::SCHED_RR),
                WatchPolicy::Deadline => policies.push(sched::SCHED_DEADLINE),
                WatchPolicy::Other => {
                    if self.pid.is_empty() && self.comm.is_empty() && self.tid.is_empty() {
                        bail!("--policy other watches every normal thread: name them with --pid, --tid or --comm");
                    }
                    policies.extend([0, 3, 5]);
                }
            }
        }
        let cpus_online = cpu::online().len().max(1) as u64;
        crate::sys::mem::check_share(
            "--trace-buffer",
            (self.trace_buffer as u64).saturating_mul(cpus_online),
            &format!("its size per CPU x {cpus_online} CPUs is kernel memory; give a smaller --trace-buffer (e.g. 4M)"),
        )
        .map_err(anyhow::Error::msg)?;
        crate::sys::mem::check_share(
            "--max-threads",
            self.max_threads.saturating_mul(crate::watch::THREAD_BYTES),
            "each watched thread's series take about 4 MB: give a smaller --max-threads, or narrow the threads with \
             --comm or --pid",
        )
        .map_err(anyhow::Error::msg)?;
        check_store_and_outputs(&self.store.db, &[("--json", self.out.json.as_deref())])?;
        let settings = Settings {
            filter: Filter { pids: self.pid.clone(), comms: self.comm.clone(), tids: self.tid.clone(), policies, cpus },
            duration_ns: self.duration.map(RunDuration::ns),
            checkpoint_ns: self.checkpoint.unwrap_or(Checkpoint::DEFAULT).ns(),
            exceed: self.exceed.map_or(ExceedMode::Adaptive, ExceedMode::Fixed),
            period_ns: self.period,
            deadline_ns: self.deadline,
            cause_threshold_ns: self.cause_threshold,
            max_episodes: self.episodes as usize,
            buffer_kb: (self.trace_buffer / 1024) as u64,
            max_threads: self.max_threads as usize,
            sample_hz: self.sample_hz,
            classify_all: false,
            until_stopped: false,
        };
        Ok((settings, ReaderPlace { cpus: reader_cpus, priority: self.reader_priority }))
    }
}

impl WatchArgs {
    /// The assessment's cell of these threads (`rtscope run --watch`): its
    /// length is the cell's; its reader stays where the assessment's
    /// threads are.
    pub fn cell(&self) -> Result<crate::watch::WatchCell> {
        if self.duration.is_some() || self.reader_cpus.is_some() || self.reader_priority.is_some() {
            bail!("--duration, --reader-cpus and --reader-priority are the assessment's in a cell of `rtscope run`");
        }
        Ok(crate::watch::WatchCell { settings: self.resolve()?.0 })
    }
}

/// `rtscope run --watch KEY=VALUE,...`: watch's own flags (`--KEY VALUE`).
pub fn watch_args(specs: &[String]) -> Result<Vec<String>> {
    let mut args = Vec::new();
    for spec in specs {
        for kv in spec.split(',') {
            let Some((k, v)) = kv.split_once('=').filter(|(k, v)| !k.is_empty() && !v.is_empty()) else {
                bail!("--watch '{spec}': '{kv}' is not KEY=VALUE (e.g. --watch comm=myloop,deadline=1ms)");
            };
            args.extend([format!("--{}", k.trim()), v.trim().to_string()]);
        }
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Cmd};
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<(Settings, ReaderPlace)> {
        let argv = ["rtscope", "watch", "--db", "/tmp/x.db"].iter().chain(args).copied();
        match Cli::try_parse_from(argv)?.cmd {
            Cmd::Watch(a) => a.resolve(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn resolves_the_filter_and_names_bad_flags() {
        let (s, r) = parse(&["--comm", "myloop", "--pid", "42", "-D", "5", "--policy", "fifo,deadline"]).unwrap();
        assert_eq!(s.filter.comms, ["myloop"]);
        assert_eq!(s.filter.pids, [42]);
        assert_eq!(s.filter.policies, [1, 6]);
        assert_eq!(s.duration_ns, Some(5_000_000_000));
        assert!(r.cpus.is_none() && r.priority.is_none());
        let (s, _) = parse(&[]).unwrap();
        assert_eq!(s.filter.policies, [1, 2, 6]);
        let e = parse(&["--policy", "other"]).err().unwrap().to_string();
        assert!(e.contains("--pid, --tid or --comm"), "{e}");
        let e = parse(&["--comm", "a-name-far-too-long"]).err().unwrap().to_string();
        assert!(e.contains("--comm"), "{e}");
        let e = parse(&["--deadline", "0"]).err().unwrap().to_string();
        assert!(e.contains("--deadline"), "{e}");
        let e = parse(&["--sample-hz", "2000", "--policy", "fifo"]).err().unwrap().to_string();
        assert!(e.contains("--sample-hz") && e.contains("--deadline DUR"), "{e}");
        let (s, _) = parse(&["--sample-hz", "2000", "--deadline", "2ms"]).unwrap();
        assert_eq!(s.sample_hz, 2000);
        assert!(parse(&["--sample-hz", "20001", "--deadline", "2ms"]).is_err());
        assert!(parse(&["--reader-priority", "100"]).is_err());
    }

    #[test]
    fn run_watch_specs_become_watch_flags() {
        let args = watch_args(&["comm=myloop,deadline=1ms".into(), "pid=42".into()]).unwrap();
        assert_eq!(args, ["--comm", "myloop", "--deadline", "1ms", "--pid", "42"]);
        let e = watch_args(&["myloop".into()]).err().unwrap().to_string();
        assert!(e.contains("--watch 'myloop'") && e.contains("KEY=VALUE"), "{e}");
    }
}
