//! The sections of a run's report, one function each, in reading order.
//! Each takes the run and returns no section when the run lacks its data,
//! so a section appears exactly when there is something to show.
//!
//! An assessment (`rtscope run`) adds the workloads matrix (probes x loads),
//! the loads' characterisation and the CPU score. Series are grouped by
//! their load ([`load_of`]), so every load has its curve in a plot.

use super::doc::{Block, Chapter, Outcome, Section, Table};
use super::judged::{self, Analysed, requirement_ns, threshold_applies};
use super::matrix::{Grid, characterisation_grid, matrix_grids, matrix_legend, score_line};
use super::schedule;
use super::svg::{self, Bar, Curve, IntervalBar};
use super::text::{
    Col, ColFormat, bucket_label, layout, metrics_in_order, pow2_columns, series_by_probe, stages_by_probe, stages_text,
};
use super::text::{OSBENCH_HEAD, OSBENCH_LEGEND, OsbenchGroup, osbench_groups, osbench_total};
use rtscope_model::compare::load_of;
use rtscope_model::descriptor;
use rtscope_model::episode::{Lane, Stages, top_causes};
use rtscope_model::hist::{Tally, signed_buckets};
use rtscope_model::run::{Interval, Run, Series};
use rtscope_model::units::{self, us, us_i};

/// A section builder: the analysed run and the prefix that makes its anchors unique.
type SectionFn = fn(&Analysed, &str) -> Vec<Section>;

/// Every section, in the order a reader wants them: the answer first
/// (open), then the verdicts and the details (collapsed in the HTML).
const SECTIONS: [SectionFn; 16] = [
    summary,
    verdicts,
    matrix,
    characterisation,
    machine,
    probes,
    osbench,
    judged::tail,
    judged::mttf,
    schedule::schedulability,
    stages,
    super::irqtime::section,
    causes,
    episodes,
    super::flame::sections,
    tracer,
];

/// A run's chapter: every section it has data for.
pub fn chapter(a: &Analysed, prefix: &str) -> Chapter {
    let run = a.run;
    let h = &run.header;
    let elapsed =
        h.ended_unix_ns.map(|e| units::human(((e - h.started_unix_ns).max(0) as u64) / 1_000_000 * 1_000_000));
    let subtitle = format!(
        "{} on {} · {} UTC{} · {}{}",
        h.kind,
        h.hostname,
        units::utc(h.started_unix_ns),
        elapsed.map(|e| format!(" · {e}")).unwrap_or_default(),
        h.status.as_str(),
        if h.representative { "" } else { " · NOT REPRESENTATIVE (no real-time scheduling)" }
    );
    Chapter {
        id: prefix.to_string(),
        title: format!("Run {} ({})", h.id, h.kind),
        subtitle,
        sections: SECTIONS.iter().flat_map(|f| f(a, prefix)).collect(),
    }
}

/// The answer first: the verdict, the machine, the worst load and its
/// cause, the worst case and p99.9 of each probe under each load with its
/// samples, what to do next; then a headline plot per probe (its worst
/// metric, a curve per load, the requirement drawn).
fn summary(a: &Analysed, p: &str) -> Vec<Section> {
    let run = a.run;
    let s = super::Summary::of(run, &a.asked, &a.verdicts);
    if s.is_empty() {
        return Vec::new();
    }
    let plots = s
        .rows
        .iter()
        .enumerate()
        .filter_map(|(i, row)| {
            let curves: Vec<Curve> = super::summary::row_tallies(run, row, &s.loads)
                .into_iter()
                .map(|(label, t)| Curve { label, points: exceedance_points(&t) })
                .filter(|c| !c.points.is_empty())
                .collect();
            if curves.is_empty() {
                return None;
            }
            let name = value_name(&row.probe);
            let title = format!("{}: % of samples at or over each {name}", row.label());
            let req = a.limit_us(&row.probe, &[row.metric.as_str()]);
            Some(svg::exceedance_sized(
                &format!("{p}-head-{i}"),
                &title,
                &format!("{name} (us)"),
                &curves,
                req,
                (575.0, 330.0),
            ))
        })
        .collect();
    vec![super::summary::section(&s, p, plots)]
}

/// What a probe's values are, for axis labels (its row in the descriptor
/// table says).
pub fn value_name(probe: &str) -> &'static str {
    descriptor::find(probe).map_or("value", |d| d.value_name)
}

fn load_suffix(s: &Series) -> String {
    let l = load_of(s);
    if l.is_empty() { String::new() } else { format!(" [{l}]") }
}

/// A series' name within its probe's section.
fn series_label(s: &Series, metrics: usize) -> String {
    if metrics > 1 {
        format!("{} CPU{}{}", s.key.metric, s.key.cpu, load_suffix(s))
    } else {
        format!("CPU{}{}", s.key.cpu, load_suffix(s))
    }
}

