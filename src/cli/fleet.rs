//! The fleet's flags (`report --prometheus`, `compare --prometheus`): where
//! Prometheus answers, which monitors, which time ranges. Checked and
//! resolved into a [`FleetSpec`] before anything is read.

use crate::prometheus::ClientLimits;
use clap::Args;
use rtscope_model::metrics::query;

/// `--prometheus` and its companions, flattened into `report` and `compare`.
#[derive(Args, Debug, Default)]
pub struct PrometheusArgs {
    /// Read the monitors' data back from this Prometheus server (http://HOST:PORT[/PREFIX]; https is not supported
    /// yet) instead of runs: the fleet report, one chapter per machine (`instance`), worst case first; with
    /// compare, one machine's two --range (docs/monitor.md).
    #[arg(long, value_name = "URL", conflicts_with = "runs")]
    pub prometheus: Option<String>,
    /// With --prometheus: the monitors' series, as label matchers in braces.
    #[arg(long, value_name = "SELECTOR", default_value = "{}", requires = "prometheus")]
    pub selector: String,
    /// With --prometheus: the time range read, DUR ending at --at, or DUR@TIME ending at TIME (e.g. 7d, 1d@now-7d);
    /// compare takes two, the first the baseline [default: 1h].
    #[arg(long, value_name = "DUR[@TIME]", requires = "prometheus")]
    pub range: Vec<String>,
    /// With --prometheus: the end of the range: now, now-DUR, Unix seconds or a UTC time (2026-11-27T02:00:00Z).
    #[arg(long, value_name = "TIME", default_value = "now", requires = "prometheus")]
    pub at: String,
    /// With --prometheus: the length of each interval read back (the histograms and maxima per step) [default: the
    /// range / 240, at least 1m, at most the range].
    #[arg(long, value_name = "DUR", value_parser = super::dur, requires = "prometheus")]
    pub step: Option<u64>,
    /// With --prometheus: how long to wait for the server to accept a connection [default: 5s].
    #[arg(long, value_name = "DUR", value_parser = super::dur_above_0, requires = "prometheus")]
    pub connect_timeout: Option<u64>,
    /// With --prometheus: how long one query's whole answer may take, from the request sent to its last byte
    /// (Prometheus' own query timeout is 2m) [default: 30s].
    #[arg(long, value_name = "DUR", value_parser = super::dur_above_0, requires = "prometheus")]
    pub query_timeout: Option<u64>,
    /// With --prometheus: the largest answer taken from one query (e.g. 64M, 1G); a larger one is refused, naming
    /// this flag; at most half of the memory available [default: 256M].
    #[arg(long, value_name = "SIZE", value_parser = super::answer_size, requires = "prometheus")]
    pub max_answer: Option<usize>,
}

/// What to read from Prometheus, checked.
#[derive(Clone, Debug)]
pub struct FleetSpec {
    pub url: String,
    pub selector: String,
    /// The selector's label matchers (inside the braces).
    pub matchers: String,
    /// (start, end, step), Unix seconds, one per --range.
    pub windows: Vec<(f64, f64, f64)>,
    /// Whether --step was given (else the report may read in longer steps).
    pub step_given: bool,
    pub limits: ClientLimits,
}

/// Prometheus answers at most 11000 points per series.
const MAX_STEPS: f64 = 11_000.0;

