//! The JSON document of a run: the common shape every probe's `--json`
//! shares, plus, in a full export, every interval's histogram and every
//! exceedance; and reading a full export back into a run, exactly. The
//! binary crate's `report/` writes it, and its other formats (CSV, the
//! HdrHistogram log) from the run itself.

use crate::characterisation::{Characterisation, CpuScore};
use crate::episode::timeline::Timeline;
use crate::episode::{Episode, TraceSummary};
use crate::hist::{self, Stats};
use crate::inventory::Inventory;
use crate::run::{Exceedance, Interval, NegHalf, ResultRow, Run, RunHeader, RunStatus, Series, SeriesKey};
use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};

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
    /// A traced run's timeline of its whole window (a full export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
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
        timeline: None,
    }
}

fn series_doc(s: &Series) -> SeriesDoc {
    SeriesDoc {
        key: s.key.clone(),
        unit: s.unit.clone(),
        exceed: s.exceed.clone(),
        extra: s.extra.clone(),
        intervals: s.intervals.iter().map(interval_doc).collect(),
        exceedances: s.exceedances.iter().map(|e| [e.t_ns, e.value_ns]).collect(),
    }
}

fn interval_doc(iv: &Interval) -> IntervalDoc {
    IntervalDoc {
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
    }
}

/// Where a streamed full export ([`streamed_doc`]) reads each series'
/// intervals (with their histograms) and exceedances, a series at a time
/// and as they come: the store (a run's rows as they are read), or a run
/// held whole.
pub trait SeriesRows {
    /// `f` of each interval of the run's `series`th series, in order.
    fn intervals(&self, series: usize, f: &mut dyn FnMut(Interval) -> Result<()>) -> Result<()>;
    /// `f` of each exceedance of the run's `series`th series, in time order.
    fn exceedances(&self, series: usize, f: &mut dyn FnMut(Exceedance) -> Result<()>) -> Result<()>;
}

impl SeriesRows for Run {
    fn intervals(&self, series: usize, f: &mut dyn FnMut(Interval) -> Result<()>) -> Result<()> {
        self.series[series].intervals.iter().try_for_each(|iv| f(iv.clone()))
    }

    fn exceedances(&self, series: usize, f: &mut dyn FnMut(Exceedance) -> Result<()>) -> Result<()> {
        self.series[series].exceedances.iter().try_for_each(|&e| f(e))
    }
}

/// A full export's document, [`RunDoc`]'s keys in its order and its bytes
/// once written, whose series' intervals and exceedances are read from
/// `rows` as they are written, never held: `run`'s series give the rest
/// (their keys, units, extra figures; results from their sums), so `run`
/// may be a summed read of the store ([`crate::store::Store::load_run_summed`]).
pub fn streamed_doc<'a>(run: &'a Run, rows: &'a dyn SeriesRows, timeline: Option<&'a Timeline>) -> StreamedDoc<'a> {
    let doc = run_doc(run, false);
    StreamedDoc {
        format: doc.format,
        format_version: doc.format_version,
        run_id: doc.run_id,
        status: doc.status,
        results: doc.results,
        run: doc.run,
        series: StreamedSeries { run, rows },
        trace: doc.trace,
        episodes: doc.episodes,
        characterisation: doc.characterisation,
        cpu_score: doc.cpu_score,
        timeline,
    }
}

/// See [`streamed_doc`]; its fields are [`RunDoc`]'s, in its order.
#[derive(Serialize)]
pub struct StreamedDoc<'a> {
    format: String,
    format_version: u32,
    run_id: i64,
    status: RunStatus,
    results: Vec<ResultDoc>,
    run: HeaderDoc,
    series: StreamedSeries<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace: Option<TraceSummary>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    episodes: Vec<Episode>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    characterisation: Vec<Characterisation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu_score: Option<CpuScore>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeline: Option<&'a Timeline>,
}

/// The `series` of a [`StreamedDoc`]: [`SeriesDoc`]s, written a series at a time.
struct StreamedSeries<'a> {
    run: &'a Run,
    rows: &'a dyn SeriesRows,
}

impl Serialize for StreamedSeries<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(self.run.series.len()))?;
        for (i, s) in self.run.series.iter().enumerate() {
            seq.serialize_element(&StreamedSeriesDoc {
                key: &s.key,
                unit: &s.unit,
                exceed: &s.exceed,
                extra: &s.extra,
                intervals: Streamed { each: &|f| self.rows.intervals(i, &mut |iv| f(&interval_doc(&iv))) },
                exceedances: Streamed { each: &|f| self.rows.exceedances(i, &mut |e| f(&[e.t_ns, e.value_ns])) },
            })?;
        }
        seq.end()
    }
}