/// The verdicts: on the requirements asked (or the default yardstick),
/// each with its evidence, confidence and how long to measure; then on the
/// run's --threshold: pass when every sample of every series stayed within
/// it, with the evidence per series.
fn verdicts(a: &Analysed, p: &str) -> Vec<Section> {
    let run = a.run;
    let mut blocks = judged::requirement_blocks(a);
    blocks.extend(schedule::schedulability_blocks(a));
    let threshold = requirement_ns(run);
    if blocks.is_empty() && threshold.is_none() {
        return Vec::new();
    }
    let mut sec = Section::new(format!("{p}-verdicts"), "Verdicts");
    for b in blocks {
        sec.push(b);
    }
    let Some(req) = threshold else { return vec![sec] };
    if !sec.blocks.is_empty() {
        sec.push(Block::Para(format!("The run's own requirement: no sample above {} us (--threshold).", us(req))));
    }
    let measured: Vec<&Series> = run
        .series
        .iter()
        .filter(|s| !super::text::from_trace(s) && threshold_applies(&s.key.probe, &s.key.metric))
        .collect();
    let mut t =
        Table::new(["series", "samples", "max (us)", "requirement (us)", "outcome"].map(String::from).to_vec(), 1);
    t.numeric[4] = false;
    let mut outcomes = Vec::new();
    for s in &measured {
        let tally = s.total();
        let o = if tally.count() == 0 {
            Outcome::NotEnoughData
        } else if tally.max() > req as i64 {
            Outcome::Fail
        } else {
            Outcome::Pass
        };
        outcomes.push(o);
        t.row(vec![
            format!(
                "{} {} {}{}{}",
                s.key.probe,
                s.key.metric,
                descriptor::key_word(&s.key.probe),
                s.key.cpu,
                load_suffix(s)
            ),
            tally.count().to_string(),
            us_i(tally.max()),
            us(req),
            o.as_str().into(),
        ]);
    }
    let fails = outcomes.iter().filter(|o| **o == Outcome::Fail).count();
    let overall = if fails > 0 {
        Outcome::Fail
    } else if outcomes.is_empty() || outcomes.contains(&Outcome::NotEnoughData) {
        Outcome::NotEnoughData
    } else {
        Outcome::Pass
    };
    let text = match overall {
        Outcome::Fail => format!(
            "{fails} of {} series had a sample above the requirement of {} us (--threshold){}",
            outcomes.len(),
            us(req),
            if run.header.exit_code == Some(2) { "; the run stopped at the first one" } else { "" }
        ),
        Outcome::Pass => {
            format!("every sample of {} series stayed within {} us (--threshold)", outcomes.len(), us(req))
        }
        Outcome::NotEnoughData => format!("a series has no sample to hold to the requirement of {} us", us(req)),
    };
    sec.push(Block::Verdict { outcome: overall, text, details: vec![] });
    sec.push(Block::Table(t));
    for n in &run.header.notes {
        sec.push(Block::Para(n.clone()));
    }
    vec![sec]
}

/// An assessment's grid as a table: the labels under `first`, a numeric
/// column per load.
fn grid_table(g: &Grid, first: &str) -> Table {
    let mut head = vec![first.to_string()];
    head.extend(g.columns.iter().cloned());
    let mut t = Table::new(head, 1);
    for (label, cells) in &g.rows {
        let mut r = vec![label.clone()];
        r.extend(cells.iter().cloned());
        t.row(r);
    }
    t
}

/// An assessment's matrix: the worst case and the p99.9 of every probe
/// metric (rows) under every load (columns), and the CPU score.
fn matrix(a: &Analysed, p: &str) -> Vec<Section> {
    let run = a.run;
    if !run.is_matrix() {
        return Vec::new();
    }
    let grids = matrix_grids(run);
    if grids.is_empty() && run.cpu_score.is_none() {
        return Vec::new();
    }
    let mut sec = Section::new(format!("{p}-matrix"), "Assessment: probes under each load");
    if let Some(l) = score_line(run) {
        sec.push(Block::Para(l));
    }
    for g in &grids {
        sec.push(Block::Para(g.title.clone()));
        sec.push(Block::Table(grid_table(g, "probe metric")));
    }
    if !grids.is_empty() {
        sec.push(Block::Para(matrix_legend(run)));
    }
    vec![sec]
}

/// What each load did to the machine: the kernel's counters per second, a
/// column per load.
fn characterisation(a: &Analysed, p: &str) -> Vec<Section> {
    let run = a.run;
    let Some(g) = characterisation_grid(run) else { return Vec::new() };
    let mut sec = Section::new(format!("{p}-characterisation"), "Loads' characterisation");
    sec.push(Block::Para(g.title.clone()));
    sec.push(Block::Table(grid_table(&g, "counter")));
    vec![sec]
}

/// The machine and the run's setup: inventory, kernel and preemption
/// model, and every tuning warning with its fix.
fn machine(a: &Analysed, p: &str) -> Vec<Section> {
    let h = &a.run.header;
    let mut sec = Section::new(format!("{p}-machine"), "Machine and setup");
    let rows = super::machine::rows(a.run);
    let mut t = Table::new(vec!["".into(), "".into()], 2);
    for (k, v) in rows {
        t.row(vec![k.into(), v]);
    }
    sec.push(Block::Table(t));
    let mut ws: Vec<_> = h.warnings.iter().collect();
    ws.sort_by_key(|w| w.is_informational());
    for w in ws {
        sec.push(Block::Warning { serious: !w.is_informational(), message: w.message.clone(), fix: w.fix.clone() });
    }
    vec![sec]
}

