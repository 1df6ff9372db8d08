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
///
/// The likelihood is maximised from two starts, the probability-weighted
/// moments' estimate and the Gumbel with its location and scale, and the
/// better maximum kept. From each start Newton's method with the
/// likelihood's exact gradient and Hessian climbs to the maximum in a few dozen passes over the
/// data; where it cannot (a shape within [`NEWTON_XI_MIN`] of zero, where
/// the gradient's terms cancel, a Hessian that is not negative definite,
/// no step that climbs), the Nelder-Mead simplex takes that start as
/// before, which needs several hundred.
pub fn fit(data: &[f64]) -> Option<GevFit> {
    if data.len() < 10 {
        return None;
    }
    let start = pwm(data);
    let f = |p: &[f64]| -loglik(&Gev { mu: p[0], sigma: p[1].exp(), xi: p[2] }, data);
    let mut best: Option<(Vec<f64>, f64)> = None;
    for x0 in [[start.mu, start.sigma.ln(), start.xi], [start.mu, start.sigma.ln(), 0.0]] {
        // Newton's method starts the Gumbel just off xi = 0, where it can.
        let (x, v) = newton(data, [x0[0], x0[1], if x0[2] == 0.0 { 2.0 * NEWTON_XI_MIN } else { x0[2] }])
            .map(|(x, l)| (x.to_vec(), -l))
            .unwrap_or_else(|| nm::minimize(&f, &x0, &[start.sigma * 0.2, 0.2, 0.1]));
        if v.is_finite() && best.as_ref().is_none_or(|b| v < b.1) {
            best = Some((x, v));
        }
    }
    let (x, v) = best?;
    Some(GevFit { gev: Gev { mu: x[0], sigma: x[1].exp(), xi: x[2] }, loglik: -v, blocks: data.len() })
}

/// The smallest |xi| Newton's method works at: nearer zero the shape's
/// derivative, (1 - u) ln t / xi^2 - ..., loses its digits to cancellation.
pub const NEWTON_XI_MIN: f64 = 1e-3;

/// The log-likelihood at p = (mu, ln sigma, xi), its gradient and its
/// Hessian in p; None outside the domain or with |xi| < [`NEWTON_XI_MIN`].
fn loglik_derivs(p: [f64; 3], data: &[f64]) -> Option<(f64, [f64; 3], [[f64; 3]; 3])> {
    let (mu, sigma, xi) = (p[0], p[1].exp(), p[2]);
    let inside = sigma > 0.0 && sigma.is_finite() && (-0.95..=3.0).contains(&xi);
    if !inside || xi.abs() < NEWTON_XI_MIN {
        return None;
    }
    let ls = sigma.ln();
    let (mut l, mut g, mut h) = (0.0, [0.0; 3], [0.0; 6]);
    for &x in data {
        let z = (x - mu) / sigma;
        let t = 1.0 + xi * z;
        if t <= 0.0 {
            return None;
        }
        let lt = t.ln();
        let u = (-lt / xi).exp();
        l += -ls - (1.0 + 1.0 / xi) * lt - u;
        // With a = (1 + xi - u) / t the point's terms are d/dmu = a / sigma,
        // d/d(ln sigma) = z a - 1, d/dxi = (1 - u) ln t / xi^2 - z a / xi;
        // their derivatives below (b sigma = da/dmu, b z = da/d(ln sigma)).
        let a = (1.0 + xi - u) / t;
        let b = (xi * (1.0 + xi - u) - u) / (t * t);
        let du_xi = u * (lt / (xi * xi) - z / (xi * t));
        let da_xi = (1.0 - du_xi - a * z) / t;
        g[0] += a;
        g[1] += z * a - 1.0;
        g[2] += (1.0 - u) * lt / (xi * xi) - z * a / xi;
        h[0] += b;
        h[1] += z * b - a;
        h[2] += da_xi;
        h[3] += z * (z * b - a);
        h[4] += z * da_xi;
        h[5] += -du_xi * lt / (xi * xi) + (1.0 - u) * z / (t * xi * xi)
            - 2.0 * (1.0 - u) * lt / (xi * xi * xi)
            - z * da_xi / xi
            + z * a / (xi * xi);
    }
    let g = [g[0] / sigma, g[1], g[2]];
    let h =
        [[h[0] / (sigma * sigma), h[1] / sigma, h[2] / sigma], [h[1] / sigma, h[3], h[4]], [h[2] / sigma, h[4], h[5]]];
    let finite = l.is_finite() && g.iter().chain(h.iter().flatten()).all(|v| v.is_finite());
    finite.then_some((l, g, h))
}

