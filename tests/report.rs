//! `rtscope report`: the Markdown snapshot of a fixed run
//! (tests/data/report-run.json), the verdicts and the task set it is
//! judged against, the bad input it refuses, and the reports of a real
//! assessment and of osbench. The HTML's structure and its rendering in a
//! browser are in report_html.rs, the terminal's answers in report_text.rs,
//! `compare` in compare.rs, their helpers in common/reports.rs.
//! `UPDATE_SNAPSHOTS=1 cargo test --test report --test report_html`
//! rewrites the snapshots after an intended change.

mod common;
use common::reports::*;
use common::*;
use std::path::Path;

#[test]
fn markdown_report_of_the_fixed_run_matches_its_snapshot() {
    let (dir, db) = imported();
    let md = report(&["report", "1", "--format", "md", "-o", "-", "--db", &db]);
    snapshot("report-run.md", &md);
    for part in [
        "### Verdicts",
        "judged against the default yardstick, the profile omac",
        "**FAIL**: wakeup.latency.max <= 100us",
        "- evidence: wakeup.latency CPU 1: observed max 831.599 us",
        "- measure for: 36s",
        "**PASS**: every sample of 2 series",
        "### Machine and setup",
        "| histogram | CPU0 | CPU1 |",
        // 3 s is too short for an hour's level: one sentence, no refused cell.
        // (the latency and its eight traced stage series).
        "Every series (wakeup: 9 metrics): a tail is fitted, but every level lies beyond 100x",
        "### MTTF against buffering",
        "| curve | n=1 |",
        "top causes over",
    ] {
        assert!(md.contains(part), "{part} missing");
    }
    // The summary first, then the verdicts, the requirements before the
    // --threshold.
    let v = md.find("### Verdicts").unwrap();
    let (omac, threshold) = (v + md[v..].find("<= 100us").unwrap(), md.find("(--threshold)").unwrap());
    assert!(md.find("### Summary: how real-time is this machine").unwrap() < v);
    assert!(v < omac && omac < threshold && threshold < md.find("### Machine").unwrap());
    assert!(!md.contains("<svg"), "Markdown leaves the plots out");
    // The same report straight from the export, and -o FILE.md picks Markdown.
    let file = dir.join("r.md");
    report(&["report", data("report-run.json").to_str().unwrap(), "-o", file.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), md);
}

#[test]
fn the_verdicts_judge_the_requirements_given_or_stored_with_the_run() {
    let (dir, db) = imported();
    // Given: they replace the yardstick; a failed one exits with code 2
    // once the report is written.
    let args = ["report", "1", "-o", "-", "--format", "md", "--profile", "audio64", "--db", &db];
    let o = rtscope(&[&args[..], &["--require", "wakeup.latency.max < 1ms"]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let md = String::from_utf8(o.stdout).unwrap();
    assert!(md.contains("Judged against the profile audio64 and 'wakeup.latency.max < 1ms', given with"), "{md}");
    assert!(!md.contains("yardstick"), "{md}");
    assert!(md.contains("**FAIL**: 2 of 3 requirements failed; 1 passed"), "{md}");
    assert!(md.contains("**PASS**: wakeup.latency.max < 1ms"), "{md}");
    assert!(md.contains("**FAIL**: audio 48kHz 64 frames x 2 periods"), "{md}");
    assert!(md.contains("- confidence: low (from the fitted tail), limited by:\n  - threshold stability"), "{md}");
    // The MTTF plot's data has the required periods' curves; its x range
    // stops one past the first n reaching the target, or at 16.
    assert!(md.contains("| t=1.333ms, c=666.666us |"), "{md}");
    // Stored with the run (as `rtscope run --require` stores them):
    // report and analyze apply them without flags.
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("report-run.json")).unwrap()).unwrap();
    run["run"]["plan"]["requirements"] = serde_json::json!({"profiles": [], "require": ["wakeup.latency.p99 < 1ms"]});
    let file = dir.join("stored.json");
    std::fs::write(&file, serde_json::to_string(&run).unwrap()).unwrap();
    let md = report(&["report", file.to_str().unwrap(), "-o", "-", "--format", "md"]);
    assert!(md.contains("Judged against 'wakeup.latency.p99 < 1ms', stored with the run"), "{md}");
    assert!(md.contains("**PASS**: wakeup.latency.p99 < 1ms"), "{md}");
    let db = dir.join("stored.db").to_str().unwrap().to_string();
    let o = rtscope(&["import", file.to_str().unwrap(), "--db", &db]);
    assert!(o.status.success(), "{}", text(&o));
    let o = rtscope(&["analyze", "1", "--json", "--db", &db]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["requirements_from"], "stored");
    assert_eq!(v["verdicts"][0]["requirement"], "wakeup.latency.p99 < 1ms");
    let o = rtscope(&["analyze", "1", "--require", "wakeup.latency.max < 100us", "--db", &db]);
    assert_eq!(o.status.code(), Some(2), "the flag replaces the stored requirement: {}", text(&o));
    assert!(text(&o).contains("verdicts · Judged against 'wakeup.latency.max < 100us', given"), "{}", text(&o));
}

