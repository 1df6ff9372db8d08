//! Export formats: lossless JSON (the common shape every probe's `--json`
//! shares, plus full per-interval histograms), CSV per bucket, and the
//! HdrHistogram interval log. JSON imports back exactly.

use crate::episode::{Episode, TraceSummary};
use crate::hist::{self, Stats};
use crate::inventory::Inventory;
use crate::run::{Exceedance, Interval, ResultRow, Run, RunHeader, RunStatus, Series, SeriesKey};
use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::time::{Duration, UNIX_EPOCH};

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
pub const FORMAT_VERSION: u32 = 1;

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
}

/// A result row with its whole-run histogram as `[lowest_ns, highest_ns, count]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultDoc {
    #[serde(flatten)]
    pub row: ResultRow,
    pub histogram: Vec<[u64; 3]>,
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
}

/// Builds the JSON document; `full` adds every interval and exceedance.
pub fn run_doc(run: &Run, full: bool) -> RunDoc {
    let results = run
        .series
        .iter()
        .map(|s| ResultDoc { row: s.result(), histogram: hist::nonzero_buckets(&s.total().hist) })
        .collect();
    RunDoc {
        format: FORMAT.into(),
        format_version: FORMAT_VERSION,
        run_id: run.header.id,
        status: run.header.status,
        results,
        run: HeaderDoc { header: run.header.clone(), inventory: run.inventory.clone(), plan: run.plan.clone() },
        series: full.then(|| run.series.iter().map(series_doc).collect()),
        trace: run.trace.clone(),
        episodes: run.episodes.clone(),
    }
}

fn series_doc(s: &Series) -> SeriesDoc {
    SeriesDoc {
        key: s.key.clone(),
        unit: s.unit.clone(),
        exceed: s.exceed.clone(),
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
            let where_ = || format!("{origin}: {}/{} cpu {} interval {}", s.key.probe, s.key.metric, s.key.cpu, iv.seq);
            let bytes = B64.decode(iv.hdr.as_bytes()).map_err(|e| anyhow!("{}: bad base64: {e}", where_()))?;
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
            });
        }
        let what = format!("{origin}: {}/{} cpu {}", s.key.probe, s.key.metric, s.key.cpu);
        let exceedances = s.exceedances.into_iter().map(|[t_ns, value_ns]| Exceedance { t_ns, value_ns }).collect();
        series.push(Series::new(s.key, s.unit, s.exceed, intervals, exceedances).map_err(|e| anyhow!("{what} {e}"))?);
    }
    Ok(Run {
        header: doc.run.header,
        inventory: doc.run.inventory,
        plan: doc.run.plan,
        series,
        episodes: doc.episodes,
        trace: doc.trace,
    })
}

/// One row per non-empty histogram bucket of each series' whole-run histogram.
pub fn write_csv(run: &Run, out: &mut dyn Write) -> Result<()> {
    writeln!(out, "run_id,probe,metric,cpu,lowest_ns,highest_ns,count")?;
    for s in &run.series {
        let total = s.total();
        for [lo, hi, n] in hist::nonzero_buckets(&total.hist) {
            writeln!(out, "{},{},{},{},{lo},{hi},{n}", run.header.id, s.key.probe, s.key.metric, s.key.cpu)?;
        }
        if total.stats.overflows > 0 {
            writeln!(
                out,
                "{},{},{},{},{},{},{}",
                run.header.id,
                s.key.probe,
                s.key.metric,
                s.key.cpu,
                hist::HIGHEST_NS + 1,
                total.stats.max,
                total.stats.overflows
            )?;
        }
    }
    Ok(())
}

/// The HdrHistogram interval log: one line per checkpoint interval and
/// series, tagged `probe.metric.cpuN`, values in nanoseconds.
pub fn write_hdr_log(run: &Run, out: &mut dyn Write) -> Result<()> {
    let start = UNIX_EPOCH + Duration::from_nanos(run.header.started_unix_ns.max(0) as u64);
    let mut serializer = V2DeflateSerializer::new();
    let mut builder = IntervalLogWriterBuilder::new();
    builder
        .add_comment(&format!("rtscope run {} ({}), values in nanoseconds", run.header.id, run.header.uuid))
        .with_start_time(start)
        .with_base_time(start);
    let mut out = out;
    let mut log = builder.begin_log_with(&mut out, &mut serializer)?;
    let mut lines: Vec<(u64, String, &Interval)> = Vec::new();
    for s in &run.series {
        let tag = format!("{}.{}.cpu{}", s.key.probe, s.key.metric, s.key.cpu);
        for iv in &s.intervals {
            lines.push((iv.start_ns, tag.clone(), iv));
        }
    }
    lines.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    for (_, tag, iv) in lines {
        let offset = Duration::from_nanos(iv.start_ns.saturating_sub(run.header.start_mono_ns));
        let length = Duration::from_nanos(iv.end_ns.saturating_sub(iv.start_ns));
        let h = iv.hist().map_err(|e| anyhow!("{tag} interval {}: {e}", iv.seq))?;
        log.write_histogram(&h, offset, length, Tag::new(&tag))
            .map_err(|e| anyhow!("writing the HdrHistogram log: {e}"))?;
    }
    Ok(())
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
    }
}
