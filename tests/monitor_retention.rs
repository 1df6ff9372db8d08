//! `rtscope monitor`'s retention over days, at accelerated time: the
//! monitor's own flags, recorders, writer and retention passes
//! (`commands::monitor::accelerated`) driven by synthetic wake-up
//! latencies, then the store read back by `analyze`, `show` and `report`.
//! No root, no probe: the month itself is in bench/scale.sh.

mod common;
use common::*;
use rtscope::commands::monitor::accelerated::{self, Accelerated};
use rtscope_model::hist::Tally;
use rtscope_model::store::Store;

const HALF_DAY: u64 = 43_200_000_000_000;

/// The percentile `name` of an analyze series.
fn percentile(series: &serde_json::Value, name: &str) -> u64 {
    let p = series["stats"]["percentiles"].as_array().unwrap().iter().find(|p| p["name"] == name);
    p.and_then(|p| p["value_ns"].as_u64()).unwrap_or_else(|| panic!("no {name} in {series}"))
}

/// Within the histograms' resolution (3 significant digits: 0.1 %).
fn within_resolution(read: u64, truth: u64, what: &str) {
    let tolerance = truth / 1000 + 1;
    assert!(read.abs_diff(truth) <= tolerance, "{what}: {read} read back, {truth} committed");
}

/// Half a day of a 2-CPU wake-up monitor at 10 Hz (10 s checkpoints), kept
/// 3 hours then summarised per half hour (a span's raw exceedances thinned
/// to its worst 16), in at most 8 MiB: every pass
/// leaves the store within --max-store, the old days are summaries, and
/// `analyze` of the whole run finds every committed sample, the maximum,
/// p99 and p99.9 of the unsummarised run within the histograms' resolution.
#[test]
fn a_day_summarised_still_answers_analyze_show_and_report() {
    let dir = tempdir();
    let db = dir.join("monitor.db").display().to_string();
    let cpus = if last_cpu() > 0 { format!("0,{}", last_cpu()) } else { "0".to_string() };
    let args = [
        "--cpus",
        &cpus,
        "--quiet",
        "--probe-args",
        "wakeup=--interval 100ms",
        "--retain",
        "3h",
        "--summary-span",
        "30m",
        "--max-store",
        "8M",
        "--db",
        &db,
    ];
    let a = Accelerated {
        args: args.iter().map(|s| s.to_string()).collect(),
        duration_ns: HALF_DAY,
        start_unix_ns: 1_800_000_000_000_000_000,
        seed: 3,
    };
    let mut over = Vec::new();
    let out = accelerated::run(&a, |p| {
        if p.used_bytes > 8 << 20 {
            over.push(*p);
        }
    })
    .unwrap();
    assert!(over.is_empty(), "over --max-store after a pass: {over:?}");
    assert_eq!(out.passes, 12 * 60 + 1, "a pass a minute and one at the end");
    let (summarised, thinned) = (out.summarised_intervals, out.thinned_exceedances);
    assert!(summarised > 0 && thinned > 0, "nothing summarised: {summarised} intervals, {thinned} exceedances");

    // The first 9 hours are summaries of half an hour; the intervals of
    // the last minutes are the checkpoints as written.
    let store = Store::open_for_reading(std::path::Path::new(&db)).unwrap();
    let run = store.load_run_summed(out.run_id).unwrap();
    for s in &run.series {
        let (first, last) = (&s.intervals[0], &s.intervals[s.intervals.len() - 1]);
        assert!(first.end_ns - first.start_ns >= 600_000_000_000, "first interval {first:?} not a summary");
        assert!(last.end_ns - last.start_ns <= 11_000_000_000, "last interval {last:?} summarised");
        assert!(s.intervals.len() < 4320 / 2, "{} intervals left of {}", s.intervals.len(), 4320);
    }
    drop(store);

    let o = rtscope(&["analyze", "1", "--db", &db, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let series = doc["series"].as_array().unwrap();
    assert_eq!(series.len(), out.committed.len());
    for (cpu, truth) in &out.committed {
        let s = series.iter().find(|s| s["cpu"].as_i64() == Some(*cpu)).unwrap();
        let what = |f: &str| format!("cpu {cpu} {f}");
        assert_eq!(s["stats"]["count"].as_u64(), Some(truth.count()), "{}", what("count"));
        assert_eq!(truth.count(), 43_200 * 10, "every sample committed");
        within_resolution(s["stats"]["max_ns"].as_u64().unwrap(), truth.max() as u64, &what("max"));
        for (name, q) in [("p99", 0.99), ("p99.9", 0.999)] {
            within_resolution(percentile(s, name), quantile(truth, q), &what(name));
        }
    }
    // `show`: the same figures, from the same summed read.
    let shown = show_json(&db, "1");
    for (cpu, truth) in &out.committed {
        let r = shown["results"].as_array().unwrap().iter().find(|r| r["cpu"].as_i64() == Some(*cpu)).unwrap();
        assert_eq!(r["count"].as_u64(), Some(truth.count()), "show cpu {cpu}");
        within_resolution(r["p999_ns"].as_u64().unwrap(), quantile(truth, 0.999), &format!("show cpu {cpu} p99.9"));
    }
    let report = dir.join("month.md");
    let o = rtscope(&["report", "1", "--db", &db, "-o", report.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let md = std::fs::read_to_string(&report).unwrap();
    assert!(md.contains("p99.9"), "{md}");
}

fn quantile(t: &Tally, q: f64) -> u64 {
    rtscope_model::hist::quantile(&t.hist, &t.stats, q)
}
