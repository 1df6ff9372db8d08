//! One function per subcommand: parse, act, map to an exit code.

mod analyze;
mod osbench;
mod probes;

use crate::assess::{self, PlanFile};
use crate::cli::{
    Cli, Cmd, CompareArgs, DisturbArgs, ExportArgs, ExportFormat, ImportArgs, LoadArgs, ReportArgs, ReportFormat,
    RunArgs, ShowArgs, StoreArgs,
};
use crate::disturb::{self, SpinSpec};
use crate::load;
use crate::probe::{netlat, wakeup};
use crate::report::{self, Report};
use crate::sys::{clock, cpu, mem, sched, signals};
use anyhow::{Context, Result, bail};
use clap::Parser;
use rtscope_model::export;
use rtscope_model::inventory::format_cpu_list;
use rtscope_model::store::Store;
use rtscope_model::units::{self, utc};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub fn main() -> Result<i32> {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            return Ok(code);
        }
    };
    signals::default_sigpipe();
    let signal = Arc::new(AtomicBool::new(false));
    // Only measuring commands finish cleanly on a signal; the others (and
    // the second process) keep the default actions.
    if matches!(
        cli.cmd,
        Cmd::Run(_)
            | Cmd::Load(_)
            | Cmd::Wakeup(_)
            | Cmd::Noise(_)
            | Cmd::Sleep(_)
            | Cmd::Ptimer(_)
            | Cmd::Netlat(_)
            | Cmd::Disturb(_)
            | Cmd::Osbench(_)
    ) {
        signals::install(&signal).context("installing signal handlers")?;
    }
    match cli.cmd {
        Cmd::Run(a) => run(a, &signal),
        Cmd::Load(a) => load_cmd(a, &signal),
        Cmd::Wakeup(a) => {
            let (common, probe) = a.resolve("wakeup")?;
            probes::run_probe(&probe, &common, &signal)
        }
        Cmd::Noise(a) => {
            let (common, probe) = a.resolve("noise")?;
            probes::run_probe(&probe, &common, &signal)
        }
        Cmd::Sleep(a) => {
            let (common, probe) = a.resolve("sleep")?;
            probes::run_probe(&probe, &common, &signal)
        }
        Cmd::Ptimer(a) => {
            let (common, probe) = a.resolve("ptimer")?;
            probes::run_probe(&probe, &common, &signal)
        }
        Cmd::Netlat(a) => probes::netlat(a, &signal),
        Cmd::Osbench(a) => osbench::main(a, &signal),
        Cmd::Runs(a) => runs(a),
        Cmd::Show(a) => show(a),
        Cmd::Export(a) => export_run(a),
        Cmd::Import(a) => import(a),
        Cmd::Analyze(a) => analyze::main(a),
        Cmd::Report(a) => report_cmd(a),
        Cmd::Compare(a) => compare_cmd(a),
        Cmd::Disturb(a) => disturb_cmd(a, &signal),
        Cmd::SecondProcess(a) => {
            let cpus = rtscope_model::inventory::parse_cpu_list(&a.cpus).map_err(anyhow::Error::msg)?;
            wakeup::second_process(&cpus, a.interval_ns, a.priority)?;
            Ok(0)
        }
        Cmd::NetlatSender(a) => {
            let cfg = netlat::SenderCfg { size: a.size, session: a.session };
            netlat::sender_process(a.cpu, a.policy, a.priority, cfg)?;
            Ok(0)
        }
    }
}