impl PrometheusArgs {
    /// The checked spec, None without --prometheus; `ranges` how many
    /// --range the command takes (1 for report, 2 for compare).
    pub fn spec(&self, ranges: usize, now_s: f64) -> Result<Option<FleetSpec>, String> {
        let Some(url) = &self.prometheus else {
            let given = [
                ("--selector", self.selector != "{}"),
                ("--range", !self.range.is_empty()),
                ("--at", self.at != "now"),
                ("--step", self.step.is_some()),
                ("--connect-timeout", self.connect_timeout.is_some()),
                ("--query-timeout", self.query_timeout.is_some()),
                ("--max-answer", self.max_answer.is_some()),
            ];
            return match given.iter().find(|g| g.1) {
                Some((flag, _)) => Err(format!("{flag} goes with --prometheus URL (the fleet's data in Prometheus)")),
                None => Ok(None),
            };
        };
        let matchers = query::selector_matchers(&self.selector).map_err(|e| format!("--selector {e}"))?;
        let end = query::parse_time(&self.at, now_s).map_err(|e| format!("--at {e}"))?;
        let given: Vec<String> = if self.range.is_empty() { vec!["1h".into()] } else { self.range.clone() };
        if given.len() != ranges {
            return Err(if ranges == 1 {
                format!("--range: give one range, not {} (e.g. --range 7d)", given.len())
            } else {
                format!(
                    "--range: compare takes two ranges of one machine, the first the baseline (e.g. --range 1d@now-7d --range 1d), not {}",
                    given.len()
                )
            });
        }
        let mut windows = Vec::new();
        for r in &given {
            let (start, end) = query::parse_range(r, end, now_s).map_err(|e| format!("--range {e}"))?;
            let len = end - start;
            let step = match self.step {
                Some(ns) => ns as f64 / 1e9,
                None => (len / 240.0).max(60.0).min(len).round().max(1.0),
            };
            if step < 1.0 {
                return Err("--step: at least 1s".into());
            }
            if step > len {
                return Err(format!(
                    "--step {}: longer than --range {r}",
                    rtscope_model::units::human((step * 1e9) as u64)
                ));
            }
            if len / step > MAX_STEPS {
                return Err(format!(
                    "--step: {r} in steps of {} is more than Prometheus' 11000 points per series; give a longer --step",
                    rtscope_model::units::human((step * 1e9) as u64)
                ));
            }
            windows.push((start, end, step));
        }
        let d = ClientLimits::default();
        let limits = ClientLimits {
            connect_ns: self.connect_timeout.unwrap_or(d.connect_ns),
            query_ns: self.query_timeout.unwrap_or(d.query_ns),
            max_answer: self.max_answer.unwrap_or(d.max_answer),
        };
        if let Some(n) = self.max_answer {
            crate::sys::mem::check_share(
                &format!("--max-answer {}", crate::sys::mem::human_bytes(n as u64)),
                n as u64,
                "give a smaller --max-answer",
            )?;
        }
        Ok(Some(FleetSpec {
            url: url.clone(),
            selector: self.selector.clone(),
            matchers,
            windows,
            step_given: self.step.is_some(),
            limits,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(range: &[&str], step: Option<u64>) -> PrometheusArgs {
        PrometheusArgs {
            prometheus: Some("http://localhost:9090".into()),
            selector: r#"{job="rtscope"}"#.into(),
            range: range.iter().map(|r| r.to_string()).collect(),
            at: "now".into(),
            step,
            ..Default::default()
        }
    }

    #[test]
    fn ranges_and_steps_are_checked_naming_the_flag() {
        let now = 1_800_000_000.0;
        let s = args(&["7d"], None).spec(1, now).unwrap().unwrap();
        assert_eq!(s.matchers, r#"job="rtscope""#);
        assert_eq!(s.windows, vec![(now - 604_800.0, now, 2520.0)]);
        let s = args(&["30s"], None).spec(1, now).unwrap().unwrap();
        assert_eq!(s.windows[0].2, 30.0);
        let s = args(&["1d@now-7d", "1d"], None).spec(2, now).unwrap().unwrap();
        assert_eq!(s.windows[0].1, now - 604_800.0);
        assert!(args(&["7d"], None).spec(2, now).unwrap_err().starts_with("--range"));
        assert!(args(&["7x"], None).spec(1, now).unwrap_err().starts_with("--range"));
        assert!(args(&["7d"], Some(1_000_000_000)).spec(1, now).unwrap_err().starts_with("--step"));
        assert!(args(&["1m"], Some(120_000_000_000)).spec(1, now).unwrap_err().starts_with("--step"));
        let mut a = args(&["1h"], None);
        a.selector = "rtscope".into();
        assert!(a.spec(1, now).unwrap_err().starts_with("--selector"));
        a.selector = "{}".into();
        a.at = "tomorrow".into();
        assert!(a.spec(1, now).unwrap_err().starts_with("--at"));
        let mut alone = PrometheusArgs { selector: "{}".into(), at: "now".into(), ..Default::default() };
        assert!(alone.spec(1, now).unwrap().is_none());
        alone.range = vec!["1h".into()];
        assert!(alone.spec(1, now).unwrap_err().starts_with("--range goes with --prometheus"));
    }
}
