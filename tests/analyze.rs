//! `rtscope analyze` end to end on constructed data: sample files, task
//! sets and a run written into a store through the model crate. No root.

mod common;
use common::*;
use rtscope_model::hist::Tally;
use rtscope_model::inventory::Inventory;
use rtscope_model::run::{Exceedance, Interval, Run, RunHeader, RunStatus, Series, SeriesKey};
use rtscope_model::store::Store;
use std::path::Path;

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(o)))
}

/// Latency-like samples: uniform 10-20 us with a 1 % Generalized Pareto
/// tail (sigma 2 us, xi 0.15) above 20 us.
fn samples(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..n)
        .map(|_| {
            if rng.f64() < 0.01 {
                let u = rng.f64();
                (20_000.0 + 2_000.0 / 0.15 * ((1.0 - u).powf(-0.15) - 1.0)) as u64
            } else {
                10_000 + (rng.f64() * 10_000.0) as u64
            }
        })
        .collect()
}

fn write(path: &Path, lines: impl Iterator<Item = String>) {
    let text: Vec<String> = lines.collect();
    std::fs::write(path, text.join("\n") + "\n").unwrap();
}

#[test]
fn tail_of_a_sample_file() {
    let dir = tempdir();
    let with_times = dir.join("t.txt");
    let v = samples(100_000, 1);
    write(&with_times, v.iter().enumerate().map(|(i, x)| format!("{} {x}", 5_000_000_000u64 + i as u64 * 1_000_000)));
    let o = rtscope(&["analyze", "tail", "--samples", with_times.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let j = json(&o);
    for key in ["threshold_ns", "exceedances", "xi", "sigma_ns", "theta", "return_levels", "diagnostics"] {
        assert!(!j[key].is_null(), "{key} missing: {j}");
    }
    assert_eq!(j["exceedances"], 100);
    let hour = &j["return_levels"]["hour"];
    for key in ["value_ns", "ci_low_ns", "ci_high_ns"] {
        assert!(hour[key].as_i64().is_some(), "{key}: {hour}");
    }
    // 100 s observed: an hour is 36x (extrapolated), a day 864x (refused).
    assert_eq!(hour["extrapolated"], true);
    assert!(j["return_levels"]["day"]["value_ns"].is_null());
    assert!(j["return_levels"]["week"]["extrapolated"].as_bool().unwrap());
    assert!((j["rate_hz"].as_f64().unwrap() - 1000.0).abs() < 1e-6);
    for key in ["ljung_box", "runs", "kpss", "gev", "halves", "threshold_stability"] {
        assert!(j["diagnostics"][key].is_object(), "{key}");
    }
    // The same values without timestamps need --rate.
    let plain = dir.join("p.txt");
    write(&plain, v.iter().map(|x| x.to_string()));
    let o = rtscope(&["analyze", "tail", "--samples", plain.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--rate"), "{}", text(&o));
    let o =
        rtscope(&["analyze", "tail", "--samples", plain.to_str().unwrap(), "--rate", "1000", "--threshold", "25us"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for word in ["threshold 25.000 us (given)", "per hour", "Ljung-Box", "KPSS", "confidence"] {
        assert!(out.contains(word), "{word}: {out}");
    }
}

#[test]
fn sample_files_of_other_tools_with_decimals_and_units() {
    let dir = tempdir();
    let v = samples(20_000, 3);
    let tail = |file: &Path, extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["analyze", "tail", "--samples", file.to_str().unwrap(), "--json"];
        args.extend_from_slice(extra);
        let o = rtscope(&args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        json(&o)
    };
    // The same samples in whole nanoseconds, and in microseconds with
    // decimals (as other tools write them), at 1 kHz.
    let ns = dir.join("ns.txt");
    write(&ns, v.iter().map(|x| x.to_string()));
    let us = dir.join("us.txt");
    write(&us, v.iter().map(|&x| format!("{}", x as f64 / 1000.0)));
    assert!(std::fs::read_to_string(&us).unwrap().contains('.'));
    let a = tail(&ns, &["--rate", "1000"]);
    let b = tail(&us, &["--rate", "1000", "--unit", "us"]);
    for key in ["threshold_ns", "exceedances", "xi", "sigma_ns", "return_levels"] {
        assert_eq!(a[key], b[key], "{key}: the same samples in another unit");
    }
    // Seconds since the epoch and milliseconds, comma-separated.
    let epoch = dir.join("epoch.csv");
    write(
        &epoch,
        v.iter().enumerate().map(|(i, &x)| format!("{:.6},{}", 1_700_000_000.0 + i as f64 / 1000.0, x as f64 / 1e6)),
    );
    let c = tail(&epoch, &["--unit", "ms", "--time-unit", "s"]);
    assert!((c["rate_hz"].as_f64().unwrap() - 1000.0).abs() < 1.0, "{}", c["rate_hz"]);
    assert_eq!(a["exceedances"], c["exceedances"]);
    assert_eq!(a["threshold_ns"], c["threshold_ns"]);
    // A hostile tester's line: decimals in the default unit (ns) are
    // rounded to the nearest ns, not refused.
    let frac = dir.join("frac.txt");
    write(&frac, v.iter().map(|&x| format!("{x}.92047666533381")));
    let d = tail(&frac, &["--rate", "1000"]);
    assert_eq!(d["exceedances"], a["exceedances"]);
    // What is not a number is still named, with its file and line.
    let bad = dir.join("units.txt");
    std::fs::write(&bad, "19.5\n20.25\n12us\n").unwrap();
    let o = rtscope(&["analyze", "tail", "--samples", bad.to_str().unwrap(), "--rate", "10", "--unit", "us"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("units.txt line 3") && err.contains("'12us'") && err.contains("--unit"), "{err}");
    let o = rtscope(&["analyze", "tail", "--samples", bad.to_str().unwrap(), "--unit", "parsecs"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--unit"), "{}", text(&o));
    let o = rtscope(&["analyze", "tail", "--help"]);
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(help.contains("--unit") && help.contains("nearest ns"), "{help}");
}

#[test]
fn bad_analyze_input_is_named() {
    let dir = tempdir();
    let bad = dir.join("bad.txt");
    std::fs::write(&bad, "1000\n2000\nabc\n").unwrap();
    let o = rtscope(&["analyze", "tail", "--samples", bad.to_str().unwrap(), "--rate", "10"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("bad.txt line 3") && err.contains("'abc'"), "{err}");
    let o = rtscope(&["analyze", "tail", "--samples", "/nonexistent/x.txt"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--samples"), "{}", text(&o));
    let few = dir.join("few.txt");
    write(&few, (0..30).map(|i| (1000 + i).to_string()));
    let o = rtscope(&["analyze", "tail", "--samples", few.to_str().unwrap(), "--rate", "10"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("at least 50"), "{}", text(&o));
    let o = rtscope(&["analyze", "tail", "--samples", few.to_str().unwrap(), "--rate", "0"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--rate"), "{}", text(&o));
    let o = rtscope(&["analyze", "--require", "wakeup.latency.p99 < 50", "--db", &db(&dir)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--require"), "{}", text(&o));
    let o = rtscope(&["analyze", "--profile", "dvd", "--db", &db(&dir)]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("omac"), "{}", text(&o));
    let o = rtscope(&["analyze", "mttf", "--period", "1ms", "--buffers", "2", "--compute", "1ms"]);
    assert_eq!(o.status.code(), Some(1));
    let o = rtscope(&["analyze", "rta", "--tasks", "x.toml", "--error-rate", "1e-6"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--jitter-from"), "{}", text(&o));
}

/// The MTTF formula on a constructed set: 1 % of the samples (isolated, every
/// 100th) are 5 ms, the rest 100 us; t = 1 ms, n = 3, c = 1 ms: slack 1 ms,
/// p = 0.01, theta = 1, MTTF = t / p = 0.1 s, 36 000 underruns per hour.
#[test]
fn mttf_of_a_constructed_sample_set() {
    let dir = tempdir();
    let f = dir.join("m.txt");
    write(&f, (0..100_000).map(|i| if i % 100 == 37 { "5000000".to_string() } else { "100000".to_string() }));
    let args = ["analyze", "mttf", "--samples", f.to_str().unwrap(), "--rate", "1000", "--period", "1ms"];
    let o = rtscope(&[&args[..], &["--buffers", "3", "--compute", "1ms", "--json"]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let j = json(&o);
    assert_eq!(j["slack_ns"], 1_000_000);
    assert!((j["p_exceed"].as_f64().unwrap() - 0.01).abs() < 1e-12, "{j}");
    assert!((j["theta"].as_f64().unwrap() - 1.0).abs() < 0.05, "{j}");
    let expect = 0.001 / (0.01 * j["theta"].as_f64().unwrap());
    assert!((j["mttf_s"].as_f64().unwrap() - expect).abs() < 1e-9, "{j}");
    assert!((j["underruns_per_hour"].as_f64().unwrap() - 3600.0 / expect).abs() < 1e-6);
    assert!(j["curve"].as_array().unwrap().len() >= 8);
    let o = rtscope(&[&args[..], &["--buffers", "3", "--compute", "1ms"]].concat());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("slack (n-1) t - c = 1000.000 us") && out.contains("MTTF 100ms"), "{out}");
}

#[test]
fn response_time_analysis_of_task_files() {
    let dir = tempdir();
    // SchedCAT's set (tests/fp.py), in milliseconds: R = 1, 2, 7, 18 ms.
    let f = dir.join("schedcat.toml");
    let mut toml = String::new();
    for (i, (c, t)) in [(1, 4), (1, 5), (3, 9), (3, 18)].iter().enumerate() {
        toml += &format!("[[task]]\nname = \"t{}\"\nwcet = \"{c}ms\"\nperiod = \"{t}ms\"\n", i + 1);
    }
    std::fs::write(&f, &toml).unwrap();
    let o = rtscope(&["analyze", "rta", "--tasks", f.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let j = json(&o);
    let r: Vec<i64> = j["tasks"].as_array().unwrap().iter().map(|t| t["response_time_ns"].as_i64().unwrap()).collect();
    assert_eq!(r, vec![1_000_000, 2_000_000, 7_000_000, 18_000_000]);
    assert_eq!(j["schedulable"], true);
    assert!(j["tasks"][0]["name"] == "t1" && j["tasks"][0]["schedulable"] == true);
    assert!((j["utilization"].as_f64().unwrap() - (0.25 + 0.2 + 1.0 / 3.0 + 1.0 / 6.0)).abs() < 1e-9);
    // An overloaded set misses: exit code 2.
    std::fs::write(&f, "[[task]]\nname='a'\nwcet='3ms'\nperiod='4ms'\n[[task]]\nname='b'\nwcet='2ms'\nperiod='5ms'\n")
        .unwrap();
    let o = rtscope(&["analyze", "rta", "--tasks", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("MISSES"), "{}", text(&o));
    std::fs::write(&f, "[[task]]\nname='a'\nwcet='3'\nperiod='4ms'\n").unwrap();
    let o = rtscope(&["analyze", "rta", "--tasks", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("wcet"), "{}", text(&o));
}

/// A wakeup run of 2 CPUs, 60 intervals of 1 s at 1 kHz each, stored
/// through the model crate as the recorder would.
fn store_run(db: &str) {
    store_run_under(db, &[None]);
}

/// [`store_run`], the series measured under each of `loads` (an
/// assessment's cells: `Some(load)`).
fn store_run_under(db: &str, loads: &[Option<&str>]) {
    store_run_planned(db, loads, serde_json::json!({"settings": {"interval_ns": 1_000_000, "distance_ns": 0}}));
}

/// [`store_run_under`] with `plan` stored as the run's plan.
fn store_run_planned(db: &str, loads: &[Option<&str>], plan: serde_json::Value) {
    let mut series = Vec::new();
    for (cpu, (li, load)) in (0..2).flat_map(|cpu| loads.iter().enumerate().map(move |l| (cpu, l))) {
        let v = samples(60_000, 10 + cpu as u64 + 7 * li as u64);
        let mut intervals = Vec::new();
        let mut exceedances = Vec::new();
        for (seq, chunk) in v.chunks(1000).enumerate() {
            let mut t = Tally::new();
            let start = 1_000_000_000 + seq as u64 * 1_000_000_000;
            for (i, &x) in chunk.iter().enumerate() {
                t.record(x);
                if x > 30_000 {
                    exceedances.push(Exceedance { t_ns: start + i as u64 * 1_000_000, value_ns: x });
                }
            }
            intervals.push(Interval::new(seq as u32, start, start + 1_000_000_000, &t, 0, 0));
        }
        let key = SeriesKey { load: load.map(String::from), ..SeriesKey::new("wakeup", "latency", cpu) };
        series.push(Series::new(key, "ns".into(), "fixed 30000".into(), intervals, exceedances).unwrap());
    }
    let run = Run {
        header: RunHeader {
            command_line: vec!["rtscope".into(), "wakeup".into()],
            ended_unix_ns: Some(1_700_000_061_000_000_000),
            status: RunStatus::Complete,
            exit_code: Some(0),
            pid: 1,
            ..RunHeader::new(
                "wakeup",
                // Another uuid for a run with a usage model, beside one without.
                if plan["usage"].is_null() { "analyze-test".into() } else { "analyze-test-usage".into() },
                "box",
                1_700_000_000_000_000_000,
                1_000_000_000,
            )
        },
        inventory: Inventory::default(),
        plan,
        series,
        episodes: vec![],
        trace: None,
        characterisation: vec![],
        cpu_score: None,
    };
    Store::open(Path::new(db)).unwrap().insert_run(&run).unwrap();
}

#[test]
fn analyze_a_stored_run_with_verdicts() {
    let dir = tempdir();
    let db = db(&dir);
    store_run(&db);
    let o = rtscope(&["analyze", "last", "--json", "--db", &db, "--require", "wakeup.latency.p99 < 50us"]);
    assert!(o.status.success(), "{}", text(&o));
    let j = json(&o);
    let s = &j["series"][0];
    assert_eq!(s["stats"]["count"], 60_000);
    assert_eq!(s["stats"]["interval_maxima"].as_array().unwrap().len(), 60);
    assert!(s["stats"]["ccdf"].as_array().unwrap().len() > 50);
    let tail = &s["tail"];
    assert_eq!(tail["exceedances"], 100);
    assert!(tail["theta"].as_f64().unwrap() > 0.8, "{}", tail["theta_note"]);
    assert!(tail["theta_note"].as_str().unwrap().contains("Ferro-Segers"), "{}", tail["theta_note"]);
    // 60 s: an hour is 60x (extrapolated), a day refused.
    assert_eq!(tail["return_levels"]["hour"]["extrapolated"], true);
    assert!(tail["return_levels"]["day"]["refused"].as_str().unwrap().contains("measure at least 14m24s"));
    assert_eq!(tail["diagnostics"]["ljung_box"]["passed"], true, "{}", tail["diagnostics"]);
    assert!(s["mttf"]["rows"].as_array().unwrap().len() == 12);
    assert_eq!(j["verdicts"][0]["status"], "pass");
    assert_eq!(j["passed"], true);
    // A failed requirement: exit code 2, the evidence printed.
    let o = rtscope(&["analyze", "--db", &db, "--require", "wakeup.latency.max < 30us", "--profile", "omac"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("FAIL") && out.contains("observed max"), "{out}");
    // omac: the 1 ms wakeup interval is the periodic timer.
    assert!(out.contains("1ms periodic timer jitter <= 100us"), "{out}");
    // Not enough data to judge what was asked: the gate does not pass,
    // unless --allow-insufficient lets it.
    let o = rtscope(&["analyze", "--db", &db, "--require", "wakeup.latency.week < 1ms"]);
    assert_eq!(o.status.code(), Some(2), "a gate that cannot judge does not pass: {}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("NOT ENOUGH DATA"), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--allow-insufficient"), "{}", text(&o));
    let o = rtscope(&["analyze", "--db", &db, "--require", "wakeup.latency.week < 1ms", "--allow-insufficient"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A requirement on a probe or metric the run has no series of is
    // refused, naming what it has: a misspelled gate cannot pass.
    for (req, says) in [
        ("wakup.latency.max < 5us", "no probe 'wakup'"),
        ("wakeup.bogus.max < 5us", "no metric 'bogus'"),
        ("noise.latency.max < 5us", "no probe 'noise'"),
    ] {
        let o = rtscope(&["analyze", "--db", &db, "--require", req, "--allow-insufficient"]);
        assert_eq!(o.status.code(), Some(1), "{req}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says) && err.contains("latency"), "{req}: {err}");
        let o = rtscope(&["report", "last", "-o", "-", "--db", &db, "--require", req]);
        assert_eq!(o.status.code(), Some(1), "report {req}: {}", text(&o));
    }
    // MTTF and the pseudo worst case from the run.
    let o = rtscope(&[
        "analyze",
        "mttf",
        "--run",
        "last",
        "--period",
        "1ms",
        "--buffers",
        "2",
        "--compute",
        "980us",
        "--json",
        "--db",
        &db,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let m = json(&o);
    assert_eq!(m["slack_ns"], 20_000);
    assert!(m["mttf_s"].as_f64().unwrap() > 0.0 && m["per_series"].as_array().unwrap().len() == 2, "{m}");
    // A day (the default target) from 60 s: only the fitted tail reaches
    // it, more than 100x beyond the run: no smallest n, and why.
    assert!(m["smallest_n"].is_null(), "{m}");
    let why = m["smallest_n_why"].as_str().unwrap();
    assert!(why.contains("fitted tail") && why.contains("measure at least 14m24s"), "{why}");
    let tasks = dir.join("t.toml");
    std::fs::write(
        &tasks,
        "[[task]]\nname='io'\nwcet='200us'\nperiod='1ms'\n[[task]]\nname='ctl'\nwcet='1ms'\nperiod='5ms'\n",
    )
    .unwrap();
    let rta = |eps: &str| {
        let tasks = tasks.to_str().unwrap();
        rtscope(&[
            "analyze",
            "rta",
            "--tasks",
            tasks,
            "--jitter-from",
            "last",
            "--error-rate",
            eps,
            "--json",
            "--db",
            &db,
        ])
    };
    let o = rta("1e-3");
    assert!(o.status.success(), "{}", text(&o));
    let r = json(&o);
    let pwc = &r["pseudo_worst_case"];
    let lat = pwc["latency_ns"].as_i64().unwrap();
    // p99.9 of a 1 % tail: inside the tail, observed (60 samples above it).
    assert!((20_000..60_000).contains(&lat), "{pwc}");
    assert_eq!(r["tasks"][0]["response_time_ns"].as_i64().unwrap(), 200_000 + lat);
    // Union bound: 1e-3 x (1000 + 200) releases/s x 3600 s = 4320 (a probability capped at 1).
    assert!((pwc["expected_misses_per_hour_at_most"].as_f64().unwrap() - 4320.0).abs() < 1e-6, "{pwc}");
    assert_eq!(pwc["miss_probability_per_hour"], 1.0);
    // One wake-up in 1e8 from 60 000 samples lies 1667x beyond them: refused
    // as the return levels are, saying how long to measure.
    let o = rta("1e-8");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--error-rate 1e-8") && err.contains("too far to extrapolate") && err.contains("measure at least"),
        "{err}"
    );
}

/// In an assessment every load gives series of the same probe, metric and
/// CPU: each series of `analyze` names its load (JSON and text), and a
/// single probe's run has no load key at all.
#[test]
fn analyze_names_the_load_of_each_series_of_an_assessment() {
    let dir = tempdir();
    let path = db(&dir);
    let at = path.as_str();
    store_run_under(at, &[Some("idle"), Some("cpu:2@1")]);
    let o = rtscope(&["analyze", "last", "--json", "--db", at]);
    assert!(o.status.success(), "{}", text(&o));
    let j = json(&o);
    let named: Vec<(i64, &str)> = j["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["cpu"].as_i64().unwrap(), s["load"].as_str().unwrap_or("none")))
        .collect();
    assert_eq!(named.len(), 4, "{named:?}");
    for want in [(0, "idle"), (0, "cpu:2@1"), (1, "idle"), (1, "cpu:2@1")] {
        assert!(named.contains(&want), "{want:?} missing in {named:?}");
    }
    let o = rtscope(&["analyze", "last", "--db", at]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for head in ["wakeup latency CPU 0 under load idle · ", "wakeup latency CPU 1 under load cpu:2@1 · "] {
        assert_eq!(out.matches(head).count(), 1, "{head}: {out}");
    }
    // A single probe's run: no load.
    let single = tempdir();
    let single_db = db(&single);
    store_run(&single_db);
    let j = json(&rtscope(&["analyze", "last", "--json", "--db", &single_db]));
    assert!(j["series"].as_array().unwrap().iter().all(|s| s.get("load").is_none()), "{}", j["series"][0]["load"]);
}

/// The usage model through the store, analyze (text and JSON) and the
/// report: a run stored with 8 h a day and 5 days a week asks for the
/// level of 8 h and of 40 h of operation; --usage overrides it; a run
/// stored without one is continuous operation, and says so.
#[test]
fn a_stored_usage_model_changes_the_day_and_the_week() {
    let dir = tempdir();
    let db = db(&dir);
    let usage = rtscope_model::analysis::usage::Usage::parse("--usage", "8h/day,5d/week").unwrap();
    let plan = serde_json::json!({"settings": {"interval_ns": 1_000_000, "distance_ns": 0}, "usage": usage});
    store_run_planned(&db, &[None], plan);
    store_run_under(&db, &[None]);
    // Run 1 (8 h a day): 60 s observed, the day's 8 h is 480x, refused
    // with 8h / 100; the week's 40 h with 40h / 100.
    let j = json(&rtscope(&["analyze", "1", "--json", "--db", &db]));
    let tail = &j["series"][0]["tail"];
    assert_eq!(tail["usage"]["per_day_ns"], 28_800_000_000_000u64, "{}", tail["usage"]);
    assert_eq!(tail["usage"]["days_per_week"], 5);
    assert_eq!(tail["return_levels"]["hour"]["period_s"], 3_600.0);
    assert_eq!(tail["return_levels"]["day"]["period_s"], 28_800.0);
    assert_eq!(tail["return_levels"]["week"]["period_s"], 144_000.0);
    assert!(tail["return_levels"]["day"]["refused"].as_str().unwrap().contains("measure at least 4m48s"));
    assert!(tail["return_levels"]["week"]["refused"].as_str().unwrap().contains("measure at least 24m"));
    let o = rtscope(&["analyze", "1", "--db", &db]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("Usage: 8h a day, 5 days a week"), "{out}");
    assert!(out.contains("per day (8 h of use)") && out.contains("per week (5 days of 8 h: 40 h of use)"), "{out}");
    // --usage overrides the stored one.
    let j = json(&rtscope(&["analyze", "1", "--json", "--usage", "continuous", "--db", &db]));
    assert_eq!(j["series"][0]["tail"]["return_levels"]["day"]["period_s"], 86_400.0);
    let j = json(&rtscope(&["analyze", "1", "--json", "--usage", "6h/day", "--db", &db]));
    let levels = &j["series"][0]["tail"]["return_levels"];
    assert_eq!(
        (levels["day"]["period_s"].as_f64(), levels["week"]["period_s"].as_f64()),
        (Some(21_600.0), Some(151_200.0))
    );
    // Run 2, stored without a usage: continuous operation, said so.
    let o = rtscope(&["analyze", "2", "--db", &db]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("Usage: continuous operation"), "{out}");
    assert!(out.contains("per day (24 h: continuous operation)"), "{out}");
    let j = json(&rtscope(&["analyze", "2", "--json", "--db", &db]));
    assert_eq!(j["series"][0]["tail"]["return_levels"]["day"]["period_s"], 86_400.0);
    // The report's tail table heads its columns with the usage.
    let o = rtscope(&["report", "1", "--format", "md", "-o", "-", "--db", &db]);
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", text(&o));
    assert!(md.contains("per day (8 h of use)") && md.contains("Usage: 8h a day, 5 days a week"), "{md}");
    let o = rtscope(&["report", "1", "--format", "md", "-o", "-", "--usage", "continuous", "--db", &db]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("per day (24 h: continuous operation)"));
    // The export keeps it in the plan: an imported copy reads the same.
    let o = rtscope(&["export", "1", "--db", &db]);
    assert!(o.status.success(), "{}", text(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["run"]["plan"]["usage"]["days_per_week"], 5, "{}", doc["run"]["plan"]);
    let file = dir.join("run1.json");
    std::fs::write(&file, &o.stdout).unwrap();
    let other = dir.join("other.db").display().to_string();
    let o = rtscope(&["import", file.to_str().unwrap(), "--db", &other]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&rtscope(&["analyze", "last", "--db", &other]).stdout).to_string();
    assert!(out.contains("per day (8 h of use)"), "{out}");
    // Bad input names the flag and the fix.
    for bad in ["8h", "30h/day", "8h/day,9d/week"] {
        let o = rtscope(&["analyze", "1", "--usage", bad, "--db", &db]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("--usage") && e.contains("e.g. --usage 8h/day,5d/week"), "{e}");
    }
}

/// A run without a release jitter (no wakeup.latency, no task.release) is
/// not taken for one by `rta --jitter-from` without `--series`: refused,
/// naming the series it has; with `--series` it is used.
#[test]
fn rta_takes_a_release_jitter_only_where_the_run_has_one_or_is_told() {
    let dir = tempdir();
    let db = db(&dir);
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(common::reports::data("report-run.json")).unwrap()).unwrap();
    for key in ["series", "results"] {
        for s in run[key].as_array_mut().unwrap() {
            s["probe"] = "noise".into();
            if s["metric"] == "latency" {
                s["metric"] = "interruption".into();
            }
        }
    }
    run["episodes"] = serde_json::json!([]);
    let file = dir.join("noise.json");
    std::fs::write(&file, serde_json::to_string(&run).unwrap()).unwrap();
    let o = rtscope(&["import", file.to_str().unwrap(), "--db", &db]);
    assert!(o.status.success(), "{}", text(&o));
    let tasks = dir.join("t.toml");
    std::fs::write(&tasks, "[[task]]\nname='io'\nwcet='200us'\nperiod='1ms'\n").unwrap();
    let rta = |more: &[&str]| {
        let mut args =
            vec!["analyze", "rta", "--tasks", tasks.to_str().unwrap(), "--jitter-from", "last", "--error-rate", "1e-3"];
        args.extend_from_slice(more);
        args.extend(["--db", &db]);
        rtscope(&args)
    };
    let o = rta(&[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--jitter-from last") && err.contains("no release jitter") && err.contains("noise.interruption"),
        "{err}"
    );
    // Judged (exit 2: a 2 ms jitter makes the 1 ms task miss).
    let o = rta(&["--series", "noise.interruption"]);
    assert!(matches!(o.status.code(), Some(0 | 2)), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("from noise.interruption"), "{}", text(&o));
}
