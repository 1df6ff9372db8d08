//! Peaks over threshold: a Generalized Pareto tail above a threshold u,
//! the extremal index for clustered spikes, return levels for an hour, a
//! day and a week of operation with 95 % profile-likelihood intervals,
//! and the diagnostics that say how far to trust them.

use super::diagnostics::{self, TestResult};
use super::extremal;
use super::gev::{self, Gev};
use super::gpd::{self, Excesses, GpdFit};
use super::obs::Obs;
use super::usage::Usage;
use crate::run::{KeptExceedances, Series};
use crate::units::human;
use serde::Serialize;

/// The periods of operation return levels are given for, in continuous
/// operation ([`Usage`] says how long a day and a week of use are).
pub const PERIODS: [(&str, f64); 3] = [("hour", 3_600.0), ("day", 86_400.0), ("week", 604_800.0)];
/// Exceedances the automatic threshold leaves.
pub const DEFAULT_EXCEEDANCES: u64 = 100;
/// No fit rests on fewer exceedances.
pub const MIN_EXCEEDANCES: u64 = 50;
/// Beyond this many times the observed duration a level is extrapolated...
pub const EXTRAPOLATED: f64 = 10.0;
/// ... and beyond this many it is refused.
pub const REFUSED: f64 = 100.0;
/// An empirical figure rests on at least this many observed exceedances.
pub const MIN_OBSERVED: u64 = 10;
/// Chi-square(1) at 95 %.
const CRIT: f64 = 3.841_458_820_694_124;

/// A fitted tail: P(X > x) = zeta (1 + xi (x - u) / sigma)^(-1/xi) for x > u.
#[derive(Clone, Debug)]
pub struct TailModel {
    pub u: f64,
    pub fit: GpdFit,
    pub excesses: Vec<(f64, u64)>,
    /// Fraction of samples above u.
    pub zeta: f64,
    pub theta: f64,
    pub theta_note: String,
    pub n: u64,
    pub rate_hz: f64,
    pub duration_s: f64,
}

/// A value with its 95 % interval (None: not bounded by the data).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub value: f64,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

/// Picks the threshold: `requested`, or the highest value leaving at least
/// [`DEFAULT_EXCEEDANCES`] above it (all there are, down to
/// [`MIN_EXCEEDANCES`], for small data). Returns (u, exceedances).
pub fn choose_threshold(obs: &Obs, requested: Option<f64>) -> Result<(f64, u64), String> {
    if let Some(u) = requested {
        let k = obs.count_above(u);
        if k < MIN_EXCEEDANCES {
            return Err(format!(
                "the threshold {} leaves {k} exceedances; a tail fit needs at least {MIN_EXCEEDANCES}: lower it, or use auto",
                human(u.max(0.0) as u64)
            ));
        }
        return Ok((u, k));
    }
    let u = obs.threshold_leaving(DEFAULT_EXCEEDANCES).or_else(|| obs.threshold_leaving(MIN_EXCEEDANCES)).ok_or_else(
        || {
            format!(
                "{} samples with {} distinct values: a tail fit needs at least {MIN_EXCEEDANCES} exceedances of a threshold",
                obs.n,
                obs.count_above(f64::NEG_INFINITY)
            )
        },
    )?;
    Ok((u, obs.count_above(u)))
}

/// What a read of the stored series `s` keeps of its exceedances for a
/// tail fit at `requested` (None: the automatic threshold, see
/// [`choose_threshold`]): those above the level where they are complete
/// (of the whole series, as they are stored) and above the threshold, which
/// the extremal index reads (nothing else reads them: the agreement check
/// reads the halves' distributions); none where no tail can be fitted.
/// A read that keeps these ([`Series::keep_exceedances_from`]) gives the
/// same analysis at that threshold; [`TailModel::fit`] refuses one at a
/// lower threshold.
pub fn exceedances_read(s: &Series, requested: Option<f64>) -> KeptExceedances {
    let Ok(obs) = Obs::of_whole_series(s) else {
        return KeptExceedances { from: f64::INFINITY, complete_from: f64::INFINITY };
    };
    let from = match choose_threshold(&obs, requested) {
        Ok((u, _)) => u.max(obs.timed_from),
        Err(_) => f64::INFINITY,
    };
    KeptExceedances { from, complete_from: obs.timed_from }
}

impl TailModel {
    /// Fits the tail of `obs` above the threshold (see [`choose_threshold`]).
    pub fn fit(obs: &Obs, requested: Option<f64>) -> Result<TailModel, String> {
        let (u, k) = choose_threshold(obs, requested)?;
        if u.max(obs.timed_from) < obs.timed_kept_from {
            // A read for another threshold ([`exceedances_read`]): the
            // extremal index would miss exceedances.
            return Err(format!(
                "the run was read keeping its exceedances above {} alone, the threshold {} needs those below: \
                 read it for this threshold",
                human(obs.timed_kept_from.max(0.0) as u64),
                human(u.max(0.0) as u64)
            ));
        }
        let excesses = obs.excesses(u);
        if excesses.len() < 3 {
            return Err(format!(
                "the {k} samples above {} take {} distinct values: too few for a tail fit",
                human(u.max(0.0) as u64),
                excesses.len()
            ));
        }
        let fit = gpd::fit(&excesses).ok_or("the likelihood of the tail fit has no maximum")?;
        let rate_hz = obs.rate_hz();
        let (theta, theta_note) = extremal_index(obs, u, rate_hz);
        Ok(TailModel {
            u,
            fit,
            excesses,
            zeta: k as f64 / obs.n as f64,
            theta,
            theta_note,
            n: obs.n,
            rate_hz,
            duration_s: obs.duration_s,
        })
    }

