//! The text summary, in the style of the NT real-time study's tables: a row of
//! figures per CPU (and per metric, for probes with several), then the
//! power-of-two histogram with a column per CPU (or per metric).

use super::{Format, Input, Use, Written};
use anyhow::Result;
use rtscope_model::descriptor::{self, Layout, WakePath};
use rtscope_model::episode::{Stages, top_causes};
use rtscope_model::hist::{Bucket, Summary, pow2_table};
use rtscope_model::run::{Run, Series};
use rtscope_model::units::{self, ShownIn, us, us_i};
use std::io::Write;

pub struct Text;

pub(super) fn bucket_label(b: &Bucket) -> String {
    bucket_label_in(b, ShownIn::Us)
}

/// A histogram bucket's label in `unit` (`2-4 us`, `2048-4096 ns`).
fn bucket_label_in(b: &Bucket, unit: ShownIn) -> String {
    if b.lo_ns >= rtscope_model::hist::HIGHEST_NS as i64 {
        return format!("> {} s (overflow)", b.lo_ns / 1_000_000_000);
    }
    if b.hi_ns <= -(rtscope_model::hist::HIGHEST_NS as i64) {
        return format!("< -{} s (overflow)", -b.hi_ns / 1_000_000_000);
    }
    let per = if unit == ShownIn::Ns { 1 } else { 1000 };
    if b.hi_ns <= 0 {
        return format!("-({}-{}) {}", -b.hi_ns / per, -b.lo_ns / per, unit.label());
    }
    format!("{}-{} {}", b.lo_ns / per, b.hi_ns / per, unit.label())
}

/// A column of a result table: the probes' rows in the descriptor table
/// say which; [`ColFormat`] prints them.
pub(super) use rtscope_model::descriptor::Column as Col;
use rtscope_model::extra::{Figure, osbench as osb};

/// `cols` less the [`Col::Nonzero`] columns no row of `rows` has above 0.
pub(super) fn shown(cols: &[Col], rows: &[&Series]) -> Vec<Col> {
    let any = |f: &Figure| rows.iter().any(|s| f.get(&s.extra).is_some_and(|v| v.as_f64().is_some_and(|x| x != 0.0)));
    cols.iter().copied().filter(|c| !matches!(c, Col::Nonzero(key, _) if !any(key))).collect()
}

/// What each probe's rows show, and what a metric's values are: its row
/// in the descriptor table (a series of no known probe gets the common
/// columns).
pub(super) fn layout(probe: &str) -> (&'static [Col], &'static str) {
    match descriptor::find(probe).map(|d| d.layout) {
        Some(Layout::PerCpu { columns, what } | Layout::PerThread { columns, what }) => (columns, what),
        Some(Layout::Tests { .. }) | None => (descriptor::COLUMNS, ""),
    }
}

/// A row's figure in a column.
pub(super) trait ColFormat {
    /// The figure in microseconds.
    fn value(self, s: &Series, m: &Summary) -> String
    where
        Self: Sized,
    {
        self.value_in(s, m, ShownIn::Us)
    }
    /// The figure, its times in `unit`.
    fn value_in(self, s: &Series, m: &Summary, unit: ShownIn) -> String;
}

impl ColFormat for Col {
    fn value_in(self, s: &Series, m: &Summary, unit: ShownIn) -> String {
        match self {
            Col::Count(_) => m.count.to_string(),
            Col::Min => unit.i(m.min_ns),
            Col::Mean => unit.f(m.mean_ns),
            Col::P50 => unit.i(m.p50_ns),
            Col::P90 => unit.i(m.p90_ns),
            Col::P99 => unit.i(m.p99_ns),
            Col::P999 => unit.i(m.p999_ns),
            Col::P9999 => unit.i(m.p9999_ns),
            Col::Max => unit.i(m.max_ns),
            Col::Jitter => unit.u(m.jitter_ns()),
            Col::Overruns => s.overruns().to_string(),
            Col::Extra(f, _) | Col::Nonzero(f, _) => f.get(&s.extra).map_or_else(|| "-".into(), |v| f.text(v)),
        }
    }
}

