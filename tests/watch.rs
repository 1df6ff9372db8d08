//! `rtscope watch`: a real-time thread of this test, of known period and
//! runtime, that logs its own timestamps, watched from outside; then the
//! same thread delayed by a logged disturber. Root only.

mod common;

use common::periodic::*;
use common::*;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `rtscope watch` in the background, its reader on CPU 0.
fn watch(fx: &Fixture, args: &[&str]) -> Child {
    let json = fx.dir.join("watch.json");
    Command::new(BIN)
        .args(["watch", "--db", &fx.db, "-q", "--reader-cpus", "0", "--json", json.to_str().unwrap()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rtscope watch")
}

/// Waits until the watch run `pid` is stored and its trace is on: the run
/// is stored before the trace instance is set up, which once took 0.7 s
/// beside another test's loads, so the thread started before the trace
/// saw it.
fn wait_for_run(db: &str, pid: u32) {
    let until = Instant::now() + Duration::from_secs(60);
    while !std::path::Path::new(db).exists() || !text(&rtscope(&["runs", "--db", db])).contains("watch") {
        assert!(Instant::now() < until, "rtscope watch did not start in 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let tracing = || {
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        mounts.lines().filter(|l| l.split_whitespace().nth(2) == Some("tracefs")).any(|l| {
            let root = l.split_whitespace().nth(1).unwrap_or_default();
            std::fs::read_to_string(format!("{root}/instances/rtscope-{pid}/tracing_on")).is_ok_and(|t| t.trim() == "1")
        })
    };
    while !tracing() {
        assert!(Instant::now() < until, "rtscope watch's trace was not on in 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
}

/// Waits for `rtscope watch` to end; its JSON.
fn finish(fx: &Fixture, child: Child) -> serde_json::Value {
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let doc = json_file(&fx.dir.join("watch.json"));
    assert_eq!(doc["status"], "complete", "{doc}");
    doc
}

fn name() -> String {
    format!("rtw{}", std::process::id() % 100_000)
}

/// The result row of `metric` for thread `tid`.
fn thread_row<'a>(rows: &'a [serde_json::Value], metric: &str, tid: i32) -> &'a serde_json::Value {
    rows.iter()
        .find(|r| r["probe"] == "watch" && r["metric"] == metric && r["cpu"].as_i64() == Some(tid as i64))
        .unwrap_or_else(|| panic!("no watch {metric} of thread {tid} in {rows:#?}"))
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// A thread that appears after the start and exits before the end: its
/// activations per second, median period, runtime and wake-up latency
/// against its own timestamps; its series end where it exited.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_periodic_thread_that_appears_and_exits() {
    let fx = Fixture::root();
    if !has_tracefs() {
        return;
    }
    let (cpu, name) = (last_cpu(), name());
    let child = watch(&fx, &["--comm", &name, "-D", "9s"]);
    wait_for_run(&fx.db, child.id());
    let thread = periodic(&name, cpu, Duration::from_secs(5));
    let tid = thread.tid;
    let own = thread.join();
    let doc = finish(&fx, child);
    let rows = doc["results"].as_array().unwrap();
    let notes = doc["run"]["notes"].to_string();
    assert!(
        rows.iter().any(|r| r["cpu"].as_i64() == Some(tid as i64)),
        "thread {tid} was not watched; the run's notes: {notes}"
    );
    let lat = thread_row(rows, "latency", tid);
    assert_eq!(lat["comm"], name.as_str());
    assert_eq!(lat["sched"], "SCHED_FIFO 80");
    assert_eq!(lat["appeared"], true, "found after the start: {lat}");
    let (found, exited) = (lat["found_ns"].as_u64().unwrap(), lat["exited_ns"].as_u64().expect("it exited"));
    let (first, last) = (own[0].programmed, own.last().unwrap().woke);
    assert!(
        found <= first && exited > last,
        "found {found}, exited {exited}: the thread ran {first}..{last}; the run's notes: {notes}"
    );
    // Its series end where it exited (within the 1 s check).
    let span = series_exceedances(&export(&fx.db, &[]), "latency", tid as u64).1;
    assert!(span.1 <= exited + 1_000_000 && span.1 >= last, "series {span:?}, exited at {exited}");

    // 500 activations per second +- 2 %, against the thread's own count:
    // the first one may precede its discovery (its first switch). Outside
    // its loop, at SCHED_FIFO, the thread may block a few times in the
    // kernel (its first sleep's set-up, its exit): those are wake-ups too.
    // How many periods a host stall makes the thread skip is the host's:
    // the rate is judged against the thread's own, 500/s where none did.
    let count = lat["count"].as_u64().unwrap();
    let secs = (own.last().unwrap().programmed + PERIOD_NS - first) as f64 / 1e9;
    let (rate, own_rate) = (count as f64 / secs, own.len() as f64 / secs);
    assert!(own_rate <= 500.5, "the thread's own rate {own_rate:.1}/s");
    assert!(
        (rate - own_rate).abs() <= own_rate * 0.02,
        "{rate:.1} activations/s ({count} in {secs:.3} s), the thread's own {own_rate:.1}/s ({})",
        own.len()
    );
    let n = own.len() as u64;
    assert!(count <= n + 4 && count + 2 + n / 50 >= n, "{count} wake-ups watched, the thread saw {n}: {lat}");
    // A median period of 2 ms +- 1 %.
    let period = thread_row(rows, "period", tid)["p50_ns"].as_u64().unwrap();
    assert!((1_980_000..=2_020_000).contains(&period), "median period {period} ns");
    assert_eq!(thread_row(rows, "period", tid)["period_median_ns"].as_u64().unwrap(), period);
    // The runtime (switch onto the CPU -> switch off it) holds what the
    // thread itself saw of each activation (its clock on waking -> its clock
    // before sleeping again); beyond that, only the kernel's way back from
    // the sleep (within the wake-up the thread saw) and its way into the
    // next sleep, a system call's entry: tens of microseconds at the most on
    // a slow guest, never a period. Not an absolute speed: a loaded host
    // makes both sides longer together. Less than the thread's own only by
    // what ran above it on its CPU during its spin (its clock counts that
    // time, the runtime does not: 96.6 us against its own 100.1 us seen on
    // a shared machine): a quarter of the spin at most in most activations,
    // which still tells the runtime from the wake-up latency (tens of us).
    let own_run = median(own.iter().map(|o| o.slept - o.woke).collect());
    let own_median = median(own.iter().map(|o| o.woke - o.programmed).collect());
    let runtime = thread_row(rows, "runtime", tid)["p50_ns"].as_u64().unwrap();
    assert!(
        runtime + 2_000 + own_run / 4 >= own_run && runtime <= own_run + own_median + 50_000,
        "median runtime {runtime} ns; the thread's own: on the CPU {own_run} ns, waking {own_median} ns"
    );
    // The wake-up latency (waking -> switch onto the CPU) is part of what
    // the thread itself sees (programmed -> its clock read after waking).
    let watched = lat["p50_ns"].as_u64().unwrap();
    assert!(watched <= own_median + 20_000, "watch median {watched} ns, the thread's own {own_median} ns");
    // The reader's cost and losses are stated.
    assert!(notes.contains("events (") && notes.contains("events lost"), "{notes}");
}

/// The same thread beside a SCHED_FIFO 99 spinner of 400 us every
/// 20.333 ms on its CPU: a wake-up due inside a burst cannot run before the
/// burst ends, so watch must show it switched on at or after that end and
/// before the thread's own clock read; the worst latency is above 300 us,
/// and the episodes above 300 us name the spinner.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_disturbed_thread_shows_the_bursts_and_names_the_disturber() {
    let fx = Fixture::root();
    if !has_tracefs() {
        return;
    }
    let (cpu, name) = (last_cpu(), name());
    let spinner = truth::Disturber::start(&fx.dir, &cpu.to_string(), "20333us", "400us", "30s");
    let args = ["--comm", &name, "-D", "8s", "--exceed", "150us", "--cause-threshold", "300us", "--episodes", "5000"];
    let child = watch(&fx, &args);
    wait_for_run(&fx.db, child.id());
    let thread = periodic(&name, cpu, Duration::from_secs(6));
    let tid = thread.tid;
    let own = thread.join();
    let doc = finish(&fx, child);
    let bursts = spinner.finish();
    let export = export(&fx.db, &[]);
    let (exc, _) = series_exceedances(&export, "latency", tid as u64);

    // Every stored wake-up above 150 us of the thread's loop switched the
    // thread on between its programmed instant and its own clock read (5 us
    // of clock slack). Before its loop the thread is woken in its set-up
    // too (moving itself to its CPU waits for the CPU's stopper thread),
    // and a burst may delay that; it is no activation.
    const SLACK: u64 = 5_000;
    let (first, last) = (own[0].programmed, own.last().unwrap().woke);
    for &(t, v) in exc.iter().filter(|&&(t, v)| t + SLACK >= first && t - v <= last + SLACK) {
        let k = t - v;
        assert!(
            own.iter().any(|o| k + SLACK >= o.programmed && t <= o.woke + SLACK),
            "a wake-up ({k}..{t}) outside every activation the thread saw"
        );
    }
    // Wake-ups due well inside a burst: watched from within [P, burst end]
    // to the burst's end or later. A host stall of the timer interrupt past
    // 50 us can make one short: as often as such stalls hit the others.
    let inside = |o: &Own| bursts.iter().find(|b| b.start + 10_000 <= o.programmed && o.programmed + 200_000 <= b.end);
    let (mut covered, mut missed, mut host, mut free) = (0u64, 0u64, 0u64, 0u64);
    for o in &own {
        match inside(o) {
            Some(b) => {
                covered += 1;
                let seen = exc
                    .iter()
                    .any(|&(t, v)| t + 1_000 >= b.end && t <= o.woke + SLACK && t - v + SLACK >= o.programmed);
                missed += u64::from(!seen);
            }
            None if !bursts.iter().any(|b| b.near(o.programmed, o.woke, 1_000_000)) => {
                free += 1;
                host += u64::from(o.woke - o.programmed > 50_000);
            }
            None => {}
        }
    }
    assert!(covered >= 3, "only {covered} wake-ups due inside a burst in 6 s");
    let q = truth::rate_upper(host, free, 0.002);
    let allowed = truth::binomial_upper(covered, q, truth::FALSE_FAILURE);
    assert!(missed <= allowed, "{missed} of {covered} delayed wake-ups not seen (allowed {allowed}, host rate {q:.4})");

    let rows = doc["results"].as_array().unwrap();
    let max = thread_row(rows, "latency", tid)["max_ns"].as_u64().unwrap();
    assert!(max > 300_000, "worst latency {max} ns beside 400 us bursts");
    // Episodes: each wake-up above 300 us; those a burst covered for most
    // of their window name the spinner as their main cause.
    let tids: Vec<i64> = bursts.iter().map(|b| b.tid).collect();
    let episodes: Vec<&serde_json::Value> = export["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["verdict"].as_str().unwrap().contains(&name))
        .collect();
    assert!(!episodes.is_empty(), "no episode of {name}");
    let (mut by_burst, mut other) = (0u64, 0u64);
    for e in &episodes {
        assert_eq!(e["probe"], "watch");
        let (a, b) = (e["programmed_ns"].as_u64().unwrap(), e["woke_ns"].as_u64().unwrap());
        let overlap: u64 = bursts.iter().map(|x| x.overlap(a, b)).sum();
        if overlap * 10 >= (b - a) * 8 {
            by_burst += 1;
            other += u64::from(!tids.contains(&main_cause(e)["pid"].as_i64().unwrap_or(-1)));
        }
    }
    assert!(by_burst >= 1, "no episode within a burst: {episodes:#?}");
    let allowed = truth::binomial_upper(by_burst, q, truth::FALSE_FAILURE);
    assert!(
        other <= allowed,
        "{other} of {by_burst} episodes within a burst do not name the spinner (allowed {allowed})"
    );
}

/// `rtscope run --watch comm=NAME --loads idle,cpu`: the thread's series
/// under each load, a cell of 2 s each, 500 activations per second.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn run_watch_measures_the_thread_under_each_load() {
    let fx = Fixture::root();
    if !has_tracefs() {
        return;
    }
    let (cpu, name) = (last_cpu(), name());
    let thread = periodic(&name, cpu, Duration::from_secs(60));
    let tid = thread.tid;
    let spec = format!("comm={name}");
    let o = rtscope(&["run", "--watch", &spec, "--loads", "idle,cpu", "-D", "2s", "--db", &fx.db, "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("watch latency") && out.contains("idle") && out.contains("cpu"), "{out}");
    let own = thread.stop();
    let doc = export(&fx.db, &[]);
    for load in ["idle", "cpu"] {
        // The thread's latency result row, and its series, under `load`.
        let of = |what: &str| {
            doc[what]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["metric"] == "latency" && r["cpu"].as_i64() == Some(tid as i64) && r["load"] == load)
                .unwrap_or_else(|| panic!("no latency {what} of thread {tid} under {load}: {out}"))
        };
        let count = of("results")["count"].as_u64().unwrap();
        // About 1000 in the 2 s cell, as many as the thread itself woke in
        // the cell's span (a host stall that makes it skip periods takes
        // them from both), give or take one at each end and 2 %.
        let series = of("series");
        let ivs = series["intervals"].as_array().unwrap();
        let (a, b) = (ivs[0]["start_ns"].as_u64().unwrap(), ivs.last().unwrap()["end_ns"].as_u64().unwrap());
        let woke = own.iter().filter(|o| (a..b).contains(&o.woke)).count() as u64;
        let periods = (b - a) / PERIOD_NS;
        assert!(
            (500..=periods + 1).contains(&woke),
            "the thread woke {woke} times in the {} ms cell under {load}",
            (b - a) / 1_000_000
        );
        assert!(
            count <= woke + 2 && count + 2 + woke / 50 >= woke,
            "{count} activations watched in the cell under {load}, the thread woke {woke} times in it"
        );
    }
}

/// `watch --sample-hz`: a program built as programs are (`cc -O2 -g`, no
/// frame-pointer flag; tests/data/watch/latecall.c), SCHED_FIFO 80 on the
/// last CPU, every 10.333 ms (no multiple of anything rtscope uses), one
/// period in ten calling `slow_path` (4 ms of clock_gettime() loop: a
/// response well above the 2 ms deadline) and the others `fast_path`
/// (150 us), 300 periods. Watched by pid at 2 kHz of its CPU time: the late
/// periods rtscope counts are the program's slow ones (none missed, a few
/// more allowed where the host stalled a fast one past its deadline:
/// at most as many as the program itself saw late, and a few), and its
/// stored profile names `slow_path` over-represented in them (on enough
/// samples, nearly all of them late) and `fast_path` not.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn the_late_periods_profile_names_the_slow_function() {
    let fx = Fixture::root();
    if !has_tracefs() {
        return;
    }
    let periods = 300u64;
    let Some(mut prog) = latecall(&fx, periods) else { return };
    let (go, log, pid) = (prog.1.clone(), prog.2.clone(), prog.id().to_string());
    let child = watch(&fx, &["--pid", &pid, "--sample-hz", "2000", "--deadline", "2ms", "-D", "7s"]);
    wait_for_run(&fx.db, child.id());
    std::fs::write(&go, "").unwrap();
    let status = prog.wait().unwrap();
    assert!(status.success(), "the program: {status}");
    let own = std::fs::read_to_string(&log).unwrap();
    let own: Vec<u64> = own.split_whitespace().map(|n| n.parse().unwrap()).collect();
    let (slow, own_late) = (own[1], own[2]);
    assert_eq!((own[0], slow), (periods, periods / 10));
    let doc = finish(&fx, child);
    let profile = &doc["trace"]["watch_profile"];
    let notes = doc["run"]["notes"].to_string();
    let thread = profile["threads"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["tid"].as_i64() == pid.parse().ok()))
        .unwrap_or_else(|| panic!("no profile of thread {pid}: {profile:#}; the run's notes: {notes}"));
    let n = |k: &str| thread[k].as_u64().unwrap();
    let (late, on_time) = (n("late_periods"), n("on_time_periods"));
    eprintln!(
        "program: {periods} periods, {slow} slow, {own_late} late by its own clock; rtscope: {late} late periods ({} \
         samples), {on_time} on time ({} samples), {} unsorted, {} lost",
        n("late_samples"),
        n("on_time_samples"),
        n("unsorted_samples"),
        n("lost")
    );
    // Every slow period is late (4 ms of work against a 2 ms deadline);
    // lost trace events may leave one out. A fast one only where the host
    // held the program past its deadline, which its own clock sees too.
    assert!(late + 2 >= slow, "{late} late periods, {slow} slow: {thread:#}; notes: {notes}");
    assert!(late <= own_late.max(slow) + 3 + periods / 50, "{late} late periods, {own_late} late by its own clock");
    assert!(on_time + late >= periods * 9 / 10, "{on_time} on time: {thread:#}");
    let row = |table: &str, f: &str| thread[table].as_array().unwrap().iter().find(|r| r["function"] == f).cloned();
    let slow_row = row("inclusive", "slow_path").unwrap_or_else(|| panic!("no slow_path: {thread:#}"));
    eprintln!("slow_path: {slow_row}");
    // Some 8 samples a slow period at 2 kHz of its CPU time: judged on a
    // third of that, as a loaded host may take the cycles' rate down.
    assert_eq!(slow_row["over"], true, "{slow_row}");
    let (in_late, in_time) = (slow_row["late"].as_u64().unwrap(), slow_row["on_time"].as_u64().unwrap());
    assert!(in_late >= slow * 8 / 3, "{in_late} late samples in slow_path for {slow} slow periods: {thread:#}");
    assert!(in_time * 20 <= in_late, "slow_path has {in_time} on-time samples against {in_late} late");
    assert!(slow_row["ratio"].as_f64().unwrap() >= 3.0, "{slow_row}");
    // Some 70 samples in 270 fast periods, nearly all on time.
    let fast = row("inclusive", "fast_path").unwrap_or_else(|| panic!("no fast_path: {thread:#}"));
    eprintln!("fast_path: {fast}");
    assert_eq!(fast["over"], false, "{fast}");
    assert!(fast["on_time"].as_u64().unwrap() >= 5 && fast["ratio"].as_f64().unwrap() < 1.0, "{fast}");
    assert!(
        thread["late_folded"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["stack"].as_str().unwrap().contains("main;slow_path")),
        "the late stacks, unwound through the vDSO and the C library: {:#}",
        thread["late_folded"]
    );
    // The clock reads' frames in the vDSO named by its own symbols.
    let vdso: Vec<&serde_json::Value> =
        thread["inclusive"].as_array().unwrap().iter().filter(|r| r["module"] == "[vdso]").collect();
    eprintln!("in the vDSO: {vdso:?}");
    assert!(
        vdso.iter().any(|r| r["function"].as_str().is_some_and(|f| f.contains("clock_gettime") || f.contains("vdso"))),
        "the vDSO's functions named: {:#}",
        thread["inclusive"]
    );
    // The text report shows the table.
    let shown = text(&rtscope(&["show", "last", "--db", &fx.db]));
    assert!(shown.contains("watch profile:") && shown.contains("slow_path (latecall)"), "{shown}");
}

/// A watched program's own timeline: tests/data/markers/marks.c, pinned to
/// the last CPU at SCHED_OTHER, wakes every millisecond and writes
/// `rtscope-test-mark SEQ` to the kernel's `trace_marker`, logging the
/// CLOCK_MONOTONIC instants around each write (the truth). `watch --pid`
/// for 5 s; the Perfetto export, read back by Python's JSON parser and
/// checked against the Trace Event Format, holds every marker written
/// inside the watched window (its first 100 ms and last 100 ms aside),
/// once, in order, each between its log's two instants (within 20 us); and
/// the window's timeline: the program's activations (one a period, each
/// marker inside one) and its task slices on its CPU (nine writes in ten
/// inside one).
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_watched_programs_markers_are_in_its_timeline() {
    use common::timeline::*;
    let fx = Fixture::root();
    if !has_tracefs() {
        return;
    }
    // Held to the end: tracefs stays mounted meanwhile.
    let Some(mut marks) = start_marks(&fx.dir) else { return };
    let (log, cpu) = (marks.log.clone(), marks.cpu.clone());
    let pid = marks.child.id().to_string();
    let child = watch(&fx, &["--pid", &pid, "--policy", "other", "-D", "5s"]);
    wait_for_run(&fx.db, child.id());
    let t0 = now_ns();
    let doc = finish(&fx, child);
    signal(marks.child.id(), libc::SIGTERM);
    assert!(marks.child.wait().unwrap().success(), "the marks program");
    if doc["trace"]["markers"].is_null() {
        skipped("this kernel cannot copy trace_marker writes into an instance (options/copy_trace_marker: Linux 6.17)");
        return;
    }
    let Some(tef) = perfetto(&fx.db, &fx.dir) else { return };
    let meta = &tef.other["timeline"];
    assert_eq!(meta["complete"], true, "{meta}");
    let inside = (t0 + 100_000_000, meta["window_ns"][1].as_u64().unwrap() - 100_000_000);
    let markers: Vec<(String, u64)> = tef
        .of("marker")
        .iter()
        .filter(|e| e.tid.to_string() == cpu)
        .map(|e| (e.name.clone(), e.args["t_ns"].as_u64().unwrap()))
        .collect();
    let wrote = marks_log(&log);
    let judged = check_markers(&wrote, &markers, inside, 20_000);
    assert!(judged >= 3000, "{judged} markers written inside the watched window {inside:?}");
    // Its activations: a period slice each, on the thread of `periods`.
    let periods = tef.process("periods").unwrap_or_else(|| panic!("no periods process: {:?}", tef.names));
    let tid: u64 = pid.parse().unwrap();
    assert_eq!(tef.thread(periods, tid), Some(format!("marks ({pid})").as_str()));
    let mut acts: Vec<(u64, u64)> = tef
        .of("period")
        .iter()
        .filter(|e| e.pid == periods && e.tid == tid)
        .map(|e| (e.ts_ns, e.ts_ns + e.dur_ns))
        .filter(|a| a.0 >= inside.0 && a.1 <= inside.1)
        .collect();
    acts.sort_unstable();
    let wrote_inside: Vec<u64> =
        wrote.iter().filter(|w| w.1 >= inside.0 && w.2 <= inside.1).map(|w| (w.1 + w.2) / 2).collect();
    let in_one = wrote_inside
        .iter()
        .filter(|&&t| {
            let k = acts.partition_point(|a| a.0 <= t);
            k > 0 && acts[k - 1].1 >= t
        })
        .count();
    let on = tef.process(&format!("cpu{cpu}")).unwrap_or_else(|| panic!("no process cpu{cpu}: {:?}", tef.names));
    let slices = task_slices(&tef, on, tid);
    let in_slice = inside_slices(&slices, &wrote_inside, 20_000);
    eprintln!(
        "{} activations of marks ({pid}) inside the window, {in_one} of {} writes inside one; {} task slices \
         on cpu{cpu}, {in_slice} writes inside one; {meta}",
        acts.len(),
        wrote_inside.len(),
        slices.len()
    );
    assert!(acts.len() * 10 >= judged * 9 && acts.len() <= judged + 2, "{} activations, {judged} periods", acts.len());
    assert!(in_one * 10 >= wrote_inside.len() * 9, "{in_one} of {} writes inside an activation", wrote_inside.len());
    // Each write inside a task slice of the program on its CPU (from its
    // switch-in, or where no switch out of the idle task is traced, the
    // end of the interrupt that woke it, to its switch-out).
    assert!(in_slice * 10 >= wrote_inside.len() * 9, "{in_slice} of {} writes inside a task slice", wrote_inside.len());
}

/// tests/data/watch/latecall.c, built as programs are (`cc -O2 -g`, no
/// frame-pointer flag), SCHED_FIFO 80 on the last CPU, every 10.333 ms,
/// one period in ten 4 ms of `slow_path` (the others 150 us of
/// `fast_path`) against a 2 ms deadline, `periods` periods once `go`
/// exists; its log says how many were slow and late. Killed however the
/// test ends. None (said skipped) without a C compiler.
struct LateCall(Child, std::path::PathBuf, std::path::PathBuf);

impl Drop for LateCall {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for LateCall {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for LateCall {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

fn latecall(fx: &Fixture, periods: u64) -> Option<LateCall> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/watch/latecall.c");
    let exe = fx.dir.join("latecall");
    // No frame-pointer flag: as a distribution builds it.
    match Command::new("cc").args(["-O2", "-g", "-o"]).arg(&exe).arg(&src).output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!("cc could not build {}: {}", src.display(), text(&o)),
        Err(e) => {
            has(&format!("cc ({e})"), false);
            return None;
        }
    }
    let (go, log) = (fx.dir.join("go"), fx.dir.join("latecall.log"));
    let cpu = last_cpu().to_string();
    let mut prog = LateCall(
        Command::new(&exe)
            .args([&cpu, "80", "10333000", &periods.to_string(), "4000000", "150000", "2000000"])
            .args([&go, &log])
            .spawn()
            .expect("start the program"),
        go,
        log,
    );
    let pid = prog.id().to_string();
    // Its policy set before it is watched (it waits for `go`).
    let until = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.split(' ').nth(40) == Some("1")) {
        if let Ok(Some(status)) = prog.try_wait() {
            panic!("the program ended: {status}");
        }
        assert!(Instant::now() < until, "the program did not become SCHED_FIFO in 10 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    Some(prog)
}

/// `run --watch` with `sample-hz` and `deadline` in its spec: the watch
/// cell's profile of the late periods is stored with the assessment's run
/// (the same program as above, 3 s of it under the idle load).
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn run_watch_with_sample_hz_profiles_the_late_periods() {
    let fx = Fixture::root();
    if !has_tracefs() {
        return;
    }
    let Some(prog) = latecall(&fx, 1000) else { return };
    std::fs::write(&prog.1, "").unwrap();
    let spec = format!("pid={},sample-hz=2000,deadline=2ms", prog.id());
    let o = rtscope(&["run", "--watch", &spec, "--loads", "idle", "-D", "3s", "--db", &fx.db, "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    let doc = export(&fx.db, &[]);
    let profile = &doc["trace"]["watch_profile"];
    let thread = profile["threads"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["tid"].as_u64() == Some(u64::from(prog.id()))))
        .unwrap_or_else(|| panic!("no profile of the program in the run: {profile:#}; {}", text(&o)));
    let late = thread["late_periods"].as_u64().unwrap();
    let slow = thread["inclusive"].as_array().unwrap().iter().find(|r| r["function"] == "slow_path").cloned();
    eprintln!("run --watch: {late} late periods; slow_path: {slow:?}");
    // Some 29 slow periods in 3 s; a loaded host may start the cell late.
    assert!(late >= 10, "{late} late periods: {thread:#}");
    assert_eq!(slow.unwrap_or_default()["over"], true, "{thread:#}");
    assert_eq!(thread["load"], "idle");
}
