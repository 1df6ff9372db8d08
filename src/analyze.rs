//! `rtscope analyze`: reads stored runs and sample files, runs the pure
//! analysis of `rtscope_model::analysis` and prints it (text through
//! `report::analyze`, or JSON). Exit code 2 when a requirement fails.

use crate::cli::{AnalyzeArgs, AnalyzeCmd, MttfArgs, RequireArgs, RtaArgs, StoreArgs, TailArgs, TasksArgs};
use crate::report::analyze as text;
use anyhow::{Context, Result, anyhow, bail};
use rtscope_model::analysis::mttf::{self, Compute};
use rtscope_model::analysis::pot::MIN_OBSERVED;
use rtscope_model::analysis::series::{self, Options, SeriesAnalysis};
use rtscope_model::analysis::{rta, verdict};
use rtscope_model::episode::Stages;
use rtscope_model::run::{Run, Series, SeriesKey};
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

fn load(s: &StoreArgs, spec: &str) -> Result<Run> {
    let store = open_store(s)?;
    store.load_run(store.resolve(spec)?)
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
    // The file is read whole: at most half of the memory available.
    let len = std::fs::metadata(path).map_or(0, |m| m.len());
    crate::sys::mem::check_share(&format!("{flag} {name}"), len, "analyze a part of it (e.g. split -l 10000000)")
        .map_err(anyhow::Error::msg)?;
    let text = std::fs::read_to_string(path).with_context(|| format!("{flag} {name}: cannot read it"))?;
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
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, v)?;
    writeln!(out)?;
    Ok(())
}

/// The period of the timer a series' probe waited for, from the run's plan
/// (an assessment's: the settings of the probe's cells).
pub fn timer_period(run: &Run, key: &SeriesKey) -> Option<u64> {
    let cell = run.plan["cells"].as_array().and_then(|c| c.iter().find(|c| c["probe"].as_str() == Some(&key.probe)));
    let s = cell.map_or(&run.plan["settings"], |c| &c["settings"]);
    match key.probe.as_str() {
        "wakeup" if s["distance_ns"].as_u64().unwrap_or(0) == 0 => s["interval_ns"].as_u64(),
        "ptimer" => s["period_ns"].as_u64(),
        _ => None,
    }
}

/// Every measured series of `run` that `keep` accepts (trace stages and
/// empty series aside), with its analysis or why there is none.
pub fn analyse<'r>(
    run: &'r Run,
    opts: &Options,
    keep: impl Fn(&Series) -> bool,
) -> Vec<(&'r Series, Result<SeriesAnalysis, String>)> {
    run.series
        .iter()
        .filter(|s| !Stages::is_series(&s.key.metric) && s.total().count() > 0 && keep(s))
        .map(|s| (s, series::analyze_series(s, timer_period(run, &s.key), opts)))
        .collect()
}

fn run_series(run: &Run, opts: &Options) -> Result<Vec<SeriesAnalysis>> {
    analyse(run, opts, |_| true)
        .into_iter()
        .map(|(s, a)| {
            a.map_err(|e| anyhow!("run {} {}.{} CPU {}: {e}", run.header.id, s.key.probe, s.key.metric, s.key.cpu))
        })
        .collect()
}

/// Where the requirements a run is judged against come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReqSource {
    /// --profile / --require given to this command.
    Flags,
    /// Stored with the run (`rtscope run --profile/--require`, the plan's keys).
    Stored,
    /// Nothing asked: the report's yardstick, the profile omac.
    Default,
}

/// The requirements a run is judged against, and where they come from.
#[derive(Clone, Debug)]
pub struct Asked {
    pub source: ReqSource,
    pub profiles: Vec<String>,
    pub requires: Vec<String>,
    pub reqs: Vec<verdict::Requirement>,
}

/// The profile a report judges a run against when nothing is asked.
pub const YARDSTICK: &str = "omac";

impl Asked {
    /// Nothing to judge.
    pub fn none() -> Asked {
        Asked { source: ReqSource::Flags, profiles: vec![], requires: vec![], reqs: vec![] }
    }

