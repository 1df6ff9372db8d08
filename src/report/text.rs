//! The text summary, in the style of the reference papers: a row of
//! figures per CPU, then the power-of-two histogram with a column per CPU.

use super::Report;
use anyhow::Result;
use rtscope_model::episode::{Stages, top_causes};
use rtscope_model::hist::{Bucket, pow2_buckets};
use rtscope_model::run::{Run, Series};
use rtscope_model::units::{self, us};
use std::io::Write;

pub struct Text {
    /// The probe's own settings line, e.g. "interval 1ms".
    pub describe: String,
}

fn bucket_label(b: &Bucket) -> String {
    if b.lo_ns >= rtscope_model::hist::HIGHEST_NS {
        return format!("> {} s (overflow)", b.lo_ns / 1_000_000_000);
    }
    format!("{}-{} us", b.lo_ns / 1000, b.hi_ns / 1000)
}

impl Report for Text {
    fn write(&self, run: &Run, out: &mut dyn Write) -> Result<()> {
        let h = &run.header;
        let elapsed =
            h.ended_unix_ns.map(|e| units::human(((e - h.started_unix_ns).max(0) as u64) / 1_000_000 * 1_000_000));
        let plan = &run.plan;
        let policy = plan["effective_policy"].as_str().unwrap_or("?").to_uppercase();
        let prio = plan["effective_priority"].as_u64().unwrap_or(0);
        writeln!(
            out,
            "rtscope {} · run {} · {} · {} · SCHED_{policy} {prio} · {}{}",
            h.kind,
            h.id,
            h.status.as_str(),
            run.inventory.kernel_release,
            if self.describe.is_empty() { plan["settings"].to_string() } else { self.describe.clone() },
            elapsed.map(|e| format!(" · {e}")).unwrap_or_default()
        )?;
        if !h.representative {
            writeln!(out, "NOT REPRESENTATIVE: measured without real-time scheduling")?;
        }
        let mut by_probe: Vec<(&str, &str, Vec<&Series>)> = Vec::new();
        for s in run.series.iter().filter(|s| !is_stage(s)) {
            match by_probe.iter_mut().find(|(p, m, _)| *p == s.key.probe && *m == s.key.metric) {
                Some((_, _, list)) => list.push(s),
                None => by_probe.push((&s.key.probe, &s.key.metric, vec![s])),
            }
        }
        for (probe, metric, list) in by_probe {
            writeln!(out, "\n{probe} {metric} (us)")?;
            writeln!(
                out,
                "{:>4} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>8}",
                "CPU", "samples", "min", "mean", "p50", "p90", "p99", "p99.9", "p99.99", "max", "jitter", "overruns"
            )?;
            let totals: Vec<_> = list.iter().map(|s| (s, s.total())).collect();
            for (s, t) in &totals {
                let m = t.summary();
                writeln!(
                    out,
                    "{:>4} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>8}",
                    s.key.cpu,
                    m.count,
                    us(m.min_ns),
                    units::us_f(m.mean_ns),
                    us(m.p50_ns),
                    us(m.p90_ns),
                    us(m.p99_ns),
                    us(m.p999_ns),
                    us(m.p9999_ns),
                    us(m.max_ns),
                    us(m.jitter_ns()),
                    s.overruns()
                )?;
            }
            let tables: Vec<Vec<Bucket>> = totals.iter().map(|(_, t)| pow2_buckets(&t.hist, &t.stats)).collect();
            let rows = tables.iter().map(Vec::len).max().unwrap_or(0);
            if rows == 0 {
                continue;
            }
            let longest = tables.iter().find(|t| t.len() == rows).expect("a table has the most rows");
            write!(out, "\n{:<22}", "histogram")?;
            for (s, _) in &totals {
                write!(out, " {:>10}", format!("CPU{}", s.key.cpu))?;
            }
            writeln!(out)?;
            // Leading empty buckets say nothing: start at the first sample.
            let first = (0..rows).find(|&i| tables.iter().any(|t| t.get(i).is_some_and(|b| b.count > 0))).unwrap_or(0);
            for (i, b) in longest.iter().enumerate().skip(first) {
                write!(out, "{:<22}", bucket_label(b))?;
                for t in &tables {
                    let n = t.get(i).filter(|x| x.lo_ns == b.lo_ns).map_or(0, |x| x.count);
                    write!(out, " {n:>10}")?;
                }
                writeln!(out)?;
            }
            let lost: u64 = list.iter().map(|s| s.lost_exceedances()).sum();
            let exc: usize = list.iter().map(|s| s.exceedances.len()).sum();
            writeln!(
                out,
                "exceedances stored: {exc} ({}){}",
                list[0].exceed,
                if lost > 0 { format!(", {lost} lost") } else { String::new() }
            )?;
        }
        write_stages(run, out)?;
        write_trace(run, out)?;
        if !run.episodes.is_empty() {
            writeln!(out, "\nworst episodes (all: rtscope show {} --episodes)", h.id)?;
            for e in run.episodes.iter().take(3) {
                writeln!(out, "  {}", e.verdict)?;
            }
            write_top_causes(run, out, 8)?;
        }
        let serious: Vec<_> = h.warnings.iter().filter(|w| !w.is_informational()).collect();
        let info: Vec<_> = h.warnings.iter().filter(|w| w.is_informational()).collect();
        if !serious.is_empty() || !info.is_empty() {
            writeln!(out)?;
        }
        for w in serious {
            writeln!(out, "warning: {} (fix: {})", w.message, w.fix)?;
        }
        for w in info {
            writeln!(out, "note: {}", w.message)?;
        }
        for n in &h.notes {
            writeln!(out, "note: {n}")?;
        }
        Ok(())
    }
}

