//! Fixed-priority response-time analysis with release jitter and blocking
//! (Audsley, Burns, Richardson, Tindell and Wellings 1993, "Applying new
//! scheduling theory to static priority pre-emptive scheduling"), in the
//! busy-window form of Tindell, Burns and Wellings (1994) so that a
//! deadline beyond the period is handled too; the Liu-Layland (1973) and
//! hyperbolic (Bini, Buttazzo and Buttazzo 2003) utilisation bounds.

use super::pot::{EXTRAPOLATED, REFUSED};
use super::verdict::{Status, Verdict};
use crate::units::{dur_s, human, parse_duration, us_i};
use serde::{Deserialize, Serialize};

/// One task, all times in ns; higher `priority` = more urgent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub name: String,
    pub wcet_ns: u64,
    pub period_ns: u64,
    pub deadline_ns: u64,
    pub blocking_ns: u64,
    pub jitter_ns: u64,
    pub priority: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    task: Vec<TaskSpec>,
}

/// A `[[task]]` table as written (durations with units), in a task file or
/// inline in a campaign file.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    name: String,
    wcet: String,
    period: String,
    deadline: Option<String>,
    blocking: Option<String>,
    jitter: Option<String>,
    priority: Option<i64>,
}

/// Parses a task set file: `[[task]]` tables with `name`, `wcet`, `period`,
/// optional `deadline` (default: the period), `blocking`, `jitter` (default
/// 0) and `priority` (higher = more urgent; without priorities, file order
/// is priority order, the first task the most urgent). Durations carry a
/// unit ("1.5ms"). Returns the tasks most urgent first.
pub fn parse_tasks(text: &str, origin: &str) -> Result<Vec<Task>, String> {
    let file: File = toml::from_str(text).map_err(|e| {
        format!("{origin}: {e}; expected [[task]] tables with name, wcet, period and optionally deadline, blocking, jitter, priority")
    })?;
    from_specs(file.task, origin)
}

/// The tasks of `[[task]]` tables (as [`parse_tasks`]), most urgent first.
pub fn from_specs(specs: Vec<TaskSpec>, origin: &str) -> Result<Vec<Task>, String> {
    if specs.is_empty() {
        return Err(format!("{origin}: no [[task]] in it"));
    }
    let with = specs.iter().filter(|t| t.priority.is_some()).count();
    if with != 0 && with != specs.len() {
        return Err(format!(
            "{origin}: give every task a priority or none (then file order is priority order, highest first)"
        ));
    }
    let count = specs.len() as i64;
    let mut tasks = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        if specs[..i].iter().any(|o| o.name == s.name) {
            return Err(format!("{origin}: two tasks are named '{}'; give each its own name", s.name));
        }
    }
    for (i, s) in specs.into_iter().enumerate() {
        let dur =
            |field: &str, v: &str| parse_duration(v).map_err(|e| format!("{origin}: task '{}': {field}: {e}", s.name));
        let wcet_ns = dur("wcet", &s.wcet)?;
        let period_ns = dur("period", &s.period)?;
        if period_ns == 0 || wcet_ns == 0 {
            return Err(format!("{origin}: task '{}': wcet and period must be longer than 0", s.name));
        }
        let deadline_ns = s.deadline.as_deref().map(|d| dur("deadline", d)).transpose()?.unwrap_or(period_ns);
        if deadline_ns == 0 {
            return Err(format!("{origin}: task '{}': deadline must be longer than 0", s.name));
        }
        tasks.push(Task {
            wcet_ns,
            period_ns,
            deadline_ns,
            blocking_ns: s.blocking.as_deref().map(|d| dur("blocking", d)).transpose()?.unwrap_or(0),
            jitter_ns: s.jitter.as_deref().map(|d| dur("jitter", d)).transpose()?.unwrap_or(0),
            priority: s.priority.unwrap_or(count - i as i64),
            name: s.name,
        });
    }
    tasks.sort_by_key(|t| std::cmp::Reverse(t.priority));
    Ok(tasks)
}

