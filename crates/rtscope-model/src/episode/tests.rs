use super::*;

#[test]
fn trace_summaries_of_two_cells_add_up() {
    let a = TraceSummary {
        instance: "rtscope-1".into(),
        events: vec!["sched:sched_switch".into()],
        per_cpu: vec![TraceCpu { cpu: 0, events: 10, lost: 1, ..Default::default() }],
        reader_cpu_ns: 1_000,
        reader_cpu_pct: 1.0,
        episodes_kept: 2,
        ..Default::default()
    };
    let mut sum = TraceSummary::default();
    sum.absorb(&a);
    let mut b = a.clone();
    b.reader_cpu_pct = 0.5;
    b.per_cpu.push(TraceCpu { cpu: 1, events: 5, ..Default::default() });
    sum.absorb(&b);
    assert_eq!(sum.per_cpu[0].events, 20);
    assert_eq!(sum.per_cpu[1].events, 5);
    assert_eq!(sum.lost(), 2);
    assert_eq!(sum.episodes_kept, 4);
    assert_eq!(sum.events.len(), 1);
    // 2000 ns of reader CPU over 100_000 + 200_000 ns of wall time.
    assert!((sum.reader_cpu_pct - 2000.0 * 100.0 / 300_000.0).abs() < 1e-9, "{}", sum.reader_cpu_pct);
}

/// Markers stay in time order over the CPUs and cells, the first
/// [`Markers::MAX`] kept and the rest counted.
#[test]
fn markers_keep_the_first_in_time_order() {
    let mk = |t_ns, cpu| Marker { t_ns, cpu, pid: 1, text: format!("{t_ns}") };
    let mut a = Markers::default();
    a.extend([mk(30, 1), mk(10, 0)], 0);
    a.extend([mk(20, 1)], 2);
    assert_eq!(a.list.iter().map(|m| m.t_ns).collect::<Vec<_>>(), [10, 20, 30]);
    assert_eq!(a.dropped, 2);
    let mut full = Markers::default();
    for t in 0..Markers::MAX as u64 + 3 {
        full.push(mk(t, 0));
    }
    assert_eq!((full.list.len(), full.dropped), (Markers::MAX, 3));
    full.extend([mk(5, 1)], 0);
    assert_eq!(
        (full.list.len(), full.dropped, full.list.last().unwrap().t_ns),
        (Markers::MAX, 4, Markers::MAX as u64 - 2)
    );
    // Two cells' markers add up; a summary without any stays without.
    let cell = |m: Option<Markers>| TraceSummary { instance: "x".into(), markers: m, ..Default::default() };
    let mut sum = cell(Some(a.clone()));
    sum.absorb(&cell(None));
    sum.absorb(&cell(Some(a)));
    assert_eq!(sum.markers.as_ref().map(|m| (m.list.len(), m.dropped)), Some((6, 4)));
    let mut none = cell(None);
    none.absorb(&cell(None));
    assert_eq!(none.markers, None);
}

#[test]
fn the_ranking_from_more_samples_inside_episodes_is_kept() {
    let row = |f: &str| OverRow { function: f.into(), module: "kernel".into(), inside: 1, outside: 1, ratio: 1.0 };
    let cell = |inside: u64, f: &str| TraceSummary {
        instance: "rtscope-1".into(),
        profile: Some(ProfileSummary { samples: 1_000, in_episodes: inside, over: vec![row(f)], ..Default::default() }),
        ..Default::default()
    };
    let ranked = |cells: &[(u64, &str)]| {
        let mut sum = TraceSummary::default();
        for (inside, f) in cells {
            sum.absorb(&cell(*inside, f));
        }
        let p = sum.profile.unwrap();
        assert_eq!(p.in_episodes, cells.iter().map(|c| c.0).sum::<u64>());
        assert_eq!(p.samples, 1_000 * cells.len() as u64);
        p.over[0].function.clone()
    };
    assert_eq!(ranked(&[(5, "small"), (40, "large"), (30, "middle")]), "large");
    // Against the kept cell's count, not the sum so far.
    assert_eq!(ranked(&[(10, "a"), (20, "b"), (25, "c")]), "c");
    assert_eq!(ranked(&[(30, "a"), (20, "b"), (25, "c")]), "a");
}