/// A [`SeriesDoc`] whose intervals and exceedances are read as they are written.
#[derive(Serialize)]
struct StreamedSeriesDoc<'a, I: Serialize, E: Serialize> {
    #[serde(flatten)]
    key: &'a SeriesKey,
    unit: &'a str,
    exceed: &'a str,
    #[serde(skip_serializing_if = "no_extra")]
    extra: &'a serde_json::Map<String, serde_json::Value>,
    intervals: Streamed<'a, I>,
    exceedances: Streamed<'a, E>,
}

fn no_extra(extra: &&serde_json::Map<String, serde_json::Value>) -> bool {
    extra.is_empty()
}

/// `f` of each item of a sequence, as it is read.
type Each<'a, T> = dyn Fn(&mut dyn FnMut(&T) -> Result<()>) -> Result<()> + 'a;

/// A JSON array written as `each` gives its items; an error reading them
/// ends the document with it.
struct Streamed<'a, T> {
    each: &'a Each<'a, T>,
}

impl<T: Serialize> Serialize for Streamed<'_, T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeSeq};
        let mut seq = serializer.serialize_seq(None)?;
        // The writer's own error, kept as it is (an anyhow error holds no
        // serializer's error).
        let mut failed = None;
        let read = (self.each)(&mut |item| {
            seq.serialize_element(item).map_err(|e| {
                failed = Some(e);
                anyhow!("writing the document failed")
            })
        });
        match (failed, read) {
            (Some(e), _) => Err(e),
            (None, Err(e)) => Err(S::Error::custom(format!("{e:#}"))),
            (None, Ok(())) => seq.end(),
        }
    }
}

/// Reads a full JSON export back into a run. `origin` names the file in errors.
pub fn read_json(text: &str, origin: &str) -> Result<Run> {
    read_export(text, origin).map(|(run, _)| run)
}

