//! `rtscope analyze`: reads stored runs and sample files, runs the pure
//! analysis of `rtscope_model::analysis` (judged by `judge`) and prints it
//! (text through `report::analyze`, or JSON). Exit code 2 when a
//! requirement fails.

use crate::cli::{AnalyzeArgs, AnalyzeCmd, MttfArgs, RtaArgs, StoreArgs, TailArgs};
use crate::judge::{
    Judged, analyse, analyse_stages, asked, asked_set, check_tasks_flags, label, miss_predictions, parse_requirements,
    pseudo_latency, schedulability,
};
use crate::progress::Ticker;
use crate::report::analyze as text;
use anyhow::{Context, Result, anyhow, bail};
use rtscope_model::analysis::misses::MissPrediction;
use rtscope_model::analysis::mttf::{self, Compute};
use rtscope_model::analysis::series::{self, Options, SeriesAnalysis};
use rtscope_model::analysis::{rta, verdict};
use rtscope_model::descriptor;
use rtscope_model::episode::Stages;
use rtscope_model::run::{Run, SeriesKey};
use rtscope_model::store::Store;
use rtscope_model::units::{self, TimeUnit};
use serde::Serialize;
use std::io::Write;
use std::path::Path;

pub fn main(a: AnalyzeArgs) -> Result<i32> {
    match a.cmd {
        Some(AnalyzeCmd::Tail(t)) => tail(t),
        Some(AnalyzeCmd::Mttf(m)) => mttf_cmd(m),
        Some(AnalyzeCmd::Rta(r)) => rta_cmd(r),
        None => analyze_run(a),
    }
}

fn open_store(s: &StoreArgs) -> Result<Store> {
    if !s.db.exists() {
        bail!("--db {}: no run store there (make one with `rtscope run`, or point --db at one)", s.db.display());
    }
    Store::open_for_reading(&s.db)
}

/// Run `spec`, read for an analysis at tail threshold `threshold` (ns;
/// None: the automatic one).
fn load(s: &StoreArgs, spec: &str, threshold: Option<f64>) -> Result<Run> {
    let store = open_store(s)?;
    store.load_run_summed_for(store.resolve(spec)?, threshold)
}

/// Samples from `path`: one value per line, or `timestamp value`, in
/// `unit` and `time_unit` (decimals rounded to the nearest ns). Returns the values in ns
/// and, with two columns, the times in seconds.
pub fn read_samples(
    path: &Path,
    flag: &str,
    unit: TimeUnit,
    time_unit: TimeUnit,
) -> Result<(Vec<i64>, Option<Vec<f64>>)> {
    let name = path.display();
    // The file is read whole: a regular file, at most half of the memory available.
    let text = crate::sys::fs::read_input_text(
        path,
        &format!("{flag} {name}"),
        "analyze a part of it (e.g. split -l 10000000)",
    )
    .map_err(anyhow::Error::msg)?;
    let mut values: Vec<i64> = Vec::new();
    let mut times: Vec<f64> = Vec::new();
    let lines = text.lines().count();
    values
        .try_reserve_exact(lines)
        .and_then(|_| times.try_reserve_exact(lines))
        .map_err(|e| anyhow!("{flag} {name}: cannot allocate memory for {lines} samples: {e}"))?;
    let mut columns = None;
    let mut t0 = None;
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(|c: char| c.is_whitespace() || c == ',').filter(|f| !f.is_empty()).collect();
        let n = fields.len();
        if !(1..=2).contains(&n) || columns.is_some_and(|c| c != n) {
            bail!(
                "{flag} {name} line {}: expected {} (one value per line, or `timestamp value`)",
                i + 1,
                columns.map_or("1 or 2 columns".to_string(), |c| format!("{c} column(s) like the lines before"))
            );
        }
        columns = Some(n);
        let num = |f: &str, u: TimeUnit, what: &str| -> Result<i64> {
            units::scaled_ns(f, u.ns()).ok_or_else(|| {
                anyhow!(
                    "{flag} {name} line {}: '{f}' is not a number of {} ({what}; decimals are fine, e.g. 19.92; \
                     --unit ns|us|ms|s sets the unit)",
                    i + 1,
                    u.name()
                )
            })
        };
        values.push(num(fields[n - 1], unit, "the value")?);
        if n == 2 {
            let t = num(fields[0], time_unit, "the timestamp")?;
            let base = *t0.get_or_insert(t);
            let s = t.saturating_sub(base) as f64 / 1e9;
            if times.last().is_some_and(|&last| s < last) {
                bail!("{flag} {name} line {}: timestamps must not go backwards", i + 1);
            }
            times.push(s);
        }
    }
    if values.len() < 2 {
        bail!("{flag} {name}: fewer than 2 samples");
    }
    Ok((values, (columns == Some(2)).then_some(times)))
}

