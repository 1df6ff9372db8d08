//! Comparing runs: per series and figure, each run's value, its ratio to
//! the first run's, and whether the difference is beyond the runs' sampling
//! noise; per count the runs store (missed periods, lost datagrams, noise
//! interruptions), its rate and whether that changed beyond chance.
//!
//! Three tests, each where it works:
//!
//! - **Bootstrap** (mean and percentiles with at least [`MIN_TAIL`] samples
//!   above them in both runs): a 95 % interval of the ratio. A run with at
//!   least [`MIN_INTERVALS`] checkpoint intervals holding samples is
//!   resampled by whole intervals (grouped into at most [`MAX_BLOCKS`]
//!   consecutive blocks), so that bursts of latency stay together and the
//!   interval is as wide as the run's own variation over time. A shorter
//!   run is resampled by single samples: a percentile of a resample is an
//!   order statistic of the run's own histogram, the k-th smallest of n
//!   values drawn with replacement being the original's `ceil(n U)`-th
//!   smallest with `U ~ Beta(k, n + 1 - k)`; the mean's replicate is normal
//!   with the histogram's variance.
//! - **Exceedance** (the maximum, and a percentile too far in the tail for
//!   the bootstrap): the samples of the later run above the baseline's
//!   figure against those of the baseline (none, for the maximum). If both
//!   runs came from one distribution, each of the `m` samples above that
//!   value is the later run's with probability `n_B / (n_A + n_B)`: the
//!   count is Binomial(m, n_B / (n_A + n_B)), the exact conditional test of
//!   two rates (the large-sample limit of the permutation test of the runs'
//!   ranks). A single sample beyond the baseline's maximum is then as
//!   likely as not (p = 1); a new population of spikes is not.
//! - **Poisson** (counts): `k` events over an exposure `t` per run; under
//!   one rate, given the total, the later run's count is Binomial with the
//!   share of the exposure as its probability.
//!
//! Each is two-sided at 1 - [`CONFIDENCE`]. The tests see sampling noise
//! only: two runs of the same machine also differ by what changed between
//! them (the host, the time of day). A gate therefore asks for a difference
//! beyond the noise, larger than a practical margin and than an absolute
//! floor, on chosen rows, as `rtscope compare --max-regression` does.

use crate::episode::Stages;
use crate::hist::{Tally, signed_buckets};
use crate::run::{Run, RunStatus, Series};
use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, DiscreteCDF};

/// The load a series was measured under (`rtscope run`'s assessments store
/// it); a run of a single probe has one implicit load (the machine as it
/// was), named by the empty string. Series group by this key in reports and
/// comparisons.
pub fn load_of(series: &Series) -> &str {
    series.key.load.as_deref().unwrap_or("")
}

/// Bootstrap replicates per interval: the 2.5 % and 97.5 % points of 2000
/// replicates move by about 1 % of the interval's width between seeds.
pub const REPLICATES: usize = 2000;
/// Two-sided coverage of the ratio's interval; every test's level is 1 - this.
pub const CONFIDENCE: f64 = 0.95;
/// A percentile gets a bootstrap interval only when at least this many
/// samples lie above it in both runs; with fewer the exceedance test
/// judges it.
pub const MIN_TAIL: f64 = 10.0;
/// A run is bootstrapped by whole checkpoint intervals when at least this
/// many of the row's intervals hold samples; by single samples otherwise.
pub const MIN_INTERVALS: usize = 10;
/// At most this many blocks of consecutive intervals are resampled (a
/// 12-hour run's 4320 intervals of 10 s make 99 blocks of 44): the cost of
/// a replicate stays bounded and a block spans more of a long run's
/// dependence.
pub const MAX_BLOCKS: usize = 100;
/// `--min-delta`'s default: a figure that moved by less than 1 us never
/// fails the gate.
pub const DEFAULT_MIN_DELTA_NS: u64 = 1_000;

/// The figures compared, in order: (name, what it is).
pub const FIGURES: [(&str, Figure); 6] = [
    ("mean", Figure::Mean),
    ("p50", Figure::Quantile(0.5)),
    ("p99", Figure::Quantile(0.99)),
    ("p99.9", Figure::Quantile(0.999)),
    ("p99.99", Figure::Quantile(0.9999)),
    ("max", Figure::Max),
];

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Figure {
    Mean,
    Quantile(f64),
    Max,
}

