//! The report's schedulability: the task set stored with the run (or
//! given with `--tasks`) judged with the run's measured wake-up latency as
//! every task's release jitter: its verdict, the response-time tables, the
//! bounds and the response-time plot.

use super::doc::{Block, Section, Table};
use super::judged::{Analysed, verdict_block};
use super::tailplot;
use rtscope_model::analysis::rta::{self, Jittered, RtaReport, Schedulability, TaskResult};
use rtscope_model::units::{self, us_i};

/// The task set's verdict for the Verdicts section: where the set comes
/// from, then the outcome with its evidence.
pub fn schedulability_blocks(a: &Analysed) -> Vec<Block> {
    let Some((set, s)) = &a.sched else { return Vec::new() };
    vec![Block::Para(format!("Schedulability: {}", set.origin())), verdict_block(&s.verdict)]
}

/// A task's slack: D - R, negative when it misses.
fn slack(t: &TaskResult) -> String {
    let d = t.deadline_ns as i64 - t.response_time_ns as i64;
    if d >= 0 { units::human(d as u64) } else { format!("-{}", units::human(d.unsigned_abs())) }
}

fn meets(t: &TaskResult) -> String {
    if t.schedulable { "meets".into() } else { "MISSES".into() }
}

/// The utilisation and the two bounds, in a sentence.
fn bounds(r: &RtaReport) -> String {
    let b = |b: &rta::Bound, what: &str| {
        let mut name = b.name.to_string();
        name[..1].make_ascii_uppercase();
        format!(
            "{name} bound ({what}): {:.4} {} {:.4}, {}",
            b.value,
            if b.passed { "<=" } else { ">" },
            b.limit,
            if b.passed { "holds" } else { "does not hold (sufficient only)" }
        )
    };
    format!(
        "Utilisation U = {:.4}. {}. {}.",
        r.utilization,
        b(&r.liu_layland, "U against n (2^(1/n) - 1)"),
        b(&r.hyperbolic, "the product of (U_i + 1) against 2")
    )
}

/// The schedulability of the task set given or stored with the run
/// (`analyze rta --jitter-from` on the run): the set's response-time
/// analysis as written, the utilisation and bounds; then, with the run's
/// wake-up latency at the error rate as every task's release jitter (the
/// WDM latency study's pseudo worst case), the response times again and the
/// bound on the deadline-miss probability per hour; a plot of each task's
/// response times against its deadline.
pub fn schedulability(a: &Analysed, p: &str) -> Vec<Section> {
    let Some((set, s)) = &a.sched else { return Vec::new() };
    let mut sec = Section::new(format!("{p}-sched"), "Schedulability");
    sec.push(Block::Para(format!(
        "{} Fixed-priority response-time analysis with release jitter and blocking (Audsley et al. 1993), as \
         `rtscope analyze rta`: R is a task's worst response time from its release, its release jitter included; it \
         meets its deadline when R <= D. Then the WDM latency study's pseudo worst case: the run's wake-up latency exceeded \
         with probability {:e} per wake-up (the worst CPU{}) becomes every task's release jitter, and the union bound \
         (error rate x releases per hour) caps the probability of a deadline miss per hour.",
        set.origin(),
        s.error_rate,
        if a.run.loads().is_empty() { "" } else { " and load" }
    )));
    sec.push(verdict_block(&s.verdict));
    sec.push(Block::Para(
        "As written (C: worst-case execution time, T: period, D: deadline, B: blocking, J: release jitter, most \
         urgent first):"
            .into(),
    ));
    sec.push(Block::Table(given_table(&s.given)));
    let mut notes = vec![bounds(&s.given)];
    notes.extend(s.given.notes.iter().map(|n| format!("Note: {n}.")));
    sec.push(Block::Para(notes.join(" ")));
    let jitter_label = match (&s.measured, &s.measured_error) {
        (Some(m), _) => {
            measured_blocks(m, &mut sec);
            format!("J = {} us", us_i(m.pseudo_worst_case.latency_ns as i64))
        }
        (None, e) => {
            sec.push(Block::Para(format!(
                "No measured release jitter: {}.",
                e.as_deref().unwrap_or("unknown").trim_end_matches('.')
            )));
            String::new()
        }
    };
    let bars = task_bars(s);
    let title = format!("Task set {}: worst-case response time against the deadline", set.set.source);
    sec.push(Block::Figure {
        svg: tailplot::response_times(&format!("{p}-sched-0"), &title, &bars, &jitter_label),
        caption: format!(
            "{title} (a bar per task from its release: solid as written, hatched with the measured release jitter; \
             the dashed red tick is the deadline)"
        ),
    });
    vec![sec]
}

/// A table's head from its columns' names.
fn head(cols: &[&str]) -> Vec<String> {
    cols.iter().map(|c| c.to_string()).collect()
}

/// The task set as written: a row per task, its parameters, its response
/// time and slack.
fn given_table(given: &RtaReport) -> Table {
    let mut t = Table::new(head(&["task", "priority", "C", "T", "D", "B", "J", "R", "D - R", "deadline"]), 1);
    t.numeric[9] = false;
    for r in &given.tasks {
        t.row(vec![
            r.name.clone(),
            r.priority.to_string(),
            units::human(r.wcet_ns),
            units::human(r.period_ns),
            units::human(r.deadline_ns),
            units::human(r.blocking_ns),
            units::human(r.jitter_ns),
            units::human(r.response_time_ns),
            slack(r),
            meets(r),
        ]);
    }
    t
}

/// With the measured release jitter: where it comes from, the response
/// times again and the bound on the deadline-miss probability per hour.
fn measured_blocks(m: &Jittered, sec: &mut Section) {
    let pwc = &m.pseudo_worst_case;
    sec.push(Block::Para(format!(
        "With the measured release jitter: the wake-up latency at {:e} per wake-up is {} us, from {}; it replaces \
         every smaller release jitter:",
        pwc.error_rate,
        us_i(pwc.latency_ns as i64),
        pwc.source
    )));
    let mut t = Table::new(head(&["task", "J", "R", "D - R", "deadline"]), 1);
    t.numeric[4] = false;
    for r in &m.report.tasks {
        t.row(vec![r.name.clone(), units::human(r.jitter_ns), units::human(r.response_time_ns), slack(r), meets(r)]);
    }
    sec.push(Block::Table(t));
    sec.push(Block::Para(match pwc.miss_probability_per_hour {
        Some(q) => format!(
            "Deadline-miss probability per hour <= {} (union bound: {:e} x {:.0} releases per hour; at most {:.3e} \
             misses per hour expected).",
            rta::probability(q),
            pwc.error_rate,
            pwc.releases_per_hour,
            pwc.expected_misses_per_hour_at_most.unwrap_or(0.0)
        ),
        None => "Deadline misses are not bounded: the set misses a deadline even at the pseudo worst case.".into(),
    }));
}

/// The plot's bars: per task its deadline, its response time as written
/// and with the measured jitter.
fn task_bars(s: &Schedulability) -> Vec<tailplot::TaskBar> {
    s.given
        .tasks
        .iter()
        .map(|g| tailplot::TaskBar {
            name: g.name.clone(),
            deadline_ns: g.deadline_ns,
            given_ns: g.response_time_ns,
            measured_ns: s
                .measured
                .as_ref()
                .and_then(|m| m.report.tasks.iter().find(|t| t.name == g.name))
                .map(|t| t.response_time_ns),
        })
        .collect()
}
