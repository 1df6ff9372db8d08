//! Tests of `store`.

use super::open::sqlite_uri;
use super::schema::SCHEMA;
use super::tests_support::{sample_run, store_at_version};
use super::write::{insert_exceedances, insert_header, insert_interval, set_extra};
use super::*;
use crate::run::{Interval, RunStatus};
use rusqlite::{Connection, params};
use std::path::Path;

#[test]
fn insert_load_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let run = sample_run();
    let id = store.insert_run(&run).unwrap();
    let mut back = store.load_run(id).unwrap();
    assert_eq!(back.header.id, id);
    back.header.id = 0;
    assert_eq!(back, run);
    assert!(store.insert_run(&run).unwrap_err().to_string().contains("already"));
    assert_eq!(store.resolve("last").unwrap(), id);
    assert!(store.resolve("77").is_err());
    assert!(store.resolve("latest").unwrap_err().to_string().contains("'last'"));
    let list = store.list_runs().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].samples, 2 * 3 * 1001);
}

#[test]
fn signed_series_and_extras_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let run = super::tests_support::signed_run();
    let id = store.insert_run(&run).unwrap();
    let mut back = store.load_run(id).unwrap();
    back.header.id = 0;
    assert_eq!(back.series.len(), run.series.len());
    for (a, b) in back.series.iter().zip(&run.series) {
        assert_eq!(a.key, b.key);
        assert_eq!(a.extra, b.extra, "{:?}", a.key);
        assert!(a.intervals == b.intervals, "{:?}: intervals differ", a.key);
        assert!(a.total() == b.total(), "{:?}: totals differ", a.key);
    }
    assert!(back == run, "the runs differ");
    let s = back.series.iter().find(|s| s.key.probe == "sleep").unwrap();
    assert!(s.is_signed());
    let r = s.result();
    assert_eq!(r.summary.count, 4000);
    assert_eq!(r.summary.min_ns, -5500);
    assert_eq!(r.summary.max_ns, 1499 * 11 + 1);
    assert_eq!(r.extra["timer_slack_ns"], 50_000);
    // The unsigned series stay unsigned, without extra figures.
    assert!(back.series.iter().filter(|s| s.key.probe == "wakeup").all(|s| !s.is_signed() && s.extra.is_empty()));
}

/// `run` with its intervals' histograms dropped, and only the exceedances
/// its analysis reads, as a summed read leaves them.
fn without_interval_histograms(mut run: crate::run::Run) -> crate::run::Run {
    for s in &mut run.series {
        s.keep_exceedances_from(crate::analysis::pot::exceedances_read(s, None));
        for iv in &mut s.intervals {
            iv.hdr.clear();
            if let Some(n) = &mut iv.neg {
                n.hdr.clear();
            }
        }
    }
    run
}

#[test]
fn a_summed_read_is_the_whole_read_but_for_the_intervals_histograms() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let mut ids = Vec::new();
    for run in [sample_run(), super::tests_support::signed_run()] {
        let id = store.insert_run(&run).unwrap();
        ids.push(id);
        let whole = store.load_run(id).unwrap();
        let summed = store.load_run_summed(id).unwrap();
        for (a, b) in summed.series.iter().zip(&whole.series) {
            assert!(a.total() == b.total(), "{:?}: totals differ", a.key);
            assert!(a.halves() == b.halves(), "{:?}: halves differ", a.key);
            assert!(a.intervals.iter().all(|iv| iv.hdr.is_empty()), "{:?}: histograms kept", a.key);
        }
        assert!(summed == without_interval_histograms(whole.clone()), "the runs differ");
        // Built from the halves' sums stored with the run, or folded from
        // the intervals where there are none (a run stored before them),
        // or where they no longer agree with the intervals: the same run.
        let stored = |store: &Store| -> i64 {
            store.conn.query_row("SELECT count(*) FROM series_sums", [], |r| r.get(0)).unwrap()
        };
        assert!(stored(&store) > 0, "no sums stored");
        store.conn.execute("DELETE FROM series_sums", []).unwrap();
        assert!(store.load_run_summed(id).unwrap() == summed, "folded without sums: the runs differ");
        store.store_sums(id).unwrap();
        assert!(stored(&store) > 0, "no sums stored again");
        assert!(store.load_run_summed(id).unwrap() == summed, "from stored sums: the runs differ");
        store.conn.execute("UPDATE series_sums SET count=count+1", []).unwrap();
        assert!(store.load_run_summed(id).unwrap() == summed, "from sums that disagree: the runs differ");
    }
    // A bad histogram is refused with the same message either way (where
    // the read folds the intervals: without stored sums).
    let id = ids[0];
    store.conn.execute("DELETE FROM series_sums", []).unwrap();
    store.conn.execute("UPDATE intervals SET hist=x'00010203' WHERE seq=1", []).unwrap();
    let (a, b) = (store.load_run(id).unwrap_err(), store.load_run_summed(id).unwrap_err());
    assert_eq!(format!("{a:#}"), format!("{b:#}"));
    assert!(format!("{a:#}").contains("interval 1"), "{a:#}");
}

