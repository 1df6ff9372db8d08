//! The assessment's text report, in the style of the references' tests x
//! workloads tables: a row per probe metric, a column per load; the worst
//! case (the highest sample on any measured CPU), then the p99.9 of all
//! measured CPUs together; then the loads' characterisation (the kernel's
//! counters per second) and the CPU score. Also `rtscope load`'s report.

use anyhow::Result;
use rtscope_model::characterisation::Characterisation;
use rtscope_model::episode::Stages;
use rtscope_model::hist::Tally;
use rtscope_model::run::{Run, Series};
use rtscope_model::units::us_i;
use std::io::Write;

/// Whether `run` is an assessment (rows with loads) or a loads-only run.
pub fn is_matrix(run: &Run) -> bool {
    run.series.iter().any(|s| s.key.load.is_some()) || !run.characterisation.is_empty()
}

/// A text grid: a first column of labels, then right-aligned columns.
fn grid(out: &mut dyn Write, title: &str, columns: &[String], rows: &[(String, Vec<String>)]) -> Result<()> {
    let first = rows.iter().map(|r| r.0.len()).chain([title.len()]).max().unwrap_or(0);
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| rows.iter().map(|r| r.1[i].len()).chain([c.len(), 9]).max().unwrap_or(9))
        .collect();
    write!(out, "\n{title:<first$}")?;
    for (c, w) in columns.iter().zip(&widths) {
        write!(out, "  {c:>w$}")?;
    }
    writeln!(out)?;
    for (label, cells) in rows {
        write!(out, "{label:<first$}")?;
        for (v, w) in cells.iter().zip(&widths) {
            write!(out, "  {v:>w$}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// The loads in the plan's order (then any other seen).
fn loads(run: &Run) -> Vec<String> {
    let mut out: Vec<String> = run.plan["assessment"]["loads"]
        .as_array()
        .map(|a| a.iter().filter_map(|l| l["load"].as_str().map(String::from)).collect())
        .unwrap_or_default();
    for s in &run.series {
        if let Some(l) = &s.key.load
            && !out.contains(l)
        {
            out.push(l.clone());
        }
    }
    out
}

/// (probe, metric) rows: the plan's probes and their metrics in order, the
/// stages after their probe's own metrics.
fn rows(run: &Run) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    if let Some(cells) = run.plan["cells"].as_array() {
        for c in cells {
            let probe = c["probe"].as_str().unwrap_or_default();
            for m in c["metrics"].as_array().into_iter().flatten().filter_map(|m| m.as_str()) {
                out.push((probe.into(), m.into()));
            }
            for st in Stages::SERIES {
                if run.series.iter().any(|s| s.key.probe == probe && s.key.metric == st) {
                    out.push((probe.into(), st.into()));
                }
            }
        }
    }
    for s in &run.series {
        let k = (s.key.probe.clone(), s.key.metric.clone());
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

fn label(probe: &str, metric: &str) -> String {
    let what = match (probe, metric) {
        ("wakeup", "latency") => "latency".to_string(),
        ("noise", "interruption") => "interruption (noise max)".to_string(),
        ("sleep", m) => format!("{m} deviation"),
        ("ptimer", m) => format!("{m} drift"),
        (_, m) if Stages::SERIES.contains(&m) => format!("stage {m}"),
        (_, m) => m.to_string(),
    };
    format!("{probe} {what}")
}

/// The series of one row and load, every CPU together; None when nothing
/// was recorded there.
fn pooled(list: &[&Series]) -> Option<Tally> {
    let mut iter = list.iter().filter(|s| s.total().count() > 0);
    let mut t = iter.next()?.total().clone();
    for s in iter {
        t.merge(s.total());
    }
    Some(t)
}

/// The matrix tables of an assessment: worst case, then p99.9.
pub fn write_matrix(run: &Run, out: &mut dyn Write) -> Result<()> {
    let loads = loads(run);
    if run.series.is_empty() {
        return Ok(());
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
                    w.push(us_i(m.max_ns));
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
    grid(out, "worst case (us): the highest sample on any measured CPU", &loads, &worst)?;
    grid(out, "p99.9 (us): every measured CPU together", &loads, &p999)?;
    writeln!(
        out,
        "\nlatency: wake-up - programmed time; noise: gap in a busy loop - reference iteration; sleep: actual - \
         requested; drift: event seen - programmed expiry (signed). Per CPU: rtscope show {} --json, rtscope \
         export {}",
        run.header.id, run.header.id
    )?;
    Ok(())
}

fn f1(x: f64) -> String {
    if x >= 100.0 { format!("{x:.0}") } else { format!("{x:.1}") }
}

/// The characterisation table: a column per load.
pub fn write_characterisation(run: &Run, out: &mut dyn Write) -> Result<()> {
    let ch = &run.characterisation;
    if ch.is_empty() {
        return Ok(());
    }
    let columns: Vec<String> = ch.iter().map(|c| c.load.clone()).collect();
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |name: &str, f: &dyn Fn(&Characterisation) -> f64| {
        rows.push((name.to_string(), ch.iter().map(|c| f1(f(c))).collect()));
    };
    row("CPU busy % (the load's CPUs)", &|c| c.cpu_busy_pct);
    row("  user %", &|c| c.user_pct);
    row("  system %", &|c| c.system_pct);
    row("  irq + softirq %", &|c| c.irq_pct + c.softirq_pct);
    row("  iowait %", &|c| c.iowait_pct);
    row("  steal %", &|c| c.steal_pct);
    row("interrupts/s", &|c| c.interrupts_per_s);
    row("context switches/s", &|c| c.context_switches_per_s);
    row("processes created/s", &|c| c.forks_per_s);
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
    row("seconds sampled", &|c| c.seconds);
    grid(out, "characterisation (per second, from /proc while each load ran)", &columns, &rows)?;
    Ok(())
}

/// The CPU score line.
pub fn write_score(run: &Run, out: &mut dyn Write) -> Result<()> {
    if let Some(s) = &run.cpu_score {
        writeln!(
            out,
            "\nCPU score {} (thousand iterations/s of rtscope's integer+string loop v{}, one thread on CPU {}; \
             slices {}-{})",
            s.score, s.version, s.cpu, s.min, s.max
        )?;
    }
    Ok(())
}