/// `rtscope run`: the assessment, from the embedded default, `--quick` or a
/// campaign file, with the flags over its keys.
fn run(a: RunArgs, signal: &Arc<AtomicBool>) -> Result<i32> {
    let (base, origin) = match &a.plan {
        Some(path) => (PlanFile::read(path)?, path.display().to_string()),
        None if a.quick => (PlanFile::parse(assess::QUICK_PLAN, "quick")?, "--quick".to_string()),
        None => (PlanFile::parse(assess::DEFAULT_PLAN, "default")?, "default".to_string()),
    };
    // Flags are checked under their own names first.
    if let Some(text) = &a.loads {
        let cpus = match &a.load_cpus {
            Some(list) => cpu::parse_selection("--load-cpus", list)?,
            None => cpu::online(),
        };
        load::parse_list(text, &cpus, "--loads")?;
    }
    if let Some(cpus) = &a.cpus {
        cpu::parse_selection("--cpus", cpus)?;
    }
    for p in a.probes.iter().flatten() {
        crate::cli::registry::find(p)?;
    }
    if let Some(d) = a.duration.filter(|&d| d < 1_000_000_000) {
        bail!("--duration {} is per cell and must be at least 1s (e.g. --duration 10s)", units::human(d));
    }
    if let Some(c) = a.checkpoint.filter(|c| !(100_000_000..=3_600_000_000_000).contains(c)) {
        bail!(
            "--checkpoint {} must be between 100ms and 1h (e.g. --checkpoint 250ms: the tail's diagnostics need 20 \
             to 40 intervals per cell)",
            units::human(c)
        );
    }
    crate::judge::parse_requirements(&a.req.profiles, &a.req.requires).map_err(anyhow::Error::msg)?;
    crate::judge::check_tasks_flags(&a.sched.spec())?;
    if a.sched.error_rate.is_some() && a.sched.tasks.is_none() && base.tasks.is_none() && base.task.is_none() {
        bail!("--error-rate needs a task set: give --tasks FILE, or tasks / [[task]] in the campaign file");
    }
    let some = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
    let ns = |v: Option<u64>| v.map(|n| format!("{n}ns"));
    let flags = PlanFile {
        probes: a.probes.clone(),
        loads: a.loads.as_deref().map(load::split_list).transpose()?,
        duration: ns(a.duration),
        warmup: ns(a.warmup),
        ramp_up: ns(a.ramp_up),
        checkpoint: ns(a.checkpoint),
        shuffle: a.shuffle.then_some(true),
        seed: a.seed,
        cpus: a.cpus.clone(),
        load_cpus: a.load_cpus.clone(),
        trace: a.trace.then_some(true),
        profiles: some(&a.req.profiles),
        require: some(&a.req.requires),
        tasks: a.sched.tasks.as_ref().map(|p| p.display().to_string()),
        error_rate: a.sched.error_rate,
        ..Default::default()
    };
    let any_flag = flags.probes.is_some() || flags.loads.is_some() || flags.duration.is_some();
    let origin = if any_flag { format!("{origin} with flags") } else { origin };
    crate::cli::check_writable("--db", &a.store.db)?;
    if let Some(json) = a.json.as_deref().filter(|p| *p != std::path::Path::new("-")) {
        crate::cli::check_writable("--json", json)?;
    }
    let plan = assess::Plan::resolve(&base.overlay(flags), &origin, &a.store.db)?;
    let opts = assess::Options { db: a.store.db, json: a.json, quiet: a.quiet, no_dma_latency: a.no_dma_latency };
    assess::run(plan, &opts, signal)
}

/// `rtscope load`: loads alone, characterised and stored.
fn load_cmd(a: LoadArgs, signal: &Arc<AtomicBool>) -> Result<i32> {
    let cpus = match &a.load_cpus {
        Some(list) => cpu::parse_selection("--load-cpus", list)?,
        None => cpu::online(),
    };
    let loads = load::parse_list(&a.loads, &cpus, "LOAD")?;
    if a.duration == Some(0) {
        bail!("--duration must be longer than 0 (e.g. --duration 30s)");
    }
    crate::cli::check_writable("--db", &a.store.db)?;
    if let Some(json) = a.json.as_deref().filter(|p| *p != std::path::Path::new("-")) {
        crate::cli::check_writable("--json", json)?;
    }
    let opts = assess::Options { db: a.store.db, json: a.json, quiet: a.quiet, no_dma_latency: true };
    assess::loads_only(&loads, a.duration, &opts, signal)
}

fn open_existing(s: &StoreArgs) -> Result<Store> {
    if !s.db.exists() {
        bail!("--db {}: no run store there (make one with `rtscope run`, or point --db at one)", s.db.display());
    }
    Store::open(&s.db)
}

fn runs(a: StoreArgs) -> Result<i32> {
    let store = open_existing(&a)?;
    let list = store.list_runs()?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:>5}  {:<20} {:<8} {:<12} {:>9} {:>12}  host",
        "run", "started (UTC)", "kind", "status", "duration", "samples"
    )?;
    for r in list {
        let h = &r.header;
        let dur = h
            .ended_unix_ns
            .map(|e| units::human(((e - h.started_unix_ns).max(0) as u64) / 1_000_000_000 * 1_000_000_000));
        writeln!(
            out,
            "{:>5}  {:<20} {:<8} {:<12} {:>9} {:>12}  {}{}",
            h.id,
            utc(h.started_unix_ns),
            h.kind,
            h.status.as_str(),
            dur.unwrap_or_else(|| "-".into()),
            r.samples,
            h.hostname,
            if h.representative { "" } else { "  (not representative)" }
        )?;
    }
    Ok(0)
}

