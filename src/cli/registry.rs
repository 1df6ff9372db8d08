//! The measurements an assessment (`rtscope run`) can put in its matrix:
//! those of the descriptor table (`rtscope_model::descriptor::PROBES`),
//! each built by name from its own subcommand's arguments, so that the
//! matrix gets the same defaults and the same checks as `rtscope <probe>`;
//! the assessment adds the common ones (`--cpus`, `--duration`, `--db`,
//! `--trace`, ...) to a per-CPU probe's. A measurement that is not a
//! per-CPU [`Probe`] (`osbench`, the OS-service benchmark) joins as
//! [`Built::Own`], recording its own series into the run: it gets only
//! `--db` and `--quiet` on its command line, the measured CPUs through
//! [`OwnCell::place`] and the cell's length through [`OwnCell::measure`].

use super::{Cmd, ProbePlan};
use crate::probe::{Common, Probe};
use crate::session::OwnCell;
use anyhow::{Result, anyhow, bail};
use rtscope_model::descriptor::{self, Descriptor, PROBES};

/// What a plan or the monitor gives each probe it builds, typed: taken
/// into the probe's own settings ([`super::CommonArgs::take`]), never
/// written back into its command line.
#[derive(Clone, Debug)]
pub struct Given {
    /// Whose settings they are, for a refusal (`the plan`, `the monitor`).
    pub owner: &'static str,
    /// A per-CPU probe's CPUs (None: the probe's default).
    pub cpus: Option<rtscope_model::settings::CpuList>,
    /// A per-CPU probe's duration (None: until stopped).
    pub duration: Option<rtscope_model::settings::RunDuration>,
    /// A per-CPU probe's priority where its own arguments do not set one
    /// (the monitor's; None: the probe's default).
    pub priority: Option<u8>,
    /// A spinning probe's duty where its own arguments do not set it (the
    /// monitor's low duty; None: the probe's own).
    pub duty: Option<rtscope_model::descriptor::Duty>,
    pub checkpoint: rtscope_model::settings::Checkpoint,
    /// Traced, where the probe can be.
    pub trace: bool,
    pub db: std::path::PathBuf,
    pub quiet: bool,
    /// What `/dev/cpu_dma_latency` is held at, unless the probe's own
    /// arguments say (None: left alone, whatever they say).
    pub dma_latency: Option<rtscope_model::settings::DmaLatency>,
}

/// A measurement ready for a cell.
pub enum Built {
    /// A per-CPU probe, measured by [`crate::probe::Cell`].
    PerCpu(Box<Common>, Box<dyn Probe>),
    /// A measurement with its own runner.
    Own(Box<dyn OwnCell>),
}

impl Built {
    pub fn name(&self) -> &'static str {
        match self {
            Built::PerCpu(_, p) => p.name(),
            Built::Own(o) => o.name(),
        }
    }

    /// The name its series are stored under: an instance's (`wakeup@80`),
    /// else the probe's.
    pub fn series_name(&self) -> &str {
        match self {
            Built::PerCpu(c, p) => c.series_name(p.as_ref()),
            Built::Own(o) => o.name(),
        }
    }
}

/// clap's refusal of a probe's arguments in one line, naming the probe.
fn clap_words(name: &str, e: &clap::Error) -> anyhow::Error {
    // clap's first paragraph: "the following required arguments were
    // not provided:" is followed by the arguments, on their own lines.
    let text = e.to_string();
    let first: Vec<&str> = text.lines().map(str::trim).take_while(|l| !l.is_empty()).collect();
    let first = first.join(" ");
    anyhow!("probe {name}: {} (see rtscope {name} --help)", first.trim_start_matches("error: "))
}

/// Parses `rtscope <name> <args>`, by the command line's own parser; with
/// the arguments that `args` set, however they are spelled (`-p80`, `-p
/// 80`, `--priority=80`): their ids (the flags' long names with `_` for
/// `-`). What a plan or the monitor gives a probe by default is given only
/// where these do not set it.
fn parse(name: &str, args: &[String]) -> Result<(Cmd, Vec<String>)> {
    use clap::FromArgMatches;
    let argv = ["rtscope", name].into_iter().map(String::from).chain(args.iter().cloned());
    let (mut cmd, mut m) = super::matches(argv.map(std::ffi::OsString::from)).map_err(|e| clap_words(name, &e))?;
    let set = m.subcommand_matches(name).map_or_else(Vec::new, |sub| {
        sub.ids()
            .filter(|id| sub.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine))
            .map(|id| id.to_string())
            .collect()
    });
    let cli = super::Cli::from_arg_matches_mut(&mut m).map_err(|e| clap_words(name, &e.format(&mut cmd)))?;
    Ok((cli.cmd, set))
}

