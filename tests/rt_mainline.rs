//! rtscope on mainline PREEMPT_RT, in the VM test bed (tests/vm/boot.sh,
//! docs/rt-kernel.md): Debian 12's backported 6.12 RT kernel
//! (bookworm-backports' linux-image-rt-amd64), whose timerlat takes user
//! threads of its own through `osnoise/per_cpu/cpuN/timerlat_fd` (Linux
//! 6.5+), as `rtla timerlat -u` uses it. It boots once; its script runs
//! every command the tests here look at. Under emulation every latency is
//! the emulator's: these tests judge what ran and how the figures of the
//! same wake-ups stand to one another, never how fast.

mod common;
use common::vm::{Boot, Guest, TRACEFS, completed, step};

static RT: Boot = Boot::new();

/// The guest: `wakeup --timerlat user` on both CPUs, the same traced, and
/// one killed with SIGKILL while it runs, timerlat's settings read before,
/// after each and during the last.
fn rt() -> &'static Guest {
    let mut script = format!("T=/sys/kernel/tracing\nmount -t tracefs tracefs $T\n{TRACEFS}");
    script += "tracefs >\"$O/tracefs-before.txt\"\n";
    script += &step("user", "wakeup --timerlat user -D 3s --db /tmp/rt.db --json \"$O/user.json\"");
    script += "tracefs >\"$O/tracefs-after.txt\"\n";
    script += &step(
        "traced",
        "wakeup --timerlat user --trace --cause-threshold 300us -D 3s --db /tmp/rt.db --json \"$O/traced.json\"",
    );
    script += "\"$B\" show last --episodes --db /tmp/rt.db >\"$O/episodes.txt\" 2>&1\n";
    script += "\"$B\" wakeup --timerlat user --cpus 1 -D 60s --db /tmp/rt.db >\"$O/killed.txt\" 2>&1 &\n\
               pid=$!\n\
               while kill -0 $pid 2>/dev/null && ! grep -qs timerlat $T/instances/*/current_tracer; do sleep 0.1; done\n\
               sleep 1\n\
               tracefs >\"$O/tracefs-during.txt\"\n\
               kill -KILL $pid; wait $pid; sleep 1\n\
               tracefs >\"$O/tracefs-killed.txt\"\n";
    RT.guest("rt-bpo", "clocksource=tsc tsc=reliable", &script)
}

/// With `--timerlat user` the probe's threads are timerlat's own: every
/// wake-up has its IRQ, thread and return-to-user sample from the kernel
/// and rtscope's own timestamp, on each CPU. On each wake-up the IRQ comes
/// first, then the thread running in the kernel, then rtscope's clock read
/// after the read returns, then the thread's next read, where the kernel
/// takes the return-to-user latency: so, per CPU, the medians stand in
/// that order. rtscope's grid is the kernel's (taken from its own
/// timestamps of the timer), late by at most the few microseconds between
/// the timer's IRQ and its record: 10 % either way holds that and the
/// emulator's noise in the medians. rtscope records once the kernel's
/// grid has reached it (tens of milliseconds after the start), so it has
/// at least 90 % of the kernel's samples.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn timerlat_user_threads_give_four_figures_of_the_same_wake_ups() {
    let g = rt();
    let v = completed(g, "user", "user.json");
    let rows = v["results"].as_array().unwrap();
    let p50 = |r: &serde_json::Value| r["p50_ns"].as_f64().unwrap();
    let count = |r: &serde_json::Value| r["count"].as_u64().unwrap();
    for cpu in [0, 1] {
        let get = |m: &str| {
            rows.iter()
                .find(|r| r["metric"] == m && r["cpu"] == cpu)
                .unwrap_or_else(|| panic!("no {m} on CPU {cpu}: {v}"))
        };
        let (irq, thread, own, user) =
            (get("timerlat_irq"), get("timerlat_thread"), get("latency"), get("timerlat_user"));
        let text = g.file("user.txt");
        assert!(count(irq).abs_diff(count(thread)) <= 1, "CPU {cpu}: {irq} {thread}");
        assert!(count(thread).abs_diff(count(user)) <= 1, "CPU {cpu}: {thread} {user}");
        assert!((1000..=3100).contains(&count(thread)), "CPU {cpu}: {thread}");
        assert!(
            count(own) <= count(thread) + 1 && count(own) * 10 >= count(thread) * 9,
            "CPU {cpu}: {own} against {thread}"
        );
        assert!(p50(irq) <= p50(thread), "CPU {cpu}: {irq} {thread}");
        assert!(p50(thread) <= p50(own) * 1.1, "CPU {cpu}: the kernel's thread after rtscope's read:\n{text}");
        assert!(p50(own) <= p50(user) * 1.1, "CPU {cpu}: rtscope's read after the next read:\n{text}");
    }
    let text = common::unwrapped(g.file("user.txt"));
    assert!(
        text.contains(
            "timerlat: the kernel's timerlat tracer ran beside the probe: the probe's threads were its own user threads"
        ),
        "{text}"
    );
    assert!(!text.contains("no timestamp of timerlat's timer reached the thread"), "{text}");
}

/// Traced, the same run still completes and explains its worst wake-ups
/// (the timer's interrupt and the switch to the thread are the kernel's
/// own, as with clock_nanosleep).
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn timerlat_user_threads_can_be_traced() {
    let g = rt();
    let v = completed(g, "traced", "traced.json");
    let rows = v["results"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["metric"] == "timerlat_user" && r["count"].as_u64() > Some(0)), "{v}");
    let episodes = g.file("episodes.txt");
    assert!(episodes.contains("cause episodes") && episodes.contains("timer "), "{episodes}");
}

/// timerlat without its workload while rtscope's threads are its own
/// (`OSNOISE_WORKLOAD` off, its period the probe's, its CPUs the probe's),
/// and every setting as found after the run, and after a SIGKILL (the
/// janitor writes them back and removes the instance).
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn timerlat_user_leaves_the_tracer_as_found() {
    let g = rt();
    let before = g.file("tracefs-before.txt");
    assert!(before.contains("tracer nop instances") && before.contains(" OSNOISE_WORKLOAD"), "{before}");
    let during = g.file("tracefs-during.txt");
    assert!(
        during.starts_with("timerlat_period_us 1000 cpus 1 ") && during.contains("NO_OSNOISE_WORKLOAD"),
        "{during}"
    );
    assert_eq!(g.file("tracefs-after.txt"), before, "as found after the run");
    assert_eq!(g.file("tracefs-killed.txt"), before, "as found after a SIGKILL");
}
