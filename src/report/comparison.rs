//! `rtscope compare`: runs side by side per series and figure (columns =
//! runs, like the Siemens CE 3.0 assessment's platform tables), each run's ratio to the
//! first with its bootstrap interval, and whether the difference is beyond
//! the runs' noise; as text, JSON or an HTML page with overlaid plots.

use super::doc::{Block, Chapter, Doc, Outcome, Section, Table};
use super::sections::{exceedance_points, value_name};
use super::svg::{self, Curve};
use super::wrap::wrap;
use anyhow::Result;
use rtscope_model::compare::{
    self, CONFIDENCE, Change, Compared, FigureCmp, Gate, MAX_BLOCKS, MIN_INTERVALS, REPLICATES, RateCmp, Regression,
    Resampling, RunBlocks, SeriesCmp, Test, load_of,
};
use rtscope_model::hist::Tally;
use rtscope_model::run::{Run, RunStatus};
use rtscope_model::units::{self, human, us_f};
use serde_json::json;
use std::io::Write;

pub struct Comparison<'a> {
    pub runs: &'a [Run],
    pub compared: Compared,
    /// `--max-regression` and the options that shape it.
    pub gate: Option<Gate>,
    /// The gated figures and rates beyond it (empty without a gate).
    pub regressions: Vec<Regression>,
    /// Gated rows of the baseline that a later run lacks (the gate fails).
    pub unjudged: Vec<compare::Unjudged>,
    /// The runs that did not complete: (index, status).
    pub incomplete: Vec<(usize, RunStatus)>,
}

fn run_label(r: &Run) -> String {
    format!("run {}", r.header.id)
}

/// A p-value for people: 4 decimals, `<0.0001` below.
fn p_text(p: f64) -> String {
    if p < 1e-4 { "<0.0001".into() } else { format!("{p:.4}") }
}

/// `p=0.0312`, `p<0.0001`.
fn p_is(p: f64) -> String {
    if p < 1e-4 { "p<0.0001".into() } else { format!("p={p:.4}") }
}

/// What the test of run `i`'s figure rests on: the bootstrap interval of
/// the ratio, or the exceedance counts and p-value.
fn evidence(f: &FigureCmp, i: usize) -> String {
    match (f.tests[i], f.intervals[i], f.tails[i], f.p_values[i]) {
        (Some(Test::Bootstrap), Some([lo, hi]), ..) => format!("[{lo:.3}, {hi:.3}]"),
        (Some(Test::Exceedance), _, Some(t), Some(p)) => {
            format!("{}->{} over {} {}", t.baseline_above, t.above, us_f(t.threshold_ns), p_is(p))
        }
        _ => "-".into(),
    }
}

fn cpu_score(r: &Run) -> String {
    r.cpu_score.as_ref().map_or_else(|| "-".into(), |s| format!("{} (v{})", s.score, s.version))
}

impl<'a> Comparison<'a> {
    /// Compares `runs` (the first is the baseline), their intervals folded
    /// into `blocks` (one per run: [`compare::compare_blocks`]) and, with a
    /// gate, judges it; fails on a `--gate` selector that picks no row.
    pub fn new(runs: &'a [Run], blocks: Vec<RunBlocks>, gate: Option<Gate>) -> Result<Comparison<'a>> {
        let refs: Vec<&Run> = runs.iter().collect();
        let mut compared = compare::compare_blocks(&refs, blocks);
        let (mut regressions, mut unjudged) = (Vec::new(), Vec::new());
        if let Some(g) = &gate {
            compared.gate_rows(g).map_err(anyhow::Error::msg)?;
            regressions = compare::regressions(&compared, g);
            unjudged = compare::unjudged(&compared);
        }
        let incomplete = compare::incomplete(&refs);
        // --allow-incomplete: a run cut short may lack whole cells.
        if gate.as_ref().is_some_and(|g| g.allow_incomplete) {
            unjudged.retain(|u| !incomplete.iter().any(|(i, _)| *i == u.run));
        }
        Ok(Comparison { runs, compared, gate, regressions, unjudged, incomplete })
    }

    /// Whether the runs that did not complete fail the gate.
    fn incomplete_fails(&self) -> bool {
        self.gate.as_ref().is_some_and(|g| !g.allow_incomplete) && !self.incomplete.is_empty()
    }

    /// Whether the gate (if any) passed.
    pub fn passed(&self) -> bool {
        self.regressions.is_empty() && self.unjudged.is_empty() && !self.incomplete_fails()
    }

    fn figure_table(&self, s: &SeriesCmp) -> Table {
        let mut head = vec!["figure".to_string()];
        for (i, r) in self.runs.iter().enumerate() {
            head.push(format!("{} (us)", run_label(r)));
            if i > 0 {
                head.extend(["ratio", "95% interval / exceedances", "change"].map(String::from));
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
                    let ratio = f.ratios[i].map_or_else(|| "-".to_string(), |r| format!("x{r:.3}"));
                    cells.extend([ratio, evidence(f, i), f.changes[i].as_str().to_string()]);
                }
            }
            t.row(cells);
        }
        t
    }

