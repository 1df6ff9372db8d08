//! Tests of `characterisation`.

use super::*;

/// The /proc texts of a machine whose counters are `k` times a base.
fn counters(t_ns: u64, k: u64) -> Counters {
    let mut c = Counters { t_ns, ..Default::default() };
    let stat = format!(
        "cpu  {a} 0 {a} {b} 0 0 0 0 0 0\ncpu0 {h} 0 {h} {q} 0 0 0 0 0 0\ncpu1 {h} 0 {h} {q} 0 0 0 0 0 0\n\
         intr {} 5 6 0\nctxt {}\nbtime 1\nprocesses {}\n",
        1000 * k,
        5000 * k,
        300 * k,
        a = 10 * k,
        b = 80 * k,
        h = 5 * k,
        q = 40 * k
    );
    parse_stat(&stat, &mut c);
    let softirqs = format!(
        "                    CPU0       CPU1\n          HI:          0          0\n       TIMER:  {}  {}\n      NET_RX:  {}  {}\n",
        100 * k,
        200 * k,
        10 * k,
        20 * k
    );
    parse_softirqs(&softirqs, &mut c);
    let interrupts = format!(
        "           CPU0       CPU1\n  0:         22          0   IO-APIC   2-edge      timer\n \
         24:  {}  {}   PCI-MSIX-0000:00:03.0   0-edge      virtio0-input.0\n\
         LOC:  {}  {}   Local timer interrupts\nERR:          0\n",
        100 * k,
        50 * k,
        1000 * k,
        2000 * k
    );
    parse_interrupts(&interrupts, &mut c);
    let disk = format!(
        "   7       0 loop0 9 0 9 0 9 0 9 0 0 0 0\n 253       0 vda {} 0 {} 5 {} 0 {} 9 0 0 0\n \
         253       1 vda1 10 0 80 5 20 0 160 9 0 0 0\n",
        10 * k,
        80 * k,
        20 * k,
        160 * k
    );
    parse_diskstats(&disk, &|d: &str| d == "vda", &mut c);
    let net = format!(
        "Inter-|   Receive   |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes\n    \
         lo: {} {} 0 0 0 0 0 0 {} {} 0 0 0 0 0 0\n  eth0: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
        1024 * k,
        10 * k,
        1024 * k,
        10 * k
    );
    parse_net_dev(&net, &mut c);
    parse_vmstat(&format!("nr_free_pages 5\npgfault {}\npgmajfault {}\n", 100 * k, k), &mut c);
    c
}

#[test]
fn parses_the_proc_files() {
    let c = counters(0, 1);
    assert_eq!(c.cpus.len(), 2);
    assert_eq!(c.cpus[1], CpuTimes { cpu: 1, user: 5, system: 5, idle: 40, ..Default::default() });
    assert_eq!((c.interrupts, c.context_switches, c.forks), (1000, 5000, 300));
    assert_eq!(c.softirqs[1], ("TIMER".to_string(), 300));
    assert_eq!(c.irq_sources[1], ("24 virtio0-input.0".to_string(), 150));
    assert_eq!(c.irq_sources[2], ("LOC Local timer interrupts".to_string(), 3000));
    assert_eq!(c.irq_sources.len(), 3, "ERR is not a source");
    assert_eq!(c.disk, DiskCounters { reads: 10, read_sectors: 80, writes: 20, write_sectors: 160 });
    assert_eq!(c.net[0].rx_packets, 10);
    assert_eq!(c.net[0].tx_bytes, 1024);
    assert_eq!((c.page_faults, c.major_faults), (100, 1));
}

