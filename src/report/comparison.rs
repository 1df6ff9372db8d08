//! `rtscope compare`: runs side by side per series and figure (columns =
//! runs, like the references' platform tables), each run's ratio to the
//! first with its bootstrap interval, and whether the difference is beyond
//! the runs' noise; as text, JSON or an HTML page with overlaid plots.

use super::doc::{Block, Chapter, Doc, Outcome, Section, Table};
use super::sections::{exceedance_points, value_name};
use super::svg::{self, Curve};
use anyhow::Result;
use rtscope_model::compare::{self, CONFIDENCE, Change, REPLICATES, Regression, SeriesCmp, load_of};
use rtscope_model::hist::Tally;
use rtscope_model::run::Run;
use rtscope_model::units::us_f;
use serde_json::json;
use std::io::Write;

pub struct Comparison<'a> {
    pub runs: &'a [Run],
    pub rows: Vec<SeriesCmp>,
    /// `--max-regression PCT`.
    pub max_regression: Option<f64>,
    /// The figures beyond it (empty without a limit).
    pub regressions: Vec<Regression>,
}

fn run_label(r: &Run) -> String {
    format!("run {}", r.header.id)
}

fn ratio_text(r: Option<f64>, iv: Option<[f64; 2]>) -> (String, String) {
    let ratio = r.map_or_else(|| "-".to_string(), |r| format!("x{r:.3}"));
    let iv = iv.map_or_else(|| "-".to_string(), |[lo, hi]| format!("[{lo:.3}, {hi:.3}]"));
    (ratio, iv)
}