fn json_out<T: Serialize>(v: &T) -> Result<()> {
    crate::report::to_stdout(|out| {
        serde_json::to_writer_pretty(&mut *out, v)?;
        writeln!(out)?;
        Ok(())
    })
}

fn run_series(run: &Run, opts: &Options) -> Result<Vec<SeriesAnalysis>> {
    analyse(run, opts, |_| true)
        .into_iter()
        .map(|(s, a)| {
            a.map_err(|e| anyhow!("run {} {}.{} CPU {}: {e}", run.header.id, s.key.probe, s.key.metric, s.key.cpu))
        })
        .collect()
}

/// The analysed stage series of a traced run, in the stage tables' order.
fn stage_series(run: &Run, opts: &Options) -> Result<Vec<SeriesAnalysis>> {
    analyse_stages(run, opts)
        .into_iter()
        .map(|(s, a)| {
            a.map_err(|e| anyhow!("run {} {}.{} CPU {}: {e}", run.header.id, s.key.probe, s.key.metric, s.key.cpu))
        })
        .collect()
}

#[derive(Serialize)]
struct RunAnalysis<'a> {
    run_id: i64,
    kind: &'a str,
    status: &'a str,
    representative: bool,
    series: Vec<&'a series::SeriesReport>,
    /// A traced run's stage series (`--trace`), each with its tail.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    stages: Vec<&'a series::SeriesReport>,
    /// A periodic task's deadline misses, predicted and observed (`task`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    misses: Vec<Misses>,
    /// The answer that the text prints first (`report`'s and `run --json`'s `summary`).
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<crate::report::Summary>,
    #[serde(flatten)]
    judged: Judged<'a>,
}

/// One task's (CPU's) predicted and observed misses.
#[derive(Serialize)]
struct Misses {
    series: String,
    #[serde(flatten)]
    prediction: MissPrediction,
}

fn misses_json(list: Vec<(String, MissPrediction)>) -> Vec<Misses> {
    list.into_iter().map(|(series, prediction)| Misses { series, prediction }).collect()
}

fn analyze_run(a: AnalyzeArgs) -> Result<i32> {
    // Bad flags are refused before the store is opened.
    parse_requirements(&a.req.profiles, &a.req.requires).map_err(anyhow::Error::msg)?;
    check_tasks_flags(&a.sched.spec())?;
    let ticker = Ticker::start("rtscope analyze");
    ticker.stage(format!("reading run {} from {}", a.run, a.store.db.display()));
    let threshold = a.threshold.0.map(|t| t as f64);
    let run = load(&a.store, &a.run, threshold)?;
    ticker.stage(format!("analysing run {}: {} series", run.header.id, run.series.len()));
    let asked = asked(&run, &a.req.spec(), true)?;
    let set = asked_set(&run, &a.sched.spec())?;
    let mut opts = Options { threshold, ..Options::default() };
    if !a.period.is_empty() {
        opts.periods = a.period.clone();
    }
    if !a.buffers.is_empty() {
        opts.buffers = a.buffers.clone();
    }
    opts.compute = a.compute.map(Compute::Fixed);
    opts.target_s = a.target as f64 / 1e9;
    opts.usage = crate::judge::usage(&run, a.days.usage);
    // The MTTF cells' intervals are printed in the JSON only.
    opts.mttf_intervals = a.print.json;
    let all = run_series(&run, &opts)?;
    if all.is_empty() {
        bail!("run {} holds no samples to analyze", run.header.id);
    }
    let verdicts: Vec<verdict::Verdict> = crate::judge::evaluate(&asked, &all).0;
    let sched = set.as_ref().map(|s| schedulability(&all, s));
    let judged = Judged::new(&asked, &verdicts, set.as_ref(), sched.as_ref());
    let code = judged.code();
    let misses = miss_predictions(&run, &all);
    ticker.stage(format!("analysing run {}: its stage series", run.header.id));
    let stages = stage_series(&run, &Options { periods: vec![], ..opts.clone() })?;
    // The line is cleared before the results are printed.
    drop(ticker);
    if a.print.json {
        json_out(&RunAnalysis {
            run_id: run.header.id,
            kind: &run.header.kind,
            status: run.header.status.as_str(),
            representative: run.header.representative,
            series: all.iter().map(|s| &s.report).collect(),
            stages: stages.iter().map(|s| &s.report).collect(),
            misses: misses_json(misses),
            summary: Some(crate::report::Summary::of(&run, &asked, &verdicts)).filter(|s| !s.is_empty()),
            judged,
        })?;
    } else {
        let mut out = std::io::stdout().lock();
        let answer = crate::report::Summary::of(&run, &asked, &verdicts);
        // The series the verdicts are about first, then by what they judge.
        let keys: Vec<_> = all.iter().map(|s| &s.key).collect();
        let order = crate::judge::answer::by_relevance(&keys, &verdicts);
        let ordered: Vec<&SeriesAnalysis> = order.into_iter().map(|i| &all[i]).collect();
        text::write_run(
            &run,
            &ordered,
            &verdicts,
            &asked.origin(),
            Some((&answer, crate::report::colour_on_stdout())),
            &mut out,
        )?;
        // The sections after, wrapped to the terminal's width too.
        let mut more: Vec<u8> = Vec::new();
        if !stages.is_empty() {
            writeln!(more)?;
            text::write_stage_levels(&stages, &mut more)?;
        }
        if !misses.is_empty() {
            writeln!(more)?;
            text::write_misses(&misses, &mut more)?;
        }
        if let (Some(set), Some(s)) = (&set, &sched) {
            writeln!(more)?;
            text::write_schedulability(s, &set.origin(), &mut more)?;
        }
        write!(out, "{}", crate::report::fit(&String::from_utf8_lossy(&more)))?;
    }
    if let Some(note) = asked.short_note(&verdicts) {
        eprintln!("rtscope: {note}");
    }
    Ok(code)
}

