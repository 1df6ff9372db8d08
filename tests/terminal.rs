//! The answer at both ends of the terminal's output, in 100 columns: the
//! last screen of `rtscope run`, the first screens of `analyze`,
//! `compare` and `show`; `runs`' line per run.

mod common;
use common::reports::*;
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

/// `analyze` opens with its answer: `head -30` names the verdict and the
/// worst case of the series the verdict is about; the details under it are
/// wrapped to 100 columns and begin with that series, not alphabetically.
#[test]
fn analyze_opens_with_its_answer_and_the_judged_series_first() {
    let (_dir, db) = imported();
    let out = report(&["analyze", "1", "--db", &db]);
    within_100("analyze", &out);
    let head = out.lines().take(30).collect::<Vec<_>>().join("\n");
    assert!(head.contains("verdict     FAIL against the profile omac"), "{head}");
    assert!(head.contains("decided by wakeup.latency.max <= 100us: wakeup.latency CPU "), "{head}");
    let series = head.split("decided by wakeup.latency.max <= 100us: ").nth(1).unwrap().split(':').next().unwrap();
    let worst = format!("{series}: worst case ");
    assert!(head.contains(&worst), "{worst} missing:\n{head}");
    let details = out.split_once("-- details ").unwrap().1;
    let first = details.lines().find(|l| l.contains(" samples over ")).unwrap();
    let cpu = series.split(' ').nth(2).unwrap();
    assert!(first.starts_with(&format!("wakeup latency CPU {cpu} ")), "the verdict's series first: {first}");
}

/// The fixed run imported twice (the second under another uuid): runs 1
/// and 2 of a fresh store.
fn imported_twice() -> (TempDir, String) {
    let (dir, db) = imported();
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("report-run.json")).unwrap()).unwrap();
    doc["run"]["uuid"] = "the-second".into();
    let copy = dir.join("second.json");
    std::fs::write(&copy, doc.to_string()).unwrap();
    report(&["import", copy.to_str().unwrap(), "--db", &db]);
    (dir, db)
}

/// `compare` opens with the platform table, tests down and runs across
/// (min, avg, max, jitter, p99.9 and the ratio), the CPU scores, the
/// verdicts and the gate's result; the per-series detail follows, its key
/// wrapped, every line within 100 columns.
#[test]
fn compare_opens_with_a_tests_by_runs_table() {
    let (_dir, db) = imported_twice();
    let out = report(&["compare", "1", "2", "--db", &db]);
    within_100("compare", &out);
    let head = out.lines().take(40).collect::<Vec<_>>().join("\n");
    let columns = head.lines().find(|l| l.starts_with("test ")).unwrap_or_else(|| panic!("no table head:\n{head}"));
    // Named as the references name them, each apart from the next.
    let words: Vec<&str> = columns.split_whitespace().collect();
    let run = ["min", "avg", "max", "jitter", "p99.9"];
    assert_eq!(words, [&["test"][..], &run, &run, &["max", "x"]].concat(), "{columns}");
    assert!(head.contains("run 1") && head.contains("run 2"), "{head}");
    // The verdict's series is the first row.
    let first = head.lines().skip_while(|l| !l.starts_with("test ")).nth(1).unwrap_or_default();
    assert!(first.starts_with("wakeup latency"), "the verdict's series first:\n{head}");
    let row = head.lines().find(|l| l.starts_with("wakeup latency")).unwrap_or_else(|| panic!("no row:\n{head}"));
    assert!(row.contains("x1.00"), "the same run twice: {row}");
    assert!(head.lines().any(|l| l.starts_with("verdict ") && l.contains("FAIL*")), "{head}");
    assert!(head.lines().any(|l| l.starts_with("gate  ")), "{head}");
    let (_, details) = out.split_once("-- details ").expect("the detail under the table");
    assert!(details.contains("key: ratio = the run's figure / run 1's"), "{details}");
    let gated = report(&["compare", "1", "2", "--db", &db, "--max-regression", "10"]);
    let head = gated.lines().take(40).collect::<Vec<_>>().join("\n");
    assert!(head.contains("gate  PASS: "), "{head}");
}