#[test]
fn the_interrupted_kernel_code_lies_below_the_entry_frames() {
    let stack = |names: &[&str]| CodeStack {
        kernel: names.iter().map(|n| Frame { function: Some(n.to_string()), ..Default::default() }).collect(),
        ..Default::default()
    };
    let names = |s: &CodeStack| s.interrupted_kernel().iter().map(Frame::name).collect::<Vec<_>>();
    // x86 since 5.8: a device interrupt in the kernel's fork path.
    let x86 = stack(&["handle_irq_event", "common_interrupt", "asm_common_interrupt", "dup_mmap", "copy_process"]);
    assert_eq!(names(&x86), ["dup_mmap", "copy_process"]);
    // x86 before 5.8, and arm64.
    let old = stack(&["hrtimer_interrupt", "smp_apic_timer_interrupt", "apic_timer_interrupt", "dup_mmap"]);
    assert_eq!(names(&old), ["dup_mmap"]);
    let arm = stack(&["hrtimer_interrupt", "el1_interrupt", "el1h_64_irq_handler", "el1h_64_irq", "dup_mmap"]);
    assert_eq!(names(&arm), ["dup_mmap"]);
    // User space interrupted: nothing below the entry.
    assert!(stack(&["hrtimer_interrupt", "el0t_64_irq"]).interrupted_kernel().is_empty());
    assert!(stack(&["hrtimer_interrupt", "asm_sysvec_apic_timer_interrupt"]).interrupted_kernel().is_empty());
    assert!(stack(&["schedule"]).interrupted_kernel().is_empty());
    // A profiler sample's chain starts at the interrupted code.
    let sample = CodeStack { taken: "profiler sample".into(), ..stack(&["dup_mmap", "copy_process"]) };
    assert_eq!(names(&sample), ["dup_mmap", "copy_process"]);
    // User space: the entry frames found, nothing below them; not where
    // the interrupt came in a page fault taken from user space (the
    // fault's entry is last), nor where no entry frame is named.
    assert!(stack(&["hrtimer_interrupt", "asm_sysvec_apic_timer_interrupt"]).interrupted_user());
    let in_fault = stack(&["hrtimer_interrupt", "asm_sysvec_apic_timer_interrupt", "lock_vma", "asm_exc_page_fault"]);
    assert!(!in_fault.interrupted_user());
    assert!(!stack(&["hrtimer_interrupt", "dup_mmap"]).interrupted_user());
    assert!(!stack(&[]).interrupted_user());
    assert!(!CodeStack { taken: "profiler sample".into(), ..stack(&["asm_exc_page_fault"]) }.interrupted_user());
}

fn cause(kind: CauseKind, name: &str, ns: u64) -> Cause {
    Cause { kind, name: name.into(), pid: None, irq: None, sched: None, stage: None, host: None, kernel_ns: None, ns }
}

#[test]
fn kind_totals_count_a_sample_once_per_kind() {
    use CauseKind::*;
    let mut totals = Vec::new();
    KindTotal::add(&mut totals, &[cause(Irq, "local_timer", 5), cause(Irq, "eth0", 3), cause(Thread, "spin", 200)]);
    KindTotal::add(&mut totals, &[cause(Unaccounted, "noise", 40)]);
    KindTotal::add(&mut totals, &[cause(Irq, "local_timer", 9), cause(Unaccounted, "noise", 0)]);
    let got: Vec<(CauseKind, u64, u64, u64)> = totals.iter().map(|t| (t.kind, t.samples, t.main, t.ns)).collect();
    assert_eq!(got, [(Thread, 1, 1, 200), (Unaccounted, 1, 1, 40), (Irq, 2, 1, 17)]);
}

