//! Fixed-priority response-time analysis with release jitter and blocking
//! (Audsley, Burns, Richardson, Tindell and Wellings 1993, "Applying new
//! scheduling theory to static priority pre-emptive scheduling"), in the
//! busy-window form of Tindell, Burns and Wellings (1994) so that a
//! deadline beyond the period is handled too; the Liu-Layland (1973) and
//! hyperbolic (Bini, Buttazzo and Buttazzo 2003) utilisation bounds.

use crate::units::{human, parse_duration};
use serde::{Deserialize, Serialize};

/// One task, all times in ns; higher `priority` = more urgent.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
    task: Vec<Spec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
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
    if file.task.is_empty() {
        return Err(format!("{origin}: no [[task]] in it"));
    }
    let with = file.task.iter().filter(|t| t.priority.is_some()).count();
    if with != 0 && with != file.task.len() {
        return Err(format!(
            "{origin}: give every task a priority or none (then file order is priority order, highest first)"
        ));
    }
    let count = file.task.len() as i64;
    let mut tasks = Vec::new();
    for (i, s) in file.task.into_iter().enumerate() {
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

/// The reference's "pseudo worst case" (002, section 5.2): the measured
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
