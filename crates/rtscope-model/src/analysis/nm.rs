//! Nelder-Mead simplex minimisation (Nelder and Mead 1965) with the usual
//! coefficients (reflection 1, expansion 2, contraction 1/2, shrink 1/2)
//! and restarts from the best point, which guard against a simplex that
//! collapsed before reaching the minimum.

/// Minimises `f` from `x0` with initial steps `step`; returns the best
/// point and its value. Non-finite values of `f` count as +infinity, so a
/// function can refuse a point outside its domain by returning NaN or inf.
pub fn minimize(f: &dyn Fn(&[f64]) -> f64, x0: &[f64], step: &[f64]) -> (Vec<f64>, f64) {
    let mut best = x0.to_vec();
    let mut best_f = eval(f, &best);
    let mut step = step.to_vec();
    for _ in 0..4 {
        let (x, fx) = one_run(f, &best, &step, 1500);
        let improved = fx < best_f - 1e-12 * best_f.abs().max(1.0);
        if fx <= best_f {
            best = x;
            best_f = fx;
        }
        if !improved {
            break;
        }
        step.iter_mut().for_each(|s| *s *= 0.5);
    }
    (best, best_f)
}

fn eval(f: &dyn Fn(&[f64]) -> f64, x: &[f64]) -> f64 {
    let v = f(x);
    if v.is_finite() { v } else { f64::INFINITY }
}

fn one_run(f: &dyn Fn(&[f64]) -> f64, x0: &[f64], step: &[f64], max_iter: usize) -> (Vec<f64>, f64) {
    let n = x0.len();
    let mut pts: Vec<Vec<f64>> = vec![x0.to_vec()];
    for i in 0..n {
        let mut p = x0.to_vec();
        p[i] += step[i];
        pts.push(p);
    }
    let mut vals: Vec<f64> = pts.iter().map(|p| eval(f, p)).collect();
    for _ in 0..max_iter {
        let mut order: Vec<usize> = (0..=n).collect();
        order.sort_by(|&a, &b| vals[a].total_cmp(&vals[b]));
        pts = order.iter().map(|&i| pts[i].clone()).collect();
        vals = order.iter().map(|&i| vals[i]).collect();
        let (lo, hi) = (vals[0], vals[n]);
        let spread = (hi - lo).abs();
        let size = (1..=n).map(|i| dist(&pts[i], &pts[0])).fold(0.0, f64::max);
        if hi.is_finite() && spread <= 1e-12 * (lo.abs() + 1e-12) && size < 1e-9 {
            break;
        }
        if size < 1e-12 {
            break;
        }
        let centroid: Vec<f64> = (0..n).map(|j| pts[..n].iter().map(|p| p[j]).sum::<f64>() / n as f64).collect();
        let along = |t: f64| -> Vec<f64> { (0..n).map(|j| centroid[j] + t * (pts[n][j] - centroid[j])).collect() };
        let xr = along(-1.0);
        let fr = eval(f, &xr);
        if fr < vals[0] {
            let xe = along(-2.0);
            let fe = eval(f, &xe);
            if fe < fr {
                pts[n] = xe;
                vals[n] = fe;
            } else {
                pts[n] = xr;
                vals[n] = fr;
            }
        } else if fr < vals[n - 1] {
            pts[n] = xr;
            vals[n] = fr;
        } else {
            let (xc, fc) = if fr < vals[n] {
                let x = along(-0.5);
                let v = eval(f, &x);
                (x, v)
            } else {
                let x = along(0.5);
                let v = eval(f, &x);
                (x, v)
            };
            if fc < vals[n].min(fr) {
                pts[n] = xc;
                vals[n] = fc;
            } else {
                for i in 1..=n {
                    let p: Vec<f64> = (0..n).map(|j| pts[0][j] + 0.5 * (pts[i][j] - pts[0][j])).collect();
                    vals[i] = eval(f, &p);
                    pts[i] = p;
                }
            }
        }
    }
    let i = (0..=n).min_by(|&a, &b| vals[a].total_cmp(&vals[b])).unwrap_or(0);
    (pts[i].clone(), vals[i])
}

fn dist(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs() / (1.0 + y.abs())).fold(0.0, f64::max)
}

/// Golden-section search for the maximum of a unimodal `f` on `[a, b]`.
pub fn golden_max(f: &dyn Fn(f64) -> f64, mut a: f64, mut b: f64, iters: usize) -> (f64, f64) {
    let g = (5f64.sqrt() - 1.0) / 2.0;
    let mut c = b - g * (b - a);
    let mut d = a + g * (b - a);
    let (mut fc, mut fd) = (f(c), f(d));
    for _ in 0..iters {
        if fc >= fd || fd.is_nan() {
            b = d;
            d = c;
            fd = fc;
            c = b - g * (b - a);
            fc = f(c);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + g * (b - a);
            fd = f(d);
        }
    }
    if fc >= fd { (c, fc) } else { (d, fd) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_rosenbrock_minimum() {
        let f = |x: &[f64]| (1.0 - x[0]).powi(2) + 100.0 * (x[1] - x[0] * x[0]).powi(2);
        let (x, v) = minimize(&f, &[-1.2, 1.0], &[0.5, 0.5]);
        assert!(v < 1e-10, "{v}");
        assert!((x[0] - 1.0).abs() < 1e-4 && (x[1] - 1.0).abs() < 1e-4, "{x:?}");
    }

    #[test]
    fn respects_a_domain() {
        // Minimum of (x-2)^2 on x > 3 is at the border: the search must stay inside.
        let f = |x: &[f64]| if x[0] <= 3.0 { f64::NAN } else { (x[0] - 2.0).powi(2) };
        let (x, _) = minimize(&f, &[5.0], &[1.0]);
        assert!(x[0] > 3.0 && x[0] < 3.01, "{x:?}");
        let (m, v) = golden_max(&|t| -(t - 0.3) * (t - 0.3), -1.0, 2.0, 60);
        assert!((m - 0.3).abs() < 1e-6 && v <= 0.0);
    }
}