#[derive(Clone, Debug, Serialize)]
pub struct TaskResult {
    pub name: String,
    pub priority: i64,
    pub wcet_ns: u64,
    pub period_ns: u64,
    pub deadline_ns: u64,
    pub blocking_ns: u64,
    pub jitter_ns: u64,
    /// Worst-case response time from release (jitter included). Where the
    /// task misses its deadline, the first response time found beyond it
    /// (the true worst case is at least that).
    pub response_time_ns: u64,
    pub schedulable: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Bound {
    pub name: &'static str,
    /// The bound's value: Liu-Layland's n (2^(1/n) - 1), the hyperbolic
    /// product of (U_i + 1) against 2.
    pub value: f64,
    pub limit: f64,
    /// Sufficient only, for rate-monotonic priorities, deadline = period,
    /// no jitter and no blocking.
    pub passed: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct RtaReport {
    pub tasks: Vec<TaskResult>,
    pub schedulable: bool,
    pub utilization: f64,
    pub liu_layland: Bound,
    pub hyperbolic: Bound,
    pub notes: Vec<String>,
}

/// Response time of task `i` of `tasks` (most urgent first): the longest
/// R_i(q) = w_i(q) - q T_i + J_i over the jobs of the level-i busy period,
/// w_i(q) = B_i + (q + 1) C_i + sum_{j in hp(i)} ceil((w_i(q) + J_j) / T_j) C_j.
/// Stops early once a job misses the deadline.
fn response_time(tasks: &[Task], i: usize) -> (u64, bool) {
    let t = &tasks[i];
    let hp: Vec<&Task> =
        tasks.iter().enumerate().filter(|(j, o)| *j != i && o.priority >= t.priority).map(|x| x.1).collect();
    let mut worst = 0u64;
    for q in 0u64..100_000 {
        let mut w = t.blocking_ns + (q + 1) * t.wcet_ns;
        loop {
            let next = t.blocking_ns
                + (q + 1) * t.wcet_ns
                + hp.iter().map(|o| (w + o.jitter_ns).div_ceil(o.period_ns) * o.wcet_ns).sum::<u64>();
            if next == w {
                break;
            }
            w = next;
            if w.saturating_sub(q * t.period_ns) + t.jitter_ns > t.deadline_ns {
                break;
            }
        }
        let r = (w + t.jitter_ns).saturating_sub(q * t.period_ns);
        worst = worst.max(r);
        if worst > t.deadline_ns {
            return (worst, false);
        }
        if w + t.jitter_ns <= (q + 1) * t.period_ns {
            return (worst, true);
        }
    }
    (worst, false)
}

/// Analyses a task set (most urgent first, as [`parse_tasks`] returns it).
pub fn analyze(tasks: &[Task]) -> RtaReport {
    let results: Vec<TaskResult> = (0..tasks.len())
        .map(|i| {
            let t = &tasks[i];
            let (r, ok) = response_time(tasks, i);
            TaskResult {
                name: t.name.clone(),
                priority: t.priority,
                wcet_ns: t.wcet_ns,
                period_ns: t.period_ns,
                deadline_ns: t.deadline_ns,
                blocking_ns: t.blocking_ns,
                jitter_ns: t.jitter_ns,
                response_time_ns: r,
                schedulable: ok,
            }
        })
        .collect();
    let utils: Vec<f64> = tasks.iter().map(|t| t.wcet_ns as f64 / t.period_ns as f64).collect();
    let u: f64 = utils.iter().sum();
    let n = tasks.len() as f64;
    let ll = n * (2f64.powf(1.0 / n) - 1.0);
    let hyper: f64 = utils.iter().map(|x| x + 1.0).product();
    let mut notes = Vec::new();
    let rm = tasks.windows(2).all(|w| w[0].period_ns <= w[1].period_ns);
    let implicit = tasks.iter().all(|t| t.deadline_ns == t.period_ns && t.jitter_ns == 0 && t.blocking_ns == 0);
    if !(rm && implicit) {
        notes.push(
            "the utilisation bounds hold for rate-monotonic priorities with deadline = period, no jitter and no blocking; \
             this set is not such a set, so only the response times decide"
                .into(),
        );
    }
    if u > 1.0 {
        notes.push(format!("utilisation {:.3} > 1: the CPU is overloaded", u));
    }
    RtaReport {
        schedulable: results.iter().all(|r| r.schedulable),
        tasks: results,
        utilization: u,
        liu_layland: Bound { name: "Liu-Layland", value: u, limit: ll, passed: u <= ll + 1e-12 },
        hyperbolic: Bound { name: "hyperbolic", value: hyper, limit: 2.0, passed: hyper <= 2.0 + 1e-12 },
        notes,
    }
}

/// The WDM latency study's "pseudo worst case" (its section 5.2): the measured
/// wake-up latency at exceedance probability `eps` becomes every task's
/// release jitter (where larger than the file's), and a union bound caps
/// the probability of a deadline miss per hour: every release is a
/// wake-up whose latency exceeds the pseudo worst case with probability at
/// most eps.
#[derive(Clone, Debug, Serialize)]
pub struct PseudoWorstCase {
    pub error_rate: f64,
    pub latency_ns: u64,
    /// Where the latency comes from (observed or the fitted tail).
    pub source: String,
    pub releases_per_hour: f64,
    /// Union bound: min(1, eps x releases per hour); None when the set
    /// misses deadlines even at the pseudo worst case.
    pub miss_probability_per_hour: Option<f64>,
    pub expected_misses_per_hour_at_most: Option<f64>,
}

/// Applies the pseudo worst case `latency_ns` at `eps` to `tasks`.
pub fn with_jitter(tasks: &[Task], latency_ns: u64) -> Vec<Task> {
    tasks.iter().map(|t| Task { jitter_ns: t.jitter_ns.max(latency_ns), ..t.clone() }).collect()
}

pub fn pseudo_worst_case(
    tasks: &[Task],
    report: &RtaReport,
    eps: f64,
    latency_ns: u64,
    source: String,
) -> PseudoWorstCase {
    let releases: f64 = tasks.iter().map(|t| 3.6e12 / t.period_ns as f64).sum();
    let ok = report.schedulable;
    PseudoWorstCase {
        error_rate: eps,
        latency_ns,
        source,
        releases_per_hour: releases,
        miss_probability_per_hour: ok.then(|| (eps * releases).min(1.0)),
        expected_misses_per_hour_at_most: ok.then_some(eps * releases),
    }
}

/// A line for people: "R = 7ms <= D = 9ms".
pub fn describe(r: &TaskResult) -> String {
    format!("R = {} {} D = {}", human(r.response_time_ns), if r.schedulable { "<=" } else { ">" }, human(r.deadline_ns))
}

/// The error rate of a task set stored without one: one wake-up in 100 000
/// may exceed the pseudo worst case (at 1 kHz, one in 100 s; the
/// WDM latency study's tolerances run from a dropped buffer every few minutes for
/// low-latency audio to one an hour for a soft modem of 4 ms periods,
/// about 3e-4 per period). Within 100x the samples of a 1 kHz wake-up
/// series from 1 s of measurement on, so `rtscope run` (7 s cells) and
/// `--quick` (2 s) can answer it.
pub const DEFAULT_ERROR_RATE: f64 = 1e-5;

/// Checks an error rate: a probability per wake-up, strictly between 0 and 1.
pub fn check_error_rate(eps: f64) -> Result<f64, String> {
    if eps.is_finite() && eps > 0.0 && eps < 1.0 {
        Ok(eps)
    } else {
        Err(format!("{eps} is not a probability between 0 and 1 (e.g. 1e-6)"))
    }
}

/// A task set stored with a run (its plan's `schedulability`), so that the
/// run stays self-contained: where it was read from, its tasks (most urgent
/// first, times in ns) and the permissible error rate per wake-up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskSet {
    pub source: String,
    pub error_rate: f64,
    pub tasks: Vec<Task>,
}

/// The measured wake-up latency at the error rate: the pseudo worst case,
/// and how far it rests on the data.
#[derive(Clone, Debug, PartialEq)]
pub struct PseudoLatency {
    pub latency_ns: u64,
    /// The series that decided (the worst), for people: "wakeup.latency CPU 1 [cpu]".
    pub series: String,
    /// Read from the data (at least 10 samples above it), or from the fitted tail.
    pub observed: bool,
    /// "observed", or the tail fit's confidence (high / medium / low).
    pub confidence: String,
    /// What limits that confidence.
    pub reasons: Vec<String>,
    /// Samples of the shortest series (each CPU and load is a series) and its
    /// rate (Hz): the pseudo worst case lies 1 / (eps n) times beyond it.
    pub samples: u64,
    pub rate_hz: f64,
}

impl PseudoLatency {
    /// How many times beyond the samples the level at `eps` lies (once in
    /// 1 / eps wake-ups, against the shortest series' samples).
    pub fn beyond(&self, eps: f64) -> f64 {
        1.0 / (eps * self.samples.max(1) as f64)
    }

