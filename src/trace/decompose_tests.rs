//! Tests of `decompose`.

use super::*;
use crate::trace::event::Task;

const US: u64 = 1_000;

fn ev(ts_us: u64, kind: Kind) -> Ev {
    Ev { ts: ts_us * US, pid: -1, kind }
}

fn decoder() -> Decoder {
    let mut d = Decoder::default();
    d.tasks.insert(200, Task { comm: "spin".into(), prio: 0 });
    d.tasks.insert(100, Task { comm: "rtscope-wakeup0".into(), prio: 4 });
    d.tasks.insert(0, Task { comm: "swapper/0".into(), prio: 120 });
    d
}

fn settings(max: usize, threshold: CauseThreshold) -> Settings {
    Settings {
        cause_threshold: threshold,
        max_episodes: max,
        timer_entry: true,
        stages: true,
        path: WakePath::Timer,
        classify_all: false,
    }
}

/// Sample 1 wakes cleanly; sample 2 is held up by a FIFO 99 spinner
/// and a NET_RX softirq.
fn feed(t: &mut CpuTrace) {
    use Kind::*;
    for e in [
        ev(905, TimerEntry),
        ev(910, ExpireEntry { timer: 1, now: 0 }),
        ev(912, Waking { pid: 100 }),
        ev(915, ExpireExit { timer: 1 }),
        ev(918, TimerExit),
        ev(930, Switch { prev: 0, next: 100 }),
        ev(1010, Switch { prev: 100, next: 200 }),
        ev(2003, TimerEntry),
        ev(2005, ExpireEntry { timer: 1, now: 0 }),
        ev(2006, Waking { pid: 100 }),
        ev(2007, ExpireExit { timer: 1 }),
        ev(2010, TimerExit),
        ev(2050, SoftEntry(3)),
        ev(2080, SoftExit(3)),
        ev(2400, Switch { prev: 200, next: 100 }),
        ev(2600, Switch { prev: 100, next: 0 }),
    ] {
        t.push_event(e);
    }
    t.push_sample(Sample { seq: 1, t_ns: 1000 * US, value_ns: 100 * US });
    t.push_sample(Sample { seq: 2, t_ns: 2500 * US, value_ns: 500 * US });
}

fn run(t: &mut CpuTrace, pass_start: u64, last: bool) -> Vec<Out> {
    let d = decoder();
    let policy = |_pid: i32| Some(1);
    let names = Names { decoder: &d, policy: &policy };
    let mut outs = Vec::new();
    t.process(pass_start, last, &names, &mut |o| outs.push(o));
    outs
}

