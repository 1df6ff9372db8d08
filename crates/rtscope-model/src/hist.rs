//! Latency histograms: HdrHistogram of nanoseconds (3 significant digits,
//! 1 ns .. 100 s) plus exact count / min / max / sum and an overflow count.
//!
//! A signed series (a deviation that may be negative, e.g. a sleep that
//! ends early) keeps its values >= 0 in the usual histogram and statistics
//! and the magnitudes of its negative values in a second [`Tally`], `neg`.
//! An unsigned series has no `neg` and records exactly as before.

use hdrhistogram::serialization::{Deserializer, Serializer};
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
    /// The values (of a signed series: the values >= 0).
    pub hist: Hist,
    pub stats: Stats,
    /// A signed series' negative values, as magnitudes (-5 us is recorded
    /// as 5 us here); None for an unsigned series.
    pub neg: Option<Box<Tally>>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally::new()
    }
}

impl Tally {
    pub fn new() -> Tally {
        Tally { hist: new_hist(), stats: Stats::new(), neg: None }
    }

    /// An empty tally of a signed series.
    pub fn new_signed() -> Tally {
        Tally { neg: Some(Box::new(Tally::new())), ..Tally::new() }
    }

    /// Records one sample. Never allocates.
    #[inline(always)]
    pub fn record(&mut self, v: u64) {
        self.stats.add(v);
        if self.hist.record(v).is_err() {
            self.stats.overflows += 1;
        }
    }

    /// Records one sample of a signed series (made by [`Tally::new_signed`]).
    /// Never allocates.
    #[inline(always)]
    pub fn record_signed(&mut self, v: i64) {
        if v >= 0 {
            self.record(v as u64);
        } else {
            self.neg.as_mut().expect("record_signed needs a signed tally").record(v.unsigned_abs());
        }
    }

    /// Whether this is a signed series' tally.
    pub fn is_signed(&self) -> bool {
        self.neg.is_some()
    }

    /// Samples, negative ones included.
    pub fn count(&self) -> u64 {
        self.stats.count + self.neg.as_ref().map_or(0, |n| n.stats.count)
    }

    pub fn clear(&mut self) {
        self.hist.reset();
        self.stats = Stats::new();
        if let Some(n) = &mut self.neg {
            n.clear();
        }
    }

    /// Adds `other`; a signed `other` makes this tally signed.
    pub fn merge(&mut self, other: &Tally) {
        self.hist.add(&other.hist).expect("rtscope histograms share bounds");
        self.stats.merge(&other.stats);
        if let Some(n) = &other.neg {
            self.neg.get_or_insert_with(|| Box::new(Tally::new())).merge(n);
        }
    }

    /// The smallest sample (signed), or 0 when nothing was recorded.
    pub fn min(&self) -> i64 {
        match &self.neg {
            Some(n) if n.stats.count > 0 => -(n.stats.max as i64),
            _ => self.stats.min_or_zero() as i64,
        }
    }

    /// The largest sample (signed), or 0 when nothing was recorded.
    pub fn max(&self) -> i64 {
        match &self.neg {
            Some(n) if self.stats.count == 0 && n.stats.count > 0 => -(n.stats.min as i64),
            _ => self.stats.max as i64,
        }
    }

    /// The exact signed sum of the samples.
    pub fn sum(&self) -> i128 {
        i128::from(self.stats.sum) - self.neg.as_ref().map_or(0, |n| i128::from(n.stats.sum))
    }

    /// The exact mean of the samples (0 when there are none).
    pub fn mean(&self) -> f64 {
        let n = self.count();
        if n == 0 { 0.0 } else { self.sum() as f64 / n as f64 }
    }

    /// The exact mean of the samples' absolute values (the NT real-time
    /// study's "average (absolute)" drift); 0 when there are none.
    pub fn mean_abs(&self) -> f64 {
        let n = self.count();
        let abs = i128::from(self.stats.sum) + self.neg.as_ref().map_or(0, |n| i128::from(n.stats.sum));
        if n == 0 { 0.0 } else { abs as f64 / n as f64 }
    }

