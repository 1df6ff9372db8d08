//! `rtscope monitor` against the real engine: a Prometheus server (Debian's
//! `prometheus` package, which `.ci/run` installs) started on 127.0.0.1 on
//! a free port with a temporary data directory scrapes the monitor, and its
//! HTTP API must give back exactly what the monitor stored; `promtool
//! check metrics` lints the page. A monitor killed with SIGKILL leaves
//! nothing behind and a new one takes its store over.

mod common;
use common::dist::{dashboard_exprs, shipped_queries};
use common::prom::*;
use common::*;
use rtscope_model::hist::Tally;
use rtscope_model::metrics::count_at_or_below;
use rtscope_model::store::Store;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The monitor's page passes promtool's lint, is served in both formats by
/// the Accept header, and answers nothing but GET; a real Prometheus
/// scrapes it, and what its HTTP API gives back at one scrape is exactly
/// what the store holds for as many checkpoint intervals as that scrape
/// counted: samples, the bucket at 100 us, the maximum and missed periods.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn prometheus_scrapes_what_the_monitor_stores() {
    let fx = Fixture::root();
    let (dir, db) = (&fx.dir, fx.db.as_str());
    let cpu = last_cpu();
    let port = free_port();
    let mut mon = start_monitor(dir, db, cpu, port, "monitor.log");
    let page = wait_for_checkpoints(port, 1.0);
    let labels = format!("probe=\"wakeup\",metric=\"latency\",cpu=\"{cpu}\"");
    assert!(sample(&page, &format!("rtscope_latency_seconds_count{{{labels}}}")).unwrap() > 0.0, "{page}");
    assert!(page.contains("rtscope_monitor_probe_info{probe=\"wakeup\""), "{page}");

    let (_, head, _) = http("GET", port, "/metrics", None).unwrap();
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    let (_, head, om) = http("GET", port, "/metrics", Some("application/openmetrics-text;version=1.0.0")).unwrap();
    assert!(head.contains("application/openmetrics-text; version=1.0.0"), "{head}");
    assert!(om.ends_with("# EOF\n") && om.contains(&format!("rtscope_latency_seconds_created{{{labels}}}")), "{om}");
    assert_eq!(http("POST", port, "/metrics", None).unwrap().0, 405);
    assert_eq!(http("PUT", port, "/", None).unwrap().0, 405);
    assert_eq!(http("GET", port, "/api/v1/admin", None).unwrap().0, 404);

    let promtool = which("promtool");
    let prometheus = which("prometheus");
    if !has(
        "Debian's prometheus package (promtool and prometheus; .ci/run installs it)",
        promtool.is_some() && prometheus.is_some(),
    ) {
        return;
    }
    let mut lint = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    lint.stdin.take().unwrap().write_all(http("GET", port, "/metrics", None).unwrap().2.as_bytes()).unwrap();
    let o = lint.wait_with_output().unwrap();
    assert!(o.status.success() && o.stdout.is_empty() && o.stderr.is_empty(), "{}", text(&o));

    let prom = Prometheus::start(dir, port, &[]);
    let (ts, n) = prom.wait_for_checkpoints(dir, &labels);
    let at = |q: &str| -> f64 {
        let r = prom.query(q, Some(ts));
        assert_eq!(r.len(), 1, "{q} at {ts}: {r:?}");
        r[0].2
    };
    let count = at(&format!("rtscope_latency_seconds_count{{{labels}}}"));
    let le100 = at(&format!("rtscope_latency_seconds_bucket{{{labels},le=\"0.0001\"}}"));
    let max = at(&format!("rtscope_max_seconds{{{labels}}}"));
    let missed = at(&format!("rtscope_missed_periods_total{{{labels}}}"));
    let above = at(&format!("rtscope_exceedances_total{{{labels},threshold=\"0.0001\"}}"));
    // Every query of the shipped dashboard and alert rules is valid PromQL
    // to the real engine; the dashboard's fleet table ranks this machine.
    for q in shipped_queries() {
        let a = prom.answer(&q, None);
        assert_eq!(a["status"], "success", "{q}: {a}");
    }
    let fleet = &dashboard_exprs()[0];
    assert_eq!(prom.answer(fleet, None)["data"]["result"].as_array().map(Vec::len), Some(1), "{fleet}");
    drop(prom);
    signal(mon.0.id(), libc::SIGINT);
    assert_eq!(wait_exit(&mut mon.0), Some(0), "{}", std::fs::read_to_string(dir.join("monitor.log")).unwrap());

    let (first_n, s) = stored_prefix(db, cpu, n);
    assert_eq!(count as u64, first_n.count(), "samples of the first {n} intervals");
    assert_eq!(le100 as u64, count_at_or_below(&first_n, 100_000));
    assert_eq!(above as u64, first_n.count() - count_at_or_below(&first_n, 100_000));
    assert_eq!((max * 1e9).round() as u64, first_n.stats.max);
    assert_eq!(missed as u64, s.intervals[..n].iter().map(|i| i.overruns).sum::<u64>());
}

