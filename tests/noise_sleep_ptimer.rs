//! The `noise`, `sleep` and `ptimer` probes, for a few seconds each, as
//! root (CI runs as root), with their ground truth; `sleep`'s signed
//! deviations through the store.

mod common;
use common::*;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Histogram samples at or above `lo_ns`, and their median (ns).
fn at_or_above(row: &serde_json::Value, lo_ns: i64) -> (u64, i64) {
    let buckets: Vec<(i64, i64, u64)> = row["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b[0].as_i64().unwrap(), b[1].as_i64().unwrap(), b[2].as_u64().unwrap()))
        .filter(|b| b.0 >= lo_ns)
        .collect();
    let n: u64 = buckets.iter().map(|b| b.2).sum();
    let mut seen = 0;
    let median = buckets
        .iter()
        .find(|b| {
            seen += b.2;
            seen * 2 >= n
        })
        .map_or(0, |b| b.1);
    (n, median)
}

/// Ground truth by timestamps: a SCHED_FIFO 99 spinner busy for 200 us
/// every 20.333 ms on the measured CPU, logging each burst; noise at FIFO
/// 50 keeps every interruption above 50 us. Each burst that starts while
/// noise spins is one interruption as long as the burst.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn noise_sees_a_known_spinner() {
    let fx = Fixture::root();
    let cpu = last_cpu();
    let c = cpu.to_string();
    let spinner = truth::Disturber::start(&fx.dir, &c, "20333us", "200us", "20s");
    let v = fx.run_json("n.json", &["noise", "--cpus", &c, "--priority", "50", "--duration", "5s", "--exceed", "50us"]);
    let bursts = spinner.finish();
    let r = v["results"][0].clone();
    assert_eq!(r["metric"], "interruption");
    let active = r["active_ns"].as_u64().unwrap();
    // 33 ms active out of every 66 ms.
    assert!((2.0..=2.8).contains(&(active as f64 / 1e9)), "active {active} ns in a 5 s run at 33/33 ms");
    let (samples, span) = series_exceedances(&export(&fx.db, &[]), "interruption", cpu as u64);
    let seen = truth::judge_interruptions("noise", &samples, 50_000, active, 0.35, &bursts, span);
    // The threshold is --ratio 4 x the reference, rounded up to a whole
    // counter tick (both stored with 3 decimals).
    let reference = r["reference_ns"].as_f64().unwrap();
    let threshold = r["threshold_ns"].as_f64().unwrap();
    let tick_ns = 1e9 / v["run"]["plan"]["settings"]["calibration"]["ticks_per_s"].as_f64().unwrap();
    assert!(
        reference > 0.0 && threshold >= 4.0 * reference - 0.005 && threshold <= 4.0 * reference + tick_ns + 0.005,
        "reference {reference}, threshold {threshold}, tick {tick_ns} ns"
    );
    // The bursts' time is gone from the available time, and is noise.
    let noise = r["noise_ns"].as_u64().unwrap();
    assert!(r["count"].as_u64().unwrap() >= seen as u64 && noise >= seen as u64 * 199_000, "{r}");
    let available = r["available_pct"].as_f64().unwrap();
    let want = 100.0 * (1.0 - noise as f64 / active as f64);
    assert!((available - want).abs() < 0.01, "available {available} %: 100 - noise / active = {want} %");
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn noise_without_pause_warns_and_runs_under_rt_throttling() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    let o = rtscope(&["noise", "--cpus", &cpu, "--pause", "0", "--duration", "1500ms", "--gap", "1us", "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--pause 0") && err.contains("RT throttling"), "{err}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("interrupts") && out.contains("avail %") && out.contains("gap > 1us"), "{out}");
    let v = show_json(&fx.db, "last");
    // Stored with the run's warnings, so that -q or a report still says it.
    let warnings = v["run"]["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w["topic"] == "noise" && w["message"].as_str().unwrap().contains("--pause 0")),
        "{warnings:?}"
    );
    let r = &v["results"][0];
    // Never paused: active about the whole run.
    assert!(r["active_ns"].as_u64().unwrap() > 1_300_000_000, "{r}");
    assert!(r["threshold_ns"].as_f64().unwrap() >= 999.0, "{r}");
    assert!(r["min_ns"].as_i64().unwrap() >= 900, "--gap 1us: nothing shorter is an interruption: {r}");
}

/// SCHED_OTHER pays the timer slack, which nanosleep adds to every
/// wake-up; a SCHED_FIFO thread has none. Medians: a few host stalls of
/// milliseconds move a mean of 1000 samples by tens of microseconds.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn sleep_pays_the_timer_slack_only_under_sched_other() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    let base = ["sleep", "--cpus", &cpu, "--api", "nanosleep,timerfd", "--sleep", "1ms", "--duration", "3s"];
    // The kernel's default slack, set rather than inherited from whatever
    // started the tests.
    let other: Vec<&str> = base.iter().copied().chain(["--policy", "other", "--timer-slack", "50us"]).collect();
    let other = fx.rows("o.json", &other);
    let fifo = fx.rows("f.json", &base);
    let p50 = |rows: &[serde_json::Value]| row(rows, "nanosleep@1ms")["p50_ns"].as_i64().unwrap();
    let (o, f) = (p50(&other), p50(&fifo));
    eprintln!("nanosleep@1ms median deviation: SCHED_OTHER {o} ns, SCHED_FIFO {f} ns");
    assert_eq!(row(&other, "nanosleep@1ms")["timer_slack_ns"], 50_000, "{other:?}");
    // The timer fires at the end of its slack unless another interrupt
    // comes first: most sleeps pay all of it.
    assert!(o >= 50_000, "SCHED_OTHER: median {o} ns, want >= the 50 us timer slack");
    assert_eq!(row(&fifo, "nanosleep@1ms")["timer_slack_ns"], 0, "a real-time thread has no slack: {fifo:?}");
    // Its median is a wake-up's latency alone, which a slow or busy
    // machine lengthens (28 us seen beside other builds) as it lengthens
    // SCHED_OTHER's: judged against the same thread's median under
    // SCHED_OTHER, it pays none of the slack, i.e. less than half of it.
    assert!(f + 25_000 <= o, "SCHED_FIFO: median {f} ns, SCHED_OTHER {o} ns: want at least 25 us less");
    for r in other.iter().chain(&fifo) {
        // 1 ms + a phase of 0.5 ms on average: about 2000 in 3 s, split
        // over two APIs; fewer under SCHED_OTHER when something else wants
        // the CPU (589 beside a CPU hog), never more.
        let n = r["count"].as_u64().unwrap();
        let least = if r["timer_slack_ns"] == 0 { 600 } else { 100 };
        assert!((least..=1_400).contains(&n), "{n} samples, want {least}..=1400: {r}");
        assert!(r["min_ns"].as_i64().unwrap() > -100_000, "a sleep never ends 100 us early: {r}");
        assert!(r["mean_abs_ns"].as_f64().unwrap() >= r["mean_ns"].as_f64().unwrap());
    }
    // --timer-slack sets it, and it is stored.
    let slack = fx.rows(
        "s.json",
        &[
            "sleep",
            "--cpus",
            &cpu,
            "--api",
            "nanosleep",
            "--sleep",
            "1ms",
            "--duration",
            "1s",
            "--policy",
            "other",
            "--timer-slack",
            "200us",
        ],
    );
    assert_eq!(slack[0]["timer_slack_ns"], 200_000);
    assert!(slack[0]["p50_ns"].as_i64().unwrap() >= 100_000, "a larger slack, a later wake-up: {}", slack[0]);
}