/// The share of samples at or above each value, from the histogram: (us,
/// fraction) at each non-empty bucket's lowest value above zero, then the
/// overflows at the exact maximum. Negative and zero values count in the
/// total but have no place on a log axis.
pub fn exceedance_points(t: &Tally) -> Vec<(f64, f64)> {
    let n = t.count();
    let mut pts = Vec::new();
    if n == 0 {
        return pts;
    }
    let (min, max) = (t.min(), t.max());
    // Samples >= 0 (the histogram's positive side plus its overflows).
    let mut at_or_above = t.stats.count;
    for [lo, _, c] in signed_buckets(t) {
        if lo < 0 {
            continue;
        }
        if lo > 0 {
            pts.push((lo.clamp(min, max) as f64 / 1000.0, at_or_above as f64 / n as f64));
        }
        at_or_above -= c as u64;
    }
    if t.stats.overflows > 0 {
        pts.push((max as f64 / 1000.0, t.stats.overflows as f64 / n as f64));
    }
    pts
}

/// An interval's min, mean and max (us), signed series included; None when empty.
fn interval_bar(iv: &Interval, start_mono_ns: u64) -> Option<IntervalBar> {
    let (pos, neg) = (&iv.stats, iv.neg.as_ref().map(|n| &n.stats));
    let n = pos.count + neg.map_or(0, |s| s.count);
    if n == 0 {
        return None;
    }
    let min = match neg {
        Some(s) if s.count > 0 => -(s.max as f64),
        _ => pos.min as f64,
    };
    let max = if pos.count > 0 { pos.max as f64 } else { -(neg.map_or(0, |s| s.min) as f64) };
    let sum = pos.sum as f64 - neg.map_or(0.0, |s| s.sum as f64);
    let s = |t: u64| t.saturating_sub(start_mono_ns) as f64 / 1e9;
    Some(IntervalBar {
        t0_s: s(iv.start_ns),
        t1_s: s(iv.end_ns),
        min: min / 1000.0,
        mean: sum / n as f64 / 1000.0,
        max: max / 1000.0,
    })
}

/// The checkpoint intervals of one cell's series (its CPUs), from the
/// cell's first interval: the i-th interval of every series together
/// (lowest min, highest max, the mean weighted by the samples).
fn cell_bars(list: &[&Series]) -> Vec<IntervalBar> {
    let start = list.iter().flat_map(|s| s.intervals.iter().map(|iv| iv.start_ns)).min().unwrap_or(0);
    let per: Vec<Vec<(IntervalBar, f64)>> = list
        .iter()
        .map(|s| {
            s.intervals
                .iter()
                .filter_map(|iv| {
                    let n = iv.stats.count + iv.neg.as_ref().map_or(0, |n| n.stats.count);
                    interval_bar(iv, start).map(|b| (b, n as f64))
                })
                .collect()
        })
        .collect();
    let len = per.iter().map(Vec::len).max().unwrap_or(0);
    (0..len)
        .filter_map(|k| {
            let at: Vec<&(IntervalBar, f64)> = per.iter().filter_map(|p| p.get(k)).collect();
            let n: f64 = at.iter().map(|(_, n)| n).sum();
            let first = at.first()?.0;
            Some(IntervalBar {
                t0_s: at.iter().map(|(b, _)| b.t0_s).fold(first.t0_s, f64::min),
                t1_s: at.iter().map(|(b, _)| b.t1_s).fold(first.t1_s, f64::max),
                min: at.iter().map(|(b, _)| b.min).fold(first.min, f64::min),
                mean: at.iter().map(|(b, w)| b.mean * w).sum::<f64>() / n.max(1.0),
                max: at.iter().map(|(b, _)| b.max).fold(first.max, f64::max),
            })
        })
        .collect()
}

/// Curves beyond this many go to one plot per metric.
const CURVES_PER_PLOT: usize = 14;

/// Per probe: its figures, the exceedance plot, the power-of-two table and
/// min / mean / max per checkpoint interval.
fn probes(a: &Analysed, p: &str) -> Vec<Section> {
    // The descriptor table's order (wakeup first), as the summary's rows.
    let mut by_probe = series_by_probe(a.run);
    by_probe.sort_by_key(|(p, _)| descriptor::rank(p));
    by_probe
        .into_iter()
        .filter(|(probe, _)| !descriptor::per_test(probe))
        .map(|(probe, list)| probe_section(a, p, probe, &list))
        .collect()
}

/// One probe's series, as its section shows them: the anchors' prefix,
/// the probe and what its values are, its metrics in order and its series
/// (metrics in that order, CPUs within); `with_loads` in an assessment.
struct ProbeRows<'r> {
    p: &'r str,
    probe: &'r str,
    name: &'static str,
    metrics: Vec<&'r str>,
    rows: Vec<&'r Series>,
    with_loads: bool,
}