/// A distribution's (value, samples) per non-empty bucket, ascending; the
/// value is the bucket's top as HdrHistogram reports it, within the exact
/// range (as `Tally::quantile` takes it), overflows at the exact maximum.
/// With each bucket's bottom (samples of two runs in one bucket are not
/// told apart) and midpoint (for the variance).
fn points(t: &Tally) -> Vec<(i64, i64, f64, u64)> {
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
    cum: Vec<(i64, u64)>,
    /// Each bucket's bottom.
    lows: Vec<i64>,
    n: u64,
    mean: f64,
    var: f64,
    max: i64,
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
    fn rank_of(&self, q: f64) -> u64 {
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
    fn replicate(&self, f: Figure, rng: &mut Rng) -> f64 {
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
    values: Vec<i64>,
    blocks: Vec<Block>,
    /// Intervals per block.
    pub per_block: usize,
}

impl Blocks {
    /// None when fewer than [`MIN_INTERVALS`] intervals hold samples.
    pub fn new(intervals: &[IntervalPoints]) -> Option<Blocks> {
        if intervals.iter().filter(|i| i.n > 0).count() < MIN_INTERVALS {
            return None;
        }
        let per_block = intervals.len().div_ceil(MAX_BLOCKS);
        let mut values: Vec<i64> = intervals.iter().flat_map(|i| i.points.iter().map(|p| p.0)).collect();
        values.sort_unstable();
        values.dedup();
        let blocks = intervals
            .chunks(per_block)
            .map(|chunk| {
                let mut entries: Vec<(u32, u64)> = chunk
                    .iter()
                    .flat_map(|i| &i.points)
                    .map(|&(v, c)| (values.binary_search(&v).unwrap_or(0) as u32, c))
                    .collect();
                entries.sort_unstable_by_key(|e| e.0);
                entries.dedup_by(|later, kept| {
                    if later.0 == kept.0 {
                        kept.1 += later.1;
                        true
                    } else {
                        false
                    }
                });
                (entries, chunk.iter().map(|i| i.sum).sum(), chunk.iter().map(|i| i.n).sum())
            })
            .collect();
        Some(Blocks { values, blocks, per_block })
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
    fn replicates(&self, figures: &[Figure], reps: usize, rng: &mut Rng) -> Vec<Vec<f64>> {
        let mut out = vec![Vec::with_capacity(reps); figures.len()];
        let mut acc = vec![0u64; self.values.len()];
        let nb = self.blocks.len() as u64;
        let mut quantiles: Vec<(usize, f64)> = figures
            .iter()
            .enumerate()
            .filter_map(|(i, f)| if let Figure::Quantile(q) = f { Some((i, *q)) } else { None })
            .collect();
        quantiles.sort_by(|a, b| a.1.total_cmp(&b.1));
        for _ in 0..reps {
            let (mut n, mut sum) = (0u64, 0f64);
            // A replicate of empty blocks only says nothing: draw again
            // (at least MIN_INTERVALS intervals hold samples).
            for _ in 0..100 {
                acc.iter_mut().for_each(|a| *a = 0);
                (n, sum) = (0, 0.0);
                for _ in 0..nb {
                    let (entries, s, c) = &self.blocks[rng.below(nb) as usize];
                    for &(i, k) in entries {
                        acc[i as usize] += k;
                    }
                    sum += s;
                    n += c;
                }
                if n > 0 {
                    break;
                }
            }
            let mut max = 0i64;
            let mut at = vec![0i64; figures.len()];
            let mut qi = 0;
            let mut cum = 0u64;
            for (i, &k) in acc.iter().enumerate() {
                if k == 0 {
                    continue;
                }
                cum += k;
                max = self.values[i];
                while qi < quantiles.len() && cum >= rank(quantiles[qi].1, n) {
                    at[quantiles[qi].0] = self.values[i];
                    qi += 1;
                }
            }
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

/// The rank of quantile `q` among `n` samples, as [`Tally::quantile`] takes it.
fn rank(q: f64, n: u64) -> u64 {
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
fn counts_verdict(k_a: u64, w_a: f64, k_b: u64, w_b: f64) -> (f64, Change) {
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

/// What a run's figure did against the first run's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// The first run: what the others are compared with.
    Baseline,
    /// Higher beyond the noise: the interval of the ratio lies above 1, or
    /// the exceedance or Poisson test says so.
    Worse,
    /// Lower beyond the noise.
    Better,
    /// The difference is within the runs' noise.
    WithinNoise,
    /// No test: a ratio undefined (a baseline at or below 0, a negative value).
    Untested,
    /// The series is not in this run (or the baseline lacks it).
    Missing,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Baseline => "baseline",
            Change::Worse => "worse",
            Change::Better => "better",
            Change::WithinNoise => "within noise",
            Change::Untested => "untested",
            Change::Missing => "missing",
        }
    }
}

/// Which test judged a figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Test {
    /// A bootstrap interval of the ratio.
    Bootstrap,
    /// Samples above a figure counted in both runs.
    Exceedance,
    /// Two event counts over their exposures.
    Poisson,
}

impl Test {
    pub fn as_str(self) -> &'static str {
        match self {
            Test::Bootstrap => "bootstrap",
            Test::Exceedance => "exceedance",
            Test::Poisson => "poisson",
        }
    }
}

/// How a run was resampled for the bootstrap of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resampling {
    /// Whole checkpoint intervals (blocks of them).
    Intervals,
    /// Single samples (fewer than MIN_INTERVALS intervals hold samples).
    Samples,
}

/// One figure of one series across the runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FigureCmp {
    pub figure: String,
    /// Per run, ns (None: the run lacks the series).
    pub values_ns: Vec<Option<f64>>,
    /// Per run, value / the first run's (None where undefined).
    pub ratios: Vec<Option<f64>>,
    /// Per run, the bootstrap interval of the ratio (bootstrap test only).
    pub intervals: Vec<Option<[f64; 2]>>,
    /// Per run, the test that judged it (None: the baseline, missing, untested).
    pub tests: Vec<Option<Test>>,
    /// Per run, the exceedance test's two-sided p-value.
    pub p_values: Vec<Option<f64>>,
    /// Per run, what the exceedance test counted.
    pub tails: Vec<Option<TailCount>>,
    pub changes: Vec<Change>,
}

/// One series (or the merge of a probe's CPUs) across the runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeriesCmp {
    pub load: String,
    pub probe: String,
    pub metric: String,
    /// The CPU, or None for all CPUs of the run merged.
    pub cpu: Option<i64>,
    /// Whether this row is the metric's summary: its CPUs merged, or its
    /// only CPU.
    pub summary: bool,
    /// Whether `--max-regression` gates on this row.
    pub gated: bool,
    pub counts: Vec<Option<u64>>,
    /// Per run, how the bootstrap resampled it.
    pub resampled: Vec<Option<Resampling>>,
    pub figures: Vec<FigureCmp>,
}

fn row_label(probe: &str, metric: &str, cpu: Option<i64>, load: &str) -> String {
    let cpu = cpu.map_or_else(|| "all CPUs".to_string(), |c| format!("cpu{c}"));
    let load = if load.is_empty() { String::new() } else { format!(" [{load}]") };
    format!("{probe} {metric} {cpu}{load}")
}

impl SeriesCmp {
    /// `wakeup latency cpu1`, `wakeup latency all CPUs`, with the load when there is one.
    pub fn label(&self) -> String {
        row_label(&self.probe, &self.metric, self.cpu, &self.load)
    }
}

/// A count a run stores (missed periods, lost datagrams, interruptions)
/// across the runs, as a rate over its exposure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RateCmp {
    pub load: String,
    pub probe: String,
    /// The metric the count belongs to (`datagrams` for netlat's per-CPU counts).
    pub metric: String,
    /// What is counted: `overruns`, `missed`, `lost`, `reordered`, `rate` (noise interruptions) ...
    pub figure: String,
    pub cpu: Option<i64>,
    pub summary: bool,
    pub gated: bool,
    pub counts: Vec<Option<u64>>,
    /// Per run, the time the count accrued over, s.
    pub exposure_s: Vec<Option<f64>>,
    pub rates_per_s: Vec<Option<f64>>,
    /// Per run, its rate / the baseline's (None: undefined, a baseline of 0).
    pub ratios: Vec<Option<f64>>,
    /// Per run, the Poisson test's two-sided p-value.
    pub p_values: Vec<Option<f64>>,
    pub changes: Vec<Change>,
}

impl RateCmp {
    pub fn label(&self) -> String {
        row_label(&self.probe, &self.metric, self.cpu, &self.load)
    }
}

/// Every row of a comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Compared {
    pub series: Vec<SeriesCmp>,
    pub rates: Vec<RateCmp>,
}

/// The key of a compared row: (load, probe, metric, cpu or None for all).
type Key = (String, String, String, Option<i64>);

/// A row's data in one run: the whole-run tally and the checkpoint
/// intervals (per CPU: by sequence number, merged across CPUs).
struct RowData {
    tally: Tally,
    intervals: Vec<(u32, IntervalPoints)>,
}

fn interval_points(s: &Series) -> Vec<(u32, IntervalPoints)> {
    s.intervals.iter().filter_map(|iv| iv.tally().ok().map(|t| (iv.seq, IntervalPoints::of(&t)))).collect()
}

/// The data of each row key in a run: every series, and per probe and
/// metric the merge of its CPUs when it has several.
fn row_data(run: &Run) -> Vec<(Key, RowData)> {
    let mut out: Vec<(Key, RowData)> = Vec::new();
    let mut all: Vec<(Key, RowData, usize)> = Vec::new();
    for s in &run.series {
        let load = load_of(s).to_string();
        let ivs = interval_points(s);
        let k = (load.clone(), s.key.probe.clone(), s.key.metric.clone(), None);
        match all.iter_mut().find(|(x, _, _)| *x == k) {
            Some((_, d, n)) => {
                d.tally.merge(s.total());
                for (seq, p) in &ivs {
                    match d.intervals.iter_mut().find(|(q, _)| q == seq) {
                        Some((_, mine)) => mine.merge(p),
                        None => d.intervals.push((*seq, p.clone())),
                    }
                }
                *n += 1;
            }
            None => all.push((k, RowData { tally: s.total().clone(), intervals: ivs.clone() }, 1)),
        }
        out.push((
            (load, s.key.probe.clone(), s.key.metric.clone(), Some(s.key.cpu)),
            RowData { tally: s.total().clone(), intervals: ivs },
        ));
    }
    out.extend(all.into_iter().filter(|(_, _, n)| *n > 1).map(|(k, mut d, _)| {
        d.intervals.sort_by_key(|(seq, _)| *seq);
        (k, d)
    }));
    out
}

/// A run's side of a row, ready to test.
pub struct Sample {
    pub ranks: Ranks,
    /// Its intervals in blocks, when there are enough.
    pub blocks: Option<Blocks>,
}

impl Sample {
    /// A sample resampled by single samples only.
    pub fn of(t: &Tally) -> Sample {
        Sample { ranks: Ranks::new(t), blocks: None }
    }

