//! Mean time to a buffer underrun (the WDM latency study's soft-modem
//! analysis, its figures 6 and 7): n buffers of period t, compute time c per
//! period; the slack is s = (n - 1) t - c, an underrun happens when the
//! latency exceeds it, with probability p per period; MTTF = t / (theta p).

use super::obs::Obs;
use super::pot::{EXTRAPOLATED, MIN_OBSERVED, REFUSED, TailModel};
use crate::units::{dur_s, human};
use serde::Serialize;

/// The compute time per period: fixed, or a distribution (value ns,
/// probability) measured separately from the latency.
#[derive(Clone, Debug, PartialEq)]
pub enum Compute {
    Fixed(u64),
    Dist(Vec<(f64, f64)>),
}

impl Compute {
    /// A distribution from samples (ns).
    pub fn from_samples(v: &[i64]) -> Compute {
        let mut s: Vec<i64> = v.to_vec();
        s.sort_unstable();
        let n = s.len() as f64;
        let mut out: Vec<(f64, f64)> = Vec::new();
        for x in s {
            match out.last_mut() {
                Some(last) if last.0 == x as f64 => last.1 += 1.0 / n,
                _ => out.push((x as f64, 1.0 / n)),
            }
        }
        Compute::Dist(out)
    }

    pub fn mean(&self) -> f64 {
        match self {
            Compute::Fixed(c) => *c as f64,
            Compute::Dist(d) => d.iter().map(|(v, p)| v * p).sum(),
        }
    }
}

/// Where p comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// At least 10 samples above the slack in the data.
    Observed,
    /// The fitted tail beyond the data.
    FittedTail,
    /// Neither: too few exceedances and no tail fit.
    NotEnoughData,
}

/// One MTTF figure.
#[derive(Clone, Debug, Serialize)]
pub struct Mttf {
    pub buffers: u32,
    pub period_ns: u64,
    /// The total buffering time n x t: the x-axis of the WDM latency
    /// study's MTTF curves.
    pub buffering_ns: u64,
    /// The fixed compute time, or the mean of its distribution.
    pub compute_ns: f64,
    pub slack_ns: i64,
    /// Per-period probability that the latency exceeds the slack.
    pub p_exceed: Option<f64>,
    /// Its 95 % interval (from the tail fit's profile likelihood, or a
    /// Poisson interval on the observed count; fixed compute time only).
    pub p_low: Option<f64>,
    pub p_high: Option<f64>,
    pub source: Source,
    pub theta: f64,
    /// None when p is 0 (beyond the fitted tail's end point) or unknown.
    pub mttf_s: Option<f64>,
    pub mttf_low_s: Option<f64>,
    pub mttf_high_s: Option<f64>,
    /// Underrun episodes per hour (clusters counted once): 3600 / MTTF.
    pub underruns_per_hour: Option<f64>,
    pub note: String,
    /// From the fitted tail, an MTTF beyond 10x the observed duration.
    pub extrapolated: bool,
    /// From the fitted tail, an MTTF beyond 100x the observed duration (or
    /// no underrun at all, past the fitted tail's end point): too far to
    /// extrapolate, as a return level would be refused; why, and how long
    /// to measure. The figures above are the fit's, not to be relied on.
    pub refused: Option<String>,
}

/// How far an MTTF from the fitted tail (None: no underrun, past its end
/// point) lies beyond the observed duration `d`: (extrapolated, refused).
fn horizon(mttf_s: Option<f64>, d: f64) -> (bool, Option<String>) {
    let m = mttf_s.unwrap_or(f64::INFINITY);
    if m <= REFUSED * d {
        return (m > EXTRAPOLATED * d, None);
    }
    let what = match mttf_s {
        Some(m) => format!("an MTTF of {}", dur_s(m)),
        None => "no underrun (the slack is beyond the fitted tail's end point)".into(),
    };
    let measure = match mttf_s {
        Some(m) => format!("measure at least {}", dur_s(m / REFUSED)),
        None => "measure longer".into(),
    };
    let why = format!(
        "the fitted tail gives {what}, more than {REFUSED:.0}x the {} observed: too far to extrapolate; {measure}",
        dur_s(d)
    );
    (true, Some(why))
}

/// P(latency > s) per sample: (p, low, high, source).
pub fn p_exceed(obs: &Obs, tail: Option<&TailModel>, s: f64) -> (Option<f64>, Option<f64>, Option<f64>, Source) {
    p_exceed_with(obs, tail, s, true)
}

