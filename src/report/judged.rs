//! What a report concludes from a run: every measured series analysed once
//! (as `rtscope analyze RUN` does), the verdicts on the requirements asked
//! (the same `verdict` module), the tail analysis (return levels with their
//! intervals, each fit's diagnostics), the MTTF against buffering and the
//! schedulability of a task set given or stored with the run.

use super::analyze::{MTTF_LEGEND, dur_s, level_cell, levels, mttf_cell, smallest_cell};
use super::doc::{Block, Outcome, Section, Table};
use super::tailplot::{self, LevelMark, LevelRow, Mark, MttfAxis, MttfCurve, MttfPoint};
use super::text::is_stage;
use crate::judge::{Asked, AskedSet, ReqSource, analyse};
use rtscope_model::analysis::diagnostics::TestResult;
use rtscope_model::analysis::mttf::{self, Compute, Source};
use rtscope_model::analysis::pot::{Level, REFUSED, TailReport};
use rtscope_model::analysis::rta::Schedulability;
use rtscope_model::analysis::series::{Options, SeriesAnalysis};
use rtscope_model::analysis::verdict::{Lhs, Op, Stat, Status, Verdict};
use rtscope_model::descriptor;
use rtscope_model::run::{Run, Series};
use rtscope_model::units::{self, us_f, us_i};

/// A run with its analysis and its verdicts.
pub struct Analysed<'r> {
    pub run: &'r Run,
    /// Every measured series (trace stages aside; osbench's only when a
    /// requirement names it) with the index of its analysis in `all`, or
    /// why there is none.
    pub rows: Vec<(&'r Series, Result<usize, String>)>,
    pub all: Vec<SeriesAnalysis>,
    pub asked: Asked,
    /// One per requirement; for the default yardstick, only those the run
    /// has data for.
    pub verdicts: Vec<Verdict>,
    /// The default yardstick's requirements the run has no data for.
    pub left_out: Vec<String>,
    /// The task set given or stored with the run, judged.
    pub sched: Option<(AskedSet, Schedulability)>,
    /// The x-axis of the MTTF plots (`report --mttf-axis`).
    pub mttf_axis: MttfAxis,
}

