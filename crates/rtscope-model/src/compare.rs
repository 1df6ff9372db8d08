//! Comparing runs: per series and figure, each run's value, its ratio to
//! the first run's, and whether the difference is beyond the runs' sampling
//! noise.
//!
//! The noise test is a bootstrap interval of the ratio. A percentile of a
//! bootstrap resample is an order statistic of the original sample: the
//! k-th smallest of n values drawn with replacement is the original's
//! `ceil(n U)`-th smallest, where `U ~ Beta(k, n + 1 - k)` is the k-th
//! smallest of n uniforms. So each replicate draws one Beta variate per run
//! and reads the histogram at that rank: exact, and as cheap for a 12-hour
//! run as for a 5-second one. The mean's replicate is normal with the
//! histogram's variance. The maximum is one sample and has no interval.
//!
//! The test sees sampling noise only: two runs of the same machine also
//! differ by what changed between them (the host, the time of day). A gate
//! should therefore ask for a difference both beyond the noise and larger
//! than a practical margin, as `rtscope compare --max-regression` does.

use crate::episode::Stages;
use crate::hist::{Tally, signed_buckets};
use crate::run::{Run, Series};
use serde::{Deserialize, Serialize};

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
/// Two-sided coverage of the ratio's interval.
pub const CONFIDENCE: f64 = 0.95;
/// A percentile gets an interval only when at least this many samples lie
/// above it; with fewer it is close to the maximum and as untestable.
pub const MIN_TAIL: f64 = 10.0;

/// The figures compared, in order: (name, quantile or None for the mean
/// and the maximum).
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

/// A whole-run distribution read by rank: the histogram's buckets with
/// cumulative counts, overflows as the exact maximum.
#[derive(Clone, Debug)]
pub struct Ranks {
    /// (value at the bucket's top, samples up to and including it).
    cum: Vec<(i64, u64)>,
    n: u64,
    mean: f64,
    var: f64,
    max: i64,
}

impl Ranks {
    pub fn new(t: &Tally) -> Ranks {
        let (min, max) = (t.min(), t.max());
        let mut cum = Vec::new();
        let mut n = 0u64;
        let (mut s1, mut s2) = (0f64, 0f64);
        for [lo, hi, c] in signed_buckets(t) {
            let c = c as u64;
            n += c;
            // The value HdrHistogram reports for the bucket (its top),
            // within the exact range, as Tally::quantile does.
            cum.push((hi.clamp(min, max), n));
            let mid = (lo + hi) as f64 / 2.0;
            s1 += mid * c as f64;
            s2 += mid * mid * c as f64;
        }
        let over = t.stats.overflows + t.neg.as_ref().map_or(0, |x| x.stats.overflows);
        if over > 0 {
            n += over;
            cum.push((max, n));
            s1 += max as f64 * over as f64;
            s2 += (max as f64).powi(2) * over as f64;
        }
        let mean = if t.count() > 0 { t.sum() as f64 / t.count() as f64 } else { 0.0 };
        let var = if n > 1 { ((s2 - s1 * s1 / n as f64) / (n - 1) as f64).max(0.0) } else { 0.0 };
        Ranks { cum, n, mean, var, max }
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
            Figure::Quantile(q) => self.n as f64 * (1.0 - q) >= MIN_TAIL,
            Figure::Max => false,
        }
    }

    /// One bootstrap replicate of the figure.
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

/// What a run's figure did against the first run's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// The first run: what the others are compared with.
    Baseline,
    /// Higher, and the interval of the ratio lies above 1.
    Worse,
    /// Lower, and the interval lies below 1.
    Better,
    /// The interval holds 1: within the runs' noise.
    WithinNoise,
    /// No interval: the maximum (one sample), a percentile with too few
    /// samples above it, or a ratio undefined (a baseline <= 0).
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

