//! Bounded retention, for a store that a monitor (`rtscope monitor`)
//! writes without end: checkpoint intervals older than a cutoff are merged
//! into one summary interval per span (e.g. an hour), whose histogram,
//! count, maximum, sum, missed periods and lost exceedances are those of
//! the intervals it replaces, so that no sample is lost, only the time
//! resolution. The raw exceedances of a summarised span are thinned to its
//! worst [`KEEP_EXCEEDANCES`]; the others stay counted in its histogram.

use super::Store;
use super::chunks::drop_merged_chunks;
use super::read::load_intervals;
use super::write::insert_interval;
use crate::run::Interval;
use anyhow::{Result, anyhow};
use rusqlite::params;

/// Raw exceedances kept per summarised span: its worst.
pub const KEEP_EXCEEDANCES: i64 = 16;

/// Spans summarised in one transaction (an hour's span of 10 s intervals
/// of a 2-CPU wake-up monitor rewrites about 1 MB).
const SPANS_A_TRANSACTION: usize = 16;

/// What one pass of the retention did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summarised {
    /// Intervals merged away (a span of n intervals counts n - 1).
    pub intervals: u64,
    /// Raw exceedances dropped from summarised spans.
    pub exceedances: u64,
}

impl Store {
    /// Bytes in the store's used pages (its free pages left out: SQLite
    /// reuses them before it grows the file).
    pub fn used_bytes(&self) -> Result<u64> {
        let q = |p: &str| self.conn.query_row(&format!("PRAGMA {p}"), [], |r| r.get::<_, i64>(0));
        Ok(((q("page_count")? - q("freelist_count")?) * q("page_size")?).max(0) as u64)
    }