/// A stage series of a traced run (`irq`, `handler`, ..., `thread_abs`).
fn is_stage(s: &Series) -> bool {
    Stages::SERIES.contains(&s.key.metric.as_str())
}

/// The stage table of a traced run, like the references' ISR / DPC /
/// thread tables: relative stages, then absolute times.
fn write_stages(run: &Run, out: &mut dyn Write) -> Result<()> {
    let stages: Vec<&Series> = run.series.iter().filter(|s| is_stage(s)).collect();
    if stages.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\n{} stages (us): irq = programmed time -> timer interrupt, handler -> the probe's hrtimer callback, \
         wake -> sched_waking, thread -> switch-in, user -> the probe's timestamp; *_abs: from the programmed time",
        stages[0].key.probe
    )?;
    writeln!(
        out,
        "{:>4} {:<11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "CPU", "stage", "samples", "min", "mean", "p50", "p99", "p99.9", "max"
    )?;
    let mut cpus: Vec<i64> = stages.iter().map(|s| s.key.cpu).collect();
    cpus.dedup();
    for cpu in cpus {
        for name in Stages::SERIES {
            let Some(s) = stages.iter().find(|s| s.key.cpu == cpu && s.key.metric == name) else { continue };
            let m = s.total().summary();
            writeln!(
                out,
                "{:>4} {:<11} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
                cpu,
                name,
                m.count,
                us(m.min_ns),
                units::us_f(m.mean_ns),
                us(m.p50_ns),
                us(m.p99_ns),
                us(m.p999_ns),
                us(m.max_ns)
            )?;
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
    writeln!(
        out,
        "trace: {} of {} samples split into stages ({} incomplete, {} with an inferred switch-in, {} not handed over); \
         {} episodes built, {} kept; cause threshold {}",
        sum(|c| c.decomposed),
        sum(|c| c.samples),
        sum(|c| c.incomplete),
        sum(|c| c.switch_inferred),
        sum(|c| c.samples_dropped),
        t.episodes_built,
        t.episodes_kept,
        t.cause_threshold
    )?;
    for m in &t.missing {
        writeln!(out, "trace: missing event {m}")?;
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
        writeln!(out, "{}", e.verdict)?;
    }
    write_top_causes(run, out, usize::MAX)?;
    write_trace(run, out)
}
