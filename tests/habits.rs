//! The cyclictest and rtla habits a probe keeps, run for a few seconds as
//! root: `--dma-latency US` held while measuring and given back at exit.

mod common;
use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The PM QoS CPU latency target now: reading `/dev/cpu_dma_latency`
/// gives it as a binary s32.
fn pm_qos_target() -> Option<i32> {
    let bytes = std::fs::read("/dev/cpu_dma_latency").ok()?;
    Some(i32::from_ne_bytes(bytes.get(..4)?.try_into().ok()?))
}

/// `--dma-latency 7` holds the kernel's target at (at most) 7 us while the
/// probe measures, the machine record says so, and the target is back as
/// found once rtscope has exited; a value out of range is refused.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn dma_latency_is_held_while_measuring_and_given_back() {
    let fx = Fixture::root();
    let Some(found) = pm_qos_target() else {
        return skipped("no readable /dev/cpu_dma_latency on this kernel");
    };
    if found <= 7 {
        return skipped(&format!("the kernel's target is already {found} us: 7 would not show"));
    }
    let cpu = last_cpu().to_string();
    let child = Command::new(env!("CARGO_BIN_EXE_rtscope"))
        .args(["wakeup", "--dma-latency", "7", "-D", "3", "-q", "--cpus", &cpu, "--db", &fx.db])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Held from the session's start, before the first sample.
    let start = Instant::now();
    let mut during = found;
    while start.elapsed() < Duration::from_secs(2) && during != 7 {
        std::thread::sleep(Duration::from_millis(50));
        during = pm_qos_target().unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(during, 7, "the target while measuring");
    assert_eq!(pm_qos_target(), Some(found), "the target after exit is the one found");
    let shown = show_json(&fx.db, "last");
    assert_eq!(shown["run"]["inventory"]["dma_latency"], serde_json::json!({"held": {"us": 7}}));
    let o = rtscope(&["show", "last", "--db", &fx.db]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("held at 7 us (/dev/cpu_dma_latency)"), "{out}");
    for bad in ["10001", "1500ns", "-1"] {
        let o = rtscope(&["wakeup", "--dma-latency", bad, "-D", "1", "--db", &fx.db]);
        assert_eq!(o.status.code(), Some(1), "{bad}: {}", text(&o));
        assert!(text(&o).contains("--dma-latency"), "{bad}: {}", text(&o));
    }
}

/// `--ns` shows the summary's times in whole nanoseconds: the table's
/// title and figures, the histogram's buckets, and `-q`'s lines.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn ns_shows_the_summary_in_nanoseconds() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    let o = rtscope(&["wakeup", "--ns", "-D", "1", "--cpus", &cpu, "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("wakeup latency (ns)") && !out.contains("(us)"), "{out}");
    let header = out.lines().position(|l| l.trim_start().starts_with("CPU ")).expect("the table's header");
    let row: Vec<&str> = out.lines().nth(header + 1).unwrap().split_whitespace().collect();
    // CPU, samples, then min, mean, p50...: whole nanoseconds.
    assert!(row[2..9].iter().all(|v| v.parse::<u64>().is_ok()), "{out}");
    let bucket = |u: &str| out.lines().any(|l| l.split_whitespace().nth(1) == Some(u) && l.contains('-'));
    assert!(bucket("ns") && !bucket("us"), "the histogram's buckets: {out}");
    let o = rtscope(&["wakeup", "-N", "-q", "-D", "1", "--cpus", &cpu, "--db", &fx.db]);
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out.lines().find(|l| l.starts_with("wakeup latency")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.ends_with(" ns") && !line.split_whitespace().any(|w| w.contains('.') && w != "p99.9"), "{line}");
}

/// `--stop-irq` / `--stop-thread` (rtla timerlat's `-i` / `-T`): a traced
/// wakeup stops at the first wake-up whose stage is above the limit, says
/// so and exits with code 2, long before its duration; without `--trace`,
/// or on a probe without a timer's stages, they are refused.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_stage_threshold_stops_a_traced_run() {
    let fx = Fixture::root();
    for args in
        [&["wakeup", "--stop-irq", "10", "-D", "1"][..], &["noise", "--trace", "--stop-thread", "10", "-D", "1"]]
    {
        let mut all = args.to_vec();
        all.extend(["--db", &fx.db]);
        let o = rtscope(&all);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("--stop-"), "{args:?}: {}", text(&o));
    }
    if !has_tracefs() {
        return skipped("no tracefs: --trace cannot split the wake-ups");
    }
    let cpu = last_cpu().to_string();
    let start = Instant::now();
    let args = ["wakeup", "--trace", "--stacks", "off", "--stop-thread", "1ns", "-D", "20", "-q", "--cpus", &cpu];
    let mut all = args.to_vec();
    all.extend(["--db", &fx.db]);
    let o = rtscope(&all);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(start.elapsed() < Duration::from_secs(15), "stopped early: {:?}", start.elapsed());
    let shown = show_json(&fx.db, "last");
    let notes = shown["run"]["notes"].to_string();
    assert!(notes.contains("stopped at --stop-thread 0.001us") && notes.contains("thread latency"), "{notes}");
}

