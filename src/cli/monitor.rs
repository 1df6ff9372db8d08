//! `rtscope monitor`'s flags, resolved into a [`MonitorPlan`]: each probe
//! built from its own subcommand's arguments (the registry), at the
//! monitor's low-duty defaults.

use super::dur;
use super::registry::{self, Built};
use crate::probe::{Common, Probe};
use anyhow::{Result, anyhow, bail};
use clap::Args;
use rtscope_model::metrics::DEFAULT_THRESHOLDS_NS;
use rtscope_model::settings::{Checkpoint, CpuList, RunDuration};
use std::net::SocketAddr;
use std::path::PathBuf;

/// The probes the monitor runs: those whose descriptor says how.
pub fn monitor_probes() -> Vec<&'static str> {
    rtscope_model::descriptor::PROBES.iter().filter(|d| d.monitor.is_some()).map(|d| d.name).collect()
}

/// A probe's arguments at the monitor's defaults (its descriptor's, the
/// monitor's `--priority` less its offset), unless `--probe-args` sets the
/// flag.
#[derive(Args, Debug)]
pub struct MonitorArgs {
    /// The probes to run, together, until stopped (wakeup, noise, sleep, ptimer, hwlat). Each runs at its own settings,
    /// at the monitor's low duty unless --probe-args says otherwise: wakeup wakes every 1 ms (1 kHz) per CPU; noise
    /// spins 50 ms of every second (5 % of each CPU) one priority below wakeup; hwlat spins with interrupts off 10 ms
    /// of every second, one CPU at a time.
    #[arg(long, value_name = "PROBE,...", value_delimiter = ',', default_value = "wakeup")]
    pub probes: Vec<String>,
    /// A probe's own arguments, as its subcommand takes them, e.g. --probe-args 'wakeup=--interval 500us' or
    /// 'noise=--active 20ms --pause 980ms' (repeatable).
    #[arg(long, value_name = "PROBE=ARGS")]
    pub probe_args: Vec<String>,
    /// Watch the machine's own real-time threads beside the probes (`rtscope watch`'s probe): KEY=VALUE,... of its
    /// flags, e.g. comm=myloop, pid=4242, tid=4243, policy=fifo, deadline=1ms (repeatable; the keys add up). Each
    /// watched thread's latency, period, runtime and response are exported with its tid and comm as labels, from its
    /// first wake-up until it exits.
    #[arg(long, value_name = "KEY=VALUE,...")]
    pub watch: Vec<String>,
    /// Trace the probes that can be (wakeup, noise) and count every sample above their cause threshold by the class
    /// of its largest cause, as rtscope_episodes_total{cause=...} (the worst episodes are kept in the store as with
    /// --trace; --probe-args 'wakeup=--cause-threshold 50us' sets the threshold). Costs the trace events on the
    /// probe's wake-up path (about 1.6 us of a wake-up on a KVM guest) and a reader thread (about 1 % of a CPU);
    /// the wake-up's stacks too where --stacks auto finds them cheap (at most 0.5 us a wake-up; --probe-args
    /// 'wakeup=--stacks off' keeps them off).
    #[arg(long)]
    pub trace: bool,
    #[command(flatten)]
    pub measure: super::CpusArgs,
    /// Real-time priority of the measuring threads (SCHED_FIFO; noise one below).
    #[arg(long, short = 'p', default_value_t = 95, value_parser = clap::value_parser!(u8).range(2..=99))]
    pub priority: u8,
    /// Where /metrics is served (HTTP). Localhost by default: expose it to a network only on purpose.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9733")]
    pub listen: SocketAddr,
    /// TLS and basic auth for /metrics, in the web configuration file that Prometheus' exporters share
    /// (exporter-toolkit's: tls_server_config, basic_auth_users); see docs/monitor.md.
    #[arg(long, value_name = "FILE")]
    pub web_config: Option<PathBuf>,
    /// Commit each probe's histogram, interval maxima and counters to the store this often; a SIGKILL loses at most
    /// one such interval.
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = Checkpoint::parse)]
    pub checkpoint: Checkpoint,
    /// Keep each checkpoint interval this long; older ones are summarised (merged, one per --summary-span), never
    /// dropped.
    #[arg(long, value_name = "DUR", default_value = "30d", value_parser = dur)]
    pub retain: u64,
    /// The span of a summary interval.
    #[arg(long, value_name = "DUR", default_value = "1h", value_parser = dur)]
    pub summary_span: u64,
    /// The store's size limit: past it, intervals younger than --retain are summarised too, the oldest first.
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = store_size)]
    pub max_store: u64,
    /// Count the values above each of these thresholds (rtscope_exceedances_total).
    #[arg(long, value_name = "DUR,...", value_delimiter = ',', value_parser = dur)]
    pub thresholds: Vec<u64>,
    /// Hold /dev/cpu_dma_latency at US microseconds while monitoring (alone: 0, C-states off; 0..10000). Off by
    /// default: a monitor measures the machine as it runs in service.
    #[arg(long, value_name = "US", num_args = 0..=1, default_missing_value = "0",
          value_parser = rtscope_model::settings::DmaLatency::parse)]
    pub dma_latency: Option<rtscope_model::settings::DmaLatency>,
    /// Stop after DUR, each probe's run stored complete (e.g. 24h; a bare number is seconds) [default: until
    /// stopped, as a service runs]
    #[arg(long, short = 'D', value_name = "DUR", value_parser = RunDuration::parse)]
    pub duration: Option<RunDuration>,
    /// No banner or warnings on stderr (they are stored with each run).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// The monitor's own run store (SQLite, created if missing).
    #[arg(long, value_name = "PATH", default_value = "rtscope-monitor.db")]
    pub db: PathBuf,
}

