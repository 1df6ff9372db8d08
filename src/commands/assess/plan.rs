//! A plan checked and built: the CPUs, the durations, every probe built
//! through its own subcommand's arguments (the registry), the loads, the
//! requirements and the task set, the cells in the order measured; and
//! what the run stores of it.

use super::file::PlanFile;
use crate::cli::registry::{self, Built};
use crate::load::{self, LoadSpec};
use crate::sys::sched::Policy;
use crate::sys::{clock, cpu};
use anyhow::{Context, Result, anyhow, bail};
use rtscope_model::analysis::rta;
use rtscope_model::analysis::usage::Usage;
use rtscope_model::descriptor::{self, Descriptor};
use rtscope_model::episode::Stages;
use rtscope_model::inventory::format_cpu_list;
use rtscope_model::settings::{CellDuration, Checkpoint, CpuList, InstancesMode, RunDuration, ScoreTime, Warmup};
use rtscope_model::units;
use std::path::Path;

/// A validated plan: everything checked before anything is measured.
pub struct Plan {
    /// Where it came from: `default`, `quick`, a file.
    pub source: String,
    pub cpus: Vec<usize>,
    pub load_cpus: Vec<usize>,
    pub probes: Vec<Built>,
    pub loads: Vec<LoadSpec>,
    pub cell_ns: u64,
    /// The per-CPU probes' checkpoint interval: each cell's series gets
    /// about cell_ns / checkpoint_ns interval maxima.
    pub checkpoint_ns: u64,
    pub warmup_ns: u64,
    pub ramp_ns: u64,
    pub score_ns: u64,
    pub shuffle: bool,
    pub seed: u64,
    /// What a day and a week of the levels are (`usage`, `--usage`).
    pub usage: Usage,
    /// (load index, probe index), in the order measured: the probe leads
    /// its cell, with the instances measured together with it (`together`).
    pub cells: Vec<(usize, usize)>,
    /// How instances of one probe (`wakeup@95,wakeup@80`) are measured:
    /// together in one cell, or one after the other (`instances`).
    pub instances: InstancesMode,
    /// Per probe index: the probes its cell measures (itself first) where
    /// it leads a cell; empty where it is measured in another's.
    pub together: Vec<Vec<usize>>,
    /// Probes measured without --trace (they cannot be traced yet).
    pub untraced: Vec<&'static str>,
    pub trace: bool,
    /// Stored with the run: profiles and requirements, checked.
    pub profiles: Vec<String>,
    pub requires: Vec<String>,
    /// Stored with the run: a requirement without enough data passes.
    pub allow_insufficient: bool,
    /// Stored with the run: the task set, checked.
    pub tasks: Option<rta::TaskSet>,
}

/// Each measurement of the plan with the metrics it records: a per-CPU
/// probe's, and its trace stages when traced; osbench's tests.
pub(super) fn produces(probes: &[Built]) -> Vec<(String, Vec<String>)> {
    probes
        .iter()
        .map(|b| {
            let metrics = match b {
                Built::PerCpu(common, probe) => {
                    let mut ms: Vec<String> = probe.metrics().iter().map(|m| m.to_string()).collect();
                    if common.trace.is_some() && probe.trace_stages() == Some(true) {
                        ms.extend(Stages::of_probe(probe.name()).1.iter().map(|m| m.to_string()));
                    }
                    ms
                }
                Built::Own(own) => own.metrics(),
            };
            (b.series_name().to_string(), metrics)
        })
        .collect()
}

/// A verdict module's message about a plan's key: `--profile dvd: ...`
/// becomes `ORIGIN: profiles = dvd: ...`.
fn plan_key_error(origin: &str, e: &str) -> anyhow::Error {
    let e = e.replacen("--profile ", "profiles = ", 1).replacen("--require ", "require = ", 1);
    anyhow!("{origin}: {e}")
}