impl<'a> Comparison<'a> {
    pub fn new(runs: &'a [Run], max_regression: Option<f64>) -> Comparison<'a> {
        let refs: Vec<&Run> = runs.iter().collect();
        let rows = compare::compare(&refs);
        let regressions = max_regression.map(|p| compare::regressions(&rows, p)).unwrap_or_default();
        Comparison { runs, rows, max_regression, regressions }
    }

    /// Whether the gate (if any) passed.
    pub fn passed(&self) -> bool {
        self.regressions.is_empty()
    }

    fn figure_table(&self, s: &SeriesCmp) -> Table {
        let mut head = vec!["figure".to_string()];
        for (i, r) in self.runs.iter().enumerate() {
            head.push(format!("{} (us)", run_label(r)));
            if i > 0 {
                head.extend(["ratio", "95% interval", "change"].map(String::from));
            }
        }
        let mut t = Table::new(head, 1);
        let mut count = vec!["samples".to_string()];
        for (i, c) in s.counts.iter().enumerate() {
            count.push(c.map_or_else(|| "-".into(), |c| c.to_string()));
            if i > 0 {
                count.extend(["", "", ""].map(String::from));
            }
        }
        t.row(count);
        for f in &s.figures {
            let mut cells = vec![f.figure.clone()];
            for i in 0..self.runs.len() {
                cells.push(f.values_ns[i].map_or_else(|| "-".into(), us_f));
                if i > 0 {
                    let (ratio, iv) = ratio_text(f.ratios[i], f.intervals[i]);
                    cells.extend([ratio, iv, f.changes[i].as_str().to_string()]);
                }
            }
            t.row(cells);
        }
        t
    }

    fn gate_text(&self) -> Option<(bool, String)> {
        let pct = self.max_regression?;
        if self.regressions.is_empty() {
            return Some((true, format!("no figure got worse by more than {pct}% beyond the runs' noise")));
        }
        let list: Vec<String> = self
            .regressions
            .iter()
            .map(|r| {
                format!(
                    "{} {} in {}: x{:.3} [{:.3}, {:.3}]",
                    r.series,
                    r.figure,
                    run_label(&self.runs[r.run]),
                    r.ratio,
                    r.interval[0],
                    r.interval[1]
                )
            })
            .collect();
        Some((
            false,
            format!("{} figure(s) got worse by more than {pct}% beyond the noise: {}", list.len(), list.join("; ")),
        ))
    }

    fn legend(&self) -> String {
        format!(
            "ratio = the run's figure / {}'s; interval: {:.0}% bootstrap interval of the ratio ({REPLICATES} replicates, \
             sampling noise of both runs); worse / better: the interval lies above / below 1; the maximum is one sample \
             and is not tested; a percentile needs 10 samples above it",
            run_label(&self.runs[0]),
            CONFIDENCE * 100.0
        )
    }

    /// The text comparison: a table per series.
    pub fn write_text(&self, out: &mut dyn Write) -> Result<()> {
        let names: Vec<String> = self
            .runs
            .iter()
            .map(|r| {
                format!(
                    "{} ({} on {}, {}, {} UTC)",
                    run_label(r),
                    r.header.kind,
                    r.header.hostname,
                    r.inventory.kernel_release,
                    crate::commands::utc(r.header.started_unix_ns)
                )
            })
            .collect();
        writeln!(out, "compare: {}", names.join(" · "))?;
        writeln!(out, "{}", self.legend())?;
        for s in &self.rows {
            writeln!(out, "\n{} (us)", s.label())?;
            let t = self.figure_table(s);
            let widths: Vec<usize> = (0..t.head.len())
                .map(|i| t.rows.iter().map(|r| r[i].len()).chain([t.head[i].len()]).max().unwrap_or(0))
                .collect();
            let line = |cells: &[String]| {
                cells
                    .iter()
                    .enumerate()
                    .map(
                        |(i, c)| {
                            if i == 0 { format!("{c:<w$}", w = widths[i]) } else { format!("{c:>w$}", w = widths[i]) }
                        },
                    )
                    .collect::<Vec<_>>()
                    .join("  ")
                    .trim_end()
                    .to_string()
            };
            writeln!(out, "{}", line(&t.head))?;
            for r in &t.rows {
                writeln!(out, "{}", line(r))?;
            }
        }
        let count =
            |c: Change| self.rows.iter().flat_map(|s| &s.figures).flat_map(|f| &f.changes).filter(|x| **x == c).count();
        writeln!(
            out,
            "\n{} figure(s) worse beyond the noise, {} better, {} within it",
            count(Change::Worse),
            count(Change::Better),
            count(Change::WithinNoise)
        )?;
        if let Some((ok, text)) = self.gate_text() {
            writeln!(out, "--max-regression: {}: {text}", if ok { "PASS" } else { "FAIL" })?;
        }
        Ok(())
    }

    pub fn write_json(&self, out: &mut dyn Write) -> Result<()> {
        let runs: Vec<_> = self
            .runs
            .iter()
            .map(|r| {
                json!({
                    "run_id": r.header.id, "uuid": r.header.uuid, "kind": r.header.kind,
                    "hostname": r.header.hostname, "started_unix_ns": r.header.started_unix_ns,
                    "status": r.header.status, "kernel_release": r.inventory.kernel_release,
                    "preempt_model": r.inventory.preempt_model,
                })
            })
            .collect();
        let doc = json!({
            "format": "rtscope-compare",
            "format_version": 1,
            "runs": runs,
            "confidence": CONFIDENCE,
            "replicates": REPLICATES,
            "series": self.rows,
            "max_regression_pct": self.max_regression,
            "regressions": self.regressions,
            "passed": self.passed(),
        });
        serde_json::to_writer_pretty(&mut *out, &doc)?;
        writeln!(out)?;
        Ok(())
    }

    /// The HTML page: the runs, the gate, and per probe and metric the
    /// tables and every run's exceedance curve overlaid.
    pub fn doc(&self) -> Doc {
        let mut sections = Vec::new();
        let mut runs = Section::new("cmp-runs", "Runs");
        let mut t = Table::new(
            ["run", "kind", "host", "kernel", "preemption", "started (UTC)", "status", "command"]
                .map(String::from)
                .to_vec(),
            8,
        );
        t.numeric = vec![false; 8];
        for r in self.runs {
            let h = &r.header;
            t.row(vec![
                h.id.to_string(),
                h.kind.clone(),
                h.hostname.clone(),
                r.inventory.kernel_release.clone(),
                r.inventory.preempt_model.clone(),
                crate::commands::utc(h.started_unix_ns),
                h.status.as_str().into(),
                h.command_line.join(" "),
            ]);
        }
        runs.push(Block::Table(t));
        runs.push(Block::Para(self.legend()));
        if let Some((ok, text)) = self.gate_text() {
            runs.push(Block::Verdict {
                outcome: if ok { Outcome::Pass } else { Outcome::Fail },
                text,
                details: vec![],
            });
        }
        sections.push(runs);
        // A section per (load, probe, metric): its CPUs' tables and one plot.
        let mut groups: Vec<(String, String, String)> = Vec::new();
        for s in &self.rows {
            let g = (s.load.clone(), s.probe.clone(), s.metric.clone());
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
        for (gi, (load, probe, metric)) in groups.iter().enumerate() {
            let title =
                format!("{probe} {metric}{}", if load.is_empty() { String::new() } else { format!(" [{load}]") });
            let mut sec = Section::new(format!("cmp-{gi}"), title.clone());
            let curves: Vec<Curve> = self
                .runs
                .iter()
                .filter_map(|r| {
                    let mut t: Option<Tally> = None;
                    for s in r
                        .series
                        .iter()
                        .filter(|s| load_of(s) == load && s.key.probe == *probe && s.key.metric == *metric)
                    {
                        t.get_or_insert_with(Tally::new).merge(s.total());
                    }
                    t.map(|t| Curve { label: run_label(r), points: exceedance_points(&t) })
                })
                .collect();
            let name = value_name(probe);
            sec.push(Block::Figure {
                svg: svg::exceedance(
                    &format!("cmp-exc-{gi}"),
                    &format!("{title}: percent of samples at or over each {name}, all CPUs of each run"),
                    &format!("{name} (us)"),
                    &curves,
                    None,
                ),
                caption: format!("{title}: every run's exceedance curve, its CPUs merged (log-log)"),
            });
            for s in self.rows.iter().filter(|s| s.load == *load && s.probe == *probe && s.metric == *metric) {
                sec.push(Block::Para(s.label()));
                sec.push(Block::Table(self.figure_table(s)));
            }
            sections.push(sec);
        }
        let ids: Vec<String> = self.runs.iter().map(|r| r.header.id.to_string()).collect();
        Doc {
            title: format!("rtscope compare: runs {}", ids.join(", ")),
            chapters: vec![Chapter {
                id: "cmp".into(),
                title: "Comparison".into(),
                subtitle: format!("baseline {}", run_label(&self.runs[0])),
                sections,
            }],
        }
    }
}
