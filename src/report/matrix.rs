//! The assessment's text report, in the style of the NT real-time study's tests x
//! workloads tables: a row per probe metric, a column per load; the worst
//! case (the sample farthest from zero on any measured CPU, with its sign:
//! an early sleep or timer shows negative), then the p99.9 of all
//! measured CPUs together; then the loads' characterisation (the kernel's
//! counters per second) and the CPU score. Also `rtscope load`'s report.

use anyhow::Result;
use rtscope_model::characterisation::Characterisation;
use rtscope_model::descriptor;
use rtscope_model::episode::Stages;
use rtscope_model::run::{Run, Series, farthest, pooled};
use rtscope_model::units::us_i;
use std::io::Write;

/// A table of the assessment: a title, a first column of labels, then a
/// column per load. Text and document reports render the same grid.
pub struct Grid {
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<(String, Vec<String>)>,
}

/// A grid as text: the labels, then right-aligned columns.
fn write_grid(out: &mut dyn Write, g: &Grid) -> Result<()> {
    let (title, columns, rows) = (&g.title, &g.columns, &g.rows);
    // The title on its own line, so that it does not widen the first column.
    writeln!(out, "\n{}", super::wrap::wrap("", title, 0))?;
    let first = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| rows.iter().map(|r| r.1[i].len()).chain([c.len(), 9]).max().unwrap_or(9))
        .collect();
    // Blocks of columns that fit the terminal's width, the labels repeated.
    let mut blocks: Vec<std::ops::Range<usize>> = Vec::new();
    let mut start = 0;
    let mut used = first;
    for (i, w) in widths.iter().enumerate() {
        if i > start && used + 2 + w > super::wrap::WIDTH {
            blocks.push(start..i);
            (start, used) = (i, first);
        }
        used += 2 + w;
    }
    blocks.push(start..columns.len());
    for (b, range) in blocks.into_iter().enumerate() {
        if b > 0 {
            writeln!(out)?;
        }
        write!(out, "{:<first$}", "")?;
        for i in range.clone() {
            write!(out, "  {:>w$}", columns[i], w = widths[i])?;
        }
        writeln!(out)?;
        for (label, cells) in rows {
            write!(out, "{label:<first$}")?;
            for i in range.clone() {
                write!(out, "  {:>w$}", cells[i], w = widths[i])?;
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

/// The interrupts whose runtime a probe's rows show in the matrix: the
/// [`MATRIX_DRIVERS`] that took the most CPU time over every load (the
/// report's per-driver table has them all).
fn top_drivers(run: &Run, probe: &str) -> Vec<String> {
    let mut total: Vec<(String, u64)> = Vec::new();
    for s in run.series.iter().filter(|s| s.key.probe == probe && rtscope_model::irqtime::is_series(&s.key.metric)) {
        match total.iter_mut().find(|(m, _)| *m == s.key.metric) {
            Some((_, t)) => *t += s.total().stats.sum,
            None => total.push((s.key.metric.clone(), s.total().stats.sum)),
        }
    }
    total.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    total.into_iter().take(MATRIX_DRIVERS).map(|(m, _)| m).collect()
}

/// Interrupts (hard and soft) shown per probe in the matrix.
const MATRIX_DRIVERS: usize = 6;

/// (probe, metric) rows: the plan's probes and their metrics in order, the
/// stages after their probe's own metrics, then the interrupts that took
/// the most CPU time while it was traced.
fn rows(run: &Run) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    if let Some(cells) = run.plan["cells"].as_array() {
        for c in cells {
            let probe = c["probe"].as_str().unwrap_or_default();
            for m in c["metrics"].as_array().into_iter().flatten().filter_map(|m| m.as_str()) {
                out.push((probe.into(), m.into()));
            }
            for &st in Stages::of_probe(probe).1 {
                if run.series.iter().any(|s| s.key.probe == probe && s.key.metric == st) {
                    out.push((probe.into(), st.into()));
                }
            }
            for m in top_drivers(run, probe) {
                if !out.iter().any(|(p, x)| p == probe && *x == m) {
                    out.push((probe.into(), m));
                }
            }
        }
    }
    for s in run.series.iter().filter(|s| !rtscope_model::irqtime::is_series(&s.key.metric)) {
        let k = (s.key.probe.clone(), s.key.metric.clone());
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// A row's label: the probe, then its metric as the probe's row in the
/// descriptor table names it ("sleep nanosleep@1ms deviation"), or the stage.
fn label(probe: &str, metric: &str) -> String {
    if Stages::is_series(metric) {
        return format!("{probe} stage {metric}");
    }
    if let Some((class, name)) = rtscope_model::irqtime::parse(metric) {
        return format!("{probe} {} {name} runtime", class.word());
    }
    format!("{probe} {metric}{}", descriptor::find(probe).map_or("", |d| d.row_suffix))
}

/// The matrix tables of an assessment: worst case, then p99.9; none
/// without series.
pub fn matrix_grids(run: &Run) -> Vec<Grid> {
    let loads = run.loads();
    if run.series.is_empty() {
        return Vec::new();
    }
    let mut worst = Vec::new();
    let mut p999 = Vec::new();
    for (probe, metric) in rows(run) {
        let mut w = Vec::new();
        let mut p = Vec::new();
        for l in &loads {
            let list: Vec<&Series> = run
                .series
                .iter()
                .filter(|s| s.key.probe == probe && s.key.metric == metric && s.key.load.as_deref() == Some(l))
                .collect();
            match pooled(&list) {
                Some(t) => {
                    let m = t.summary();
                    w.push(us_i(farthest(m.min_ns, m.max_ns)));
                    p.push(us_i(m.p999_ns));
                }
                None => {
                    w.push("-".into());
                    p.push("-".into());
                }
            }
        }
        let name = label(&probe, &metric);
        worst.push((name.clone(), w));
        p999.push((name, p));
    }
    let mut grids = vec![
        Grid {
            title: "worst case (us): the sample farthest from zero on any measured CPU, with its sign".into(),
            columns: loads.clone(),
            rows: worst,
        },
        Grid { title: "p99.9 (us): every measured CPU together".into(), columns: loads.clone(), rows: p999 },
    ];
    // Whether each column ran under the load asked for.
    if run.characterisation.iter().any(|c| !c.checks.is_empty() || c.failure.is_some()) {
        let verdicts: Vec<String> = loads
            .iter()
            .map(|l| run.characterisation.iter().find(|c| &c.load == l).map_or("-", |c| c.verdict()).to_string())
            .collect();
        grids.push(Grid {
            title: LOAD_CHECK_TITLE.into(),
            columns: loads,
            rows: vec![(LOAD_CHECK_ROW.into(), verdicts)],
        });
    }
    grids
}

/// What the matrix's values time, and where the per-CPU figures are.
pub fn matrix_legend(run: &Run) -> String {
    let osbench = run.series.iter().filter(|s| descriptor::per_test(&s.key.probe)).collect::<Vec<_>>();
    let osbench = if osbench.is_empty() {
        String::new()
    } else {
        let equal = if osbench.iter().any(|s| s.key.metric.contains("+equal")) {
            "; +equal: both at one priority, the woken one running when the signaller blocks for its reply"
        } else {
            ""
        };
        format!(
            "; osbench <test>: the test's span per operation, e.g. wake.*: the lower-priority party's signalling \
             call -> the blocked higher-priority one running{equal} (rtscope osbench --list)"
        )
    };
    let irqs = if run.series.iter().any(|s| rtscope_model::irqtime::is_series(&s.key.metric)) {
        "; <probe> irq|softirq NAME runtime: that interrupt's runtime on the measured CPUs while the probe was \
         traced, the six that took the most CPU time (all of them: the per-driver table)"
    } else {
        ""
    };
    let serial = if run.series.iter().any(|s| s.key.probe == descriptor::SERIAL_RTT.name) {
        "; serial-rtt rtt: a stimulus written on the serial line -> its answer from `rtscope respond` on the other \
         machine read back"
    } else {
        ""
    };
    format!(
        "latency: wake-up - programmed time; noise: gap in a busy loop - reference iteration; sleep: actual - \
         requested; drift: event seen - programmed expiry; task: release delay, response and lateness of a periodic \
         job; drift, deviation and lateness signed: a negative worst case is an early return \
         or event further from zero than the latest one{osbench}{irqs}{serial}. Per CPU: rtscope show {} --json, \
         rtscope export {}",
        run.header.id, run.header.id
    )
}

/// The matrix tables of an assessment as text.
pub fn write_matrix(run: &Run, out: &mut dyn Write) -> Result<()> {
    let grids = matrix_grids(run);
    if grids.is_empty() {
        return Ok(());
    }
    for g in &grids {
        write_grid(out, g)?;
    }
    writeln!(out, "\n{}", super::wrap::wrap("", &matrix_legend(run), 0))?;
    Ok(())
}

/// The matrix's table that says whether each column ran under the load
/// asked for: `ok`, `short` (below its target), `not idle` (an idle
/// column that other processes kept busy), `failed` (its command could not
/// start or kept failing: the column's cells failed), `-` (no target).
pub const LOAD_CHECK_TITLE: &str = "loads: each as asked? (the notes say why not)";
pub const LOAD_CHECK_ROW: &str = "load as asked?";

/// One decimal below 100, none above; `-` for no figure (NaN).
fn f1(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// The characterisation table: a column per load; None without one.
pub fn characterisation_grid(run: &Run) -> Option<Grid> {
    let ch = &run.characterisation;
    if ch.is_empty() {
        return None;
    }
    let columns: Vec<String> = ch.iter().map(|c| c.load.clone()).collect();
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |name: &str, f: &dyn Fn(&Characterisation) -> f64| {
        rows.push((name.to_string(), ch.iter().map(|c| f1(f(c))).collect()));
    };
    row("CPU busy % (the load's CPUs)", &|c| c.cpu_busy_pct);
    // Beside it, what of it was rtscope's own (its probes, the load, its
    // helpers): the idle column's busy share is not all other processes.
    row("  rtscope's own %", &|c| c.own_pct);
    row("  user %", &|c| c.user_pct);
    row("  system %", &|c| c.system_pct);
    row("  irq + softirq %", &|c| c.irq_pct + c.softirq_pct);
    row("  iowait %", &|c| c.iowait_pct);
    row("  steal %", &|c| c.steal_pct);
    row("interrupts/s", &|c| c.interrupts_per_s);
    row("context switches/s", &|c| c.context_switches_per_s);
    row("processes created/s", &|c| c.forks_per_s);
    if ch.iter().any(|c| c.syscalls_per_s.is_some()) {
        // "-" for a load whose system calls were not counted.
        row("system calls/s (raw_syscalls:sys_enter)", &|c| c.syscalls_per_s.unwrap_or(f64::NAN));
    }
    row("softirqs/s", &|c| c.softirqs_per_s);
    let mut vectors: Vec<String> = Vec::new();
    for c in ch {
        for v in c.softirqs.iter().filter(|v| v.per_s >= 0.05) {
            if !vectors.contains(&v.name) {
                vectors.push(v.name.clone());
            }
        }
    }
    for v in &vectors {
        row(&format!("  {v}/s"), &|c| c.softirqs.iter().find(|x| &x.name == v).map_or(0.0, |x| x.per_s));
    }
    row("page faults/s", &|c| c.page_faults_per_s);
    row("  major/s", &|c| c.major_faults_per_s);
    row("disk reads/s", &|c| c.disk_reads_per_s);
    row("disk writes/s", &|c| c.disk_writes_per_s);
    row("disk read kB/s", &|c| c.disk_read_kb_per_s);
    row("disk write kB/s", &|c| c.disk_write_kb_per_s);
    let mut ifaces: Vec<String> = Vec::new();
    for c in ch {
        for n in &c.net {
            if !ifaces.contains(&n.iface) {
                ifaces.push(n.iface.clone());
            }
        }
    }
    for i in &ifaces {
        let get =
            |c: &Characterisation, f: fn(&rtscope_model::characterisation::NetRate) -> f64| c.iface(i).map_or(0.0, f);
        row(&format!("net {i} rx packets/s"), &|c| get(c, |n| n.rx_packets_per_s));
        row(&format!("net {i} tx packets/s"), &|c| get(c, |n| n.tx_packets_per_s));
        row(&format!("net {i} rx kB/s"), &|c| get(c, |n| n.rx_kb_per_s));
    }
    let mut sources: Vec<String> = Vec::new();
    for c in ch {
        for r in c.top_interrupts.iter().take(3) {
            if !sources.contains(&r.name) {
                sources.push(r.name.clone());
            }
        }
    }
    for s in &sources {
        let short: String = s.chars().take(34).collect();
        row(&format!("irq {short}/s"), &|c| c.top_interrupts.iter().find(|x| &x.name == s).map_or(0.0, |x| x.per_s));
    }
    row("other processes' CPU % (not rtscope's)", &|c| c.others_busy_pct);
    row("seconds sampled", &|c| c.seconds);
    rows.insert(
        rows.len() - 1,
        (
            "  busiest other process".into(),
            ch.iter()
                .map(|c| c.others.first().map_or_else(|| "-".into(), |p| format!("{} {}", p.comm, f1(p.cpu_pct))))
                .collect(),
        ),
    );
    if ch.iter().any(|c| !c.checks.is_empty() || c.failure.is_some()) {
        let fig = |k: &rtscope_model::characterisation::LoadCheck, v: f64| {
            format!("{}{}", f1(v), if k.measure.unit() == "%" { " %" } else { "/s" })
        };
        let each = |f: &dyn Fn(&rtscope_model::characterisation::LoadCheck) -> String| {
            ch.iter()
                .map(|c| {
                    if c.checks.is_empty() { "-".into() } else { c.checks.iter().map(f).collect::<Vec<_>>().join(" ") }
                })
                .collect()
        };
        rows.push(("load asked (flagged beyond)".into(), each(&|k| format!("{} ({})", fig(k, k.asked), f1(k.limit)))));
        rows.push(("load achieved".into(), each(&|k| fig(k, k.achieved))));
        rows.push((LOAD_CHECK_ROW.into(), ch.iter().map(|c| c.verdict().to_string()).collect()));
    }
    Some(Grid { title: "characterisation (per second, from /proc while each load ran)".into(), columns, rows })
}

/// The characterisation table as text.
pub fn write_characterisation(run: &Run, out: &mut dyn Write) -> Result<()> {
    if let Some(g) = characterisation_grid(run) {
        write_grid(out, &g)?;
    }
    Ok(())
}

/// The CPU score line; None without a score.
pub fn score_line(run: &Run) -> Option<String> {
    run.cpu_score.as_ref().map(|s| {
        format!(
            "CPU score {} (thousand iterations/s of rtscope's integer+string loop v{}, one thread on CPU {}; \
             slices {}-{})",
            s.score, s.version, s.cpu, s.min, s.max
        )
    })
}

/// The CPU score line as text.
pub fn write_score(run: &Run, out: &mut dyn Write) -> Result<()> {
    if let Some(l) = score_line(run) {
        writeln!(out, "\n{}", super::wrap::hanging(&l, 0, 2))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtscope_model::hist::Tally;
    use rtscope_model::run::{Interval, SeriesKey};

    /// A series of `values` on `cpu` under `load` (signed when any is negative).
    fn series(probe: &str, metric: &str, cpu: i64, load: &str, values: &[i64]) -> Series {
        let mut t = if values.iter().any(|&v| v < 0) { Tally::new_signed() } else { Tally::new() };
        for &v in values {
            t.record_signed(v);
        }
        let key = SeriesKey { load: Some(load.into()), ..SeriesKey::new(probe, metric, cpu) };
        let iv = Interval::new(0, 0, 1_000_000_000, &t, 0, 0);
        Series::new(key, "ns".into(), "adaptive".into(), vec![iv], vec![]).unwrap()
    }

    #[test]
    fn the_worst_case_of_a_signed_row_keeps_the_sign_of_the_sample_farthest_from_zero() {
        let mut run = rtscope_model::export::read_json(include_str!("../../tests/data/report-run.json"), "fixture")
            .expect("the fixture reads");
        run.plan = serde_json::json!({"assessment": {"loads": [{"load": "idle"}, {"load": "cpu"}]}});
        run.series = vec![
            // Under idle, CPU 1 returned 900 us early: that is the worst case,
            // though every sample of CPU 0 is later than every one of CPU 1.
            series("ptimer", "timerfd", 0, "idle", &[3_000, 5_000, 40_000]),
            series("ptimer", "timerfd", 1, "idle", &[-900_000, -2_000, 1_000]),
            // Under cpu the latest event is further from zero than the earliest.
            series("ptimer", "timerfd", 0, "cpu", &[-20_000, 4_000, 300_000]),
            // Early only.
            series("sleep", "nanosleep@1ms", 0, "idle", &[-7_000, -5_000, -1_000]),
            // Unsigned: the maximum.
            series("wakeup", "latency", 0, "idle", &[2_000, 9_000, 75_000]),
            series("wakeup", "latency", 0, "cpu", &[3_000, 8_000, 125_000]),
        ];
        let grids = matrix_grids(&run);
        let worst = &grids[0];
        assert!(worst.title.starts_with("worst case (us)") && worst.title.contains("farthest from zero"));
        assert_eq!(worst.columns, ["idle", "cpu"]);
        let row = |label: &str| worst.rows.iter().find(|r| r.0 == label).unwrap_or_else(|| panic!("{label}")).1.clone();
        assert_eq!(row("ptimer timerfd drift"), ["-900.000", "300.000"]);
        assert_eq!(row("sleep nanosleep@1ms deviation"), ["-7.000", "-"]);
        assert_eq!(row("wakeup latency"), ["75.000", "125.000"]);
        // The p99.9 stays the upper tail.
        let p = &grids[1].rows.iter().find(|r| r.0 == "ptimer timerfd drift").unwrap().1;
        assert!(p[0].parse::<f64>().unwrap() > 0.0, "{p:?}");
        assert!(matrix_legend(&run).contains("a negative worst case is an early return"));
    }

    /// The idle column's busy share says how much of it was rtscope's own.
    #[test]
    fn the_characterisation_shows_rtscopes_own_share_under_the_busy_one() {
        let mut run = rtscope_model::export::read_json(include_str!("../../tests/data/report-run.json"), "fixture")
            .expect("the fixture reads");
        let mut idle = rtscope_model::characterisation::Accumulator::new("idle", &[0]).finish();
        (idle.cpu_busy_pct, idle.own_pct, idle.others_busy_pct) = (30.0, 12.5, 17.5);
        run.characterisation = vec![idle];
        let grid = characterisation_grid(&run).expect("a grid");
        let at = |label: &str| grid.rows.iter().position(|r| r.0 == label).unwrap_or_else(|| panic!("{label}"));
        assert_eq!(at("  rtscope's own %"), at("CPU busy % (the load's CPUs)") + 1);
        assert_eq!(grid.rows[at("  rtscope's own %")].1, [f1(12.5)]);
    }
}