    /// With its checkpoint intervals, in time order.
    pub fn with_intervals(t: &Tally, intervals: &[IntervalPoints]) -> Sample {
        Sample { ranks: Ranks::new(t), blocks: Blocks::new(intervals) }
    }

    pub fn resampling(&self) -> Resampling {
        if self.blocks.is_some() { Resampling::Intervals } else { Resampling::Samples }
    }

    /// Bootstrap replicates of each of [`FIGURES`] that the run can be
    /// tested on (None for the others).
    fn replicates(&self, rng: &mut Rng) -> Vec<Option<Vec<f64>>> {
        let testable: Vec<bool> = FIGURES.iter().map(|(_, f)| self.ranks.testable(*f)).collect();
        match &self.blocks {
            Some(b) => {
                let figures: Vec<Figure> = FIGURES.iter().map(|(_, f)| *f).collect();
                let all = b.replicates(&figures, REPLICATES, rng);
                all.into_iter().zip(testable).map(|(r, t)| t.then_some(r)).collect()
            }
            None => FIGURES
                .iter()
                .zip(testable)
                .map(|(&(_, f), t)| t.then(|| (0..REPLICATES).map(|_| self.ranks.replicate(f, rng)).collect()))
                .collect(),
        }
    }
}

/// The order rows appear in: per load and probe, the measured metrics in
/// the order the first run's probe made them, then the stage series of a
/// traced run; per metric the CPUs in order and the merged row last.
fn sort_keys<T>(keys: &mut [T], runs: &[&Run], key: impl Fn(&T) -> (&str, &str, &str, Option<i64>, &str)) {
    let planned: Vec<&str> = runs
        .first()
        .and_then(|r| r.plan["metrics"].as_array())
        .map(|a| a.iter().filter_map(|m| m.as_str()).collect())
        .unwrap_or_default();
    let stage = |m: &str| Stages::SERIES.iter().chain(&Stages::NET_SERIES).position(|s| *s == m);
    let rank = |m: &str| match (planned.iter().position(|p| *p == m), stage(m)) {
        (Some(i), _) => (0, i),
        (None, None) => (1, 0),
        (None, Some(i)) => (2, i),
    };
    keys.sort_by(|a, b| {
        let (a, b) = (key(a), key(b));
        (a.0, a.1, rank(a.2), a.2, a.3.is_none(), a.3, a.4).cmp(&(b.0, b.1, rank(b.2), b.2, b.3.is_none(), b.3, b.4))
    });
}

/// Marks the summary row of each (load, probe, metric): the merged row,
/// or the metric's only CPU.
fn mark_summaries<'a>(rows: impl Iterator<Item = (&'a str, &'a str, &'a str, Option<i64>, &'a mut bool)>) {
    let rows: Vec<_> = rows.collect();
    let groups: Vec<(&str, &str, &str, bool)> = rows.iter().map(|r| (r.0, r.1, r.2, r.3.is_none())).collect();
    for (i, row) in rows.into_iter().enumerate() {
        let (l, p, m) = (groups[i].0, groups[i].1, groups[i].2);
        let merged_exists = groups.iter().any(|g| g.0 == l && g.1 == p && g.2 == m && g.3);
        *row.4 = row.3.is_none() || !merged_exists;
    }
}