pub(crate) fn sample_episode() -> Episode {
    let causes = vec![
        Cause {
            kind: CauseKind::Thread,
            name: "kworker/1:2".into(),
            pid: Some(77),
            irq: None,
            sched: Some("SCHED_OTHER".into()),
            stage: Some("thread".into()),
            host: None,
            kernel_ns: None,
            ns: 790_300,
        },
        Cause { irq: Some(24), ..cause(CauseKind::Irq, "virtio0-input", 10_100) },
        cause(CauseKind::Irq, "reschedule", 1_900),
        cause(CauseKind::Softirq, "NET_RX", 8_200),
        cause(CauseKind::Unaccounted, "swapper/1", 3_100),
        cause(CauseKind::Timer, "timer", 300),
    ];
    let stages = Stages { irq_ns: 3_000, handler_ns: 12_000, wake_ns: 2_000, thread_ns: 815_000, user_ns: 10_100 };
    let latency = stages.total();
    Episode {
        probe: "wakeup".into(),
        load: None,
        metric: "latency".into(),
        cpu: 1,
        sample: 8412,
        programmed_ns: 1_000_000,
        woke_ns: 1_000_000 + latency,
        latency_ns: latency,
        verdict: verdict(1, 8412, "latency", latency, Some(&stages), &causes),
        stages: Some(stages),
        causes,
        slices: vec![],
        stack: None,
        blocker: None,
        samples: None,
        remainder: None,
    }
}

#[test]
fn verdict_reads_like_rtla_auto_analysis() {
    let e = sample_episode();
    assert_eq!(
        e.verdict,
        "cpu1 #8412 latency 842.1us: thread 815.0us, blocked by kworker/1:2 (pid 77, SCHED_OTHER) 790.3us; \
         irq 12.0us (virtio0-input 10.1us); softirq NET_RX 8.2us; unaccounted 3.1us"
    );
    let v = verdict(0, 3, "latency", 5_000, None, &[cause(CauseKind::Unaccounted, "swapper/0", 5_000)]);
    assert_eq!(v, "cpu0 #3 latency 5.0us: unaccounted (interrupts off, hypervisor, SMI or idle exit) 5.0us");
    assert_eq!(verdict(0, 1, "latency", 10, None, &[]), "cpu0 #1 latency 0.0us");
}

#[test]
fn top_causes_aggregate_by_source() {
    let a = sample_episode();
    let mut b = sample_episode();
    b.causes[0].pid = Some(78);
    b.causes[0].ns = 100;
    b.latency_ns = 50_000;
    let rows = top_causes(&[a.clone(), b]);
    assert_eq!(rows[0].name, "kworker/1:2");
    assert_eq!((rows[0].seen_in, rows[0].main_in, rows[0].total_ns), (2, 1, 790_400));
    let irq = rows.iter().find(|r| r.name == "virtio0-input").unwrap();
    assert_eq!(irq.seen_in, 2);
    assert_eq!(irq.main_in, 1, "b's largest cause is its irq");
    let share: f64 = rows.iter().map(|r| r.share_pct).sum();
    assert!(share > 0.0 && share <= 100.0 + 1e-9, "{share}");
    assert!(top_causes(&[]).is_empty());
}

#[test]
fn net_verdicts_name_the_net_stages() {
    let st = Stages { irq_ns: 1_000, handler_ns: 2_000, wake_ns: 40_000, thread_ns: 3_000, user_ns: 1_000 };
    let c = Cause { stage: Some("softirq".into()), ..cause(CauseKind::Softirq, "NET_RX", 42_000) };
    let v = verdict_named(&Stages::NET_NAMES, 1, 7, "rx_wake", st.total(), Some(&st), &[c]);
    assert_eq!(v, "cpu1 #7 rx_wake 47.0us: softirq 40.0us, in softirq NET_RX 42.0us");
    let v = verdict_named(&Stages::NET_NAMES, 1, 7, "rx_wake", st.total(), Some(&st), &[]);
    assert_eq!(v, "cpu1 #7 rx_wake 47.0us: softirq 40.0us");
}