    /// Why the level at `eps` is refused: like the return levels, a fitted
    /// tail is not extrapolated beyond 100x the samples measured. Says how
    /// long to measure, or which error rate the data can answer.
    pub fn refused(&self, eps: f64) -> Option<String> {
        let beyond = self.beyond(eps);
        if self.observed || beyond <= REFUSED {
            return None;
        }
        let need_s = 1.0 / (eps * REFUSED * self.rate_hz.max(1e-9));
        Some(format!(
            "the wake-up latency at {eps:e} lies {beyond:.0}x beyond the {} samples of {} (more than \
             {REFUSED:.0}x: too far to extrapolate); measure at least {} per CPU and load, or give an error \
             rate of at least {:.1e}",
            self.samples,
            self.series,
            dur_s(need_s),
            1.0 / (REFUSED * self.samples.max(1) as f64)
        ))
    }

    /// How long to measure for the level at `eps` to be answered.
    pub fn measure_for(&self, eps: f64) -> String {
        dur_s(1.0 / (eps * REFUSED * self.rate_hz.max(1e-9)))
    }

    /// "wakeup.latency CPU 1 (fitted tail, 3000 samples)", as `analyze rta` prints it.
    pub fn source(&self) -> String {
        format!(
            "{} ({}, {} samples)",
            self.series,
            if self.observed { "observed" } else { "fitted tail" },
            self.samples
        )
    }
}

/// The RTA of a set with the pseudo worst case as its release jitter.
#[derive(Clone, Debug, Serialize)]
pub struct Jittered {
    #[serde(flatten)]
    pub report: RtaReport,
    pub pseudo_worst_case: PseudoWorstCase,
}

/// A task set judged against a run: the RTA of the set as written, the
/// RTA with the run's wake-up latency at the error rate as every task's
/// release jitter (the pseudo worst case), and the verdict.
#[derive(Clone, Debug, Serialize)]
pub struct Schedulability {
    pub source: String,
    pub error_rate: f64,
    /// The set as written (its own release jitter).
    pub given: RtaReport,
    /// With the measured release jitter; None when the run cannot give it.
    pub measured: Option<Jittered>,
    /// Why there is no measured release jitter.
    pub measured_error: Option<String>,
    /// Pass: every deadline met with the measured jitter; fail: a deadline
    /// missed as written or with it; not enough data: the run cannot give
    /// the jitter (no wake-up latency, no tail fit, or a pseudo worst case
    /// more than 100x beyond the samples measured: refused).
    pub verdict: Verdict,
}

/// The most critical task of a report: the first to miss its deadline,
/// else the one with the least slack (D - R).
fn critical(r: &RtaReport) -> Option<&TaskResult> {
    r.tasks
        .iter()
        .find(|t| !t.schedulable)
        .or_else(|| r.tasks.iter().min_by_key(|t| t.deadline_ns as i128 - t.response_time_ns as i128))
}

/// A probability for people: 1.620e-3; 1 where the union bound caps it.
pub fn probability(p: f64) -> String {
    if p >= 1.0 { "1".into() } else { format!("{p:.3e}") }
}

/// Judges `set` with the measured `latency` at its error rate (or why the
/// run cannot give it).
pub fn schedulability(set: &TaskSet, latency: Result<PseudoLatency, String>) -> Schedulability {
    let eps = set.error_rate;
    let given = analyze(&set.tasks);
    let mut v = Verdict {
        requirement: format!(
            "task set {}: every deadline met with the wake-up latency at {eps:e} as release jitter",
            set.source
        ),
        status: Status::NotEnoughData,
        series: None,
        evidence: String::new(),
        confidence: "observed".into(),
        reasons: vec![],
        measure_for: None,
    };
    let miss = |r: &RtaReport, with: &str| {
        let t = critical(r).expect("a task set has a task");
        format!("{}: {} {with}", t.name, describe(t))
    };
    let (measured, measured_error) = match latency {
        Err(e) => {
            if given.schedulable {
                v.evidence = format!("schedulable as written, but no measured release jitter: {e}");
                v.measure_for = Some("a run with the wakeup probe".into());
            }
            (None, Some(e))
        }
        Ok(l) => {
            // The pseudo worst case is a return level: once in 1 / eps
            // wake-ups. Like the return levels, it is refused beyond 100x
            // the samples measured, labelled extrapolated beyond 10x.
            let beyond = l.beyond(eps);
            if let Some(e) = l.refused(eps) {
                if given.schedulable {
                    v.evidence = format!("schedulable as written; {e}");
                    v.measure_for =
                        Some(format!("at least {} per CPU and load, or a larger error rate", l.measure_for(eps)));
                }
                (None, Some(e))
            } else {
                let tasks = with_jitter(&set.tasks, l.latency_ns);
                let report = analyze(&tasks);
                let pwc = pseudo_worst_case(&tasks, &report, eps, l.latency_ns, l.source());
                v.series = Some(l.series.clone());
                v.confidence = l.confidence.clone();
                v.reasons = l.reasons.clone();
                let jitter = format!(
                    "release jitter of {} us ({}, the wake-up latency at {eps:e}{})",
                    us_i(l.latency_ns as i64),
                    if l.observed { "observed" } else { "fitted tail" },
                    if !l.observed && beyond > EXTRAPOLATED {
                        format!(", extrapolated {beyond:.0}x beyond the samples")
                    } else {
                        String::new()
                    }
                );
                if report.schedulable {
                    v.status = Status::Pass;
                    v.evidence = format!(
                        "{}; deadline-miss probability per hour <= {} (at most {:.3e} misses per hour expected)",
                        miss(&report, &format!("with a {jitter}")),
                        probability(pwc.miss_probability_per_hour.unwrap_or(1.0)),
                        pwc.expected_misses_per_hour_at_most.unwrap_or(f64::INFINITY)
                    );
                    if !l.observed {
                        super::verdict::withhold_low_confidence(&mut v, l.samples as f64 / l.rate_hz.max(1e-9));
                    }
                } else {
                    v.status = Status::Fail;
                    v.evidence = miss(&report, &format!("with a {jitter}"));
                }
                (Some(Jittered { report, pseudo_worst_case: pwc }), None)
            }
        }
    };
    if !given.schedulable {
        // Decided without the run: no confidence to qualify, nothing to measure.
        v.status = Status::Fail;
        v.evidence = miss(&given, "as written, before any measured jitter");
        v.series = None;
        v.confidence = "observed".into();
        v.reasons.clear();
        v.measure_for = None;
    }
    Schedulability { source: set.source.clone(), error_rate: eps, given, measured, measured_error, verdict: v }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ct: &[(u64, u64)]) -> Vec<Task> {
        let n = ct.len() as i64;
        ct.iter()
            .enumerate()
            .map(|(i, &(c, t))| Task {
                name: format!("t{}", i + 1),
                wcet_ns: c,
                period_ns: t,
                deadline_ns: t,
                blocking_ns: 0,
                jitter_ns: 0,
                priority: n - i as i64,
            })
            .collect()
    }

