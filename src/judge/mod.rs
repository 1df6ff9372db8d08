//! Judging a run, as `rtscope analyze`, `rtscope report` and `rtscope run`
//! do alike: the requirements it is held to (given, stored with it, or the
//! default yardstick) and the task set it is judged with, each with where
//! it comes from; every measured series analysed once; the verdicts, the
//! schedulability, and the keys a judged run's JSON ends with. Domain types
//! in, no clap: `--profile` / `--require` arrive as a [`RequireSpec`],
//! `--tasks` / `--error-rate` as a [`TasksSpec`]. The answer a report
//! opens with (the overall verdict, the worst load and its cause, what to
//! do next) is decided here too, in [`answer`].

pub mod answer;

use anyhow::{Result, anyhow, bail};
use rtscope_model::analysis::misses::{self, MissPrediction, TaskModel};
use rtscope_model::analysis::pot::MIN_OBSERVED;
use rtscope_model::analysis::series::{self, Options, SeriesAnalysis};
use rtscope_model::analysis::usage::Usage;
use rtscope_model::analysis::{rta, verdict};
use rtscope_model::descriptor;
use rtscope_model::episode::Stages;
use rtscope_model::run::{Run, Series, SeriesKey};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The requirements asked for (`--profile`, `--require`): profile names
/// and requirement expressions, not parsed yet.
#[derive(Clone, Debug, Default)]
pub struct RequireSpec {
    pub profiles: Vec<String>,
    pub requires: Vec<String>,
    /// `--allow-insufficient`: a requirement without enough data does not
    /// fail the gate.
    pub allow_insufficient: bool,
}

impl RequireSpec {
    pub fn is_empty(&self) -> bool {
        self.profiles.is_empty() && self.requires.is_empty()
    }
}

/// The task set asked for (`--tasks`) and its error rate (`--error-rate`).
#[derive(Clone, Debug, Default)]
pub struct TasksSpec {
    pub tasks: Option<PathBuf>,
    pub error_rate: Option<f64>,
}

/// The period of the timer a series' probe waited for, from the run's plan
/// (an assessment's: the settings of the probe's cells).
pub fn timer_period(run: &Run, key: &SeriesKey) -> Option<u64> {
    let d = descriptor::find(&key.probe)?;
    // A probe with a release-jitter metric (wakeup's latency, task's
    // release): only that series is the timer's, not a traced stage nor a
    // task's response or lateness.
    if d.release_jitter.is_some_and(|m| m != key.metric) {
        return None;
    }
    d.timer_period(settings(run, key))
}

/// The settings of the probe that measured a series, from the run's plan
/// (an assessment's: those of the probe's cell).
pub fn settings<'r>(run: &'r Run, key: &SeriesKey) -> &'r serde_json::Value {
    let cell = run.plan["cells"].as_array().and_then(|c| c.iter().find(|c| c["probe"].as_str() == Some(&key.probe)));
    cell.map_or(&run.plan["settings"], |c| &c["settings"])
}

/// Each periodic task's miss rate (a series of a probe whose row counts
/// deadline misses, its release delay), predicted from its release delay
/// and set beside the misses it counted: (label, prediction), per CPU and
/// load.
pub fn miss_predictions(run: &Run, all: &[SeriesAnalysis]) -> Vec<(String, MissPrediction)> {
    all.iter()
        .filter_map(|a| {
            let keys = descriptor::find(&a.key.probe)?.misses?;
            if a.key.metric != keys.release {
                return None;
            }
            let task = rtscope_model::settings::stored::<TaskModel>(settings(run, &a.key))?;
            let series = run.series.iter().find(|s| s.key == a.key)?;
            let missed = keys.missed.get(&series.extra).and_then(|m| m.as_u64()).unwrap_or(0);
            let p = misses::predict(&a.obs, a.model.as_ref(), task, series.total().count(), missed);
            Some((label(a), p))
        })
        .collect()
}

/// Every measured series of `run` that `keep` accepts (trace stages and
/// empty series aside), with its analysis or why there is none.
pub fn analyse<'r>(
    run: &'r Run,
    opts: &Options,
    keep: impl Fn(&Series) -> bool,
) -> Vec<(&'r Series, Result<SeriesAnalysis, String>)> {
    let list: Vec<(&Series, Option<u64>)> = run
        .series
        .iter()
        .filter(|s| !rtscope_model::irqtime::from_trace(&s.key.metric) && s.total().count() > 0 && keep(s))
        .map(|s| (s, timer_period(run, &s.key)))
        .collect();
    let analysed = series::analyze_all(&list, opts);
    list.into_iter().map(|(s, _)| s).zip(analysed).collect()
}

