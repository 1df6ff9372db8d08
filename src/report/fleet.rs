//! The fleet report (`rtscope report --prometheus`): every machine a
//! monitor measured, as Prometheus kept it (one run per `instance`, see
//! `rtscope_model::metrics::query`), ranked by its worst case, worst
//! first; per series its samples, quantiles read from the buckets, the
//! largest interval maximum, the expected worst cases of a tail fit where
//! the histograms allow one, and the verdicts, judged by `judge` as a
//! run's. Text, JSON, and a document for HTML and Markdown.

use super::doc::{Block, Chapter, Doc, Outcome, Section, Table};
use super::summary::short_us;
use crate::judge::{self, RequireSpec};
use anyhow::Result;
use rtscope_model::analysis::series::Options;
use rtscope_model::analysis::usage::Usage;
use rtscope_model::analysis::verdict::{Status, Verdict};
use rtscope_model::metrics::query;
use rtscope_model::run::Run;
use rtscope_model::units;
use serde::Serialize;
use std::io::Write;

/// Where the data came from.
#[derive(Clone, Debug, Serialize)]
pub struct Source {
    pub url: String,
    pub selector: String,
    pub start_unix_s: f64,
    pub end_unix_s: f64,
    pub step_s: f64,
    /// Series whose histograms were native (the rest: classic buckets).
    pub native_series: usize,
    pub classic_series: usize,
    /// Interval maxima Prometheus scraped, and checkpoint intervals the monitors committed.
    pub interval_maxima_scraped: u64,
    pub checkpoints_committed: u64,
}

/// A tail fit's expected worst cases, ns.
#[derive(Clone, Debug, Serialize)]
pub struct Expected {
    pub hour_ns: Option<i64>,
    pub day_ns: Option<i64>,
    pub week_ns: Option<i64>,
    pub confidence: &'static str,
}

/// One series of a machine.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub probe: String,
    pub metric: String,
    /// The CPU, or a watched thread's tid.
    pub cpu: i64,
    pub samples: u64,
    /// Quantiles: the bound of the bucket they fall in (never above max_ns).
    pub p50_le_ns: i64,
    pub p99_le_ns: i64,
    pub p999_le_ns: i64,
    /// The largest interval maximum scraped (or, where none was, the top bucket's bound).
    pub max_ns: i64,
    pub intervals: usize,
    pub missed_periods: u64,
    pub lost_exceedances: u64,
    pub expected_worst: Option<Expected>,
    pub tail_note: Option<String>,
}

/// One machine.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub rank: usize,
    pub instance: String,
    pub worst_ns: Option<i64>,
    pub worst_series: Option<String>,
    pub series: Vec<Row>,
    /// What the verdicts judge and where that comes from.
    pub judged_against: String,
    pub verdicts: Vec<Verdict>,
    /// The requirements asked for failed (or could not be judged).
    pub failed: bool,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct FleetReport {
    pub source: Source,
    /// Worst first.
    pub machines: Vec<Machine>,
    /// What Prometheus' data cannot give.
    pub not_from_prometheus: Vec<String>,
    pub passed: bool,
}

/// Why classic buckets get no tail fit (nor verdicts on expected worst cases).
const NO_FIT_ON_CLASSIC: &str = "classic buckets (too few distinct values for a tail fit; scrape with native \
                                 histograms for the expected worst cases)";

/// What the data read back from Prometheus cannot give, said in every output.
pub fn limits(src: &Source) -> Vec<String> {
    let mut l = vec![
        "Individual samples, exceedances and their causes (episodes, traces) stay in each monitor's store: \
         `rtscope report` or `rtscope show` of the monitor's run on that machine has them."
            .to_string(),
        "Quantiles are bucket bounds: the true value is at or below them (classic buckets: a factor of 2 to 2.5; \
         native histograms: 9 %)."
            .to_string(),
        format!(
            "Interval maxima are the gauge's scraped values: a checkpoint interval committed between two scrapes is \
             seen only in the histogram ({} of {} committed intervals scraped).",
            src.interval_maxima_scraped, src.checkpoints_committed
        ),
        "Counts of classic buckets and counters are the differences of their values at each step's ends (exact; a \
         step in which a monitor restarted gives nothing); those of native histograms come from increase(), which \
         Prometheus extrapolates: rounded and approximate."
            .to_string(),
        "No timer period (the probes' settings are not in Prometheus): no timer-jitter verdict and no MTTF table."
            .to_string(),
    ];
    if src.classic_series > 0 {
        l.push(
            "No tail fit on classic buckets (too few distinct values): no expected worst cases, and the \
             requirements on them (e.g. the profile omac's per hour) not judged; scrape with native histograms \
             (--enable-feature=native-histograms) for them."
                .to_string(),
        );
    }
    l
}