    /// Source: SchedCAT (github.com/brandenburg/schedcat, tests/fp.py,
    /// UniprocessorRTA): (C, T) = (1, 4), (1, 5), (3, 9), (3, 18) in priority
    /// order: response times 1, 2, 7, 18.
    #[test]
    fn schedcat_example() {
        let r = analyze(&set(&[(1, 4), (1, 5), (3, 9), (3, 18)]));
        let rt: Vec<u64> = r.tasks.iter().map(|t| t.response_time_ns).collect();
        assert_eq!(rt, vec![1, 2, 7, 18]);
        assert!(r.schedulable);
    }

    /// Source: the textbook example (Burns and Wellings, "Real-Time Systems
    /// and Programming Languages", task set C of the response-time chapter:
    /// (C, T) = (3, 7), (3, 12), (5, 20)): R = 3, 6, 20, schedulable,
    /// although U = 0.929 fails the Liu-Layland bound 0.780.
    #[test]
    fn textbook_example_fails_liu_layland_but_is_schedulable() {
        let r = analyze(&set(&[(3, 7), (3, 12), (5, 20)]));
        let rt: Vec<u64> = r.tasks.iter().map(|t| t.response_time_ns).collect();
        assert_eq!(rt, vec![3, 6, 20]);
        assert!(r.schedulable);
        assert!(!r.liu_layland.passed);
        assert!((r.liu_layland.limit - 0.7798).abs() < 1e-4);
        assert!((r.utilization - 0.92857).abs() < 1e-4);
        assert!(!r.hyperbolic.passed);
    }