/// Every stage series of a traced run (`--trace`: interrupt, handler,
/// wake-up, thread, user and the absolute times), with its analysis or why
/// there is none: the stages' own tails (the WDM latency study's per-stage
/// worst cases). In the order of the stage tables: probe, load, CPU, then
/// the path's stages.
pub fn analyse_stages<'r>(run: &'r Run, opts: &Options) -> Vec<(&'r Series, Result<SeriesAnalysis, String>)> {
    let mut list: Vec<&Series> =
        run.series.iter().filter(|s| Stages::is_series(&s.key.metric) && s.total().count() > 0).collect();
    let rank = |k: &SeriesKey| Stages::of_probe(&k.probe).1.iter().position(|m| *m == k.metric).unwrap_or(8);
    list.sort_by(|a, b| {
        let (a, b) = (&a.key, &b.key);
        (&a.probe, a.load.as_deref(), a.cpu, rank(a)).cmp(&(&b.probe, b.load.as_deref(), b.cpu, rank(b)))
    });
    list.into_iter().map(|s| (s, series::analyze_series(s, timer_period(run, &s.key), opts))).collect()
}

/// What a day and a week of a run's levels are: `flag` (`--usage`), else
/// the usage stored with the run, else continuous operation.
pub fn usage(run: &Run, flag: Option<Usage>) -> Usage {
    flag.unwrap_or_else(|| Usage::of_plan(&run.plan))
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
    /// A requirement asked for (not the yardstick) with not enough data
    /// passes the gate (`--allow-insufficient`); else it fails it.
    pub allow_insufficient: bool,
}

/// The profile every command (`run`, `analyze`, `report`) judges a run
/// against when nothing is asked: shown as a yardstick, it never changes
/// the exit code.
pub const YARDSTICK: &str = "omac";

/// What the profile omac asks, where it is first named: the OMAC (Open
/// Modular Architecture Controls) users group's limits.
pub const OMAC_MEANS: &str = "OMAC, the Open Modular Architecture Controls users group: wake-up latency and \
                              1 ms timer jitter <= 100 us";

/// `--profile none`: no yardstick, and nothing judged unless `--require`
/// asks for it.
pub const NO_PROFILE: &str = "none";

impl Asked {
    /// Nothing to judge.
    pub fn none() -> Asked {
        Asked { source: ReqSource::Flags, profiles: vec![], requires: vec![], reqs: vec![], allow_insufficient: false }
    }

    /// Whether `verdicts` fail the gate: a requirement asked for (not the
    /// default yardstick) failed, or had not enough data to be judged and
    /// `--allow-insufficient` was not given. A gate that cannot judge what
    /// it was asked does not pass.
    pub fn fails(&self, verdicts: &[verdict::Verdict]) -> bool {
        self.source != ReqSource::Default
            && verdicts.iter().any(|v| {
                v.status == verdict::Status::Fail
                    || (v.status == verdict::Status::NotEnoughData && !self.allow_insufficient)
            })
    }

    /// The overall verdict of `verdicts`, as the summary's first line
    /// gives it: failed where one failed, else not enough data where one
    /// had too little, else passed. (Whether the gate passes is
    /// [`Asked::fails`]: `--allow-insufficient` lets too little data pass.)
    pub fn overall(verdicts: &[verdict::Verdict]) -> verdict::Status {
        let has = |s: verdict::Status| verdicts.iter().any(|v| v.status == s);
        if has(verdict::Status::Fail) {
            verdict::Status::Fail
        } else if has(verdict::Status::NotEnoughData) {
            verdict::Status::NotEnoughData
        } else {
            verdict::Status::Pass
        }
    }