    /// Per-sample P(X > x) from the fitted tail (x >= u).
    pub fn p_model(&self, x: f64) -> f64 {
        self.zeta * self.fit.gpd.sf(x - self.u)
    }

    /// The level exceeded on average once per `m_obs` observations
    /// (clusters counted once), with its 95 % interval.
    pub fn level(&self, obs: &Obs, m_obs: f64) -> Estimate {
        let m_eff = m_obs * self.zeta * self.theta;
        if m_eff <= 1.0 {
            // Below the threshold: the data themselves, with a Poisson
            // interval on the count above.
            let c = obs.n as f64 / (m_obs * self.theta);
            let at = |c: f64| obs.value_with_above(c.max(0.0).round() as u64);
            let half = 1.96 * c.sqrt();
            return Estimate { value: at(c), low: Some(at(c + half)), high: Some(at(c - half)) };
        }
        let g = self.fit.gpd;
        let d = g.quantile(1.0 - 1.0 / m_eff);
        let (lo, hi) = gpd::profile_interval(&self.excesses, &self.fit, d, m_eff);
        // The profile holds zeta (the share of samples above u) fixed; its
        // own uncertainty (binomial, its variance grown by 1/theta for
        // clustered exceedances) is independent of the GPD's estimates
        // (Coles 2001, 4.3.3), so the two half-widths add in quadrature.
        let se = (self.zeta * (1.0 - self.zeta) / (obs.n as f64 * self.theta)).sqrt();
        let at =
            |z: f64| g.quantile(1.0 - 1.0 / (m_obs * z.clamp(f64::MIN_POSITIVE, 1.0) * self.theta).max(1.0 + 1e-9));
        let (dz_low, dz_high) = (d - at(self.zeta - 1.96 * se), at(self.zeta + 1.96 * se) - d);
        let low = d - (d - lo).hypot(dz_low.max(0.0));
        let high = hi.map(|h| d + (h - d).hypot(dz_high.max(0.0)));
        Estimate { value: self.u + d, low: Some(self.u + low.max(0.0)), high: high.map(|h| self.u + h) }
    }

    /// Per-sample P(X > x) for x above u with its 95 % profile-likelihood
    /// interval (low end None: not bounded away from 0).
    pub fn p_interval(&self, x: f64) -> (f64, Option<f64>, f64) {
        let d = x - self.u;
        let p = self.p_model(x);
        // Whether m lies inside the interval.
        let inside = |m: f64| 2.0 * (self.fit.loglik - gpd::profile(&self.excesses, d, m)) <= CRIT;
        // m = excesses per exceedance of x; the first and the last grid
        // point in log m inside the interval. The profile likelihood is
        // unimodal in m with its maximum at the fit's own m = zeta / p, so
        // the points inside are one run around it: from the grid point
        // nearest that, bisect each side for the run's ends (some 14
        // profiles, not one per grid point); a scan where that point and
        // its neighbours all lie outside.
        let grid: Vec<f64> = (0..=120).map(|i| (1.000_001f64).max((i as f64 * 0.3).exp())).collect();
        let top = grid.len() - 1;
        let at_fit = ((self.zeta / p).ln() / 0.3).round().clamp(0.0, top as f64) as usize;
        let seed = [at_fit, at_fit.saturating_sub(1), (at_fit + 1).min(top)].into_iter().find(|&i| inside(grid[i]));
        let (first, last) = match seed {
            Some(c) => {
                // The first inside in [0, c] and the last inside in [c, top].
                let (mut out, mut inn) = (None::<usize>, c);
                while inn > out.map_or(0, |o| o + 1) {
                    let mid = (out.map_or(0, |o| o + 1) + inn) / 2;
                    if inside(grid[mid]) { inn = mid } else { out = Some(mid) }
                }
                let first = inn;
                let (mut inn, mut out) = (c, None::<usize>);
                while out.map_or(top, |o| o - 1) > inn {
                    let mid = (inn + out.map_or(top, |o| o - 1)).div_ceil(2);
                    if inside(grid[mid]) { inn = mid } else { out = Some(mid) }
                }
                (first, inn)
            }
            None => {
                let Some(first) = (0..grid.len()).find(|&i| inside(grid[i])) else {
                    return (p, Some(p), p);
                };
                (first, (first..grid.len()).rev().find(|&i| i == first || inside(grid[i])).unwrap_or(first))
            }
        };
        // The deviance less the bound at log m: <= 0 inside.
        let excess = |lm: f64| 2.0 * (self.fit.loglik - gpd::profile(&self.excesses, d, lm.exp())) - CRIT;
        let refine = |inner: f64, outer: f64| -> f64 {
            // Where the deviance crosses the bound between a grid point
            // inside and its neighbour outside, to 0.3 / 2^20 in log m (a
            // relative 3e-7 in p, far below the interval's own
            // uncertainty): regula falsi with the Illinois step (the end
            // kept twice has its value halved), some 6 profiles in place of
            // bisection's 20; a bisection step where the secant leaves the
            // bracket (an infinite deviance).
            let (mut a, mut b) = (inner.ln(), outer.ln());
            let (mut fa, mut fb) = (excess(a), excess(b));
            let mut kept = 0i8;
            for _ in 0..60 {
                if (b - a).abs() <= 0.3 / f64::from(1u32 << 20) {
                    break;
                }
                let secant = (a * fb - b * fa) / (fb - fa);
                let c = if secant > a.min(b) && secant < a.max(b) { secant } else { 0.5 * (a + b) };
                let fc = excess(c);
                if fc > 0.0 {
                    (b, fb) = (c, fc);
                    if kept == -1 {
                        fa *= 0.5;
                    }
                    kept = -1;
                } else {
                    (a, fa) = (c, fc);
                    if kept == 1 {
                        fb *= 0.5;
                    }
                    kept = 1;
                }
            }
            (0.5 * (a + b)).exp()
        };
        let m_min = if first == 0 { grid[0] } else { refine(grid[first], grid[first - 1]) };
        let p_high = (self.zeta / m_min).min(1.0);
        let p_low = (last < grid.len() - 1).then(|| self.zeta / refine(grid[last], grid[last + 1]));
        (p, p_low, p_high)
    }
}