#[test]
fn splits_a_wakeup_into_stages_and_names_the_blocking_thread() {
    let mut t = CpuTrace::new(0, "wakeup", "latency", 100, settings(10, CauseThreshold::Fixed(200 * US)));
    feed(&mut t);
    let outs = run(&mut t, 0, false);
    let stages: Vec<Stages> =
        outs.iter().filter_map(|o| if let Out::Stages { stages, .. } = o { Some(*stages) } else { None }).collect();
    assert_eq!(stages.len(), 2);
    let s1 = Stages { irq_ns: 5 * US, handler_ns: 5 * US, wake_ns: 2 * US, thread_ns: 18 * US, user_ns: 70 * US };
    assert_eq!(stages[0], s1);
    let s2 = Stages { irq_ns: 3 * US, handler_ns: 2 * US, wake_ns: US, thread_ns: 394 * US, user_ns: 100 * US };
    assert_eq!(stages[1], s2);
    assert_eq!(s2.total(), 500 * US);
    let eps: Vec<&Episode> =
        outs.iter().filter_map(|o| if let Out::Keep(e, _) = o { Some(&**e) } else { None }).collect();
    assert_eq!(eps.len(), 1, "only sample 2 is above 200us");
    let e = eps[0];
    assert_eq!((e.sample, e.programmed_ns, e.latency_ns), (2, 2000 * US, 500 * US));
    let total: u64 = e.causes.iter().map(|c| c.ns).sum();
    assert_eq!(total, e.latency_ns, "{:?}", e.causes);
    let main = &e.causes[0];
    assert_eq!((main.kind, main.name.as_str(), main.pid, main.ns), (CauseKind::Thread, "spin", Some(200), 360 * US));
    assert_eq!(main.sched.as_deref(), Some("SCHED_FIFO 99"));
    let find = |k: CauseKind| e.causes.iter().find(|c| c.kind == k).map(|c| (c.name.as_str(), c.ns));
    assert_eq!(find(CauseKind::Softirq), Some(("NET_RX", 30 * US)));
    assert_eq!(find(CauseKind::Timer), Some(("timer", 7 * US)));
    assert_eq!(find(CauseKind::User), Some(("return to user", 100 * US)));
    assert_eq!(find(CauseKind::Unaccounted), Some(("spin", 3 * US)));
    assert_eq!(
        e.verdict,
        "cpu0 #2 latency 500.0us: thread 394.0us, blocked by spin (pid 200, SCHED_FIFO 99) 390.0us in the kernel \
         (softirq NET_RX 30.0us of it); user 100.0us; timer 7.0us; unaccounted 3.0us"
    );
    // The timeline runs from the previous wake-up (1000us) to this one.
    let tasks: Vec<&Slice> = e.slices.iter().filter(|s| s.lane == Lane::Task).collect();
    assert_eq!(tasks[0].start_ns, 1000 * US);
    assert!(tasks.iter().any(|s| s.name == "spin (200)"));
    assert!(e.slices.iter().any(|s| s.lane == Lane::Softirq && s.name == "NET_RX" && s.dur_ns == 30 * US));
    let stage_sum: u64 = e.slices.iter().filter(|s| s.lane == Lane::Stage).map(|s| s.dur_ns).sum();
    assert_eq!(stage_sum, 500 * US);
    assert_eq!((t.decomposed, t.incomplete, t.episodes_built), (2, 0, 1));
}

/// The noise probe's windows: no stages; the probe's own time in a
/// window is unaccounted, even after an untraced switch in from idle.
#[test]
fn attributes_a_lost_window_without_stages() {
    use Kind::*;
    let window = Settings { stages: false, ..settings(10, CauseThreshold::Fixed(0)) };
    let mut t = CpuTrace::new(0, "noise", "interruption", 100, window);
    let mut spin_ev = |ts: u64, kind: Kind, pid: i32| t.push_event(Ev { ts: ts * US, pid, kind });
    // The probe pauses (idle), is woken, its switch-in is not traced.
    spin_ev(100, Switch { prev: 100, next: 0 }, 100);
    // Window 1 [1000, 1300]: a timer tick, a FIFO spinner, back.
    spin_ev(1000, TimerEntry, 100);
    spin_ev(1010, Waking { pid: 200 }, 100);
    spin_ev(1020, TimerExit, 100);
    spin_ev(1022, Switch { prev: 100, next: 200 }, 100);
    spin_ev(1298, Switch { prev: 200, next: 100 }, 200);
    t.push_sample(Sample { seq: 1, t_ns: 1300 * US, value_ns: 300 * US });
    // Window 2 [2000, 2050]: nothing traced (a hypervisor took it).
    t.push_sample(Sample { seq: 2, t_ns: 2050 * US, value_ns: 50 * US });
    let outs = run(&mut t, 0, true);
    let eps: Vec<&Episode> =
        outs.iter().filter_map(|o| if let Out::Keep(e, _) = o { Some(&**e) } else { None }).collect();
    assert!(!outs.iter().any(|o| matches!(o, Out::Stages { .. })));
    assert_eq!((t.decomposed, t.incomplete), (0, 0));
    assert_eq!(eps.len(), 2);
    let e = eps[0];
    assert!(e.stages.is_none());
    assert_eq!(e.causes.iter().map(|c| c.ns).sum::<u64>(), 300 * US, "{:?}", e.causes);
    let main = &e.causes[0];
    assert_eq!((main.kind, main.name.as_str(), main.ns), (CauseKind::Thread, "spin", 276 * US));
    let find = |e: &Episode, k: CauseKind| e.causes.iter().find(|c| c.kind == k).map(|c| (c.name.clone(), c.ns));
    assert_eq!(find(e, CauseKind::Irq), Some(("local_timer".into(), 20 * US)));
    assert_eq!(find(e, CauseKind::Unaccounted), Some(("rtscope-wakeup0".into(), 4 * US)));
    assert!(e.verdict.starts_with("cpu0 #1 interruption 300.0us: blocked by spin"), "{}", e.verdict);
    let e = eps[1];
    assert_eq!(e.causes.len(), 1, "{:?}", e.causes);
    assert_eq!((e.causes[0].kind, e.causes[0].pid, e.causes[0].ns), (CauseKind::Unaccounted, Some(100), 50 * US));
    assert!(e.verdict.contains("rtscope-wakeup0 was running"), "{}", e.verdict);
}

