//! The Prometheus exposition of a monitor (`rtscope monitor`): what each
//! committed checkpoint interval adds to its series' counters, and the
//! `/metrics` page in the Prometheus text format (0.0.4), OpenMetrics
//! (1.0.0) or, for a scraper that asks for it, the protobuf format with
//! native histograms (`proto.rs`), whichever the `Accept` header prefers.
//!
//! Names and units follow Prometheus' conventions: base units (seconds,
//! bytes), `_total` on counters, a histogram family per kind of value
//! (`families.rs`: latencies, interruption lengths, deviations, periods,
//! runtimes, response times), whose classic buckets are [`BUCKETS_NS`]. Counts are taken from each interval's
//! HdrHistogram: a sample within its resolution (0.1 %) of a bucket bound or
//! a threshold counts above it.

pub mod families;
mod proto;
pub mod query;

use crate::episode::CauseKind;
use crate::hist::{Hist, Tally};
use crate::run::SeriesKey;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The classic histogram's upper bounds (`le`), ns: 1-2-5 steps from 1 us
/// to 100 ms; `+Inf` after them.
pub const BUCKETS_NS: [u64; 16] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
];

/// The exceedance thresholds counted by default, ns.
pub const DEFAULT_THRESHOLDS_NS: [u64; 5] = [50_000, 100_000, 200_000, 500_000, 1_000_000];

/// Which exposition format a scrape gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4.
    Text,
    /// OpenMetrics text 1.0.0.
    OpenMetrics,
    /// The delimited protobuf format (`io.prometheus.client.MetricFamily`),
    /// with native histograms.
    Protobuf,
}

impl Format {
    /// The `Content-Type` of a page in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Protobuf => {
                "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
            }
        }
    }

    /// The format an `Accept` header prefers: the one of highest quality
    /// (the earlier one of equal quality) among protobuf
    /// (`application/vnd.google.protobuf` with
    /// `proto=io.prometheus.client.MetricFamily` and
    /// `encoding=delimited`: what Prometheus asks for first with native
    /// histograms on), OpenMetrics 1.x and the text format; the text format
    /// without a header, as for `curl`.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else { return Format::Text };
        let mut best: Option<(f64, Format)> = None;
        for part in accept.split(',') {
            let mut fields = part.split(';').map(str::trim);
            let media = fields.next().unwrap_or_default().to_ascii_lowercase();
            let mut q = 1.0;
            let mut version = None;
            let (mut proto, mut delimited) = (false, false);
            for f in fields {
                if let Some(v) = f.strip_prefix("q=") {
                    q = v.parse().unwrap_or(0.0);
                } else if let Some(v) = f.strip_prefix("version=") {
                    version = Some(v.to_string());
                } else if f == "proto=io.prometheus.client.MetricFamily" {
                    proto = true;
                } else if f == "encoding=delimited" {
                    delimited = true;
                }
            }
            let format = match media.as_str() {
                "application/vnd.google.protobuf" if proto && delimited => Format::Protobuf,
                "application/openmetrics-text" if version.as_deref().is_none_or(|v| v.starts_with("1.")) => {
                    Format::OpenMetrics
                }
                "text/plain" | "*/*" | "text/*" => Format::Text,
                _ => continue,
            };
            if q > 0.0 && best.is_none_or(|(bq, _)| q > bq) {
                best = Some((q, format));
            }
        }
        best.map_or(Format::Text, |(_, f)| f)
    }
}

