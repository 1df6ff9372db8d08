//! The Generalized Pareto distribution of excesses over a threshold:
//! P(Y > y) = (1 + xi y / sigma)^(-1/xi), the exponential when xi = 0. Fitted
//! by maximum likelihood (Nelder-Mead on (log sigma, xi)) from the
//! probability-weighted-moments estimate (Hosking and Wallis 1987).

use super::nm;
use serde::Serialize;
use std::cmp::Ordering::Greater;

/// Shapes outside this range are refused: below -1 the likelihood is
/// unbounded, above 3 no latency distribution has a mean or a variance.
pub const XI_MIN: f64 = -0.95;
pub const XI_MAX: f64 = 3.0;
/// |xi| below this is treated as the exponential limit.
const XI_ZERO: f64 = 1e-9;

/// A GPD with location 0 (the excess over the threshold).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Gpd {
    pub sigma: f64,
    pub xi: f64,
}

impl Gpd {
    /// P(Y > y).
    pub fn sf(&self, y: f64) -> f64 {
        if y <= 0.0 {
            return 1.0;
        }
        if self.xi.abs() < XI_ZERO {
            return (-y / self.sigma).exp();
        }
        let z = 1.0 + self.xi * y / self.sigma;
        if z <= 0.0 { 0.0 } else { z.powf(-1.0 / self.xi) }
    }

    pub fn cdf(&self, y: f64) -> f64 {
        1.0 - self.sf(y)
    }

    /// The value y with P(Y <= y) = p, for 0 < p < 1.
    pub fn quantile(&self, p: f64) -> f64 {
        if self.xi.abs() < XI_ZERO {
            -self.sigma * (-p).ln_1p()
        } else {
            self.sigma / self.xi * ((-p).ln_1p() * -self.xi).exp_m1()
        }
    }

    pub fn pdf(&self, y: f64) -> f64 {
        if y < 0.0 {
            return 0.0;
        }
        let s = self.sf(y);
        if s == 0.0 {
            return 0.0;
        }
        if self.xi.abs() < XI_ZERO {
            return s / self.sigma;
        }
        s / (self.sigma * (1.0 + self.xi * y / self.sigma))
    }
}

/// Excesses over a threshold as (excess, count): raw samples have count 1,
/// a histogram bucket counts all its samples at its representative value.
pub type Excesses = [(f64, u64)];

/// The log-likelihood of `data` under GPD(sigma, xi); -inf outside the
/// support or the parameter space.
pub fn loglik(sigma: f64, xi: f64, data: &Excesses) -> f64 {
    if sigma.partial_cmp(&0.0) != Some(Greater) || !(XI_MIN..=XI_MAX).contains(&xi) {
        return f64::NEG_INFINITY;
    }
    let ls = sigma.ln();
    let mut l = 0.0;
    if xi.abs() < XI_ZERO {
        for &(y, w) in data {
            l += w as f64 * (-ls - y / sigma);
        }
        return l;
    }
    let a = 1.0 + 1.0 / xi;
    for &(y, w) in data {
        let z = 1.0 + xi * y / sigma;
        if z <= 0.0 {
            return f64::NEG_INFINITY;
        }
        l += w as f64 * (-ls - a * z.ln());
    }
    l
}

/// Probability-weighted-moments estimate (Hosking and Wallis 1987), the
/// starting point of the likelihood search. `data` ascending.
pub fn pwm(data: &Excesses) -> Gpd {
    let k: f64 = data.iter().map(|&(_, w)| w as f64).sum();
    let mut a0 = 0.0;
    let mut a1 = 0.0;
    let mut rank = 0.0;
    for &(y, w) in data {
        let w = w as f64;
        // Ranks rank+1 ..= rank+w share the value y: sum of (1 - p_i).
        let sum_i = w * rank + w * (w + 1.0) / 2.0;
        a0 += w * y;
        a1 += y * (w - (sum_i - 0.35 * w) / k);
        rank += w;
    }
    a0 /= k;
    a1 /= k;
    let d = a0 - 2.0 * a1;
    if d.partial_cmp(&0.0) != Some(Greater) || a0.partial_cmp(&0.0) != Some(Greater) {
        return Gpd { sigma: a0.max(1e-9), xi: 0.0 };
    }
    let xi = (2.0 - a0 / d).clamp(XI_MIN + 0.05, XI_MAX - 0.05);
    let sigma = 2.0 * a0 * a1 / d;
    if sigma > 0.0 { Gpd { sigma, xi } } else { Gpd { sigma: a0, xi: 0.0 } }
}

