//! rtscope's exports as other tools read them, with those tools' own
//! readers: the HdrHistogram interval log through HdrHistogram's Python
//! `HistogramLogReader` (the `hdrhistogram` package; CI installs it, and
//! the reader's part is skipped, saying so, where it is missing).

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// Reads the log at argv[1] with hdrh's HistogramLogReader and prints, per
/// tag, the intervals' summed count, max and recorded buckets (highest
/// equivalent value, count), and the first interval's start (ms since the
/// epoch), as JSON.
const READER: &str = r#"
import json, sys
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
reader = HistogramLogReader(sys.argv[1], None)
tags = {}
while True:
    h = reader.get_next_interval_histogram()
    if h is None:
        break
    t = tags.setdefault(h.get_tag(), {"intervals": 0, "first_start_ms": h.get_start_time_stamp(), "sum": None})
    t["intervals"] += 1
    if t["sum"] is None:
        t["sum"] = HdrHistogram(1, 100_000_000_000, 3)
    t["sum"].add(h)
out = {"start_time_sec": reader.get_start_time_sec(), "tags": {}}
for tag, t in tags.items():
    s = t.pop("sum")
    buckets = [[b.value_iterated_to, b.count_added_in_this_iter_step] for b in s.get_recorded_iterator()]
    t.update(count=s.get_total_count(), max=s.get_max_value(), buckets=buckets)
    out["tags"][tag] = t
print(json.dumps(out))
"#;

#[test]
fn the_hdr_log_opens_with_hdrhistograms_header_and_its_own_reader_reads_it() {
    let dir = tempdir();
    let db = db(&dir);
    let o = rtscope(&["import", data("report-run.json").to_str().unwrap(), "--db", &db]);
    assert!(o.status.success(), "{}", text(&o));
    let log = dir.join("run.hlog");
    let o = rtscope(&["export", "1", "--format", "hdr", "-o", log.to_str().unwrap(), "--db", &db]);
    assert!(o.status.success(), "{}", text(&o));
    let doc = export(&db, &[]);
    let started_ns = doc["run"]["started_unix_ns"].as_u64().unwrap();
    let start = format!("{}.{:03}", started_ns / 1_000_000_000, started_ns % 1_000_000_000 / 1_000_000);

    // The header of HdrHistogram's HistogramLogWriter, in its order.
    let text_log = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text_log.lines().collect();
    assert!(lines[0].starts_with("#[Logged with rtscope "), "{}", lines[0]);
    assert_eq!(lines[1], "#[Histogram log format version 1.3]");
    assert_eq!(lines[2], format!("#[StartTime: {start} (seconds since epoch), Sat Nov 21 08:25:01 UTC 2026]"));
    assert_eq!(lines[3], format!("#[BaseTime: {start} (seconds since epoch)]"));
    let legend = lines.iter().position(|l| !l.starts_with('#')).unwrap();
    assert_eq!(lines[legend], r#""StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram""#);
    assert!(lines[legend + 1].starts_with("Tag=wakeup."), "{}", lines[legend + 1]);

    let has_reader = Command::new("python3").args(["-c", "import hdrh"]).output().is_ok_and(|o| o.status.success());
    if !has_reader {
        eprintln!(
            "skipped: the Python package hdrhistogram is not installed (pip install hdrhistogram): the log was not \
             read by HdrHistogram's own reader"
        );
        std::fs::remove_dir_all(dir).unwrap();
        return;
    }
    let o = Command::new("python3").args(["-c", READER, log.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "hdrh's HistogramLogReader: {}", text(&o));
    let read: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let start_sec = read["start_time_sec"].as_f64().unwrap();
    assert!((start_sec - started_ns as f64 / 1e9).abs() < 1e-3, "StartTime {start_sec}");
    let tags = read["tags"].as_object().unwrap();
    let results = doc["results"].as_array().unwrap();
    assert_eq!(tags.len(), results.len(), "a tag per series: {:?}", tags.keys());
    let start_mono = doc["run"]["start_mono_ns"].as_u64().unwrap();
    for r in results {
        let tag = format!("{}.{}.cpu{}", r["probe"].as_str().unwrap(), r["metric"].as_str().unwrap(), r["cpu"]);
        let t = &tags.get(&tag).unwrap_or_else(|| panic!("no tag {tag} in {:?}", tags.keys()));
        let count = r["count"].as_u64().unwrap() - r["overflows"].as_u64().unwrap();
        assert_eq!(t["count"].as_u64(), Some(count), "{tag}: every sample, as rtscope counts them");
        assert_eq!(t["intervals"].as_u64(), r["intervals"].as_u64(), "{tag}: one line per interval");
        // HdrHistogram keeps 3 significant digits: its max is the exact
        // one's bucket, within 0.1%.
        let (max, exact) = (t["max"].as_f64().unwrap(), r["max_ns"].as_f64().unwrap());
        assert!(max >= exact && max <= exact * 1.001 + 1.0, "{tag}: max {max} vs {exact}");
        // The same buckets with the same counts as rtscope's own histogram.
        let ours: Vec<(u64, u64)> = r["histogram"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (b[1].as_u64().unwrap(), b[2].as_u64().unwrap()))
            .collect();
        let theirs: Vec<(u64, u64)> =
            t["buckets"].as_array().unwrap().iter().map(|b| (b[0].as_u64().unwrap(), b[1].as_u64().unwrap())).collect();
        assert_eq!(theirs, ours, "{tag}: buckets (highest equivalent value, count)");
        // The first interval starts where the run's first interval did.
        let series = doc["series"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["probe"] == r["probe"] && s["metric"] == r["metric"] && s["cpu"] == r["cpu"])
            .unwrap();
        let first_ns = series["intervals"][0]["start_ns"].as_u64().unwrap() - start_mono + started_ns;
        let got_ms = t["first_start_ms"].as_f64().unwrap();
        assert!((got_ms - first_ns as f64 / 1e6).abs() <= 1.0, "{tag}: first interval at {got_ms} ms vs {first_ns} ns");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