/// One monitored series' counters since the monitor started.
#[derive(Clone, Debug)]
pub struct SeriesCounters {
    pub key: SeriesKey,
    /// A watched thread's series (`rtscope monitor --watch`): its thread id
    /// and name, its labels in place of `cpu`.
    pub thread: Option<(i32, String)>,
    /// Samples above the cause threshold, by the class of their largest
    /// cause; None where they are not explained (no threshold).
    pub episodes: Option<BTreeMap<CauseKind, u64>>,
    /// When the series began, Unix seconds (OpenMetrics `_created`).
    pub created_s: f64,
    /// Samples at or below each of [`BUCKETS_NS`].
    pub buckets: [u64; BUCKETS_NS.len()],
    pub count: u64,
    /// Sum of the values (a signed series' negative ones subtracted).
    pub sum_ns: i128,
    /// The native histogram: counts per bucket index of [`NATIVE_SCHEMA`]
    /// (values > 0; of a signed series, the magnitudes of those < 0), and
    /// values of 0.
    pub native_pos: BTreeMap<i32, u64>,
    pub native_neg: BTreeMap<i32, u64>,
    pub native_zero: u64,
    /// Samples above each threshold, in the order of the thresholds.
    pub above: Vec<u64>,
    pub missed_periods: u64,
    pub lost_exceedances: u64,
    pub checkpoints: u64,
    /// The largest sample of the last committed interval (None before one).
    pub interval_max_ns: Option<u64>,
    pub max_ns: u64,
    /// End of the last committed interval, Unix seconds.
    pub last_checkpoint_s: f64,
}

/// The native histograms' schema: 2^3 = 8 buckets per power of two (each
/// bound 9 % above the one before), bucket `i` holding values in
/// (2^((i-1)/8), 2^(i/8)] seconds.
pub const NATIVE_SCHEMA: i32 = 3;
/// The zero bucket's width: values of 0 (Prometheus' default, 2^-128).
pub const NATIVE_ZERO_THRESHOLD: f64 = 2.938735877055719e-39;

/// The native bucket of `ns` > 0 (as seconds).
pub fn native_index(ns: u64) -> i32 {
    let x = ns as f64 / 1e9;
    let scale = f64::from(1 << NATIVE_SCHEMA);
    let mut i = (x.log2() * scale).ceil() as i32;
    // log2 of an exact bound may round up past it.
    if 2f64.powf(f64::from(i - 1) / scale) >= x {
        i -= 1;
    }
    i
}

/// Adds `h`'s counts into native buckets (each HdrHistogram bucket by its
/// highest equivalent value, as the classic buckets); returns its zeros.
fn native_buckets(h: &Hist, into: &mut BTreeMap<i32, u64>) -> u64 {
    let mut zeros = 0;
    for v in h.iter_recorded() {
        let ns = h.highest_equivalent(v.value_iterated_to());
        if v.value_iterated_to() == 0 {
            zeros += v.count_at_value();
        } else {
            *into.entry(native_index(ns)).or_default() += v.count_at_value();
        }
    }
    zeros
}

/// Samples of `t` at or below `bound` (as the histogram resolves them: a
/// bucket counts when its highest equivalent value is at or below it).
/// The negative half of a signed tally is below every bound >= 0.
pub fn count_at_or_below(t: &Tally, bound: u64) -> u64 {
    let neg = t.neg.as_ref().map_or(0, |n| n.stats.count);
    if t.stats.count == 0 {
        return neg;
    }
    if t.stats.max <= bound {
        return neg + t.stats.count - t.stats.overflows;
    }
    let mut n = 0;
    for v in t.hist.iter_recorded() {
        if t.hist.highest_equivalent(v.value_iterated_to()) > bound {
            break;
        }
        n += v.count_at_value();
    }
    neg + n
}

impl SeriesCounters {
    pub fn new(key: SeriesKey, thresholds: usize, created_s: f64) -> SeriesCounters {
        SeriesCounters {
            key,
            thread: None,
            episodes: None,
            created_s,
            buckets: [0; BUCKETS_NS.len()],
            count: 0,
            sum_ns: 0,
            native_pos: BTreeMap::new(),
            native_neg: BTreeMap::new(),
            native_zero: 0,
            above: vec![0; thresholds],
            missed_periods: 0,
            lost_exceedances: 0,
            checkpoints: 0,
            interval_max_ns: None,
            max_ns: 0,
            last_checkpoint_s: created_s,
        }
    }

