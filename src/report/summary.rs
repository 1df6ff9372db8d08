//! The answer first: how real-time the machine is, under which load, and
//! why not better. One summary per run, built once from the run and its
//! verdicts, that the terminal (`rtscope run`, `show`), the HTML and
//! Markdown reports and the JSON (`summary`) show alike: the verdict
//! against the requirements asked (or the default yardstick, named, which
//! never changes the exit code), the worst case and p99.9 of each probe
//! under each load with its sample count, the load that hurts most and its
//! top cause, the machine's settings that matter, and what to do next.

use super::doc::{Block, Outcome, Section, Table};
use super::matrix::{farthest, is_matrix, loads, pooled};
pub use super::wrap::{WIDTH, wrap};
use crate::judge::ReqSource;
use rtscope_model::analysis::pot::REFUSED;
use rtscope_model::analysis::verdict::{Status, Verdict};
use rtscope_model::characterisation::Characterisation;
use rtscope_model::compare::load_of;
use rtscope_model::descriptor;
use rtscope_model::episode::{Stages, top_causes};
use rtscope_model::run::{Run, Series};
use rtscope_model::units::{self, us_i};
use serde::Serialize;

/// A p99.9 with fewer samples above it than this reads as the maximum
/// (the analysis' rule for every percentile).
const THIN_ABOVE: f64 = 10.0;

/// The summary of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// The verdict on the requirements asked, or on the yardstick; absent
    /// when nothing was judged (`--profile none`, or no data for it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<VerdictSummary>,
    /// The columns: the loads in the plan's order; one empty name for a
    /// run without loads.
    pub loads: Vec<String>,
    /// A row per probe: its worst metric under each load.
    pub rows: Vec<SummaryRow>,
    /// The load under which the first row (wake-up latency where measured)
    /// was worst, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst_load: Option<WorstLoad>,
    /// The machine's settings that decide its latency.
    pub machine: MachineSummary,
    /// What to do next, most useful first.
    pub next: Vec<String>,
}

/// The verdict in one line.
#[derive(Clone, Debug, Serialize)]
pub struct VerdictSummary {
    /// pass, fail or not_enough_data.
    pub outcome: Status,
    /// What was judged: "the profile omac".
    pub against: String,
    /// Where it comes from: flags, stored, or default (the yardstick).
    pub from: ReqSource,
    /// Whether it decides the exit code (the yardstick never does).
    pub gates: bool,
    /// "1 of 2 requirements failed; 1 passed".
    pub counts: String,
    /// The requirement that decided (the first failed, else the first
    /// without enough data), with its evidence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// How long to measure for the requirements without enough data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measure_for: Option<String>,
}

/// A probe's row: its worst metric (the one with the sample farthest
/// from zero under any load; wake-up latency for wakeup) under each load.
#[derive(Clone, Debug, Serialize)]
pub struct SummaryRow {
    pub probe: String,
    pub metric: String,
    /// How many metrics the probe measured (the row shows the worst).
    pub metrics: usize,
    /// A cell per load, null where nothing was recorded.
    pub cells: Vec<Option<SummaryCell>>,
}

/// One probe metric under one load, every measured CPU together.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SummaryCell {
    /// The sample farthest from zero, with its sign.
    pub worst_ns: i64,
    pub p999_ns: i64,
    pub samples: u64,
    /// Fewer than 10 samples above the p99.9: read it as the maximum.
    pub p999_thin: bool,
}

/// The load that hurts most, and why.
#[derive(Clone, Debug, Serialize)]
pub struct WorstLoad {
    pub load: String,
    pub probe: String,
    pub metric: String,
    pub worst_ns: i64,
    /// The same row's worst case without a load (the `idle` column), when
    /// the run has one and it is not the worst.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_ns: Option<i64>,
    /// Its top cause, or what the kernel's counters say of the load.
    pub why: String,
    /// Where `why` comes from: trace (the cause episodes), counters (the
    /// characterisation) or none.
    pub why_from: &'static str,
}

