//! Interrupt and softirq runtime per driver (`--trace`): each hard
//! interrupt's handler runtime (a device's `irq_handler_entry` -> `_exit`,
//! an interrupt vector's `irq_vectors:*_entry` -> `_exit`) and each softirq
//! vector's runtime (`softirq_entry` -> `_exit`), per traced CPU, over the
//! whole traced window. They are stored as series of the traced probe
//! (`SeriesKey::probe` the probe's, `cpu` the CPU), their metric the
//! interrupt's name behind a prefix: `irq:local_timer`,
//! `irq:virtio0-input`, `softirq:TIMER`. This module names them and makes
//! the reports' per-driver table (count, p99, max, share of the CPU).

use crate::hist::Tally;
use crate::run::{Run, Series};

/// The prefix of a hard interrupt's series (a device's IRQ line by its
/// name, or an interrupt vector: `local_timer`, `reschedule`, ...).
pub const IRQ: &str = "irq:";
/// The prefix of a softirq vector's series (`TIMER`, `NET_RX`, ...).
pub const SOFTIRQ: &str = "softirq:";

/// Hard interrupt or softirq.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    Irq,
    Softirq,
}

impl Class {
    pub fn word(self) -> &'static str {
        match self {
            Class::Irq => "irq",
            Class::Softirq => "softirq",
        }
    }
}

/// The metric of `name`'s series: `irq:local_timer`, `softirq:NET_RX`.
pub fn metric(class: Class, name: &str) -> String {
    match class {
        Class::Irq => format!("{IRQ}{name}"),
        Class::Softirq => format!("{SOFTIRQ}{name}"),
    }
}

/// The class and name of an interrupt-runtime series' metric; None for
/// any other metric.
pub fn parse(metric: &str) -> Option<(Class, &str)> {
    if let Some(n) = metric.strip_prefix(IRQ) {
        return Some((Class::Irq, n));
    }
    metric.strip_prefix(SOFTIRQ).map(|n| (Class::Softirq, n))
}

/// Whether `metric` is an interrupt-runtime series, not a measured metric.
pub fn is_series(metric: &str) -> bool {
    parse(metric).is_some()
}

/// Whether `metric` is a series the trace made (a stage, an interrupt's
/// runtime), not a measured metric: left out of the probes' tables, the
/// verdicts, the tail analysis and the comparisons.
pub fn from_trace(metric: &str) -> bool {
    crate::episode::Stages::is_series(metric) || is_series(metric)
}

/// What the table's rows are, for the reports.
pub const WHAT: &str = "each hard interrupt's handler runtime (irq_handler_entry -> irq_handler_exit, or an \
                        interrupt vector's irq_vectors *_entry -> *_exit) and each softirq vector's runtime \
                        (softirq_entry -> softirq_exit), less the interrupts nested in it, over the whole traced \
                        window; share = total runtime / (traced time x CPUs traced)";

/// One driver's row: a hard interrupt or a softirq vector, over the CPUs
/// a probe traced (under one load in an assessment).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub probe: String,
    pub load: Option<String>,
    pub class: Class,
    pub name: String,
    /// The CPUs it ran on.
    pub cpus: Vec<i64>,
    pub count: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub total_ns: u64,
    /// Its share of the traced CPUs' time, 0..1.
    pub share: f64,
}

/// The time a group of series covers: the earliest interval start to the
/// latest end.
fn span(list: &[&Series]) -> u64 {
    let start = list.iter().filter_map(|s| s.intervals.first()).map(|i| i.start_ns).min();
    let end = list.iter().filter_map(|s| s.intervals.last()).map(|i| i.end_ns).max();
    match (start, end) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => 0,
    }
}

