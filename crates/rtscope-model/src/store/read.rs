//! Reading runs back: the listing, a run's header, series, intervals,
//! exceedances, episodes and documents.

use super::write::insert_interval_into;
use super::{RunListing, Store, load_of, u};
use crate::analysis::pot;
use crate::episode::Episode;
use crate::hist;
use crate::run::{Exceedance, Interval, NegHalf, Run, RunHeader, RunStatus, Series, SeriesFold, SeriesKey};
use anyhow::{Context, Result, anyhow, bail};
use rusqlite::{Connection, OptionalExtension, params};

/// A series' row: its id, key, unit, exceedance threshold and extra figures.
pub(super) type SeriesRow = (i64, SeriesKey, String, String, Option<String>);

impl Store {
    pub(super) fn run_data(&self, run_id: i64, name: &str) -> Result<Option<serde_json::Value>> {
        let doc: Option<String> = self
            .conn
            .query_row("SELECT doc FROM run_data WHERE run_id=?1 AND name=?2", params![run_id, name], |r| r.get(0))
            .optional()?;
        doc.map(|d| serde_json::from_str(&d).with_context(|| format!("stored {name} of run {run_id}"))).transpose()
    }

    /// A run's episodes, worst first.
    pub fn episodes(&self, run_id: i64) -> Result<Vec<Episode>> {
        let mut st =
            self.conn.prepare("SELECT doc FROM episodes WHERE run_id=?1 ORDER BY latency_ns DESC, cpu, sample")?;
        let docs: Vec<String> = st.query_map([run_id], |r| r.get(0))?.collect::<Result<_, _>>()?;
        docs.iter().map(|d| serde_json::from_str(d).context("stored episode")).collect()
    }

    /// All runs, oldest first.
    pub fn list_runs(&self) -> Result<Vec<RunListing>> {
        let ids: Vec<i64> = {
            let mut st = self.conn.prepare("SELECT id FROM runs ORDER BY id")?;
            st.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?
        };
        let mut out = Vec::new();
        for id in ids {
            let header = self.header(id)?;
            // Each series' samples: a traced run's stage series count its
            // episodes' events, not measured samples.
            let mut st = self.conn.prepare_cached(
                "SELECT s.metric, coalesce(sum(i.count), 0) FROM series s LEFT JOIN intervals i ON i.series_id=s.id
                 WHERE s.run_id=?1 GROUP BY s.id",
            )?;
            let rows: Vec<(String, i64)> =
                st.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
            let samples = rows.iter().filter(|(m, _)| !crate::irqtime::from_trace(m)).map(|(_, n)| *n as u64).sum();
            out.push(RunListing { header, series: rows.len(), samples });
        }
        Ok(out)
    }

    /// Resolves `last` or a numeric id to an existing run id.
    pub fn resolve(&self, spec: &str) -> Result<i64> {
        let id = if spec == "last" {
            self.conn
                .query_row("SELECT max(id) FROM runs", [], |r| r.get::<_, Option<i64>>(0))?
                .ok_or_else(|| anyhow!("the run store {} holds no runs yet", self.path.display()))?
        } else {
            spec.parse::<i64>()
                .map_err(|_| anyhow!("RUN '{spec}' is neither a run id nor 'last' (see `rtscope runs`)"))?
        };
        let exists: bool = self
            .conn
            .query_row("SELECT count(*) FROM runs WHERE id=?1", [id], |r| r.get::<_, i64>(0))
            .map(|n| n > 0)?;
        if !exists {
            bail!("no run {id} in {} (see `rtscope runs`)", self.path.display());
        }
        Ok(id)
    }