    /// The signed value at quantile `q` of all samples (see [`quantile`]).
    pub fn quantile(&self, q: f64) -> i64 {
        let below = self.neg.as_ref().map_or(0, |n| n.stats.count);
        let count = self.count();
        if count == 0 {
            return 0;
        }
        let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
        match &self.neg {
            // The rank-th smallest signed value is the (below - rank + 1)-th
            // smallest magnitude, negated.
            Some(n) if rank <= below => -(value_at_rank(&n.hist, &n.stats, below - rank + 1) as i64),
            _ => value_at_rank(&self.hist, &self.stats, rank - below) as i64,
        }
    }

    pub fn summary(&self) -> Summary {
        if !self.is_signed() {
            return Summary::of(&self.hist, &self.stats);
        }
        let q = |q| self.quantile(q);
        let neg = self.neg.as_ref().map_or(0, |n| n.stats.overflows);
        Summary {
            count: self.count(),
            min_ns: self.min(),
            mean_ns: (self.mean() * 1000.0).round() / 1000.0,
            p50_ns: q(0.5),
            p90_ns: q(0.9),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            p9999_ns: q(0.9999),
            max_ns: self.max(),
            overflows: self.stats.overflows + neg,
        }
    }
}

/// The figures every probe reports per metric and CPU. Signed: only a
/// signed series has negative values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub count: u64,
    pub min_ns: i64,
    pub mean_ns: f64,
    pub p50_ns: i64,
    pub p90_ns: i64,
    pub p99_ns: i64,
    pub p999_ns: i64,
    pub p9999_ns: i64,
    pub max_ns: i64,
    pub overflows: u64,
}

impl Summary {
    pub fn of(hist: &Hist, stats: &Stats) -> Summary {
        let q = |q| quantile(hist, stats, q) as i64;
        Summary {
            count: stats.count,
            min_ns: stats.min_or_zero() as i64,
            mean_ns: (stats.mean() * 1000.0).round() / 1000.0,
            p50_ns: q(0.5),
            p90_ns: q(0.9),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            p9999_ns: q(0.9999),
            max_ns: stats.max as i64,
            overflows: stats.overflows,
        }
    }

    /// Jitter as the Siemens CE 3.0 assessment defines it: max - min.
    pub fn jitter_ns(&self) -> u64 {
        self.max_ns.saturating_sub(self.min_ns).max(0) as u64
    }
}

/// The value at quantile `q` of all samples, overflows included (they are
/// the largest), clamped to the exact [min, max].
pub fn quantile(hist: &Hist, stats: &Stats, q: f64) -> u64 {
    if stats.count == 0 {
        return 0;
    }
    value_at_rank(hist, stats, ((q * stats.count as f64).ceil() as u64).clamp(1, stats.count))
}

/// The `rank`-th smallest sample (1-based, within `1..=stats.count`),
/// overflows included, clamped to the exact [min, max].
fn value_at_rank(hist: &Hist, stats: &Stats, rank: u64) -> u64 {
    let in_hist = hist.len();
    let v =
        if rank > in_hist || in_hist == 0 { stats.max } else { hist.value_at_quantile(rank as f64 / in_hist as f64) };
    v.clamp(stats.min, stats.max)
}

/// One row of a bucket table: samples in `[lo_ns, hi_ns)`; a negative
/// row (of a signed series) holds the samples in `(lo_ns, hi_ns]`, i.e.
/// magnitudes in `[-hi_ns, -lo_ns)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    pub lo_ns: i64,
    pub hi_ns: i64,
    pub count: u64,
}