impl FleetReport {
    /// Judges and ranks `runs` (one per machine) against `req` (the default
    /// yardstick when empty), their expected worst cases per day and week
    /// in hours of `usage`.
    pub fn new(runs: &[Run], source: Source, req: &RequireSpec, usage: Usage) -> Result<FleetReport> {
        let fit = source.classic_series == 0;
        let opts = Options {
            periods: vec![],
            mttf_intervals: false,
            usage,
            no_tail: (!fit).then_some(NO_FIT_ON_CLASSIC),
            ..Options::default()
        };
        let mut machines = Vec::new();
        for (rank, i) in query::rank(runs).into_iter().enumerate() {
            let run = &runs[i];
            let asked = judge::asked(run, req, true)?;
            let analysed = judge::analyse(run, &opts, |_| true);
            let ok: Vec<_> = analysed.iter().filter_map(|(_, a)| a.as_ref().ok().cloned()).collect();
            let verdicts = judge::evaluate(&asked, &ok).0;
            let failed = asked.fails(&verdicts);
            let series = run
                .series
                .iter()
                .filter(|s| s.total().count() > 0)
                .map(|s| {
                    let t = s.total();
                    let a = analysed.iter().find(|(x, _)| x.key == s.key).map(|(_, a)| a);
                    let tail = a.and_then(|a| a.as_ref().ok()).and_then(|a| a.report.tail.as_ref());
                    let expected = tail.filter(|_| fit).map(|t| Expected {
                        hour_ns: t.return_levels.hour.value_ns,
                        day_ns: t.return_levels.day.value_ns,
                        week_ns: t.return_levels.week.value_ns,
                        confidence: t.confidence,
                    });
                    let tail_note = match a {
                        _ if !fit => Some("classic buckets".to_string()),
                        Some(Err(e)) => Some(e.clone()),
                        Some(Ok(a)) if expected.is_none() => a.report.tail_error.clone(),
                        _ => None,
                    };
                    Row {
                        probe: s.key.probe.clone(),
                        metric: s.key.metric.clone(),
                        cpu: s.key.cpu,
                        samples: t.count(),
                        p50_le_ns: t.quantile(0.5),
                        p99_le_ns: t.quantile(0.99),
                        p999_le_ns: t.quantile(0.999),
                        max_ns: t.max(),
                        intervals: s.intervals.len(),
                        missed_periods: s.overruns(),
                        lost_exceedances: s.lost_exceedances(),
                        expected_worst: expected,
                        tail_note,
                    }
                })
                .collect();
            let worst = query::worst(run);
            machines.push(Machine {
                rank: rank + 1,
                instance: run.header.hostname.clone(),
                worst_ns: worst.map(|w| w.0),
                worst_series: worst.map(|w| w.1.describe()),
                series,
                judged_against: asked.origin(),
                verdicts,
                failed,
            });
        }
        let passed = !machines.iter().any(|m| m.failed);
        Ok(FleetReport { not_from_prometheus: limits(&source), source, machines, passed })
    }

    fn span(&self) -> String {
        let s = &self.source;
        format!(
            "{} to {} UTC ({}, steps of {})",
            units::utc((s.start_unix_s * 1e9) as i64),
            units::utc((s.end_unix_s * 1e9) as i64),
            units::human(((s.end_unix_s - s.start_unix_s).max(0.0) * 1e9) as u64),
            units::human((s.step_s * 1e9) as u64)
        )
    }

    /// What every machine is judged against, when it is the same for all.
    fn judged_against(&self) -> Option<&String> {
        let first = self.machines.iter().find(|m| !m.verdicts.is_empty()).map(|m| &m.judged_against)?;
        self.machines.iter().all(|m| m.verdicts.is_empty() || m.judged_against == *first).then_some(first)
    }

    fn verdict_short(m: &Machine) -> String {
        let n = |st: Status| m.verdicts.iter().filter(|v| v.status == st).count();
        match (n(Status::Fail), n(Status::NotEnoughData), m.verdicts.len()) {
            (_, _, 0) => "-".into(),
            (0, 0, t) => format!("pass ({t})"),
            (0, k, t) => format!("not enough data ({k} of {t})"),
            (f, _, t) => format!("FAIL ({f} of {t})"),
        }
    }

    fn fleet_table(&self) -> Table {
        let mut t =
            Table::new(vec!["#".into(), "machine".into(), "worst case (us)".into(), "in".into(), "verdicts".into()], 2);
        t.numeric[3] = false;
        t.numeric[4] = false;
        for m in &self.machines {
            t.row(vec![
                m.rank.to_string(),
                m.instance.clone(),
                m.worst_ns.map_or("no data".into(), short_us),
                m.worst_series.clone().unwrap_or_default(),
                Self::verdict_short(m),
            ]);
        }
        t
    }