    /// Source: the example of Audsley, Burns, Richardson, Tindell and
    /// Wellings (1993) as SchedCAT checks it (tests/fp.py, AudsleyExample):
    /// (C, T, D, blocking, jitter, expected R - J) in priority order; the
    /// response time includes the jitter.
    #[test]
    fn audsley_1993_example_with_blocking_and_jitter() {
        let rows: [(u64, u64, u64, u64, u64, u64); 18] = [
            (51, 1000, 1000, 0, 0, 51),
            (3000, 2000000, 5000, 300, 0, 3504),
            (2000, 25000, 25000, 600, 0, 5906),
            (5000, 25000, 25000, 900, 0, 11512),
            (1000, 40000, 40000, 1350, 0, 13064),
            (3000, 50000, 50000, 1350, 0, 16217),
            (5000, 50000, 50000, 750, 0, 20821),
            (8000, 59000, 59000, 750, 0, 36637),
            (9000, 80000, 80000, 1350, 0, 47798),
            (2000, 80000, 80000, 450, 0, 48949),
            (5000, 100000, 100000, 1050, 0, 99150),
            (1000, 200000, 200000, 450, 1000, 99550),
            (3000, 200000, 200000, 450, 0, 140641),
            (1000, 200000, 200000, 450, 0, 141692),
            (1000, 200000, 200000, 1350, 0, 143694),
            (3000, 1000000, 1000000, 0, 0, 145446),
            (1000, 1000000, 1000000, 0, 0, 146497),
            (1000, 1000000, 1000000, 0, 0, 147548),
        ];
        let tasks: Vec<Task> = rows
            .iter()
            .enumerate()
            .map(|(i, &(c, t, d, b, j, _))| Task {
                name: format!("t{i}"),
                wcet_ns: c,
                period_ns: t,
                deadline_ns: d,
                blocking_ns: b,
                jitter_ns: j,
                priority: 100 - i as i64,
            })
            .collect();
        let r = analyze(&tasks);
        assert!(r.schedulable);
        for (res, row) in r.tasks.iter().zip(&rows) {
            assert_eq!(res.response_time_ns, row.5 + row.4, "{}", res.name);
        }
    }