/// Newton's method for the likelihood's maximum from `p` = (mu, ln sigma,
/// xi): the maximum and its log-likelihood, None where it cannot climb
/// there (see [`fit`]).
fn newton(data: &[f64], mut p: [f64; 3]) -> Option<([f64; 3], f64)> {
    let (mut l, mut g, mut hess) = loglik_derivs(p, data)?;
    for _ in 0..100 {
        // The step solves -H d = g, which climbs where -H is positive
        // definite; far from the maximum, where it is not, its diagonal is
        // weighted up until it is (Levenberg and Marquardt).
        let neg = hess.map(|r| r.map(|v| -v));
        if !(0..3).all(|i| neg[i][i] > 0.0) {
            return None;
        }
        let d = [0.0, 1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0, 1e3, 1e4].into_iter().find_map(|lambda| {
            let mut a = neg;
            (0..3).for_each(|i| a[i][i] *= 1.0 + lambda);
            (minor2(&a) > 0.0 && det3(&a) > 0.0).then(|| solve3(&a, g)).flatten()
        })?;
        // The climb the step promises, g.d / 2: at the maximum it is
        // below the rounding of the sum over the data.
        let promised = 0.5 * (g[0] * d[0] + g[1] * d[1] + g[2] * d[2]);
        let rounding = 1e-13 * (1.0 + l.abs());
        if promised <= rounding {
            return Some((p, l));
        }
        let mut t = 1.0;
        let mut moved = false;
        for _ in 0..40 {
            let q = [p[0] + t * d[0], p[1] + t * d[1], p[2] + t * d[2]];
            if let Some((lq, gq, hq)) = loglik_derivs(q, data).filter(|r| r.0 >= l) {
                (p, l, g, hess) = (q, lq, gq, hq);
                moved = true;
                break;
            }
            t *= 0.5;
        }
        if !moved {
            return (promised <= 1e3 * rounding).then_some((p, l));
        }
    }
    None
}

fn minor2(m: &[[f64; 3]; 3]) -> f64 {
    m[0][0] * m[1][1] - m[0][1] * m[1][0]
}

fn det3(m: &[[f64; 3]; 3]) -> f64 {
    m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
}

/// x with m x = b (Cramer's rule; m is positive definite here).
fn solve3(m: &[[f64; 3]; 3], b: [f64; 3]) -> Option<[f64; 3]> {
    let det = det3(m);
    let x: [f64; 3] = std::array::from_fn(|j| {
        let mut mj = *m;
        (0..3).for_each(|i| mj[i][j] = b[i]);
        det3(&mj) / det
    });
    x.iter().all(|v| v.is_finite()).then_some(x)
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
    fn the_hessian_is_the_gradients_derivative() {
        let truth = Gev { mu: 100.0, sigma: 10.0, xi: 0.3 };
        let mut rng = fastrand::Rng::with_seed(7);
        let data: Vec<f64> = (0..500).map(|_| truth.quantile(rng.f64().max(1e-12))).collect();
        for p in [[100.0, 10f64.ln(), 0.3], [97.0, 2.5, 0.6], [104.0, 2.0, 0.15]] {
            let (l, g, h) = loglik_derivs(p, &data).expect("inside the domain");
            let g0 = Gev { mu: p[0], sigma: p[1].exp(), xi: p[2] };
            assert!((l - loglik(&g0, &data)).abs() < 1e-9 * l.abs(), "{l} vs {}", loglik(&g0, &data));
            for j in 0..3 {
                let e = 1e-6 * if j == 0 { p[1].exp() } else { 1.0 };
                let (mut a, mut b) = (p, p);
                a[j] += e;
                b[j] -= e;
                let (la, ga, _) = loglik_derivs(a, &data).unwrap();
                let (lb, gb, _) = loglik_derivs(b, &data).unwrap();
                let num = (la - lb) / (2.0 * e);
                assert!((g[j] - num).abs() <= 1e-5 * (1.0 + num.abs()), "g[{j}] {} vs {num} at {p:?}", g[j]);
                for i in 0..3 {
                    let num = (ga[i] - gb[i]) / (2.0 * e);
                    assert!((h[i][j] - num).abs() <= 1e-5 * (1.0 + num.abs()), "h[{i}][{j}] {} vs {num}", h[i][j]);
                }
            }
        }
    }

    /// Newton's method lands where the simplex does, within the rounding
    /// of the likelihood's sum.
    #[test]
    fn newton_and_the_simplex_agree() {
        for (seed, truth) in [(5, Gev { mu: 100.0, sigma: 10.0, xi: 0.1 }), (9, Gev { mu: 5e4, sigma: 2e4, xi: 0.8 })] {
            let mut rng = fastrand::Rng::with_seed(seed);
            let data: Vec<f64> = (0..3000).map(|_| truth.quantile(rng.f64().max(1e-12))).collect();
            let start = pwm(&data);
            let x0 = [start.mu, start.sigma.ln(), start.xi];
            let (p, l) = newton(&data, x0).expect("Newton converges");
            let f = |p: &[f64]| -loglik(&Gev { mu: p[0], sigma: p[1].exp(), xi: p[2] }, &data);
            let (q, v) = nm::minimize(&f, &x0, &[start.sigma * 0.2, 0.2, 0.1]);
            assert!((l + v).abs() < 1e-8 * l.abs(), "{l} vs {}", -v);
            assert!((p[0] - q[0]).abs() < 1e-5 * start.sigma, "{p:?} vs {q:?}");
            assert!((p[1] - q[1]).abs() < 1e-5 && (p[2] - q[2]).abs() < 1e-5, "{p:?} vs {q:?}");
        }
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