/// A maximum-likelihood fit.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct GpdFit {
    pub gpd: Gpd,
    pub loglik: f64,
    /// Number of excesses.
    pub k: u64,
    /// Standard errors from the observed information (NaN where the
    /// information matrix is not positive definite).
    pub se_sigma: f64,
    pub se_xi: f64,
}

/// Fits a GPD to `data` (ascending excesses, all > 0). None with fewer than
/// 10 excesses or when no finite likelihood is found.
pub fn fit(data: &Excesses) -> Option<GpdFit> {
    let k: u64 = data.iter().map(|&(_, w)| w).sum();
    if k < 10 || data.len() < 3 {
        return None;
    }
    let start = pwm(data);
    let f = |p: &[f64]| -loglik(p[0].exp(), p[1], data);
    // Start from PWM, and from the exponential fit in case PWM sits
    // outside the support.
    let mean = data.iter().map(|&(y, w)| y * w as f64).sum::<f64>() / k as f64;
    let mut best: Option<(Vec<f64>, f64)> = None;
    for x0 in [[start.sigma.ln(), start.xi], [mean.ln(), 0.0], [mean.ln(), 0.3]] {
        let (x, v) = nm::minimize(&f, &x0, &[0.2, 0.1]);
        if v.is_finite() && best.as_ref().is_none_or(|b| v < b.1) {
            best = Some((x, v));
        }
    }
    let (x, v) = best?;
    let gpd = Gpd { sigma: x[0].exp(), xi: x[1] };
    let (se_sigma, se_xi) = std_errors(gpd, data);
    Some(GpdFit { gpd, loglik: -v, k, se_sigma, se_xi })
}

/// Standard errors of (sigma, xi) from a numerical observed information.
fn std_errors(g: Gpd, data: &Excesses) -> (f64, f64) {
    let l = |s: f64, x: f64| loglik(s, x, data);
    let hs = g.sigma * 1e-4;
    let hx = 1e-4;
    let (s, x) = (g.sigma, g.xi);
    let l0 = l(s, x);
    let dss = (l(s + hs, x) - 2.0 * l0 + l(s - hs, x)) / (hs * hs);
    let dxx = (l(s, x + hx) - 2.0 * l0 + l(s, x - hx)) / (hx * hx);
    let dsx = (l(s + hs, x + hx) - l(s + hs, x - hx) - l(s - hs, x + hx) + l(s - hs, x - hx)) / (4.0 * hs * hx);
    // Information = -Hessian; invert the 2x2.
    let (a, b, c) = (-dss, -dsx, -dxx);
    let det = a * c - b * b;
    if det.partial_cmp(&0.0) != Some(Greater) || a.partial_cmp(&0.0) != Some(Greater) || !det.is_finite() {
        return (f64::NAN, f64::NAN);
    }
    ((c / det).sqrt(), (a / det).sqrt())
}

/// sigma such that the level exceeded with (per-excess) probability 1/m is
/// `d` above the threshold: d = sigma/xi (m^xi - 1).
fn sigma_for(d: f64, m: f64, xi: f64) -> f64 {
    let lm = m.ln();
    if (xi * lm).abs() < 1e-12 { d / lm } else { d * xi / (xi * lm).exp_m1() }
}