/// SIGKILL: the monitor's port is free at once, nothing of it runs, its run
/// is marked partial with the intervals it committed, and a new monitor on
/// the same store and port serves again (its counters start afresh, which
/// Prometheus takes as a reset).
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_killed_monitor_leaves_nothing_and_a_new_one_takes_over() {
    let fx = Fixture::root();
    let (dir, db) = (&fx.dir, fx.db.as_str());
    let cpu = last_cpu();
    let port = free_port();
    let mut mon = start_monitor(dir, db, cpu, port, "first.log");
    wait_for_checkpoints(port, 2.0);
    let pid = mon.0.id();
    signal(pid, libc::SIGKILL);
    wait_exit(&mut mon.0);
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
    assert!(std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(), "port {port} still held");
    let tracefs = Path::new("/sys/kernel/tracing/instances");
    if tracefs.is_dir() {
        let ours = format!("rtscope-{pid}");
        assert!(!tracefs.join(ours).exists());
    }
    let mut again = start_monitor(dir, db, cpu, port, "second.log");
    let page = wait_for_checkpoints(port, 1.0);
    assert!(page.contains("rtscope_latency_seconds_count{"), "{page}");
    signal(again.0.id(), libc::SIGINT);
    assert_eq!(wait_exit(&mut again.0), Some(0));
    let store = Store::open_for_reading(Path::new(db)).unwrap();
    let first = store.load_run(1).unwrap();
    assert_eq!(first.header.status.as_str(), "partial");
    assert!(first.series[0].intervals.len() >= 2);
    assert!(first.series[0].total().count() > 0);
    assert_eq!(store.load_run(2).unwrap().header.kind, "monitor");
}

