//! A run's checkpoint intervals folded into its rows' bootstrap blocks
//! ([`BlockFold`]): from the intervals a run holds ([`RunBlocks::of_run`]),
//! or streamed interval by interval from a store while the run itself is
//! read summed ([`RunBlocks::streamed`]), so that a comparison holds each
//! row's blocks and each interval's sum and count, never the runs'
//! histograms. Both fold the same intervals the same way: the same blocks.

use super::*;
use crate::run::Interval;
use anyhow::Result;

/// The key of a series' merged row: its load, probe and metric, no CPU.
fn merged_key(s: &Series) -> Key {
    (load_of(s).to_string(), s.key.probe.clone(), s.key.metric.clone(), None)
}

/// Per merged key of a run with several series: the sequence numbers of
/// their intervals, in order (the merged row's places, in time order);
/// and per series, the index of its merged key there (None: its metric
/// has one series).
fn merged_places(run: &Run) -> (Vec<Vec<u32>>, Vec<Option<usize>>) {
    let mut all: Vec<(Key, usize, Vec<u32>)> = Vec::new();
    for s in &run.series {
        let k = merged_key(s);
        let seqs = s.intervals.iter().map(|iv| iv.seq);
        match all.iter_mut().find(|(x, _, _)| *x == k) {
            Some((_, of, all_seqs)) => {
                *of += 1;
                all_seqs.extend(seqs);
            }
            None => all.push((k, 1, seqs.collect())),
        }
    }
    all.retain(|(_, of, _)| *of > 1);
    for (_, _, seqs) in &mut all {
        seqs.sort_unstable();
        seqs.dedup();
    }
    let of = run.series.iter().map(|s| all.iter().position(|(k, _, _)| *k == merged_key(s))).collect();
    (all.into_iter().map(|(_, _, seqs)| seqs).collect(), of)
}

/// A series' part of its metric's merged row.
pub(super) enum Share {
    /// The metric has one series: no merged row.
    None,
    /// Its own row's blocks: its intervals are the merged row's places
    /// (its CPUs measured the same intervals), so its share would be the
    /// same blocks, and is not folded twice.
    Own,
    /// Its intervals folded into blocks over the merged row's places.
    Apart(BlockFold),
}

/// One series' intervals as they are folded: into its own row's blocks
/// and, where its intervals are not all the merged row's places, its
/// share of that row's (with the row's places).
struct SeriesBlocks<'a> {
    own: BlockFold,
    share: Option<(BlockFold, &'a [u32])>,
    merged: bool,
}

impl<'a> SeriesBlocks<'a> {
    fn new(s: &Series, merged: Option<&'a [u32]>) -> SeriesBlocks<'a> {
        let apart = merged.filter(|seqs| !s.intervals.iter().map(|iv| iv.seq).eq(seqs.iter().copied()));
        SeriesBlocks {
            own: BlockFold::new(s.intervals.len()),
            share: apart.map(|seqs| (BlockFold::new(seqs.len()), seqs)),
            merged: merged.is_some(),
        }
    }

    /// Adds the series' interval at place `at`: its histogram decoded
    /// once, added to both rows and dropped. Every interval of a loaded
    /// series decodes (its total was summed from them); one that did not
    /// would be left out of both rows.
    fn add(&mut self, at: usize, iv: &Interval) {
        let Ok(t) = iv.tally() else { return };
        let p = IntervalPoints::of(&t);
        self.own.add(at, &p);
        if let Some((share, seqs)) = &mut self.share {
            share.add(seqs.binary_search(&iv.seq).unwrap_or(0), &p);
        }
    }

    fn done(self) -> (BlockFold, Share) {
        let share = match (self.share, self.merged) {
            (Some((f, _)), _) => Share::Apart(f),
            (None, true) => Share::Own,
            (None, false) => Share::None,
        };
        (self.own, share)
    }
}

/// Each series of a run folded into its own row's bootstrap blocks and
/// its share of its metric's merged row (when the metric has several
/// CPUs, and they did not all measure the same intervals), in the run's
/// order of series: what [`compare_blocks`] reads of the intervals. Per
/// series it holds at most [`MAX_BLOCKS`] blocks' buckets and each
/// interval's sum and count (16 bytes).
pub struct RunBlocks {
    pub(super) folds: Vec<(BlockFold, Share)>,
}

impl RunBlocks {
    /// The blocks of a run that holds its intervals' histograms (loaded
    /// whole, or read from an export): every series at once.
    pub fn of_run(run: &Run) -> RunBlocks {
        let (places, of) = merged_places(run);
        let items: Vec<(&Series, Option<usize>)> = run.series.iter().zip(of).collect();
        let folds = crate::par::map(&items, |&(s, m)| {
            let mut f = SeriesBlocks::new(s, m.map(|m| places[m].as_slice()));
            s.intervals.iter().enumerate().for_each(|(at, iv)| f.add(at, iv));
            f.done()
        });
        RunBlocks { folds }
    }