    /// The line that says why a gate with not enough data did not pass,
    /// if it did not for that reason.
    pub fn short_note(&self, verdicts: &[verdict::Verdict]) -> Option<String> {
        let short: Vec<&verdict::Verdict> =
            verdicts.iter().filter(|v| v.status == verdict::Status::NotEnoughData).collect();
        let n = short.len();
        (self.source != ReqSource::Default && n > 0 && !self.allow_insufficient).then(|| {
            // A requirement on series the run lacks needs its probe
            // measured, not a longer run.
            let mut todo: Vec<String> = Vec::new();
            for v in &short {
                let what = match (&v.series, &v.measure_for) {
                    (None, Some(run)) => format!("the run lacks what it judges: make {run}"),
                    _ => "measure longer".to_string(),
                };
                if !todo.contains(&what) {
                    todo.push(what);
                }
            }
            format!(
                "{n} requirement(s) had not enough data to be judged: the gate does not pass (exit code 2); \
                 {}, or give --allow-insufficient to let them pass",
                todo.join("; ")
            )
        })
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
                 jitter of a 1 ms periodic timer <= 100 us), where the run has the data; a yardstick never changes \
                 the exit code. To gate (exit code 2) give `--profile NAME` or `--require EXPR` to run, analyze or \
                 report (e.g. `--profile audio`, `--require 'wakeup.latency.p99.99 < 50us'`), or store them with \
                 the run (profiles / require in the campaign file); `--profile none` turns the yardstick off."
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
    // The yardstick reads only the series its requirements name (and the
    // periodic timers): nothing else is analysed for it.
    let keep =
        |s: &Series| set.is_some() || asked.source != ReqSource::Default || asked.reqs.iter().any(|r| names(r, s));
    let all: Vec<SeriesAnalysis> = analyse(run, &opts, keep).into_iter().filter_map(|(_, a)| a.ok()).collect();
    (evaluate(asked, &all).0, set.map(|s| schedulability(&all, s)))
}

/// Whether requirement `r` reads the series `s`: the probe and metric it
/// names, any periodic timer for a timer's jitter, the release jitter for
/// an mttf requirement without `series=`.
fn names(r: &verdict::Requirement, s: &Series) -> bool {
    let (p, m) = (s.key.probe.as_str(), s.key.metric.as_str());
    match &r.lhs {
        verdict::Lhs::Stat { probe, metric, .. } => probe == p && metric == m,
        verdict::Lhs::Mttf { series: Some((probe, metric)), .. } => probe == p && metric == m,
        verdict::Lhs::Mttf { series: None, .. } => descriptor::is_release_jitter(p, m),
        verdict::Lhs::TimerJitter { .. } => descriptor::find(p).is_some_and(|d| d.timer_period.is_some()),
    }
}

/// The verdicts of `asked` on `all`; for the default yardstick only those
/// the run has data for, and the requirements left out for want of it.
pub fn evaluate(asked: &Asked, all: &[SeriesAnalysis]) -> (Vec<verdict::Verdict>, Vec<String>) {
    let mut verdicts = Vec::new();
    let mut left_out = Vec::new();
    for r in &asked.reqs {
        let v = verdict::evaluate(r, all);
        if asked.source == ReqSource::Default && v.series.is_none() {
            left_out.push(r.text.clone());
        } else {
            verdicts.push(v);
        }
    }
    (verdicts, left_out)
}