/// One figure of one series across the runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FigureCmp {
    pub figure: String,
    /// Per run, ns (None: the run lacks the series).
    pub values_ns: Vec<Option<f64>>,
    /// Per run, value / the first run's (None where undefined).
    pub ratios: Vec<Option<f64>>,
    /// Per run, the bootstrap interval of the ratio.
    pub intervals: Vec<Option<[f64; 2]>>,
    pub changes: Vec<Change>,
}

impl FigureCmp {
    /// The largest increase, in percent, among the runs that got worse
    /// beyond the noise (None when none did).
    pub fn worst_regression_pct(&self) -> Option<f64> {
        self.changes
            .iter()
            .zip(&self.ratios)
            .filter(|(c, _)| **c == Change::Worse)
            .filter_map(|(_, r)| r.map(|r| (r - 1.0) * 100.0))
            .fold(None, |acc: Option<f64>, v| Some(acc.map_or(v, |a| a.max(v))))
    }
}

/// One series (or the merge of a probe's CPUs) across the runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeriesCmp {
    pub load: String,
    pub probe: String,
    pub metric: String,
    /// The CPU, or None for all CPUs of the run merged.
    pub cpu: Option<i64>,
    pub counts: Vec<Option<u64>>,
    pub figures: Vec<FigureCmp>,
}

impl SeriesCmp {
    /// `wakeup latency cpu1`, `wakeup latency all CPUs`, with the load when there is one.
    pub fn label(&self) -> String {
        let cpu = self.cpu.map_or_else(|| "all CPUs".to_string(), |c| format!("cpu{c}"));
        let load = if self.load.is_empty() { String::new() } else { format!(" [{}]", self.load) };
        format!("{} {} {cpu}{load}", self.probe, self.metric)
    }
}

/// The key of a compared row: (load, probe, metric, cpu or None for all).
type Key = (String, String, String, Option<i64>);

/// The merged tally of each row key in a run: every series, and per probe
/// and metric the merge of its CPUs when it has several.
fn tallies(run: &Run) -> Vec<(Key, Tally)> {
    let mut out: Vec<(Key, Tally)> = Vec::new();
    let mut all: Vec<(Key, Tally, usize)> = Vec::new();
    for s in &run.series {
        let load = load_of(s).to_string();
        out.push(((load.clone(), s.key.probe.clone(), s.key.metric.clone(), Some(s.key.cpu)), s.total().clone()));
        let k = (load, s.key.probe.clone(), s.key.metric.clone(), None);
        match all.iter_mut().find(|(x, _, _)| *x == k) {
            Some((_, t, n)) => {
                t.merge(s.total());
                *n += 1;
            }
            None => all.push((k, s.total().clone(), 1)),
        }
    }
    out.extend(all.into_iter().filter(|(_, _, n)| *n > 1).map(|(k, t, _)| (k, t)));
    out
}

/// Compares `runs` (the first is the baseline): a row per series any of
/// them has, per CPU and merged over CPUs, in the first run's order.
pub fn compare(runs: &[&Run]) -> Vec<SeriesCmp> {
    let per_run: Vec<Vec<(Key, Tally)>> = runs.iter().map(|r| tallies(r)).collect();
    let mut keys: Vec<Key> = Vec::new();
    for list in &per_run {
        for (k, _) in list {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    // Per load and probe: the measured metrics in the order the first
    // run's probe made them, then the stage series of a traced run; per
    // metric the CPUs in order and the merged row last.
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
        (&a.0, &a.1, rank(&a.2), &a.2, a.3.is_none(), a.3).cmp(&(&b.0, &b.1, rank(&b.2), &b.2, b.3.is_none(), b.3))
    });
    let mut rng = Rng::new(0x0072_7473_636f_7065); // "rtscope"
    keys.into_iter()
        .map(|k| {
            let ranks: Vec<Option<Ranks>> =
                per_run.iter().map(|list| list.iter().find(|(x, _)| *x == k).map(|(_, t)| Ranks::new(t))).collect();
            let figures = FIGURES.iter().map(|&(name, f)| compare_figure(name, f, &ranks, &mut rng)).collect();
            SeriesCmp {
                load: k.0,
                probe: k.1,
                metric: k.2,
                cpu: k.3,
                counts: ranks.iter().map(|r| r.as_ref().map(Ranks::count)).collect(),
                figures,
            }
        })
        .collect()
}