/// The power-of-two table of the NT real-time study, in microseconds:
/// `0-1 us`, `1-2 us`, `2-4 us`, ... up to the bucket holding the maximum.
/// Overflows (above 100 s) form a last bucket up to the exact max.
pub fn pow2_buckets(hist: &Hist, stats: &Stats) -> Vec<Bucket> {
    let mut rows: Vec<Bucket> = Vec::new();
    if stats.count == 0 {
        return rows;
    }
    let mut hi = 1000i64;
    rows.push(Bucket { lo_ns: 0, hi_ns: hi, count: 0 });
    while hi as u64 <= stats.max.min(HIGHEST_NS) {
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
        rows.push(Bucket { lo_ns: HIGHEST_NS as i64, hi_ns: stats.max as i64 + 1, count: stats.overflows });
    }
    rows
}

/// [`pow2_buckets`] of a whole tally, signed ones included: the negative
/// rows first (`-(8-16) us`, `-(4-8) us`, ... as `lo_ns = -16000, hi_ns =
/// -8000`), then the rows of the values >= 0. Rows are ordered by `lo_ns`.
pub fn pow2_table(t: &Tally) -> Vec<Bucket> {
    let mut rows: Vec<Bucket> = match &t.neg {
        Some(n) => pow2_buckets(&n.hist, &n.stats)
            .into_iter()
            .rev()
            .map(|b| Bucket { lo_ns: -b.hi_ns, hi_ns: -b.lo_ns, count: b.count })
            .collect(),
        None => Vec::new(),
    };
    rows.extend(pow2_buckets(&t.hist, &t.stats));
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

/// [`nonzero_buckets`] of a whole tally in ascending order, a signed
/// series' negative buckets first as `[-highest, -lowest, count]`.
pub fn signed_buckets(t: &Tally) -> Vec<[i64; 3]> {
    let mut rows: Vec<[i64; 3]> = match &t.neg {
        Some(n) => nonzero_buckets(&n.hist)
            .into_iter()
            .rev()
            .map(|[lo, hi, c]| [-(hi as i64), -(lo as i64), c as i64])
            .collect(),
        None => Vec::new(),
    };
    rows.extend(nonzero_buckets(&t.hist).into_iter().map(|[lo, hi, c]| [lo as i64, hi as i64, c as i64]));
    rows
}

/// HdrHistogram V2 + DEFLATE encoding, as HdrHistogram's own tools read it
/// (its `V2DeflateSerializer`'s layout: the cookie, the zlib stream's
/// length, the zlib stream of the plain V2 encoding).
///
/// One encoder per thread, kept: the V2 buffer (sized for every bucket,
/// 230 kB for rtscope's range) and the DEFLATE state (380 kB) are allocated
/// once, not at every interval. Allocated anew at each, as
/// `V2DeflateSerializer` does, blocks of that size made a recording
/// writer's malloc arena grow unevenly, by 2-4.5 MB over its first minutes,
/// all of it locked by mlockall (bench/RESULTS.md section 2).
pub fn encode(hist: &Hist) -> Vec<u8> {
    thread_local! {
        static ENCODER: std::cell::RefCell<Encoder> = std::cell::RefCell::new(Encoder::new());
    }
    ENCODER.with_borrow_mut(|e| e.encode(hist))
}

/// [`encode`]'s buffers and DEFLATE state.
struct Encoder {
    v2: hdrhistogram::serialization::V2Serializer,
    plain: Vec<u8>,
    deflate: flate2::Compress,
}

impl Encoder {
    fn new() -> Encoder {
        Encoder {
            v2: hdrhistogram::serialization::V2Serializer::new(),
            plain: Vec::new(),
            // zlib's default level and header, as HdrHistogram's serializer.
            deflate: flate2::Compress::new(flate2::Compression::default(), true),
        }
    }

    fn encode(&mut self, hist: &Hist) -> Vec<u8> {
        self.plain.clear();
        self.v2.serialize(hist, &mut self.plain).expect("serializing into memory does not fail");
        self.deflate.reset();
        let mut out = Vec::with_capacity(8 + self.plain.len() / 2 + 64);
        out.extend_from_slice(&V2_DEFLATE_COOKIE.to_be_bytes());
        out.extend_from_slice(&0u32.to_be_bytes());
        loop {
            if out.capacity() - out.len() < 1024 {
                out.reserve(out.capacity().max(1024));
            }
            let read = usize::try_from(self.deflate.total_in()).expect("a histogram's encoding fits in memory");
            let status = self
                .deflate
                .compress_vec(&self.plain[read..], &mut out, flate2::FlushCompress::Finish)
                .expect("compressing into memory does not fail");
            if status == flate2::Status::StreamEnd {
                break;
            }
        }
        let len = u32::try_from(out.len() - 8).expect("a histogram's encoding is under 4 GB");
        out[4..8].copy_from_slice(&len.to_be_bytes());
        out
    }
}

/// Decodes [`encode`]'s output (or plain V2).
pub fn decode(bytes: &[u8]) -> Result<Hist, String> {
    Deserializer::new().deserialize(&mut std::io::Cursor::new(bytes)).map_err(|e| format!("corrupt histogram: {e:?}"))
}

/// What HdrHistogram's `max()` gives of the histogram `bytes` encodes
/// (the highest value equivalent to its largest recorded value; 0 when
/// empty), from its exact statistics `stats`, without decoding it: where
/// `bytes` is V2 + DEFLATE (as [`encode`] writes it) of rtscope's bounds
/// and holds every sample (no overflow). None otherwise. Only the head of
/// its DEFLATE stream is inflated, to read the bounds.
pub fn encoded_max(bytes: &[u8], stats: &Stats) -> Option<u64> {
    static REFERENCE: std::sync::OnceLock<Hist> = std::sync::OnceLock::new();
    if stats.overflows > 0 || bytes.len() < 8 || bytes[..4] != V2_DEFLATE_COOKIE.to_be_bytes() {
        return None;
    }
    let mut head = [0u8; V2_HEADER + 4];
    let mut inflater = flate2::Decompress::new(true);
    inflater.decompress(&bytes[8..], &mut head, flate2::FlushDecompress::Sync).ok()?;
    let filled = usize::try_from(inflater.total_out()).ok()?;
    let field = |at: usize, len: usize| head[at..at + len].iter().fold(0u64, |v, b| v << 8 | u64::from(*b));
    let ours = filled == head.len()
        && field(0, 4) == u64::from(V2_COOKIE)
        && field(12, 4) == u64::from(SIGFIG)
        && field(16, 8) == LOWEST_NS
        && field(24, 8) == HIGHEST_NS;
    if !ours {
        return None;
    }
    Some(if stats.count == 0 { 0 } else { REFERENCE.get_or_init(new_hist).highest_equivalent(stats.max) })
}

/// HdrHistogram's V2 cookie (plain and DEFLATE-wrapped), as its
/// serializers write them.
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
const V2_DEFLATE_COOKIE: u32 = 0x1c84_9304 | 0x10;
/// The V2 header after the cookie: payload length, normalizing index
/// offset, significant digits, lowest and highest value, integer-to-double
/// ratio.
const V2_HEADER: usize = 4 + 4 + 4 + 8 + 8 + 8;

/// Sums encoded histograms (V2 + DEFLATE as [`encode`] writes them, or
/// plain V2) of rtscope's bounds without decoding each into a histogram:
/// each is inflated into a reused buffer and its buckets are added to one
/// array of counts. Decoding allocates and clears a 230 kB histogram per
/// interval, and adding it walks all its 28 000 buckets; a run of a day
/// has thousands of intervals per series. The sum is exactly what decoding
/// each ([`decode`]) and adding them up ([`Tally::merge`]) gives.
pub struct Summer {
    counts: Vec<u64>,
    inflater: flate2::Decompress,
    inflated: Vec<u8>,
    found: Vec<(usize, u64)>,
}

impl Default for Summer {
    fn default() -> Self {
        Summer::new()
    }
}

impl Summer {
    pub fn new() -> Summer {
        Summer {
            counts: vec![0; new_hist().distinct_values()],
            inflater: flate2::Decompress::new(true),
            inflated: Vec::new(),
            found: Vec::new(),
        }
    }

    /// Adds the encoded histogram `bytes` and returns how many samples it
    /// holds; None (nothing added) when it is not one of rtscope's bounds
    /// in V2 (+ DEFLATE), or is corrupt: [`decode`] says which, and its
    /// histogram can be added with [`Tally::merge`].
    pub fn add_encoded(&mut self, bytes: &[u8]) -> Option<u64> {
        let cookie = u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?);
        let v2 = match cookie {
            V2_COOKIE => bytes,
            V2_DEFLATE_COOKIE => {
                let len = u32::from_be_bytes(bytes.get(4..8)?.try_into().ok()?) as usize;
                let end = bytes.len().min(8usize.checked_add(len)?);
                self.inflate(&bytes[8..end])?;
                &self.inflated
            }
            _ => return None,
        };
        let total = parse_v2(v2, self.counts.len(), &mut self.found)?;
        for &(i, c) in &self.found {
            self.counts[i] = self.counts[i].saturating_add(c);
        }
        Some(total)
    }

    /// Inflates a zlib stream into `self.inflated`.
    fn inflate(&mut self, input: &[u8]) -> Option<()> {
        self.inflater.reset(true);
        self.inflated.clear();
        loop {
            if self.inflated.capacity() - self.inflated.len() < 4096 {
                self.inflated.reserve(self.inflated.capacity().max(16 * 1024));
            }
            let (read, wrote) = (self.inflater.total_in(), self.inflater.total_out());
            let at = usize::try_from(read).ok()?;
            let status = self
                .inflater
                .decompress_vec(input.get(at..)?, &mut self.inflated, flate2::FlushDecompress::None)
                .ok()?;
            if status == flate2::Status::StreamEnd {
                return Some(());
            }
            if self.inflater.total_in() == read && self.inflater.total_out() == wrote {
                // The stream ends early, or is corrupt.
                return None;
            }
        }
    }

    /// Adds another sum.
    pub fn add(&mut self, other: &Summer) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a = a.saturating_add(*b);
        }
    }

    /// The sum, plain V2-encoded: a few kB that [`decode`] reads.
    pub fn encoded(&self) -> Vec<u8> {
        let last = self.counts.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
        let mut payload = Vec::new();
        let mut zeros = 0i64;
        for &c in &self.counts[..last] {
            if c == 0 {
                zeros += 1;
                continue;
            }
            if zeros > 0 {
                put_varint(&mut payload, zig_zag(-zeros));
                zeros = 0;
            }
            put_varint(&mut payload, zig_zag(c.min(i64::MAX as u64) as i64));
        }
        let mut out = Vec::with_capacity(4 + V2_HEADER + payload.len());
        out.extend_from_slice(&V2_COOKIE.to_be_bytes());
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(&0u32.to_be_bytes());
        out.extend_from_slice(&u32::from(SIGFIG).to_be_bytes());
        out.extend_from_slice(&LOWEST_NS.to_be_bytes());
        out.extend_from_slice(&HIGHEST_NS.to_be_bytes());
        out.extend_from_slice(&1f64.to_be_bytes());
        out.extend_from_slice(&payload);
        out
    }

    /// The sum as a histogram.
    pub fn hist(&self) -> Hist {
        decode(&self.encoded()).expect("a sum's own encoding decodes")
    }
}