    /// What was asked, for people: "the profile omac and 'wakeup.latency.p99 < 50us'".
    pub fn what(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if !self.profiles.is_empty() {
            let s = if self.profiles.len() > 1 { "s" } else { "" };
            parts.push(format!("the profile{s} {}", self.profiles.join(", ")));
        }
        parts.extend(self.requires.iter().map(|r| format!("'{r}'")));
        parts.join(" and ")
    }

    /// One sentence: what the verdicts judge and where that comes from.
    pub fn origin(&self) -> String {
        match self.source {
            ReqSource::Flags => format!("Judged against {}, given with --profile / --require.", self.what()),
            ReqSource::Stored => format!(
                "Judged against {}, stored with the run (`rtscope run --profile / --require`, or the campaign file's \
                 profiles / require); --profile / --require given to analyze or report replace them.",
                self.what()
            ),
            ReqSource::Default => format!(
                "No requirement was stored with the run or given: judged against the default yardstick, the profile \
                 {YARDSTICK} (OMAC: thread wake-up latency <= 100 us, worst case and expected worst per hour, and the \
                 jitter of a 1 ms periodic timer <= 100 us), where the run has the data. Choose another with \
                 `rtscope report RUN --profile audio` or `--require 'wakeup.latency.p99.99 < 50us'`, or store \
                 requirements with the run (`rtscope run --profile / --require`, or profiles / require in the \
                 campaign file)."
            ),
        }
    }
}

/// What `rtscope run` judges at its end: the verdicts of `asked` and the
/// schedulability of `set` on `run` (every measured series analysed
/// without the MTTF table; a series that cannot be analysed is left out).
pub fn judge(run: &Run, asked: &Asked, set: Option<&AskedSet>) -> (Vec<verdict::Verdict>, Option<rta::Schedulability>) {
    if asked.reqs.is_empty() && set.is_none() {
        return (Vec::new(), None);
    }
    let opts = Options { periods: vec![], ..Options::default() };
    let all: Vec<SeriesAnalysis> = analyse(run, &opts, |_| true).into_iter().filter_map(|(_, a)| a.ok()).collect();
    (asked.reqs.iter().map(|r| verdict::evaluate(r, &all)).collect(), set.map(|s| schedulability(&all, s)))
}

/// Parses profiles and requirements (the messages name --profile / --require).
pub fn parse_requirements(profiles: &[String], requires: &[String]) -> Result<Vec<verdict::Requirement>, String> {
    let mut reqs = Vec::new();
    for p in profiles {
        reqs.extend(verdict::profile(p)?);
    }
    for r in requires {
        reqs.push(verdict::parse_requirement(r)?);
    }
    Ok(reqs)
}

/// The requirements stored with a run: (profiles, requirements).
pub fn stored_requirements(run: &Run) -> (Vec<String>, Vec<String>) {
    let list = |key: &str| -> Vec<String> {
        run.plan["requirements"][key]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
            .unwrap_or_default()
    };
    (list("profiles"), list("require"))
}

/// What `run` is judged against: the flags, else the requirements stored
/// with it, else (with `yardstick`) the profile omac, else nothing.
pub fn asked(run: &Run, flags: &RequireArgs, yardstick: bool) -> Result<Asked> {
    let (source, profiles, requires) = if !flags.is_empty() {
        (ReqSource::Flags, flags.profiles.clone(), flags.requires.clone())
    } else {
        match stored_requirements(run) {
            (p, r) if !p.is_empty() || !r.is_empty() => (ReqSource::Stored, p, r),
            _ if yardstick => (ReqSource::Default, vec![YARDSTICK.to_string()], vec![]),
            _ => return Ok(Asked::none()),
        }
    };
    let reqs = parse_requirements(&profiles, &requires).map_err(|e| match source {
        ReqSource::Stored => anyhow!("run {}: a requirement stored with it: {e}", run.header.id),
        _ => anyhow!(e),
    })?;
    Ok(Asked { source, profiles, requires, reqs })
}

#[derive(Serialize)]
struct RunAnalysis<'a> {
    run_id: i64,
    kind: &'a str,
    status: &'a str,
    representative: bool,
    series: Vec<&'a series::SeriesReport>,
    #[serde(flatten)]
    judged: Judged<'a>,
}