#[test]
fn waits_for_the_events_of_a_sample() {
    let mut t = CpuTrace::new(0, "wakeup", "latency", 100, settings(10, CauseThreshold::Fixed(u64::MAX)));
    t.push_event(ev(905, Kind::TimerEntry));
    t.push_sample(Sample { seq: 1, t_ns: 1000 * US, value_ns: 100 * US });
    assert!(run(&mut t, 1000 * US, false).is_empty(), "its events may still come");
    assert!(run(&mut t, 1000 * US + GRACE_NS, false).is_empty(), "no chain: counted incomplete");
    assert_eq!((t.decomposed, t.incomplete), (0, 1));
    // A sample with no events at all is processed at the end.
    t.push_sample(Sample { seq: 2, t_ns: 1_000_000 * US, value_ns: 100 * US });
    assert!(run(&mut t, 0, false).is_empty());
    assert_eq!(t.samples.len(), 1);
    run(&mut t, 0, true);
    assert!(t.samples.is_empty());
    assert_eq!(t.incomplete, 2);
}

#[test]
fn keeps_only_the_worst_episodes() {
    let mut t = CpuTrace::new(0, "wakeup", "latency", 100, settings(1, CauseThreshold::Fixed(0)));
    feed(&mut t);
    let outs = run(&mut t, 0, false);
    let kinds: Vec<String> = outs
        .iter()
        .filter(|o| !matches!(o, Out::Stages { .. }))
        .map(|o| match o {
            Out::Keep(e, _) => format!("keep {}", e.sample),
            Out::Drop { sample, .. } => format!("drop {sample}"),
            Out::Class { kind, .. } => format!("class {}", kind.as_str()),
            Out::Stages { .. } => unreachable!(),
        })
        .collect();
    assert_eq!(kinds, ["keep 1", "drop 1", "keep 2"]);
}

#[test]
fn adaptive_threshold_takes_record_breakers_then_the_tail() {
    let mut t = CpuTrace::new(0, "wakeup", "latency", 100, settings(1_000_000, CauseThreshold::Adaptive));
    let mut kept = 0;
    for i in 1..=20_000u64 {
        let v = 10 * US + (i * 7919) % (10 * US);
        t.push_sample(Sample { seq: i, t_ns: i * 1000 * US, value_ns: v });
        kept += run(&mut t, u64::MAX, false).iter().filter(|o| matches!(o, Out::Keep(..))).count();
    }
    // A handful of early record breakers, then about 9 + 1 per 1000.
    assert!((10..=60).contains(&kept), "{kept}");
}

