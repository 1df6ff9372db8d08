//! The statistics of a comparison: the runs' distributions as rank
//! tables, the bootstrap (by single samples or by whole checkpoint
//! intervals), and the exact tests of two counts (exceedances, Poisson).

use super::*;

/// A distribution's (value, samples) per non-empty bucket, ascending; the
/// value is the bucket's top as HdrHistogram reports it, within the exact
/// range (as `Tally::quantile` takes it), overflows at the exact maximum.
/// With each bucket's bottom (samples of two runs in one bucket are not
/// told apart) and midpoint (for the variance).
pub(super) fn points(t: &Tally) -> Vec<(i64, i64, f64, u64)> {
    let (min, max) = (t.min(), t.max());
    let mut out: Vec<(i64, i64, f64, u64)> = signed_buckets(t)
        .into_iter()
        .map(|[lo, hi, c]| (hi.clamp(min, max), lo, (lo + hi) as f64 / 2.0, c as u64))
        .collect();
    let over = t.stats.overflows + t.neg.as_ref().map_or(0, |x| x.stats.overflows);
    if over > 0 {
        out.push((max, max, max as f64, over));
    }
    out
}

/// A whole-run distribution read by rank: the histogram's buckets with
/// cumulative counts, overflows as the exact maximum.
#[derive(Clone, Debug)]
pub struct Ranks {
    /// (value at the bucket's top, samples up to and including it).
    pub(super) cum: Vec<(i64, u64)>,
    /// Each bucket's bottom.
    pub(super) lows: Vec<i64>,
    pub(super) n: u64,
    pub(super) mean: f64,
    pub(super) var: f64,
    pub(super) max: i64,
}

impl Ranks {
    pub fn new(t: &Tally) -> Ranks {
        let (mut cum, mut lows) = (Vec::new(), Vec::new());
        let mut n = 0u64;
        let (mut s1, mut s2) = (0f64, 0f64);
        for (v, lo, mid, c) in points(t) {
            n += c;
            cum.push((v, n));
            lows.push(lo);
            s1 += mid * c as f64;
            s2 += mid * mid * c as f64;
        }
        let mean = if t.count() > 0 { t.sum() as f64 / t.count() as f64 } else { 0.0 };
        let var = if n > 1 { ((s2 - s1 * s1 / n as f64) / (n - 1) as f64).max(0.0) } else { 0.0 };
        Ranks { cum, lows, n, mean, var, max: t.max() }
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    /// The `rank`-th smallest sample, 1-based (clamped to 1..=n).
    pub fn at_rank(&self, rank: u64) -> i64 {
        if self.n == 0 {
            return 0;
        }
        let r = rank.clamp(1, self.n);
        let i = self.cum.partition_point(|&(_, c)| c < r);
        self.cum.get(i).map_or(self.max, |&(v, _)| v)
    }

    /// The rank of quantile `q`, as [`Tally::quantile`] takes it.
    pub(super) fn rank_of(&self, q: f64) -> u64 {
        ((q * self.n as f64).ceil() as u64).clamp(1, self.n.max(1))
    }

    pub fn quantile(&self, q: f64) -> i64 {
        self.at_rank(self.rank_of(q))
    }

    /// Samples above `v` at the histogram's resolution: those of the
    /// buckets that lie wholly above it (a sample in `v`'s own bucket, within
    /// 0.1 % of it, is not told apart from it).
    pub fn count_above(&self, v: i64) -> u64 {
        let i = self.lows.partition_point(|&lo| lo <= v);
        self.n - i.checked_sub(1).map_or(0, |j| self.cum[j].1)
    }

    /// The figure's value, ns.
    pub fn value(&self, f: Figure) -> f64 {
        match f {
            Figure::Mean => self.mean,
            Figure::Quantile(q) => self.quantile(q) as f64,
            Figure::Max => self.max as f64,
        }
    }

    /// Whether the figure can be given a bootstrap interval.
    pub fn testable(&self, f: Figure) -> bool {
        match f {
            Figure::Mean => self.n >= 2,
            // The rank's complement, exactly: 10000 samples have 10 above p99.9.
            Figure::Quantile(q) => (self.n - self.rank_of(q)) as f64 >= MIN_TAIL,
            Figure::Max => false,
        }
    }

    /// One bootstrap replicate of the figure, resampling single samples.
    pub(super) fn replicate(&self, f: Figure, rng: &mut Rng) -> f64 {
        match f {
            Figure::Mean => self.mean + (self.var / self.n as f64).sqrt() * rng.normal(),
            Figure::Quantile(q) => {
                let k = self.rank_of(q);
                let u = rng.beta(k as f64, (self.n + 1 - k) as f64);
                self.at_rank((u * self.n as f64).ceil() as u64) as f64
            }
            Figure::Max => self.max as f64,
        }
    }
}

/// One checkpoint interval of a row (a series, or the same interval of
/// every CPU merged): its buckets and exact sum.
#[derive(Clone, Debug, Default)]
pub struct IntervalPoints {
    /// (value, samples), ascending.
    pub points: Vec<(i64, u64)>,
    pub sum: f64,
    pub n: u64,
}

impl IntervalPoints {
    pub fn of(t: &Tally) -> IntervalPoints {
        IntervalPoints {
            points: points(t).into_iter().map(|(v, _, _, c)| (v, c)).collect(),
            sum: t.sum() as f64,
            n: t.count(),
        }
    }

