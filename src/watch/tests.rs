//! `rtscope watch`'s unit tests.

use super::*;

fn id(policy: u32) -> Identity {
    Identity {
        tid: 42,
        pid: 40,
        comm: "myloop".into(),
        process: "app".into(),
        policy,
        priority: 80,
        dl_runtime_ns: 0,
        dl_deadline_ns: 0,
        dl_period_ns: 0,
    }
}

#[test]
fn the_filter_takes_threads_by_id_name_policy_and_cpu() {
    let fifo = id(sched::SCHED_FIFO);
    let all = Filter { policies: vec![1, 2, 6], ..Default::default() };
    assert!(all.takes(&fifo, 3));
    assert!(!all.takes(&id(0), 3), "a normal thread by default");
    let by_pid = Filter { pids: vec![40], ..all.clone() };
    assert!(by_pid.takes(&fifo, 0), "the process's id takes its threads");
    assert!(!Filter { pids: vec![41], ..all.clone() }.takes(&fifo, 0));
    assert!(Filter { tids: vec![42], ..all.clone() }.takes(&fifo, 0), "the thread's own id");
    assert!(!Filter { tids: vec![40], ..all.clone() }.takes(&fifo, 0), "a tid is that thread alone");
    assert!(Filter { comms: vec!["app".into()], ..all.clone() }.takes(&fifo, 0), "the process's name");
    assert!(!Filter { comms: vec!["other".into()], ..all.clone() }.takes(&fifo, 0));
    let on = Filter { cpus: Some(vec![2, 3]), ..all.clone() };
    assert!(on.takes(&fifo, 3) && !on.takes(&fifo, 1));
    assert!(all.may_take(19) && all.may_take(-1) && !all.may_take(120));
    assert!(Filter { policies: vec![0], ..all }.may_take(120));
}

/// A thread looked up and left is looked up again when the trace shows
/// it otherwise: on another CPU where only its CPU was wrong, renamed,
/// at another priority; not while it shows as it did.
#[test]
fn a_thread_left_is_looked_at_again_when_the_trace_shows_it_otherwise() {
    /// A `sleep` process, killed when dropped (a failed assertion too).
    struct Sleeper(std::process::Child);
    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let start = || {
        let child = Sleeper(std::process::Command::new("sleep").arg("30").spawn().expect("start sleep"));
        let tid = child.0.id() as i32;
        // Until its exec, the child bears the test's name.
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while read_trim(&format!("/proc/{tid}/comm")).as_deref() != Some("sleep") {
            assert!(std::time::Instant::now() < until, "sleep did not start in 10 s");
            std::thread::sleep(Duration::from_millis(1));
        }
        (child, tid)
    };
    let (child, tid) = start();
    // Whatever policy the test runs at, the child's is taken.
    let policies = vec![0, 1, 2, 3, 5, 6];
    let filter = Filter { comms: vec!["sleep".into()], policies, cpus: Some(vec![1]), ..Default::default() };
    let settings = Settings {
        filter,
        duration_ns: None,
        checkpoint_ns: 1_000_000_000,
        exceed: ExceedMode::Adaptive,
        period_ns: None,
        deadline_ns: None,
        cause_threshold_ns: None,
        max_episodes: 0,
        buffer_kb: 0,
        max_threads: 4,
        sample_hz: 0,
        classify_all: false,
        until_stopped: false,
    };
    let mut threads = Threads::new(&settings, 1, None, 0, Vec::new());
    let mut tasks = HashMap::new();
    tasks.insert(tid, Task { comm: "sleep".into(), prio: 120 });
    let rejected = |t: &Threads<'_>| t.rejected.get(&tid).map(|r| (r.task.comm.clone(), r.cpu));
    threads.discover(tid, &tasks, 0, 10, false);
    assert_eq!(rejected(&threads), Some(("sleep".into(), Some(0))), "left for its CPU alone");
    // On CPU 2, not one of --cpus either: not looked up (that would
    // have noted CPU 2).
    threads.discover(tid, &tasks, 2, 15, false);
    assert_eq!(rejected(&threads), Some(("sleep".into(), Some(0))), "looked up again on another CPU outside");
    // Shown on CPU 1, one of --cpus: taken, found then, on its CPU since.
    threads.discover(tid, &tasks, 1, 20, true);
    assert!(threads.tracker.watched(tid) && threads.by_tid.contains_key(&tid));
    assert_eq!(threads.list[0].found_ns, 20);
    drop(child);

    // Another filter, by name: left on any CPU.
    let (child, tid) = start();
    let sleep = Task { comm: "sleep".into(), prio: 120 };
    tasks.insert(tid, sleep.clone());
    let other = Settings {
        filter: Filter { comms: vec!["other".into()], cpus: None, ..settings.filter.clone() },
        ..settings.clone()
    };
    let mut threads = Threads::new(&other, 1, None, 0, Vec::new());
    threads.discover(tid, &tasks, 0, 10, false);
    let rejected = |t: &Threads<'_>| t.rejected.get(&tid).map(|r| (r.task.comm.clone(), r.task.prio, r.cpu));
    assert_eq!(rejected(&threads), Some(("sleep".into(), 120, None)), "its name, on any CPU");
    // Not looked up again while the trace shows it as when it was left
    // (a filter that takes it now, and a lookup would take it), looked
    // up once the trace shows it otherwise: here, not named at all,
    // which counts as a normal task.
    let by_name = Settings { filter: Filter { cpus: None, ..settings.filter.clone() }, ..settings };
    let mut threads = Threads::new(&by_name, 1, None, 0, Vec::new());
    threads.rejected.insert(tid, Rejected { task: sleep, cpu: None });
    threads.discover(tid, &tasks, 1, 11, false);
    assert!(!threads.tracker.watched(tid), "looked up again though the trace shows it as before");
    tasks.remove(&tid);
    threads.discover(tid, &tasks, 1, 12, false);
    assert!(threads.tracker.watched(tid), "not looked up again once the trace shows it otherwise");
    assert_eq!(threads.list[0].found_ns, 12);
    drop(child);
    // pid 0 never.
    threads.discover(0, &tasks, 0, 14, true);
    assert!(!threads.rejected.contains_key(&0) && !threads.tracker.watched(0));
}