impl Format for Text {
    fn name(&self) -> &'static str {
        "text"
    }

    fn extension(&self) -> &'static str {
        "txt"
    }

    fn description(&self) -> &'static str {
        "The summary: a table and a histogram per probe (an assessment: its matrix), then warnings and notes"
    }

    fn uses(&self) -> &'static [Use] {
        &[Use::Summary]
    }

    fn write(&self, input: &Input, out: &mut dyn Write) -> Result<Written> {
        let run = input.run()?;
        // An assessment, and any run `show` prints: the answer first, then
        // the details (or the details alone, for `rtscope run` to print the
        // answer last); `show`'s machine record first among the details.
        let answer = if (run.is_matrix() || input.machine) && !input.answer_last {
            Some(super::run_summary(input)?).filter(|s| !s.is_empty())
        } else {
            None
        };
        let how = How { machine: input.machine, colour: input.colour, unit: input.unit };
        write_summary(run, answer.as_ref(), how, out)?;
        Ok(Written::default())
    }
}

/// The machine and the run's setup (the report's "Machine and setup"
/// rows, each wrapped at the terminal's width), after when the run started
/// and ended; then a blank line.
fn write_machine(run: &Run, out: &mut dyn Write) -> Result<()> {
    let h = &run.header;
    let started = format!(
        "{} UTC{}",
        units::utc(h.started_unix_ns),
        h.ended_unix_ns.map(|e| format!(", ended {} UTC", units::utc(e))).unwrap_or_default()
    );
    let rows: Vec<(&str, String)> = std::iter::once(("started", started)).chain(super::machine::rows(run)).collect();
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in rows {
        writeln!(out, "{}", super::wrap::wrap(k, &v, width + 2))?;
    }
    writeln!(out)?;
    Ok(())
}

/// The probe's line, its tables (or the assessment's matrix), the trace,
/// the worst episodes, warnings and notes, the title and the prose wrapped
/// at the terminal's width; `machine`: the machine record first among the
/// details (`show`).
/// How the summary is written: with the machine record, in colour, its
/// tables' times in which unit.
#[derive(Clone, Copy)]
struct How {
    machine: bool,
    colour: bool,
    unit: ShownIn,
}

fn write_summary(run: &Run, answer: Option<&super::summary::Summary>, how: How, out: &mut dyn Write) -> Result<()> {
    let How { machine, colour, unit } = how;
    let h = &run.header;
    let elapsed =
        h.ended_unix_ns.map(|e| units::human(((e - h.started_unix_ns).max(0) as u64) / 1_000_000 * 1_000_000));
    let plan = &run.plan;
    // A loads-only run has no measuring threads.
    let sched = super::machine::scheduling(plan).map(|s| s + " · ").unwrap_or_default();
    let head = format!(
        "rtscope {} · run {} · {} · {} · {sched}{}{}",
        h.kind,
        h.id,
        h.status.as_str(),
        run.inventory.kernel_release,
        plan["describe"].as_str().map_or_else(|| plan["settings"].to_string(), String::from),
        elapsed.map(|e| format!(" · {e}")).unwrap_or_default()
    );
    writeln!(out, "{}", super::wrap::fields(&head, " · ", 2))?;
    if !h.representative {
        writeln!(out, "NOT REPRESENTATIVE: measured without real-time scheduling")?;
    }
    if let Some(a) = answer {
        writeln!(out)?;
        super::summary::write_text(a, out, colour, super::summary::Place::First)?;
        super::summary::write_details_rule(out)?;
    }
    if machine {
        write_machine(run, out)?;
    }
    if run.is_matrix() {
        super::matrix::write_score(run, out)?;
        super::matrix::write_matrix(run, out)?;
        super::matrix::write_characterisation(run, out)?;
    } else {
        write_probes(run, unit, out)?;
        write_stages(run, unit, out)?;
    }
    super::irqtime::write_text(run, out)?;
    // The trace's lines and the episodes: prose, wrapped where the rest is.
    let mut prose: Vec<u8> = Vec::new();
    write_trace(run, &mut prose)?;
    if !run.episodes.is_empty() {
        writeln!(prose, "\nworst episodes (all: rtscope show {} --episodes)", h.id)?;
        for e in run.episodes.iter().take(3) {
            writeln!(prose, "  {}{}", e.load.as_ref().map(|l| format!("[{l}] ")).unwrap_or_default(), e.verdict)?;
        }
        write_top_causes(run, &mut prose, 8)?;
    }
    let prose = String::from_utf8_lossy(&prose);
    write!(out, "{}", super::wrap::fit(&prose))?;
    let serious: Vec<_> = h.warnings.iter().filter(|w| !w.is_informational()).collect();
    let info: Vec<_> = h.warnings.iter().filter(|w| w.is_informational()).collect();
    if !serious.is_empty() || !info.is_empty() {
        writeln!(out)?;
    }
    // Wrapped at the terminal's width (the answer's width).
    let line = |label: &str, text: &str| super::wrap::wrap(label, text, label.len());
    for w in serious {
        writeln!(out, "{}", line("warning: ", &format!("{} (fix: {})", w.message, w.fix)))?;
    }
    for w in info {
        writeln!(out, "{}", line("note: ", &w.message))?;
    }
    for n in &h.notes {
        writeln!(out, "{}", line("note: ", n))?;
    }
    Ok(())
}