/// Two tasks in milliseconds: schedulable as written and with the
/// fixture's wake-up latency at 1e-2 (173 us, observed).
const TASKS: &str = "[[task]]\nname = \"io\"\nwcet = \"200us\"\nperiod = \"1ms\"\n\
                     [[task]]\nname = \"control\"\nwcet = \"1.5ms\"\nperiod = \"5ms\"\ndeadline = \"4ms\"\nblocking = \"50us\"\n";

#[test]
fn the_report_and_analyze_judge_a_task_set_as_analyze_rta_does() {
    use rtscope_model::units::{human, us_i};
    let (dir, db) = imported();
    let set = dir.join("set.toml");
    std::fs::write(&set, TASKS).unwrap();
    let set = set.to_str().unwrap();
    let rta = |file: &str| {
        let o = rtscope(&[
            "analyze",
            "rta",
            "--tasks",
            file,
            "--jitter-from",
            "1",
            "--error-rate",
            "1e-2",
            "--json",
            "--db",
            &db,
        ]);
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap_or_else(|_| panic!("{}", text(&o)))
    };
    let want = rta(set);
    let lat = want["pseudo_worst_case"]["latency_ns"].as_i64().unwrap();
    assert_eq!(want["schedulable"], true, "{want}");
    // The report: the verdict first, the section with the same numbers.
    let md = report(&["report", "1", "--tasks", set, "--error-rate", "1e-2", "-o", "-", "--format", "md", "--db", &db]);
    let (verdicts, machine, sched) = (
        md.find("### Verdicts").unwrap(),
        md.find("### Machine").unwrap(),
        md.find("### Schedulability").expect("the section"),
    );
    let first = md.find("**PASS**: task set ").expect("the task set's verdict");
    assert!(verdicts < first && first < machine && machine < sched, "{md}");
    let section = &md[sched..];
    assert!(section.contains("given with --tasks, at an error rate of 1e-2 per wake-up (--error-rate)"), "{section}");
    assert!(section.contains(&format!("the wake-up latency at 1e-2 per wake-up is {} us", us_i(lat))), "{section}");
    assert!(section.contains("| io | 2 | 200us | 1ms | 1ms | 0ns | 0ns | 200us | 800us | meets |"), "{section}");
    assert!(
        section.contains("| control | 1 | 1.5ms | 5ms | 4ms | 50us | 0ns | 1.95ms | 2.05ms | meets |"),
        "{section}"
    );
    for t in want["tasks"].as_array().unwrap() {
        let r = t["response_time_ns"].as_u64().unwrap();
        let row = format!("| {} | {} | {} |", t["name"].as_str().unwrap(), human(lat as u64), human(r));
        assert!(section.contains(&row), "{row} missing: {section}");
    }
    assert!(section.contains("Utilisation U = 0.5000. Liu-Layland bound"), "{section}");
    assert!(
        section.contains("Deadline-miss probability per hour <= 1 (union bound: 1e-2 x 4320000 releases"),
        "{section}"
    );
    // analyze RUN: the same numbers in its JSON.
    let o = rtscope(&["analyze", "1", "--tasks", set, "--error-rate", "1e-2", "--json", "--db", &db]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &v["schedulability"];
    assert_eq!(
        (&s["tasks_from"], &s["verdict"]["status"], &v["passed"]),
        (&"flags".into(), &"pass".into(), &true.into())
    );
    assert_eq!(s["measured"]["tasks"], want["tasks"]);
    assert_eq!(s["measured"]["pseudo_worst_case"], want["pseudo_worst_case"]);
    assert_eq!(s["given"]["tasks"][1]["response_time_ns"], 1_950_000);
    // The HTML draws each task's response times against its deadline.
    let html = dir.join("r.html");
    report(&["report", "1", "--tasks", set, "--error-rate", "1e-2", "-o", html.to_str().unwrap(), "--db", &db]);
    let html = std::fs::read_to_string(&html).unwrap();
    let svg = &html[html.find("<svg id=\"r1-sched-0\"").expect("the response-time plot")..];
    let svg = &svg[..svg.find("</svg>").unwrap()];
    assert_eq!(svg.matches("<rect class=\"series\"").count(), 2 + 4, "2 legend swatches, 2 bars per task");
    assert_eq!(svg.matches("class=\"requirement\"").count(), 2, "a deadline per task");
    // Stored with the run (as `rtscope run --tasks` stores it): applied
    // without flags; a set that misses a deadline with the measured
    // jitter fails like a requirement (exit code 2); --tasks replaces it.
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("report-run.json")).unwrap()).unwrap();
    run["run"]["plan"]["schedulability"] = serde_json::json!({"source": "tight.toml", "error_rate": 1e-2, "tasks": [
        {"name": "tight", "wcet_ns": 900_000, "period_ns": 1_000_000, "deadline_ns": 1_000_000, "blocking_ns": 0,
         "jitter_ns": 0, "priority": 1}]});
    let file = dir.join("stored.json");
    std::fs::write(&file, serde_json::to_string(&run).unwrap()).unwrap();
    let o = rtscope(&["report", file.to_str().unwrap(), "-o", "-", "--format", "md"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let md = String::from_utf8(o.stdout).unwrap();
    assert!(md.contains("Schedulability: The task set tight.toml, stored with the run"), "{md}");
    let miss =
        format!("tight: R = {} > D = 1ms with a release jitter of {} us", human(900_000 + lat as u64), us_i(lat));
    assert!(md.contains("**FAIL**: task set tight.toml") && md.contains(&miss), "{md}");
    assert!(md.contains("| tight | 1 | 900us | 1ms | 1ms | 0ns | 0ns | 900us | 100us | meets |"), "as written: {md}");
    let row = format!(
        "| tight | {} | {} | -{} | MISSES |",
        human(lat as u64),
        human(900_000 + lat as u64),
        human(lat as u64 - 100_000)
    );
    assert!(md.contains(&row), "{row}: {md}");
    let o = rtscope(&["report", file.to_str().unwrap(), "-o", "-", "--format", "md", "--tasks", set]);
    assert_eq!(o.status.code(), Some(0), "--tasks replaces the stored set: {}", text(&o));
}

#[test]
fn report_and_compare_refuse_bad_input_naming_it() {
    let (_dir, db) = imported();
    let bad = |args: &[&str], words: &[&str]| {
        let o = rtscope(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        for w in words {
            assert!(err.contains(w), "{args:?}: message should name {w}: {err}");
        }
    };
    bad(&["report", "7", "-o", "-", "--db", &db], &["no run 7"]);
    bad(&["report", "1", "-o", "/nonexistent-dir/r.html", "--db", &db], &["--output"]);
    bad(&["report", "gone.json", "-o", "-", "--db", &db], &["gone.json"]);
    bad(&["report", "1", "-o", "-", "--db", "/nonexistent-dir/x.db"], &["--db"]);
    bad(&["report", "1", "-o", "-", "--require", "wakeup.latency < 1ms", "--db", &db], &["--require", "statistic"]);
    bad(&["report", "1", "-o", "-", "--profile", "dvd", "--db", &db], &["--profile dvd", "omac"]);
    bad(
        &["report", "1", "-o", "-", "--tasks", "/nonexistent/set.toml", "--db", &db],
        &["--tasks /nonexistent/set.toml"],
    );
    bad(&["report", "1", "-o", "-", "--error-rate", "1e-3", "--db", &db], &["--error-rate", "no task set", "--tasks"]);
    bad(&["report", "1", "-o", "-", "--error-rate", "2", "--db", &db], &["--error-rate", "between 0 and 1"]);
    bad(&["analyze", "1", "--error-rate", "1e-3", "--db", &db], &["--error-rate", "--tasks"]);
    bad(&["compare", "1", "--db", &db], &["RUN"]);
    bad(&["compare", "1", "1", "--max-regression", "lots", "--db", &db], &["--max-regression"]);
    bad(&["compare", "1", "1", "--html", "/nonexistent-dir/c.html", "--db", &db], &["--html"]);
    bad(&["compare", "1", "1", "--min-delta", "2us", "--db", &db], &["--max-regression"]);
    bad(&["compare", "1", "1", "--max-regression", "5", "--min-delta", "soon", "--db", &db], &["--min-delta"]);
    bad(&["compare", "1", "1", "--max-regression", "5", "--gate", "wakeup latency", "--db", &db], &["--gate", "PROBE"]);
    bad(
        &["compare", "1", "1", "--max-regression", "5", "--gate", "wakeup.latncy.p99", "--db", &db],
        &["--gate wakeup.latncy.p99", "no compared row", "wakeup.latency"],
    );
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn an_assessment_report_has_its_matrix_characterisation_and_a_curve_per_load() {
    let fx = Fixture::root();
    // A requirement that fails: stored with the run, printed at its end,
    // exit code 2.
    let run = ["run", "--quick", "--probes", "wakeup", "--loads", "idle,cpu", "--duration", "1s", "--db", &fx.db];
    let o = rtscope(&[&run[..], &["--checkpoint", "50ms"]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--checkpoint <DUR>': 50ms is outside 100ms..1h"), "{}", text(&o));
    let plan = Path::new(&fx.dir).join("cp.toml");
    std::fs::write(&plan, "probes = [\"wakeup\"]\ncheckpoint = \"2h\"\n").unwrap();
    let o = rtscope(&["run", plan.to_str().unwrap(), "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("cp.toml") && text(&o).contains("2h is outside 100ms..1h"), "{}", text(&o));
    let json = Path::new(&fx.dir).join("run.json");
    let o = rtscope(
        &[
            &run[..],
            &["--require", "wakeup.latency.min > 1s", "--checkpoint", "100ms", "--json"],
            &[json.to_str().unwrap()],
        ]
        .concat(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let tail = &out[out.find("verdicts · Judged against 'wakeup.latency.min > 1s', stored").expect("the verdicts")..];
    assert!(tail.contains("FAIL") && tail.contains("[idle]") || tail.contains("[cpu]"), "{tail}");
    // The run's JSON ends with the verdicts, as `analyze RUN --json` gives them.
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let o = rtscope(&["analyze", "last", "--json", "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let analysed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((&doc["requirements_from"], &doc["passed"]), (&"stored".into(), &false.into()), "{}", doc["verdicts"]);
    assert_eq!(doc["verdicts"][0]["status"], "fail");
    for key in ["requirements_from", "verdicts", "passed"] {
        assert_eq!(doc[key], analysed[key], "{key}");
    }
    assert!(doc.get("schedulability").is_none() && doc["results"].as_array().unwrap().len() >= 4);
    // --checkpoint: about ten intervals per 1 s cell.
    assert_eq!(doc["run"]["plan"]["assessment"]["checkpoint_ns"], 100_000_000);
    for r in doc["results"].as_array().unwrap() {
        assert!((8..=12).contains(&r["intervals"].as_u64().unwrap()), "{r}");
    }
    // The report applies it (and exits 2); flags replace it.
    let o = rtscope(&["report", "last", "--format", "md", "-o", "-", "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let stored = String::from_utf8(o.stdout).unwrap();
    assert!(stored.contains("**FAIL**: wakeup.latency.min > 1s"), "{stored}");
    let md = report(&[
        "report",
        "last",
        "--format",
        "md",
        "-o",
        "-",
        "--require",
        "wakeup.latency.min < 1s",
        "--db",
        &fx.db,
    ]);
    assert!(md.contains("### Assessment: probes under each load") && md.contains("CPU score "), "{md}");
    for title in ["worst case (us)", "p99.9 (us)"] {
        let t = md_table_after(&md, title);
        assert_eq!(t[0], ["probe metric", "idle", "cpu"], "{title}: a column per load in the plan's order");
        assert_eq!(t.len(), 2, "{title}: one row, wakeup latency: {t:?}");
        assert_eq!(t[1][0], "wakeup latency");
        for v in &t[1][1..] {
            let us: f64 = v.parse().unwrap_or_else(|_| panic!("{title}: {v} is not a number"));
            assert!(us > 0.0 && us < 1e6, "{title}: {v}");
        }
    }
    // The worst case is at least the p99.9 under each load.
    let (w, p) = (md_table_after(&md, "worst case (us)"), md_table_after(&md, "p99.9 (us)"));
    for i in 1..3 {
        assert!(w[1][i].parse::<f64>().unwrap() >= p[1][i].parse::<f64>().unwrap(), "{w:?} {p:?}");
    }
    let ch = md_table_after(&md, "### Loads' characterisation");
    assert_eq!(ch[0], ["counter", "idle", "cpu"]);
    let busy = ch.iter().find(|r| r[0].starts_with("CPU busy %")).expect("the busy row");
    let cpu_busy: f64 = busy[2].parse().unwrap();
    assert!(cpu_busy > 50.0, "the cpu load keeps its CPUs busy: {busy:?}");
    assert!(ch.iter().any(|r| r[0] == "context switches/s"), "{ch:?}");
    // Every load has its rows in the probe's table and its curve in the plot.
    let figures = md_table_after(&md, "### wakeup");
    assert_eq!(figures[0][..2], ["load", "CPU"]);
    for l in ["idle", "cpu"] {
        assert!(figures.iter().any(|r| r[0] == l), "{l} missing in {figures:?}");
    }
    // The tail analysis: 1 s per cell is too short for an hour's level;
    // one sentence says how long to measure, not a refused cell per series.
    let tail = &md[md.find("### Tail analysis").expect("the tail section")..];
    let tail = &tail[..tail.find("\n### ").unwrap_or(tail.len())];
    assert!(
        tail.contains("Every series (wakeup latency): a tail is fitted, but every level lies beyond 100x")
            && tail.contains("Measure at least 36s per series (per cell) for the hour's level")
            || tail.contains("No tail fit for"),
        "{tail}"
    );
    assert!(!tail.contains("| refused: "), "no refused cell per series: {tail}");
    assert!(tail.matches("refused").count() <= 1, "{tail}");
    // The MTTF tables: those that hold a figure, the rest in a sentence.
    assert!(
        md.contains("| period | n=2 | n=3 | n=4 | smallest n |") || md.contains("The MTTF tables of "),
        "the MTTF tables: {md}"
    );
    // The MTTF curves: one per period and load (the worst CPU of each).
    for l in ["[idle]", "[cpu]"] {
        assert!(md.contains(&format!("| t=1ms, c=500us {l} |")), "the 1 ms curve under {l}: {md}");
    }
    let html = report(&["report", "last", "-o", "-", "--require", "wakeup.latency.min < 1s", "--db", &fx.db]);
    let exc = &html[html.find("percent of samples at or over").expect("the exceedance plot")..];
    let exc = &exc[..exc.find("</svg>").unwrap()];
    for l in ["[idle]", "[cpu]"] {
        assert!(exc.contains(l), "the exceedance plot has no curve {l}");
    }
    assert!(html.contains("-matrix\"") && html.contains("-characterisation\""), "the sections' anchors");
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn an_osbench_report_has_a_table_per_group_and_its_plot() {
    let fx = Fixture::root();
    let o = rtscope(&["osbench", "-t", "call", "-t", "wake.futex-intra", "-n", "200", "--db", &fx.db, "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let md = report(&["report", "last", "--format", "md", "-o", "-", "--db", &fx.db]);
    assert!(md.contains("### osbench: OS services (us per operation)"), "{md}");
    assert!(!md.contains("### osbench: value"), "osbench has its own section, not the generic probe's: {md}");
    let calls = md_table_after(&md, "calls: ");
    assert_eq!(calls[0][..3], ["#", "id", "name"]);
    let ids: Vec<&str> = calls[1..].iter().map(|r| r[1].as_str()).collect();
    assert_eq!(
        ids,
        ["call.syscall", "call.syscall-words", "call.syscall-ptrs", "call.ipc-none", "call.ipc", "call.ipc-ptrs"],
        "the call tests in their number's order"
    );
    for r in &calls[1..] {
        assert_eq!(r.len(), 15, "{r:?}");
        assert_eq!(r[7], "200", "samples: {r:?}");
        let (min, p50, max): (f64, f64, f64) = (r[9].parse().unwrap(), r[11].parse().unwrap(), r[13].parse().unwrap());
        assert!(0.0 <= min && min <= p50 && p50 <= max, "{r:?}");
    }
    for r in &calls[1..] {
        assert_eq!(r[4], if r[1].starts_with("call.ipc") { "yes" } else { "no" }, "inter-process: {r:?}");
    }
    // wake.futex-intra is in its own group's table.
    let tables = md.matches("| # | id | name |").count();
    assert_eq!(tables, 2, "a table per group: {md}");
    assert!(md.contains("| wake.futex-intra |"), "wake.futex-intra's row: {md}");
    let html = report(&["report", "last", "-o", "-", "--db", &fx.db]);
    let plots = html.matches("percent of operations at or over each time").count();
    assert!(plots >= 2, "a plot per group ({plots})");
}
