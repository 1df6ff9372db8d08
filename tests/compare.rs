//! `rtscope compare`: a run compared with itself is within its noise, an
//! incomplete run fails the gate unless allowed, and a comparison must
//! catch an injected spinner and gate on it.

mod common;
use common::reports::*;
use common::*;

#[test]
fn a_run_compared_with_itself_is_within_its_noise() {
    let (dir, db) = imported();
    let html = dir.join("c.html");
    let o = rtscope(&["compare", "1", "1", "--max-regression", "0", "--html", html.to_str().unwrap(), "--db", &db]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("wakeup latency cpu1") && out.contains("PASS"), "{out}");
    assert!(out.contains("0 figure(s) worse beyond the noise, 0 better"), "{out}");
    // The header gives each run's status and CPU score; the merged row gates.
    assert!(out.contains("run 1: wakeup on vm") && out.contains("complete, CPU score"), "{out}");
    assert!(out.contains("wakeup latency all CPUs (us), gated") && !out.contains("cpu1 (us), gated"), "{out}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("run 1") && !page.contains("<script"));
    let o = rtscope(&["compare", "1", "1", "--json", "--db", &db]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("compare --json is JSON");
    assert_eq!(v["format"], "rtscope-compare");
    assert_eq!(v["passed"], true);
    let mut tests = Vec::new();
    for s in v["series"].as_array().unwrap() {
        for f in s["figures"].as_array().unwrap() {
            assert_eq!(f["ratios"][1], 1.0, "{f}");
            // A figure equal to itself is within the noise, whichever test judged it.
            assert_eq!(f["changes"][1], "within_noise", "{f}");
            tests.push(f["tests"][1].as_str().unwrap().to_string());
        }
    }
    // 3000 samples per CPU: the maximum and p99.9 go to the exceedance test.
    assert!(tests.contains(&"bootstrap".to_string()) && tests.contains(&"exceedance".to_string()), "{tests:?}");
}

/// A gate that cannot judge a row of the baseline in a later run (a run
/// of other probes compared by mistake, a probe that stored nothing)
/// fails, naming the rows; a gate narrowed to shared rows judges them.
#[test]
fn a_gate_fails_on_rows_a_later_run_lacks() {
    let dir = tempdir();
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("report-run.json")).unwrap()).unwrap();
    for s in run["series"].as_array_mut().unwrap() {
        if s["metric"] == "latency" {
            s["metric"] = "renamed".into();
        }
    }
    let other = dir.join("other.json");
    std::fs::write(&other, serde_json::to_string(&run).unwrap()).unwrap();
    let (full, other) = (data("report-run.json"), other.to_str().unwrap().to_string());
    let db = db(&dir);
    let o = rtscope(&["compare", full.to_str().unwrap(), &other, "--max-regression", "10", "--db", &db]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    // (Wrapped at 100 columns.)
    let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("FAIL")
            && flat.contains("that a later run lacks or has no sample in, so not judged: wakeup latency all CPUs in"),
        "{out}"
    );
    let o = rtscope(&["compare", full.to_str().unwrap(), &other, "--json", "--max-regression", "10", "--db", &db]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["passed"], false);
    assert!(
        v["unjudged"].as_array().unwrap().iter().any(|u| u["series"] == "wakeup latency all CPUs" && u["run"] == 1),
        "{}",
        v["unjudged"]
    );
    // The rows both have: judged, and within the noise (the same samples).
    let o = rtscope(&[
        "compare",
        full.to_str().unwrap(),
        &other,
        "--max-regression",
        "10",
        "--gate",
        "wakeup.thread",
        "--db",
        &db,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("PASS"), "{}", text(&o));
    // Runs of other CPUs are lined up on merged rows and judged: the
    // 2-CPU run against its CPU 1 alone, then its CPU 0 alone against its
    // CPU 1 alone (whose tail is 4x longer: p99 40 against 173 us).
    let only = |cpu: i64, name: &str| {
        let mut one: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(data("report-run.json")).unwrap()).unwrap();
        for key in ["series", "results"] {
            one[key].as_array_mut().unwrap().retain(|s| s["cpu"] == cpu);
        }
        let path = dir.join(name);
        std::fs::write(&path, serde_json::to_string(&one).unwrap()).unwrap();
        path.to_str().unwrap().to_string()
    };
    let (cpu0, cpu1) = (only(0, "cpu0.json"), only(1, "cpu1.json"));
    let gate = |a: &str, b: &str| {
        rtscope(&["compare", a, b, "--json", "--max-regression", "10", "--gate", "wakeup.latency", "--db", &db])
    };
    let o = gate(full.to_str().unwrap(), &cpu1);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["unjudged"], serde_json::json!([]), "{}", text(&o));
    let merged =
        v["series"].as_array().unwrap().iter().find(|s| s["metric"] == "latency" && s["cpu"].is_null()).unwrap();
    assert!(merged["counts"][1].as_u64().unwrap() > 0 && merged["gated"] == true, "{merged}");
    let o = gate(&cpu0, &cpu1);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(v["unjudged"], serde_json::json!([]), "{}", text(&o));
    assert!(
        v["regressions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["series"] == "wakeup latency all CPUs" && r["figure"] == "p99"),
        "{}",
        v["regressions"]
    );
}