/// Builds the measurement `d` from its subcommand's arguments as the user
/// wrote them (a plan's `[args]`, the monitor's `--probe-args`) and what
/// the plan or the monitor gives it, typed: a per-CPU probe (netlat's
/// local mode: its two-host modes are not matrix cells), or osbench's
/// tests (without -t, the cell's default set), each time its cell runs
/// taking its share of the cell.
pub fn build(d: &Descriptor, args: &[String], given: &Given) -> Result<Built> {
    let (cmd, set) = parse(d.name, args)?;
    match cmd {
        Cmd::Probe(mut p) => {
            p.common_mut().take(given, &set).map_err(|e| anyhow!("probe {}: {e:#}", d.name))?;
            if let Some(duty) = given.duty {
                p.take_duty(duty, &set);
            }
            build_probe(d, p)
        }
        Cmd::Osbench(mut a) => {
            (a.store.db, a.out.quiet) = (given.db.clone(), given.quiet);
            a.cell().map(|c| Built::Own(Box::new(c))).map_err(|e| anyhow!("probe {}: {e:#}", d.name))
        }
        Cmd::Watch(mut a) => {
            if a.checkpoint.is_some() {
                bail!("probe {}: --checkpoint is {}'s own setting, not a probe's", d.name, given.owner);
            }
            (a.store.db, a.out.quiet, a.checkpoint) = (given.db.clone(), given.quiet, Some(given.checkpoint));
            a.cell().map(|c| Built::Own(Box::new(c))).map_err(|e| anyhow!("probe {}: {e:#}", d.name))
        }
        _ => unreachable!("`rtscope {}` parses as itself", d.name),
    }
}

fn build_probe(d: &Descriptor, p: super::ProbeCmd) -> Result<Built> {
    match p.resolve("run")? {
        ProbePlan::Measure(common, probe, _) => Ok(Built::PerCpu(common, probe)),
        ProbePlan::Serve { .. } => {
            Err(anyhow!("probe {0}: --serve is not a measurement; run it apart with rtscope {0} --serve", d.name))
        }
    }
}

/// `rtscope watch`'s cell from its arguments (`monitor --watch`) and what
/// the monitor gives it; its duration, JSON, store and checkpoint are the
/// monitor's.
pub fn watch_cell(args: &[String], given: &Given) -> Result<crate::watch::WatchCell> {
    match parse(crate::watch::NAME, args)?.0 {
        Cmd::Watch(mut a) => {
            let own = [
                ("duration", a.duration.is_some()),
                ("json", a.out.json.is_some()),
                ("checkpoint", a.checkpoint.is_some()),
            ];
            for (key, set) in own {
                if set {
                    bail!("{key} is {}'s own (give it to it, not in --watch)", given.owner);
                }
            }
            (a.store.db, a.out.quiet, a.checkpoint) = (given.db.clone(), given.quiet, Some(given.checkpoint));
            a.cell()
        }
        _ => unreachable!("`rtscope watch` parses as itself"),
    }
}

/// The row of the measurement `name` in the descriptor table.
pub fn find(name: &str) -> Result<&'static Descriptor> {
    descriptor::find(name).ok_or_else(|| {
        anyhow!("--probes: no probe '{name}' (known: {})", PROBES.iter().map(|e| e.name).collect::<Vec<_>>().join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(per_cpu: bool) -> Given {
        Given {
            owner: "the plan",
            cpus: if per_cpu { rtscope_model::settings::CpuList::of(vec![0]) } else { None },
            duration: per_cpu.then(|| rtscope_model::settings::RunDuration::new(2_000_000_000).unwrap()),
            priority: None,
            duty: None,
            checkpoint: rtscope_model::settings::Checkpoint::DEFAULT,
            trace: false,
            db: "/tmp/x.db".into(),
            quiet: true,
            dma_latency: Some(rtscope_model::settings::DmaLatency::ZERO),
        }
    }

    #[test]
    fn every_probe_builds_with_its_defaults_and_names_bad_arguments() {
        for e in PROBES {
            let built = match build(e, &[], &given(e.per_cpu)) {
                // The serial round trip needs its port: without one, the
                // refusal names the flag.
                Err(err) if e.name == descriptor::SERIAL_RTT.name => {
                    assert!(err.to_string().contains("--tty"), "{err:#}");
                    continue;
                }
                got => got.unwrap_or_else(|err| panic!("{}: {err:#}", e.name)),
            };
            assert_eq!(built.name(), e.name);
            if let Built::PerCpu(common, _) = &built {
                assert_eq!((common.cpus.as_slice(), common.duration_ns), (&[0][..], Some(2_000_000_000)));
            }
        }
        // The plan's own settings are not a probe's.
        let wakeup = find("wakeup").unwrap();
        for flag in ["--cpus", "--duration", "--checkpoint"] {
            let value = if flag == "--cpus" { "0" } else { "1s" };
            let e = build(wakeup, &[flag.into(), value.into()], &given(true)).err().unwrap().to_string();
            assert!(e.contains(&format!("{flag} is the plan's own setting, not a probe's")), "{e}");
        }
        let bad = build(find("osbench").unwrap(), &["-t".into(), "wake.nope".into()], &given(false))
            .err()
            .unwrap()
            .to_string();
        assert!(bad.contains("probe osbench") && bad.contains("-t wake.nope"), "{bad}");
        let bad =
            build(find("osbench").unwrap(), &["-o".into(), "x.csv".into()], &given(false)).err().unwrap().to_string();
        assert!(bad.contains("--output"), "{bad}");
        let err = build(find("wakeup").unwrap(), &["--interval".into(), "lots".into()], &given(true))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("probe wakeup") && err.contains("--interval"), "{err}");
        assert!(find("nope").err().unwrap().to_string().contains("wakeup, noise"));
    }
}