/// theta by the intervals estimator over the timed exceedances of the
/// higher of u and the level above which the exceedances are complete.
fn extremal_index(obs: &Obs, u: f64, rate_hz: f64) -> (f64, String) {
    let level = u.max(obs.timed_from);
    if !level.is_finite() {
        return (1.0, "assumed 1 (no timed exceedances; 1 is the cautious value)".into());
    }
    let t: Vec<f64> = obs.timed.iter().filter(|e| e.1 > level).map(|e| e.0 * rate_hz).collect();
    if t.len() < MIN_OBSERVED as usize {
        return (
            1.0,
            format!(
                "assumed 1 ({} timed exceedances above {}; the estimate needs {MIN_OBSERVED}; 1 is the cautious value)",
                t.len(),
                human(level.max(0.0) as u64)
            ),
        );
    }
    match extremal::intervals_estimator(&t) {
        Some(th) => (
            th,
            format!("intervals estimator (Ferro-Segers) over {} exceedances above {}", t.len(), human(level as u64)),
        ),
        None => (1.0, "assumed 1 (the intervals estimator failed)".into()),
    }
}

/// A return level as reported.
#[derive(Clone, Debug, Serialize)]
pub struct Level {
    pub period_s: f64,
    pub value_ns: Option<i64>,
    pub ci_low_ns: Option<i64>,
    /// None when the data do not bound it (a tail that may be arbitrarily heavy).
    pub ci_high_ns: Option<i64>,
    /// Beyond 10x the observed duration.
    pub extrapolated: bool,
    /// The level observed in the data (exceeded once per period on
    /// average), where the run is at least 10 periods long.
    pub observed_ns: Option<i64>,
    /// Why there is no value (beyond 100x the observed duration).
    pub refused: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReturnLevels {
    pub hour: Level,
    pub day: Level,
    pub week: Level,
}

impl ReturnLevels {
    pub fn get(&self, name: &str) -> Option<&Level> {
        match name {
            "hour" => Some(&self.hour),
            "day" => Some(&self.day),
            "week" => Some(&self.week),
            _ => None,
        }
    }
}

fn ns(v: f64) -> i64 {
    v.round() as i64
}

/// The level for `period_s` of operation.
pub fn return_level(model: &TailModel, obs: &Obs, period_s: f64) -> Level {
    let ratio = period_s / obs.duration_s;
    let observed = (obs.duration_s >= MIN_OBSERVED as f64 * period_s).then(|| {
        let c = (obs.duration_s / period_s / model.theta).round() as u64;
        ns(obs.value_with_above(c))
    });
    if ratio > REFUSED {
        return Level {
            period_s,
            value_ns: None,
            ci_low_ns: None,
            ci_high_ns: None,
            extrapolated: true,
            observed_ns: observed,
            refused: Some(format!(
                "{} is {:.0}x the {} observed (at most {REFUSED:.0}x): measure at least {}",
                human((period_s * 1e9) as u64),
                ratio,
                human((obs.duration_s * 1e9) as u64),
                human((period_s / REFUSED * 1e9).ceil() as u64)
            )),
        };
    }
    let e = model.level(obs, model.rate_hz * period_s);
    Level {
        period_s,
        value_ns: Some(ns(e.value)),
        ci_low_ns: e.low.map(ns),
        ci_high_ns: e.high.map(ns),
        extrapolated: ratio > EXTRAPOLATED,
        observed_ns: observed,
        refused: None,
    }
}

/// One candidate threshold of the stability check.
#[derive(Clone, Debug, Serialize)]
pub struct Candidate {
    pub threshold_ns: f64,
    pub exceedances: u64,
    pub xi: f64,
    pub se_xi: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Stability {
    pub candidates: Vec<Candidate>,
    /// Every candidate's shape within 1.96 standard errors of the chosen one.
    pub passed: Option<bool>,
    pub note: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct GevCheck {
    pub blocks: usize,
    pub block_s: f64,
    pub gev: Option<Gev>,
    /// The period compared and the GEV's level for it.
    pub period: Option<String>,
    pub level_ns: Option<i64>,
    pub passed: Option<bool>,
    pub note: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct HalvesCheck {
    pub first: Option<[f64; 3]>,
    pub second: Option<[f64; 3]>,
    /// z of the shape difference and of the exceedance-rate difference.
    pub z_xi: Option<f64>,
    pub z_rate: Option<f64>,
    pub passed: Option<bool>,
    pub note: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Diagnostics {
    pub ljung_box: TestResult,
    pub runs: TestResult,
    pub kpss: TestResult,
    pub gev: GevCheck,
    pub halves: HalvesCheck,
    pub threshold_stability: Stability,
}

/// A tail fit as reported.
#[derive(Clone, Debug, Serialize)]
pub struct TailReport {
    pub threshold_ns: f64,
    pub threshold_choice: String,
    pub exceedances: u64,
    pub xi: f64,
    pub sigma_ns: f64,
    pub se_xi: f64,
    pub se_sigma_ns: f64,
    pub zeta: f64,
    pub theta: f64,
    pub theta_note: String,
    pub samples: u64,
    pub rate_hz: f64,
    pub observed_duration_s: f64,
    /// What a day and a week of the return levels are.
    pub usage: Usage,
    pub return_levels: ReturnLevels,
    pub diagnostics: Diagnostics,
    /// high / medium / low, and why.
    pub confidence: &'static str,
    pub reasons: Vec<String>,
}

/// Lags of the Ljung-Box test.
pub const LB_LAGS: usize = 20;
/// Block maxima the diagnostics need.
const MIN_BLOCKS_LB: usize = 40;
const MIN_BLOCKS: usize = 20;
/// Exceedances each half needs for its own fit.
const MIN_HALF: u64 = 30;

/// Fits the tail of `obs` and runs every diagnostic; the return levels
/// are per hour, day and week of `usage`.
pub fn analyze(obs: &Obs, requested: Option<f64>, usage: Usage) -> Result<(TailModel, TailReport), String> {
    let model = TailModel::fit(obs, requested)?;
    let rl = |i: usize| return_level(&model, obs, usage.period_s(PERIODS[i].0).unwrap_or(PERIODS[i].1));
    let return_levels = ReturnLevels { hour: rl(0), day: rl(1), week: rl(2) };
    let diagnostics = Diagnostics {
        ljung_box: block_test(obs, "Ljung-Box (20 lags) on interval maxima", MIN_BLOCKS_LB, |b| {
            diagnostics::ljung_box(b, LB_LAGS)
        }),
        runs: block_test(obs, "runs test on interval maxima", MIN_BLOCKS, diagnostics::runs_test),
        kpss: block_test(obs, "KPSS level stationarity of interval maxima", MIN_BLOCKS, diagnostics::kpss),
        gev: gev_check(obs, &model, &return_levels, usage),
        halves: halves_check(obs, &model),
        threshold_stability: stability(obs, &model, requested.is_some()),
    };
    let (confidence, reasons) = judge(&diagnostics, &model);
    let g = model.fit.gpd;
    let report = TailReport {
        threshold_ns: model.u,
        threshold_choice: if requested.is_some() {
            "given".into()
        } else {
            format!("auto: the highest value leaving at least {DEFAULT_EXCEEDANCES} exceedances")
        },
        exceedances: model.fit.k,
        xi: g.xi,
        sigma_ns: g.sigma,
        se_xi: model.fit.se_xi,
        se_sigma_ns: model.fit.se_sigma,
        zeta: model.zeta,
        theta: model.theta,
        theta_note: model.theta_note.clone(),
        samples: model.n,
        rate_hz: model.rate_hz,
        observed_duration_s: obs.duration_s,
        usage,
        return_levels,
        diagnostics,
        confidence,
        reasons,
    };
    Ok((model, report))
}

fn block_test(obs: &Obs, name: &'static str, min: usize, test: impl Fn(&[f64]) -> Option<(f64, f64)>) -> TestResult {
    if obs.blocks.len() < min {
        return TestResult::not_run(
            name,
            format!(
                "needs {min} interval maxima, has {} (intervals of {}): measure longer or use a shorter --checkpoint",
                obs.blocks.len(),
                human((obs.block_s * 1e9) as u64)
            ),
        );
    }
    match test(&obs.blocks) {
        Some((stat, p)) => TestResult {
            name,
            statistic: Some(stat),
            p_value: Some(p),
            passed: Some(p >= 0.05),
            note: if p >= 0.05 { "no evidence against the assumption".into() } else { "rejected at 5 %".into() },
        },
        None => TestResult::not_run(name, "the interval maxima do not vary enough to test".into()),
    }
}

fn gev_check(obs: &Obs, model: &TailModel, levels: &ReturnLevels, usage: Usage) -> GevCheck {
    let mut out = GevCheck {
        blocks: obs.blocks.len(),
        block_s: obs.block_s,
        gev: None,
        period: None,
        level_ns: None,
        passed: None,
        note: String::new(),
    };
    if obs.blocks.len() < MIN_BLOCKS {
        out.note = format!("needs {MIN_BLOCKS} interval maxima, has {}", obs.blocks.len());
        return out;
    }
    let Some(fit) = gev::fit(&obs.blocks) else {
        out.note = "the GEV likelihood has no maximum".into();
        return out;
    };
    out.gev = Some(fit.gev);
    let Some((name, period_s, level)) = PERIODS
        .iter()
        .map(|&(name, s)| (name, usage.period_s(name).unwrap_or(s), levels.get(name).expect("known period")))
        .find(|(_, s, l)| l.value_ns.is_some() && *s >= 2.0 * obs.block_s)
    else {
        out.note = "no period to compare".into();
        return out;
    };
    let m = period_s / obs.block_s;
    let z = fit.gev.quantile(1.0 - 1.0 / m);
    out.period = Some(name.into());
    out.level_ns = Some(ns(z));
    let lo = level.ci_low_ns.map_or(model.u, |v| v as f64);
    let hi = level.ci_high_ns.map_or(f64::INFINITY, |v| v as f64);
    let value = level.value_ns.unwrap_or(0) as f64;
    let agrees = (lo..=hi).contains(&z) || (z - value).abs() <= 0.1 * value.abs();
    out.passed = Some(agrees);
    out.note = if agrees {
        format!("the block-maxima level for {} {name} agrees with the tail fit's interval", article(name))
    } else {
        format!(
            "the block-maxima level for {} {name} ({}) is outside the tail fit's interval [{}, {}]",
            article(name),
            human(z.max(0.0) as u64),
            human(lo.max(0.0) as u64),
            if hi.is_finite() { human(hi as u64) } else { "unbounded".into() }
        )
    };
    out
}

fn article(period: &str) -> &'static str {
    if period == "hour" { "an" } else { "a" }
}

fn halves_check(obs: &Obs, model: &TailModel) -> HalvesCheck {
    let mut out =
        HalvesCheck { first: None, second: None, z_xi: None, z_rate: None, passed: None, note: String::new() };
    let Some(h) = &obs.halves else {
        out.note = "the measurement cannot be split in two".into();
        return out;
    };
    let fits: Vec<Option<(GpdFit, u64, u64)>> = h
        .iter()
        .map(|half| {
            let ex: Vec<(f64, u64)> = half.excesses(model.u);
            let k: u64 = ex.iter().map(|e| e.1).sum();
            if k < MIN_HALF { None } else { gpd::fit(&ex).map(|f| (f, k, half.n)) }
        })
        .collect();
    let (Some(a), Some(b)) = (&fits[0], &fits[1]) else {
        out.note = format!("each half needs {MIN_HALF} exceedances of the threshold for its own fit");
        return out;
    };
    out.first = Some([a.0.gpd.xi, a.0.gpd.sigma, a.1 as f64]);
    out.second = Some([b.0.gpd.xi, b.0.gpd.sigma, b.1 as f64]);
    let se = (a.0.se_xi.powi(2) + b.0.se_xi.powi(2)).sqrt();
    let z_xi = if se.is_finite() && se > 0.0 { (a.0.gpd.xi - b.0.gpd.xi) / se } else { 0.0 };
    let (p1, p2) = (a.1 as f64 / a.2 as f64, b.1 as f64 / b.2 as f64);
    let p = (a.1 + b.1) as f64 / (a.2 + b.2) as f64;
    // Clustered exceedances: the count's variance grows by 1/theta.
    let var = p * (1.0 - p) * (1.0 / a.2 as f64 + 1.0 / b.2 as f64) / model.theta;
    let z_rate = if var > 0.0 { (p1 - p2) / var.sqrt() } else { 0.0 };
    out.z_xi = Some(z_xi);
    out.z_rate = Some(z_rate);
    let ok = z_xi.abs() < 1.96 && z_rate.abs() < 1.96;
    out.passed = Some(ok);
    out.note = if ok {
        "both halves have the same tail".into()
    } else if z_rate.abs() >= 1.96 {
        format!("the halves exceed the threshold at different rates ({:.2e} vs {:.2e} per sample)", p1, p2)
    } else {
        format!("the halves have different tail shapes (xi {:.3} vs {:.3})", a.0.gpd.xi, b.0.gpd.xi)
    };
    out
}

fn stability(obs: &Obs, model: &TailModel, given: bool) -> Stability {
    let k0 = model.fit.k;
    let mut candidates = Vec::new();
    for f in [0.5, 0.75, 1.0, 1.5, 2.0] {
        let k = (k0 as f64 * f).round() as u64;
        if k < 30 || k >= obs.n {
            continue;
        }
        let Some(u) = (if f == 1.0 { Some(model.u) } else { obs.threshold_leaving(k) }) else { continue };
        let ex: Vec<(f64, u64)> = obs.excesses(u);
        let fit = if f == 1.0 { Some(model.fit) } else { gpd::fit(&ex as &Excesses) };
        if let Some(fit) = fit {
            candidates.push(Candidate { threshold_ns: u, exceedances: fit.k, xi: fit.gpd.xi, se_xi: fit.se_xi });
        }
    }
    if candidates.len() < 3 {
        return Stability {
            candidates,
            passed: None,
            note: "fewer than 3 candidate thresholds with 30 exceedances".into(),
        };
    }
    let xi0 = model.fit.gpd.xi;
    let se0 = model.fit.se_xi;
    let bad: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| {
            let se = c.se_xi.max(se0);
            se.is_finite() && (c.xi - xi0).abs() > 1.96 * se
        })
        .collect();
    let passed = bad.is_empty();
    let note = if passed {
        format!("the shape is stable over {} thresholds", candidates.len())
    } else {
        format!(
            "the shape moves with the threshold (xi {:.3} at {} exceedances vs {:.3}){}",
            bad[0].xi,
            bad[0].exceedances,
            xi0,
            if given { ": try another --threshold" } else { "" }
        )
    };
    Stability { candidates, passed: Some(passed), note }
}

/// How much the diagnostics allow the fit to claim.
fn judge(d: &Diagnostics, model: &TailModel) -> (&'static str, Vec<String>) {
    let mut serious = Vec::new();
    let mut minor = Vec::new();
    let mut unrun = Vec::new();
    let checks: [(&str, Option<bool>, &str, bool); 6] = [
        ("Ljung-Box", d.ljung_box.passed, &d.ljung_box.note, false),
        ("runs test", d.runs.passed, &d.runs.note, false),
        ("KPSS", d.kpss.passed, &d.kpss.note, true),
        ("GEV cross-check", d.gev.passed, &d.gev.note, true),
        ("first/second half", d.halves.passed, &d.halves.note, true),
        ("threshold stability", d.threshold_stability.passed, &d.threshold_stability.note, true),
    ];
    for (name, passed, note, is_serious) in checks {
        match passed {
            Some(true) => {}
            Some(false) if is_serious => serious.push(format!("{name}: {note}")),
            Some(false) => minor.push(format!(
                "{name}: the interval maxima are not independent ({}); clusters are only partly covered by theta = {:.2}",
                note, model.theta
            )),
            None => unrun.push(format!("{name} could not run: {note}")),
        }
    }
    if d.kpss.passed == Some(false) {
        serious.push("the series is not stationary: the levels describe this run, not the machine in general".into());
    }
    let level = if !serious.is_empty() || minor.len() >= 2 {
        "low"
    } else if !minor.is_empty() || !unrun.is_empty() {
        "medium"
    } else {
        "high"
    };
    let mut reasons = serious;
    reasons.extend(minor);
    reasons.extend(unrun);
    if level == "high" {
        reasons.push("every diagnostic passed".into());
    }
    (level, reasons)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::gpd::Gpd;

    /// A body uniform on [10 us, 20 us) with probability 1 - zeta and a
    /// GPD tail above 20 us with probability zeta.
    pub(crate) fn body_and_tail(n: usize, zeta: f64, tail: Gpd, seed: u64) -> Vec<i64> {
        let mut rng = fastrand::Rng::with_seed(seed);
        (0..n)
            .map(|_| {
                if rng.f64() < zeta {
                    (20_000.0 + tail.quantile(rng.f64())).round() as i64
                } else {
                    (10_000.0 + 10_000.0 * rng.f64()).round() as i64
                }
            })
            .collect()
    }

    /// The true level exceeded once per m observations.
    fn true_level(zeta: f64, tail: Gpd, m: f64) -> f64 {
        20_000.0 + tail.quantile(1.0 - 1.0 / (m * zeta))
    }

    #[test]
    fn threshold_choice_and_refusals() {
        let v: Vec<i64> = (1..=1000).collect();
        let o = Obs::from_samples(&v, None, Some(1000.0)).unwrap();
        assert_eq!(choose_threshold(&o, None).unwrap(), (900.0, 100));
        assert!(choose_threshold(&o, Some(990.0)).unwrap_err().contains("at least 50"));
        let small: Vec<i64> = (1..=70).collect();
        let o = Obs::from_samples(&small, None, Some(1000.0)).unwrap();
        assert_eq!(choose_threshold(&o, None).unwrap(), (20.0, 50));
        let tiny: Vec<i64> = (1..=40).collect();
        let o = Obs::from_samples(&tiny, None, Some(1000.0)).unwrap();
        assert!(choose_threshold(&o, None).unwrap_err().contains("at least 50"));
    }

    #[test]
    fn levels_are_extrapolated_then_refused() {
        let tail = Gpd { sigma: 3_000.0, xi: 0.1 };
        // 200k samples at 100 Hz: 2000 s observed. An hour is 1.8x, a day
        // 43x (extrapolated), a week 302x (refused).
        let v = body_and_tail(200_000, 0.01, tail, 9);
        let o = Obs::from_samples(&v, None, Some(100.0)).unwrap();
        let (_, r) = analyze(&o, None, Usage::CONTINUOUS).unwrap();
        assert_eq!(r.exceedances, 100);
        let h = &r.return_levels.hour;
        assert!(!h.extrapolated && h.refused.is_none());
        assert!(r.return_levels.day.extrapolated && r.return_levels.day.value_ns.is_some());
        let w = &r.return_levels.week;
        assert!(w.value_ns.is_none() && w.refused.as_ref().unwrap().contains("measure at least 1h40m48s"), "{w:?}");
        assert!((r.theta - 1.0).abs() < 0.15, "{}", r.theta);
        let truth = true_level(0.01, tail, 360_000.0);
        let (lo, hi) = (h.ci_low_ns.unwrap() as f64, h.ci_high_ns.unwrap() as f64);
        assert!(lo < truth && truth < hi, "{lo} {truth} {hi}");
        assert!(r.diagnostics.ljung_box.passed.is_some() && r.diagnostics.kpss.passed.is_some());
        assert!(r.diagnostics.halves.passed.is_some(), "{:?}", r.diagnostics.halves);
        assert!(r.diagnostics.threshold_stability.candidates.len() == 5);
    }

    #[test]
    fn a_usage_model_shortens_the_day_and_the_week() {
        let tail = Gpd { sigma: 3_000.0, xi: 0.1 };
        // 2000 s observed: a continuous week (302x) is refused, a week of
        // 5 days of 8 h (144000 s, 72x) only extrapolated; an hour is an
        // hour either way.
        let v = body_and_tail(200_000, 0.01, tail, 9);
        let o = Obs::from_samples(&v, None, Some(100.0)).unwrap();
        let (model, c) = analyze(&o, None, Usage::CONTINUOUS).unwrap();
        let office = Usage::parse("--usage", "8h/day,5d/week").unwrap();
        let (_, w) = analyze(&o, None, office).unwrap();
        assert_eq!(w.usage, office);
        assert_eq!(w.return_levels.hour.value_ns, c.return_levels.hour.value_ns);
        assert_eq!(w.return_levels.day.period_s, 28_800.0);
        assert_eq!(w.return_levels.week.period_s, 144_000.0);
        assert_eq!(w.return_levels.day.value_ns, return_level(&model, &o, 28_800.0).value_ns);
        let (day8, day24) = (w.return_levels.day.value_ns.unwrap(), c.return_levels.day.value_ns.unwrap());
        assert!(c.return_levels.hour.value_ns.unwrap() < day8 && day8 < day24, "{day8} {day24}");
        assert!(c.return_levels.week.refused.is_some());
        assert!(w.return_levels.week.extrapolated && w.return_levels.week.value_ns.is_some());
    }

    /// Simulation: samples from a known GPD tail over a known body; the
    /// true hour and day levels must fall inside the reported 95 %
    /// intervals in at least 90 % of 50 seeds (the profile-likelihood
    /// interval's nominal coverage is 95 %).
    #[test]
    fn return_level_intervals_cover_the_truth() {
        let tail = Gpd { sigma: 2_000.0, xi: 0.15 };
        let zeta = 0.02;
        let rate = 20.0;
        let n = 40_000; // 2000 s at 20 Hz: an hour is 1.8x, a day 43x.
        let mut covered = [0u32; 2];
        for seed in 0..50 {
            let v = body_and_tail(n, zeta, tail, 1000 + seed);
            let o = Obs::from_samples(&v, None, Some(rate)).unwrap();
            let model = TailModel::fit(&o, None).unwrap();
            for (i, period) in [3_600.0, 86_400.0].into_iter().enumerate() {
                let l = return_level(&model, &o, period);
                let truth = true_level(zeta, tail, rate * period);
                let lo = l.ci_low_ns.unwrap() as f64;
                let hi = l.ci_high_ns.map_or(f64::INFINITY, |h| h as f64);
                if lo <= truth && truth <= hi {
                    covered[i] += 1;
                }
            }
        }
        assert!(covered.iter().all(|&c| c >= 45), "coverage out of 50: hour {}, day {}", covered[0], covered[1]);
    }

    #[test]
    fn clustered_spikes_lower_theta() {
        // Every tail sample comes as a burst of 3 consecutive ones.
        let tail = Gpd { sigma: 3_000.0, xi: 0.0 };
        let mut v = body_and_tail(60_000, 0.004, tail, 21);
        let mut i = 0;
        while i + 2 < v.len() {
            if v[i] > 20_000 {
                v[i + 1] = v[i] - 1;
                v[i + 2] = v[i] - 2;
                i += 3;
            } else {
                i += 1;
            }
        }
        let o = Obs::from_samples(&v, None, Some(1000.0)).unwrap();
        let m = TailModel::fit(&o, None).unwrap();
        assert!((m.theta - 1.0 / 3.0).abs() < 0.1, "{} ({})", m.theta, m.theta_note);
    }

    #[test]
    fn p_interval_brackets_the_model() {
        let tail = Gpd { sigma: 3_000.0, xi: 0.1 };
        let v = body_and_tail(100_000, 0.01, tail, 5);
        let o = Obs::from_samples(&v, None, Some(1000.0)).unwrap();
        let m = TailModel::fit(&o, None).unwrap();
        let x = 60_000.0;
        let (p, lo, hi) = m.p_interval(x);
        let lo = lo.unwrap();
        assert!(lo < p && p < hi, "{lo} {p} {hi}");
        let truth = 0.01 * tail.sf(x - 20_000.0);
        assert!(lo < truth && truth < hi, "{lo} {truth} {hi}");
        // The run of grid points inside, found by bisection from the fit's
        // own m, is the one a scan of every grid point finds.
        let mut compared = 0;
        for (sigma, xi, x) in
            [(3_000.0, 0.1, 30_000.0), (3_000.0, 0.1, 120_000.0), (800.0, -0.2, 22_500.0), (5_000.0, 0.4, 400_000.0)]
        {
            let v = body_and_tail(50_000, 0.02, Gpd { sigma, xi }, 11);
            let o = Obs::from_samples(&v, None, Some(1000.0)).unwrap();
            let m = TailModel::fit(&o, None).unwrap();
            if x < m.u {
                continue;
            }
            let d = x - m.u;
            let inside = |mm: f64| 2.0 * (m.fit.loglik - gpd::profile(&m.excesses, d, mm)) <= CRIT;
            let grid: Vec<f64> = (0..=120).map(|i| (1.000_001f64).max((i as f64 * 0.3).exp())).collect();
            let ins: Vec<usize> = (0..grid.len()).filter(|&i| inside(grid[i])).collect();
            let (p, lo, hi) = m.p_interval(x);
            let Some((&first, &last)) = ins.first().zip(ins.last()) else {
                assert_eq!((lo, hi), (Some(p), p));
                continue;
            };
            assert_eq!(ins.len(), last - first + 1, "one run inside: {ins:?}");
            compared += 1;
            // The ends lie where the deviance crosses the bound.
            let dev = |mm: f64| 2.0 * (m.fit.loglik - gpd::profile(&m.excesses, d, mm));
            if first > 0 {
                assert!((dev(m.zeta / hi) - CRIT).abs() < 1e-3, "{x}: {}", dev(m.zeta / hi));
            }
            if let Some(lo) = lo {
                assert!((dev(m.zeta / lo) - CRIT).abs() < 1e-3, "{x}: {}", dev(m.zeta / lo));
            }
            // p_high from the first point inside, p_low from the last.
            assert!(first == 0 || m.zeta / hi > grid[first - 1] && m.zeta / hi <= grid[first] * 1.000_001, "{x}: {hi}");
            match lo {
                Some(lo) => assert!(m.zeta / lo >= grid[last] * 0.999_999 && m.zeta / lo < grid[last + 1], "{x}: {lo}"),
                None => assert_eq!(last, grid.len() - 1),
            }
        }
        assert!(compared >= 3, "only {compared} cases with an interval");
    }

    /// A series of 12 intervals of 10 s, each with a body, a tail above
    /// 50 us stored whole as exceedances, values near 20 us of which only
    /// every third is stored in the first half (whole in the second: its
    /// tail is complete lower down) and values near 10 us of which every
    /// third is stored (below every level where they are complete).
    fn series_with_a_thinned_tail() -> Series {
        use crate::hist::Tally;
        use crate::run::{Exceedance, Interval, SeriesKey};
        let (mut intervals, mut exceedances) = (Vec::new(), Vec::new());
        for seq in 0..12u32 {
            let start = 1_000 + u64::from(seq) * 10_000_000_000;
            let mut t = Tally::new();
            for i in 0..2_000u64 {
                let v = match i % 100 {
                    0 => 50_000 + i * 37 + u64::from(seq) * 101,
                    1..=4 => 20_000 + i * 3,
                    5..=8 => 10_000 + i * 3,
                    _ => 2_000 + i % 500,
                };
                t.record(v);
                let thinned = i % 100 != 0 && (seq < 6 || v < 20_000) && i % 3 != 0;
                if v >= 10_000 && !thinned {
                    exceedances.push(Exceedance { t_ns: start + i * 5_000_000, value_ns: v });
                }
            }
            intervals.push(Interval::new(seq, start, start + 10_000_000_000, &t, 0, 0));
        }
        Series::new(SeriesKey::new("wakeup", "latency", 0), "ns".into(), "adaptive".into(), intervals, exceedances)
            .unwrap()
    }

    #[test]
    fn a_series_keeping_the_exceedances_read_gives_the_same_analysis() {
        use crate::analysis::series::{Options, analyze_series};
        let whole = series_with_a_thinned_tail();
        let floor = exceedances_read(&whole, None);
        let mut kept = whole.clone();
        kept.keep_exceedances_from(floor);
        assert!(kept.exceedances.len() < whole.exceedances.len(), "nothing dropped below {}", floor.from);
        assert!(!kept.exceedances.is_empty(), "nothing kept above {}", floor.from);
        assert_eq!(kept.exceedance_count(), whole.exceedances.len() as u64);
        assert_eq!(kept.result(), whole.result());
        let (a, b) = (Obs::from_series(&whole).unwrap(), Obs::from_series(&kept).unwrap());
        // Kept: those above the whole's complete level and the automatic
        // threshold, the level still the one all of them gave.
        let u = choose_threshold(&a, None).unwrap().0;
        assert_eq!(floor.from, u.max(a.timed_from));
        assert!(u > a.timed_from, "the threshold {u} is not above the complete level {}", a.timed_from);
        assert_eq!((a.timed_from, b.timed_from), (floor.complete_from, floor.complete_from));
        let above: Vec<(f64, f64)> = a.timed.iter().copied().filter(|e| e.1 >= floor.from).collect();
        assert!(b.timed == above && above.len() < a.timed.len(), "{} of {}", b.timed.len(), a.timed.len());
        assert_eq!((a.n, &a.blocks, a.duration_s), (b.n, &b.blocks, b.duration_s));
        let (ha, hb) = (a.halves.as_ref().unwrap(), b.halves.as_ref().unwrap());
        for (x, y) in ha.iter().zip(hb.iter()) {
            assert_eq!((x.n, x.excesses(0.0), x.duration_s), (y.n, y.excesses(0.0), y.duration_s));
        }
        // The analysis, its extremal index included, is the same.
        let report = |s: &Series| {
            let r = analyze_series(s, Some(5_000_000), &Options::default()).unwrap().report;
            assert!(r.tail.is_some(), "{:?}", r.tail_error);
            serde_json::to_string(&r).unwrap()
        };
        assert_eq!(report(&kept), report(&whole));
        // A fit at a lower threshold than the read kept for is refused;
        // a read for it keeps what it needs.
        let lower = Some(20_000.0);
        assert!(TailModel::fit(&a, lower).is_ok());
        let refused = TailModel::fit(&b, lower).map(|_| ()).unwrap_err();
        assert!(refused.contains("read it for this threshold"), "{refused}");
        let mut for_lower = whole.clone();
        for_lower.keep_exceedances_from(exceedances_read(&whole, lower));
        let o = Obs::from_series(&for_lower).unwrap();
        let (x, y) = (TailModel::fit(&a, lower).unwrap(), TailModel::fit(&o, lower).unwrap());
        assert_eq!((x.theta, x.theta_note), (y.theta, y.theta_note));
    }
}