/// One probe's section: what it measures, its settings and figures, then
/// its exceedance plots, power-of-two tables, stored exceedances and
/// checkpoint intervals.
fn probe_section(a: &Analysed, p: &str, probe: &str, list: &[&Series]) -> Section {
    let run = a.run;
    let metrics = metrics_in_order(run, list);
    let (cols, what) = layout(probe);
    let name = value_name(probe);
    let title = if metrics.len() == 1 && what.is_empty() {
        format!("{probe}: {} (us)", metrics[0])
    } else {
        format!("{probe}: {name} (us)")
    };
    let mut sec = Section::new(format!("{p}-probe-{probe}"), title);
    if !what.is_empty() {
        sec.push(Block::Para(format!("{probe} {what}")));
    } else if let Some(explain) = descriptor::find(probe).map(|d| d.explain).filter(|e| !e.is_empty()) {
        sec.push(Block::Para(explain.into()));
    }
    if let Some(d) = run.plan["describe"].as_str().filter(|d| !d.is_empty()) {
        sec.push(Block::Para(format!("settings: {d}")));
    }
    // Metrics in the probe's order, CPUs within.
    let rows: Vec<&Series> =
        metrics.iter().flat_map(|m| list.iter().filter(move |s| s.key.metric == *m).copied()).collect();
    sec.push(Block::Table(figures_table(cols, metrics.len() > 1, &rows)));
    let with_loads = list.iter().any(|s| s.key.load.is_some());
    let pr = ProbeRows { p, probe, name, metrics, rows, with_loads };
    exceedance_figures(a, &pr, &mut sec);
    pow2_blocks(&pr, &mut sec);
    let exc: u64 = pr.rows.iter().map(|s| s.exceedance_count()).sum();
    let lost: u64 = pr.rows.iter().map(|s| s.lost_exceedances()).sum();
    sec.push(Block::Para(format!(
        "exceedances stored: {exc} ({}){}",
        pr.rows[0].exceed,
        if lost > 0 { format!(", {lost} lost") } else { String::new() }
    )));
    interval_figures(run, &pr, &mut sec);
    sec
}

/// A probe's exceedance plot, a curve per series; beyond
/// `CURVES_PER_PLOT` curves of several metrics, a smaller plot per metric,
/// two a row.
fn exceedance_figures(a: &Analysed, pr: &ProbeRows, sec: &mut Section) {
    let ProbeRows { p, probe, name, metrics, rows, .. } = pr;
    let groups: Vec<Vec<&Series>> = if rows.len() > CURVES_PER_PLOT && metrics.len() > 1 {
        metrics.iter().map(|m| rows.iter().filter(|s| s.key.metric == *m).copied().collect()).collect()
    } else {
        vec![rows.clone()]
    };
    // One plot per metric when there are many: smaller, two a row.
    let small = groups.len() > 1;
    let mut svgs = Vec::new();
    for (gi, group) in groups.iter().enumerate() {
        let mut group_metrics: Vec<&str> = group.iter().map(|s| s.key.metric.as_str()).collect();
        group_metrics.dedup();
        let req = a.limit_us(probe, &group_metrics);
        let curves: Vec<Curve> = group
            .iter()
            .map(|s| Curve {
                label: if small { series_label(s, 1) } else { series_label(s, metrics.len()) },
                points: exceedance_points(s.total()),
            })
            .collect();
        let n: u64 = group.iter().map(|s| s.total().count()).sum();
        let which = if small { format!(" {}", group[0].key.metric) } else { String::new() };
        let id = format!("{p}-exc-{probe}-{gi}");
        if small {
            let title = format!("{probe}{which}: % of samples at or over each {name}");
            svgs.push(svg::exceedance_sized(&id, &title, &format!("{name} (us)"), &curves, req, (575.0, 330.0)));
            continue;
        }
        let title = format!("{probe}{which}: percent of samples at or over each {name}");
        let svg = svg::exceedance(&id, &title, &format!("{name} (us)"), &curves, req);
        let signed = group.iter().any(|s| s.is_signed());
        sec.push(Block::Figure {
            svg,
            caption: format!(
                "{title} (log-log; {n} samples; read a curve as \"this share of samples took at least this long\"{}{})",
                if signed {
                    "; values at or below zero count in the total but have no place on the log axis"
                } else {
                    ""
                },
                if req.is_some() { "; dashed red: the requirement" } else { "" }
            ),
        });
    }
    if !svgs.is_empty() {
        let signed = rows.iter().any(|s| s.is_signed());
        sec.push(Block::Figures(
            svgs,
            format!(
                "{probe}: a plot per metric, the percent of samples at or over each {name} (log-log), a curve per \
                 CPU{}{}",
                if signed {
                    "; values at or below zero count in the total but have no place on the log axis"
                } else {
                    ""
                },
                if a.limit_us(probe, metrics).is_some() { "; dashed red: the requirement" } else { "" }
            ),
        ));
    }
}

/// A probe's power-of-two tables: one of its CPUs with one metric, else
/// one per CPU, a column per metric. An assessment's many series make them
/// long, and the plots carry them; there they are the Markdown report's
/// only.
fn pow2_blocks(pr: &ProbeRows, sec: &mut Section) {
    let ProbeRows { probe, metrics, rows, with_loads, .. } = pr;
    let with_loads = *with_loads;
    let pow2_block = |t: Table| if with_loads { Block::FigureData(t) } else { Block::Table(t) };
    // CPU N, or thread TID for a watched thread's series.
    let word = descriptor::key_word(probe);
    if metrics.len() == 1 {
        let sep = if descriptor::per_thread(probe) { " " } else { "" };
        for t in pow2_tables(rows, |s| format!("{word}{sep}{}{}", s.key.cpu, load_suffix(s))) {
            sec.push(pow2_block(t));
        }
        return;
    }
    let mut cpus: Vec<i64> = rows.iter().map(|s| s.key.cpu).collect();
    cpus.sort_unstable();
    cpus.dedup();
    for cpu in cpus {
        let of_cpu: Vec<&Series> = rows.iter().filter(|s| s.key.cpu == cpu).copied().collect();
        let tables = pow2_tables(&of_cpu, |s| format!("{}{}", s.key.metric, load_suffix(s)));
        if !with_loads {
            sec.push(Block::Para(format!("{word} {cpu}")));
        }
        for mut t in tables {
            if with_loads {
                t.head[0] = format!("histogram {word} {cpu}");
            }
            sec.push(pow2_block(t));
        }
    }
}