/// Ground truth by timestamps: a SCHED_FIFO 99 spinner busy for 400 us
/// every 20.333 ms on the measured CPU. A 1 ms sleep (after a random
/// phase of up to 500 us) whose end falls inside a burst returns late by
/// the rest of the burst; the sleeps' ends fall in about a quarter of the
/// bursts (360 us of each in a cycle of at most 1.6 ms).
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn sleep_sees_a_known_spinner() {
    let fx = Fixture::root();
    let cpu = last_cpu();
    let c = cpu.to_string();
    let spinner = truth::Disturber::start(&fx.dir, &c, "20333us", "400us", "20s");
    let args = ["sleep", "--cpus", &c, "--api", "nanosleep", "--sleep", "1ms", "--phase", "500us", "--duration", "5s"];
    let v = fx.run_json("s.json", &[&args[..], &["--exceed", "30us"]].concat());
    let bursts = spinner.finish();
    let doc = export(&fx.db, &[]);
    let (exceedances, span) = series_exceedances(&doc, "nanosleep@1ms", cpu as u64);
    assert_eq!(lost_exceedances(&doc, "nanosleep@1ms", cpu as u64), 0, "every sample above 30 us kept");
    // (programmed end, deviation): the probe's timestamp is its return.
    let samples: Vec<(u64, u64)> = exceedances.iter().map(|&(t, d)| (t - d, d)).collect();
    let total = v["results"][0]["count"].as_u64().unwrap();
    truth::judge_sleeps("nanosleep@1ms", &samples, 30_000, total, 0.15, &bursts, span);
}