#[test]
fn rates_from_deltas() {
    let a = counters(1_000_000_000, 1);
    let b = counters(3_000_000_000, 3);
    let d = b.since(&a);
    assert_eq!(d.t_ns, 2_000_000_000);
    assert_eq!(d.interrupts, 2000);
    let mut acc = Accumulator::new("cpu", &[1]);
    acc.add(&d);
    let ch = acc.finish();
    assert_eq!(ch.seconds, 2.0);
    assert_eq!(ch.samples, 1);
    assert_eq!(ch.interrupts_per_s, 1000.0);
    assert_eq!(ch.context_switches_per_s, 5000.0);
    assert_eq!(ch.forks_per_s, 300.0);
    assert_eq!(ch.cpu_busy_pct, 20.0);
    // No process seen: all the busy time is other processes', unseen.
    assert_eq!(
        ch.per_cpu,
        vec![CpuBusy { cpu: 1, busy_pct: 20.0, others_pct: 20.0, own_pct: 0.0, others_gone_pct: 20.0 }]
    );
    assert_eq!(ch.user_pct, 10.0);
    assert_eq!(ch.softirqs_per_s, 330.0);
    assert_eq!(ch.top_interrupts[0].name, "LOC Local timer interrupts");
    assert_eq!(ch.top_interrupts[0].per_s, 3000.0);
    assert_eq!(ch.top_interrupts.len(), 2, "IRQ 0 did not move");
    assert_eq!(ch.disk_write_kb_per_s, 80.0, "320 sectors of 512 bytes in 2 s");
    assert_eq!(ch.disk_writes_per_s, 20.0);
    assert_eq!(ch.iface("lo").unwrap().rx_packets_per_s, 10.0);
    assert!(ch.iface("eth0").is_none(), "an interface that moved nothing is left out");
    assert_eq!(ch.page_faults_per_s, 100.0);
    assert_eq!(ch.peak.interrupts_per_s, 1000.0);
    // A second window adds up: rates stay means over the whole time.
    acc.add(&counters(5_000_000_000, 5).since(&b));
    let ch = acc.finish();
    assert_eq!(ch.seconds, 4.0);
    assert_eq!(ch.interrupts_per_s, 1000.0);
    assert_eq!(ch.samples, 2);
}

#[test]
fn process_stat_lines_parse_whatever_the_name() {
    let line = "4242 (a (weird) name) R 17 4242 4242 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 3 0 98765 \
                1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
    let p = parse_proc_stat(line).unwrap();
    assert_eq!((p.pid, p.tid, p.ppid, p.pgrp), (4242, 4242, 17, 4242));
    assert_eq!((p.comm.as_str(), p.ticks, p.start, p.cpu), ("a (weird) name", 300, 98765, 1));
    assert!(parse_proc_stat("12 (gone").is_none());
    assert!(parse_proc_stat("12 (short) R 1 1").is_none());
}

fn thread(pid: u32, tid: u32, start: u64, ticks: u64, cpu: usize, own: bool) -> ProcTicks {
    ProcTicks { pid, tid, start, comm: format!("p{pid}"), ppid: 1, pgrp: pid, ticks, children: 0, cpu, own }
}

/// One second of two CPUs, `busy` ticks of 100 busy on each, with `procs`.
fn second(t: u64, busy: [u64; 2], procs: Vec<ProcTicks>) -> Counters {
    let cpus = (0..2).map(|c| CpuTimes { cpu: c, user: busy[c] * t, idle: (100 - busy[c]) * t, ..Default::default() });
    Counters { t_ns: t * 1_000_000_000, cpus: cpus.collect(), procs, ..Default::default() }
}

#[test]
fn other_processes_are_counted_on_the_cpu_they_ran_on() {
    let a = second(1, [100, 65], vec![thread(10, 10, 5, 1000, 1, false), thread(20, 21, 6, 50, 0, true)]);
    // Over the next second: 10 ran 60 ticks on CPU 1; 20's thread 21
    // ran 90 on CPU 0 (rtscope's own); 30 is new (all its 20 ticks
    // count); 11 reuses an id with another start (all its 5 count).
    let b = second(
        2,
        [100, 65],
        vec![
            thread(10, 10, 5, 1060, 1, false),
            thread(20, 21, 6, 140, 0, true),
            thread(30, 30, 9, 20, 0, false),
            thread(40, 11, 99, 5, 1, false),
        ],
    );
    let d = b.since(&a);
    let ticks: Vec<(u32, u64)> = d.procs.iter().map(|p| (p.tid, p.ticks)).collect();
    assert_eq!(ticks, [(10, 60), (21, 90), (30, 20), (11, 5)]);
    let mut acc = Accumulator::new("idle", &[1]);
    acc.add(&d);
    let c = acc.finish();
    assert_eq!(
        c.per_cpu,
        vec![CpuBusy { cpu: 1, busy_pct: 65.0, others_pct: 65.0, own_pct: 0.0, others_gone_pct: 0.0 }]
    );
    assert_eq!(c.others_busy_pct, 65.0);
    let names: Vec<(u32, f64)> = c.others.iter().map(|p| (p.pid, p.cpu_pct)).collect();
    assert_eq!(names, [(10, 60.0), (40, 5.0)], "only CPU 1's, busiest first; rtscope's own left out");
    assert_eq!(c.others[0].describe(), "p10 (pid 10) 60.0 %");
}

