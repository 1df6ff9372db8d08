//! The terminal's text of a fixed run (tests/data/report-run.json):
//! `analyze`'s answer first, `show`'s machine rows as the report has them,
//! and the progress lines `analyze` and `report` draw on a terminal.

mod common;
use common::reports::*;
use common::*;
use std::process::Command;

/// `analyze` prints the answer first, as `run` and the report do: the
/// verdict against the named yardstick (exit code 0), the machine, the
/// worst case and p99.9 with the sample count, what to do next; then the
/// details. `--profile none` turns the yardstick off; colour only on a
/// terminal; the JSON gains the summary's block.
#[test]
fn analyze_prints_the_answer_first_and_profile_none_turns_the_yardstick_off() {
    let (_dir, db) = imported();
    let out = report(&["analyze", "1", "--db", &db]);
    let (answer, details) = out.split_once("-- details ").expect("the details after the answer");
    assert!(answer.contains("verdict     FAIL against the profile omac (OMAC, the Open Modular"), "{answer}");
    assert!(answer.contains("            a yardstick: never the exit code;"), "{answer}");
    assert!(answer.contains("machine     PREEMPT_DYNAMIC · isolation none · kvm guest"), "{answer}");
    assert!(answer.contains("wakeup latency") && answer.contains("831.6/342.5* n=6.0k"), "{answer}");
    assert!(answer.contains("next        1. measure longer: at least 36s per cell"), "{answer}");
    assert!(answer.lines().all(|l| l.chars().count() <= 100), "{answer}");
    assert!(!out.contains('\x1b'), "no colour on a pipe");
    assert!(details.contains("expected worst case") && details.contains("verdicts · "), "{details}");
    let none = report(&["analyze", "1", "--db", &db, "--profile", "none"]);
    assert!(none.contains("verdict     none: nothing judged") && !none.contains("verdicts · "), "{none}");
    let v: serde_json::Value = serde_json::from_str(&report(&["analyze", "1", "--db", &db, "--json"])).unwrap();
    assert_eq!(v["summary"]["verdict"]["against"], "the profile omac");
    assert_eq!(v["summary"]["rows"][0]["cells"][0]["samples"], 6000);
    assert!(v["series"].is_array() && v["verdicts"].is_array(), "the analysis' keys are kept");
    // On a terminal (script(1) gives it one) the verdict is in colour,
    // unless NO_COLOR says otherwise.
    let tty = |no_colour: bool| {
        let mut c = Command::new("script");
        c.args(["-qec", &format!("{} analyze 1 --db {db}", env!("CARGO_BIN_EXE_rtscope")), "/dev/null"]);
        if no_colour {
            c.env("NO_COLOR", "1");
        }
        let o = c.output().expect("script(1), util-linux");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(tty(false).contains("\x1b[1;31mFAIL\x1b[0m"), "a terminal gets the verdict in red");
    assert!(!tty(true).contains("\x1b[1;31m"), "NO_COLOR turns it off");
}

/// `show` prints the machine as the report's "Machine and setup" table has
/// it, row for row, in one unit (MiB), after the answer and before the
/// figures.
#[test]
fn show_prints_the_machine_rows_of_the_report() {
    let (_dir, db) = imported();
    let md = report(&["report", "1", "--format", "md", "-o", "-", "--db", &db]);
    let rows: Vec<Vec<String>> =
        md_table_after(&md, "### Machine and setup").into_iter().filter(|r| !r[0].is_empty()).collect();
    assert_eq!(rows.len(), 21, "{rows:?}");
    let shown = report(&["show", "1", "--db", &db]);
    // A row wrapped at 100 columns goes on under its value, indented.
    let lines: Vec<&str> = shown.lines().collect();
    let row_of = |i: usize| {
        let more = lines[i + 1..].iter().take_while(|l| l.starts_with("                  ")).map(|l| l.trim());
        std::iter::once(lines[i]).chain(more).collect::<Vec<_>>().join(" ")
    };
    for r in &rows {
        let (k, v) = (&r[0], &r[1]);
        assert!(
            (0..lines.len()).any(|i| row_of(i).strip_prefix(k.as_str()).is_some_and(|rest| rest.trim_start() == v)),
            "{k}: {v} missing:\n{shown}"
        );
    }
    assert!(shown.contains("\nstarted ") && shown.contains("peak RSS 42 MiB") && !shown.contains(" MB"), "{shown}");
    let answer = shown.find("verdict     ").expect("the answer");
    let figures = shown.find("\nwakeup latency (us)").expect("the figures");
    assert!(answer < shown.find("memory").unwrap() && shown.find("memory").unwrap() < figures, "{shown}");
}

/// On a terminal, `analyze` and `report` say what they are doing while
/// they read and analyse a run (a big one takes a while), and clear that
/// line before their output; on a pipe they print nothing of it.
#[test]
fn analyze_and_report_show_their_progress_on_a_terminal() {
    let (dir, db) = imported();
    let script = std::process::Command::new("sh").args(["-c", "command -v script"]).output().unwrap();
    if !has("script (util-linux), for a pseudo-terminal", script.status.success()) {
        return;
    }
    let html = dir.join("r.html");
    let html = html.to_str().unwrap();
    for (cmd, stages) in [
        (
            format!("{BIN} analyze 1 --db {db}"),
            &["rtscope analyze: reading run 1", "rtscope analyze: analysing run 1: "][..],
        ),
        (
            format!("{BIN} report 1 --db {db} -o {html}"),
            &["rtscope report: reading run 1", "rtscope report: analysing 18 series, drawing the plots and writing "][..],
        ),
    ] {
        let o = std::process::Command::new("script").args(["-qec", &cmd, "/dev/null"]).output().unwrap();
        assert!(o.status.success(), "{cmd}: {}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        for stage in stages {
            assert!(out.contains(&format!("\r\x1b[K{stage}")), "{cmd}: no {stage:?} in {out:?}");
        }
    }
    let o = rtscope(&["analyze", "1", "--db", &db]);
    assert!(o.status.success() && !String::from_utf8_lossy(&o.stderr).contains("reading run"), "{}", text(&o));
}
