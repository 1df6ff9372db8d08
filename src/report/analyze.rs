//! Text output of `rtscope analyze`: per series the statistics, observed
//! rates, the tail with its return levels and diagnostics, the MTTF table;
//! then the verdicts.

use super::wrap::{hanging, wrap};
use anyhow::Result;
use rtscope_model::analysis::misses::MissPrediction;
use rtscope_model::analysis::mttf::{Mttf, Source};
use rtscope_model::analysis::pot::{Level, REFUSED, TailReport};
use rtscope_model::analysis::rta::{PseudoWorstCase, RtaReport, Schedulability};
use rtscope_model::analysis::series::SeriesAnalysis;
use rtscope_model::analysis::verdict::{Status, Verdict};
use rtscope_model::run::Run;
use rtscope_model::units::{human, us_f, us_i};
use std::io::Write;

pub fn dur_s(s: f64) -> String {
    if !s.is_finite() || s > 1e15 {
        return "> 30 My".into();
    }
    if s >= 86_400.0 * 365.0 {
        return format!("{:.1} years", s / (86_400.0 * 365.0));
    }
    if s >= 86_400.0 {
        return format!("{:.1} days", s / 86_400.0);
    }
    let ns = if s >= 60.0 { s.round() * 1e9 } else { (s * 1e6).round() * 1e3 };
    human(ns as u64)
}

fn opt_us(v: Option<i64>) -> String {
    v.map_or("-".into(), us_i)
}

/// `rtscope analyze RUN`: the answer first (`answer`: the summary that
/// `run` and `report` show, in colour on a terminal), then per series in
/// the order given (the most relevant first), each line within 100 columns.
pub fn write_run(
    run: &Run,
    all: &[&SeriesAnalysis],
    verdicts: &[Verdict],
    origin: &str,
    answer: Option<(&super::Summary, bool)>,
    out: &mut dyn Write,
) -> Result<()> {
    let h = &run.header;
    writeln!(out, "rtscope analyze · run {} · {} · {} · {}", h.id, h.kind, h.status.as_str(), h.hostname)?;
    if !h.representative {
        writeln!(out, "NOT REPRESENTATIVE: measured without real-time scheduling; the figures describe that run only")?;
    }
    if let Some((s, colour)) = answer.filter(|(s, _)| !s.is_empty()) {
        writeln!(out)?;
        super::summary::write_text(s, out, colour, super::summary::Place::First)?;
        super::summary::write_details_rule(out)?;
    }
    if let Some(first) = all.first() {
        writeln!(out, "{}", hanging(&first.usage.sentence(), 0, 2))?;
    }
    for s in all {
        writeln!(out)?;
        let mut text = Vec::new();
        write_series(s, &mut text)?;
        write!(out, "{}", super::wrap::fit(&String::from_utf8_lossy(&text)))?;
    }
    if !verdicts.is_empty() {
        writeln!(out)?;
        write_verdicts(verdicts, origin, out)?;
    }
    Ok(())
}

/// The verdicts, after one line on where their requirements come from.
pub fn write_verdicts(verdicts: &[Verdict], origin: &str, out: &mut dyn Write) -> Result<()> {
    writeln!(out, "{}", wrap("verdicts ·", origin, 11))?;
    for v in verdicts {
        write_verdict(v, out)?;
    }
    Ok(())
}

/// One verdict, wrapped at the terminal's width: its status, the
/// requirement, then the evidence under it.
fn write_verdict(v: &Verdict, out: &mut dyn Write) -> Result<()> {
    let tag = match v.status {
        Status::Pass => "PASS",
        Status::Fail => "FAIL",
        Status::NotEnoughData => "NOT ENOUGH DATA",
    };
    const AT: usize = 18;
    writeln!(out, "{}", wrap(&format!("  {tag}"), &v.requirement, AT))?;
    let evidence = format!("{}{}", v.series.as_ref().map(|s| format!("{s}: ")).unwrap_or_default(), v.evidence);
    writeln!(out, "{}", wrap("", &evidence, AT))?;
    if v.confidence != "observed" {
        writeln!(out, "{}", wrap("", &format!("confidence {}", v.confidence), AT))?;
    }
    for r in v.reasons.iter().filter(|r| !r.starts_with("every diagnostic")) {
        writeln!(out, "{}", wrap(&format!("{:AT$}  -", ""), r, AT + 4))?;
    }
    if let Some(m) = &v.measure_for {
        writeln!(out, "{}", wrap("", &format!("measure for: {m}"), AT))?;
    }
    Ok(())
}

