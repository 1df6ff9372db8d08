//! Which rows gate (`--gate` selectors) and the regressions they find
//! (`--max-regression`, `--min-delta`).

use super::*;

/// A `--gate` selector: `PROBE[.METRIC[.FIGURE[.CPU]]]`, each part a name
/// or a glob with `*`; FIGURE is one of [`FIGURES`]' names or a count's
/// (`overruns`, `missed`, `lost`, ...), CPU is `all` (the default: the
/// merged row, or a metric's only CPU), `cpuN` or `cpu*`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selector {
    pub text: String,
    pub(super) probe: String,
    pub(super) metric: String,
    pub(super) figure: String,
    /// None: the summary rows only.
    pub(super) cpu: Option<String>,
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters.
pub fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            let Some(tail) = text.strip_prefix(head) else { return false };
            (0..=tail.len()).filter(|&i| tail.is_char_boundary(i)).any(|i| glob(rest, &tail[i..]))
        }
    }
}

impl Selector {
    pub fn parse(text: &str) -> Result<Selector, String> {
        let bad = |why: &str| {
            Err(format!(
                "'{text}' {why}: a selector is PROBE[.METRIC[.FIGURE[.CPU]]], e.g. wakeup.latency.p99, netlat.*.max, \
                 ptimer.*.missed, wakeup.latency.max.cpu*"
            ))
        };
        if text.is_empty() || text.chars().any(|c| !(c.is_ascii_alphanumeric() || "._*-:@".contains(c))) {
            return bad("is not a selector");
        }
        let mut parts = text.splitn(3, '.');
        let probe = parts.next().unwrap_or_default().to_string();
        let metric = parts.next().unwrap_or("*").to_string();
        let mut figure = parts.next().unwrap_or("*").to_string();
        let mut cpu = None;
        if let Some((fig, last)) = figure.rsplit_once('.')
            && (last == "all" || last.starts_with("cpu"))
        {
            if last != "all" {
                cpu = Some(last.to_string());
            }
            figure = fig.to_string();
        } else if figure == "all" || figure.starts_with("cpu") {
            return bad("names a CPU where the figure goes (write PROBE.METRIC.*.CPU)");
        }
        if probe.is_empty() || metric.is_empty() || figure.is_empty() {
            return bad("has an empty part");
        }
        if let Some(c) = &cpu
            && !(c == "cpu*" || c[3..].parse::<u32>().is_ok())
        {
            return bad("has a CPU part that is neither all, cpuN nor cpu*");
        }
        Ok(Selector { text: text.into(), probe, metric, figure, cpu })
    }

    /// Whether the selector picks figure `figure` of the row.
    pub(super) fn matches(&self, probe: &str, metric: &str, figure: &str, cpu: Option<i64>, summary: bool) -> bool {
        let cpu_ok = match (&self.cpu, cpu) {
            (None, _) => summary,
            (Some(p), Some(c)) => glob(p, &format!("cpu{c}")),
            (Some(_), None) => false,
        };
        cpu_ok && glob(&self.probe, probe) && glob(&self.metric, metric) && glob(&self.figure, figure)
    }
}

/// What `--max-regression` gates on and how.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    /// A figure or rate must rise by more than this, percent.
    pub max_regression_pct: f64,
    /// A figure must rise by at least this, ns (counts: not applied).
    pub min_delta_ns: u64,
    /// `--gate`: the figures gated (empty: every figure of the summary
    /// rows but the trace's stage series).
    pub selectors: Vec<Selector>,
    /// `--allow-incomplete`: a run that did not complete does not fail it.
    pub allow_incomplete: bool,
}

impl Compared {
    /// Marks the rows `gate` judges; with selectors, only the figures they
    /// pick count (see [`regressions`]). Fails naming a selector that
    /// picks nothing.
    pub fn gate_rows(&mut self, gate: &Gate) -> Result<(), String> {
        if gate.selectors.is_empty() {
            for s in &mut self.series {
                s.gated = s.summary && !crate::irqtime::from_trace(&s.metric);
            }
            for r in &mut self.rates {
                r.gated = r.summary;
            }
            return Ok(());
        }
        for sel in &gate.selectors {
            let mut any = false;
            for s in &mut self.series {
                if FIGURES.iter().any(|(f, _)| sel.matches(&s.probe, &s.metric, f, s.cpu, s.summary)) {
                    s.gated = true;
                    any = true;
                }
            }
            for r in &mut self.rates {
                if sel.matches(&r.probe, &r.metric, &r.figure, r.cpu, r.summary) {
                    r.gated = true;
                    any = true;
                }
            }
            if !any {
                let mut names: Vec<String> = self
                    .series
                    .iter()
                    .filter(|s| s.summary)
                    .map(|s| format!("{}.{}", s.probe, s.metric))
                    .chain(
                        self.rates
                            .iter()
                            .filter(|r| r.summary)
                            .map(|r| format!("{}.{}.{}", r.probe, r.metric, r.figure)),
                    )
                    .collect();
                names.dedup();
                return Err(format!(
                    "--gate {}: no compared row matches; the runs have {} (figures: mean, p50, p99, p99.9, p99.99, max)",
                    sel.text,
                    names.join(", ")
                ));
            }
        }
        Ok(())
    }
}