/// No sleep API wakes early here, so negative deviations are made by hand:
/// a signed run with values below zero goes through import, the store,
/// `show` and `export` and comes out negative.
#[test]
fn negative_deviations_stay_negative_through_the_store() {
    use rtscope_model::hist::Tally;
    use rtscope_model::run::{Interval, Run, Series, SeriesKey};
    let dir = tempdir();
    let db = db(&dir);
    let mut t = Tally::new_signed();
    for v in [-40_000i64, -3_000, -3_000, 2_000, 15_000] {
        t.record_signed(v);
    }
    let key = SeriesKey::new("sleep", "nanosleep@5ms", 0);
    let series =
        Series::new(key, "ns".into(), "adaptive".into(), vec![Interval::new(0, 1, 2, &t, 0, 0)], vec![]).unwrap();
    let run = Run {
        header: rtscope::session::new_header("sleep", vec!["rtscope".into(), "sleep".into()], true, vec![]),
        inventory: Default::default(),
        plan: serde_json::json!({"probe": "sleep"}),
        series: vec![series],
        episodes: vec![],
        trace: None,
        characterisation: vec![],
        cpu_score: None,
    };
    let file = dir.join("neg.json");
    let mut out = std::fs::File::create(&file).unwrap();
    let input = rtscope::report::Input { full: true, ..rtscope::report::Input::one(&run) };
    rtscope::report::JSON.write(&input, &mut out).unwrap();
    let o = rtscope(&["import", file.to_str().unwrap(), "--db", &db]);
    assert!(o.status.success(), "{}", text(&o));
    let v = show_json(&db, "last");
    let r = &v["results"][0];
    assert_eq!(r["min_ns"], -40_000);
    assert_eq!(r["max_ns"], 15_000);
    assert_eq!(r["mean_ns"], -29_000.0 / 5.0);
    let first = &r["histogram"][0];
    assert!(first[0].as_i64().unwrap() <= -40_000 && first[1].as_i64().unwrap() < 0, "{first}");
    let o = rtscope(&["show", "last", "--db", &db]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("-40.000") && out.contains("-(32-64) us") && out.contains("-(2-4) us"), "{out}");
    let o = rtscope(&["export", "last", "--format", "csv", "--db", &db]);
    assert!(String::from_utf8_lossy(&o.stdout).contains(",sleep,nanosleep@5ms,0,-"), "{}", text(&o));
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn ptimer_counts_every_period_of_every_kind() {
    let fx = Fixture::root();
    let rows = fx.rows("p.json", &["ptimer", "--duration", "5s"]);
    let cpus = rows.iter().map(|r| r["cpu"].as_i64().unwrap()).collect::<std::collections::BTreeSet<_>>().len();
    assert_eq!(rows.len(), 3 * cpus);
    for kind in ["timerfd", "posix-signal", "posix-thread"] {
        assert!(rows.iter().any(|r| r["metric"] == kind), "{kind} missing");
    }
    for r in &rows {
        let (n, missed) = (r["count"].as_u64().unwrap(), r["missed"].as_u64().unwrap());
        // A host stall of some milliseconds turns periods into missed ones
        // (counted; how many is the host's); a probe that lost events would
        // fail the sum. Half of them missed would be a host that stalled
        // this CPU for half of the run.
        assert!(n <= 5_010 && n * 2 >= n + missed, "about 5000 events in 5 s at 1 ms: {r}");
        // The last wait may return a few periods late, with them.
        assert!((4_995..=5_020).contains(&(n + missed)), "events + missed = periods: {r}");
        assert_eq!(r["overruns"], missed, "{r}");
        // The drift is measured from each expiration's own instant: a
        // quarter of the period, not a speed (a read's latency, tens of us
        // on a busy VM), tells it from a drift measured from another
        // expiration (a period off) or accumulated.
        let mean = r["mean_ns"].as_f64().unwrap();
        assert!((0.0..250_000.0).contains(&mean), "mean drift {mean} ns: near 0, under a quarter period: {r}");
        assert!(r["min_ns"].as_i64().unwrap() > -50_000, "no timer fires early: {r}");
        assert!(r["p50_ns"].as_i64().unwrap() < 250_000, "median drift under a quarter period: {r}");
        assert!((r["mean_abs_ns"].as_f64().unwrap() - mean.abs()).abs() <= mean.abs() + 1.0);
    }
}

/// Ground truth by timestamps: a SCHED_FIFO 99 spinner busy for 400 us
/// every 20.333 ms (no multiple of the timers' 1 ms) on the measured CPU.
/// Each expiration due inside a burst is read late by the rest of the
/// burst, for every kind of timer.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn ptimer_sees_a_known_spinner() {
    let fx = Fixture::root();
    let cpu = last_cpu();
    let c = cpu.to_string();
    let spinner = truth::Disturber::start(&fx.dir, &c, "20333us", "400us", "20s");
    let v = fx.run_json("p.json", &["ptimer", "--cpus", &c, "--duration", "5s", "--exceed", "30us"]);
    let bursts = spinner.finish();
    let doc = export(&fx.db, &[]);
    for r in v["results"].as_array().unwrap() {
        let kind = r["metric"].as_str().unwrap();
        let (exceedances, span) = series_exceedances(&doc, kind, cpu as u64);
        assert_eq!(lost_exceedances(&doc, kind, cpu as u64), 0, "every sample above 30 us kept");
        // (due, drift): the probe's timestamp is its read.
        let samples: Vec<(u64, u64)> = exceedances.iter().map(|&(t, d)| (t - d, d)).collect();
        let met = truth::judge_timer(kind, &samples, 1_000_000, 30_000, r["count"].as_u64().unwrap(), &bursts, span);
        assert!(met.len() >= 30, "{kind}: only {} samples met by one of {} bursts", met.len(), bursts.len());
    }
}