/// One series (also `analyze tail`).
pub fn write_series(s: &SeriesAnalysis, out: &mut dyn Write) -> Result<()> {
    let r = &s.report;
    let st = &r.stats;
    let mut name = if r.cpu < 0 {
        r.metric.clone()
    } else {
        format!("{} {} {} {}", r.probe, r.metric, rtscope_model::descriptor::key_word(&r.probe), r.cpu)
    };
    if let Some(l) = &r.load {
        name += &format!(" under load {l}");
    }
    writeln!(out, "{name} · {} samples over {} · {:.1}/s", st.count, dur_s(st.observed_duration_s), st.rate_hz)?;
    write!(out, "  (us)  min {}  mean {}", us_i(st.min_ns), us_f(st.mean_ns))?;
    for p in &st.percentiles {
        write!(out, "  {} {}{}", p.name, us_i(p.value_ns), if p.thin { "*" } else { "" })?;
    }
    writeln!(out, "  max {}  jitter {}", us_i(st.max_ns), us_i(st.jitter_ns))?;
    if st.percentiles.iter().any(|p| p.thin) {
        writeln!(out, "  * fewer than 10 samples above it: read it as the maximum")?;
    }
    if let Some(last) = st.observed_rates.last() {
        let rates: Vec<String> = st
            .observed_rates
            .iter()
            .rev()
            .take(4)
            .map(|r| format!("> {} us {:.1}/h", r.x_ns / 1000, r.per_hour))
            .collect();
        writeln!(out, "  observed exceedance rates (>= 10 each): {}", rates.join(", "))?;
        let _ = last;
    }
    match (&r.tail, &r.tail_error) {
        (Some(t), _) => write_tail(t, out)?,
        (None, Some(e)) => writeln!(out, "  tail: no fit: {e}")?,
        _ => {}
    }
    if let Some(m) = &r.mttf {
        writeln!(out, "  MTTF (buffer underrun) with compute time = {}, target {}:", m.compute, dur_s(m.target_s))?;
        let mut ns: Vec<u32> = m.rows.iter().map(|r| r.buffers).collect();
        ns.sort_unstable();
        ns.dedup();
        write!(out, "    {:>9}", "period")?;
        for n in &ns {
            write!(out, " {:>14}", format!("n={n}"))?;
        }
        writeln!(out, "  smallest n")?;
        for (t, small) in &m.smallest_n {
            write!(out, "    {:>9}", human(*t))?;
            for n in &ns {
                let cell = m.rows.iter().find(|r| r.period_ns == *t && r.buffers == *n).map_or("-".into(), mttf_cell);
                write!(out, " {cell:>14}")?;
            }
            writeln!(out, "  {}", smallest_cell(*small, m.smallest_n_why.iter().find(|w| w.0 == *t)))?;
        }
        writeln!(out, "    ({MTTF_LEGEND})")?;
        if m.rows.iter().any(|r| r.refused.is_some()) {
            writeln!(
                out,
                "    refused: the fitted tail puts the MTTF beyond {REFUSED:.0}x the {} observed: too far to extrapolate",
                dur_s(st.observed_duration_s)
            )?;
        }
        for (periods, why) in m.smallest_n_notes() {
            let periods: Vec<String> = periods.iter().map(|&t| human(t)).collect();
            writeln!(out, "    smallest n ({}): {why}", periods.join(", "))?;
        }
    }
    Ok(())
}

/// What the tags of an MTTF cell mean.
pub const MTTF_LEGEND: &str = "o: observed, f: fitted tail, e: fitted tail, extrapolated beyond 10x the observed \
                               duration, refused: beyond 100x, ?: not enough data";