fn target(measure: Measure, cpus: &[usize], asked: f64, limit: f64) -> Target {
    Target { load: "l".into(), cpus: cpus.to_vec(), measure, asked, limit, asked_text: "x".into(), devices: vec![] }
}

#[test]
fn checks_compare_what_was_asked_with_what_the_kernel_counted() {
    let mut acc = Accumulator::new("cpu", &[0, 1]);
    // CPU 0 busy 100 % with 30 % by another process; CPU 1 busy 70 %;
    // the rest rtscope's own.
    let threads = vec![thread(10, 10, 5, 30, 0, false), thread(20, 20, 6, 70, 0, true), thread(20, 22, 7, 70, 1, true)];
    acc.add(&second(1, [100, 70], threads).since(&second(0, [0, 0], vec![])));
    let mut c = acc.finish();
    let busy = c.check(&target(Measure::CpuBusy, &[0, 1], 100.0, 90.0));
    assert_eq!((busy.achieved, busy.flagged), (70.0, true), "(70 + 70) / 2: {busy:?}");
    assert!(busy.message.contains("other processes used 15.0 %") && busy.message.contains("p10 (pid 10)"));
    let one = c.check(&target(Measure::CpuBusy, &[1], 60.0, 54.0));
    assert_eq!((one.achieved, one.flagged), (70.0, false));
    let idle = c.check(&target(Measure::OthersBusy, &[0], 0.0, 5.0));
    assert_eq!((idle.achieved, idle.flagged), (30.0, true));
    assert!(idle.message.starts_with("l was not idle") && idle.message.contains("p10 (pid 10) 30.0 %"), "{idle:?}");
    assert!(!c.check(&target(Measure::OthersBusy, &[1], 0.0, 5.0)).flagged);
    let net = c.check(&target(Measure::LoopbackPackets, &[], 250.0, 225.0));
    assert_eq!((net.achieved, net.flagged), (0.0, true));
    assert_eq!(c.verdict(), "-");
    c.checks = vec![one.clone()];
    assert_eq!(c.verdict(), "ok");
    c.checks.push(busy);
    assert_eq!(c.verdict(), "short");
    c.checks.push(idle);
    assert_eq!(c.verdict(), "not idle");
    c.failure = Some("cannot start".into());
    assert_eq!(c.verdict(), "failed");
    // Older runs: none of the new fields.
    let mut v = serde_json::to_value(&c).unwrap();
    for k in ["others_busy_pct", "others", "checks", "failure", "own_pct", "others_gone_pct"] {
        v.as_object_mut().unwrap().remove(k);
    }
    for k in ["others_pct", "own_pct", "others_gone_pct"] {
        v["per_cpu"][0].as_object_mut().unwrap().remove(k);
    }
    let old: Characterisation = serde_json::from_value(v).unwrap();
    assert!(old.checks.is_empty() && old.failure.is_none() && old.others_busy_pct == 0.0);
    assert_eq!((old.own_pct, old.per_cpu[0].own_pct, old.per_cpu[0].others_gone_pct), (0.0, 0.0, 0.0));
}

/// A process as /proc/PID/stat shows it: `ticks` its own time (its
/// threads', live and exited), `children` its reaped children's.
fn process(pid: u32, ppid: u32, start: u64, ticks: u64, children: u64, own: bool) -> ProcTicks {
    ProcTicks { pid, tid: pid, start, comm: format!("p{pid}"), ppid, pgrp: pid, ticks, children, cpu: 0, own }
}

