//! The loads that make device interrupts and the loads at a real-time
//! policy, as root: `block` moves its disk's IRQ lines, `net-to` its NIC's
//! (or, on a veth, which has no line, its packets), over loopback it is
//! flagged; `cpu@fifo:...` and `threads@rr:...` run at their policies,
//! priorities and duty. The serial load runs in the VM test bed
//! (tests/rt_kernel.rs), where a second UART exists.

mod common;
use common::loads::*;
use common::netns::Namespaces;
use common::*;
use std::process::Command;
use std::time::Duration;

/// The checks of a `rtscope load` run's JSON, by load.
fn checks(v: &serde_json::Value) -> Vec<serde_json::Value> {
    v["characterisation"][0]["checks"].as_array().cloned().unwrap_or_default()
}

fn check_of<'a>(checks: &'a [serde_json::Value], load: &str) -> &'a serde_json::Value {
    checks.iter().find(|c| c["load"] == load).unwrap_or_else(|| panic!("no check of {load}: {checks:?}"))
}

/// The default IPv4 gateway, if any.
fn gateway() -> Option<String> {
    let o = Command::new("ip").args(["-4", "route", "show", "default"]).output().ok()?;
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut w = text.split_whitespace();
    while let Some(x) = w.next() {
        if x == "via" {
            return w.next().map(str::to_string);
        }
    }
    None
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn block_and_net_to_move_their_devices_interrupts() {
    let fx = Fixture::root();
    let json = fx.dir.join("d.json");
    // O_DIRECT needs a disk: /var/tmp is on one where /tmp may be memory.
    let file = format!("/var/tmp/rtscope-test-blk-{}", std::process::id());
    let mut loads = vec![format!("block:{file}:32M")];
    let gw = gateway();
    match &gw {
        Some(g) => loads.push(format!("net-to:{g}:9:1000")),
        None => skipped("no default gateway: net-to towards another host is not run"),
    }
    let list = loads.join(",");
    let o =
        rtscope_in(&fx.dir, &["load", &list, "-D", "4s", "--quiet", "--db", &fx.db, "--json", json.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!std::path::Path::new(&file).exists(), "the block load's file is removed");
    let v = json_file(&json);
    let c = checks(&v);
    let block = check_of(&c, &loads[0]);
    eprintln!("{}", block["message"]);
    let msg = block["message"].as_str().unwrap();
    if msg.contains("no IRQ line") || msg.contains("no disk found") {
        skipped(&format!("/var/tmp is on no disk with IRQ lines of its own: {msg}"));
    } else {
        assert_eq!(block["measure"], "device_interrupts");
        assert_eq!(block["flagged"], false, "{msg}");
        assert!(block["achieved"].as_f64().unwrap() >= 10.0, "{msg}");
    }
    if gw.is_some() {
        let net = check_of(&c, &loads[1]);
        eprintln!("{}", net["message"]);
        assert_eq!(net["flagged"], false, "{}", net["message"]);
        assert!(["device_interrupts", "iface_packets"].contains(&net["measure"].as_str().unwrap()), "{net}");
    }
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn net_to_over_a_veth_counts_its_packets_and_over_loopback_is_flagged() {
    let fx = Fixture::root();
    if !has("iproute2 (ip)", Command::new("ip").arg("-V").output().is_ok_and(|o| o.status.success())) {
        return;
    }
    let (ns, addrs) = Namespaces::create("devload", 1);
    let veth = format!("net-to:{}:9:500", addrs[0]);
    let list = format!("{veth},net-to:127.0.0.1:9:500");
    let json = fx.dir.join("n.json");
    let o =
        rtscope_in(&fx.dir, &["load", &list, "-D", "3s", "--quiet", "--db", &fx.db, "--json", json.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let c = checks(&json_file(&json));
    let v = check_of(&c, &veth);
    eprintln!("{}", v["message"]);
    assert_eq!(v["measure"], "iface_packets", "a veth has no IRQ line: {v}");
    assert!(v["message"].as_str().unwrap().contains(&ns.links[0]), "{v}");
    assert_eq!(v["flagged"], false, "{v}");
    assert!(v["achieved"].as_f64().unwrap() >= 450.0, "{v}");
    let lo = check_of(&c, "net-to:127.0.0.1:9:500");
    eprintln!("{}", lo["message"]);
    assert_eq!(lo["flagged"], true, "{lo}");
    assert!(lo["message"].as_str().unwrap().contains("loopback"), "{lo}");
    drop(ns);
}

/// A thread's (policy, real-time priority, user + system ticks) from
/// /proc/PID/task/TID/stat (fields 41, 40, 14 + 15).
fn sched_of(pid: u32, tid: &str) -> Option<(u64, u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    let f: Vec<u64> = stat[stat.rfind(')')? + 1..].split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
    let at = |field: usize| f[field - 3];
    Some((at(41), at(40), at(14) + at(15)))
}

/// The threads of `pid` by name: (name, tid).
fn threads_of(pid: u32) -> Vec<(String, String)> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let tid = e.file_name().to_string_lossy().into_owned();
                    Some((std::fs::read_to_string(e.path().join("comm")).ok()?.trim().to_string(), tid))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn real_time_loads_run_at_their_policy_priority_and_duty() {
    let fx = Fixture::root();
    let cpu = last_cpu();
    let cpu_load = format!("cpu@fifo:50:period=10ms,busy=3ms@{cpu}");
    let list = format!("{cpu_load},threads:4@rr:10-40@{cpu}");
    let json = fx.dir.join("r.json");
    let child = Command::new(BIN)
        .args(["load", &list, "-D", "6s", "--quiet", "--db", &fx.db, "--json", json.to_str().unwrap()])
        .env("TMPDIR", &*fx.dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(1500));
    let threads = threads_of(pid);
    let find = |name: &str| threads.iter().find(|t| t.0 == name).map(|t| t.1.clone());
    let periodic = find(&format!("load-cpu{cpu}")).unwrap_or_else(|| panic!("no load-cpu{cpu}: {threads:?}"));
    let (policy, prio, t0) = sched_of(pid, &periodic).unwrap();
    assert_eq!((policy, prio), (1, 50), "SCHED_FIFO 50");
    let mut rr: Vec<u64> = threads
        .iter()
        .filter(|t| t.0.starts_with("load-thr"))
        .map(|t| {
            let (policy, prio, _) = sched_of(pid, &t.1).unwrap();
            assert_eq!(policy, 2, "{} is SCHED_RR", t.0);
            prio
        })
        .collect();
    rr.sort_unstable();
    assert_eq!(rr, [10, 20, 30, 40], "4 threads spread over 10-40: {threads:?}");
    let started = std::time::Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let (_, _, t1) = sched_of(pid, &periodic).unwrap();
    let share = (t1 - t0) as f64 / 100.0 / started.elapsed().as_secs_f64();
    eprintln!("the periodic thread used {:.1} % of a CPU (busy 3 ms of 10)", 100.0 * share);
    // Busy 3 ms of every 10 ms from its wake-up: 30 %, less what a
    // higher priority took, more the wake-up's own cost.
    assert!((0.2..0.45).contains(&share), "{share}");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let c = checks(&json_file(&json));
    let check = check_of(&c, &cpu_load);
    eprintln!("{}", check["message"]);
    assert_eq!((check["measure"].as_str(), check["asked"].as_f64()), (Some("cpu_busy"), Some(30.0)), "{check}");
}