/// Each probe's table and histogram (a single probe's run).
fn write_probes(run: &Run, unit: ShownIn, out: &mut dyn Write) -> Result<()> {
    // Series by probe, metrics in the order the probe made them.
    let by_probe = series_by_probe(run);
    for (probe, list) in by_probe {
        if descriptor::per_test(probe) {
            osbench_tables(run, out, &list)?;
            continue;
        }
        let metrics = metrics_in_order(run, &list);
        let (cols, what) = layout(probe);
        if metrics.len() == 1 {
            let title = if what.is_empty() {
                format!("{probe} {} ({})", metrics[0], unit.label())
            } else {
                in_unit(&format!("{probe} {what}"), unit)
            };
            writeln!(out, "\n{title}")?;
            table(out, cols, None, &list, unit)?;
            histogram(out, &list, |s| format!("CPU{}", s.key.cpu), unit)?;
        } else {
            writeln!(out, "\n{}", in_unit(&format!("{probe} {what}"), unit))?;
            let rows: Vec<&Series> =
                metrics.iter().flat_map(|m| list.iter().filter(move |s| s.key.metric == *m).copied()).collect();
            let name = metrics.iter().map(|m| m.len()).max().unwrap_or(6).max(6);
            table(out, cols, Some(name), &rows, unit)?;
            let mut cpus: Vec<i64> = list.iter().map(|s| s.key.cpu).collect();
            cpus.sort_unstable();
            cpus.dedup();
            for cpu in cpus {
                let of_cpu: Vec<&Series> = rows.iter().filter(|s| s.key.cpu == cpu).copied().collect();
                writeln!(out, "\n{} {cpu}", key_header(&of_cpu))?;
                histogram(out, &of_cpu, |s| s.key.metric.clone(), unit)?;
            }
        }
    }
    Ok(())
}

/// A probe's title in `unit`: its `what` names microseconds (`latency
/// (us)`), which `--ns` makes nanoseconds.
fn in_unit(title: &str, unit: ShownIn) -> String {
    if unit == ShownIn::Us { title.to_string() } else { title.replace("(us", "(ns").replace(" us)", " ns)") }
}