/// Reads a plain V2 histogram of rtscope's bounds into `found` (bucket
/// index, count), checking it as HdrHistogram's deserializer does; returns
/// its sample count. None where that deserializer would fail, or would
/// make a histogram of other bounds.
fn parse_v2(v2: &[u8], buckets: usize, found: &mut Vec<(usize, u64)>) -> Option<u64> {
    let be32 = |at: usize| -> Option<u32> { Some(u32::from_be_bytes(v2.get(at..at + 4)?.try_into().ok()?)) };
    let be64 = |at: usize| -> Option<u64> { Some(u64::from_be_bytes(v2.get(at..at + 8)?.try_into().ok()?)) };
    if be32(0)? != V2_COOKIE {
        return None;
    }
    let payload_len = be32(4)? as usize;
    let (offset, digits, low, high, ratio) = (be32(8)?, be32(12)?, be64(16)?, be64(24)?, be64(32)?);
    if offset != 0 || digits != u32::from(SIGFIG) || low != LOWEST_NS || high != HIGHEST_NS {
        return None;
    }
    if f64::from_bits(ratio) != 1.0 {
        return None;
    }
    let payload = v2.get(4 + V2_HEADER..(4 + V2_HEADER).checked_add(payload_len)?)?;
    found.clear();
    let mut index = 0usize;
    let mut total = 0u64;
    let mut at = 0;
    while at < payload.len() {
        // Most counts and runs of zeros fit in one byte.
        let zz = match payload[at] {
            b if b < 0x80 => {
                at += 1;
                u64::from(b)
            }
            _ => {
                let (zz, used) = get_varint(&payload[at..])?;
                at += used;
                zz
            }
        };
        let n = ((zz >> 1) as i64) ^ -((zz & 1) as i64);
        if n < 0 {
            index = index.checked_add(usize::try_from(n.unsigned_abs()).ok()?)?;
            continue;
        }
        if n > 0 {
            if index >= buckets {
                return None;
            }
            found.push((index, n as u64));
            total = total.saturating_add(n as u64);
        }
        index = index.checked_add(1)?;
    }
    Some(total)
}

