//! The answer first, rendered: the summary that `judge::answer` decides
//! for a run (the verdict, the worst case and p99.9 of each probe under
//! each load, the worst load and its cause, the machine, what to do next)
//! as the terminal's lines (`rtscope run`, `show`, `analyze`) and the
//! reports' first section (HTML, Markdown). Nothing here decides.

use super::doc::{Block, Outcome, Section, Table};
pub use super::wrap::{WIDTH, wrap};
use crate::judge::ReqSource;
pub use crate::judge::answer::{
    self, Judgement, MachineSummary, Summary, SummaryCell, SummaryRow, VerdictSummary, WorstLoad,
};
use rtscope_model::analysis::verdict::{Status, Verdict};
use rtscope_model::compare::load_of;
use rtscope_model::run::{Run, Series, pooled};
use rtscope_model::units::us_i;

/// The overall outcome of `verdicts` and one line saying so.
pub fn verdict_counts(verdicts: &[Verdict]) -> (Outcome, String) {
    (outcome(crate::judge::Asked::overall(verdicts)), answer::counts(verdicts))
}

/// A verdict's status as the document's outcome.
fn outcome(s: Status) -> Outcome {
    match s {
        Status::Fail => Outcome::Fail,
        Status::NotEnoughData => Outcome::NotEnoughData,
        Status::Pass => Outcome::Pass,
    }
}

impl SummaryRow {
    /// "wakeup latency", "sleep epoll_wait@1ms".
    pub fn label(&self) -> String {
        format!("{} {}", self.probe, self.metric)
    }
}

impl MachineSummary {
    /// One line: "PREEMPT_DYNAMIC · isolation none · kvm guest · SMT off · governor - · RT throttling on".
    pub fn line(&self) -> String {
        let smt = match self.smt_active {
            Some(true) => "SMT on",
            Some(false) => "SMT off",
            None => "SMT unknown",
        };
        format!(
            "{} · isolation {} · {} · {smt} · governor {} · RT throttling {}",
            self.preemption,
            self.isolation,
            self.hypervisor.as_ref().map_or_else(|| "bare metal (no hypervisor seen)".into(), |h| format!("{h} guest")),
            self.governor,
            if self.rt_throttling == "off" { "off".into() } else { format!("on ({})", self.rt_throttling) }
        )
    }
}

/// A latency for a narrow cell: 3 significant decimals at most.
pub fn short_us(ns: i64) -> String {
    let us = ns as f64 / 1000.0;
    let a = us.abs();
    if a >= 1000.0 {
        format!("{us:.0}")
    } else if a >= 100.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.2}")
    }
}

