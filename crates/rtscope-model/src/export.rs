//! Export formats: lossless JSON (the common shape every probe's `--json`
//! shares, plus full per-interval histograms), CSV per bucket, and the
//! HdrHistogram interval log. JSON imports back exactly.

use crate::characterisation::{Characterisation, CpuScore};
use crate::episode::{Episode, TraceSummary};
use crate::hist::{self, Stats};
use crate::inventory::Inventory;
use crate::run::{Exceedance, Interval, NegHalf, ResultRow, Run, RunHeader, RunStatus, Series, SeriesKey};
use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::time::Duration;

pub const FORMAT: &str = "rtscope-run";
/// The keys every `results` row has, in every probe's JSON (the common
/// shape), before its probe-specific ones.
pub const RESULT_KEYS: [&str; 14] = [
    "probe",
    "metric",
    "cpu",
    "count",
    "min_ns",
    "mean_ns",
    "p50_ns",
    "p90_ns",
    "p99_ns",
    "p999_ns",
    "p9999_ns",
    "max_ns",
    "overflows",
    "overruns",
];
/// The newest format version this build reads and writes. A document
/// holds version 1 when no series in it is signed (the format before signed
/// series existed: older readers read it), 2 when one is, 3 when its rows
/// carry a `load` (an assessment: a reader of version 2 would take the
/// same probe, metric and CPU under two loads for a duplicate).
pub const FORMAT_VERSION: u32 = 3;

/// The JSON document: `run_id`, `status`, `results` first (the common
/// shape), then the run header and, in a full export, every series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunDoc {
    pub format: String,
    pub format_version: u32,
    pub run_id: i64,
    pub status: RunStatus,
    pub results: Vec<ResultDoc>,
    pub run: HeaderDoc,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<Vec<SeriesDoc>>,
    /// A traced run: what the tracer did, and the cause episodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceSummary>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub episodes: Vec<Episode>,
    /// Per load, the kernel's per-second rates while it ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub characterisation: Vec<Characterisation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_score: Option<CpuScore>,
}

