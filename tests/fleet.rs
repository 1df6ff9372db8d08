//! The fleet report against the real engine: monitors scraped by a
//! Prometheus server (Debian's `prometheus` package, which `.ci/run`
//! installs), read back with `rtscope report --prometheus` and `rtscope
//! compare --prometheus`. A fleet of four monitors, each in a network
//! namespace of its own on a veth pair, one of them with a SCHED_FIFO
//! disturber on its CPU: the report ranks it first, and the shipped alert
//! rule fires for it in the live server.

mod common;
use common::netns::Namespaces;
use common::prom::*;
use common::truth::Disturber;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn prometheus_installed() -> bool {
    has(
        "Debian's prometheus package (prometheus; .ci/run installs it)",
        which("prometheus").is_some() && which("promtool").is_some(),
    )
}

/// Waits (at most `secs`) until Prometheus holds `n` scrapes (a second
/// apart) of every one of `machines` monitors of the job: `n` seconds of
/// their data, whatever the monitors counted before Prometheus started;
/// panics with its log otherwise.
fn wait_for_fleet(prom: &Prometheus, dir: &Path, machines: usize, n: f64, secs: u64) {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let got = prom.query("count_over_time(rtscope_checkpoints_total{job=\"rtscope\"}[5m])", None);
        if got.len() >= machines && got.iter().all(|g| g.2 >= n) {
            return;
        }
        assert!(
            Instant::now() < until,
            "Prometheus got no {n} checkpoints of {machines} monitors in {secs} s: {got:?}; its log:\n{}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn report(args: &[&str]) -> Output {
    let o = rtscope(args);
    eprintln!("rtscope {}:\n{}", args.join(" "), text(&o));
    o
}

/// `rtscope report --prometheus URL` of the job's monitors over `range` in
/// `step`s, its JSON into `json`, and `extra` flags.
fn fleet_report(url: &str, range: &str, step: &str, json: &Path, extra: &[&str]) -> Output {
    let mut a =
        vec!["report", "--prometheus", url, "--selector", "{job=\"rtscope\"}", "--range", range, "--step", step];
    a.extend_from_slice(&["--json", json.to_str().unwrap()]);
    a.extend_from_slice(extra);
    report(&a)
}

/// `report --prometheus` and `compare --prometheus` over one monitor,
/// scraped with native histograms: the machine's samples come back with
/// their maximum, and two ranges of it compare as two runs; an empty
/// selector is refused naming the flag.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn report_and_compare_read_a_monitor_back_from_prometheus() {
    let fx = Fixture::root();
    if !prometheus_installed() {
        return;
    }
    let (dir, db) = (&fx.dir, fx.db.as_str());
    let cpu = last_cpu();
    let port = free_port();
    let _mon = start_monitor(dir, db, cpu, port, "monitor.log");
    let prom = Prometheus::start(dir, port, &["--enable-feature=native-histograms"]);
    // The ranges compared below reach 12 s back, in steps of 3 s.
    wait_for_fleet(&prom, dir, 1, 15.0, 60);
    let url = format!("http://127.0.0.1:{}", prom.port);
    let json = dir.join("fleet.json");
    let o = report(&["report", "--prometheus", &url, "--selector", "{job=\"rtscope\"}", "--range", "10s"]);
    assert_eq!(o.status.code(), Some(0));
    let o = fleet_report(&url, "10s", "5s", &json, &["-o", dir.join("fleet.md").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let doc = json_file(&json);
    assert_eq!(doc["machines"].as_array().unwrap().len(), 1, "{doc}");
    let m = &doc["machines"][0];
    assert_eq!(m["instance"], format!("127.0.0.1:{port}"));
    let row = &m["series"][0];
    assert_eq!(
        (row["probe"].as_str(), row["metric"].as_str(), row["cpu"].as_u64()),
        (Some("wakeup"), Some("latency"), Some(cpu as u64))
    );
    // 10 s at 1 kHz, as increase() sees it over 5 s steps. The counter
    // moves by a checkpoint's thousand at once, every second, and each
    // step's increase between its first and last scrape (1 s apart) is
    // extrapolated to the step's edges: a step whose scrapes span 3 s and
    // hold four checkpoints reads 5/3 of them (12,508 seen once).
    let samples = row["samples"].as_u64().unwrap();
    assert!((5_000..=17_000).contains(&samples), "{samples} samples in 10 s at 1 kHz: {row}");
    assert!(row["max_ns"].as_i64().unwrap() >= row["p999_le_ns"].as_i64().unwrap(), "{row}");
    assert_eq!(doc["source"]["native_series"], 1, "{doc}");
    let md = std::fs::read_to_string(dir.join("fleet.md")).unwrap();
    assert!(md.contains("Fleet, worst case first") && md.contains(&format!("127.0.0.1:{port}")), "{md}");

    // Two ranges of the machine, compared as two runs.
    let cmp = |extra: &[&str]| {
        let mut a = vec!["compare", "--prometheus", &url, "--range", "6s@now-6s", "--range", "6s", "--step", "3s"];
        a.extend_from_slice(extra);
        report(&a)
    };
    let o = cmp(&["--json"]);
    assert_eq!(o.status.code(), Some(0));
    let c: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(c.to_string().contains("wakeup"), "{c}");
    // The gate reads the ranges as runs: a figure gated with a delta no
    // latency reaches passes (missed periods, from 0 in a quiet range,
    // would fail any ratio).
    let gated = cmp(&["--max-regression", "100000", "--min-delta", "1s", "--gate", "wakeup.latency.p99"]);
    assert_eq!(gated.status.code(), Some(0));
    assert!(text(&gated).contains("--max-regression: PASS"), "{}", text(&gated));

    // What is not there is said, naming the flag.
    let o = report(&["report", "--prometheus", &url, "--selector", "{job=\"nothing\"}", "--range", "10s"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("--selector {job=\"nothing\"}: no rtscope monitor"), "{}", text(&o));
    let o = report(&["compare", "--prometheus", &url, "--range", "10s"]);
    assert!(o.status.code() == Some(1) && text(&o).contains("--range: compare takes two ranges"), "{}", text(&o));
}

/// Flags that cannot work are refused before anything is read.
#[test]
fn fleet_flags_are_refused_naming_the_flag() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    for (args, says) in [
        (vec!["report", "--prometheus", url.as_str()], "--prometheus http://127.0.0.1"),
        (vec!["report", "--prometheus", "https://prom:9090"], "https is not supported yet"),
        (vec!["report", "--prometheus", url.as_str(), "--range", "7x"], "--range '7x'"),
        (vec!["report", "--prometheus", url.as_str(), "--selector", "up"], "--selector 'up' is not a series selector"),
        (vec!["report", "--prometheus", url.as_str(), "--at", "soon"], "--at 'soon' is not a time"),
        (vec!["report", "--prometheus", url.as_str(), "-o", "x.csv"], "the fleet report is written as text"),
        (vec!["report", "--range", "1h", "-o", "x.html", "last"], "--prometheus"),
    ] {
        let o = rtscope(&args);
        let t = text(&o);
        assert!(matches!(o.status.code(), Some(1 | 2)) && t.contains(says), "{args:?}: {t}");
    }
}

/// A monitor in namespace `ns`, listening on `addr:9733`.
fn monitor_in(ns: &str, addr: &str, dir: &Path, cpu: usize, i: usize) -> Monitor {
    let log = std::fs::File::create(dir.join(format!("monitor-{i}.log"))).unwrap();
    let db: PathBuf = dir.join(format!("monitor-{i}.db"));
    let child: Child = Command::new("ip")
        .args(["netns", "exec", ns, BIN, "monitor", "--cpus", &cpu.to_string(), "--checkpoint", "1s"])
        .args(["--db", db.to_str().unwrap(), "--listen", &format!("{addr}:9733")])
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    Monitor(child)
}

/// Four monitors, each in its own network namespace, scraped by one
/// Prometheus; one has a SCHED_FIFO disturber on its CPU (a period that is
/// no multiple of the probe's 1 ms). The fleet report ranks it first, its
/// worst case at least half a burst, its p99 above a quarter of one and the
/// others' below; the shipped rule on the worst case fires for it in the
/// live server.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn the_fleet_report_ranks_the_disturbed_machine_first() {
    let fx = Fixture::root();
    let last = last_cpu();
    if !prometheus_installed() || !has("iproute2 (ip)", which("ip").is_some()) || !has("two CPUs", last > 0) {
        return;
    }
    let dir = &fx.dir;
    // Declared first, dropped last: after every process in the namespaces.
    let (ns, addrs) = Namespaces::create("fleet", 4);
    // The disturbed machine measures the last CPU; the others CPU 0.
    let mut monitors = Vec::new();
    for (i, (n, a)) in ns.names.iter().zip(&addrs).enumerate() {
        let cpu = if i == 2 { last } else { 0 };
        monitors.push(monitor_in(n, a, dir, cpu, i));
    }
    // Bursts of 20 ms: on a guest whose vCPUs the host packs, a burst on
    // one vCPU stalls the other now and then too (up to about 11 ms seen
    // on the 2-vCPU CI guest); the disturbed machine's worst case is a
    // whole burst, well above that.
    let spin_ns = 20_000_000;
    let disturber = Disturber::start(dir, &last.to_string(), "60.333ms", "20ms", "50s");
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/prometheus/rtscope-alerts.yml");
    let targets: Vec<String> = addrs.iter().map(|a| format!("'{a}:9733'")).collect();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\n\
         scrape_configs:\n  - job_name: rtscope\n    static_configs:\n      - targets: [{}]\n",
        rules.display(),
        targets.join(", ")
    );
    let prom = Prometheus::start_config(dir, &config, &[]);
    wait_for_fleet(&prom, dir, 4, 15.0, 45);
    let disturbed = format!("{}:9733", addrs[2]);

    // The shipped rule on the worst case fires for the disturbed machine.
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        let a = prom.answer_path("/api/v1/alerts");
        let fired = a["data"]["alerts"].as_array().into_iter().flatten().any(|al| {
            al["labels"]["alertname"] == "RtscopeWorstCaseOverRequirement"
                && al["labels"]["instance"] == disturbed.as_str()
                && al["state"] == "firing"
        });
        if fired {
            break;
        }
        assert!(Instant::now() < until, "RtscopeWorstCaseOverRequirement did not fire for {disturbed}: {a}");
        std::thread::sleep(Duration::from_millis(500));
    }

    let url = format!("http://127.0.0.1:{}", prom.port);
    let json = dir.join("fleet.json");
    let o = fleet_report(&url, "14s", "7s", &json, &[]);
    let bursts = disturber.finish();
    drop(monitors);
    assert_eq!(o.status.code(), Some(0), "the yardstick never changes the exit code");
    let doc = json_file(&json);
    let machines = doc["machines"].as_array().unwrap();
    assert_eq!(machines.len(), 4, "{doc}");
    assert_eq!(machines[0]["instance"], disturbed.as_str(), "ranked first: {doc}");
    let burst = bursts.iter().map(|b| b.len()).min().unwrap_or(spin_ns).min(spin_ns) as i64;
    let worst = machines[0]["worst_ns"].as_i64().unwrap();
    assert!(worst >= burst / 2, "the disturbed machine's worst case {worst} ns, its bursts {burst} ns: {doc}");
    // Far above the others, not by a stall they may share on a busy host (a
    // few samples), but by the bursts: a wake-up in the first three
    // quarters of one (about 37 % of them) waits more than a quarter of a
    // burst, so the disturbed machine's p99 lies above that; an
    // undisturbed one's does not.
    let p99 = |m: &serde_json::Value| m["series"][0]["p99_le_ns"].as_i64().unwrap();
    assert!(p99(&machines[0]) >= burst / 4, "the disturbed machine's p99, bursts of {burst} ns: {doc}");
    for m in &machines[1..] {
        assert!(p99(m) < burst / 4, "{}: p99 not far below the bursts' {burst} ns: {doc}", m["instance"]);
    }
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.find(&disturbed) < t.find(&format!("{}:9733", addrs[0])), "{t}");
    assert!(t.contains("What Prometheus' data cannot give"), "{t}");
    drop(ns);
}