/// The machine's settings that decide its latency.
#[derive(Clone, Debug, Serialize)]
pub struct MachineSummary {
    pub preemption: String,
    /// isolcpus / nohz_full, or "none".
    pub isolation: String,
    /// The hypervisor seen, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hypervisor: Option<String>,
    pub smt_active: Option<bool>,
    pub governor: String,
    pub rt_throttling: String,
    /// The tuning warnings of the run (notes aside).
    pub warnings: usize,
}

/// What the verdict is based on: where the requirements come from, what
/// they are, and their verdicts.
pub struct Judgement<'a> {
    pub from: ReqSource,
    pub against: String,
    pub verdicts: &'a [Verdict],
}

impl Summary {
    /// The summary of `run`, with the verdicts of `judged` (None: nothing judged).
    pub fn new(run: &Run, judged: Option<Judgement>) -> Summary {
        let matrix = is_matrix(run);
        let loads: Vec<Option<String>> = if matrix { loads(run).into_iter().map(Some).collect() } else { vec![None] };
        let rows = rows(run, &loads);
        let machine = machine(run);
        let verdict = judged.filter(|j| !j.verdicts.is_empty()).map(verdict);
        let worst_load = worst_load(run, &loads, &rows);
        let mut s = Summary {
            verdict,
            loads: loads.iter().map(|l| l.clone().unwrap_or_default()).collect(),
            rows,
            worst_load,
            machine,
            next: Vec::new(),
        };
        s.next = next(run, &s);
        s
    }

    /// Whether it has anything measured to show.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// The overall outcome of `verdicts` and one line saying so.
pub fn verdict_counts(verdicts: &[Verdict]) -> (Outcome, String) {
    let count = |s: Status| verdicts.iter().filter(|v| v.status == s).count();
    let (fail, none, pass) = (count(Status::Fail), count(Status::NotEnoughData), count(Status::Pass));
    let n = verdicts.len();
    let overall = match crate::judge::Asked::overall(verdicts) {
        Status::Fail => Outcome::Fail,
        Status::NotEnoughData => Outcome::NotEnoughData,
        Status::Pass => Outcome::Pass,
    };
    let mut parts = Vec::new();
    if fail > 0 {
        parts.push(format!("{fail} of {n} requirement{} failed", if n > 1 { "s" } else { "" }));
    }
    if none > 0 {
        parts.push(format!("{none} {} not enough data", if none > 1 { "have" } else { "has" }));
    }
    if pass > 0 {
        parts.push(if pass == n { format!("all {n} passed") } else { format!("{pass} passed") });
    }
    (overall, parts.join("; "))
}

fn verdict(j: Judgement) -> VerdictSummary {
    let vs = j.verdicts;
    let outcome = crate::judge::Asked::overall(vs);
    let (_, counts) = verdict_counts(vs);
    let decided =
        vs.iter().find(|v| v.status == Status::Fail).or_else(|| vs.iter().find(|v| v.status == Status::NotEnoughData));
    let decided_by = decided.map(|v| {
        format!("{}: {}{}", v.requirement, v.series.as_ref().map(|s| format!("{s}: ")).unwrap_or_default(), v.evidence)
    });
    let measure_for = vs.iter().find_map(|v| v.measure_for.clone().filter(|_| v.status == Status::NotEnoughData));
    VerdictSummary {
        outcome,
        against: j.against,
        from: j.from,
        gates: j.from != ReqSource::Default,
        counts,
        decided_by,
        measure_for,
    }
}

/// The measured series of `probe` (trace stages aside).
fn of_probe<'a>(run: &'a Run, probe: &str) -> Vec<&'a Series> {
    run.series.iter().filter(|s| s.key.probe == probe && !Stages::is_series(&s.key.metric)).collect()
}