#[test]
fn own_time_counts_ended_threads_and_reaped_children_once() {
    // rtscope (100, started by a shell 1) and its load's command (200).
    let rt = |ticks, children| process(100, 1, 10, ticks, children, true);
    let shell = process(1, 0, 1, 5000, 900, false);
    // A thread that ended inside a live process: its time stays in the
    // process's utime + stime.
    assert_eq!(own_ticks_since(&[rt(150, 0)], &[rt(100, 0)]), 50);
    // A child seen at the first sample and reaped since by its own
    // parent: the parent's cutime gets its whole life (530), of which
    // 500 was counted before. The double-count trap: 32, not 532.
    let before = [shell.clone(), rt(10, 0), process(200, 100, 20, 500, 0, true)];
    assert_eq!(own_ticks_since(&[shell.clone(), rt(12, 530)], &before), 2 + 30);
    // ... and its own child (300, 40 ticks seen), reaped by it (at 45)
    // before it ended: 2 + 30 + 5.
    let mut before2 = before.to_vec();
    before2.push(process(300, 200, 30, 40, 0, true));
    assert_eq!(own_ticks_since(&[shell.clone(), rt(12, 530 + 45)], &before2), 37);
    // A child that started and ended in between, never seen: all of it.
    assert_eq!(own_ticks_since(&[shell.clone(), rt(10, 75)], &[shell.clone(), rt(10, 0)]), 75);
    // A process started in between and alive: all its time, its reaped
    // children's included.
    let now = [shell.clone(), rt(10, 0), process(201, 100, 25, 40, 8, true)];
    assert_eq!(own_ticks_since(&now, &[shell.clone(), rt(10, 0)]), 48);
    // An orphan (own by its process group, its parent init): when it
    // ends init reaps it and its time after the first sample is lost;
    // its time before is not taken off either.
    let orphan = process(400, 1, 40, 700, 0, true);
    assert_eq!(own_ticks_since(&[shell.clone(), rt(11, 0)], &[shell.clone(), rt(10, 0), orphan.clone()]), 1);
    // Orphaned since and no longer own at the second sample: its time
    // in between still counts (it was rtscope's own).
    let left = process(400, 1, 40, 720, 0, false);
    assert_eq!(own_ticks_since(&[shell.clone(), rt(10, 0), left], &[shell.clone(), rt(10, 0), orphan]), 20);
    // Other processes and their children never count; a pid used again
    // (another start) is another process.
    let other = |ticks, children| process(500, 1, 50, ticks, children, false);
    assert_eq!(own_ticks_since(&[other(90, 60), rt(10, 0)], &[other(10, 0), rt(10, 0)]), 0);
    let reused = process(200, 100, 99, 7, 0, true);
    assert_eq!(own_ticks_since(&[rt(12, 530), reused], &before), 2 + 30 + 7);
}

/// One second on CPUs 0 and 1: `busy` ticks of 100 on each, the threads
/// seen, and rtscope's own total from its processes.
fn own_second(busy: [u64; 2], procs: Vec<ProcTicks>, own_ticks: i64) -> Counters {
    let d = second(1, busy, procs).since(&second(0, [0, 0], vec![]));
    Counters { own_ticks, ..d }
}