#[test]
fn intervals_stream_in_time_order_as_stored() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    for run in [sample_run(), super::tests_support::signed_run()] {
        let id = store.insert_run(&run).unwrap();
        let whole = store.load_run(id).unwrap();
        let mut expected: Vec<(u64, usize, Interval)> = Vec::new();
        for (i, s) in whole.series.iter().enumerate() {
            expected.extend(s.intervals.iter().map(|iv| (iv.start_ns, i, iv.clone())));
        }
        expected.sort_by_key(|e| (e.0, e.1));
        let mut got = Vec::new();
        store
            .for_each_interval_in_time(id, |i, iv| {
                got.push((iv.start_ns, i, iv));
                Ok(())
            })
            .unwrap();
        assert!(got == expected, "another order or other intervals");
    }
}

#[test]
fn a_version_1_store_is_upgraded_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    drop(store_at_version(&path, 1));
    let mut store = Store::open(&path).unwrap();
    let version: String =
        store.conn.query_row("SELECT value FROM meta WHERE key='schema_version'", [], |r| r.get(0)).unwrap();
    assert_eq!(version, SCHEMA_VERSION.to_string());
    let run = super::tests_support::signed_run();
    let id = store.insert_run(&run).unwrap();
    drop(store);
    let store = Store::open(&path).unwrap();
    assert_eq!(store.load_run(id).unwrap().series.len(), run.series.len());
}

#[test]
fn checkpoints_and_dead_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let mut run = sample_run();
    run.header.status = RunStatus::Running;
    run.header.ended_unix_ns = None;
    run.header.exit_code = None;
    run.header.pid = std::process::id();
    let id;
    {
        let mut store = Store::open(&path).unwrap();
        id = store.create_run(&run.header, &run.inventory, &run.plan).unwrap();
        let sid = store.add_series(id, &run.series[0].key, "ns", "adaptive").unwrap();
        let iv = &run.series[0].intervals[0];
        store.commit_checkpoint(&[(sid, iv)], &[(sid, &run.series[0].exceedances)]).unwrap();
    }
    // This process is alive: the run stays running.
    let store = Store::open(&path).unwrap();
    assert_eq!(store.load_run(id).unwrap().header.status, RunStatus::Running);
    drop(store);
    // Pretend it belonged to a dead process.
    let conn = Connection::open(&path).unwrap();
    conn.execute("UPDATE runs SET process_id='gone' WHERE id=?1", [id]).unwrap();
    drop(conn);
    let mut store = Store::open(&path).unwrap();
    let loaded = store.load_run(id).unwrap();
    assert_eq!(loaded.header.status, RunStatus::Partial);
    assert_eq!(loaded.series[0].intervals.len(), 1);
    assert_eq!(loaded.series[0].exceedances.len(), 2);
    assert!(loaded.header.ended_unix_ns.is_some());
    assert!(loaded.header.notes.iter().any(|n| n.contains("died")));
    let learnt = crate::inventory::Warning { topic: "isolation".into(), message: "m".into(), fix: "f".into() };
    store
        .finish_run(id, RunStatus::Interrupted, Some(0), 5, &["x".into()], std::slice::from_ref(&learnt), Some(10))
        .unwrap();
    let ended = store.load_run(id).unwrap();
    assert_eq!(ended.header.peak_rss_kb, Some(10));
    // A warning learnt at the end joins those of the start.
    assert_eq!(ended.header.warnings.last(), Some(&learnt));
}