    /// Adds one committed interval: its samples `t`, its missed periods and
    /// lost exceedances, ending at `end_s` (Unix seconds).
    pub fn add(&mut self, t: &Tally, thresholds_ns: &[u64], missed: u64, lost: u64, end_s: f64) {
        for (b, &le) in self.buckets.iter_mut().zip(&BUCKETS_NS) {
            *b += count_at_or_below(t, le);
        }
        for (a, &th) in self.above.iter_mut().zip(thresholds_ns) {
            *a += t.count() - count_at_or_below(t, th);
        }
        self.count += t.count();
        // Negative values (a signed series) take from the sum.
        let neg = t.neg.as_ref().map_or(0, |n| n.stats.sum as i128);
        self.sum_ns += t.stats.sum as i128 - neg;
        self.native_zero += native_buckets(&t.hist, &mut self.native_pos);
        if let Some(n) = &t.neg {
            self.native_zero += native_buckets(&n.hist, &mut self.native_neg);
        }
        self.missed_periods += missed;
        self.lost_exceedances += lost;
        self.checkpoints += 1;
        let max = if t.stats.count > 0 { t.stats.max } else { 0 };
        self.interval_max_ns = Some(max);
        self.max_ns = self.max_ns.max(max);
        self.last_checkpoint_s = end_s;
    }
}

/// What the monitor says about itself.
#[derive(Clone, Debug, Default)]
pub struct Health {
    pub version: String,
    /// Each probe's stated duty: (probe, CPUs, duty in words).
    pub probes: Vec<(String, String, String)>,
    /// Probes whose measuring threads run.
    pub probes_running: u64,
    pub start_time_s: f64,
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub store_bytes: u64,
    pub store_limit_bytes: u64,
    /// Store errors: commits or retention that failed.
    pub store_errors: u64,
    /// Intervals merged into summaries by the retention.
    pub summarised_intervals: u64,
    /// Raw exceedances dropped from summarised spans (their samples stay
    /// in the summaries' histograms).
    pub thinned_exceedances: u64,
    pub scrapes: u64,
}

/// Every series' counters, by series id.
#[derive(Clone, Debug, Default)]
pub struct Exposition {
    pub thresholds_ns: Vec<u64>,
    pub series: BTreeMap<i64, SeriesCounters>,
}

/// A per-series counter's value.
type Counter = fn(&SeriesCounters) -> u64;
/// A per-series gauge's value, if it has one yet.
type Reading = fn(&SeriesCounters) -> Option<f64>;

/// A family's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
    Info,
}

/// One family of the page, whatever the format: `base` is its name without
/// `_total` (counters) or `_info` (infos).
struct Family {
    base: &'static str,
    kind: Kind,
    unit: &'static str,
    help: String,
    samples: Vec<Sample>,
}