    /// Adds `other` (the same interval of another CPU).
    pub fn merge(&mut self, other: &IntervalPoints) {
        let mut out = Vec::with_capacity(self.points.len() + other.points.len());
        let (mut a, mut b) = (self.points.iter().peekable(), other.points.iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x.0 == y.0 => {
                    let v = (x.0, x.1 + y.1);
                    a.next();
                    b.next();
                    v
                }
                (Some(x), Some(y)) => *if x.0 < y.0 { a.next() } else { b.next() }.unwrap_or(&(0, 0)),
                (Some(_), None) => *a.next().unwrap_or(&(0, 0)),
                (None, Some(_)) => *b.next().unwrap_or(&(0, 0)),
                (None, None) => break,
            };
            out.push(next);
        }
        self.points = out;
        self.sum += other.sum;
        self.n += other.n;
    }
}

/// A block of intervals: (index into the values, samples) per value, the
/// samples' sum and count.
type Block = (Vec<(u32, u64)>, f64, u64);

/// A row's checkpoint intervals in blocks of consecutive ones, for the
/// bootstrap that resamples time rather than single samples.
#[derive(Clone, Debug)]
pub struct Blocks {
    /// Every distinct value, ascending.
    pub(super) values: Vec<i64>,
    pub(super) blocks: Vec<Block>,
    /// Per value, each block's samples up to and including it (value-major:
    /// `cum[value * blocks + block]`), when small enough to keep
    /// ([`CUM_CELLS`]): a replicate's quantile is then a binary search over
    /// the values of its blocks' weighted counts, not a pass over them all.
    pub(super) cum: Option<Vec<u64>>,
    /// Each block's highest value (index into the values).
    tops: Vec<u32>,
    /// Intervals per block.
    pub per_block: usize,
}

/// A row's checkpoint intervals folded into [`Blocks`] as they are read,
/// so that a comparison never holds every interval's buckets: each
/// block's buckets summed, and each interval's sum and count (the blocks'
/// sums are added in the intervals' order, as [`Blocks::new`] adds them).
/// An interval's place in the row (its index in time order) is given
/// with it; the same place given again (another CPU's interval of a
/// merged row) adds to it.
#[derive(Clone, Debug, Default)]
pub struct BlockFold {
    per_block: usize,
    /// Per block, its intervals' buckets summed.
    blocks: Vec<IntervalPoints>,
    /// Per interval: its sum and samples.
    sums: Vec<f64>,
    counts: Vec<u64>,
}

impl BlockFold {
    /// The fold of a row of `len` intervals.
    pub fn new(len: usize) -> BlockFold {
        let per_block = len.div_ceil(MAX_BLOCKS).max(1);
        BlockFold {
            per_block,
            blocks: vec![IntervalPoints::default(); len.div_ceil(per_block)],
            sums: vec![0.0; len],
            counts: vec![0; len],
        }
    }