/// A SCHED_FIFO 99 spinner blocks the timer thread for 3 ms every
/// 100.333 ms: a burst holding k expirations makes every kind of timer
/// miss k - 1 of them (the bursts' log says how many; the host's stalls
/// can only add), read late by the rest of the burst after the last. With
/// every event kept (`--exceed 1ns`), the missed expirations are exactly
/// the instants of the timer's grid that no event read: counted neither
/// more nor less, whatever the host does.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn ptimer_counts_missed_expirations_under_a_spinner() {
    const PERIOD: u64 = 1_000_000;
    let fx = Fixture::root();
    let cpu = last_cpu();
    let c = cpu.to_string();
    let spinner = truth::Disturber::start(&fx.dir, &c, "100333us", "3ms", "20s");
    let v = fx.run_json("p.json", &["ptimer", "--cpus", &c, "--duration", "3s", "--exceed", "1ns"]);
    let bursts = spinner.finish();
    let doc = export(&fx.db, &[]);
    for r in v["results"].as_array().unwrap() {
        let kind = r["metric"].as_str().unwrap();
        let (n, missed) = (r["count"].as_u64().unwrap(), r["missed"].as_u64().unwrap());
        let (exceedances, span) = series_exceedances(&doc, kind, cpu as u64);
        assert_eq!(lost_exceedances(&doc, kind, cpu as u64), 0, "{kind}: every event kept");
        assert_eq!(exceedances.len() as u64, n, "{kind}: every event above 1 ns, each an exceedance");
        // (programmed instant, drift) of every event: the instant is the
        // latest expiration the read took.
        let events: Vec<(u64, u64)> = exceedances.iter().map(|&(t, d)| (t - d, d)).collect();
        let samples: Vec<(u64, u64)> = events.iter().copied().filter(|&(_, d)| d > 30_000).collect();
        truth::judge_timer(kind, &samples, PERIOD, 30_000, n, &bursts, span);
        let off: Vec<_> = events.windows(2).filter(|w| w[1].0 <= w[0].0 || (w[1].0 - w[0].0) % PERIOD != 0).collect();
        assert!(off.is_empty(), "{kind}: events off the timer's grid or out of order: {off:?}");
        let absent: Vec<u64> =
            events.windows(2).flat_map(|w| (1..(w[1].0 - w[0].0) / PERIOD).map(move |k| w[0].0 + k * PERIOD)).collect();
        let host = absent.iter().filter(|&&p| !bursts.iter().any(|b| b.near(p, p, 50_000))).count();
        let phase = events[0].0 % PERIOD;
        let want = truth::missed_at_least(&bursts, phase, PERIOD, span);
        eprintln!(
            "{kind}: {n} events, {missed} missed, {} instants of the grid unread ({host} with no burst near: the \
             host's), the bursts alone make {want}",
            absent.len()
        );
        // About 30 blocks of 3 ms: 2 or 3 missed each.
        assert!(want >= 40, "{kind}: {} bursts made only {want} missed expirations", bursts.len());
        assert!(missed >= want, "{kind}: {missed} missed, {want} by the bursts: {r}");
        // The grid's unread instants between the first event and the last,
        // and those before the first event: the grid starts a period after
        // the run (its first interval's start), and a first read that took
        // k expirations missed k - 1.
        let (first, start) = (events[0].0, span.0);
        assert!(first > start && (first - start) % PERIOD == 0, "{kind}: first event at {first}, run from {start}");
        let before = (first - start) / PERIOD - 1;
        assert_eq!(
            missed,
            absent.len() as u64 + before,
            "{kind}: {missed} missed, {} instants of the grid unread, {before} before the first event: {r}",
            absent.len()
        );
        assert!((2_985..=3_010).contains(&(n + missed)), "events + missed = periods: {r}");
        assert_eq!(r["overruns"], missed, "{r}");
    }
}