/// [`p_exceed`], without the interval unless `interval`.
fn p_exceed_with(
    obs: &Obs,
    tail: Option<&TailModel>,
    s: f64,
    interval: bool,
) -> (Option<f64>, Option<f64>, Option<f64>, Source) {
    let c = obs.count_above(s);
    let n = obs.n as f64;
    if c >= MIN_OBSERVED {
        let cf = c as f64;
        let half = 1.96 * cf.sqrt();
        return (Some(cf / n), Some(((cf - half).max(0.0)) / n), Some(((cf + half) / n).min(1.0)), Source::Observed);
    }
    match tail {
        Some(t) if s >= t.u && !interval => (Some(t.p_model(s)), None, None, Source::FittedTail),
        Some(t) if s >= t.u => {
            let (p, lo, hi) = t.p_interval(s);
            (Some(p), Some(lo.unwrap_or(0.0)), Some(hi), Source::FittedTail)
        }
        _ => (None, None, None, Source::NotEnoughData),
    }
}

/// The MTTF of `n` buffers of period `t_ns` with compute time `c`.
pub fn mttf(obs: &Obs, tail: Option<&TailModel>, n: u32, t_ns: u64, c: &Compute) -> Mttf {
    mttf_with(obs, tail, n, t_ns, c, true)
}

/// [`mttf`]; from the fitted tail, with its 95 % interval only if
/// `interval` (the profile likelihood costs most of the time).
fn mttf_with(obs: &Obs, tail: Option<&TailModel>, n: u32, t_ns: u64, c: &Compute, interval: bool) -> Mttf {
    let theta = tail.map_or(1.0, |t| t.theta);
    let base = (n.saturating_sub(1) as f64) * t_ns as f64;
    let t_s = t_ns as f64 / 1e9;
    let to_mttf = |p: f64| (p > 0.0).then(|| t_s / (theta * p));
    let (p, lo, hi, source, slack) = match c {
        Compute::Fixed(c) => {
            let s = base - *c as f64;
            // The point first: a figure refused (beyond 100x the time
            // observed) gets no interval, as a refused return level has
            // none; the profile likelihood is the costly part.
            let mut found = p_exceed_with(obs, tail, s, false);
            if interval
                && found.3 == Source::FittedTail
                && horizon(found.0.and_then(to_mttf), obs.duration_s).1.is_none()
            {
                found = p_exceed_with(obs, tail, s, true);
            }
            let (p, lo, hi, src) = found;
            (p, lo, hi, src, s)
        }
        Compute::Dist(d) => {
            // p = sum over c of P(C = c) P(L > s - c): point estimate only.
            let mut p = 0.0;
            let mut src = Source::Observed;
            for &(cv, w) in d {
                let (pi, _, _, si) = p_exceed_with(obs, tail, base - cv, false);
                match pi {
                    Some(pi) => p += w * pi,
                    None => {
                        src = Source::NotEnoughData;
                        break;
                    }
                }
                if si == Source::FittedTail && src == Source::Observed {
                    src = Source::FittedTail;
                }
            }
            let s = base - c.mean();
            if src == Source::NotEnoughData { (None, None, None, src, s) } else { (Some(p), None, None, src, s) }
        }
    };
    let mttf_s = p.and_then(to_mttf);
    let (extrapolated, refused) =
        if source == Source::FittedTail { horizon(mttf_s, obs.duration_s) } else { (false, None) };
    let note = match (source, p) {
        (Source::NotEnoughData, _) => format!(
            "fewer than {MIN_OBSERVED} samples above the slack {} and no tail fit: measure longer",
            human(slack.max(0.0) as u64)
        ),
        (_, Some(0.0)) => "the slack is beyond the fitted tail's end point: no underrun expected".into(),
        (Source::Observed, _) => format!("observed: {MIN_OBSERVED} or more samples above the slack"),
        (Source::FittedTail, _) => "from the fitted tail".into(),
    };
    Mttf {
        buffers: n,
        period_ns: t_ns,
        buffering_ns: u64::from(n) * t_ns,
        compute_ns: c.mean(),
        slack_ns: slack.round() as i64,
        p_exceed: p,
        p_low: lo,
        p_high: hi,
        source,
        theta,
        mttf_s,
        mttf_low_s: hi.and_then(to_mttf),
        mttf_high_s: lo.and_then(to_mttf),
        underruns_per_hour: p.map(|p| 3600.0 / t_s * theta * p),
        note,
        extrapolated,
        refused,
    }
}

