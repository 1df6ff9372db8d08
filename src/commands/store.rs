//! The run store's subcommands: `runs`, `show`, `export`, `import`.

use crate::cli::{ExportArgs, ImportArgs, ShowArgs, StoreArgs};
use crate::report::{self, Input};
use anyhow::{Result, bail};
use rtscope_model::export;
use rtscope_model::store::Store;
use rtscope_model::units::{self, utc};
use std::io::Write;

/// The store at `--db`, which must exist.
pub fn open_existing(s: &StoreArgs) -> Result<Store> {
    rtscope_model::store::check_path(&s.db)?;
    if !s.db.exists() {
        bail!(
            "--db {}: no run store there (make one with `rtscope run`, or point --db at one)",
            rtscope_model::store::shown(&s.db)
        );
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
        let dur = h.ended_unix_ns.map(|e| run_length((e - h.started_unix_ns).max(0) as u64));
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

/// A run's length for the list: to the millisecond under a minute (a
/// short osbench run is not `0s`), to the second above.
fn run_length(ns: u64) -> String {
    match ns {
        0..1_000_000 => "<1ms".into(),
        1_000_000..60_000_000_000 => units::human(ns / 1_000_000 * 1_000_000),
        _ => units::human(ns / 1_000_000_000 * 1_000_000_000),
    }
}

/// `rtscope show`.
pub fn show(a: ShowArgs) -> Result<i32> {
    let store = open_existing(&a.store)?;
    let run = store.load_run_summed(store.resolve(&a.run)?)?;
    report::to_stdout(|out| {
        let input = Input::one(&run);
        if a.print.json {
            report::JSON.write(&input, out).map(drop)
        } else if a.episodes {
            report::write_episodes(&run, out)
        } else {
            report::TEXT.write(&Input { machine: true, colour: report::colour_on_stdout(), ..input }, out).map(drop)
        }
    })?;
    Ok(0)
}

/// `rtscope export`: the run, lossless where the format can be.
pub fn export(a: ExportArgs) -> Result<i32> {
    crate::cli::check_output("--output", &a.output, &a.store.db)?;
    let store = open_existing(&a.store)?;
    let run = store.load_run(store.resolve(&a.run)?)?;
    let timeline = if a.format.reads_timeline() { store.timeline(run.header.id)? } else { None };
    report::write(
        "--output",
        &a.output,
        a.format,
        &Input { full: true, timeline: timeline.as_ref(), ..Input::one(&run) },
    )?;
    if let Some(n) = timeline.as_ref().and_then(|t| t.cut_note()) {
        eprintln!("rtscope: run {}: {n}", run.header.id);
    }
    Ok(0)
}

/// `rtscope import`.
pub fn import(a: ImportArgs) -> Result<i32> {
    let name = a.file.display().to_string();
    let text = crate::sys::fs::read_input_text(&a.file, &format!("import {name}"), "import a shorter run")
        .map_err(anyhow::Error::msg)?;
    let (run, timeline) = export::read_export(&text, &name)?;
    crate::cli::check_writable("--db", &a.store.db)?;
    let mut store = Store::open(&a.store.db)?;
    let id = store.insert_run(&run)?;
    if let Some(t) = timeline {
        store.add_timeline(id, t)?;
    }
    let header = rtscope_model::store::imported_header(&run);
    println!(
        "imported {name} as run {id} (from {}, {}): {}",
        run.header.hostname,
        utc(run.header.started_unix_ns),
        header.status.as_str()
    );
    if header.status != run.header.status {
        eprintln!(
            "rtscope: warning: run {id} was {} in {name} and is {} here: {}",
            run.header.status.as_str(),
            header.status.as_str(),
            header.notes.last().map(String::as_str).unwrap_or_default()
        );
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn run_lengths_are_never_zero_seconds() {
        assert_eq!(super::run_length(153_400_000), "153ms");
        assert_eq!(super::run_length(400_000), "<1ms");
        assert_eq!(super::run_length(2_004_900_000), "2.004s");
        assert_eq!(super::run_length(754_300_000_000), "12m34s");
    }
}