#[test]
fn what_others_started_and_ended_between_samples_is_not_rtscope_s() {
    // The fake stress-ng that sleeps, pinned to CPU 1, beside a stream
    // of short processes: CPU 1 busy 100 %, 40 ticks by a shell seen at
    // the sample, 60 by processes that came and went; rtscope used 1
    // tick (its sampler, on CPU 0).
    let mut acc = Accumulator::new("stress-ng", &[1]);
    acc.add(&own_second([5, 100], vec![thread(7, 7, 1, 40, 1, false), thread(100, 101, 1, 1, 0, true)], 1));
    let c = acc.finish();
    assert_eq!(
        c.per_cpu,
        vec![CpuBusy { cpu: 1, busy_pct: 100.0, others_pct: 100.0, own_pct: 0.0, others_gone_pct: 60.0 }]
    );
    assert_eq!((c.own_pct, c.others_busy_pct, c.others_gone_pct), (0.0, 100.0, 60.0));
    let busy = c.check(&target(Measure::CpuBusy, &[1], 100.0, 90.0));
    assert_eq!((busy.achieved, busy.flagged), (0.0, true));
    assert!(
        busy.message.contains(
            "achieved 0.0 % (other processes used 100.0 % of its CPUs, 60.0 % of it by processes that came and \
             went: p7 (pid 7) 40.0 %)"
        ),
        "{busy:?}"
    );
    // An idle column beside the same stream is not idle, though the
    // processes seen used 40 % only.
    let idle = c.check(&target(Measure::OthersBusy, &[1], 0.0, 5.0));
    assert_eq!((idle.achieved, idle.flagged), (100.0, true));
    assert!(idle.message.contains("100.0 % busy, 60.0 % of it by processes that came and went"), "{idle:?}");
}

#[test]
fn rtscope_s_own_short_lived_processes_are_spread_over_the_load_s_cpus() {
    // A fork load on CPUs 0 and 1: 80 ticks of children that came and
    // went, 10 of its supervising thread on CPU 0; each CPU 50 busy.
    let mut acc = Accumulator::new("fork", &[0, 1]);
    acc.add(&own_second([50, 50], vec![thread(100, 101, 1, 10, 0, true)], 90));
    let c = acc.finish();
    let own: Vec<(f64, f64, f64)> = c.per_cpu.iter().map(|x| (x.own_pct, x.others_pct, x.others_gone_pct)).collect();
    assert_eq!(own, [(50.0, 0.0, 0.0), (40.0, 10.0, 10.0)], "10 + 40 on CPU 0, whose room is 40");
    // Beside another process seen on CPU 0 (60 of its 100): the rest
    // goes where there is room, never above a CPU's busy time, and what
    // finds none is left out.
    let mut acc = Accumulator::new("fork", &[0, 1]);
    acc.add(&own_second([100, 30], vec![thread(7, 7, 1, 60, 0, false)], 80));
    let c = acc.finish();
    let own: Vec<(f64, f64)> = c.per_cpu.iter().map(|x| (x.own_pct, x.others_pct)).collect();
    assert_eq!(own, [(40.0, 60.0), (30.0, 0.0)]);
    // Roundings: a second whose total falls 2 ticks short of its
    // threads' takes them off the next second's rest.
    let mut acc = Accumulator::new("cpu", &[0]);
    acc.add(&own_second([20, 0], vec![thread(100, 101, 1, 10, 0, true)], 8));
    acc.add(&own_second([20, 0], vec![thread(100, 101, 1, 10, 0, true)], 12));
    let c = acc.finish();
    assert_eq!(c.per_cpu[0].own_pct, 10.0, "20 of 200 ticks, not 22");
    // A shortfall no rounding makes (50 ticks; one thread ran: at most
    // 2 + 4) is not carried beyond what roundings could take.
    let mut acc = Accumulator::new("cpu", &[0]);
    acc.add(&own_second([20, 0], vec![thread(100, 101, 1, 10, 0, true)], -40));
    acc.add(&own_second([40, 0], vec![thread(100, 101, 1, 10, 0, true)], 30));
    assert_eq!(acc.finish().per_cpu[0].own_pct, 17.0, "10 + 10 + (20 - 6) of 200 ticks");
    assert_eq!(spread(10, &[0, 100, 3]), [0, 7, 3]);
    assert_eq!(spread(5, &[]), Vec::<u64>::new());
}

