//! The `wakeup` probe for a few seconds, as root (CI runs as root): its
//! samples and JSON, its ground truth, a run's end by a signal or a
//! threshold, export and import, and a run without privileges.

mod common;
use common::*;
use rtscope_model::export::RESULT_KEYS;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn wakeup_counts_every_period_and_writes_the_common_json() {
    let fx = Fixture::root();
    let (dir, db) = (&fx.dir, fx.db.as_str());
    let json = dir.join("w.json");
    let o = rtscope(&["wakeup", "--duration", "5s", "--db", db, "--json", json.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("p99.99") && out.contains("16-32 us") && out.contains("run 1 stored"), "{out}");
    let v = json_file(&json);
    assert_eq!(v["status"], "complete");
    assert_eq!(v["run_id"], 1);
    let rows = v["results"].as_array().unwrap();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    assert!(!rows.is_empty());
    for r in rows {
        assert_eq!(r["probe"], "wakeup");
        assert_eq!(r["metric"], "latency");
        for k in RESULT_KEYS.iter().filter(|k| !["probe", "metric"].contains(k)) {
            assert!(r[k].is_number(), "{k} missing in {r}");
        }
        let count = r["count"].as_u64().unwrap();
        let overruns = r["overruns"].as_u64().unwrap();
        assert!(
            (4985..=5015).contains(&(count + overruns)),
            "samples + missed periods = periods: {count} + {overruns}"
        );
        // How many periods a host stall takes from the samples is the
        // host's; each one missed is the run's own late wake-up: a sample
        // late by L skips L / 1 ms periods, so its histogram bounds them.
        let (least, most) = periods_missed(r, 1_000_000);
        assert!(
            (least..=most).contains(&overruns),
            "{overruns} missed periods, its late samples make {least}..={most}: {r}"
        );
        let min = r["min_ns"].as_u64().unwrap();
        assert!(min > 0 && min <= r["p50_ns"].as_u64().unwrap());
        assert!(r["p50_ns"].as_u64() <= r["p99_ns"].as_u64() && r["p99_ns"].as_u64() <= r["max_ns"].as_u64());
        let in_hist: u64 = r["histogram"].as_array().unwrap().iter().map(|b| b[2].as_u64().unwrap()).sum();
        assert_eq!(in_hist + r["overflows"].as_u64().unwrap(), count);
    }
    assert_eq!(
        rows.len(),
        online
            .trim()
            .split(',')
            .map(|p| p.split('-').collect::<Vec<_>>())
            .map(|p| if p.len() == 2 { p[1].parse::<usize>().unwrap() - p[0].parse::<usize>().unwrap() + 1 } else { 1 })
            .sum::<usize>()
    );
    // The run store agrees, and records the machine.
    let shown = show_json(db, "last");
    assert_eq!(shown["results"], v["results"]);
    assert_eq!(shown["run"]["inventory"]["is_root"], true);
    assert!(shown["run"]["peak_rss_kb"].as_u64().unwrap() > 0);
    let o = rtscope(&["runs", "--db", db]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("complete"), "{}", text(&o));
}

/// The periods of `interval` that a result row's late samples skipped, at
/// least and at most: a sample late by L skips L / interval of them (the
/// probe resumes on its grid), read from the row's histogram buckets
/// [lo, hi) and its overflows (each at most the maximum).
fn periods_missed(row: &serde_json::Value, interval: u64) -> (u64, u64) {
    let (mut least, mut most) = (0, 0);
    for b in row["histogram"].as_array().unwrap() {
        let (lo, hi, n) = (b[0].as_u64().unwrap(), b[1].as_u64().unwrap(), b[2].as_u64().unwrap());
        least += n * (lo / interval);
        most += n * (hi.saturating_sub(1) / interval);
    }
    let overflows = row["overflows"].as_u64().unwrap();
    (least, most + overflows * (row["max_ns"].as_u64().unwrap() / interval))
}

fn stop_with(fx: &Fixture, signal: i32) {
    let db = format!("{}.{signal}", fx.db);
    let spawned = std::time::Instant::now();
    let mut child = Command::new(BIN)
        .args(["wakeup", "--duration", "60s", "--checkpoint", "1s", "--quiet", "--db", &db])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // At least 1 s measured once the first checkpoint is stored (however
    // long the start took), then 2.1 s (2.6 s before a SIGKILL, so that the
    // checkpoint of the third second is stored).
    wait_for_first_checkpoint(&db);
    std::thread::sleep(Duration::from_millis(if signal == 9 { 2_600 } else { 2_100 }));
    let most = spawned.elapsed().as_millis() as u64;
    common::signal(child.id(), signal);
    let status = child.wait().unwrap();
    let v = show_json(&db, "last");
    let rows = v["results"].as_array().unwrap();
    let count = rows[0]["count"].as_u64().unwrap();
    // 1 ms periods, each a sample or an overrun (a host stall).
    let periods = count + rows[0]["overruns"].as_u64().unwrap();
    if signal == 9 {
        assert_eq!(status.code(), None);
        assert_eq!(v["status"], "partial", "{v}");
        // Everything up to the last checkpoint: at least 3 full seconds.
        assert!((2_990..=most).contains(&periods), "{periods} periods stored, {most} ms since the start");
        let o = rtscope(&["runs", "--db", &db]);
        assert!(String::from_utf8_lossy(&o.stdout).contains("partial"), "{}", text(&o));
        // No stored exceedance lies beyond the stored intervals.
        let o = rtscope(&["export", "last", "--db", &db]);
        let full: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        for series in full["series"].as_array().unwrap() {
            let end = series["intervals"].as_array().unwrap().iter().map(|i| i["end_ns"].as_u64().unwrap()).max();
            for e in series["exceedances"].as_array().unwrap() {
                assert!(Some(e[0].as_u64().unwrap()) <= end, "exceedance {e} after the last interval {end:?}");
            }
        }
    } else {
        assert_eq!(status.code(), Some(0));
        assert_eq!(v["status"], "interrupted", "{v}");
        // Everything until the signal: at least 3.1 s.
        assert!((3_090..=most + 5).contains(&periods), "{periods} periods stored, {most} ms since the start");
    }
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn sigint_and_sigterm_keep_everything_measured() {
    let fx = Fixture::root();
    stop_with(&fx, 2);
    stop_with(&fx, 15);
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn sigkill_leaves_a_partial_run_up_to_its_last_checkpoint() {
    let fx = Fixture::root();
    stop_with(&fx, 9);
}

/// Ground truth by timestamps: a SCHED_FIFO 99 spinner busy for 400 us
/// every 20.333 ms (no multiple of the probe's 1 ms) on one CPU, logging
/// each burst; wakeup at priority 95 there, keeping every sample above
/// 30 us. Each wake-up programmed inside a burst is late by the rest of
/// that burst: never less, and more only as often as the host's stalls
/// hit this run's other samples.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn wakeup_sees_a_known_spinner() {
    let fx = Fixture::root();
    let cpu = last_cpu();
    let c = cpu.to_string();
    let spinner = truth::Disturber::start(&fx.dir, &c, "20333us", "400us", "20s");
    let o = rtscope(&["wakeup", "--cpus", &c, "--duration", "5s", "--exceed", "30us", "--quiet", "--db", &fx.db]);
    let bursts = spinner.finish();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let doc = export(&fx.db, &[]);
    let (exceedances, span) = series_exceedances(&doc, "latency", cpu as u64);
    let total = doc["results"][0]["count"].as_u64().unwrap();
    // (programmed, latency): the probe's timestamp is its wake-up.
    let samples: Vec<(u64, u64)> = exceedances.iter().map(|&(t, v)| (t - v, v)).collect();
    let met = truth::judge_timer("wakeup", &samples, 1_000_000, 30_000, total, &bursts, span);
    // About 245 bursts in 5 s, two in five holding a programmed instant.
    assert!(met.len() >= 30, "only {} samples met by one of {} bursts", met.len(), bursts.len());
}

#[test]
fn ground_truth_helpers_compute_their_bounds() {
    use truth::*;
    // Bin(100, 0.01): P(X > 5) is about 5e-4, P(X > 6) about 7.7e-5.
    assert_eq!(binomial_upper(100, 0.01, 1e-4), 6);
    assert_eq!(binomial_upper(100, 0.0, 1e-4), 0);
    // Bin(245, 0.4): mean 98, sd 7.7; the 1e-4 lower bound about 70.
    let lo = binomial_lower(245, 0.4, 1e-4);
    assert!((66..=74).contains(&lo), "{lo}");
    assert_eq!(grid_point_in(3, 10, 14, 30), Some(23));
    assert_eq!(grid_point_in(3, 10, 14, 23), None);
    let b = Burst { start: 100, end: 200, tid: 1, off: 0, lead: 0 };
    assert_eq!(b.overlap(150, 400), 50);
    assert!(b.near(210, 300, 20) && !b.near(230, 300, 20));
    // From its own wake-up: 30 before its start.
    let woken = Burst { lead: 30, ..b };
    assert!(woken.near(0, 60, 20) && !b.near(0, 60, 20) && !woken.near(0, 40, 20));
    let met = [Met { at: 0, explained: 300, measured: 290, slack: 0, lead: 0 }];
    assert!(std::panic::catch_unwind(|| judge("short", &met, 2, 50, 0.01)).is_err(), "shorter than its burst");
    judge("within", &[Met { measured: 320, ..met[0] }], 2, 50, 0.01);
    // The run's median excess is its hand-over: 40 each, one 40 + 51 more.
    let handed: Vec<Met> = [340, 340, 340, 341, 391].iter().map(|&m| Met { measured: m, ..met[0] }).collect();
    judge("hand-over", &handed[..4], 2, 50, 0.0);
    assert!(std::panic::catch_unwind(|| judge("beyond", &handed, 2, 50, 0.0)).is_err(), "51 beyond the hand-over");
    // One of 300 wake-ups 100 past the median of 30 (and one at it): a
    // rate bounded by (1 + 4 + 4 sqrt 2) / 300; none logged, the floor.
    let woke: Vec<Burst> = (0..300).map(|k| Burst { lead: if k == 0 { 131 } else { 30 }, ..b }).collect();
    let q = wake_stall_rate(&woke, 100, 0.002);
    assert!((q - (5.0 + 4.0 * 2f64.sqrt()) / 300.0).abs() < 1e-12, "{q}");
    assert_eq!(wake_stall_rate(&woke[1..], 100, 0.002), 8.0 / 299.0);
    assert_eq!(wake_stall_rate(&[b], 100, 0.002), 0.002);
    let late = [Met { measured: 300 + MAX_SWITCH as u64 + 1, ..met[0] }];
    assert!(std::panic::catch_unwind(|| judge("late", &late, 2, 50, 1.0)).is_err(), "a median beyond any hand-over");
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn threshold_stops_the_run_with_exit_code_2() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    let db = fx.db.as_str();
    let mut spinner = Command::new(BIN)
        .args([
            "disturb",
            "--cpu",
            &cpu,
            "--period",
            "20333us",
            "--spin",
            "2ms",
            "--phase-jitter",
            "1ms",
            "--duration",
            "6s",
        ])
        .spawn()
        .unwrap();
    let o = rtscope(&["wakeup", "--cpus", &cpu, "--duration", "5s", "--threshold", "1ms", "--db", db]);
    let _ = spinner.kill();
    let _ = spinner.wait();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let v = show_json(db, "last");
    assert_eq!(v["status"], "interrupted");
    assert!(v["results"][0]["max_ns"].as_u64().unwrap() > 1_000_000);
    let notes = v["run"]["notes"].to_string();
    assert!(notes.contains("--threshold"), "{notes}");
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn intrtime_variations_run_and_leave_nothing_behind() {
    let fx = Fixture::root();
    let db = fx.db.as_str();
    let o = rtscope(&[
        "wakeup",
        "--duration",
        "2s",
        "--spinners",
        "1@50",
        "--spin-active",
        "5ms",
        "--spin-pause",
        "5ms",
        "--second-process",
        "--cache-flush",
        "--interval",
        "2ms",
        "--distance",
        "100us",
        // The flush's cost is timed once before measuring; on a busy host
        // it can pass half of the interval, which is refused without it.
        "--force",
        "--db",
        db,
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = show_json(db, "last");
    for r in v["results"].as_array().unwrap() {
        // 1000 periods of 2 ms; at least a quarter even when every flush
        // runs past a period on a busy host.
        assert!(r["count"].as_u64().unwrap() > 250, "{r}");
    }
    let plan = &v["run"]["plan"]["settings"];
    assert_eq!(plan["second_process"], true);
    assert!(plan["flush_bytes"].as_u64().unwrap() >= 1 << 20);
    std::thread::sleep(Duration::from_millis(200));
    assert!(!processes().iter().any(|c| c.contains("__second-process")), "the second process must be gone");
}

/// A thread's counters from /proc: (name, voluntary switches, minor
/// faults, user ticks, system ticks).
fn thread_counters(pid: u32) -> Vec<(String, u64, u64, u64, u64)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let read = |f: &str| std::fs::read_to_string(t.path().join(f)).unwrap_or_default();
        let stat = read("stat");
        // The fields after the name's closing parenthesis: state is the 3rd.
        let rest: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, r)| r).split_whitespace().collect();
        let field = |n: usize| rest.get(n - 3).and_then(|x| x.parse().ok()).unwrap_or(0);
        let status = read("status");
        let switches = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|x| x.trim().parse().ok())
            .unwrap_or(0);
        out.push((read("comm").trim().to_string(), switches, field(10), field(14), field(15)));
    }
    out
}