/// The MTTF against the number of buffers: n = 1 ..= `n_max` (figures 6
/// and 7 of the WDM latency study); the fitted tail's 95 % intervals only if `intervals`.
pub fn curve(obs: &Obs, tail: Option<&TailModel>, t_ns: u64, c: &Compute, n_max: u32, intervals: bool) -> Vec<Mttf> {
    (1..=n_max.max(1)).map(|n| mttf_with(obs, tail, n, t_ns, c, intervals)).collect()
}

/// The smallest n (2..=64) whose MTTF reaches `target_s`, judged on the
/// MTTF's point estimate; None when none does or the data cannot tell
/// ([`smallest_n_why`] says which).
pub fn smallest_n(obs: &Obs, tail: Option<&TailModel>, t_ns: u64, c: &Compute, target_s: f64) -> Option<u32> {
    smallest_n_why(obs, tail, t_ns, c, target_s).ok()
}

/// [`smallest_n`], or why there is none: more than 64 buffers, not enough
/// data, or a target that only the fitted tail reaches and lies more than
/// 100x beyond the observed duration (the claim "MTTF >= target" is then
/// refused, as the verdicts refuse it).
pub fn smallest_n_why(
    obs: &Obs,
    tail: Option<&TailModel>,
    t_ns: u64,
    c: &Compute,
    target_s: f64,
) -> Result<u32, String> {
    let d = obs.duration_s;
    for n in 2..=64 {
        let m = mttf_with(obs, tail, n, t_ns, c, false);
        let reached = match (m.source, m.p_exceed) {
            (Source::NotEnoughData, _) | (_, None) => {
                return Err(format!("not enough data: {}", m.note));
            }
            (_, Some(_)) => m.mttf_s.is_none_or(|s| s >= target_s),
        };
        if !reached {
            continue;
        }
        if m.source == Source::FittedTail && target_s > REFUSED * d {
            return Err(format!(
                "only the fitted tail reaches the target {}, more than {REFUSED:.0}x the {} observed: too far to \
                 extrapolate; measure at least {}",
                dur_s(target_s),
                dur_s(d),
                dur_s(target_s / REFUSED)
            ));
        }
        return Ok(n);
    }
    Err("more than 64 buffers".into())
}

/// The MTTF table of one measured series: every n in `buffers` for every
/// period in `periods`, with the smallest n for the target.
#[derive(Clone, Debug, Serialize)]
pub struct MttfTable {
    pub target_s: f64,
    pub compute: String,
    pub rows: Vec<Mttf>,
    /// (period ns, smallest n reaching the target) per period.
    pub smallest_n: Vec<(u64, Option<u32>)>,
    /// Per period without a smallest n: (period ns, why).
    pub smallest_n_why: Vec<(u64, String)>,
}

impl MttfTable {
    /// Why some periods have no smallest n, when the data cannot tell
    /// (not "more than 64"): each reason once, with its periods.
    pub fn smallest_n_notes(&self) -> Vec<(Vec<u64>, &str)> {
        let mut out: Vec<(Vec<u64>, &str)> = Vec::new();
        for (t, why) in self.smallest_n_why.iter().filter(|w| !w.1.starts_with("more than")) {
            match out.iter_mut().find(|o| o.1 == why.as_str()) {
                Some(o) => o.0.push(*t),
                None => out.push((vec![*t], why.as_str())),
            }
        }
        out
    }
}

/// What an MTTF table crosses: buffer periods and counts, the target of
/// its smallest n, and whether its cells carry their 95 % intervals (from
/// the fitted tail, a profile-likelihood scan each: most of an analysis'
/// time; without them `p_low`, `p_high`, `mttf_low_s` and `mttf_high_s`
/// are None).
#[derive(Clone, Copy, Debug)]
pub struct TableSpec<'a> {
    pub periods: &'a [u64],
    pub buffers: &'a [u32],
    pub target_s: f64,
    pub intervals: bool,
}