/// `--watch comm=NAME`: a SCHED_FIFO thread of this test, of a 2 ms period
/// and 100 us of spinning, started after the monitor, gets series labelled
/// by its tid and comm; their counts never exceed what the thread itself
/// logged, their mean period is the thread's own, and its runtime at least
/// its spin. Once it exits its series leave the page; a second thread of
/// the same name gets series of its own, though `max-threads=1`: a monitor
/// counts the threads watched now. Root only.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn watched_threads_come_and_go_with_their_series() {
    use common::periodic::*;
    let fx = Fixture::root();
    let (dir, db) = (&fx.dir, fx.db.as_str());
    let cpu = last_cpu();
    let port = free_port();
    let name = format!("rtmw{}", std::process::id() % 100_000);
    // One thread at a time: the second is watched once the first is gone.
    let spec = format!("comm={name},max-threads=1");
    let record_cmd_before = has_tracefs().then(record_cmd);
    let mut mon = start_monitor_with(dir, db, cpu, port, "watch.log", &["--watch", &spec]);
    wait_for_checkpoints(port, 1.0);
    // A monitor, a service, leaves record-cmd as found while it traces: a
    // tracer started meanwhile keeps its task names.
    assert_eq!(has_tracefs().then(record_cmd), record_cmd_before, "record-cmd as found while a monitor watches");
    let labels =
        |tid: i32, metric: &str| format!("{{probe=\"watch\",metric=\"{metric}\",tid=\"{tid}\",comm=\"{name}\"}}");
    let page_of = || http("GET", port, "/metrics", None).map(|(_, _, p)| p).unwrap_or_default();
    // Each kind of value in its own family: latencies, periods, runtimes.
    let family = |metric: &str| rtscope_model::metrics::families::of_series("watch", metric).histogram;
    let count =
        |page: &str, tid: i32, metric: &str| sample(page, &format!("{}_count{}", family(metric), labels(tid, metric)));
    // Until `tid` has 300 wake-ups and 100 runtimes on the page (60 s at
    // most): each series is served from its own committed intervals, and
    // the runtime's (ended at the switch off the CPU) may commit a
    // checkpoint after the wake-ups' did.
    let wait_for = |tid: i32| {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let page = page_of();
            if count(&page, tid, "latency").is_some_and(|n| n >= 300.0)
                && count(&page, tid, "runtime").is_some_and(|n| n >= 100.0)
            {
                return page;
            }
            assert!(Instant::now() < until, "no 300 wake-ups and 100 runtimes of thread {tid} in 60 s:\n{page}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };

    let first = periodic(&name, cpu, Duration::from_secs(60));
    let tid = first.tid;
    let page = wait_for(tid);
    let log = first.stop();
    let own = log.len() as f64;
    let n = count(&page, tid, "latency").unwrap();
    assert!(n <= own, "{n} wake-ups on the page, the thread logged {own}");
    // Each period between two wake-ups is 2 ms plus the second's latency
    // minus the first's: over 300 of them the mean is the thread's own
    // (woke to woke, from its log) within 5 ms / 300 either side.
    let periods = count(&page, tid, "period").unwrap();
    let sum = sample(&page, &format!("rtscope_period_seconds_sum{}", labels(tid, "period"))).unwrap();
    let gaps: Vec<f64> = log.windows(2).map(|w| (w[1].woke - w[0].woke) as f64 / 1e9).collect();
    let (own_min, own_max) = gaps.iter().fold((f64::MAX, 0f64), |(a, b), &g| (a.min(g), b.max(g)));
    let mean = sum / periods;
    assert!(
        periods >= 100.0 && mean >= own_min - 0.000_02 && mean <= own_max + 0.000_02,
        "mean period {mean} s, own {own_min}..{own_max}"
    );
    assert!(mean >= 0.002 * 0.98, "mean period {mean} s below the 2 ms programmed");
    // Its runtime (on the CPU, switch in to switch out) against the
    // thread's own clock: at most its time awake, waking to sleeping
    // again, with the switches' few microseconds; at least half its spin
    // (the monitor's wakeup, at a higher priority on its CPU, preempts a
    // few microseconds of some activations).
    let rt_sum = sample(&page, &format!("rtscope_runtime_seconds_sum{}", labels(tid, "runtime"))).unwrap();
    let rt_n = count(&page, tid, "runtime").unwrap();
    let rt_mean = rt_sum / rt_n;
    let awake: Vec<f64> = log.iter().filter(|o| o.slept > o.woke).map(|o| (o.slept - o.woke) as f64 / 1e9).collect();
    let awake_max = awake.iter().fold(0f64, |a, &b| a.max(b));
    eprintln!("runtime: mean {rt_mean} s of {rt_n}; the thread awake at most {awake_max} s");
    assert!(
        rt_n >= 100.0 && rt_mean >= SPIN_NS as f64 / 2e9 && rt_mean <= awake_max + 0.000_05,
        "mean runtime {rt_mean} s of {rt_n}: the thread spins {SPIN_NS} ns, awake at most {awake_max} s"
    );

    // Gone: the exit is looked for every second, then the last interval
    // is committed at the next checkpoint.
    let until = Instant::now() + Duration::from_secs(30);
    while count(&page_of(), tid, "latency").is_some() {
        assert!(Instant::now() < until, "thread {tid} exited 30 s ago and its series are still served");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Another thread of that name: series of its own.
    let second = periodic(&name, cpu, Duration::from_secs(60));
    let page = wait_for(second.tid);
    assert_ne!(second.tid, tid);
    assert!(count(&page, tid, "latency").is_none());
    drop(second);
    signal(mon.0.id(), libc::SIGINT);
    assert_eq!(
        wait_exit(&mut mon.0),
        Some(0),
        "{}",
        std::fs::read_to_string(dir.join("watch.log")).unwrap_or_default()
    );
    // The store has the watch's run, a monitor run, with both threads.
    let store = Store::open_for_reading(Path::new(db)).unwrap();
    let runs: Vec<_> = (1..=2).map(|r| store.load_run(r).unwrap()).collect();
    let watch = runs.iter().find(|r| r.series.iter().any(|s| s.key.probe == "watch")).expect("a watch run");
    assert_eq!(watch.header.kind, "monitor");
    for t in [tid, second_tid_of(watch, tid)] {
        let s = watch.series.iter().find(|s| s.key.cpu == i64::from(t) && s.key.metric == "latency").unwrap();
        assert!(s.total().count() >= 300, "thread {t}: {} wake-ups stored", s.total().count());
    }
}

/// `--watch comm=NAME,cause-threshold=150us` beside a logged SCHED_FIFO 99
/// spinner of 400 us every 20.333 ms on the thread's CPU: every wake-up of
/// the thread due inside a burst, 200 us or more before its end, waits for
/// the burst (above the threshold), and its largest cause is the spinner:
/// `rtscope_episodes_total{cause="thread"}` counts it (as often as a host
/// stall of the timer makes one short, it may not). Every class together
/// counts no more than the thread's wake-ups. Root only.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn episodes_are_counted_by_cause_class() {
    use common::periodic::*;
    let fx = Fixture::root();
    if !has_tracefs() {
        return;
    }
    let name = format!("rtme{}", std::process::id() % 100_000);
    let spec = format!("comm={name},cause-threshold=150us");
    let (mut mon, port, cpu, spinner) = monitor_beside_spinner(&fx, "episodes.log", &["--watch", &spec], "400us");
    let thread = periodic(&name, cpu, Duration::from_secs(60));
    let tid = thread.tid;
    let l = |cause: &str| {
        format!(
            "rtscope_episodes_total{{probe=\"watch\",metric=\"latency\",tid=\"{tid}\",comm=\"{name}\",cause=\"{cause}\"}}"
        )
    };
    // 8 s of the thread, then the page, then its log.
    std::thread::sleep(Duration::from_secs(8));
    let page = http("GET", port, "/metrics", None).map(|(_, _, p)| p).unwrap_or_default();
    let read_at = now_ns();
    let own = thread.stop();
    let bursts = spinner.finish();
    let (classes, counts) = (CLASSES, class_counts(&page, l));
    // Explained within a pass or two of the wake-up (10 ms, 5 ms of grace):
    // those 100 ms before the page surely are.
    let before = |o: &&Own| o.woke + 100_000_000 <= read_at;
    let inside = |o: &Own| bursts.iter().any(|b| b.start + 10_000 <= o.programmed && o.programmed + 200_000 <= b.end);
    let covered = own.iter().filter(before).filter(|o| inside(o)).count() as u64;
    let free: Vec<&Own> =
        own.iter().filter(before).filter(|o| !bursts.iter().any(|b| b.near(o.programmed, o.woke, 1_000_000))).collect();
    let host = free.iter().filter(|o| o.woke - o.programmed > 50_000).count() as u64;
    let q = truth::rate_upper(host, free.len() as u64, 0.002);
    let allowed = truth::binomial_upper(covered, q, truth::FALSE_FAILURE);
    eprintln!("episodes by class {counts:?} ({classes:?}); {covered} due inside a burst, {allowed} may be short");
    assert!(covered >= 10, "only {covered} wake-ups due inside a burst in 8 s");
    assert!(
        counts[0] as u64 + allowed >= covered,
        "{} wake-ups classed thread, {covered} were due inside a burst (allowed {allowed} short): {counts:?}",
        counts[0]
    );
    // A few wake-ups of the thread's set-up come before its loop.
    let total: f64 = counts.iter().sum();
    assert!(total <= (own.len() + 5) as f64, "{total} episodes, {} wake-ups", own.len());
    signal(mon.0.id(), libc::SIGINT);
    assert_eq!(wait_exit(&mut mon.0), Some(0));
}

/// `monitor --trace`: the wake-up probe's samples above its cause
/// threshold are counted by the class of their largest cause. A SCHED_FIFO
/// 99 spinner of 1.2 ms every 20.333 ms on the probe's CPU holds, in every
/// burst, a programmed wake-up of the 1 ms probe with at least 200 us of
/// the burst after it: late by more than the 150 us threshold, and the
/// spinner its largest cause, so `cause="thread"` counts at least one per
/// burst (some may be short where a host stall outweighs the spinner: 42
/// of 292 beside a busy neighbour, a `yes` on each CPU; a classifier that
/// missed the spinner would count none).
/// Root only.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_traced_probes_episodes_are_counted_by_cause_class() {
    use common::periodic::now_ns;
    let fx = Fixture::root();
    if !has_tracefs() {
        return;
    }
    let args = ["--trace", "--probe-args", "wakeup=--cause-threshold 150us"];
    let (mut mon, port, cpu, spinner) = monitor_beside_spinner(&fx, "traced.log", &args, "1200us");
    std::thread::sleep(Duration::from_secs(6));
    let page = http("GET", port, "/metrics", None).map(|(_, _, p)| p).unwrap_or_default();
    let read_at = now_ns();
    let bursts = spinner.finish();
    let l = |cause: &str| {
        format!("rtscope_episodes_total{{probe=\"wakeup\",metric=\"latency\",cpu=\"{cpu}\",cause=\"{cause}\"}}")
    };
    let (classes, counts) = (CLASSES, class_counts(&page, l));
    // Explained within a pass or two (10 ms, 5 ms of grace): the bursts
    // that ended 100 ms before the page surely are.
    let must = bursts.iter().filter(|b| b.end + 100_000_000 <= read_at).count() as u64;
    let allowed = truth::binomial_upper(must, 0.2, truth::FALSE_FAILURE);
    eprintln!("episodes by class {counts:?} ({classes:?}); {must} bursts before the page, {allowed} may be short");
    assert!(must >= 100, "only {must} bursts in 6 s at 20.333 ms");
    assert!(
        counts[0] as u64 + allowed >= must,
        "{} samples classed thread, {must} bursts each held one late by more than 150 us: {counts:?}",
        counts[0]
    );
    // No more than the probe's wake-ups the page counts (those explained
    // after its last checkpoint, a second at 1 kHz, aside).
    let total: f64 = counts.iter().sum();
    let woke =
        sample(&page, &format!("rtscope_latency_seconds_count{{probe=\"wakeup\",metric=\"latency\",cpu=\"{cpu}\"}}"))
            .unwrap_or_else(|| panic!("no wake-up count in\n{page}"));
    assert!(total <= woke + 2_000.0, "{total} episodes, {woke} wake-ups committed");
    signal(mon.0.id(), libc::SIGINT);
    assert_eq!(wait_exit(&mut mon.0), Some(0));
}