/// Compares `runs` (the first is the baseline): a row per series any of
/// them has, per CPU and merged over CPUs, in the first run's order, and a
/// row per count they store. No row is gated yet: see [`Compared::gate_rows`].
pub fn compare(runs: &[&Run]) -> Compared {
    let per_run: Vec<Vec<(Key, RowData)>> = runs.iter().map(|r| row_data(r)).collect();
    let mut keys: Vec<Key> = Vec::new();
    for list in &per_run {
        for (k, _) in list {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    sort_keys(&mut keys, runs, |k| (&k.0, &k.1, &k.2, k.3, ""));
    let mut rng = Rng::new(0x0072_7473_636f_7065); // "rtscope"
    let mut series: Vec<SeriesCmp> = keys
        .into_iter()
        .map(|k| {
            let samples: Vec<Option<Sample>> = per_run
                .iter()
                .map(|list| {
                    list.iter().find(|(x, _)| *x == k).map(|(_, d)| {
                        let ivs: Vec<IntervalPoints> = d.intervals.iter().map(|(_, p)| p.clone()).collect();
                        Sample::with_intervals(&d.tally, &ivs)
                    })
                })
                .collect();
            let refs: Vec<Option<&Sample>> = samples.iter().map(Option::as_ref).collect();
            SeriesCmp {
                load: k.0,
                probe: k.1,
                metric: k.2,
                cpu: k.3,
                summary: false,
                gated: false,
                counts: samples.iter().map(|s| s.as_ref().map(|s| s.ranks.count())).collect(),
                resampled: samples.iter().map(|s| s.as_ref().map(Sample::resampling)).collect(),
                figures: compare_figures(&refs, &mut rng),
            }
        })
        .collect();
    mark_summaries(
        series.iter_mut().map(|s| (s.load.as_str(), s.probe.as_str(), s.metric.as_str(), s.cpu, &mut s.summary)),
    );
    let mut rates = compare_rates(runs);
    mark_summaries(
        rates.iter_mut().map(|r| (r.load.as_str(), r.probe.as_str(), r.metric.as_str(), r.cpu, &mut r.summary)),
    );
    Compared { series, rates }
}

/// Every figure of a row: the runs' samples (None: the run lacks it).
pub fn compare_figures(samples: &[Option<&Sample>], rng: &mut Rng) -> Vec<FigureCmp> {
    let samples: Vec<Option<&Sample>> = samples.iter().map(|s| s.filter(|s| s.ranks.n > 0)).collect();
    let reps: Vec<Option<Vec<Option<Vec<f64>>>>> = samples.iter().map(|s| s.map(|s| s.replicates(rng))).collect();
    FIGURES
        .iter()
        .enumerate()
        .map(|(fi, &(name, f))| {
            let reps: Vec<Option<&Vec<f64>>> = reps.iter().map(|r| r.as_ref().and_then(|r| r[fi].as_ref())).collect();
            compare_figure(name, f, &samples, &reps)
        })
        .collect()
}

fn compare_figure(name: &str, f: Figure, samples: &[Option<&Sample>], reps: &[Option<&Vec<f64>>]) -> FigureCmp {
    let n = samples.len();
    let mut cmp = FigureCmp {
        figure: name.into(),
        values_ns: samples.iter().map(|s| s.map(|s| s.ranks.value(f))).collect(),
        ratios: vec![None; n],
        intervals: vec![None; n],
        tests: vec![None; n],
        p_values: vec![None; n],
        tails: vec![None; n],
        changes: vec![Change::Missing; n],
    };
    let Some(base) = samples.first().copied().flatten() else { return cmp };
    cmp.changes[0] = Change::Baseline;
    cmp.ratios[0] = Some(1.0);
    let b0 = base.ranks.value(f);
    for (i, other) in samples.iter().enumerate().skip(1) {
        let Some(other) = other else { continue };
        let v = other.ranks.value(f);
        if b0 <= 0.0 || v < 0.0 {
            cmp.changes[i] = Change::Untested;
            continue;
        }
        cmp.ratios[i] = Some(v / b0);
        if let (Some(ra), Some(rb)) = (reps[0], reps[i]) {
            let mut ratios: Vec<f64> =
                ra.iter().zip(rb).map(|(a, b)| if *a > 0.0 { b / a } else { f64::INFINITY }).collect();
            ratios.sort_by(f64::total_cmp);
            let tail = (1.0 - CONFIDENCE) / 2.0;
            let at = |p: f64| ratios[((p * ratios.len() as f64) as usize).min(ratios.len() - 1)];
            let (lo, hi) = (at(tail), at(1.0 - tail));
            cmp.intervals[i] = Some([lo, hi]);
            cmp.tests[i] = Some(Test::Bootstrap);
            cmp.changes[i] = if lo > 1.0 {
                Change::Worse
            } else if hi < 1.0 {
                Change::Better
            } else {
                Change::WithinNoise
            };
        } else if f == Figure::Mean {
            // Fewer than 2 samples: no spread to test against.
            cmp.changes[i] = Change::Untested;
        } else {
            let (p, change, counted) = tail_test(&base.ranks, &other.ranks, f);
            cmp.tests[i] = Some(Test::Exceedance);
            cmp.p_values[i] = Some(p);
            cmp.tails[i] = Some(counted);
            cmp.changes[i] = change;
        }
    }
    cmp
}

/// Counts stored in a series' `extra` compared as rates: (probe, key,
/// counted per CPU rather than per metric (then shown under the metric
/// `datagrams`), absent means 0).
const EXTRA_COUNTS: [(&str, &str, bool, bool); 5] = [
    ("ptimer", "missed", false, false),
    ("netlat", "lost", true, false),
    ("netlat", "reordered", true, false),
    ("netlat", "duplicates", true, false),
    ("sleep", "failed_calls", false, true),
];

/// The key of a rate row: (load, probe, metric, figure, cpu or None).
type RateKey = (String, String, String, String, Option<i64>);

/// A series' measured time, ns: its intervals' lengths.
fn exposure_ns(s: &Series) -> u64 {
    s.intervals.iter().map(|i| i.end_ns.saturating_sub(i.start_ns)).sum()
}

/// The counts of a run: (key, count, exposure ns), per CPU and merged.
fn rate_data(run: &Run) -> Vec<(RateKey, u64, u64)> {
    let mut out: Vec<(RateKey, u64, u64)> = Vec::new();
    for s in &run.series {
        if Stages::is_series(&s.key.metric) {
            continue;
        }
        let load = load_of(s).to_string();
        let (probe, metric, cpu) = (s.key.probe.clone(), s.key.metric.clone(), Some(s.key.cpu));
        let t = exposure_ns(s);
        out.push(((load.clone(), probe.clone(), metric.clone(), "overruns".into(), cpu), s.overruns(), t));
        if probe == "noise" {
            let active = s.extra.get("active_ns").and_then(|v| v.as_u64()).filter(|&a| a > 0).unwrap_or(t);
            out.push(((load.clone(), probe.clone(), metric.clone(), "rate".into(), cpu), s.total().count(), active));
        }
        for (p, key, per_cpu, absent_zero) in EXTRA_COUNTS {
            if p != probe {
                continue;
            }
            let Some(k) = s.extra.get(key).and_then(|v| v.as_u64()).or(absent_zero.then_some(0)) else { continue };
            let m = if per_cpu { "datagrams".to_string() } else { metric.clone() };
            let rk = (load.clone(), probe.clone(), m, key.to_string(), cpu);
            // A per-CPU count is stored on each of the CPU's metrics: once.
            if !out.iter().any(|(x, _, _)| *x == rk) {
                out.push((rk, k, t));
            }
        }
    }
    let mut merged: Vec<(RateKey, u64, u64, usize)> = Vec::new();
    for (k, c, t) in &out {
        let mk = (k.0.clone(), k.1.clone(), k.2.clone(), k.3.clone(), None);
        match merged.iter_mut().find(|(x, ..)| *x == mk) {
            Some((_, mc, mt, n)) => {
                *mc += c;
                *mt += t;
                *n += 1;
            }
            None => merged.push((mk, *c, *t, 1)),
        }
    }
    out.extend(merged.into_iter().filter(|m| m.3 > 1).map(|(k, c, t, _)| (k, c, t)));
    out
}

fn compare_rates(runs: &[&Run]) -> Vec<RateCmp> {
    let per_run: Vec<Vec<(RateKey, u64, u64)>> = runs.iter().map(|r| rate_data(r)).collect();
    let mut keys: Vec<RateKey> = Vec::new();
    for list in &per_run {
        for (k, _, _) in list {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    // Overruns only where some run had one: every series stores them.
    keys.retain(|k| {
        k.3 != "overruns" || per_run.iter().flatten().any(|(x, c, _)| x.1 == k.1 && x.2 == k.2 && x.3 == k.3 && *c > 0)
    });
    sort_keys(&mut keys, runs, |k| (&k.0, &k.1, &k.2, k.4, &k.3));
    keys.into_iter()
        .map(|k| {
            let got: Vec<Option<(u64, f64)>> = per_run
                .iter()
                .map(|l| l.iter().find(|(x, _, _)| *x == k).map(|(_, c, t)| (*c, *t as f64 / 1e9)))
                .collect();
            let n = got.len();
            let rate = |g: Option<(u64, f64)>| g.filter(|g| g.1 > 0.0).map(|(c, t)| c as f64 / t);
            let mut row = RateCmp {
                load: k.0.clone(),
                probe: k.1.clone(),
                metric: k.2.clone(),
                figure: k.3.clone(),
                cpu: k.4,
                summary: false,
                gated: false,
                counts: got.iter().map(|g| g.map(|g| g.0)).collect(),
                exposure_s: got.iter().map(|g| g.map(|g| g.1)).collect(),
                rates_per_s: got.iter().map(|g| rate(*g)).collect(),
                ratios: vec![None; n],
                p_values: vec![None; n],
                changes: vec![Change::Missing; n],
            };
            if let Some(Some((ka, ta))) = got.first().copied().filter(|g| g.is_some_and(|g| g.1 > 0.0)) {
                row.changes[0] = Change::Baseline;
                row.ratios[0] = Some(1.0);
                for (i, g) in got.iter().enumerate().skip(1) {
                    let Some((kb, tb)) = g.filter(|g| g.1 > 0.0) else { continue };
                    let (ra, rb) = (ka as f64 / ta, kb as f64 / tb);
                    row.ratios[i] = if ra > 0.0 {
                        Some(rb / ra)
                    } else if rb == 0.0 {
                        Some(1.0)
                    } else {
                        None
                    };
                    let (p, change) = counts_verdict(ka, ta, kb, tb);
                    row.p_values[i] = Some(p);
                    row.changes[i] = change;
                }
            }
            row
        })
        .collect()
}

/// A `--gate` selector: `PROBE[.METRIC[.FIGURE[.CPU]]]`, each part a name
/// or a glob with `*`; FIGURE is one of [`FIGURES`]' names or a count's
/// (`overruns`, `missed`, `lost`, ...), CPU is `all` (the default: the
/// merged row, or a metric's only CPU), `cpuN` or `cpu*`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selector {
    pub text: String,
    probe: String,
    metric: String,
    figure: String,
    /// None: the summary rows only.
    cpu: Option<String>,
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters.
pub fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            let Some(tail) = text.strip_prefix(head) else { return false };
            (0..=tail.len()).filter(|&i| tail.is_char_boundary(i)).any(|i| glob(rest, &tail[i..]))
        }
    }
}

impl Selector {
    pub fn parse(text: &str) -> Result<Selector, String> {
        let bad = |why: &str| {
            Err(format!(
                "'{text}' {why}: a selector is PROBE[.METRIC[.FIGURE[.CPU]]], e.g. wakeup.latency.p99, netlat.*.max, \
                 ptimer.*.missed, wakeup.latency.max.cpu*"
            ))
        };
        if text.is_empty() || text.chars().any(|c| !(c.is_ascii_alphanumeric() || "._*-:@".contains(c))) {
            return bad("is not a selector");
        }
        let mut parts = text.splitn(3, '.');
        let probe = parts.next().unwrap_or_default().to_string();
        let metric = parts.next().unwrap_or("*").to_string();
        let mut figure = parts.next().unwrap_or("*").to_string();
        let mut cpu = None;
        if let Some((fig, last)) = figure.rsplit_once('.')
            && (last == "all" || last.starts_with("cpu"))
        {
            if last != "all" {
                cpu = Some(last.to_string());
            }
            figure = fig.to_string();
        } else if figure == "all" || figure.starts_with("cpu") {
            return bad("names a CPU where the figure goes (write PROBE.METRIC.*.CPU)");
        }
        if probe.is_empty() || metric.is_empty() || figure.is_empty() {
            return bad("has an empty part");
        }
        if let Some(c) = &cpu
            && !(c == "cpu*" || c[3..].parse::<u32>().is_ok())
        {
            return bad("has a CPU part that is neither all, cpuN nor cpu*");
        }
        Ok(Selector { text: text.into(), probe, metric, figure, cpu })
    }

    /// Whether the selector picks figure `figure` of the row.
    fn matches(&self, probe: &str, metric: &str, figure: &str, cpu: Option<i64>, summary: bool) -> bool {
        let cpu_ok = match (&self.cpu, cpu) {
            (None, _) => summary,
            (Some(p), Some(c)) => glob(p, &format!("cpu{c}")),
            (Some(_), None) => false,
        };
        cpu_ok && glob(&self.probe, probe) && glob(&self.metric, metric) && glob(&self.figure, figure)
    }
}

/// What `--max-regression` gates on and how.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    /// A figure or rate must rise by more than this, percent.
    pub max_regression_pct: f64,
    /// A figure must rise by at least this, ns (counts: not applied).
    pub min_delta_ns: u64,
    /// `--gate`: the figures gated (empty: every figure of the summary
    /// rows but the trace's stage series).
    pub selectors: Vec<Selector>,
    /// `--allow-incomplete`: a run that did not complete does not fail it.
    pub allow_incomplete: bool,
}