struct Sample {
    labels: Vec<(&'static str, String)>,
    value: Value,
    /// OpenMetrics `_created`, Unix seconds.
    created: Option<f64>,
}

enum Value {
    Number(f64),
    Histogram(Box<HistValue>),
}

struct HistValue {
    /// (upper bound in seconds, cumulative count), +Inf left out.
    buckets: Vec<(f64, u64)>,
    count: u64,
    sum_s: f64,
    zero: u64,
    pos: Vec<(i32, u64)>,
    neg: Vec<(i32, u64)>,
}

/// Seconds as Prometheus writes them.
fn secs(ns: u64) -> String {
    format!("{}", ns as f64 / 1e9)
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// A histogram family's HELP text: what it holds, and how its series are labelled.
fn histogram_help(v: &families::Values) -> String {
    format!(
        "Each value measured, in seconds: {}. Per probe, metric and CPU; a watched thread's per tid and comm.",
        v.what
    )
}

/// A gauge's HELP text: `lead` and what its family holds.
fn gauge_help(lead: &str, v: &families::Values) -> String {
    format!("{lead} {}, in seconds.", v.what)
}

/// The names of the families the monitor serves and the fleet report
/// (`report --prometheus`) reads back: one spelling for the writer and
/// every reader (the histograms and their gauges: [`families`]).
pub mod names {
    pub const LAST_CHECKPOINT: &str = "rtscope_last_checkpoint_timestamp_seconds";
    pub const MISSED_PERIODS: &str = "rtscope_missed_periods";
    pub const LOST_EXCEEDANCES: &str = "rtscope_lost_exceedances";
    pub const CHECKPOINTS: &str = "rtscope_checkpoints";
    pub const EXCEEDANCES: &str = "rtscope_exceedances";
    pub const EPISODES: &str = "rtscope_episodes";

    /// A counter's samples: `BASE_total`.
    pub fn total(base: &str) -> String {
        format!("{base}_total")
    }

    /// A classic histogram's buckets: `BASE_bucket`.
    pub fn bucket(base: &str) -> String {
        format!("{base}_bucket")
    }
}

fn family(base: &'static str, kind: Kind, unit: &'static str, help: impl Into<String>) -> Family {
    Family { base, kind, unit, help: help.into(), samples: Vec::new() }
}

fn number(labels: Vec<(&'static str, String)>, v: f64, created: Option<f64>) -> Sample {
    Sample { labels, value: Value::Number(v), created }
}

impl Exposition {
    pub fn new(thresholds_ns: Vec<u64>) -> Exposition {
        Exposition { thresholds_ns, series: BTreeMap::new() }
    }

    /// The `/metrics` page in format `f`.
    pub fn render(&self, health: &Health, f: Format) -> Vec<u8> {
        let families = self.families(health);
        match f {
            Format::Protobuf => proto::encode(&families),
            _ => text(&families, f == Format::OpenMetrics).into_bytes(),
        }
    }

    fn families(&self, h: &Health) -> Vec<Family> {
        let labels = |s: &SeriesCounters| -> Vec<(&'static str, String)> {
            let k = &s.key;
            let mut l = vec![("probe", k.probe.clone()), ("metric", k.metric.clone())];
            match &s.thread {
                Some((tid, comm)) => l.extend([("tid", tid.to_string()), ("comm", comm.clone())]),
                None => l.push(("cpu", k.cpu.to_string())),
            }
            l
        };
        let mut out = Vec::new();
        // Per kind of value: its histogram, then its two gauges; a kind
        // without series is left out (the latencies' always served).
        let of = |s: &SeriesCounters| families::of_series(&s.key.probe, &s.key.metric).meaning;
        for v in &families::ALL {
            let mine: Vec<&SeriesCounters> = self.series.values().filter(|s| of(s) == v.meaning).collect();
            if mine.is_empty() && v.meaning != families::ALL[0].meaning {
                continue;
            }
            let mut hist = family(v.histogram, Kind::Histogram, "seconds", histogram_help(v));
            for s in &mine {
                let value = HistValue {
                    buckets: s.buckets.iter().zip(BUCKETS_NS).map(|(&c, le)| (le as f64 / 1e9, c)).collect(),
                    count: s.count,
                    sum_s: s.sum_ns as f64 / 1e9,
                    zero: s.native_zero,
                    pos: s.native_pos.iter().map(|(&i, &c)| (i, c)).collect(),
                    neg: s.native_neg.iter().map(|(&i, &c)| (i, c)).collect(),
                };
                hist.samples.push(Sample {
                    labels: labels(s),
                    value: Value::Histogram(Box::new(value)),
                    created: Some(s.created_s),
                });
            }
            out.push(hist);
            let gauges: [(&'static str, &'static str, Reading); 2] = [
                (v.interval_max, "The largest of the last committed checkpoint interval's", |s| {
                    s.interval_max_ns.map(|m| m as f64 / 1e9)
                }),
                (v.max, "The largest since the monitor started of the", |s| Some(s.max_ns as f64 / 1e9)),
            ];
            for (base, lead, get) in gauges {
                let help = gauge_help(lead, v);
                let mut f = family(base, Kind::Gauge, "seconds", help);
                f.samples = mine.iter().filter_map(|s| Some(number(labels(s), get(s)?, None))).collect();
                out.push(f);
            }
        }
        let mut last = family(
            names::LAST_CHECKPOINT,
            Kind::Gauge,
            "seconds",
            "When the series' last checkpoint interval ended (Unix time).",
        );
        last.samples = self.series.values().map(|s| number(labels(s), s.last_checkpoint_s, None)).collect();
        out.push(last);
        let counters: [(&'static str, &'static str, Counter); 3] = [
            (
                names::MISSED_PERIODS,
                "Periods the probe missed because a wake-up came later than the next one (samples not taken).",
                |s| s.missed_periods,
            ),
            (
                names::LOST_EXCEEDANCES,
                "Samples above the exceedance threshold whose raw value did not fit in the ring to the writer (still \
                 in the histogram).",
                |s| s.lost_exceedances,
            ),
            (names::CHECKPOINTS, "Checkpoint intervals committed to the monitor's store.", |s| s.checkpoints),
        ];
        for (base, help, get) in counters {
            let mut f = family(base, Kind::Counter, "", help);
            f.samples = self.series.values().map(|s| number(labels(s), get(s) as f64, Some(s.created_s))).collect();
            out.push(f);
        }
        let mut exc =
            family(names::EXCEEDANCES, Kind::Counter, "", "Values above each threshold (label threshold, seconds).");
        for s in self.series.values() {
            for (n, &th) in s.above.iter().zip(&self.thresholds_ns) {
                let mut l = labels(s);
                l.push(("threshold", secs(th)));
                exc.samples.push(number(l, *n as f64, Some(s.created_s)));
            }
        }
        out.push(exc);
        let mut eps = family(
            names::EPISODES,
            Kind::Counter,
            "",
            "Values above the cause threshold, explained from the trace, by the class of their largest cause (label \
             cause: thread, irq, softirq, timer, user, unaccounted, remote).",
        );
        for s in self.series.values() {
            for (kind, n) in s.episodes.iter().flatten() {
                let mut l = labels(s);
                l.push(("cause", kind.as_str().to_string()));
                eps.samples.push(number(l, *n as f64, Some(s.created_s)));
            }
        }
        out.push(eps);
        health_families(h, &mut out);
        out
    }
}

/// The monitor's own families.
fn health_families(h: &Health, out: &mut Vec<Family>) {
    let mut build = family("rtscope_build", Kind::Info, "", "The monitor's version.");
    build.samples.push(number(vec![("version", h.version.clone())], 1.0, None));
    out.push(build);
    let mut probes =
        family("rtscope_monitor_probe", Kind::Info, "", "Each monitored probe, its CPUs and its stated duty.");
    for (p, c, d) in &h.probes {
        probes.samples.push(number(vec![("probe", p.clone()), ("cpus", c.clone()), ("duty", d.clone())], 1.0, None));
    }
    out.push(probes);
    let gauges: [(&'static str, &'static str, &'static str, f64); 5] = [
        ("rtscope_monitor_probes_running", "", "Probes whose measuring threads are running.", h.probes_running as f64),
        ("rtscope_monitor_store_bytes", "bytes", "Bytes the monitor's store uses.", h.store_bytes as f64),
        (
            "rtscope_monitor_store_limit_bytes",
            "bytes",
            "The store's limit (--max-store): the retention summarises older intervals to stay below it.",
            h.store_limit_bytes as f64,
        ),
        ("process_start_time_seconds", "seconds", "Start time of the process since the Unix epoch.", h.start_time_s),
        ("process_resident_memory_bytes", "bytes", "Resident memory size of the process.", h.resident_bytes as f64),
    ];
    for (base, unit, help, v) in gauges {
        let mut f = family(base, Kind::Gauge, unit, help);
        f.samples.push(number(vec![], v, None));
        out.push(f);
    }
    let counters: [(&'static str, &'static str, &'static str, f64); 5] = [
        (
            "process_cpu_seconds",
            "seconds",
            "User and system CPU time of the process (its probes' measuring threads included).",
            h.cpu_seconds,
        ),
        ("rtscope_monitor_store_errors", "", "Store commits or retention passes that failed.", h.store_errors as f64),
        (
            "rtscope_monitor_summarised_intervals",
            "",
            "Checkpoint intervals merged into summaries by the retention (their samples kept).",
            h.summarised_intervals as f64,
        ),
        (
            "rtscope_monitor_thinned_exceedances",
            "",
            "Raw exceedance samples dropped from summarised spans (counted in the summaries' histograms).",
            h.thinned_exceedances as f64,
        ),
        ("rtscope_monitor_scrapes", "", "Pages served on /metrics, this one included.", h.scrapes as f64),
    ];
    for (base, unit, help, v) in counters {
        let mut f = family(base, Kind::Counter, unit, help);
        f.samples.push(number(vec![], v, None));
        out.push(f);
    }
}

/// `{a="x",b="y"}` (with `extra` last), or nothing without labels.
fn label_set(labels: &[(&str, String)], extra: Option<(&str, &str)>) -> String {
    let mut parts: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
    if let Some((k, v)) = extra {
        parts.push(format!("{k}=\"{v}\""));
    }
    if parts.is_empty() { String::new() } else { format!("{{{}}}", parts.join(",")) }
}

/// The page in the text format, or OpenMetrics when `om`.
fn text(families: &[Family], om: bool) -> String {
    let mut out = String::with_capacity(8192);
    for f in families {
        let (kind, name) = match (f.kind, om) {
            (Kind::Counter, false) => ("counter", format!("{}_total", f.base)),
            (Kind::Counter, true) => ("counter", f.base.to_string()),
            (Kind::Gauge, _) => ("gauge", f.base.to_string()),
            (Kind::Histogram, _) => ("histogram", f.base.to_string()),
            // OpenMetrics has an info type; the text format a gauge of 1.
            (Kind::Info, false) => ("gauge", format!("{}_info", f.base)),
            (Kind::Info, true) => ("info", f.base.to_string()),
        };
        let _ = writeln!(out, "# HELP {name} {}", f.help);
        let _ = writeln!(out, "# TYPE {name} {kind}");
        if om && !f.unit.is_empty() {
            let _ = writeln!(out, "# UNIT {name} {}", f.unit);
        }
        for s in &f.samples {
            let l = label_set(&s.labels, None);
            match (&s.value, f.kind) {
                (Value::Histogram(h), _) => {
                    for (le, c) in &h.buckets {
                        let _ = writeln!(
                            out,
                            "{}_bucket{} {c}",
                            f.base,
                            label_set(&s.labels, Some(("le", &format!("{le}"))))
                        );
                    }
                    let _ =
                        writeln!(out, "{}_bucket{} {}", f.base, label_set(&s.labels, Some(("le", "+Inf"))), h.count);
                    let _ = writeln!(out, "{}_sum{l} {}", f.base, h.sum_s);
                    let _ = writeln!(out, "{}_count{l} {}", f.base, h.count);
                }
                (Value::Number(v), Kind::Counter) => {
                    let _ = writeln!(out, "{}_total{l} {v}", f.base);
                }
                (Value::Number(v), Kind::Info) => {
                    let _ = writeln!(out, "{}_info{l} {v}", f.base);
                }
                (Value::Number(v), _) => {
                    let _ = writeln!(out, "{}{l} {v}", f.base);
                }
            }
            if let (true, Some(c), Kind::Counter | Kind::Histogram) = (om, s.created, f.kind) {
                let _ = writeln!(out, "{}_created{l} {c}", f.base);
            }
        }
    }
    if om {
        out.push_str("# EOF\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(values: &[u64]) -> Tally {
        let mut t = Tally::new();
        for &v in values {
            t.record(v);
        }
        t
    }

    #[test]
    fn negotiation_follows_the_accept_header() {
        assert_eq!(Format::negotiate(None), Format::Text);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Text);
        // Prometheus 2.42's header.
        let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,\
                    text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prom)), Format::OpenMetrics);
        assert_eq!(Format::negotiate(Some("text/plain;version=0.0.4")), Format::Text);
        assert_eq!(Format::negotiate(Some("application/openmetrics-text;q=0.2, text/plain;q=0.9")), Format::Text);
        assert_eq!(Format::negotiate(Some("application/json")), Format::Text);
        // Prometheus 2.42 with --enable-feature=native-histograms.
        let native = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.8,\
                      application/openmetrics-text;version=1.0.0;q=0.7,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(native)), Format::Protobuf);
        assert_eq!(Format::negotiate(Some("application/vnd.google.protobuf;encoding=text")), Format::Text);
    }