fn store_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t.strip_suffix("iB").or_else(|| t.strip_suffix('B')).unwrap_or(t);
    rtscope_model::units::parse_size(t)
        .filter(|&n| n >= 1 << 20)
        .map(|n| n as u64)
        .ok_or_else(|| format!("'{s}' is not a size of at least 1M (e.g. 512M, 1GiB)"))
}

/// What `rtscope monitor` runs.
pub struct MonitorPlan {
    pub probes: Vec<(Box<Common>, Box<dyn Probe>)>,
    /// The watched threads (`--watch`).
    pub watch: Option<crate::watch::Settings>,
    pub listen: SocketAddr,
    pub web_config: Option<PathBuf>,
    pub checkpoint_ns: u64,
    pub retain_ns: u64,
    pub span_ns: u64,
    pub max_store: u64,
    pub thresholds_ns: Vec<u64>,
    /// `--duration`: each run ends by itself, complete (None: until stopped).
    pub duration_ns: Option<u64>,
    pub db: PathBuf,
    pub quiet: bool,
}

impl MonitorArgs {
    /// Builds every probe from its own arguments at the monitor's defaults.
    pub fn resolve(&self) -> Result<MonitorPlan> {
        if self.retain < self.checkpoint.ns() {
            bail!("--retain must be at least --checkpoint ({})", rtscope_model::units::human(self.checkpoint.ns()));
        }
        if self.summary_span < self.checkpoint.ns() {
            bail!("--summary-span must be at least --checkpoint: a summary merges several intervals");
        }
        let mut extra: Vec<(String, Vec<String>)> = Vec::new();
        for pa in &self.probe_args {
            let (name, args) = pa
                .split_once('=')
                .ok_or_else(|| anyhow!("--probe-args '{pa}': write PROBE=ARGS, e.g. 'wakeup=--interval 500us'"))?;
            if !self.probes.iter().any(|p| p == name) {
                bail!("--probe-args '{pa}': probe {name} is not in --probes");
            }
            extra.push((name.to_string(), args.split_whitespace().map(String::from).collect()));
        }
        let mut probes = Vec::new();
        for name in &self.probes {
            if probes.iter().any(|(_, p): &(Box<Common>, Box<dyn Probe>)| p.name() == name) {
                bail!("--probes: {name} is named twice");
            }
            let Some(monitored) = rtscope_model::descriptor::find(name).and_then(|d| d.monitor.as_ref()) else {
                bail!("--probes: the monitor runs the per-CPU probes {}; not '{name}'", monitor_probes().join(", "));
            };
            let args: Vec<String> = extra.iter().filter(|(n, _)| n == name).flat_map(|(_, a)| a.clone()).collect();
            let traceable = rtscope_model::descriptor::find(name)
                .is_some_and(|d| !matches!(d.trace, rtscope_model::descriptor::Trace::No));
            // The monitor's priority and duty are defaults, typed: each
            // yields to the probe's own flag however that is spelled
            // (`-p80`, `--priority=80`), judged on what clap matched.
            let mut given = self.given(self.measure.cpus.clone(), self.trace && traceable);
            given.priority = Some(self.priority.saturating_sub(monitored.priority_below).max(1));
            given.duty = monitored.duty;
            match registry::build(registry::find(name)?, &args, &given)? {
                Built::PerCpu(mut common, probe) => {
                    // Judged on what the flags came to, however spelled
                    // (`-D5s`, `--duration=5s`, `-D 5s`).
                    let traced = self.trace && traceable;
                    let forbidden = [
                        ("--duration", common.duration_ns.is_some() && self.duration.is_none()),
                        ("--loops", common.loops.is_some()),
                        ("--json", common.json.is_some()),
                        ("--threshold", common.threshold_ns.is_some()),
                        ("--trace", common.trace.is_some() && !traced),
                    ];
                    if let Some((flag, _)) = forbidden.iter().find(|f| f.1) {
                        bail!(
                            "--probe-args: {name}'s {flag} is not for a monitor, which runs until stopped and \
                             stores its own (give --trace or --duration to rtscope monitor itself)"
                        );
                    }
                    common.kind = "monitor".into();
                    // Every explained sample counted, not only those kept.
                    // No timeline: the window is the monitor's whole life.
                    if let Some(t) = common.trace.as_mut() {
                        (t.classify_all, t.timeline) = (true, false);
                    }
                    probes.push((common, probe));
                }
                Built::Own(_) => bail!("--probes: {name} is not a per-CPU probe"),
            }
        }
        if self.trace && !probes.iter().any(|(c, _)| c.trace.is_some()) {
            bail!("--trace: none of --probes {} can be traced (wakeup and noise can)", self.probes.join(","));
        }
        let watch = self.watch_settings()?;
        let mut thresholds =
            if self.thresholds.is_empty() { DEFAULT_THRESHOLDS_NS.to_vec() } else { self.thresholds.clone() };
        thresholds.sort_unstable();
        thresholds.dedup();
        Ok(MonitorPlan {
            probes,
            watch,
            listen: self.listen,
            web_config: self.web_config.clone(),
            checkpoint_ns: self.checkpoint.ns(),
            retain_ns: self.retain,
            span_ns: self.summary_span,
            max_store: self.max_store,
            thresholds_ns: thresholds,
            duration_ns: self.duration.map(RunDuration::ns),
            db: self.db.clone(),
            quiet: self.quiet,
        })
    }
}