/// Min, mean and max of every checkpoint interval: a plot per series; in
/// an assessment per metric and load, its CPUs together (each cell over
/// its own time).
fn interval_figures(run: &Run, pr: &ProbeRows, sec: &mut Section) {
    let ProbeRows { p, probe, name, metrics, rows, with_loads } = pr;
    let mut cells: Vec<Vec<&Series>> = Vec::new();
    for s in rows {
        match cells.iter_mut().find(|c| *with_loads && c[0].key.metric == s.key.metric && c[0].key.load == s.key.load) {
            Some(c) => c.push(s),
            None => cells.push(vec![s]),
        }
    }
    let plots: Vec<String> = cells
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let bars = cell_bars(c);
            let label = if c.len() > 1 {
                let m = if metrics.len() > 1 { format!("{} ", c[0].key.metric) } else { String::new() };
                format!("{m}{} CPUs{}", c.len(), load_suffix(c[0]))
            } else {
                series_label(c[0], metrics.len())
            };
            (!bars.is_empty())
                .then(|| svg::intervals(&format!("{p}-iv-{probe}-{i}"), &label, &format!("{name} (us)"), &bars))
        })
        .collect();
    if !plots.is_empty() {
        // The plan's interval, else the series' own (the longest but the last, which a stop cuts short).
        let own = || {
            let iv = &cells.first()?.first()?.intervals;
            let n = iv.len().saturating_sub(1).max(1);
            iv.iter().take(n).map(|i| i.end_ns.saturating_sub(i.start_ns)).max().filter(|&d| d > 0)
        };
        let every = match run.plan["common"]["checkpoint_ns"].as_u64().or_else(own) {
            Some(ns) => format!("every checkpoint interval ({})", units::human(ns / 1_000_000 * 1_000_000)),
            None => "every checkpoint interval".into(),
        };
        sec.push(Block::Figures(
            plots,
            format!(
                "{probe}: min, mean and max of {every}, a plot per {}, over the cell's \
                 own time (bar: min to max, tick: mean)",
                if *with_loads { "metric and load, its CPUs together" } else { "series" }
            ),
        ));
    }
}

/// `rtscope osbench`: a table per test group, a row per test (as the text
/// report), and the group's exceedance plot, a curve per test. In an
/// assessment, a row per test and load, and a plot per test, a curve per
/// load.
fn osbench(a: &Analysed, p: &str) -> Vec<Section> {
    let run = a.run;
    let list: Vec<&Series> = run.series.iter().filter(|s| descriptor::per_test(&s.key.probe)).collect();
    if list.is_empty() {
        return Vec::new();
    }
    let loads = run.loads();
    let by_load = list.iter().any(|s| s.key.load.is_some());
    let mut sec = Section::new(format!("{p}-osbench"), "osbench: OS services (us per operation)");
    sec.push(Block::Para(OSBENCH_LEGEND.into()));
    sec.push(Block::Para(super::text::osbench_timer(run)));
    if let Some(d) = osbench_describe(run, by_load).filter(|d| !d.is_empty()) {
        sec.push(Block::Para(format!("settings: {d}")));
    }
    if by_load {
        sec.push(Block::Para(format!(
            "measured in each load's cell ({}): a row per test and load, [load] after the id",
            loads.join(", ")
        )));
    }
    for (gi, g) in osbench_groups(&list, &loads).into_iter().enumerate() {
        sec.push(Block::Para(g.title.clone()));
        let mut t = Table::new(OSBENCH_HEAD.map(|(h, _)| h.to_string()).to_vec(), 0);
        for i in [1, 2, 4, 5, 6] {
            t.numeric[i] = false;
        }
        for (cells, _, _) in &g.rows {
            t.row(cells.clone());
        }
        sec.push(Block::Table(t));
        for (cells, note, _) in &g.rows {
            if let Some(n) = note {
                sec.push(Block::Para(format!("{}: {n}", cells[1])));
            }
        }
        if let Some(f) = if by_load { osbench_load_figures(p, gi, &g) } else { osbench_figure(p, gi, &g) } {
            sec.push(f);
        }
    }
    sec.push(Block::Para(osbench_total(&list)));
    vec![sec]
}

/// osbench's settings line: the run's, or in an assessment its cell's.
fn osbench_describe(run: &Run, by_load: bool) -> Option<&str> {
    if by_load {
        run.plan["cells"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["probe"].as_str().is_some_and(descriptor::per_test))
            .and_then(|c| c["describe"].as_str())
    } else {
        run.plan["describe"].as_str()
    }
}