    #[test]
    fn counts_follow_the_buckets_and_thresholds() {
        let th = vec![50_000, 100_000];
        let mut c = SeriesCounters::new(SeriesKey::new("wakeup", "latency", 1), th.len(), 100.0);
        c.add(&series(&[900, 3_000, 60_000, 150_000, 150_000]), &th, 2, 1, 110.0);
        c.add(&series(&[40_000]), &th, 0, 0, 120.0);
        assert_eq!(c.count, 6);
        assert_eq!(c.buckets[0], 1); // <= 1 us
        assert_eq!(c.buckets[2], 2); // <= 5 us
        assert_eq!(c.buckets[5], 3); // <= 50 us
        assert_eq!(c.buckets[6], 4); // <= 100 us
        assert_eq!(c.buckets[7], 6); // <= 200 us
        assert_eq!(c.above, vec![3, 2]);
        assert_eq!(c.missed_periods, 2);
        assert_eq!(c.lost_exceedances, 1);
        assert_eq!(c.checkpoints, 2);
        assert_eq!(c.interval_max_ns, Some(40_000));
        assert_eq!(c.max_ns, 150_000);
        assert_eq!(c.sum_ns, 900 + 3_000 + 60_000 + 300_000 + 40_000);
        assert_eq!(c.last_checkpoint_s, 120.0);
    }