#[derive(Serialize)]
struct TailOut<'a> {
    #[serde(flatten)]
    tail: &'a rtscope_model::analysis::pot::TailReport,
    stats: &'a series::Stats,
}

fn tail(a: TailArgs) -> Result<i32> {
    let (values, times) =
        read_samples(&a.samples, "--samples", a.units.unit, a.units.time_unit.unwrap_or(a.units.unit))?;
    let key = SeriesKey::new("samples", &a.samples.display().to_string(), -1);
    let opts = Options { threshold: a.threshold.0.map(|t| t as f64), periods: vec![], ..Options::default() };
    let s = series::analyze_samples(key, &values, times.as_deref(), a.rate, &opts)
        .map_err(|e| anyhow!("--samples {}: {e}", a.samples.display()))?;
    let Some(t) = &s.report.tail else {
        bail!(
            "--samples {}: no tail fit: {}",
            a.samples.display(),
            s.report.tail_error.as_deref().unwrap_or("unknown reason")
        );
    };
    if a.print.json {
        json_out(&TailOut { tail: t, stats: &s.report.stats })?;
    } else {
        let mut out = std::io::stdout().lock();
        text::write_series(&s, &mut out)?;
    }
    Ok(0)
}

#[derive(Serialize)]
struct MttfOut {
    /// The worst series (CPU).
    #[serde(flatten)]
    worst: mttf::Mttf,
    series: String,
    target_s: f64,
    smallest_n: Option<u32>,
    /// Why there is no smallest n: more than 64 buffers, not enough data,
    /// or a target only the fitted tail reaches, beyond 100x the observed
    /// duration; absent with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    smallest_n_why: Option<String>,
    per_series: Vec<(String, mttf::Mttf)>,
    /// MTTF against n for this period: the curve.
    curve: Vec<mttf::Mttf>,
}