fn show(a: ShowArgs) -> Result<i32> {
    let store = open_existing(&a.store)?;
    let run = store.load_run(store.resolve(&a.run)?)?;
    let mut out = std::io::stdout().lock();
    if a.json {
        report::Json.write(&run, &mut out)?;
        return Ok(0);
    }
    if a.episodes {
        report::write_episodes(&run, &mut out)?;
        return Ok(0);
    }
    let h = &run.header;
    let inv = &run.inventory;
    writeln!(out, "run {} ({})  {}  {}", h.id, h.uuid, h.kind, h.status.as_str())?;
    writeln!(
        out,
        "started   {} UTC{}",
        utc(h.started_unix_ns),
        h.ended_unix_ns.map(|e| format!(", ended {} UTC", utc(e))).unwrap_or_default()
    )?;
    writeln!(out, "command   {}", h.command_line.join(" "))?;
    writeln!(
        out,
        "host      {} · {} · {} CPUs ({}) · {}",
        h.hostname, inv.cpu_model, inv.cpu_count, inv.cpus_online, inv.arch
    )?;
    writeln!(out, "kernel    {} {} · {}", inv.kernel_release, inv.kernel_version, inv.preempt_model)?;
    writeln!(out, "cmdline   {}", inv.cmdline)?;
    writeln!(
        out,
        "clock     {} · RT throttling {} · rtscope {}{}",
        inv.clocksource,
        match inv.rt_runtime_us {
            Some(-1) => "off".to_string(),
            Some(r) => format!("{r}us per {}us", inv.rt_period_us.unwrap_or(0)),
            None => "unknown".into(),
        },
        h.tool_version,
        h.peak_rss_kb.map(|k| format!(" · peak RSS {} MB", k / 1024)).unwrap_or_default()
    )?;
    let describe = run.plan["describe"].as_str().unwrap_or_default().to_string();
    writeln!(out)?;
    report::Text { describe }.write(&run, &mut out)?;
    Ok(0)
}

fn export_run(a: ExportArgs) -> Result<i32> {
    let store = open_existing(&a.store)?;
    let run = store.load_run(store.resolve(&a.run)?)?;
    struct Fmt(ExportFormat);
    impl Report for Fmt {
        fn write(&self, run: &rtscope_model::run::Run, out: &mut dyn Write) -> Result<()> {
            match self.0 {
                ExportFormat::Json => export::write_json(run, true, out),
                ExportFormat::Csv => export::write_csv(run, out),
                ExportFormat::Hdr => export::write_hdr_log(run, out),
                ExportFormat::Perfetto => report::Perfetto.write(run, out),
            }
        }
    }
    report::write_file(&a.output, &Fmt(a.format), &run)?;
    Ok(0)
}

fn import(a: ImportArgs) -> Result<i32> {
    let name = a.file.display().to_string();
    let text = std::fs::read_to_string(&a.file).with_context(|| format!("cannot read {name}"))?;
    let run = export::read_json(&text, &name)?;
    crate::cli::check_writable("--db", &a.store.db)?;
    let mut store = Store::open(&a.store.db)?;
    let id = store.insert_run(&run)?;
    println!("imported {name} as run {id} (from {}, {})", run.header.hostname, utc(run.header.started_unix_ns));
    Ok(0)
}

/// The runs named by `specs`: ids or `last` in the store, or JSON exports.
fn load_runs(specs: &[String], store: &StoreArgs) -> Result<Vec<rtscope_model::run::Run>> {
    let mut opened: Option<Store> = None;
    let mut runs = Vec::new();
    for spec in specs {
        let path = std::path::Path::new(spec);
        if path.is_file() {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {spec}"))?;
            runs.push(export::read_json(&text, spec)?);
            continue;
        }
        if spec.ends_with(".json") {
            bail!(
                "RUN {spec}: no such file (give a run id, `last`, or a file from `rtscope export RUN --format json`)"
            );
        }
        if opened.is_none() {
            opened = Some(open_existing(store)?);
        }
        let s = opened.as_ref().expect("opened above");
        runs.push(s.load_run(s.resolve(spec)?)?);
    }
    Ok(runs)
}

fn report_cmd(a: ReportArgs) -> Result<i32> {
    if a.output != std::path::Path::new("-") {
        crate::cli::check_writable("--output", &a.output)?;
    }
    let format = a.format.unwrap_or(if a.output.extension().is_some_and(|e| e == "md") {
        ReportFormat::Md
    } else {
        ReportFormat::Html
    });
    // Bad flags are refused before anything is read.
    crate::judge::parse_requirements(&a.req.profiles, &a.req.requires).map_err(anyhow::Error::msg)?;
    crate::judge::check_tasks_flags(&a.sched.spec())?;
    let runs = load_runs(&a.runs, &a.store)?;
    let (doc, failed) = report::run_doc(&runs, &a.req.spec(), &a.sched.spec())?;
    report::write_to("--output", &a.output, |out| match format {
        ReportFormat::Html => report::html::write_doc(&doc, out),
        ReportFormat::Md => report::markdown::write_doc(&doc, out),
    })?;
    // A requirement given or stored with a run failed: exit code 2, as analyze.
    Ok(if failed { 2 } else { 0 })
}