/// In an assessment: an osbench group's plots, one per test, a curve per
/// load; none when no test has a sample.
fn osbench_load_figures(p: &str, gi: usize, g: &OsbenchGroup) -> Option<Block> {
    let mut metrics: Vec<&str> = Vec::new();
    for (_, _, s) in &g.rows {
        if !metrics.contains(&s.key.metric.as_str()) {
            metrics.push(&s.key.metric);
        }
    }
    let svgs: Vec<String> = metrics
        .iter()
        .enumerate()
        .filter_map(|(mi, m)| {
            let curves: Vec<Curve> = g
                .rows
                .iter()
                .filter(|(_, _, s)| s.key.metric == *m)
                .map(|(_, _, s)| Curve { label: load_of(s).to_string(), points: exceedance_points(s.total()) })
                .filter(|c| !c.points.is_empty())
                .collect();
            (!curves.is_empty()).then(|| {
                let title = format!("osbench {m}: % of operations at or over each time");
                svg::exceedance_sized(
                    &format!("{p}-exc-osbench-{gi}-{mi}"),
                    &title,
                    "time per operation (us)",
                    &curves,
                    None,
                    (575.0, 300.0),
                )
            })
        })
        .collect();
    (!svgs.is_empty())
        .then(|| Block::Figures(svgs, format!("{}: a plot per test, a curve per load (log-log)", g.title)))
}

/// An osbench group's exceedance plot, a curve per test (the first
/// `CURVES_PER_PLOT`); none when no test has a sample.
fn osbench_figure(p: &str, gi: usize, g: &OsbenchGroup) -> Option<Block> {
    let curves: Vec<Curve> = g
        .rows
        .iter()
        .take(CURVES_PER_PLOT)
        .map(|(cells, _, s)| Curve { label: cells[1].clone(), points: exceedance_points(s.total()) })
        .filter(|c| !c.points.is_empty())
        .collect();
    if curves.is_empty() {
        return None;
    }
    let title = format!("{}: percent of operations at or over each time", g.title);
    let svg = svg::exceedance(&format!("{p}-exc-osbench-{gi}"), &title, "time per operation (us)", &curves, None);
    Some(Block::Figure {
        svg,
        caption: format!(
            "{title} (log-log; a curve per test{})",
            if g.rows.len() > CURVES_PER_PLOT {
                format!(", the first {CURVES_PER_PLOT} of {}", g.rows.len())
            } else {
                String::new()
            }
        ),
    })
}

/// The figures of `rows` in the probe's columns.
fn figures_table(cols: &[Col], with_metric: bool, rows: &[&Series]) -> Table {
    let cols = &super::text::shown(cols, rows);
    let with_load = rows.iter().any(|s| !load_of(s).is_empty());
    let mut head: Vec<String> = Vec::new();
    if with_load {
        head.push("load".into());
    }
    if with_metric {
        head.push("metric".into());
    }
    head.push("CPU".into());
    head.extend(cols.iter().map(|c| c.header().to_string()));
    let mut t = Table::new(head, usize::from(with_metric) + usize::from(with_load));
    for s in rows {
        let m = s.total().summary();
        let mut cells = Vec::new();
        if with_load {
            cells.push(load_of(s).to_string());
        }
        if with_metric {
            cells.push(s.key.metric.clone());
        }
        cells.push(s.key.cpu.to_string());
        cells.extend(cols.iter().map(|c| c.value(s, &m)));
        t.row(cells);
    }
    t
}

/// Series per power-of-two table: more make a table wider than the page.
const POW2_COLUMNS: usize = 8;

/// The power-of-two tables of `list`, a column per series, at most
/// [`POW2_COLUMNS`] series each.
fn pow2_tables(list: &[&Series], label: impl Fn(&Series) -> String) -> Vec<Table> {
    list.chunks(POW2_COLUMNS).filter_map(|c| pow2(c, &label)).collect()
}

/// The power-of-two table of `list`, a column per series.
fn pow2(list: &[&Series], label: impl Fn(&Series) -> String) -> Option<Table> {
    let rows = pow2_columns(list);
    if rows.is_empty() {
        return None;
    }
    let mut head = vec!["histogram".to_string()];
    head.extend(list.iter().map(|s| label(s)));
    let mut t = Table::new(head, 1);
    for (b, counts) in rows {
        let mut cells = vec![bucket_label(&b)];
        cells.extend(counts.iter().map(u64::to_string));
        t.row(cells);
    }
    Some(t)
}

/// A traced run's stages, a section per probe with stages (an assessment
/// may trace wakeup's timer path and netlat's receive path): mean per
/// stage, CPU and load as stacked bars (the relative stages add up to the
/// latency), the stage table, and the stages of the worst episodes.
fn stages(a: &Analysed, p: &str) -> Vec<Section> {
    stages_of(a.run, p)
}

fn stages_of(run: &Run, p: &str) -> Vec<Section> {
    let mut probes = stages_by_probe(run);
    for e in run.episodes.iter().filter(|e| e.stages.is_some()) {
        if !probes.iter().any(|(q, _)| *q == e.probe) {
            probes.push((&e.probe, Vec::new()));
        }
    }
    probes.into_iter().map(|(probe, stage)| probe_stages(run, probe, &stage, &format!("{p}-{probe}"))).collect()
}