pub fn table(
    obs: &Obs,
    tail: Option<&TailModel>,
    spec: &TableSpec,
    compute: impl Fn(u64) -> Compute,
    compute_text: String,
) -> MttfTable {
    let mut rows = Vec::new();
    let mut small = Vec::new();
    let mut why = Vec::new();
    let target_s = spec.target_s;
    for &t in spec.periods {
        let c = compute(t);
        for &n in spec.buffers {
            rows.push(mttf_with(obs, tail, n, t, &c, spec.intervals));
        }
        let n = smallest_n_why(obs, tail, t, &c, target_s);
        if let Err(e) = &n {
            why.push((t, e.clone()));
        }
        small.push((t, n.ok()));
    }
    MttfTable { target_s, compute: compute_text, rows, smallest_n: small, smallest_n_why: why }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A constructed sample set: 100 000 samples at 1 kHz, of which
    /// exactly 1 % (every 100th) is 5 ms and the rest 100 us. With t = 1 ms,
    /// n = 3, c = 1 ms the slack is 1 ms: p = 0.01, theta = 1 (isolated
    /// spikes), MTTF = 1 ms / 0.01 = 0.1 s, 36 000 underruns per hour.
    #[test]
    fn mttf_formula_on_a_constructed_set() {
        let v: Vec<i64> = (0..100_000).map(|i| if i % 100 == 37 { 5_000_000 } else { 100_000 }).collect();
        let o = Obs::from_samples(&v, None, Some(1000.0)).unwrap();
        let m = mttf(&o, None, 3, 1_000_000, &Compute::Fixed(1_000_000));
        assert_eq!(m.slack_ns, 1_000_000);
        assert_eq!(m.source, Source::Observed);
        assert!((m.p_exceed.unwrap() - 0.01).abs() < 1e-12);
        assert!((m.mttf_s.unwrap() - 0.1).abs() < 1e-9, "{m:?}");
        assert!((m.underruns_per_hour.unwrap() - 36_000.0).abs() < 1e-6);
        assert!(m.mttf_low_s.unwrap() < 0.1 && m.mttf_high_s.unwrap() > 0.1);
        // With theta = 1/2 (spikes in pairs) the MTTF doubles.
        let tail = TailModel {
            u: 0.0,
            fit: crate::analysis::gpd::fit(&[(1.0, 20), (2.0, 20), (3.0, 20)]).unwrap(),
            excesses: vec![],
            zeta: 1.0,
            theta: 0.5,
            theta_note: String::new(),
            n: o.n,
            rate_hz: 1000.0,
            duration_s: 100.0,
        };
        let m2 = mttf(&o, Some(&tail), 3, 1_000_000, &Compute::Fixed(1_000_000));
        assert!((m2.mttf_s.unwrap() - 0.2).abs() < 1e-9, "{m2:?}");
        // Slack of 5 ms or more: no sample above it, no tail: not enough data.
        let m3 = mttf(&o, None, 7, 1_000_000, &Compute::Fixed(1_000_000));
        assert_eq!(m3.source, Source::NotEnoughData);
        assert!(m3.mttf_s.is_none());
        // A compute time distribution: half the periods 1 ms, half 2.5 ms:
        // slack 1 ms (p = 0.01) or -0.5 ms (p = 1): p = 0.505.
        let c = Compute::from_samples(&[1_000_000, 2_500_000]);
        let m4 = mttf(&o, None, 3, 1_000_000, &c);
        assert!((m4.p_exceed.unwrap() - 0.505).abs() < 1e-12, "{m4:?}");
        // The curve: n = 1 leaves no slack (every period underruns); the
        // slack grows by t with each buffer.
        let cv = curve(&o, None, 1_000_000, &Compute::Fixed(1_000_000), 7, true);
        assert_eq!(cv.iter().map(|m| m.buffers).collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(cv[0].p_exceed, Some(1.0));
        assert!((cv[0].mttf_s.unwrap() - 1e-3).abs() < 1e-12);
        assert_eq!(cv[2].slack_ns, 1_000_000);
        assert!(cv.windows(2).all(|w| w[1].slack_ns - w[0].slack_ns == 1_000_000));
        let quick = curve(&o, None, 1_000_000, &Compute::Fixed(1_000_000), 7, false);
        assert!(quick.iter().zip(&cv).all(|(q, c)| q.mttf_s == c.mttf_s && q.source == c.source));
        assert_eq!(cv[5].p_exceed, Some(0.01), "4 ms of slack: the 5 ms samples still exceed it");
        assert_eq!(cv[6].source, Source::NotEnoughData, "5 ms of slack: no sample above it");
        assert_eq!(smallest_n(&o, None, 1_000_000, &Compute::Fixed(0), 0.05), Some(2));
        assert_eq!(smallest_n(&o, None, 1_000_000, &Compute::Fixed(1_000_000), 1.0), None);
    }

    /// 100 s at 1 kHz of a bounded tail (uniform 10..20 us): the fit has an
    /// end point near 20 us, so a slack of 500 us gives p = 0 from the fit.
    /// The MTTF table must not say "never", nor smallest_n accept a target
    /// more than 100x the observed duration on the fit's word.
    #[test]
    fn a_fitted_tail_is_not_extrapolated_beyond_100x_the_observed_duration() {
        let mut rng = fastrand::Rng::with_seed(3);
        let v: Vec<i64> = (0..100_000).map(|_| rng.i64(10_000..20_000)).collect();
        let o = Obs::from_samples(&v, None, Some(1000.0)).unwrap();
        let (model, report) = crate::analysis::pot::analyze(&o, None).unwrap();
        assert!(report.xi < 0.0, "a bounded tail: {}", report.xi);
        let m = mttf(&o, Some(&model), 2, 1_000_000, &Compute::Fixed(500_000));
        assert_eq!((m.source, m.p_exceed, m.mttf_s), (Source::FittedTail, Some(0.0), None));
        let why = m.refused.as_deref().expect("no underrun at all is a claim beyond 100x");
        assert!(why.contains("no underrun") && why.contains("100x the 1m40s observed"), "{why}");
        // Within 100x: a figure; beyond 10x labelled extrapolated.
        assert_eq!(horizon(Some(500.0), 100.0), (false, None));
        assert_eq!(horizon(Some(5_000.0), 100.0), (true, None));
        let (ex, r) = horizon(Some(20_000.0), 100.0);
        assert!(ex && r.as_deref().unwrap().contains("measure at least 3m20s"), "{r:?}");
        // An observed MTTF is never refused.
        let spikes: Vec<i64> = (0..100_000).map(|i| if i % 100 == 37 { 5_000_000 } else { 100_000 }).collect();
        let so = Obs::from_samples(&spikes, None, Some(1000.0)).unwrap();
        let observed = mttf(&so, None, 3, 1_000_000, &Compute::Fixed(1_000_000));
        assert!(!observed.extrapolated && observed.refused.is_none());
        // The smallest n: a target of a day is more than 100x the 100 s
        // observed, and only the fit reaches it: refused, saying how long
        // to measure; 2 h (72x) is within reach.
        let c = Compute::Fixed(500_000);
        assert_eq!(smallest_n(&o, Some(&model), 1_000_000, &c, 86_400.0), None);
        let e = smallest_n_why(&o, Some(&model), 1_000_000, &c, 86_400.0).unwrap_err();
        assert!(e.contains("fitted tail") && e.contains("measure at least 14m24s"), "{e}");
        assert_eq!(smallest_n(&o, Some(&model), 1_000_000, &c, 7_200.0), Some(2));
        // Without a fit: not enough data, said so; with enough buffers
        // out of reach: more than 64.
        let e = smallest_n_why(&so, None, 1_000_000, &Compute::Fixed(1_000_000), 1.0).unwrap_err();
        assert!(e.starts_with("not enough data"), "{e}");
        let long: Vec<i64> = (0..100_000).map(|i| if i % 100 == 37 { 90_000_000 } else { 100_000 }).collect();
        let lo = Obs::from_samples(&long, None, Some(1000.0)).unwrap();
        let e = smallest_n_why(&lo, None, 1_000_000, &Compute::Fixed(0), 1.0).unwrap_err();
        assert_eq!(e, "more than 64 buffers");
        // The table carries the reasons.
        let spec = TableSpec { periods: &[1_000_000], buffers: &[2, 3], target_s: 86_400.0, intervals: true };
        let t = table(&o, Some(&model), &spec, |_| c.clone(), "500us".into());
        assert_eq!(t.smallest_n, [(1_000_000, None)]);
        assert!(t.smallest_n_why[0].1.contains("too far to extrapolate"), "{t:?}");
        assert!(t.rows.iter().all(|r| r.refused.is_some()));
        // A refused figure has no interval; one within reach has its own.
        let far = mttf(&o, Some(&model), 3, 1_000_000, &Compute::Fixed(0));
        assert!(far.refused.is_some() && far.mttf_low_s.is_none() && far.p_high.is_none(), "{far:?}");
    }
}
