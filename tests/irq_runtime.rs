//! Interrupt and softirq runtime per driver (`--trace`): every local timer
//! interrupt the kernel counted on the traced CPU (`/proc/interrupts`, its
//! LOC line) is a sample of the run's `irq:local_timer` series; the report
//! has the per-driver table and says what the kernel gives of
//! interrupts-masked time. Root only.

mod common;

use common::*;

/// The local timer interrupts `cpu` took so far (`/proc/interrupts`'s LOC
/// line, in the column of that CPU).
fn local_timer_interrupts(cpu: usize) -> u64 {
    let text = std::fs::read_to_string("/proc/interrupts").expect("/proc/interrupts");
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().expect("a header").split_whitespace().collect();
    let col = head.iter().position(|c| *c == format!("CPU{cpu}")).expect("the CPU's column");
    let loc = lines.find(|l| l.trim_start().starts_with("LOC:")).expect("a LOC line (x86)");
    loc.split_whitespace().nth(col + 1).and_then(|n| n.parse().ok()).expect("a count")
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_traced_run_times_every_local_timer_interrupt() {
    let fx = Fixture::root();
    if !has_tracefs() {
        return;
    }
    if !std::fs::read_to_string("/proc/interrupts").is_ok_and(|t| t.contains("LOC:")) {
        skipped("/proc/interrupts has no LOC line (not x86): the local timer is not counted there");
        return;
    }
    let cpu = last_cpu();
    let cpus = cpu.to_string();
    let before = local_timer_interrupts(cpu);
    // Without --stacks' calibration and the symbols thread, the time
    // before the trace is on (the CPU's timer interrupts not traced) is short.
    let args = ["wakeup", "--trace", "--stacks", "off", "-D", "6s", "--cpus", &cpus, "--db", &fx.db, "-q"];
    let o = rtscope(&args);
    let after = local_timer_interrupts(cpu);
    assert!(o.status.success(), "{}", text(&o));
    let took = after - before;
    let doc = export(&fx.db, &[]);
    let lane = doc["trace"]["per_cpu"].as_array().unwrap().iter().find(|c| c["cpu"] == cpu as u64).cloned();
    let lost = lane.as_ref().map_or(0, |c| c["lost"].as_u64().unwrap());
    let rows = doc["results"].as_array().unwrap();
    let series = |metric: &str| rows.iter().find(|r| r["metric"] == metric && r["cpu"] == cpu as u64);
    let timer = series("irq:local_timer").unwrap_or_else(|| panic!("no irq:local_timer series: {rows:?}"));
    let count = timer["count"].as_u64().unwrap();
    if lost > 0 {
        // The kernel's ring was full: some interrupts have no events.
        skipped(&format!("the kernel lost {lost} trace events: {count} of {took} timer interrupts timed"));
        assert!(count <= took + took / 20, "{count} runtimes, {took} interrupts");
    } else {
        // 6 s at 1 kHz and the tick: thousands; rtscope's start and end
        // (the trace off) add a few.
        assert!(took > 5_000, "{took} timer interrupts on CPU {cpu}");
        assert!(count.abs_diff(took) * 20 <= took, "{count} runtimes of {took} local timer interrupts on CPU {cpu}");
    }
    // A handler's runtime is microseconds: a lost event never pairs an
    // entry with a much later exit.
    assert!(timer["max_ns"].as_u64().unwrap() < 5_000_000, "{timer}");
    assert!(timer["min_ns"].as_u64().unwrap() > 0, "{timer}");
    // Softirqs run on the CPU too (the timer's, RCU's at least).
    let soft: Vec<&serde_json::Value> =
        rows.iter().filter(|r| r["metric"].as_str().unwrap().starts_with("softirq:")).collect();
    assert!(!soft.is_empty(), "no softirq series: {rows:?}");
    assert!(soft.iter().all(|r| r["max_ns"].as_u64().unwrap() < 100_000_000), "{soft:?}");
    // The run's notes say what the kernel gives of interrupts-masked time.
    let notes = doc["run"]["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n.as_str().unwrap().starts_with("interrupts-masked time is not measured (--trace)")),
        "{notes:?}"
    );
    // The text report's per-driver table, and the HTML report's.
    let o = rtscope(&["show", "last", "--db", &fx.db]);
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", text(&o));
    assert!(report.contains("interrupt and softirq runtime per driver (us)"), "{report}");
    let line = report.lines().find(|l| l.starts_with("local_timer ")).unwrap_or_else(|| panic!("{report}"));
    assert!(line.contains(&format!(" {count} ")) && line.ends_with('%'), "{line}");
    let html = fx.dir.join("r.html");
    let o = rtscope(&["report", "last", "--db", &fx.db, "-o", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Interrupt and softirq runtime per driver") && page.contains("local_timer"), "no table");
}
