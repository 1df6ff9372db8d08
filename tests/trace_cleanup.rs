//! `--trace` and the machine as found: beside another tracer, without
//! root, after SIGINT and SIGKILL, two runs sharing one tracefs mount.
//! Root only.

mod common;

use common::*;
use std::process::Command;

/// Another tracer's instance with an event enabled, and `record-cmd` on,
/// while it lives; then tracefs as found.
struct OtherTracer {
    root: std::path::PathBuf,
    dir: std::path::PathBuf,
    mounted: bool,
    record_cmd: String,
}

impl OtherTracer {
    fn start() -> OtherTracer {
        let held = rtscope::sys::tracefs::mount_lock();
        let (root, mounted) = rtscope::sys::tracefs::find_or_mount().expect("tracefs");
        let dir = root.join(format!("instances/other-tracer-{}", std::process::id()));
        let made = std::fs::create_dir(&dir);
        let record_cmd = std::fs::read_to_string(root.join("options/record-cmd"));
        if made.is_err() || record_cmd.is_err() {
            let _ = std::fs::remove_dir(&dir);
            if mounted {
                rtscope::sys::tracefs::release(&root);
            }
            panic!("another tracer's instance {}: {made:?}, record-cmd {record_cmd:?}", dir.display());
        }
        // Dropped from here on: its own drop takes the lock again.
        drop(held);
        let t = OtherTracer { root, dir, mounted, record_cmd: record_cmd.unwrap() };
        std::fs::write(t.dir.join("events/sched/sched_wakeup/enable"), "1").unwrap();
        std::fs::write(t.root.join("options/record-cmd"), "1").unwrap();
        t
    }
}

impl Drop for OtherTracer {
    fn drop(&mut self) {
        let _ = std::fs::write(self.root.join("options/record-cmd"), self.record_cmd.trim());
        let _ = std::fs::remove_dir(&self.dir);
        if self.mounted {
            let _held = rtscope::sys::tracefs::mount_lock();
            rtscope::sys::tracefs::release(&self.root);
        }
    }
}

