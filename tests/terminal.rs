//! The answer at both ends of the terminal's output, in 100 columns: the
//! last screen of `rtscope run`.

mod common;
use common::*;

/// Every line of `out` within 100 columns.
fn within_100(what: &str, out: &str) {
    for l in out.lines() {
        assert!(l.chars().count() <= 100, "{what}: a line of {} columns: {l}", l.chars().count());
    }
}

/// The last `n` lines of `out`, as `tail -n` shows them.
fn tail(out: &str, n: usize) -> String {
    let lines: Vec<&str> = out.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `rtscope run` ends on its answer: after the details and the verdicts,
/// the next steps, the machine, the worst load, the probe x load table and
/// the verdict last, so that `tail -25` shows the verdict and the table.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn run_ends_on_its_answer_within_100_columns() {
    let fx = Fixture::root();
    let mut args: Vec<&str> = "run --quick --duration 1s --probes wakeup,noise --loads idle,cpu".split(' ').collect();
    args.extend(["--db", &fx.db]);
    let o = rtscope(&args);
    assert_eq!(o.status.code(), Some(0), "the yardstick never changes the exit code: {}", text(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    within_100("run", &out);
    let (details, answer) = out.split_once("\n-- answer ").expect("the answer after the details");
    assert!(details.contains("verdicts · ") && details.contains("stored in"), "{details}");
    assert!(!details.contains("probe: worst/p99.9 us"), "the table once, at the end: {details}");
    let last = tail(&out, 25);
    assert!(last.contains("probe: worst/p99.9 us") && last.contains("wakeup latency "), "{last}");
    assert!(last.contains("verdict     FAIL against") || last.contains("verdict     PASS against"), "{last}");
    assert!(answer.contains("next        1. ") && answer.contains("worst load  "), "{answer}");
}