/// The series `spec` (PROBE.METRIC) names; without one, the release jitter
/// (wakeup's latency, a task's release), else, where `first` allows it, the
/// run's first metric.
fn pick<'a>(all: &'a [SeriesAnalysis], spec: Option<&str>, flag: &str, first: bool) -> Result<Vec<&'a SeriesAnalysis>> {
    let (p, m) = match spec {
        Some(s) => {
            let (p, m) =
                s.split_once('.').ok_or_else(|| anyhow!("{flag} {s}: write PROBE.METRIC, e.g. wakeup.latency"))?;
            (p.to_string(), m.to_string())
        }
        // The release jitter (wakeup's latency), else the run's first metric.
        // (An instance's too: `wakeup@80`.)
        None => match all.iter().find(|s| descriptor::is_release_jitter(&s.key.probe, &s.key.metric)) {
            Some(s) => (s.key.probe.clone(), s.key.metric.clone()),
            None if first => (all[0].key.probe.clone(), all[0].key.metric.clone()),
            None => {
                let have: Vec<String> = all.iter().map(|s| format!("{}.{}", s.key.probe, s.key.metric)).collect();
                bail!(
                    "the run has no release jitter (wakeup.latency, task.release) to add to the tasks' jitter: give \
                     {flag} PROBE.METRIC to take one of its series as the release jitter (it has {})",
                    have.join(", ")
                );
            }
        },
    };
    let list: Vec<&SeriesAnalysis> = all.iter().filter(|s| s.key.probe == p && s.key.metric == m).collect();
    if list.is_empty() {
        let have: Vec<String> = all.iter().map(|s| format!("{}.{}", s.key.probe, s.key.metric)).collect();
        bail!("{flag} {p}.{m}: the run has no such series (it has {})", have.join(", "));
    }
    Ok(list)
}

/// `analyze mttf --run RUN` of a periodic task's run without --period:
/// its own settings, its predicted miss rate beside the observed.
fn task_misses(a: &MttfArgs, r: &str) -> Result<i32> {
    let run = load(&a.store, r, None)?;
    let all = run_series(&run, &Options { periods: vec![], ..Options::default() })?;
    let list = miss_predictions(&run, &all);
    if list.is_empty() {
        bail!(
            "--run {r}: give --period, --buffers and --compute (the run is not a periodic task's, `rtscope task`, \
             whose settings would give them)"
        );
    }
    if a.print.json {
        json_out(&misses_json(list))?;
    } else {
        text::write_misses(&list, &mut std::io::stdout().lock())?;
    }
    Ok(0)
}

fn mttf_cmd(a: MttfArgs) -> Result<i32> {
    let (period, buffers) = match (a.period, a.buffers, &a.run) {
        (Some(t), Some(n), _) => (t, n),
        (None, None, Some(r)) if a.compute.is_none() && a.compute_samples.is_none() => return task_misses(&a, r),
        _ => bail!(
            "give --period DUR and --buffers N (they may be left out, with --compute, only for --run of a task run)"
        ),
    };
    let opts = Options { periods: vec![], ..Options::default() };
    let all: Vec<SeriesAnalysis> = match (&a.run, &a.samples) {
        (Some(r), _) => {
            let run = load(&a.store, r, None)?;
            let mut all = run_series(&run, &opts)?;
            // A traced run's stage series (e.g. --series wakeup.thread), when named.
            if a.series.as_deref().and_then(|s| s.split_once('.')).is_some_and(|(_, m)| Stages::is_series(m)) {
                all.extend(stage_series(&run, &opts)?);
            }
            if all.is_empty() {
                bail!("--run {r}: the run holds no samples");
            }
            all
        }
        (None, Some(f)) => {
            let (values, times) =
                read_samples(f, "--samples", a.units.unit, a.units.time_unit.unwrap_or(a.units.unit))?;
            let key = SeriesKey::new("samples", &f.display().to_string(), -1);
            vec![
                series::analyze_samples(key, &values, times.as_deref(), a.rate, &opts)
                    .map_err(|e| anyhow!("--samples {}: {e}", f.display()))?,
            ]
        }
        (None, None) => bail!("give --run RUN or --samples FILE"),
    };
    let list = if a.run.is_some() { pick(&all, a.series.as_deref(), "--series", true)? } else { all.iter().collect() };
    let compute = match (&a.compute, &a.compute_samples) {
        (Some(c), _) => Compute::Fixed(*c),
        (None, Some(f)) => Compute::from_samples(&read_samples(f, "--compute-samples", a.units.unit, a.units.unit)?.0),
        (None, None) => bail!("give --compute DUR or --compute-samples FILE"),
    };
    let per: Vec<(String, mttf::Mttf, &SeriesAnalysis)> =
        list.iter().map(|s| (label(s), mttf::mttf(&s.obs, s.model.as_ref(), buffers, period, &compute), *s)).collect();
    // The worst: the highest p (unknown counts as worst).
    let worst = per
        .iter()
        .max_by(|x, y| x.1.p_exceed.unwrap_or(f64::INFINITY).total_cmp(&y.1.p_exceed.unwrap_or(f64::INFINITY)))
        .expect("at least one series");
    let target_s = a.target as f64 / 1e9;
    let ws = worst.2;
    // Every series must reach the target: the largest n decides, and the
    // first series that cannot tell says why.
    let smallest_n = per
        .iter()
        .map(|(l, _, s)| {
            mttf::smallest_n_why(&s.obs, s.model.as_ref(), period, &compute, target_s)
                .map_err(|e| if per.len() > 1 { format!("{l}: {e}") } else { e })
        })
        .try_fold(0u32, |acc, n| n.map(|n| acc.max(n)));
    let curve = mttf::curve(&ws.obs, ws.model.as_ref(), period, &compute, buffers.max(8), true);
    let out = MttfOut {
        worst: worst.1.clone(),
        series: worst.0.clone(),
        target_s,
        smallest_n: smallest_n.as_ref().ok().copied(),
        smallest_n_why: smallest_n.as_ref().err().cloned(),
        per_series: per.iter().map(|(l, m, _)| (l.clone(), m.clone())).collect(),
        curve,
    };
    if a.print.json {
        json_out(&out)?;
    } else {
        let mut o = std::io::stdout().lock();
        let small = smallest_n.as_ref().copied().map_err(String::as_str);
        text::write_mttf(&out.worst, &out.series, &out.per_series, &out.curve, target_s, small, &mut o)?;
    }
    Ok(0)
}