fn compare_cmd(a: CompareArgs) -> Result<i32> {
    if a.json && a.html.as_deref() == Some(std::path::Path::new("-")) {
        bail!("--json and --html - would both write to stdout: give --html a FILE");
    }
    if let Some(h) = a.html.as_deref().filter(|p| *p != std::path::Path::new("-")) {
        crate::cli::check_writable("--html", h)?;
    }
    let runs = load_runs(&a.runs, &a.store)?;
    let gate = a.max_regression.map(|pct| rtscope_model::compare::Gate {
        max_regression_pct: pct,
        min_delta_ns: a.min_delta,
        selectors: a.gate.clone(),
        allow_incomplete: a.allow_incomplete,
    });
    let cmp = report::Comparison::new(&runs, gate)?;
    let mut out = std::io::stdout().lock();
    if a.json {
        cmp.write_json(&mut out)?;
    } else if a.html.as_deref() != Some(std::path::Path::new("-")) {
        cmp.write_text(&mut out)?;
    }
    if let Some(h) = &a.html {
        report::write_to("--html", h, |o| report::html::write_doc(&cmp.doc(), o))?;
    }
    Ok(if cmp.passed() { 0 } else { 2 })
}

fn disturb_cmd(a: DisturbArgs, signal: &Arc<AtomicBool>) -> Result<i32> {
    cpu::parse_selection("--cpu", &a.cpu.to_string())?;
    if a.spin >= a.period {
        bail!("--spin ({}) must be shorter than --period ({})", units::human(a.spin), units::human(a.period));
    }
    if a.phase_jitter + a.spin > a.period {
        bail!("--phase-jitter + --spin must fit in --period");
    }
    if let Some(path) = &a.log {
        crate::cli::check_writable("--log", path)?;
    }
    if !sched::can_use_rt(a.priority) {
        bail!("disturb needs SCHED_FIFO (run as root or grant CAP_SYS_NICE)");
    }
    let _ = mem::lock_all();
    let spec = SpinSpec {
        cpu: a.cpu,
        policy: sched::Policy::Fifo,
        priority: a.priority,
        period_ns: a.period,
        spin_ns: a.spin,
        phase_ns: a.phase_jitter,
        syscalls: false,
    };
    let what = format!(
        "{} every {} on CPU {} at SCHED_FIFO {}",
        units::human(a.spin),
        units::human(a.period),
        format_cpu_list(&[a.cpu]),
        a.priority
    );
    let (mut log, mut tx) = match &a.log {
        Some(path) => {
            let (log, tx) = disturb::BurstLog::create(path, &format!("rtscope disturb: spins of {what}"))
                .with_context(|| format!("--log {}: cannot write it", path.display()))?;
            (Some(log), Some(tx))
        }
        None => (None, None),
    };
    let until = a.duration.map_or(u64::MAX, |d| clock::now() + d);
    let spinner = {
        let signal = Arc::clone(signal);
        std::thread::Builder::new().name("rtscope-disturb".into()).spawn(move || {
            signals::block_in_this_thread();
            cpu::pin_self(&[spec.cpu])?;
            sched::set_self(spec.policy, spec.priority)?;
            let mut full = 0u64;
            let spins = disturb::spin_loop(&spec, &signal, until, |b| {
                if let Some(tx) = tx.as_mut() {
                    full += u64::from(tx.push(b).is_err());
                }
            });
            Ok::<(u64, u64), std::io::Error>((spins, full))
        })?
    };
    // The log is written from here, off the disturbed CPU where there is
    // another, so that writing it disturbs nothing but the bursts do.
    if let Some(log) = log.as_mut() {
        let others: Vec<usize> = cpu::allowed().into_iter().filter(|&c| c != a.cpu).collect();
        if !others.is_empty() {
            let _ = cpu::pin_self(&others);
        }
        while !spinner.is_finished() {
            std::thread::sleep(std::time::Duration::from_millis(20));
            log.drain().context("--log: writing the bursts")?;
        }
    }
    let (spins, full) = spinner.join().map_err(|_| anyhow::anyhow!("the spinner panicked"))??;
    if let Some(log) = log.as_mut() {
        log.drain().context("--log: writing the bursts")?;
        if full > 0 {
            bail!("--log: {full} bursts did not fit the ring to the log's writer and are missing from it");
        }
    }
    eprintln!("rtscope disturb: {spins} spins of {what}");
    Ok(0)
}