/// The figures table: a row per series; with `metric_width`, a first
/// column names the metric. Each column as wide as its header or its
/// widest figure, so that a run's table keeps within the terminal's 100
/// columns.
fn table(
    out: &mut dyn Write,
    cols: &[Col],
    metric_width: Option<usize>,
    rows: &[&Series],
    unit: ShownIn,
) -> Result<()> {
    let cols = &shown(cols, rows);
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|s| {
            let m = s.total().summary();
            cols.iter().map(|c| c.value_in(s, &m, unit)).collect()
        })
        .collect();
    let widths: Vec<usize> = cols
        .iter()
        .enumerate()
        .map(|(i, c)| cells.iter().map(|r| r[i].chars().count()).max().unwrap_or(0).max(c.header().len()))
        .collect();
    if let Some(w) = metric_width {
        write!(out, "{:<w$} ", "metric")?;
    }
    write!(out, "{:>4}", key_header(rows))?;
    for (c, w) in cols.iter().zip(&widths) {
        write!(out, " {:>w$}", c.header())?;
    }
    writeln!(out)?;
    for (s, row) in rows.iter().zip(&cells) {
        if let Some(w) = metric_width {
            write!(out, "{:<w$} ", s.key.metric)?;
        }
        write!(out, "{:>4}", s.key.cpu)?;
        for (v, w) in row.iter().zip(&widths) {
            write!(out, " {v:>w$}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// What a row's key is: a CPU, or a watched thread's id.
fn key_header(rows: &[&Series]) -> &'static str {
    if rows.first().is_some_and(|s| descriptor::per_thread(&s.key.probe)) { "TID" } else { "CPU" }
}

/// What osbench's columns mean.
pub const OSBENCH_LEGEND: &str = "osbench, us per operation: (t1 - t0 - base) / IPS; base: the timing overhead subtracted (ns); IP: inter-process; CF: cache flushed before each sample; CPU: measured party's (>other party's); +equal: both parties at one priority (--priorities)";

/// osbench's columns, and their text widths (negative: left-aligned).
pub const OSBENCH_HEAD: [(&str, i32); 15] = [
    ("#", 3),
    ("id", -28),
    ("name", -36),
    ("IPS", 5),
    ("IP", 3),
    ("CF", 3),
    ("CPU", 5),
    ("samples", 7),
    ("last", 9),
    ("min", 9),
    ("mean", 9),
    ("p50", 9),
    ("p99", 9),
    ("max", 10),
    ("base", 5),
];

/// One group of osbench's tests: its title, and a row per test (and
/// variant) with its note and its series.
pub struct OsbenchGroup<'a> {
    pub title: String,
    pub rows: Vec<(Vec<String>, Option<String>, &'a Series)>,
}

/// `osbench`'s series as CEBench (the CE 3.0 real-time paper) and the SSC
/// benchmark (the Siemens CE 3.0 assessment) print them: a group per test
/// group, a row per test in its number's order, in [`OSBENCH_HEAD`]'s
/// columns (last, min, mean, p50, p99, max in us). In an assessment a
/// test has a row per load, in the order of `loads`, its id followed by
/// `[load]`.
pub fn osbench_groups<'a>(list: &[&'a Series], loads: &[String]) -> Vec<OsbenchGroup<'a>> {
    let x = |s: &Series, f: Figure| f.get(&s.extra).cloned().unwrap_or(serde_json::Value::Null);
    let yes = |v: serde_json::Value| if v.as_bool() == Some(true) { "yes" } else { "no" };
    let mut list = list.to_vec();
    let load_pos =
        |s: &Series| s.key.load.as_ref().map_or(0, |l| loads.iter().position(|x| x == l).unwrap_or(usize::MAX));
    list.sort_by_key(|s| (x(s, osb::NUM).as_u64().unwrap_or(u64::MAX), s.key.metric.clone(), load_pos(s)));
    // The groups as the probe's row in the descriptor table orders and titles them.
    let known = list.first().and_then(|s| descriptor::find(&s.key.probe)).map_or(&[][..], |d| d.test_groups());
    let order = |g: &str| known.iter().position(|x| x.name == g).unwrap_or(usize::MAX);
    let mut groups: Vec<String> = Vec::new();
    for s in &list {
        let g = x(s, osb::GROUP).as_str().unwrap_or("").to_string();
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    groups.sort_by_key(|g| order(g));
    groups
        .into_iter()
        .map(|g| {
            let title = known.iter().find(|x| x.name == g).map_or(g.as_str(), |x| x.title).to_string();
            let rows = list
                .iter()
                .filter(|s| x(s, osb::GROUP).as_str() == Some(g.as_str()))
                .map(|s| {
                    let m = s.total().summary();
                    let cpu = match x(s, osb::OTHER_CPU).as_i64() {
                        Some(o) if o != s.key.cpu => format!("{}>{o}", s.key.cpu),
                        _ => s.key.cpu.to_string(),
                    };
                    let cells = vec![
                        x(s, osb::NUM).as_u64().map_or("-".into(), |n| n.to_string()),
                        match &s.key.load {
                            Some(l) => format!("{} [{l}]", s.key.metric),
                            None => s.key.metric.clone(),
                        },
                        x(s, osb::NAME).as_str().unwrap_or("").to_string(),
                        x(s, osb::IPS).as_u64().unwrap_or(1).to_string(),
                        yes(x(s, osb::INTER_PROCESS)).to_string(),
                        yes(x(s, osb::CACHE_FLUSH)).to_string(),
                        cpu,
                        m.count.to_string(),
                        us(x(s, osb::LAST).as_u64().unwrap_or(0)),
                        us_i(m.min_ns),
                        units::us_f(m.mean_ns),
                        us_i(m.p50_ns),
                        us_i(m.p99_ns),
                        us_i(m.max_ns),
                        x(s, osb::BASE).as_u64().unwrap_or(0).to_string(),
                    ];
                    let paired = x(s, osb::PAIRED);
                    let paired = paired["p50_ratio"].as_f64().map(|r| {
                        format!(
                            "round by round, p50 {r:.3}x {} (the median of {} rounds taken in turns)",
                            paired["against"].as_str().unwrap_or("the test"),
                            paired["rounds"].as_u64().unwrap_or(0)
                        )
                    });
                    let notes: Vec<String> =
                        x(s, osb::NOTE).as_str().map(String::from).into_iter().chain(paired).collect();
                    (cells, (!notes.is_empty()).then(|| notes.join("; ")), *s)
                })
                .collect();
            OsbenchGroup { title, rows }
        })
        .collect()
}