/// A result row with its whole-run histogram as `[lowest_ns, highest_ns,
/// count]` (a signed series' negative buckets first, as negative values).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultDoc {
    #[serde(flatten)]
    pub row: ResultRow,
    pub histogram: Vec<[i64; 3]>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeaderDoc {
    #[serde(flatten)]
    pub header: RunHeader,
    pub inventory: Inventory,
    pub plan: serde_json::Value,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeriesDoc {
    #[serde(flatten)]
    pub key: SeriesKey,
    pub unit: String,
    pub exceed: String,
    /// The probe's own figures; absent when it has none.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, serde_json::Value>,
    pub intervals: Vec<IntervalDoc>,
    /// `[t_ns, value_ns]`, CLOCK_MONOTONIC.
    pub exceedances: Vec<[u64; 2]>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IntervalDoc {
    pub seq: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub count: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub sum_ns: u64,
    pub overflows: u64,
    pub overruns: u64,
    pub lost_exceedances: u64,
    /// HdrHistogram V2 + DEFLATE, base64: what HdrHistogram's tools decode.
    pub hdr: String,
    /// A signed series' negative half (magnitudes); absent when unsigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neg: Option<NegDoc>,
}

/// The negative half of a signed interval: its values below zero, as magnitudes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NegDoc {
    pub count: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub sum_ns: u64,
    pub overflows: u64,
    pub hdr: String,
}

/// Builds the JSON document; `full` adds every interval and exceedance.
pub fn run_doc(run: &Run, full: bool) -> RunDoc {
    let results =
        run.series.iter().map(|s| ResultDoc { row: s.result(), histogram: hist::signed_buckets(s.total()) }).collect();
    RunDoc {
        format: FORMAT.into(),
        format_version: if run.series.iter().any(|s| s.key.load.is_some()) {
            3
        } else if run.series.iter().any(Series::is_signed) {
            2
        } else {
            1
        },
        run_id: run.header.id,
        status: run.header.status,
        results,
        run: HeaderDoc { header: run.header.clone(), inventory: run.inventory.clone(), plan: run.plan.clone() },
        series: full.then(|| run.series.iter().map(series_doc).collect()),
        trace: run.trace.clone(),
        episodes: run.episodes.clone(),
        characterisation: run.characterisation.clone(),
        cpu_score: run.cpu_score.clone(),
    }
}

fn series_doc(s: &Series) -> SeriesDoc {
    SeriesDoc {
        key: s.key.clone(),
        unit: s.unit.clone(),
        exceed: s.exceed.clone(),
        extra: s.extra.clone(),
        intervals: s
            .intervals
            .iter()
            .map(|iv| IntervalDoc {
                seq: iv.seq,
                start_ns: iv.start_ns,
                end_ns: iv.end_ns,
                count: iv.stats.count,
                min_ns: iv.stats.min,
                max_ns: iv.stats.max,
                sum_ns: iv.stats.sum,
                overflows: iv.stats.overflows,
                overruns: iv.overruns,
                lost_exceedances: iv.lost_exceedances,
                hdr: B64.encode(&iv.hdr),
                neg: iv.neg.as_ref().map(|n| NegDoc {
                    count: n.stats.count,
                    min_ns: n.stats.min,
                    max_ns: n.stats.max,
                    sum_ns: n.stats.sum,
                    overflows: n.stats.overflows,
                    hdr: B64.encode(&n.hdr),
                }),
            })
            .collect(),
        exceedances: s.exceedances.iter().map(|e| [e.t_ns, e.value_ns]).collect(),
    }
}

pub fn write_json(run: &Run, full: bool, out: &mut dyn Write) -> Result<()> {
    serde_json::to_writer(&mut *out, &run_doc(run, full))?;
    out.write_all(b"\n")?;
    Ok(())
}

/// Reads a full JSON export back into a run. `origin` names the file in errors.
pub fn read_json(text: &str, origin: &str) -> Result<Run> {
    let doc: RunDoc = serde_json::from_str(text).with_context(|| {
        format!("{origin} is not an rtscope JSON export (make one with `rtscope export RUN --format json`)")
    })?;
    if doc.format != FORMAT {
        bail!("{origin}: format is '{}', expected '{FORMAT}'", doc.format);
    }
    if doc.format_version > FORMAT_VERSION {
        bail!(
            "{origin}: format version {} is newer than this rtscope reads ({FORMAT_VERSION}); upgrade rtscope",
            doc.format_version
        );
    }
    let series_docs = doc.series.ok_or_else(|| {
        anyhow!("{origin} holds only the summary (a probe's --json); import needs `rtscope export RUN --format json`")
    })?;
    let mut series = Vec::new();
    for s in series_docs {
        let mut intervals = Vec::new();
        for iv in s.intervals {
            let where_ = || format!("{origin}: {} interval {}", s.key.describe(), iv.seq);
            let bytes = B64.decode(iv.hdr.as_bytes()).map_err(|e| anyhow!("{}: bad base64: {e}", where_()))?;
            let neg = match iv.neg {
                Some(n) => Some(NegHalf {
                    stats: Stats {
                        count: n.count,
                        min: n.min_ns,
                        max: n.max_ns,
                        sum: n.sum_ns,
                        overflows: n.overflows,
                    },
                    hdr: B64.decode(n.hdr.as_bytes()).map_err(|e| anyhow!("{}: bad base64: {e}", where_()))?,
                }),
                None => None,
            };
            intervals.push(Interval {
                seq: iv.seq,
                start_ns: iv.start_ns,
                end_ns: iv.end_ns,
                stats: Stats {
                    count: iv.count,
                    min: iv.min_ns,
                    max: iv.max_ns,
                    sum: iv.sum_ns,
                    overflows: iv.overflows,
                },
                overruns: iv.overruns,
                lost_exceedances: iv.lost_exceedances,
                hdr: bytes,
                neg,
            });
        }
        let what = format!("{origin}: {}", s.key.describe());
        let exceedances = s.exceedances.into_iter().map(|[t_ns, value_ns]| Exceedance { t_ns, value_ns }).collect();
        let mut one =
            Series::new(s.key, s.unit, s.exceed, intervals, exceedances).map_err(|e| anyhow!("{what} {e}"))?;
        one.extra = s.extra;
        series.push(one);
    }
    Ok(Run {
        header: doc.run.header,
        inventory: doc.run.inventory,
        plan: doc.run.plan,
        series,
        episodes: doc.episodes,
        trace: doc.trace,
        characterisation: doc.characterisation,
        cpu_score: doc.cpu_score,
    })
}

/// One row per non-empty histogram bucket of each series' whole-run
/// histogram (a signed series' negative buckets first, with negative bounds).
/// An assessment's rows end with the load (a last column `load`).
pub fn write_csv(run: &Run, out: &mut dyn Write) -> Result<()> {
    let loads = run.series.iter().any(|s| s.key.load.is_some());
    writeln!(out, "run_id,probe,metric,cpu,lowest_ns,highest_ns,count{}", if loads { ",load" } else { "" })?;
    for s in &run.series {
        let total = s.total();
        let load = match (&s.key.load, loads) {
            (Some(l), _) => format!(",{}", csv_field(l)),
            (None, true) => ",".into(),
            (None, false) => String::new(),
        };
        let row = |out: &mut dyn Write, lo: i64, hi: i64, n: u64| {
            writeln!(out, "{},{},{},{},{lo},{hi},{n}{load}", run.header.id, s.key.probe, s.key.metric, s.key.cpu)
        };
        let beyond = hist::HIGHEST_NS as i64 + 1;
        if let Some(neg) = total.neg.as_ref().filter(|n| n.stats.overflows > 0) {
            row(out, -(neg.stats.max as i64), -beyond, neg.stats.overflows)?;
        }
        for [lo, hi, n] in hist::signed_buckets(total) {
            row(out, lo, hi, n as u64)?;
        }
        if total.stats.overflows > 0 {
            row(out, beyond, total.stats.max as i64, total.stats.overflows)?;
        }
    }
    Ok(())
}

/// A CSV field, quoted when it holds a comma or a quote (a `cmd:` load).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

/// The HdrHistogram interval log: one line per checkpoint interval and
/// series, tagged `probe.metric.cpuN` (`probe.metric.cpuN@load` in an
/// assessment), values in nanoseconds. It opens with the header that
/// HdrHistogram's own `HistogramLogWriter` (Java) writes: the logger, the
/// log format version, StartTime (with its date), BaseTime and the column
/// legend; interval timestamps are seconds from the BaseTime, the run's
/// start.
pub fn write_hdr_log(run: &Run, out: &mut dyn Write) -> Result<()> {
    let start_ns = run.header.started_unix_ns.max(0) as u64;
    let start = format!("{}.{:03}", start_ns / 1_000_000_000, start_ns % 1_000_000_000 / 1_000_000);
    writeln!(out, "#[Logged with rtscope {}]", env!("CARGO_PKG_VERSION"))?;
    writeln!(out, "#[Histogram log format version {HDR_LOG_FORMAT_VERSION}]")?;
    writeln!(out, "#[StartTime: {start} (seconds since epoch), {}]", java_date(start_ns / 1_000_000_000))?;
    writeln!(out, "#[BaseTime: {start} (seconds since epoch)]")?;
    writeln!(
        out,
        "#rtscope run {} ({}) of {}: values in nanoseconds, tags PROBE.METRIC.cpuN[@LOAD][.neg]",
        run.header.id, run.header.uuid, run.header.hostname
    )?;
    writeln!(out, "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"")?;
    // The BaseTime above as the writer's intervals see it: offsets from
    // the millisecond it names.
    let base_ns = start_ns / 1_000_000 * 1_000_000;
    let mut serializer = V2DeflateSerializer::new();
    let builder = IntervalLogWriterBuilder::new();
    let mut out = out;
    let mut log = builder.begin_log_with(&mut out, &mut serializer)?;
    // A signed series' negative half goes under its own tag, `.neg`, as
    // magnitudes (an HdrHistogram holds no negative value).
    let mut lines: Vec<(u64, String, &Interval, bool)> = Vec::new();
    for s in &run.series {
        let mut tag = format!("{}.{}.cpu{}", s.key.probe, s.key.metric, s.key.cpu);
        if let Some(l) = &s.key.load {
            // Tags hold no whitespace or comma.
            tag.push('@');
            tag.extend(l.chars().map(|c| if c.is_whitespace() || c == ',' { '_' } else { c }));
        }
        for iv in &s.intervals {
            lines.push((iv.start_ns, tag.clone(), iv, false));
            if iv.neg.is_some() {
                lines.push((iv.start_ns, format!("{tag}.neg"), iv, true));
            }
        }
    }
    lines.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    for (_, tag, iv, neg) in lines {
        let offset = Duration::from_nanos(
            (start_ns - base_ns).saturating_add(iv.start_ns.saturating_sub(run.header.start_mono_ns)),
        );
        let length = Duration::from_nanos(iv.end_ns.saturating_sub(iv.start_ns));
        let t = iv.tally().map_err(|e| anyhow!("{tag}: {e}"))?;
        let h = if neg { t.neg.map(|n| n.hist).unwrap_or_else(hist::new_hist) } else { t.hist };
        log.write_histogram(&h, offset, length, Tag::new(&tag))
            .map_err(|e| anyhow!("writing the HdrHistogram log: {e}"))?;
    }
    Ok(())
}

/// The version HdrHistogram's Java `HistogramLogWriter` writes (2.1.x):
/// compressed V2 histograms, optional `Tag=` prefixes.
pub const HDR_LOG_FORMAT_VERSION: &str = "1.3";

/// `Tue Nov 14 22:13:20 UTC 2023`: Java's `Date.toString()`, in UTC, as
/// HdrHistogram's log writer puts it after the StartTime.
fn java_date(unix_secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let (days, rem) = ((unix_secs / 86_400) as i64, unix_secs % 86_400);
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{} {} {d:02} {:02}:{:02}:{:02} UTC {y}",
        DAYS[(days % 7) as usize],
        MONTHS[(m - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests_support::sample_run;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

    #[test]
    fn json_round_trips_exactly() {
        let run = sample_run();
        let mut text = Vec::new();
        write_json(&run, true, &mut text).unwrap();
        let back = read_json(std::str::from_utf8(&text).unwrap(), "x.json").unwrap();
        assert_eq!(back, run);
        let mut again = Vec::new();
        write_json(&back, true, &mut again).unwrap();
        assert_eq!(text, again);
        let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
        let r = &v["results"][0];
        for k in RESULT_KEYS {
            assert!(!r[k].is_null(), "{k} missing");
        }
        assert_eq!(r["overflows"], 3);
        assert_eq!(r["max_ns"], 150_000_000_000u64);
    }

    #[test]
    fn signed_series_round_trip_through_json_and_keep_version_1_otherwise() {
        let run = crate::store::tests_support::signed_run();
        let mut text = Vec::new();
        write_json(&run, true, &mut text).unwrap();
        let back = read_json(std::str::from_utf8(&text).unwrap(), "s.json").unwrap();
        assert_eq!(back, run);
        let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(v["format_version"], 2);
        let row = v["results"].as_array().unwrap().iter().find(|r| r["probe"] == "sleep").unwrap();
        assert_eq!(row["min_ns"], -5500);
        assert_eq!(row["timer_slack_ns"], 50_000);
        let buckets = row["histogram"].as_array().unwrap();
        assert!(buckets[0][0].as_i64().unwrap() < 0 && buckets[0][1].as_i64().unwrap() < 0, "{}", buckets[0]);
        let n: i64 = buckets.iter().map(|b| b[2].as_i64().unwrap()).sum();
        assert_eq!(n, 4000);
        let series = v["series"].as_array().unwrap().iter().find(|s| s["probe"] == "sleep").unwrap();
        assert!(series["intervals"][0]["neg"]["count"].as_u64().unwrap() > 0);
        // Unsigned runs keep the version-1 document, without the new keys.
        let mut plain = Vec::new();
        write_json(&sample_run(), true, &mut plain).unwrap();
        let p: serde_json::Value = serde_json::from_slice(&plain).unwrap();
        assert_eq!(p["format_version"], 1);
        let plain = String::from_utf8(plain).unwrap();
        assert!(!plain.contains("\"neg\"") && !plain.contains("\"extra\""));
        // CSV: negative rows first, every sample once.
        let mut csv = Vec::new();
        write_csv(&run, &mut csv).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        let sleep: Vec<&str> = csv.lines().filter(|l| l.contains(",sleep,")).collect();
        assert!(sleep[0].split(',').nth(4).unwrap().starts_with('-'), "{}", sleep[0]);
        let total: u64 = sleep.iter().map(|l| l.rsplit(',').next().unwrap().parse::<u64>().unwrap()).sum();
        assert_eq!(total, 4000);
        let mut log = Vec::new();
        write_hdr_log(&run, &mut log).unwrap();
        let tags: Vec<String> = IntervalLogIterator::new(&log)
            .filter_map(|e| match e.unwrap() {
                LogEntry::Interval(h) => h.tag().map(|t| t.as_str().to_string()),
                _ => None,
            })
            .collect();
        assert!(tags.iter().any(|t| t == "sleep.nanosleep@5ms.cpu1.neg"), "{tags:?}");
    }

    #[test]
    fn an_assessment_is_version_3_with_loads_and_characterisation() {
        let run = crate::store::tests_support::matrix_run();
        let mut text = Vec::new();
        write_json(&run, true, &mut text).unwrap();
        let back = read_json(std::str::from_utf8(&text).unwrap(), "m.json").unwrap();
        assert_eq!(back, run);
        let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(v["format_version"], 3);
        assert!(v["results"].as_array().unwrap().iter().all(|r| r["load"].is_string()));
        assert_eq!(v["characterisation"].as_array().unwrap().len(), 2);
        assert_eq!(v["characterisation"][0]["load"], "idle");
        assert_eq!(v["cpu_score"]["score"], 41_000);
        let mut csv = Vec::new();
        write_csv(&run, &mut csv).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        assert!(csv.starts_with("run_id,probe,metric,cpu,lowest_ns,highest_ns,count,load\n"), "{csv}");
        assert!(csv.lines().nth(1).unwrap().ends_with(",cpu"));
        let mut log = Vec::new();
        write_hdr_log(&run, &mut log).unwrap();
        assert!(String::from_utf8_lossy(&log).contains("wakeup.latency.cpu0@idle"));
        // Single-probe documents carry no load, no characterisation.
        let mut plain = Vec::new();
        write_json(&sample_run(), false, &mut plain).unwrap();
        let plain = String::from_utf8(plain).unwrap();
        assert!(!plain.contains("\"load\"") && !plain.contains("characterisation") && !plain.contains("cpu_score"));
        assert_eq!(csv_field("cmd:'a, b'"), "\"cmd:'a, b'\"");
    }

    #[test]
    fn import_names_the_file_and_the_problem() {
        let e = format!("{:#}", read_json("{nope", "bad.json").unwrap_err());
        assert!(e.contains("bad.json"), "{e}");
        let run = sample_run();
        let mut text = Vec::new();
        write_json(&run, false, &mut text).unwrap();
        let e = read_json(std::str::from_utf8(&text).unwrap(), "summary.json").unwrap_err().to_string();
        assert!(e.contains("export"), "{e}");
        let mut doc = run_doc(&run, true);
        doc.series.as_mut().unwrap()[0].intervals[0].count += 1;
        let e = read_json(&serde_json::to_string(&doc).unwrap(), "c.json").unwrap_err().to_string();
        assert!(e.contains("c.json") && e.contains("count"), "{e}");
        let mut doc = run_doc(&run, true);
        let iv = &mut doc.series.as_mut().unwrap()[0].intervals[0];
        (iv.min_ns, iv.max_ns) = (iv.max_ns, iv.min_ns);
        let e = read_json(&serde_json::to_string(&doc).unwrap(), "m.json").unwrap_err().to_string();
        assert!(e.contains("m.json") && e.contains("min above max"), "{e}");
        let mut doc = run_doc(&run, true);
        doc.series.as_mut().unwrap()[0].intervals[1].seq = 0;
        assert!(read_json(&serde_json::to_string(&doc).unwrap(), "s.json").is_err());
        let mut doc = run_doc(&run, true);
        doc.series.as_mut().unwrap()[0].intervals[0].hdr = "AAAA".into();
        assert!(read_json(&serde_json::to_string(&doc).unwrap(), "h.json").is_err());
    }

    #[test]
    fn csv_and_hdr_log() {
        let run = sample_run();
        let mut csv = Vec::new();
        write_csv(&run, &mut csv).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        let total: u64 = csv.lines().skip(1).map(|l| l.rsplit(',').next().unwrap().parse::<u64>().unwrap()).sum();
        assert_eq!(total, 2 * 3 * 1001);
        let mut log = Vec::new();
        write_hdr_log(&run, &mut log).unwrap();
        let mut n = 0;
        for e in IntervalLogIterator::new(&log) {
            if let LogEntry::Interval(h) = e.unwrap() {
                assert!(h.tag().unwrap().as_str().starts_with("wakeup.latency.cpu"));
                n += 1;
            }
        }
        assert_eq!(n, 6);
        // The header HdrHistogram's Java writer puts first, in its order.
        let text = String::from_utf8(log).unwrap();
        let lines: Vec<&str> = text.lines().take(6).collect();
        assert_eq!(lines[0], format!("#[Logged with rtscope {}]", env!("CARGO_PKG_VERSION")));
        assert_eq!(lines[1], "#[Histogram log format version 1.3]");
        assert!(lines[2].starts_with("#[StartTime: ") && lines[2].ends_with(" UTC 2023]"), "{}", lines[2]);
        assert!(lines[3].starts_with("#[BaseTime: ") && lines[3].ends_with(" (seconds since epoch)]"), "{}", lines[3]);
        assert_eq!(lines[5], r#""StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram""#);
    }

    #[test]
    fn java_dates() {
        assert_eq!(java_date(0), "Thu Jan 01 00:00:00 UTC 1970");
        assert_eq!(java_date(1_700_000_000), "Tue Nov 14 22:13:20 UTC 2023");
        assert_eq!(java_date(1_795_000_000), "Wed Nov 18 11:06:40 UTC 2026");
        assert_eq!(java_date(951_782_400), "Tue Feb 29 00:00:00 UTC 2000");
    }
}
