//! What a run with loads leaves behind, as root (CI runs as root): no child
//! of a load nor its temporary directory outlives the run, whether it ends,
//! is stopped by SIGTERM or is killed by SIGKILL.

mod common;
use common::loads::*;
use common::*;
use std::process::Command;
use std::time::Duration;

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn no_child_or_temporary_file_outlives_a_run_or_a_sigterm() {
    let fx = Fixture::root();
    let mark = format!("307{}.5", std::process::id() % 1000);
    let loads = format!("cmd:'sleep {mark}',compile,fork");
    // To its end.
    let o = rtscope_in(&fx.dir, &["load", &loads, "--duration", "2s", "--db", &fx.db, "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    std::thread::sleep(Duration::from_millis(200));
    assert!(running_with(&mark).is_empty(), "{:?}", running_with(&mark));
    assert!(running_with(fx.dir.to_str().unwrap()).is_empty(), "{:?}", running_with(fx.dir.to_str().unwrap()));
    assert!(leftovers(&fx.dir).is_empty(), "{:?}", leftovers(&fx.dir));
    // SIGTERM in the middle of an assessment's cell (under compile), and in
    // the middle of `rtscope load` (every load at once).
    let run = ["run", "--quick", "--probes", "wakeup", "--loads", "compile,fork", "--db", &fx.db, "-q"];
    let load = ["load", &loads, "--db", &fx.db, "-q"];
    for (args, has_cmd) in [(&run[..], false), (&load[..], true)] {
        let mut child = Command::new(BIN).args(args).env("TMPDIR", &fx.dir).spawn().unwrap();
        // Until the loads run (the compile load's directory is there, and
        // the cmd load's process), then a little longer: a loaded VM may
        // take seconds to get there.
        let until = std::time::Instant::now() + Duration::from_secs(20);
        while leftovers(&fx.dir).is_empty() || (has_cmd && running_with(&mark).is_empty()) {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("{args:?} ended early ({status}): run it by hand to see why");
            }
            assert!(std::time::Instant::now() < until, "{args:?}: the loads never started");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(300));
        if let Some(status) = child.try_wait().unwrap() {
            panic!("{args:?} ended early ({status}): run it by hand to see why");
        }
        signal(child.id(), libc::SIGTERM);
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{args:?}: a SIGTERM ends it cleanly");
        std::thread::sleep(Duration::from_millis(200));
        assert!(running_with(&mark).is_empty(), "{args:?}: {:?}", running_with(&mark));
        let dir = fx.dir.to_str().unwrap();
        assert!(running_with(dir).is_empty(), "{args:?}: {:?}", running_with(dir));
        assert!(leftovers(&fx.dir).is_empty(), "{args:?}: {:?}", leftovers(&fx.dir));
        let v = show_json(&fx.db, "last");
        // `rtscope load` without --duration runs until a signal: its planned end.
        let want = if has_cmd { "complete" } else { "interrupted" };
        assert_eq!(v["status"], want, "{args:?}: {}", v["run"]["notes"]);
        assert!(v["results"].as_array().unwrap().iter().all(|r| r["load"].is_string()));
        assert!(!has_cmd || !v["characterisation"].as_array().unwrap().is_empty(), "{v}");
    }
}

/// SIGKILL gives rtscope no chance to stop its loads: the kernel kills its
/// direct children (parent-death signal), and the janitor kills their
/// process groups, i.e. what a load's command started (a shell's commands,
/// the compiler's passes).
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_sigkill_leaves_no_load_command_nor_what_it_started() {
    let fx = Fixture::root();
    let mark = format!("308{}.5", std::process::id() % 1000);
    let loads = format!("cmd:'sleep {mark} & sleep {mark}; wait',compile");
    let mut child =
        Command::new(BIN).args(["load", &loads, "--db", &fx.db, "-q"]).env("TMPDIR", &fx.dir).spawn().unwrap();
    let dir = fx.dir.to_str().unwrap().to_string();
    // Both sleeps (grandchildren: the shell started them) and a compiler
    // process working in the compile load's directory (rtscope's own
    // command line holds `dir` too, for its store).
    let grandchildren = || running_with(&mark).iter().filter(|c| c.starts_with("sleep")).count();
    let compiling = || !running_with(&format!("{dir}/rtscope-load-")).is_empty();
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while grandchildren() < 2 || !compiling() {
        assert!(child.try_wait().unwrap().is_none(), "rtscope load ended early");
        assert!(std::time::Instant::now() < until, "the loads never started: {:?}", running_with(&mark));
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while !running_with(&mark).is_empty() || !running_with(&dir).is_empty() {
        assert!(
            std::time::Instant::now() < until,
            "left running after a SIGKILL: {:?} {:?}",
            running_with(&mark),
            running_with(&dir)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_sigkill_leaves_no_temporary_directory_of_a_load() {
    let fx = Fixture::root();
    let mut child =
        Command::new(BIN).args(["load", "disk,compile", "--db", &fx.db, "-q"]).env("TMPDIR", &fx.dir).spawn().unwrap();
    // Both directories, the disk load's file being written in one, the
    // compiler's sources in the other.
    let holds = |file: &str| {
        leftovers(&fx.dir)
            .iter()
            .any(|d| std::fs::read_dir(fx.dir.join(d)).unwrap().flatten().any(|e| e.file_name() == file))
    };
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while leftovers(&fx.dir).len() < 2 || !holds("disk-load.bin") || !holds("unit0.c") {
        assert!(child.try_wait().unwrap().is_none(), "rtscope load ended early");
        assert!(std::time::Instant::now() < until, "the loads never started: {:?}", leftovers(&fx.dir));
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = std::time::Instant::now();
    // The janitor removes them within a second here; ten allow for a
    // loaded machine (the disk load's file is large), and what is never
    // removed still fails.
    while !leftovers(&fx.dir).is_empty() {
        assert!(killed.elapsed() < Duration::from_secs(10), "left after a SIGKILL: {:?}", leftovers(&fx.dir));
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!("removed {:?} after the SIGKILL", killed.elapsed());
}

/// A load's command whose child leaves its process group and session
/// (`setsid`, as a daemon does): the child ends with the load when the
/// run ends, and after a SIGKILL of rtscope (its cgroup, or the marker in
/// its environment, tells it, where the process group no longer does).
/// Before, `sleep` of the setsid outlived rtscope under PID 1.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_load_child_that_left_its_session_goes_with_the_load() {
    let fx = Fixture::root();
    for kill in [true, false] {
        let (a, b) = (
            format!("100{}.{}", std::process::id() % 1000, kill as u8 + 1),
            format!("200{}.5", std::process::id() % 1000),
        );
        let loads = format!("cmd:'setsid sleep {a} & sleep {b}'");
        let duration = if kill { "30s" } else { "2s" };
        let mut child = Command::new(BIN)
            .args(["load", &loads, "-D", duration, "--db", &fx.db, "-q"])
            .env("TMPDIR", &fx.dir)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let until = std::time::Instant::now() + Duration::from_secs(20);
        while running_with(&a).is_empty() || running_with(&b).is_empty() {
            assert!(child.try_wait().unwrap().is_none(), "rtscope load ended early");
            assert!(std::time::Instant::now() < until, "the load never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        if kill {
            child.kill().unwrap();
        }
        child.wait().unwrap();
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while !running_with(&a).is_empty() || !running_with(&b).is_empty() {
            assert!(
                std::time::Instant::now() < until,
                "left running after {}: {:?} {:?}",
                if kill { "a SIGKILL" } else { "the run's end" },
                running_with(&a),
                running_with(&b)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
