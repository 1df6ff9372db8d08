//! The probes an assessment (`rtscope run`) can put in its matrix, by
//! name: one line each. A per-CPU probe is built from its own subcommand's
//! arguments, so that the matrix gets the same defaults and the same
//! checks as `rtscope <probe>`; the assessment adds the common ones
//! (`--cpus`, `--duration`, `--db`, `--trace`, ...). A measurement that is
//! not a per-CPU [`Probe`] (`osbench`, the OS-service benchmark) joins as
//! [`Built::Own`], recording its own series into the run: it gets only
//! `--db` and `--quiet` on its command line, the measured CPUs through
//! [`OwnCell::place`] and the cell's length through [`OwnCell::measure`].

use super::{Cli, Cmd, NetlatPlan};
use crate::probe::{Common, Probe};
use crate::session::OwnCell;
use anyhow::{Result, anyhow};
use clap::Parser;

/// A measurement the assessment can run.
pub struct Entry {
    pub name: &'static str,
    /// In the default assessment (`rtscope run` without --probes).
    pub default: bool,
    /// What its rows in the matrix are.
    pub rows: &'static str,
    /// Takes the assessment's common options (`--cpus`, `--duration`,
    /// `--checkpoint`, `--trace`) on its command line, as a per-CPU probe
    /// does; else only `--db` and `--quiet`.
    pub common_args: bool,
    /// Builds it from its subcommand's arguments.
    pub build: fn(&[String]) -> Result<Built>,
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
}

/// Parses `rtscope <name> <args>`.
fn parse(name: &str, args: &[String]) -> Result<Cmd> {
    let argv = ["rtscope", name].into_iter().map(String::from).chain(args.iter().cloned());
    Cli::try_parse_from(argv).map(|c| c.cmd).map_err(|e| {
        let text = e.to_string();
        let first = text.lines().next().unwrap_or_default().trim_start_matches("error: ");
        anyhow!("probe {name}: {first} (see rtscope {name} --help)")
    })
}

/// A per-CPU probe's entry: parses its subcommand and resolves it.
macro_rules! per_cpu {
    ($name:literal, $variant:ident) => {
        |args: &[String]| match parse($name, args)? {
            Cmd::$variant(a) => a.resolve("run").map(|(c, p)| Built::PerCpu(Box::new(c), Box::new(p))),
            _ => unreachable!("`rtscope {}` parses as itself", $name),
        }
    };
}

/// Every measurement the matrix knows, in the order of its rows.
pub static PROBES: &[Entry] = &[
    Entry {
        name: "wakeup",
        default: true,
        rows: "latency (and its stages with --trace)",
        common_args: true,
        build: per_cpu!("wakeup", Wakeup),
    },
    Entry {
        name: "noise",
        default: true,
        rows: "interruption length",
        common_args: true,
        build: per_cpu!("noise", Noise),
    },
    Entry {
        name: "sleep",
        default: true,
        rows: "deviation per sleep API",
        common_args: true,
        build: per_cpu!("sleep", Sleep),
    },
    Entry {
        name: "ptimer",
        default: true,
        rows: "drift per timer kind",
        common_args: true,
        build: per_cpu!("ptimer", Ptimer),
    },
    Entry {
        name: "netlat",
        default: true,
        rows: "UDP stack latency (rx_wake, rx_stack, ...)",
        common_args: true,
        build: netlat,
    },
    Entry {
        name: "osbench",
        default: true,
        rows: "OS-service wake-up time per test (futex, PI mutex, pipe, eventfd, mq, signal, unix socket)",
        common_args: false,
        build: osbench,
    },
];

/// `rtscope osbench`'s tests (without -t, the cell's default set), each
/// time its cell runs taking its share of the cell.
fn osbench(args: &[String]) -> Result<Built> {
    match parse("osbench", args)? {
        Cmd::Osbench(a) => a.cell().map(|c| Built::Own(Box::new(c))).map_err(|e| anyhow!("probe osbench: {e:#}")),
        _ => unreachable!("`rtscope osbench` parses as itself"),
    }
}

/// netlat's local mode (sender and receiver per CPU); the two-host modes
/// are not matrix cells.
fn netlat(args: &[String]) -> Result<Built> {
    match parse("netlat", args)? {
        Cmd::Netlat(a) => match a.resolve("run")? {
            NetlatPlan::Measure(common, probe, _) => Ok(Built::PerCpu(Box::new(common), Box::new(probe))),
            NetlatPlan::Serve { .. } => {
                Err(anyhow!("probe netlat: --serve is not a measurement; run it apart with rtscope netlat --serve"))
            }
        },
        _ => unreachable!("`rtscope netlat` parses as itself"),
    }
}

pub fn find(name: &str) -> Result<&'static Entry> {
    PROBES.iter().find(|e| e.name == name).ok_or_else(|| {
        anyhow!("--probes: no probe '{name}' (known: {})", PROBES.iter().map(|e| e.name).collect::<Vec<_>>().join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_probe_builds_with_its_defaults_and_names_bad_arguments() {
        for e in PROBES {
            let mut args = vec!["--db", "/tmp/x.db", "--quiet"];
            if e.common_args {
                args.extend(["--duration", "2s", "--cpus", "0"]);
            }
            let args: Vec<String> = args.into_iter().map(String::from).collect();
            let built = (e.build)(&args).unwrap_or_else(|err| panic!("{}: {err:#}", e.name));
            assert_eq!(built.name(), e.name);
        }
        let bad = (find("osbench").unwrap().build)(&["-t".into(), "wake.nope".into()]).err().unwrap().to_string();
        assert!(bad.contains("probe osbench") && bad.contains("-t wake.nope"), "{bad}");
        let bad = (find("osbench").unwrap().build)(&["-o".into(), "x.csv".into()]).err().unwrap().to_string();
        assert!(bad.contains("--output"), "{bad}");
        let err = (find("wakeup").unwrap().build)(&["--interval".into(), "lots".into()]).err().unwrap().to_string();
        assert!(err.contains("probe wakeup") && err.contains("--interval"), "{err}");
        assert!(find("nope").err().unwrap().to_string().contains("wakeup, noise"));
    }
}