impl MonitorArgs {
    /// What the monitor gives each probe it builds, typed: its checkpoint,
    /// store and C-state setting, `cpus`, `trace` and its `--duration`
    /// (None: until stopped).
    fn given(&self, cpus: Option<CpuList>, trace: bool) -> registry::Given {
        registry::Given {
            owner: "the monitor",
            cpus,
            duration: self.duration,
            priority: None,
            duty: None,
            checkpoint: self.checkpoint,
            trace,
            db: self.db.clone(),
            quiet: true,
            dma_latency: self.dma_latency,
        }
    }

    /// `--watch`'s specs as `rtscope watch` takes them, at the monitor's
    /// checkpoint and store; None without --watch.
    fn watch_settings(&self) -> Result<Option<crate::watch::Settings>> {
        if self.watch.is_empty() {
            return Ok(None);
        }
        let args = super::watch_args(&self.watch).map_err(|e| anyhow!("{e:#}"))?;
        let mut cell = registry::watch_cell(&args, &self.given(None, false)).map_err(|e| anyhow!("--watch: {e:#}"))?;
        cell.settings.classify_all = true;
        cell.settings.until_stopped = true;
        cell.settings.duration_ns = self.duration.map(RunDuration::ns);
        Ok(Some(cell.settings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: MonitorArgs,
    }

    fn plan(args: &[&str]) -> Result<MonitorPlan> {
        T::try_parse_from(std::iter::once("t").chain(args.iter().copied())).map_err(|e| anyhow!("{e}"))?.a.resolve()
    }

    #[test]
    fn probes_get_the_monitor_defaults_and_their_own_arguments() {
        let p = plan(&["--probes", "wakeup,noise", "--cpus", "0", "--probe-args", "noise=--pause 1950ms"]).unwrap();
        assert_eq!(p.probes.len(), 2);
        let (wc, w) = &p.probes[0];
        assert_eq!((w.name(), wc.priority, wc.kind.as_str(), wc.dma_latency), ("wakeup", 95, "monitor", None));
        assert_eq!(wc.duration_ns, None);
        assert_eq!(wc.checkpoint_ns, 10_000_000_000);
        let (nc, n) = &p.probes[1];
        assert_eq!((n.name(), nc.priority), ("noise", 94));
        assert_eq!(n.plan()["pause_ns"], 1_950_000_000u64, "{}", n.plan());
        assert_eq!(n.plan()["active_ns"], 50_000_000u64, "{}", n.plan());
        assert_eq!(p.thresholds_ns, DEFAULT_THRESHOLDS_NS.to_vec());
        assert_eq!(p.max_store, 1 << 30);
        assert_eq!(p.listen.to_string(), "127.0.0.1:9733");
        assert!(p.watch.is_none());
    }

    /// A default yields to the probe's own flag however it is spelled
    /// (the text `-p80` is not `--priority`, but it sets it).
    #[test]
    fn a_default_yields_to_the_probes_own_flag_however_spelled() {
        for own in ["wakeup=-p80", "wakeup=-p 80", "wakeup=--priority=80", "wakeup=--priority 80"] {
            let p = plan(&["--probes", "wakeup", "--cpus", "0", "--probe-args", own]).unwrap();
            assert_eq!(p.probes[0].0.priority, 80, "{own}");
        }
        for own in ["noise=--active=20ms", "noise=--active 20ms"] {
            let p = plan(&["--probes", "noise", "--cpus", "0", "--probe-args", own]).unwrap();
            assert_eq!(p.probes[0].1.plan()["active_ns"], 20_000_000u64, "{own}");
            assert_eq!(p.probes[0].1.plan()["pause_ns"], 950_000_000u64, "{own}: the other default stays");
        }
    }

    /// --duration is the monitor's, given to every run: each ends by
    /// itself, complete; a probe's own -D is refused beside it too.
    #[test]
    fn a_duration_is_the_monitors_and_every_run_takes_it() {
        let p = plan(&["--probes", "wakeup,noise", "--cpus", "0", "--duration", "3", "--watch", "comm=x"]).unwrap();
        assert_eq!(p.duration_ns, Some(3_000_000_000));
        assert!(p.probes.iter().all(|(c, _)| c.duration_ns == Some(3_000_000_000)));
        assert_eq!(p.watch.unwrap().duration_ns, Some(3_000_000_000));
        let e = plan(&["--duration", "3s", "--probe-args", "wakeup=-D5s"]).err().unwrap().to_string();
        assert!(e.contains("--duration is the monitor's own setting"), "{e}");
        assert!(plan(&["--duration", "0"]).is_err());
    }

    /// A traced monitor counts every explained sample and keeps no
    /// timeline: its window is its whole life.
    #[test]
    fn a_traced_monitor_keeps_no_timeline() {
        let p = plan(&["--probes", "wakeup", "--cpus", "0", "--trace", "--watch", "comm=x"]).unwrap();
        let t = p.probes[0].0.trace.as_ref().unwrap();
        assert!(t.classify_all && !t.timeline);
        assert!(p.watch.unwrap().until_stopped);
    }

    #[test]
    fn watch_specs_become_the_watch_probes_settings() {
        let p = plan(&["--watch", "comm=myloop,tid=77", "--watch", "pid=42", "--checkpoint", "5s"]).unwrap();
        let w = p.watch.unwrap();
        assert_eq!((w.filter.comms.as_slice(), w.filter.tids.as_slice()), (&["myloop".to_string()][..], &[77][..]));
        assert_eq!(w.filter.pids, [42]);
        assert_eq!((w.checkpoint_ns, w.duration_ns), (5_000_000_000, None));
        assert_eq!(p.probes.len(), 1, "the probes run beside it");
    }

    #[test]
    fn bad_input_names_the_flag() {
        let e = |args: &[&str]| plan(args).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e(&["--probes", "osbench"]).contains("--probes"));
        assert!(e(&["--probe-args", "noise=--active 1ms"]).contains("not in --probes"));
        assert!(e(&["--probe-args", "wakeup"]).contains("PROBE=ARGS"));
        assert!(e(&["--probe-args", "wakeup=--duration 5s"]).contains("--duration"));
        assert!(e(&["--probe-args", "wakeup=-D5s"]).contains("--duration"), "however spelled");
        assert!(e(&["--probe-args", "wakeup=--duration=5s"]).contains("--duration"));
        assert!(e(&["--probe-args", "wakeup=-l100"]).contains("--loops"));
        assert!(e(&["--probe-args", "wakeup=--trace"]).contains("--trace"));
        assert!(e(&["--probe-args", "wakeup=--interval lots"]).contains("--interval"));
        assert!(e(&["--max-store", "10K"]).contains("at least 1M"));
        assert!(e(&["--retain", "1s"]).contains("--retain"));
        assert!(e(&["--listen", "localhost"]).contains("--listen"));
        assert!(e(&["--watch", "myloop"]).contains("KEY=VALUE"));
        assert!(e(&["--watch", "tid=0"]).contains("--tid 0"));
        assert!(e(&["--watch", "colour=red"]).contains("--watch"));
        assert!(e(&["--watch", "duration=5s"]).contains("monitor's own"));
    }
}