fn compare_figure(name: &str, f: Figure, ranks: &[Option<Ranks>], rng: &mut Rng) -> FigureCmp {
    let values: Vec<Option<f64>> = ranks.iter().map(|r| r.as_ref().filter(|r| r.n > 0).map(|r| r.value(f))).collect();
    let base = ranks.first().and_then(|r| r.as_ref()).filter(|r| r.n > 0);
    let mut cmp = FigureCmp {
        figure: name.into(),
        values_ns: values.clone(),
        ratios: vec![None; ranks.len()],
        intervals: vec![None; ranks.len()],
        changes: vec![Change::Missing; ranks.len()],
    };
    if base.is_some() {
        cmp.changes[0] = Change::Baseline;
        cmp.ratios[0] = Some(1.0);
    }
    let Some(base) = base else { return cmp };
    let b0 = base.value(f);
    for (i, other) in ranks.iter().enumerate().skip(1) {
        let Some(other) = other.as_ref().filter(|r| r.n > 0) else { continue };
        let v = other.value(f);
        if b0 <= 0.0 || v < 0.0 {
            cmp.changes[i] = Change::Untested;
            continue;
        }
        cmp.ratios[i] = Some(v / b0);
        if !(base.testable(f) && other.testable(f)) {
            cmp.changes[i] = Change::Untested;
            continue;
        }
        let mut reps: Vec<f64> = (0..REPLICATES)
            .map(|_| {
                let a = base.replicate(f, rng);
                let b = other.replicate(f, rng);
                if a > 0.0 { b / a } else { f64::INFINITY }
            })
            .collect();
        reps.sort_by(f64::total_cmp);
        let tail = (1.0 - CONFIDENCE) / 2.0;
        let at = |p: f64| reps[((p * REPLICATES as f64) as usize).min(REPLICATES - 1)];
        let (lo, hi) = (at(tail), at(1.0 - tail));
        cmp.intervals[i] = Some([lo, hi]);
        cmp.changes[i] = if lo > 1.0 {
            Change::Worse
        } else if hi < 1.0 {
            Change::Better
        } else {
            Change::WithinNoise
        };
    }
    cmp
}

/// A figure that got worse, beyond the noise, by more than a limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Regression {
    pub series: String,
    pub figure: String,
    /// The run's index among the compared ones (1: the second).
    pub run: usize,
    pub ratio: f64,
    pub interval: [f64; 2],
}

