//! The fleet, read back from Prometheus: `rtscope report --prometheus`
//! (every machine's report, ranked by its worst case) and `rtscope
//! compare --prometheus` (one machine's two time ranges, compared as two
//! runs).

use crate::cli::{FleetSpec, ReportArgs};
use crate::judge::RequireSpec;
use crate::progress::Ticker;
use crate::prometheus::{self, Client, Fleet, Window};
use crate::report::fleet::{FleetReport, Machine, Source};
use anyhow::{Result, bail};
use rtscope_model::analysis::usage::Usage;
use rtscope_model::metrics::query;
use rtscope_model::run::Run;
use std::path::Path;

/// Now, Unix seconds.
pub fn now_s() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The steps `report --prometheus` reads classic buckets in without
/// --step: the range / 24, at least 1m, at most the range (it shows each
/// series' figures over the whole range; compare reads the default steps).
fn report_step(start_s: f64, end_s: f64) -> f64 {
    let len = end_s - start_s;
    (len / 24.0).round().max(60.0).min(len).max(1.0)
}

fn read(c: &Client, spec: &FleetSpec, i: usize, coarse: bool, ticker: &Ticker) -> Result<Fleet> {
    let (start_s, end_s, step_s) = spec.windows[i];
    ticker.stage(format!(
        "reading {} {} from {} to {}",
        spec.url,
        spec.selector,
        rtscope_model::units::utc((start_s * 1e9) as i64),
        rtscope_model::units::utc((end_s * 1e9) as i64)
    ));
    let coarse = (coarse && !spec.step_given).then(|| report_step(start_s, end_s));
    prometheus::fetch(c, &spec.selector, &spec.matchers, &Window { start_s, end_s, step_s }, coarse)
}

/// `rtscope report --prometheus`.
pub fn report(a: &ReportArgs, spec: FleetSpec) -> Result<i32> {
    let out = a.output.as_deref();
    let written_as = "the fleet report is written as text (the default, .txt), html (.html) or markdown (.md)";
    let ext = out.filter(|o| *o != Path::new("-")).and_then(|o| o.extension()).and_then(|e| e.to_str());
    let kind = match (a.format.map(|f| f.name()), ext) {
        (Some("html"), _) | (None, Some("html" | "htm")) => "html",
        (Some("md"), _) | (None, Some("md")) => "markdown",
        (None, None | Some("txt")) => "text",
        (Some(n), _) => bail!("--format {n}: {written_as}"),
        (None, Some(e)) => bail!("--output {}: .{e}: {written_as}", out.unwrap_or(Path::new("-")).display()),
    };
    // The report goes to stdout without -o.
    crate::cli::check_outputs(
        &[("--output", Some(out.unwrap_or(Path::new("-")))), ("--json", a.json.as_deref())],
        &a.store.db,
    )?;
    crate::judge::parse_requirements(&a.req.profiles, &a.req.requires).map_err(anyhow::Error::msg)?;
    if a.sched.tasks.is_some() || a.sched.error_rate.is_some() {
        bail!("--tasks / --error-rate: not with --prometheus (the probes' settings are not in Prometheus)");
    }
    let client = Client::new(&spec.url, spec.limits)?;
    let ticker = Ticker::start("rtscope report");
    let fleet = read(&client, &spec, 0, true, &ticker)?;
    ticker.stage(format!("judging {}", rtscope_model::units::plural(fleet.len(), "machine")));
    let Window { start_s: start_unix_s, end_s: end_unix_s, step_s } = fleet.window();
    let source = Source {
        url: spec.url.clone(),
        selector: spec.selector.clone(),
        start_unix_s,
        end_unix_s,
        step_s,
        native_series: fleet.native,
        classic_series: fleet.classic,
        interval_maxima_scraped: fleet.maxima_scraped,
        checkpoints_committed: fleet.checkpoints,
    };
    let rep = judge_each(fleet, source, &a.req.spec(), a.days.usage.unwrap_or(Usage::CONTINUOUS))?;
    drop(ticker);
    let dest = out.unwrap_or(Path::new("-"));
    match kind {
        "html" => crate::report::write_to("--output", dest, |o| rep.write_html(o))?,
        "markdown" => crate::report::write_to("--output", dest, |o| rep.write_markdown(o))?,
        _ => crate::report::write_to("--output", dest, |o| rep.write_text(o))?,
    }
    if let Some(j) = &a.json {
        crate::report::write_to("--json", j, |o| rep.write_json(o))?;
    }
    Ok(if rep.passed { 0 } else { 2 })
}