/// A datagram stamped at 1000us reaches its receiver (pid 100) through
/// the sender's (pid 300) NET_RX softirq; a second one is delivered
/// from another CPU (no waking here) while a flood's softirq runs.
#[test]
fn splits_a_received_datagram_along_the_net_rx_path() {
    use Kind::*;
    let mut d = decoder();
    d.tasks.insert(300, Task { comm: "rtscope-netsend1".into(), prio: 5 });
    let set = Settings { path: WakePath::NetRx, ..settings(10, CauseThreshold::Fixed(0)) };
    let mut t = CpuTrace::new(1, "netlat", "rx_wake", 100, set);
    let on = |ts_us: u64, pid: i32, kind: Kind| Ev { ts: ts_us * US, pid, kind };
    for e in [
        on(990, 300, Switch { prev: 100, next: 300 }),
        on(1002, 300, SoftEntry(3)),
        on(1010, 300, Waking { pid: 100 }),
        on(1030, 300, SoftExit(3)),
        on(1032, 300, Switch { prev: 300, next: 100 }),
        on(1050, 100, Switch { prev: 100, next: 200 }),
        on(2005, 200, SoftEntry(3)),
        on(2060, 200, SoftExit(3)),
        on(2062, 200, Switch { prev: 200, next: 100 }),
    ] {
        t.push_event(e);
    }
    t.push_sample(Sample { seq: 1, t_ns: 1040 * US, value_ns: 40 * US });
    t.push_sample(Sample { seq: 2, t_ns: 2070 * US, value_ns: 70 * US });
    let policy = |_pid: i32| Some(1);
    let names = Names { decoder: &d, policy: &policy };
    let mut outs = Vec::new();
    t.process(0, true, &names, &mut |o| outs.push(o));
    let st: Vec<Stages> =
        outs.iter().filter_map(|o| if let Out::Stages { stages, .. } = o { Some(*stages) } else { None }).collect();
    let want = Stages { irq_ns: 2 * US, handler_ns: 8 * US, wake_ns: 20 * US, thread_ns: 2 * US, user_ns: 8 * US };
    assert_eq!(st, [want], "queue 2, stack 8, softirq 20, thread 2, user 8");
    assert_eq!((t.decomposed, t.incomplete), (1, 1), "the second was woken from another CPU");
    let eps: Vec<&Episode> =
        outs.iter().filter_map(|o| if let Out::Keep(e, _) = o { Some(&**e) } else { None }).collect();
    assert_eq!(eps.len(), 2);
    let e = eps[0];
    assert_eq!(e.stages, None, "net stages are not the timer's fields");
    let find = |e: &Episode, k: CauseKind| e.causes.iter().find(|c| c.kind == k).map(|c| (c.name.clone(), c.ns));
    assert_eq!(find(e, CauseKind::Softirq), Some(("NET_RX".into(), 28 * US)));
    assert_eq!(find(e, CauseKind::Thread), Some(("rtscope-netsend1".into(), 4 * US)), "not unaccounted");
    assert_eq!(find(e, CauseKind::User), Some(("return to user".into(), 8 * US)));
    assert_eq!(e.causes.iter().map(|c| c.ns).sum::<u64>(), 40 * US);
    assert_eq!(
        e.verdict,
        "cpu1 #1 rx_wake 40.0us: softirq 20.0us, in softirq NET_RX 28.0us; user 8.0us; thread 4.0us (rtscope-netsend1 4.0us)"
    );
    let stage_names: Vec<&str> = e.slices.iter().filter(|s| s.lane == Lane::Stage).map(|s| s.name.as_str()).collect();
    assert_eq!(stage_names, ["queue", "stack", "softirq", "thread", "user"]);
    // The datagram's own softirq ran in the sender's send: the path, not
    // something the sender did to it.
    let soft = e.causes.iter().find(|c| c.kind == CauseKind::Softirq).unwrap();
    assert_eq!(soft.host, None, "{soft:?}");
    // The second: 55 us of the flood's NET_RX on this CPU, run from the
    // flooding thread's own kernel code (no interrupt ended just before):
    // both are named, as one.
    let e = eps[1];
    assert_eq!(find(e, CauseKind::Softirq), Some(("NET_RX".into(), 55 * US)));
    let soft = e.causes.iter().find(|c| c.kind == CauseKind::Softirq).unwrap();
    assert_eq!(soft.host, Some(Host { pid: 200, name: "spin".into(), in_kernel: true }));
    assert!(
        e.verdict
            .contains("blocked by spin (pid 200, SCHED_FIFO 99) 62.0us in the kernel (softirq NET_RX 55.0us of it)"),
        "{}",
        e.verdict
    );
    assert_eq!(episode::class_of(&e.causes), CauseKind::Thread);
}