    /// Summarises the intervals of the runs of `kind` that ended before
    /// `cutoff_unix_ns`: consecutive ones that start in the same span of
    /// `span_ns` (counted from their run's start) become one interval, and
    /// that span's raw exceedances its worst [`KEEP_EXCEEDANCES`]. A span
    /// already summarised takes what has expired since into its summary.
    pub fn summarise(&mut self, kind: &str, cutoff_unix_ns: u64, span_ns: u64) -> Result<Summarised> {
        if span_ns == 0 {
            return Err(anyhow!("the retention's summary span must be positive"));
        }
        let series: Vec<(i64, i64, i64, i64)> = {
            let mut st = self.conn.prepare(
                "SELECT s.id, r.id, r.started_unix_ns, r.start_mono_ns FROM series s JOIN runs r ON r.id = s.run_id
                 WHERE r.kind = ?1 ORDER BY s.id",
            )?;
            st.query_map([kind], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?.collect::<Result<_, _>>()?
        };
        let mut done = Summarised::default();
        for (sid, run_id, start_unix, start_mono) in series {
            let cutoff_mono = (cutoff_unix_ns as i64).saturating_sub(start_unix).saturating_add(start_mono);
            if cutoff_mono <= start_mono {
                continue;
            }
            // The seqs of the expired intervals of each span, where a span
            // has several; read without their histograms, so that a pass
            // over months of summaries reads a few numbers of each.
            let spans = |conn: &rusqlite::Connection| -> Result<Vec<(u32, u32)>> {
                let mut st = conn.prepare_cached(
                    "SELECT seq, start_ns FROM intervals WHERE series_id=?1 AND end_ns<=?2 ORDER BY seq",
                )?;
                let rows = st.query_map([sid, cutoff_mono], |r| Ok((r.get::<_, u32>(0)?, r.get::<_, i64>(1)?)))?;
                let mut groups: Vec<(u64, u32, u32)> = Vec::new();
                for row in rows {
                    let (seq, start) = row?;
                    let span = (start - start_mono).max(0) as u64 / span_ns;
                    match groups.last_mut() {
                        Some((s, _, last)) if *s == span => *last = seq,
                        _ => groups.push((span, seq, seq)),
                    }
                }
                Ok(groups.into_iter().filter(|&(_, a, b)| a != b).map(|(_, a, b)| (a, b)).collect())
            };
            // A look without the write lock first: most passes find nothing
            // to merge, and the monitor's writers need not wait for them.
            if spans(&self.conn)?.is_empty() {
                continue;
            }
            // A few spans a transaction: a pass that summarises weeks at
            // once (the store over --max-store) writes them in steps, each
            // checkpointed, so that the write-ahead log stays small.
            loop {
                let tx = self.write()?;
                let todo = spans(&tx)?;
                for &(from, to) in todo.iter().take(SPANS_A_TRANSACTION) {
                    let group = load_intervals(&tx, run_id, sid, from..=to)?;
                    let (first, last) = (&group[0], &group[group.len() - 1]);
                    let mut tally = first.tally().map_err(|e| anyhow!("run {run_id}: {e}"))?;
                    let (mut missed, mut lost) = (first.overruns, first.lost_exceedances);
                    for iv in &group[1..] {
                        tally.merge(&iv.tally().map_err(|e| anyhow!("run {run_id}: {e}"))?);
                        missed += iv.overruns;
                        lost += iv.lost_exceedances;
                    }
                    let merged = Interval::new(first.seq, first.start_ns, last.end_ns, &tally, missed, lost);
                    tx.execute(
                        "DELETE FROM intervals WHERE series_id=?1 AND seq>=?2 AND seq<=?3",
                        params![sid, first.seq, last.seq],
                    )?;
                    insert_interval(&tx, sid, &merged)?;
                    drop_merged_chunks(&tx, sid, first.seq, last.seq)?;
                    let thinned = tx.execute(
                        "DELETE FROM exceedances WHERE series_id=?1 AND t_ns>=?2 AND t_ns<=?3 AND rowid NOT IN
                           (SELECT rowid FROM exceedances WHERE series_id=?1 AND t_ns>=?2 AND t_ns<=?3
                            ORDER BY value_ns DESC LIMIT ?4)",
                        params![sid, first.start_ns as i64, last.end_ns as i64, KEEP_EXCEEDANCES],
                    )?;
                    done.intervals += group.len() as u64 - 1;
                    done.exceedances += thinned as u64;
                }
                tx.commit()?;
                if todo.len() <= SPANS_A_TRANSACTION {
                    break;
                }
            }
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::Tally;
    use crate::run::{Exceedance, RunHeader, SeriesKey};

    fn header(kind: &str, started_unix_ns: u64, start_mono_ns: u64) -> RunHeader {
        RunHeader::new(kind, format!("u-{kind}-{started_unix_ns}"), "h", started_unix_ns as i64, start_mono_ns)
    }

    /// Sixty 1 s intervals of 100 samples each, an exceedance per sample
    /// above 900 ns (about 20 an interval); summarised up to 45 s in 10 s
    /// spans.
    #[test]
    fn old_intervals_become_summaries_that_keep_every_sample() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("m.db")).unwrap();
        let s = 1_000_000_000u64;
        let (unix0, mono0) = (1_000 * s, 5 * s);
        let run =
            store.create_run(&header("monitor", unix0, mono0), &Default::default(), &serde_json::Value::Null).unwrap();
        let other =
            store.create_run(&header("wakeup", unix0, mono0), &Default::default(), &serde_json::Value::Null).unwrap();
        let sid = store.add_series(run, &SeriesKey::new("wakeup", "latency", 0), "ns", "x").unwrap();
        let oid = store.add_series(other, &SeriesKey::new("wakeup", "latency", 0), "ns", "x").unwrap();
        for k in 0..60u64 {
            let mut t = Tally::new();
            let mut exc = Vec::new();
            for v in 0..100u64 {
                let value = 100 + v * 10 + k;
                t.record(value);
                if value > 900 {
                    exc.push(Exceedance { t_ns: mono0 + k * s + v * 1000 + 1, value_ns: value });
                }
            }
            let iv = Interval::new(k as u32, mono0 + k * s, mono0 + (k + 1) * s, &t, k % 2, 1);
            store.commit_checkpoint(&[(sid, &iv), (oid, &iv)], &[(sid, &exc), (oid, &exc)]).unwrap();
        }
        let before = store.load_run(run).unwrap();
        let done = store.summarise("monitor", unix0 + 45 * s, 10 * s).unwrap();
        let after = store.load_run(run).unwrap();
        let (b, a) = (&before.series[0], &after.series[0]);
        // Spans 0..3 (40 intervals) and span 4's first five (40..45).
        assert_eq!(a.intervals.len(), 4 + 1 + 15);
        assert_eq!(done.intervals, 60 - 20);
        assert_eq!(a.total().stats, b.total().stats);
        assert_eq!(a.total().hist, b.total().hist);
        assert_eq!(a.overruns(), b.overruns());
        assert_eq!(a.intervals.iter().map(|i| i.lost_exceedances).sum::<u64>(), 60);
        assert_eq!(a.intervals[0].end_ns, mono0 + 10 * s);
        // 16 kept per summarised span: 0-10 s, ..., 30-40 s, 40-45 s.
        let spans = [(0, 10), (10, 20), (20, 30), (30, 40), (40, 45)];
        let thinned: usize = spans
            .iter()
            .map(|&(from, to)| {
                let n = b.exceedances.iter().filter(|e| e.t_ns >= mono0 + from * s && e.t_ns <= mono0 + to * s).count();
                n.saturating_sub(16)
            })
            .sum();
        assert_eq!(done.exceedances, thinned as u64);
        assert_eq!(a.exceedances.len(), b.exceedances.len() - done.exceedances as usize);
        assert_eq!(a.result().summary.max_ns, b.result().summary.max_ns);
        // Another kind of run is left alone; a second pass changes nothing.
        assert_eq!(store.load_run(other).unwrap().series[0].intervals.len(), 60);
        assert_eq!(store.summarise("monitor", unix0 + 45 * s, 10 * s).unwrap(), Summarised::default());
        // Later, the rest of span 4 joins its summary.
        store.summarise("monitor", unix0 + 50 * s, 10 * s).unwrap();
        assert_eq!(store.load_run(run).unwrap().series[0].intervals.len(), 5 + 10);
        assert!(store.used_bytes().unwrap() > 0);
    }

    /// More spans than one transaction takes: every one is summarised, in
    /// steps, and nothing is lost.
    #[test]
    fn many_spans_are_summarised_a_few_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("m.db")).unwrap();
        let s = 1_000_000_000u64;
        let run = store.create_run(&header("monitor", 0, s), &Default::default(), &serde_json::Value::Null).unwrap();
        let sid = store.add_series(run, &SeriesKey::new("wakeup", "latency", 0), "ns", "x").unwrap();
        let spans = 5 * SPANS_A_TRANSACTION as u64 + 3;
        for k in 0..2 * spans {
            let mut t = Tally::new();
            t.record(1_000 + k);
            let iv = Interval::new(k as u32, s + k * s, s + (k + 1) * s, &t, 1, 0);
            store.commit_checkpoint(&[(sid, &iv)], &[]).unwrap();
        }
        let before = store.load_run(run).unwrap();
        let done = store.summarise("monitor", 2 * spans * s, 2 * s).unwrap();
        assert_eq!(done.intervals, spans);
        let after = store.load_run(run).unwrap();
        let (b, a) = (&before.series[0], &after.series[0]);
        assert_eq!(a.intervals.len() as u64, spans);
        assert_eq!(a.total().hist, b.total().hist);
        assert_eq!(a.overruns(), 2 * spans);
    }
}