impl<'r> Analysed<'r> {
    pub fn new(run: &'r Run, asked: Asked, set: Option<AskedSet>) -> Analysed<'r> {
        // An OS-service test's series only when a requirement names its probe.
        let named = |p: &str| asked.reqs.iter().any(|r| matches!(&r.lhs, Lhs::Stat { probe, .. } if probe == p));
        let mut all = Vec::new();
        // A report prints no MTTF cell's interval: the table is computed without them.
        let opts = Options { mttf_intervals: false, ..Options::default() };
        // A traced run's stage series too (their tails, the WDM study's per-stage worst cases), without MTTF tables.
        let stage_opts = Options { periods: vec![], ..opts.clone() };
        let rows = analyse(run, &opts, |s| !is_stage(s) && (!per_test(s) || named(&s.key.probe)))
            .into_iter()
            .chain(crate::judge::analyse_stages(run, &stage_opts))
            .map(|(s, a)| {
                (
                    s,
                    a.map(|a| {
                        all.push(a);
                        all.len() - 1
                    }),
                )
            })
            .collect();
        let (verdicts, left_out) = crate::judge::evaluate(&asked, &all);
        let sched = set.map(|set| {
            let s = crate::judge::schedulability(&all, &set);
            (set, s)
        });
        Analysed { run, rows, all, asked, verdicts, left_out, sched, mttf_axis: MttfAxis::default() }
    }

    /// A requirement asked for (not the default yardstick) failed, or had
    /// not enough data (unless --allow-insufficient), or the task set
    /// misses a deadline.
    pub fn failed(&self) -> bool {
        self.asked.fails(&self.verdicts) || self.sched.as_ref().is_some_and(|(_, s)| s.verdict.status == Status::Fail)
    }

    /// The analysed series, with their analysis, osbench's aside.
    fn measured(&self) -> impl Iterator<Item = (&'r Series, Result<&SeriesAnalysis, &String>)> {
        self.rows.iter().filter(|(s, _)| !per_test(s)).map(|(s, a)| (*s, a.as_ref().map(|&i| &self.all[i])))
    }

    /// The latency limit a plot of `probe`'s `metrics` draws (us): the
    /// tightest upper limit a requirement puts on the worst case, a
    /// percentile or a return level of them, else the run's --threshold.
    pub fn limit_us(&self, probe: &str, metrics: &[&str]) -> Option<f64> {
        let from_reqs = self
            .asked
            .reqs
            .iter()
            .filter(|r| matches!(r.op, Op::Lt | Op::Le))
            .filter_map(|r| match &r.lhs {
                Lhs::Stat { probe: p, metric, stat: Stat::Max | Stat::Quantile(_) | Stat::Period(..) }
                    if p == probe && metrics.iter().all(|m| m == metric) =>
                {
                    Some(r.limit_ns)
                }
                _ => None,
            })
            .min();
        // The run's --threshold, where it holds every metric of the plot.
        let threshold = requirement_ns(self.run).filter(|_| metrics.iter().all(|m| threshold_applies(probe, m)));
        from_reqs.or(threshold).map(|ns| ns as f64 / 1000.0)
    }
}

/// Whether `s` is an OS-service test's series (osbench's), as its probe's
/// row in the descriptor table says.
fn per_test(s: &Series) -> bool {
    descriptor::per_test(&s.key.probe)
}

/// The requirement a run was held to (`--threshold`), ns.
pub fn requirement_ns(run: &Run) -> Option<u64> {
    run.plan["common"]["threshold_ns"].as_u64()
}

/// Whether the run's `--threshold` holds `probe`'s `metric`, as the
/// probe's row in the descriptor table says (netlat's stops on rx_total
/// (local) or rtt (peer) only, every other probe's on all its metrics).
pub fn threshold_applies(probe: &str, metric: &str) -> bool {
    descriptor::find(probe).is_none_or(|d| d.threshold_holds(metric))
}

fn outcome(s: Status) -> Outcome {
    match s {
        Status::Pass => Outcome::Pass,
        Status::Fail => Outcome::Fail,
        Status::NotEnoughData => Outcome::NotEnoughData,
    }
}

/// The reasons that limit a fit's confidence ("every diagnostic passed" aside).
fn limits(reasons: &[String]) -> Vec<String> {
    reasons.iter().filter(|r| !r.starts_with("every diagnostic")).cloned().collect()
}

/// The reasons in short, for a table cell: the checks that could not run
/// by name, the others whole.
fn short_limits(reasons: &[String]) -> String {
    let mut not_run = Vec::new();
    let mut other = Vec::new();
    for r in limits(reasons) {
        match r.split_once(" could not run") {
            Some((name, _)) => not_run.push(name.to_string()),
            None => other.push(r),
        }
    }
    if !not_run.is_empty() {
        other.push(format!("not run: {}", not_run.join(", ")));
    }
    if other.is_empty() { "-".into() } else { other.join("; ") }
}

/// A verdict as a block: the requirement, then the evidence, the
/// confidence with what limits it, and how long to measure.
pub fn verdict_block(v: &Verdict) -> Block {
    let mut details = vec![(
        format!("evidence: {}{}", v.series.as_ref().map(|s| format!("{s}: ")).unwrap_or_default(), v.evidence),
        vec![],
    )];
    let reasons = limits(&v.reasons);
    let conf = match v.confidence.as_str() {
        // Nothing was judged: no confidence to state.
        "observed" if v.status == Status::NotEnoughData => None,
        "observed" => Some("confidence: observed (read from the data, no model)".to_string()),
        c if reasons.is_empty() => Some(format!("confidence: {c} (from the fitted tail; every diagnostic passed)")),
        c => Some(format!("confidence: {c} (from the fitted tail), limited by:")),
    };
    details.extend(conf.map(|c| (c, reasons)));
    if let Some(m) = &v.measure_for {
        details.push((format!("measure for: {m}"), vec![]));
    }
    Block::Verdict { outcome: outcome(v.status), text: v.requirement.clone(), details }
}

/// The verdicts on the requirements asked (or the default yardstick): the
/// overall outcome, then each requirement with its evidence.
pub fn requirement_blocks(a: &Analysed) -> Vec<Block> {
    // Nothing asked, or nothing measured to hold to the yardstick (a
    // `rtscope load` run).
    if a.asked.reqs.is_empty() || (a.asked.source == ReqSource::Default && a.all.is_empty()) {
        return Vec::new();
    }
    let mut out = vec![Block::Para(a.asked.origin())];
    if a.verdicts.is_empty() {
        out.push(Block::Para(format!(
            "This run has none of the data the yardstick judges (needed: {}); no verdict.",
            a.left_out.join(", ")
        )));
        return out;
    }
    let (overall, text) = super::summary::verdict_counts(&a.verdicts);
    out.push(Block::Verdict { outcome: overall, text, details: vec![] });
    out.extend(a.verdicts.iter().map(verdict_block));
    if !a.left_out.is_empty() {
        out.push(Block::Para(format!("Not judged, the run has no data for them: {}.", a.left_out.join(", "))));
    }
    out
}

/// The probes (and metrics) of `list` in one parenthesis: " (wakeup latency, sleep: 6 metrics)".
fn probes_of(list: &[&Series]) -> String {
    let mut probes: Vec<(&str, Vec<&str>)> = Vec::new();
    for s in list {
        match probes.iter_mut().find(|(p, _)| *p == s.key.probe) {
            Some((_, ms)) if !ms.contains(&s.key.metric.as_str()) => ms.push(&s.key.metric),
            Some(_) => {}
            None => probes.push((&s.key.probe, vec![&s.key.metric])),
        }
    }
    let parts: Vec<String> = probes
        .iter()
        .map(|(p, ms)| if ms.len() == 1 { format!("{p} {}", ms[0]) } else { format!("{p}: {} metrics", ms.len()) })
        .collect();
    format!(" ({})", parts.join(", "))
}

fn series_name(s: &Series) -> String {
    let load = s.key.load.as_deref().map(|l| format!(" [{l}]")).unwrap_or_default();
    format!("{} {} {}{}{load}", s.key.probe, s.key.metric, descriptor::key_word(&s.key.probe), s.key.cpu)
}

/// A diagnostic's cell: pass / FAIL with its p-value, or not run.
fn test_cell(t: &TestResult) -> String {
    match t.passed {
        None => "not run".into(),
        Some(ok) => format!(
            "{}{}",
            if ok { "pass" } else { "FAIL" },
            t.p_value.map(|p| format!(" (p = {p:.3})")).unwrap_or_default()
        ),
    }
}

fn check_cell(passed: Option<bool>) -> String {
    match passed {
        None => "not run".into(),
        Some(true) => "pass".into(),
        Some(false) => "FAIL".into(),
    }
}

/// A return level as a plot mark; None when refused.
fn mark(l: &Level) -> Option<LevelMark> {
    if l.refused.is_some() {
        return None;
    }
    Some(LevelMark {
        value_us: l.value_ns? as f64 / 1000.0,
        low_us: l.ci_low_ns.map(|v| v as f64 / 1000.0),
        high_us: l.ci_high_ns.map(|v| v as f64 / 1000.0),
        extrapolated: l.extrapolated,
    })
}

/// The rows of the return-levels plot of one probe: every fit with at
/// least one level not refused.
fn level_rows(list: &[(&Series, &TailReport, i64)], metrics: usize) -> Vec<LevelRow> {
    list.iter()
        .filter_map(|(s, t, max_ns)| {
            let lv = levels(t).map(|(_, l)| mark(l));
            lv.iter().any(Option::is_some).then(|| {
                let load = s.key.load.as_deref().map(|l| format!(" [{l}]")).unwrap_or_default();
                let label = if metrics > 1 {
                    format!("{} CPU{}{load}", s.key.metric, s.key.cpu)
                } else {
                    format!("CPU{}{load}", s.key.cpu)
                };
                LevelRow { label, observed_max_us: *max_ns as f64 / 1000.0, levels: lv }
            })
        })
        .collect()
}

/// Rows beyond this many are left out of a return-levels plot.
const LEVEL_ROWS: usize = 24;

/// The tail analysis of every measured series (as `rtscope analyze RUN`
/// with its defaults): the expected worst case per hour, day and week with
/// its 95 % interval, or why it is refused, as a table and a plot per
/// probe; and each fit's diagnostics in one row.
pub fn tail(a: &Analysed, p: &str) -> Vec<Section> {
    let list: Vec<_> = a.measured().collect();
    if list.is_empty() {
        return Vec::new();
    }
    let mut sec = Section::new(format!("{p}-tail"), "Tail analysis: the expected worst case");
    sec.push(Block::Para(format!(
        "A generalised Pareto tail fitted above a threshold (peaks over threshold), declustered; the expected worst \
         case over an hour, a day and a week of the same conditions, with its 95 % profile-likelihood interval; \
         refused when it would extrapolate beyond 100x the time observed. Diagnostics and options: rtscope analyze {}",
        a.run.header.id
    )));
    let mut t = Table::new(
        ["series", "samples", "max (us)", "tail fit", "per hour", "per day", "per week", "confidence"]
            .map(String::from)
            .to_vec(),
        1,
    );
    for i in [3, 4, 5, 6, 7] {
        t.numeric[i] = false;
    }
    let mut diag = Table::new(
        [
            "series",
            "Ljung-Box",
            "runs",
            "KPSS",
            "GEV cross-check",
            "halves agree",
            "shape stable",
            "confidence",
            "limited by",
        ]
        .map(String::from)
        .to_vec(),
        9,
    );
    let mut fits: Vec<(&Series, &TailReport, i64)> = Vec::new();
    // Series with nothing to show but a refusal or a missing fit: a
    // sentence each kind, not a row each.
    let mut refused: Vec<(&Series, f64)> = Vec::new();
    let mut unfit: Vec<(&Series, String)> = Vec::new();
    for (s, an) in &list {
        let name = series_name(s);
        let an = match an {
            Ok(an) => an,
            Err(e) => {
                unfit.push((s, format!("no analysis: {e}")));
                continue;
            }
        };
        let r = &an.report;
        let tl = match (&r.tail, &r.tail_error) {
            (Some(tl), _) => tl,
            (None, e) => {
                unfit.push((s, e.clone().unwrap_or_else(|| "unknown reason".into())));
                continue;
            }
        };
        if levels(tl).iter().all(|(_, l)| l.refused.is_some()) {
            refused.push((s, r.stats.observed_duration_s));
            continue;
        }
        let mut cells = vec![name.clone(), r.stats.count.to_string(), us_i(r.stats.max_ns)];
        cells.push(format!(
            "above {} us: {} exceedances, xi {:.3} ± {:.3}",
            us_f(tl.threshold_ns),
            tl.exceedances,
            tl.xi,
            tl.se_xi
        ));
        cells.extend(levels(tl).iter().map(|(_, l)| level_cell(l).trim().to_string()));
        cells.push(tl.confidence.to_string());
        let d = &tl.diagnostics;
        diag.row(vec![
            name,
            test_cell(&d.ljung_box),
            test_cell(&d.runs),
            test_cell(&d.kpss),
            check_cell(d.gev.passed),
            check_cell(d.halves.passed),
            check_cell(d.threshold_stability.passed),
            tl.confidence.to_string(),
            short_limits(&tl.reasons),
        ]);
        fits.push((s, tl, r.stats.max_ns));
        t.row(cells);
    }
    let any_level = !t.rows.is_empty();
    if any_level {
        sec.push(Block::Table(t));
    }
    if !refused.is_empty() {
        let longest = refused.iter().map(|r| r.1).fold(0.0, f64::max);
        let need = |period_s: f64| units::human((period_s / REFUSED * 1e9).ceil() as u64);
        sec.push(Block::Para(format!(
            "{}{}: a tail is fitted, but every level lies beyond {REFUSED:.0}x the time observed (at most {} per \
             series). Measure at least {} per series (per cell) for the hour's level, {} for the day's, {} for the \
             week's.",
            if any_level { "The other series" } else { "Every series" },
            probes_of(&refused.iter().map(|r| r.0).collect::<Vec<_>>()),
            dur_s(longest),
            need(3600.0),
            need(86_400.0),
            need(604_800.0)
        )));
    }
    if !unfit.is_empty() {
        let mut why: Vec<&str> = unfit.iter().map(|u| u.1.as_str()).collect();
        why.sort_unstable();
        why.dedup();
        let shown: Vec<&str> = why.iter().take(3).copied().collect();
        sec.push(Block::Para(format!(
            "No tail fit for {} series{}: {}{}.",
            unfit.len(),
            probes_of(&unfit.iter().map(|u| u.0).collect::<Vec<_>>()),
            shown.join("; "),
            if why.len() > shown.len() {
                format!("; and {} other reasons", why.len() - shown.len())
            } else {
                String::new()
            }
        )));
    }
    // A plot per probe, of the fits with a level not refused.
    let mut probes: Vec<&str> = fits.iter().map(|f| f.0.key.probe.as_str()).collect();
    probes.dedup();
    for (i, probe) in probes.iter().enumerate() {
        let of: Vec<(&Series, &TailReport, i64)> = fits.iter().filter(|f| f.0.key.probe == *probe).copied().collect();
        let mut metrics: Vec<&str> = of.iter().map(|f| f.0.key.metric.as_str()).collect();
        metrics.sort_unstable();
        metrics.dedup();
        let mut rows = level_rows(&of, metrics.len());
        if rows.is_empty() {
            continue;
        }
        let total = rows.len();
        rows.truncate(LEVEL_ROWS);
        let req = a.limit_us(probe, &metrics);
        let title = format!("{probe}: expected worst case per hour, day and week");
        sec.push(Block::Figure {
            svg: tailplot::levels(&format!("{p}-levels-{i}"), &title, &rows, req),
            caption: format!(
                "{title}, with the 95 % interval, beside the observed maximum (log us{}{}; refused levels are marked, \
                 see the table)",
                if req.is_some() { "; dashed red: the requirement" } else { "" },
                if total > LEVEL_ROWS { format!("; the first {LEVEL_ROWS} of {total} series") } else { String::new() }
            ),
        });
    }
    if !diag.rows.is_empty() {
        sec.push(Block::Para(
            "Each fit's diagnostics: Ljung-Box (20 lags) and a runs test on the interval maxima (independence), KPSS \
             (stationarity), a GEV fit of the interval maxima against the hour's level, the first and second half's \
             agreement, and the shape's stability over five thresholds; not run: too few interval maxima or \
             exceedances (a shorter --checkpoint or a longer run gives more). Failed or missing checks limit the \
             confidence."
                .into(),
        ));
        sec.push(Block::Table(diag));
    }
    vec![sec]
}

/// One MTTF curve: a period and compute time, over the series of one load.
struct CurveSpec {
    t_ns: u64,
    c_ns: u64,
    load: Option<String>,
}

/// The worst MTTF of `list` (every CPU of one load) at each n = 1 ..=
/// `n_max`: the highest underrun probability decides; where any series
/// has not enough data the point is left out (its worst case is unknown).
pub fn worst_curve(list: &[&SeriesAnalysis], t_ns: u64, c: &Compute, n_max: u32) -> Vec<MttfPoint> {
    let per: Vec<Vec<mttf::Mttf>> =
        list.iter().map(|s| mttf::curve(&s.obs, s.model.as_ref(), t_ns, c, n_max, false)).collect();
    (0..n_max as usize)
        .filter_map(|i| {
            let at: Vec<&mttf::Mttf> = per.iter().map(|c| &c[i]).collect();
            if at.is_empty() || at.iter().any(|m| m.source == Source::NotEnoughData || m.p_exceed.is_none()) {
                return None;
            }
            let worst = at.iter().max_by(|x, y| x.p_exceed.unwrap_or(0.0).total_cmp(&y.p_exceed.unwrap_or(0.0)))?;
            // A fitted tail's MTTF beyond 100x the observed duration (no
            // underrun at all included) is refused: no point.
            if worst.refused.is_some() {
                return None;
            }
            let (mttf_s, mark) = match (worst.mttf_s?, worst.source) {
                (s, Source::Observed) => (s, Mark::Observed),
                (s, _) if worst.extrapolated => (s, Mark::Extrapolated),
                (s, _) => (s, Mark::Fitted),
            };
            Some(MttfPoint { n: worst.buffers, mttf_s, mark })
        })
        .collect()
}

/// The x range of an MTTF plot: up to one past the first n at which every
/// curve reaches the highest target (or has no underrun), 6 at least, 16 at
/// most.
pub fn n_range(curves: &[MttfCurve], target_s: f64) -> u32 {
    let reach = curves
        .iter()
        .map(|c| c.points.iter().find(|p| p.mttf_s >= target_s).map(|p| p.n + 1))
        .try_fold(0u32, |acc, n| n.map(|n| acc.max(n)));
    reach.unwrap_or(16).clamp(6, 16)
}

/// The cell of a curve's point in the figure's table.
fn point_cell(p: Option<&MttfPoint>) -> String {
    match p {
        None => "?".into(),
        Some(p) => match p.mark {
            Mark::Observed => format!("{} o", dur_s(p.mttf_s)),
            Mark::Fitted => format!("{} f", dur_s(p.mttf_s)),
            Mark::Extrapolated => format!("{} e", dur_s(p.mttf_s)),
        },
    }
}

/// Curves beyond this many on one MTTF plot: a plot per period instead.
const MTTF_CURVES: usize = 8;
/// The highest n computed for an MTTF curve.
const N_MAX: u32 = 16;

/// MTTF against buffering (the WDM latency study's soft-modem and audio analysis):
/// a plot of MTTF against the number of buffers, a curve per period and
/// load (the worst CPU), the targets as lines, and the figure's data as a
/// table for Markdown; then each series' MTTF table.
pub fn mttf(a: &Analysed, p: &str) -> Vec<Section> {
    let measured: Vec<(&Series, &SeriesAnalysis)> = a.measured().filter_map(|(s, an)| Some((s, an.ok()?))).collect();
    let tables: Vec<(&Series, &mttf::MttfTable)> =
        measured.iter().filter_map(|(s, an)| Some((*s, an.report.mttf.as_ref()?))).collect();
    if measured.is_empty() {
        return Vec::new();
    }
    let mut sec = Section::new(format!("{p}-mttf"), "MTTF against buffering");
    sec.push(Block::Para(
        "A consumer with n buffers of period t and a compute time c per period underruns when a latency exceeds the \
         slack (n - 1) t - c; with p the probability of that per period (observed where at least 10 samples exceed \
         the slack, from the fitted tail beyond) and theta the extremal index, the mean time to an underrun is \
         MTTF = t / (theta p). Periods 1.333, 2.667 and 5.333 ms (48 kHz audio with 64, 128 and 256 frames) and the \
         1 ms cycle, c = half the period, and the periods of any mttf requirement; at each n the worst CPU decides."
            .into(),
    ));
    // The series the curves are about: wake-up latency (else the run's
    // first metric), and any an mttf requirement names.
    let mut metrics: Vec<(String, String)> = Vec::new();
    if let Some((p, m)) = descriptor::release_jitter()
        .filter(|&(p, m)| measured.iter().any(|(s, _)| s.key.probe == p && s.key.metric == m))
    {
        metrics.push((p.into(), m.into()));
    } else {
        metrics.push((measured[0].0.key.probe.clone(), measured[0].0.key.metric.clone()));
    }
    let mut pairs: Vec<(u64, u64)> = Options::default().periods.iter().map(|&t| (t, t / 2)).collect();
    let mut targets: Vec<(f64, String)> = vec![(Options::default().target_s, "target 1 day".into())];
    for r in &a.asked.reqs {
        if let Lhs::Mttf { t_ns, c_ns, series, .. } = &r.lhs {
            if let Some(m) = series.clone().filter(|m| !metrics.contains(m)) {
                metrics.push(m);
            }
            // The audio profiles' periods are the defaults, rounded up.
            if !pairs.iter().any(|&(t, c)| t.abs_diff(*t_ns) <= 1 && c.abs_diff(*c_ns) <= 1) {
                pairs.push((*t_ns, *c_ns));
            }
            let s = r.limit_ns as f64 / 1e9;
            if !targets.iter().any(|t| (t.0 - s).abs() < 1e-9 * s) {
                targets.push((
                    s,
                    format!("requirement {} {}", if matches!(r.op, Op::Gt | Op::Ge) { ">" } else { "<" }, dur_s(s)),
                ));
            }
        }
    }
    for (mi, (probe, metric)) in metrics.iter().enumerate() {
        let of: Vec<&SeriesAnalysis> =
            measured.iter().filter(|(s, _)| &s.key.probe == probe && &s.key.metric == metric).map(|m| m.1).collect();
        if of.is_empty() {
            continue;
        }
        // The loads in the plan's order; None for a run without loads.
        let mut loads: Vec<Option<String>> = super::matrix::loads(a.run)
            .into_iter()
            .filter(|l| of.iter().any(|s| s.key.load.as_ref() == Some(l)))
            .map(Some)
            .collect();
        if of.iter().any(|s| s.key.load.is_none()) {
            loads.push(None);
        }
        let mut specs: Vec<CurveSpec> = Vec::new();
        for &(t_ns, c_ns) in &pairs {
            for l in &loads {
                specs.push(CurveSpec { t_ns, c_ns, load: l.clone() });
            }
        }
        let curves: Vec<MttfCurve> = specs
            .iter()
            .map(|sp| {
                let list: Vec<&SeriesAnalysis> = of.iter().filter(|s| s.key.load == sp.load).copied().collect();
                MttfCurve {
                    period_ns: sp.t_ns,
                    label: format!(
                        "t={}, c={}{}",
                        units::human(sp.t_ns),
                        units::human(sp.c_ns),
                        sp.load.as_deref().map(|l| format!(" [{l}]")).unwrap_or_default()
                    ),
                    points: worst_curve(&list, sp.t_ns, &Compute::Fixed(sp.c_ns), N_MAX),
                }
            })
            .collect();
        // A plot per period when one would hold too many curves.
        let groups: Vec<Vec<usize>> = if curves.len() > MTTF_CURVES && loads.len() > 1 {
            pairs
                .iter()
                .map(|&(t, c)| (0..specs.len()).filter(|&i| specs[i].t_ns == t && specs[i].c_ns == c).collect())
                .collect()
        } else {
            vec![(0..curves.len()).collect()]
        };
        let top = targets.iter().map(|t| t.0).fold(0f64, f64::max);
        for (gi, g) in groups.iter().enumerate() {
            let cs: Vec<MttfCurve> = g.iter().map(|&i| curves[i].clone()).collect();
            if cs.iter().all(|c| c.points.is_empty()) {
                continue;
            }
            let n_max = n_range(&cs, top);
            let cs: Vec<MttfCurve> = cs
                .into_iter()
                .map(|mut c| {
                    c.points.retain(|p| p.n <= n_max);
                    c
                })
                .collect();
            let against = match a.mttf_axis {
                MttfAxis::Buffers => "the number of buffers",
                MttfAxis::Buffering => "the total buffering time",
            };
            let title = format!("{probe} {metric}: mean time to a buffer underrun against {against}");
            sec.push(Block::Figure {
                svg: tailplot::mttf(&format!("{p}-mttf-{mi}-{gi}"), &title, &cs, n_max, &targets, a.mttf_axis),
                caption: format!(
                    "{title} (log MTTF; a curve per period{}; filled: observed, hollow: from the fitted tail; no point \
                     where the data and the fit cannot tell)",
                    if loads.len() > 1 { " and load, the worst CPU of each" } else { ", the worst CPU" }
                ),
            });
            let mut head = vec!["curve".to_string()];
            head.extend((1..=n_max).map(|n| format!("n={n}")));
            let mut tab = Table::new(head, 1);
            for c in &cs {
                let mut cells = vec![c.label.clone()];
                cells.extend((1..=n_max).map(|n| point_cell(c.points.iter().find(|p| p.n == n))));
                tab.row(cells);
            }
            sec.push(Block::FigureData(tab));
        }
    }
    // Per series the MTTF table, for the series the curves are about and
    // only where it holds a figure; the rest in a sentence.
    let informative = |m: &mttf::MttfTable| {
        m.rows.iter().any(|r| r.refused.is_none() && r.source != Source::NotEnoughData && r.mttf_s.is_some())
    };
    let (shown, rest): (Vec<_>, Vec<_>) = tables
        .into_iter()
        .partition(|(s, m)| metrics.iter().any(|(p, mm)| *p == s.key.probe && *mm == s.key.metric) && informative(m));
    if !rest.is_empty() {
        let target = rest[0].1.target_s;
        sec.push(Block::Para(format!(
            "The MTTF tables of {} other series{} are left out: {}a target of {} needs at least {} of measurement \
             per series to be judged from the fitted tail. Every table: rtscope analyze {}.",
            rest.len(),
            probes_of(&rest.iter().map(|r| r.0).collect::<Vec<_>>()),
            if rest.iter().any(|r| informative(r.1)) {
                "they are not the series of the curves above, or hold no figure within 100x the time observed; "
            } else {
                "none holds a figure within 100x the time observed; "
            },
            dur_s(target),
            dur_s(target / REFUSED),
            a.run.header.id
        )));
    }
    for (s, m) in shown {
        let name = series_name(s);
        sec.push(Block::Para(format!(
            "{name}: mean time to a buffer underrun of a consumer with n buffers of one period each, compute time = \
             {}, target {} ({MTTF_LEGEND}){}",
            m.compute,
            dur_s(m.target_s),
            m.smallest_n_notes()
                .iter()
                .map(|(ts, w)| {
                    let ts: Vec<String> = ts.iter().map(|&t| units::human(t)).collect();
                    format!("; smallest n ({}): {w}", ts.join(", "))
                })
                .collect::<String>()
        )));
        let mut ns: Vec<u32> = m.rows.iter().map(|r| r.buffers).collect();
        ns.sort_unstable();
        ns.dedup();
        let mut head = vec!["period".to_string()];
        head.extend(ns.iter().map(|n| format!("n={n}")));
        head.push("smallest n".into());
        let mut tab = Table::new(head, 1);
        for (period, small) in &m.smallest_n {
            let mut cells = vec![units::human(*period)];
            cells.extend(ns.iter().map(|n| {
                m.rows.iter().find(|r| r.period_ns == *period && r.buffers == *n).map_or("-".into(), mttf_cell)
            }));
            cells.push(smallest_cell(*small, m.smallest_n_why.iter().find(|w| w.0 == *period)));
            tab.row(cells);
        }
        sec.push(Block::Table(tab));
    }
    vec![sec]
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtscope_model::analysis::series::analyze_samples;
    use rtscope_model::run::SeriesKey;

    fn analysed(cpu: i64, values: &[i64]) -> SeriesAnalysis {
        let opts = Options { periods: vec![], ..Options::default() };
        analyze_samples(SeriesKey::new("wakeup", "latency", cpu), values, None, Some(1000.0), &opts).unwrap()
    }

    #[test]
    fn the_worst_cpu_decides_each_point_of_an_mttf_curve() {
        // 100 s at 1 kHz: CPU 0 has every 100th sample at 1.5 ms, CPU 1
        // every 1000th; the rest 50 us.
        let spikes = |every: i64| -> Vec<i64> {
            (0..100_000).map(|i| if i % every == 7 { 1_500_000 } else { 50_000 }).collect()
        };
        let (a, b) = (analysed(0, &spikes(100)), analysed(1, &spikes(1000)));
        // t = 1 ms, c = 0.5 ms: n = 1 leaves no slack; n = 2, 500 us of slack:
        // p = 1 % on CPU 0 (MTTF 0.1 s), 0.1 % on CPU 1; n = 3, 1.5 ms:
        // nothing above it in the data and no tail beyond 1.5 ms to fit.
        let c = worst_curve(&[&b, &a], 1_000_000, &Compute::Fixed(500_000), 4);
        assert_eq!(c.iter().map(|p| p.n).collect::<Vec<_>>(), [1, 2], "{c:?}");
        assert_eq!(c[0].mark, Mark::Observed);
        assert!((c[0].mttf_s - 1e-3).abs() < 1e-12, "every period underruns: {c:?}");
        assert!((c[1].mttf_s - 0.1).abs() < 1e-9, "CPU 0 decides: {c:?}");
        let only_b = worst_curve(&[&b], 1_000_000, &Compute::Fixed(500_000), 2);
        assert!((only_b[1].mttf_s - 1.0).abs() < 1e-9, "{only_b:?}");
    }

    #[test]
    fn the_mttf_plot_spans_to_one_past_the_target() {
        let pt = |n: u32, mttf_s: f64| MttfPoint { n, mttf_s, mark: Mark::Observed };
        let c = |pts: Vec<MttfPoint>| MttfCurve { label: "c".into(), period_ns: 1_000_000, points: pts };
        let fast = c((1..=16).map(|n| pt(n, 10f64.powi(n as i32))).collect());
        let slow = c((1..=16).map(|n| pt(n, 10f64.powi(n as i32 - 4))).collect());
        assert_eq!(n_range(std::slice::from_ref(&fast), 86_400.0), 6, "reached at n=5: at least 6");
        assert_eq!(n_range(&[fast, slow.clone()], 86_400.0), 10, "the slower curve reaches a day at n=9");
        let never = c(vec![pt(1, 1e-3), pt(2, 0.01)]);
        assert_eq!(n_range(&[slow, never], 86_400.0), 16, "a curve that never reaches the target");
        assert_eq!(point_cell(None), "?");
        assert_eq!(point_cell(Some(&MttfPoint { n: 3, mttf_s: 7200.0, mark: Mark::Extrapolated })), "2h e");
    }

    /// The fixed run of tests/data with its series replaced by two CPUs of
    /// 300 s at 100 Hz (checkpoints of 5 s): a body of 10-20 us and a Pareto-like tail of spikes
    /// above 30 us, with their exceedances timed.
    pub(crate) fn long_run() -> Run {
        let mut run = rtscope_model::export::read_json(include_str!("../../tests/data/report-run.json"), "fixture")
            .expect("the fixture reads");
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        run.series = (0..2)
            .map(|cpu| {
                let mut intervals = Vec::new();
                let mut exceedances = Vec::new();
                for i in 0..60u64 {
                    let mut t = rtscope_model::hist::Tally::new();
                    for k in 0..500u64 {
                        let v = if next() < 0.02 {
                            30_000.0 + 8_000.0 * ((1.0 - next()).powf(-0.2) - 1.0) / 0.2 * (1.0 + cpu as f64)
                        } else {
                            10_000.0 + 10_000.0 * next()
                        };
                        let v = v as u64;
                        t.record(v);
                        if v > 30_000 {
                            exceedances.push(rtscope_model::run::Exceedance {
                                t_ns: i * 5_000_000_000 + k * 10_000_000,
                                value_ns: v,
                            });
                        }
                    }
                    intervals.push(rtscope_model::run::Interval::new(
                        i as u32,
                        i * 1_000_000_000,
                        (i + 1) * 1_000_000_000,
                        &t,
                        0,
                        0,
                    ));
                }
                Series::new(
                    SeriesKey::new("wakeup", "latency", cpu),
                    "ns".into(),
                    "adaptive".into(),
                    intervals,
                    exceedances,
                )
                .unwrap()
            })
            .collect();
        run
    }

    #[test]
    fn a_long_run_has_its_verdicts_levels_plot_diagnostics_and_mttf_curves() {
        let run = long_run();
        let flags = crate::judge::RequireSpec {
            profiles: vec!["omac".into()],
            requires: vec!["mttf(n=3,t=2ms,c=1ms) > 1h".into(), "wakeup.latency.max < 1ms".into()],
            allow_insufficient: false,
        };
        let a = Analysed::new(&run, crate::judge::asked(&run, &flags, true).unwrap(), None);
        assert_eq!(a.asked.source, ReqSource::Flags);
        assert_eq!(a.verdicts.len(), 5, "omac's three and the two given");
        assert!(a.left_out.is_empty());
        assert_eq!(a.limit_us("wakeup", &["latency"]), Some(100.0), "omac's 100 us is tighter than 1 ms");
        assert_eq!(a.limit_us("sleep", &["nanosleep"]), Some(20_000.0), "else the run's --threshold");
        // netlat's --threshold holds rx_total (rtt in peer mode) only.
        assert_eq!(a.limit_us("netlat", &["rx_total"]), Some(20_000.0));
        assert_eq!(a.limit_us("netlat", &["rtt"]), Some(20_000.0));
        assert_eq!(a.limit_us("netlat", &["tx_sched"]), None, "not what --threshold stops on");
        assert_eq!(a.limit_us("netlat", &["rx_total", "rx_wake"]), None, "a plot of several metrics");
        // The hour's level from 400 s is estimated; the day's is refused.
        let tail = &tail(&a, "r1")[0];
        let figures: Vec<&String> = tail
            .blocks
            .iter()
            .filter_map(|b| if let Block::Figure { svg, .. } = b { Some(svg) } else { None })
            .collect();
        assert_eq!(figures.len(), 1, "one levels plot for wakeup");
        assert!(figures[0].contains("id=\"r1-levels-0\""));
        assert_eq!(figures[0].matches("<line class=\"series\"").count(), 2, "an hour's bar per CPU");
        assert_eq!(figures[0].matches("per day: refused").count(), 2);
        assert!(figures[0].contains("requirement 100 us"));
        let diag = tail
            .blocks
            .iter()
            .find_map(|b| match b {
                Block::Table(t) if t.head[1] == "Ljung-Box" => Some(t),
                _ => None,
            })
            .expect("the diagnostics table");
        assert_eq!(diag.rows.len(), 2);
        for r in &diag.rows {
            assert!(r[1].starts_with("pass") || r[1].starts_with("FAIL"), "Ljung-Box ran on 60 maxima: {r:?}");
        }
        // MTTF: one plot for wakeup latency with the default periods and the
        // requirement's (2 ms, 1 ms), a target line per target.
        let m = &mttf(&a, "r1")[0];
        let svg = m
            .blocks
            .iter()
            .find_map(|b| if let Block::Figure { svg, .. } = b { Some(svg) } else { None })
            .expect("the MTTF plot");
        assert_eq!(svg.matches("<polyline class=\"series\"").count(), 5, "4 default periods and the required one");
        assert_eq!(svg.matches("class=\"requirement\"").count(), 2, "a day and the required hour");
        assert!(svg.contains(">t=2ms, c=1ms<") && svg.contains(">requirement &gt; 1h<"), "{svg}");
        let data = m
            .blocks
            .iter()
            .find_map(|b| if let Block::FigureData(t) = b { Some(t) } else { None })
            .expect("the plot's data for Markdown");
        assert_eq!(data.rows.len(), 5);
        assert_eq!(data.rows[0][1], "1.333ms o", "n = 1: every period underruns");
        if std::env::var_os("RTSCOPE_DUMP_SVG").is_some() {
            std::fs::write("/tmp/rtscope-levels.svg", figures[0]).unwrap();
            std::fs::write("/tmp/rtscope-mttf.svg", svg).unwrap();
        }
    }

    #[test]
    fn verdict_summaries_count_and_the_worst_outcome_leads() {
        let v = |status| Verdict {
            requirement: "r".into(),
            status,
            series: None,
            evidence: "e".into(),
            confidence: "low".into(),
            reasons: vec!["every diagnostic passed".into()],
            measure_for: Some("1h".into()),
        };
        let (o, t) =
            crate::report::summary::verdict_counts(&[v(Status::Pass), v(Status::NotEnoughData), v(Status::Fail)]);
        assert_eq!(o, Outcome::Fail);
        assert_eq!(t, "1 of 3 requirements failed; 1 has not enough data; 1 passed");
        assert_eq!(
            crate::report::summary::verdict_counts(&[v(Status::Pass), v(Status::Pass)]),
            (Outcome::Pass, "all 2 passed".into())
        );
        let mut observed = v(Status::NotEnoughData);
        observed.confidence = "observed".into();
        let Block::Verdict { details, .. } = verdict_block(&observed) else { panic!() };
        assert_eq!(details.len(), 2, "nothing judged, no confidence: {details:?}");
        let Block::Verdict { outcome, details, .. } = verdict_block(&v(Status::NotEnoughData)) else { panic!() };
        assert_eq!(outcome, Outcome::NotEnoughData);
        assert_eq!(details.len(), 3, "evidence, confidence, measure for: {details:?}");
        assert!(details[1].0.contains("every diagnostic passed") && details[1].1.is_empty(), "{details:?}");
        assert_eq!(details[2].0, "measure for: 1h");
        let reasons = [
            "KPSS: not stationary (p = 0.01)".to_string(),
            "Ljung-Box could not run: needs 40 interval maxima, has 3".to_string(),
            "GEV cross-check could not run: needs 20 interval maxima".to_string(),
        ];
        assert_eq!(short_limits(&reasons), "KPSS: not stationary (p = 0.01); not run: Ljung-Box, GEV cross-check");
        assert_eq!(short_limits(&["every diagnostic passed".to_string()]), "-");
    }
}