/// A tiny xorshift: the shuffle needs no crate.
pub(super) fn shuffled<T>(mut v: Vec<T>, seed: u64) -> Vec<T> {
    let mut x = seed | 1;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

/// A plan's durations (ns), checked.
struct Timing {
    cell: CellDuration,
    warmup_ns: u64,
    ramp_ns: u64,
    score_ns: u64,
    checkpoint: Checkpoint,
}

impl Timing {
    fn of(file: &PlanFile) -> Timing {
        let cell = file.duration.unwrap_or(CellDuration::DEFAULT);
        let warmup_ns = file.warmup.map_or(1_000_000_000, Warmup::ns);
        let ramp_ns = file.ramp_up.map_or(2_000_000_000, Warmup::ns);
        let score_ns = file.score.map_or(2_000_000_000, ScoreTime::ns);
        let checkpoint = file.checkpoint.unwrap_or(Checkpoint::DEFAULT);
        Timing { cell, warmup_ns, ramp_ns, score_ns, checkpoint }
    }
}

/// The probes a plan lists (else the default assessment's); every name in
/// its `[args]` must be a probe.
fn probe_names(file: &PlanFile, origin: &str) -> Result<Vec<String>> {
    let names = file
        .probes
        .clone()
        .unwrap_or_else(|| descriptor::PROBES.iter().filter(|e| e.default).map(|e| e.name.to_string()).collect());
    if names.is_empty() {
        bail!("{origin}: probes is empty (e.g. --probes wakeup,noise)");
    }
    // Options of a probe left out (by --probes) are kept for nothing;
    // a name that is no probe is a mistake.
    for n in file.args.keys() {
        registry::find(n).with_context(|| format!("{origin}: [args] {n}"))?;
    }
    Ok(names)
}

/// An instance of a per-CPU probe as a plan lists it, typed:
/// `wakeup@80` (SCHED_FIFO 80), `wakeup@80:rr` (SCHED_RR 80).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct At<'n> {
    pub(super) base: &'n str,
    pub(super) priority: u8,
    pub(super) policy: Policy,
}

/// `wakeup@80[:rr]`: an instance of wakeup at priority 80 (SCHED_FIFO, or
/// the policy after `:`), stored apart; None for a plain name.
pub(super) fn instance<'n>(name: &'n str, origin: &str) -> Result<Option<At<'n>>> {
    let Some((base, rest)) = name.split_once('@') else { return Ok(None) };
    let (prio, policy) = rest.split_once(':').unwrap_or((rest, "fifo"));
    let priority = match prio.parse::<u8>() {
        Ok(p) if (1..=99).contains(&p) => p,
        _ => bail!("{origin}: probe {name}: the priority after @ must be 1..99 (e.g. --probes wakeup@95,wakeup@80)"),
    };
    let policy = match policy {
        "fifo" => Policy::Fifo,
        "rr" => Policy::Rr,
        _ => bail!(
            "{origin}: probe {name}: the policy after the priority is fifo (the default) or rr (e.g. --probes \
             wakeup@80:rr,wakeup@80:rr)"
        ),
    };
    Ok(Some(At { base, priority, policy }))
}

/// The plan's instances of one probe measured in one cell: per probe
/// index, the probes measured with it (itself first) where it leads its
/// cell, none where it is measured in another's; every probe alone with
/// `instances = "in-turn"`.
fn groups(names: &[String], mode: InstancesMode) -> Vec<Vec<usize>> {
    let base = |n: &str| descriptor::instance(n).map(|(b, _)| b.to_string());
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); names.len()];
    for (i, name) in names.iter().enumerate() {
        let leader = match (mode, base(name)) {
            (InstancesMode::Together, Some(b)) => (0..i).find(|&j| base(&names[j]).as_deref() == Some(&b)),
            _ => None,
        };
        groups[leader.unwrap_or(i)].push(i);
    }
    groups
}

/// What every probe of a plan is built with: the plan's CPUs, cell,
/// checkpoint, warm-up and --trace, then its own `[args]`.
struct Building<'a> {
    file: &'a PlanFile,
    origin: &'a str,
    db: &'a Path,
    cpus: &'a [usize],
    cell: CellDuration,
    checkpoint: Checkpoint,
    warmup_ns: u64,
    trace: bool,
}