/// Ctrl-C ends a ptimer run `interrupted`, its data stored, and the timer
/// signals do not end the process.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn sigint_ends_a_ptimer_run_cleanly() {
    let fx = Fixture::root();
    let spawned = std::time::Instant::now();
    let mut child = Command::new(BIN)
        .args(["ptimer", "--duration", "60s", "--checkpoint", "1s", "--quiet", "--db", &fx.db])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // At least 1 s measured once the first checkpoint is stored; 1 s more.
    wait_for_first_checkpoint(&fx.db);
    std::thread::sleep(Duration::from_millis(1_000));
    signal(child.id(), libc::SIGINT);
    let most = spawned.elapsed().as_millis() as u64;
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let v = show_json(&fx.db, "last");
    assert_eq!(v["status"], "interrupted", "{v}");
    for r in v["results"].as_array().unwrap() {
        // 1 ms periods: at least the 2 s measured, at most the time since
        // the process started.
        let periods = r["count"].as_u64().unwrap() + r["missed"].as_u64().unwrap();
        assert!((1_990..=most + 5).contains(&periods), "{periods} periods, {most} ms since the start: {r}");
        assert_eq!(r["overruns"], r["missed"], "{r}");
    }
}

/// In an assessment's cell the warm-up is not counted: noise's active
/// time (and so interruptions per second and % available) and ptimer's
/// missed expirations cover the recorded part only, as the samples do. A
/// SCHED_FIFO 99 spinner takes 2 ms of every 20 ms of the measured CPU
/// through both cells: 50 interruptions of 1 ms or more per active second,
/// 90 % available, and a missed expiration or two per block.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_cells_warm_up_is_not_counted_by_noise_or_ptimer() {
    let fx = Fixture::root();
    let cpu = last_cpu().to_string();
    let plan = fx.dir.join("warm.toml");
    std::fs::write(
        &plan,
        format!(
            "probes = [\"noise\", \"ptimer\"]\nloads = [\"idle\"]\nduration = \"2s\"\nwarmup = \"2s\"\n\
             ramp_up = \"0s\"\nscore = \"100ms\"\ncpus = \"{cpu}\"\n"
        ),
    )
    .unwrap();
    let spinner = truth::Disturber::start(&fx.dir, &cpu, "20333us", "2ms", "30s");
    let v = fx.run_json("warm.json", &["run", plan.to_str().unwrap()]);
    let bursts = spinner.finish();
    let doc = export(&fx.db, &[]);
    let c = cpu.parse().unwrap();
    let results = v["results"].as_array().unwrap();
    let noise = results.iter().find(|r| r["probe"] == "noise").unwrap();
    let active_s = noise["active_ns"].as_u64().unwrap() as f64 / 1e9;
    // 33 ms active of every 66 ms of the 2 s recorded (with the 2 s
    // warm-up counted, about 2 s).
    assert!((0.8..=1.2).contains(&active_s), "active {active_s} s: {noise}");
    // Each burst that starts while noise spins (about half: the duty cycle
    // is 33 ms in 66, at a phase the 20.333 ms bursts drift through) is
    // one interruption of 2 ms or more; at most one per burst, and the
    // host's rare stalls of a millisecond (one in 5 s seen here).
    let (_, span) = series_exceedances(&doc, "interruption", c);
    let recorded = bursts.iter().filter(|b| b.start >= span.0 && b.end <= span.1).count() as u64;
    let (long, _) = at_or_above(noise, 1_000_000);
    let (lo, hi) = (
        truth::binomial_lower(recorded, 0.4, truth::FALSE_FAILURE),
        truth::binomial_upper(recorded, 0.6, truth::FALSE_FAILURE) + 3,
    );
    eprintln!("noise: {long} interruptions >= 1 ms in {active_s:.3} s active, {recorded} bursts recorded");
    assert!(
        (lo..=hi).contains(&long),
        "{long} interruptions >= 1 ms from {recorded} bursts, want {lo}..={hi}: {noise}"
    );
    let per_s = noise["per_s"].as_f64().unwrap();
    assert!((per_s - noise["count"].as_u64().unwrap() as f64 / active_s).abs() < 0.01 * per_s + 0.01, "{noise}");
    // The bursts take 9.8 % of the active time; the host's own noise takes
    // more beside a busy neighbour (16 % in all was seen beside a `yes`),
    // so the floor is loose. Counting the warm-up doubled the active time
    // (94 % and more): the active time above catches that first.
    let available = noise["available_pct"].as_f64().unwrap();
    assert!((70.0..=94.0).contains(&available), "available {available} %, want about 90: {noise}");
    let noise_ns = noise["noise_ns"].as_u64().unwrap() as f64;
    let expected = 100.0 * (1.0 - noise_ns / noise["active_ns"].as_u64().unwrap() as f64);
    assert!((available - expected).abs() < 0.01, "{noise}");
    for r in results.iter().filter(|r| r["probe"] == "ptimer") {
        let kind = r["metric"].as_str().unwrap();
        let (n, missed) = (r["count"].as_u64().unwrap(), r["missed"].as_u64().unwrap());
        assert_eq!(r["overruns"], missed, "missed is the recorded samples' overruns: {r}");
        // The bursts of the recorded part alone make this many (1 or 2
        // each); the warm-up counted would double it. Beyond them, a burst
        // whose end comes just before an expiration makes it missed too
        // when the timer is read after it (the threads' return after the
        // spinner: 11 of 98 bursts seen on a busy VM; Binomial(98, 0.11)
        // stays under 25 at 1e-4), and host stalls add: half a missed
        // expiration per burst leaves room for both, and the warm-up
        // counted (twice as many) still fails. The former want + 20 was
        // passed by 11 on a busy VM, 3 sd from failing; want + want / 2 was
        // exceeded by a quiet fresh clone (160 missed of 103) and by busy
        // ones: three quarters more, still short of the warm-up's double.
        let (exceedances, span) = series_exceedances(&doc, kind, c);
        let phase = exceedances.iter().map(|&(t, d)| (t - d) % 1_000_000).next().expect("one exceedance at least");
        let want = truth::missed_at_least(&bursts, phase, 1_000_000, span);
        eprintln!("{kind}: {n} events, {missed} missed, the recorded bursts make {want}");
        assert!(
            missed >= want && missed <= want + want * 3 / 4,
            "{kind}: {missed} missed, {want} by the recorded bursts: {r}"
        );
        assert!((1_995..=2_020).contains(&(n + missed)), "events + missed = the 2000 recorded periods: {r}");
    }
}