#[test]
fn an_incomplete_run_fails_the_gate_unless_allowed() {
    let dir = tempdir();
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("report-run.json")).unwrap()).unwrap();
    run["run"]["status"] = "interrupted".into();
    run["status"] = "interrupted".into();
    let cut = dir.join("interrupted.json");
    std::fs::write(&cut, serde_json::to_string(&run).unwrap()).unwrap();
    let (full, cut) = (data("report-run.json"), cut.to_str().unwrap().to_string());
    let db = db(&dir);
    let o = rtscope(&["compare", full.to_str().unwrap(), &cut, "--max-regression", "10", "--db", &db]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("interrupted, CPU score") && out.contains("FAIL") && out.contains("--allow-incomplete"),
        "{out}"
    );
    let o = rtscope(&[
        "compare",
        full.to_str().unwrap(),
        &cut,
        "--max-regression",
        "10",
        "--allow-incomplete",
        "--db",
        &db,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("PASS"));
    let o = rtscope(&["compare", full.to_str().unwrap(), &cut, "--json", "--max-regression", "10", "--db", &db]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["incomplete"], serde_json::json!([{"run": 1, "status": "interrupted"}]));
    assert_eq!(v["passed"], false);
    // Without a gate, the status is only shown.
    let o = rtscope(&["compare", full.to_str().unwrap(), &cut, "--db", &db]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("note: run 1 is interrupted"), "{}", text(&o));
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn compare_catches_an_injected_spinner_and_gates_on_it() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    let measure = || {
        let o = rtscope(&["wakeup", "--cpus", &cpu, "--duration", "3s", "--quiet", "--db", &fx.db]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    };
    measure();
    // 1.5 ms every 5.333 ms: about 28 % of the wake-ups are late by up to
    // 1.5 ms, which puts run 2's p99 near 1.4 ms.
    let spinner = truth::Disturber::start(&fx.dir, &cpu, "5333us", "1500us", "30s");
    measure();
    let bursts = spinner.finish();
    assert!(bursts.len() >= 500, "{} bursts in 3 s at 5.333 ms", bursts.len());
    let p99 = |run: &str| {
        let v = show_json(&fx.db, run);
        let r = v["results"].as_array().unwrap().iter().find(|r| r["cpu"].as_i64() == cpu.parse().ok()).cloned();
        r.and_then(|r| r["p99_ns"].as_f64()).unwrap()
    };
    let (quiet, spun) = (p99("1"), p99("2"));
    // The gate is judged against the two runs' own data: run 2's p99 twice
    // run 1's at least is a regression beyond --max-regression 50 that
    // compare must catch. It is not only where the host stalled 1 % of
    // the quiet run's wake-ups by 0.7 ms or more (then the quiet run is
    // no baseline, and compare may call run 2 better only where its p99 is
    // the lower).
    let clear = spun > 2.0 * quiet;
    eprintln!(
        "p99: {quiet} ns without the spinner, {spun} with it: {}",
        if clear { "a clear regression" } else { "the host stalled the quiet run beyond the spinner's effect" }
    );
    let o = rtscope(&["compare", "1", "2", "--max-regression", "50", "--db", &fx.db]);
    let out = text(&o);
    if clear {
        assert_eq!(o.status.code(), Some(2), "{out}");
        assert!(out.contains("FAIL"), "{out}");
    }
    let o = rtscope(&["compare", "1", "2", "--json", "--max-regression", "50", "--db", &fx.db]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let regs = v["regressions"].as_array().unwrap();
    let series = format!("wakeup latency cpu{cpu}");
    let row = v["series"].as_array().unwrap().iter().find(|s| s["cpu"].as_i64() == cpu.parse().ok()).unwrap();
    let fig = |name: &str| row["figures"].as_array().unwrap().iter().find(|f| f["figure"] == name).unwrap().clone();
    if clear {
        assert_eq!(o.status.code(), Some(2));
        assert_eq!(v["passed"], false);
        assert!(
            regs.iter()
                .any(|r| r["series"] == series.as_str() && r["figure"] == "p99" && r["ratio"].as_f64().unwrap() > 1.5),
            "p99 of {series} must be a regression: {regs:?}"
        );
    } else if fig("p99")["changes"][1] == "better" {
        // The host stalled the quiet run beyond the spinner's effect: run
        // 2 may be better at p99 only as its values say (once seen: 2.32 ms
        // without the spinner, 1.53 ms with it, ratio 0.66, its interval
        // 0.58-0.95).
        let ratio = fig("p99")["ratios"][1].as_f64().unwrap();
        assert!(spun < quiet && ratio < 1.0, "run 2 called better at p99: {}", fig("p99"));
    }
    // p99.9 and the maximum of 3000 samples are judged by the exceedance
    // test. The spinner's spikes (hundreds above 0.5 ms in 3 s) are a new
    // population above the quiet run's p99.9 (3 samples above it), unless
    // the host itself stalled the quiet run that long 3 times.
    for name in ["p99.9", "max"] {
        assert_eq!(fig(name)["tests"][1], "exceedance", "{}", fig(name));
    }
    let p999 = fig("p99.9");
    if p999["values_ns"][0].as_f64().unwrap() < 500_000.0 {
        assert_eq!(p999["changes"][1], "worse", "{p999}");
    }
    // Gated on the median, only the median can fail the gate. (Whether it
    // does is the host's: this VM's median moves from 14 to 25 us between
    // two 3 s runs, with or without the spinner.)
    let o = rtscope(&[
        "compare",
        "1",
        "2",
        "--json",
        "--max-regression",
        "50",
        "--gate",
        "wakeup.latency.p50",
        "--db",
        &fx.db,
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let regs = v["regressions"].as_array().unwrap();
    assert!(regs.iter().all(|r| r["selector"].as_str().unwrap().starts_with("wakeup.latency.p50")), "{regs:?}");
    assert_eq!(o.status.code(), Some(if regs.is_empty() { 0 } else { 2 }), "{}", text(&o));
    // The other way round its p99 is an improvement, and a gate on it
    // passes (whatever the host did to the quiet run's other figures: its
    // stalls can make missed periods there, 8 in 3 s once).
    let o = rtscope(&["compare", "2", "1", "--json", "--max-regression", "50", "--db", &fx.db]);
    let o2 = rtscope(&["compare", "2", "1", "--gate", "wakeup.latency.p99", "--max-regression", "50", "--db", &fx.db]);
    if clear || quiet <= spun {
        assert_eq!(o2.status.code(), Some(0), "{}", text(&o2));
    }
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = v["series"].as_array().unwrap().iter().find(|s| s["cpu"].as_i64() == cpu.parse().ok()).unwrap();
    let p99 = row["figures"].as_array().unwrap().iter().find(|f| f["figure"] == "p99").unwrap();
    if clear {
        assert_eq!(p99["changes"][1], "better", "{p99}");
    }
}
