//! `rtscope run` (the assessment, from a plan and the flags over its keys)
//! and `rtscope load` (loads alone): their flags checked, then `assess`.

use super::assess::{self, PlanFile};
use crate::cli::{LoadArgs, RunArgs};
use crate::load;
use crate::sys::cpu;
use anyhow::{Result, bail};
use rtscope_model::settings::RunDuration;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// `rtscope run`: the assessment, from the embedded default, `--quick` or a
/// campaign file, with the flags over its keys.
pub fn run(a: RunArgs, signal: &Arc<AtomicBool>) -> Result<i32> {
    let (base, origin) = match &a.plan {
        Some(path) => (PlanFile::read(path)?, path.display().to_string()),
        None if a.quick => (PlanFile::parse(assess::QUICK_PLAN, "quick")?, "--quick".to_string()),
        None => (PlanFile::parse(assess::DEFAULT_PLAN, "default")?, "default".to_string()),
    };
    // Flags are checked under their own names first.
    if let Some(text) = &a.loads {
        let cpus = match &a.loads_on.load_cpus {
            Some(list) => cpu::selected("--load-cpus", list)?,
            None => cpu::home(),
        };
        load::parse_list(text, &cpus, "--loads")?;
    }
    if let Some(cpus) = &a.measure.cpus {
        cpu::selected("--cpus", cpus)?;
    }
    for p in a.probes.iter().flatten() {
        crate::cli::registry::find(p)?;
    }
    crate::judge::parse_requirements(&a.req.profiles, &a.req.requires).map_err(anyhow::Error::msg)?;
    crate::judge::check_tasks_flags(&a.sched.spec())?;
    if a.sched.error_rate.is_some() && a.sched.tasks.is_none() && base.tasks.is_none() && base.task.is_none() {
        bail!("--error-rate needs a task set: give --tasks FILE, or tasks / [[task]] in the campaign file");
    }
    // --watch: the watched threads join the probes (alone without --probes).
    let mut probes = a.probes.clone();
    let mut args = std::collections::BTreeMap::new();
    if !a.watch.is_empty() {
        let mut list = probes.unwrap_or_default();
        if !list.iter().any(|p| p == crate::watch::NAME) {
            list.push(crate::watch::NAME.into());
        }
        probes = Some(list);
        args.insert(crate::watch::NAME.to_string(), crate::cli::watch_args(&a.watch)?);
    }
    let some = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
    let flags = PlanFile {
        probes,
        args,
        loads: a.loads.as_deref().map(load::split_list).transpose()?,
        duration: a.duration,
        warmup: a.warmup,
        ramp_up: a.ramp_up,
        checkpoint: a.checkpoint,
        shuffle: a.shuffle.then_some(true),
        instances: a.instances_in_turn.then_some(rtscope_model::settings::InstancesMode::InTurn),
        seed: a.seed,
        cpus: a.measure.cpus.clone(),
        load_cpus: a.loads_on.load_cpus.clone(),
        trace: a.trace.then_some(true),
        profiles: some(&a.req.profiles),
        require: some(&a.req.requires),
        allow_insufficient: a.req.allow_insufficient.then_some(true),
        tasks: a.sched.tasks.as_ref().map(|p| p.display().to_string()),
        error_rate: a.sched.error_rate,
        usage: a.days.usage,
        ..Default::default()
    };
    let any_flag = flags.probes.is_some() || flags.loads.is_some() || flags.duration.is_some();
    let origin = if any_flag { format!("{origin} with flags") } else { origin };
    crate::cli::check_store_and_outputs(&a.store.db, &[("--json", a.out.json.as_deref())])?;
    let mut plan = assess::Plan::resolve(&base.overlay(flags), &origin, &a.store.db)?;
    // Each cell shows its progress unless the run is quiet.
    for b in &mut plan.probes {
        if let crate::cli::registry::Built::PerCpu(common, _) = b {
            common.quiet = a.out.quiet;
        }
    }
    let opts = assess::Options { db: a.store.db, json: a.out.json, quiet: a.out.quiet, dma_latency: a.dma.held() };
    assess::run(plan, &opts, signal)
}

/// `rtscope load`: loads alone, characterised and stored.
pub fn load(a: LoadArgs, signal: &Arc<AtomicBool>) -> Result<i32> {
    let cpus = match &a.loads_on.load_cpus {
        Some(list) => cpu::selected("--load-cpus", list)?,
        None => cpu::home(),
    };
    let loads = load::parse_list(&a.loads, &cpus, "LOAD")?;
    crate::cli::check_store_and_outputs(&a.store.db, &[("--json", a.out.json.as_deref())])?;
    let opts = assess::Options { db: a.store.db, json: a.out.json, quiet: a.out.quiet, dma_latency: None };
    assess::loads_only(&loads, a.duration.map(RunDuration::ns), &opts, signal)
}
