//! Several instances of a per-CPU probe in one run, as root (CI runs as
//! root): measured together by default (each its own threads on the same
//! CPUs, started at one instant, for the same duration), one after the
//! other on request; equal priorities named apart, SCHED_RR's quantum
//! visible between them. The lower instance waiting for a SCHED_FIFO
//! spinner between the two priorities is in assess.rs.

mod common;
use common::*;
use std::time::Instant;

/// Each series of `probe` in an export: (first interval's start, last
/// interval's end).
fn span(doc: &serde_json::Value, probe: &str) -> (u64, u64) {
    let s = doc["series"].as_array().unwrap().iter().find(|s| s["probe"] == probe).expect(probe);
    let ivs = s["intervals"].as_array().unwrap();
    (ivs[0]["start_ns"].as_u64().unwrap(), ivs.last().unwrap()["end_ns"].as_u64().unwrap())
}

/// The result row of `probe`'s first metric.
fn count(doc: &serde_json::Value, probe: &str) -> u64 {
    let rows = doc["results"].as_array().unwrap();
    let r = rows.iter().find(|r| r["probe"] == probe).unwrap_or_else(|| panic!("no {probe} in {rows:?}"));
    r["count"].as_u64().unwrap()
}

/// `run --probes wakeup@95,wakeup@80 --loads idle -D 6s`: one cell of
/// about 6 s, not two (12 s): both instances measure over the same 6 s
/// (their series' spans overlap), about 6,000 samples each; the run's
/// plan, its terminal output and `show` say "instances measured together".
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn two_priorities_in_a_run_are_measured_together() {
    let fx = Fixture::root();
    let c = last_cpu().to_string();
    let args = ["run", "--probes", "wakeup@95,wakeup@80", "--loads", "idle", "-D", "6s", "--cpus", &c];
    let started = Instant::now();
    let o = rtscope(&[&args[..], &["--warmup", "500ms", "--ramp-up", "300ms", "--db", &fx.db]].concat());
    let wall = started.elapsed().as_secs_f64();
    assert!(matches!(o.status.code(), Some(0) | Some(2)), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("1 cell of 6s") && err.contains("instances measured together"), "{err}");
    assert!(err.contains("[1/1] wakeup@95 + wakeup@80 under idle"), "{err}");
    let doc = export(&fx.db, &[]);
    assert_eq!(doc["run"]["plan"]["instances"], "together");
    let (a, b) = (span(&doc, "wakeup@95"), span(&doc, "wakeup@80"));
    let measuring = (a.1.max(b.1) - a.0.min(b.0)) as f64 / 1e9;
    let overlap = (a.1.min(b.1).saturating_sub(a.0.max(b.0))) as f64 / 1e9;
    eprintln!("measuring {measuring:.3} s, both at once {overlap:.3} s; the whole run {wall:.1} s");
    assert!(measuring < 10.0, "{measuring} s of measuring for 6 s of two instances: one after the other?");
    assert!(overlap > 5.5, "the instances measured together only {overlap} s of 6");
    for p in ["wakeup@95", "wakeup@80"] {
        let n = count(&doc, p);
        assert!((5_400..=6_100).contains(&n), "{p}: {n} samples in 6 s at 1 ms");
    }
    let shown = rtscope(&["show", "last", "--db", &fx.db]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("SCHED_FIFO 95, 80; instances measured together"), "{shown}");
}