/// The SSC benchmark's header line: the timer osbench reads, with its
/// resolution and read cost as the run's inventory measured them.
pub fn osbench_timer(run: &Run) -> String {
    let clock = run.inventory.clocks.iter().find(|c| c.name == "CLOCK_MONOTONIC");
    format!(
        "timer: CLOCK_MONOTONIC through the vDSO, {}",
        clock.map_or("its resolution not recorded with this run".into(), |c| {
            let d = c.describe();
            let rest = d.split_once(' ').map_or(d.as_str(), |(_, r)| r).to_string();
            format!("resolution {rest} (every clock: rtscope show {})", run.header.id)
        })
    )
}

/// The SSC benchmark's closing line: the tests, their samples and the time
/// spent measuring them (each test's intervals, its rounds, first sample to
/// last, summed).
pub fn osbench_total(list: &[&Series]) -> String {
    let samples: u64 = list.iter().map(|s| s.total().count()).sum();
    // Each interval (a round) once: a test's ways that took turns span
    // each other's rounds.
    let ns: u64 = list.iter().flat_map(|s| &s.intervals).map(|i| i.end_ns.saturating_sub(i.start_ns)).sum();
    format!(
        "total: {}, {samples} samples, {} measuring",
        units::plural(list.len(), "test"),
        units::human(ns / 1_000_000 * 1_000_000)
    )
}

/// `osbench`: a table per test group, a row per test (and variant),
/// between the SSC benchmark's timer header and total line.
fn osbench_tables(run: &Run, out: &mut dyn Write, list: &[&Series]) -> Result<()> {
    writeln!(out, "\n{OSBENCH_LEGEND}")?;
    writeln!(out, "{}", osbench_timer(run))?;
    let line = |out: &mut dyn Write, cells: &[&str]| -> Result<()> {
        let mut l = String::new();
        for (i, (c, (_, w))) in cells.iter().zip(OSBENCH_HEAD).enumerate() {
            if i > 0 {
                l.push(' ');
            }
            let n = w.unsigned_abs() as usize;
            l.push_str(&if w < 0 { format!("{c:<n$}") } else { format!("{c:>n$}") });
        }
        writeln!(out, "{l}")?;
        Ok(())
    };
    for g in osbench_groups(list, &[]) {
        writeln!(out, "\n{}", g.title)?;
        line(out, &OSBENCH_HEAD.map(|(h, _)| h))?;
        for (cells, note, _) in &g.rows {
            line(out, &cells.iter().map(String::as_str).collect::<Vec<_>>())?;
            if let Some(n) = note {
                writeln!(out, "    note: {n}")?;
            }
        }
    }
    writeln!(out, "\n{}", osbench_total(list))?;
    Ok(())
}

/// The run's measured series (stage series left out) by probe, in the
/// order the run stored them.
pub(super) fn series_by_probe(run: &Run) -> Vec<(&str, Vec<&Series>)> {
    let mut by_probe: Vec<(&str, Vec<&Series>)> = Vec::new();
    for s in run.series.iter().filter(|s| !from_trace(s)) {
        match by_probe.iter_mut().find(|(p, _)| *p == s.key.probe) {
            Some((_, list)) => list.push(s),
            None => by_probe.push((&s.key.probe, vec![s])),
        }
    }
    by_probe
}

/// The metrics of `list`, in the order the probe made them (its plan's
/// `metrics`), else in the order stored.
pub(super) fn metrics_in_order<'a>(run: &Run, list: &[&'a Series]) -> Vec<&'a str> {
    let mut metrics: Vec<&str> = Vec::new();
    for s in list {
        if !metrics.contains(&s.key.metric.as_str()) {
            metrics.push(&s.key.metric);
        }
    }
    if let Some(order) = run.plan["metrics"].as_array() {
        let pos = |m: &str| order.iter().position(|o| o.as_str() == Some(m)).unwrap_or(usize::MAX);
        metrics.sort_by_key(|m| pos(m));
    }
    metrics
}