#[test]
fn stages_add_up() {
    let s = sample_episode().stages.unwrap();
    assert_eq!(s.largest(), ("thread", 815_000));
    assert_eq!(s.total(), 842_100);
}

fn frame(function: &str, offset: u64, module: &str) -> Frame {
    let addr = 0xffff_ffff_8110_0000 + offset;
    Frame {
        addr,
        function: Some(function.into()),
        offset: Some(offset),
        module: Some(module.into()),
        ..Default::default()
    }
}

/// [`sample_episode`] with its code: the kworker blocking the probe ran
/// fbdev's damage worker (its frames from the interrupted kernel down,
/// one with its source line), the profiler's samples in the window, and
/// the unaccounted time too short to name.
pub(crate) fn code_episode() -> Episode {
    let worker = || {
        let below = ["process_one_work", "worker_thread", "kthread", "ret_from_fork"];
        let mut f = vec![
            frame("memcpy_toio", 0x52, "kernel"),
            Frame {
                file: Some("drivers/gpu/drm/drm_format_helper.c".into()),
                line: Some(302),
                ..frame("drm_fb_memcpy", 0x95, "drm_kms_helper")
            },
            frame("drm_fb_helper_damage_work", 0x8a, "drm_kms_helper"),
        ];
        f.extend(below.iter().map(|n| frame(n, 0x40, "kernel")));
        f
    };
    let irq = ["try_to_wake_up", "hrtimer_wakeup", "__hrtimer_run_queues", "hrtimer_interrupt"];
    let mut kernel: Vec<Frame> = irq.iter().map(|n| frame(n, 0x1e, "kernel")).collect();
    kernel.push(frame("asm_sysvec_apic_timer_interrupt", 0x1a, "kernel"));
    kernel.extend(worker());
    let stack = CodeStack {
        taken: "wake-up".into(),
        t_ns: 1_003_100,
        pid: 77,
        comm: "kworker/1:2".into(),
        kernel,
        user: vec![],
        notes: vec!["1 frame in a module without symbols: sysctl kernel.kptr_restrict=1 names it".into()],
        unwind_ns: Some(4_200),
        unwinder: None,
    };
    let mut blocker =
        CodeStack { taken: "profiler sample".into(), t_ns: 1_400_000, notes: vec![], unwind_ns: None, ..stack.clone() };
    blocker.kernel = worker();
    let chain = "ret_from_fork [k];kthread [k];worker_thread [k];process_one_work [k];drm_fb_helper_damage_work [k]";
    let row =
        |function: &str, module: &str, samples| SampleRow { function: function.into(), module: module.into(), samples };
    let samples = WindowSamples {
        samples: 8,
        expected: 8.4,
        irqs_off: Some(0),
        rows: vec![row("memcpy_toio", "kernel", 6), row("drm_fb_memcpy", "drm_kms_helper", 2)],
        folded: vec![
            Folded { stack: format!("{chain};drm_fb_memcpy [k];memcpy_toio [k]"), samples: 6 },
            Folded { stack: format!("{chain};drm_fb_memcpy [k]"), samples: 2 },
        ],
        unwinders: Default::default(),
    };
    let why = "too short for the sampling period to tell; the interrupt came in memcpy_toio (kworker/1:2)";
    Episode {
        stack: Some(stack),
        blocker: Some(blocker),
        samples: Some(samples),
        remainder: Some(Remainder { ns: 3_100, verdict: "unknown".into(), why: why.into() }),
        ..sample_episode()
    }
}