/// `--instances 80,80 --policy rr`: two instances at one priority, two
/// series (`wakeup@80`, `wakeup@80#2`) measured together at SCHED_RR; with
/// `--instances-in-turn` one after the other (their spans apart), and the
/// run says so; `run` does the same with `--instances-in-turn`. A
/// `--threshold` crossed by either stops both and names it.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn equal_priorities_give_two_series_together_or_in_turn() {
    let fx = Fixture::root();
    let c = last_cpu().to_string();
    let o = rtscope(&["wakeup", "--instances", "80,80", "--policy", "rr", "-D", "2s", "--cpus", &c, "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = unwrapped(&text(&o));
    assert!(out.contains("instances measured together (wakeup@80, wakeup@80#2)"), "{out}");
    assert!(out.contains("SCHED_RR 80; instances measured together"), "{out}");
    let doc = export(&fx.db, &[]);
    assert_eq!(doc["run"]["plan"]["instances"], "together");
    for p in ["wakeup@80", "wakeup@80#2"] {
        let n = count(&doc, p);
        assert!((1_800..=2_050).contains(&n), "{p}: {n} samples in 2 s at 1 ms");
        let cells = doc["run"]["plan"]["cells"].as_array().unwrap();
        let cell = cells.iter().find(|x| x["probe"] == p).unwrap_or_else(|| panic!("{p}: {cells:?}"));
        assert_eq!((cell["effective_policy"].as_str(), cell["effective_priority"].as_u64()), (Some("rr"), Some(80)));
    }
    let (a, b) = (span(&doc, "wakeup@80"), span(&doc, "wakeup@80#2"));
    assert!(a.1.min(b.1) > a.0.max(b.0) + 1_500_000_000, "not measured together: {a:?} {b:?}");

    // One after the other.
    let o =
        rtscope(&["wakeup", "--instances", "80,80", "--instances-in-turn", "-D", "1s", "--cpus", &c, "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(unwrapped(&text(&o)).contains("instances measured one after the other"), "{}", text(&o));
    let doc = export(&fx.db, &[]);
    assert_eq!(doc["run"]["plan"]["instances"], "in-turn");
    let (a, b) = (span(&doc, "wakeup@80"), span(&doc, "wakeup@80#2"));
    assert!(b.0 >= a.1, "the second instance began before the first ended: {a:?} {b:?}");
    assert!((900..=1_050).contains(&count(&doc, "wakeup@80#2")), "{}", count(&doc, "wakeup@80#2"));

    // In a run.
    let args = ["run", "--probes", "wakeup@80,wakeup@80", "--instances-in-turn", "--loads", "idle", "-D", "1s"];
    let o = rtscope(&[&args[..], &["--cpus", &c, "--warmup", "0s", "--ramp-up", "0s", "--db", &fx.db]].concat());
    assert!(matches!(o.status.code(), Some(0) | Some(2)), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("2 cells of 1s") && err.contains("instances measured one after the other"), "{err}");
    let doc = export(&fx.db, &[]);
    assert_eq!(doc["run"]["plan"]["instances"], "in-turn");
    let (a, b) = (span(&doc, "wakeup@80"), span(&doc, "wakeup@80#2"));
    assert!(b.0 >= a.1, "in turn, yet together: {a:?} {b:?}");

    // --threshold stops every instance, naming the one that crossed it.
    let o = rtscope(&["wakeup", "--instances", "95,80", "-b", "1", "-D", "5s", "--cpus", &c, "--db", &fx.db]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let out = unwrapped(&text(&o));
    let named = ["wakeup@95", "wakeup@80"].iter().any(|p| out.contains(&format!("us: {p} CPU {c} measured")));
    assert!(out.contains("stopped at --threshold 1.000us") && named, "{out}");
}

/// Two busy `noise` instances at one SCHED_RR priority on one CPU share it
/// by the round-robin quantum (/proc/sys/kernel/sched_rr_timeslice_ms):
/// each sees the other's turns as interruptions of about one quantum.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn the_round_robin_quantum_shows_between_equal_priorities() {
    let fx = Fixture::root();
    let Some(slice_ms) = std::fs::read_to_string("/proc/sys/kernel/sched_rr_timeslice_ms")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|&ms| (10..=300).contains(&ms))
    else {
        return skipped("no sched_rr_timeslice_ms of 10..300 ms to see");
    };
    let c = last_cpu().to_string();
    let active = format!("{}ms", 3 * slice_ms);
    let args = ["noise", "--instances", "80,80", "--policy", "rr", "--active", &active, "-D", "3s", "--cpus", &c];
    let o = rtscope(&[&args[..], &["--db", &fx.db]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let doc = export(&fx.db, &[]);
    let slice = slice_ms * 1_000_000;
    for p in ["noise@80", "noise@80#2"] {
        let rows = doc["results"].as_array().unwrap();
        let r = rows.iter().find(|r| r["probe"] == p && r["metric"] == "interruption").expect(p);
        let turns = samples_between(r, slice / 2, slice * 2);
        eprintln!("{p}: {turns} interruptions of {}..{} ms, max {} ns", slice_ms / 2, slice_ms * 2, r["max_ns"]);
        assert!(turns >= 3, "{p}: {turns} interruptions of about the {slice_ms} ms quantum: {r}");
    }
}