    pub(super) fn header(&self, id: i64) -> Result<RunHeader> {
        self.conn
            .query_row(
                "SELECT uuid, tool_version, command_line, kind, hostname, started_unix_ns, ended_unix_ns,
                        start_mono_ns, status, exit_code, pid, representative, warnings, notes, peak_rss_kb
                 FROM runs WHERE id=?1",
                [id],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, i64>(5)?,
                        r.get::<_, Option<i64>>(6)?,
                        r.get::<_, i64>(7)?,
                        r.get::<_, String>(8)?,
                        r.get::<_, Option<i32>>(9)?,
                        r.get::<_, i64>(10)?,
                        r.get::<_, bool>(11)?,
                        r.get::<_, String>(12)?,
                        r.get::<_, String>(13)?,
                        r.get::<_, Option<i64>>(14)?,
                    ))
                },
            )
            .optional()?
            .ok_or_else(|| anyhow!("no run {id}"))
            .and_then(|t| {
                Ok(RunHeader {
                    id,
                    uuid: t.0,
                    tool_version: t.1,
                    command_line: serde_json::from_str(&t.2)?,
                    kind: t.3,
                    hostname: t.4,
                    started_unix_ns: t.5,
                    ended_unix_ns: t.6,
                    start_mono_ns: u(t.7),
                    status: RunStatus::parse(&t.8).ok_or_else(|| anyhow!("run {id}: unknown status {}", t.8))?,
                    exit_code: t.9,
                    pid: t.10 as u32,
                    representative: t.11,
                    warnings: serde_json::from_str(&t.12)?,
                    notes: serde_json::from_str(&t.13)?,
                    peak_rss_kb: t.14.map(u),
                })
            })
    }

    /// Loads a whole run: header, inventory, plan, every series with its
    /// intervals and exceedances.
    pub fn load_run(&self, id: i64) -> Result<Run> {
        self.load_run_as(id, None)
    }

    /// Loads a run as [`Store::load_run`] does, but for its intervals'
    /// histograms: each series' rows are streamed from the store and each
    /// interval's histograms summed into the series' total and halves as
    /// it is read, then dropped (the intervals keep their statistics and
    /// times, with an empty `hdr`). What the reads that print statistics
    /// and fit tails take (`show`, `analyze`, `report`): their memory is
    /// the series' sums, the intervals' statistics and the exceedances,
    /// not the histograms of every interval. Each series keeps only the
    /// exceedances its analysis at the automatic threshold reads (those
    /// above the level where they are complete and above that threshold,
    /// [`pot::exceedances_read`]), read a series at a time;
    /// [`Series::exceedance_count`] still counts them all. The run is read
    /// in one read transaction, so a monitor's writes and retention
    /// meanwhile are not seen half-done.
    pub fn load_run_summed(&self, id: i64) -> Result<Run> {
        self.load_run_summed_for(id, None)
    }

    /// [`Store::load_run_summed`] for an analysis at tail threshold
    /// `threshold` (ns; None: the automatic one): each series keeps the
    /// exceedances that analysis reads.
    pub fn load_run_summed_for(&self, id: i64, threshold: Option<f64>) -> Result<Run> {
        let tx = self.conn.unchecked_transaction()?;
        let run = self.load_run_as(id, Some(threshold));
        tx.finish()?;
        run
    }

    /// Run `id`, whole (`summed` None) or summed, keeping the exceedances a
    /// tail fit at the threshold `summed` holds reads.
    fn load_run_as(&self, id: i64, summed: Option<Option<f64>>) -> Result<Run> {
        let header = self.header(id)?;
        let (inv, plan): (String, String) =
            self.conn
                .query_row("SELECT inventory, plan FROM runs WHERE id=?1", [id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let mut st = self.conn.prepare(
            "SELECT id, probe, metric, cpu, unit, exceed, extra, load FROM series WHERE run_id=?1
             ORDER BY probe, metric, cpu, load",
        )?;
        let rows: Vec<SeriesRow> = st
            .query_map([id], |r| {
                Ok((
                    r.get(0)?,
                    SeriesKey { probe: r.get(1)?, metric: r.get(2)?, cpu: r.get(3)?, load: load_of(r.get(7)?) },
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            })?
            .collect::<Result<_, _>>()?;
        let series = match summed {
            Some(threshold) => self.summed_series(id, rows, threshold)?,
            None => self.whole_series(id, rows)?,
        };
        let trace =
            self.run_data(id, "trace")?.map(serde_json::from_value).transpose().context("stored trace summary")?;
        let characterisation = self
            .run_data(id, "characterisation")?
            .map(serde_json::from_value)
            .transpose()
            .context("stored characterisation")?
            .unwrap_or_default();
        let cpu_score =
            self.run_data(id, "cpu_score")?.map(serde_json::from_value).transpose().context("stored CPU score")?;
        Ok(Run {
            header,
            inventory: serde_json::from_str(&inv).context("stored inventory")?,
            plan: serde_json::from_str(&plan).context("stored plan")?,
            series,
            episodes: self.episodes(id)?,
            trace,
            characterisation,
            cpu_score,
        })
    }

    /// Every series of `rows` with its intervals whole.
    fn whole_series(&self, id: i64, rows: Vec<SeriesRow>) -> Result<Vec<Series>> {
        // Read every series' rows, then build the series (summing their
        // histograms) on every core; the first error in the series' order
        // is the one reported, as when they were read one at a time.
        let mut read = Vec::new();
        let mut unread = None;
        for (sid, key, unit, exceed, extra) in rows {
            match self.series_rows(id, sid) {
                Ok((intervals, exceedances)) => read.push((key, unit, exceed, extra, intervals, exceedances)),
                Err(e) => {
                    unread = Some(e);
                    break;
                }
            }
        }
        let built = crate::par::map_into(read, |(key, unit, exceed, extra, intervals, exceedances)| {
            let what = format!("run {id}, {}", key.describe());
            (Series::new(key, unit, exceed, intervals, exceedances), extra, what)
        });
        let mut series = Vec::new();
        for (s, extra, what) in built {
            series.push(with_extra(s.map_err(|e| anyhow!("{what}: {e}"))?, extra, &what)?);
        }
        match unread {
            Some(e) => Err(e),
            None => Ok(series),
        }
    }

    /// Every series of `rows`, its intervals' histograms summed (see
    /// [`Store::load_run_summed`]): those whose halves' sums stored when
    /// their run finished still agree with their intervals are built from
    /// them without reading an interval's histogram, those with chunks
    /// that still agree from them and the intervals they do not cover
    /// ([`Store::series_of_chunks`]); the others are folded. Each keeps
    /// the exceedances a tail fit at `threshold` reads.
    fn summed_series(&self, id: i64, rows: Vec<SeriesRow>, threshold: Option<f64>) -> Result<Vec<Series>> {
        let mut stored = Vec::with_capacity(rows.len());
        let mut to_fold = Vec::new();
        for row in rows {
            let s = match self.series_of_stored_halves(id, &row, threshold)? {
                Some(s) => Some(s),
                None => self.series_of_chunks(id, &row)?.map(|s| keeping_what_is_read(s, threshold)),
            };
            match s {
                Some(s) => stored.push(Some(with_extra(s, row.4, &format!("run {id}, {}", row.1.describe()))?)),
                None => {
                    stored.push(None);
                    to_fold.push(row);
                }
            }
        }
        let mut folded = self.folded_series(id, to_fold, threshold)?.into_iter();
        Ok(stored.into_iter().map(|s| s.or_else(|| folded.next()).expect("every series is built")).collect())
    }

    /// The series of `row` from its intervals' statistics and the sums of
    /// its halves stored when its run finished ([`Store::store_sums`],
    /// [`Series::from_halves`]); None when it has none or they no longer
    /// agree with its intervals. It keeps the exceedances a tail fit at
    /// `threshold` reads.
    fn series_of_stored_halves(&self, id: i64, row: &SeriesRow, threshold: Option<f64>) -> Result<Option<Series>> {
        let (sid, key, unit, exceed, _) = row;
        let mut st = self.conn.prepare_cached(&INTERVALS.replace("FROM intervals", "FROM series_sums"))?;
        let mut rows = st.query([*sid, 0, i64::from(u32::MAX)])?;
        let mut halves = Vec::with_capacity(2);
        while let Some(r) = rows.next()? {
            halves.push(interval_of(id, r)?);
        }
        let Ok(halves) = <[Interval; 2]>::try_from(halves) else { return Ok(None) };
        let intervals = self.interval_stats(id, *sid)?;
        let exceedances = self.exceedances(*sid)?;
        let s = Series::from_halves(key.clone(), unit.clone(), exceed.clone(), intervals, exceedances, halves);
        Ok(s.map(|s| keeping_what_is_read(s, threshold)))
    }

    /// The intervals of series `sid` (of run `id`) in order, their
    /// statistics and times without their histograms ([`INTERVAL_STATS`]).
    pub(super) fn interval_stats(&self, id: i64, sid: i64) -> Result<Vec<Interval>> {
        let mut intervals = Vec::new();
        let mut st = self.conn.prepare_cached(INTERVAL_STATS)?;
        let mut rows = st.query([sid])?;
        while let Some(r) = rows.next()? {
            intervals.push(interval_of(id, r)?);
        }
        // Kept with the series: no room to grow (a day of 64 CPUs is
        // 553,000 intervals).
        intervals.shrink_to_fit();
        Ok(intervals)
    }

    /// The first interval's start and the last one's end of series `sid`
    /// (0 where it has none).
    fn span(&self, sid: i64) -> Result<(u64, u64)> {
        let span: (Option<i64>, Option<i64>) = self.conn.query_row(
            "SELECT (SELECT start_ns FROM intervals WHERE series_id=?1 ORDER BY seq LIMIT 1),
                    (SELECT end_ns FROM intervals WHERE series_id=?1 ORDER BY seq DESC LIMIT 1)",
            [sid],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok((u(span.0.unwrap_or(0)), u(span.1.unwrap_or(0))))
    }

    /// Stores the sums of each half of every series of run `id`, as
    /// [`SeriesFold`] makes them, for later reads to build the series from
    /// ([`Series::from_halves`]) instead of inflating every interval's
    /// histogram; replaces those stored before. A series with fewer than
    /// two intervals, or whose halves cannot be told as read, gets none.
    /// The intervals are read in one read transaction, a series at a time
    /// (memory for one series' intervals' statistics), and the sums
    /// written in one short write transaction after.
    pub fn store_sums(&mut self, id: i64) -> Result<()> {
        let mut all = Vec::new();
        {
            let tx = self.conn.unchecked_transaction()?;
            let sids: Vec<i64> = {
                let mut st = self.conn.prepare("SELECT id FROM series WHERE run_id=?1 ORDER BY id")?;
                st.query_map([id], |r| r.get(0))?.collect::<Result<_, _>>()?
            };
            for sid in sids {
                let mut fold =
                    SeriesFold::new(SeriesKey::new("", "", 0), String::new(), String::new(), self.span(sid)?);
                let mut ok = true;
                for_each_interval(&self.conn, id, sid, 0..=u32::MAX, |iv| {
                    ok = ok && fold.add(iv).is_ok();
                    Ok(())
                })?;
                let halves =
                    fold.finish(Vec::new()).filter(|_| ok).and_then(|s| s.halves()?.as_intervals(&s.intervals));
                all.push((sid, halves));
            }
            tx.finish()?;
        }
        let tx = self.write()?;
        for (sid, halves) in all {
            tx.execute("DELETE FROM series_sums WHERE series_id=?1", [sid])?;
            for h in halves.iter().flatten() {
                insert_interval_into(&tx, "series_sums", sid, h)?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Every series of `rows`, its intervals' histograms summed as read.
    /// The series are read side by side, an interval of each in turn, and
    /// summed on as many threads as the machine offers (a series' intervals
    /// on one of them, in order); the first error in the series' order is
    /// the one reported, as when they were read whole one after another.
    /// Each keeps the exceedances a tail fit at `threshold` reads.
    fn folded_series(&self, id: i64, rows: Vec<SeriesRow>, threshold: Option<f64>) -> Result<Vec<Series>> {
        let n = rows.len();
        let mut folds = Vec::with_capacity(n);
        for (sid, key, unit, exceed, _) in &rows {
            folds.push(Some(SeriesFold::new(key.clone(), unit.clone(), exceed.clone(), self.span(*sid)?)));
        }
        let threads = std::thread::available_parallelism().map_or(1, |t| t.get()).min(n).max(1);
        let mut unread: Vec<Option<anyhow::Error>> = (0..n).map(|_| None).collect();
        let mut folded: Vec<Option<(SeriesFold, Result<(), String>)>> = (0..n).map(|_| None).collect();
        std::thread::scope(|scope| -> Result<()> {
            let mut senders = Vec::new();
            let mut workers = Vec::new();
            for w in 0..threads {
                let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, Interval)>(64);
                let mut mine: Vec<(usize, SeriesFold, Result<(), String>)> = (w..n)
                    .step_by(threads)
                    .map(|i| (i, folds[i].take().expect("each series is folded once"), Ok(())))
                    .collect();
                senders.push(tx);
                workers.push(scope.spawn(move || {
                    for (i, iv) in rx {
                        let (_, fold, state) = &mut mine[i / threads];
                        if state.is_ok() {
                            *state = fold.add(iv);
                        }
                    }
                    mine
                }));
            }
            let mut statements = Vec::with_capacity(n);
            for _ in 0..n {
                statements.push(self.conn.prepare(INTERVALS)?);
            }
            let mut cursors = Vec::with_capacity(n);
            for (st, (sid, ..)) in statements.iter_mut().zip(&rows) {
                cursors.push(Some(st.query([*sid, 0, i64::from(u32::MAX)])?));
            }
            let mut live = n;
            while live > 0 {
                for (i, cursor) in cursors.iter_mut().enumerate() {
                    let Some(rows) = cursor else { continue };
                    let next = match rows.next() {
                        Ok(Some(r)) => interval_of(id, r).map(Some),
                        Ok(None) => Ok(None),
                        Err(e) => Err(e.into()),
                    };
                    match next {
                        // A worker that is gone panicked: joining it below raises that.
                        Ok(Some(iv)) => drop(senders[i % threads].send((i, iv))),
                        Ok(None) => {
                            *cursor = None;
                            live -= 1;
                        }
                        Err(e) => {
                            unread[i] = Some(e);
                            *cursor = None;
                            live -= 1;
                        }
                    }
                }
            }
            drop(senders);
            for w in workers {
                match w.join() {
                    Ok(mine) => mine.into_iter().for_each(|(i, fold, state)| folded[i] = Some((fold, state))),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            Ok(())
        })?;
        let mut series = Vec::with_capacity(n);
        for (((sid, key, unit, exceed, extra), fold), unread) in rows.into_iter().zip(folded).zip(unread) {
            let what = format!("run {id}, {}", key.describe());
            let (fold, state) = fold.expect("every series is folded");
            if let Some(e) = unread {
                return Err(e);
            }
            let exceedances = self.exceedances(sid)?;
            state.map_err(|e| anyhow!("{what}: {e}"))?;
            let s = match fold.finish(exceedances) {
                Some(s) => keeping_what_is_read(s, threshold),
                // Intervals out of time order: read whole, as they always were.
                None => {
                    let (intervals, exceedances) = self.series_rows(id, sid)?;
                    Series::new(key, unit, exceed, intervals, exceedances).map_err(|e| anyhow!("{what}: {e}"))?
                }
            };
            series.push(with_extra(s, extra, &what)?);
        }
        Ok(series)
    }

    /// `f` of every interval of run `id`, its histograms included, in the
    /// order of their start times, with the index of its series in the
    /// run's order of series ([`Store::load_run`]'s); intervals that start
    /// together in that order of series. The series are read side by side
    /// (a cursor each, merged by start time), so that memory holds one
    /// interval of each, never a whole run; a series' intervals are taken
    /// in their order (by seq), each series' in time order as a run stores
    /// them. In one read transaction.
    pub fn for_each_interval_in_time(&self, id: i64, mut f: impl FnMut(usize, Interval) -> Result<()>) -> Result<()> {
        let tx = self.conn.unchecked_transaction()?;
        let sids = self.series_ids(id)?;
        let mut statements = Vec::with_capacity(sids.len());
        for _ in &sids {
            statements.push(self.conn.prepare(INTERVALS)?);
        }
        let mut cursors = Vec::with_capacity(sids.len());
        for (st, sid) in statements.iter_mut().zip(&sids) {
            cursors.push(st.query([*sid, 0, i64::from(u32::MAX)])?);
        }
        let next = |i: usize, cursors: &mut [rusqlite::Rows]| -> Result<Option<Interval>> {
            cursors[i].next()?.map(|r| interval_of(id, r)).transpose()
        };
        let mut pending: Vec<Option<Interval>> = Vec::with_capacity(sids.len());
        let mut heap = std::collections::BinaryHeap::new();
        for i in 0..sids.len() {
            let iv = next(i, &mut cursors)?;
            if let Some(iv) = &iv {
                heap.push(std::cmp::Reverse((iv.start_ns, i)));
            }
            pending.push(iv);
        }
        while let Some(std::cmp::Reverse((_, i))) = heap.pop() {
            let iv = pending[i].take().expect("a series in the heap has an interval");
            if let Some(after) = next(i, &mut cursors)? {
                heap.push(std::cmp::Reverse((after.start_ns, i)));
                pending[i] = Some(after);
            }
            f(i, iv)?;
        }
        drop(cursors);
        drop(statements);
        tx.finish()?;
        Ok(())
    }

    /// The ids of run `id`'s series, in the run's order of series
    /// ([`Store::load_run`]'s), for [`Store::for_each_interval_of`] and
    /// [`Store::for_each_exceedance_of`].
    pub fn series_ids(&self, id: i64) -> Result<Vec<i64>> {
        let mut st =
            self.conn.prepare_cached("SELECT id FROM series WHERE run_id=?1 ORDER BY probe, metric, cpu, load")?;
        let sids = st.query_map([id], |r| r.get(0))?.collect::<Result<_, _>>()?;
        Ok(sids)
    }

    /// `f` of each interval of series `sid` (of run `id`, see
    /// [`Store::series_ids`]), its histograms included, in order, as its
    /// row is read: memory holds one interval, never the series.
    pub fn for_each_interval_of(&self, id: i64, sid: i64, f: impl FnMut(Interval) -> Result<()>) -> Result<()> {
        for_each_interval(&self.conn, id, sid, 0..=u32::MAX, f)
    }

    /// `f` of each exceedance of series `sid` (see [`Store::series_ids`]),
    /// in time order, as its row is read.
    pub fn for_each_exceedance_of(&self, sid: i64, mut f: impl FnMut(Exceedance) -> Result<()>) -> Result<()> {
        let mut est =
            self.conn.prepare_cached("SELECT t_ns, value_ns FROM exceedances WHERE series_id=?1 ORDER BY t_ns")?;
        let mut rows = est.query([sid])?;
        while let Some(r) = rows.next()? {
            f(Exceedance { t_ns: u(r.get(0)?), value_ns: u(r.get(1)?) })?;
        }
        Ok(())
    }

    /// A stored series' exceedances, in time order.
    pub(super) fn exceedances(&self, sid: i64) -> Result<Vec<Exceedance>> {
        let mut exceedances = Vec::new();
        self.for_each_exceedance_of(sid, |e| {
            exceedances.push(e);
            Ok(())
        })?;
        Ok(exceedances)
    }

    /// A stored series' intervals and exceedances, in order.
    pub(super) fn series_rows(&self, id: i64, sid: i64) -> Result<(Vec<Interval>, Vec<Exceedance>)> {
        let intervals = load_intervals(&self.conn, id, sid, 0..=u32::MAX)?;
        Ok((intervals, self.exceedances(sid)?))
    }
}

/// `s` with only the exceedances its analysis at tail threshold
/// `threshold` reads ([`pot::exceedances_read`]; the others are still
/// counted, see [`Series::exceedance_count`]).
fn keeping_what_is_read(mut s: Series, threshold: Option<f64>) -> Series {
    s.keep_exceedances_from(pot::exceedances_read(&s, threshold));
    s
}

/// `s` with its stored extra figures.
fn with_extra(mut s: Series, extra: Option<String>, what: &str) -> Result<Series> {
    if let Some(text) = extra {
        s.extra = serde_json::from_str(&text).with_context(|| format!("{what}: stored extra figures"))?;
    }
    Ok(s)
}

/// The intervals of series `sid` (of run `id`) whose seq is in `seqs`, in
/// order.
pub(super) fn load_intervals(
    conn: &Connection,
    id: i64,
    sid: i64,
    seqs: std::ops::RangeInclusive<u32>,
) -> Result<Vec<Interval>> {
    let mut out = Vec::new();
    for_each_interval(conn, id, sid, seqs, |iv| {
        out.push(iv);
        Ok(())
    })?;
    Ok(out)
}

/// An interval row's columns, by seq, for `?1` the series, seq from `?2` to `?3`.
const INTERVALS: &str =
    "SELECT seq, start_ns, end_ns, count, min_ns, max_ns, sum_ns, overflows, overruns, lost_exceedances, hist,
            neg_count, neg_min_ns, neg_max_ns, neg_sum_ns, neg_overflows, neg_hist
     FROM intervals WHERE series_id=?1 AND seq>=?2 AND seq<=?3 ORDER BY seq";

/// [`INTERVALS`] of a whole series (`?1`) without the histograms: each
/// interval's `hist` empty, and its `neg_hist` too where it has one (as
/// [`SeriesFold`] leaves them).
pub(super) const INTERVAL_STATS: &str =
    "SELECT seq, start_ns, end_ns, count, min_ns, max_ns, sum_ns, overflows, overruns, lost_exceedances, x'',
            neg_count, neg_min_ns, neg_max_ns, neg_sum_ns, neg_overflows, CASE WHEN neg_hist IS NULL THEN NULL ELSE x'' END
     FROM intervals WHERE series_id=?1 ORDER BY seq";

/// `f` of each interval of series `sid` (of run `id`) whose seq is in
/// `seqs`, in order, as its row is read.
fn for_each_interval(
    conn: &Connection,
    id: i64,
    sid: i64,
    seqs: std::ops::RangeInclusive<u32>,
    mut f: impl FnMut(Interval) -> Result<()>,
) -> Result<()> {
    let mut ist = conn.prepare_cached(INTERVALS)?;
    let mut rows = ist.query([sid, i64::from(*seqs.start()), i64::from(*seqs.end())])?;
    while let Some(r) = rows.next()? {
        f(interval_of(id, r)?)?;
    }
    Ok(())
}

/// The interval in a row of [`INTERVALS`] (of run `id`).
pub(super) fn interval_of(id: i64, r: &rusqlite::Row) -> Result<Interval> {
    let seq = r.get::<_, u32>(0)?;
    let n: [i64; 9] =
        [r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?];
    let neg: [Option<i64>; 5] = [r.get(11)?, r.get(12)?, r.get(13)?, r.get(14)?, r.get(15)?];
    let neg = match (neg, r.get::<_, Option<Vec<u8>>>(16)?) {
        ([Some(count), Some(min), Some(max), Some(sum), Some(overflows)], Some(hdr)) => Some(Box::new(NegHalf {
            stats: hist::Stats { count: u(count), min: u(min), max: u(max), sum: u(sum), overflows: u(overflows) },
            hdr,
        })),
        ([None, None, None, None, None], None) => None,
        _ => bail!("run {id}: interval {seq} has a partial negative half"),
    };
    Ok(Interval {
        seq,
        start_ns: u(n[0]),
        end_ns: u(n[1]),
        stats: hist::Stats { count: u(n[2]), min: u(n[3]), max: u(n[4]), sum: u(n[5]), overflows: u(n[6]) },
        overruns: u(n[7]),
        lost_exceedances: u(n[8]),
        hdr: r.get(10)?,
        neg,
    })
}