    /// Adds the interval at place `at` of the row.
    pub fn add(&mut self, at: usize, i: &IntervalPoints) {
        self.blocks[at / self.per_block].merge(i);
        self.sums[at] += i.sum;
        self.counts[at] += i.n;
    }

    /// Adds `other`, a fold of the same row's places (another CPU's
    /// intervals of a merged row).
    pub fn merge(&mut self, other: &BlockFold) {
        for (mine, theirs) in self.blocks.iter_mut().zip(&other.blocks) {
            mine.merge(theirs);
        }
        self.sums.iter_mut().zip(&other.sums).for_each(|(a, b)| *a += b);
        self.counts.iter_mut().zip(&other.counts).for_each(|(a, b)| *a += b);
    }

    /// The blocks; None when fewer than [`MIN_INTERVALS`] intervals hold
    /// samples.
    pub fn blocks(&self) -> Option<Blocks> {
        if self.counts.iter().filter(|&&n| n > 0).count() < MIN_INTERVALS {
            return None;
        }
        let mut values: Vec<i64> = self.blocks.iter().flat_map(|b| b.points.iter().map(|p| p.0)).collect();
        values.sort_unstable();
        values.dedup();
        // Kept with the blocks: every block's values were collected.
        values.shrink_to_fit();
        let summed = self
            .blocks
            .iter()
            .zip(self.sums.chunks(self.per_block).zip(self.counts.chunks(self.per_block)))
            .map(|(b, (sums, counts))| (b, sums.iter().sum(), counts.iter().sum()))
            .collect();
        Some(Blocks::of_blocks(values, summed, self.per_block))
    }
}

/// The most cells (values x blocks) of [`Blocks`]' cumulative table: 8 MB.
const CUM_CELLS: usize = 1 << 20;

impl Blocks {
    /// None when fewer than [`MIN_INTERVALS`] intervals hold samples.
    pub fn new(intervals: &[IntervalPoints]) -> Option<Blocks> {
        let mut fold = BlockFold::new(intervals.len());
        intervals.iter().enumerate().for_each(|(at, i)| fold.add(at, i));
        fold.blocks()
    }