impl Building<'_> {
    /// Builds the probe `name` of the plan (after `earlier`), through its
    /// own subcommand's arguments; with its probe's name when it is
    /// measured without --trace.
    fn probe(&self, name: &str, earlier: &[Built]) -> Result<(Built, Option<&'static str>)> {
        let origin = self.origin;
        let at = instance(name, origin)?;
        let entry = registry::find(at.map_or(name, |a| a.base)).with_context(|| origin.to_string())?;
        if at.is_some() && !entry.per_cpu {
            bail!("{origin}: probe {name}: only a per-CPU probe takes @PRIORITY (osbench has its own --priorities)");
        }
        if at.is_none() && earlier.iter().any(|p| p.series_name() == name) {
            bail!("{origin}: probe {name} is listed twice (instances at a priority may be: {name}@80,{name}@80)");
        }
        // A second instance at one priority: `wakeup@80#2`.
        let series = at.map(|a| {
            let names: Vec<&str> = earlier.iter().map(Built::series_name).collect();
            crate::probe::instance_name(a.base, a.priority, &names)
        });
        let args = self.args(entry, at);
        let mut built =
            registry::build(entry, &args, &self.given(entry)).with_context(|| format!("{origin}: [args] {name}"))?;
        let untraced = self.adapt(&mut built, entry, name, at.zip(series))?;
        Ok((built, untraced.then_some(entry.name)))
    }

    /// A probe's own arguments as the plan writes them: an instance's own
    /// [args] (`"wakeup@80"`, whatever its policy), else its probe's.
    fn args(&self, entry: &Descriptor, at: Option<At>) -> Vec<String> {
        let own = match at {
            Some(a) => {
                self.file.args.get(&format!("{}@{}", a.base, a.priority)).or_else(|| self.file.args.get(entry.name))
            }
            None => self.file.args.get(entry.name),
        };
        own.cloned().unwrap_or_default()
    }

    /// What the plan gives each probe, typed: a per-CPU probe's CPUs,
    /// cell, checkpoint and --trace; every probe its store, quietly.
    fn given(&self, entry: &Descriptor) -> registry::Given {
        let per_cpu = entry.per_cpu;
        registry::Given {
            owner: "the plan",
            cpus: if per_cpu { CpuList::of(self.cpus.to_vec()) } else { None },
            duration: per_cpu.then(|| RunDuration::from(self.cell)),
            priority: None,
            duty: None,
            checkpoint: self.checkpoint,
            trace: per_cpu && self.trace,
            db: self.db.to_path_buf(),
            quiet: true,
            dma_latency: Some(rtscope_model::settings::DmaLatency::ZERO),
        }
    }

    /// Makes a built probe a cell of the plan: a per-CPU probe takes the
    /// plan's warm-up and an instance's priority, and drops --trace where
    /// it cannot be traced; a measurement with its own runner is placed on
    /// the plan's CPUs. Returns whether it is measured without --trace.
    fn adapt(&self, built: &mut Built, entry: &Descriptor, name: &str, at: Option<(At, String)>) -> Result<bool> {
        let origin = self.origin;
        match built {
            Built::PerCpu(common, probe) => {
                if !common.instances.is_empty() {
                    bail!(
                        "{origin}: [args] {name}: --instances is for the probe's own command; in a plan, list the \
                         instances in probes (e.g. probes = [\"{0}@95\", \"{0}@80\"])",
                        entry.name
                    );
                }
                common.warmup_ns = self.warmup_ns;
                common.kind = "run".into();
                common.json = None;
                if let Some((a, series)) = at {
                    common.policy = a.policy;
                    common.priority = a.priority;
                    common.instance = Some(series);
                }
                if common.trace.is_some() && probe.trace_stages().is_none() {
                    common.trace = None;
                    return Ok(true);
                }
                Ok(false)
            }
            Built::Own(own) => {
                own.place(self.cpus).with_context(|| format!("{origin}: [args] {name}"))?;
                Ok(self.trace)
            }
        }
    }
}

/// The plan's loads (else idle alone), each checked.
fn resolve_loads(file: &PlanFile, origin: &str, load_cpus: &[usize]) -> Result<Vec<LoadSpec>> {
    let specs = file.loads.clone().unwrap_or_else(|| vec!["idle".into()]);
    if specs.is_empty() {
        bail!("{origin}: loads is empty (e.g. --loads idle,cpu)");
    }
    let mut loads: Vec<LoadSpec> = Vec::new();
    for text in &specs {
        let spec = load::parse(text, load_cpus, &format!("{origin}: loads"))?;
        if loads.iter().any(|l| l.label == spec.label) {
            bail!("{origin}: load {text} is listed twice");
        }
        spec.kind.check(&spec)?;
        loads.push(spec);
    }
    Ok(loads)
}

/// The plan's profiles and requirements, checked; a requirement on what
/// the plan's `probes` cannot produce is refused before anything is
/// measured (a misspelled gate must not pass).
fn requirements(file: &PlanFile, origin: &str, probes: &[Built]) -> Result<(Vec<String>, Vec<String>)> {
    let profiles = file.profiles.clone().unwrap_or_default();
    let requires = file.require.clone().unwrap_or_default();
    crate::judge::parse_requirements(&profiles, &requires).map_err(|e| plan_key_error(origin, &e))?;
    crate::judge::check_asked(&profiles, &requires, &produces(probes), "the plan")
        .map_err(|e| plan_key_error(origin, &e))?;
    Ok((profiles, requires))
}

