//! The assessment (`rtscope run`): every probe under every load, one cell
//! each, all in one stored run; then the matrix (worst case and p99.9 per
//! probe metric and load), the loads' characterisation and a CPU score.
//! Also `rtscope load`: loads alone, characterised.
//!
//! A run: the CPU score on an idle machine; then for each cell in order
//! (load by load, or shuffled): start its load if another one runs (it
//! ramps up for `ramp_up` before anything is measured, and the /proc
//! sampler characterises it from then until it stops), then measure the
//! probe under it for `warmup` (not recorded) + `duration`.

use crate::cli::registry::{self, Built};
use crate::load::sampler::Sampler;
use crate::load::{self, LoadSpec, Running};
use crate::probe::Cell;
use crate::report::{self, Input};
use crate::session::{CellOutcome, OpenRun, Session, verdict};
use crate::sys::sched::Policy;
use crate::sys::{clock, cpu, process};
use anyhow::{Context, Result, anyhow, bail};
use rtscope_model::analysis::rta;
use rtscope_model::characterisation::{Accumulator, Characterisation};
use rtscope_model::descriptor;
use rtscope_model::episode::{Stages, TraceSummary};
use rtscope_model::inventory::format_cpu_list;
use rtscope_model::run::{Run, RunStatus};
use rtscope_model::units::{self, parse_duration};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

/// The embedded default assessment (`rtscope run`).
pub const DEFAULT_PLAN: &str = include_str!("../../plans/default.toml");
/// `rtscope run --quick`.
pub const QUICK_PLAN: &str = include_str!("../../plans/quick.toml");

/// A campaign file, or the embedded plans: every key optional.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    pub probes: Option<Vec<String>>,
    pub loads: Option<Vec<String>>,
    /// Per cell.
    pub duration: Option<String>,
    pub warmup: Option<String>,
    pub ramp_up: Option<String>,
    /// How long the CPU score measures.
    pub score: Option<String>,
    pub shuffle: Option<bool>,
    pub seed: Option<u64>,
    /// Measured CPUs.
    pub cpus: Option<String>,
    /// The loads' CPUs.
    pub load_cpus: Option<String>,
    pub trace: Option<bool>,
    pub checkpoint: Option<String>,
    /// Requirements stored with the run (as `--profile` and `--require`).
    pub profiles: Option<Vec<String>>,
    pub require: Option<Vec<String>>,
    /// A requirement without enough data passes the gate (as
    /// `--allow-insufficient`); else it fails it.
    pub allow_insufficient: Option<bool>,
    /// A task set stored with the run: a task file (relative to the plan
    /// file), or `[[task]]` tables in the plan itself; and its error rate.
    pub tasks: Option<String>,
    pub task: Option<Vec<rta::TaskSpec>>,
    pub error_rate: Option<f64>,
    /// Each probe's own arguments.
    #[serde(default)]
    pub args: BTreeMap<String, Vec<String>>,
}

impl PlanFile {
    /// Parses a plan's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<PlanFile> {
        toml::from_str(text).map_err(|e| anyhow!("{origin}: {}", e.to_string().trim_end()))
    }

    /// A plan read from `path`: its task file is relative to the plan's directory.
    pub fn read(path: &Path) -> Result<PlanFile> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read the campaign file {name}"))?;
        let mut file = PlanFile::parse(&text, &name)?;
        let dir = path.parent().unwrap_or(Path::new(""));
        file.tasks =
            file.tasks.map(|t| if Path::new(&t).is_relative() { dir.join(t).display().to_string() } else { t });
        Ok(file)
    }

    /// `other`'s keys over this plan's. A task file replaces `[[task]]` tables.
    pub fn overlay(mut self, other: PlanFile) -> PlanFile {
        macro_rules! take {
            ($($f:ident),*) => { $( if other.$f.is_some() { self.$f = other.$f; } )* };
        }
        if other.tasks.is_some() || other.task.is_some() {
            (self.tasks, self.task) = (None, None);
        }
        take!(
            probes,
            loads,
            duration,
            warmup,
            ramp_up,
            score,
            shuffle,
            seed,
            cpus,
            load_cpus,
            trace,
            checkpoint,
            profiles,
            require,
            allow_insufficient,
            tasks,
            task,
            error_rate
        );
        self.args.extend(other.args);
        self
    }
}