/// `record-cmd` is turned off for a trace only when nobody else traces:
/// beside another tracer's instance it stays on, and the run says what
/// that costs.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn record_cmd_stays_on_beside_another_tracer() {
    let fx = Fixture::root();
    if !has_tracefs() {
        return;
    }
    let other = OtherTracer::start();
    let name = other.dir.file_name().unwrap().to_string_lossy().into_owned();
    let o = rtscope(&["wakeup", "--trace", "--stacks", "off", "--cpus", "0", "-D", "1s", "--db", &fx.db]);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("record-cmd stays on") && err.contains(&name), "{err}");
    assert_eq!(std::fs::read_to_string(other.root.join("options/record-cmd")).unwrap().trim(), "1");
    let doc = export(&fx.db, &[]);
    let held = doc["run"]["plan"]["trace"]["record_cmd"].as_str().unwrap().to_string();
    assert_eq!(held, format!("left on: another tracer uses the instance {name}"), "{}", doc["run"]["plan"]);
    drop(other);
    assert!(instances().is_empty(), "{:?}", instances());
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn without_root_trace_degrades_with_a_warning() {
    let fx = Fixture::root();
    let o = fx.as_nobody().args(["wakeup", "--trace", "--duration", "500ms", "--db", &fx.db]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--trace:") && err.contains("without the stage split"), "{err}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains("stages (us)") && out.contains("wakeup latency"), "{out}");
    assert!(instances().is_empty());
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn an_interrupted_traced_run_keeps_its_episodes_and_removes_its_instance() {
    let fx = Fixture::root();
    if !has_tracefs() {
        return;
    }
    let child = Command::new(BIN)
        .args(["wakeup", "--trace", "-D", "20s", "--checkpoint", "1s", "--cause-threshold", "20us"])
        .args(["--db", &fx.db, "-q"])
        .spawn()
        .unwrap();
    // At least 1 s traced once the first checkpoint is stored (a loaded
    // VM may take seconds to start tracing), then 1.5 s more.
    wait_for_first_checkpoint(&fx.db);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(!instances().is_empty(), "the instance exists while tracing");
    signal(child.id(), libc::SIGINT);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(instances().is_empty(), "{:?}", instances());
    let doc = export(&fx.db, &[]);
    assert_eq!(doc["status"], "interrupted");
    assert!(doc["trace"]["per_cpu"][0]["decomposed"].as_u64().unwrap() > 1000, "{}", doc["trace"]);
    assert!(!doc["episodes"].as_array().unwrap().is_empty());
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_sigkill_leaves_no_instance_tracing_and_unmounts_what_it_mounted() {
    let fx = Fixture::root();
    if !has_tracefs() {
        return;
    }
    let mounted_before = tracefs_mounted();
    let record_cmd_before = record_cmd();
    // With --stacks on: the stack instance beside the main one, and the
    // profiler's perf events.
    let mut child = Command::new(BIN)
        .args(["wakeup", "--trace", "--stacks", "on", "-D", "60s", "--cause-threshold", "20us", "--db", &fx.db, "-q"])
        .spawn()
        .unwrap();
    let name = format!("rtscope-{}", child.id());
    let stacks_name = format!("{name}-stacks");
    let dir_of = |name: &str| {
        ["/sys/kernel/tracing/instances", "/sys/kernel/debug/tracing/instances"]
            .iter()
            .map(|d| std::path::Path::new(d).join(name))
            .find(|p| p.is_dir())
    };
    let dir = || dir_of(&name).or_else(|| dir_of(&stacks_name));
    let tracing_on = |d: &std::path::Path| std::fs::read_to_string(d.join("tracing_on")).unwrap_or_default();
    // Until the instance traces (a loaded VM may take seconds to get there).
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("rtscope wakeup --trace ended early ({status}): run it by hand to see why");
        }
        let on = |n: &str| dir_of(n).is_some_and(|d| tracing_on(&d).trim() == "1");
        if on(&name) && on(&stacks_name) {
            break;
        }
        assert!(std::time::Instant::now() < until, "{name} never traced");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(record_cmd(), "0", "record-cmd is off while rtscope traces");
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = std::time::Instant::now();
    // The janitor stops tracing and removes the instance within a second
    // here; ten allow for a loaded machine (removing an instance frees its
    // buffers), and one that never does still fails.
    while let Some(d) = dir() {
        assert!(
            killed.elapsed() < std::time::Duration::from_secs(10),
            "{} left after a SIGKILL, tracing_on {}",
            d.display(),
            tracing_on(&d).trim()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    while tracefs_mounted() != mounted_before {
        assert!(
            killed.elapsed() < std::time::Duration::from_secs(10),
            "tracefs mount state not restored (mounted before: {mounted_before})"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // The janitor turns record-cmd back on (after the instances, before
    // it unmounts tracefs).
    while record_cmd() != record_cmd_before {
        assert!(killed.elapsed() < std::time::Duration::from_secs(10), "record-cmd not as found after the SIGKILL");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    eprintln!("instances removed {:?} after the SIGKILL", killed.elapsed());
    assert!(!instances().contains(&name) && !instances().contains(&stacks_name), "{:?}", instances());
}

/// A child rtscope, killed and waited for should the test fail first.
struct Running(Option<std::process::Child>);

impl Running {
    fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, std::process::Child::id)
    }

    /// Ends it by SIGINT (its own end, which must succeed) or SIGKILL.
    fn end(mut self, how: &str) {
        let mut c = self.0.take().unwrap();
        if how == "SIGKILL" {
            c.kill().unwrap();
            c.wait().unwrap();
        } else {
            signal(c.id(), libc::SIGINT);
            let o = c.wait_with_output().unwrap();
            assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `rtscope wakeup --trace` (no stacks: one instance) for up to a
/// minute, to `db`, once its instance traces.
fn tracing_child(db: &str) -> Running {
    let child = Running(Some(
        Command::new(BIN)
            .args(["wakeup", "--trace", "--stacks", "off", "-D", "60s", "--cause-threshold", "20us", "--db", db, "-q"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    ));
    let on = |root: &str| std::path::Path::new(root).join(format!("instances/rtscope-{}/tracing_on", child.id()));
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .all(|r| std::fs::read_to_string(on(r)).map_or(true, |v| v.trim() != "1"))
    {
        assert!(std::time::Instant::now() < until, "rtscope {} never traced", child.id());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child
}

/// The system's tracefs mount on /sys/kernel/tracing, unmounted for a
/// test and mounted again as it was (its source and options) when
/// dropped. (Mounting tracefs over tracefs is refused: EBUSY.)
struct SystemMountAside {
    source: String,
    options: String,
}

impl SystemMountAside {
    /// None: there is none, or it is in use (unmounting it is refused).
    fn take() -> Option<SystemMountAside> {
        let text = std::fs::read_to_string("/proc/self/mounts").unwrap();
        // The last mount on the point is the one seen there: a tracefs.
        let line = text.lines().rev().find(|l| l.split_whitespace().nth(1) == Some("/sys/kernel/tracing"))?;
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 || f[2] != "tracefs" {
            return None;
        }
        rustix::mount::unmount("/sys/kernel/tracing", rustix::mount::UnmountFlags::empty()).ok()?;
        Some(SystemMountAside { source: f[0].to_string(), options: f[3].to_string() })
    }
}

impl Drop for SystemMountAside {
    fn drop(&mut self) {
        // A failed test may leave rtscope's mount there (a killed run's
        // janitor still at work): given 10 s to go, then unmounted.
        let rtscope_mount = || {
            let text = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
            rtscope::sys::tracefs::mounts_in(&text)
                .iter()
                .any(|(source, point)| point == "/sys/kernel/tracing" && source == rtscope::sys::tracefs::SOURCE)
        };
        let t = std::time::Instant::now();
        while rtscope_mount() && t.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        if rtscope_mount() {
            let _ = rustix::mount::unmount("/sys/kernel/tracing", rustix::mount::UnmountFlags::empty());
        }
        let o = Command::new("mount")
            .args(["-t", "tracefs", "-o", &self.options, &self.source, "/sys/kernel/tracing"])
            .output();
        let ok = o.as_ref().is_ok_and(|o| o.status.success());
        if std::thread::panicking() {
            if !ok {
                eprintln!("the system's tracefs could not be mounted again: {o:?}");
            }
        } else {
            assert!(ok, "the system's tracefs mounted again: {o:?}");
        }
    }
}

/// Two traced runs at once: the first mounts tracefs, the second uses
/// that mount. Whichever leaves last, by its own end or by a SIGKILL (its
/// janitor), unmounts it; the first, if it leaves while the second
/// traces, leaves it mounted. Where the system has tracefs mounted on
/// /sys/kernel/tracing, the test unmounts it for its time and mounts it
/// again as it was after; where that mount is in use, or debugfs is
/// mounted (whose tracing directory mounts tracefs by itself), it says
/// it is skipped.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn runs_sharing_a_mount_leave_it_unmounted_whichever_ends_last() {
    let fx = Fixture::root();
    if !has_tracefs() {
        return;
    }
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    if mounts.lines().any(|l| l.split_whitespace().nth(1) == Some("/sys/kernel/debug")) {
        skipped(
            "debugfs is mounted on /sys/kernel/debug: with the system's tracefs set aside, rtscope would use the \
             tracefs debugfs mounts by itself at /sys/kernel/debug/tracing, and make no mount of its own",
        );
        return;
    }
    let system = SystemMountAside::take();
    if tracefs_mounted() {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        skipped(&format!(
            "tracefs is mounted and in use, so the mount rtscope makes cannot be tested: {:?}",
            rtscope::sys::tracefs::mounts_in(&mounts)
        ));
        return;
    }
    eprintln!("the system's tracefs mount set aside for the test: {}", system.is_some());
    let db = |n: &str| fx.dir.join(n).to_str().unwrap().to_string();
    for (first_ends, last_ends) in [("SIGINT", "SIGKILL"), ("SIGKILL", "SIGINT")] {
        let first = tracing_child(&db(&format!("first-{first_ends}.db")));
        let last = tracing_child(&db(&format!("last-{last_ends}.db")));
        let last_name = format!("rtscope-{}", last.id());
        first.end(first_ends);
        // The first's instance goes (at once, or by its janitor), the mount stays.
        let t = std::time::Instant::now();
        while instances().len() > 1 {
            assert!(t.elapsed() < std::time::Duration::from_secs(10), "{:?} after a {first_ends}", instances());
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(instances(), std::slice::from_ref(&last_name), "after the first run's {first_ends}");
        assert!(tracefs_mounted(), "tracefs unmounted under a run that traces");
        last.end(last_ends);
        let t = std::time::Instant::now();
        while tracefs_mounted() {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(10),
                "tracefs left mounted after the first run's {first_ends} and the last one's {last_ends}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(instances().is_empty(), "{:?}", instances());
        assert!(!tracefs_mounted(), "tracefs left mounted by looking at it");
    }
    drop(system);
}

/// `record-cmd` set for a test, and as found again after it.
struct RecordCmdSet(String);

impl RecordCmdSet {
    fn to(value: &str) -> RecordCmdSet {
        let before = record_cmd();
        in_tracefs(|root| std::fs::write(root.join("options/record-cmd"), value)).unwrap();
        RecordCmdSet(before)
    }
}

impl Drop for RecordCmdSet {
    fn drop(&mut self) {
        // After a failed test the runs' janitors may still be at work: a
        // moment for the last holder to let go first.
        let t = std::time::Instant::now();
        while std::path::Path::new("/run/rtscope/record-cmd").exists() && t.elapsed().as_secs() < 3 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = in_tracefs(|root| std::fs::write(root.join("options/record-cmd"), &self.0));
    }
}

/// Two traced runs at once hold `record-cmd` off together: the first to
/// leave, by its own end or by a SIGKILL (its janitor), leaves it off
/// while the other traces; the last turns it back on, and no holder's
/// file is left in /run. Each run's plan says which it was.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn runs_sharing_record_cmd_leave_it_on_when_the_last_one_ends() {
    let fx = Fixture::root();
    if !has_tracefs() {
        return;
    }
    let _set = RecordCmdSet::to("1");
    let holders = std::path::Path::new("/run/rtscope/record-cmd");
    let db = |n: &str| fx.dir.join(n).to_str().unwrap().to_string();
    for (first_ends, last_ends) in [("SIGINT", "SIGKILL"), ("SIGKILL", "SIGINT")] {
        let (first_db, last_db) = (db(&format!("first-{first_ends}.db")), db(&format!("last-{last_ends}.db")));
        let first = tracing_child(&first_db);
        assert_eq!(record_cmd(), "0", "off while the first run traces");
        let last = tracing_child(&last_db);
        let last_name = format!("rtscope-{}", last.id());
        first.end(first_ends);
        let t = std::time::Instant::now();
        while instances() != std::slice::from_ref(&last_name) {
            assert!(t.elapsed() < std::time::Duration::from_secs(10), "{:?} after a {first_ends}", instances());
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // The janitor has removed the instance, and acts on record-cmd
        // after it: a moment for that.
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert_eq!(record_cmd(), "0", "turned on under a run that traces, by the first one's {first_ends}");
        last.end(last_ends);
        let t = std::time::Instant::now();
        while record_cmd() != "1" {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(10),
                "record-cmd left off after the first run's {first_ends} and the last one's {last_ends}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!holders.exists(), "holders left in /run: {:?}", std::fs::read_dir(holders).map(|d| d.count()));
        let plan = |db: &str| export(db, &[])["run"]["plan"]["trace"]["record_cmd"].as_str().unwrap_or("").to_string();
        assert_eq!(plan(&first_db), "off for the run");
        assert_eq!(plan(&last_db), "off for the run, held with another rtscope");
    }
}
