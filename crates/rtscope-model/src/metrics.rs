//! The Prometheus exposition of a monitor (`rtscope monitor`): what each
//! committed checkpoint interval adds to its series' counters, and the
//! `/metrics` page in the Prometheus text format (0.0.4) or OpenMetrics
//! (1.0.0), whichever the scraper's `Accept` header prefers.
//!
//! Names and units follow Prometheus' conventions: base units (seconds,
//! bytes), `_total` on counters, one histogram family whose classic
//! buckets are [`BUCKETS_NS`]. Counts are taken from each interval's
//! HdrHistogram: a sample within its resolution (0.1 %) of a bucket bound or
//! a threshold counts above it.

use crate::hist::Tally;
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
}

impl Format {
    /// The `Content-Type` of a page in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format an `Accept` header prefers: OpenMetrics when it names
    /// `application/openmetrics-text` with a higher (or equal, earlier)
    /// quality than the text format, the text format otherwise (also
    /// without a header, as for `curl`).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else { return Format::Text };
        let mut best: Option<(f64, Format)> = None;
        for part in accept.split(',') {
            let mut fields = part.split(';').map(str::trim);
            let media = fields.next().unwrap_or_default().to_ascii_lowercase();
            let mut q = 1.0;
            let mut version = None;
            for f in fields {
                if let Some(v) = f.strip_prefix("q=") {
                    q = v.parse().unwrap_or(0.0);
                } else if let Some(v) = f.strip_prefix("version=") {
                    version = Some(v.to_string());
                }
            }
            let format = match media.as_str() {
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
    /// When the series began, Unix seconds (OpenMetrics `_created`).
    pub created_s: f64,
    /// Samples at or below each of [`BUCKETS_NS`].
    pub buckets: [u64; BUCKETS_NS.len()],
    pub count: u64,
    pub sum_ns: u128,
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
            created_s,
            buckets: [0; BUCKETS_NS.len()],
            count: 0,
            sum_ns: 0,
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
        let neg = t.neg.as_ref().map_or(0, |n| n.stats.sum as u128);
        self.sum_ns = (self.sum_ns + t.stats.sum as u128).saturating_sub(neg);
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

/// Seconds as Prometheus writes them.
fn secs(ns: u128) -> String {
    let s = ns as f64 / 1e9;
    format!("{s}")
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// A family's header lines: HELP, TYPE and (OpenMetrics) UNIT. `base` is
/// the family's name without `_total`.
fn header(out: &mut String, f: Format, base: &str, kind: &str, unit: &str, help: &str) {
    let name = if f == Format::Text && kind == "counter" { format!("{base}_total") } else { base.to_string() };
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    if f == Format::OpenMetrics && !unit.is_empty() {
        let _ = writeln!(out, "# UNIT {name} {unit}");
    }
}

impl Exposition {
    pub fn new(thresholds_ns: Vec<u64>) -> Exposition {
        Exposition { thresholds_ns, series: BTreeMap::new() }
    }

    /// The `/metrics` page.
    pub fn render(&self, health: &Health, f: Format) -> String {
        let mut out = String::with_capacity(4096 + self.series.len() * 4096);
        let labels = |k: &SeriesKey| {
            format!("probe=\"{}\",metric=\"{}\",cpu=\"{}\"", escape(&k.probe), escape(&k.metric), k.cpu)
        };
        let om = f == Format::OpenMetrics;

        header(
            &mut out,
            f,
            "rtscope_latency_seconds",
            "histogram",
            "seconds",
            "Each probe's measured values (wakeup: wake-up latency; noise: interruption length), per CPU.",
        );
        for s in self.series.values() {
            let l = labels(&s.key);
            for (b, le) in s.buckets.iter().zip(BUCKETS_NS) {
                let _ = writeln!(out, "rtscope_latency_seconds_bucket{{{l},le=\"{}\"}} {b}", secs(le as u128));
            }
            let _ = writeln!(out, "rtscope_latency_seconds_bucket{{{l},le=\"+Inf\"}} {}", s.count);
            let _ = writeln!(out, "rtscope_latency_seconds_sum{{{l}}} {}", secs(s.sum_ns));
            let _ = writeln!(out, "rtscope_latency_seconds_count{{{l}}} {}", s.count);
            if om {
                let _ = writeln!(out, "rtscope_latency_seconds_created{{{l}}} {}", s.created_s);
            }
        }

        header(
            &mut out,
            f,
            "rtscope_interval_max_seconds",
            "gauge",
            "seconds",
            "The largest value of the last committed checkpoint interval.",
        );
        for s in self.series.values() {
            if let Some(m) = s.interval_max_ns {
                let _ = writeln!(out, "rtscope_interval_max_seconds{{{}}} {}", labels(&s.key), secs(m as u128));
            }
        }
        header(&mut out, f, "rtscope_max_seconds", "gauge", "seconds", "The largest value since the monitor started.");
        for s in self.series.values() {
            let _ = writeln!(out, "rtscope_max_seconds{{{}}} {}", labels(&s.key), secs(s.max_ns as u128));
        }

        let counters: [(&str, &str, Counter); 3] = [
            (
                "rtscope_missed_periods",
                "Periods the probe missed because a wake-up came later than the next one (samples not taken).",
                |s| s.missed_periods,
            ),
            (
                "rtscope_lost_exceedances",
                "Samples above the exceedance threshold whose raw value did not fit in the ring to the writer (still \
                 in the histogram).",
                |s| s.lost_exceedances,
            ),
            ("rtscope_checkpoints", "Checkpoint intervals committed to the monitor's store.", |s| s.checkpoints),
        ];
        for (name, help, get) in counters {
            header(&mut out, f, name, "counter", "", help);
            for s in self.series.values() {
                let l = labels(&s.key);
                let _ = writeln!(out, "{name}_total{{{l}}} {}", get(s));
                if om {
                    let _ = writeln!(out, "{name}_created{{{l}}} {}", s.created_s);
                }
            }
        }

        header(
            &mut out,
            f,
            "rtscope_exceedances",
            "counter",
            "",
            "Values above each threshold (label threshold, seconds).",
        );
        for s in self.series.values() {
            let l = labels(&s.key);
            for (n, &th) in s.above.iter().zip(&self.thresholds_ns) {
                let t = secs(th as u128);
                let _ = writeln!(out, "rtscope_exceedances_total{{{l},threshold=\"{t}\"}} {n}");
                if om {
                    let _ = writeln!(out, "rtscope_exceedances_created{{{l},threshold=\"{t}\"}} {}", s.created_s);
                }
            }
        }

        header(
            &mut out,
            f,
            "rtscope_last_checkpoint_timestamp_seconds",
            "gauge",
            "seconds",
            "When the series' last checkpoint interval ended (Unix time).",
        );
        for s in self.series.values() {
            let _ = writeln!(
                out,
                "rtscope_last_checkpoint_timestamp_seconds{{{}}} {}",
                labels(&s.key),
                s.last_checkpoint_s
            );
        }
        self.render_health(&mut out, health, f);
        if om {
            out.push_str("# EOF\n");
        }
        out
    }

    fn render_health(&self, out: &mut String, h: &Health, f: Format) {
        let om = f == Format::OpenMetrics;
        // OpenMetrics' info type is `NAME_info`; the text format's a gauge of 1.
        let info_kind = if om { "info" } else { "gauge" };
        let info = |out: &mut String, base: &str, help: &str, rows: &[String]| {
            let name = if om { base.to_string() } else { format!("{base}_info") };
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {info_kind}");
            for r in rows {
                let _ = writeln!(out, "{base}_info{{{r}}} 1");
            }
        };
        info(out, "rtscope_build", "The monitor's version.", &[format!("version=\"{}\"", escape(&h.version))]);
        let probes: Vec<String> = h
            .probes
            .iter()
            .map(|(p, c, d)| format!("probe=\"{}\",cpus=\"{}\",duty=\"{}\"", escape(p), escape(c), escape(d)))
            .collect();
        info(out, "rtscope_monitor_probe", "Each monitored probe, its CPUs and its stated duty.", &probes);

        let gauges: [(&str, &str, &str, f64); 5] = [
            (
                "rtscope_monitor_probes_running",
                "",
                "Probes whose measuring threads are running.",
                h.probes_running as f64,
            ),
            ("rtscope_monitor_store_bytes", "bytes", "Bytes the monitor's store uses.", h.store_bytes as f64),
            (
                "rtscope_monitor_store_limit_bytes",
                "bytes",
                "The store's limit (--max-store): the retention summarises older intervals to stay below it.",
                h.store_limit_bytes as f64,
            ),
            (
                "process_start_time_seconds",
                "seconds",
                "Start time of the process since the Unix epoch.",
                h.start_time_s,
            ),
            ("process_resident_memory_bytes", "bytes", "Resident memory size of the process.", h.resident_bytes as f64),
        ];
        for (name, unit, help, v) in gauges {
            header(out, f, name, "gauge", unit, help);
            let _ = writeln!(out, "{name} {v}");
        }
        let counters: [(&str, &str, &str, f64); 5] = [
            (
                "process_cpu_seconds",
                "seconds",
                "User and system CPU time of the process (its probes' measuring threads included).",
                h.cpu_seconds,
            ),
            (
                "rtscope_monitor_store_errors",
                "",
                "Store commits or retention passes that failed.",
                h.store_errors as f64,
            ),
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
            // A unit must end the name in OpenMetrics: process_cpu_seconds_total.
            header(out, f, base, "counter", unit, help);
            let _ = writeln!(out, "{base}_total {v}");
        }
    }
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
        let text = e.render(&h, Format::Text);
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
        let om = e.render(&h, Format::OpenMetrics);
        assert!(om.ends_with("# EOF\n"));
        assert!(om.contains("# TYPE rtscope_exceedances counter"));
        assert!(om.contains("# UNIT rtscope_latency_seconds seconds"));
        assert!(om.contains("# TYPE rtscope_build info"));
        assert!(om.contains("rtscope_latency_seconds_created{probe=\"wakeup\",metric=\"latency\",cpu=\"0\"} 1.5"));
    }
}