/// The power-of-two rows of `list`, a count per series: every row any
/// series has, from the first non-empty one (leading empty rows say
/// nothing); empty when nothing was recorded.
pub(super) fn pow2_columns(list: &[&Series]) -> Vec<(Bucket, Vec<u64>)> {
    let tables: Vec<Vec<Bucket>> = list.iter().map(|s| pow2_table(s.total())).collect();
    let mut rows: Vec<Bucket> = tables.iter().flatten().copied().collect();
    rows.sort_by_key(|b| b.lo_ns);
    rows.dedup_by_key(|b| b.lo_ns);
    let count = |t: &[Bucket], lo: i64| t.iter().find(|x| x.lo_ns == lo).map_or(0, |x| x.count);
    let Some(first) = rows.iter().position(|b| tables.iter().any(|t| count(t, b.lo_ns) > 0)) else {
        return Vec::new();
    };
    rows[first..].iter().map(|b| (*b, tables.iter().map(|t| count(t, b.lo_ns)).collect())).collect()
}

/// The power-of-two histogram of `list`, a column per series.
fn histogram(out: &mut dyn Write, list: &[&Series], label: impl Fn(&Series) -> String, unit: ShownIn) -> Result<()> {
    let rows = pow2_columns(list);
    if rows.is_empty() {
        return Ok(());
    }
    let widths: Vec<usize> = list.iter().map(|s| label(s).len().max(10)).collect();
    write!(out, "\n{:<22}", "histogram")?;
    for (s, w) in list.iter().zip(&widths) {
        write!(out, " {:>w$}", label(s))?;
    }
    writeln!(out)?;
    for (b, counts) in &rows {
        write!(out, "{:<22}", bucket_label_in(b, unit))?;
        for (n, w) in counts.iter().zip(&widths) {
            write!(out, " {n:>w$}")?;
        }
        writeln!(out)?;
    }
    let lost: u64 = list.iter().map(|s| s.lost_exceedances()).sum();
    let exc: u64 = list.iter().map(|s| s.exceedance_count()).sum();
    writeln!(
        out,
        "exceedances stored: {exc} ({}){}",
        list[0].exceed,
        if lost > 0 { format!(", {lost} lost") } else { String::new() }
    )?;
    Ok(())
}

/// A stage series of a traced run (`irq`, `handler`, ..., `thread_abs`;
/// `queue`, `stack`, ... for netlat).
pub(super) fn is_stage(s: &Series) -> bool {
    Stages::is_series(&s.key.metric)
}

/// A series the trace made: a stage, or an interrupt's runtime
/// ([`rtscope_model::irqtime`]).
pub(super) fn from_trace(s: &Series) -> bool {
    rtscope_model::irqtime::from_trace(&s.key.metric)
}

/// What `probe`'s stages time, from which event to which.
pub(super) fn stages_text(probe: &str) -> &'static str {
    if descriptor::wake_path(probe) == WakePath::NetRx {
        "queue = kernel receive timestamp -> NET_RX softirq entry, stack -> sched_waking of the receiver, \
         softirq -> the softirq's exit, thread -> switch-in, user -> recvmsg returns; the five add up to rx_wake; \
         *_abs: from the receive timestamp"
    } else {
        "irq = programmed time -> timer interrupt entry, handler -> the probe's hrtimer callback, wake -> \
         sched_waking, thread -> switch-in, user -> the probe's own timestamp; the five add up to the latency; \
         *_abs: from the programmed time"
    }
}

/// The probes with stage series in `run`, in order of appearance, each
/// with its stage series ordered by load, CPU and stage.
pub(super) fn stages_by_probe(run: &Run) -> Vec<(&str, Vec<&Series>)> {
    let mut out: Vec<(&str, Vec<&Series>)> = Vec::new();
    for s in run.series.iter().filter(|s| is_stage(s)) {
        match out.iter_mut().find(|(p, _)| *p == s.key.probe) {
            Some((_, v)) => v.push(s),
            None => out.push((&s.key.probe, vec![s])),
        }
    }
    for (probe, v) in &mut out {
        let order = Stages::of_probe(probe).1;
        let rank = |s: &Series| order.iter().position(|m| *m == s.key.metric).unwrap_or(order.len());
        v.sort_by(|a, b| (a.key.load.as_deref(), a.key.cpu, rank(a)).cmp(&(b.key.load.as_deref(), b.key.cpu, rank(b))));
    }
    out
}

