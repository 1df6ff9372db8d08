//! The kernel's latency tracers on this machine's kernel, as root: each run
//! says whether it used timerlat (wakeup) or osnoise (noise), or why not,
//! and hwlat runs or is refused naming what the kernel lacks. Where the
//! kernel has them (Debian's RT kernel), tests/rt_kernel.rs checks what
//! they measure in the VM test bed.

mod common;
use common::*;

/// Whether this kernel has the tracer `name` (its available_tracers).
fn has_tracer(name: &str) -> bool {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"].iter().any(|r| {
        std::fs::read_to_string(format!("{r}/available_tracers")).is_ok_and(|t| t.split_whitespace().any(|x| x == name))
    })
}

/// A probe's run notes its kernel tracer: used (its series stored), or
/// not used and why, the plan saying the same.
fn says(probe: &str, tracer: &str, series: &str) {
    let fx = Fixture::root();
    let db = fx.db.as_str();
    let o = rtscope(&[probe, "--cpus", "0", "-D", "300ms", "--db", db, "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let shown = show_json(db, "last");
    let notes: Vec<&str> = shown["run"]["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).collect();
    let plan = &shown["run"]["plan"]["kernel_tracer"];
    assert_eq!(plan["tracer"], tracer, "{plan}");
    let stored = shown["results"].as_array().unwrap().iter().any(|r| r["metric"] == series);
    if has_tracer(tracer) {
        assert!(
            notes.iter().any(|n| n.starts_with(&format!("{tracer}: the kernel's {tracer} tracer ran"))),
            "{notes:?}"
        );
        assert!(stored, "no {series}: {shown}");
    } else {
        let why = format!("has no {tracer} tracer (built without CONFIG_");
        assert!(notes.iter().any(|n| n.starts_with(&format!("{tracer}: not used: ")) && n.contains(&why)), "{notes:?}");
        assert!(plan["not_used"].as_str().unwrap().contains(&why), "{plan}");
        assert!(!stored, "{series} stored without the tracer: {shown}");
    }
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn wakeup_says_whether_timerlat_ran_beside_it() {
    says("wakeup", "timerlat", "timerlat_thread");
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn noise_says_whether_osnoise_ran_beside_it() {
    says("noise", "osnoise", "osnoise_irq");
}

/// `--timerlat on` on a kernel without it fails before measuring, naming
/// the flag and what the kernel lacks; `off` runs without it, saying
/// nothing of it.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn timerlat_on_without_the_tracer_is_refused_and_off_is_quiet() {
    let fx = Fixture::root();
    let db = fx.db.as_str();
    if !has_tracer("timerlat") {
        let o = rtscope(&["wakeup", "--cpus", "0", "-D", "300ms", "--timerlat", "on", "--db", db, "--quiet"]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("--timerlat on: the timerlat tracer cannot run: this kernel"), "{}", text(&o));
    }
    let o = rtscope(&["wakeup", "--cpus", "0", "-D", "300ms", "--timerlat", "off", "--db", db, "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let shown = show_json(db, "last");
    assert!(shown["run"]["plan"].get("kernel_tracer").is_none(), "{}", shown["run"]["plan"]);
    assert!(shown["run"]["notes"].as_array().unwrap().iter().all(|n| !n.as_str().unwrap().contains("timerlat")));
}

/// hwlat on a kernel without the hwlat tracer is refused, naming it and
/// its kernel option, and leaves no run behind; with it, it completes and
/// stores its series.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn hwlat_runs_or_says_what_the_kernel_lacks() {
    let fx = Fixture::root();
    let db = fx.db.as_str();
    let o = rtscope(&["hwlat", "--cpus", "0", "-D", "1s", "--width", "10ms", "--window", "100ms", "--db", db]);
    if has_tracer("hwlat") {
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(unwrapped(&text(&o)).contains("spins with interrupts off for 10ms of every 100ms"), "{}", text(&o));
    } else {
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let t = text(&o);
        assert!(
            t.contains("hwlat: this kernel") && t.contains("has no hwlat tracer (built without CONFIG_HWLAT_TRACER"),
            "{t}"
        );
    }
    let o = rtscope(&["hwlat", "--width", "2s", "--window", "1s", "--db", db]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--width 2s must be at least 1us and shorter than --window 1s"), "{}", text(&o));
}
