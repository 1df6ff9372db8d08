//! The Generalized Extreme Value distribution of block maxima,
//! F(x) = exp(-(1 + xi (x - mu) / sigma)^(-1/xi)) (Gumbel when xi = 0),
//! fitted by maximum likelihood from the probability-weighted-moments
//! estimate (Hosking, Wallis and Wood 1985). Used as a cross-check of the
//! peaks-over-threshold tail.

use super::nm;
use serde::Serialize;
use statrs::function::gamma::gamma;
use std::cmp::Ordering::Greater;

const XI_ZERO: f64 = 1e-9;

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Gev {
    pub mu: f64,
    pub sigma: f64,
    pub xi: f64,
}

impl Gev {
    pub fn cdf(&self, x: f64) -> f64 {
        let z = (x - self.mu) / self.sigma;
        if self.xi.abs() < XI_ZERO {
            return (-(-z).exp()).exp();
        }
        let t = 1.0 + self.xi * z;
        if t <= 0.0 {
            return if self.xi > 0.0 { 0.0 } else { 1.0 };
        }
        (-t.powf(-1.0 / self.xi)).exp()
    }

    pub fn pdf(&self, x: f64) -> f64 {
        let z = (x - self.mu) / self.sigma;
        if self.xi.abs() < XI_ZERO {
            return (-z - (-z).exp()).exp() / self.sigma;
        }
        let t = 1.0 + self.xi * z;
        if t <= 0.0 {
            return 0.0;
        }
        let tp = t.powf(-1.0 / self.xi);
        tp.powf(1.0 + self.xi) * (-tp).exp() / self.sigma
    }

    /// The x with F(x) = p, 0 < p < 1.
    pub fn quantile(&self, p: f64) -> f64 {
        let y = -p.ln();
        if self.xi.abs() < XI_ZERO {
            self.mu - self.sigma * y.ln()
        } else {
            self.mu + self.sigma / self.xi * (-self.xi * y.ln()).exp_m1()
        }
    }
}

pub fn loglik(g: &Gev, data: &[f64]) -> f64 {
    if g.sigma.partial_cmp(&0.0) != Some(Greater) || !(-0.95..=3.0).contains(&g.xi) {
        return f64::NEG_INFINITY;
    }
    let ls = g.sigma.ln();
    let mut l = 0.0;
    for &x in data {
        let z = (x - g.mu) / g.sigma;
        if g.xi.abs() < XI_ZERO {
            l += -ls - z - (-z).exp();
        } else {
            let t = 1.0 + g.xi * z;
            if t <= 0.0 {
                return f64::NEG_INFINITY;
            }
            let lt = t.ln();
            l += -ls - (1.0 + 1.0 / g.xi) * lt - (-lt / g.xi).exp();
        }
    }
    l
}

