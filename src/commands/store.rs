//! The run store's subcommands: `runs`, `show`, `export`, `import`.

use crate::cli::{ExportArgs, ImportArgs, ShowArgs, StoreArgs};
use crate::report::{self, Input, Summary, WIDTH, short_count, short_us};
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

/// `rtscope runs`: a line per run within 100 columns (its command
/// shortened to fit): when, its status, how long, its samples, the worst
/// case of its main series and its verdict; the host when the runs come
/// from several.
pub fn runs(a: StoreArgs) -> Result<i32> {
    let store = open_existing(&a)?;
    let list = store.list_runs()?;
    let several_hosts = list.iter().any(|r| list.first().is_some_and(|f| f.header.hostname != r.header.hostname));
    let mut head: Vec<String> =
        ["run", "started (UTC)", "status", "duration", "samples", "worst case", "verdict"].map(String::from).to_vec();
    if several_hosts {
        head.push("host".into());
    }
    let mut rows = Vec::new();
    let mut yardstick = false;
    for r in &list {
        let h = &r.header;
        let dur = h.ended_unix_ns.map(|e| run_length((e - h.started_unix_ns).max(0) as u64));
        let summary = store.load_run_summed(h.id).ok().and_then(|run| Summary::as_stored(&run).ok());
        let worst = summary
            .as_ref()
            .and_then(|s| s.main_worst().map(|(row, w)| format!("{} {} us", row.probe, short_us(w))))
            .unwrap_or_else(|| "-".into());
        let verdict = match summary.as_ref().and_then(|s| s.verdict.as_ref()) {
            Some(v) => {
                yardstick |= !v.gates;
                format!("{}{}", v.outcome.as_str().replace('_', " ").to_uppercase(), if v.gates { "" } else { "*" })
            }
            None => "-".into(),
        };
        let mut row = vec![
            h.id.to_string(),
            utc(h.started_unix_ns).chars().take(16).collect(),
            format!("{}{}", h.status.as_str(), if h.representative { "" } else { "!" }),
            dur.unwrap_or_else(|| "-".into()),
            short_count(r.samples),
            worst,
            verdict,
        ];
        if several_hosts {
            row.push(h.hostname.clone());
        }
        let command = h.command_line.iter().skip(1).cloned().collect::<Vec<_>>().join(" ");
        rows.push((row, if command.is_empty() { h.kind.clone() } else { command }));
    }
    let widths: Vec<usize> = (0..head.len())
        .map(|i| rows.iter().map(|(r, _)| r[i].chars().count()).chain([head[i].len()]).max().unwrap_or(0))
        .collect();
    let used: usize = widths.iter().map(|w| w + 2).sum();
    let room = WIDTH.saturating_sub(used).max(12);
    let line = |cells: &[String], command: &str| {
        let mut l = String::new();
        for (i, (c, &w)) in cells.iter().zip(&widths).enumerate() {
            // The figures right-aligned, the words left.
            if matches!(i, 0 | 3 | 4) { l += &format!("{c:>w$}  ") } else { l += &format!("{c:<w$}  ") }
        }
        let command = if command.chars().count() > room {
            format!("{}~", command.chars().take(room - 1).collect::<String>())
        } else {
            command.to_string()
        };
        l + &command
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", line(&head, "command"))?;
    for (row, command) in &rows {
        writeln!(out, "{}", line(row, command))?;
    }
    let odd = rows.iter().any(|(r, _)| r[2].ends_with('!'));
    if yardstick || odd {
        let mut legend =
            "worst case: of the run's main series (wake-up latency where measured), under any load".to_string();
        if yardstick {
            legend += "; *: against the yardstick (the profile omac), which never changes the exit code";
        }
        if odd {
            legend += "; !: measured without real-time scheduling (not representative)";
        }
        writeln!(out, "{}", crate::report::wrap_text("", &legend, 2).trim_start())?;
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
    let id = store.resolve(&a.run)?;
    // A format that writes every interval's histogram as it comes reads
    // them from the store then, never the run whole.
    let streams = a.format.streams_intervals();
    let run = if a.format.reads_summed() { store.load_run_summed(id)? } else { store.load_run(id)? };
    let timeline = if a.format.reads_timeline() { store.timeline(run.header.id)? } else { None };
    let intervals =
        |f: &mut dyn FnMut(usize, rtscope_model::run::Interval) -> Result<()>| store.for_each_interval_in_time(id, f);
    let rows = StoredRows { store: &store, id, sids: if streams { store.series_ids(id)? } else { vec![] } };
    report::write(
        "--output",
        &a.output,
        a.format,
        &Input {
            full: true,
            timeline: timeline.as_ref(),
            intervals: streams.then_some(&intervals as &report::Intervals),
            rows: streams.then_some(&rows as &dyn export::SeriesRows),
            ..Input::one(&run)
        },
    )?;
    if let Some(n) = timeline.as_ref().and_then(|t| t.cut_note()) {
        eprintln!("rtscope: run {}: {n}", run.header.id);
    }
    Ok(0)
}

/// A stored run's series' intervals and exceedances, read as they are
/// written (`export` of a format that streams them).
struct StoredRows<'s> {
    store: &'s Store,
    id: i64,
    /// The run's series' ids, in the run's order of series.
    sids: Vec<i64>,
}

impl StoredRows<'_> {
    fn sid(&self, series: usize) -> Result<i64> {
        self.sids.get(series).copied().ok_or_else(|| {
            anyhow::anyhow!("run {}: its series changed while it was exported; export it again", self.id)
        })
    }
}

impl export::SeriesRows for StoredRows<'_> {
    fn intervals(&self, series: usize, f: &mut dyn FnMut(rtscope_model::run::Interval) -> Result<()>) -> Result<()> {
        self.store.for_each_interval_of(self.id, self.sid(series)?, f)
    }

    fn exceedances(
        &self,
        series: usize,
        f: &mut dyn FnMut(rtscope_model::run::Exceedance) -> Result<()>,
    ) -> Result<()> {
        self.store.for_each_exceedance_of(self.sid(series)?, f)
    }
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