    fn series_table(m: &Machine) -> Table {
        let head = ["series", "samples", "p50 <=", "p99 <=", "p99.9 <=", "max", "per hour", "per day", "missed"];
        let mut t = Table::new(head.iter().map(|h| h.to_string()).collect(), 1);
        for r in &m.series {
            let e = |f: fn(&Expected) -> Option<i64>| {
                r.expected_worst.as_ref().and_then(f).map_or_else(|| "-".to_string(), short_us)
            };
            let word = rtscope_model::descriptor::key_word(&r.probe);
            t.row(vec![
                format!("{}/{} {word} {}", r.probe, r.metric, r.cpu),
                r.samples.to_string(),
                short_us(r.p50_le_ns),
                short_us(r.p99_le_ns),
                short_us(r.p999_le_ns),
                short_us(r.max_ns),
                e(|x| x.hour_ns),
                e(|x| x.day_ns),
                r.missed_periods.to_string(),
            ]);
        }
        t
    }

    fn head_lines(&self) -> Vec<String> {
        let s = &self.source;
        vec![
            format!(
                "{} from {} {}, {}.",
                units::plural(self.machines.len(), "machine"),
                s.url,
                s.selector,
                self.span()
            ),
            format!(
                "Histograms: {} series native, {} classic. Values in us; quantiles are bucket bounds; max is the \
                 largest interval maximum scraped; per hour / per day: expected worst cases of the tail fit.",
                s.native_series, s.classic_series
            ),
        ]
    }

    /// The terminal's text.
    pub fn write_text(&self, out: &mut dyn Write) -> Result<()> {
        writeln!(out, "rtscope fleet report")?;
        for l in self.head_lines() {
            writeln!(out, "{l}")?;
        }
        if let Some(j) = self.judged_against() {
            writeln!(out, "{j}")?;
        }
        writeln!(out, "\nFleet, worst case first")?;
        write_table(out, &self.fleet_table())?;
        for m in &self.machines {
            writeln!(out, "\n== {} (#{})", m.instance, m.rank)?;
            write_table(out, &Self::series_table(m))?;
            if self.source.classic_series == 0 {
                for r in m.series.iter().filter(|r| r.tail_note.is_some() && r.expected_worst.is_none()).take(1) {
                    writeln!(out, "  no tail fit: {}", r.tail_note.as_deref().unwrap_or_default())?;
                }
            }
            if !m.verdicts.is_empty() && Some(&m.judged_against) != self.judged_against() {
                writeln!(out, "  {}", m.judged_against)?;
            }
            for v in &m.verdicts {
                let st = match v.status {
                    Status::Pass => "pass",
                    Status::Fail => "FAIL",
                    Status::NotEnoughData => "not enough data",
                };
                writeln!(out, "  {st:>4}  {}: {}", v.requirement, v.evidence)?;
            }
        }
        writeln!(out, "\nWhat Prometheus' data cannot give:")?;
        for l in &self.not_from_prometheus {
            writeln!(out, "  - {l}")?;
        }
        Ok(())
    }

    /// The JSON document (docs/monitor.md, "The fleet report").
    pub fn write_json(&self, out: &mut dyn Write) -> Result<()> {
        serde_json::to_writer_pretty(&mut *out, self)?;
        writeln!(out)?;
        Ok(())
    }

    /// As a self-contained HTML page.
    pub fn write_html(&self, out: &mut dyn Write) -> Result<()> {
        super::html::write_doc(&self.doc(), out)
    }

    /// As Markdown.
    pub fn write_markdown(&self, out: &mut dyn Write) -> Result<()> {
        super::markdown::write_doc(&self.doc(), out)
    }

    /// The document HTML and Markdown render.
    fn doc(&self) -> Doc {
        let mut fleet = Section::new("fleet", "Fleet, worst case first");
        fleet.open = true;
        for l in self.head_lines() {
            fleet.push(Block::Para(l));
        }
        if let Some(j) = self.judged_against() {
            fleet.push(Block::Para(j.clone()));
        }
        fleet.push(Block::Table(self.fleet_table()));
        let mut sections = vec![fleet];
        for m in &self.machines {
            let mut s = Section::new(format!("machine-{}", m.rank), format!("#{} {}", m.rank, m.instance));
            s.push(Block::Table(Self::series_table(m)));
            if !m.verdicts.is_empty() && Some(&m.judged_against) != self.judged_against() {
                s.push(Block::Para(m.judged_against.clone()));
            }
            for v in &m.verdicts {
                let outcome = match v.status {
                    Status::Pass => Outcome::Pass,
                    Status::Fail => Outcome::Fail,
                    Status::NotEnoughData => Outcome::NotEnoughData,
                };
                s.push(Block::Verdict {
                    outcome,
                    text: v.requirement.clone(),
                    details: vec![(v.evidence.clone(), vec![])],
                });
            }
            sections.push(s);
        }
        let mut limits = Section::new("limits", "What Prometheus' data cannot give");
        limits.push(Block::List(self.not_from_prometheus.clone()));
        sections.push(limits);
        Doc {
            title: "rtscope fleet report".into(),
            chapters: vec![Chapter {
                id: "fleet-report".into(),
                title: "Fleet report".into(),
                subtitle: format!("{} {}, {}", self.source.url, self.source.selector, self.span()),
                sections,
            }],
        }
    }
}

