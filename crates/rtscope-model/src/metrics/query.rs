//! Reading the monitors' series back from Prometheus' HTTP API (the fleet
//! report, `rtscope report --prometheus`): the API's JSON answers, the
//! selector a user gives, the histograms rebuilt from classic or native
//! buckets, and each machine's data as a [`Run`] of kind `monitor`, so that
//! the analysis, the verdicts and `compare` read it as they read a run.
//!
//! What Prometheus keeps is coarser than the store: counts per bucket and
//! the gauges it scraped. A rebuilt histogram records each bucket's count
//! at the bucket's upper bound (its lower bound for a negative bucket),
//! never above the largest value the monitor reported for that interval:
//! quantiles read from it are bucket bounds, not exact values.

use crate::hist::Tally;
use crate::inventory::Inventory;
use crate::run::{Interval, Run, RunHeader, RunStatus, Series, SeriesKey};
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_json::Value;
use std::collections::BTreeMap;

/// Labels of one series.
pub type Labels = BTreeMap<String, String>;

/// One series of an answer: its labels, float samples (time in Unix
/// seconds, value) and native histogram samples.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PromSeries {
    pub labels: Labels,
    pub values: Vec<(f64, f64)>,
    pub histograms: Vec<(f64, NativeHist)>,
}

/// A native histogram sample as the API gives it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NativeHist {
    pub count: f64,
    pub buckets: Vec<(f64, f64, f64)>,
}

/// A bucket of a rebuilt histogram: values in (lo, hi], ns (`hi` is
/// `i64::MAX` for `+Inf`), and how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    pub lo_ns: i64,
    pub hi_ns: i64,
    pub count: u64,
}