/// Parses profiles and requirements (the messages name --profile / --require).
pub fn parse_requirements(profiles: &[String], requires: &[String]) -> Result<Vec<verdict::Requirement>, String> {
    // `none` asks for no profile (requirements of --require may go with it).
    let others: Vec<String> = profiles.iter().filter(|p| *p != NO_PROFILE).map(|p| format!("--profile {p}")).collect();
    if profiles.iter().any(|p| p == NO_PROFILE) && !others.is_empty() {
        return Err(format!(
            "--profile none asks for no profile, and cannot go with {}: leave one or the other out",
            others.join(", ")
        ));
    }
    let mut reqs = Vec::new();
    for p in profiles.iter().filter(|p| *p != NO_PROFILE) {
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
/// with it, else (with `yardstick`) the profile omac, else nothing;
/// `--profile none` alone asks for nothing (no yardstick either). A
/// requirement given with the flags that names a probe or metric the run
/// has no series of is refused, naming those it has.
pub fn asked(run: &Run, flags: &RequireSpec, yardstick: bool) -> Result<Asked> {
    let stored_allow = run.plan["requirements"]["allow_insufficient"].as_bool().unwrap_or(false);
    let (source, profiles, requires, allow) = if !flags.is_empty() {
        let profiles: Vec<String> = flags.profiles.iter().filter(|p| *p != NO_PROFILE).cloned().collect();
        if profiles.is_empty() && flags.requires.is_empty() {
            return Ok(Asked::none());
        }
        (ReqSource::Flags, profiles, flags.requires.clone(), flags.allow_insufficient)
    } else {
        match stored_requirements(run) {
            // `none` beside another profile, as runs stored before it was
            // refused may hold: nothing to ask of.
            (p, r) if !p.is_empty() || !r.is_empty() => {
                let p: Vec<String> = p.into_iter().filter(|p| p != NO_PROFILE).collect();
                (ReqSource::Stored, p, r, stored_allow || flags.allow_insufficient)
            }
            _ if yardstick => (ReqSource::Default, vec![YARDSTICK.to_string()], vec![], true),
            _ => return Ok(Asked::none()),
        }
    };
    let reqs = parse_requirements(&profiles, &requires).map_err(|e| match source {
        ReqSource::Stored => anyhow!("run {}: a requirement stored with it: {e}", run.header.id),
        _ => anyhow!(e),
    })?;
    if source == ReqSource::Flags {
        check_asked(&profiles, &requires, &run_metrics(run), &format!("run {}", run.header.id))
            .map_err(anyhow::Error::msg)?;
    }
    Ok(Asked { source, profiles, requires, reqs, allow_insufficient: allow })
}

/// The probes of `run` and the metrics each has series of, stages too.
pub fn run_metrics(run: &Run) -> Vec<(String, Vec<String>)> {
    let mut have: Vec<(String, Vec<String>)> = Vec::new();
    for s in &run.series {
        let (p, m) = (&s.key.probe, &s.key.metric);
        match have.iter_mut().find(|(q, _)| q == p) {
            Some((_, ms)) if !ms.contains(m) => ms.push(m.clone()),
            Some(_) => {}
            None => have.push((p.clone(), vec![m.clone()])),
        }
    }
    have
}

/// [`check_names`] for what was asked: each profile's requirements and
/// each requirement, the message naming the `--profile` or `--require`.
pub fn check_asked(
    profiles: &[String],
    requires: &[String],
    have: &[(String, Vec<String>)],
    origin: &str,
) -> Result<(), String> {
    for p in profiles.iter().filter(|p| *p != NO_PROFILE) {
        // A profile is a set: the rows the run (or plan) can judge are
        // judged, the others say "not enough data" and what to measure;
        // refused only when it can judge none of them.
        let reqs = verdict::profile(p)?;
        let mut first = None;
        let judged = reqs.iter().filter(|r| match check_names(std::slice::from_ref(*r), have, origin) {
            Ok(()) => true,
            Err(e) => {
                first.get_or_insert(e);
                false
            }
        });
        if judged.count() == 0
            && let Some(e) = first
        {
            return Err(format!("--profile {p}: none of its requirements can be judged: {e}"));
        }
    }
    for r in requires {
        check_names(&[verdict::parse_requirement(r)?], have, origin).map_err(|e| format!("--require {e}"))?;
    }
    Ok(())
}

/// Refuses a requirement that names a probe or a metric `have` (what
/// `origin`, a plan or a run, produces: each probe with its metrics) does
/// not hold: a misspelled gate must not pass by judging nothing. The
/// message names the requirement and what could be judged instead.
pub fn check_names(reqs: &[verdict::Requirement], have: &[(String, Vec<String>)], origin: &str) -> Result<(), String> {
    let listing = || have.iter().map(|(p, ms)| format!("{p} ({})", ms.join(", "))).collect::<Vec<_>>().join("; ");
    for r in reqs {
        let named = match &r.lhs {
            verdict::Lhs::Stat { probe, metric, .. } => Some((probe, metric)),
            verdict::Lhs::Mttf { series: Some((probe, metric)), .. } => Some((probe, metric)),
            verdict::Lhs::Mttf { series: None, .. } => None,
            verdict::Lhs::TimerJitter { .. } => {
                let timers: Vec<&str> =
                    descriptor::PROBES.iter().filter(|d| d.timer_period.is_some()).map(|d| d.name).collect();
                if !have.iter().any(|(p, _)| timers.contains(&p.as_str())) {
                    return Err(format!(
                        "'{}': the jitter of a periodic timer needs a periodic probe ({}), and {origin} has none \
                         (it has: {}); add one, or require what it measures",
                        r.text,
                        timers.join(" or "),
                        listing()
                    ));
                }
                None
            }
        };
        let Some((probe, metric)) = named else { continue };
        match have.iter().find(|(p, _)| p == probe) {
            None => {
                return Err(format!(
                    "'{}': {origin} has no probe '{probe}'; it can judge: {} (write PROBE.METRIC.STAT)",
                    r.text,
                    listing()
                ));
            }
            Some((_, ms)) if !ms.contains(metric) => {
                return Err(format!(
                    "'{}': the probe {probe} of {origin} has no metric '{metric}'; it has: {}",
                    r.text,
                    ms.join(", ")
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
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
    /// False when a requirement failed, or had not enough data to be judged
    /// (unless --allow-insufficient), or the task set misses a deadline.
    pub passed: bool,
    /// What was asked, for people ("the profile omac"); the summary's.
    #[serde(skip)]
    pub against: String,
}

impl<'a> Judged<'a> {
    pub fn new(
        asked: &Asked,
        verdicts: &'a [verdict::Verdict],
        set: Option<&AskedSet>,
        sched: Option<&'a rta::Schedulability>,
    ) -> Judged<'a> {
        let failed = asked.fails(verdicts) || sched.is_some_and(|s| s.verdict.status == verdict::Status::Fail);
        Judged {
            requirements_from: (!asked.reqs.is_empty()).then_some(asked.source),
            verdicts,
            schedulability: set.zip(sched).map(|(set, result)| SchedOut { tasks_from: set.from, result }),
            passed: !failed,
            against: asked.what(),
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

pub fn label(s: &SeriesAnalysis) -> String {
    if s.key.cpu < 0 {
        return s.key.metric.clone();
    }
    let load = s.key.load.as_deref().map(|l| format!(" [{l}]")).unwrap_or_default();
    format!("{}.{} {} {}{load}", s.key.probe, s.key.metric, descriptor::key_word(&s.key.probe), s.key.cpu)
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
    let text = crate::sys::fs::read_input_text(path, what, "give fewer tasks").map_err(anyhow::Error::msg)?;
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
pub fn check_tasks_flags(flags: &TasksSpec) -> Result<Option<Vec<rta::Task>>> {
    flags.tasks.as_deref().map(|p| read_tasks(p, &format!("--tasks {}", p.display()))).transpose()
}

/// The task set `run` is judged with: --tasks (at --error-rate, else the
/// stored error rate, else the default), else the one stored with it (at
/// --error-rate if given), else none.
pub fn asked_set(run: &Run, flags: &TasksSpec) -> Result<Option<AskedSet>> {
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
        all.iter().filter(|s| descriptor::is_release_jitter(&s.key.probe, &s.key.metric)).collect();
    let latency = if list.is_empty() {
        Err("the run has no wake-up latency (wakeup.latency) to take the release jitter from; \
             `rtscope analyze rta --tasks FILE --jitter-from RUN --series PROBE.METRIC` takes another series"
            .to_string())
    } else {
        pseudo_latency(&list, asked.set.error_rate)
    };
    rta::schedulability(&asked.set, latency)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_come_from_the_flags_else_the_run_else_the_yardstick() {
        let mut run = rtscope_model::export::read_json(include_str!("../../tests/data/report-run.json"), "fixture")
            .expect("the fixture reads");
        let none = RequireSpec::default();
        let flags = RequireSpec { requires: vec!["wakeup.latency.max < 1ms".into()], ..Default::default() };
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
        // A traced stage is not the timer's series.
        assert_eq!(timer_period(&run, &SeriesKey::new("wakeup", "thread", 1)), None);
    }

    /// A profile judges what the run measured of it; refused only when it
    /// can judge none of its rows. A `--require` is refused as written.
    #[test]
    fn a_profile_judges_the_rows_it_can() {
        let timers = vec![("ptimer".to_string(), vec!["timerfd".to_string()])];
        let omac = ["omac".to_string()];
        assert_eq!(check_asked(&omac, &[], &timers, "the plan"), Ok(()), "the 1 ms timer's jitter is judged");
        let noise = vec![("noise".to_string(), vec!["noise".to_string()])];
        let e = check_asked(&omac, &[], &noise, "the plan").unwrap_err();
        assert!(e.starts_with("--profile omac: none of its requirements") && e.contains("noise"), "{e}");
        let e = check_asked(&[], &["wakeup.latency.max < 1ms".into()], &timers, "the plan").unwrap_err();
        assert!(e.contains("has no probe 'wakeup'"), "{e}");
    }
}

#[cfg(test)]
mod gate_advice {
    use super::*;
    use verdict::{Status, Verdict};

    fn short(series: Option<&str>, measure_for: &str) -> Verdict {
        Verdict {
            requirement: "r".into(),
            status: Status::NotEnoughData,
            series: series.map(String::from),
            evidence: String::new(),
            confidence: "observed".into(),
            reasons: vec![],
            measure_for: Some(measure_for.into()),
        }
    }

    /// Too few samples: measure longer; a probe the run lacks: measure it.
    #[test]
    fn the_gates_advice_names_the_probe_a_run_lacks() {
        let asked = Asked::none();
        let lacking = [short(None, "a run of `rtscope ptimer --period 1ms`")];
        let note = asked.short_note(&lacking).unwrap();
        assert!(note.contains("make a run of `rtscope ptimer --period 1ms`") && !note.contains("longer"), "{note}");
        let few = [short(Some("wakeup.latency CPU 0"), "36s")];
        assert!(asked.short_note(&few).unwrap().contains("measure longer"));
    }
}