    #[test]
    fn native_buckets_follow_the_schema() {
        assert_eq!(native_index(1_000_000_000), 0);
        assert_eq!(native_index(2_000_000_000), 8);
        assert_eq!(native_index(1_000), -159);
        for ns in [1u64, 999, 20_000, 123_456, 5_000_000] {
            let i = native_index(ns);
            let x = ns as f64 / 1e9;
            assert!(2f64.powf(f64::from(i - 1) / 8.0) < x && x <= 2f64.powf(f64::from(i) / 8.0), "{ns}: {i}");
        }
        let mut c = SeriesCounters::new(SeriesKey::new("wakeup", "latency", 1), 0, 0.0);
        // By each HdrHistogram bucket's highest equivalent value, as the classic buckets.
        c.add(&series(&[0, 1_000, 1_001, 1_900_000_000]), &[], 0, 0, 1.0);
        assert_eq!(c.native_zero, 1);
        assert_eq!(c.native_pos.iter().map(|(&i, &n)| (i, n)).collect::<Vec<_>>(), [(-159, 2), (8, 1)]);
    }

    #[test]
    fn signed_values_below_zero_are_below_every_bucket() {
        let mut t = Tally::new_signed();
        t.record_signed(-2_000);
        t.record_signed(3_000);
        assert_eq!(count_at_or_below(&t, 1_000), 1);
        assert_eq!(count_at_or_below(&t, 5_000), 2);
        let mut c = SeriesCounters::new(SeriesKey::new("sleep", "x", 0), 0, 0.0);
        c.add(&t, &[], 0, 0, 1.0);
        assert_eq!(c.sum_ns, 1_000);
    }