/// The fleet report of `fleet`, a machine at a time on each core: each
/// machine's run is built, judged and dropped before the next (a run holds
/// each series' whole histogram, 230 kB: a thousand machines' runs together
/// would take gigabytes), then the machines ranked as [`FleetReport::new`]
/// ranks them.
fn judge_each(fleet: Fleet, source: Source, req: &RequireSpec, usage: Usage) -> Result<FleetReport> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, fleet.len().max(1));
    let mut parts: Vec<Vec<prometheus::Machine>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, m) in fleet.machines().into_iter().enumerate() {
        parts[i % threads].push(m);
    }
    let judge = |part: Vec<prometheus::Machine>| -> Result<Vec<Machine>> {
        let mut out = Vec::with_capacity(part.len());
        for m in part {
            out.extend(FleetReport::new(std::slice::from_ref(&m.run()?), source.clone(), req, usage)?.machines);
        }
        Ok(out)
    };
    let judged: Vec<Result<Vec<Machine>>> = std::thread::scope(|s| {
        let workers: Vec<_> = parts.into_iter().map(|p| s.spawn(|| judge(p))).collect();
        workers.into_iter().map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    let mut machines = Vec::new();
    for j in judged {
        machines.extend(j?);
    }
    machines.sort_by(|a, b| query::ranked((a.worst_ns, &a.instance), (b.worst_ns, &b.instance)));
    for (i, m) in machines.iter_mut().enumerate() {
        m.rank = i + 1;
    }
    Ok(FleetReport {
        not_from_prometheus: crate::report::fleet::limits(&source),
        passed: !machines.iter().any(|m| m.failed),
        source,
        machines,
    })
}

/// The two runs `compare --prometheus` compares: one machine's data in
/// each of the two ranges, the first the baseline.
pub fn ranges(spec: &FleetSpec, ticker: &Ticker) -> Result<Vec<Run>> {
    let client = Client::new(&spec.url, spec.limits)?;
    let mut runs = Vec::new();
    for i in 0..2 {
        let fleet = read(&client, spec, i, false, ticker)?;
        let names = fleet.names();
        if names.len() != 1 {
            bail!(
                "--selector {}: selects {} machines ({}): compare takes one machine's two ranges; add its instance, \
                 e.g. '{{instance=\"{}\"}}'",
                spec.selector,
                names.len(),
                names.join(", "),
                names.first().map_or("HOST:9733", |n| n.as_str())
            );
        }
        if let Some(first) = runs.first().map(|r: &Run| r.header.hostname.clone())
            && first != names[0]
        {
            bail!("--selector {}: selects {first} in the first range but {} in the second", spec.selector, names[0]);
        }
        let mut run = fleet.runs().next().expect("one machine")?;
        run.header.id = i as i64 + 1;
        if run.series.iter().all(|s| s.total().count() == 0) {
            let (start, end, _) = spec.windows[i];
            bail!(
                "--range: {} measured nothing from {} to {} UTC (the {} range)",
                run.header.hostname,
                rtscope_model::units::utc((start * 1e9) as i64),
                rtscope_model::units::utc((end * 1e9) as i64),
                if i == 0 { "first" } else { "second" }
            );
        }
        runs.push(run);
    }
    Ok(runs)
}