/// `--spinners N@PRIO:KIND`: IntrTime's idle threads, each doing what its
/// kind says, seen in the kernel's own counters of the spinner's threads
/// while the probe runs: pairs of threads switching to each other (event,
/// event-timeout), page faults (mmap), time in the kernel (sys, prio),
/// time in user space (user).
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn each_spinner_kind_does_what_it_says() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    for kind in ["user", "sys", "prio", "event", "event-timeout", "mmap"] {
        let spec = format!("1@50:{kind}");
        let child = Command::new(BIN)
            .args(["wakeup", "--cpus", &cpu, "--spinners", &spec, "-D", "2s", "--quiet", "--db", &fx.db])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        let threads = thread_counters(child.id());
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{kind}: {}", text(&o));
        let spin = threads.iter().find(|t| t.0.starts_with("rtscope-spin") && !t.0.contains("pa"));
        let (_, switches, faults, user, sys) =
            spin.unwrap_or_else(|| panic!("{kind}: no spinner in {threads:?}")).clone();
        let pair = threads.iter().find(|t| t.0.starts_with("rtscope-spin-pa"));
        match kind {
            "event" | "event-timeout" => {
                let p = pair.unwrap_or_else(|| panic!("{kind}: no second thread in {threads:?}"));
                assert!(switches > 1_000 && p.1 > 1_000, "{kind}: {threads:?}");
            }
            _ => assert!(pair.is_none(), "{kind}: {threads:?}"),
        }
        match kind {
            "user" => assert!(user > 2 * sys && user > 10, "{kind}: {threads:?}"),
            "sys" | "prio" => assert!(sys > user && sys > 10, "{kind}: {threads:?}"),
            "mmap" => assert!(faults > 1_000, "{kind}: {threads:?}"),
            _ => {}
        }
        let v = show_json(&fx.db, "last");
        assert_eq!(v["run"]["plan"]["settings"]["spinners"]["kind"], kind, "{}", v["run"]["plan"]);
    }
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn export_import_round_trips_and_other_formats_are_readable() {
    let fx = Fixture::root();
    let (dir, db) = (&fx.dir, fx.db.as_str());
    let o = rtscope(&["wakeup", "--duration", "2s", "--checkpoint", "500ms", "--quiet", "--db", db]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let first = dir.join("a.json");
    let o = rtscope(&["export", "last", "--format", "json", "-o", first.to_str().unwrap(), "--db", db]);
    assert!(o.status.success(), "{}", text(&o));
    let other = dir.join("other.db").display().to_string();
    let o = rtscope(&["import", first.to_str().unwrap(), "--db", &other]);
    assert!(o.status.success(), "{}", text(&o));
    let o = rtscope(&["import", first.to_str().unwrap(), "--db", &other]);
    assert_eq!(o.status.code(), Some(1), "a second import is refused: {}", text(&o));
    let second = dir.join("b.json");
    let o = rtscope(&["export", "1", "-o", second.to_str().unwrap(), "--db", &other]);
    assert!(o.status.success(), "{}", text(&o));
    let (a, b) = (json_file(&first), json_file(&second));
    assert!(a["series"][0]["intervals"].as_array().unwrap().len() >= 3);
    assert_eq!(a, b, "export, import, export gives the same document");
    let o = rtscope(&["export", "last", "--format", "csv", "--db", db]);
    let csv = String::from_utf8_lossy(&o.stdout);
    let total: u64 = csv.lines().skip(1).map(|l| l.rsplit(',').next().unwrap().parse::<u64>().unwrap()).sum();
    let samples: u64 = a["results"].as_array().unwrap().iter().map(|r| r["count"].as_u64().unwrap()).sum();
    assert_eq!(total, samples);
    let o = rtscope(&["export", "last", "--format", "hdr", "--db", db]);
    let log = String::from_utf8_lossy(&o.stdout);
    assert!(log.contains("#[StartTime:") && log.contains("Tag=wakeup.latency.cpu0,"), "{log}");
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn without_privileges_the_run_is_flagged_not_representative() {
    let fx = Fixture::root();
    let db = fx.db.as_str();
    let o = fx.as_nobody().args(["wakeup", "--duration", "1s", "--db", db]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("NOT representative") && err.contains("CAP_SYS_NICE"), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("NOT REPRESENTATIVE"), "{}", text(&o));
    let v = show_json(db, "last");
    assert_eq!(v["run"]["representative"], false);
    assert_eq!(v["run"]["plan"]["effective_policy"], "other");
    // It measured: 1000 periods in 1 s, fewer when a SCHED_OTHER thread
    // shares its CPU with something else (a late wake-up skips periods).
    assert!(v["results"][0]["count"].as_u64().unwrap() > 100, "{v}");
}

/// Root is not always enough: where the kernel schedules real-time threads
/// per cgroup (CONFIG_RT_GROUP_SCHED), a cgroup without a budget refuses
/// SCHED_FIFO to root too (a container, a systemd service). The warning,
/// and disturb's error, name that cgroup and its fix, not root and setcap.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn as_root_in_a_cgroup_without_realtime_time_the_fix_names_the_cgroup() {
    let fx = Fixture::root();
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let Some(mount) = rtscope_model::inventory::v1_cpu_mount(&mounts) else {
        return skipped(
            "needs the cpu controller in a cgroup v1 hierarchy: under cgroup v2 a test would have to \
             enable the cpu controller for the whole machine to make such a cgroup",
        );
    };
    struct Cgroup(std::path::PathBuf);
    impl Drop for Cgroup {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.0);
        }
    }
    let name = format!("rtscope-test-{}", std::process::id());
    let cg = Cgroup(std::path::Path::new(mount).join(&name));
    std::fs::create_dir(&cg.0).unwrap();
    let Ok(budget) = std::fs::read_to_string(cg.0.join("cpu.rt_runtime_us")) else {
        return skipped("this kernel does not schedule real-time threads per cgroup (no cpu.rt_runtime_us)");
    };
    assert_eq!(budget.trim(), "0", "a new cgroup starts without real-time time");
    let in_cgroup = |args: &[&str]| {
        let join = format!("echo $$ > {}/cgroup.procs && exec \"$0\" \"$@\"", cg.0.display());
        Command::new("sh").arg("-c").arg(join).arg(BIN).args(args).output().unwrap()
    };
    let cpu = last_cpu().to_string();
    let o = in_cgroup(&["wakeup", "--cpus", &cpu, "--duration", "1s", "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("NOT representative"), "{err}");
    assert!(err.contains(&format!("its cgroup /{name} ")) && err.contains("cpu.rt_runtime_us is 0"), "{err}");
    assert!(err.contains(&format!("echo $$ > {mount}/cgroup.procs")), "{err}");
    assert!(!err.contains("setcap"), "root has the capability already: {err}");
    assert_eq!(show_json(&fx.db, "last")["run"]["representative"], false);
    let o = in_cgroup(&["disturb", "--cpu", &cpu, "--duration", "1"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("disturb needs SCHED_FIFO") && err.contains(&format!("/{name}/cpu.rt_runtime_us")), "{err}");
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn loops_and_distance_set_each_threads_sample_count_and_period() {
    let fx = Fixture::root();
    let db = fx.db.as_str();
    let o = rtscope(&["wakeup", "--loops", "300", "--interval", "1ms", "--distance", "1ms", "--quiet", "--db", db]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = rtscope(&["export", "last", "--db", db]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for r in v["results"].as_array().unwrap() {
        assert_eq!(r["count"], 300, "--loops 300: {r}");
    }
    // Thread i runs every (1 + i) ms: its 300 samples span (1 + i) x 300 ms.
    for (i, s) in v["series"].as_array().unwrap().iter().enumerate() {
        let ivs = s["intervals"].as_array().unwrap();
        let span_ms =
            (ivs.last().unwrap()["end_ns"].as_u64().unwrap() - ivs[0]["start_ns"].as_u64().unwrap()) / 1_000_000;
        // A host stall that skips periods (counted as overruns) adds them.
        let row = v["results"].as_array().unwrap().iter().find(|r| r["cpu"] == s["cpu"]).unwrap();
        let overruns = row["overruns"].as_u64().unwrap();
        let want = 300 * (1 + i as u64);
        let most = (300 + overruns) * (1 + i as u64) + 60;
        assert!(
            (want..most).contains(&span_ms),
            "thread {i}: {span_ms} ms for 300 samples and {overruns} skipped periods, want {want}..{most}"
        );
    }
}

/// `wakeup --instances 95,80`: two instances measured together in one
/// run, each its own series and row (`wakeup@95`, `wakeup@80`), each cell
/// stored with its priority; the header names both, and how they were
/// measured (tests/instances.rs has the rest).
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn instances_at_two_priorities_are_two_series_of_one_run() {
    let fx = Fixture::root();
    let c = last_cpu().to_string();
    let o = rtscope(&["wakeup", "--instances", "95,80", "--cpus", &c, "--loops", "500", "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = unwrapped(&String::from_utf8_lossy(&o.stdout));
    assert!(
        out.contains("SCHED_FIFO 95, 80; instances measured together")
            && out.contains("wakeup@95 latency")
            && out.contains("wakeup@80 latency"),
        "{out}"
    );
    let doc = export(&fx.db, &[]);
    let rows = doc["results"].as_array().unwrap();
    for (p, prio) in [("wakeup@95", 95), ("wakeup@80", 80)] {
        let r = rows.iter().find(|r| r["probe"] == p).unwrap_or_else(|| panic!("{p}: {rows:?}"));
        assert_eq!(r["count"], 500, "{r}");
        let cell = doc["run"]["plan"]["cells"].as_array().unwrap().iter().find(|c| c["probe"] == p).unwrap();
        assert_eq!(cell["effective_priority"], prio, "{cell}");
    }
    assert_eq!(rows.len(), 2);
}

/// cyclictest's command line measures as cyclictest would (`-m -n -p95
/// -i1000 -h50 -q -D2 -a CPU`: bare numbers in its units) and prints its
/// histogram, parseable as its scripts parse it; `-q` alone prints the
/// summary at the end and nothing while measuring.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn cyclictest_command_lines_measure_and_print_its_histogram() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    let o = rtscope(&["wakeup", "-m", "-n", "-p95", "-i1000", "-h50", "-q", "-D2", "-a", &cpu, "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "# Histogram", "{out}");
    let rows: Vec<Vec<u64>> = lines
        .iter()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split_whitespace().map(|f| f.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 50, "{out}");
    for (us, row) in rows.iter().enumerate() {
        assert_eq!(row.len(), 2, "one column per CPU: {out}");
        assert_eq!(row[0], us as u64);
    }
    let field = |name: &str| -> u64 {
        let line = lines.iter().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name}: {out}"));
        line[name.len()..].trim().parse().unwrap()
    };
    let in_hist: u64 = rows.iter().map(|r| r[1]).sum();
    assert_eq!(field("# Total:"), in_hist);
    let v = show_json(&fx.db, "last");
    let r = &v["results"][0];
    assert_eq!(v["results"].as_array().unwrap().len(), 1, "-a {cpu}: one CPU");
    assert_eq!(r["cpu"].as_u64(), Some(last_cpu() as u64));
    let count = r["count"].as_u64().unwrap();
    assert!((1900..=2010).contains(&(count + r["overruns"].as_u64().unwrap())), "-i1000 -D2: 2000 periods");
    assert_eq!(in_hist + field("# Histogram Overflows:"), count);
    assert_eq!(field("# Max Latencies:"), r["max_ns"].as_u64().unwrap() / 1000);
    assert_eq!(field("# Min Latencies:"), r["min_ns"].as_u64().unwrap() / 1000);
    assert!(String::from_utf8_lossy(&o.stderr).contains("run 1 stored"), "{}", text(&o));
    // -q: the summary at the end, nothing while measuring.
    let o = rtscope(&["wakeup", "-q", "-D", "1", "--cpus", &cpu, "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    // As cyclictest -q: a line per CPU (min, avg, p99.9, max), no
    // histogram, no notes, within 100 columns.
    assert!(out.contains("wakeup latency") && out.contains(" max ") && out.contains("run 2 stored"), "{out}");
    assert!(!out.contains("histogram") && !out.contains("note:"), "{out}");
    assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("wakeup latency")).count(), 1, "{out}");
    assert!(o.stderr.is_empty(), "{}", text(&o));
    // -t N is N measured CPUs: with -a, as many as it names; alone, the
    // first N rtscope may measure.
    let all = online_cpus();
    let a = format!("-a{}", all.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(","));
    let t = format!("-t{}", all.len());
    for args in [vec!["-m", "-p95", "-i1000", &t, &a, "-D1", "-q"], vec!["-t1", "-D1", "-q"]] {
        let o = rtscope(&[&["wakeup"][..], &args, &["--db", &fx.db]].concat());
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
        let v = show_json(&fx.db, "last");
        let cpus: Vec<u64> = v["results"].as_array().unwrap().iter().map(|r| r["cpu"].as_u64().unwrap()).collect();
        let want: Vec<u64> = all.iter().take(if args[0] == "-t1" { 1 } else { all.len() }).map(|&c| c as u64).collect();
        assert_eq!(cpus, want, "{args:?}");
    }
}

/// A long cell says how far it is, how long is left and its worst case so
/// far: on a terminal every second, in a pipe a plain line every 10 s; a
/// second Ctrl-C says the run stays stored partial and exits with 130.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_cell_shows_its_progress_and_a_second_ctrl_c_leaves_it_partial() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    let script = Command::new("sh").args(["-c", "command -v script"]).output().unwrap();
    if has("script (util-linux), for a pseudo-terminal", script.status.success()) {
        let cmd = format!("{BIN} wakeup -D 3s --cpus {cpu} --db {}.tty", fx.db);
        let o = Command::new("script").args(["-qec", &cmd, "/dev/null"]).output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("\r\x1b[Kwakeup: 1s of 3s, 2s left; "), "{out:?}");
        assert!(out.contains("\r\x1b[Kwakeup: 2s of 3s, 1s left; "), "{out:?}");
        assert!(out.contains(" samples; worst latency ") && out.contains(&format!("us on CPU {cpu}")), "{out:?}");
    }
    let child = Command::new(BIN)
        .args(["wakeup", "--duration", "60s", "--checkpoint", "1s", "--cpus", &cpu, "--db", &fx.db])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // At least 1 s measured once the first checkpoint is stored, however
    // long the start took; the signals come past 11 s measured, so after
    // the line at 10 s.
    let first = wait_for_first_checkpoint(&fx.db);
    std::thread::sleep(Duration::from_millis(10_000).saturating_sub(first.elapsed()));
    // Two SIGINTs, the second once the first is no longer pending (two
    // pending ones would be one).
    common::signal(child.id(), libc::SIGINT);
    let pending = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        status.lines().filter(|l| l.starts_with("ShdPnd:") || l.starts_with("SigPnd:")).any(|l| {
            u64::from_str_radix(l.split_whitespace().nth(1).unwrap_or("0"), 16).unwrap_or(0) & (1 << (libc::SIGINT - 1))
                != 0
        })
    };
    while pending() {
        std::thread::sleep(Duration::from_micros(200));
    }
    common::signal(child.id(), libc::SIGINT);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("wakeup: 10s of 1m, ") && err.contains("s left; ") && err.contains("worst latency"), "{err}");
    assert!(err.contains("run 1 is stored partial") && err.contains("rtscope show 1"), "{err}");
    assert_eq!(show_json(&fx.db, "last")["status"], "partial");
}

/// The stored inventory holds the CPU caches and the devices behind the
/// network interfaces and block devices (sysfs's own view, read here
/// again) and the clocks' resolutions and read costs, and `show` prints them.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn the_inventory_records_caches_and_devices() {
    let fx = Fixture::root();
    let c = last_cpu().to_string();
    fx.run_json("inv.json", &["wakeup", "--cpus", &c, "-D", "1s"]);
    let doc = export(&fx.db, &[]);
    let inv = &doc["run"]["inventory"];
    let caches = inv["caches"].as_array().unwrap();
    let sysfs_caches = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache/index0").exists();
    assert_eq!(!caches.is_empty(), sysfs_caches, "{inv}");
    let devices = inv["devices"].as_array().unwrap();
    for (class, dir) in [("net", "/sys/class/net"), ("block", "/sys/block")] {
        for e in std::fs::read_dir(dir).unwrap() {
            let name = e.unwrap().file_name().into_string().unwrap();
            let backed = std::path::Path::new(dir).join(&name).join("device").exists();
            let stored = devices.iter().any(|d| d["class"] == class && d["name"] == name.as_str());
            assert_eq!(stored, backed, "{class} {name}: {inv}");
        }
    }
    let o = rtscope(&["show", "last", "--db", &fx.db]);
    let out = String::from_utf8_lossy(&o.stdout);
    // A row: its name, then its value after the names' column.
    let row = |name: &str, value: &str| {
        out.lines()
            .any(|l| l.strip_prefix(name).is_some_and(|v| v.starts_with(' ') && v.trim_start().starts_with(value)))
    };
    assert!(!sysfs_caches || row("caches", "L1"), "{out}");
    // The clocks side by side: each with a resolution and a read cost.
    let clocks = inv["clocks"].as_array().unwrap();
    assert!(clocks.iter().any(|c| c["name"] == "CLOCK_MONOTONIC_RAW"), "{inv}");
    assert!(clocks.iter().all(|c| c["resolution_ns"].as_f64() > Some(0.0) && c["read_ns"].as_f64() > Some(0.0)));
    assert!(row("clocks", "MONOTONIC "), "{out}");
}

