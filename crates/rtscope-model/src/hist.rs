//! Latency histograms: HdrHistogram of nanoseconds (3 significant digits,
//! 1 ns .. 100 s) plus exact count / min / max / sum and an overflow count.

use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

/// The histogram every probe records into.
pub type Hist = hdrhistogram::Histogram<u64>;

/// Lowest value told apart from zero, in ns.
pub const LOWEST_NS: u64 = 1;
/// Highest value the histogram holds: 100 s. Larger values are counted as
/// overflows, and the exact maximum is still kept in [`Stats`].
pub const HIGHEST_NS: u64 = 100_000_000_000;
/// Significant digits: every bucket is within 0.1 % of the values in it.
pub const SIGFIG: u8 = 3;

/// A fresh empty histogram with rtscope's bounds.
pub fn new_hist() -> Hist {
    Hist::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGFIG).expect("constant histogram bounds are valid")
}

/// Exact figures kept beside the histogram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    pub count: u64,
    /// Smallest sample; meaningless when `count == 0`.
    pub min: u64,
    pub max: u64,
    pub sum: u64,
    /// Samples above [`HIGHEST_NS`], counted but not in the histogram.
    pub overflows: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats::new()
    }
}

impl Stats {
    pub const fn new() -> Stats {
        Stats { count: 0, min: u64::MAX, max: 0, sum: 0, overflows: 0 }
    }

    #[inline(always)]
    pub fn add(&mut self, v: u64) {
        self.count += 1;
        self.sum = self.sum.wrapping_add(v);
        if v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
    }

    pub fn merge(&mut self, other: &Stats) {
        self.count += other.count;
        self.sum = self.sum.wrapping_add(other.sum);
        self.overflows += other.overflows;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// The minimum, or 0 when nothing was recorded.
    pub fn min_or_zero(&self) -> u64 {
        if self.count == 0 { 0 } else { self.min }
    }

    pub fn mean(&self) -> f64 {
        if self.count == 0 { 0.0 } else { self.sum as f64 / self.count as f64 }
    }
}

/// A histogram with its exact statistics: what one measuring thread
/// records for one metric over one checkpoint interval.
#[derive(Clone, Debug, PartialEq)]
pub struct Tally {
    pub hist: Hist,
    pub stats: Stats,
}

impl Default for Tally {
    fn default() -> Self {
        Tally::new()
    }
}

impl Tally {
    pub fn new() -> Tally {
        Tally { hist: new_hist(), stats: Stats::new() }
    }

    /// Records one sample. Never allocates.
    #[inline(always)]
    pub fn record(&mut self, v: u64) {
        self.stats.add(v);
        if self.hist.record(v).is_err() {
            self.stats.overflows += 1;
        }
    }

    pub fn clear(&mut self) {
        self.hist.reset();
        self.stats = Stats::new();
    }

    pub fn merge(&mut self, other: &Tally) {
        self.hist.add(&other.hist).expect("rtscope histograms share bounds");
        self.stats.merge(&other.stats);
    }

    pub fn summary(&self) -> Summary {
        Summary::of(&self.hist, &self.stats)
    }
}

/// The figures every probe reports per metric and CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub p9999_ns: u64,
    pub max_ns: u64,
    pub overflows: u64,
}

impl Summary {
    pub fn of(hist: &Hist, stats: &Stats) -> Summary {
        let q = |q| quantile(hist, stats, q);
        Summary {
            count: stats.count,
            min_ns: stats.min_or_zero(),
            mean_ns: (stats.mean() * 1000.0).round() / 1000.0,
            p50_ns: q(0.5),
            p90_ns: q(0.9),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            p9999_ns: q(0.9999),
            max_ns: stats.max,
            overflows: stats.overflows,
        }
    }

    /// Jitter as the references define it: max - min.
    pub fn jitter_ns(&self) -> u64 {
        self.max_ns.saturating_sub(self.min_ns)
    }
}

/// The value at quantile `q` of all samples, overflows included (they are
/// the largest), clamped to the exact [min, max].
pub fn quantile(hist: &Hist, stats: &Stats, q: f64) -> u64 {
    if stats.count == 0 {
        return 0;
    }
    let rank = ((q * stats.count as f64).ceil() as u64).clamp(1, stats.count);
    let in_hist = hist.len();
    let v =
        if rank > in_hist || in_hist == 0 { stats.max } else { hist.value_at_quantile(rank as f64 / in_hist as f64) };
    v.clamp(stats.min, stats.max)
}

/// One row of a bucket table: samples in `[lo_ns, hi_ns)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    pub lo_ns: u64,
    pub hi_ns: u64,
    pub count: u64,
}

