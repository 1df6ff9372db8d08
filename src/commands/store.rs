//! The run store's subcommands: `runs`, `show`, `export`, `import`.

use crate::cli::{ExportArgs, ImportArgs, ShowArgs, StoreArgs};
use crate::report::{self, Input};
use anyhow::{Context, Result, bail};
use rtscope_model::export;
use rtscope_model::store::Store;
use rtscope_model::units::{self, utc};
use std::io::Write;

/// The store at `--db`, which must exist.
pub fn open_existing(s: &StoreArgs) -> Result<Store> {
    if !s.db.exists() {
        bail!("--db {}: no run store there (make one with `rtscope run`, or point --db at one)", s.db.display());
    }
    Store::open_for_reading(&s.db)
}

/// `rtscope runs`.
pub fn runs(a: StoreArgs) -> Result<i32> {
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

/// `rtscope show`.
pub fn show(a: ShowArgs) -> Result<i32> {
    let store = open_existing(&a.store)?;
    let run = store.load_run(store.resolve(&a.run)?)?;
    let mut out = std::io::stdout().lock();
    if a.json {
        report::JSON.write(&Input::one(&run), &mut out)?;
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
    writeln!(out)?;
    report::TEXT.write(&Input::one(&run), &mut out)?;
    Ok(0)
}

/// `rtscope export`: the run, lossless where the format can be.
pub fn export(a: ExportArgs) -> Result<i32> {
    let store = open_existing(&a.store)?;
    let run = store.load_run(store.resolve(&a.run)?)?;
    report::write("--output", &a.output, a.format, &Input { full: true, ..Input::one(&run) })?;
    Ok(0)
}

/// `rtscope import`.
pub fn import(a: ImportArgs) -> Result<i32> {
    let name = a.file.display().to_string();
    let text = std::fs::read_to_string(&a.file).with_context(|| format!("cannot read {name}"))?;
    let run = export::read_json(&text, &name)?;
    crate::cli::check_writable("--db", &a.store.db)?;
    let mut store = Store::open(&a.store.db)?;
    let id = store.insert_run(&run)?;
    println!("imported {name} as run {id} (from {}, {})", run.header.hostname, utc(run.header.started_unix_ns));
    Ok(0)
}