/// A sample count for a narrow cell: 950, 2.0k, 1.2M.
pub fn short_count(n: u64) -> String {
    match n {
        0..1000 => n.to_string(),
        1000..999_500 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// A cell as text: "1277 / 43.87* n=2.0k".
pub fn cell_text(c: &Option<SummaryCell>) -> String {
    cell_text_sep(c, " / ")
}

/// A cell as text with `sep` between the worst case and the p99.9 (the
/// terminal's "1277/43.87* n=2.0k", so that three loads fit 100 columns).
fn cell_text_sep(c: &Option<SummaryCell>, sep: &str) -> String {
    match c {
        None => "-".into(),
        Some(c) => format!(
            "{}{sep}{}{} n={}",
            short_us(c.worst_ns),
            short_us(c.p999_ns),
            if c.p999_thin { "*" } else { "" },
            short_count(c.samples)
        ),
    }
}

/// The legend of the cells.
pub fn cell_legend(s: &Summary) -> String {
    let thin = s.rows.iter().any(|r| r.cells.iter().flatten().any(|c| c.p999_thin));
    let several = s.rows.iter().any(|r| r.metrics > 1);
    let mut l = "worst / p99.9 in us (the sample farthest from zero on any measured CPU, with its sign / the \
                 99.9th percentile of every CPU together), n = samples"
        .to_string();
    if several {
        l.push_str("; a probe with several metrics shows its worst (the detail tables have every one)");
    }
    if thin {
        l.push_str("; * fewer than 10 samples above the p99.9: read it as the maximum, measure longer");
    }
    l
}

/// The verdict's headline: "the profile omac (OMAC, ...: ... <= 100 us): 2 of 3 requirements failed";
/// a profile named for the first time is said.
pub fn verdict_head(v: &VerdictSummary) -> String {
    let against = if v.against.split([' ', ',']).any(|w| w == crate::judge::YARDSTICK) {
        format!("{} ({})", v.against, crate::judge::OMAC_MEANS)
    } else {
        v.against.clone()
    };
    format!("{against}: {}", v.counts)
}

/// Whether the verdict gates, in one short line.
pub fn verdict_gates(v: &VerdictSummary) -> &'static str {
    match v.from {
        ReqSource::Default => "a yardstick: never the exit code; --profile / --require gate, --profile none hides it",
        ReqSource::Flags => "given: a failure exits with code 2",
        ReqSource::Stored => "stored with the run: a failure exits with code 2",
    }
}

/// The summary as the report's first section: the verdict, the machine,
/// the probes x loads table, the worst load and what to do next; then the
/// headline plots (`plots`).
pub fn section(s: &Summary, p: &str, plots: Vec<String>) -> Section {
    let mut sec = Section::new(format!("{p}-summary"), "Summary: how real-time is this machine");
    sec.open = true;
    if let Some(v) = &s.verdict {
        let outcome = match v.outcome {
            Status::Pass => Outcome::Pass,
            Status::Fail => Outcome::Fail,
            Status::NotEnoughData => Outcome::NotEnoughData,
        };
        let mut details = vec![(verdict_gates(v).to_string(), vec![])];
        if let Some(d) = &v.decided_by {
            details.push((format!("decided by {d}"), vec![]));
        }
        if let Some(m) = &v.measure_for {
            details.push((format!("measure for: {m}"), vec![]));
        }
        if !v.measure_runs.is_empty() {
            details.push((format!("the run lacks what is judged: measure {}", v.measure_runs.join("; ")), vec![]));
        }
        sec.push(Block::Verdict { outcome, text: verdict_head(v), details });
    } else {
        sec.push(Block::Para("No requirement judged (--profile none, or no data for the yardstick).".into()));
    }
    let m = &s.machine;
    let mut t = Table::new(vec![String::new(), String::new()], 2);
    t.row(vec!["machine".into(), m.line()]);
    if let Some(w) = &s.worst_load {
        t.row(vec!["worst load".into(), worst_load_text(w)]);
    }
    sec.push(Block::Table(t));
    let mut head = vec!["probe (worst / p99.9 us, n)".to_string()];
    head.extend(s.loads.iter().map(|l| if l.is_empty() { "as measured".to_string() } else { l.clone() }));
    let mut t = Table::new(head, 1);
    for r in &s.rows {
        let mut cells = vec![if r.metrics > 1 { format!("{} (worst of {})", r.label(), r.metrics) } else { r.label() }];
        cells.extend(r.cells.iter().map(cell_text));
        t.row(cells);
    }
    sec.push(Block::Table(t));
    sec.push(Block::Para(cell_legend(s)));
    if !s.next.is_empty() {
        sec.push(Block::Para("Next:".into()));
        sec.push(Block::List(s.next.clone()));
    }
    if !plots.is_empty() {
        sec.push(Block::Figures(
            plots,
            "A plot per probe, its worst metric: the percent of samples at or over each value (log-log), a curve \
             per load (every CPU together); dashed red: the requirement. Details in the sections below."
                .into(),
        ));
    }
    sec
}

/// The worst load in one line.
pub fn worst_load_text(w: &WorstLoad) -> String {
    let than = match w.idle_ns {
        Some(i) if i != 0 => format!(" ({:.1}x idle's {} us)", w.worst_ns as f64 / i as f64, us_i(i)),
        _ => String::new(),
    };
    format!("{}: {} {} worst {} us{than}; {}", w.load, w.probe, w.metric, us_i(w.worst_ns), w.why)
}

/// The series of `row` under each load, every CPU together: (load, tally)
/// for the headline plot.
pub fn row_tallies(run: &Run, row: &SummaryRow, loads: &[String]) -> Vec<(String, rtscope_model::hist::Tally)> {
    let list = answer::of_probe(run, &row.probe);
    loads
        .iter()
        .filter_map(|l| {
            let of: Vec<&Series> =
                list.iter().filter(|s| s.key.metric == row.metric && load_of(s) == l.as_str()).copied().collect();
            pooled(&of).map(|t| (if l.is_empty() { "as measured".into() } else { l.clone() }, t))
        })
        .collect()
}

/// ANSI colours, only for a terminal.
fn paint(on: bool, code: &str, s: &str) -> String {
    if on { format!("\x1b[{code}m{s}\x1b[0m") } else { s.to_string() }
}

/// Where the summary goes: [`First`](Place::First) over the details
/// (`analyze`, `show`), or [`Last`](Place::Last) under them (`rtscope
/// run`, whose terminal keeps its last lines): the verdict is then the last
/// line, the table just above it, the next steps first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    First,
    Last,
}

