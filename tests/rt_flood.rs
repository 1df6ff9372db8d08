//! The classic misconfiguration of a PREEMPT_RT kernel, in the VM test bed
//! (tests/vm/boot.sh, docs/rt-kernel.md): a flood on the guest's second
//! serial port, IRQ 3 on the isolated CPU 1, whose IRQ thread irq/3-ttyS1
//! (SCHED_FIFO 50) outranks a probe at SCHED_FIFO 40. A boot of its own: a
//! flood on an isolated CPU can hold off the 9p device's IRQ threads there
//! (FIFO 50 too), so it comes in bursts, writes nothing to the shared
//! directory while it runs, and a watchdog stops it after two minutes.

mod common;
use common::vm::{Boot, Guest};

/// CPU 1 isolated, the TSC as clocksource (as tests/rt_kernel.rs boots).
const RT_APPEND: &str = "isolcpus=domain,managed_irq,1 nohz_full=1 rcu_nocbs=1 clocksource=tsc tsc=reliable";

static RT: Boot = Boot::new();

fn rt() -> &'static Guest {
    // A flood on the second serial port, its IRQ on CPU 1, under a probe at
    // FIFO 40 below the IRQ thread's FIFO 50; the flood's own counts (IRQ 3
    // on CPU 1, the IRQ thread's time on a CPU) before and after. While it
    // runs, nothing is written to $O: the 9p device's IRQ threads (FIFO 50
    // too) may have to run on CPU 1, where a flood without pause would hold
    // them off for good; so it comes in bursts, and its files go to /tmp.
    let mut script = String::new();
    script += "echo 1 >/proc/irq/3/smp_affinity_list\n\
               exec 3>/dev/ttyS1\n\
               ( while :; do head -c 4096 /etc/services >&3; sleep 0.01; done ) &\n\
               flood=$!\n\
               ( sleep 120; kill $flood ) 2>/dev/null &\n\
               sleep 1\n\
               tid=$(pgrep -x irq/3-ttyS1)\n\
               ps -o cls=,rtprio= -p $tid >/tmp/irq3-sched.txt\n\
               irq3() { grep -E '^ *3:' /proc/interrupts | awk '{print $3}'; cut -d' ' -f1 /proc/$tid/schedstat; }\n\
               irq3 >/tmp/irq3-before.txt\n\
               \"$B\" wakeup --cpus 1 --priority 40 --trace -D 4s --db /tmp/rt.db --json /tmp/flood.json >/tmp/flood.txt 2>&1\n\
               rc=$?\n\
               irq3 >/tmp/irq3-after.txt\n\
               kill $flood; exec 3>&-\n\
               cp /tmp/irq3-*.txt /tmp/flood.txt /tmp/flood.json \"$O/\"\n\
               echo \"flood rc $rc\"\n";
    RT.guest("rt", RT_APPEND, &script)
}

/// The classic misconfiguration of an RT kernel: a flood on the second
/// serial port, IRQ 3 on CPU 1, whose IRQ thread (SCHED_FIFO 50) outranks
/// the probe (SCHED_FIFO 40). The episodes name that thread by its IRQ line
/// and device, the run's note the priority order and its fix. Judged
/// against the flood's own counts: IRQ 3 came on CPU 1 during the run, and
/// the time the episodes blame on its thread is no more than the thread's
/// own time on a CPU over the run (its schedstat), and some of it.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn an_irq_thread_above_the_probe_is_named_with_the_priority_order() {
    let g = rt();
    assert_eq!(
        g.file("irq3-sched.txt").split_whitespace().collect::<Vec<_>>(),
        ["FF", "50"],
        "irq/3-ttyS1's scheduling"
    );
    assert_eq!(g.rc("flood"), Some(0), "{}", g.file("flood.txt"));
    let v = g.json("flood.json");
    assert_eq!(v["status"], "complete", "{v}");
    // Its notes wrapped at 100 columns: joined to find the phrases.
    let text = common::unwrapped(g.file("flood.txt"));
    let counts = |f: &str| -> Vec<u64> { g.file(f).split_whitespace().map(|n| n.parse().unwrap()).collect() };
    let (before, after) = (counts("irq3-before.txt"), counts("irq3-after.txt"));
    assert!(after[0] >= before[0] + 10_000, "IRQ 3 on CPU 1 during the run: {before:?} -> {after:?}");
    let ran_ns = after[1] - before[1];
    let blamed: u64 = v["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["causes"].as_array().unwrap())
        .filter(|c| c["name"] == "irq/3-ttyS1")
        .map(|c| c["ns"].as_u64().unwrap())
        .sum();
    assert!(
        blamed > 0 && blamed <= ran_ns,
        "episodes blame {blamed} ns on irq/3-ttyS1, which ran {ran_ns} ns:\n{text}"
    );
    for part in [
        "blocked by irq/3-ttyS1 (pid",
        "SCHED_FIFO 50: the threaded handler of IRQ 3 (ttyS1))",
        "--trace: irq/3-ttyS1 (SCHED_FIFO 50, the threaded handler of IRQ 3 (ttyS1)) ran at a priority at or above \
         the probe's threads (SCHED_FIFO 40)",
        "SCHED_FIFO 51 or more",
        "or move IRQ 3 off CPU 1 (echo 0 > /proc/irq/3/smp_affinity_list)",
    ] {
        assert!(text.contains(part), "{part} missing:\n{text}");
    }
}