    #[test]
    fn jitter_and_blocking_and_misses() {
        // Jitter of the urgent task adds interference; blocking adds directly.
        let mut s = set(&[(1, 4), (1, 5), (3, 9), (3, 18)]);
        s[0].jitter_ns = 2;
        let r = analyze(&s);
        // t1: R = 1 + J = 3. t2: w = 1 + ceil((w+2)/4) -> w = 2, R = 2.
        assert_eq!(r.tasks[0].response_time_ns, 3);
        assert_eq!(r.tasks[1].response_time_ns, 2);
        let mut s = set(&[(1, 4), (1, 5)]);
        s[1].blocking_ns = 3;
        let r = analyze(&s);
        // w = 3 + 1 + ceil(w/4) -> 5 -> 3 + 1 + 2 = 6 > 5: miss.
        assert!(!r.tasks[1].schedulable && !r.schedulable);
        assert!(r.tasks[1].response_time_ns > 5);
        // Deadline beyond the period: the busy period holds several jobs.
        let mut s = set(&[(2, 4), (3, 6)]);
        s[1].deadline_ns = 12;
        let r = analyze(&s);
        // U = 1: the busy period holds two jobs of t2: the first ends at
        // w(0) = 7 (R = 7, past its period 6), the second at w(1) = 12 (R = 6).
        assert_eq!(r.tasks[1].response_time_ns, 7);
        assert!(r.schedulable);
    }