/// The summary as text, every line within [`WIDTH`] columns: the verdict,
/// the machine, the worst load, the probes x loads table (in blocks of
/// loads when they do not fit) and what to do next, in the order of
/// `place`. `colour`: the verdict and the worst load in colour (a terminal).
pub fn write_text(s: &Summary, out: &mut dyn std::io::Write, colour: bool, place: Place) -> anyhow::Result<()> {
    let verdict = verdict_lines(s, colour);
    let machine = wrap("machine", &s.machine.line(), IND);
    let worst = s.worst_load.as_ref().map(|w| {
        let line = wrap("worst load", &worst_load_text(w), IND);
        line.replacen(&w.load, &paint(colour, "1", &w.load), 1)
    });
    let next: Vec<String> = s
        .next
        .iter()
        .enumerate()
        .map(|(i, n)| wrap(if i == 0 { "next" } else { "" }, &format!("{}. {n}", i + 1), IND))
        .collect();
    let table = table_lines(s);
    let mut lines: Vec<String> = Vec::new();
    match place {
        Place::First => {
            lines.extend(verdict);
            lines.push(machine);
            lines.extend(worst);
            lines.push(String::new());
            lines.extend(table);
            lines.extend(next);
        }
        Place::Last => {
            lines.extend(next);
            lines.push(machine);
            lines.extend(worst);
            lines.push(String::new());
            lines.extend(table);
            lines.extend(verdict);
        }
    }
    for l in lines {
        writeln!(out, "{l}")?;
    }
    Ok(())
}

/// The labels' indent.
const IND: usize = 12;

/// The verdict, and what decided it.
fn verdict_lines(s: &Summary, colour: bool) -> Vec<String> {
    let Some(v) = &s.verdict else {
        return vec![wrap("verdict", "none: nothing judged (--profile none, or no data for the yardstick)", IND)];
    };
    let (word, code) = match v.outcome {
        Status::Pass => ("PASS", "1;32"),
        Status::Fail => ("FAIL", "1;31"),
        Status::NotEnoughData => ("NOT ENOUGH DATA", "1;33"),
    };
    let line = wrap("verdict", &format!("{word} against {}", verdict_head(v)), IND);
    let mut out = vec![line.replacen(word, &paint(colour, code, word), 1), wrap("", verdict_gates(v), IND)];
    if let Some(d) = &v.decided_by {
        out.push(wrap("", &format!("decided by {d}"), IND));
    }
    if let Some(w) = &v.series {
        let text = format!(
            "{}: worst case {} us, p99.9 {} us, {} samples",
            w.name,
            us_i(w.worst_ns),
            us_i(w.p999_ns),
            w.samples
        );
        out.push(wrap("", &text, IND));
    }
    out
}

