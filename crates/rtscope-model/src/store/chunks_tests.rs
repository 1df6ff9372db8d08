//! Tests of chunks: a read from them is the read that folds every
//! interval, through the retention's merges, for signed series, with a
//! partial last span, on an older store, and with a chunk gone stale.

use super::super::Store;
use super::super::schema::MIGRATIONS;
use super::super::tests_support::store_at_version;
use crate::hist::Tally;
use crate::run::{Exceedance, Interval, Run, RunHeader, SeriesKey};

const S: u64 = 1_000_000_000;
/// The runs' CLOCK_MONOTONIC and CLOCK_REALTIME at their start.
const MONO0: u64 = 5 * S;
const UNIX0: u64 = 1_000 * S;
/// The chunks' (and summaries') span: ten 1 s intervals.
const SPAN: u64 = 10 * S;

/// A monitor's run in `store`: 95 intervals of 1 s (nine whole 10 s spans
/// and half of one) of an unsigned and a signed series, exceedances above
/// 900 ns. Returns its id.
fn monitor_run(store: &mut Store) -> i64 {
    let header = RunHeader::new("monitor", format!("u-{}", std::process::id()), "h", UNIX0 as i64, MONO0);
    let run = store.create_run(&header, &Default::default(), &serde_json::Value::Null).unwrap();
    let sid = store.add_series(run, &SeriesKey::new("wakeup", "latency", 0), "ns", "adaptive").unwrap();
    let signed = store.add_series(run, &SeriesKey::new("sleep", "nanosleep@1ms", 1), "ns", "adaptive").unwrap();
    for k in 0..95u64 {
        let (mut t, mut n) = (Tally::new(), Tally::new_signed());
        let mut exc = Vec::new();
        for v in 0..100u64 {
            let value = 100 + v * 10 + k * 3;
            t.record(value);
            n.record_signed(value as i64 - 600);
            if value > 900 {
                exc.push(Exceedance { t_ns: MONO0 + k * S + v * 1000 + 1, value_ns: value });
            }
        }
        let (a, b) = (MONO0 + k * S, MONO0 + (k + 1) * S);
        let (iv, nv) = (Interval::new(k as u32, a, b, &t, k % 3, 0), Interval::new(k as u32, a, b, &n, 0, 1));
        store.commit_checkpoint(&[(sid, &iv), (signed, &nv)], &[(sid, &exc)]).unwrap();
    }
    run
}

fn chunks(store: &Store) -> Vec<(i64, u32, u32)> {
    let mut st = store.conn.prepare("SELECT series_id, seq, last_seq FROM series_chunks ORDER BY 1, 2").unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().collect::<Result<_, _>>().unwrap()
}

/// The run read as a summed read that folds every interval reads it (the
/// chunks set aside, then put back).
fn folded(store: &Store, id: i64) -> Run {
    let c = &store.conn;
    c.execute_batch("CREATE TEMP TABLE kept AS SELECT * FROM series_chunks; DELETE FROM series_chunks;").unwrap();
    let run = store.load_run_summed(id).unwrap();
    c.execute_batch("INSERT INTO series_chunks SELECT * FROM kept; DROP TABLE kept;").unwrap();
    run
}

/// The summed read, from the chunks, is the folded one; and the read that
/// keeps every interval's histogram agrees with both.
fn reads_agree(store: &Store, id: i64) {
    let (summed, fold) = (store.load_run_summed(id).unwrap(), folded(store, id));
    assert!(summed == fold, "the read from chunks differs from the folded read");
    let whole = store.load_run(id).unwrap();
    for (a, b) in summed.series.iter().zip(&whole.series) {
        assert!(a.total() == b.total(), "{:?}: totals differ", a.key);
        assert!(a.halves() == b.halves(), "{:?}: halves differ", a.key);
    }
}