/// HdrHistogram's LEB128 of at most 9 bytes (the ninth taken whole): the
/// value and the bytes read; None when `b` ends inside it.
fn get_varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for i in 0..8 {
        let byte = *b.get(i)?;
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    Some((v | u64::from(*b.get(8)?) << 56, 9))
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    for _ in 0..8 {
        if v < 0x80 {
            out.push(v as u8);
            return;
        }
        out.push(0x80 | (v & 0x7f) as u8);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zig_zag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

/// A tally kept small: its exact statistics and its histogram plain
/// V2-encoded (a sum of many intervals is a few kB; its histogram takes
/// 230 kB).
#[derive(Clone, Debug, PartialEq)]
pub struct Packed {
    pub stats: Stats,
    pub hdr: Vec<u8>,
    pub neg: Option<Box<Packed>>,
}

impl Packed {
    pub fn of(t: &Tally) -> Packed {
        let mut hdr = Vec::new();
        hdrhistogram::serialization::V2Serializer::new()
            .serialize(&t.hist, &mut hdr)
            .expect("serializing into memory does not fail");
        Packed { stats: t.stats, hdr, neg: t.neg.as_ref().map(|n| Box::new(Packed::of(n))) }
    }

    pub fn unpack(&self) -> Tally {
        Tally {
            hist: decode(&self.hdr).expect("a packed tally decodes"),
            stats: self.stats,
            neg: self.neg.as_ref().map(|n| Box::new(n.unpack())),
        }
    }
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
        let near = |got: i64, want: i64| (got as f64 - want as f64).abs() <= want as f64 * 0.001 + 1.0;
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
        assert_eq!(pow2_table(&t), rows, "an unsigned tally has no negative rows");
        assert_eq!(rows[1], Bucket { lo_ns: 1000, hi_ns: 2000, count: 1 });
        assert_eq!(rows[2], Bucket { lo_ns: 2000, hi_ns: 4000, count: 2 });
        assert_eq!(rows.last().unwrap().count, 1);
        assert!(pow2_buckets(&new_hist(), &Stats::new()).is_empty());
    }

    /// The kept encoder writes what HdrHistogram's own V2 + DEFLATE
    /// serializer writes, byte for byte, encoding after encoding (its state
    /// reset between them), for an empty histogram and one whose nearly every
    /// bucket holds a random count (an output past its first reserve).
    #[test]
    fn the_kept_encoder_writes_what_hdrhistograms_serializer_writes() {
        use hdrhistogram::serialization::V2DeflateSerializer;
        let theirs = |h: &Hist| {
            let mut out = Vec::new();
            V2DeflateSerializer::new().serialize(h, &mut out).unwrap();
            out
        };
        let mut small = Tally::new();
        for v in [1, 2, 3, 1000, 123_456, 99_999_999_999] {
            small.record(v);
        }
        let mut full = new_hist();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        // Values 0.1 % apart: a sample in nearly every bucket.
        let mut v = LOWEST_NS.max(1);
        while v <= HIGHEST_NS {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            full.record_n(v, x % (1 << 40) + 1).unwrap();
            v += v / 1000 + 1;
        }
        for h in [&small.hist, &new_hist(), &full, &small.hist, &full] {
            let ours = encode(h);
            assert_eq!(ours, theirs(h));
            assert_eq!(&decode(&ours).unwrap(), h);
        }
        let mut plain = Vec::new();
        hdrhistogram::serialization::V2Serializer::new().serialize(&full, &mut plain).unwrap();
        assert!(encode(&full).len() > 8 + plain.len() / 2 + 64, "the full one outgrows the first reserve");
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
        let mut merged = Tally { hist: back, stats: t.stats, neg: None };
        merged.merge(&t);
        assert_eq!(merged.hist.len(), 12);
        assert!(decode(b"garbage").is_err());
    }

    /// Random interval histograms, bucket 0 and overflows included.
    fn intervals(seed: u64, n: usize) -> Vec<Tally> {
        let mut rng = fastrand::Rng::with_seed(seed);
        (0..n)
            .map(|i| {
                let mut t = Tally::new();
                for _ in 0..rng.usize(0..400) {
                    let v = match rng.u8(0..10) {
                        0 => rng.u64(0..3),
                        1 => rng.u64(HIGHEST_NS - 10..HIGHEST_NS + 10),
                        _ => (rng.f64().powi(4) * 1e7 * (i + 1) as f64) as u64,
                    };
                    t.record(v);
                }
                t
            })
            .collect()
    }

    #[test]
    fn a_summer_adds_up_what_decoding_and_merging_add_up() {
        for seed in 0..20 {
            let ivs = intervals(seed, 1 + seed as usize % 7);
            let mut merged = Tally::new();
            let mut summer = Summer::new();
            for (i, t) in ivs.iter().enumerate() {
                // Both encodings: V2 + DEFLATE, and plain V2.
                let bytes = if i % 2 == 0 {
                    encode(&t.hist)
                } else {
                    let mut plain = Vec::new();
                    hdrhistogram::serialization::V2Serializer::new().serialize(&t.hist, &mut plain).unwrap();
                    plain
                };
                let decoded = decode(&bytes).unwrap();
                assert_eq!(summer.add_encoded(&bytes), Some(decoded.len()));
                merged.merge(&Tally { hist: decoded, stats: t.stats, neg: None });
            }
            // Equal, down to the histogram's own bookkeeping.
            assert!(format!("{:?}", summer.hist()) == format!("{:?}", merged.hist), "seed {seed}");
            assert!(summer.encoded().len() < 4096, "{}", summer.encoded().len());
        }
        assert!(format!("{:?}", Summer::new().hist()) == format!("{:?}", new_hist()));
    }

    #[test]
    fn a_summer_leaves_what_it_cannot_read_to_decode() {
        let mut s = Summer::new();
        let t = &intervals(3, 1)[0];
        let good = encode(&t.hist);
        assert_eq!(s.add_encoded(b"garbage"), None);
        assert_eq!(s.add_encoded(&good[..good.len() - 6]), None, "a truncated stream");
        let mut other = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1_000_000, 2).unwrap();
        other.record(5_000).unwrap();
        assert_eq!(s.add_encoded(&encode(&other)), None, "other bounds");
        assert!(s.hist() == new_hist(), "nothing was added");
        assert_eq!(s.add_encoded(&good), Some(t.hist.len()));
        assert!(s.hist() == t.hist);
    }

    #[test]
    fn packed_tallies_unpack_to_themselves() {
        let mut t = Tally::new_signed();
        for v in [-3_000i64, -20, 0, 10, 2_000, 40_000] {
            t.record_signed(v);
        }
        assert!(Packed::of(&t).unpack() == t);
        assert!(Packed::of(&Tally::new()).unpack() == Tally::new());
    }

    #[test]
    fn signed_tally_keeps_negative_values_negative() {
        let mut t = Tally::new_signed();
        for v in [-3_000i64, -1_500, -20, 0, 10, 2_000, 5_000, 40_000] {
            t.record_signed(v);
        }
        assert_eq!(t.count(), 8);
        assert_eq!(t.stats.count, 5, "values >= 0");
        assert_eq!(t.neg.as_ref().unwrap().stats.count, 3);
        assert_eq!((t.min(), t.max()), (-3_000, 40_000));
        assert_eq!(t.sum(), -3_000 - 1_500 - 20 + 10 + 2_000 + 5_000 + 40_000);
        assert_eq!(t.mean_abs(), (3_000.0 + 1_500.0 + 20.0 + 10.0 + 2_000.0 + 5_000.0 + 40_000.0) / 8.0);
        let s = t.summary();
        assert_eq!(s.count, 8);
        assert_eq!(s.min_ns, -3_000);
        assert_eq!(s.max_ns, 40_000);
        assert_eq!(s.mean_ns, 42_490.0 / 8.0);
        // Ranks: 1 -> -3000, 2 -> -1500, 3 -> -20, 4 -> 0, 5 -> 10 ...
        assert!((t.quantile(0.125) - -3_000).abs() <= 3, "{}", t.quantile(0.125));
        assert!((t.quantile(0.25) - -1_500).abs() <= 2, "{}", t.quantile(0.25));
        assert_eq!(t.quantile(0.375), -20);
        assert_eq!(s.p50_ns, 0);
        assert_eq!(t.quantile(0.625), 10);
        assert_eq!(s.p9999_ns, 40_000);
        assert_eq!(s.jitter_ns(), 43_000);
        // Only negative samples: the max is the smallest magnitude.
        let mut only = Tally::new_signed();
        only.record_signed(-7_000);
        only.record_signed(-9_000);
        assert_eq!((only.min(), only.max()), (-9_000, -7_000));
        assert_eq!(only.summary().p50_ns, -9_000);
        assert_eq!(Tally::new_signed().summary(), Summary::default());
    }

    #[test]
    fn signed_tables_put_negative_rows_first() {
        let mut t = Tally::new_signed();
        for v in [-5_000i64, -1_200, -300, 700, 3_000] {
            t.record_signed(v);
        }
        let rows = pow2_table(&t);
        assert_eq!(rows.iter().map(|r| r.count).sum::<u64>(), 5);
        assert_eq!(rows[0], Bucket { lo_ns: -8_000, hi_ns: -4_000, count: 1 });
        assert_eq!(rows[3], Bucket { lo_ns: -1_000, hi_ns: 0, count: 1 });
        assert_eq!(rows[4], Bucket { lo_ns: 0, hi_ns: 1_000, count: 1 });
        assert!(rows.windows(2).all(|w| w[0].lo_ns < w[1].lo_ns));
        let b = signed_buckets(&t);
        assert_eq!(b.len(), 5);
        assert!(b[0][0] <= -5_000 && b[0][1] >= -5_000 && b[0][1] < 0, "{:?}", b[0]);
        assert!(b.windows(2).all(|w| w[0][1] < w[1][0]));
        assert_eq!(b.iter().map(|r| r[2]).sum::<i64>(), 5);
        // Merging and clearing keep the negative side.
        let mut m = Tally::new();
        m.merge(&t);
        assert!(m.is_signed());
        assert_eq!(m.count(), 5);
        m.clear();
        assert_eq!(m.count(), 0);
        assert!(m.is_signed());
    }
}