/// [`read_json`], and the run's timeline where the export holds one.
pub fn read_export(text: &str, origin: &str) -> Result<(Run, Option<Timeline>)> {
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
    let h = &doc.run.header;
    if let Some(end) = h.ended_unix_ns.filter(|&e| e < h.started_unix_ns) {
        bail!(
            "{origin}: run.header.ended_unix_ns ({end}) is before started_unix_ns ({}): a run ends after it starts",
            h.started_unix_ns
        );
    }
    let mut series = Vec::new();
    for s in series_docs {
        if s.key.cpu < -1 {
            bail!(
                "{origin}: {} has cpu {}: a series' cpu is a CPU (or a watched thread's id), or -1 for none",
                s.key.describe(),
                s.key.cpu
            );
        }
        let mut intervals = Vec::new();
        for iv in s.intervals {
            let where_ = || format!("{origin}: {} interval {}", s.key.describe(), iv.seq);
            if iv.end_ns < iv.start_ns {
                bail!("{}: end_ns ({}) is before start_ns ({})", where_(), iv.end_ns, iv.start_ns);
            }
            let bytes = B64.decode(iv.hdr.as_bytes()).map_err(|e| anyhow!("{}: bad base64: {e}", where_()))?;
            let neg = match iv.neg {
                Some(n) => Some(Box::new(NegHalf {
                    stats: Stats {
                        count: n.count,
                        min: n.min_ns,
                        max: n.max_ns,
                        sum: n.sum_ns,
                        overflows: n.overflows,
                    },
                    hdr: B64.decode(n.hdr.as_bytes()).map_err(|e| anyhow!("{}: bad base64: {e}", where_()))?,
                })),
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
        // The store's promise: an exceedance is a sample of the interval
        // that holds its time, so no larger than that interval's maximum
        // (or a neighbour's: a sample taken as an interval closes may be
        // counted in the next).
        for &[t_ns, value_ns] in &s.exceedances {
            let at = intervals.iter().position(|iv| iv.start_ns <= t_ns && t_ns <= iv.end_ns);
            let around = match at {
                Some(i) => &intervals[i.saturating_sub(1)..(i + 2).min(intervals.len())],
                None => &intervals[..],
            };
            let max = around.iter().map(|iv| iv.stats.max).max().unwrap_or(0);
            if value_ns > max {
                bail!(
                    "{what}: exceedance [{t_ns}, {value_ns}] (value_ns) is above the maximum of its interval ({max} \
                     ns): an exceedance is one of the interval's samples"
                );
            }
        }
        let exceedances = s.exceedances.into_iter().map(|[t_ns, value_ns]| Exceedance { t_ns, value_ns }).collect();
        let mut one =
            Series::new(s.key, s.unit, s.exceed, intervals, exceedances).map_err(|e| anyhow!("{what} {e}"))?;
        one.extra = s.extra;
        series.push(one);
    }
    let run = Run {
        header: doc.run.header,
        inventory: doc.run.inventory,
        plan: doc.run.plan,
        series,
        episodes: doc.episodes,
        trace: doc.trace,
        characterisation: doc.characterisation,
        cpu_score: doc.cpu_score,
    };
    Ok((run, doc.timeline))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests_support::sample_run;

    /// The document as `--json` (summary) or `export` (`full`) writes it.
    fn json(run: &Run, full: bool) -> Vec<u8> {
        let mut text = serde_json::to_vec(&run_doc(run, full)).unwrap();
        text.push(b'\n');
        text
    }

    #[test]
    fn json_round_trips_exactly() {
        let run = sample_run();
        let text = json(&run, true);
        let back = read_json(std::str::from_utf8(&text).unwrap(), "x.json").unwrap();
        assert_eq!(back, run);
        let again = json(&back, true);
        assert_eq!(text, again);
        let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
        let r = &v["results"][0];
        for k in RESULT_KEYS {
            assert!(!r[k].is_null(), "{k} missing");
        }
        assert_eq!(r["overflows"], 3);
        assert_eq!(r["max_ns"], 150_000_000_000u64);
    }

    /// A full export's timeline is read back whole; a run without one
    /// reads none.
    #[test]
    fn the_timeline_round_trips() {
        use crate::episode::timeline::{Item, Track};
        let run = sample_run();
        let mut t = Timeline::new(100);
        let name = t.name("spin");
        t.push(Item { cpu: 1, track: Track::Task, start_ns: 5_000, dur_ns: 900, name, pid: 7, value_ns: 0 });
        let t = t.finish();
        let mut doc = run_doc(&run, true);
        doc.timeline = Some(t.clone());
        let text = serde_json::to_string(&doc).unwrap();
        let (back, timeline) = read_export(&text, "t.json").unwrap();
        assert_eq!(back, run);
        let timeline = timeline.unwrap();
        assert_eq!((timeline.items().collect::<Vec<_>>(), timeline.window_ns), (t.items().collect(), t.window_ns));
        assert_eq!(timeline.name_of(timeline.items().next().unwrap()), "spin");
        let (_, none) = read_export(std::str::from_utf8(&json(&run, true)).unwrap(), "x.json").unwrap();
        assert!(none.is_none());
    }

    #[test]
    fn signed_series_round_trip_through_json_and_keep_version_1_otherwise() {
        let run = crate::store::tests_support::signed_run();
        let text = json(&run, true);
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
        let plain = json(&sample_run(), true);
        let p: serde_json::Value = serde_json::from_slice(&plain).unwrap();
        assert_eq!(p["format_version"], 1);
        let plain = String::from_utf8(plain).unwrap();
        assert!(!plain.contains("\"neg\"") && !plain.contains("\"extra\""));
    }

    #[test]
    fn an_assessment_is_version_3_with_loads_and_characterisation() {
        let run = crate::store::tests_support::matrix_run();
        let text = json(&run, true);
        let back = read_json(std::str::from_utf8(&text).unwrap(), "m.json").unwrap();
        assert_eq!(back, run);
        let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(v["format_version"], 3);
        assert!(v["results"].as_array().unwrap().iter().all(|r| r["load"].is_string()));
        assert_eq!(v["characterisation"].as_array().unwrap().len(), 2);
        assert_eq!(v["characterisation"][0]["load"], "idle");
        assert_eq!(v["cpu_score"]["score"], 41_000);
        // Single-probe documents carry no load, no characterisation.
        let plain = json(&sample_run(), false);
        let plain = String::from_utf8(plain).unwrap();
        assert!(!plain.contains("\"load\"") && !plain.contains("characterisation") && !plain.contains("cpu_score"));
    }

    #[test]
    fn import_names_the_file_and_the_problem() {
        let e = format!("{:#}", read_json("{nope", "bad.json").unwrap_err());
        assert!(e.contains("bad.json"), "{e}");
        let run = sample_run();
        let text = json(&run, false);
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
        // An exceedance above its interval's maximum; an end before the
        // start, of the run or of an interval: refused, naming the field.
        let mut doc = run_doc(&run, true);
        let s = &mut doc.series.as_mut().unwrap()[0];
        let t = s.intervals[0].start_ns;
        s.exceedances.push([t, 1_000_000_000_000_000]);
        let e = read_json(&serde_json::to_string(&doc).unwrap(), "x.json").unwrap_err().to_string();
        assert!(e.contains("x.json") && e.contains("value_ns") && e.contains("above the maximum"), "{e}");
        let mut doc = run_doc(&run, true);
        doc.run.header.ended_unix_ns = Some(doc.run.header.started_unix_ns - 1);
        let e = read_json(&serde_json::to_string(&doc).unwrap(), "t.json").unwrap_err().to_string();
        assert!(e.contains("t.json") && e.contains("ended_unix_ns") && e.contains("before started_unix_ns"), "{e}");
        let mut doc = run_doc(&run, true);
        let iv = &mut doc.series.as_mut().unwrap()[0].intervals[0];
        iv.end_ns = iv.start_ns - 1;
        let e = read_json(&serde_json::to_string(&doc).unwrap(), "i.json").unwrap_err().to_string();
        assert!(e.contains("i.json") && e.contains("end_ns") && e.contains("before start_ns"), "{e}");
    }

    /// Rows read from a store, as `rtscope export` reads them.
    struct Stored<'s>(&'s crate::store::Store, i64, Vec<i64>);

    impl SeriesRows for Stored<'_> {
        fn intervals(&self, series: usize, f: &mut dyn FnMut(Interval) -> Result<()>) -> Result<()> {
            self.0.for_each_interval_of(self.1, self.2[series], f)
        }

        fn exceedances(&self, series: usize, f: &mut dyn FnMut(Exceedance) -> Result<()>) -> Result<()> {
            self.0.for_each_exceedance_of(self.2[series], f)
        }
    }

    /// The streamed document is the full one, byte for byte: from a run
    /// held whole, and from a summed read of the store with its rows read
    /// as they are written.
    #[test]
    fn a_streamed_document_is_the_full_ones_bytes() {
        use crate::episode::timeline::{Item, Track};
        use crate::store::tests_support::{matrix_run, signed_run};
        let mut t = Timeline::new(100);
        let name = t.name("spin");
        t.push(Item { cpu: 1, track: Track::Task, start_ns: 5_000, dur_ns: 900, name, pid: 7, value_ns: 0 });
        let t = t.finish();
        let dir = tempfile::tempdir().unwrap();
        let mut store = crate::store::Store::open(&dir.path().join("s.db")).unwrap();
        for run in [sample_run(), signed_run(), matrix_run()] {
            for timeline in [None, Some(&t)] {
                let mut doc = run_doc(&run, true);
                doc.timeline = timeline.cloned();
                let full = serde_json::to_vec(&doc).unwrap();
                let streamed = serde_json::to_vec(&streamed_doc(&run, &run, timeline)).unwrap();
                assert!(streamed == full, "{}", String::from_utf8_lossy(&streamed));
            }
            let id = store.insert_run(&run).unwrap();
            let whole = serde_json::to_vec(&run_doc(&store.load_run(id).unwrap(), true)).unwrap();
            let summed = store.load_run_summed(id).unwrap();
            assert!(summed.series.iter().all(|s| s.intervals.iter().all(|iv| iv.hdr.is_empty())));
            let rows = Stored(&store, id, store.series_ids(id).unwrap());
            let streamed = serde_json::to_vec(&streamed_doc(&summed, &rows, None)).unwrap();
            assert!(streamed == whole, "{}", String::from_utf8_lossy(&streamed));
        }
    }

    /// A series whose rows fail to read ends the document with the reason.
    #[test]
    fn a_failed_read_of_rows_ends_the_document_with_its_reason() {
        struct Failing;
        impl SeriesRows for Failing {
            fn intervals(&self, _: usize, _: &mut dyn FnMut(Interval) -> Result<()>) -> Result<()> {
                Err(anyhow!("disk I/O error")).context("reading interval 3")
            }
            fn exceedances(&self, _: usize, _: &mut dyn FnMut(Exceedance) -> Result<()>) -> Result<()> {
                Ok(())
            }
        }
        let run = sample_run();
        let e = serde_json::to_vec(&streamed_doc(&run, &Failing, None)).unwrap_err().to_string();
        assert!(e.contains("reading interval 3") && e.contains("disk I/O error"), "{e}");
    }
}
