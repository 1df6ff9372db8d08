//! The probes an assessment (`rtscope run`) can put in its matrix, by
//! name: one line each. A per-CPU probe is built from its own subcommand's
//! arguments, so that the matrix gets the same defaults and the same
//! checks as `rtscope <probe>`; the assessment adds the common ones
//! (`--cpus`, `--duration`, `--db`, `--trace`, ...). A measurement that is
//! not a per-CPU [`Probe`] (e.g. an OS-service benchmark) joins as
//! [`Built::Own`], recording its own series into the run.

use super::{CellOutcome, Common, OpenRun, Probe};
use crate::cli::{Cli, Cmd};
use anyhow::{Result, anyhow};
use clap::Parser;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// A measurement the assessment can run.
pub struct Entry {
    pub name: &'static str,
    /// In the default assessment (`rtscope run` without --probes).
    pub default: bool,
    /// What its rows in the matrix are.
    pub rows: &'static str,
    /// Builds it from its subcommand's arguments.
    pub build: fn(&[String]) -> Result<Built>,
}

/// A measurement ready for a cell.
pub enum Built {
    /// A per-CPU probe, measured by [`super::Cell`].
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

/// A measurement that is not a per-CPU periodic probe: it records its
/// series (keyed with the cell's load) into the open run itself.
pub trait OwnCell {
    fn name(&self) -> &'static str;
    /// Its settings, for the run's plan.
    fn plan(&self) -> serde_json::Value;
    /// Measures for about `duration_ns` (or until `signal`), its series
    /// keyed with `load`.
    fn measure(&self, run: &mut OpenRun, load: &str, duration_ns: u64, signal: &Arc<AtomicBool>)
    -> Result<CellOutcome>;
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
        build: per_cpu!("wakeup", Wakeup),
    },
    Entry { name: "noise", default: true, rows: "interruption length", build: per_cpu!("noise", Noise) },
    Entry { name: "sleep", default: true, rows: "deviation per sleep API", build: per_cpu!("sleep", Sleep) },
    Entry { name: "ptimer", default: true, rows: "drift per timer kind", build: per_cpu!("ptimer", Ptimer) },
    Entry { name: "netlat", default: true, rows: "UDP stack latency (rx_wake, rx_stack, ...)", build: netlat },
];

/// netlat's local mode (sender and receiver per CPU); the two-host modes
/// are not matrix cells.
fn netlat(args: &[String]) -> Result<Built> {
    match parse("netlat", args)? {
        Cmd::Netlat(a) => match a.resolve("run")? {
            crate::cli::NetlatPlan::Measure(common, probe, _) => Ok(Built::PerCpu(Box::new(common), Box::new(probe))),
            crate::cli::NetlatPlan::Serve { .. } => {
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
            let args = ["--duration", "2s", "--db", "/tmp/x.db", "--cpus", "0"].map(String::from);
            let built = (e.build)(&args).unwrap_or_else(|err| panic!("{}: {err:#}", e.name));
            assert_eq!(built.name(), e.name);
        }
        let err = (find("wakeup").unwrap().build)(&["--interval".into(), "lots".into()]).err().unwrap().to_string();
        assert!(err.contains("probe wakeup") && err.contains("--interval"), "{err}");
        assert!(find("nope").err().unwrap().to_string().contains("wakeup, noise"));
    }
}