/// A softirq on an interrupt's return to a thread is on that thread, not
/// run by it: named with it, not counted as its doing.
#[test]
fn a_softirq_on_an_interrupts_return_is_not_the_threads_doing() {
    use Kind::*;
    let mut d = decoder();
    d.tasks.insert(200, Task { comm: "loop".into(), prio: 120 });
    let set = Settings { path: WakePath::NetRx, ..settings(10, CauseThreshold::Fixed(0)) };
    let mut t = CpuTrace::new(1, "netlat", "rx_wake", 100, set);
    let on = |ts_us: u64, pid: i32, kind: Kind| Ev { ts: ts_us * US, pid, kind };
    for e in [
        on(900, 200, Switch { prev: 100, next: 200 }),
        on(1003, 200, IrqEntry(24)),
        on(1004, 200, IrqExit(24)),
        on(1005, 200, SoftEntry(3)),
        on(1060, 200, SoftExit(3)),
        on(1062, 200, Switch { prev: 200, next: 100 }),
    ] {
        t.push_event(e);
    }
    t.push_sample(Sample { seq: 1, t_ns: 1070 * US, value_ns: 70 * US });
    let policy = |_pid: i32| Some(0);
    let names = Names { decoder: &d, policy: &policy };
    let mut outs = Vec::new();
    t.process(0, true, &names, &mut |o| outs.push(o));
    let e = outs.iter().find_map(|o| if let Out::Keep(e, _) = o { Some(&**e) } else { None }).unwrap();
    let soft = e.causes.iter().find(|c| c.kind == CauseKind::Softirq).unwrap();
    assert_eq!(soft.host, Some(Host { pid: 200, name: "loop".into(), in_kernel: false }));
    assert!(e.verdict.contains("in softirq NET_RX 55.0us (on loop (pid 200))"), "{}", e.verdict);
    assert_eq!(episode::class_of(&e.causes), CauseKind::Softirq);
}

