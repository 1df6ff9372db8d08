//! What the analysis reads: the distribution of one metric (exact values
//! from a sample file, or a stored run's histograms at their 0.1 %
//! resolution), the observed duration, timed exceedances for the extremal
//! index, block maxima for the diagnostics, and the two halves of the
//! measurement for the agreement check.

use crate::hist::Tally;
use crate::run::{Exceedance, Interval, KeptExceedances, Series};

/// One metric's observations.
#[derive(Clone, Debug, Default)]
pub struct Obs {
    /// Distinct values, ascending, with their counts.
    values: Vec<(f64, u64)>,
    /// cum[i]: samples with a value <= values[i].
    cum: Vec<u64>,
    pub n: u64,
    /// Observed duration D, seconds.
    pub duration_s: f64,
    /// (seconds from the start, value) of samples above `timed_from`
    /// (every sample of a sample file), in time order.
    pub timed: Vec<(f64, f64)>,
    /// The level above which the timed exceedances hold (nearly) every
    /// sample: `timed` holds those above it.
    pub timed_from: f64,
    /// `timed` holds none below this value: a read of a stored run kept
    /// only those the tail fit reads (see
    /// [`crate::analysis::pot::exceedances_read`]); -inf when it holds all.
    pub timed_kept_from: f64,
    /// Maxima of consecutive blocks (a run's checkpoint intervals) and the
    /// blocks' length in seconds.
    pub blocks: Vec<f64>,
    pub block_s: f64,
    /// The first and second half of the measurement (none inside a half;
    /// of a stored series their distributions alone: the agreement check
    /// reads no more).
    pub halves: Option<Box<[Obs; 2]>>,
}

impl Obs {
    /// Observations from (value, count) pairs in any order.
    fn from_counts(mut values: Vec<(f64, u64)>, duration_s: f64) -> Obs {
        values.retain(|&(_, c)| c > 0);
        values.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut merged: Vec<(f64, u64)> = Vec::with_capacity(values.len());
        for (v, c) in values {
            match merged.last_mut() {
                Some(last) if last.0 == v => last.1 += c,
                _ => merged.push((v, c)),
            }
        }
        let mut cum = Vec::with_capacity(merged.len());
        let mut total = 0;
        for &(_, c) in &merged {
            total += c;
            cum.push(total);
        }
        Obs {
            values: merged,
            cum,
            n: total,
            duration_s,
            timed_from: f64::INFINITY,
            timed_kept_from: f64::NEG_INFINITY,
            ..Default::default()
        }
    }

    /// Raw samples in time order; `times_s` (seconds, ascending) or a
    /// sample `rate` (Hz) places them in time.
    pub fn from_samples(values: &[i64], times_s: Option<&[f64]>, rate: Option<f64>) -> Result<Obs, String> {
        Self::samples_inner(values, times_s, rate, true)
    }

    fn samples_inner(values: &[i64], times_s: Option<&[f64]>, rate: Option<f64>, halves: bool) -> Result<Obs, String> {
        let n = values.len();
        if n < 2 {
            return Err("fewer than 2 samples".into());
        }
        let times: Vec<f64> = match (times_s, rate) {
            (Some(t), _) => t.to_vec(),
            (None, Some(r)) if r > 0.0 => (0..n).map(|i| i as f64 / r).collect(),
            _ => return Err("the samples carry no timestamps: give the sample rate (--rate HZ)".into()),
        };
        let span = times[n - 1] - times[0];
        let duration_s = match (times_s, rate) {
            (Some(_), _) if span > 0.0 => span * n as f64 / (n - 1) as f64,
            (Some(_), _) => return Err("every timestamp is the same: the samples span no time".into()),
            (None, Some(r)) => n as f64 / r,
            _ => unreachable!(),
        };
        let mut o = Obs::from_counts(values.iter().map(|&v| (v as f64, 1)).collect(), duration_s);
        let t0 = times[0];
        o.timed = times.iter().zip(values).map(|(&t, &v)| (t - t0, v as f64)).collect();
        o.timed_from = f64::NEG_INFINITY;
        let per_block = (n / 200).max(50);
        o.blocks = values.chunks_exact(per_block).map(|c| *c.iter().max().unwrap_or(&0) as f64).collect();
        o.block_s = duration_s * per_block as f64 / n as f64;
        if halves && n >= 4 {
            let h = n / 2;
            let first = Self::samples_inner(&values[..h], Some(&times[..h]), None, false);
            let second = Self::samples_inner(&values[h..], Some(&times[h..]), None, false);
            if let (Ok(a), Ok(b)) = (first, second) {
                o.halves = Some(Box::new([a, b]));
            }
        }
        Ok(o)
    }

