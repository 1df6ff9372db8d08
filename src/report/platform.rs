//! `rtscope compare`'s first screen: the references' platform table, tests
//! down and runs across (min / mean / max / jitter / p99.9 of each metric
//! under each load, its CPUs together, and each run's max over the
//! first's), the CPU scores, each run's verdict (decided in
//! `judge::answer`), and the gate's result. Nothing here decides.

use super::comparison::Comparison;
use super::summary::{Summary, short_us};
use super::wrap::{WIDTH, wrap};
use rtscope_model::compare::{SeriesCmp, load_of};
use rtscope_model::descriptor;
use rtscope_model::run::{Run, Series, SeriesKey, pooled};
use std::io::Write;

/// The figures of a run's cell, in the table's order, named as the
/// references name them (min, average, max, jitter), with their widths
/// (a space included: a figure is at most 5 characters).
const FIGURES: [(&str, usize); 5] = [("min", 6), ("avg", 6), ("max", 6), ("jitter", 7), ("p99.9", 6)];
/// A run's span: its figures' widths.
const RUN_W: usize = 31;
/// The ratio's width, its space included.
const RATIO_W: usize = 7;
/// The narrowest label column.
const LABEL_MIN: usize = 20;

/// A run's figures on a row (ns): min, mean, max, jitter (max - min),
/// p99.9 of the row's series, its CPUs together (or its one CPU).
fn figures(run: &Run, row: &SeriesCmp) -> Option<[i64; 5]> {
    let of: Vec<&Series> = run
        .series
        .iter()
        .filter(|s| {
            s.key.probe == row.probe
                && s.key.metric == row.metric
                && load_of(s) == row.load
                && row.cpu.is_none_or(|c| s.key.cpu == c)
        })
        .collect();
    let m = pooled(&of)?.summary();
    (m.count > 0).then(|| [m.min_ns, m.mean_ns.round() as i64, m.max_ns, m.jitter_ns() as i64, m.p999_ns])
}

/// The rows: each metric under each load (its summary row: the CPUs
/// together, or its only CPU), trace stages aside, grouped by load (the
/// load of the series the first run's verdict is about first, then the
/// loads in the first run's order); in each load the verdict's series
/// first, then the probes' table's order (wake-up latency first).
fn rows<'c>(cmp: &'c Comparison, about: Option<&SeriesKey>) -> Vec<&'c SeriesCmp> {
    let mut rows: Vec<&SeriesCmp> =
        cmp.compared.series.iter().filter(|s| s.summary && !rtscope_model::irqtime::from_trace(&s.metric)).collect();
    let mut loads: Vec<&str> = Vec::new();
    let first = about.map(|k| k.load.as_deref().unwrap_or(""));
    let planned = cmp.runs.first().map(|r| r.loads()).unwrap_or_default();
    for l in first.into_iter().chain(planned.iter().map(String::as_str)).chain(rows.iter().map(|r| r.load.as_str())) {
        if !loads.contains(&l) {
            loads.push(l);
        }
    }
    let is_about = |r: &SeriesCmp| about.is_some_and(|k| k.probe == r.probe && k.metric == r.metric);
    rows.sort_by_key(|r| (loads.iter().position(|l| *l == r.load), !is_about(r), descriptor::rank(&r.probe)));
    rows
}

/// A run's verdict in a few words: "FAIL* 2 of 3 requirements failed".
fn verdict_word(s: &Summary) -> String {
    match &s.verdict {
        Some(v) => format!("{}{}", v.outcome.as_str().to_uppercase(), if v.gates { "" } else { "*" }),
        None => "-".into(),
    }
}