/// What `rtscope run` was asked, beyond the plan.
pub struct Options {
    pub db: PathBuf,
    pub json: Option<PathBuf>,
    pub quiet: bool,
    pub no_dma_latency: bool,
}

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
    /// (load index, probe index), in the order measured.
    pub cells: Vec<(usize, usize)>,
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
fn produces(probes: &[Built]) -> Vec<(String, Vec<String>)> {
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

fn dur(key: &str, v: &Option<String>, origin: &str) -> Result<Option<u64>> {
    v.as_deref().map(|s| parse_duration(s).map_err(|e| anyhow!("{origin}: {key} = '{s}': {e}"))).transpose()
}

/// A tiny xorshift: the shuffle needs no crate.
fn shuffled<T>(mut v: Vec<T>, seed: u64) -> Vec<T> {
    let mut x = seed | 1;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

impl Plan {
    /// Checks `file` (from `origin`) and builds every probe and load.
    pub fn resolve(file: &PlanFile, origin: &str, db: &Path) -> Result<Plan> {
        let cpus = match &file.cpus {
            Some(list) => cpu::parse_selection(&format!("{origin}: cpus"), list)?,
            None => cpu::online(),
        };
        let load_cpus = match &file.load_cpus {
            Some(list) => cpu::parse_selection(&format!("{origin}: load_cpus"), list)?,
            None => cpu::online(),
        };
        let cell_ns = dur("duration", &file.duration, origin)?.unwrap_or(10_000_000_000);
        if cell_ns < 1_000_000_000 {
            bail!("{origin}: duration (per cell) must be at least 1s (e.g. --duration 10s)");
        }
        let warmup_ns = dur("warmup", &file.warmup, origin)?.unwrap_or(1_000_000_000);
        let ramp_ns = dur("ramp_up", &file.ramp_up, origin)?.unwrap_or(2_000_000_000);
        let score_ns = dur("score", &file.score, origin)?.unwrap_or(2_000_000_000);
        for (key, v, max) in [("warmup", warmup_ns, 600), ("ramp_up", ramp_ns, 600), ("score", score_ns, 60)] {
            if v > max * 1_000_000_000 {
                bail!("{origin}: {key} must be at most {max}s");
            }
        }
        if score_ns < 100_000_000 {
            bail!("{origin}: score must be at least 100ms (e.g. score = \"2s\")");
        }
        let checkpoint_ns = dur("checkpoint", &file.checkpoint, origin)?.unwrap_or(10_000_000_000);
        if !(100_000_000..=3_600_000_000_000).contains(&checkpoint_ns) {
            bail!(
                "{origin}: checkpoint must be between 100ms and 1h (e.g. checkpoint = \"250ms\"; a crash loses up to \
                 one checkpoint interval, and the tail's diagnostics need 20 to 40 of them per cell)"
            );
        }
        let checkpoint = format!("{checkpoint_ns}ns");
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
        let trace = file.trace.unwrap_or(false);
        let mut probes = Vec::new();
        let mut untraced = Vec::new();
        for name in &names {
            // `wakeup@80`: an instance of wakeup at SCHED_FIFO 80, stored apart.
            let at = match name.split_once('@') {
                Some((base, prio)) => match prio.parse::<u8>() {
                    Ok(p) if (1..=99).contains(&p) => Some((base, p)),
                    _ => bail!(
                        "{origin}: probe {name}: the priority after @ must be 1..99 (e.g. --probes wakeup@95,wakeup@80)"
                    ),
                },
                None => None,
            };
            let entry = registry::find(at.map_or(name.as_str(), |(b, _)| b)).with_context(|| origin.to_string())?;
            if at.is_some() && !entry.per_cpu {
                bail!(
                    "{origin}: probe {name}: only a per-CPU probe takes @PRIORITY (osbench has its own --priorities)"
                );
            }
            if probes.iter().any(|p: &Built| p.series_name() == name) {
                bail!("{origin}: probe {name} is listed twice");
            }
            let mut args: Vec<String> = vec!["--db".into(), db.display().to_string(), "--quiet".into()];
            if entry.per_cpu {
                args.extend([
                    "--cpus".into(),
                    format_cpu_list(&cpus),
                    "--duration".into(),
                    format!("{cell_ns}ns"),
                    "--checkpoint".into(),
                    checkpoint.clone(),
                ]);
                if trace {
                    args.push("--trace".into());
                }
            }
            // An instance takes its own [args], else its probe's.
            let own = file.args.get(name).or_else(|| at.and_then(|_| file.args.get(entry.name)));
            args.extend(own.cloned().unwrap_or_default());
            let mut built = registry::build(entry, &args).with_context(|| format!("{origin}: [args] {name}"))?;
            match &mut built {
                Built::PerCpu(common, probe) => {
                    if !common.instances.is_empty() {
                        bail!(
                            "{origin}: [args] {name}: --instances is for the probe's own command; in a plan, list the \
                             instances in probes (e.g. probes = [\"{0}@95\", \"{0}@80\"])",
                            entry.name
                        );
                    }
                    common.warmup_ns = warmup_ns;
                    common.kind = "run".into();
                    common.json = None;
                    if let Some((_, prio)) = at {
                        common.policy = Policy::Fifo;
                        common.priority = prio;
                        common.instance = Some(name.clone());
                    }
                    if common.trace.is_some() && probe.trace_stages().is_none() {
                        common.trace = None;
                        untraced.push(entry.name);
                    }
                }
                Built::Own(own) => {
                    own.place(&cpus).with_context(|| format!("{origin}: [args] {name}"))?;
                    if trace {
                        untraced.push(entry.name);
                    }
                }
            }
            probes.push(built);
        }
        let specs = file.loads.clone().unwrap_or_else(|| vec!["idle".into()]);
        if specs.is_empty() {
            bail!("{origin}: loads is empty (e.g. --loads idle,cpu)");
        }
        let mut loads: Vec<LoadSpec> = Vec::new();
        for text in &specs {
            let spec = load::parse(text, &load_cpus, &format!("{origin}: loads"))?;
            if loads.iter().any(|l| l.label == spec.label) {
                bail!("{origin}: load {text} is listed twice");
            }
            spec.kind.check(&spec)?;
            loads.push(spec);
        }
        let profiles = file.profiles.clone().unwrap_or_default();
        let requires = file.require.clone().unwrap_or_default();
        crate::judge::parse_requirements(&profiles, &requires).map_err(|e| plan_key_error(origin, &e))?;
        // A requirement on what the plan cannot produce is refused before
        // anything is measured (a misspelled gate must not pass).
        crate::judge::check_asked(&profiles, &requires, &produces(&probes), "the plan")
            .map_err(|e| plan_key_error(origin, &e))?;
        let allow_insufficient = file.allow_insufficient.unwrap_or(false);
        let tasks = Self::task_set(file, origin, &names)?;
        let shuffle = file.shuffle.unwrap_or(false);
        let seed = file.seed.unwrap_or_else(|| clock::now() ^ u64::from(std::process::id()));
        let mut cells: Vec<(usize, usize)> =
            (0..loads.len()).flat_map(|l| (0..probes.len()).map(move |p| (l, p))).collect();
        if shuffle {
            cells = shuffled(cells, seed);
        }
        Ok(Plan {
            source: origin.to_string(),
            cpus,
            load_cpus,
            probes,
            loads,
            cell_ns,
            checkpoint_ns,
            warmup_ns,
            ramp_ns,
            score_ns,
            shuffle,
            seed,
            cells,
            untraced,
            trace,
            profiles,
            requires,
            allow_insufficient,
            tasks,
        })
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

    fn describe(&self) -> String {
        format!(
            "{} x {}: {} of {} (+{} warm-up), about {}",
            units::plural(self.probes.len(), "probe"),
            units::plural(self.loads.len(), "load"),
            units::plural(self.cells.len(), "cell"),
            units::human(self.cell_ns),
            units::human(self.warmup_ns),
            units::human(self.length_ns() / 1_000_000_000 * 1_000_000_000)
        )
    }

    fn json(&self, cells: &[serde_json::Value], housekeeping: &str) -> serde_json::Value {
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
                "order": self.cells.iter().map(|&(l, p)| [self.probes[p].series_name(), &self.loads[l].label]).collect::<Vec<_>>(),
                "untraced": self.untraced,
                "trace": self.trace,
            },
            "requirements": {
                "profiles": self.profiles,
                "require": self.requires,
                "allow_insufficient": self.allow_insufficient,
            },
            "schedulability": self.tasks,
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

/// The running load and its characterisation so far.
struct Active {
    index: usize,
    running: Running,
    sampler: Sampler,
}

/// Sleeps `ns` unless a signal comes.
fn wait(ns: u64, signal: &AtomicBool) {
    let end = clock::now() + ns;
    while clock::now() < end && !signal.load(Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Each load's characterisation (those sampled), its target checked and
/// its failure kept; a note for each flagged check.
fn characterise(
    loads: &[LoadSpec],
    accs: &[Accumulator],
    failures: &[Option<String>],
    notes: &mut Vec<String>,
) -> Vec<Characterisation> {
    let mut out = Vec::new();
    for ((spec, acc), failure) in loads.iter().zip(accs).zip(failures) {
        if acc.covered_ns() == 0 {
            continue;
        }
        let mut c = acc.finish();
        if failure.is_none() {
            c.checks = load::target(spec).map(|t| c.check(&t)).into_iter().collect();
        }
        c.failure = failure.clone();
        notes.extend(c.checks.iter().filter(|k| k.flagged).map(|k| format!("load check: {}", k.message)));
        out.push(c);
    }
    out
}

/// Runs the assessment `plan` and prints it. Returns the exit code.
pub fn run(mut plan: Plan, opts: &Options, signal: &Arc<AtomicBool>) -> Result<i32> {
    start_own(&mut plan)?;
    load::remove_stale_temp_dirs();
    if !opts.quiet {
        eprintln!("rtscope run ({}): {}", plan.source, plan.describe());
    }
    let (mut run, effective) = set_up(&plan, opts)?;
    let mut matrix = Matrix::new(&plan);
    let result = matrix.measure(&plan, &effective, &mut run, opts, signal);
    finish(&plan, matrix, run, result, opts, signal)
}

/// Starts the measurements with their own runner, while rtscope has one
/// thread, no store open and no load running (osbench forks the process
/// that removes its IPC objects should rtscope die).
fn start_own(plan: &mut Plan) -> Result<()> {
    for b in &mut plan.probes {
        if let Built::Own(o) = b {
            let name = o.name();
            o.start().with_context(|| format!("starting {name}"))?;
        }
    }
    Ok(())
}

/// Each probe's plan as the run stores it, and the scheduling it gets on
/// this machine, in the plan's order of probes.
fn cell_plans(plan: &Plan, session: &mut Session) -> (Vec<serde_json::Value>, Vec<(Policy, u8)>) {
    let mut cell_plans = Vec::new();
    let mut effective = Vec::new();
    for b in &plan.probes {
        match b {
            Built::PerCpu(common, probe) => {
                let e = session.effective(common.policy, common.priority);
                effective.push(e);
                cell_plans.push(crate::probe::cell_plan(probe.as_ref(), common, e));
            }
            Built::Own(o) => {
                let (policy, priority) = o.scheduling();
                let e = session.effective(policy, priority);
                effective.push(e);
                cell_plans.push(serde_json::json!({
                    "probe": o.name(),
                    "metrics": o.metrics(),
                    "effective_policy": e.0,
                    "effective_priority": e.1,
                    "settings": o.plan(),
                    "describe": o.describe(),
                }));
            }
        }
    }
    (cell_plans, effective)
}

/// Opens the session, resolves each probe's scheduling on this machine,
/// pins rtscope's own threads off the measured CPUs, measures the CPU
/// score and creates the run with it. Returns the run and each probe's
/// effective scheduling, in the plan's order of probes.
fn set_up(plan: &Plan, opts: &Options) -> Result<(OpenRun, Vec<(Policy, u8)>)> {
    let mut session = Session::open(&opts.db, &plan.cpus, !opts.no_dma_latency)?;
    // rtscope's own non-RT threads (writer, trace reader, /proc sampler)
    // run ahead of the loads where allowed; the loads reset their nice.
    let _ = process::set_nice(-5);
    let (cell_plans, effective) = cell_plans(plan, &mut session);
    if !opts.quiet {
        session.print_warnings();
    }
    let housekeeping = session.pin_housekeeping(&plan.cpus);
    // The CPU score, on an idle machine, on the first measured CPU.
    let slices = (plan.score_ns / 200_000_000).clamp(1, 50) as u32;
    let score = crate::score::measure(plan.cpus[0], slices, plan.score_ns / u64::from(slices) / 1_000_000);
    let mut run = session.create("run", &plan.json(&cell_plans, &housekeeping))?;
    let run_id = run.run_id;
    run.store()?.put_run_data(run_id, "cpu_score", &serde_json::to_value(&score)?)?;
    Ok((run, effective))
}

/// The cells measured so far: their outcomes, the loads' characterisations
/// and failures, the notes and the trace summary; and the load running.
struct Matrix {
    accs: Vec<Accumulator>,
    failures: Vec<Option<String>>,
    outcomes: Vec<CellOutcome>,
    notes: Vec<String>,
    trace: TraceSummary,
    active: Option<Active>,
}

impl Matrix {
    fn new(plan: &Plan) -> Matrix {
        Matrix {
            accs: plan.loads.iter().map(|l| Accumulator::new(&l.label, &l.cpus)).collect(),
            failures: vec![None; plan.loads.len()],
            outcomes: Vec::new(),
            notes: Vec::new(),
            trace: TraceSummary::default(),
            active: None,
        }
    }

    /// Measures the plan's cells in order until they are done, a signal
    /// comes or a cell ends the assessment (a store error, a breach).
    fn measure(
        &mut self,
        plan: &Plan,
        effective: &[(Policy, u8)],
        run: &mut OpenRun,
        opts: &Options,
        signal: &Arc<AtomicBool>,
    ) -> Result<()> {
        for (n, &(l, p)) in plan.cells.iter().enumerate() {
            if signal.load(Relaxed) {
                break;
            }
            self.switch_load(plan, l, opts, signal)?;
            if !self.cell(plan, n, effective[p], run, opts, signal)? {
                break;
            }
        }
        Ok(())
    }

    /// Starts load `l` unless it runs already (stopping the one that
    /// does): it ramps up, then the /proc sampler characterises it.
    fn switch_load(&mut self, plan: &Plan, l: usize, opts: &Options, signal: &Arc<AtomicBool>) -> Result<()> {
        if self.active.as_ref().is_some_and(|a| a.index == l) {
            return Ok(());
        }
        self.stop_load();
        let spec = &plan.loads[l];
        if !opts.quiet {
            eprintln!(
                "load {} on CPUs {}: ramping up {}",
                spec.label,
                format_cpu_list(&spec.cpus),
                units::human(plan.ramp_ns)
            );
        }
        let running = Running::start(spec, signal)?;
        wait(plan.ramp_ns, signal);
        let acc = std::mem::take(&mut self.accs[l]);
        let sampler = Sampler::start(acc).context("starting the /proc sampler")?;
        self.active = Some(Active { index: l, running, sampler });
        Ok(())
    }

    /// Stops the active load; its errors become notes, its failure is
    /// kept (by load).
    fn stop_load(&mut self) {
        if let Some(a) = self.active.take() {
            self.accs[a.index] = a.sampler.stop();
            if let Some(f) = a.running.failure() {
                self.failures[a.index].get_or_insert(f);
            }
            let label = a.running.label.clone();
            self.notes.extend(a.running.stop().into_iter().map(|e| format!("load {label}: {e}")));
        }
    }

    /// Why load `l` failed, when it did (it is the active one).
    fn load_failure(&self, l: usize) -> Option<String> {
        self.active.as_ref().and_then(|a| a.running.failure()).or(self.failures[l].clone())
    }

    /// Measures cell `n` under its load, now running. Returns false when
    /// the assessment must stop (a store error, a breach).
    fn cell(
        &mut self,
        plan: &Plan,
        n: usize,
        effective: (Policy, u8),
        run: &mut OpenRun,
        opts: &Options,
        signal: &Arc<AtomicBool>,
    ) -> Result<bool> {
        let (l, p) = plan.cells[n];
        let label = plan.loads[l].label.clone();
        let name = plan.probes[p].series_name();
        if !opts.quiet {
            eprintln!("[{}/{}] {name} under {label}", n + 1, plan.cells.len());
        }
        // A load that failed (its command cannot start, or keeps
        // failing at once) fails its cells: what would be measured is
        // not the machine under that load.
        if let Some(f) = self.load_failure(l) {
            if !opts.quiet {
                eprintln!("rtscope: load {label} failed: {f}");
            }
            self.outcomes.push(CellOutcome {
                errors: vec![format!("{name} under {label}: not measured: load {label} failed: {f}")],
                ..Default::default()
            });
            return Ok(true);
        }
        let mut outcome = match &plan.probes[p] {
            Built::PerCpu(common, probe) => {
                let mut warnings = Vec::new();
                let cell = Cell::prepare(probe.as_ref(), common, effective, Some(label.clone()), &mut warnings);
                for w in warnings {
                    self.notes.push(format!("{name} under {label}: {} (fix: {})", w.message, w.fix));
                }
                match cell {
                    Ok(cell) => cell.measure(run, signal)?,
                    Err(e) => {
                        CellOutcome { errors: vec![format!("{name} under {label}: {e:#}")], ..Default::default() }
                    }
                }
            }
            Built::Own(o) => o.measure(run, &label, plan.cell_ns, effective, signal)?,
        };
        if let Some(f) = self.load_failure(l) {
            outcome.errors.push(format!("{name} under {label}: load {label} failed while it was measured: {f}"));
        }
        if let Some(t) = &outcome.trace {
            self.trace.absorb(t);
        }
        let stop = outcome.store_error.is_some() || outcome.breach.is_some();
        self.outcomes.push(outcome);
        if stop {
            return Ok(false);
        }
        if let Some(a) = &self.active {
            let errors = a.running.errors();
            if !errors.is_empty() && !opts.quiet {
                for e in &errors {
                    eprintln!("rtscope: load {label}: {e}");
                }
            }
        }
        Ok(true)
    }
}

/// Ends the assessment after its cells (`result`: whether their loop
/// failed): stops the load, stores the characterisation and the trace
/// summary, finishes the run with its status, then judges it and prints it.
fn finish(
    plan: &Plan,
    mut m: Matrix,
    mut run: OpenRun,
    result: Result<()>,
    opts: &Options,
    signal: &Arc<AtomicBool>,
) -> Result<i32> {
    let run_id = run.run_id;
    m.stop_load();
    m.notes.dedup();
    let characterisation = characterise(&plan.loads, &m.accs, &m.failures, &mut m.notes);
    let stored = m.outcomes.iter().all(|o| o.store_error.is_none());
    if stored {
        let store = run.store()?;
        store.put_run_data(run_id, "characterisation", &serde_json::to_value(&characterisation)?)?;
        if !m.trace.instance.is_empty() {
            store.put_run_data(run_id, "trace", &serde_json::to_value(&m.trace)?)?;
        }
    }
    if !plan.untraced.is_empty() {
        m.notes.push(format!("--trace: {} measured without it (not supported yet)", plan.untraced.join(", ")));
    }
    let (mut status, mut code, more) = verdict(&mut m.outcomes, signal);
    m.notes.extend(more);
    if let Err(e) = &result {
        m.notes.push(format!("the assessment stopped: {e:#}"));
        (status, code) = (RunStatus::Failed, 1);
    }
    let loaded = run.finish(status, code, &m.notes);
    if let Some(e) = m.outcomes.iter_mut().find_map(|o| o.store_error.take()) {
        return Err(e.context(format!("run {run_id} ended failed")));
    }
    result?;
    judge_and_print(&loaded?, opts, code)
}

/// Judges the finished run `loaded` against the requirements stored with
/// it, as `rtscope analyze` would, and prints it with them last (and
/// writes --json); a failed one turns exit code `code` 0 into 2. So does
/// the task set stored with it: a set that misses a deadline with the
/// measured release jitter counts as a failed requirement.
fn judge_and_print(loaded: &Run, opts: &Options, code: i32) -> Result<i32> {
    // The yardstick too: the summary shows it, it never changes the exit code.
    let asked = crate::judge::asked(loaded, &Default::default(), true)?;
    let set = crate::judge::asked_set(loaded, &Default::default())?;
    let (verdicts, sched) = crate::judge::judge(loaded, &asked, set.as_ref());
    // The JSON's verdict keys are those of a run with requirements or a
    // task set (the summary's own block has the yardstick's verdict).
    let gated = (!asked.reqs.is_empty() && asked.source != crate::judge::ReqSource::Default) || set.is_some();
    let judged = gated.then(|| crate::judge::Judged::new(&asked, &verdicts, set.as_ref(), sched.as_ref()));
    let input = Input { judged: judged.as_ref(), ..Input::one(loaded) };
    let printing = super::write_run(&input, &[("--json", report::JSON, opts.json.as_deref())], &opts.db)?;
    if !verdicts.is_empty() && printing {
        let mut out = std::io::stdout().lock();
        writeln!(out)?;
        report::analyze::write_verdicts(&verdicts, &asked.origin(), &mut out)?;
    }
    if let Some(note) = asked.short_note(&verdicts) {
        eprintln!("rtscope: {note}");
    }
    if let (Some(set), Some(s), true) = (&set, &sched, printing) {
        let mut out = std::io::stdout().lock();
        writeln!(out)?;
        report::analyze::write_schedulability(s, &set.origin(), &mut out)?;
    }
    let failed = judged.as_ref().is_some_and(|j| !j.passed);
    Ok(if failed && code == 0 { 2 } else { code })
}

/// `rtscope load`: runs `loads` together for `duration_ns` (or until a
/// signal), characterises them and stores that as a run.
pub fn loads_only(
    loads: &[LoadSpec],
    duration_ns: Option<u64>,
    opts: &Options,
    signal: &Arc<AtomicBool>,
) -> Result<i32> {
    load::remove_stale_temp_dirs();
    let session = Session::open_unmeasured(&opts.db)?;
    let label = loads.iter().map(|l| l.label.as_str()).collect::<Vec<_>>().join(",");
    let mut cpus: Vec<usize> = loads.iter().flat_map(|l| l.cpus.iter().copied()).collect();
    cpus.sort_unstable();
    cpus.dedup();
    let plan = serde_json::json!({
        "loads": loads,
        "duration_ns": duration_ns,
        "describe": format!("loads {label} on CPUs {}", format_cpu_list(&cpus)),
    });
    let mut run = session.create("load", &plan)?;
    if !opts.quiet {
        eprintln!(
            "rtscope load: {label} on CPUs {}{} (Ctrl-C stops)",
            format_cpu_list(&cpus),
            duration_ns.map(|d| format!(" for {}", units::human(d))).unwrap_or_default()
        );
    }
    let mut running = Vec::new();
    let mut notes = Vec::new();
    let mut failed = None;
    for spec in loads {
        match Running::start(spec, signal) {
            Ok(r) => running.push(r),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let mut acc = Accumulator::new(&label, &cpus);
    if failed.is_none() {
        let sampler = Sampler::start(acc).context("starting the /proc sampler")?;
        // Until the end, a signal, or a load that fails (its command cannot
        // start, or keeps failing at once).
        let end = clock::now().saturating_add(duration_ns.unwrap_or(u64::MAX / 2));
        while clock::now() < end && !signal.load(Relaxed) && running.iter().all(|r| r.failure().is_none()) {
            std::thread::sleep(Duration::from_millis(20));
        }
        acc = sampler.stop();
    }
    let mut load_failures = Vec::new();
    for r in running {
        let l = r.label.clone();
        if let Some(f) = r.failure() {
            load_failures.push(format!("load {l} failed: {f}"));
        }
        notes.extend(r.stop().into_iter().map(|e| format!("load {l}: {e}")));
    }
    let mut characterisation = acc.finish();
    if load_failures.is_empty() {
        characterisation.checks = loads.iter().filter_map(load::target).map(|t| characterisation.check(&t)).collect();
    } else {
        characterisation.failure = Some(load_failures.join("; "));
    }
    notes.extend(characterisation.checks.iter().filter(|k| k.flagged).map(|k| format!("load check: {}", k.message)));
    if failed.is_none() && !load_failures.is_empty() {
        failed = Some(anyhow!("{}", load_failures.join("; ")));
    }
    let characterisation = vec![characterisation];
    let run_id = run.run_id;
    run.store()?.put_run_data(run_id, "characterisation", &serde_json::to_value(&characterisation)?)?;
    let (status, code) = match &failed {
        Some(e) => {
            notes.push(format!("{e:#}"));
            (RunStatus::Failed, 1)
        }
        None if signal.load(Relaxed) && duration_ns.is_some() => {
            notes.push("stopped by a signal (SIGINT/SIGTERM) before its planned end".into());
            (RunStatus::Interrupted, 0)
        }
        None => (RunStatus::Complete, 0),
    };
    let loaded = run.finish(status, code, &notes)?;
    if let Some(e) = failed {
        return Err(e);
    }
    super::write_run(&Input::one(&loaded), &[("--json", report::JSON, opts.json.as_deref())], &opts.db)?;
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtscope_model::store::Store;

    #[test]
    fn embedded_plans_resolve_and_fit_their_time() {
        let db = Path::new("/tmp/never-created.db");
        let default = Plan::resolve(&PlanFile::parse(DEFAULT_PLAN, "default").unwrap(), "default", db).unwrap();
        assert_eq!(default.probes.len(), descriptor::PROBES.iter().filter(|d| d.default).count());
        let s = default.length_ns() / 1_000_000_000;
        assert!((240..=330).contains(&s), "default plan: {s} s");
        let quick = Plan::resolve(&PlanFile::parse(QUICK_PLAN, "quick").unwrap(), "quick", db).unwrap();
        assert!(quick.length_ns() < 55_000_000_000, "quick plan: {} s", quick.length_ns() / 1_000_000_000);
        assert_eq!(quick.cells.len(), quick.probes.len() * quick.loads.len());
        // Load by load unless shuffled.
        assert_eq!(quick.cells[0], (0, 0));
        assert_eq!(quick.cells[1], (0, 1));
    }

    #[test]
    fn the_campaign_example_parses() {
        let f = PlanFile::parse(include_str!("../../plans/campaign-12h.toml"), "campaign-12h.toml").unwrap();
        assert_eq!(f.duration.as_deref(), Some("12h"));
        assert_eq!(f.loads.as_ref().unwrap().len(), 8);
        assert_eq!(f.args["wakeup"], vec!["--interval", "500us", "--priority", "98"]);
    }

    /// `wakeup@95`, `wakeup@80`: two cells of wakeup, each at its priority
    /// under its own name, each with its own [args], else wakeup's.
    #[test]
    fn instances_of_a_probe_take_their_priority_and_their_args() {
        let db = Path::new("/tmp/never-created.db");
        let text = "probes = [\"wakeup@95\", \"wakeup@80\"]\ncpus = \"0\"\n[args]\n\
                    wakeup = [\"--interval\", \"500us\"]\n\"wakeup@80\" = [\"--interval\", \"2ms\"]\n";
        let plan = Plan::resolve(&PlanFile::parse(text, "p.toml").unwrap(), "p.toml", db).unwrap();
        let got: Vec<(String, u8, u64)> = plan
            .probes
            .iter()
            .map(|b| match b {
                Built::PerCpu(c, p) => {
                    (b.series_name().to_string(), c.priority, p.plan()["interval_ns"].as_u64().unwrap())
                }
                Built::Own(_) => unreachable!(),
            })
            .collect();
        assert_eq!(got, vec![("wakeup@95".into(), 95, 500_000), ("wakeup@80".into(), 80, 2_000_000)]);
        assert_eq!(produces(&plan.probes)[1], ("wakeup@80".to_string(), vec!["latency".to_string()]));
    }

    #[test]
    fn requirements_are_stored_with_the_plan_and_flags_replace_the_files() {
        let db = Path::new("/tmp/never-created.db");
        let text = "probes = [\"wakeup\"]\nprofiles = [\"omac\"]\nrequire = [\"wakeup.latency.p99 < 50us\"]";
        let file = PlanFile::parse(text, "plan.toml").unwrap();
        let plan = Plan::resolve(&file, "plan.toml", db).unwrap();
        let json = plan.json(&[], "");
        assert_eq!(json["requirements"]["profiles"], serde_json::json!(["omac"]));
        assert_eq!(json["requirements"]["require"], serde_json::json!(["wakeup.latency.p99 < 50us"]));
        let flags = PlanFile { profiles: Some(vec!["audio".into()]), ..Default::default() };
        let both = file.overlay(flags);
        assert_eq!(both.profiles, Some(vec!["audio".to_string()]), "--profile replaces the file's profiles");
        assert_eq!(both.require.unwrap().len(), 1, "the file's require stays");
        let none = Plan::resolve(&PlanFile::parse(QUICK_PLAN, "quick").unwrap(), "quick", db).unwrap();
        assert_eq!(none.json(&[], "")["requirements"]["profiles"], serde_json::json!([]));
    }

    #[test]
    fn a_task_set_comes_with_the_plan_from_a_file_or_inline_and_is_stored() {
        let db = Path::new("/tmp/never-created.db");
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sets")).unwrap();
        std::fs::write(
            dir.path().join("sets/ctl.toml"),
            "[[task]]\nname = \"io\"\nwcet = \"200us\"\nperiod = \"1ms\"\n\
             [[task]]\nname = \"ctl\"\nwcet = \"1ms\"\nperiod = \"5ms\"\ndeadline = \"4ms\"\n",
        )
        .unwrap();
        // A task file relative to the plan file, at the plan's error rate.
        let plan_path = dir.path().join("plan.toml");
        std::fs::write(&plan_path, "probes = [\"wakeup\"]\ntasks = \"sets/ctl.toml\"\nerror_rate = 1e-4\n").unwrap();
        let file = PlanFile::read(&plan_path).unwrap();
        let plan = Plan::resolve(&file, "plan.toml", db).unwrap();
        let set = plan.tasks.as_ref().unwrap();
        assert_eq!((set.tasks.len(), set.tasks[1].deadline_ns, set.error_rate), (2, 4_000_000, 1e-4));
        assert!(set.source.ends_with("sets/ctl.toml"), "{}", set.source);
        // Stored with the run, as the model reads it back.
        let stored = &plan.json(&[], "")["schedulability"];
        let back: rta::TaskSet = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(&back, set);
        assert_eq!(stored["tasks"][0]["wcet_ns"], 200_000);
        // Inline [[task]] tables (after [args]: still top-level tables), at the default error rate.
        let inline = "probes = [\"wakeup\", \"noise\"]\n[args]\nwakeup = [\"--interval\", \"1ms\"]\n\
                      [[task]]\nname = \"a\"\nwcet = \"1ms\"\nperiod = \"10ms\"\npriority = 5\n\
                      [[task]]\nname = \"b\"\nwcet = \"1ms\"\nperiod = \"2ms\"\npriority = 9\n";
        let file = PlanFile::parse(inline, "p.toml").unwrap();
        let plan = Plan::resolve(&file, "p.toml", db).unwrap();
        let set = plan.tasks.unwrap();
        assert_eq!((set.source.as_str(), set.tasks[0].name.as_str()), ("p.toml [[task]]", "b"));
        assert_eq!(set.error_rate, rta::DEFAULT_ERROR_RATE);
        // --tasks replaces the inline tables; --error-rate the rate.
        let flags = PlanFile {
            tasks: Some(dir.path().join("sets/ctl.toml").display().to_string()),
            error_rate: Some(1e-3),
            ..Default::default()
        };
        let both = file.clone().overlay(flags);
        assert!(both.task.is_none() && both.tasks.is_some() && both.error_rate == Some(1e-3));
        let plan = Plan::resolve(&both, "p.toml with flags", db).unwrap();
        assert_eq!(plan.tasks.unwrap().tasks[0].name, "io");
        // Without a task set: none stored.
        let none = Plan::resolve(&PlanFile::parse(QUICK_PLAN, "quick").unwrap(), "quick", db).unwrap();
        assert!(none.json(&[], "")["schedulability"].is_null());
    }

    #[test]
    fn bad_plans_name_the_key() {
        let db = Path::new("/tmp/never-created.db");
        for (text, words) in [
            ("probes = [\"wakeup\"]\nduration = \"10parsecs\"", &["plan.toml", "duration"][..]),
            ("probes = [\"nope\"]", &["plan.toml", "nope", "known"][..]),
            ("probes = [\"wakeup@100\"]", &["plan.toml", "wakeup@100", "1..99"][..]),
            ("probes = [\"osbench@5\"]", &["plan.toml", "osbench@5", "per-CPU"][..]),
            ("probes = [\"wakeup@90\", \"wakeup@90\"]", &["plan.toml", "wakeup@90 is listed twice"][..]),
            ("probes = [\"wakeup\"]\nloads = [\"spin\"]", &["plan.toml", "loads", "spin"][..]),
            (
                "probes = [\"wakeup\"]\n[args]\nwakeup = [\"--interval\", \"1\"]",
                &["plan.toml", "wakeup", "--interval"][..],
            ),
            ("probes = [\"wakeup\"]\n[args]\nnoyse = []", &["plan.toml", "noyse"][..]),
            ("probes = [\"wakeup\"]\nduration = \"100ms\"", &["plan.toml", "1s"][..]),
            ("probes = []", &["plan.toml", "empty"][..]),
            ("probes = [\"wakeup\"]\nprofiles = [\"dvd\"]", &["plan.toml: profiles = dvd", "omac"][..]),
            (
                "probes = [\"wakeup\"]\nrequire = [\"wakeup.latency < 50us\"]",
                &["plan.toml: require = 'wakeup.latency < 50us'", "statistic"][..],
            ),
            (
                "probes = [\"wakeup\"]\ntasks = \"/nonexistent/set.toml\"",
                &["plan.toml: tasks = /nonexistent/set.toml", "cannot read"][..],
            ),
            (
                "probes = [\"wakeup\"]\n[[task]]\nname = \"a\"\nwcet = \"1\"\nperiod = \"1ms\"",
                &["plan.toml: [[task]]", "task 'a'", "wcet"][..],
            ),
            (
                "probes = [\"wakeup\"]\n[[task]]\nname = \"a\"\nwcet = \"1ms\"\nperiod = \"1ms\"\nwcett = 1",
                &["plan.toml", "wcett"][..],
            ),
            (
                "probes = [\"wakeup\"]\ntasks = \"x.toml\"\n[[task]]\nname = \"a\"\nwcet = \"1ms\"\nperiod = \"2ms\"",
                &["plan.toml", "not both"][..],
            ),
            ("probes = [\"wakeup\"]\nerror_rate = 1e-3", &["plan.toml: error_rate needs a task set", "[[task]]"][..]),
            (
                "probes = [\"wakeup\"]\nerror_rate = 2.0\n[[task]]\nname = \"a\"\nwcet = \"1ms\"\nperiod = \"2ms\"",
                &["plan.toml: error_rate = 2", "between 0 and 1"][..],
            ),
            (
                "probes = [\"noise\"]\n[[task]]\nname = \"a\"\nwcet = \"1ms\"\nperiod = \"2ms\"",
                &["plan.toml", "wake-up latency", "add it", "--probes wakeup,noise"][..],
            ),
        ] {
            let e = PlanFile::parse(text, "plan.toml")
                .and_then(|f| Plan::resolve(&f, "plan.toml", db))
                .err()
                .map(|e| format!("{e:#}"))
                .unwrap_or_default();
            for w in words {
                assert!(e.contains(w), "{text}: {e}");
            }
        }
        let e = PlanFile::parse("probe = [\"wakeup\"]", "plan.toml").unwrap_err().to_string();
        assert!(e.contains("plan.toml") && e.contains("probe"), "{e}");
    }

    /// A measurement with its own runner: one series per cell, one sample
    /// per millisecond of the cell.
    struct Counter;

    impl crate::session::OwnCell for Counter {
        fn name(&self) -> &'static str {
            "counter"
        }
        fn plan(&self) -> serde_json::Value {
            serde_json::json!({"what": "test"})
        }
        fn metrics(&self) -> Vec<String> {
            vec!["n".into()]
        }
        fn measure(
            &self,
            run: &mut crate::session::OpenRun,
            load: &str,
            duration_ns: u64,
            _: (crate::sys::sched::Policy, u8),
            _: &Arc<AtomicBool>,
        ) -> Result<CellOutcome> {
            std::thread::sleep(Duration::from_nanos(duration_ns));
            let id = run.run_id;
            let store = run.store()?;
            let key = rtscope_model::run::SeriesKey {
                load: Some(load.into()),
                ..rtscope_model::run::SeriesKey::new("counter", "n", -1)
            };
            let sid = store.add_series(id, &key, "ns", "none")?;
            let mut t = rtscope_model::hist::Tally::new();
            t.record(duration_ns / 1_000_000);
            let iv = rtscope_model::run::Interval::new(0, 0, duration_ns, &t, 0, 0);
            store.commit_checkpoint(&[(sid, &iv)], &[])?;
            Ok(CellOutcome::default())
        }
    }

    #[test]
    fn a_measurement_with_its_own_runner_joins_the_matrix() {
        // It runs a real `cpu` load on CPU 0 for a second.
        let _machine = crate::machine_lock();
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("m.db");
        let file = PlanFile {
            probes: Some(vec!["wakeup".into()]),
            loads: Some(vec!["idle".into(), "cpu@0".into()]),
            duration: Some("1s".into()),
            warmup: Some("0".into()),
            ramp_up: Some("0".into()),
            score: Some("100ms".into()),
            ..Default::default()
        };
        let mut plan = Plan::resolve(&file, "test", &db).unwrap();
        plan.probes = vec![Built::Own(Box::new(Counter))];
        let opts = Options { db: db.clone(), json: None, quiet: true, no_dma_latency: true };
        let code = run(plan, &opts, &Arc::new(AtomicBool::new(false))).unwrap();
        assert_eq!(code, 0);
        let run = Store::open(&db).unwrap().load_run(1).unwrap();
        assert_eq!(run.header.status, RunStatus::Complete, "{:?}", run.header.notes);
        let loads: Vec<_> = run.series.iter().map(|s| (s.key.probe.as_str(), s.key.load.as_deref())).collect();
        assert_eq!(loads, [("counter", Some("cpu@0")), ("counter", Some("idle"))]);
        assert_eq!(run.characterisation.len(), 2);
        assert!(run.characterisation[1].cpu_busy_pct >= 50.0, "{:?}", run.characterisation[1]);
        assert!(run.cpu_score.is_some());
        let mut text = Vec::new();
        crate::report::TEXT.write(&Input::one(&run), &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("counter n") && text.contains("characterisation"), "{text}");
    }

    #[test]
    fn the_plan_counts_in_words() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("m.db");
        let one =
            PlanFile { probes: Some(vec!["wakeup".into()]), loads: Some(vec!["idle".into()]), ..Default::default() };
        let text = Plan::resolve(&one, "test", &db).unwrap().describe();
        assert!(text.starts_with("1 probe x 1 load: 1 cell of 10s"), "{text}");
        let two = PlanFile { probes: Some(vec!["wakeup".into(), "noise".into()]), ..one };
        let text = Plan::resolve(&two, "test", &db).unwrap().describe();
        assert!(text.starts_with("2 probes x 1 load: 2 cells of"), "{text}");
    }

    #[test]
    fn shuffling_keeps_every_cell() {
        let v: Vec<u32> = (0..24).collect();
        let mut s = shuffled(v.clone(), 7);
        assert_ne!(s, v);
        s.sort_unstable();
        assert_eq!(s, v);
        let a = PlanFile { shuffle: Some(true), seed: Some(3), ..Default::default() };
        let b = PlanFile::parse(QUICK_PLAN, "q").unwrap().overlay(a);
        assert_eq!((b.shuffle, b.seed, b.loads.unwrap().len()), (Some(true), Some(3), 3));
    }
}