/// The profile log-likelihood of "the level exceeded once per m excesses
/// is d above the threshold": the likelihood maximised over xi with sigma
/// tied to (d, m, xi). Needs d > 0 and m > 1.
pub fn profile(data: &Excesses, d: f64, m: f64) -> f64 {
    if d.partial_cmp(&0.0) != Some(Greater) || m.partial_cmp(&1.0) != Some(Greater) {
        return f64::NEG_INFINITY;
    }
    let l = |xi: f64| loglik(sigma_for(d, m, xi), xi, data);
    // A coarse grid first: the profile can have a flat shoulder.
    let mut best = (0.0, f64::NEG_INFINITY);
    let mut xi = XI_MIN + 0.01;
    while xi < XI_MAX {
        let v = l(xi);
        if v > best.1 {
            best = (xi, v);
        }
        xi += 0.1;
    }
    if !best.1.is_finite() {
        return f64::NEG_INFINITY;
    }
    let lo = (best.0 - 0.1).max(XI_MIN + 1e-6);
    let hi = (best.0 + 0.1).min(XI_MAX - 1e-6);
    let (_, v) = nm::golden_max(&l, lo, hi, 32);
    v.max(best.1)
}

/// 95 % profile-likelihood interval of the level `d_hat` above the
/// threshold that is exceeded once per `m` excesses (chi-square 1 df:
/// deviance 3.8415). The upper end is None where the likelihood cannot
/// bound it (the data allow an arbitrarily heavy tail).
pub fn profile_interval(data: &Excesses, fit: &GpdFit, d_hat: f64, m: f64) -> (f64, Option<f64>) {
    const CRIT: f64 = 3.841_458_820_694_124;
    let dev = |d: f64| 2.0 * (fit.loglik - profile(data, d, m));
    // Lower end: between 0 and d_hat.
    let mut inside = d_hat;
    let mut outside = d_hat;
    let mut found = false;
    for _ in 0..60 {
        outside *= 0.8;
        if dev(outside) > CRIT {
            found = true;
            break;
        }
        inside = outside;
    }
    let low = if found { bisect(&dev, outside, inside, CRIT) } else { 0.0 };
    // Upper end: grow until the deviance passes the critical value.
    let mut inside = d_hat;
    let mut outside = d_hat;
    let mut high = None;
    for _ in 0..80 {
        outside *= 1.25;
        if dev(outside) > CRIT {
            high = Some(bisect(&dev, inside, outside, CRIT));
            break;
        }
        inside = outside;
        if outside > d_hat * 1e6 {
            break;
        }
    }
    (low, high)
}