#[test]
fn chunks_stand_for_complete_spans_and_read_as_the_fold() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("m.db")).unwrap();
    let id = monitor_run(&mut store);
    // Nothing of another kind of run; the last, partial span waits.
    assert_eq!(store.store_chunks("wakeup", SPAN).unwrap(), 0);
    assert_eq!(store.store_chunks("monitor", SPAN).unwrap(), 2 * 9);
    assert_eq!(store.store_chunks("monitor", SPAN).unwrap(), 0, "a second pass writes none");
    let sid = chunks(&store)[0].0;
    let mine: Vec<(u32, u32)> = chunks(&store).iter().filter(|c| c.0 == sid).map(|c| (c.1, c.2)).collect();
    assert_eq!(mine, (0..9).map(|k| (10 * k, 10 * k + 9)).collect::<Vec<_>>());
    reads_agree(&store, id);
    // The read takes the chunks, not the intervals' histograms, where a
    // chunk covers them: a damaged histogram under one is not read...
    store.conn.execute("UPDATE intervals SET hist=x'00010203' WHERE seq=12", []).unwrap();
    store.load_run_summed(id).unwrap();
    assert!(store.load_run(id).is_err());
    // ...and is where no chunk covers it: the half-span at the end, and
    // the span the halves split (40..50: the middle of 0..95 s is 47.5 s).
    for seq in [93, 45] {
        let dir = tempfile::tempdir().unwrap();
        let mut other = Store::open(&dir.path().join("m.db")).unwrap();
        let id = monitor_run(&mut other);
        other.store_chunks("monitor", SPAN).unwrap();
        other.conn.execute("UPDATE intervals SET hist=x'00010203' WHERE seq=?1", [seq]).unwrap();
        let e = other.load_run_summed(id).unwrap_err();
        assert!(format!("{e:#}").contains(&format!("interval {seq}")), "{e:#}");
    }
    // Another span is new once an interval of the next one is stored.
    let sids: Vec<i64> = chunks(&store).iter().map(|c| c.0).collect();
    let mut t = Tally::new();
    t.record(1);
    for k in 95..101u64 {
        let iv = Interval::new(k as u32, MONO0 + k * S, MONO0 + (k + 1) * S, &t, 0, 0);
        store.commit_checkpoint(&[(sids[0], &iv)], &[]).unwrap();
    }
    assert_eq!(store.store_chunks("monitor", SPAN).unwrap(), 1);
}

#[test]
fn the_retention_keeps_the_chunks_its_merges_leave_true_and_drops_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("m.db")).unwrap();
    let id = monitor_run(&mut store);
    store.store_chunks("monitor", SPAN).unwrap();
    // Up to 45 s: spans 0..4 merged whole (their chunks dropped: one
    // interval each now) and 40..45 merged within its chunk (kept).
    store.summarise("monitor", UNIX0 + 45 * S, SPAN).unwrap();
    let firsts: Vec<u32> = chunks(&store).iter().map(|c| c.1).collect();
    assert_eq!(firsts, [40, 50, 60, 70, 80].repeat(2));
    reads_agree(&store, id);
    // Later, the rest of span 4 joins its summary: that chunk goes.
    store.summarise("monitor", UNIX0 + 52 * S, SPAN).unwrap();
    let firsts: Vec<u32> = chunks(&store).iter().map(|c| c.1).collect();
    assert_eq!(firsts, [50, 60, 70, 80].repeat(2));
    reads_agree(&store, id);
    // Summaries of a longer span (as over --max-store, a day) merge
    // across chunks: those they cut go.
    store.summarise("monitor", UNIX0 + 75 * S, 25 * SPAN).unwrap();
    let firsts: Vec<u32> = chunks(&store).iter().map(|c| c.1).collect();
    assert_eq!(firsts, [80].repeat(2));
    reads_agree(&store, id);
    // A chunk that its intervals no longer agree with is not read.
    store.conn.execute("UPDATE series_chunks SET max_ns=max_ns+1", []).unwrap();
    reads_agree(&store, id);
    store.conn.execute("UPDATE series_chunks SET max_ns=max_ns-1, end_ns=end_ns+1", []).unwrap();
    reads_agree(&store, id);
    store.conn.execute("UPDATE series_chunks SET end_ns=end_ns-1", []).unwrap();
    // One whose intervals were merged without the retention (its bounds
    // no longer an interval's) is not read either.
    store.conn.execute("DELETE FROM intervals WHERE seq=80", []).unwrap();
    store.conn.execute("UPDATE intervals SET seq=80, start_ns=start_ns-?1 WHERE seq=81", [S as i64]).unwrap();
    let summed = store.load_run_summed(id).unwrap();
    assert!(summed == folded(&store, id), "a stale chunk was read");
}

#[test]
fn a_store_before_chunks_reads_the_same_and_gets_them_at_the_first_pass() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v5.db");
    drop(store_at_version(&path, 5));
    assert_eq!(MIGRATIONS.last().unwrap().0, 6);
    let mut store = Store::open(&path).unwrap();
    // Opened at schema 6 again: the table is back, empty.
    assert!(chunks(&store).is_empty());
    let id = monitor_run(&mut store);
    let before = store.load_run_summed(id).unwrap();
    assert_eq!(store.store_chunks("monitor", SPAN).unwrap(), 18);
    assert!(store.load_run_summed(id).unwrap() == before);
    reads_agree(&store, id);
}
