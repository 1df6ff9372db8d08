//! The repository's shipped files (dist/): the Grafana dashboard's and the
//! alert rules' queries, and the metric names the monitor serves, for the
//! tests that check them against a real Prometheus and against the page.

use rtscope_model::hist::Tally;
use std::path::{Path, PathBuf};

/// The repository's shipped files (dist/).
pub fn dist(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dist").join(path)
}

/// The dashboard's queries, the fleet table's first, with its variables
/// set as Grafana would (probe wakeup, every machine, threshold 100 us).
pub fn dashboard_exprs() -> Vec<String> {
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dist("grafana/rtscope-fleet.json")).unwrap()).unwrap();
    let mut panels = d["panels"].as_array().unwrap().clone();
    panels.sort_by_key(|p| (p["gridPos"]["y"].as_u64().unwrap(), p["gridPos"]["x"].as_u64().unwrap()));
    let mut exprs: Vec<String> = panels
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap().iter().map(|t| t["expr"].as_str().unwrap().to_string()))
        .collect();
    for v in d["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["query"]["query"].as_str() {
            // label_values(SELECTOR, label): the selector is the query.
            let inner = q.strip_prefix("label_values(").unwrap().rsplit_once(',').unwrap().0;
            exprs.push(inner.to_string());
        }
    }
    exprs
        .into_iter()
        .map(|e| {
            e.replace("$probe", "wakeup")
                .replace("$instance", ".*")
                .replace("$threshold", "0.0001")
                .replace("$__range", "1h")
                .replace("$__rate_interval", "1m")
        })
        .collect()
}

/// The alert rules' expressions.
pub fn alert_exprs() -> Vec<String> {
    let text = std::fs::read_to_string(dist("prometheus/rtscope-alerts.yml")).unwrap();
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        let Some(rest) = l.trim_start().strip_prefix("expr:") else { continue };
        let rest = rest.trim();
        if rest == "|" {
            let mut e = String::new();
            while let Some(n) = lines.peek() {
                if n.trim_start().contains(':') && !n.contains('(') {
                    break;
                }
                e += lines.next().unwrap().trim();
                e += " ";
            }
            out.push(e.trim().to_string());
        } else {
            out.push(rest.to_string());
        }
    }
    out
}

pub fn shipped_queries() -> Vec<String> {
    let mut q = dashboard_exprs();
    q.extend(alert_exprs());
    q
}

/// Every metric name the monitor serves (a page with one series and one
/// committed interval).
pub fn served_names() -> Vec<String> {
    use rtscope_model::metrics::{Exposition, Format, Health, SeriesCounters};
    let mut e = Exposition::new(vec![100_000]);
    let mut c = SeriesCounters::new(rtscope_model::run::SeriesKey::new("wakeup", "latency", 0), 1, 0.0);
    let mut t = Tally::new();
    t.record(20_000);
    c.add(&t, &[100_000], 0, 0, 1.0);
    e.series.insert(1, c);
    // A watched thread whose wake-ups are explained (--watch with a cause
    // threshold): the episode counters.
    let mut w = SeriesCounters::new(rtscope_model::run::SeriesKey::new("watch", "latency", 42), 1, 0.0);
    w.thread = Some((42, "myloop".into()));
    w.episodes = Some(rtscope_model::episode::CauseKind::ALL.iter().map(|&k| (k, 0)).collect());
    e.series.insert(2, w);
    let page = String::from_utf8(e.render(&Health::default(), Format::Text)).unwrap();
    let mut names: Vec<String> =
        page.lines().filter(|l| !l.starts_with('#')).map(|l| l.split(['{', ' ']).next().unwrap().to_string()).collect();
    names.push("up".into());
    names
}

/// Names of metrics in a PromQL expression (rtscope's, process_, up).
pub fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_alphabetic()
            && (i == 0
                || !(bytes[i - 1].is_ascii_alphanumeric()
                    || bytes[i - 1] == '_'
                    || bytes[i - 1] == '"'
                    || bytes[i - 1] == '$'))
        {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == '_') {
                i += 1;
            }
            let w: String = bytes[start..i].iter().collect();
            if w.starts_with("rtscope_") || w.starts_with("process_") || w == "up" {
                out.push(w);
            }
        } else {
            i += 1;
        }
    }
    out
}