/// A datagram woken from another CPU: before its waking there, the
/// receiver's CPU did not hold it (remote); from the waking to its IPI's
/// arrival, the thread running there could not have held it off unless
/// interrupts were off (unaccounted); after the IPI, the SCHED_OTHER
/// thread ran on (in the kernel, not preemptible).
#[test]
fn a_wakeup_from_another_cpu_splits_the_window_at_its_waking() {
    use Kind::*;
    let mut d = decoder();
    d.tasks.insert(200, Task { comm: "sender".into(), prio: 120 });
    // The vector's name from the format captured on this kernel.
    let text = std::fs::read_to_string(format!(
        "{}/format/irq_vectors.reschedule_entry",
        crate::trace::event::tests::data_dir()
    ));
    d.add("irq_vectors", &crate::trace::format::Format::parse(&text.unwrap()).unwrap()).unwrap();
    let set = Settings { path: WakePath::NetRx, ..settings(10, CauseThreshold::Fixed(0)) };
    let mut t = CpuTrace::new(1, "netlat", "rx_wake", 100, set);
    let on = |ts_us: u64, pid: i32, kind: Kind| Ev { ts: ts_us * US, pid, kind };
    for e in [
        on(900, 200, Switch { prev: 100, next: 200 }),
        on(1022, 200, VectorEntry(0)),
        on(1023, 200, VectorExit(0)),
        on(1090, 200, Switch { prev: 200, next: 100 }),
    ] {
        t.push_event(e);
    }
    t.remote_upto = Some(1_000 * US);
    // Read later than the events after it, it still goes in time order.
    t.push_remote_waking(1010 * US, 100, 0);
    t.push_sample(Sample { seq: 1, t_ns: 1100 * US, value_ns: 100 * US });
    let policy = |_pid: i32| Some(0);
    let names = Names { decoder: &d, policy: &policy };
    let mut outs = Vec::new();
    t.process(10_000 * US, false, &names, &mut |o| outs.push(o));
    assert!(outs.is_empty(), "the wakings of other CPUs are not all read up to the sample yet");
    t.remote_upto = Some(1_100 * US + GRACE_NS);
    t.process(10_000 * US, false, &names, &mut |o| outs.push(o));
    let e = outs.iter().find_map(|o| if let Out::Keep(e, _) = o { Some(&**e) } else { None }).unwrap();
    let find = |k: CauseKind| e.causes.iter().find(|c| c.kind == k).cloned().unwrap();
    let remote = find(CauseKind::Remote);
    assert_eq!((remote.name.as_str(), remote.ns), ("cpu0", 10 * US));
    let flight = find(CauseKind::Unaccounted);
    assert_eq!((flight.name.as_str(), flight.pid, flight.ns), ("sender", Some(200), 12 * US));
    let held = find(CauseKind::Thread);
    assert_eq!((held.name.as_str(), held.ns, held.kernel_ns), ("sender", 67 * US, Some(67 * US)));
    assert_eq!(find(CauseKind::Irq).ns, US);
    assert_eq!(e.causes.iter().map(|c| c.ns).sum::<u64>(), 100 * US);
    assert_eq!(
        e.verdict,
        "cpu1 #1 rx_wake 100.0us: blocked by sender (pid 200, SCHED_OTHER) 67.0us in the kernel (not preemptible \
         67.0us of it); unaccounted 12.0us; user 10.0us; wake-up on the way from cpu0 10.0us; irq 1.0us \
         (reschedule 1.0us)"
    );
    assert_eq!((t.decomposed, t.incomplete), (0, 1), "no stages where the softirq ran elsewhere");
}

/// A datagram that comes while its receiver is still handling the ones
/// before it waits in the socket: the receiver's own time until then is
/// named for the backlog, not for a return to user space.
#[test]
fn a_datagram_behind_a_busy_receiver_is_queued_not_returning_to_user() {
    use Kind::*;
    let d = decoder();
    let set = Settings { path: WakePath::NetRx, ..settings(10, CauseThreshold::Fixed(0)) };
    let mut t = CpuTrace::new(1, "netlat", "rx_wake", 100, set);
    let on = |ts_us: u64, pid: i32, kind: Kind| Ev { ts: ts_us * US, pid, kind };
    for e in [
        on(900, 200, Switch { prev: 200, next: 100 }),
        on(1002, 100, SoftEntry(3)),
        on(1010, 100, SoftExit(3)),
        on(1100, 100, Switch { prev: 100, next: 200 }),
    ] {
        t.push_event(e);
    }
    t.push_sample(Sample { seq: 7, t_ns: 1060 * US, value_ns: 60 * US });
    let policy = |_pid: i32| Some(1);
    let names = Names { decoder: &d, policy: &policy };
    let mut outs = Vec::new();
    t.process(0, true, &names, &mut |o| outs.push(o));
    let eps: Vec<&Episode> =
        outs.iter().filter_map(|o| if let Out::Keep(e, _) = o { Some(&**e) } else { None }).collect();
    assert_eq!(eps.len(), 1);
    let e = eps[0];
    let find = |k: CauseKind| e.causes.iter().find(|c| c.kind == k).map(|c| (c.name.clone(), c.ns));
    assert_eq!(find(CauseKind::User), Some((episode::BUSY_RECEIVER.into(), 52 * US)));
    assert_eq!(find(CauseKind::Softirq), Some(("NET_RX".into(), 8 * US)));
    assert!(e.verdict.contains("queued behind earlier datagrams"), "{}", e.verdict);
}