/// Every figure of `rows` that got worse beyond the noise by more than
/// `max_pct` percent (0: any significant increase).
pub fn regressions(rows: &[SeriesCmp], max_pct: f64) -> Vec<Regression> {
    let mut out = Vec::new();
    for s in rows {
        for f in &s.figures {
            for (i, c) in f.changes.iter().enumerate() {
                if let (Change::Worse, Some(r), Some(iv)) = (c, f.ratios[i], f.intervals[i])
                    && (r - 1.0) * 100.0 > max_pct
                {
                    out.push(Regression {
                        series: s.label(),
                        figure: f.figure.clone(),
                        run: i,
                        ratio: r,
                        interval: iv,
                    });
                }
            }
        }
    }
    out
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

    #[test]
    fn intervals_hold_one_for_samples_of_one_distribution() {
        // 95 % intervals: about 1 in 20 pairs of same-law samples may
        // miss; 40 pairs with at most 4 misses per figure.
        for (name, f) in [("p50", Figure::Quantile(0.5)), ("p99.9", Figure::Quantile(0.999)), ("mean", Figure::Mean)] {
            let mut rng = Rng::new(11);
            let same = (0..40)
                .filter(|s| {
                    let ranks = [
                        Some(Ranks::new(&latencies(20_000, 3_000.0, 2 * s + 100))),
                        Some(Ranks::new(&latencies(20_000, 3_000.0, 2 * s + 101))),
                    ];
                    compare_figure(name, f, &ranks, &mut rng).changes[1] == Change::WithinNoise
                })
                .count();
            assert!(same >= 36, "{name}: {same} of 40 within noise");
        }
    }

    fn run_with(t: &Tally) -> Run {
        let mut run = crate::store::tests_support::sample_run();
        run.series.truncate(1);
        let iv = crate::run::Interval::new(1, 0, 1, t, 0, 0);
        let key = run.series[0].key.clone();
        run.series[0] = Series::new(key, "ns".into(), "adaptive".into(), vec![iv], vec![]).unwrap();
        run
    }

    #[test]
    fn the_same_distribution_is_within_noise_and_a_heavier_tail_is_worse() {
        let a = run_with(&latencies(40_000, 3_000.0, 1));
        let same = run_with(&latencies(40_000, 3_000.0, 2));
        let worse = run_with(&latencies(40_000, 6_000.0, 3));
        let rows = compare(&[&a, &same, &worse]);
        assert_eq!(rows.len(), 1);
        let get = |name: &str| rows[0].figures.iter().find(|f| f.figure == name).unwrap().clone();
        for name in ["mean", "p50", "p99", "p99.9"] {
            let f = get(name);
            assert_eq!(f.changes[0], Change::Baseline);
            assert_eq!(f.changes[1], Change::WithinNoise, "{name}: {f:?}");
            let [lo, hi] = f.intervals[1].unwrap();
            assert!(lo < 1.0 && hi > 1.0 && hi - lo < 0.3, "{name}: {lo}..{hi}");
            assert_eq!(f.changes[2], Change::Worse, "{name}: {f:?}");
            assert!(f.ratios[2].unwrap() > 1.1, "{name}");
        }
        // p99.99 of 40000 samples has 4 above it: too few for an interval.
        assert_eq!(get("p99.99").changes[1], Change::Untested);
        assert_eq!(get("max").changes[2], Change::Untested);
        assert!(get("max").ratios[2].is_some());
        // The gate: a regression beyond the noise and above the limit.
        let r = regressions(&rows, 20.0);
        assert!(r.iter().any(|r| r.figure == "p99" && r.run == 2), "{r:?}");
        assert!(r.iter().all(|r| r.run == 2));
        assert!(regressions(&rows, 1000.0).is_empty());
        // Reversed, the heavier tail is the baseline and the others are better.
        let back = compare(&[&worse, &a]);
        let p99 = back[0].figures.iter().find(|f| f.figure == "p99").unwrap();
        assert_eq!(p99.changes[1], Change::Better);
        assert!(regressions(&back, 0.0).is_empty());
        // The bootstrap is seeded: the same comparison gives the same answer.
        assert_eq!(compare(&[&a, &same, &worse]), rows);
    }

    #[test]
    fn series_missing_from_a_run_are_marked_and_cpus_merge() {
        let run = crate::store::tests_support::sample_run();
        let mut less = run.clone();
        less.series.truncate(1);
        let rows = compare(&[&run, &less]);
        let cpus: Vec<Option<i64>> = rows.iter().map(|r| r.cpu).collect();
        assert!(cpus.contains(&None), "CPUs merged: {cpus:?}");
        assert_eq!(cpus.last(), Some(&None), "the merged row comes last");
        let missing = rows.iter().find(|r| r.cpu.is_some() && r.counts[1].is_none()).unwrap();
        assert!(missing.figures.iter().all(|f| f.changes[1] == Change::Missing));
        let merged = rows.iter().find(|r| r.cpu.is_none()).unwrap();
        assert_eq!(merged.counts[0], Some(run.series.iter().map(|s| s.total().count()).sum()));
        assert_eq!(merged.label(), "wakeup latency all CPUs");
    }
}