/// A run judged: the keys `rtscope analyze RUN --json` ends with, and
/// `rtscope run --json` too when the run has requirements or a task set.
#[derive(Serialize)]
pub struct Judged<'a> {
    /// flags or stored; absent without requirements.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requirements_from: Option<ReqSource>,
    pub verdicts: &'a [verdict::Verdict],
    /// The task set given or stored with the run, judged; absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedulability: Option<SchedOut<'a>>,
    /// False when a requirement failed or the task set misses a deadline.
    pub passed: bool,
}

impl<'a> Judged<'a> {
    pub fn new(
        asked: &Asked,
        verdicts: &'a [verdict::Verdict],
        set: Option<&AskedSet>,
        sched: Option<&'a rta::Schedulability>,
    ) -> Judged<'a> {
        let failed = verdicts.iter().any(|v| v.status == verdict::Status::Fail)
            || sched.is_some_and(|s| s.verdict.status == verdict::Status::Fail);
        Judged {
            requirements_from: (!asked.reqs.is_empty()).then_some(asked.source),
            verdicts,
            schedulability: set.zip(sched).map(|(set, result)| SchedOut { tasks_from: set.from, result }),
            passed: !failed,
        }
    }

    /// The exit code it asks for: 2 when something failed, else 0.
    pub fn code(&self) -> i32 {
        if self.passed { 0 } else { 2 }
    }
}

/// A task set judged, with where it comes from.
#[derive(Serialize)]
pub struct SchedOut<'a> {
    pub tasks_from: SetSource,
    #[serde(flatten)]
    pub result: &'a rta::Schedulability,
}