fn probe_stages(run: &Run, probe: &str, stage: &[&Series], p: &str) -> Section {
    let (names, series) = Stages::of_probe(probe);
    let what = descriptor::wake_path(probe).total();
    let mut sec = Section::new(format!("{p}-stages"), format!("{probe}: where the {what} goes (stages)"));
    sec.push(Block::Para(stages_text(probe).into()));
    // (CPU, load) in the order of the series.
    let mut keys: Vec<(i64, Option<&str>)> = Vec::new();
    for s in stage {
        let k = (s.key.cpu, s.key.load.as_deref());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let find = |(cpu, load): (i64, Option<&str>), name: &str| {
        stage.iter().find(|s| s.key.cpu == cpu && s.key.load.as_deref() == load && s.key.metric == name).copied()
    };
    let bars: Vec<(String, Vec<f64>)> = keys
        .iter()
        .filter(|&&k| names.iter().all(|n| find(k, n).is_some()))
        .map(|&k| {
            let means = names.iter().map(|n| find(k, n).map_or(0.0, |s| s.total().mean() / 1000.0)).collect();
            let load = k.1.map(|l| format!(" [{l}]")).unwrap_or_default();
            (format!("CPU {}{load} mean", k.0), means)
        })
        .collect();
    if !bars.is_empty() {
        sec.push(Block::Figure {
            svg: svg::stacked(&format!("{p}-stages-mean"), "mean time per stage", "us", names, &bars),
            caption: format!(
                "Mean time per stage, CPU and load (us), stacked: the bar's length is the mean {what} of the \
                 decomposed samples"
            ),
        });
    }
    if !stage.is_empty() {
        let rows: Vec<&Series> = keys.iter().flat_map(|&k| series.iter().filter_map(move |n| find(k, n))).collect();
        use Col::*;
        sec.push(Block::Table(figures_table(&[Count("samples"), Min, Mean, P50, P99, P999, Max], true, &rows)));
    }
    let worst: Vec<(String, Vec<f64>)> = run
        .episodes
        .iter()
        .filter(|e| e.probe == probe)
        .filter_map(|e| e.stages.map(|s| (e, s)))
        .take(12)
        .map(|(e, s)| {
            let load = e.load.as_deref().map(|l| format!(" [{l}]")).unwrap_or_default();
            (format!("cpu{} #{}{load}", e.cpu, e.sample), s.values().iter().map(|v| *v as f64 / 1000.0).collect())
        })
        .collect();
    if !worst.is_empty() {
        sec.push(Block::Figure {
            svg: svg::stacked(&format!("{p}-stages-worst"), "stages of the worst episodes", "us", names, &worst),
            caption: format!("Stages of the {} worst explained samples (us), worst first", worst.len()),
        });
    }
    sec
}

/// Which sources account for how much of the tail, and (noise) every
/// sample by kind of cause.
fn causes(a: &Analysed, p: &str) -> Vec<Section> {
    let run = a.run;
    let by_kind = run.trace.as_ref().is_some_and(|t| t.per_cpu.iter().any(|c| !c.by_kind.is_empty()));
    if run.episodes.is_empty() && !by_kind {
        return Vec::new();
    }
    let mut sec = Section::new(format!("{p}-causes"), "Causes");
    let top = top_causes(&run.episodes);
    if !top.is_empty() {
        sec.push(Block::Para(format!("top causes over {} episodes", run.episodes.len())));
        let mut t = Table::new(
            ["kind", "source", "main in", "seen in", "total (us)", "share", "max (us)"].map(String::from).to_vec(),
            2,
        );
        for r in top.iter().take(25) {
            t.row(vec![
                r.kind.as_str().into(),
                r.name.clone(),
                r.main_in.to_string(),
                r.seen_in.to_string(),
                us(r.total_ns),
                format!("{:.1}%", r.share_pct),
                us(r.max_ns),
            ]);
        }
        sec.push(Block::Table(t));
    }
    if let Some(tr) = run.trace.as_ref().filter(|_| by_kind) {
        sec.push(Block::Para("every sample by cause (a sample counts once per kind it contains)".into()));
        let mut t =
            Table::new(["CPU", "kind", "samples", "main in", "total (us)", "share"].map(String::from).to_vec(), 2);
        for c in &tr.per_cpu {
            let all: u64 = c.by_kind.iter().map(|k| k.ns).sum();
            for k in &c.by_kind {
                let share = if all == 0 { 0.0 } else { 100.0 * k.ns as f64 / all as f64 };
                t.row(vec![
                    c.cpu.to_string(),
                    k.kind.as_str().into(),
                    k.samples.to_string(),
                    k.main.to_string(),
                    us(k.ns),
                    format!("{share:.1}%"),
                ]);
            }
        }
        sec.push(Block::Table(t));
    }
    vec![sec]
}

/// Every stored episode: its verdict and its CPU's timeline.
fn episodes(a: &Analysed, p: &str) -> Vec<Section> {
    let run = a.run;
    if run.episodes.is_empty() {
        return Vec::new();
    }
    const LANES: [(Lane, &str); 4] =
        [(Lane::Stage, "stages"), (Lane::Task, "tasks"), (Lane::Irq, "hard irq"), (Lane::Softirq, "softirq")];
    let mut sec = Section::new(format!("{p}-episodes"), format!("Episodes ({}, worst first)", run.episodes.len()));
    for (i, e) in run.episodes.iter().enumerate() {
        sec.push(Block::Code(vec![e.verdict.clone()]));
        if e.slices.is_empty() {
            continue;
        }
        let rel = |t: u64| (t as i128 - e.programmed_ns as i128) as f64 / 1000.0;
        let bars: Vec<Bar> = e
            .slices
            .iter()
            .map(|s| Bar {
                lane: LANES.iter().position(|(l, _)| *l == s.lane).unwrap_or(1),
                name: s.name.clone(),
                start_us: rel(s.start_ns),
                dur_us: s.dur_ns as f64 / 1000.0,
            })
            .collect();
        let lanes = LANES.map(|(_, n)| n);
        let svg = svg::timeline(
            &format!("{p}-ep-{i}"),
            &e.verdict,
            &lanes,
            &bars,
            &[(0.0, "programmed"), (rel(e.woke_ns), "woke")],
        );
        sec.push(Block::Figure {
            svg,
            caption: format!("cpu{} #{}: the CPU from the probe's previous wake-up to this one", e.cpu, e.sample),
        });
    }
    vec![sec]
}

/// What the tracer did: events, losses, its cost, samples explained.
fn tracer(a: &Analysed, p: &str) -> Vec<Section> {
    let run = a.run;
    let Some(t) = &run.trace else { return Vec::new() };
    let mut sec = Section::new(format!("{p}-trace"), "Tracer");
    sec.push(Block::Para(format!(
        "instance {}, clock {}, {} KiB per CPU; reader thread {:.2}% of a CPU; {} episodes built, {} kept; cause threshold {}",
        t.instance, t.clock, t.buffer_kb_per_cpu, t.reader_cpu_pct, t.episodes_built, t.episodes_kept, t.cause_threshold
    )));
    for m in &t.missing {
        sec.push(Block::Warning {
            serious: true,
            message: format!("missing event {m}"),
            fix: "see docs/trace.md (Degrading)".into(),
        });
    }
    let mut tab = Table::new(
        [
            "CPU",
            "events",
            "lost",
            "samples",
            "decomposed",
            "incomplete",
            "switch inferred",
            "not handed over",
            "read errors",
        ]
        .map(String::from)
        .to_vec(),
        0,
    );
    for c in &t.per_cpu {
        tab.row(
            [
                c.cpu as u64,
                c.events,
                c.lost,
                c.samples,
                c.decomposed,
                c.incomplete,
                c.switch_inferred,
                c.samples_dropped,
                c.read_errors,
            ]
            .iter()
            .map(u64::to_string)
            .collect(),
        );
    }
    sec.push(Block::Table(tab));
    vec![sec]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An assessment traced both wakeup's timer path and netlat's receive
    /// path: a stage section each, with its own stage names and text, a
    /// bar per CPU and load.
    #[test]
    fn each_probe_with_stages_gets_its_own_section() {
        let mut run = rtscope_model::export::read_json(include_str!("../../tests/data/report-run.json"), "fixture")
            .expect("the fixture reads");
        let timer: Vec<Series> =
            run.series.iter().filter(|s| Stages::SERIES.contains(&s.key.metric.as_str())).cloned().collect();
        assert!(!timer.is_empty());
        for (load, probe) in [("idle", "wakeup"), ("cpu", "wakeup"), ("idle", "netlat")] {
            for s in &timer {
                let mut s = s.clone();
                let i = Stages::SERIES.iter().position(|m| *m == s.key.metric).unwrap();
                s.key.probe = probe.into();
                s.key.metric = Stages::of_probe(probe).1[i].into();
                s.key.load = Some(load.into());
                run.series.push(s);
            }
        }
        run.series.retain(|s| !super::super::text::is_stage(s) || s.key.load.is_some());
        let secs = stages_of(&run, "r");
        assert_eq!(secs.len(), 2);
        let text = |sec: &Section| format!("{sec:?}");
        let (w, n) = (text(&secs[0]), text(&secs[1]));
        assert!(w.contains("r-wakeup-stages") && w.contains("programmed time") && !w.contains("NET_RX"), "{w}");
        assert!(n.contains("r-netlat-stages") && n.contains("NET_RX") && n.contains("rx_wake goes"), "{n}");
        assert!(w.contains("[idle] mean") && w.contains("[cpu] mean"), "a bar per CPU and load: {w}");
        assert!(n.contains("queue") && !n.contains("\"irq\""), "{n}");
    }

    #[test]
    fn exceedance_points_fall_from_the_share_above_zero_to_the_rarest() {
        let mut t = Tally::new();
        for v in [0u64, 1_000, 2_000, 2_000, 150_000_000_000] {
            t.record(v);
        }
        let pts = exceedance_points(&t);
        assert_eq!(pts.first().unwrap().1, 0.8, "4 of 5 samples are at or above 1 us");
        assert!((pts[0].0 - 1.0).abs() < 0.01);
        assert!(pts.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 > w[1].1), "{pts:?}");
        assert_eq!(*pts.last().unwrap(), (150_000_000.0, 0.2), "the overflow at the exact maximum");
        let mut s = Tally::new_signed();
        for v in [-5_000i64, -1_000, 3_000, 9_000] {
            s.record_signed(v);
        }
        let pts = exceedance_points(&s);
        assert_eq!(pts[0].1, 0.5, "negative values count in the total only");
        assert!(exceedance_points(&Tally::new()).is_empty());
    }
}
