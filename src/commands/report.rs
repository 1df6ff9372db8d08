//! The subcommands that write reports of runs: `report` (a format of
//! [`Use::Report`]: HTML or Markdown) and `compare`.

use crate::cli::{CompareArgs, ReportArgs, StoreArgs};
use crate::progress::Ticker;
use crate::report::{self, Input, Use};
use anyhow::{Context, Result, bail};
use rtscope_model::compare::RunBlocks;
use rtscope_model::export;
use rtscope_model::run::Run;
use rtscope_model::store::Store;
use rtscope_model::units;

/// The runs a command read, and where from.
struct Loaded {
    runs: Vec<Run>,
    /// The store, opened if any run came from it.
    store: Option<Store>,
    /// Per run, its id in the store (None: an export).
    ids: Vec<Option<i64>>,
}

/// The runs named by `specs`: ids or `last` in the store, or JSON exports.
/// A stored run's intervals' histograms are summed as read
/// ([`Store::load_run_summed`]): what a report reads of them is the runs'
/// statistics and tails, and `compare` streams them again into its
/// bootstrap blocks ([`compare_blocks`]).
fn load_runs(specs: &[String], store: &StoreArgs, ticker: &Ticker) -> Result<Loaded> {
    let mut opened: Option<Store> = None;
    let mut runs = Vec::new();
    let mut ids = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let of = if specs.len() > 1 { format!(" ({} of {})", i + 1, specs.len()) } else { String::new() };
        ticker.stage(format!("reading {}{spec}{of}", if spec.ends_with(".json") { "" } else { "run " }));
        let path = std::path::Path::new(spec);
        // Whatever is there under that name is read as an export: a
        // device or a FIFO is refused, not taken for a run id.
        if std::fs::symlink_metadata(path).is_ok() {
            let text = crate::sys::fs::read_input_text(path, &format!("RUN {spec}"), "report a shorter run")
                .map_err(anyhow::Error::msg)?;
            runs.push(export::read_json(&text, spec)?);
            ids.push(None);
            continue;
        }
        if spec.ends_with(".json") {
            bail!(
                "RUN {spec}: no such file (give a run id, `last`, or a file from `rtscope export RUN --format json`)"
            );
        }
        if opened.is_none() {
            opened = Some(super::store::open_existing(store)?);
        }
        let s = opened.as_ref().expect("opened above");
        let id = s.resolve(spec)?;
        runs.push(s.load_run_summed(id)?);
        ids.push(Some(id));
    }
    Ok(Loaded { runs, store: opened, ids })
}

/// Each run's intervals folded into its rows' bootstrap blocks: a stored
/// run's streamed from the store interval by interval (it was read
/// summed), another's (an export, a range of a fleet) from the intervals
/// it holds.
fn compare_blocks(runs: &[Run], store: Option<&Store>, ids: &[Option<i64>], ticker: &Ticker) -> Result<Vec<RunBlocks>> {
    let mut out = Vec::with_capacity(runs.len());
    for (i, run) in runs.iter().enumerate() {
        out.push(match (store, ids.get(i).copied().flatten()) {
            (Some(store), Some(id)) => {
                ticker.stage(format!("folding run {id}'s intervals"));
                RunBlocks::streamed(run, |f| store.for_each_interval_in_time(id, f))?
            }
            _ => RunBlocks::of_run(run),
        });
    }
    Ok(out)
}

/// `rtscope report`.
pub fn report(a: ReportArgs) -> Result<i32> {
    if let Some(spec) = a.prom.spec(1, super::fleet::now_s()).map_err(anyhow::Error::msg)? {
        return super::fleet::report(&a, spec);
    }
    if a.json.is_some() {
        bail!("--json goes with --prometheus URL (the fleet report); a report of runs is written with -o");
    }
    let output = a.output.as_deref().context("--output: give a FILE ('-' for stdout)")?;
    crate::cli::check_output("--output", output, &a.store.db)?;
    crate::cli::check_not_input("--output", output, &a.runs)?;
    let format = a.format.or_else(|| report::by_extension(Use::Report, output)).unwrap_or(report::HTML);
    // Bad flags are refused before anything is read.
    crate::judge::parse_requirements(&a.req.profiles, &a.req.requires).map_err(anyhow::Error::msg)?;
    crate::judge::check_tasks_flags(&a.sched.spec())?;
    let mut ticker = Ticker::start("rtscope report");
    let runs = load_runs(&a.runs, &a.store, &ticker)?.runs;
    let series: usize = runs.iter().map(|r| r.series.len()).sum();
    ticker.stage(format!("analysing {series} series, drawing the plots and writing {}", output.display()));
    let (req, tasks) = (a.req.spec(), a.sched.spec());
    let input = Input {
        req: Some(&req),
        tasks: Some(&tasks),
        mttf_axis: a.mttf_axis,
        usage: a.days.usage,
        ..Input::new(&runs)
    };
    let written = report::write("--output", output, format, &input)?;
    ticker.done();
    // A requirement given or stored with a run failed: exit code 2, as analyze.
    Ok(if written.failed { 2 } else { 0 })
}

/// `rtscope compare`.
pub fn compare(a: CompareArgs) -> Result<i32> {
    if a.print.json && a.html.as_deref() == Some(std::path::Path::new("-")) {
        bail!("--json and --html - would both write to stdout: give --html a FILE");
    }
    if let Some(h) = a.html.as_deref() {
        crate::cli::check_output("--html", h, &a.store.db)?;
        crate::cli::check_not_input("--html", h, &a.runs)?;
    }
    let spec = a.prom.spec(2, super::fleet::now_s()).map_err(anyhow::Error::msg)?;
    let ticker = Ticker::start("rtscope compare");
    let Loaded { runs, store, ids } = match &spec {
        Some(spec) => Loaded { runs: super::fleet::ranges(spec, &ticker)?, store: None, ids: Vec::new() },
        None => load_runs(&a.runs, &a.store, &ticker)?,
    };
    let blocks = compare_blocks(&runs, store.as_ref(), &ids, &ticker)?;
    drop(store);
    ticker.stage(format!("comparing {}", units::plural(runs.len(), "run")));
    let gate = a.max_regression.map(|pct| rtscope_model::compare::Gate {
        max_regression_pct: pct,
        min_delta_ns: a.min_delta,
        selectors: a.gate.clone(),
        allow_incomplete: a.allow_incomplete,
    });
    let cmp = report::Comparison::new(&runs, blocks, gate)?;
    drop(ticker);
    if a.print.json {
        report::to_stdout(|out| cmp.write_json(out))?;
    } else if a.html.as_deref() != Some(std::path::Path::new("-")) {
        report::to_stdout(|out| cmp.write_text(out))?;
    }
    if let Some(h) = &a.html {
        report::write_to("--html", h, |o| report::html::write_doc(&cmp.doc(), o))?;
    }
    Ok(if cmp.passed() { 0 } else { 2 })
}