    /// A row's title: its label, whether it gates, how each run was resampled.
    fn series_title(&self, s: &SeriesCmp) -> String {
        let how: Vec<String> = s
            .resampled
            .iter()
            .zip(self.runs)
            .filter_map(|(r, run)| {
                r.map(|r| {
                    let by = match r {
                        Resampling::Intervals => "by checkpoint intervals",
                        Resampling::Samples => "by samples",
                    };
                    format!("{} {by}", run_label(run))
                })
            })
            .collect();
        format!(
            "{} (us){}; bootstrap: {}",
            s.label(),
            if s.gated { ", gated" } else { "" },
            if how.is_empty() { "-".into() } else { how.join(", ") }
        )
    }

    fn rates_table(&self) -> Option<Table> {
        if self.compared.rates.is_empty() {
            return None;
        }
        let mut head = vec!["count".to_string(), "gated".to_string()];
        for (i, r) in self.runs.iter().enumerate() {
            head.push(format!("{} n", run_label(r)));
            head.push(format!("{} /s", run_label(r)));
            if i > 0 {
                head.extend(["ratio", "p", "change"].map(String::from));
            }
        }
        let mut t = Table::new(head, 2);
        for r in &self.compared.rates {
            t.row(self.rate_cells(r));
        }
        Some(t)
    }

    fn rate_cells(&self, r: &RateCmp) -> Vec<String> {
        let mut cells = vec![format!("{} {}", r.label(), r.figure), if r.gated { "yes" } else { "" }.to_string()];
        for i in 0..self.runs.len() {
            cells.push(r.counts[i].map_or_else(|| "-".into(), |c| c.to_string()));
            cells.push(r.rates_per_s[i].map_or_else(|| "-".into(), |x| format!("{x:.3}")));
            if i > 0 {
                let ratio = match (r.ratios[i], r.changes[i]) {
                    (Some(x), _) => format!("x{x:.3}"),
                    (None, Change::Worse | Change::WithinNoise) => "from 0".into(),
                    _ => "-".into(),
                };
                cells.extend([ratio, r.p_values[i].map_or_else(|| "-".into(), p_text), r.changes[i].as_str().into()]);
            }
        }
        cells
    }

    /// What the gate judges, in words.
    fn gate_scope(g: &Gate) -> String {
        let rows = if g.selectors.is_empty() {
            "each metric's merged-CPU row (or its only CPU) and each merged count, not the trace's stage series".into()
        } else {
            format!("--gate {}", g.selectors.iter().map(|s| s.text.as_str()).collect::<Vec<_>>().join(", "))
        };
        format!(
            "gated: {rows}; a figure fails when it rose by more than {}% and by at least {} beyond the noise, a count \
             when its rate rose by more than {}% beyond the noise{}",
            g.max_regression_pct,
            human(g.min_delta_ns),
            g.max_regression_pct,
            if g.allow_incomplete { "" } else { "; a run that did not complete fails it" }
        )
    }

