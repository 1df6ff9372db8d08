//! A periodic task's deadline misses, predicted from its own release delay
//! and set beside the misses it counted (the check the Win98/WDM latency
//! study proposed for its MTTF predictions).
//!
//! A job of compute time c released at r must complete by r + D + (N - 1)
//! T (deadline D, N buffers of period T): its slack is s = D + (N - 1) T -
//! c. The MTTF model (as [`super::mttf`]) predicts a miss when the release
//! delay exceeds the slack: p = P(release > s). A disturbance that strikes
//! while the job computes delays it as much as one that strikes at its
//! release, but the release delay does not see it; a job meets such a
//! disturbance when it begins within c before the job's start, so for
//! disturbances longer than the slack the miss rate is P(release > s - c)
//! (the release delays above s - c come from the same window's length,
//! shifted by c). The prediction's interval therefore runs from the 95 %
//! lower bound of P(release > s) to the 95 % upper bound of P(release > s -
//! c).

use super::mttf::{Source, p_exceed};
use super::obs::Obs;
use super::pot::TailModel;
use crate::units::human;
use serde::Serialize;

pub use crate::settings::TaskModel;

/// The predicted and the observed miss rate of one task (one CPU).
#[derive(Clone, Debug, Serialize)]
pub struct MissPrediction {
    pub task: TaskModel,
    pub slack_ns: i64,
    pub jobs: u64,
    pub missed: u64,
    /// Misses per job, observed.
    pub observed: f64,
    /// Misses per job, predicted: P(release > slack).
    pub predicted: Option<f64>,
    /// The prediction's interval: the 95 % lower bound of P(release >
    /// slack), the 95 % upper bound of P(release > slack - compute).
    pub low: Option<f64>,
    pub high: Option<f64>,
    /// Where the upper end comes from (the lower end's source is `source`).
    pub source: Source,
    pub high_source: Source,
    /// The extremal index of the release delay's tail (1 without a fit).
    pub theta: f64,
    /// The predicted mean time between miss episodes, T / (theta p).
    pub mttf_s: Option<f64>,
    /// Whether the observed rate lies inside the interval (None: no
    /// interval).
    pub inside: Option<bool>,
    pub note: String,
}

/// Predicts `task`'s miss rate from its release delays `release` (and their
/// fitted tail) and sets beside it the `missed` of its `jobs`.
pub fn predict(release: &Obs, tail: Option<&TailModel>, task: TaskModel, jobs: u64, missed: u64) -> MissPrediction {
    let s = task.slack_ns();
    let (p, low, _, source) = p_exceed(release, tail, s as f64);
    let (p_upper, _, high, high_source) = p_exceed(release, tail, (s - task.compute_ns as i64) as f64);
    let observed = if jobs > 0 { missed as f64 / jobs as f64 } else { 0.0 };
    let theta = tail.map_or(1.0, |t| t.theta);
    let t_s = task.period_ns as f64 / 1e9;
    let mttf_s = p.filter(|&p| p > 0.0).map(|p| t_s / (theta * p));
    // A probability that is not known bounds nothing: the interval's end
    // is open (0 below, 1 above) rather than absent.
    let (low, high) = match (low, high) {
        (None, None) => (None, None),
        (l, h) => (Some(l.unwrap_or(0.0)), Some(h.unwrap_or(1.0))),
    };
    let inside = low.zip(high).map(|(l, h)| l <= observed && observed <= h);
    let note = match (source, high_source, p_upper) {
        (Source::NotEnoughData, Source::NotEnoughData, _) => format!(
            "fewer than 10 release delays above {} and no tail fit: measure longer",
            human((s - task.compute_ns as i64).max(0) as u64)
        ),
        (Source::NotEnoughData, _, _) => format!(
            "fewer than 10 release delays above the slack {} and no tail fit: the lower end is open",
            human(s.max(0) as u64)
        ),
        (_, Source::NotEnoughData, _) => "the upper end is open: too few release delays above slack - compute".into(),
        _ => "from the release delay: above the slack (the MTTF model), up to above slack - compute (a disturbance \
              striking while the job computes)"
            .into(),
    };
    MissPrediction {
        task,
        slack_ns: s,
        jobs,
        missed,
        observed,
        predicted: p,
        low,
        high,
        source,
        high_source,
        theta,
        mttf_s,
        inside,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 20 000 jobs at 1 kHz with compute 250 us, deadline 1 ms: slack 750
    /// us. A burst of 1.5 ms every 20 jobs (phase swept over the period)
    /// delays the releases in [b, b + 1.5 ms) by b + 1.5 ms - r. Releases
    /// delayed beyond 750 us: 0.75 per burst on average; beyond 500 us: 1
    /// per burst; the misses (a job computing or released within the
    /// window (b - 250 us, b + 750 us)): 1 per burst. The observed rate is
    /// inside, near the upper end.
    #[test]
    fn bursts_longer_than_the_slack_put_the_misses_inside_the_interval() {
        let task = TaskModel { period_ns: 1_000_000, deadline_ns: 1_000_000, buffers: 1, compute_ns: 250_000 };
        let mut v = vec![20_000i64; 20_000];
        let mut missed = 0;
        for burst in 0..1000u64 {
            // The burst begins at a phase that sweeps the period.
            let b = burst as f64 * 20.0 + (burst % 97) as f64 / 97.0;
            let end = b + 1.5;
            for k in (b.floor() as u64)..(end.ceil() as u64 + 1) {
                let r = k as f64;
                if r >= b && r < end {
                    v[k as usize] = ((end - r) * 1e6) as i64;
                }
                // A miss: computing at b, or released inside and done late.
                if (r < b && r + 0.25 > b) || (r >= b && end + 0.25 - r > 1.0) {
                    missed += 1;
                }
            }
        }
        let o = Obs::from_samples(&v, None, Some(1000.0)).unwrap();
        let m = predict(&o, None, task, 20_000, missed);
        assert_eq!(m.slack_ns, 750_000);
        assert_eq!((m.source, m.high_source), (Source::Observed, Source::Observed));
        assert!((m.observed - 0.05).abs() < 0.002, "{m:?}");
        assert!(m.predicted.unwrap() < m.observed, "{m:?}");
        assert_eq!(m.inside, Some(true), "{m:?}");
        // Three buffers: no release delay comes near the slack of 2.75 ms.
        let m3 = predict(&o, None, TaskModel { buffers: 3, ..task }, 20_000, 0);
        assert_eq!(m3.inside, None);
        assert!(m3.note.contains("measure longer"), "{}", m3.note);
    }
}