#[test]
fn an_assessment_round_trips_with_its_loads() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("m.db")).unwrap();
    let run = super::tests_support::matrix_run();
    let id = store.insert_run(&run).unwrap();
    let mut back = store.load_run(id).unwrap();
    back.header.id = 0;
    assert_eq!(back.series.len(), 4);
    assert_eq!(back.series[0].key.load.as_deref(), Some("cpu"));
    assert_eq!(back.characterisation.len(), 2);
    assert_eq!(back.cpu_score.as_ref().unwrap().score, 41_000);
    assert_eq!(back.episodes[0].load.as_deref(), Some("cpu"));
    assert!(back == run, "the runs differ");
    // An episode is dropped by its whole key, load included.
    let e = &run.episodes[0];
    let other = (None, e.probe.clone(), e.metric.clone(), e.cpu, e.sample);
    store.store_episodes(id, &[], &[other]).unwrap();
    assert_eq!(store.episodes(id).unwrap().len(), 1);
    let key = (e.load.clone(), e.probe.clone(), e.metric.clone(), e.cpu, e.sample);
    store.store_episodes(id, &[], &[key]).unwrap();
    assert!(store.episodes(id).unwrap().is_empty());
}

#[test]
fn a_version_3_store_keeps_its_rows_when_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v3.db");
    let run = super::tests_support::signed_run();
    {
        // A store as version 3 wrote it, with a run in it.
        let conn = store_at_version(&path, 3);
        let tx = conn.unchecked_transaction().unwrap();
        let id = insert_header(&tx, &run.header, &run.inventory, &run.plan, None).unwrap();
        for s in &run.series {
            tx.execute(
                "INSERT INTO series (run_id, probe, metric, cpu, unit, exceed) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![id, s.key.probe, s.key.metric, s.key.cpu, s.unit, s.exceed],
            )
            .unwrap();
            let sid = tx.last_insert_rowid();
            set_extra(&tx, sid, &s.extra).unwrap();
            for iv in &s.intervals {
                insert_interval(&tx, sid, iv).unwrap();
            }
            insert_exceedances(&tx, sid, &s.exceedances).unwrap();
        }
        let e = &run.episodes[0];
        tx.execute(
            "INSERT INTO episodes VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![id, e.probe, e.metric, e.cpu, 5, 1, 2, e.verdict, serde_json::to_string(e).unwrap()],
        )
        .unwrap();
        tx.commit().unwrap();
    }
    let store = Store::open(&path).unwrap();
    let mut back = store.load_run(1).unwrap();
    back.header.id = 0;
    assert_eq!(back.series.len(), run.series.len());
    for (a, b) in back.series.iter().zip(&run.series) {
        assert_eq!(a.key, b.key, "old series have no load");
        assert!(a.intervals == b.intervals && a.exceedances == b.exceedances, "{:?}", a.key);
    }
    assert_eq!(back.episodes.len(), 1);
    drop(store);
    // The rebuilt tables still cascade a run's deletion.
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA foreign_keys=ON; DELETE FROM runs;").unwrap();
    let left: i64 = conn
        .query_row(
            "SELECT (SELECT count(*) FROM series) + (SELECT count(*) FROM intervals) + (SELECT count(*) FROM episodes)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(left, 0);
}

#[test]
fn refuses_unusable_paths() {
    let err = Store::open(Path::new("/nonexistent-dir/x.db")).err().unwrap().to_string();
    assert!(err.contains("--db"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.db");
    std::fs::write(&bad, b"this is not a database, not at all, no sir").unwrap();
    let err = format!("{:#}", Store::open(&bad).err().unwrap());
    assert!(err.contains("--db"), "{err}");
    // Another application's database is left alone.
    let foreign = dir.path().join("other.db");
    Connection::open(&foreign).unwrap().execute_batch("CREATE TABLE mine (x INTEGER);").unwrap();
    let err = format!("{:#}", Store::open(&foreign).err().unwrap());
    assert!(err.contains("another application"), "{err}");
    let conn = Connection::open(&foreign).unwrap();
    let n: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 1, "no table was added");
}

#[test]
fn a_corrupt_file_is_called_corrupt_not_unwritable() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.db");
    let bytes: Vec<u8> = (0..8192u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(&bad, &bytes).unwrap();
    for err in [Store::open(&bad).err().unwrap(), Store::open_for_reading(&bad).err().unwrap()] {
        let err = format!("{err:#}");
        assert!(err.contains("corrupt") && err.contains("--db") && !err.contains("writable"), "{err}");
    }
    assert_eq!(std::fs::read(&bad).unwrap(), bytes, "left as it was");
    // A store this process can write is opened as by `open`.
    let good = dir.path().join("good.db");
    Store::open(&good).unwrap().insert_run(&sample_run()).unwrap();
    assert_eq!(Store::open_for_reading(&good).unwrap().list_runs().unwrap().len(), 1);
}

#[test]
fn uri_filenames_are_percent_encoded() {
    assert_eq!(sqlite_uri(Path::new("/a b/x?#%.db"), "mode=ro"), "file:/a%20b/x%3F%23%25.db?mode=ro");
    assert_eq!(sqlite_uri(Path::new("rel/p.db"), "immutable=1"), "file:rel/p.db?immutable=1");
}

#[test]
fn imports_a_running_run_as_partial_and_refuses_duplicate_series() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let mut run = sample_run();
    run.header.status = RunStatus::Running;
    let id = store.insert_run(&run).unwrap();
    assert_eq!(store.load_run(id).unwrap().header.status, RunStatus::Partial);
    // A complete run without a sample is not complete here.
    let mut empty = sample_run();
    empty.header.uuid = "empty".into();
    empty.series.iter_mut().for_each(|s| s.intervals.clear());
    let id = store.insert_run(&empty).unwrap();
    let back = store.load_run(id).unwrap();
    assert_eq!(back.header.status, RunStatus::Partial);
    assert!(back.header.notes.iter().any(|n| n.contains("without a single sample")), "{:?}", back.header.notes);
    empty.series.clear();
    empty.header.uuid = "no series".into();
    assert_eq!(imported_header(&empty).status, RunStatus::Partial);
    empty.header.kind = "load".into();
    assert_eq!(imported_header(&empty).status, RunStatus::Complete, "a load run has no samples");
    let mut twice = sample_run();
    twice.header.uuid = "other".into();
    twice.series[1] = twice.series[0].clone();
    assert!(store.insert_run(&twice).unwrap_err().to_string().contains("twice"));
}