/// The stage table of a traced run, like the NT real-time study's ISR / DPC /
/// thread tables: relative stages, then absolute times.
fn write_stages(run: &Run, unit: ShownIn, out: &mut dyn Write) -> Result<()> {
    use Col::*;
    for (probe, rows) in stages_by_probe(run) {
        writeln!(out, "\n{probe} stages ({}): {}", unit.label(), stages_text(probe))?;
        // In an assessment, a table per load (rows come ordered by load).
        for group in rows.chunk_by(|a, b| a.key.load == b.key.load) {
            if let Some(load) = &group[0].key.load {
                writeln!(out, "under load {load}")?;
            }
            table(out, &[Count("samples"), Min, Mean, P50, P99, P999, Max], Some(11), group, unit)?;
        }
    }
    Ok(())
}

/// What the tracer did: events, losses, its cost, samples explained.
pub fn write_trace(run: &Run, out: &mut dyn Write) -> Result<()> {
    let Some(t) = &run.trace else { return Ok(()) };
    let sum = |f: fn(&rtscope_model::episode::TraceCpu) -> u64| t.per_cpu.iter().map(f).sum::<u64>();
    writeln!(
        out,
        "\ntrace: instance {}, clock {}, {} events read, {} lost by the kernel; reader thread {:.2}% of a CPU",
        t.instance,
        t.clock,
        sum(|c| c.events),
        t.lost(),
        t.reader_cpu_pct
    )?;
    let samples = if t.windows {
        format!(
            "{} samples, each a window of lost time attributed without stages ({} not handed over)",
            sum(|c| c.samples),
            sum(|c| c.samples_dropped)
        )
    } else {
        let remote = match sum(|c| c.remote_wakings) {
            0 => String::new(),
            n => format!("; {n} wakings on other CPUs read"),
        };
        format!(
            "{} of {} samples split into stages ({} incomplete, {} with an inferred switch-in, {} not handed \
             over{remote})",
            sum(|c| c.decomposed),
            sum(|c| c.samples),
            sum(|c| c.incomplete),
            sum(|c| c.switch_inferred),
            sum(|c| c.samples_dropped)
        )
    };
    // A source of no probe samples (watch) explains its own wake-ups.
    let episodes =
        format!("{} episodes built, {} kept; cause threshold {}", t.episodes_built, t.episodes_kept, t.cause_threshold);
    match (sum(|c| c.samples), t.episodes_built) {
        (0, 0) => {}
        (0, _) => writeln!(out, "trace: {episodes}")?,
        _ => writeln!(out, "trace: {samples}; {episodes}")?,
    }
    super::code::write_run_code_head(t, out)?;
    for m in &t.missing {
        writeln!(out, "trace: missing event {m}")?;
    }
    write_by_kind(t, out)
}

/// Every window sample attributed, per CPU and kind of cause (like rtla
/// osnoise's IRQ / softirq / thread / HW columns).
fn write_by_kind(t: &rtscope_model::episode::TraceSummary, out: &mut dyn Write) -> Result<()> {
    if t.per_cpu.iter().all(|c| c.by_kind.is_empty()) {
        return Ok(());
    }
    writeln!(
        out,
        "
every sample by cause (a sample counts once per kind it contains)"
    )?;
    writeln!(
        out,
        "{:>4} {:<12} {:>10} {:>10} {:>14} {:>7}",
        "CPU", "kind", "samples", "main in", "total (us)", "share"
    )?;
    for c in &t.per_cpu {
        let all: u64 = c.by_kind.iter().map(|k| k.ns).sum();
        for k in &c.by_kind {
            let share = if all == 0 { 0.0 } else { 100.0 * k.ns as f64 / all as f64 };
            writeln!(
                out,
                "{:>4} {:<12} {:>10} {:>10} {:>14} {:>6.1}%",
                c.cpu,
                k.kind.as_str(),
                k.samples,
                k.main,
                us(k.ns),
                share
            )?;
        }
    }
    Ok(())
}