    #[test]
    fn parses_files_and_names_errors() {
        let text = r#"
            [[task]]
            name = "io"
            wcet = "200us"
            period = "1ms"
            [[task]]
            name = "ctl"
            wcet = "1ms"
            period = "5ms"
            deadline = "4ms"
            jitter = "50us"
            blocking = "20us"
        "#;
        let t = parse_tasks(text, "set.toml").unwrap();
        assert_eq!(t[0].name, "io");
        assert_eq!(t[1].deadline_ns, 4_000_000);
        assert_eq!(t[1].blocking_ns, 20_000);
        assert!(t[0].priority > t[1].priority);
        let with_prio = "[[task]]\nname='a'\nwcet='1ms'\nperiod='10ms'\npriority=10\n[[task]]\nname='b'\nwcet='1ms'\nperiod='2ms'\npriority=50\n";
        assert_eq!(parse_tasks(with_prio, "f").unwrap()[0].name, "b");
        let e = parse_tasks("[[task]]\nname='a'\nwcet='1'\nperiod='10ms'\n", "f.toml").unwrap_err();
        assert!(e.contains("f.toml") && e.contains("wcet") && e.contains("unit"), "{e}");
        assert!(parse_tasks("[[task]]\nname='a'\nwcet='1ms'\n", "f").unwrap_err().contains("period"));
        assert!(parse_tasks("x = 1", "f").is_err());
        let mixed =
            "[[task]]\nname='a'\nwcet='1ms'\nperiod='10ms'\npriority=1\n[[task]]\nname='b'\nwcet='1ms'\nperiod='2ms'\n";
        assert!(parse_tasks(mixed, "f").unwrap_err().contains("every task a priority"));
        let twice = "[[task]]\nname='a'\nwcet='1ms'\nperiod='10ms'\n[[task]]\nname='a'\nwcet='1ms'\nperiod='2ms'\n";
        assert!(parse_tasks(twice, "f").unwrap_err().contains("two tasks are named 'a'"));
    }

    fn latency(ns: u64, observed: bool, samples: u64) -> PseudoLatency {
        PseudoLatency {
            latency_ns: ns,
            series: "wakeup.latency CPU 1".into(),
            observed,
            confidence: if observed { "observed".into() } else { "medium".into() },
            reasons: vec![],
            samples,
            rate_hz: 1000.0,
        }
    }

