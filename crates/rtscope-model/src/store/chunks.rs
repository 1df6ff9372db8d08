//! Chunks: the sums of contiguous runs of a series' intervals (one per
//! summary span of raw intervals), stored as a monitor goes
//! ([`Store::store_chunks`], at its retention pass), so that a read of a
//! run that never finishes builds each half of a series from a few chunks
//! and inflates only the intervals no chunk covers, instead of every
//! interval's histogram ([`Store::series_of_chunks`]). A cache: a chunk is
//! used only while the intervals it stands for still agree with it, and the
//! retention deletes those whose intervals it merges past their bounds.

use super::read::{SeriesRow, interval_of, load_intervals};
use super::write::insert_chunk;
use super::{Store, u};
use crate::run::{Interval, IntervalSum, Series, fold_split, merged_stats};
use anyhow::{Result, anyhow};
use rusqlite::{Connection, OptionalExtension, params};

/// The chunks of series `?1` by seq, as the intervals that stand for them
/// without their histograms (`hist` empty, and `neg_hist` where there is
/// one: read one at a time with [`CHUNK`] when used), and the seq of
/// each one's last interval.
const CHUNKS: &str =
    "SELECT seq, start_ns, end_ns, count, min_ns, max_ns, sum_ns, overflows, overruns, lost_exceedances, x'',
            neg_count, neg_min_ns, neg_max_ns, neg_sum_ns, neg_overflows,
            CASE WHEN neg_hist IS NULL THEN NULL ELSE x'' END, last_seq
     FROM series_chunks WHERE series_id=?1 ORDER BY seq";

/// The chunk of series `?1` whose first seq is `?2`, whole.
const CHUNK: &str =
    "SELECT seq, start_ns, end_ns, count, min_ns, max_ns, sum_ns, overflows, overruns, lost_exceedances, hist,
            neg_count, neg_min_ns, neg_max_ns, neg_sum_ns, neg_overflows, neg_hist
     FROM series_chunks WHERE series_id=?1 AND seq=?2";

/// Chunks written in one transaction (an hour of 10 s intervals of one
/// series is 360 histograms to inflate).
const CHUNKS_A_TRANSACTION: usize = 16;