/// `monitor --trace --probes wakeup,noise`: both probes traced at once,
/// each in a tracefs instance of its own (`rtscope-PID` and
/// `rtscope-PID-2`; one name for both made the second remove the first's,
/// and the monitor fail), both probes' episodes counted by class, and
/// nothing left after SIGINT.
/// Root only.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn two_traced_probes_trace_in_instances_of_their_own() {
    let fx = Fixture::root();
    if !has_tracefs() {
        return;
    }
    let (cpu, port) = (last_cpu(), free_port());
    let args = ["--trace", "--probes", "wakeup,noise"];
    let mut mon = start_monitor_with(&fx.dir, &fx.db, cpu, port, "two.log", &args);
    let page = wait_for_checkpoints(port, 2.0);
    let pid = mon.0.id();
    let mut own: Vec<String> =
        instances().into_iter().filter(|n| n.split('-').nth(1) == Some(&pid.to_string())).collect();
    own.sort();
    assert_eq!(own, [format!("rtscope-{pid}"), format!("rtscope-{pid}-2")], "the monitor's instances");
    for probe in ["wakeup", "noise"] {
        let metric = if probe == "wakeup" { "latency" } else { "interruption" };
        class_counts(&page, |c| {
            format!("rtscope_episodes_total{{probe=\"{probe}\",metric=\"{metric}\",cpu=\"{cpu}\",cause=\"{c}\"}}")
        });
    }
    signal(pid, libc::SIGINT);
    assert_eq!(wait_exit(&mut mon.0), Some(0));
    let log = std::fs::read_to_string(fx.dir.join("two.log")).unwrap();
    assert!(!log.contains("--trace:") && !log.contains("error"), "{log}");
    assert!(instances().iter().all(|n| n.split('-').nth(1) != Some(&pid.to_string())), "{:?}", instances());
}

