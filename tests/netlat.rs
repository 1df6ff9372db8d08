//! `netlat` for a few seconds each, as root (CI runs as root): loopback,
//! the veth pair between rtscope's own namespaces (and that they vanish,
//! also on SIGTERM), the responder and its peer across two namespaces.

mod common;
use common::*;
use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::Duration;

const LOCAL: [&str; 5] = ["rx_wake", "rx_stack", "rx_total", "tx_sched", "tx_sw"];

/// Runs netlat with `--json`; its rows by metric (one CPU measured).
fn run(fx: &Fixture, name: &str, args: &[&str]) -> (HashMap<String, serde_json::Value>, serde_json::Value) {
    let v = fx.run_json(name, &[&["netlat"], args].concat());
    let mut rows = HashMap::new();
    for r in v["results"].as_array().unwrap() {
        assert_eq!(r["probe"], "netlat");
        rows.insert(r["metric"].as_str().unwrap().to_string(), r.clone());
    }
    (rows, v)
}

fn u(r: &serde_json::Value, k: &str) -> u64 {
    r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"))
}

/// What a sender (or peer mode's measuring thread) sent in `periods`
/// periods: every datagram sent is received or lost, exactly; the
/// periods it skipped (it ran a period or more late: a host stall) and
/// those it sent add up to the periods, give or take the first and the
/// last; hardly any loss.
fn check_sent(r: &serde_json::Value, periods: u64) {
    let (n, sent, lost, skipped) = (u(r, "count"), u(r, "sent"), u(r, "lost"), u(r, "skipped"));
    assert_eq!(sent, n + lost, "every datagram sent is received or lost: {r}");
    assert!(
        (periods.saturating_sub(2)..=periods + 1).contains(&(sent + skipped)),
        "{sent} sent + {skipped} skipped, want {periods} periods: {r}"
    );
    assert!(lost <= 3, "{lost} lost: {r}");
}

/// Every datagram sent in the `periods` periods is counted (`check_sent`),
/// every metric positive, and the stages add up: rx_stack + rx_wake =
/// rx_total for every datagram (so for the exact means), and on the way
/// out the datagram is queued before it is handed to the driver, which is
/// before it is received.
fn check_local(rows: &HashMap<String, serde_json::Value>, periods: u64) {
    let total = &rows["rx_total"];
    check_sent(total, periods);
    let n = u(total, "count");
    for m in LOCAL {
        let r = &rows[m];
        let k = u(r, "count");
        match m {
            // Stamped by the kernel on the way in: every datagram.
            "rx_wake" | "rx_stack" => assert_eq!(k, n, "{m}: {r}"),
            // Carried by the next datagram, the last one's by none.
            _ => assert!(k <= n && k + n / 20 + 1 >= n, "{m}: {k} of {n} datagrams: {r}"),
        }
        assert!(u(r, "min_ns") > 0, "{m} not positive: {r}");
        assert_eq!(r["sent"], total["sent"], "{m}: {r}");
        assert_eq!((u(r, "reordered"), u(r, "duplicates")), (0, 0), "{m}: {r}");
        assert!(r["no_rx_timestamp"].is_null() && r["socket_errors"].is_null(), "{r}");
        // A wall-clock step while a datagram is on its way clamps its
        // stamp: one or two, not more.
        assert!(r["clock_clamped"].as_u64().unwrap_or(0) <= 2, "{r}");
    }
    let mean = |m: &str| rows[m]["mean_ns"].as_f64().unwrap();
    let sum = mean("rx_stack") + mean("rx_wake");
    assert!(
        (sum - mean("rx_total")).abs() < 0.01,
        "stack {} + wake {} != total {}",
        mean("rx_stack"),
        mean("rx_wake"),
        mean("rx_total")
    );
    let p50 = |m: &str| u(&rows[m], "p50_ns");
    assert!(p50("tx_sched") <= p50("tx_sw") && p50("tx_sw") <= p50("rx_stack"), "{rows:?}");
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn loopback_times_every_datagram_and_its_stages() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    let (rows, v) = run(&fx, "lo.json", &["--cpus", &cpu, "--duration", "3s", "--interval", "5ms"]);
    check_local(&rows, 600);
    assert_eq!(rows["rx_wake"]["path"], "loopback");
    assert_eq!(v["run"]["plan"]["settings"]["size"], 54);
    // The text summary names the metrics and the loss columns.
    let o = rtscope(&["show", "last", "--db", &fx.db]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("rx_wake") && out.contains("lost") && out.contains("reord"), "{out}");
    assert!(out.contains(" sent "), "{out}");
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn sender_processes_over_loopback() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    let (rows, _) = run(&fx, "p.json", &["--cpus", &cpu, "--duration", "2s", "--processes", "--size", "200"]);
    check_local(&rows, 200);
    assert!(!processes().iter().any(|p| p.contains("__netlat-sender")), "a sender process outlived the run");
}