/// `runs`: per run its command, how long, its samples (a traced run's
/// measured samples, as `show` counts them, not its trace's events), the
/// worst case of its main series and its verdict, within 100 columns.
#[test]
fn runs_shows_the_command_the_worst_case_and_the_verdict() {
    let (_dir, db) = imported();
    let out = report(&["runs", "--db", &db]);
    within_100("runs", &out);
    let mut lines = out.lines();
    let head = lines.next().unwrap();
    for col in ["run", "duration", "samples", "worst case", "verdict", "command"] {
        assert!(head.contains(col), "{col} missing: {head}");
    }
    let row = lines.next().unwrap();
    assert!(row.contains(" 6.0k ") && row.contains("wakeup 831.6 us") && row.contains("FAIL*"), "{row}");
    assert!(row.contains("wakeup "), "the command: {row}");
    let shown = report(&["show", "1", "--db", &db]);
    assert!(shown.contains("n=6.0k"), "show counts the same samples: {shown}");
}

/// `show` opens with the run's answer, then its machine record wrapped to
/// 100 columns, then the figures (the trace's lines and the episodes
/// wrapped too).
#[test]
fn show_opens_with_the_answer_and_wraps_the_machine_record() {
    let (_dir, db) = imported();
    let out = report(&["show", "1", "--db", &db]);
    let head = out.lines().take(12).collect::<Vec<_>>().join("\n");
    assert!(head.starts_with("rtscope wakeup · run 1") && head.contains("verdict     FAIL against"), "{head}");
    let (answer, details) = out.split_once("-- details ").expect("the details under the answer");
    assert!(answer.contains("probe: worst/p99.9 us") && !answer.contains("\nstarted "), "{answer}");
    assert!(details.contains("\nstarted ") && details.contains("peak RSS"), "{details}");
    within_100("show's answer", answer);
    // The machine record (to its blank line), the trace's lines and the
    // episodes; the probe's own table too (its columns as wide as their
    // figures).
    let head = |l: &&str| l.trim_start().starts_with("CPU ") && l.contains("samples");
    let table = details.lines().skip_while(|l| !head(l)).take_while(|l| !l.is_empty());
    let table: Vec<&str> = table.collect();
    assert!(table.len() > 1 && table[0].contains("overruns"), "{details}");
    within_100("show's table", &table.join("\n"));
    let machine: Vec<&str> = details.lines().skip(1).take_while(|l| !l.is_empty()).collect();
    assert!(machine.len() > 15 && machine[0].starts_with("started "), "{machine:?}");
    within_100("show's machine record", &machine.join("\n"));
    let trace = &details[details.find("\ntrace: ").expect("the trace's lines")..];
    within_100("show's trace, episodes, warnings and notes", trace);
}

/// A probe run alone ends within 100 columns too, its notes (the
/// hypervisor's, a kernel tracer's refusal) and warnings wrapped; `-q`
/// prints its line per CPU and nothing wider.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_probe_run_alone_keeps_to_100_columns() {
    let fx = Fixture::root();
    for quiet in [false, true] {
        let mut args = vec!["wakeup", "-D", "1s", "--cpus", "0", "--db", &fx.db];
        if quiet {
            args.push("-q");
        }
        let o = rtscope(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        within_100(&args.join(" "), &format!("{out}{err}"));
        assert!(out.contains("CPU") && out.contains(" max "), "the figures: {out}");
        if !quiet {
            assert!(out.starts_with("rtscope wakeup · run "), "{out}");
        }
    }
}

/// The words: the verdict defines OMAC where it names it and says in one
/// short line that a yardstick never changes the exit code; the report
/// shows what it quotes as code, not literal backticks, no "(?)" in its
/// captions, and the verdict's text beside its badge.
#[test]
fn the_verdict_says_its_yardstick_in_one_line_and_the_report_has_no_raw_marks() {
    let (dir, db) = imported();
    let out = report(&["analyze", "1", "--db", &db]);
    let verdict: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("verdict ")).take(4).collect();
    let text = verdict.join("\n");
    assert!(text.contains("against the profile omac (OMAC, the Open Modular Architecture Controls"), "{text}");
    assert!(
        verdict.iter().any(
            |l| l.trim() == "a yardstick: never the exit code; --profile / --require gate, --profile none hides it"
        ),
        "{text}"
    );
    let html = dir.join("r.html");
    report(&["report", "1", "--db", &db, "-o", html.to_str().unwrap()]);
    let html = std::fs::read_to_string(&html).unwrap();
    let prose: String = html.split("<script").next().unwrap().to_string();
    assert!(
        !prose.contains('`'),
        "a literal backtick: {}",
        &prose[prose.find('`').unwrap().saturating_sub(80)..][..160]
    );
    assert!(prose.contains("<code>--profile NAME</code>"), "the verdicts quote a flag as code");
    assert!(!prose.contains("(?)"), "a caption with (?)");
    assert!(prose.contains("<span class=\"badge\">FAIL</span><span class=\"text\">"), "the verdict's text beside FAIL");
}
