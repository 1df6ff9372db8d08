//! The per-driver table of a traced run, as LatencyMon's first table and
//! the Siemens study's maximum ISR time per driver: each hard interrupt's
//! and softirq vector's runtime over the whole traced window (count, p99,
//! max, total, share of the CPU), in the text report and as a document
//! section. The rows come from [`rtscope_model::irqtime::rows`].

use super::doc::{Block, Section, Table};
use super::judged::Analysed;
use anyhow::Result;
use rtscope_model::inventory::format_cpu_list;
use rtscope_model::irqtime::{self, Row};
use rtscope_model::run::Run;
use rtscope_model::units::us;
use std::io::Write;

/// How the run's note on interrupts-masked time begins.
const MASKED: &str = "interrupts-masked time";

/// The table's columns.
const HEAD: [&str; 8] = ["driver", "kind", "CPUs", "count", "p99", "max", "total", "share"];

/// The run's note on interrupts-masked time, where its trace left one.
fn masked_note(run: &Run) -> Option<&str> {
    run.header.notes.iter().map(String::as_str).find(|n| n.starts_with(MASKED))
}

/// A row's cells, in [`HEAD`]'s order (times in us, the total in ms).
fn cells(r: &Row) -> Vec<String> {
    let cpus: Vec<usize> = r.cpus.iter().filter_map(|&c| usize::try_from(c).ok()).collect();
    vec![
        r.name.clone(),
        r.class.word().into(),
        format_cpu_list(&cpus),
        r.count.to_string(),
        us(r.p99_ns),
        us(r.max_ns),
        format!("{:.3} ms", r.total_ns as f64 / 1e6),
        format!("{:.3}%", r.share * 100.0),
    ]
}

/// The rows grouped by probe and load, in order.
fn groups(rows: &[Row]) -> Vec<(String, &[Row])> {
    rows.chunk_by(|a, b| a.probe == b.probe && a.load == b.load)
        .map(|g| {
            let under = g[0].load.as_ref().map(|l| format!(" under load {l}")).unwrap_or_default();
            (format!("{}{under}", g[0].probe), g)
        })
        .collect()
}

/// The text report's table: a block per probe and load.
pub fn write_text(run: &Run, out: &mut dyn Write) -> Result<()> {
    let rows = irqtime::rows(run);
    if rows.is_empty() {
        return Ok(());
    }
    let head = format!("interrupt and softirq runtime per driver (us): {}", irqtime::WHAT);
    writeln!(out, "\n{}", super::wrap::wrap("", &head, 0))?;
    for (title, group) in groups(&rows) {
        writeln!(out, "traced with {title}")?;
        let table: Vec<Vec<String>> = group.iter().map(cells).collect();
        let widths: Vec<usize> = (0..HEAD.len())
            .map(|i| table.iter().map(|r| r[i].len()).chain([HEAD[i].len()]).max().unwrap_or(0))
            .collect();
        let line = |out: &mut dyn Write, r: &[&str]| -> Result<()> {
            let mut s =
                format!("{:<w$}  {:<w1$}  {:<w2$}", r[0], r[1], r[2], w = widths[0], w1 = widths[1], w2 = widths[2]);
            for (c, w) in r[3..].iter().zip(&widths[3..]) {
                s.push_str(&format!("  {c:>w$}"));
            }
            writeln!(out, "{}", s.trim_end())?;
            Ok(())
        };
        line(out, &HEAD)?;
        for r in &table {
            line(out, &r.iter().map(String::as_str).collect::<Vec<_>>())?;
        }
    }
    Ok(())
}

/// The document's section: the same table per probe and load, and what
/// the kernel said of interrupts-masked time.
pub fn section(a: &Analysed, p: &str) -> Vec<Section> {
    section_of(a.run, p)
}

fn section_of(run: &Run, p: &str) -> Vec<Section> {
    let rows = irqtime::rows(run);
    if rows.is_empty() {
        return Vec::new();
    }
    let mut sec = Section::new(format!("{p}-irqtime"), "Interrupt and softirq runtime per driver");
    sec.push(Block::Para(format!("Times in us; {}.", irqtime::WHAT)));
    for (title, group) in groups(&rows) {
        sec.push(Block::Para(format!("Traced with {title}:")));
        let mut t = Table::new(HEAD.iter().map(|h| h.to_string()).collect(), 3);
        for r in group {
            t.row(cells(r));
        }
        sec.push(Block::Table(t));
    }
    if let Some(n) = masked_note(run) {
        sec.push(Block::Para(n.to_string()));
    }
    vec![sec]
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtscope_model::hist::Tally;
    use rtscope_model::run::{Interval, Series, SeriesKey};

    fn series(metric: &str, cpu: i64, values: &[u64]) -> Series {
        let mut t = Tally::new();
        for &v in values {
            t.record(v);
        }
        let iv = Interval::new(0, 0, 1_000_000_000, &t, 0, 0);
        Series::new(SeriesKey::new("wakeup", metric, cpu), "ns".into(), "x".into(), vec![iv], vec![]).unwrap()
    }

    /// A row per driver, most time first, with its share; the masked-time
    /// note in the section.
    #[test]
    fn the_table_has_a_row_per_driver() {
        let mut run = crate::report::fixtures::fixture();
        run.header.notes.clear();
        run.series = vec![
            series("latency", 0, &[3_000]),
            series("irq:local_timer", 0, &[2_000; 1000]),
            series("softirq:NET_RX", 0, &[40_000, 10_000]),
        ];
        run.header.notes.push(crate::trace::irqtime::irqs_off_note(std::path::Path::new("/nonexistent")));
        let mut out = Vec::new();
        write_text(&run, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].starts_with("interrupt and softirq runtime per driver (us)"), "{text}");
        assert!(lines.iter().all(|l| l.len() <= 100), "wrapped: {text}");
        let at = lines.iter().position(|l| *l == "traced with wakeup").unwrap_or_else(|| panic!("{text}"));
        let (timer, net) = (lines[at + 2], lines[at + 3]);
        assert!(timer.starts_with("local_timer  irq      0") && timer.ends_with("2.000 ms  0.200%"), "{text}");
        assert!(net.starts_with("NET_RX") && net.contains("40.000") && net.ends_with("0.005%"), "{text}");
        let sec = format!("{:?}", section_of(&run, "r"));
        assert!(sec.contains("r-irqtime") && sec.contains("interrupts-masked time is not measured"), "{sec}");
    }
}