/// The probes x loads table (in blocks of loads that fit), then its legend.
fn table_lines(s: &Summary) -> Vec<String> {
    let head = "probe: worst/p99.9 us";
    let labels: Vec<String> = s
        .rows
        .iter()
        .map(|r| {
            let l = if r.metrics > 1 { format!("{} (of {})", r.label(), r.metrics) } else { r.label() };
            if l.chars().count() > 36 { format!("{}~", l.chars().take(35).collect::<String>()) } else { l }
        })
        .collect();
    let label_w = labels.iter().map(|l| l.chars().count()).chain([head.len()]).max().unwrap_or(0);
    let cells: Vec<Vec<String>> =
        s.rows.iter().map(|r| r.cells.iter().map(|c| cell_text_sep(c, "/")).collect()).collect();
    let names: Vec<&str> = s.loads.iter().map(|l| if l.is_empty() { "as measured" } else { l.as_str() }).collect();
    let cell_w = cells.iter().flatten().map(|c| c.len()).chain(names.iter().map(|n| n.len())).max().unwrap_or(1);
    let per = ((WIDTH - label_w) / (cell_w + 2)).max(1);
    let mut out = Vec::new();
    for start in (0..s.loads.len()).step_by(per) {
        let end = (start + per).min(s.loads.len());
        if start > 0 {
            out.push(String::new());
        }
        let mut line = format!("{head:<label_w$}");
        for n in &names[start..end] {
            line += &format!("  {n:>cell_w$}");
        }
        out.push(line);
        for (l, row) in labels.iter().zip(&cells) {
            let mut line = format!("{l:<label_w$}");
            for c in &row[start..end] {
                line += &format!("  {c:>cell_w$}");
            }
            out.push(line);
        }
    }
    out.push(wrap("", &cell_legend(s), 2).trim_start().to_string());
    out
}

/// The rule between the summary and the detail tables under it.
pub fn write_details_rule(out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    writeln!(out, "\n-- details {}", "-".repeat(WIDTH - 11))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_of_an_assessment_has_a_row_per_probe_and_names_the_worst_load() {
        let mut run = super::super::fixtures::matrix_run();
        for e in &mut run.episodes {
            e.load = Some("idle".into());
        }
        let s = Summary::new(&run, None);
        assert_eq!(s.loads, ["cmd:'a, b'", "idle"]);
        assert_eq!(s.rows.len(), 1, "{:?}", s.rows);
        assert_eq!((s.rows[0].probe.as_str(), s.rows[0].metric.as_str()), ("wakeup", "latency"));
        assert!(s.rows[0].cells.iter().all(|c| c.is_some_and(|c| c.samples > 0)));
        let w = s.worst_load.as_ref().expect("a worst load");
        // Both loads hold the same samples: the last of the worst is named.
        assert_eq!(w.load, "idle");
        assert!(w.why.contains("top cause") && w.why_from == "trace", "the fixture is traced: {}", w.why);
        assert!(s.verdict.is_none());
        assert!(cell_text(&s.rows[0].cells[0]).contains(" n="));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["rows"][0]["metric"], "latency");
        assert!(json["machine"]["preemption"].is_string());
    }

    #[test]
    fn short_figures_keep_three_or_four_digits() {
        assert_eq!(short_us(1_276_857), "1277");
        assert_eq!(short_us(635_023), "635.0");
        assert_eq!(short_us(43_871), "43.87");
        assert_eq!(short_us(-7_000), "-7.00");
        assert_eq!(short_count(216), "216");
        assert_eq!(short_count(2_000), "2.0k");
        assert_eq!(short_count(1_234_567), "1.2M");
    }
}