#[test]
fn own_time_from_two_samples_of_processes_and_threads() {
    // rtscope (pid 100) and its load's command (200) seen at the first
    // sample; the command ends and is reaped in between (it had used 50,
    // then 20 more); a thread of rtscope's ends too (5 ticks in
    // between); rtscope's main thread ran 3.
    let rt = |t, ticks, children, threads: &[(u32, u64)]| {
        let mut c = second(t, [100, 100], threads.iter().map(|&(tid, n)| thread(100, tid, 1, n, 1, true)).collect());
        c.processes = vec![process(100, 1, 1, ticks, children, true)];
        c
    };
    let mut a = rt(1, 100, 0, &[(100, 60), (101, 40)]);
    a.procs.push(thread(200, 200, 2, 50, 1, true));
    a.processes.push(process(200, 100, 2, 50, 0, true));
    let b = rt(2, 108, 70, &[(100, 63)]);
    let d = b.since(&a);
    assert_eq!(d.own_ticks, 3 + 5 + 20);
    let mut acc = Accumulator::new("cmd", &[1]);
    acc.add(&d);
    assert_eq!(acc.finish().per_cpu[0].own_pct, 28.0, "3 seen on CPU 1, 25 spread there");
}

#[test]
fn counters_that_go_back_count_zero() {
    let a = counters(1, 3);
    let b = counters(2, 1);
    let d = b.since(&a);
    assert_eq!(d.interrupts, 0);
    assert_eq!(d.cpus[0].user, 0);
}

#[test]
fn system_calls_are_a_rate_where_counted() {
    let at = |t_ns: u64, n: Option<u64>| Counters { t_ns, syscalls: n, ..Default::default() };
    let d = at(2_000_000_000, Some(70_000)).since(&at(1_000_000_000, Some(20_000)));
    assert_eq!(d.syscalls, Some(50_000));
    // Not counted at either end: not counted.
    assert_eq!(at(2, None).since(&at(1, Some(5))).syscalls, None);
    let mut sum = Counters::default();
    sum.add(&d);
    sum.add(&d);
    assert_eq!(sum.syscalls, Some(100_000));
    let mut acc = Accumulator::new("idle", &[]);
    acc.add(&d);
    acc.add(&d);
    assert_eq!(acc.finish().syscalls_per_s, Some(50_000.0));
    let mut none = Accumulator::new("idle", &[]);
    none.add(&at(1_000_000_000, None));
    assert_eq!(none.finish().syscalls_per_s, None);
}

#[test]
fn a_device_load_is_checked_on_its_devices_irq_lines_or_its_interface() {
    let mut a = second(1, [10, 10], vec![]);
    a.irq_sources = vec![("36 virtio1-req.0".into(), 100), ("26 ttyS0".into(), 5), ("LOC Local timer".into(), 10)];
    a.net = vec![NetCounters { iface: "veth0".into(), tx_packets: 10, ..Default::default() }];
    let mut b = second(3, [10, 10], vec![]);
    b.irq_sources = vec![("36 virtio1-req.0".into(), 700), ("26 ttyS0".into(), 5), ("LOC Local timer".into(), 4010)];
    b.net = vec![NetCounters { iface: "veth0".into(), tx_packets: 2010, ..Default::default() }];
    let mut acc = Accumulator::new("block", &[]);
    acc.add(&b.since(&a));
    let c = acc.finish();
    let names: Vec<&str> = c.interrupt_sources.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["36 virtio1-req.0", "LOC Local timer"], "only the sources that moved");
    let dev = |devices: &[&str]| Target {
        devices: devices.iter().map(|d| d.to_string()).collect(),
        ..target(Measure::DeviceInterrupts, &[], 1.0, 10.0)
    };
    let by_number = c.check(&dev(&["35", "36"]));
    assert_eq!((by_number.achieved, by_number.flagged), (300.0, false), "{by_number:?}");
    assert!(by_number.message.contains("36 virtio1-req.0 300.0/s"), "{}", by_number.message);
    assert_eq!(c.check(&dev(&["virtio1-req.0"])).achieved, 300.0, "by name");
    let uart = c.check(&dev(&["ttyS0"]));
    assert!(uart.flagged && uart.message.contains("fell short") && uart.message.contains("none moved"), "{uart:?}");
    let veth = Target { devices: vec!["veth0".into()], ..target(Measure::IfacePackets, &[], 1.0, 10.0) };
    assert_eq!((c.check(&veth).achieved, c.check(&veth).flagged), (1000.0, false));
}