/// The pid of `parent`'s `__netlat-sender` child, if it has one.
fn sender_child(parent: u32) -> Option<i32> {
    std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        // pid (comm) state ppid ...
        let ppid: u32 = stat.rsplit_once(") ")?.1.split_whitespace().nth(1)?.parse().ok()?;
        (ppid == parent && String::from_utf8_lossy(&cmd).contains("__netlat-sender")).then_some(pid)
    })
}

/// The scheduling policy of `pid` (field 41 of /proc/PID/stat).
fn policy_of(pid: i32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.split_whitespace().nth(38)?.parse().ok()
}

/// A sender that dies leaves nothing to measure: the run fails and says
/// why, whether the sender died before it reported ready (the cell cannot
/// start, nothing is stored) or after (no datagram arrived: stored failed),
/// never a run stored complete with no datagram. Killed at once, and
/// once it has its real-time priority (which it takes just before it
/// reports ready, 100 ms or more before the first datagram is due).
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_run_whose_sender_dies_fails_and_says_why() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    for (i, when_ready) in [false, true].into_iter().enumerate() {
        let json = fx.dir.join(format!("dead{i}.json"));
        let child = Command::new(BIN)
            .args(["netlat", "--cpus", &cpu, "--processes", "--duration", "1s", "-q", "--db", &fx.db])
            .args(["--json", json.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let until = std::time::Instant::now() + Duration::from_secs(5);
        let pid = loop {
            if let Some(p) = sender_child(child.id())
                && (!when_ready || policy_of(p) == Some(libc::SCHED_FIFO as u32))
            {
                break p;
            }
            assert!(std::time::Instant::now() < until, "no sender process appeared");
            std::thread::sleep(Duration::from_millis(1));
        };
        if when_ready {
            std::thread::sleep(Duration::from_millis(10));
        }
        // SAFETY: kill() on our child's child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        eprintln!("killed {}: {err}", if when_ready { "once at its priority" } else { "at once" });
        assert_eq!(o.status.code(), Some(1), "{err}");
        if err.contains("before it was ready") {
            assert!(err.contains("sender process for CPU") && err.contains("--processes"), "{err}");
            assert!(!json.exists(), "a run was stored: {err}");
        } else {
            assert!(err.contains("no datagram arrived over loopback (the sender did not say"), "{err}");
            let v = json_file(&json);
            assert_eq!(v["status"], "failed", "{v}");
            assert!(v["run"]["notes"].to_string().contains("no datagram arrived"), "{}", v["run"]);
        }
    }
}

/// Every `net:[INODE]` any process refers to (its namespace or an open
/// descriptor).
fn live_net_namespaces() -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let p = e.path();
        if let Ok(l) = std::fs::read_link(p.join("ns/net")) {
            found.push(l.display().to_string());
        }
        if let Ok(fds) = std::fs::read_dir(p.join("fd")) {
            for fd in fds.flatten() {
                if let Ok(l) = std::fs::read_link(fd.path())
                    && l.display().to_string().starts_with("net:[")
                {
                    found.push(l.display().to_string());
                }
            }
        }
    }
    found
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn netns_path_crosses_a_veth_pair_and_leaves_nothing() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    let (rows, v) = run(&fx, "ns.json", &["--cpus", &cpu, "--duration", "3s", "--path", "netns"]);
    check_local(&rows, 300);
    assert_eq!(rows["rx_wake"]["path"], "veth between two namespaces");
    let ns = &v["run"]["plan"]["settings"]["namespaces"];
    let (a, b) = (ns["sender"].as_str().unwrap(), ns["receiver"].as_str().unwrap());
    assert!(a.starts_with("net:[") && a != b, "{ns}");
    let live = live_net_namespaces();
    assert!(!live.iter().any(|l| l == a || l == b), "namespace {a} or {b} still referred to");
    assert!(!std::path::Path::new("/sys/class/net/rtscope-a").exists());
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn sigterm_ends_a_netns_run_and_removes_its_namespaces() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    let before = live_net_namespaces();
    let mut child = Command::new(BIN)
        .args(["netlat", "--cpus", &cpu, "--path", "netns", "--processes", "--duration", "60s", "-q"])
        .args(["--checkpoint", "1s", "--db", &fx.db])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Measuring (so the namespaces are set up) for at least 1 s once the
    // first checkpoint is stored, however long the start took.
    wait_for_first_checkpoint(&fx.db);
    let ours: Vec<String> = live_net_namespaces().into_iter().filter(|l| !before.contains(l)).collect();
    assert!(ours.len() >= 2, "rtscope's two namespaces are not visible: {ours:?}");
    signal(child.id(), libc::SIGTERM);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let after = live_net_namespaces();
    assert!(!ours.iter().any(|l| after.contains(l)), "namespaces {ours:?} outlived rtscope");
    assert!(!processes().iter().any(|p| p.contains("__netlat-sender")), "a sender process outlived rtscope");
    let v = show_json(&fx.db, "last");
    assert_eq!(v["status"], "interrupted", "{v}");
    let n = v["results"].as_array().unwrap().iter().find(|r| r["metric"] == "rx_total").map(|r| u(r, "count"));
    assert!(n.unwrap_or(0) >= 50, "the datagrams before the signal are kept: {v}");
}