/// The per-driver rows of `run`: per probe and load (in the run's order of
/// loads), each interrupt's series summed over its CPUs; most CPU time
/// first within each probe and load. The share's time is the span of that probe's and load's
/// series, its CPUs those its series measured.
pub fn rows(run: &Run) -> Vec<Row> {
    let mut groups: Vec<(&str, Option<&str>)> = Vec::new();
    for s in run.series.iter().filter(|s| is_series(&s.key.metric)) {
        let g = (s.key.probe.as_str(), s.key.load.as_deref());
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let loads = run.loads();
    let rank = |l: Option<&str>| l.map_or(0, |l| loads.iter().position(|x| x == l).unwrap_or(loads.len()));
    groups.sort_by_key(|&(probe, load)| (crate::descriptor::rank(probe), probe, rank(load)));
    let mut out = Vec::new();
    for (probe, load) in groups {
        let of: Vec<&Series> =
            run.series.iter().filter(|s| s.key.probe == probe && s.key.load.as_deref() == load).collect();
        let mut cpus: Vec<i64> = of.iter().map(|s| s.key.cpu).collect();
        cpus.sort_unstable();
        cpus.dedup();
        let room = span(&of) as f64 * cpus.len().max(1) as f64;
        let mut rows: Vec<Row> = Vec::new();
        let mut tallies: Vec<Tally> = Vec::new();
        for s in &of {
            let Some((class, name)) = parse(&s.key.metric) else { continue };
            let at = match rows.iter().position(|r| r.class == class && r.name == name) {
                Some(i) => i,
                None => {
                    rows.push(Row {
                        probe: probe.into(),
                        load: load.map(str::to_string),
                        class,
                        name: name.into(),
                        cpus: Vec::new(),
                        count: 0,
                        p99_ns: 0,
                        max_ns: 0,
                        total_ns: 0,
                        share: 0.0,
                    });
                    tallies.push(Tally::new());
                    rows.len() - 1
                }
            };
            if s.total().count() > 0 {
                rows[at].cpus.push(s.key.cpu);
            }
            tallies[at].merge(s.total());
        }
        for (r, t) in rows.iter_mut().zip(&tallies) {
            r.count = t.stats.count;
            r.p99_ns = crate::hist::quantile(&t.hist, &t.stats, 0.99);
            r.max_ns = t.stats.max;
            r.total_ns = t.stats.sum;
            r.share = if room > 0.0 { t.stats.sum as f64 / room } else { 0.0 };
        }
        rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.class.cmp(&b.class)).then(a.name.cmp(&b.name)));
        out.extend(rows);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{Interval, SeriesKey};

    fn series(probe: &str, metric: &str, cpu: i64, values: &[u64], span: (u64, u64)) -> Series {
        let mut t = Tally::new();
        for &v in values {
            t.record(v);
        }
        let iv = Interval::new(0, span.0, span.1, &t, 0, 0);
        Series::new(SeriesKey::new(probe, metric, cpu), "ns".into(), "x".into(), vec![iv], vec![]).unwrap()
    }

    #[test]
    fn names_round_trip() {
        assert_eq!(metric(Class::Irq, "local_timer"), "irq:local_timer");
        assert_eq!(parse("softirq:NET_RX"), Some((Class::Softirq, "NET_RX")));
        assert_eq!(parse("irq:virtio0-input.0"), Some((Class::Irq, "virtio0-input.0")));
        assert!(!is_series("irq") && !is_series("latency"));
    }

    /// Two CPUs' timer series summed into one row; the share is the total
    /// over the span times the CPUs; most time first.
    #[test]
    fn rows_sum_a_driver_over_its_cpus() {
        let mut run = crate::store::tests_support::sample_run();
        run.series = vec![
            series("wakeup", "latency", 0, &[1_000], (0, 1_000_000)),
            series("wakeup", "latency", 1, &[1_000], (0, 1_000_000)),
            series("wakeup", "irq:local_timer", 0, &[2_000, 4_000], (0, 1_000_000)),
            series("wakeup", "irq:local_timer", 1, &[2_000], (0, 1_000_000)),
            series("wakeup", "softirq:TIMER", 1, &[50_000], (0, 1_000_000)),
        ];
        let r = rows(&run);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].class, r[0].name.as_str(), r[0].count, r[0].max_ns), (Class::Softirq, "TIMER", 1, 50_000));
        assert_eq!(r[0].cpus, [1]);
        assert!((r[0].share - 0.025).abs() < 1e-9, "{}", r[0].share);
        assert_eq!((r[1].name.as_str(), r[1].count, r[1].total_ns, r[1].cpus.len()), ("local_timer", 3, 8_000, 2));
        assert!((r[1].share - 0.004).abs() < 1e-9, "{}", r[1].share);
    }
}