/// Which sources account for how much of the episodes' latency.
pub fn write_top_causes(run: &Run, out: &mut dyn Write, rows: usize) -> Result<()> {
    let top = top_causes(&run.episodes);
    if top.is_empty() {
        return Ok(());
    }
    writeln!(out, "\ntop causes over {} episodes", run.episodes.len())?;
    writeln!(
        out,
        "{:<12} {:<28} {:>8} {:>8} {:>12} {:>7} {:>10}",
        "kind", "source", "main in", "seen in", "total (us)", "share", "max (us)"
    )?;
    for r in top.iter().take(rows) {
        writeln!(
            out,
            "{:<12} {:<28} {:>8} {:>8} {:>12} {:>6.1}% {:>10}",
            r.kind.as_str(),
            r.name,
            r.main_in,
            r.seen_in,
            us(r.total_ns),
            r.share_pct,
            us(r.max_ns)
        )?;
    }
    Ok(())
}

/// Every episode of a run, worst first, then the top causes.
pub fn write_episodes(run: &Run, out: &mut dyn Write) -> Result<()> {
    if run.episodes.is_empty() {
        writeln!(
            out,
            "run {} has no cause episodes{}",
            run.header.id,
            if run.trace.is_none() { " (it was not traced: measure with --trace)" } else { "" }
        )?;
        return Ok(());
    }
    writeln!(out, "run {}: {} cause episodes, worst first", run.header.id, run.episodes.len())?;
    for e in &run.episodes {
        writeln!(out, "{}{}", e.load.as_ref().map(|l| format!("[{l}] ")).unwrap_or_default(), e.verdict)?;
        super::code::write_episode_code(e, out)?;
    }
    write_top_causes(run, out, usize::MAX)?;
    write_trace(run, out)?;
    run.trace.as_ref().map_or(Ok(()), |t| super::code::write_run_code(t, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtscope_model::run::SeriesKey;

    fn row(extra: serde_json::Value) -> Series {
        let mut s =
            Series::new(SeriesKey::new("netlat", "rx_total", 1), "ns".into(), "adaptive".into(), vec![], vec![])
                .unwrap();
        s.extra = extra.as_object().unwrap().clone();
        s
    }

    /// Two ways of a test that took turns: each round counts once in the
    /// time measuring, not the span from a way's first round to its last.
    #[test]
    fn the_time_measuring_counts_each_round_once() {
        let mut t = rtscope_model::hist::Tally::new();
        t.record(1_000);
        let way = |metric: &str, first: u64| {
            // Rounds of 10 ms, the two ways' alternating.
            let ivs = (0..10u32)
                .map(|r| {
                    let start = first + u64::from(r) * 20_000_000;
                    rtscope_model::run::Interval::new(r, start, start + 10_000_000, &t, 0, 0)
                })
                .collect();
            Series::new(SeriesKey::new("osbench", metric, 1), "ns".into(), "adaptive".into(), ivs, vec![]).unwrap()
        };
        let (own, equal) = (way("wake.futex-intra", 0), way("wake.futex-intra+equal", 10_000_000));
        assert_eq!(osbench_total(&[&own, &equal]), "total: 2 tests, 20 samples, 200ms measuring");
    }

    /// netlat's rare counts get a column only when a row has one above 0.
    #[test]
    fn rare_counts_show_only_when_non_zero() {
        let (cols, _) = layout("netlat");
        let headers = |rows: &[&Series]| shown(cols, rows).iter().map(|c| c.header()).collect::<Vec<_>>();
        let quiet = row(serde_json::json!({"lost": 0, "reordered": 0, "duplicates": 0, "sent": 10}));
        let h = headers(&[&quiet]);
        assert!(h.contains(&"lost") && h.contains(&"sent"), "{h:?}");
        assert!(!h.contains(&"dup") && !h.contains(&"strays") && !h.contains(&"no stamp"), "{h:?}");
        let noisy = row(serde_json::json!({"duplicates": 2, "strays": 1, "no_rx_timestamp": 3, "socket_errors": 4}));
        let h = headers(&[&quiet, &noisy]);
        for want in ["dup", "strays", "no stamp", "sock err"] {
            assert!(h.contains(&want), "{want} missing: {h:?}");
        }
        assert!(!h.contains(&"clamped"), "{h:?}");
        let mut out = Vec::new();
        table(&mut out, cols, Some(8), &[&quiet, &noisy], ShownIn::Us).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("strays") && text.lines().nth(2).unwrap().contains('4'), "{text}");
    }
}
