//! The `task` probe as root (CI runs as root): a periodic task under a
//! known disturbance, its misses judged against the disturber's burst log,
//! `--buffers`, and the miss rate `analyze` predicts from the run's own
//! release delays.

mod common;
use common::*;

const T: u64 = 1_000_000;
const C: u64 = 200_000;

/// Each job of a task series' export: (release instant, lateness signed),
/// from the lateness series (every sample above 0 ns is an exceedance
/// with `--exceed 0`) and its count; the span of the series.
fn late_jobs(doc: &serde_json::Value, cpu: u64) -> (Vec<(u64, u64)>, (u64, u64)) {
    let (exc, span) = series_exceedances(doc, "lateness", cpu);
    // Timed at completion: release = completion - lateness - deadline.
    (exc.iter().map(|&(t, late)| (t - late - T, t)).collect(), span)
}

/// The runs of `late` jobs (release, done), in order, each job released
/// before the one before it was done: one stall of the host makes several
/// misses in a row (10 seen), as long as it lasts.
fn stalls(late: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut stalls: Vec<(u64, u64)> = Vec::new();
    for &(r, done) in late {
        match stalls.last_mut() {
            Some(s) if r <= s.1 => s.1 = s.1.max(done),
            _ => stalls.push((r, done)),
        }
    }
    stalls
}

fn row<'a>(doc: &'a serde_json::Value, metric: &str, cpu: u64) -> &'a serde_json::Value {
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == metric && r["cpu"].as_u64() == Some(cpu))
        .unwrap_or_else(|| panic!("no result {metric} cpu{cpu}"))
}