    #[test]
    fn a_task_set_is_judged_with_the_measured_jitter() {
        // 1 ms of 4 ms and 1 ms of 5 ms: schedulable with up to 2 ms of
        // jitter on the first (t2: R = J + w, w = 1 + ceil((w + J1) / 4)).
        let ts = TaskSet {
            source: "set.toml".into(),
            error_rate: 1e-3,
            tasks: set(&[(1_000_000, 4_000_000), (1_000_000, 5_000_000)]),
        };
        let s = schedulability(&ts, Ok(latency(100_000, true, 100_000)));
        assert!(s.given.schedulable);
        let m = s.measured.as_ref().unwrap();
        assert_eq!(m.report.tasks[0].response_time_ns, 1_100_000);
        assert_eq!(m.report.tasks[0].jitter_ns, 100_000);
        assert_eq!(s.verdict.status, Status::Pass);
        // The union bound: 1e-3 x 450 releases/s x 3600 s, capped at 1.
        assert_eq!(m.pseudo_worst_case.miss_probability_per_hour, Some(1.0));
        // Both have 2.9 ms of slack: the more urgent is named.
        assert!(
            s.verdict.evidence.starts_with("t1: R = 1.1ms <= D = 4ms with a release jitter of 100.000 us"),
            "{:?}",
            s.verdict
        );
        assert!(s.verdict.evidence.contains("per hour <= 1 (at most 1.620e3 misses"), "{:?}", s.verdict);
        // A jitter that makes t2 miss: fail, naming the task.
        let s = schedulability(&ts, Ok(latency(3_500_000, true, 100_000)));
        assert_eq!(s.verdict.status, Status::Fail);
        assert!(
            s.verdict.evidence.starts_with("t1: R = 4.5ms > D = 4ms with a release jitter of 3500.000 us"),
            "{:?}",
            s.verdict
        );
        // No measured jitter: not enough data, the reason kept.
        let s = schedulability(&ts, Err("the run has no wakeup.latency".into()));
        assert_eq!(s.verdict.status, Status::NotEnoughData);
        assert!(s.measured.is_none() && s.measured_error.as_deref() == Some("the run has no wakeup.latency"));
        // A tail extrapolated 1000x beyond the data: refused, with how long
        // to measure (1e6 wake-ups / 100 at 1 kHz: 10 s) or the error rate
        // the data can give (1e-5).
        let far = TaskSet { error_rate: 1e-6, ..ts.clone() };
        let s = schedulability(&far, Ok(latency(100_000_000, false, 1000)));
        assert_eq!(s.verdict.status, Status::NotEnoughData, "{:?}", s.verdict);
        assert!(s.measured.is_none());
        let e = s.measured_error.as_deref().unwrap();
        assert!(
            e.contains("1000x beyond the 1000 samples") && e.contains("at least 10s") && e.contains("1.0e-5"),
            "{e}"
        );
        assert!(s.verdict.measure_for.as_deref().unwrap().starts_with("at least 10s"), "{:?}", s.verdict);
        // 50x beyond: kept, labelled extrapolated, with the fit's confidence.
        let s = schedulability(&far, Ok(latency(100_000, false, 20_000)));
        assert_eq!((s.verdict.status, s.verdict.confidence.as_str()), (Status::Pass, "medium"), "{:?}", s.verdict);
        assert!(
            s.verdict.evidence.contains("fitted tail, the wake-up latency at 1e-6, extrapolated 50x"),
            "{:?}",
            s.verdict
        );
        // The same from a fit of low confidence: not claimed as a pass.
        let low = PseudoLatency {
            confidence: "low".into(),
            reasons: vec!["KPSS: rejected at 5 %".into()],
            ..latency(100_000, false, 20_000)
        };
        let s = schedulability(&far, Ok(low.clone()));
        assert_eq!(s.verdict.status, Status::NotEnoughData, "{:?}", s.verdict);
        assert!(s.verdict.evidence.contains("confidence is low") && s.verdict.reasons[0].contains("KPSS"));
        assert!(s.verdict.measure_for.as_deref().unwrap().contains("1m20s"), "4x the 20 s measured: {:?}", s.verdict);
        // ... but a miss stays a fail.
        let s = schedulability(&far, Ok(PseudoLatency { latency_ns: 3_500_000, ..low }));
        assert_eq!(s.verdict.status, Status::Fail, "{:?}", s.verdict);
        // Unschedulable as written: fail whatever the run says.
        let over = TaskSet { tasks: set(&[(3, 4), (2, 5)]), ..ts.clone() };
        for l in [Ok(latency(1, true, 10)), Err("none".to_string())] {
            let s = schedulability(&over, l);
            assert_eq!(s.verdict.status, Status::Fail);
            assert!(s.verdict.evidence.contains("as written"), "{:?}", s.verdict);
            assert_eq!(s.verdict.confidence, "observed");
        }
        assert!(check_error_rate(1e-6).is_ok());
        for bad in [0.0, 1.0, -1e-3, f64::NAN] {
            assert!(check_error_rate(bad).unwrap_err().contains("between 0 and 1"));
        }
        // Stored and read back unchanged.
        let json = serde_json::to_value(&ts).unwrap();
        assert_eq!(serde_json::from_value::<TaskSet>(json).unwrap(), ts);
    }

    #[test]
    fn pseudo_worst_case_union_bound() {
        let tasks = set(&[(1_000_000, 4_000_000), (1_000_000, 5_000_000)]);
        let j = with_jitter(&tasks, 100_000);
        let r = analyze(&j);
        assert!(r.schedulable);
        assert_eq!(r.tasks[0].response_time_ns, 1_100_000);
        let p = pseudo_worst_case(&j, &r, 1e-9, 100_000, "observed".into());
        // 250 + 200 releases per second: 1.62e6 per hour.
        assert!((p.releases_per_hour - 1.62e6).abs() < 1e-3);
        assert!((p.miss_probability_per_hour.unwrap() - 1.62e-3).abs() < 1e-12);
    }
}