/// An MTTF for a table: the figure and where it comes from (see
/// [`MTTF_LEGEND`]); "refused" from a fitted tail beyond 100x the
/// observed duration (no underrun at all included).
pub fn mttf_cell(m: &Mttf) -> String {
    let tag = match m.source {
        Source::Observed => "o",
        Source::FittedTail if m.refused.is_some() => return "refused".into(),
        Source::FittedTail if m.extrapolated => "e",
        Source::FittedTail => "f",
        Source::NotEnoughData => return "?".into(),
    };
    match m.mttf_s {
        Some(s) => format!("{} {tag}", dur_s(s)),
        None => format!("never {tag}"),
    }
}

/// The smallest n of a period for a table: the number, "> 64", or "?"
/// when the data cannot tell (why: beside the table).
pub fn smallest_cell(n: Option<u32>, why: Option<&(u64, String)>) -> String {
    match (n, why) {
        (Some(n), _) => n.to_string(),
        (None, Some((_, w))) if !w.starts_with("more than") => "?".into(),
        (None, _) => "> 64".into(),
    }
}

/// The return levels of a tail: per hour, day and week.
pub fn levels(t: &TailReport) -> [(&'static str, &Level); 3] {
    [("hour", &t.return_levels.hour), ("day", &t.return_levels.day), ("week", &t.return_levels.week)]
}

/// A return level with its 95 % interval, or why it was refused.
pub fn level_cell(l: &Level) -> String {
    if let Some(r) = &l.refused {
        return format!("refused: {r}");
    }
    format!(
        "{:>10} us  [{} .. {}]{}{}",
        opt_us(l.value_ns),
        opt_us(l.ci_low_ns),
        l.ci_high_ns.map_or("unbounded".into(), us_i),
        if l.extrapolated { "  extrapolated" } else { "" },
        l.observed_ns.map(|o| format!("  observed {} us", us_i(o))).unwrap_or_default()
    )
}

fn write_tail(t: &TailReport, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "  tail: threshold {} us ({}), {} exceedances, xi {:.3} ± {:.3}, sigma {} us, theta {:.2} ({})",
        us_f(t.threshold_ns),
        t.threshold_choice,
        t.exceedances,
        t.xi,
        t.se_xi,
        us_f(t.sigma_ns),
        t.theta,
        t.theta_note
    )?;
    writeln!(out, "  expected worst case (95 % interval):")?;
    let width = levels(t).iter().map(|(name, _)| t.usage.label(name).len()).max().unwrap_or(0);
    for (name, l) in levels(t) {
        writeln!(out, "    {:<width$} {}", t.usage.label(name), level_cell(l))?;
    }
    let d = &t.diagnostics;
    let test = |name: &str, passed: Option<bool>, p: Option<f64>, note: &str| -> String {
        match passed {
            None => format!("{name}: not run ({note})"),
            Some(ok) => format!(
                "{name}: {}{}",
                if ok { "pass" } else { "FAIL" },
                p.map(|p| format!(" (p = {p:.3})")).unwrap_or_default()
            ),
        }
    };
    writeln!(out, "  diagnostics:")?;
    writeln!(out, "    {}", test("Ljung-Box 20 lags", d.ljung_box.passed, d.ljung_box.p_value, &d.ljung_box.note))?;
    writeln!(out, "    {}", test("runs test", d.runs.passed, d.runs.p_value, &d.runs.note))?;
    writeln!(out, "    {}", test("KPSS", d.kpss.passed, d.kpss.p_value, &d.kpss.note))?;
    let with_note = |name: &str, passed: Option<bool>, note: &str| match passed {
        None => test(name, passed, None, note),
        Some(_) => format!("{}: {note}", test(name, passed, None, note)),
    };
    writeln!(out, "    {}", with_note("GEV block maxima", d.gev.passed, &d.gev.note))?;
    writeln!(out, "    {}", with_note("first/second half", d.halves.passed, &d.halves.note))?;
    writeln!(
        out,
        "    {}",
        with_note("threshold stability", d.threshold_stability.passed, &d.threshold_stability.note)
    )?;
    writeln!(out, "  confidence: {}", t.confidence)?;
    for r in t.reasons.iter().filter(|r| !r.starts_with("every diagnostic")) {
        writeln!(out, "    - {r}")?;
    }
    Ok(())
}

