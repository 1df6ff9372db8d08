//! A small run with two CPUs, three intervals each and overflows, and other runs, for tests.

use super::*;
use crate::hist::Tally;
use crate::inventory::Inventory;
use crate::run::{Exceedance, Interval, Run, RunStatus, Series, SeriesKey};

pub(crate) fn sample_run() -> Run {
    let mut series = Vec::new();
    for cpu in 0..2 {
        let mut intervals = Vec::new();
        for seq in 0..3u32 {
            let mut t = Tally::new();
            for v in 0..1000u64 {
                t.record(2_000 + v * 7 + u64::from(seq) * 13 + cpu as u64);
            }
            t.record(150_000_000_000);
            intervals.push(Interval::new(
                seq,
                1_000 + u64::from(seq) * 10_000_000_000,
                1_000 + u64::from(seq + 1) * 10_000_000_000,
                &t,
                u64::from(seq),
                0,
            ));
        }
        let key = SeriesKey::new("wakeup", "latency", cpu);
        let exceedances =
            vec![Exceedance { t_ns: 5_000, value_ns: 9_000 }, Exceedance { t_ns: 7_000, value_ns: 8_990 }];
        series.push(Series::new(key, "ns".into(), "adaptive".into(), intervals, exceedances).unwrap());
    }
    Run {
        header: RunHeader {
            command_line: vec!["rtscope".into(), "wakeup".into()],
            ended_unix_ns: Some(1_700_000_030_000_000_000),
            status: RunStatus::Complete,
            exit_code: Some(0),
            pid: 1,
            notes: vec!["a note".into()],
            peak_rss_kb: Some(4096),
            ..RunHeader::new(
                "wakeup",
                format!("test-{}-{}", std::process::id(), series.len()),
                "box",
                1_700_000_000_000_000_000,
                1_000,
            )
        },
        inventory: Inventory::default(),
        plan: serde_json::json!({"interval_ns": 1_000_000}),
        series,
        episodes: vec![crate::episode::tests::sample_episode()],
        trace: Some(crate::episode::TraceSummary {
            instance: "rtscope-1".into(),
            clock: "mono".into(),
            per_cpu: vec![crate::episode::TraceCpu { cpu: 1, events: 10, lost: 2, ..Default::default() }],
            ..Default::default()
        }),
        characterisation: vec![],
        cpu_score: None,
    }
}

/// A run with a signed series (negative values included) and extra
/// figures beside an unsigned one.
pub(crate) fn signed_run() -> Run {
    let mut run = sample_run();
    run.header.uuid.push_str("-signed");
    let mut intervals = Vec::new();
    for seq in 0..2u32 {
        let mut t = Tally::new_signed();
        for v in -500..1500i64 {
            t.record_signed(v * 11 + i64::from(seq));
        }
        intervals.push(Interval::new(seq, u64::from(seq) * 100, u64::from(seq + 1) * 100, &t, 0, 0));
    }
    let key = SeriesKey::new("sleep", "nanosleep@5ms", 1);
    let mut s = Series::new(key, "ns".into(), "adaptive".into(), intervals, vec![]).unwrap();
    s.extra.insert("timer_slack_ns".into(), 50_000.into());
    // The store lists series by probe, metric and CPU.
    run.series.insert(0, s);
    run
}

/// An assessment: the sample run's series under two loads, their
/// characterisation and a CPU score.
pub(crate) fn matrix_run() -> Run {
    use crate::characterisation::{Accumulator, CpuScore};
    let mut run = sample_run();
    run.header.uuid.push_str("-matrix");
    run.header.kind = "run".into();
    let mut series = Vec::new();
    for load in ["cpu", "idle"] {
        for s in &run.series {
            let mut s = s.clone();
            s.key.load = Some(load.into());
            series.push(s);
        }
    }
    // The store lists them by probe, metric, CPU, then load.
    series.sort_by(|a, b| a.key.cmp(&b.key));
    run.series = series;
    for e in &mut run.episodes {
        e.load = Some("cpu".into());
    }
    run.characterisation = ["idle", "cpu"].iter().map(|l| Accumulator::new(l, &[0, 1]).finish()).collect();
    run.cpu_score = Some(CpuScore {
        score: 41_000,
        method: "test".into(),
        version: 1,
        cpu: 0,
        slices: 10,
        slice_ms: 200,
        min: 40_000,
        max: 42_000,
    });
    run
}

/// A new store at `path` as schema `version` made it (no rows but its
/// `meta`), left open.
pub(crate) fn store_at_version(path: &std::path::Path, version: i64) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(super::schema::SCHEMA).unwrap();
    conn.execute_batch(
        "INSERT INTO meta VALUES ('schema_version', '1'); INSERT INTO meta VALUES ('application', 'rtscope');",
    )
    .unwrap();
    for (v, sql) in super::schema::MIGRATIONS.iter().filter(|(v, _)| *v <= version) {
        conn.execute_batch(sql).unwrap();
        conn.execute("UPDATE meta SET value=?1 WHERE key='schema_version'", [v.to_string()]).unwrap();
    }
    conn
}