/// A CPU outside rtscope's affinity but inside its cgroup's cpuset is
/// measured, as cyclictest measures it (`taskset -c 0 rtscope wakeup --cpus
/// 1`, what a shell on a machine booted with isolcpus=1 starts): the
/// measuring thread is pinned to CPU 1, rtscope's own threads stay on
/// CPU 0, and the run records both.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_cpu_outside_the_affinity_is_measured() {
    let fx = Fixture::root();
    if !has("two CPUs", last_cpu() > 0) {
        return;
    }
    let json = fx.dir.join("aff.json");
    let child = Command::new("taskset")
        .args(["-c", "0", BIN, "wakeup", "--cpus", "1", "-D", "3s", "--quiet", "--db", &fx.db])
        .args(["--json", json.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("taskset (util-linux)");
    // While it measures: each thread's allowed CPUs, by its name.
    let affinity = |name: &str| -> Option<String> {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", child.id())).ok()?;
        tasks.flatten().find_map(|t| {
            let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
            (comm.trim() == name).then_some(())?;
            let status = std::fs::read_to_string(t.path().join("status")).ok()?;
            status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).map(|v| v.trim().to_string())
        })
    };
    let until = std::time::Instant::now() + Duration::from_secs(20);
    let (mut probe, mut writer) = (None, None);
    while (probe.is_none() || writer.is_none()) && std::time::Instant::now() < until {
        probe = probe.or_else(|| affinity("rtscope-wakeup1"));
        writer = writer.or_else(|| affinity("rtscope-writer"));
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(probe.as_deref(), Some("1"), "the measuring thread is pinned to CPU 1");
    assert_eq!(writer.as_deref(), Some("0"), "rtscope's writer keeps to the CPU it was started on");
    let v = json_file(&json);
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{v}");
    assert_eq!(rows[0]["cpu"], 1, "{v}");
    let periods = rows[0]["count"].as_u64().unwrap() + rows[0]["overruns"].as_u64().unwrap();
    assert!((2985..=3015).contains(&periods), "3 s of 1 ms periods, each a sample or an overrun: {periods}");
    let run = &show_json(&fx.db, "last")["run"];
    assert_eq!(run["plan"]["housekeeping_cpus"], "0", "{}", run["plan"]);
    assert_eq!(run["inventory"]["home_cpus"], "0", "{}", run["inventory"]);
}