/// The fleet generator of `bench/fleet-scale.sh`: the same code.
#[allow(dead_code)]
#[path = "../crates/rtscope-model/examples/fleet_openmetrics.rs"]
mod fleet_openmetrics;

/// The bucket of `ns` among the monitor's classic buckets (+Inf last).
fn bucket_of(ns: i64) -> usize {
    rtscope_model::metrics::BUCKETS_NS.iter().position(|&le| ns <= le as i64).unwrap_or(16)
}

/// Whether `ns`, read from a rebuilt histogram, lies in bucket `b`, its
/// bounds included (HdrHistogram's 0.1 % about them): a count is put at
/// its bucket's upper bound, or lower, down to the lower bound, where the
/// step's scraped maximum is lower.
fn in_bucket(ns: i64, b: usize) -> bool {
    bucket_of(ns * 999 / 1000) <= b && bucket_of(ns * 1001 / 1000) >= b
}

/// A fleet of 50 monitors over 2 h as the monitor serves them (the bench's
/// generator, a minute between scrapes as Prometheus' default), backfilled
/// with promtool into a real Prometheus: the report reads every machine
/// in a handful of queries (not one per machine), counts every sample
/// (a step of one scrape interval, where `increase()` sees one sample),
/// ranks the bad machines first and the worst cases in order, each in the
/// bucket of the true one.
#[test]
fn a_backfilled_fleet_is_ranked_as_its_truth_in_a_handful_of_queries() {
    if !prometheus_installed() {
        return;
    }
    let tmp = tempdir();
    let dir: &Path = &tmp;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let end = now / 60 * 60 - 60;
    let (machines, bad) = (50, 3);
    fleet_openmetrics::run(&fleet_openmetrics::Args {
        out: dir.join("om"),
        truth: dir.join("truth.json"),
        machines,
        cpus: 2,
        hours: 2.0,
        end_s: end,
        scrape_s: 60,
        checkpoint_s: 10,
        bad,
        seed: 7,
        promtool: Some(dir.join("tsdb")),
    })
    .unwrap();
    let log = dir.join("query.log");
    let prom = Prometheus::start_config(dir, &format!("global:\n  query_log_file: {}\n", log.display()), &[]);
    let until = Instant::now() + Duration::from_secs(30);
    while prom.query("count(rtscope_checkpoints_total)", Some(end as f64)).is_empty() {
        assert!(Instant::now() < until, "Prometheus did not answer: {}", prom_log(dir));
        std::thread::sleep(Duration::from_millis(200));
    }
    let before = std::fs::read_to_string(&log).unwrap_or_default().lines().count();
    let url = format!("http://127.0.0.1:{}", prom.port);
    let json = dir.join("fleet.json");
    let o = fleet_report(&url, "2h", "1m", &json, &["--at", &end.to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let queries: Vec<String> =
        std::fs::read_to_string(&log).unwrap().lines().skip(before).map(str::to_string).collect();
    assert!(queries.len() <= 8, "{} queries for {machines} machines: {queries:#?}", queries.len());

    let truth = json_file(&dir.join("truth.json"));
    let doc = json_file(&json);
    let got = doc["machines"].as_array().unwrap();
    assert_eq!(got.len(), machines, "{doc}");
    let true_of = |m: &serde_json::Value| {
        truth["machines"].as_array().unwrap().iter().find(|t| t["instance"] == m["instance"]).unwrap().clone()
    };
    for m in &got[..bad] {
        assert_eq!(true_of(m)["bad"], true, "{} ranked among the first {bad}: {doc}", m["instance"]);
    }
    let mut below = usize::MAX;
    for m in got {
        let t = true_of(m);
        let (w, tw) = (m["worst_ns"].as_i64().unwrap(), t["worst_ns"].as_i64().unwrap());
        let b = bucket_of(tw);
        assert!(in_bucket(w, b), "{}: {w} ns, truly {tw}", m["instance"]);
        assert!(b <= below, "{} ranked below a machine whose worst case is a bucket lower: {doc}", m["instance"]);
        below = b;
        for row in m["series"].as_array().unwrap() {
            let ts = t["series"].as_array().unwrap().iter().find(|s| s["cpu"] == row["cpu"]).unwrap();
            assert_eq!(row["samples"], ts["samples"], "{}: every sample counted: {row}", m["instance"]);
            let p99 = row["p99_le_ns"].as_i64().unwrap();
            let tb = bucket_of(ts["p99_le_ns"].as_i64().unwrap());
            assert!(in_bucket(p99, tb), "{}: p99 {row} / {ts}", m["instance"]);
        }
    }
}

fn prom_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
}