/// `rtscope analyze mttf`.
pub fn write_mttf(
    worst: &Mttf,
    series: &str,
    per: &[(String, Mttf)],
    curve: &[Mttf],
    target_s: f64,
    smallest_n: Result<u32, &str>,
    out: &mut dyn Write,
) -> Result<()> {
    writeln!(
        out,
        "n = {} buffers of {}, compute {}: slack (n-1) t - c = {} us",
        worst.buffers,
        human(worst.period_ns),
        human(worst.compute_ns.round() as u64),
        us_i(worst.slack_ns)
    )?;
    for (label, m) in per {
        writeln!(
            out,
            "  {label}: p = {} per period ({}), theta {:.2}, MTTF {}, {} underruns/hour",
            m.p_exceed.map_or("?".into(), |p| format!("{p:.3e}")),
            m.note,
            m.theta,
            match (&m.refused, m.mttf_s) {
                (Some(_), _) => "refused".into(),
                (None, Some(s)) => format!("{}{}", dur_s(s), if m.extrapolated { " (extrapolated)" } else { "" }),
                (None, None) => "?".into(),
            },
            m.underruns_per_hour.map_or("?".into(), |u| format!("{u:.3e}"))
        )?;
        if let Some(r) = &m.refused {
            writeln!(out, "    refused: {r}")?;
        } else if let (Some(lo), hi) = (m.mttf_low_s, m.mttf_high_s) {
            writeln!(out, "    MTTF 95 % interval {} .. {}", dur_s(lo), hi.map_or("unbounded".into(), dur_s))?;
        }
    }
    writeln!(out, "worst: {series}")?;
    writeln!(
        out,
        "smallest n for an MTTF of {}: {}",
        dur_s(target_s),
        match smallest_n {
            Ok(n) => n.to_string(),
            Err(why) => why.to_string(),
        }
    )?;
    writeln!(out, "MTTF against n and the total buffering time n x t ({}; {MTTF_LEGEND}):", series)?;
    for m in curve {
        writeln!(
            out,
            "  n={:<3} buffering {:>10}  slack {:>12} us  MTTF {}",
            m.buffers,
            human(m.buffering_ns),
            us_i(m.slack_ns),
            mttf_cell(m)
        )?;
    }
    Ok(())
}

/// The stages' worst case per hour, day and week (a traced run): a row
/// per stage series (CPU, load), the WDM latency study's table of
/// interrupt, DPC and thread latencies.
pub fn write_stage_levels(stages: &[SeriesAnalysis], out: &mut dyn Write) -> Result<()> {
    if stages.is_empty() {
        return Ok(());
    }
    writeln!(out, "stages' worst case per hour / day / week (us, 95 % interval; traced stage series):")?;
    writeln!(out, "  {}", stages[0].usage.sentence())?;
    for s in stages {
        let st = &s.report.stats;
        writeln!(out, "  {:<34} {:>9} samples  max {:>10} us", crate::judge::label(s), st.count, us_i(st.max_ns))?;
        match &s.report.tail {
            Some(t) => {
                let width = levels(t).iter().map(|(name, _)| t.usage.label(name).len()).max().unwrap_or(0);
                for (name, l) in levels(t) {
                    writeln!(out, "    {:<width$} {}", t.usage.label(name), level_cell(l))?;
                }
            }
            None => writeln!(out, "    no tail fit: {}", s.report.tail_error.as_deref().unwrap_or("unknown reason"))?,
        }
    }
    Ok(())
}