/// The keys of a JSON object.
fn keys(v: &serde_json::Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().expect("an object").keys().map(String::as_str).collect();
    k.sort_unstable();
    k
}

/// The keys docs/json.md names for an episode's code, no more, no less.
#[test]
fn an_episodes_code_round_trips_with_the_documented_keys() {
    let e = code_episode();
    let text = serde_json::to_string(&e).unwrap();
    assert_eq!(serde_json::from_str::<Episode>(&text).unwrap(), e);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let stack = ["comm", "kernel", "notes", "pid", "t_ns", "taken", "unwind_ns", "user"];
    assert_eq!(keys(&v["stack"]), stack);
    assert_eq!(
        keys(&v["blocker"]),
        ["comm", "kernel", "pid", "t_ns", "taken", "user"],
        "a profiler sample keeps no notes and took no unwind"
    );
    assert_eq!(v["stack"]["taken"], "wake-up");
    assert_eq!(v["blocker"]["taken"], "profiler sample");
    assert_eq!(keys(&v["stack"]["kernel"][0]), ["addr", "function", "module", "offset"]);
    assert_eq!(keys(&v["blocker"]["kernel"][1]), ["addr", "file", "function", "line", "module", "offset"]);
    assert_eq!(v["blocker"]["kernel"][1]["module"], "drm_kms_helper");
    let w = &v["samples"];
    assert_eq!(keys(w), ["expected", "folded", "irqs_off", "rows", "samples"]);
    assert_eq!(keys(&w["rows"][0]), ["function", "module", "samples"]);
    assert_eq!(keys(&w["folded"][0]), ["samples", "stack"]);
    assert!(w["folded"][0]["stack"].as_str().unwrap().ends_with(";memcpy_toio [k]"), "root first: {w}");
    assert_eq!(keys(&v["remainder"]), ["ns", "verdict", "why"]);
    // An episode without code (an untraced stack, an older run) has none of the keys, and reads back.
    let bare = serde_json::to_value(sample_episode()).unwrap();
    for k in ["stack", "blocker", "samples", "remainder"] {
        assert!(bare.get(k).is_none(), "{k}: {bare}");
    }
    assert_eq!(serde_json::from_value::<Episode>(bare).unwrap(), sample_episode());
}

/// The run's `trace.stacks` and `trace.profile` with docs/json.md's
/// keys, through the whole document and back.
#[test]
fn a_runs_stacks_and_profiler_round_trip_with_the_documented_keys() {
    let mut run = crate::store::tests_support::sample_run();
    run.episodes = vec![code_episode()];
    let t = run.trace.as_mut().unwrap();
    t.stacks = Some(StacksSummary {
        taken: 4001,
        episodes: 1,
        cost_p50_ns: 2_900,
        cost_max_ns: 10_400,
        lost: 2,
        notes: vec!["kernel addresses are hidden: sysctl kernel.kptr_restrict=1".into()],
    });
    t.profile = Some(ProfileSummary {
        event: "cycles (hardware, NMI)".into(),
        hz: 10_000,
        blind_spot: "time the hypervisor takes".into(),
        samples: 60_000,
        in_episodes: 8,
        lost: 0,
        over: vec![OverRow {
            function: "memcpy_toio".into(),
            module: "kernel".into(),
            inside: 6,
            outside: 40,
            ratio: 1124.8,
        }],
        notes: vec![],
        over_of: 0,
    });
    let text = serde_json::to_string(&crate::export::run_doc(&run, true)).unwrap();
    let back = crate::export::read_json(&text, "code.json").unwrap();
    assert_eq!((&back.trace, &back.episodes), (&run.trace, &run.episodes));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(keys(&v["trace"]["stacks"]), ["cost_max_ns", "cost_p50_ns", "episodes", "lost", "notes", "taken"]);
    let p = &v["trace"]["profile"];
    assert_eq!(keys(p), ["blind_spot", "event", "hz", "in_episodes", "lost", "notes", "over", "samples"]);
    assert_eq!(keys(&p["over"][0]), ["function", "inside", "module", "outside", "ratio"]);
    assert_eq!(v["episodes"][0]["samples"]["rows"][0]["function"], "memcpy_toio");
    // Without --stacks and the profiler: neither key.
    let bare = serde_json::to_value(TraceSummary::default()).unwrap();
    assert!(bare.get("stacks").is_none() && bare.get("profile").is_none(), "{bare}");
}