/// The ground truth of the issue: `task --period 1ms --compute 200us`, a
/// SCHED_FIFO 99 spinner of 1.5 ms every 20.333 ms on one CPU (the other,
/// where there is one, quiet).
///
/// The physics: while the spinner holds the CPU, the task does not run.
/// A job that is released (or still computing) when a burst begins
/// completes after the burst's end: later than its 1 ms deadline (the burst
/// alone is longer); a job released inside the burst starts after it, and
/// misses when the rest of the burst and its compute time (at least the
/// fastest response of the run) exceed the deadline. Every burst that holds
/// such a job must show a missed job overlapping it: a strict bound, which
/// the host's stalls can only add to. Misses with no burst near are the
/// host's (or rtscope's own); the quiet CPU's fall on the bursts no more
/// often than chance puts them there, at the suite's false-failure rate.
///
/// Then `analyze`: its predicted interval of the disturbed CPU's miss rate,
/// from that CPU's release delays, holds the observed rate. In the ideal
/// model of these bursts (phase phi of a burst in the period, uniform) 0.9
/// miss per burst is observed (none for phi in [0.2, 0.3) ms), P(release >
/// 0.8 ms) gives 0.7 and P(release > 0.6 ms) 1.0 per burst: margins of
/// 0.1 and 0.2 per burst, 25 and 49 misses over 5 s, beside the 95 %
/// bounds' own widths of about 30; the host's misses are a handful.
///
/// `--buffers 3` then lets a job finish two periods late: a burst of 1.5
/// ms cannot make one that late (1.5 ms + two jobs' compute < 3 ms), so the
/// misses left are the host's alone.
#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn task_misses_a_deadline_per_burst_and_buffers_absorb_them() {
    let fx = Fixture::root();
    let cpu = last_cpu() as u64;
    let c = cpu.to_string();
    let cpus = if cpu > 0 { format!("0,{cpu}") } else { c.clone() };
    let spinner = truth::Disturber::start(&fx.dir, &c, "20333us", "1500us", "30s");
    let o = rtscope(&[
        "task",
        "--cpus",
        &cpus,
        "--period",
        "1ms",
        "--compute",
        "200us",
        "--duration",
        "5s",
        "--exceed",
        "0",
        "--quiet",
        "--db",
        &fx.db,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let doc = export(&fx.db, &[]);
    let o3 = rtscope(&[
        "task",
        "--cpus",
        &c,
        "--period",
        "1ms",
        "--compute",
        "200us",
        "--buffers",
        "3",
        "--duration",
        "3s",
        "--exceed",
        "2ms",
        "--quiet",
        "--db",
        &fx.db,
    ]);
    let bursts = spinner.finish();
    assert_eq!(o3.status.code(), Some(0), "{}", text(&o3));
    let doc3 = export(&fx.db, &[]);

    // Every counted miss is a job later than its deadline, and every such job is counted.
    let (late, span) = late_jobs(&doc, cpu);
    let jobs = row(&doc, "release", cpu)["count"].as_u64().unwrap();
    let missed = row(&doc, "lateness", cpu)["missed"].as_u64().unwrap();
    assert_eq!(late.len() as u64, missed, "misses counted vs jobs later than their deadline");
    assert_eq!(lost_exceedances(&doc, "lateness", cpu), 0);
    assert!(jobs >= 4_900, "{jobs} jobs in 5 s at 1 ms");
    // The work is calibrated: no job responds much faster than its compute
    // time. Not a speed test: a vCPU runs the same work at another speed
    // when its host's sibling thread or clock changes (a fresh-clone run on
    // a busy host had its fastest 200 us job at 137 us), so this catches a
    // calibration that is wrong by a factor (a unit miscounted), not drift.
    let fastest = row(&doc, "response", cpu)["min_ns"].as_i64().unwrap() as u64;
    assert!(fastest >= C / 2, "fastest response {fastest} ns for {C} ns of work");

    // The bursts that must make a job miss, and the missed job each shows.
    let phase = late.first().map(|&(r, _)| r % T).expect("no missed job");
    assert!(late.iter().all(|&(r, _)| (r % T).abs_diff(phase) < 1_000 || (r % T).abs_diff(phase) > T - 1_000));
    let inside: Vec<&truth::Burst> =
        bursts.iter().filter(|b| b.start >= span.0 + T && b.end + 2 * T <= span.1).collect();
    let mut must = 0;
    let mut unseen = Vec::new();
    for b in &inside {
        // A release in (b - fastest, b + burst + fastest - deadline).
        let from = b.start.saturating_sub(fastest) + 1;
        let to = (b.end + fastest).saturating_sub(T);
        if truth::grid_point_in(phase, T, from, to).is_none() {
            continue;
        }
        must += 1;
        if !late.iter().any(|&(r, done)| r < b.end && done > b.start) {
            unseen.push(**b);
        }
    }
    eprintln!("task: {} bursts, {must} of them must make a job miss; {missed} misses in {jobs} jobs", inside.len());
    // A burst the spinner's own clocks say it spun through, yet the job
    // beside it on that CPU met its deadline: as often as the host's own
    // stalls make a job miss (truth::allow_unheld), no more.
    let off = late.iter().filter(|&&(r, done)| !bursts.iter().any(|b| b.near(r, done, 100_000))).count() as u64;
    let q = truth::rate_upper(off, jobs, 0.002);
    truth::allow_unheld("bursts that held a job past its deadline but no miss shows", &unseen, must as u64, q);
    // Nine bursts in ten hold such a job: at least 150 of the ~240 (1e-4).
    assert!(must as u64 >= truth::binomial_lower(inside.len() as u64, 0.9, truth::FALSE_FAILURE).min(150));

    // Misses no burst explains (`off`, above) are the host's stalls of 0.8
    // ms or more, and so are the quiet CPU's: their rate there may be the
    // larger (the housekeeping runs there, and beside a CPU hog the host
    // stalls a vCPU that never idles more often: 45 in 5000 seen, against 5
    // off the bursts on the other; 83 against 22 on a busy host). The
    // spinner's bursts leaking onto the quiet CPU would put its misses on
    // the bursts: no more of its stalls may overlap a burst than chance
    // puts there (a stall's span plus a burst's, over the bursts' period),
    // at the suite's false-failure rate; a leak would put some 200 there.
    // A stall is a run of late jobs, each released before the one before
    // it was done: one stall of the host makes several (10 in a row seen),
    // and they fall on a burst or not together.
    if cpu > 0 {
        let (quiet, _) = late_jobs(&doc, 0);
        assert_eq!(quiet.len() as u64, row(&doc, "lateness", 0)["missed"].as_u64().unwrap());
        let stalls = stalls(&quiet);
        let n = bursts.len() as u64;
        let held = bursts.iter().map(|b| b.len() + b.lead).sum::<u64>() / n;
        let period = (bursts[bursts.len() - 1].start - bursts[0].start) / (n - 1);
        let chance = if stalls.is_empty() {
            0.0
        } else {
            stalls.iter().map(|&(r, done)| ((held + done - r) as f64 / period as f64).min(1.0)).sum::<f64>()
                / stalls.len() as f64
        };
        let on = stalls.iter().filter(|&&(r, done)| bursts.iter().any(|b| b.near(r, done, 0))).count() as u64;
        let allowed = truth::binomial_upper(stalls.len() as u64, chance, truth::FALSE_FAILURE);
        eprintln!(
            "task: {off} misses off the bursts; {} on the quiet CPU in {} stalls, {on} of them on a burst (chance \
             {chance:.3} allows {allowed})",
            quiet.len(),
            stalls.len()
        );
        assert!(on <= allowed, "{on} of the quiet CPU's {} stalls on the bursts: {stalls:?}", stalls.len());
    }

    // The prediction from the same run's release delays holds the observed rate.
    let first = doc["run_id"].as_i64().unwrap().to_string();
    let a = rtscope(&["analyze", &first, "--json", "--db", &fx.db]);
    assert!(a.status.success(), "{}", text(&a));
    let v: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    let m = v["misses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["series"].as_str().unwrap().ends_with(&format!("CPU {cpu}")))
        .expect("a miss prediction for the disturbed CPU");
    eprintln!("task: predicted {} .. {}, observed {}", m["low"], m["high"], m["observed"]);
    assert_eq!(m["missed"].as_u64(), Some(missed));
    // The interval takes the nominal compute time; a vCPU computes at
    // another speed when its host is busy (a 200 us job took 137 us in one
    // fresh-clone run), which moves the slack and the misses with it: a
    // fresh-clone run observed 0.0756 against 0.0449 .. 0.0685. The rate
    // must lie within a quarter of the interval's ends.
    let (low, high, observed) =
        (m["low"].as_f64().unwrap(), m["high"].as_f64().unwrap(), m["observed"].as_f64().unwrap());
    assert!(m["inside"] == true || (low * 0.75..=high * 1.25).contains(&observed), "{m:#}");

    // Three buffers: only the host's stalls of 2.8 ms or more are left,
    // each a run of misses as long as it lasts (48 misses in one fresh-clone
    // run, where the first run's rate allowed 27), counted once: the bound
    // from the first run's misses off the bursts holds for the stalls (each
    // makes one miss at least). A probe that ignored --buffers would miss
    // at the first run's rate, 3 s of its 5 s: some 0.6 x its stalls, a
    // separate one at each burst.
    let missed3 = row(&doc3, "lateness", cpu)["missed"].as_u64().unwrap();
    // A miss there is a job more than two periods late (two buffers
    // absorb that much): the lateness is still reckoned from the period;
    // the run keeps every lateness above 2 ms (--exceed), so every miss.
    let (exc3, _) = series_exceedances(&doc3, "lateness", cpu);
    let late3: Vec<(u64, u64)> =
        exc3.iter().filter(|&&(_, late)| late > 2 * T).map(|&(t, late)| (t - late - T, t)).collect();
    assert_eq!(late3.len() as u64, missed3, "the --buffers 3 run's misses among its exceedances: {exc3:?}");
    let (stalls3, stalls1) = (stalls(&late3).len() as u64, stalls(&late).len() as u64);
    let allowed3 =
        truth::binomial_upper(row(&doc3, "release", cpu)["count"].as_u64().unwrap(), q, truth::FALSE_FAILURE);
    eprintln!("task --buffers 3: {missed3} misses in {stalls3} stalls (host stalls allow {allowed3})");
    assert!(
        stalls3 <= allowed3 && stalls3 * 2 < stalls1,
        "--buffers 3 left {missed3} misses in {stalls3} stalls, of {missed} misses in {stalls1} stalls"
    );
}

/// Bad settings are refused with the flag and the fix, before anything runs.
#[test]
fn task_refuses_settings_that_cannot_work() {
    for (args, want) in [
        (&["--compute", "1ms"][..], "--compute 1ms must be above 0 and shorter than --period"),
        (&["--compute", "600us"][..], "more than half of --period"),
        (&["--deadline", "100us"][..], "--deadline 100us is shorter than --compute"),
        (&["--buffers", "0"][..], "--buffers"),
    ] {
        let mut all = vec!["task", "--duration", "1s", "--db", "/nonexistent/x.db"];
        all.extend_from_slice(args);
        let o = rtscope(&all);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
    }
}