/// A probe metric under one load, its CPUs together.
fn cell(list: &[&Series], metric: &str, load: &Option<String>) -> Option<SummaryCell> {
    let of: Vec<&Series> =
        list.iter().filter(|s| s.key.metric == metric && s.key.load.as_ref() == load.as_ref()).copied().collect();
    let t = pooled(&of)?;
    let m = t.summary();
    Some(SummaryCell {
        worst_ns: farthest(m.min_ns, m.max_ns),
        p999_ns: m.p999_ns,
        samples: m.count,
        p999_thin: (m.count as f64) * 0.001 < THIN_ABOVE,
    })
}

fn rows(run: &Run, loads: &[Option<String>]) -> Vec<SummaryRow> {
    let mut probes: Vec<&str> = Vec::new();
    for s in run.series.iter().filter(|s| !Stages::is_series(&s.key.metric)) {
        if !probes.contains(&s.key.probe.as_str()) {
            probes.push(&s.key.probe);
        }
    }
    // The descriptor table's order (the matrix's), unknown probes last.
    probes.sort_by_key(|p| descriptor::rank(p));
    probes
        .into_iter()
        .filter_map(|probe| {
            let list = of_probe(run, probe);
            let mut metrics: Vec<&str> = Vec::new();
            for s in &list {
                if !metrics.contains(&s.key.metric.as_str()) {
                    metrics.push(&s.key.metric);
                }
            }
            let worst_of = |m: &str| {
                loads.iter().filter_map(|l| cell(&list, m, l)).map(|c| c.worst_ns.unsigned_abs()).max().unwrap_or(0)
            };
            let metric = metrics
                .iter()
                .copied()
                .find(|m| descriptor::is_release_jitter(probe, m))
                .or_else(|| metrics.iter().copied().max_by_key(|m| worst_of(m)))?;
            let cells: Vec<Option<SummaryCell>> = loads.iter().map(|l| cell(&list, metric, l)).collect();
            cells.iter().any(Option::is_some).then(|| SummaryRow {
                probe: probe.to_string(),
                metric: metric.to_string(),
                metrics: metrics.len(),
                cells,
            })
        })
        .collect()
}

impl SummaryRow {
    /// "wakeup latency", "sleep epoll_wait@1ms".
    pub fn label(&self) -> String {
        format!("{} {}", self.probe, self.metric)
    }
}