#[test]
fn episodes_are_kept_and_dropped_and_old_stores_migrate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.db");
    {
        // A schema-1 store, as the first release wrote it.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')", []).unwrap();
        conn.execute("INSERT INTO meta (key, value) VALUES ('application', 'rtscope')", []).unwrap();
    }
    let mut store = Store::open(&path).unwrap();
    let mut run = sample_run();
    run.episodes.clear();
    run.trace = None;
    let id = store.insert_run(&run).unwrap();
    let a = crate::episode::tests::sample_episode();
    let mut b = a.clone();
    b.sample = 9000;
    b.latency_ns = 2_000_000;
    store.store_episodes(id, &[a.clone(), b.clone()], &[]).unwrap();
    assert_eq!(store.episodes(id).unwrap(), vec![b.clone(), a.clone()], "worst first");
    let key = (None, a.probe.clone(), a.metric.clone(), a.cpu, a.sample);
    store.store_episodes(id, &[], &[key]).unwrap();
    assert_eq!(store.load_run(id).unwrap().episodes, vec![b]);
    store.put_run_data(id, "trace", &serde_json::json!({"instance": "x", "clock": "mono"})).unwrap();
    assert_eq!(store.load_run(id).unwrap().trace.unwrap().instance, "x");
    // The timeline: none, then each cell's added to the run's.
    use crate::episode::timeline::{Item, Timeline, Track};
    assert_eq!(store.timeline(id).unwrap(), None);
    let cell = |start_ns, name: &str| {
        let mut t = Timeline::new(10);
        let name = t.name(name);
        t.push(Item { cpu: 0, track: Track::Task, start_ns, dur_ns: 5, name, pid: 3, value_ns: 0 });
        t.finish()
    };
    store.add_timeline(id, cell(1_000, "a")).unwrap();
    store.add_timeline(id, cell(2_000_000_000, "b")).unwrap();
    let t = store.timeline(id).unwrap().unwrap();
    assert_eq!(t.items().map(|i| t.name_of(i)).collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(t.window_ns, (1_000, 2_000_000_005));
    // A third cell killed while folding: its settled parts are read with
    // the others, and let go when a cell ends.
    let mut c = Timeline::new(1_000);
    let n = c.name("c");
    let span = |k: u64| 3_000_000_000 + k * Timeline::SPAN_NS;
    for k in 0..25 {
        c.push(Item { cpu: 1, track: Track::Task, start_ns: span(k), dur_ns: 5, name: n, pid: 4, value_ns: 0 });
        if let Some(p) = c.part() {
            store.add_timeline_part(id, &p).unwrap();
        }
    }
    let t = store.timeline(id).unwrap().unwrap();
    let got: Vec<&str> = t.items().map(|i| t.name_of(i)).collect();
    // Parts at the 10th and 20th spans: the spans a second older, 0..=10.
    assert_eq!(got, [&["a", "b"][..], &["c"; 11][..]].concat());
    assert_eq!(t.window_ns.1, span(20) + 5, "the window as of the last part");
    store.add_timeline(id, c.finish()).unwrap();
    let t = store.timeline(id).unwrap().unwrap();
    assert_eq!(t.items().count(), 27, "the parts gone, the whole cell stored once");
}

