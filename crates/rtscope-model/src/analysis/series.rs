//! Everything `rtscope analyze` says about one measured series: exact
//! statistics, percentiles, the complementary CDF, interval maxima,
//! observed exceedance rates, the tail fit and the MTTF table.

use super::mttf::{self, Compute, MttfTable};
use super::obs::Obs;
use super::pot::{self, MIN_OBSERVED, TailModel, TailReport};
use super::usage::Usage;
use crate::run::{Series, SeriesKey};
use serde::Serialize;

/// The percentiles reported.
pub const PERCENTILES: [(&str, f64); 6] =
    [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999), ("p99.99", 0.9999), ("p99.999", 0.99999)];

#[derive(Clone, Debug, Serialize)]
pub struct Percentile {
    pub name: &'static str,
    pub value_ns: i64,
    /// Fewer than 10 samples lie above it: it is (nearly) the maximum.
    pub thin: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct IntervalMax {
    pub start_s: f64,
    pub end_s: f64,
    pub max_ns: i64,
}

/// The empirical rate of exceeding x: T x count(> x) / D, per hour, where
/// it rests on at least 10 observed exceedances.
#[derive(Clone, Debug, Serialize)]
pub struct ObservedRate {
    pub x_ns: i64,
    pub exceedances: u64,
    pub per_hour: f64,
    pub label: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct Stats {
    pub count: u64,
    pub min_ns: i64,
    pub max_ns: i64,
    pub mean_ns: f64,
    /// max - min, as the Siemens CE 3.0 assessment defines it.
    pub jitter_ns: i64,
    pub observed_duration_s: f64,
    pub rate_hz: f64,
    pub percentiles: Vec<Percentile>,
    /// [x_ns, P(X > x)] for a log-log plot.
    pub ccdf: Vec<[f64; 2]>,
    pub interval_maxima: Vec<IntervalMax>,
    pub observed_rates: Vec<ObservedRate>,
}

/// What to compute beside the statistics.
#[derive(Clone, Debug)]
pub struct Options {
    /// The tail threshold, ns (None: automatic).
    pub threshold: Option<f64>,
    /// Buffer periods and counts of the MTTF table.
    pub periods: Vec<u64>,
    pub buffers: Vec<u32>,
    /// Compute time per period; None: half the period.
    pub compute: Option<Compute>,
    pub target_s: f64,
    /// Whether the MTTF table's cells carry their 95 % intervals (`p_low`,
    /// `p_high`, `mttf_low_s`, `mttf_high_s`). From the fitted tail each
    /// costs a profile-likelihood scan, most of an analysis' time; only the
    /// JSON prints them, so the text and the reports leave them out.
    pub mttf_intervals: bool,
    /// What a day and a week of the return levels are (stored with the
    /// run, or --usage).
    pub usage: Usage,
    /// Why the tail is not to be fitted (its verdicts then want data), or
    /// None to fit it: the fleet report's classic buckets, whose few
    /// distinct values a fit would be thrown away for.
    pub no_tail: Option<&'static str>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threshold: None,
            // 48 kHz audio with 64, 128 and 256 frames, and the 1 ms cycle.
            periods: vec![1_333_333, 2_666_667, 5_333_333, 1_000_000],
            buffers: vec![2, 3, 4],
            compute: None,
            target_s: 86_400.0,
            mttf_intervals: true,
            usage: Usage::CONTINUOUS,
            no_tail: None,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct SeriesReport {
    pub probe: String,
    pub metric: String,
    pub cpu: i64,
    /// The workload the series was measured under, in an assessment
    /// (`rtscope run`); absent for a single probe's run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<String>,
    pub stats: Stats,
    pub tail: Option<TailReport>,
    /// Why there is no tail fit.
    pub tail_error: Option<String>,
    pub mttf: Option<MttfTable>,
}

/// A series with what the verdicts need.
#[derive(Clone, Debug)]
pub struct SeriesAnalysis {
    pub key: SeriesKey,
    pub obs: Obs,
    pub model: Option<TailModel>,
    /// The period of the timer the probe waited for (wakeup interval,
    /// ptimer period), when there is one.
    pub timer_period_ns: Option<u64>,
    pub report: SeriesReport,
    /// What a day and a week of its return levels are.
    pub usage: Usage,
}

/// Analyses a stored series. `timer_period_ns`: from the run's plan.
pub fn analyze_series(s: &Series, timer_period_ns: Option<u64>, opts: &Options) -> Result<SeriesAnalysis, String> {
    let obs = Obs::from_series(s)?;
    let total = s.total();
    let exact = (total.count(), total.min(), total.max(), total.mean());
    let quantile = |q: f64| total.quantile(q);
    let t0 = s.intervals.first().map_or(0, |i| i.start_ns);
    let maxima = s
        .intervals
        .iter()
        .filter(|i| i.stats.count > 0)
        .map(|i| IntervalMax {
            start_s: (i.start_ns - t0) as f64 / 1e9,
            end_s: (i.end_ns - t0) as f64 / 1e9,
            max_ns: i.stats.max as i64,
        })
        .collect();
    Ok(build(s.key.clone(), obs, exact, &quantile, maxima, timer_period_ns, opts))
}

/// [`analyze_series`] of each (series, timer period) of `list`, in order.
/// The series are analysed on as many threads as the machine offers: each
/// analysis is independent of the others, so the results are those of
/// analysing them one after another.
pub fn analyze_all(list: &[(&Series, Option<u64>)], opts: &Options) -> Vec<Result<SeriesAnalysis, String>> {
    crate::par::map(list, |&(s, period)| analyze_series(s, period, opts))
}

/// Analyses raw samples (ns) with timestamps (s) or a rate (Hz).
pub fn analyze_samples(
    key: SeriesKey,
    values: &[i64],
    times_s: Option<&[f64]>,
    rate: Option<f64>,
    opts: &Options,
) -> Result<SeriesAnalysis, String> {
    let obs = Obs::from_samples(values, times_s, rate)?;
    let n = values.len() as u64;
    let sum: i128 = values.iter().map(|&v| v as i128).sum();
    let exact = (n, *values.iter().min().unwrap_or(&0), *values.iter().max().unwrap_or(&0), sum as f64 / n as f64);
    let quantile = |q: f64| obs.quantile(q) as i64;
    let maxima = obs
        .blocks
        .iter()
        .enumerate()
        .map(|(i, &m)| IntervalMax {
            start_s: i as f64 * obs.block_s,
            end_s: (i + 1) as f64 * obs.block_s,
            max_ns: m as i64,
        })
        .collect();
    let obs2 = obs.clone();
    Ok(build(key, obs2, exact, &quantile, maxima, None, opts))
}

fn build(
    key: SeriesKey,
    obs: Obs,
    (count, min, max, mean): (u64, i64, i64, f64),
    quantile: &dyn Fn(f64) -> i64,
    interval_maxima: Vec<IntervalMax>,
    timer_period_ns: Option<u64>,
    opts: &Options,
) -> SeriesAnalysis {
    let percentiles = PERCENTILES
        .iter()
        .map(|&(name, q)| Percentile {
            name,
            value_ns: quantile(q),
            thin: (count as f64 * (1.0 - q)) < MIN_OBSERVED as f64,
        })
        .collect();
    let mut observed_rates = Vec::new();
    let mut x = 1_000.0f64;
    while x < 1e12 {
        let c = obs.count_above(x);
        if c < MIN_OBSERVED {
            break;
        }
        if c < count {
            observed_rates.push(ObservedRate {
                x_ns: x as i64,
                exceedances: c,
                per_hour: 3600.0 * c as f64 / obs.duration_s,
                label: "observed",
            });
        }
        x *= 2.0;
    }
    let stats = Stats {
        count,
        min_ns: min,
        max_ns: max,
        mean_ns: (mean * 1000.0).round() / 1000.0,
        jitter_ns: max - min,
        observed_duration_s: obs.duration_s,
        rate_hz: obs.rate_hz(),
        percentiles,
        ccdf: obs.ccdf().into_iter().map(|(x, p)| [x, p]).collect(),
        interval_maxima,
        observed_rates,
    };
    let fitted = match opts.no_tail {
        Some(why) => Err(why.to_string()),
        None => pot::analyze(&obs, opts.threshold, opts.usage),
    };
    let (model, tail, tail_error) = match fitted {
        Ok((m, r)) => (Some(m), Some(r), None),
        Err(e) => (None, None, Some(e)),
    };
    let mttf = (!opts.periods.is_empty()).then(|| {
        let text = match &opts.compute {
            None => "half the period".to_string(),
            Some(Compute::Fixed(c)) => crate::units::human(*c),
            Some(Compute::Dist(_)) => "measured distribution".into(),
        };
        let compute = |t: u64| opts.compute.clone().unwrap_or(Compute::Fixed(t / 2));
        let spec = mttf::TableSpec {
            periods: &opts.periods,
            buffers: &opts.buffers,
            target_s: opts.target_s,
            intervals: opts.mttf_intervals,
        };
        mttf::table(&obs, model.as_ref(), &spec, compute, text)
    });
    let report = SeriesReport {
        probe: key.probe.clone(),
        metric: key.metric.clone(),
        cpu: key.cpu,
        load: key.load.clone(),
        stats,
        tail,
        tail_error,
        mttf,
    };
    // The halves served the agreement check alone, the timed exceedances
    // the extremal index and the block maxima the diagnostics (both in
    // the tail fit above): what reads the analysis later (verdicts, MTTF,
    // misses) takes the whole run's distribution and duration, and a run
    // of many series keeps one analysis each.
    let mut obs = obs;
    obs.halves = None;
    obs.timed = Vec::new();
    obs.blocks = Vec::new();
    SeriesAnalysis { key, obs, model, timer_period_ns, report, usage: opts.usage }
}