#[test]
fn sched_labels() {
    assert_eq!(sched_label(0, Some(1)), "SCHED_FIFO 99");
    assert_eq!(sched_label(49, Some(2)), "SCHED_RR 50");
    assert_eq!(sched_label(120, Some(0)), "SCHED_OTHER");
    assert_eq!(sched_label(139, None), "SCHED_OTHER nice 19");
    assert_eq!(sched_label(120, Some(5)), "SCHED_IDLE");
    assert_eq!(sched_label(-1, Some(6)), "SCHED_DEADLINE");
}

#[test]
fn decomposes_the_wakeups_captured_from_this_kernel() {
    let mut d = crate::trace::event::tests::captured_decoder();
    let evs = crate::trace::event::tests::captured_events(&mut d, 0);
    let tid = d.tasks.iter().find(|(_, t)| t.comm == "rtscope-wakeup0").map(|(p, _)| *p).unwrap();
    let mut t = CpuTrace::new(0, "wakeup", "latency", tid, settings(100, CauseThreshold::Fixed(0)));
    let mut samples = 0;
    let mut last_timer = 0;
    for e in &evs {
        t.push_event(*e);
        match e.kind {
            Kind::TimerEntry => last_timer = e.ts,
            Kind::Switch { next, .. } if next == tid && last_timer > 0 => {
                samples += 1;
                let w = e.ts + 3 * US;
                t.push_sample(Sample { seq: samples, t_ns: w, value_ns: w - (last_timer - US) });
            }
            _ => {}
        }
    }
    let policy = |_pid: i32| None;
    let names = Names { decoder: &d, policy: &policy };
    let mut outs = Vec::new();
    t.process(0, true, &names, &mut |o| outs.push(o));
    assert!(samples >= 10, "{samples}");
    assert_eq!(t.decomposed, samples, "every captured wake-up has its full path");
    for o in &outs {
        match o {
            Out::Stages { stages, .. } => {
                assert_eq!(stages.irq_ns, US);
                assert_eq!(stages.user_ns, 3 * US);
            }
            Out::Keep(e, _) => {
                assert_eq!(e.stages.unwrap().total(), e.latency_ns);
                assert_eq!(e.causes.iter().map(|c| c.ns).sum::<u64>(), e.latency_ns, "{}", e.verdict);
            }
            Out::Drop { .. } | Out::Class { .. } => {}
        }
    }
}

/// A probe held off for seconds: the profiler's samples awaiting its next
/// sample keep at most MAX_STACKS_HELD user stacks, spread evenly over the
/// window; once they are counted, new ones keep theirs again.
#[test]
fn the_user_stacks_held_stay_bounded_and_evenly_spread() {
    let mut t = CpuTrace::new(1, "wakeup", "latency", 100, settings(4, CauseThreshold::Fixed(0)));
    let sample = |i: u64| PerfSample {
        t_ns: 1_000 + i * 500_000,
        pid: 200,
        tid: 200,
        user: vec![0x5555_0000_1000],
        stack: Some(Box::default()),
        ..Default::default()
    };
    let n = 5 * MAX_STACKS_HELD as u64;
    for i in 0..n {
        t.push_profile(sample(i));
    }
    let with: Vec<u64> = t.prof.iter().enumerate().filter(|(_, s)| s.stack.is_some()).map(|(i, _)| i as u64).collect();
    assert!(with.len() <= MAX_STACKS_HELD && with.len() >= MAX_STACKS_HELD / 2, "{} held", with.len());
    assert_eq!(t.stacks_held, with.len());
    // One stride apart all over the window, from its first sample.
    let gaps: std::collections::BTreeSet<u64> = with.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!((with[0], gaps.len()), (0, 1), "{gaps:?}");
    assert!(with.last().unwrap() + gaps.first().unwrap() >= n, "up to the window's end");
    // All counted: the next ones keep their stacks again.
    t.count_profile(u64::MAX, None);
    assert_eq!((t.stacks_held, t.stack_stride), (0, 1));
    t.push_profile(sample(n));
    t.push_profile(sample(n + 1));
    assert!(t.prof.iter().all(|s| s.stack.is_some()));
}