/// The power-of-two table of the reference papers, in microseconds:
/// `0-1 us`, `1-2 us`, `2-4 us`, ... up to the bucket holding the maximum.
/// Overflows (above 100 s) form a last bucket up to the exact max.
pub fn pow2_buckets(hist: &Hist, stats: &Stats) -> Vec<Bucket> {
    let mut rows: Vec<Bucket> = Vec::new();
    if stats.count == 0 {
        return rows;
    }
    let mut hi = 1000u64;
    rows.push(Bucket { lo_ns: 0, hi_ns: hi, count: 0 });
    while hi <= stats.max.min(HIGHEST_NS) {
        rows.push(Bucket { lo_ns: hi, hi_ns: hi * 2, count: 0 });
        hi *= 2;
    }
    for v in hist.iter_recorded() {
        // A bucket's values lie within 0.1 %; place it by its midpoint.
        let value = hist.median_equivalent(v.value_iterated_to());
        let idx = if value < 1000 { 0 } else { (63 - (value / 1000).leading_zeros()) as usize + 1 };
        let idx = idx.min(rows.len() - 1);
        rows[idx].count += v.count_at_value();
    }
    if stats.overflows > 0 {
        rows.push(Bucket { lo_ns: HIGHEST_NS, hi_ns: stats.max + 1, count: stats.overflows });
    }
    rows
}

/// Non-empty HdrHistogram buckets as `[lowest, highest, count]`, lossless at
/// the histogram's resolution and readable without an HdrHistogram library.
pub fn nonzero_buckets(hist: &Hist) -> Vec<[u64; 3]> {
    hist.iter_recorded()
        .map(|v| {
            let hi = v.value_iterated_to();
            [hist.lowest_equivalent(hi), hi, v.count_at_value()]
        })
        .collect()
}

/// HdrHistogram V2 + DEFLATE encoding, as HdrHistogram's own tools read it.
pub fn encode(hist: &Hist) -> Vec<u8> {
    let mut out = Vec::new();
    V2DeflateSerializer::new().serialize(hist, &mut out).expect("serializing into memory does not fail");
    out
}

/// Decodes [`encode`]'s output (or plain V2).
pub fn decode(bytes: &[u8]) -> Result<Hist, String> {
    Deserializer::new().deserialize(&mut std::io::Cursor::new(bytes)).map_err(|e| format!("corrupt histogram: {e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_keeps_exact_figures_and_counts_overflows() {
        let mut t = Tally::new();
        for v in [5_000, 7_000, 1_000_000, 200_000_000_000] {
            t.record(v);
        }
        assert_eq!(t.stats.count, 4);
        assert_eq!(t.stats.min, 5_000);
        assert_eq!(t.stats.max, 200_000_000_000);
        assert_eq!(t.stats.overflows, 1);
        assert_eq!(t.hist.len(), 3);
        let s = t.summary();
        assert_eq!(s.max_ns, 200_000_000_000);
        assert_eq!(s.p99_ns, 200_000_000_000, "the overflow is the top sample");
        assert_eq!(s.min_ns, 5_000);
        assert_eq!(s.jitter_ns(), 200_000_000_000 - 5_000);
    }

    #[test]
    fn quantiles_are_within_a_tenth_of_a_percent() {
        let mut t = Tally::new();
        for v in 1..=100_000u64 {
            t.record(v * 10);
        }
        let s = t.summary();
        let near = |got: u64, want: u64| (got as f64 - want as f64).abs() <= want as f64 * 0.001 + 1.0;
        assert!(near(s.p50_ns, 500_000), "{}", s.p50_ns);
        assert!(near(s.p99_ns, 990_000), "{}", s.p99_ns);
        assert!(near(s.p9999_ns, 999_990), "{}", s.p9999_ns);
        assert_eq!(s.max_ns, 1_000_000);
        assert_eq!(s.mean_ns, 500_005.0);
    }

    #[test]
    fn pow2_table_sums_to_count() {
        let mut t = Tally::new();
        for v in [10, 900, 1_500, 3_000, 3_900, 20_000, 70_000, 150_000_000_000] {
            t.record(v);
        }
        let rows = pow2_buckets(&t.hist, &t.stats);
        assert_eq!(rows.iter().map(|r| r.count).sum::<u64>(), 8);
        assert_eq!(rows[0], Bucket { lo_ns: 0, hi_ns: 1000, count: 2 });
        assert_eq!(rows[1], Bucket { lo_ns: 1000, hi_ns: 2000, count: 1 });
        assert_eq!(rows[2], Bucket { lo_ns: 2000, hi_ns: 4000, count: 2 });
        assert_eq!(rows.last().unwrap().count, 1);
        assert!(pow2_buckets(&new_hist(), &Stats::new()).is_empty());
    }

    #[test]
    fn encoding_round_trips() {
        let mut t = Tally::new();
        for v in [1, 2, 3, 1000, 123_456, 99_999_999_999] {
            t.record(v);
        }
        let back = decode(&encode(&t.hist)).unwrap();
        assert_eq!(back, t.hist);
        assert_eq!(nonzero_buckets(&back), nonzero_buckets(&t.hist));
        let mut merged = Tally { hist: back, stats: t.stats };
        merged.merge(&t);
        assert_eq!(merged.hist.len(), 12);
        assert!(decode(b"garbage").is_err());
    }
}