/// A gated figure or rate that got worse beyond the noise, by more than
/// the margin and the floor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Regression {
    pub series: String,
    /// `probe.metric.figure` (`.cpuN` for a per-CPU row): a `--gate` selector for it.
    pub selector: String,
    pub figure: String,
    /// The run's index among the compared ones (1: the second).
    pub run: usize,
    /// None: the baseline's rate was 0.
    pub ratio: Option<f64>,
    /// The increase, ns (figures only).
    pub delta_ns: Option<f64>,
    pub test: Test,
    /// The bootstrap interval of the ratio.
    pub interval: Option<[f64; 2]>,
    /// The exceedance or Poisson test's two-sided p-value.
    pub p_value: Option<f64>,
}

pub(super) fn selector_of(probe: &str, metric: &str, figure: &str, cpu: Option<i64>, summary: bool) -> String {
    match cpu {
        Some(c) if !summary => format!("{probe}.{metric}.{figure}.cpu{c}"),
        _ => format!("{probe}.{metric}.{figure}"),
    }
}

/// Every gated figure and rate of `c` (see [`Compared::gate_rows`]) that
/// got worse beyond the noise by more than `max_regression_pct` percent
/// and, for a figure, by at least `min_delta_ns`.
pub fn regressions(c: &Compared, gate: &Gate) -> Vec<Regression> {
    let picked = |probe: &str, metric: &str, figure: &str, cpu: Option<i64>, summary: bool| {
        gate.selectors.is_empty() || gate.selectors.iter().any(|s| s.matches(probe, metric, figure, cpu, summary))
    };
    let mut out = Vec::new();
    for s in c.series.iter().filter(|s| s.gated) {
        for f in s.figures.iter().filter(|f| picked(&s.probe, &s.metric, &f.figure, s.cpu, s.summary)) {
            for (i, ch) in f.changes.iter().enumerate() {
                let (Change::Worse, Some(r), Some(a), Some(b)) = (ch, f.ratios[i], f.values_ns[0], f.values_ns[i])
                else {
                    continue;
                };
                if (r - 1.0) * 100.0 > gate.max_regression_pct && b - a >= gate.min_delta_ns as f64 {
                    out.push(Regression {
                        series: s.label(),
                        selector: selector_of(&s.probe, &s.metric, &f.figure, s.cpu, s.summary),
                        figure: f.figure.clone(),
                        run: i,
                        ratio: Some(r),
                        delta_ns: Some(b - a),
                        test: f.tests[i].unwrap_or(Test::Bootstrap),
                        interval: f.intervals[i],
                        p_value: f.p_values[i],
                    });
                }
            }
        }
    }
    for r in c.rates.iter().filter(|r| r.gated && picked(&r.probe, &r.metric, &r.figure, r.cpu, r.summary)) {
        for (i, ch) in r.changes.iter().enumerate() {
            if *ch == Change::Worse && r.ratios[i].is_none_or(|x| (x - 1.0) * 100.0 > gate.max_regression_pct) {
                out.push(Regression {
                    series: r.label(),
                    selector: selector_of(&r.probe, &r.metric, &r.figure, r.cpu, r.summary),
                    figure: r.figure.clone(),
                    run: i,
                    ratio: r.ratios[i],
                    delta_ns: None,
                    test: Test::Poisson,
                    interval: None,
                    p_value: r.p_values[i],
                });
            }
        }
    }
    out
}

/// A gated row of the baseline that a later run cannot be judged on: the
/// run lacks the row, or has no sample in it (a run of other probes or
/// loads compared by mistake, a probe that stored nothing). Runs of other
/// CPUs or threads are judged on the merged rows the comparison lines up
/// for them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unjudged {
    /// The row: `wakeup latency all CPUs`, or a count's `... missed`.
    pub series: String,
    /// The run's index among the compared ones (1: the second).
    pub run: usize,
}

/// Every gated row of `c` (see [`Compared::gate_rows`]) with samples in the
/// baseline (a count: stored there) that a later run cannot be judged on.
pub fn unjudged(c: &Compared) -> Vec<Unjudged> {
    let series =
        c.series.iter().filter(|s| s.gated && s.counts.first().copied().flatten().is_some_and(|n| n > 0)).flat_map(
            |s| {
                s.counts
                    .iter()
                    .enumerate()
                    .skip(1)
                    .filter(|(_, n)| !n.is_some_and(|n| n > 0))
                    .map(|(i, _)| Unjudged { series: s.label(), run: i })
            },
        );
    let rates = c.rates.iter().filter(|r| r.gated && r.counts.first().is_some_and(Option::is_some)).flat_map(|r| {
        r.counts
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(_, n)| n.is_none())
            .map(|(i, _)| Unjudged { series: format!("{} {}", r.label(), r.figure), run: i })
    });
    series.chain(rates).collect()
}