    pub(super) fn gate_text(&self) -> Option<(bool, String)> {
        let g = self.gate.as_ref()?;
        let pct = g.max_regression_pct;
        let mut parts = Vec::new();
        if !self.regressions.is_empty() {
            let list: Vec<String> = self
                .regressions
                .iter()
                .map(|r| {
                    let ratio = r.ratio.map_or_else(|| "from 0".to_string(), |x| format!("x{x:.3}"));
                    let why = match (r.interval, r.p_value, r.delta_ns) {
                        (Some([lo, hi]), _, Some(d)) => format!(" [{lo:.3}, {hi:.3}], +{}us", us_f(d)),
                        (_, Some(p), Some(d)) => format!(" ({} test {}), +{}us", r.test.as_str(), p_is(p), us_f(d)),
                        (_, Some(p), None) => format!(" ({} test {})", r.test.as_str(), p_is(p)),
                        _ => String::new(),
                    };
                    format!("{} {} in {}: {ratio}{why}", r.series, r.figure, run_label(&self.runs[r.run]))
                })
                .collect();
            parts.push(format!(
                "{} figure(s) got worse by more than {pct}% beyond the noise: {}",
                list.len(),
                list.join("; ")
            ));
        }
        if !self.unjudged.is_empty() {
            let list: Vec<String> =
                self.unjudged.iter().map(|u| format!("{} in {}", u.series, run_label(&self.runs[u.run]))).collect();
            parts.push(format!(
                "{} gated row(s) of the baseline that a later run lacks or has no sample in, so not judged: {} \
                 (compare runs of the same probes and loads, or gate on the metrics both have with --gate \
                 PROBE.METRIC)",
                list.len(),
                list.join("; ")
            ));
        }
        if self.incomplete_fails() {
            let list: Vec<String> = self
                .incomplete
                .iter()
                .map(|(i, st)| format!("{} is {}", run_label(&self.runs[*i]), st.as_str()))
                .collect();
            parts.push(format!(
                "{}: an incomplete run may lack its worst part (--allow-incomplete accepts it)",
                list.join(", ")
            ));
        }
        if parts.is_empty() {
            return Some((true, format!("no gated figure got worse by more than {pct}% beyond the runs' noise")));
        }
        Some((false, parts.join("; ")))
    }

    fn legend(&self) -> String {
        format!(
            "ratio = the run's figure / {}'s. Mean and percentiles with 10+ samples above them in both runs: {:.0}% \
             bootstrap interval of the ratio ({REPLICATES} replicates), resampling whole checkpoint intervals (in at most \
             {MAX_BLOCKS} blocks) when a run has {MIN_INTERVALS}+ of them, single samples otherwise; worse / better: the \
             interval lies above / below 1. The maximum and percentiles further out: exceedance test, A->B over X = the \
             baseline's and the run's samples above X (the baseline's figure, or the run's when lower), exact binomial \
             test at 5%. Counts: rate per second of measurement, exact Poisson (conditional binomial) test at 5%",
            run_label(&self.runs[0]),
            CONFIDENCE * 100.0
        )
    }

    /// A line per run: what it was, its status and CPU score.
    fn run_lines(&self) -> Vec<String> {
        self.runs
            .iter()
            .map(|r| {
                format!(
                    "{}: {} on {}, {}, {} UTC, {}, CPU score {}",
                    run_label(r),
                    r.header.kind,
                    r.header.hostname,
                    r.inventory.kernel_release,
                    units::utc(r.header.started_unix_ns),
                    r.header.status.as_str(),
                    cpu_score(r)
                )
            })
            .collect()
    }