#[test]
fn a_threads_extra_has_its_identity_its_jitter_and_its_misses() {
    let mut t = Watched::new(id(sched::SCHED_FIFO), 10, Some(1_000_000));
    (t.cpus, t.activations, t.misses, t.exited_ns) = (vec![1, 0], 4, 1, Some(99));
    let mut p = Tally::new();
    for v in [1_990_000, 2_000_000, 2_000_000, 2_030_000] {
        p.record(v);
    }
    let e = t.extra(5, Some(&p), None);
    assert_eq!(
        (e["thread"].as_str(), e["sched"].as_str(), e["cpus"].as_str()),
        (Some("myloop (42)"), Some("SCHED_FIFO 80"), Some("1,0"))
    );
    assert_eq!((e["appeared"].as_bool(), e["exited_ns"].as_u64()), (Some(true), Some(99)));
    assert_eq!((e["deadline_ns"].as_u64(), e["deadline_misses"].as_u64()), (Some(1_000_000), Some(1)));
    // The median and the jitter against it, to the histogram's 0.1 %.
    let near = |k: &str, want: f64| (e[k].as_f64().unwrap() - want).abs() <= want * 0.001 + 2_000.0;
    assert!(near("period_median_ns", 2_000_000.0) && near("jitter_ns", 30_000.0), "{e:?}");
    // Against a given period: the farther side.
    let e = t.extra(50, Some(&p), Some(2_010_000));
    assert!(e["appeared"] == false && e["period_ref_ns"] == 2_010_000, "{e:?}");
    assert!((e["jitter_ns"].as_f64().unwrap() - 20_000.0).abs() <= 2_100.0, "{e:?}");
    // A SCHED_DEADLINE thread's own deadline, when none is given.
    let dl = Identity { dl_runtime_ns: 100, dl_deadline_ns: 500, dl_period_ns: 1000, ..id(sched::SCHED_DEADLINE) };
    let t = Watched::new(dl, 0, None);
    assert_eq!(t.deadline_ns, Some(500));
    assert_eq!(t.extra(0, None, None)["dl_period_ns"], 1000);
}
