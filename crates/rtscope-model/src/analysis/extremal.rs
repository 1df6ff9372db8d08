//! The extremal index theta (0 < theta <= 1): 1/theta is the mean size of
//! a cluster of exceedances. Estimated by the intervals estimator of Ferro
//! and Segers (2003), "Inference for clusters of extreme values", JRSS B
//! 65(2), eq. (4): from the times between consecutive exceedances.

/// theta from the exceedance times `t` (in units of observations, i.e.
/// sample indices, ascending). None with fewer than 3 exceedances.
pub fn intervals_estimator(t: &[f64]) -> Option<f64> {
    if t.len() < 3 {
        return None;
    }
    let gaps: Vec<f64> = t.windows(2).map(|w| (w[1] - w[0]).round().max(1.0)).collect();
    let n1 = gaps.len() as f64;
    let max = gaps.iter().cloned().fold(0.0, f64::max);
    let theta = if max <= 2.0 {
        let s: f64 = gaps.iter().sum();
        let s2: f64 = gaps.iter().map(|g| g * g).sum();
        2.0 * s * s / (n1 * s2)
    } else {
        let s: f64 = gaps.iter().map(|g| g - 1.0).sum();
        let s2: f64 = gaps.iter().map(|g| (g - 1.0) * (g - 2.0)).sum();
        2.0 * s * s / (n1 * s2)
    };
    theta.is_finite().then_some(theta.min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn independent_exceedances_give_one() {
        // Geometric gaps (independent exceedances with p = 0.01) give ~1.
        let mut rng = fastrand::Rng::with_seed(3);
        let mut t = Vec::new();
        let mut i = 0.0;
        while t.len() < 2000 {
            i += 1.0;
            if rng.f64() < 0.01 {
                t.push(i);
            }
        }
        let th = intervals_estimator(&t).unwrap();
        assert!((th - 1.0).abs() < 0.08, "{th}");
    }

    #[test]
    fn clusters_of_four_give_a_quarter() {
        // Clusters of 4 consecutive exceedances, clusters far apart at
        // independent times: theta = 1/4.
        let mut rng = fastrand::Rng::with_seed(4);
        let mut t = Vec::new();
        let mut i = 0.0;
        while t.len() < 4000 {
            i += 1.0;
            if rng.f64() < 0.001 {
                for k in 0..4 {
                    t.push(i + k as f64);
                }
                i += 4.0;
            }
        }
        let th = intervals_estimator(&t).unwrap();
        assert!((th - 0.25).abs() < 0.03, "{th}");
        // Hand-computed: gaps 1, 1, 3 -> max > 2: 2 (0+0+2)^2 / (3 (0+0+2)) = 4/3 -> capped at 1.
        assert_eq!(intervals_estimator(&[0.0, 1.0, 2.0, 5.0]), Some(1.0));
        // gaps 1, 1, 1, 10: 2 (0+0+0+9)^2 / (4 (0+0+0+72)) = 162/288.
        let v = intervals_estimator(&[0.0, 1.0, 2.0, 3.0, 13.0]).unwrap();
        assert!((v - 162.0 / 288.0).abs() < 1e-12, "{v}");
    }
}