/// The platform table, the runs' verdicts and the gate's result, within
/// [`WIDTH`] columns (the runs in blocks that fit).
pub fn write(cmp: &Comparison, out: &mut dyn Write) -> anyhow::Result<()> {
    let runs = cmp.runs;
    let summaries: Vec<Option<Summary>> = runs.iter().map(|r| Summary::as_stored(r).ok()).collect();
    let about = summaries.iter().flatten().find_map(|s| s.verdict.as_ref()?.series.as_ref()).map(|v| &v.key);
    let rows = rows(cmp, about);
    // The load is the rows' group's heading, not part of each label.
    let labels: Vec<String> = rows
        .iter()
        .map(|s| {
            let cpu =
                s.cpu.map(|c| format!(" {}{c}", descriptor::key_word(&s.probe).to_lowercase())).unwrap_or_default();
            format!("{} {}{cpu}", s.probe, s.metric)
        })
        .collect();
    let cells: Vec<Vec<Option<[i64; 5]>>> =
        rows.iter().map(|r| runs.iter().map(|run| figures(run, r)).collect()).collect();
    let span = |i: usize| RUN_W + if i > 0 { RATIO_W } else { 0 };
    let most = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0).max(LABEL_MIN);
    // Runs per block: the first alone takes its span; each later one its span and ratio.
    let mut blocks: Vec<Vec<usize>> = vec![vec![]];
    let mut used = LABEL_MIN;
    for i in 0..runs.len() {
        if used + span(i) > WIDTH && !blocks.last().unwrap().is_empty() {
            blocks.push(vec![]);
            used = LABEL_MIN;
        }
        used += span(i);
        blocks.last_mut().unwrap().push(i);
    }
    writeln!(out, "compare: tests down, runs across (us; each metric under each load, its CPUs together)")?;
    for block in &blocks {
        let room: usize = block.iter().map(|&i| span(i)).sum();
        let label_w = most.min(WIDTH - room);
        let mut head1 = format!("{:label_w$}", "");
        let mut head2 = format!("{:<label_w$}", "test");
        for &i in block {
            let name = format!("run {}", runs[i].header.id);
            head1 += &format!("{name:>RUN_W$}");
            for (f, w) in FIGURES {
                head2 += &format!("{f:>w$}");
            }
            if i > 0 {
                head1 += &format!("{:RATIO_W$}", "");
                head2 += &format!("{:>RATIO_W$}", "max x");
            }
        }
        writeln!(out, "\n{}\n{}", head1.trim_end(), head2)?;
        let mut load = None;
        for ((label, row), r) in labels.iter().zip(&cells).zip(&rows) {
            if load != Some(&r.load) && !r.load.is_empty() {
                writeln!(out, "load {}:", r.load)?;
            }
            load = Some(&r.load);
            let label = if label.chars().count() > label_w {
                format!("{}~", label.chars().take(label_w - 1).collect::<String>())
            } else {
                label.clone()
            };
            let mut line = format!("{label:<label_w$}");
            for &i in block {
                match row[i] {
                    Some(f) => f.iter().zip(FIGURES).for_each(|(v, (_, w))| line += &format!("{:>w$}", short_us(*v))),
                    None => line += &format!("{:>RUN_W$}", "-"),
                }
                if i > 0 {
                    let ratio = match (row[0], row[i]) {
                        (Some(a), Some(b)) if a[2] != 0 => format!("x{:.2}", b[2] as f64 / a[2] as f64),
                        _ => "-".into(),
                    };
                    line += &format!("{ratio:>RATIO_W$}");
                }
            }
            writeln!(out, "{line}")?;
        }
        let mut score = format!("{:<label_w$}", "CPU score");
        let mut verdict = format!("{:<label_w$}", "verdict");
        for &i in block {
            let s = runs[i].cpu_score.as_ref().map_or_else(|| "-".into(), |s| s.score.to_string());
            score += &format!("{s:>RUN_W$}");
            let v = summaries[i].as_ref().map_or_else(|| "-".into(), verdict_word);
            verdict += &format!("{v:>RUN_W$}");
            if i > 0 {
                score += &format!("{:RATIO_W$}", "");
                verdict += &format!("{:RATIO_W$}", "");
            }
        }
        writeln!(out, "{}\n{}", score.trim_end(), verdict.trim_end())?;
    }
    let yardstick = summaries.iter().flatten().filter_map(|s| s.verdict.as_ref()).any(|v| !v.gates);
    let mut legend = format!(
        "avg = the mean; jitter = max - min; max x = the run's max / run {}'s; p99.9 of every CPU together",
        runs[0].header.id
    );
    if yardstick {
        legend += "; *: against the yardstick (the profile omac), which never changes the exit code";
    }
    writeln!(out, "{}", wrap("", &legend, 2).trim_start())?;
    let gate = match cmp.gate_text() {
        Some((ok, text)) => format!("{}: {text}", if ok { "PASS" } else { "FAIL" }),
        None => "none (--max-regression PCT fails the comparison on a figure worse beyond the runs' noise)".into(),
    };
    writeln!(out, "{}", wrap("gate", &gate, 6))?;
    Ok(())
}
