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
use anyhow::{Result, anyhow};
use rtscope_model::descriptor::{self, Descriptor, PROBES};

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

/// Parses `rtscope <name> <args>`.
fn parse(name: &str, args: &[String]) -> Result<Cmd> {
    let argv = ["rtscope", name].into_iter().map(String::from).chain(args.iter().cloned());
    super::parse_plain(argv.map(std::ffi::OsString::from)).map(|c| c.cmd).map_err(|e| {
        // clap's first paragraph: "the following required arguments were
        // not provided:" is followed by the arguments, on their own lines.
        let text = e.to_string();
        let first: Vec<&str> = text.lines().map(str::trim).take_while(|l| !l.is_empty()).collect();
        let first = first.join(" ");
        anyhow!("probe {name}: {} (see rtscope {name} --help)", first.trim_start_matches("error: "))
    })
}

/// Builds the measurement `d` from its subcommand's arguments: a per-CPU
/// probe (netlat's local mode: its two-host modes are not matrix cells),
/// or osbench's tests (without -t, the cell's default set), each time its
/// cell runs taking its share of the cell.
pub fn build(d: &Descriptor, args: &[String]) -> Result<Built> {
    match parse(d.name, args)? {
        Cmd::Probe(p) => match p.resolve("run")? {
            ProbePlan::Measure(common, probe, _) => Ok(Built::PerCpu(common, probe)),
            ProbePlan::Serve { .. } => {
                Err(anyhow!("probe {0}: --serve is not a measurement; run it apart with rtscope {0} --serve", d.name))
            }
        },
        Cmd::Osbench(a) => a.cell().map(|c| Built::Own(Box::new(c))).map_err(|e| anyhow!("probe {}: {e:#}", d.name)),
        Cmd::Watch(a) => a.cell().map(|c| Built::Own(Box::new(c))).map_err(|e| anyhow!("probe {}: {e:#}", d.name)),
        _ => unreachable!("`rtscope {}` parses as itself", d.name),
    }
}

/// `rtscope watch`'s cell from its arguments (`monitor --watch`).
pub fn watch_cell(args: &[String]) -> Result<crate::watch::WatchCell> {
    match parse(crate::watch::NAME, args)? {
        Cmd::Watch(a) => a.cell(),
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

    #[test]
    fn every_probe_builds_with_its_defaults_and_names_bad_arguments() {
        for e in PROBES {
            let mut args = vec!["--db", "/tmp/x.db", "--quiet"];
            if e.per_cpu {
                args.extend(["--duration", "2s", "--cpus", "0"]);
            }
            let args: Vec<String> = args.into_iter().map(String::from).collect();
            let built = build(e, &args).unwrap_or_else(|err| panic!("{}: {err:#}", e.name));
            assert_eq!(built.name(), e.name);
        }
        let bad = build(find("osbench").unwrap(), &["-t".into(), "wake.nope".into()]).err().unwrap().to_string();
        assert!(bad.contains("probe osbench") && bad.contains("-t wake.nope"), "{bad}");
        let bad = build(find("osbench").unwrap(), &["-o".into(), "x.csv".into()]).err().unwrap().to_string();
        assert!(bad.contains("--output"), "{bad}");
        let err = build(find("wakeup").unwrap(), &["--interval".into(), "lots".into()]).err().unwrap().to_string();
        assert!(err.contains("probe wakeup") && err.contains("--interval"), "{err}");
        assert!(find("nope").err().unwrap().to_string().contains("wakeup, noise"));
    }
}