/// Two namespaces named for this test, joined by a veth pair, removed
/// when dropped (with `ip`, as a user would set up two hosts).
struct TwoHosts {
    names: [String; 2],
    /// The veth ends: the target's, the peer's.
    links: [String; 2],
}

impl TwoHosts {
    fn new() -> Option<TwoHosts> {
        if !has("iproute2 (ip)", Command::new("ip").arg("-V").output().is_ok()) {
            return None;
        }
        let id = std::process::id();
        let t = TwoHosts {
            names: [format!("rtscope-test-{id}-t"), format!("rtscope-test-{id}-p")],
            links: [format!("rtt{id}"), format!("rtp{id}")],
        };
        let ip = |args: &[&str]| {
            let o = Command::new("ip").args(args).output().unwrap();
            assert!(o.status.success(), "ip {args:?}: {}", text(&o));
        };
        let (nt, np) = (&t.names[0], &t.names[1]);
        ip(&["netns", "add", nt]);
        ip(&["netns", "add", np]);
        let (vt, vp) = (&t.links[0], &t.links[1]);
        ip(&["link", "add", vt, "netns", nt, "type", "veth", "peer", "name", vp, "netns", np]);
        ip(&["-n", nt, "addr", "add", "198.18.7.1/30", "dev", vt]);
        ip(&["-n", np, "addr", "add", "198.18.7.2/30", "dev", vp]);
        ip(&["-n", nt, "link", "set", vt, "up"]);
        ip(&["-n", np, "link", "set", vp, "up"]);
        Some(t)
    }