/// A number as the API writes it: a JSON number (a time), or a string
/// (a value: "1.5", "+Inf", "NaN").
struct Num(f64);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number, or a number in a string")
            }
            fn visit_f64<E>(self, v: f64) -> Result<Num, E> {
                Ok(Num(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Num, E> {
                match s {
                    "+Inf" => Ok(Num(f64::INFINITY)),
                    "-Inf" => Ok(Num(f64::NEG_INFINITY)),
                    s => s.parse().map(Num).map_err(|_| E::custom(format!("bad number '{s}'"))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// An answer of `/api/v1/query` or `/api/v1/query_range`, typed: read
/// straight from the stream into numbers (a fleet's answer is hundreds of
/// megabytes of JSON; as a `serde_json::Value` it would take several
/// times that).
#[derive(Deserialize)]
struct RawAnswer {
    status: Option<String>,
    data: Option<RawData>,
    #[serde(rename = "errorType")]
    error_type: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct RawData {
    #[serde(rename = "resultType")]
    result_type: Option<String>,
    #[serde(default)]
    result: Vec<RawSeries>,
}

#[derive(Deserialize)]
struct RawSeries {
    #[serde(default)]
    metric: Labels,
    #[serde(default)]
    values: Vec<(Num, Num)>,
    value: Option<(Num, Num)>,
    #[serde(default)]
    histograms: Vec<(Num, RawHist)>,
    histogram: Option<(Num, RawHist)>,
}

#[derive(Deserialize)]
struct RawHist {
    count: Num,
    #[serde(default)]
    buckets: Vec<(de::IgnoredAny, Num, Num, Num)>,
}

impl RawHist {
    fn native(self) -> NativeHist {
        NativeHist {
            count: self.count.0,
            buckets: self.buckets.into_iter().map(|(_, l, h, c)| (l.0, h.0, c.0)).collect(),
        }
    }
}

/// The series of an answer of `/api/v1/query` or `/api/v1/query_range`
/// (vector or matrix, float or native histogram samples), read from `r`
/// as it comes. A failure to read `r` is a JSON error of kind I/O: the
/// reader may hold a better message.
pub fn read_answer<R: std::io::Read>(r: R) -> Result<Vec<PromSeries>, serde_json::Error> {
    let a: RawAnswer = serde_json::from_reader(std::io::BufReader::with_capacity(256 << 10, r))?;
    let bad = |m: String| -> serde_json::Error { de::Error::custom(m) };
    match a.status.as_deref() {
        Some("success") => {}
        Some("error") => {
            return Err(bad(format!(
                "Prometheus answered {}: {}",
                a.error_type.as_deref().unwrap_or("an error"),
                a.error.as_deref().unwrap_or("(no message)")
            )));
        }
        _ => return Err(bad("not an answer of Prometheus' HTTP API (no status)".into())),
    }
    let d = a.data.ok_or_else(|| bad("not an answer of Prometheus' HTTP API (no data)".into()))?;
    match d.result_type.as_deref() {
        Some("vector" | "matrix") => {}
        Some(t) => return Err(bad(format!("expected a vector or a matrix, Prometheus gave a {t}"))),
        None => return Err(bad("the answer has no resultType".into())),
    }
    Ok(d.result
        .into_iter()
        .map(|r| {
            let mut values: Vec<(f64, f64)> = r.values.into_iter().map(|(t, v)| (t.0, v.0)).collect();
            values.extend(r.value.map(|(t, v)| (t.0, v.0)));
            let mut histograms: Vec<(f64, NativeHist)> =
                r.histograms.into_iter().map(|(t, h)| (t.0, h.native())).collect();
            histograms.extend(r.histogram.map(|(t, h)| (t.0, h.native())));
            PromSeries { labels: r.metric, values, histograms }
        })
        .collect())
}

/// The series of an answer's body (see [`read_answer`]).
pub fn parse_answer(body: &str) -> Result<Vec<PromSeries>, String> {
    read_answer(body.as_bytes()).map_err(|e| answer_error(&e, body))
}

/// What a failed [`read_answer`] says: the API's own error or what is
/// wrong with the answer (no position: found after reading it), else that
/// it is no answer of the API, and how it starts (`start`).
pub fn answer_error(e: &serde_json::Error, start: &str) -> String {
    if e.line() == 0 {
        return e.to_string();
    }
    let start: String = start.chars().take(120).collect();
    format!("not an answer of Prometheus' HTTP API ({e}): {start}")
}

/// The `data` of a small API answer (`/api/v1/series`), or the error it reports.
fn data(body: &str) -> Result<Value, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| {
        let start: String = body.chars().take(120).collect();
        format!("not an answer of Prometheus' HTTP API ({e}): {start}")
    })?;
    match v["status"].as_str() {
        Some("success") => Ok(v["data"].clone()),
        Some("error") => Err(format!(
            "Prometheus answered {}: {}",
            v["errorType"].as_str().unwrap_or("an error"),
            v["error"].as_str().unwrap_or("(no message)")
        )),
        _ => Err("not an answer of Prometheus' HTTP API (no status)".into()),
    }
}

fn labels_of(v: &Value) -> Labels {
    v.as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
        .unwrap_or_default()
}

/// The label sets of an answer of `/api/v1/series`.
pub fn parse_series(body: &str) -> Result<Vec<Labels>, String> {
    Ok(data(body)?.as_array().map(|a| a.iter().map(labels_of).collect()).unwrap_or_default())
}

/// The values of an answer of `/api/v1/label/NAME/values`.
pub fn parse_label_values(body: &str) -> Result<Vec<String>, String> {
    Ok(data(body)?
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default())
}

/// The label matchers inside a selector `{a="b",...}` (`{}` for all): what
/// goes between the braces after a metric name. A metric name or a range
/// is refused: the report picks its metrics and range itself.
pub fn selector_matchers(sel: &str) -> Result<String, String> {
    let s = sel.trim();
    let inner = s
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .ok_or_else(|| {
            format!("'{sel}' is not a series selector: give label matchers in braces, e.g. '{{job=\"rtscope\"}}'")
        })?
        .trim();
    let mut quoted = false;
    let mut escaped = false;
    for c in inner.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' | '\'' | '`' => quoted = !quoted,
            '{' | '}' | '[' | ']' if !quoted => {
                return Err(format!("'{sel}': only label matchers in one pair of braces, e.g. '{{job=\"rtscope\"}}'"));
            }
            _ => {}
        }
    }
    if quoted {
        return Err(format!("'{sel}': a quoted value is not closed"));
    }
    if !inner.is_empty() && !inner.contains(['=', '~']) {
        return Err(format!("'{sel}': a label matcher is LABEL=\"VALUE\" (or !=, =~, !~)"));
    }
    Ok(inner.trim_end_matches(',').to_string())
}

/// `name{matchers}`.
pub fn with_name(name: &str, matchers: &str) -> String {
    format!("{name}{{{matchers}}}")
}

/// The machine (`instance`) and series key of a monitor's series: `cpu`,
/// or a watched thread's `tid`; None for another series.
pub fn key_of(labels: &Labels) -> Option<(String, SeriesKey)> {
    let instance = labels.get("instance").cloned().unwrap_or_default();
    let probe = labels.get("probe")?;
    let metric = labels.get("metric")?;
    let cpu = labels.get("cpu").or_else(|| labels.get("tid"))?.parse().ok()?;
    Some((instance, SeriesKey::new(probe, metric, cpu)))
}

fn ns(seconds: f64) -> i64 {
    if seconds.is_infinite() { if seconds > 0.0 { i64::MAX } else { i64::MIN } } else { (seconds * 1e9).round() as i64 }
}

/// A classic histogram's buckets from its cumulative counts per `le`
/// (seconds, `+Inf` included), in any order: each bucket's own count,
/// rounded (`increase()` extrapolates to fractions).
pub fn classic_buckets(cumulative: &[(f64, f64)]) -> Vec<Bucket> {
    let mut sorted = cumulative.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out = Vec::new();
    let (mut lo, mut below) = (0i64, 0u64);
    for (le, c) in sorted {
        let c = c.max(0.0).round() as u64;
        let hi = ns(le);
        out.push(Bucket { lo_ns: lo, hi_ns: hi, count: c.saturating_sub(below) });
        below = below.max(c);
        lo = hi;
    }
    out.retain(|b| b.count > 0);
    out
}

/// A native histogram's buckets, counts rounded.
pub fn native_buckets(h: &NativeHist) -> Vec<Bucket> {
    h.buckets
        .iter()
        .map(|&(lo, hi, c)| Bucket { lo_ns: ns(lo), hi_ns: ns(hi), count: c.max(0.0).round() as u64 })
        .filter(|b| b.count > 0)
        .collect()
}

/// A histogram rebuilt from `buckets`: each count at the bucket's upper
/// bound (a negative bucket's at its lower bound, the larger magnitude),
/// never beyond `max_ns`, the largest value known for it, which becomes
/// the tally's maximum; `+Inf`'s at `max_ns` or its lower bound.
pub fn rebuild(buckets: &[Bucket], max_ns: Option<i64>) -> Tally {
    let signed = buckets.iter().any(|b| b.lo_ns < 0);
    let mut t = if signed { Tally::new_signed() } else { Tally::new() };
    for b in buckets {
        let v = if b.hi_ns <= 0 {
            b.lo_ns
        } else if b.hi_ns == i64::MAX {
            max_ns.unwrap_or(b.lo_ns).max(b.lo_ns)
        } else {
            max_ns.map_or(b.hi_ns, |m| b.hi_ns.min(m.max(b.lo_ns)))
        };
        let half = if v < 0 { t.neg.as_deref_mut().expect("signed above") } else { &mut t };
        record_n(half, v.unsigned_abs(), b.count);
    }
    if let Some(m) = max_ns
        && t.count() > 0
        && m > t.max()
    {
        t.stats.max = m as u64;
    }
    t
}

/// Records `n` samples of `v` at once (a bucket may hold billions).
fn record_n(t: &mut Tally, v: u64, n: u64) {
    if n == 0 {
        return;
    }
    let s = &mut t.stats;
    s.count += n;
    s.sum = s.sum.wrapping_add(v.wrapping_mul(n));
    s.min = s.min.min(v);
    s.max = s.max.max(v);
    if t.hist.record_n(v, n).is_err() {
        s.overflows += n;
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's days-from-civil).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A point in time, Unix seconds: `now`, `now-DUR`, Unix seconds
/// (`1764200000`), or a UTC date and time (`2026-11-27T02:00:00Z`, `2026-11-27
/// 02:00`, `2026-11-27`).
pub fn parse_time(text: &str, now_s: f64) -> Result<f64, String> {
    let s = text.trim();
    let help = "give now, now-DUR (e.g. now-7d), Unix seconds or a UTC date as 2026-11-27T02:00:00Z";
    if s == "now" {
        return Ok(now_s);
    }
    if let Some(d) = s.strip_prefix("now-") {
        let ns = crate::units::parse_duration(d).map_err(|e| format!("'{s}': {e}"))?;
        return Ok(now_s - ns as f64 / 1e9);
    }
    if let Ok(v) = s.parse::<f64>() {
        return if v.is_finite() && v >= 0.0 { Ok(v) } else { Err(format!("'{s}': {help}")) };
    }
    let bad = || format!("'{s}' is not a time: {help}");
    let t = s.trim_end_matches('Z');
    let (date, clock) = t.split_once(['T', ' ']).unwrap_or((t, "00:00:00"));
    let nums = |x: &str, sep: char| -> Result<Vec<i64>, String> {
        x.split(sep).map(|p| p.parse::<i64>().map_err(|_| bad())).collect()
    };
    let (ymd, hms) = (nums(date, '-')?, nums(clock, ':')?);
    let ([y, mo, d], [h, mi, rest @ ..]) = (ymd.as_slice(), hms.as_slice()) else { return Err(bad()) };
    let sec = rest.first().copied().unwrap_or(0);
    if rest.len() > 1 || !(1..=12).contains(mo) || !(1..=31).contains(d) || *h > 23 || *mi > 59 || sec > 60 {
        return Err(bad());
    }
    Ok((days_from_civil(*y, *mo, *d) * 86_400 + h * 3600 + mi * 60 + sec) as f64)
}

/// A time range: `DUR` (ending at `end_s`) or `DUR@TIME` (ending at TIME,
/// see [`parse_time`]): (start, end), Unix seconds.
pub fn parse_range(text: &str, end_s: f64, now_s: f64) -> Result<(f64, f64), String> {
    let (dur, end) = match text.split_once('@') {
        Some((d, t)) => (d, parse_time(t, now_s)?),
        None => (text, end_s),
    };
    let ns = crate::units::parse_duration(dur).map_err(|e| format!("'{text}': {e}"))?;
    if ns < 1_000_000_000 {
        return Err(format!("'{text}': a range is at least 1s long (e.g. 7d, 12h, 1d@now-7d)"));
    }
    if end > now_s + 1.0 {
        return Err(format!("'{text}' ends in the future (after now)"));
    }
    Ok((end - ns as f64 / 1e9, end))
}

/// One step of a series in time: its end (Unix seconds), the buckets of
/// what it measured in the step, the largest interval maximum scraped in it.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub end_s: f64,
    pub buckets: Vec<Bucket>,
    pub max_ns: Option<i64>,
}

/// A series of `step_s`-long intervals, one per step that measured something.
pub fn series_of(key: SeriesKey, steps: &[Step], step_s: f64) -> Result<Series, String> {
    let mut intervals = Vec::new();
    for (seq, st) in steps.iter().enumerate() {
        let t = rebuild(&st.buckets, st.max_ns);
        if t.count() == 0 {
            continue;
        }
        let end = (st.end_s * 1e9).max(0.0) as u64;
        let start = end.saturating_sub((step_s * 1e9) as u64);
        intervals.push(Interval::new(seq as u32, start, end, &t, 0, 0));
    }
    Series::new(key, "ns".into(), "none".into(), intervals, vec![])
}

/// A machine's series as a run of kind `monitor`, named by its `instance`,
/// over `[start_s, end_s]` (Unix seconds).
pub fn machine_run(instance: &str, start_s: f64, end_s: f64, mut series: Vec<Series>, plan: Value) -> Run {
    series.sort_by(|a, b| a.key.cmp(&b.key));
    Run {
        // Not this process's run: no tool version, no pid.
        header: RunHeader {
            tool_version: String::new(),
            ended_unix_ns: Some((end_s * 1e9) as i64),
            status: RunStatus::Complete,
            pid: 0,
            ..RunHeader::new(
                "monitor",
                format!("prometheus:{instance}:{start_s}:{end_s}"),
                instance,
                (start_s * 1e9) as i64,
                (start_s * 1e9).max(0.0) as u64,
            )
        },
        inventory: Inventory { hostname: instance.into(), ..Default::default() },
        plan,
        series,
        episodes: vec![],
        trace: None,
        characterisation: vec![],
        cpu_score: None,
    }
}

/// A machine's worst case: the largest maximum of its series (with the
/// series), None when it measured nothing.
pub fn worst(run: &Run) -> Option<(i64, &SeriesKey)> {
    run.series.iter().filter(|s| s.total().count() > 0).map(|s| (s.total().max(), &s.key)).max_by_key(|w| w.0)
}

/// The order of `runs` worst case first (a machine without data last),
/// ties by name.
pub fn rank(runs: &[Run]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by(|&a, &b| {
        let w = |i: usize| (worst(&runs[i]).map(|w| w.0), runs[i].header.hostname.as_str());
        ranked(w(a), w(b))
    });
    order
}

/// The order of two machines by (worst case, name): the larger worst case
/// first, one without data last, ties by name.
pub fn ranked(a: (Option<i64>, &str), b: (Option<i64>, &str)) -> std::cmp::Ordering {
    b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse_vectors_matrices_native_histograms_and_errors() {
        let v = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"instance":"a:1","probe":"wakeup","metric":"latency","cpu":"1","le":"+Inf"},"value":[1700000000.5,"12.5"]}]}}"#;
        let s = parse_answer(v).unwrap();
        assert_eq!(s[0].labels["le"], "+Inf");
        assert_eq!(s[0].values, vec![(1700000000.5, 12.5)]);
        let m = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"cpu":"0"},"values":[[10,"1"],[20,"2"]]},
            {"metric":{"cpu":"1"},"histograms":[[10,{"count":"3","sum":"0.1","buckets":[[0,"0.00001","0.0000109","2"],[0,"0.001","0.00109","1"]]}]]}]}}"#;
        let s = parse_answer(m).unwrap();
        assert_eq!(s[0].values, vec![(10.0, 1.0), (20.0, 2.0)]);
        let h = &s[1].histograms[0].1;
        assert_eq!((h.count, h.buckets.len()), (3.0, 2));
        let b = native_buckets(h);
        assert_eq!(b[0], Bucket { lo_ns: 10_000, hi_ns: 10_900, count: 2 });
        let e = r#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#;
        assert_eq!(parse_answer(e).unwrap_err(), "Prometheus answered bad_data: parse error at char 3");
        assert!(parse_answer("<html>").unwrap_err().starts_with("not an answer"));
        let l = r#"{"status":"success","data":[{"__name__":"up","instance":"a:1"}]}"#;
        assert_eq!(parse_series(l).unwrap()[0]["instance"], "a:1");
        let n = r#"{"status":"success","data":["rtscope_latency_seconds_count","up"]}"#;
        assert_eq!(parse_label_values(n).unwrap(), ["rtscope_latency_seconds_count", "up"]);
    }

    #[test]
    fn times_and_ranges_parse_or_say_what_they_take() {
        let now = 1_764_208_800.0; // 2025-11-27 02:00:00 UTC
        assert_eq!(parse_time("now", now).unwrap(), now);
        assert_eq!(parse_time("now-1h", now).unwrap(), now - 3600.0);
        assert_eq!(parse_time("1700000000", now).unwrap(), 1.7e9);
        assert_eq!(parse_time("2025-11-27T02:00:00Z", now).unwrap(), now);
        assert_eq!(parse_time("2025-11-27 02:00", now).unwrap(), now);
        assert_eq!(parse_time("2025-11-27", now).unwrap(), now - 7200.0);
        assert_eq!(parse_time("2000-03-01T00:00:00Z", now).unwrap(), 951_868_800.0);
        for bad in ["yesterday", "2025-13-01", "now-7", "2025-11-27T25:00", "-5"] {
            assert!(parse_time(bad, now).is_err(), "{bad}");
        }
        assert_eq!(parse_range("7d", now, now).unwrap(), (now - 7.0 * 86400.0, now));
        assert_eq!(parse_range("1h@now-1d", now, now).unwrap(), (now - 90000.0, now - 86400.0));
        assert!(parse_range("500ms", now, now).unwrap_err().contains("at least 1s"));
        assert!(parse_range("1h@now", now + 10.0, now).is_ok());
        assert!(parse_range("7", now, now).is_err());
        assert!(parse_range("1h", now + 100.0, now).unwrap_err().contains("future"));
    }

    #[test]
    fn selectors_give_their_matchers_or_say_what_is_wrong() {
        assert_eq!(selector_matchers(r#"{job="rtscope"}"#).unwrap(), r#"job="rtscope""#);
        assert_eq!(selector_matchers(" {} ").unwrap(), "");
        assert_eq!(with_name("up", r#"job="x""#), r#"up{job="x"}"#);
        assert_eq!(selector_matchers(r#"{a="}{"}"#).unwrap(), r#"a="}{""#);
        for bad in [r#"up{job="x"}"#, r#"job="x""#, r#"{job="x"}[5m]"#, r#"{job="x}"#, "{job}"] {
            assert!(selector_matchers(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn buckets_are_rebuilt_at_their_bounds_under_the_known_maximum() {
        // Cumulative counts as increase() gives them, fractions included.
        let b = classic_buckets(&[(f64::INFINITY, 100.2), (1e-6, 0.0), (2e-6, 89.6), (5e-6, 99.1), (1e-5, 100.2)]);
        assert_eq!(
            b,
            vec![
                Bucket { lo_ns: 1_000, hi_ns: 2_000, count: 90 },
                Bucket { lo_ns: 2_000, hi_ns: 5_000, count: 9 },
                Bucket { lo_ns: 5_000, hi_ns: 10_000, count: 1 },
            ]
        );
        let t = rebuild(&b, Some(7_300));
        assert_eq!(t.count(), 100);
        assert_eq!(t.max(), 7_300);
        assert!((1_999..=2_001).contains(&t.quantile(0.5)), "{}", t.quantile(0.5));
        assert!((4_995..=5_005).contains(&t.quantile(0.99)), "{}", t.quantile(0.99));
        // Without a maximum: the upper bound; +Inf at the maximum, or its lower bound.
        assert!((9_990..=10_010).contains(&rebuild(&b, None).max()));
        let inf = [Bucket { lo_ns: 100_000_000, hi_ns: i64::MAX, count: 2 }];
        assert!((149_000_000..=151_000_000).contains(&rebuild(&inf, Some(150_000_000)).max()));
        assert!((99_000_000..=101_000_000).contains(&rebuild(&inf, None).max()));
        // A maximum below a bucket's lower bound (scraped in another step) never moves values down.
        assert!(rebuild(&b, Some(1_500)).quantile(0.99) >= 2_000);
        // Negative buckets make a signed tally, at their lower bound.
        let s = rebuild(
            &[Bucket { lo_ns: -2_000, hi_ns: -1_000, count: 3 }, Bucket { lo_ns: 0, hi_ns: 1_000, count: 1 }],
            None,
        );
        assert!(s.is_signed());
        assert!((-2_002..=-1_998).contains(&s.min()));
    }

    fn machine(name: &str, maxima: &[i64]) -> Run {
        let steps: Vec<Step> = maxima
            .iter()
            .enumerate()
            .map(|(i, &m)| Step {
                end_s: 1000.0 + 10.0 * i as f64,
                buckets: vec![Bucket { lo_ns: 0, hi_ns: 100_000_000, count: 10 }],
                max_ns: Some(m),
            })
            .collect();
        let s = series_of(SeriesKey::new("wakeup", "latency", 0), &steps, 10.0).unwrap();
        machine_run(name, 990.0, 1030.0, vec![s], Value::Null)
    }

    #[test]
    fn machines_rank_by_their_worst_case() {
        let runs = vec![machine("a", &[5_000, 9_000]), machine("b", &[20_000_000, 4_000]), machine("c", &[7_000])];
        assert_eq!(rank(&runs), vec![1, 0, 2]);
        let (w, key) = worst(&runs[1]).unwrap();
        assert!((19_990_000..=20_010_000).contains(&w), "{w}");
        assert_eq!(key.describe(), "wakeup/latency cpu 0");
        let s = &runs[0].series[0];
        assert_eq!((s.intervals.len(), s.total().count()), (2, 20));
        assert!((8_990..=9_010).contains(&s.intervals[1].stats.max));
    }
}