/// The point between `a` and `b` where `f` crosses `level` (f(a) and f(b)
/// on either side).
fn bisect(f: &dyn Fn(f64) -> f64, mut a: f64, mut b: f64, level: f64) -> f64 {
    let above_at_a = f(a) > level;
    for _ in 0..50 {
        let m = 0.5 * (a + b);
        if (f(m) > level) == above_at_a {
            a = m;
        } else {
            b = m;
        }
    }
    0.5 * (a + b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Source: chronovise, tests/test_gpd_distribution.cpp ("Data taken
    /// from MATLAB (r) 2017b"): GPD(location, scale, shape) quantiles and
    /// CDF values. Our GPD has location 0: the location is added here.
    #[test]
    fn chronovise_gpd_values() {
        let near = |a: f64, b: f64| assert!((a - b).abs() < 1e-12, "{a} vs {b}");
        let standard = Gpd { sigma: 1.0, xi: 0.5 };
        near(standard.quantile(0.25), 0.309401076758503);
        near(standard.quantile(0.5), 0.828427124746190);
        near(standard.quantile(0.75), 2.0);
        near(standard.cdf(1000.0), 0.999996015952128);
        near(standard.cdf(5.0), 0.918367346938776);
        near(standard.pdf(10.0), 0.004629629629630);
        let pareto = Gpd { sigma: 1.0, xi: 1.0 };
        near(1.0 + pareto.quantile(0.25), 1.333333333333333);
        near(1.0 + pareto.quantile(0.75), 4.0);
        near(pareto.cdf(100.0 - 1.0), 0.99);
        let exponential = Gpd { sigma: 1.0, xi: 0.0 };
        near(exponential.quantile(0.25), 0.287682072451781);
        near(exponential.quantile(0.5), std::f64::consts::LN_2); // chronovise: 0.693147180559945
        near(exponential.quantile(0.75), 1.386294361119891);
        near(exponential.cdf(1.5), 0.776869839851570);
        let pareto_noncenter = Gpd { sigma: 25.0, xi: 0.5 };
        near(pareto_noncenter.cdf(200.0 - 50.0), 0.9375);
        near(pareto_noncenter.cdf(75.0 - 50.0), 0.555555555555556);
        near(pareto_noncenter.pdf(100.0 - 50.0), 0.005);
        // standard_noncenter (10, 1, -0.1): nothing below the location...
        let short = Gpd { sigma: 1.0, xi: -0.1 };
        assert_eq!(short.cdf(5.0 - 10.0), 0.0);
        // ... and nothing above its end point 10 + 1/0.1.
        assert_eq!(short.sf(30.0 - 10.0), 0.0);
    }

    fn draw(g: Gpd, n: usize, seed: u64) -> Vec<(f64, u64)> {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut v: Vec<f64> = (0..n).map(|_| g.quantile(rng.f64())).collect();
        v.sort_by(f64::total_cmp);
        v.into_iter().map(|y| (y, 1)).collect()
    }

    #[test]
    fn fits_known_shapes() {
        for (xi, seed) in [(0.25, 1), (0.0, 2), (-0.2, 3)] {
            let g = Gpd { sigma: 10_000.0, xi };
            let data = draw(g, 4000, seed);
            let f = fit(&data).unwrap();
            assert!((f.gpd.xi - xi).abs() < 4.0 * f.se_xi, "xi {xi}: {f:?}");
            assert!((f.gpd.sigma / 10_000.0 - 1.0).abs() < 0.1, "xi {xi}: {f:?}");
            assert!(f.se_xi > 0.005 && f.se_xi < 0.05, "{f:?}");
            let p = pwm(&data);
            assert!((p.xi - xi).abs() < 0.15, "pwm {p:?}");
        }
    }

    #[test]
    fn weighted_data_fit_like_repeated_data() {
        let g = Gpd { sigma: 5.0, xi: 0.1 };
        let raw = draw(g, 500, 7);
        let mut weighted: Vec<(f64, u64)> = Vec::new();
        for &(y, _) in &raw {
            let y = (y * 10.0).round() / 10.0;
            match weighted.last_mut() {
                Some(last) if last.0 == y => last.1 += 1,
                _ => weighted.push((y, 1)),
            }
        }
        let expanded: Vec<(f64, u64)> =
            weighted.iter().flat_map(|&(y, w)| std::iter::repeat_n((y, 1), w as usize)).collect();
        let a = fit(&weighted).unwrap();
        let b = fit(&expanded).unwrap();
        assert!((a.gpd.xi - b.gpd.xi).abs() < 1e-5 && (a.loglik - b.loglik).abs() < 1e-6, "{a:?} {b:?}");
    }

    #[test]
    fn profile_interval_holds_the_estimate() {
        let g = Gpd { sigma: 1000.0, xi: 0.1 };
        let data = draw(g, 300, 11);
        let f = fit(&data).unwrap();
        let m = 1e4;
        let d_hat = f.gpd.quantile(1.0 - 1.0 / m);
        // The profile peaks at the MLE.
        assert!((profile(&data, d_hat, m) - f.loglik).abs() < 1e-3);
        let (lo, hi) = profile_interval(&data, &f, d_hat, m);
        let hi = hi.unwrap();
        assert!(lo < d_hat && d_hat < hi, "{lo} {d_hat} {hi}");
        assert!(hi / lo > 1.5, "an interval 10000 excesses out is wide: {lo} {hi}");
    }
}