    fn exec(&self, host: usize, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.names[host], BIN]).args(args);
        c
    }
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn serve_and_peer_across_two_namespaces() {
    let fx = Fixture::root();
    let Some(hosts) = TwoHosts::new() else { return };
    let last = last_cpu();
    let (server_cpu, peer_cpu) = (if last > 0 { last - 1 } else { 0 }.to_string(), last.to_string());
    // Both ends bound to their veth end (`--path iface:NAME`): veth has no
    // hardware timestamps, so both say so and measure with software ones.
    let (target_if, peer_if) = (format!("iface:{}", hosts.links[0]), format!("iface:{}", hosts.links[1]));
    let server = hosts
        .exec(0, &["netlat", "--serve", "198.18.7.1:47911", "--path", &target_if, "--cpus", &server_cpu, "-D", "10s"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The peer asks for 1.5 s: the server must listen by then, however
    // long its start took (its own namespace's sockets, in its /proc).
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(format!("/proc/{}/net/udp", server.id()))
        .unwrap_or_default()
        .contains(&format!(":{:04X} ", 47911))
    {
        assert!(std::time::Instant::now() < until, "the server did not listen on port 47911 in 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let json = fx.dir.join("peer.json");
    let o = hosts
        .exec(1, &["netlat", "--peer", "198.18.7.1:47911", "--path", &peer_if, "--cpus", &peer_cpu, "-D", "2s"])
        .args(["--quiet", "--db", &fx.db, "--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    // ip exec's the server in place: the child is the server.
    signal(server.id(), libc::SIGINT);
    let s = server.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}\nserver: {}", text(&o), text(&s));
    let served = String::from_utf8_lossy(&s.stderr);
    assert!(served.contains("echoed") && served.contains("target_turnaround"), "{served}");
    let no_hw = format!("{} has no hardware timestamps", hosts.links[0]);
    assert!(served.contains(&no_hw) && served.contains("software timestamps"), "{served}");
    assert!(!served.contains("target_turnaround_wire"), "{served}");
    let v = json_file(&json);
    let rows: HashMap<String, serde_json::Value> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["metric"].as_str().unwrap().to_string(), r.clone()))
        .collect();
    // 2 s of 10 ms periods; an echo later than the end is lost.
    let rtt = &rows["rtt"];
    check_sent(rtt, 200);
    let n = u(rtt, "count");
    for m in ["rtt", "transit", "rx_wake", "target_wake", "target_turnaround", "target_tx_sw"] {
        let r = &rows[m];
        let k = u(r, "count");
        // target_tx_sw of an echo comes with the next one.
        assert!(k <= n && k + n / 20 + 1 >= n, "{m}: {k} of {n} echoes: {r}");
        assert!(u(r, "min_ns") > 0, "{m}: {r}");
        assert_eq!((r["sent"].clone(), r["lost"].clone()), (rtt["sent"].clone(), rtt["lost"].clone()), "{r}");
        assert_eq!(r["path"], format!("round trip to 198.18.7.1:47911 through {}", hosts.links[1]), "{r}");
        assert_eq!(r["timestamps"], "software", "{r}");
    }
    assert!(!rows.contains_key("rtt_wire"), "no NIC stamps on veth: {rows:?}");
    // rtt = transit + the target's turnaround + the peer's own wake-up.
    let mean = |m: &str| rows[m]["mean_ns"].as_f64().unwrap();
    let parts = mean("transit") + mean("target_turnaround") + mean("rx_wake");
    assert!((parts - mean("rtt")).abs() < 0.01, "{parts} vs rtt {}", mean("rtt"));
    assert!(u(&rows["target_wake"], "p50_ns") <= u(&rows["target_turnaround"], "p50_ns"));
}

#[test]
fn bad_settings_are_refused_with_the_flag() {
    let o = rtscope(&["netlat", "--interval", "50us", "--db", "/tmp/never.db"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("--interval 50us is below 100us"), "{}", text(&o));
    let o = rtscope(&["netlat", "--path", "iface:eth0", "-D", "1s", "--db", "/tmp/never.db"]);
    assert!(text(&o).contains("--peer ADDR:PORT"), "{}", text(&o));
    let o = rtscope(&["netlat", "--path", "wifi"]);
    assert!(text(&o).contains("iface:NAME"), "{}", text(&o));
    let o = rtscope(&["netlat", "--size", "20"]);
    assert!(text(&o).contains("--size"), "{}", text(&o));
    // Nobody serves there: nothing is sent beyond the hellos.
    let o = rtscope(&["netlat", "--peer", "127.0.0.1:9", "-D", "1s", "--db", "/tmp/never.db"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("no rtscope responder answered"), "{}", text(&o));
    assert!(!std::path::Path::new("/tmp/never.db").exists());
}

/// CLOCK_MONOTONIC now, in ns (the clock of rtscope's samples and episodes).
fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime fills the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What the disturber did in one window: a UDP flood, or a user-space busy
/// loop, from `start` to `end` (CLOCK_MONOTONIC ns).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Window {
    flood: bool,
    start: u64,
    end: u64,
}

/// A SCHED_OTHER thread on `cpu` until `stop`, logging what it does: every
/// 10.333 ms (no multiple of netlat's 1 ms), 3 ms of UDP flood to a sink
/// on 127.0.0.1 (UDP GSO: 40 segments of 1400 bytes per send, so that the
/// NET_RX softirq of each send is long), then 3 ms of a user-space busy
/// loop, then nothing. The two kinds alternate within one run, so that
/// whatever else the machine does falls on both alike. Returns its thread
/// id and, when stopped, its windows.
fn flood_and_spin(
    cpu: usize,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (i64, std::thread::JoinHandle<Vec<Window>>) {
    use std::sync::atomic::Ordering::Relaxed;
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        // SAFETY: affinity of this thread on a zeroed cpu_set_t; gettid.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            tid_tx.send(libc::gettid() as i64).unwrap();
        }
        let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect(sink.local_addr().unwrap()).unwrap();
        let seg: libc::c_int = 1400;
        // SAFETY: UDP_SEGMENT (103) on our own socket with an int.
        let rc = unsafe {
            use std::os::fd::AsRawFd;
            libc::setsockopt(s.as_raw_fd(), libc::SOL_UDP, 103, (&seg as *const libc::c_int).cast(), 4)
        };
        let buf = vec![0u8; if rc == 0 { 1400 * 40 } else { 1400 }];
        let mut windows = Vec::with_capacity(4096);
        let mut next = mono_ns();
        while !stop.load(Relaxed) {
            for flood in [true, false] {
                let start = mono_ns();
                let mut now = start;
                while now < start + 3_000_000 {
                    if flood {
                        let _ = s.send(&buf);
                    } else {
                        std::hint::black_box(now);
                    }
                    now = mono_ns();
                }
                windows.push(Window { flood, start, end: now });
            }
            next += 10_333_000;
            let now = mono_ns();
            if next > now {
                std::thread::sleep(Duration::from_nanos(next - now));
            } else {
                next = now;
            }
        }
        windows
    });
    (tid_rx.recv().unwrap(), t)
}

/// Ground truth by timestamps: netlat traced on one CPU (its datagrams'
/// sender on another, so that the wake-up has to wait for what runs
/// there), beside a thread on that CPU that alternates windows of UDP
/// flood and of a user-space busy loop, logging each. Every episode of
/// rx_wake inside a flood window is blamed on what the flood does, in
/// whichever form the kernel and the host give it: its NET_RX softirqs,
/// the flooding thread in its send path (with the NET_RX it runs there
/// named with it, as one), or the time the flooding thread ran while the
/// wake-up's IPI did not get through; or, as often as the host's own
/// stalls are seen in the busy-loop windows, on something else. Which of
/// the forms leads is the kernel's preemption model's and the host's
/// speed's, not rtscope's: it is not judged. No episode inside a
/// busy-loop window names NET_RX: the receiver preempts a user-space
/// loop at once. The receiver's wake-ups, made on the sender's CPU, are
/// read from there.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_udp_flood_delays_rx_wake_through_net_rx_softirqs() {
    let fx = Fixture::root();
    let cpu = last_cpu();
    if !has("two CPUs", cpu > 0) || !has_tracefs() {
        return;
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (tid, t) = flood_and_spin(cpu, std::sync::Arc::clone(&stop));
    std::thread::sleep(Duration::from_millis(100));
    let c = cpu.to_string();
    let (rows, _) = run(
        &fx,
        "f.json",
        &["--cpus", &c, "--sender-cpu", "0", "--interval", "1ms", "--duration", "6s", "--trace"]
            .into_iter()
            .chain(["--cause-threshold", "30us", "--episodes", "5000"])
            .collect::<Vec<_>>(),
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let windows = t.join().unwrap();
    // Every period of the 6 s a datagram sent or skipped (a host stall of
    // the sender, counted), every one sent received or lost; how many a
    // host stall skips is the host's, not a bound on the probe.
    let r = &rows["rx_wake"];
    let (n, sent, lost, skipped) = (u(r, "count"), u(r, "sent"), u(r, "lost"), u(r, "skipped"));
    assert_eq!(sent, n + lost, "every datagram sent is received or lost: {r}");
    assert!((5_998..=6_001).contains(&(sent + skipped)), "{sent} sent + {skipped} skipped in 6000 periods: {r}");
    assert!(n * 2 >= sent + skipped, "{n} datagrams received of 6000 periods: {r}");
    let doc = export(&fx.db, &[]);
    let is_net_rx = |c: &serde_json::Value| c["kind"] == "softirq" && c["name"] == "NET_RX";
    // Each episode in the window kind that holds its whole span (its
    // programmed instant to its wake-up; the softirqs of a flood's sends
    // may run up to 1 ms after them, from ksoftirqd).
    let (mut flood, mut spin) = (Vec::new(), Vec::new());
    for e in doc["episodes"].as_array().unwrap().iter().filter(|e| e["metric"] == "rx_wake") {
        let (a, b) = (e["programmed_ns"].as_u64().unwrap(), e["woke_ns"].as_u64().unwrap());
        let inside = |w: &&Window| w.start <= a && b <= w.end + if w.flood { 1_000_000 } else { 0 };
        match windows.iter().position(|w| inside(&w)) {
            Some(i) if windows[i].flood => flood.push((i, e)),
            Some(i) => spin.push((i, e)),
            None => {}
        }
    }
    let (flood, flood_at): (Vec<_>, Vec<_>) = flood.into_iter().map(|(i, e)| (e, i)).unzip();
    let (spin, spin_at): (Vec<_>, Vec<_>) = spin.into_iter().map(|(i, e)| (e, i)).unzip();
    let flooder = |c: &serde_json::Value| c["kind"] == "thread" && c["pid"].as_i64() == Some(tid);
    // Time the flooding thread ran while the wake-up's IPI did not get
    // through: interrupts off in its send path, or the hypervisor.
    let held_off = |c: &serde_json::Value| c["kind"] == "unaccounted" && c["pid"].as_i64() == Some(tid);
    let flood_share = |e: &serde_json::Value| {
        let ns = |c: &serde_json::Value| c["ns"].as_u64().unwrap();
        let causes = e["causes"].as_array().unwrap();
        let part: u64 = causes.iter().filter(|c| is_net_rx(c) || flooder(c) || held_off(c)).map(ns).sum();
        part as f64 / e["latency_ns"].as_u64().unwrap().max(1) as f64
    };
    // The flood's part may lead split: the flooding thread and NET_RX on an
    // interrupt's return to it, each smaller than the receiver's own return
    // to user space (slow beside a flood). An episode is the flood's when
    // one of its forms leads, or when its parts make a quarter of the
    // latency.
    let main_kind = |e: &serde_json::Value| {
        let m = main_cause(e);
        if is_net_rx(m) {
            "NET_RX"
        } else if flooder(m) {
            "the flooding thread"
        } else if held_off(m) {
            "the flooding thread, its wake-up IPI held off"
        } else if flood_share(e) >= 0.25 {
            "the flood, split"
        } else {
            "other"
        }
    };
    let verdicts = |eps: &[&serde_json::Value]| {
        eps.iter().map(|e| format!("{} {}", main_kind(e), e["verdict"])).collect::<Vec<_>>().join("\n")
    };
    // The windows (not the episodes: on a busy machine one window holds
    // several, one per datagram queued behind the same delay) in which
    // something else led an episode.
    let windows_with_other = |eps: &[&serde_json::Value], at: &[usize]| {
        let mut w: Vec<usize> = eps.iter().zip(at).filter(|(e, _)| main_kind(e) == "other").map(|(_, &i)| i).collect();
        // (The episodes come worst first, not in time.)
        w.sort_unstable();
        w.dedup();
        w.len() as u64
    };
    let flood_other = windows_with_other(&flood, &flood_at);
    let spin_other = windows_with_other(&spin, &spin_at);
    eprintln!(
        "{} windows; episodes of rx_wake inside flood windows: {} ({flood_other} blamed on neither NET_RX nor the flood), inside busy-loop windows: {} ({spin_other} on something else)",
        windows.len(),
        flood.len(),
        spin.len()
    );
    let others: Vec<&serde_json::Value> = flood.iter().copied().filter(|e| main_kind(e) == "other").collect();
    eprintln!("{}", verdicts(&others));
    // The flood is seen (the bounds below are not met by having none). How
    // often it delays rx_wake past 30 us depends on the flooding thread's
    // share of its CPU, which a CPU hog on the machine halves: 28 were seen
    // then.
    assert!(flood.len() >= 10, "a 3 ms flood every 10.333 ms for 6 s made only {} episodes", flood.len());
    // In a busy-loop window, the receiver wakes at once: no NET_RX there.
    let named: Vec<&serde_json::Value> =
        spin.iter().copied().filter(|e| e["causes"].as_array().unwrap().iter().any(is_net_rx)).collect();
    assert!(named.is_empty(), "episodes in busy-loop windows name NET_RX:\n{}", verdicts(&named));
    // In a flood window: the flood, but for what the machine does anyway:
    // as many flood windows may hold an episode led by something else as
    // the busy-loop windows do (an upper bound at 1e-4 on their share; a
    // flood window is judged over 4 ms, its 3 and the 1 ms after, against
    // the busy loop's 3).
    let (flood_n, spin_n) =
        windows.iter().fold((0u64, 0u64), |(f, s), w| (f + u64::from(w.flood), s + u64::from(!w.flood)));
    let q = 1.0 - (1.0 - truth::rate_upper(spin_other, spin_n, 0.01)).powf(4.0 / 3.0);
    let allowed = truth::binomial_upper(flood_n, q, truth::FALSE_FAILURE);
    assert!(
        flood_other <= allowed,
        "{flood_other} of {flood_n} flood windows hold an episode blamed on neither NET_RX nor the flood (the busy-loop windows' {spin_other} of {spin_n} allow {allowed}):\n{}",
        verdicts(&flood)
    );
    // Where the flooding thread and NET_RX both held the CPU, both are
    // named: a NET_RX in a flood window says what it ran on (the flooding
    // thread, or ksoftirqd), and where the flooding thread ran it from its
    // own send path and leads, the verdict names the thread and the
    // softirq as one.
    let mut both = 0;
    for e in &flood {
        let causes = e["causes"].as_array().unwrap();
        for c in causes.iter().filter(|c| is_net_rx(c)) {
            let host = &c["host"];
            let on = host["pid"].as_i64();
            let ok = on == Some(tid) || host["name"].as_str().is_some_and(|n| n.starts_with("ksoftirqd"));
            assert!(ok, "NET_RX in a flood window ran on neither the flood nor ksoftirqd: {c}\n{}", e["verdict"]);
            if on == Some(tid) && host["in_kernel"] == true && flooder(main_cause(e)) {
                both += 1;
                let v = e["verdict"].as_str().unwrap();
                assert!(
                    v.contains(&format!("blocked by a_udp_flood_del (pid {tid}")) && v.contains("softirq NET_RX"),
                    "the flooding thread leads with the NET_RX it ran, unnamed: {v}"
                );
            }
        }
    }
    let by: std::collections::BTreeMap<&str, usize> = flood.iter().fold(Default::default(), |mut m, e| {
        *m.entry(main_kind(e)).or_default() += 1;
        m
    });
    eprintln!("the flood's episodes by what led them: {by:?}; {both} name the thread and its NET_RX as one");
    // The receiver's wake-ups were made on the sender's CPU and read from
    // there: nearly one per datagram (some wake-ups come before the trace's
    // clock is mapped, or the receiver is still running).
    let lane = &doc["trace"]["per_cpu"][0];
    let remote = lane["remote_wakings"].as_u64().unwrap_or(0);
    assert!(remote * 2 >= n, "{remote} wakings on the sender's CPU read for {n} datagrams: {lane}");
}