fn analyze_run(a: AnalyzeArgs) -> Result<i32> {
    // Bad flags are refused before the store is opened.
    parse_requirements(&a.req.profiles, &a.req.requires).map_err(anyhow::Error::msg)?;
    check_tasks_flags(&a.sched)?;
    let run = load(&a.store, &a.run)?;
    let asked = asked(&run, &a.req, false)?;
    let set = asked_set(&run, &a.sched)?;
    let mut opts = Options { threshold: a.threshold.0.map(|t| t as f64), ..Options::default() };
    if !a.period.is_empty() {
        opts.periods = a.period.clone();
    }
    if !a.buffers.is_empty() {
        opts.buffers = a.buffers.clone();
    }
    opts.compute = a.compute.map(Compute::Fixed);
    opts.target_s = a.target as f64 / 1e9;
    let all = run_series(&run, &opts)?;
    if all.is_empty() {
        bail!("run {} holds no samples to analyze", run.header.id);
    }
    let verdicts: Vec<verdict::Verdict> = asked.reqs.iter().map(|r| verdict::evaluate(r, &all)).collect();
    let sched = set.as_ref().map(|s| schedulability(&all, s));
    let judged = Judged::new(&asked, &verdicts, set.as_ref(), sched.as_ref());
    let code = judged.code();
    if a.json {
        json_out(&RunAnalysis {
            run_id: run.header.id,
            kind: &run.header.kind,
            status: run.header.status.as_str(),
            representative: run.header.representative,
            series: all.iter().map(|s| &s.report).collect(),
            judged,
        })?;
    } else {
        let mut out = std::io::stdout().lock();
        text::write_run(&run, &all, &verdicts, &asked.origin(), &mut out)?;
        if let (Some(set), Some(s)) = (&set, &sched) {
            writeln!(out)?;
            text::write_schedulability(s, &set.origin(), &mut out)?;
        }
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
    if a.json {
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

fn pick<'a>(all: &'a [SeriesAnalysis], spec: Option<&str>, flag: &str) -> Result<Vec<&'a SeriesAnalysis>> {
    let (p, m) = match spec {
        Some(s) => {
            let (p, m) =
                s.split_once('.').ok_or_else(|| anyhow!("{flag} {s}: write PROBE.METRIC, e.g. wakeup.latency"))?;
            (p.to_string(), m.to_string())
        }
        None if all.iter().any(|s| s.key.probe == "wakeup" && s.key.metric == "latency") => {
            ("wakeup".into(), "latency".into())
        }
        None => (all[0].key.probe.clone(), all[0].key.metric.clone()),
    };
    let list: Vec<&SeriesAnalysis> = all.iter().filter(|s| s.key.probe == p && s.key.metric == m).collect();
    if list.is_empty() {
        let have: Vec<String> = all.iter().map(|s| format!("{}.{}", s.key.probe, s.key.metric)).collect();
        bail!("{flag} {p}.{m}: the run has no such series (it has {})", have.join(", "));
    }
    Ok(list)
}

fn label(s: &SeriesAnalysis) -> String {
    if s.key.cpu < 0 {
        return s.key.metric.clone();
    }
    let load = s.key.load.as_deref().map(|l| format!(" [{l}]")).unwrap_or_default();
    format!("{}.{} CPU {}{load}", s.key.probe, s.key.metric, s.key.cpu)
}

fn mttf_cmd(a: MttfArgs) -> Result<i32> {
    if a.period == 0 {
        bail!("--period must be longer than 0 (e.g. --period 2.67ms)");
    }
    let opts = Options { periods: vec![], ..Options::default() };
    let all: Vec<SeriesAnalysis> = match (&a.run, &a.samples) {
        (Some(r), _) => {
            let run = load(&a.store, r)?;
            let all = run_series(&run, &opts)?;
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
    let list = if a.run.is_some() { pick(&all, a.series.as_deref(), "--series")? } else { all.iter().collect() };
    let compute = match (&a.compute, &a.compute_samples) {
        (Some(c), _) => Compute::Fixed(*c),
        (None, Some(f)) => Compute::from_samples(&read_samples(f, "--compute-samples", a.units.unit, a.units.unit)?.0),
        (None, None) => bail!("give --compute DUR or --compute-samples FILE"),
    };
    let per: Vec<(String, mttf::Mttf, &SeriesAnalysis)> = list
        .iter()
        .map(|s| (label(s), mttf::mttf(&s.obs, s.model.as_ref(), a.buffers, a.period, &compute), *s))
        .collect();
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
            mttf::smallest_n_why(&s.obs, s.model.as_ref(), a.period, &compute, target_s)
                .map_err(|e| if per.len() > 1 { format!("{l}: {e}") } else { e })
        })
        .try_fold(0u32, |acc, n| n.map(|n| acc.max(n)));
    let curve = mttf::curve(&ws.obs, ws.model.as_ref(), a.period, &compute, a.buffers.max(8), true);
    let out = MttfOut {
        worst: worst.1.clone(),
        series: worst.0.clone(),
        target_s,
        smallest_n: smallest_n.as_ref().ok().copied(),
        smallest_n_why: smallest_n.as_ref().err().cloned(),
        per_series: per.iter().map(|(l, m, _)| (l.clone(), m.clone())).collect(),
        curve,
    };
    if a.json {
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
}

/// The wake-up latency exceeded with probability `eps` per wake-up (the
/// pseudo worst case): observed where at least 10 samples lie above it,
/// else from the fitted tail; the worst series (CPU, load) decides.
pub fn pseudo_latency(list: &[&SeriesAnalysis], eps: f64) -> Result<rta::PseudoLatency, String> {
    let mut worst: Option<(f64, &SeriesAnalysis, bool)> = None;
    for s in list {
        let n = s.obs.n as f64;
        let (x, observed) = if n * eps >= MIN_OBSERVED as f64 {
            (s.obs.value_with_above((n * eps).floor() as u64), true)
        } else {
            let m = s.model.as_ref().ok_or_else(|| {
                format!(
                    "{}: {} samples hold fewer than {MIN_OBSERVED} above the {eps:e} level and there is no tail fit ({}); measure longer",
                    label(s),
                    s.obs.n,
                    s.report.tail_error.as_deref().unwrap_or("")
                )
            })?;
            if eps >= m.zeta {
                (s.obs.value_with_above((n * eps).floor() as u64), true)
            } else {
                (m.u + m.fit.gpd.quantile(1.0 - eps / m.zeta), false)
            }
        };
        if worst.as_ref().is_none_or(|w| x > w.0) {
            worst = Some((x, s, observed));
        }
    }
    let (x, s, observed) = worst.ok_or("no series")?;
    let tail = s.report.tail.as_ref().filter(|_| !observed);
    Ok(rta::PseudoLatency {
        latency_ns: x.max(0.0).round() as u64,
        series: label(s),
        observed,
        confidence: tail.map_or("observed".into(), |t| t.confidence.to_string()),
        reasons: tail.map_or(vec![], |t| t.reasons.clone()),
        samples: s.obs.n,
        rate_hz: s.report.stats.rate_hz,
    })
}

/// Where the task set a run is judged with comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SetSource {
    /// --tasks given to this command.
    Flags,
    /// Stored with the run (`rtscope run --tasks`, the plan's tasks or [[task]]).
    Stored,
}

/// The task set a run is judged with, and where it and its error rate come from.
#[derive(Clone, Debug)]
pub struct AskedSet {
    pub from: SetSource,
    pub rate_from_flag: bool,
    pub set: rta::TaskSet,
}

impl AskedSet {
    /// One sentence: which set, at which error rate, from where.
    pub fn origin(&self) -> String {
        let eps = format!(
            "an error rate of {:e} per wake-up{}",
            self.set.error_rate,
            if self.rate_from_flag { " (--error-rate)" } else { "" }
        );
        match self.from {
            SetSource::Flags => format!("The task set {}, given with --tasks, at {eps}.", self.set.source),
            SetSource::Stored => format!(
                "The task set {}, stored with the run (`rtscope run --tasks`, or the campaign file's tasks / [[task]]), \
                 at {eps}; --tasks / --error-rate given to analyze or report replace them.",
                self.set.source
            ),
        }
    }
}

/// Reads the task file `path`; `what` names it in errors (`--tasks FILE`,
/// `plan.toml: tasks = FILE`).
pub fn read_tasks(path: &Path, what: &str) -> Result<Vec<rta::Task>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{what}: cannot read it"))?;
    rta::parse_tasks(&text, what).map_err(anyhow::Error::msg)
}