/// Opens the store at `path` from `n` threads at once (as `n` processes
/// would): the first error, if one failed.
fn open_at_once(path: &Path, n: usize) -> Result<(), String> {
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(n));
    let opened: Vec<_> = (0..n)
        .map(|_| {
            let (path, barrier) = (path.to_path_buf(), std::sync::Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                Store::open(&path).map(|_| ()).map_err(|e| format!("{e:#}"))
            })
        })
        .collect();
    let each: Vec<Result<(), String>> = opened.into_iter().map(|t| t.join().unwrap()).collect();
    each.into_iter().collect()
}

/// Two processes opening a new store at once (a run starting while a
/// `show` polls for it) both get it: one creates the schema, the other
/// waits for it and finds it made ("table meta already exists" before).
#[test]
fn a_new_store_opened_twice_at_once_is_created_once() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("race{round}.db"));
        open_at_once(&path, 4).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(Store::open(&path).unwrap().list_runs().unwrap().len(), 0);
    }
}

/// The monitor's runs end together, each from its own connection to one
/// store, while its retention writes too: a run's end reads its notes
/// before it writes them, and that must wait for the others' commits, not
/// fail with "database is locked".
#[test]
fn runs_ended_at_once_from_several_connections_all_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let run = sample_run();
    let ids: Vec<i64> = {
        let mut store = Store::open(&path).unwrap();
        (0..4)
            .map(|k| {
                let header = RunHeader { uuid: format!("{}-{k}", run.header.uuid), ..run.header.clone() };
                store.create_run(&header, &run.inventory, &run.plan).unwrap()
            })
            .collect()
    };
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(ids.len()));
    let ended: Vec<_> = ids
        .iter()
        .map(|&id| {
            let (path, barrier) = (path.clone(), std::sync::Arc::clone(&barrier));
            std::thread::spawn(move || {
                let mut store = Store::open(&path).unwrap();
                barrier.wait();
                for k in 0..100 {
                    let note = format!("note {k}");
                    store
                        .finish_run(id, RunStatus::Interrupted, Some(0), k, &[note], &[], None)
                        .map_err(|e| format!("run {id}, end {k}: {e:#}"))?;
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for t in ended {
        t.join().unwrap().unwrap_or_else(|e| panic!("{e}"));
    }
    let store = Store::open(&path).unwrap();
    for id in ids {
        let notes = store.load_run(id).unwrap().header.notes;
        assert_eq!(notes.iter().filter(|n| n.starts_with("note ")).count(), 100, "run {id}: {notes:?}");
    }
}

/// A dead run found by several processes opening the store at once is
/// marked once: one note that its process died, not one per opener.
#[test]
fn a_dead_run_found_by_two_openers_at_once_is_noted_once() {
    for round in 0..10 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dead.db");
        let mut run = sample_run();
        run.header.status = RunStatus::Running;
        run.header.pid = std::process::id();
        let id = Store::open(&path).unwrap().create_run(&run.header, &run.inventory, &run.plan).unwrap();
        let conn = Connection::open(&path).unwrap();
        conn.execute("UPDATE runs SET process_id='gone' WHERE id=?1", [id]).unwrap();
        drop(conn);
        open_at_once(&path, 4).unwrap_or_else(|e| panic!("round {round}: {e}"));
        let notes = Store::open(&path).unwrap().load_run(id).unwrap().header.notes;
        assert_eq!(notes.iter().filter(|n| n.contains("died")).count(), 1, "round {round}: {notes:?}");
    }
}

/// A store path SQLite must not touch is refused before it does, naming
/// what it is; SQLite's codes have words.
#[test]
fn store_paths_that_are_not_files_are_refused_before_sqlite() {
    let e = |p: &std::path::Path| format!("{:#}", Store::open(p).err().unwrap());
    assert!(e(std::path::Path::new("/dev/null")).contains("is a character device, not a file"));
    let dir = tempfile::tempdir().unwrap();
    assert!(e(dir.path()).contains("is a directory"));
    let long = dir.path().join("a".repeat(300));
    let m = e(&long);
    assert!(m.contains("too long") && m.len() < 400, "{m}");
    let db = dir.path().join("s.db");
    std::fs::create_dir(dir.path().join("s.db-wal")).unwrap();
    assert!(e(&db).contains("its -wal file is"), "{}", e(&db));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "nothing made beside it");
    assert!(super::sqlite_words(4874).contains("-shm"));
    assert!(super::sqlite_words(1034).contains("sync"));
    assert!(super::sqlite_words(13).contains("full"));
}