impl Compared {
    /// Marks the rows `gate` judges; with selectors, only the figures they
    /// pick count (see [`regressions`]). Fails naming a selector that
    /// picks nothing.
    pub fn gate_rows(&mut self, gate: &Gate) -> Result<(), String> {
        if gate.selectors.is_empty() {
            for s in &mut self.series {
                s.gated = s.summary && !Stages::is_series(&s.metric);
            }
            for r in &mut self.rates {
                r.gated = r.summary;
            }
            return Ok(());
        }
        for sel in &gate.selectors {
            let mut any = false;
            for s in &mut self.series {
                if FIGURES.iter().any(|(f, _)| sel.matches(&s.probe, &s.metric, f, s.cpu, s.summary)) {
                    s.gated = true;
                    any = true;
                }
            }
            for r in &mut self.rates {
                if sel.matches(&r.probe, &r.metric, &r.figure, r.cpu, r.summary) {
                    r.gated = true;
                    any = true;
                }
            }
            if !any {
                let mut names: Vec<String> = self
                    .series
                    .iter()
                    .filter(|s| s.summary)
                    .map(|s| format!("{}.{}", s.probe, s.metric))
                    .chain(
                        self.rates
                            .iter()
                            .filter(|r| r.summary)
                            .map(|r| format!("{}.{}.{}", r.probe, r.metric, r.figure)),
                    )
                    .collect();
                names.dedup();
                return Err(format!(
                    "--gate {}: no compared row matches; the runs have {} (figures: mean, p50, p99, p99.9, p99.99, max)",
                    sel.text,
                    names.join(", ")
                ));
            }
        }
        Ok(())
    }
}

/// A gated figure or rate that got worse beyond the noise, by more than
/// the margin and the floor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Regression {
    pub series: String,
    /// `probe.metric.figure` (`.cpuN` for a per-CPU row): a `--gate` selector for it.
    pub selector: String,
    pub figure: String,
    /// The run's index among the compared ones (1: the second).
    pub run: usize,
    /// None: the baseline's rate was 0.
    pub ratio: Option<f64>,
    /// The increase, ns (figures only).
    pub delta_ns: Option<f64>,
    pub test: Test,
    /// The bootstrap interval of the ratio.
    pub interval: Option<[f64; 2]>,
    /// The exceedance or Poisson test's two-sided p-value.
    pub p_value: Option<f64>,
}

fn selector_of(probe: &str, metric: &str, figure: &str, cpu: Option<i64>, summary: bool) -> String {
    match cpu {
        Some(c) if !summary => format!("{probe}.{metric}.{figure}.cpu{c}"),
        _ => format!("{probe}.{metric}.{figure}"),
    }
}

/// Every gated figure and rate of `c` (see [`Compared::gate_rows`]) that
/// got worse beyond the noise by more than `max_regression_pct` percent
/// and, for a figure, by at least `min_delta_ns`.
pub fn regressions(c: &Compared, gate: &Gate) -> Vec<Regression> {
    let picked = |probe: &str, metric: &str, figure: &str, cpu: Option<i64>, summary: bool| {
        gate.selectors.is_empty() || gate.selectors.iter().any(|s| s.matches(probe, metric, figure, cpu, summary))
    };
    let mut out = Vec::new();
    for s in c.series.iter().filter(|s| s.gated) {
        for f in s.figures.iter().filter(|f| picked(&s.probe, &s.metric, &f.figure, s.cpu, s.summary)) {
            for (i, ch) in f.changes.iter().enumerate() {
                let (Change::Worse, Some(r), Some(a), Some(b)) = (ch, f.ratios[i], f.values_ns[0], f.values_ns[i])
                else {
                    continue;
                };
                if (r - 1.0) * 100.0 > gate.max_regression_pct && b - a >= gate.min_delta_ns as f64 {
                    out.push(Regression {
                        series: s.label(),
                        selector: selector_of(&s.probe, &s.metric, &f.figure, s.cpu, s.summary),
                        figure: f.figure.clone(),
                        run: i,
                        ratio: Some(r),
                        delta_ns: Some(b - a),
                        test: f.tests[i].unwrap_or(Test::Bootstrap),
                        interval: f.intervals[i],
                        p_value: f.p_values[i],
                    });
                }
            }
        }
    }
    for r in c.rates.iter().filter(|r| r.gated && picked(&r.probe, &r.metric, &r.figure, r.cpu, r.summary)) {
        for (i, ch) in r.changes.iter().enumerate() {
            if *ch == Change::Worse && r.ratios[i].is_none_or(|x| (x - 1.0) * 100.0 > gate.max_regression_pct) {
                out.push(Regression {
                    series: r.label(),
                    selector: selector_of(&r.probe, &r.metric, &r.figure, r.cpu, r.summary),
                    figure: r.figure.clone(),
                    run: i,
                    ratio: r.ratios[i],
                    delta_ns: None,
                    test: Test::Poisson,
                    interval: None,
                    p_value: r.p_values[i],
                });
            }
        }
    }
    out
}