impl Plan {
    /// Checks `file` (from `origin`) and builds every probe and load.
    pub fn resolve(file: &PlanFile, origin: &str, db: &Path) -> Result<Plan> {
        // Every CPU the cgroup's cpuset allows is measured; the loads keep to
        // the CPUs rtscope was started on (the housekeeping CPUs of an
        // isolcpus machine) unless the plan names theirs.
        let cpus = match &file.cpus {
            Some(list) => cpu::selected(&format!("{origin}: cpus"), list)?,
            None => cpu::measurable(),
        };
        let load_cpus = match &file.load_cpus {
            Some(list) => cpu::selected(&format!("{origin}: load_cpus"), list)?,
            None => cpu::home(),
        };
        let Timing { cell, warmup_ns, ramp_ns, score_ns, checkpoint } = Timing::of(file);
        let names = probe_names(file, origin)?;
        let trace = file.trace.unwrap_or(false);
        let building = Building { file, origin, db, cpus: &cpus, cell, checkpoint, warmup_ns, trace };
        let mut probes = Vec::new();
        let mut untraced = Vec::new();
        for name in &names {
            let (built, not_traced) = building.probe(name, &probes)?;
            untraced.extend(not_traced);
            probes.push(built);
        }
        let loads = resolve_loads(file, origin, &load_cpus)?;
        let (profiles, requires) = requirements(file, origin, &probes)?;
        let allow_insufficient = file.allow_insufficient.unwrap_or(false);
        let tasks = Self::task_set(file, origin, &names)?;
        let shuffle = file.shuffle.unwrap_or(false);
        let usage = file.usage.unwrap_or(Usage::CONTINUOUS);
        if file.seed.is_some() && !shuffle {
            bail!(
                "{origin}: a seed orders the cells only with --shuffle (or shuffle = true): add it, or leave the seed out"
            );
        }
        let seed = file.seed.unwrap_or_else(|| clock::now() ^ u64::from(std::process::id()));
        let instances = file.instances.unwrap_or_default();
        let together = groups(&names, instances);
        Self::check_together(&probes, &together, origin)?;
        let leaders: Vec<usize> = (0..probes.len()).filter(|&p| !together[p].is_empty()).collect();
        let mut cells: Vec<(usize, usize)> =
            (0..loads.len()).flat_map(|l| leaders.iter().map(move |&p| (l, p))).collect();
        if shuffle {
            cells = shuffled(cells, seed);
        }
        Ok(Plan {
            source: origin.to_string(),
            cpus,
            load_cpus,
            probes,
            loads,
            cell_ns: cell.ns(),
            checkpoint_ns: checkpoint.ns(),
            warmup_ns,
            ramp_ns,
            score_ns,
            shuffle,
            seed,
            usage,
            cells,
            instances,
            together,
            untraced,
            trace,
            profiles,
            requires,
            allow_insufficient,
            tasks,
        })
    }

    /// Instances measured together are refused with what follows one
    /// instance only (`--trace`, a kernel tracer beside the probe).
    fn check_together(probes: &[Built], together: &[Vec<usize>], origin: &str) -> Result<()> {
        for group in together.iter().filter(|g| g.len() > 1) {
            let parts: Vec<(&dyn crate::probe::Probe, &crate::probe::Common)> = group
                .iter()
                .filter_map(|&p| match &probes[p] {
                    Built::PerCpu(common, probe) => Some((probe.as_ref(), common.as_ref())),
                    Built::Own(_) => None,
                })
                .collect();
            crate::probe::check_together(&parts, "instances = \"in-turn\" in the plan, or --instances-in-turn")
                .map_err(|e| anyhow!("{origin}: {e}"))?;
        }
        Ok(())
    }

    /// The names of the probes cell `n` measures, `wakeup@95 + wakeup@80`.
    pub fn cell_name(&self, p: usize) -> String {
        self.together[p].iter().map(|&q| self.probes[q].series_name()).collect::<Vec<_>>().join(" + ")
    }