/// A monitor of the last CPU with `args` (its output in `log`), once it
/// serves a checkpoint, and beside it a SCHED_FIFO 99 spinner on that CPU
/// spinning `burst` every 20.333 ms (no multiple of the probes' 1 ms) for
/// up to 60 s: the monitor, its port, the CPU and the spinner.
fn monitor_beside_spinner(
    fx: &Fixture,
    log: &str,
    args: &[&str],
    burst: &str,
) -> (Monitor, u16, usize, truth::Disturber) {
    let (cpu, port) = (last_cpu(), free_port());
    let mon = start_monitor_with(&fx.dir, &fx.db, cpu, port, log, args);
    wait_for_checkpoints(port, 1.0);
    let spinner = truth::Disturber::start(&fx.dir, &cpu.to_string(), "20333us", burst, "60s");
    (mon, port, cpu, spinner)
}

/// The cause classes of `rtscope_episodes_total`, in the page's order.
const CLASSES: [&str; 7] = ["thread", "irq", "softirq", "timer", "user", "unaccounted", "remote"];

/// The page's episode counts per class ([`CLASSES`]), each labelled by `l`.
fn class_counts(page: &str, l: impl Fn(&str) -> String) -> Vec<f64> {
    CLASSES.iter().map(|c| sample(page, &l(c)).unwrap_or_else(|| panic!("no {} in\n{page}", l(c)))).collect()
}