/// The runs that did not run to their planned end: (index, status).
pub fn incomplete(runs: &[&Run]) -> Vec<(usize, RunStatus)> {
    runs.iter()
        .enumerate()
        .filter(|(_, r)| r.header.status != RunStatus::Complete)
        .map(|(i, r)| (i, r.header.status))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(values: impl IntoIterator<Item = u64>) -> Tally {
        let mut t = Tally::new();
        for v in values {
            t.record(v);
        }
        t
    }

    /// Deterministic pseudo-latencies: 10 us plus an exponential tail of
    /// mean `tail_ns`.
    fn latencies(n: usize, tail_ns: f64, seed: u64) -> Tally {
        let mut rng = Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        tally((0..n).map(|_| 10_000 + (-rng.uniform().ln() * tail_ns) as u64))
    }

    #[test]
    fn ranks_agree_with_the_tallys_quantiles() {
        let t = latencies(50_000, 3_000.0, 1);
        let r = Ranks::new(&t);
        assert_eq!(r.count(), 50_000);
        for q in [0.0, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
            assert_eq!(r.quantile(q), t.quantile(q), "q {q}");
        }
        assert_eq!(r.at_rank(u64::MAX), t.max());
        assert!((r.value(Figure::Mean) - t.mean()).abs() < 1e-6);
        // Overflows are the largest samples, at the exact maximum.
        let o = tally([5, 6, 200_000_000_000]);
        assert_eq!(Ranks::new(&o).quantile(1.0), 200_000_000_000);
        assert_eq!(Ranks::new(&o).quantile(0.5), 6);
    }

    #[test]
    fn signed_tallies_rank_their_negative_values_first() {
        let mut t = Tally::new_signed();
        for v in [-3_000i64, -1_000, 500, 2_000] {
            t.record_signed(v);
        }
        let r = Ranks::new(&t);
        assert_eq!(r.count(), 4);
        for q in [0.25, 0.5, 0.75, 1.0] {
            assert_eq!(r.quantile(q), t.quantile(q), "q {q}");
        }
    }

    #[test]
    fn samplers_have_the_right_moments() {
        let mut rng = Rng::new(7);
        let n = 20_000;
        let g: Vec<f64> = (0..n).map(|_| rng.gamma(3.0)).collect();
        let mean = g.iter().sum::<f64>() / n as f64;
        assert!((mean - 3.0).abs() < 0.06, "gamma mean {mean}");
        let small: f64 = (0..n).map(|_| rng.gamma(0.5)).sum::<f64>() / n as f64;
        assert!((small - 0.5).abs() < 0.03, "gamma(0.5) mean {small}");
        let b: f64 = (0..n).map(|_| rng.beta(2.0, 6.0)).sum::<f64>() / n as f64;
        assert!((b - 0.25).abs() < 0.01, "beta mean {b}");
        let z: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
        let var = z.iter().map(|x| x * x).sum::<f64>() / n as f64;
        assert!((var - 1.0).abs() < 0.05, "normal variance {var}");
    }

    /// Every figure of two tallies compared by single samples.
    fn figures_of(a: &Tally, b: &Tally, rng: &mut Rng) -> Vec<FigureCmp> {
        let (a, b) = (Sample::of(a), Sample::of(b));
        compare_figures(&[Some(&a), Some(&b)], rng)
    }

    fn figure<'a>(figs: &'a [FigureCmp], name: &str) -> &'a FigureCmp {
        figs.iter().find(|f| f.figure == name).unwrap()
    }

    #[test]
    fn intervals_hold_one_for_samples_of_one_distribution() {
        // 95 % intervals: about 1 in 20 pairs of same-law samples may
        // miss; 40 pairs with at most 4 misses per figure.
        let mut rng = Rng::new(11);
        let mut same = [0usize; 3];
        for s in 0..40 {
            let figs = figures_of(
                &latencies(20_000, 3_000.0, 2 * s + 100),
                &latencies(20_000, 3_000.0, 2 * s + 101),
                &mut rng,
            );
            for (i, name) in ["p50", "p99.9", "mean"].iter().enumerate() {
                let f = figure(&figs, name);
                assert_eq!(f.tests[1], Some(Test::Bootstrap), "{name}");
                same[i] += usize::from(f.changes[1] == Change::WithinNoise);
            }
        }
        assert!(same.iter().all(|&n| n >= 36), "within noise of 40: {same:?}");
    }

    /// A run whose first series has one interval per tally.
    fn run_of(intervals: &[Tally]) -> Run {
        let mut run = crate::store::tests_support::sample_run();
        run.series.truncate(1);
        let ivs = intervals
            .iter()
            .enumerate()
            .map(|(i, t)| {
                crate::run::Interval::new(i as u32, i as u64 * 1_000_000_000, (i as u64 + 1) * 1_000_000_000, t, 0, 0)
            })
            .collect();
        let key = run.series[0].key.clone();
        run.series[0] = Series::new(key, "ns".into(), "adaptive".into(), ivs, vec![]).unwrap();
        run
    }

    fn run_with(t: &Tally) -> Run {
        run_of(std::slice::from_ref(t))
    }

    fn gate(pct: f64) -> Gate {
        Gate { max_regression_pct: pct, min_delta_ns: DEFAULT_MIN_DELTA_NS, selectors: vec![], allow_incomplete: false }
    }

    fn gated(c: &Compared, g: &Gate) -> Vec<Regression> {
        let mut c = c.clone();
        c.gate_rows(g).unwrap();
        regressions(&c, g)
    }

    #[test]
    fn the_same_distribution_is_within_noise_and_a_heavier_tail_is_worse() {
        let a = run_with(&latencies(40_000, 3_000.0, 1));
        let same = run_with(&latencies(40_000, 3_000.0, 2));
        let worse = run_with(&latencies(40_000, 6_000.0, 3));
        let c = compare(&[&a, &same, &worse]);
        let rows = &c.series;
        assert_eq!(rows.len(), 1);
        assert!(rows[0].summary, "a metric's only CPU is its summary row");
        assert_eq!(rows[0].resampled, vec![Some(Resampling::Samples); 3], "one interval: single samples");
        let get = |name: &str| figure(&rows[0].figures, name).clone();
        for name in ["mean", "p50", "p99", "p99.9"] {
            let f = get(name);
            assert_eq!(f.changes[0], Change::Baseline);
            assert_eq!(f.changes[1], Change::WithinNoise, "{name}: {f:?}");
            let [lo, hi] = f.intervals[1].unwrap();
            assert!(lo < 1.0 && hi > 1.0 && hi - lo < 0.3, "{name}: {lo}..{hi}");
            assert_eq!(f.changes[2], Change::Worse, "{name}: {f:?}");
            assert!(f.ratios[2].unwrap() > 1.1, "{name}");
        }
        // p99.99 of 40000 samples has 4 above it, and the maximum is one
        // sample: both go to the exceedance test, which sees the heavier tail.
        for name in ["p99.99", "max"] {
            let f = get(name);
            assert_eq!(f.tests[2], Some(Test::Exceedance), "{name}");
            assert_eq!(f.changes[2], Change::Worse, "{name}: {f:?}");
            assert!(f.p_values[2].unwrap() < 0.01, "{name}: {f:?}");
            assert_ne!(f.changes[1], Change::Worse, "{name}: {f:?}");
        }
        // The gate: a regression beyond the noise and above the limit.
        let r = gated(&c, &gate(20.0));
        assert!(r.iter().any(|r| r.figure == "p99" && r.run == 2 && r.test == Test::Bootstrap), "{r:?}");
        assert!(r.iter().any(|r| r.figure == "max" && r.test == Test::Exceedance), "{r:?}");
        assert!(r.iter().all(|r| r.run == 2));
        assert!(gated(&c, &gate(1000.0)).is_empty());
        // Reversed, the heavier tail is the baseline and the others are better.
        let back = compare(&[&worse, &a]);
        assert_eq!(figure(&back.series[0].figures, "p99").changes[1], Change::Better);
        assert_eq!(figure(&back.series[0].figures, "max").changes[1], Change::Better);
        assert!(gated(&back, &gate(0.0)).is_empty());
        // The bootstrap is seeded: the same comparison gives the same answer.
        assert_eq!(compare(&[&a, &same, &worse]), c);
    }

    #[test]
    fn series_missing_from_a_run_are_marked_and_cpus_merge() {
        let run = crate::store::tests_support::sample_run();
        let mut less = run.clone();
        less.series.truncate(1);
        let rows = compare(&[&run, &less]).series;
        let cpus: Vec<Option<i64>> = rows.iter().map(|r| r.cpu).collect();
        assert!(cpus.contains(&None), "CPUs merged: {cpus:?}");
        assert_eq!(cpus.last(), Some(&None), "the merged row comes last");
        let missing = rows.iter().find(|r| r.cpu.is_some() && r.counts[1].is_none()).unwrap();
        assert!(missing.figures.iter().all(|f| f.changes[1] == Change::Missing));
        let merged = rows.iter().find(|r| r.cpu.is_none()).unwrap();
        assert_eq!(merged.counts[0], Some(run.series.iter().map(|s| s.total().count()).sum()));
        assert_eq!(merged.label(), "wakeup latency all CPUs");
        assert!(merged.summary && rows.iter().filter(|r| r.summary).count() == 1, "only the merged row summarises");
    }

    /// `n` samples uniform in 10..20 us, and `spikes` at 500 us + i.
    fn with_spikes(n: u64, spikes: u64) -> Tally {
        tally((0..n - spikes).map(|i| 10_000 + (i * 7919) % 10_000).chain((0..spikes).map(|i| 500_000 + i * 1_000)))
    }

    #[test]
    fn the_exceedance_test_flags_a_spike_population_and_not_an_outlier() {
        // A: 10000 samples, 10 above its p99.9 (at 20 us).
        let a = Ranks::new(&with_spikes(10_000, 10));
        let p999 = Figure::Quantile(0.999);
        assert_eq!(a.count_above(a.value(p999) as i64), 10);
        // B with 30 above A's p99.9: 40 in all, 30 of them B's where 20
        // are expected (p = 0.002): beyond noise.
        let b = Ranks::new(&with_spikes(10_000, 30));
        let (p, change, t) = tail_test(&a, &b, p999);
        assert_eq!((t.baseline_above, t.above), (10, 30));
        assert!(p < 0.005 && change == Change::Worse, "p {p}");
        // With 12 of 22: p = 0.83, within noise.
        let b = Ranks::new(&with_spikes(10_000, 12));
        let (p, change, t) = tail_test(&a, &b, p999);
        assert_eq!((t.baseline_above, t.above), (10, 12));
        assert!(p > 0.5 && change == Change::WithinNoise, "p {p}");
        // One outlier above A's maximum is as likely as not: p = 1.
        let mut one = with_spikes(10_000, 10);
        one.record(2_000_000);
        let (p, change, t) = tail_test(&a, &Ranks::new(&one), Figure::Max);
        assert_eq!((t.baseline_above, t.above), (0, 1));
        assert_eq!((p, change), (1.0, Change::WithinNoise));
        // Eight above it: p = 2 / 2^8 (B has 18 samples more than A).
        let mut eight = with_spikes(10_000, 10);
        for i in 0..8 {
            eight.record(2_000_000 + i * 10_000);
        }
        let (p, change, _) = tail_test(&a, &Ranks::new(&eight), Figure::Max);
        assert!((p - 2.0 / 256.0).abs() < 1e-4 && change == Change::Worse, "p {p}");
        // The other way round: the baseline had the spikes, the run is better.
        let (p, change, t) = tail_test(&Ranks::new(&eight), &a, Figure::Max);
        assert_eq!((t.baseline_above, t.above), (8, 0));
        assert!(p < 0.01 && change == Change::Better, "p {p}");
        // A run of a tenth the size: its share of the exceedances is 1/11,
        // so 3 of 3 above A's maximum (p = 2 / 11^3) is beyond noise.
        let mut small = with_spikes(1_000, 0);
        for v in [3_000_000, 3_100_000, 3_200_000] {
            small.record(v);
        }
        let (p, change, _) = tail_test(&a, &Ranks::new(&small), Figure::Max);
        assert!(p < 0.002 && change == Change::Worse, "p {p}");
    }

    #[test]
    fn two_counts_is_the_exact_conditional_binomial_test() {
        // 0 against 6 over equal exposures: P(all 6 in b) = 1/64.
        let (up, low) = two_counts(0, 1.0, 6, 1.0);
        assert!((up - 1.0 / 64.0).abs() < 1e-12 && (low - 1.0).abs() < 1e-12, "{up} {low}");
        assert_eq!(counts_verdict(0, 1.0, 6, 1.0).1, Change::Worse);
        assert_eq!(counts_verdict(0, 1.0, 5, 1.0).1, Change::WithinNoise, "1/32 two-sided is 0.0625");
        assert_eq!(counts_verdict(10, 1.0, 12, 1.0).1, Change::WithinNoise);
        assert_eq!(counts_verdict(100, 1.0, 40, 1.0).1, Change::Better);
        // Twice the exposure: 20 against 40 is the same rate.
        let (p, c) = counts_verdict(20, 1.0, 40, 2.0);
        assert!(p > 0.5 && c == Change::WithinNoise, "{p}");
        assert_eq!(two_counts(0, 1.0, 0, 1.0), (1.0, 1.0));
        // Large counts: a 1 % change in a million events is beyond noise.
        assert_eq!(counts_verdict(1_000_000, 1.0, 1_010_000, 1.0).1, Change::Worse);
    }

    /// A run of `k` intervals whose latencies shift together by a random
    /// burst per interval (a noisy neighbour that comes and goes).
    fn bursty(k: usize, seed: u64) -> Vec<Tally> {
        let mut rng = Rng::new(seed);
        (0..k)
            .map(|i| {
                let shift = (rng.uniform() * 8_000.0) as u64;
                let t = latencies(1_000, 2_000.0, seed * 1000 + i as u64);
                let mut s = Tally::new();
                for [lo, _, c] in crate::hist::signed_buckets(&t) {
                    for _ in 0..c {
                        s.record(lo as u64 + shift);
                    }
                }
                s
            })
            .collect()
    }

    #[test]
    fn bursty_runs_are_resampled_by_intervals_and_their_intervals_are_wider() {
        let (mut by_samples, mut by_intervals) = (0, 0);
        for s in 0..10u64 {
            let (a, b) = (run_of(&bursty(12, 2 * s + 1)), run_of(&bursty(12, 2 * s + 2)));
            let row = &compare(&[&a, &b]).series[0];
            assert_eq!(row.resampled, vec![Some(Resampling::Intervals); 2]);
            by_intervals += usize::from(figure(&row.figures, "p50").changes[1] != Change::WithinNoise);
            let ta = a.series[0].total().clone();
            let tb = b.series[0].total().clone();
            let figs = figures_of(&ta, &tb, &mut Rng::new(s));
            by_samples += usize::from(figure(&figs, "p50").changes[1] != Change::WithinNoise);
            // The interval bootstrap's interval holds the sample one's.
            let wide = figure(&row.figures, "p50").intervals[1].unwrap();
            let narrow = figure(&figs, "p50").intervals[1].unwrap();
            assert!(wide[1] - wide[0] > 2.0 * (narrow[1] - narrow[0]), "{wide:?} vs {narrow:?}");
        }
        // Same-law runs: single samples call many of them different, whole
        // intervals about 1 in 20.
        eprintln!("beyond noise of 10 same-law pairs: {by_samples} by samples, {by_intervals} by intervals");
        assert!(by_samples >= 5, "single samples: {by_samples} of 10 beyond noise");
        assert!(by_intervals <= 2, "intervals: {by_intervals} of 10 beyond noise");
    }

    #[test]
    fn blocks_group_long_runs_and_need_enough_intervals() {
        let one = IntervalPoints::of(&tally([1_000, 2_000]));
        assert!(Blocks::new(&vec![one.clone(); MIN_INTERVALS - 1]).is_none());
        let mut sparse = vec![IntervalPoints::default(); 40];
        sparse[..MIN_INTERVALS - 1].fill(one.clone());
        assert!(Blocks::new(&sparse).is_none(), "empty intervals do not count");
        let b = Blocks::new(&vec![one.clone(); 4320]).unwrap();
        assert_eq!((b.len(), b.per_block), (99, 44));
        // The replicates of identical blocks are the blocks' figures.
        let figs = [Figure::Mean, Figure::Quantile(0.5), Figure::Quantile(1.0), Figure::Max];
        let r = b.replicates(&figs, 5, &mut Rng::new(1));
        assert!(r[0].iter().all(|v| (*v - 1_500.0).abs() < 1e-9), "{:?}", r[0]);
        assert!(r[1].iter().all(|v| *v == 1_000.0) && r[2].iter().all(|v| *v == 2_000.0), "{r:?}");
        // Merging the same interval of two CPUs adds their buckets.
        let mut m = one.clone();
        m.merge(&IntervalPoints::of(&tally([1_000, 3_000])));
        assert_eq!(m.points, vec![(1_000, 2), (2_000, 1), (3_000, 1)]);
        assert_eq!((m.n, m.sum), (4, 7_000.0));
    }

    #[test]
    fn selectors_parse_and_pick_rows() {
        let s = Selector::parse("wakeup.latency.p99.9").unwrap();
        assert!(s.matches("wakeup", "latency", "p99.9", None, true));
        assert!(!s.matches("wakeup", "latency", "p99.9", Some(1), false), "per-CPU rows need a CPU part");
        assert!(s.matches("wakeup", "latency", "p99.9", Some(1), true), "a metric's only CPU is its summary");
        assert!(!s.matches("wakeup", "latency", "p99.99", None, true));
        let s = Selector::parse("netlat.*.max").unwrap();
        assert!(
            s.matches("netlat", "rx_total", "max", None, true) && !s.matches("netlat", "rx_total", "p99", None, true)
        );
        let s = Selector::parse("wakeup").unwrap();
        assert!(s.matches("wakeup", "irq", "mean", None, true));
        let s = Selector::parse("wakeup.latency.*.cpu*").unwrap();
        assert!(
            s.matches("wakeup", "latency", "p50", Some(3), false) && !s.matches("wakeup", "latency", "p50", None, true)
        );
        let s = Selector::parse("wakeup.latency.max.cpu2").unwrap();
        assert!(
            s.matches("wakeup", "latency", "max", Some(2), false)
                && !s.matches("wakeup", "latency", "max", Some(3), false)
        );
        let s = Selector::parse("*.*.p99.all").unwrap();
        assert!(s.matches("sleep", "nanosleep_1ms", "p99", None, true));
        for bad in ["", "wakeup..p99", "wakeup.latency.cpu1", "wakeup.latency.max.cpufoo", "a b", "wakeup.latency.p99/"]
        {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
        assert!(glob("p99*", "p99.99") && glob("*", "") && glob("a*b*c", "axxbyyc") && !glob("a*b", "ac"));
    }

    #[test]
    fn the_gate_judges_summary_rows_above_the_floor_and_only_what_is_selected() {
        // Two CPUs; the second run is 1.5 us (15 %) slower on both.
        let two = |shift: u64| {
            let mut run = crate::store::tests_support::sample_run();
            for s in &mut run.series {
                let t = tally((0..20_000u64).map(|i| 10_000 + (i * 7919) % 1_000 + shift));
                let iv = crate::run::Interval::new(0, 0, 1_000_000_000, &t, 0, 0);
                *s = Series::new(s.key.clone(), "ns".into(), "adaptive".into(), vec![iv], vec![]).unwrap();
            }
            run
        };
        let (a, b) = (two(0), two(1_500));
        let c = compare(&[&a, &b]);
        let r = gated(&c, &gate(5.0));
        assert!(!r.is_empty() && r.iter().all(|r| r.series == "wakeup latency all CPUs"), "merged rows only: {r:?}");
        assert!(r.iter().any(|r| r.selector == "wakeup.latency.p50" && r.delta_ns.unwrap() >= 1_000.0), "{r:?}");
        // A floor above the difference: nothing fails.
        assert!(gated(&c, &Gate { min_delta_ns: 2_000, ..gate(5.0) }).is_empty());
        // Selected figures only; per-CPU rows when asked for.
        let only =
            |sel: &[&str]| Gate { selectors: sel.iter().map(|s| Selector::parse(s).unwrap()).collect(), ..gate(5.0) };
        let r = gated(&c, &only(&["wakeup.latency.p50"]));
        assert!(!r.is_empty() && r.iter().all(|r| r.figure == "p50" && r.series.ends_with("all CPUs")), "{r:?}");
        let r = gated(&c, &only(&["wakeup.latency.p50.cpu1"]));
        assert!(!r.is_empty() && r.iter().all(|r| r.selector == "wakeup.latency.p50.cpu1"), "{r:?}");
        let mut unmatched = c.clone();
        let err = unmatched.gate_rows(&only(&["wakeup.latncy"])).unwrap_err();
        assert!(err.contains("--gate wakeup.latncy") && err.contains("wakeup.latency"), "{err}");
    }

    #[test]
    fn counts_are_compared_as_rates_and_gate() {
        let with = |missed: u64, lost: u64| {
            let mut run = crate::store::tests_support::sample_run();
            for (i, s) in run.series.iter_mut().enumerate() {
                s.key.probe = "ptimer".into();
                s.key.metric = "timerfd".into();
                s.extra.insert("missed".into(), (missed * i as u64).into());
            }
            let mut net = run.series[0].clone();
            net.key = crate::run::SeriesKey::new("netlat", "rx_total", 0);
            net.extra.insert("lost".into(), lost.into());
            net.extra.insert("reordered".into(), 0.into());
            let mut net2 = net.clone();
            net2.key.metric = "rx_wake".into();
            run.series.extend([net, net2]);
            run
        };
        let (a, b) = (with(0, 2), with(40, 3));
        let mut c = compare(&[&a, &b]);
        let find = |c: &Compared, fig: &str, cpu: Option<i64>| {
            c.rates.iter().find(|r| r.figure == fig && r.cpu == cpu).cloned().unwrap_or_else(|| panic!("{fig} {cpu:?}"))
        };
        // ptimer missed: 0 and 40 on CPU 1 over 30 s.
        let m = find(&c, "missed", Some(1));
        assert_eq!(m.counts, vec![Some(0), Some(40)]);
        assert!((m.exposure_s[1].unwrap() - 30.0).abs() < 1e-9);
        assert_eq!((m.ratios[1], m.changes[1]), (None, Change::Worse));
        assert!(!m.summary && find(&c, "missed", None).summary);
        // netlat's per-CPU counts once, under `datagrams`, not per metric.
        let lost = find(&c, "lost", Some(0));
        assert_eq!((lost.metric.as_str(), lost.counts.clone()), ("datagrams", vec![Some(2), Some(3)]));
        assert_eq!(lost.changes[1], Change::WithinNoise);
        assert_eq!(c.rates.iter().filter(|r| r.figure == "lost").count(), 1);
        // Overruns: sample_run's intervals have some.
        assert!(c.rates.iter().any(|r| r.figure == "overruns"));
        c.gate_rows(&gate(10.0)).unwrap();
        let r = regressions(&c, &gate(10.0));
        assert!(r.iter().any(|r| r.selector == "ptimer.timerfd.missed" && r.test == Test::Poisson), "{r:?}");
        assert!(r.iter().all(|r| r.figure == "missed"), "{r:?}");
    }

    #[test]
    fn runs_that_did_not_complete_are_named() {
        let a = crate::store::tests_support::sample_run();
        let mut b = a.clone();
        b.header.status = RunStatus::Interrupted;
        assert_eq!(incomplete(&[&a, &b]), vec![(1, RunStatus::Interrupted)]);
        assert!(incomplete(&[&a, &a]).is_empty());
    }
}