    /// The blocks of `values` (every distinct value, ascending) from each
    /// block's (value, samples) ascending, sum and count.
    fn of_blocks(values: Vec<i64>, summed: Vec<(&IntervalPoints, f64, u64)>, per_block: usize) -> Blocks {
        let blocks = summed
            .into_iter()
            .map(|(points, sum, n)| {
                // Ascending; a value twice (buckets clamped to the exact
                // extremes) counted once.
                let mut entries: Vec<(u32, u64)> =
                    points.points.iter().map(|&(v, c)| (values.binary_search(&v).unwrap_or(0) as u32, c)).collect();
                entries.dedup_by(|later, kept| {
                    if later.0 == kept.0 {
                        kept.1 += later.1;
                        true
                    } else {
                        false
                    }
                });
                (entries, sum, n)
            })
            .collect::<Vec<Block>>();
        let nb = blocks.len();
        let cum = (values.len().saturating_mul(nb) <= CUM_CELLS).then(|| {
            let mut cum = vec![0u64; values.len() * nb];
            for (b, (entries, _, _)) in blocks.iter().enumerate() {
                for &(i, k) in entries {
                    cum[i as usize * nb + b] = k;
                }
                for i in 1..values.len() {
                    cum[i * nb + b] += cum[(i - 1) * nb + b];
                }
            }
            cum
        });
        let tops = blocks.iter().map(|(entries, _, _)| entries.last().map_or(0, |e| e.0)).collect();
        Blocks { values, blocks, cum, tops, per_block }
    }

    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// `reps` replicates of every figure at once (per figure of `figures`,
    /// its replicates; the maximum's are its value): each draws as many
    /// blocks as there are, with replacement, and reads the figures of
    /// their union.
    pub(super) fn replicates(&self, figures: &[Figure], reps: usize, rng: &mut Rng) -> Vec<Vec<f64>> {
        let mut out = vec![Vec::with_capacity(reps); figures.len()];
        let mut acc = vec![0u64; self.values.len()];
        let nb = self.blocks.len() as u64;
        let mut quantiles: Vec<(usize, f64)> = figures
            .iter()
            .enumerate()
            .filter_map(|(i, f)| if let Figure::Quantile(q) = f { Some((i, *q)) } else { None })
            .collect();
        quantiles.sort_by(|a, b| a.1.total_cmp(&b.1));
        let mut ranks: Vec<u64> = Vec::with_capacity(quantiles.len());
        let mut at = vec![0i64; figures.len()];
        let mut weights = vec![0u64; self.blocks.len()];
        for _ in 0..reps {
            let (mut n, mut sum) = (0u64, 0f64);
            // A replicate of empty blocks only says nothing: draw again
            // (at least MIN_INTERVALS intervals hold samples).
            for _ in 0..100 {
                weights.iter_mut().for_each(|w| *w = 0);
                (n, sum) = (0, 0.0);
                for _ in 0..nb {
                    let b = rng.below(nb) as usize;
                    weights[b] += 1;
                    sum += self.blocks[b].1;
                    n += self.blocks[b].2;
                }
                if n > 0 {
                    break;
                }
            }
            // The quantiles' ranks in this replicate, ascending as the quantiles.
            ranks.clear();
            ranks.extend(quantiles.iter().map(|&(_, q)| rank(q, n)));
            at.iter_mut().for_each(|a| *a = 0);
            let max = match &self.cum {
                Some(cum) => self.read_cumulative(cum, &weights, &quantiles, &ranks, &mut at),
                None => self.read_summed(&mut acc, &weights, &quantiles, &ranks, &mut at),
            };
            for (fi, f) in figures.iter().enumerate() {
                out[fi].push(match f {
                    Figure::Mean => {
                        if n > 0 {
                            sum / n as f64
                        } else {
                            0.0
                        }
                    }
                    Figure::Quantile(_) => at[fi] as f64,
                    Figure::Max => max as f64,
                });
            }
        }
        out
    }
}

impl Blocks {
    /// A replicate's figures from the cumulative table: each quantile the
    /// first value whose weighted count reaches its rank; the maximum the
    /// highest top of a drawn block. Returns the maximum.
    fn read_cumulative(
        &self,
        cum: &[u64],
        weights: &[u64],
        quantiles: &[(usize, f64)],
        ranks: &[u64],
        at: &mut [i64],
    ) -> i64 {
        let nb = weights.len();
        let below = |i: usize| -> u64 { cum[i * nb..(i + 1) * nb].iter().zip(weights).map(|(c, w)| c * w).sum() };
        let mut from = 0;
        for (&(fi, _), &r) in quantiles.iter().zip(ranks) {
            // The ranks ascend, so each search starts where the last ended.
            let (mut lo, mut hi) = (from, self.values.len() - 1);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if below(mid) >= r { hi = mid } else { lo = mid + 1 }
            }
            at[fi] = self.values[lo];
            from = lo;
        }
        let top = weights.iter().zip(&self.tops).filter(|(w, _)| **w > 0).map(|(_, &t)| t).max().unwrap_or(0);
        self.values[top as usize]
    }

    /// A replicate's figures from its drawn blocks' counts summed per value
    /// (the table too large to keep). Returns the maximum.
    fn read_summed(
        &self,
        acc: &mut [u64],
        weights: &[u64],
        quantiles: &[(usize, f64)],
        ranks: &[u64],
        at: &mut [i64],
    ) -> i64 {
        acc.iter_mut().for_each(|a| *a = 0);
        for ((entries, _, _), &w) in self.blocks.iter().zip(weights) {
            for &(i, k) in entries {
                acc[i as usize] += k * w;
            }
        }
        let (mut max, mut qi, mut cum) = (0i64, 0, 0u64);
        for (i, &k) in acc.iter().enumerate() {
            if k == 0 {
                continue;
            }
            cum += k;
            max = self.values[i];
            while qi < ranks.len() && cum >= ranks[qi] {
                at[quantiles[qi].0] = self.values[i];
                qi += 1;
            }
        }
        max
    }
}