fn machine(run: &Run) -> MachineSummary {
    let inv = &run.inventory;
    let isolation = match (&inv.isolcpus, &inv.nohz_full) {
        (None, None) => "none".to_string(),
        (i, n) => {
            let mut parts = Vec::new();
            if let Some(i) = i {
                parts.push(format!("isolcpus={i}"));
            }
            if let Some(n) = n {
                parts.push(format!("nohz_full={n}"));
            }
            parts.join(" ")
        }
    };
    let mut govs: Vec<String> = inv.governors.iter().filter_map(|g| g.governor.clone()).collect();
    govs.sort();
    govs.dedup();
    MachineSummary {
        preemption: inv.preempt_model.clone(),
        isolation,
        hypervisor: inv.hypervisor.clone(),
        smt_active: inv.smt_active,
        governor: if govs.is_empty() { "no cpufreq".into() } else { govs.join(", ") },
        rt_throttling: match inv.rt_runtime_us {
            Some(-1) => "off".into(),
            Some(r) => format!("{r} us per {} us", inv.rt_period_us.unwrap_or(0)),
            None => "unknown".into(),
        },
        warnings: run.header.warnings.iter().filter(|w| !w.is_informational()).count(),
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

/// The load under which the first row is worst, and why.
fn worst_load(run: &Run, loads: &[Option<String>], rows: &[SummaryRow]) -> Option<WorstLoad> {
    let row = rows.iter().find(|r| descriptor::is_release_jitter(&r.probe, &r.metric)).or(rows.first())?;
    let (i, c) = row
        .cells
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.map(|c| (i, c)))
        .max_by_key(|(_, c)| c.worst_ns.unsigned_abs())?;
    let load = loads[i].clone();
    let idle = loads.iter().position(|l| l.as_deref() == Some("idle"));
    let idle_ns = idle.filter(|&j| j != i).and_then(|j| row.cells[j]).map(|c| c.worst_ns);
    let (why, why_from) = why(run, load.as_deref(), row);
    load.map(|load| WorstLoad {
        load,
        probe: row.probe.clone(),
        metric: row.metric.clone(),
        worst_ns: c.worst_ns,
        idle_ns,
        why,
        why_from,
    })
}

/// Why a load hurts: the top cause of its episodes when traced, else what
/// its counters say.
fn why(run: &Run, load: Option<&str>, row: &SummaryRow) -> (String, &'static str) {
    let episodes: Vec<_> =
        run.episodes.iter().filter(|e| e.load.as_deref() == load && e.probe == row.probe).cloned().collect();
    if let Some(top) = top_causes(&episodes).first() {
        return (
            format!(
                "top cause {} {}: {:.0}% of its {} episodes' latency, at most {} us in one",
                top.kind.as_str(),
                top.name,
                top.share_pct,
                episodes.len(),
                units::us(top.max_ns)
            ),
            "trace",
        );
    }
    let traced = if run.trace.is_some() {
        "traced, no episode above the cause threshold"
    } else {
        "not traced (--trace names the cause)"
    };
    let Some(c) = load.and_then(|l| run.characterisation.iter().find(|c| c.load == l)) else {
        return (traced.to_string(), "none");
    };
    (format!("{}; {traced}", counters(c)), "counters")
}

/// What the kernel's counters say of a load, most telling first.
fn counters(c: &Characterisation) -> String {
    let mut parts = Vec::new();
    if c.load == "idle" || c.others_busy_pct >= 10.0 {
        if let Some(p) = c.others.first().filter(|_| c.others_busy_pct >= 10.0) {
            parts.push(format!(
                "other processes kept its CPUs {:.0}% busy (busiest: {} {:.0}%)",
                c.others_busy_pct, p.comm, p.cpu_pct
            ));
        } else if c.load == "idle" {
            parts.push(format!("nothing else ran ({:.0}% busy by others)", c.others_busy_pct));
        }
    }
    if c.steal_pct >= 1.0 {
        parts.push(format!("the hypervisor stole {:.1}% of the CPU time", c.steal_pct));
    }
    if c.load != "idle" {
        parts.push(format!(
            "CPUs {:.0}% busy ({:.0}% system, {:.0}% irq), {:.0} interrupts/s, {:.0} context switches/s",
            c.cpu_busy_pct,
            c.system_pct,
            c.irq_pct + c.softirq_pct,
            c.interrupts_per_s,
            c.context_switches_per_s
        ));
    }
    if c.verdict() != "ok" && c.verdict() != "-" {
        parts.push(format!("load check: {}", c.verdict()));
    }
    parts.join("; ")
}

/// How long each cell measured (the longest series' time), seconds.
fn observed_s(run: &Run) -> f64 {
    run.series
        .iter()
        .filter(|s| !Stages::is_series(&s.key.metric))
        .map(|s| s.intervals.iter().map(|iv| iv.end_ns.saturating_sub(iv.start_ns)).sum::<u64>() as f64 / 1e9)
        .fold(0.0, f64::max)
}

/// What to do next: measure longer, trace, then the run's own warnings'
/// fixes; at most six.
fn next(run: &Run, s: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    let obs = observed_s(run);
    let hour_needs = 3600.0 / REFUSED;
    if let Some(m) = s.verdict.as_ref().and_then(|v| v.measure_for.clone()) {
        out.push(format!("measure longer: at least {m} per cell for the requirements without enough data"));
    } else if obs > 0.0 && obs < hour_needs {
        out.push(format!(
            "measure longer: the expected worst case per hour needs at least {} per cell (this run: {}): \
             `rtscope run --duration {}`",
            units::human((hour_needs * 1e9) as u64),
            units::human((obs * 1e3).round() as u64 * 1_000_000),
            units::human((hour_needs * 1e9) as u64)
        ));
    }
    let traceable =
        s.rows.iter().any(|r| descriptor::find(&r.probe).is_some_and(|d| !matches!(d.trace, descriptor::Trace::No)));
    if run.trace.is_none() && traceable {
        out.push("name the causes of the worst cases: measure again with `--trace`".into());
    }
    // The run's tuning warnings, those that distort the figures first,
    // then the notes on what bounds the latency (kernel, isolation,
    // hypervisor): each with its fix.
    const FIRST: [&str; 4] = ["kernel", "hypervisor", "isolation", "preempt-mode"];
    let mut ws: Vec<_> = run.header.warnings.iter().collect();
    ws.sort_by_key(|w| (w.is_informational(), FIRST.iter().position(|t| *t == w.topic).unwrap_or(FIRST.len())));
    for w in ws {
        out.push(format!("{}: {}", w.message, w.fix));
    }
    out.truncate(6);
    out
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

/// The verdict's headline: "FAIL against the profile omac (yardstick: the exit code stays 0)".
pub fn verdict_head(v: &VerdictSummary) -> String {
    let how = match v.from {
        ReqSource::Default => {
            "the default yardstick: it never changes the exit code; --profile / --require gate, --profile none hides it"
        }
        ReqSource::Flags => "given: a failure exits with code 2",
        ReqSource::Stored => "stored with the run: a failure exits with code 2",
    };
    format!("{} ({how}): {}", v.against, v.counts)
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
        let mut details = Vec::new();
        if let Some(d) = &v.decided_by {
            details.push((format!("decided by {d}"), vec![]));
        }
        if let Some(m) = &v.measure_for {
            details.push((format!("measure for: {m}"), vec![]));
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
    let list = of_probe(run, &row.probe);
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

/// The summary as text, every line within [`WIDTH`] columns: the verdict,
/// the machine, the worst load, the probes x loads table (in blocks of
/// loads when they do not fit) and what to do next. `colour`: the
/// verdict and the worst load in colour (a terminal).
pub fn write_text(s: &Summary, out: &mut dyn std::io::Write, colour: bool) -> anyhow::Result<()> {
    const IND: usize = 12;
    if let Some(v) = &s.verdict {
        let (word, code) = match v.outcome {
            Status::Pass => ("PASS", "1;32"),
            Status::Fail => ("FAIL", "1;31"),
            Status::NotEnoughData => ("NOT ENOUGH DATA", "1;33"),
        };
        let line = wrap("verdict", &format!("{word} against {}", verdict_head(v)), IND);
        writeln!(out, "{}", line.replacen(word, &paint(colour, code, word), 1))?;
        if let Some(d) = &v.decided_by {
            writeln!(out, "{}", wrap("", &format!("decided by {d}"), IND))?;
        }
    } else {
        writeln!(
            out,
            "{}",
            wrap("verdict", "none: nothing judged (--profile none, or no data for the yardstick)", IND)
        )?;
    }
    writeln!(out, "{}", wrap("machine", &s.machine.line(), IND))?;
    if let Some(w) = &s.worst_load {
        let line = wrap("worst load", &worst_load_text(w), IND);
        writeln!(out, "{}", line.replacen(&w.load, &paint(colour, "1", &w.load), 1))?;
    }
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
    let n_loads = s.loads.len();
    for start in (0..n_loads).step_by(per) {
        let end = (start + per).min(n_loads);
        write!(out, "\n{head:<label_w$}")?;
        for n in &names[start..end] {
            write!(out, "  {n:>cell_w$}")?;
        }
        writeln!(out)?;
        for (l, row) in labels.iter().zip(&cells) {
            write!(out, "{l:<label_w$}")?;
            for c in &row[start..end] {
                write!(out, "  {c:>cell_w$}")?;
            }
            writeln!(out)?;
        }
    }
    writeln!(out, "{}", wrap("", &cell_legend(s), 2).trim_start())?;
    for (i, n) in s.next.iter().enumerate() {
        writeln!(out, "{}", wrap(if i == 0 { "next" } else { "" }, &format!("{}. {n}", i + 1), IND))?;
    }
    Ok(())
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