/// A table in aligned columns, two spaces in.
fn write_table(out: &mut dyn Write, t: &Table) -> Result<()> {
    let cols = t.head.len();
    let width: Vec<usize> = (0..cols)
        .map(|c| t.rows.iter().map(|r| r[c].chars().count()).chain([t.head[c].chars().count()]).max().unwrap_or(0))
        .collect();
    for r in std::iter::once(&t.head).chain(&t.rows) {
        let cells: Vec<String> = (0..cols)
            .map(|c| {
                if t.numeric[c] { format!("{:>w$}", r[c], w = width[c]) } else { format!("{:<w$}", r[c], w = width[c]) }
            })
            .collect();
        writeln!(out, "  {}", cells.join("  ").trim_end())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtscope_model::metrics::query::{Bucket, Step};
    use rtscope_model::run::SeriesKey;

    fn machine(name: &str, max_ns: i64) -> Run {
        let steps: Vec<Step> = (0..6)
            .map(|i| Step {
                end_s: 1000.0 + 10.0 * f64::from(i),
                buckets: vec![
                    Bucket { lo_ns: 10_000, hi_ns: 20_000, count: 9_000 },
                    Bucket { lo_ns: 50_000, hi_ns: 100_000_000, count: 10 },
                ],
                max_ns: Some(if i == 3 { max_ns } else { 60_000 }),
            })
            .collect();
        let s = query::series_of(SeriesKey::new("wakeup", "latency", 1), &steps, 10.0).unwrap();
        query::machine_run(name, 990.0, 1050.0, vec![s], serde_json::Value::Null)
    }

    fn source(classic: usize) -> Source {
        Source {
            url: "http://prom:9090".into(),
            selector: "{}".into(),
            start_unix_s: 990.0,
            end_unix_s: 1050.0,
            step_s: 10.0,
            native_series: 3 - classic,
            classic_series: classic,
            interval_maxima_scraped: 18,
            checkpoints_committed: 18,
        }
    }

    #[test]
    fn the_fleet_is_ranked_judged_and_written_worst_first() {
        let runs = vec![machine("a:9733", 80_000), machine("b:9733", 4_000_000), machine("c:9733", 90_000)];
        let req = RequireSpec { requires: vec!["wakeup.latency.max < 1ms".into()], ..Default::default() };
        let rep = FleetReport::new(&runs, source(3), &req, Usage::CONTINUOUS).unwrap();
        let names: Vec<&str> = rep.machines.iter().map(|m| m.instance.as_str()).collect();
        assert_eq!(names, ["b:9733", "c:9733", "a:9733"]);
        assert!(rep.machines[0].failed && !rep.machines[1].failed && !rep.passed);
        let row = &rep.machines[0].series[0];
        assert_eq!(row.samples, 6 * 9_010);
        assert!((19_980..=20_020).contains(&row.p50_le_ns), "{row:?}");
        assert!((3_990_000..=4_010_000).contains(&row.max_ns), "{row:?}");
        assert!(row.expected_worst.is_none() && row.tail_note.as_deref() == Some("classic buckets"));
        let mut text = Vec::new();
        rep.write_text(&mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.find("b:9733") < text.find("a:9733"), "{text}");
        assert!(
            text.contains("What Prometheus' data cannot give") && text.contains("No tail fit on classic"),
            "{text}"
        );
        let mut json = Vec::new();
        rep.write_json(&mut json).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["machines"][0]["rank"], 1);
        assert_eq!(v["machines"][0]["verdicts"][0]["status"], "fail");
        for key in ["p50_le_ns", "p99_le_ns", "p999_le_ns", "max_ns", "samples", "missed_periods", "expected_worst"] {
            assert!(v["machines"][0]["series"][0].get(key).is_some(), "{key}: {v}");
        }
        let mut md = Vec::new();
        rep.write_markdown(&mut md).unwrap();
        assert!(String::from_utf8(md).unwrap().contains("#1 b:9733"));
    }
}