/// The rank of quantile `q` among `n` samples, as [`Tally::quantile`] takes it.
pub(super) fn rank(q: f64, n: u64) -> u64 {
    ((q * n as f64).ceil() as u64).clamp(1, n.max(1))
}

/// splitmix64: a fixed seed makes every comparison reproducible.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Gamma(shape, 1) by Marsaglia and Tsang; shape < 1 by boosting.
    pub fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            return self.gamma(shape + 1.0) * self.uniform().powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            let u = self.uniform();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }

    pub fn beta(&mut self, a: f64, b: f64) -> f64 {
        let x = self.gamma(a);
        let y = self.gamma(b);
        x / (x + y)
    }
}

/// One-sided p-values of the exact conditional test of two counts: `k_a`
/// events over exposure `w_a`, `k_b` over `w_b`. Under one rate, given the
/// total `m = k_a + k_b`, `k_b` is Binomial(m, w_b / (w_a + w_b)). Returns
/// (P(X >= k_b): small when b's rate is higher, P(X <= k_b): small when it
/// is lower).
pub fn two_counts(k_a: u64, w_a: f64, k_b: u64, w_b: f64) -> (f64, f64) {
    let m = k_a + k_b;
    if m == 0 || !(w_a > 0.0 && w_b > 0.0) {
        return (1.0, 1.0);
    }
    let Ok(bin) = Binomial::new(w_b / (w_a + w_b), m) else { return (1.0, 1.0) };
    let upper = if k_b == 0 { 1.0 } else { bin.sf(k_b - 1) };
    (upper.clamp(0.0, 1.0), bin.cdf(k_b).clamp(0.0, 1.0))
}

/// The two-sided p-value and verdict of [`two_counts`] at the comparison's level.
pub(super) fn counts_verdict(k_a: u64, w_a: f64, k_b: u64, w_b: f64) -> (f64, Change) {
    let (upper, lower) = two_counts(k_a, w_a, k_b, w_b);
    let p = (2.0 * upper.min(lower)).min(1.0);
    let alpha = 1.0 - CONFIDENCE;
    let change = if p >= alpha {
        Change::WithinNoise
    } else if upper < lower {
        Change::Worse
    } else {
        Change::Better
    };
    (p, change)
}

/// What the exceedance test counted.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TailCount {
    /// The value counted above: the baseline's figure when the later run's
    /// is higher (or equal), the later run's when it is lower, ns.
    pub threshold_ns: f64,
    /// The baseline's samples above it.
    pub baseline_above: u64,
    /// The later run's samples above it.
    pub above: u64,
}

/// The exceedance test of figure `f` (a percentile or the maximum) of `b`
/// against the baseline `a`: when b's figure is higher, b's samples above
/// a's figure against a's; when lower, a's samples above b's figure against
/// b's. Returns the two-sided p-value, the verdict and the counts.
pub fn tail_test(a: &Ranks, b: &Ranks, f: Figure) -> (f64, Change, TailCount) {
    let (va, vb) = (a.value(f), b.value(f));
    let (na, nb) = (a.count() as f64, b.count() as f64);
    if vb >= va {
        let u = va as i64;
        let t = TailCount { threshold_ns: va, baseline_above: a.count_above(u), above: b.count_above(u) };
        let (upper, _) = two_counts(t.baseline_above, na, t.above, nb);
        let p = (2.0 * upper).min(1.0);
        (p, if p < 1.0 - CONFIDENCE && vb > va { Change::Worse } else { Change::WithinNoise }, t)
    } else {
        let u = vb as i64;
        let t = TailCount { threshold_ns: vb, baseline_above: a.count_above(u), above: b.count_above(u) };
        let (upper, _) = two_counts(t.above, nb, t.baseline_above, na);
        let p = (2.0 * upper).min(1.0);
        (p, if p < 1.0 - CONFIDENCE { Change::Better } else { Change::WithinNoise }, t)
    }
}