/// A periodic task's deadline misses: predicted from its release delay
/// beside the observed, per CPU.
pub fn write_misses(list: &[(String, MissPrediction)], out: &mut dyn Write) -> Result<()> {
    let Some((_, first)) = list.first() else { return Ok(()) };
    let t = &first.task;
    writeln!(
        out,
        "deadline misses per job · period {}, compute {}, deadline {}, {} buffer(s): slack {} us",
        human(t.period_ns),
        human(t.compute_ns),
        human(t.deadline_ns),
        t.buffers,
        us_i(first.slack_ns)
    )?;
    let rate = |p: Option<f64>| p.map_or("?".into(), |p| format!("{p:.3e}"));
    writeln!(
        out,
        "  {:<28} {:>9} {:>7} {:>10} {:>10} {:>23} {:>7} {:>14}",
        "series", "jobs", "missed", "observed", "predicted", "interval", "inside", "predicted MTTF"
    )?;
    for (label, m) in list {
        writeln!(
            out,
            "  {:<28} {:>9} {:>7} {:>10} {:>10} {:>23} {:>7} {:>14}",
            label,
            m.jobs,
            m.missed,
            format!("{:.3e}", m.observed),
            rate(m.predicted),
            match (m.low, m.high) {
                (Some(l), Some(h)) => format!("{l:.3e} .. {h:.3e}"),
                _ => "?".into(),
            },
            match m.inside {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "?",
            },
            m.mttf_s.map_or("?".into(), dur_s)
        )?;
        writeln!(out, "    {}", m.note)?;
    }
    writeln!(
        out,
        "  predicted: P(release delay > slack), the MTTF model's; interval: its 95 % lower bound .. the 95 % upper bound \
         of P(release delay > slack - compute), for a disturbance that strikes while the job computes"
    )?;
    Ok(())
}

/// `rtscope analyze rta`.
pub fn write_rta(r: &RtaReport, pseudo: Option<&PseudoWorstCase>, out: &mut dyn Write) -> Result<()> {
    if let Some(p) = pseudo {
        writeln!(
            out,
            "pseudo worst case: wake-up latency {} us at error rate {:e} per wake-up, from {}: every task's release jitter",
            us_i(p.latency_ns as i64),
            p.error_rate,
            p.source
        )?;
    }
    writeln!(
        out,
        "{:<16} {:>5} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12}  verdict",
        "task", "prio", "C", "T", "D", "B", "J", "R"
    )?;
    for t in &r.tasks {
        writeln!(
            out,
            "{:<16} {:>5} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12}  {}",
            t.name,
            t.priority,
            human(t.wcet_ns),
            human(t.period_ns),
            human(t.deadline_ns),
            human(t.blocking_ns),
            human(t.jitter_ns),
            human(t.response_time_ns),
            if t.schedulable { "meets its deadline" } else { "MISSES its deadline" }
        )?;
    }
    writeln!(out, "utilisation {:.4}", r.utilization)?;
    for b in [&r.liu_layland, &r.hyperbolic] {
        writeln!(
            out,
            "{} bound: {:.4} {} {:.4}: {}",
            b.name,
            b.value,
            if b.passed { "<=" } else { ">" },
            b.limit,
            if b.passed { "holds" } else { "does not hold (the bound is sufficient only)" }
        )?;
    }
    for n in &r.notes {
        writeln!(out, "note: {n}")?;
    }
    writeln!(out, "schedulable: {}", if r.schedulable { "yes" } else { "NO" })?;
    if let Some(p) = pseudo {
        match p.miss_probability_per_hour {
            Some(q) => writeln!(
                out,
                "deadline-miss probability per hour <= {q:.3e} (union bound over {:.0} releases per hour)",
                p.releases_per_hour
            )?,
            None => writeln!(
                out,
                "deadline misses are not bounded: the set misses deadlines even at the pseudo worst case"
            )?,
        }
    }
    Ok(())
}

/// A task set judged against a run (`analyze RUN`, `run`): the RTA as
/// written, the RTA with the measured release jitter, the verdict.
pub fn write_schedulability(s: &Schedulability, origin: &str, out: &mut dyn Write) -> Result<()> {
    writeln!(out, "schedulability · {origin}")?;
    writeln!(out, "as written:")?;
    write_rta(&s.given, None, out)?;
    writeln!(out)?;
    match (&s.measured, &s.measured_error) {
        (Some(m), _) => {
            writeln!(out, "with the measured release jitter:")?;
            write_rta(&m.report, Some(&m.pseudo_worst_case), out)?;
        }
        (None, e) => writeln!(out, "no measured release jitter: {}", e.as_deref().unwrap_or("unknown"))?,
    }
    writeln!(out)?;
    write_verdict(&s.verdict, out)
}