    /// A stored series: its whole-run histogram (bucket values at the
    /// histogram's 0.1 % resolution, exact maximum), its intervals'
    /// maxima and its exceedances; its halves' distributions from the sums
    /// the series keeps (no interval is decoded again).
    pub fn from_series(s: &Series) -> Result<Obs, String> {
        let mut o = Self::of_whole_series(s)?;
        let ivs = &s.intervals;
        if let Some(h) = s.halves() {
            let split = h.split;
            let first = Self::from_intervals(&h.first.unpack(), &ivs[..split], None);
            let second = Self::from_intervals(&h.second.unpack(), &ivs[split..], None);
            if let (Ok(a), Ok(b)) = (first, second) {
                o.halves = Some(Box::new([a, b]));
            }
        }
        Ok(o)
    }

    /// [`Obs::from_series`] without its halves.
    pub fn of_whole_series(s: &Series) -> Result<Obs, String> {
        Self::from_intervals(s.total(), &s.intervals, Some((&s.exceedances, s.exceedances_kept())))
    }

    /// Observations from the sum `total` of intervals `ivs` (their
    /// statistics and time spans); with `timed`, the exceedances that fall
    /// within them (and what a read kept of them) and the intervals'
    /// maxima; without, the distribution alone.
    fn from_intervals(
        total: &Tally,
        ivs: &[Interval],
        timed: Option<(&[Exceedance], Option<KeptExceedances>)>,
    ) -> Result<Obs, String> {
        if total.count() == 0 {
            return Err("no samples".into());
        }
        let duration_ns: u64 = ivs.iter().map(|iv| iv.end_ns - iv.start_ns).sum();
        let mut values: Vec<(f64, u64)> = Vec::new();
        let (lo, hi) = (total.stats.min_or_zero(), total.stats.max);
        for v in total.hist.iter_recorded() {
            let rep = total.hist.median_equivalent(v.value_iterated_to()).clamp(lo, hi);
            values.push((rep as f64, v.count_at_value()));
        }
        values.push((hi as f64, total.stats.overflows));
        if let Some(neg) = &total.neg {
            let (lo, hi) = (neg.stats.min_or_zero(), neg.stats.max);
            for v in neg.hist.iter_recorded() {
                let rep = neg.hist.median_equivalent(v.value_iterated_to()).clamp(lo, hi);
                values.push((-(rep as f64), v.count_at_value()));
            }
            values.push((-(hi as f64), neg.stats.overflows));
        }
        let mut o = Obs::from_counts(values, duration_ns as f64 / 1e9);
        let Some((exceedances, kept)) = timed else { return Ok(o) };
        let t0 = ivs[0].start_ns;
        let end = ivs[ivs.len() - 1].end_ns;
        let within = |e: &&Exceedance| e.t_ns >= t0 && e.t_ns <= end;
        o.timed_from = match kept {
            Some(k) => k.complete_from,
            None => {
                // Counted first, as `timed` below.
                let mut vals = Vec::with_capacity(exceedances.iter().filter(within).count());
                vals.extend(exceedances.iter().filter(within).map(|e| e.value_ns as f64));
                o.complete_level(vals)
            }
        };
        o.timed_kept_from = kept.map_or(f64::NEG_INFINITY, |k| k.from);
        // The tail's extremal index reads those above that level alone: a
        // long run's analysis keeps no more of them (counted first: a
        // vector grown as they come would take up to twice their size).
        let above = |e: &&Exceedance| within(e) && e.value_ns as f64 > o.timed_from;
        o.timed = Vec::with_capacity(exceedances.iter().filter(above).count());
        o.timed.extend(exceedances.iter().filter(above).map(|e| ((e.t_ns - t0) as f64 / 1e9, e.value_ns as f64)));
        // A store gives them in time order: no sort (and its scratch) then.
        if !o.timed.is_sorted_by(|a, b| a.0 <= b.0) {
            o.timed.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        // Interval maxima; a last interval much shorter than the others
        // (the run's end) is not a comparable block.
        let mut lens: Vec<u64> = ivs.iter().map(|iv| iv.end_ns - iv.start_ns).collect();
        lens.sort_unstable();
        let typical = lens[lens.len() / 2];
        o.block_s = typical as f64 / 1e9;
        o.blocks = ivs
            .iter()
            .filter(|iv| iv.stats.count > 0 && (iv.end_ns - iv.start_ns) * 2 >= typical)
            .map(|iv| iv.stats.max as f64)
            .collect();
        Ok(o)
    }

    /// The lowest level above which the timed exceedances' values `vals`
    /// hold (nearly) every sample the histogram has (90 %: the run may have
    /// lost a few to a full ring): a run keeps those above a threshold
    /// that moved (the running p99.9), so low levels are incomplete.
    fn complete_level(&self, mut vals: Vec<f64>) -> f64 {
        // Unstable: equal values are alike, and it needs no scratch copy.
        vals.sort_unstable_by(|a, b| b.total_cmp(a));
        let mut level = f64::INFINITY;
        for (i, &v) in vals.iter().enumerate() {
            // Stored strictly above v: the values before the first equal to v.
            if i > 0 && vals[i - 1] == v {
                continue;
            }
            let hist = self.count_above(v * 1.001) as f64;
            if (i as f64) < 0.9 * hist - 2.0 {
                break;
            }
            level = v;
        }
        level
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Samples per second.
    pub fn rate_hz(&self) -> f64 {
        self.n as f64 / self.duration_s
    }

    pub fn max(&self) -> f64 {
        self.values.last().map_or(0.0, |v| v.0)
    }

    pub fn min(&self) -> f64 {
        self.values.first().map_or(0.0, |v| v.0)
    }

    /// Samples strictly above `x`.
    pub fn count_above(&self, x: f64) -> u64 {
        let i = self.values.partition_point(|&(v, _)| v <= x);
        if i == 0 { self.n } else { self.n - self.cum[i - 1] }
    }

    /// The highest sample value that leaves at least `k` samples above it.
    pub fn threshold_leaving(&self, k: u64) -> Option<f64> {
        let i = self.cum.partition_point(|&c| self.n - c >= k);
        (i > 0).then(|| self.values[i - 1].0)
    }

    /// The excesses over `u` as (excess, count), ascending.
    pub fn excesses(&self, u: f64) -> Vec<(f64, u64)> {
        let i = self.values.partition_point(|&(v, _)| v <= u);
        self.values[i..].iter().map(|&(v, c)| (v - u, c)).collect()
    }

    /// The value with `c` samples above it (the (c+1)-th largest).
    pub fn value_with_above(&self, c: u64) -> f64 {
        let i = self.cum.partition_point(|&k| self.n - k > c);
        self.values[i.min(self.values.len() - 1)].0
    }

    /// The value at quantile q (the ceil(q n)-th smallest).
    pub fn quantile(&self, q: f64) -> f64 {
        // 0.999 x 100000 is 99900.00000000001 in floating point: not 99901.
        let rank = ((q * self.n as f64 - 1e-6).ceil() as u64).clamp(1, self.n.max(1));
        let i = self.cum.partition_point(|&c| c < rank);
        self.values[i.min(self.values.len() - 1)].0
    }

    /// Points of the complementary CDF P(X > x) for a log-log plot: one
    /// per ~2 % step of x, and every point of the last 1000 samples.
    pub fn ccdf(&self) -> Vec<(f64, f64)> {
        let mut out: Vec<(f64, f64)> = Vec::new();
        let n = self.n as f64;
        for (i, &(v, _)) in self.values.iter().enumerate() {
            let above = self.n - self.cum[i];
            if above == 0 {
                break;
            }
            let keep = match out.last() {
                None => true,
                Some(&(x, _)) => v >= x.abs() * 1.02 + 1.0 || above <= 1000,
            };
            if keep {
                out.push((v, above as f64 / n));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_thresholds() {
        let v: Vec<i64> = (1..=1000).collect();
        let o = Obs::from_samples(&v, None, Some(100.0)).unwrap();
        assert_eq!(o.n, 1000);
        assert!((o.duration_s - 10.0).abs() < 1e-9);
        assert_eq!(o.count_above(900.0), 100);
        assert_eq!(o.count_above(0.0), 1000);
        assert_eq!(o.threshold_leaving(100), Some(900.0));
        assert_eq!(o.threshold_leaving(1000), None);
        assert_eq!(o.excesses(998.0), vec![(1.0, 1), (2.0, 1)]);
        assert_eq!(o.value_with_above(10), 990.0);
        assert_eq!(o.quantile(0.5), 500.0);
        assert_eq!(o.blocks.len(), 20);
        assert_eq!(o.blocks[0], 50.0);
        let h = o.halves.as_ref().unwrap();
        assert_eq!(h[0].n + h[1].n, 1000);
        assert!((h[1].duration_s - 5.0).abs() < 1e-6, "{}", h[1].duration_s);
        let c = o.ccdf();
        assert_eq!(c[0], (1.0, 0.999));
        assert!(c.windows(2).all(|w| w[1].0 > w[0].0 && w[1].1 < w[0].1));
    }

    #[test]
    fn timestamps_give_the_duration() {
        let t: Vec<f64> = (0..100).map(|i| i as f64 * 0.001).collect();
        let v: Vec<i64> = (0..100).collect();
        let o = Obs::from_samples(&v, Some(&t), None).unwrap();
        assert!((o.duration_s - 0.1).abs() < 1e-9);
        assert!((o.rate_hz() - 1000.0).abs() < 1e-6);
        assert!(Obs::from_samples(&v, None, None).unwrap_err().contains("--rate"));
    }
}