#[derive(Serialize)]
struct RtaOut {
    #[serde(flatten)]
    report: rta::RtaReport,
    pseudo_worst_case: Option<rta::PseudoWorstCase>,
    /// Without --tasks, the measured task's misses (`task`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    misses: Vec<Misses>,
}

fn rta_cmd(a: RtaArgs) -> Result<i32> {
    let mut tasks = match &a.tasks {
        Some(path) => {
            let name = path.display().to_string();
            let text_in = crate::sys::fs::read_input_text(path, &format!("--tasks {name}"), "give fewer tasks")
                .map_err(anyhow::Error::msg)?;
            rta::parse_tasks(&text_in, &format!("--tasks {name}")).map_err(anyhow::Error::msg)?
        }
        None => Vec::new(),
    };
    let mut pseudo = None;
    let mut observed = Vec::new();
    if let (Some(r), Some(eps)) = (&a.jitter_from, a.error_rate) {
        let run = load(&a.store, r, None)?;
        let opts = Options { periods: vec![], ..Options::default() };
        let all = run_series(&run, &opts)?;
        if all.is_empty() {
            bail!("--jitter-from {r}: the run holds no samples");
        }
        // Without --tasks: the periodic task the run measured, its misses beside.
        if a.tasks.is_none() {
            observed = miss_predictions(&run, &all);
            let Some((_, m)) = observed.first() else {
                bail!("--jitter-from {r}: give --tasks FILE (the run is not a periodic task's, `rtscope task`)");
            };
            let t = m.task;
            tasks = vec![rta::Task {
                name: "task".into(),
                wcet_ns: t.compute_ns,
                period_ns: t.period_ns,
                deadline_ns: t.allowed_ns(),
                blocking_ns: 0,
                jitter_ns: 0,
                priority: 0,
            }];
        }
        let list = pick(&all, a.series.as_deref(), "--series", false).with_context(|| format!("--jitter-from {r}"))?;
        let l = pseudo_latency(&list, eps).map_err(anyhow::Error::msg)?;
        if let Some(e) = l.refused(eps) {
            bail!("--error-rate {eps:e}: {e}");
        }
        let (lat, how) = (l.latency_ns, l.source());
        tasks = rta::with_jitter(&tasks, lat);
        pseudo = Some((eps, lat, how));
    }
    let report = rta::analyze(&tasks);
    let pseudo_worst_case = pseudo.map(|(eps, lat, how)| rta::pseudo_worst_case(&tasks, &report, eps, lat, how));
    let out = RtaOut { report, pseudo_worst_case, misses: misses_json(observed.clone()) };
    if a.print.json {
        json_out(&out)?;
    } else {
        let mut o = std::io::stdout().lock();
        text::write_rta(&out.report, out.pseudo_worst_case.as_ref(), &mut o)?;
        for (label, m) in &observed {
            let per_hour = m.missed as f64 * 3.6e12 / (m.jobs.max(1) as f64 * m.task.period_ns as f64);
            writeln!(o, "observed: {label}: {} of {} jobs missed ({per_hour:.3e} per hour)", m.missed, m.jobs)?;
        }
    }
    Ok(if out.report.schedulable { 0 } else { 2 })
}
