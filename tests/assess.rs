//! Loads, their characterisation and the assessment matrix, as root (CI
//! runs as root): the figures come from the stored characterisation, i.e.
//! from the kernel's counters.
//! What a run leaves behind when it ends or is stopped or killed is in
//! assess_signals.rs.

mod common;
use common::loads::*;
use common::*;
use std::process::Command;
use std::time::Duration;

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn loads_are_characterised_from_the_kernel_counters() {
    let fx = Fixture::root();
    let json = fx.dir.join("l.json");
    let o = rtscope_in(
        &fx.dir,
        &["load", "cpu,net,disk", "--duration", "4s", "--db", &fx.db, "--json", json.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json_file(&json);
    assert_eq!(v["status"], "complete");
    let c = &v["characterisation"][0];
    eprintln!("{c}");
    assert_eq!(c["load"], "cpu,net,disk");
    assert!(c["seconds"].as_f64().unwrap() >= 3.5, "{c}");
    for cpu in c["per_cpu"].as_array().unwrap() {
        assert!(cpu["busy_pct"].as_f64().unwrap() >= 90.0, "cpu load: CPU {} busy {}", cpu["cpu"], cpu["busy_pct"]);
    }
    let lo = c["net"].as_array().unwrap().iter().find(|n| n["iface"] == "lo").expect("traffic on lo");
    let rx = lo["rx_packets_per_s"].as_f64().unwrap();
    assert!(rx >= 225.0, "net load: {rx} packets/s on lo, want >= 90 % of 250");
    let w = c["disk_write_kb_per_s"].as_f64().unwrap();
    assert!(w >= 1024.0, "disk load: {w} kB/s written");
    assert!(leftovers(&fx.dir).is_empty(), "{:?}", leftovers(&fx.dir));
    let o = rtscope(&["show", "last", "--db", &fx.db]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("context switches/s") && out.contains("net lo rx packets/s"), "{out}");
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn the_quick_assessment_stores_every_probe_under_every_load() {
    let fx = Fixture::root();
    let json = fx.dir.join("q.json");
    let started = std::time::Instant::now();
    let o = rtscope_in(&fx.dir, &["run", "--quick", "--db", &fx.db, "--json", json.to_str().unwrap()]);
    let took = started.elapsed();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Planned at 51 s (a unit test checks the plan stays under 55 s). Not
    // a speed test: twice that means a cell did not stop at its end.
    assert!(took < Duration::from_secs(110), "--quick took {took:?}");
    let out = String::from_utf8_lossy(&o.stdout);
    for w in [
        "worst case (us)",
        "p99.9 (us)",
        "characterisation",
        "CPU score",
        "wakeup latency",
        "noise interruption",
        "osbench wake.futex-intra",
        "osbench pi.unlock-wake",
    ] {
        assert!(out.contains(w), "{w} missing: {out}");
    }
    // Nothing outlives a run that ended normally: no child (a load's, a
    // sender process, osbench's other party or janitor: their command lines
    // hold the store's path or the temporary directory), no temporary file.
    std::thread::sleep(Duration::from_millis(200));
    let dir = fx.dir.to_str().unwrap();
    assert!(running_with(dir).is_empty(), "{:?}", running_with(dir));
    assert!(leftovers(&fx.dir).is_empty(), "{:?}", leftovers(&fx.dir));
    let v = json_file(&json);
    assert_eq!(v["status"], "complete");
    assert_eq!(v["format_version"], 3);
    let rows = v["results"].as_array().unwrap();
    let probes = ["wakeup", "noise", "sleep", "ptimer", "netlat", "osbench"];
    for load in ["idle", "cpu", "net"] {
        for p in probes {
            let n: u64 = rows
                .iter()
                .filter(|r| r["probe"] == p && r["load"] == load)
                .map(|r| r["count"].as_u64().unwrap())
                .sum();
            assert!(n > 0, "{p} under {load}: no samples: {}", text(&o));
        }
    }
    let default = rtscope_model::descriptor::PROBES.iter().filter(|d| d.default).count();
    assert_eq!(default, probes.len(), "a new probe of the default plan joins this test too");
    // Every metric under every load (a probe measured again in a later
    // cell must not lose part of its metrics).
    let mut metrics: Vec<(String, String)> =
        rows.iter().map(|r| (r["probe"].as_str().unwrap().into(), r["metric"].as_str().unwrap().into())).collect();
    metrics.sort();
    metrics.dedup();
    for load in ["idle", "cpu", "net"] {
        for (p, m) in &metrics {
            let n: u64 = rows
                .iter()
                .filter(|r| r["probe"] == p.as_str() && r["metric"] == m.as_str() && r["load"] == load)
                .map(|r| r["count"].as_u64().unwrap())
                .sum();
            assert!(n > 0, "{p} {m} under {load}: no samples: {}", text(&o));
        }
    }
    // osbench: its 13 wake-up tests, a row each in the matrix, measured
    // under every load (checked above) within their share of the cell.
    let os: Vec<&(String, String)> = metrics.iter().filter(|(p, _)| p == "osbench").collect();
    assert_eq!(os.len(), rtscope::osbench::CELL_TESTS.len(), "{os:?}");
    // (Above the answer, which shows osbench's worst test.)
    let details = out.split_once("-- answer ").map_or(&*out, |d| d.0);
    for t in rtscope::osbench::CELL_TESTS {
        let row = format!("osbench {t} ");
        assert_eq!(details.matches(&row).count(), 2, "{row}: a row in each table: {out}");
    }
    for r in rows.iter().filter(|r| r["probe"] == "osbench") {
        let n = r["count"].as_u64().unwrap();
        assert!(n <= rtscope::osbench::CELL_MAX_SAMPLES, "{r}");
        assert!(r["base_ns"].is_u64() && r["inter_process"].is_boolean(), "{r}");
    }
    let ch = v["characterisation"].as_array().unwrap();
    let names: Vec<&str> = ch.iter().map(|c| c["load"].as_str().unwrap()).collect();
    assert_eq!(names, ["idle", "cpu", "net"]);
    assert!(ch[1]["cpu_busy_pct"].as_f64().unwrap() >= 90.0, "{}", ch[1]);
    assert!(ch[2]["net"].as_array().unwrap().iter().any(|n| n["iface"] == "lo"), "{}", ch[2]);
    assert!(v["cpu_score"]["score"].as_u64().unwrap() > 0);
    // The store has it all.
    let shown = show_json(&fx.db, "last");
    assert_eq!(shown["results"], v["results"]);
    assert_eq!(shown["characterisation"], v["characterisation"]);
    let o = rtscope(&["export", "last", "--format", "csv", "--db", &fx.db]);
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("run_id,probe,metric,cpu,lowest_ns,highest_ns,count,load"));
}

/// A plan's `[args] osbench` picks the tests and the samples; each test is
/// a row of the matrix, a series per load, shown per load in the report.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_plan_gives_osbench_its_own_arguments_under_two_loads() {
    let fx = Fixture::root();
    let plan = fx.dir.join("os.toml");
    std::fs::write(
        &plan,
        "probes = [\"osbench\"]\nloads = [\"idle\", \"cpu\"]\nduration = \"1s\"\nwarmup = \"0s\"\n\
         ramp_up = \"300ms\"\nscore = \"100ms\"\n[args]\n\
         osbench = [\"-t\", \"wake.futex-intra\", \"-t\", \"wake.mq-inter\", \"-n\", \"2000\"]\n",
    )
    .unwrap();
    let json = fx.dir.join("os.json");
    let o = rtscope_in(&fx.dir, &["run", plan.to_str().unwrap(), "--db", &fx.db, "--json", json.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    // The matrix, a row per test in each of its two tables, then the
    // answer last (osbench's worst test).
    let (details, summary) = out.split_once("-- answer ").expect("the answer under the details");
    assert!(summary.contains("osbench wake.") && summary.contains(" n=2.0k"), "{summary}");
    for row in ["osbench wake.futex-intra", "osbench wake.mq-inter"] {
        assert_eq!(details.matches(row).count(), 2, "{row}: {out}");
    }
    assert!(!out.contains("osbench wake.pipe"), "only the tests of -t: {out}");
    let v = json_file(&json);
    assert_eq!(v["status"], "complete", "{}", v["run"]["notes"]);
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "{rows:?}");
    for load in ["idle", "cpu"] {
        for (test, inter) in [("wake.futex-intra", false), ("wake.mq-inter", true)] {
            let r = rows
                .iter()
                .find(|r| r["metric"] == test && r["load"] == load)
                .unwrap_or_else(|| panic!("{test} under {load} missing"));
            assert_eq!(r["probe"], "osbench");
            assert_eq!(r["count"], 2000, "-n 2000 fits the cell: {r}");
            assert_eq!(r["inter_process"], inter, "{r}");
            assert!(r["p50_ns"].as_i64().unwrap() >= 200, "a wake-up takes a context switch: {r}");
        }
    }
    let cell = &v["run"]["plan"]["cells"][0];
    assert_eq!(cell["metrics"], serde_json::json!(["wake.futex-intra", "wake.mq-inter"]), "{cell}");
    assert_eq!(cell["settings"]["samples"], 2000, "{cell}");
    // The report shows each test per load.
    let html = fx.dir.join("os.html");
    let o = rtscope(&["report", "last", "--db", &fx.db, "-o", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let html = std::fs::read_to_string(&html).unwrap();
    for w in ["osbench: OS services", "wake.mq-inter [cpu]", "wake.futex-intra [idle]", "a curve per load"] {
        assert!(html.contains(w), "{w} missing in the report");
    }
}

/// Two instances of wakeup at two priorities in one run (the WDM latency
/// study's priorities 28 and 24 at once), from a plan file: measured
/// together in one cell, stored as two series, shown as two rows. Under a SCHED_FIFO 90 spinner of 400 us
/// every 20.333 ms on the measured CPU, the instance at 80 waits for every
/// burst that holds one of its programmed instants (judged as `wakeup`'s
/// ground truth is), and the one at 95 preempts the spinner: no sample of
/// it programmed inside a burst (150 us or more before its end) is late by
/// the rest of the burst more often than the host's stalls of that size
/// explain.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn two_priorities_of_wakeup_in_one_run_are_two_series_and_the_lower_waits_for_a_spinner_between() {
    let fx = Fixture::root();
    let cpu = last_cpu() as u64;
    let c = cpu.to_string();
    let plan = fx.dir.join("prio.toml");
    std::fs::write(
        &plan,
        format!(
            "probes = [\"wakeup@95\", \"wakeup@80\"]\nloads = [\"idle\"]\ncpus = \"{c}\"\nduration = \"5s\"\n\
             warmup = \"500ms\"\nramp_up = \"300ms\"\nscore = \"100ms\"\n[args]\nwakeup = [\"--exceed\", \"30us\"]\n"
        ),
    )
    .unwrap();
    let spinner = truth::Disturber::start_at(&fx.dir, &c, "90", "20333us", "400us", "40s");
    let o = rtscope_in(&fx.dir, &["run", plan.to_str().unwrap(), "--db", &fx.db, "--quiet"]);
    let bursts = spinner.finish();
    assert!(matches!(o.status.code(), Some(0) | Some(2)), "{}", text(&o));
    let doc = export(&fx.db, &[]);
    let rows = doc["results"].as_array().unwrap();
    let row = |p: &str| rows.iter().find(|r| r["probe"] == p && r["metric"] == "latency").expect(p);
    let cells = doc["run"]["plan"]["cells"].as_array().unwrap();
    for (p, prio) in [("wakeup@95", 95), ("wakeup@80", 80)] {
        assert!(row(p)["count"].as_u64().unwrap() > 3_000, "{p}");
        let cell = cells.iter().find(|c| c["probe"] == p).expect(p);
        assert_eq!(cell["common"]["priority"], prio, "{cell}");
    }
    // Together: over the same seconds, in one cell.
    assert_eq!(doc["run"]["plan"]["instances"], "together");
    let (s95, s80) = (
        probe_exceedances(&doc, Some("wakeup@95"), "latency", cpu).1,
        probe_exceedances(&doc, Some("wakeup@80"), "latency", cpu).1,
    );
    assert!(s95.1.min(s80.1) > s95.0.max(s80.0) + 4_000_000_000, "not measured together: {s95:?} {s80:?}");
    // The lower instance waits for each burst.
    let (exc, span) = probe_exceedances(&doc, Some("wakeup@80"), "latency", cpu);
    let samples: Vec<(u64, u64)> = exc.iter().map(|&(t, v)| (t - v, v)).collect();
    let total = row("wakeup@80")["count"].as_u64().unwrap();
    let met = truth::judge_timer("wakeup@80", &samples, 1_000_000, 30_000, total, &bursts, span);
    assert!(met.len() >= 30, "only {} samples of wakeup@80 met by a burst", met.len());
    // The higher one does not.
    let (exc, span) = probe_exceedances(&doc, Some("wakeup@95"), "latency", cpu);
    let inside: Vec<&truth::Burst> = bursts.iter().filter(|b| b.start >= span.0 && b.end <= span.1).collect();
    assert!(inside.len() >= 150, "{} bursts in the wakeup@95 cell", inside.len());
    let blocked: Vec<(u64, u64)> = exc
        .iter()
        .map(|&(t, v)| (t - v, v))
        .filter(|&(p, v)| inside.iter().any(|b| p >= b.start && p + 150_000 <= b.end && v + 20_000 >= b.end - p))
        .collect();
    let host =
        exc.iter().filter(|&&(t, v)| v > 100_000 && !bursts.iter().any(|b| b.near(t - v, t, 100_000))).count() as u64;
    let total95 = row("wakeup@95")["count"].as_u64().unwrap();
    let q = truth::rate_upper(host, total95, 0.002);
    // About 0.25 of a programmed instant per burst lies 150 us or more before its end.
    let allowed = truth::binomial_upper(inside.len() as u64, q, truth::FALSE_FAILURE);
    eprintln!(
        "wakeup@95: {} of its samples in {} bursts blocked by them ({host} host stalls, {allowed} allowed)",
        blocked.len(),
        inside.len()
    );
    assert!(blocked.len() as u64 <= allowed, "wakeup@95 waited for a spinner below it: {blocked:?}");
    // Two rows, each instance its own.
    let shown = rtscope(&["show", "last", "--db", &fx.db]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("wakeup@95 latency") && shown.contains("wakeup@80 latency"), "{shown}");
}

/// A task set in the plan is stored with the run and judged at its end
/// with the measured wake-up latency as release jitter: a task whose
/// deadline is its execution time misses with any jitter at all, so the
/// run exits with code 2, as `report` and `analyze` do on it; their
/// numbers are `analyze rta --jitter-from`'s.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_task_set_in_the_plan_is_judged_with_the_measured_jitter() {
    let fx = Fixture::root();
    let task = "[[task]]\nname = \"edge\"\nwcet = \"1ms\"\nperiod = \"10ms\"\ndeadline = \"1ms\"\n";
    let plan = fx.dir.join("sched.toml");
    std::fs::write(
        &plan,
        format!(
            "probes = [\"wakeup\"]\nloads = [\"idle\"]\nduration = \"2s\"\nwarmup = \"0s\"\nramp_up = \"0s\"\n\
             score = \"100ms\"\ncpus = \"{}\"\nerror_rate = 0.01\n{task}",
            last_cpu()
        ),
    )
    .unwrap();
    // Bad input is refused before anything is measured, naming it.
    let p = plan.to_str().unwrap();
    let o = rtscope_in(&fx.dir, &["run", p, "--tasks", "/nonexistent/set.toml", "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--tasks /nonexistent/set.toml: cannot read it"), "{}", text(&o));
    let o = rtscope_in(&fx.dir, &["run", "--quick", "--error-rate", "1e-3", "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--error-rate needs a task set"), "{}", text(&o));
    let o = rtscope_in(&fx.dir, &["run", p, "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains(&format!("schedulability · The task set {p} [[task]], stored with the run")), "{out}");
    assert!(out.contains("FAIL            task set") && out.contains("edge: R = "), "{out}");
    let stored = &show_json(&fx.db, "last")["run"]["plan"]["schedulability"];
    assert_eq!((&stored["error_rate"], &stored["tasks"][0]["deadline_ns"]), (&0.01.into(), &1_000_000.into()));
    // analyze and report apply it; analyze rta on the same run agrees.
    let file = fx.dir.join("edge.toml");
    std::fs::write(&file, task).unwrap();
    let o = rtscope(&[
        "analyze",
        "rta",
        "--tasks",
        file.to_str().unwrap(),
        "--jitter-from",
        "last",
        "--error-rate",
        "0.01",
        "--json",
        "--db",
        &fx.db,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let want: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let o = rtscope(&["analyze", "last", "--json", "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &v["schedulability"];
    assert_eq!(
        (&s["tasks_from"], &s["verdict"]["status"], &v["passed"]),
        (&"stored".into(), &"fail".into(), &false.into())
    );
    assert_eq!(s["measured"]["tasks"], want["tasks"]);
    assert_eq!(s["measured"]["pseudo_worst_case"], want["pseudo_worst_case"]);
    let lat = want["pseudo_worst_case"]["latency_ns"].as_u64().unwrap();
    assert!(lat > 0 && want["tasks"][0]["response_time_ns"] == 1_000_000 + lat, "{want}");
    assert!(want["pseudo_worst_case"]["source"].as_str().unwrap().contains("(observed, "), "{want}");
    let o = rtscope(&["report", "last", "-o", "-", "--format", "md", "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(
        md.contains("### Schedulability")
            && md.contains("| edge | 1 | 1ms | 10ms | 1ms | 0ns | 0ns | 1ms | 0ns | meets |"),
        "{md}"
    );
}

/// A busy loop of its own name (`busy-N`, its `comm`) on `cpu` at `nice`,
/// killed when dropped.
struct BusyLoop {
    child: std::process::Child,
    name: String,
}

impl BusyLoop {
    fn start(dir: &std::path::Path, cpu: usize, nice: i32) -> BusyLoop {
        use std::os::unix::fs::PermissionsExt;
        let name = format!("busy-{}", std::process::id() % 100_000);
        let script = dir.join(&name);
        std::fs::write(&script, "#!/bin/sh\nwhile :; do :; done\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let child = Command::new("nice")
            .args([&format!("-n{nice}"), "taskset", "-c", &cpu.to_string(), script.to_str().unwrap()])
            .spawn()
            .unwrap();
        // `nice` and `taskset` exec the script: the pid is the loop's.
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while std::fs::read_to_string(format!("/proc/{}/comm", child.id())).unwrap_or_default().trim() != name {
            assert!(std::time::Instant::now() < until, "the busy loop never started");
            std::thread::sleep(Duration::from_millis(10));
        }
        BusyLoop { child, name }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Still running (it was not what stopped).
    fn alive(&self) -> bool {
        std::path::Path::new(&format!("/proc/{}", self.pid())).exists()
    }
}

impl Drop for BusyLoop {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A stream of short-lived busy processes on `cpu`, as a build beside a
/// load makes: a new one every 0.2 s, each busy until killed 0.2 s later,
/// so that none lives from one of the sampler's one-second samples to the
/// next. Its process group is killed when dropped.
struct ShortLived(std::process::Child);

impl ShortLived {
    fn start(cpu: usize) -> ShortLived {
        use std::os::unix::process::CommandExt;
        let cpu = cpu.to_string();
        let stream = "while :; do timeout 0.2 sh -c 'while :; do :; done'; done";
        ShortLived(Command::new("taskset").args(["-c", &cpu, "sh", "-c", stream]).process_group(0).spawn().unwrap())
    }
}

impl Drop for ShortLived {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", self.0.id())]).status();
        let _ = self.0.wait();
    }
}

/// A stand-in for stress-ng that sleeps, in `fx.dir`/bin: the PATH that
/// finds it first.
fn sleeping_stress_ng(fx: &Fixture) -> String {
    let bin = fx.dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("stress-ng");
    std::fs::write(&fake, "#!/bin/sh\nexec sleep 60\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_load_whose_command_cannot_start_or_keeps_failing_fails_with_its_error() {
    let fx = Fixture::root();
    // Not there: the shell says so (exit status 127) at once.
    // A 60 s run that ends well before: a slow start of a loaded machine
    // cannot take it there, a load failure that is not acted on does.
    let started = std::time::Instant::now();
    let o = rtscope_in(&fx.dir, &["load", "cmd:'/nope/x'", "-D", "60s", "--db", &fx.db, "-q"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(started.elapsed() < Duration::from_secs(30), "it stops when the load fails: {:?}", started.elapsed());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("exit status 127") && err.contains("/nope/x: not found"), "{err}");
    let v = show_json(&fx.db, "last");
    assert_eq!(v["status"], "failed", "{}", v["run"]["notes"]);
    let notes = v["run"]["notes"].to_string();
    assert!(notes.contains("cannot start") && notes.contains("/nope/x: not found"), "{notes}");
    let failure = v["characterisation"][0]["failure"].as_str().unwrap_or_default();
    assert!(failure.contains("exit status 127"), "{}", v["characterisation"]);
    // Starts, then fails at once, over and over: its status and its stderr.
    let o = rtscope_in(&fx.dir, &["load", "cmd:'echo broken-config >&2; exit 3'", "-D", "5s", "--db", &fx.db, "-q"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("exit status 3") && err.contains("broken-config") && err.contains("3 times"), "{err}");
    // In an assessment, its cells fail with that error and are not
    // measured; the other load's are.
    let loads = "idle,cmd:'/nope/x'";
    let cpu = last_cpu().to_string();
    let args = ["run", "--quick", "--probes", "wakeup", "--loads", loads, "--cpus", &cpu, "-D", "1s", "--db", &fx.db];
    let o = rtscope_in(&fx.dir, &args);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let row = out.lines().find(|l| l.starts_with("load as asked?")).unwrap_or_default();
    assert!(row.contains("failed"), "the matrix says which column failed: {out}");
    let v = show_json(&fx.db, "last");
    assert_eq!(v["status"], "failed");
    let notes = v["run"]["notes"].to_string();
    assert!(notes.contains("wakeup under cmd:'/nope/x': not measured") && notes.contains("not found"), "{notes}");
    let results = v["results"].as_array().unwrap();
    assert!(results.iter().any(|r| r["load"] == "idle" && r["count"].as_u64() > Some(0)), "{results:?}");
    assert!(results.iter().all(|r| r["load"] == "idle"), "nothing measured under the failed load: {results:?}");
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_load_short_of_its_target_is_flagged_with_what_took_the_cpu() {
    let fx = Fixture::root();
    let cpu = last_cpu();
    let load = format!("cpu@{cpu}");
    // Without a competitor: short only when other processes took the CPU.
    let json = fx.dir.join("alone.json");
    let o = rtscope_in(&fx.dir, &["load", &load, "-D", "3s", "--db", &fx.db, "-q", "--json", json.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let c = json_file(&json)["characterisation"][0].clone();
    let check = &c["checks"][0];
    eprintln!("alone: {check}");
    assert_eq!(check["measure"], "cpu_busy", "{c}");
    assert_eq!((check["asked"].as_f64(), check["limit"].as_f64()), (Some(100.0), Some(90.0)), "{check}");
    let achieved = check["achieved"].as_f64().unwrap();
    assert!(achieved >= 90.0 || c["others_busy_pct"].as_f64().unwrap() > 5.0, "{c}");
    // A busy loop at nice -20 beside it leaves it about 1 % of the CPU.
    let busy = BusyLoop::start(&fx.dir, cpu, -20);
    let json = fx.dir.join("short.json");
    let o = rtscope_in(&fx.dir, &["load", &load, "-D", "3s", "--db", &fx.db, "-q", "--json", json.to_str().unwrap()]);
    assert!(busy.alive());
    assert_eq!(o.status.code(), Some(0), "a load short of its target is flagged, not failed: {}", text(&o));
    let v = json_file(&json);
    let c = &v["characterisation"][0];
    let check = &c["checks"][0];
    eprintln!("beside a busy loop: {check}");
    assert_eq!(check["flagged"], true, "{c}");
    assert!(check["achieved"].as_f64().unwrap() < 50.0, "{check}");
    let named = format!("{} (pid {})", busy.name, busy.pid());
    assert!(check["message"].as_str().unwrap().contains(&named), "{check}");
    assert!(c["others"].as_array().unwrap().iter().any(|p| p["pid"].as_u64() == Some(busy.pid().into())), "{c}");
    assert!(v["run"]["notes"].to_string().contains(&format!("load check: {load} fell short")), "{}", v["run"]);
    drop(busy);
    let o = rtscope(&["show", "last", "--db", &fx.db]);
    let out = String::from_utf8_lossy(&o.stdout);
    let row = out.lines().find(|l| l.starts_with("load as asked?")).unwrap_or_default();
    assert!(row.contains("short"), "{out}");
    // A stress-ng asked for CPU workers that does nothing of the kind (a
    // stand-in that sleeps) is flagged too, whatever else runs on the
    // machine (rtscope's own work is counted from its processes' CPU time,
    // not as what other processes seen at a sample left).
    let path = sleeping_stress_ng(&fx);
    let json = fx.dir.join("sleeps.json");
    let o = Command::new(BIN)
        .args(["load", &format!("stress-ng:'--cpu 1'@{cpu}"), "-D", "3s", "--db", &fx.db, "-q"])
        .args(["--json", json.to_str().unwrap()])
        .env("TMPDIR", &fx.dir)
        .env("PATH", path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let check = json_file(&json)["characterisation"][0]["checks"][0].clone();
    eprintln!("a stress-ng that sleeps: {check}");
    assert_eq!(check["flagged"], true, "{check}");
    assert!(check["achieved"].as_f64().unwrap() < 50.0, "{check}");
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn processes_that_come_and_go_between_samples_are_not_counted_as_the_load() {
    let fx = Fixture::root();
    let cpu = last_cpu();
    let path = sleeping_stress_ng(&fx);
    // Beside a stream of short-lived busy processes on its CPU, which no
    // one-second sample sees whole: a stress-ng that sleeps achieved
    // nothing (the processes seen at a sample left it some 80 %).
    let stream = ShortLived::start(cpu);
    std::thread::sleep(Duration::from_millis(300));
    let json = fx.dir.join("stream.json");
    let o = Command::new(BIN)
        .args(["load", &format!("stress-ng:'--cpu 1'@{cpu}"), "-D", "3s", "--db", &fx.db, "-q"])
        .args(["--json", json.to_str().unwrap()])
        .env("TMPDIR", &fx.dir)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let c = json_file(&json)["characterisation"][0].clone();
    let check = &c["checks"][0];
    eprintln!("a stress-ng that sleeps beside short-lived processes: {check}");
    assert_eq!(check["flagged"], true, "{c}");
    assert!(check["achieved"].as_f64().unwrap() < 20.0, "{c}");
    assert!(c["others_gone_pct"].as_f64().unwrap() > 30.0, "{c}");
    assert!(check["message"].as_str().unwrap().contains("of it by processes that came and went"), "{check}");
    // Nor is an idle load beside it idle, though the processes seen at a
    // sample used a fraction of its CPU.
    let json = fx.dir.join("idle.json");
    let idle = format!("idle@{cpu}");
    let o = rtscope_in(&fx.dir, &["load", &idle, "-D", "3s", "--db", &fx.db, "-q", "--json", json.to_str().unwrap()]);
    drop(stream);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let c = json_file(&json)["characterisation"][0].clone();
    let check = &c["checks"][0];
    eprintln!("an idle load beside short-lived processes: {check}");
    assert_eq!((check["measure"].as_str(), check["flagged"].as_bool()), (Some("others_busy"), Some(true)), "{c}");
    assert!(check["achieved"].as_f64().unwrap() > 60.0, "{c}");
    assert!(check["message"].as_str().unwrap().contains("of it by processes that came and went"), "{check}");
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn an_idle_column_beside_a_busy_process_is_flagged_naming_it() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    let busy = BusyLoop::start(&fx.dir, last_cpu(), 0);
    // noise spins on the CPU half of the time (its duty cycle): rtscope's
    // own work, which does not make the column busy.
    let json = fx.dir.join("idle.json");
    let args = ["run", "--quick", "--probes", "noise", "--loads", "idle", "--cpus", &cpu, "--load-cpus", &cpu];
    let more = ["-D", "3s", "--db", &fx.db, "--json", json.to_str().unwrap()];
    let (pid, o) = rtscope_pid_in(&fx.dir, &[&args[..], &more[..]].concat());
    assert!(busy.alive());
    assert_eq!(o.status.code(), Some(0), "a busy idle column is flagged, not failed: {}", text(&o));
    let v = json_file(&json);
    let c = &v["characterisation"][0];
    let check = &c["checks"][0];
    eprintln!("{check}\n{}", c["others"]);
    assert_eq!((check["measure"].as_str(), check["flagged"].as_bool()), (Some("others_busy"), Some(true)), "{c}");
    assert!(check["achieved"].as_f64().unwrap() > 20.0, "{check}");
    let named = format!("{} (pid {})", busy.name, busy.pid());
    assert!(check["message"].as_str().unwrap().contains(&named), "{check}");
    // The run's own process is not another's (another rtscope on the
    // machine, a monitor say, may be).
    assert!(c["others"].as_array().unwrap().iter().all(|p| p["pid"].as_u64() != Some(pid as u64)), "{c}");
    let own = c["own_pct"].as_f64().unwrap();
    assert!(own >= 25.0, "noise's spinner is rtscope's own work, not another process's: {c}");
    assert!(v["run"]["notes"].to_string().contains("idle was not idle"), "{}", v["run"]["notes"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let row = out.lines().find(|l| l.starts_with("load as asked?")).unwrap_or_default();
    assert!(row.contains("not idle"), "{out}");
    assert!(out.contains(&named), "the report names it: {out}");
}

/// The usage model is stored with the run: from a campaign file's `usage`
/// key (overridden by --usage) and from a probe command's --usage; analyze
/// reads it back without the flag. A bad key names the file and the fix.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn the_usage_model_is_stored_with_run_and_probe_runs() {
    let fx = Fixture::root();
    let c = last_cpu().to_string();
    let plan = fx.dir.join("usage.toml");
    let body = format!(
        "probes = [\"wakeup\"]\nloads = [\"idle\"]\ncpus = \"{c}\"\nduration = \"1s\"\nwarmup = \"100ms\"\n\
         ramp_up = \"100ms\"\nscore = \"100ms\"\nusage = \"6h/day,5d/week\"\n"
    );
    std::fs::write(&plan, &body).unwrap();
    let o = rtscope_in(&fx.dir, &["run", plan.to_str().unwrap(), "--db", &fx.db, "--quiet"]);
    assert!(matches!(o.status.code(), Some(0) | Some(2)), "{}", text(&o));
    let doc = export(&fx.db, &[]);
    assert_eq!(doc["run"]["plan"]["usage"]["per_day_ns"], 21_600_000_000_000u64, "{}", doc["run"]["plan"]);
    let out = String::from_utf8_lossy(&rtscope(&["analyze", "last", "--db", &fx.db]).stdout).to_string();
    // The sentence always; the labels where the short cell's tail was fitted.
    assert!(out.contains("Usage: 6h a day, 5 days a week"), "{out}");
    assert!(!out.contains("expected worst case (95") || out.contains("per day (6 h of use)"), "{out}");
    // --usage over the file's key.
    let args = ["run", plan.to_str().unwrap(), "--usage", "8h/day", "--db", &fx.db, "--quiet"];
    let o = rtscope_in(&fx.dir, &args);
    assert!(matches!(o.status.code(), Some(0) | Some(2)), "{}", text(&o));
    let doc = export(&fx.db, &[]);
    assert_eq!(doc["run"]["plan"]["usage"]["per_day_ns"], 28_800_000_000_000u64, "{}", doc["run"]["plan"]);
    assert_eq!(doc["run"]["plan"]["usage"]["days_per_week"], 7);
    // A probe command.
    let o = rtscope(&["wakeup", "--cpus", &c, "-D", "1s", "--usage", "8h/day,5d/week", "--db", &fx.db, "-q"]);
    assert!(matches!(o.status.code(), Some(0) | Some(2)), "{}", text(&o));
    let doc = export(&fx.db, &[]);
    assert_eq!(doc["run"]["plan"]["usage"]["days_per_week"], 5, "{}", doc["run"]["plan"]);
    let j: serde_json::Value =
        serde_json::from_slice(&rtscope(&["analyze", "last", "--json", "--db", &fx.db]).stdout).unwrap();
    let tail = &j["series"][0]["tail"];
    assert!(tail.is_null() || tail["return_levels"]["week"]["period_s"] == 144_000.0, "{}", j["series"][0]);
    let out = String::from_utf8_lossy(&rtscope(&["analyze", "last", "--db", &fx.db]).stdout).to_string();
    assert!(out.contains("Usage: 8h a day, 5 days a week"), "{out}");
    // A bad key in the file is refused before anything is measured.
    std::fs::write(&plan, body.replace("6h/day,5d/week", "6h/month")).unwrap();
    let o = rtscope_in(&fx.dir, &["run", plan.to_str().unwrap(), "--db", &fx.db, "--quiet"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("usage.toml: TOML parse error at line 8")
            && e.contains("usage '6h/month'")
            && e.contains("e.g. --usage 8h/day,5d/week"),
        "{e}"
    );
}