/// A frame's label: a named one with its offset, module, file and line;
/// an unnamed one in a file with its file offset (debug symbols installed
/// later name it), a JIT's or the vDSO's with its module alone; and the
/// file offset stays out of a named frame's label and of its JSON.
#[test]
fn frames_are_labelled_named_or_by_their_place_in_the_file() {
    let named = Frame {
        addr: 0x5555_0000_1120,
        function: Some("spin_burst".into()),
        offset: Some(0x20),
        module: Some("rtscope".into()),
        file: Some("disturb.rs".into()),
        line: Some(120),
        file_offset: None,
    };
    assert_eq!(named.label(), "spin_burst+0x20 (rtscope) disturb.rs:120");
    assert!(serde_json::to_value(&named).unwrap().get("file_offset").is_none());
    let unnamed = Frame {
        addr: 0x7f3a_12c0_f6f1,
        module: Some("libapt-pkg.so.6.0.0".into()),
        file_offset: Some(0x12_f6f1),
        ..Default::default()
    };
    assert_eq!(unnamed.label(), "0x7f3a12c0f6f1 (libapt-pkg.so.6.0.0+0x12f6f1)");
    let v = serde_json::to_value(&unnamed).unwrap();
    assert_eq!(v["file_offset"], 0x12_f6f1);
    assert_eq!(serde_json::from_value::<Frame>(v).unwrap(), unnamed);
    let jit = Frame { addr: 0x7f00_0000_0010, module: Some("[anon]".into()), ..Default::default() };
    assert_eq!(jit.label(), "0x7f0000000010 ([anon])");
    assert_eq!(Frame { addr: 0x10, ..Default::default() }.label(), "0x10");
}

/// PREEMPT_RT's kernel threads are named for what they are in a verdict:
/// an IRQ thread by its line and device, the softirq, timer, RCU and
/// irq_work threads by their work; any other thread as before.
#[test]
fn rt_kernel_threads_are_named_for_what_they_are() {
    let mut c = cause(CauseKind::Thread, "irq/3-ttyS1", 40_000);
    c.pid = Some(98);
    c.sched = Some("SCHED_FIFO 50".into());
    assert_eq!(c.label(), "irq/3-ttyS1 (pid 98, SCHED_FIFO 50: the threaded handler of IRQ 3 (ttyS1))");
    assert_eq!(irq_thread_line("irq/27-virtio1-req"), Some(27));
    assert_eq!(irq_thread_line("irqbalance"), None);
    for (comm, role) in [
        ("ktimers/1", "timer softirq thread"),
        ("ksoftirqd/0", "softirqs deferred"),
        ("rcuc/1", "RCU's callbacks"),
        ("irq_work/1", "irq_work"),
    ] {
        assert!(kernel_thread(comm).is_some_and(|r| r.contains(role)), "{comm}: {:?}", kernel_thread(comm));
    }
    for other in ["kworker/1:2", "ktimersd", "irq/x-y", "rcuc/", "rtscope-wakeup1"] {
        assert_eq!(kernel_thread(other), None, "{other}");
    }
    let mut k = cause(CauseKind::Thread, "kworker/1:2", 1);
    k.pid = Some(77);
    k.sched = Some("SCHED_OTHER".into());
    assert_eq!(k.label(), "kworker/1:2 (pid 77, SCHED_OTHER)");
}