/// Hosking, Wallis and Wood (1985) probability-weighted moments.
pub fn pwm(data: &[f64]) -> Gev {
    let mut x = data.to_vec();
    x.sort_by(f64::total_cmp);
    let n = x.len() as f64;
    let (mut b0, mut b1, mut b2) = (0.0, 0.0, 0.0);
    for (i, &v) in x.iter().enumerate() {
        let j = i as f64;
        b0 += v;
        b1 += v * j / (n - 1.0);
        b2 += v * j * (j - 1.0) / ((n - 1.0) * (n - 2.0));
    }
    b0 /= n;
    b1 /= n;
    b2 /= n;
    let c = (2.0 * b1 - b0) / (3.0 * b2 - b0) - 2f64.ln() / 3f64.ln();
    let k = 7.8590 * c + 2.9554 * c * c;
    if !k.is_finite() || k.abs() < 1e-6 {
        // Gumbel moments.
        let sigma = ((2.0 * b1 - b0) / 2f64.ln()).max(1e-9);
        return Gev { mu: b0 - 0.577_215_664_9 * sigma, sigma, xi: 0.0 };
    }
    let g1 = gamma(1.0 + k);
    let sigma = ((2.0 * b1 - b0) * k / (g1 * (1.0 - 2f64.powf(-k)))).abs().max(1e-9);
    let mu = b0 + sigma * (g1 - 1.0) / k;
    Gev { mu, sigma, xi: (-k).clamp(-0.9, 2.9) }
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct GevFit {
    pub gev: Gev,
    pub loglik: f64,
    pub blocks: usize,
}

/// Fits a GEV to block maxima; None with fewer than 10 blocks.
pub fn fit(data: &[f64]) -> Option<GevFit> {
    if data.len() < 10 {
        return None;
    }
    let start = pwm(data);
    let f = |p: &[f64]| -loglik(&Gev { mu: p[0], sigma: p[1].exp(), xi: p[2] }, data);
    let mut best: Option<(Vec<f64>, f64)> = None;
    for x0 in [[start.mu, start.sigma.ln(), start.xi], [start.mu, start.sigma.ln(), 0.0]] {
        let (x, v) = nm::minimize(&f, &x0, &[start.sigma * 0.2, 0.2, 0.1]);
        if v.is_finite() && best.as_ref().is_none_or(|b| v < b.1) {
            best = Some((x, v));
        }
    }
    let (x, v) = best?;
    Some(GevFit { gev: Gev { mu: x[0], sigma: x[1].exp(), xi: x[2] }, loglik: -v, blocks: data.len() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Source: chronovise, tests/test_gev_distribution.cpp ("Data taken
    /// from MATLAB (r) 2017b"), GEV(location, scale, shape).
    #[test]
    fn chronovise_gev_values() {
        let near = |a: f64, b: f64, tol: f64| assert!((a - b).abs() <= tol, "{a} vs {b}");
        let gumbel = Gev { mu: 0.0, sigma: 1.0, xi: 0.0 };
        near(gumbel.quantile(0.25), -0.326634259978281, 1e-12);
        near(gumbel.quantile(0.5), 0.366512920581664, 1e-12);
        near(gumbel.quantile(0.75), 1.245899323707238, 1e-12);
        near(gumbel.cdf(5.0), 0.993284702067841, 1e-12);
        near(gumbel.pdf(-1.0), 0.179374078734017, 1e-12);
        let weibull = Gev { mu: 0.0, sigma: 1.0, xi: -0.5 };
        near(weibull.quantile(0.25), -0.354820045030949, 1e-12);
        near(weibull.quantile(0.5), 0.334890777684605, 1e-12);
        near(weibull.quantile(0.75), 0.927279957394697, 1e-12);
        near(weibull.cdf(1.5), 0.939413062813476, 1e-12);
        near(weibull.cdf(1000.0), 1.0, 0.0);
        let frechet = Gev { mu: 0.0, sigma: 1.0, xi: 0.5 };
        near(frechet.quantile(0.25), -0.301356399423962, 1e-12);
        near(frechet.quantile(0.5), 0.402244817572900, 1e-12);
        near(frechet.quantile(0.75), 1.728838691486778, 1e-12);
        near(frechet.cdf(10.0), 0.972604477116348, 1e-12);
        near(frechet.pdf(1.5), 0.134609406946660, 1e-12);
        let gumbel_nc = Gev { mu: 1000.0, sigma: 20.0, xi: 0.0 };
        near(gumbel_nc.quantile(0.25), 0.993467314800434e3, 1e-9);
        near(gumbel_nc.quantile(0.75), 1.024917986474145e3, 1e-9);
        let frechet_nc = Gev { mu: 1e7, sigma: 1e6, xi: 0.25 };
        near(frechet_nc.quantile(0.25), 0.968634626759456e7, 1e-5);
        near(frechet_nc.quantile(0.75), 1.146174967678804e7, 1e-5);
        near(frechet_nc.cdf(1.3e7), 0.898865163508697, 1e-12);
        let weibull_nc = Gev { mu: 50.0, sigma: 0.4, xi: -0.25 };
        near(weibull_nc.quantile(0.5), 50.140089110745556, 1e-9);
        near(weibull_nc.cdf(50.5), 0.799791723636727, 1e-12);
        // TestExtraQuantile.
        near(Gev { mu: 14.063, sigma: 0.410583, xi: -0.189839 }.quantile(0.999), 15.642968703665069, 1e-8);
    }

    #[test]
    fn fits_simulated_maxima() {
        let truth = Gev { mu: 100.0, sigma: 10.0, xi: 0.1 };
        let mut rng = fastrand::Rng::with_seed(5);
        let data: Vec<f64> = (0..2000).map(|_| truth.quantile(rng.f64().max(1e-12))).collect();
        let f = fit(&data).unwrap();
        assert!((f.gev.mu - 100.0).abs() < 1.5, "{f:?}");
        assert!((f.gev.sigma - 10.0).abs() < 1.0, "{f:?}");
        assert!((f.gev.xi - 0.1).abs() < 0.06, "{f:?}");
        let p = pwm(&data);
        assert!((p.xi - 0.1).abs() < 0.1, "{p:?}");
    }
}