impl Store {
    /// Stores a chunk for each complete span of `span_ns` (counted from
    /// its run's start, as [`Store::summarise`] counts them) of two
    /// intervals or more of the series of the runs of `kind`, after the
    /// last chunk each series has: what a monitor's retention pass writes,
    /// an hour's chunk once the hour is over, and all of them at its first
    /// pass on a store written before chunks were. A span is complete when
    /// an interval of a later span is stored. Returns the chunks written.
    pub fn store_chunks(&mut self, kind: &str, span_ns: u64) -> Result<u64> {
        if span_ns == 0 {
            return Err(anyhow!("the chunks' span must be positive"));
        }
        let series: Vec<(i64, i64, i64)> = {
            let mut st = self.conn.prepare(
                "SELECT s.id, r.id, r.start_mono_ns FROM series s JOIN runs r ON r.id = s.run_id
                 WHERE r.kind = ?1 ORDER BY s.id",
            )?;
            st.query_map([kind], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?
        };
        let mut written = 0;
        for (sid, run_id, start_mono) in series {
            // Looked for without the write lock: most passes find none.
            let todo = spans_to_chunk(&self.conn, sid, start_mono, span_ns)?;
            for group in todo.chunks(CHUNKS_A_TRANSACTION) {
                let tx = self.write()?;
                for &(from, to) in group {
                    let mut sum = IntervalSum::default();
                    for iv in load_intervals(&tx, run_id, sid, from..=to)? {
                        sum.add(&iv).map_err(|e| anyhow!("run {run_id}: {e}"))?;
                    }
                    let Some(chunk) = sum.interval() else { continue };
                    insert_chunk(&tx, sid, &chunk, to)?;
                    written += 1;
                }
                tx.commit()?;
            }
        }
        Ok(written)
    }

    /// The series of `sid` (of run `id`) from its intervals' statistics,
    /// its chunks that still agree with the intervals they stand for and
    /// lie wholly in one half of it, and the histograms of the intervals
    /// no such chunk covers: what [`crate::run::SeriesFold`] gives. None
    /// when it has no chunk, or its halves cannot be told (fold it then).
    pub(super) fn series_of_chunks(&self, id: i64, row: &SeriesRow) -> Result<Option<Series>> {
        let (sid, key, unit, exceed, _) = row;
        let sid = *sid;
        let chunks = {
            let mut st = self.conn.prepare_cached(CHUNKS)?;
            let mut rows = st.query([sid])?;
            let mut chunks = Vec::new();
            while let Some(r) = rows.next()? {
                chunks.push((interval_of(id, r)?, r.get::<_, u32>(17)?));
            }
            chunks
        };
        if chunks.is_empty() {
            return Ok(None);
        }
        let intervals = self.interval_stats(id, sid)?;
        let Some(split) = fold_split(&intervals) else { return Ok(None) };
        let covered = covering(&intervals, split, &chunks);
        let mut halves = [IntervalSum::default(), IntervalSum::default()];
        let (mut i, mut next_chunk) = (0, covered.iter().peekable());
        while i < intervals.len() {
            let half = usize::from(i >= split);
            if let Some(&&(from, to, c)) = next_chunk.peek()
                && from == i
            {
                let chunk = self
                    .conn
                    .prepare_cached(CHUNK)?
                    .query_row(params![sid, chunks[c].0.seq], |r| Ok(interval_of(id, r).map_err(|e| e.to_string())))?;
                let added = chunk.and_then(|chunk| halves[half].add(&chunk));
                added.map_err(|e| anyhow!("run {id}, {}: chunk {e}", key.describe()))?;
                next_chunk.next();
                i = to + 1;
                continue;
            }
            // The intervals up to the next chunk or the end of this half.
            let end = next_chunk.peek().map_or(intervals.len(), |&&(from, ..)| from);
            let end = if half == 0 { end.min(split) } else { end };
            let (a, b) = (intervals[i].seq, intervals[end - 1].seq);
            for iv in load_intervals(&self.conn, id, sid, a..=b)? {
                halves[half].add(&iv).map_err(|e| anyhow!("run {id}, {}: {e}", key.describe()))?;
            }
            i = end;
        }
        let (Some(first), Some(second)) = (halves[0].interval(), halves[1].interval()) else { return Ok(None) };
        let halves = [
            Interval { overruns: 0, lost_exceedances: 0, ..first },
            Interval { overruns: 0, lost_exceedances: 0, ..second },
        ];
        let exceedances = self.exceedances(sid)?;
        Ok(Series::from_halves(key.clone(), unit.clone(), exceed.clone(), intervals, exceedances, halves))
    }
}

/// The chunks (index in `chunks`) that still stand for their intervals, as
/// ranges `from..=to` of `intervals`, in order: each starts at an interval
/// of its seq and start, ends at the last interval of a seq up to its last
/// seq with its end, holds the statistics of those intervals merged, lies
/// wholly in one half (`split` the second's first interval) and overlaps
/// no chunk before it.
fn covering(intervals: &[Interval], split: usize, chunks: &[(Interval, u32)]) -> Vec<(usize, usize, usize)> {
    let mut out: Vec<(usize, usize, usize)> = Vec::new();
    for (c, (chunk, last_seq)) in chunks.iter().enumerate() {
        let Ok(from) = intervals.binary_search_by_key(&chunk.seq, |iv| iv.seq) else { continue };
        let to = intervals.partition_point(|iv| iv.seq <= *last_seq) - 1;
        let ivs = &intervals[from..=to];
        let agrees = ivs[0].start_ns == chunk.start_ns
            && ivs[ivs.len() - 1].end_ns == chunk.end_ns
            && (from >= split || to < split)
            && out.last().is_none_or(|&(_, before, _)| before < from)
            && merged_stats(ivs) == (chunk.stats, chunk.neg.as_ref().map(|n| n.stats));
        if agrees {
            out.push((from, to, c));
        }
    }
    out
}

/// The seqs of the spans of series `sid` to chunk: complete spans after its
/// last chunk with two intervals or more.
fn spans_to_chunk(conn: &Connection, sid: i64, start_mono: i64, span_ns: u64) -> Result<Vec<(u32, u32)>> {
    let after: Option<i64> =
        conn.query_row("SELECT max(last_seq) FROM series_chunks WHERE series_id=?1", [sid], |r| r.get(0))?;
    let after = after.unwrap_or(-1);
    let span = |start: i64| u((start - start_mono).max(0)) / span_ns;
    // Two look-ups by key where the intervals after the last chunk are all
    // in one span (most passes: a minute of the hour in progress).
    let edge = |order: &str| -> Result<Option<i64>> {
        let mut st = conn.prepare_cached(&format!(
            "SELECT start_ns FROM intervals WHERE series_id=?1 AND seq>?2 ORDER BY seq {order} LIMIT 1"
        ))?;
        Ok(st.query_row(params![sid, after], |r| r.get(0)).optional()?)
    };
    match (edge("ASC")?, edge("DESC")?) {
        (Some(first), Some(last)) if span(first) != span(last) => {}
        _ => return Ok(Vec::new()),
    }
    let mut st =
        conn.prepare_cached("SELECT seq, start_ns FROM intervals WHERE series_id=?1 AND seq>?2 ORDER BY seq")?;
    let rows = st.query_map(params![sid, after], |r| Ok((r.get::<_, u32>(0)?, r.get::<_, i64>(1)?)))?;
    let mut groups: Vec<(u64, u32, u32)> = Vec::new();
    for row in rows {
        let (seq, start) = row?;
        let span = span(start);
        match groups.last_mut() {
            Some((s, _, last)) if *s == span => *last = seq,
            _ => groups.push((span, seq, seq)),
        }
    }
    // The last span may still grow.
    groups.pop();
    Ok(groups.into_iter().filter(|&(_, a, b)| a != b).map(|(_, a, b)| (a, b)).collect())
}

/// Deletes the chunks of series `sid` that intervals `from..=to` merged
/// into one no longer stand for, or stand for no better than that one
/// interval: those the merged intervals overlap but for a chunk that holds
/// them and more (whose sums the merge leaves as they were).
pub(super) fn drop_merged_chunks(conn: &Connection, sid: i64, from: u32, to: u32) -> Result<()> {
    conn.execute(
        "DELETE FROM series_chunks WHERE series_id=?1 AND last_seq>=?2 AND seq<=?3
           AND NOT (seq<=?2 AND last_seq>=?3 AND (seq<?2 OR last_seq>?3))",
        params![sid, from, to],
    )?;
    Ok(())
}

#[cfg(test)]
#[path = "chunks_tests.rs"]
mod tests;