    #[test]
    fn both_formats_name_the_families_by_the_conventions() {
        let mut e = Exposition::new(vec![100_000]);
        let mut c = SeriesCounters::new(SeriesKey::new("wakeup", "latency", 0), 1, 1.5);
        c.add(&series(&[2_000, 200_000]), &[100_000], 0, 0, 2.5);
        e.series.insert(1, c);
        let h = Health {
            version: "0.1.0".into(),
            probes: vec![("wakeup".into(), "0".into(), "1 kHz".into())],
            ..Default::default()
        };
        let text = String::from_utf8(e.render(&h, Format::Text)).unwrap();
        assert!(text.contains("# TYPE rtscope_latency_seconds histogram"), "{text}");
        assert!(text.contains(
            "rtscope_latency_seconds_bucket{probe=\"wakeup\",metric=\"latency\",cpu=\"0\",le=\"0.000002\"} 1"
        ));
        assert!(
            text.contains(
                "rtscope_latency_seconds_bucket{probe=\"wakeup\",metric=\"latency\",cpu=\"0\",le=\"+Inf\"} 2"
            )
        );
        assert!(text.contains("# TYPE rtscope_exceedances_total counter"));
        assert!(text.contains(
            "rtscope_exceedances_total{probe=\"wakeup\",metric=\"latency\",cpu=\"0\",threshold=\"0.0001\"} 1"
        ));
        assert!(text.contains("rtscope_build_info{version=\"0.1.0\"} 1"));
        assert!(!text.contains("# EOF") && !text.contains("_created"));
        let om = String::from_utf8(e.render(&h, Format::OpenMetrics)).unwrap();
        assert!(om.ends_with("# EOF\n"));
        assert!(om.contains("# TYPE rtscope_exceedances counter"));
        assert!(om.contains("# UNIT rtscope_latency_seconds seconds"));
        assert!(om.contains("# TYPE rtscope_build info"));
        assert!(om.contains("rtscope_latency_seconds_created{probe=\"wakeup\",metric=\"latency\",cpu=\"0\"} 1.5"));
    }