    /// The blocks of `run`, read summed (its intervals' statistics without
    /// their histograms, [`crate::store::Store::load_run_summed`]), from
    /// its intervals with their histograms as `intervals` gives them: each
    /// with the index of its series in the run
    /// ([`crate::store::Store::for_each_interval_in_time`]). Each is
    /// decoded, folded and dropped as it comes, on as many threads as the
    /// machine offers (a series' intervals on one of them); memory holds
    /// the blocks and a few intervals in flight, never the run's
    /// histograms. An interval the summed run does not hold (written
    /// since it was read) is left out, as it is of the run's totals.
    pub fn streamed(
        run: &Run,
        intervals: impl FnOnce(&mut dyn FnMut(usize, Interval) -> Result<()>) -> Result<()>,
    ) -> Result<RunBlocks> {
        let (places, of) = merged_places(run);
        let n = run.series.len();
        let threads = std::thread::available_parallelism().map_or(1, |t| t.get()).min(n).max(1);
        let mut folds: Vec<Option<(BlockFold, Share)>> = (0..n).map(|_| None).collect();
        std::thread::scope(|scope| -> Result<()> {
            let mut senders = Vec::with_capacity(threads);
            let mut workers = Vec::with_capacity(threads);
            for w in 0..threads {
                let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, Interval)>(64);
                let mut mine: Vec<(usize, SeriesBlocks)> = (w..n)
                    .step_by(threads)
                    .map(|i| (i, SeriesBlocks::new(&run.series[i], of[i].map(|m| places[m].as_slice()))))
                    .collect();
                senders.push(tx);
                workers.push(scope.spawn(move || {
                    for (i, iv) in rx {
                        let (_, f) = &mut mine[i / threads];
                        if let Ok(at) = run.series[i].intervals.binary_search_by_key(&iv.seq, |x| x.seq) {
                            f.add(at, &iv);
                        }
                    }
                    mine
                }));
            }
            let read = intervals(&mut |i, iv| {
                anyhow::ensure!(i < n, "run {}: an interval of series {i}, which it lacks", run.header.id);
                // A worker that is gone panicked: joining it below raises that.
                drop(senders[i % threads].send((i, iv)));
                Ok(())
            });
            drop(senders);
            for w in workers {
                match w.join() {
                    Ok(mine) => mine.into_iter().for_each(|(i, f)| folds[i] = Some(f.done())),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            read
        })?;
        Ok(RunBlocks { folds: folds.into_iter().map(|f| f.expect("every series is folded")).collect() })
    }
}

/// The data of each row key in a run: every series, and per probe and
/// metric the merge of its CPUs when it has several (their totals, and
/// their shares of the blocks added in the run's order of series).
pub(super) fn row_data(run: &Run, blocks: RunBlocks) -> Vec<(Key, RowData)> {
    let mut out: Vec<(Key, RowData)> = Vec::new();
    let mut merged: Vec<(Key, RowData)> = Vec::new();
    for (s, (own, share)) in run.series.iter().zip(blocks.folds) {
        let k = merged_key(s);
        match (merged.iter_mut().find(|(x, _)| *x == k), share) {
            (_, Share::None) => {}
            (Some((_, d)), share) => {
                d.tally.merge(s.total());
                d.intervals.merge(if let Share::Apart(f) = &share { f } else { &own });
            }
            (None, share) => {
                let intervals = if let Share::Apart(f) = share { f } else { own.clone() };
                merged.push((k, RowData { tally: s.total().clone(), intervals }));
            }
        }
        out.push((
            (load_of(s).to_string(), s.key.probe.clone(), s.key.metric.clone(), Some(s.key.cpu)),
            RowData { tally: s.total().clone(), intervals: own },
        ));
    }
    out.extend(merged);
    out
}