/// The task set stored with a run (its plan's `schedulability`).
pub fn stored_task_set(run: &Run) -> Result<Option<rta::TaskSet>> {
    match run.plan.get("schedulability") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone()).map(Some).map_err(|e| {
            anyhow!("run {}: the task set stored with it (plan.schedulability) is malformed: {e}", run.header.id)
        }),
    }
}

/// Checks --tasks and --error-rate before anything is read: the file's
/// tasks, or None without --tasks.
pub fn check_tasks_flags(flags: &TasksArgs) -> Result<Option<Vec<rta::Task>>> {
    flags.tasks.as_deref().map(|p| read_tasks(p, &format!("--tasks {}", p.display()))).transpose()
}

/// The task set `run` is judged with: --tasks (at --error-rate, else the
/// stored error rate, else the default), else the one stored with it (at
/// --error-rate if given), else none.
pub fn asked_set(run: &Run, flags: &TasksArgs) -> Result<Option<AskedSet>> {
    let stored = stored_task_set(run)?;
    let rate_from_flag = flags.error_rate.is_some();
    if let Some(tasks) = check_tasks_flags(flags)? {
        let path = flags.tasks.as_deref().expect("checked above");
        let error_rate = flags.error_rate.or(stored.as_ref().map(|s| s.error_rate)).unwrap_or(rta::DEFAULT_ERROR_RATE);
        let set = rta::TaskSet { source: path.display().to_string(), error_rate, tasks };
        return Ok(Some(AskedSet { from: SetSource::Flags, rate_from_flag, set }));
    }
    match stored {
        Some(mut set) => {
            if let Some(eps) = flags.error_rate {
                set.error_rate = eps;
            }
            Ok(Some(AskedSet { from: SetSource::Stored, rate_from_flag, set }))
        }
        None if rate_from_flag => {
            bail!("--error-rate: run {} has no task set stored with it; give one with --tasks FILE", run.header.id)
        }
        None => Ok(None),
    }
}