/// On a terminal, `wakeup` draws rtla timerlat top's per-CPU view under
/// its status line and redraws it in place every second: a row per
/// measured CPU (count, cur, min, avg, max), its counts growing from one
/// drawing to the next; `-q` draws nothing. The terminal is a pty made by
/// util-linux's `script`, as a user's would be.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_terminal_shows_the_live_per_cpu_view() {
    let fx = Fixture::root();
    let cpus: Vec<usize> = online_cpus().into_iter().take(2).collect();
    let list = cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",");
    let on_tty = |extra: &str| -> String {
        let line = format!(
            "stty rows 30 cols 100; {} wakeup -D 3s --cpus {list} --db {} {extra} >/dev/null",
            env!("CARGO_BIN_EXE_rtscope"),
            fx.db
        );
        let o = Command::new("script").args(["-q", "-e", "-c", &line, "/dev/null"]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let out = on_tty("");
    // Each drawing starts with the status line; a redraw moves back up.
    let drawings: Vec<&str> = out.split("wakeup: ").skip(1).collect();
    assert!(drawings.len() >= 2, "{out:?}");
    assert!(out.contains(&format!("\x1b[{}A", cpus.len() + 2)), "no redraw in place: {out:?}");
    let count = |drawing: &str, cpu: usize| -> u64 {
        let row = drawing
            .lines()
            .map(|l| l.trim_start_matches("\x1b[K").split(['\x1b', '\r']).next().unwrap_or(""))
            .find(|l| l.split_whitespace().next() == Some(&cpu.to_string()))
            .unwrap_or_else(|| panic!("no row for CPU {cpu}: {drawing:?}"));
        let words: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(words.len(), 6, "CPU count cur min avg max: {row:?}");
        words[1].parse().unwrap()
    };
    assert!(drawings[0].contains("CPU      count          cur          min          avg          max"), "{out:?}");
    for &c in &cpus {
        assert!(count(drawings[1], c) > count(drawings[0], c), "CPU {c} did not grow: {out:?}");
    }
    assert!(!on_tty("-q").contains("count"), "-q draws nothing");
}

/// `--policy deadline` (rtla's `-P d:RUNTIME:PERIOD`, cyclicdeadline):
/// where the measured CPU shares its root domain with others, the kernel
/// cannot give a thread pinned to it SCHED_DEADLINE, and the probe is
/// refused before measuring, naming the flag, the kernel's reason and the
/// fix; where the CPU is its own root domain (the only one isolated with
/// isolcpus=domain), a short run measures under SCHED_DEADLINE (the
/// kernel's /proc/PID/task/TID/sched says policy 6 while it runs) and
/// `show` names the reservation.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn deadline_is_refused_on_a_shared_root_domain_and_measures_on_its_own() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    let isolated = std::fs::read_to_string("/sys/devices/system/cpu/isolated").unwrap_or_default();
    let args = ["wakeup", "--policy", "deadline", "--dl-runtime", "50us", "-D", "2", "-q", "--cpus", &cpu];
    let with_db = |extra: &[&str]| -> Vec<String> {
        args.iter().chain(extra).map(|s| s.to_string()).chain(["--db".into(), fx.db.clone()]).collect()
    };
    if isolated.trim() != cpu {
        let o = rtscope(&with_db(&[]).iter().map(String::as_str).collect::<Vec<_>>());
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{t}");
        for said in ["--policy deadline", "EPERM", "root domain", "isolcpus=domain,", "cpuset.cpus.partition"] {
            assert!(t.contains(said), "{said}: {t}");
        }
        assert!(!t.contains("panicked"), "{t}");
        return skipped(&format!(
            "CPU {cpu} shares its root domain (isolated: '{}'): the refusal is checked; measuring under \
             SCHED_DEADLINE needs it isolated alone (isolcpus=domain,{cpu})",
            isolated.trim()
        ));
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_rtscope"))
        .args(with_db(&[]))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let thread = format!("rtscope-wakeup{cpu}");
    let mut policy = None;
    // Until the thread is seen under SCHED_DEADLINE or rtscope has ended.
    while policy != Some(6) && child.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(100));
        let tasks = std::fs::read_dir(format!("/proc/{}/task", child.id())).into_iter().flatten().flatten();
        for t in tasks.map(|t| t.path()) {
            if std::fs::read_to_string(t.join("comm")).is_ok_and(|c| c.trim() == thread) {
                let sched = std::fs::read_to_string(t.join("sched")).unwrap_or_default();
                policy = sched
                    .lines()
                    .find(|l| l.starts_with("policy"))
                    .and_then(|l| l.split(':').nth(1))
                    .and_then(|p| p.trim().parse::<u32>().ok());
            }
        }
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(policy, Some(6), "the measuring thread's policy in /proc (6: SCHED_DEADLINE)");
    let shown = show_json(&fx.db, "last");
    assert_eq!(shown["run"]["plan"]["effective_policy"], "deadline", "{shown}");
    let o = rtscope(&["show", "last", "--db", &fx.db]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("SCHED_DEADLINE runtime 50us, period 1ms"), "{out}");
}
