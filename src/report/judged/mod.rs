//! What a report concludes from a run: every measured series analysed once
//! (as `rtscope analyze RUN` does), the verdicts on the requirements asked
//! (the same `verdict` module), the tail analysis (return levels with their
//! intervals, each fit's diagnostics), the MTTF against buffering and the
//! schedulability of a task set given or stored with the run.
//!
//! tail.rs writes the tail section, buffering.rs the MTTF one; this file
//! has the analysis they share and the verdicts.

mod buffering;
mod tail;

pub use buffering::mttf;
pub use tail::tail;

use super::doc::{Block, Outcome};
use super::tailplot::MttfAxis;
use crate::judge::{Asked, AskedSet, ReqSource, analyse};
use rtscope_model::analysis::diagnostics::TestResult;
use rtscope_model::analysis::rta::Schedulability;
use rtscope_model::analysis::series::{Options, SeriesAnalysis};
use rtscope_model::analysis::usage::Usage;
use rtscope_model::analysis::verdict::{Lhs, Op, Stat, Status, Verdict};
use rtscope_model::descriptor;
use rtscope_model::run::{Run, Series};

/// A run with its analysis and its verdicts.
pub struct Analysed<'r> {
    pub run: &'r Run,
    /// Every measured series (trace stages aside; osbench's only when a
    /// requirement names it) with the index of its analysis in `all`, or
    /// why there is none.
    pub rows: Vec<(&'r Series, Result<usize, String>)>,
    pub all: Vec<SeriesAnalysis>,
    /// What a day and a week of the levels are.
    pub usage: Usage,
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
    /// `usage`: `--usage`, else the run's stored one.
    pub fn new(run: &'r Run, asked: Asked, set: Option<AskedSet>, usage: Option<Usage>) -> Analysed<'r> {
        // An OS-service test's series only when a requirement names its probe.
        let named = |p: &str| asked.reqs.iter().any(|r| matches!(&r.lhs, Lhs::Stat { probe, .. } if probe == p));
        let mut all = Vec::new();
        // A report prints no MTTF cell's interval: the table is computed without them.
        let usage = crate::judge::usage(run, usage);
        let opts = Options { mttf_intervals: false, usage, ..Options::default() };
        // A traced run's stage series too (their tails, the WDM study's per-stage worst cases), without MTTF tables.
        let stage_opts = Options { periods: vec![], ..opts.clone() };
        let rows = analyse(run, &opts, |s| {
            !rtscope_model::irqtime::from_trace(&s.key.metric) && (!per_test(s) || named(&s.key.probe))
        })
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
        Analysed { run, rows, all, usage, asked, verdicts, left_out, sched, mttf_axis: MttfAxis::default() }
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

#[cfg(test)]
mod tests {
    use super::buffering::{n_range, point_cell, worst_curve};
    use super::*;
    use crate::report::tailplot::{Mark, MttfCurve, MttfPoint};
    use rtscope_model::analysis::mttf::Compute;
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
        let mut run = rtscope_model::export::read_json(include_str!("../../../tests/data/report-run.json"), "fixture")
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
        let a = Analysed::new(&run, crate::judge::asked(&run, &flags, true).unwrap(), None, None);
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