/// The other thread's id among a watch run's series.
fn second_tid_of(run: &rtscope_model::run::Run, first: i32) -> i32 {
    run.series.iter().map(|s| s.key.cpu as i32).find(|&t| t != first).expect("a second thread's series")
}

/// A port in use and a probe the monitor cannot run are said at once,
/// naming the flag; nothing is measured or stored.
#[test]
fn bad_flags_are_refused_before_measuring() {
    let dir = tempdir();
    let db = db(&dir);
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    let o = rtscope(&["monitor", "--listen", &addr, "--db", &db, "--cpus", "0"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--listen"), "{}", text(&o));
    assert!(!Path::new(&db).exists(), "nothing stored");
    let o = rtscope(&["monitor", "--probes", "osbench", "--db", &db]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("--probes"), "{}", text(&o));
    let o = rtscope(&["monitor", "--probes", "sleep", "--trace", "--db", &db, "--cpus", "0"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--trace: none of --probes sleep can be traced"), "{}", text(&o));
    let web = dir.join("web.yml");
    std::fs::write(&web, "tls_server_config:\n  cert_file: missing.pem\n  key_file: missing.key\n").unwrap();
    let o = rtscope(&["monitor", "--web-config", web.to_str().unwrap(), "--db", &db, "--cpus", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("--web-config") && text(&o).contains("missing.pem"), "{}", text(&o));
    // A hash of cost 31 (days to check) is refused at once, before
    // listening, with the fix.
    let costly = bcrypt::hash("s3cret", 4).unwrap().replacen("$04$", "$31$", 1);
    std::fs::write(&web, format!("basic_auth_users:\n  prom: '{costly}'\n")).unwrap();
    let t = Instant::now();
    let o = rtscope(&["monitor", "--web-config", web.to_str().unwrap(), "--db", &db, "--cpus", "0"]);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("cost 31") && text(&o).contains("htpasswd -nBC 10 prom"), "{}", text(&o));
    assert!(!Path::new(&db).exists(), "nothing stored");
}

/// The stored wake-up series of `cpu` in the monitor's first run: its
/// first `n` intervals merged, and the series.
fn stored_prefix(db: &str, cpu: usize, n: usize) -> (Tally, rtscope_model::run::Series) {
    let store = Store::open_for_reading(Path::new(db)).unwrap();
    let run = store.load_run(1).unwrap();
    assert_eq!(run.header.kind, "monitor");
    let s = run.series.into_iter().find(|s| s.key.probe == "wakeup" && s.key.cpu == cpu as i64).unwrap();
    assert!(s.intervals.len() > n, "{} intervals stored, {n} scraped", s.intervals.len());
    let mut first_n = Tally::new();
    for iv in &s.intervals[..n] {
        first_n.merge(&iv.tally().unwrap());
    }
    (first_n, s)
}

/// With native histograms on, Prometheus asks for protobuf and gets the
/// native histogram: its count is that of the stored intervals it covers,
/// and its `histogram_quantile(0.99, ...)` lies within one native bucket
/// (a factor 2^(1/8)) of rtscope's own p99 of the same intervals.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn native_histograms_agree_with_the_store() {
    let fx = Fixture::root();
    let (dir, db) = (&fx.dir, fx.db.as_str());
    if !has("prometheus (Debian's package; .ci/run installs it)", which("prometheus").is_some()) {
        return;
    }
    let cpu = last_cpu();
    let port = free_port();
    let mut mon = start_monitor(dir, db, cpu, port, "monitor.log");
    wait_for_checkpoints(port, 1.0);
    let prom = Prometheus::start(dir, port, &["--enable-feature=native-histograms"]);
    let labels = format!("probe=\"wakeup\",metric=\"latency\",cpu=\"{cpu}\"");
    let (ts, n) = prom.wait_for_checkpoints(dir, &labels);
    let raw = prom.answer(&format!("rtscope_latency_seconds{{{labels}}}"), Some(ts));
    let native = &raw["data"]["result"][0]["histogram"][1];
    assert!(native["count"].is_string(), "not a native histogram: {raw}");
    let count: u64 = native["count"].as_str().unwrap().parse().unwrap();
    let q = prom.query(&format!("histogram_quantile(0.99, rtscope_latency_seconds{{{labels}}})"), Some(ts));
    assert_eq!(q.len(), 1, "{q:?}");
    let p99_prom = q[0].2;
    drop(prom);
    signal(mon.0.id(), libc::SIGINT);
    assert_eq!(wait_exit(&mut mon.0), Some(0));
    let (first_n, _) = stored_prefix(db, cpu, n);
    assert_eq!(count, first_n.count(), "samples of the first {n} intervals");
    let p99 = first_n.quantile(0.99) as f64 / 1e9;
    // Prometheus interpolates within the native bucket that holds the
    // rank; rtscope's p99 is in that bucket too, or within the HdrHistogram's
    // 0.1 % of its lower bound: at most one bucket and 0.1 % apart.
    let buckets_apart = (p99_prom.log2() - p99.log2()).abs() * 8.0;
    assert!(buckets_apart <= 1.02, "Prometheus' p99 {p99_prom} s, rtscope's {p99} s: {buckets_apart} buckets apart");
}

/// `--web-config`: over TLS with basic auth, curl with the right password
/// reads the page, without it or with a wrong one gets 401, and plain HTTP
/// gets nothing; a Prometheus configured with the CA and the password
/// scrapes it.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn web_config_serves_tls_and_basic_auth() {
    let fx = Fixture::root();
    let (dir, db) = (&fx.dir, fx.db.as_str());
    if !has("openssl and curl", which("openssl").is_some() && which("curl").is_some()) {
        return;
    }
    let o = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", "key.pem", "-out", "cert.pem"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let hash = bcrypt::hash("s3cret", 6).unwrap();
    let web = dir.join("web.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\nbasic_auth_users:\n  prom: '{hash}'\n"
        ),
    )
    .unwrap();
    let cpu = last_cpu();
    let port = free_port();
    let log = std::fs::File::create(dir.join("monitor.log")).unwrap();
    let mut mon = Monitor(
        Command::new(BIN)
            .args(["monitor", "--cpus", &cpu.to_string(), "--checkpoint", "1s", "--db", db])
            .args(["--listen", &format!("127.0.0.1:{port}"), "--web-config", web.to_str().unwrap()])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let url = format!("https://127.0.0.1:{port}/metrics");
    let cacert = dir.join("cert.pem");
    let curl = |user: Option<&str>| -> (String, String) {
        let mut c = Command::new("curl");
        c.args(["-s", "-o", "-", "-w", "\n%{http_code}", "--max-time", "20", "--cacert"]).arg(&cacert).arg(&url);
        if let Some(u) = user {
            c.args(["-u", u]);
        }
        let out = String::from_utf8_lossy(&c.output().unwrap().stdout).into_owned();
        let (body, code) = out.rsplit_once('\n').unwrap_or(("", &out));
        (code.to_string(), body.to_string())
    };
    let until = Instant::now() + Duration::from_secs(60);
    let page = loop {
        let (code, body) = curl(Some("prom:s3cret"));
        if code == "200" && body.contains("rtscope_checkpoints_total{") {
            break body;
        }
        assert!(
            Instant::now() < until,
            "no page over TLS in 60 s: {code} {body}\n{}",
            std::fs::read_to_string(dir.join("monitor.log")).unwrap()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(page.contains("rtscope_latency_seconds_count{"), "{page}");
    assert_eq!(curl(Some("prom:wrong")).0, "401");
    assert_eq!(curl(None).0, "401");
    assert_eq!(http("GET", port, "/metrics", None).map(|r| r.0), None, "plain HTTP gets no answer");
    if has("prometheus (Debian's package; .ci/run installs it)", which("prometheus").is_some()) {
        let job = format!(
            "    scheme: https\n    tls_config:\n      ca_file: {}\n    basic_auth:\n      username: prom\n      \
             password: s3cret\n",
            cacert.display()
        );
        let prom = Prometheus::start_with(dir, port, &job, &[]);
        let labels = format!("probe=\"wakeup\",metric=\"latency\",cpu=\"{cpu}\"");
        let (_, n) = prom.wait_for_checkpoints(dir, &labels);
        assert!(n >= 5);
    }
    signal(mon.0.id(), libc::SIGINT);
    assert_eq!(wait_exit(&mut mon.0), Some(0));
}

/// `--listen 127.0.0.1:0` takes a free port and says which: the start line
/// names the port bound, not 0, and the page is served there.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_monitor_on_port_0_says_the_port_it_bound() {
    let fx = Fixture::root();
    let log = fx.dir.join("any-port.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut mon = Monitor(
        Command::new(BIN)
            .args(["monitor", "--cpus", &last_cpu().to_string(), "--checkpoint", "1s", "--db", &fx.db])
            .args(["--listen", "127.0.0.1:0"])
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap(),
    );
    let until = Instant::now() + Duration::from_secs(30);
    let port: u16 = loop {
        let text = std::fs::read_to_string(&log).unwrap();
        if let Some(p) = text
            .split("metrics on http://127.0.0.1:")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .and_then(|p| p.parse().ok())
        {
            break p;
        }
        assert!(Instant::now() < until, "no start line in 30 s: {text}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_ne!(port, 0);
    let page = wait_for_checkpoints(port, 1.0);
    assert!(page.contains("rtscope_latency_seconds_count{"), "{page}");
    signal(mon.0.id(), libc::SIGINT);
    assert_eq!(wait_exit(&mut mon.0), Some(0));
}

/// `monitor --duration`: it stops by itself, exit 0, each run (a probe's
/// and the watch's) stored complete, its samples about the duration's worth.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_monitor_with_a_duration_stops_by_itself_with_its_runs_complete() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    let started = Instant::now();
    let o = Command::new(BIN)
        .args(["monitor", "--cpus", &cpu, "--checkpoint", "1s", "--duration", "3s", "--db", &fx.db, "-q"])
        .args(["--listen", "127.0.0.1:0", "--watch", "comm=no-such-thread"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(started.elapsed() < Duration::from_secs(60), "it stopped by itself");
    let store = Store::open_for_reading(Path::new(&fx.db)).unwrap();
    let runs: Vec<_> = (1..=2).map(|r| store.load_run(r).unwrap()).collect();
    for r in &runs {
        assert_eq!(r.header.status.as_str(), "complete", "run {} of the probe and the watch", r.header.id);
    }
    assert!(store.load_run(3).is_err(), "two runs: the probe's and the watch's");
    let samples: u64 = runs
        .iter()
        .flat_map(|r| &r.series)
        .filter(|s| s.key.probe == "wakeup" && s.key.metric == "latency")
        .map(|s| s.total().count())
        .sum();
    // 3 s at 1 kHz on one CPU; a noisy VM loses some.
    assert!((2_000..=3_300).contains(&samples), "{samples} samples in 3 s at 1 kHz");
}