    #[test]
    fn each_kind_of_value_is_served_in_its_own_families() {
        let mut e = Exposition::new(vec![]);
        for (id, probe, metric) in [(1, "wakeup", "latency"), (2, "noise", "interruption"), (3, "wakeup", "irq:eth0")] {
            let mut c = SeriesCounters::new(SeriesKey::new(probe, metric, 0), 0, 1.0);
            c.add(&series(&[3_000]), &[], 0, 0, 2.0);
            e.series.insert(id, c);
        }
        let text = String::from_utf8(e.render(&Health::default(), Format::Text)).unwrap();
        let count = |f: &str, probe: &str, metric: &str| {
            text.contains(&format!("{f}_count{{probe=\"{probe}\",metric=\"{metric}\",cpu=\"0\"}} 1"))
        };
        assert!(count("rtscope_latency_seconds", "wakeup", "latency"), "{text}");
        assert!(count("rtscope_interruption_seconds", "noise", "interruption"), "{text}");
        assert!(count("rtscope_runtime_seconds", "wakeup", "irq:eth0"), "{text}");
        assert!(!text.contains("rtscope_latency_seconds_count{probe=\"noise\""), "{text}");
        assert!(text.contains("rtscope_interruption_max_seconds{probe=\"noise\""), "{text}");
        assert!(text.contains("rtscope_max_seconds{probe=\"wakeup\",metric=\"latency\""), "{text}");
        assert!(!text.contains("rtscope_max_seconds{probe=\"noise\""), "{text}");
        // Every family says what it holds; one without series is left out.
        assert!(text.contains("# HELP rtscope_interruption_seconds Each value measured, in seconds: interruption"));
        assert!(text.contains("# HELP rtscope_runtime_interval_max_seconds The largest"), "{text}");
        assert!(!text.contains("rtscope_period_seconds"), "{text}");
    }

    #[test]
    fn a_watched_threads_series_is_labelled_by_its_tid_and_comm() {
        let mut e = Exposition::new(vec![100_000]);
        let mut c = SeriesCounters::new(SeriesKey::new("watch", "latency", 4242), 1, 1.0);
        c.thread = Some((4242, "my\"loop".into()));
        c.add(&series(&[20_000]), &[100_000], 0, 0, 2.0);
        e.series.insert(7, c);
        let text = String::from_utf8(e.render(&Health::default(), Format::Text)).unwrap();
        assert!(
            text.contains(
                "rtscope_latency_seconds_count{probe=\"watch\",metric=\"latency\",tid=\"4242\",comm=\"my\\\"loop\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("rtscope_max_seconds{probe=\"watch\",metric=\"latency\",tid=\"4242\",comm="), "{text}");
        assert!(!text.contains("cpu=\"4242\""), "{text}");
    }

    #[test]
    fn episodes_are_counted_per_cause_class_where_they_are_explained() {
        let mut e = Exposition::new(vec![]);
        let mut c = SeriesCounters::new(SeriesKey::new("watch", "latency", 9), 0, 1.0);
        c.thread = Some((9, "loop".into()));
        c.episodes = Some(CauseKind::ALL.iter().map(|&k| (k, 0)).collect());
        *c.episodes.as_mut().unwrap().get_mut(&CauseKind::Irq).unwrap() += 3;
        e.series.insert(1, c);
        e.series.insert(2, SeriesCounters::new(SeriesKey::new("wakeup", "latency", 0), 0, 1.0));
        let text = String::from_utf8(e.render(&Health::default(), Format::Text)).unwrap();
        let l = "probe=\"watch\",metric=\"latency\",tid=\"9\",comm=\"loop\"";
        assert!(text.contains(&format!("rtscope_episodes_total{{{l},cause=\"irq\"}} 3")), "{text}");
        assert!(text.contains(&format!("rtscope_episodes_total{{{l},cause=\"softirq\"}} 0")), "{text}");
        assert_eq!(
            text.matches("rtscope_episodes_total{").count(),
            CauseKind::ALL.len(),
            "none for a series without causes: {text}"
        );
    }
}