/// Judges `asked` with the wake-up latency of `all` (every CPU and load of
/// wakeup.latency; the worst decides), as `analyze rta --jitter-from` does.
pub fn schedulability(all: &[SeriesAnalysis], asked: &AskedSet) -> rta::Schedulability {
    let list: Vec<&SeriesAnalysis> =
        all.iter().filter(|s| s.key.probe == "wakeup" && s.key.metric == "latency").collect();
    let latency = if list.is_empty() {
        Err("the run has no wake-up latency (wakeup.latency) to take the release jitter from; \
             `rtscope analyze rta --tasks FILE --jitter-from RUN --series PROBE.METRIC` takes another series"
            .to_string())
    } else {
        pseudo_latency(&list, asked.set.error_rate)
    };
    rta::schedulability(&asked.set, latency)
}

fn rta_cmd(a: RtaArgs) -> Result<i32> {
    let name = a.tasks.display().to_string();
    let text_in = std::fs::read_to_string(&a.tasks).with_context(|| format!("--tasks {name}: cannot read it"))?;
    let mut tasks = rta::parse_tasks(&text_in, &format!("--tasks {name}")).map_err(anyhow::Error::msg)?;
    let mut pseudo = None;
    if let (Some(r), Some(eps)) = (&a.jitter_from, a.error_rate) {
        let run = load(&a.store, r)?;
        let opts = Options { periods: vec![], ..Options::default() };
        let all = run_series(&run, &opts)?;
        if all.is_empty() {
            bail!("--jitter-from {r}: the run holds no samples");
        }
        let list = pick(&all, a.series.as_deref(), "--series")?;
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
    let out = RtaOut { report, pseudo_worst_case };
    if a.json {
        json_out(&out)?;
    } else {
        let mut o = std::io::stdout().lock();
        text::write_rta(&out.report, out.pseudo_worst_case.as_ref(), &mut o)?;
    }
    Ok(if out.report.schedulable { 0 } else { 2 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_come_from_the_flags_else_the_run_else_the_yardstick() {
        let mut run = rtscope_model::export::read_json(include_str!("../tests/data/report-run.json"), "fixture")
            .expect("the fixture reads");
        let none = RequireArgs::default();
        let flags = RequireArgs { profiles: vec![], requires: vec!["wakeup.latency.max < 1ms".into()] };
        assert!(asked(&run, &none, false).unwrap().reqs.is_empty(), "analyze judges nothing unasked");
        let d = asked(&run, &none, true).unwrap();
        assert_eq!((d.source, d.profiles.as_slice(), d.reqs.len()), (ReqSource::Default, &["omac".to_string()][..], 3));
        assert!(d.origin().contains("default yardstick") && d.origin().contains("--profile audio"));
        run.plan["requirements"] =
            serde_json::json!({"profiles": ["audio64"], "require": ["wakeup.latency.p99 < 1ms"]});
        let s = asked(&run, &none, true).unwrap();
        assert_eq!((s.source, s.reqs.len()), (ReqSource::Stored, 3));
        assert_eq!(s.what(), "the profile audio64 and 'wakeup.latency.p99 < 1ms'");
        let f = asked(&run, &flags, true).unwrap();
        assert_eq!((f.source, f.reqs.len()), (ReqSource::Flags, 1), "flags replace the stored requirements");
        run.plan["requirements"]["require"] = serde_json::json!(["wakeup.latency < 1ms"]);
        let e = asked(&run, &none, false).unwrap_err().to_string();
        assert!(e.contains("run 1") && e.contains("stored") && e.contains("wakeup.latency < 1ms"), "{e}");
        // An assessment's timer period is its probe's cell's.
        let key = SeriesKey::new("ptimer", "timerfd", 0);
        assert_eq!(timer_period(&run, &key), None);
        run.plan["cells"] = serde_json::json!([{"probe": "wakeup", "settings": {"interval_ns": 500000, "distance_ns": 0}},
            {"probe": "ptimer", "settings": {"period_ns": 1000000}}]);
        assert_eq!(timer_period(&run, &key), Some(1_000_000));
        assert_eq!(timer_period(&run, &SeriesKey::new("wakeup", "latency", 1)), Some(500_000));
    }
}