    /// The text comparison, within 100 columns: the platform table, the
    /// verdicts and the gate first; then the runs, a table per series and
    /// the counts.
    pub fn write_text(&self, out: &mut dyn Write) -> Result<()> {
        super::platform::write(self, out)?;
        super::summary::write_details_rule(out)?;
        writeln!(out, "runs:")?;
        for l in self.run_lines() {
            writeln!(out, "{}", wrap("", &l, 4).replacen("    ", "  ", 1))?;
        }
        if !self.incomplete.is_empty() && !self.incomplete_fails() {
            let list: Vec<String> = self
                .incomplete
                .iter()
                .map(|(i, st)| format!("{} is {}", run_label(&self.runs[*i]), st.as_str()))
                .collect();
            let note = format!("{}: an incomplete run may lack its worst part", list.join(", "));
            writeln!(out, "{}", wrap("note:", &note, 6))?;
        }
        writeln!(out, "{}", wrap("key:", &self.legend(), 5))?;
        if let Some(g) = &self.gate {
            writeln!(out, "{}", wrap("", &Self::gate_scope(g), 2).trim_start())?;
        }
        for s in &self.compared.series {
            writeln!(out, "\n{}", wrap("", &self.series_title(s), 2).trim_start())?;
            write_table(out, &self.figure_table(s))?;
        }
        if let Some(t) = self.rates_table() {
            writeln!(out, "\ncounts (rate per second of measurement)")?;
            write_table(out, &t)?;
        }
        let count = |c: Change| {
            self.compared.series.iter().flat_map(|s| &s.figures).flat_map(|f| &f.changes).filter(|x| **x == c).count()
                + self.compared.rates.iter().flat_map(|r| &r.changes).filter(|x| **x == c).count()
        };
        writeln!(
            out,
            "\n{} figure(s) worse beyond the noise, {} better, {} within it",
            count(Change::Worse),
            count(Change::Better),
            count(Change::WithinNoise)
        )?;
        if let Some((ok, text)) = self.gate_text() {
            let line = format!("--max-regression: {}: {text}", if ok { "PASS" } else { "FAIL" });
            writeln!(out, "{}", wrap("", &line, 2).trim_start())?;
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
                    "cpu_score": r.cpu_score.as_ref().map(|s| s.score),
                })
            })
            .collect();
        let g = self.gate.as_ref();
        let doc = json!({
            "format": "rtscope-compare",
            "format_version": 2,
            "runs": runs,
            "confidence": CONFIDENCE,
            "replicates": REPLICATES,
            "min_intervals": MIN_INTERVALS,
            "series": self.compared.series,
            "rates": self.compared.rates,
            "max_regression_pct": g.map(|g| g.max_regression_pct),
            "min_delta_ns": g.map(|g| g.min_delta_ns),
            "gate": g.map(|g| g.selectors.iter().map(|s| s.text.clone()).collect::<Vec<_>>()),
            "allow_incomplete": g.map(|g| g.allow_incomplete),
            "regressions": self.regressions,
            "unjudged": self.unjudged,
            "incomplete": self.incomplete.iter().map(|(i, st)| json!({"run": i, "status": st})).collect::<Vec<_>>(),
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
            ["run", "kind", "host", "kernel", "preemption", "started (UTC)", "status", "CPU score", "command"]
                .map(String::from)
                .to_vec(),
            9,
        );
        t.numeric = vec![false; 9];
        for r in self.runs {
            let h = &r.header;
            t.row(vec![
                h.id.to_string(),
                h.kind.clone(),
                h.hostname.clone(),
                r.inventory.kernel_release.clone(),
                r.inventory.preempt_model.clone(),
                units::utc(h.started_unix_ns),
                h.status.as_str().into(),
                cpu_score(r),
                h.command_line.join(" "),
            ]);
        }
        runs.push(Block::Table(t));
        runs.push(Block::Para(self.legend()));
        if let Some(g) = &self.gate {
            runs.push(Block::Para(Self::gate_scope(g)));
        }
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
        for s in &self.compared.series {
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
            for s in self.compared.series.iter().filter(|s| s.load == *load && s.probe == *probe && s.metric == *metric)
            {
                sec.push(Block::Para(self.series_title(s)));
                sec.push(Block::Table(self.figure_table(s)));
            }
            sections.push(sec);
        }
        if let Some(t) = self.rates_table() {
            let mut sec = Section::new("cmp-rates", "Counts");
            sec.push(Block::Para(
                "Counts the runs store (missed periods, lost datagrams, noise interruptions, overruns), as a rate per \
                 second of measurement, with the exact Poisson test of the two rates"
                    .into(),
            ));
            sec.push(Block::Table(t));
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

/// A table as aligned text: the first column left, the others right.
fn write_table(out: &mut dyn Write, t: &Table) -> Result<()> {
    let widths: Vec<usize> = (0..t.head.len())
        .map(|i| t.rows.iter().map(|r| r[i].len()).chain([t.head[i].len()]).max().unwrap_or(0))
        .collect();
    let line = |cells: &[String]| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| if i == 0 { format!("{c:<w$}", w = widths[i]) } else { format!("{c:>w$}", w = widths[i]) })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    // A table wider than the terminal (many runs) breaks its rows under them.
    let mut text = line(&t.head) + "\n";
    for r in &t.rows {
        text += &line(r);
        text.push('\n');
    }
    write!(out, "{}", super::wrap::fit(&text))?;
    Ok(())
}