    /// The plan's task set (`tasks = FILE` or `[[task]]` tables) at its
    /// `error_rate`, checked; it needs the wakeup probe's latency.
    fn task_set(file: &PlanFile, origin: &str, probes: &[String]) -> Result<Option<rta::TaskSet>> {
        let error_rate = file
            .error_rate
            .map(|e| rta::check_error_rate(e).map_err(|m| anyhow!("{origin}: error_rate = {e}: {m}")))
            .transpose()?;
        let (source, tasks) = match (&file.tasks, &file.task) {
            (Some(_), Some(_)) => {
                bail!("{origin}: give a task set once: tasks = \"FILE\" or [[task]] tables in the plan, not both")
            }
            (Some(path), None) => {
                (path.clone(), crate::judge::read_tasks(Path::new(path), &format!("{origin}: tasks = {path}"))?)
            }
            (None, Some(specs)) => (
                format!("{origin} [[task]]"),
                rta::from_specs(specs.clone(), &format!("{origin}: [[task]]")).map_err(anyhow::Error::msg)?,
            ),
            (None, None) if error_rate.is_some() => bail!(
                "{origin}: error_rate needs a task set: tasks = \"FILE\" or [[task]] tables in the plan (or --tasks FILE)"
            ),
            (None, None) => return Ok(None),
        };
        let Some((jitter, _)) = descriptor::release_jitter() else {
            bail!("{origin}: no probe measures the release jitter a task set needs")
        };
        if !probes.iter().any(|p| p == jitter) {
            bail!(
                "{origin}: the task set's release jitter is the measured wake-up latency, and probes ({}) has no \
                 {jitter}: add it (e.g. --probes {jitter},{})",
                probes.join(","),
                probes.join(",")
            );
        }
        Ok(Some(rta::TaskSet { source, error_rate: error_rate.unwrap_or(rta::DEFAULT_ERROR_RATE), tasks }))
    }

    /// How many times a load starts (each start ramps up).
    fn load_starts(&self) -> usize {
        self.cells.iter().enumerate().filter(|(i, c)| *i == 0 || self.cells[i - 1].0 != c.0).count()
    }

    /// The planned length, ns. A measurement with its own runner warms
    /// up within its cell.
    pub fn length_ns(&self) -> u64 {
        let warmup = |p: usize| if matches!(self.probes[p], Built::PerCpu(..)) { self.warmup_ns } else { 0 };
        self.score_ns
            + self.load_starts() as u64 * self.ramp_ns
            + self.cells.iter().map(|&(_, p)| self.cell_ns + warmup(p) + 200_000_000).sum::<u64>()
    }

    pub(super) fn describe(&self) -> String {
        format!(
            "{} x {}: {} of {} (+{} warm-up), about {}{}",
            units::plural(self.probes.len(), "probe"),
            units::plural(self.loads.len(), "load"),
            units::plural(self.cells.len(), "cell"),
            units::human(self.cell_ns),
            units::human(self.warmup_ns),
            units::human(self.length_ns() / 1_000_000_000 * 1_000_000_000),
            self.instances_stored().map(|m| format!("; {}", m.describe())).unwrap_or_default()
        )
    }

    /// How the plan's instances are measured, where it has several.
    fn instances_stored(&self) -> Option<InstancesMode> {
        (self.probes.iter().filter(|b| b.series_name().contains('@')).count() > 1).then_some(self.instances)
    }

    pub(super) fn json(&self, cells: &[serde_json::Value], housekeeping: &str) -> serde_json::Value {
        serde_json::json!({
            "assessment": {
                "source": self.source,
                "probes": self.probes.iter().map(Built::series_name).collect::<Vec<_>>(),
                "loads": self.loads,
                "cell_ns": self.cell_ns,
                "checkpoint_ns": self.checkpoint_ns,
                "warmup_ns": self.warmup_ns,
                "ramp_up_ns": self.ramp_ns,
                "score_ns": self.score_ns,
                "shuffle": self.shuffle,
                "seed": self.seed,
                "order": self.cells.iter().map(|&(l, p)| [self.cell_name(p), self.loads[l].label.clone()]).collect::<Vec<_>>(),
                "untraced": self.untraced,
                "trace": self.trace,
            },
            "requirements": {
                "profiles": self.profiles,
                "require": self.requires,
                "allow_insufficient": self.allow_insufficient,
            },
            "schedulability": self.tasks,
            "usage": self.usage,
            "instances": self.instances_stored(),
            "cpus": format_cpu_list(&self.cpus),
            "load_cpus": format_cpu_list(&self.load_cpus),
            "housekeeping_cpus": housekeeping,
            "describe": self.describe(),
            "effective_policy": cells.first().map(|c| c["effective_policy"].clone()),
            "effective_priority": cells.first().map(|c| c["effective_priority"].clone()),
            "cells": cells,
        })
    }
}
