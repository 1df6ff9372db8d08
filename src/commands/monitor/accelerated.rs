//! A monitor at accelerated time: `rtscope monitor`'s own flags (resolved
//! as the command resolves them), its run in its store, the recorders and
//! the writer of its cell (with the live counters as the writer's tap) and
//! its retention pass every minute, driven by synthetic wake-up latencies
//! on a clock that this module advances instead of the probes' threads on
//! the real one: a month of monitoring in minutes, without sleeping. What
//! `examples/monitor_month.rs` and the retention's tests drive; the
//! monitor itself never runs it.

use super::{Live, lock, retention_at};
use crate::cli::{Cmd, MonitorPlan};
use crate::recorder::{self, Recorder, Tap, Writer};
use anyhow::{Context, Result, anyhow, bail};
use rtscope_model::hist::Tally;
use rtscope_model::inventory::Inventory;
use rtscope_model::run::{RunStatus, SeriesKey};
use rtscope_model::store::Store;
use std::path::Path;
use std::sync::Arc;

/// The monitor's CLOCK_MONOTONIC at its start, on the accelerated clock.
const START_MONO_NS: u64 = 1_000_000_000_000;
const SECOND: u64 = 1_000_000_000;
/// The retention's period, as the monitor's (`RETENTION_EVERY`), in
/// seconds of the accelerated clock.
const RETENTION_EVERY_S: u64 = super::RETENTION_EVERY.as_secs();

/// What to monitor, and for how long.
pub struct Accelerated {
    /// `rtscope monitor`'s flags (without `rtscope monitor`), e.g.
    /// `--cpus 0,1 --db month.db --max-store 1GiB`. Only the wakeup probe
    /// (the default) is synthesised.
    pub args: Vec<String>,
    /// How long the monitor runs, on the accelerated clock (whole seconds).
    pub duration_ns: u64,
    /// The Unix time of its start (ns).
    pub start_unix_ns: i64,
    /// The latencies' seed: the same seed, the same samples.
    pub seed: u64,
}

/// The store after one retention pass.
#[derive(Clone, Copy, Debug)]
pub struct Pass {
    /// Time since the monitor's start, on its clock (ns).
    pub elapsed_ns: u64,
    /// The store's used bytes, as the retention measures them against
    /// `--max-store`.
    pub used_bytes: u64,
    /// The store's files on disk: the database and its write-ahead log.
    pub file_bytes: u64,
    /// Intervals merged into summaries so far.
    pub summarised_intervals: u64,
}

/// What the monitor did.
pub struct Outcome {
    pub run_id: i64,
    /// `--max-store`.
    pub max_store: u64,
    /// Retention passes, the last one after the run ended.
    pub passes: u64,
    /// The largest of the passes' used bytes and files' sizes.
    pub max_used_bytes: u64,
    pub max_file_bytes: u64,
    /// Every sample the writer committed, per CPU: the run before any
    /// summary.
    pub committed: Vec<(i64, Tally)>,
    /// Intervals merged into summaries and raw exceedances thinned.
    pub summarised_intervals: u64,
    pub thinned_exceedances: u64,
}

/// The monitor of `a.args` run for `a.duration_ns` on an accelerated
/// clock; `on_pass` sees the store after each retention pass.
pub fn run(a: &Accelerated, mut on_pass: impl FnMut(&Pass)) -> Result<Outcome> {
    let argv = ["rtscope", "monitor"].into_iter().map(String::from).chain(a.args.iter().cloned());
    let cli = crate::cli::parse_from(argv.map(Into::into)).map_err(|e| anyhow!("{e}"))?;
    let Cmd::Monitor(args) = cli.cmd else { bail!("not the monitor's flags: {}", a.args.join(" ")) };
    let plan = args.resolve()?;
    if plan.probes.len() != 1 || plan.probes[0].1.name() != "wakeup" || plan.watch.is_some() {
        bail!("only the wakeup probe's latencies are synthesised: give --probes wakeup and no --watch");
    }
    if !a.duration_ns.is_multiple_of(SECOND) || a.duration_ns == 0 {
        bail!("the accelerated monitor runs whole seconds");
    }
    let (common, probe) = &plan.probes[0];
    let period_ns = probe.plan()["interval_ns"].as_u64().context("the wakeup probe's plan names no interval")?;
    if period_ns == 0 || !SECOND.is_multiple_of(period_ns) {
        bail!("--probe-args 'wakeup=--interval ...': the accelerated monitor takes an interval that divides 1 s");
    }
    let live = Arc::new(Live { unix_offset_ns: a.start_unix_ns - START_MONO_NS as i64, ..Live::new(&plan) });
    let mut store = Store::open(&plan.db)?;
    // The retention's own connection, as the monitor's.
    let mut retained = Store::open(&plan.db)?;
    let mut header = crate::session::new_header(
        "monitor",
        ["rtscope", "monitor"].iter().map(|s| s.to_string()).chain(a.args.iter().cloned()).collect(),
        true,
        Vec::new(),
    );
    (header.started_unix_ns, header.start_mono_ns) = (a.start_unix_ns, START_MONO_NS);
    let inventory = Inventory { hostname: "accelerated".into(), ..Default::default() };
    let cell_plan = crate::probe::cell_plan(probe.as_ref(), common, (common.policy, common.priority));
    let run_id = store.create_run(&header, &inventory, &cell_plan)?;
    let mut recorders: Vec<(Recorder, Latencies)> = Vec::new();
    let mut sinks = Vec::new();
    let mut cpus = Vec::new();
    for &cpu in &common.cpus {
        let key = SeriesKey::new("wakeup", "latency", cpu as i64);
        let sid = store.add_series(run_id, &key, "ns", &common.exceed.describe())?;
        let (mut rec, sink, _) = recorder::channel(sid, common.checkpoint_ns, common.exceed);
        rec.start(START_MONO_NS);
        live.series(sid, &key);
        recorders.push((rec, Latencies::new(a.seed.wrapping_mul(1_000_003).wrapping_add(cpu as u64))));
        sinks.push(sink);
        cpus.push(cpu as i64);
    }
    let mut writer = Writer::plain(store, sinks);
    writer.tap = Some(live.clone());
    let mut out = Outcome {
        run_id,
        max_store: plan.max_store,
        passes: 0,
        max_used_bytes: 0,
        max_file_bytes: 0,
        committed: Vec::new(),
        summarised_intervals: 0,
        thinned_exceedances: 0,
    };
    let per_second = SECOND / period_ns;
    let seconds = a.duration_ns / SECOND;
    for s in 0..seconds {
        if s % RETENTION_EVERY_S == 0 {
            pass(&mut retained, &plan, &live, (a, s * SECOND), (&mut out, &mut on_pass))?;
        }
        let second = START_MONO_NS + s * SECOND;
        for k in 0..per_second {
            let due = second + k * period_ns;
            for (rec, latencies) in &mut recorders {
                let v = latencies.next();
                rec.record(due + v, v);
                if v >= period_ns {
                    rec.overrun(v / period_ns);
                }
                rec.maybe_checkpoint(due + v);
            }
        }
        // The monitor's writer drains every 50 ms; once a second here
        // keeps every ring below its size at 1 kHz.
        writer.poll()?;
    }
    let end = START_MONO_NS + a.duration_ns;
    for (rec, _) in recorders {
        rec.finish(end);
    }
    while !writer.poll()? {}
    out.committed = cpus.into_iter().zip(writer.sinks.iter().map(|s| s.total().clone())).collect();
    let ended_unix_ns = a.start_unix_ns + a.duration_ns as i64;
    writer.store.finish_run(run_id, RunStatus::Complete, Some(0), ended_unix_ns, &[], &[], None)?;
    writer.store.store_sums(run_id)?;
    pass(&mut retained, &plan, &live, (a, a.duration_ns), (&mut out, &mut on_pass))?;
    let h = lock(&live.health);
    (out.summarised_intervals, out.thinned_exceedances) = (h.summarised_intervals, h.thinned_exceedances);
    Ok(out)
}

/// One retention pass at `elapsed_ns` after the start, as the monitor's.
fn pass(
    store: &mut Store,
    plan: &MonitorPlan,
    live: &Live,
    (a, elapsed_ns): (&Accelerated, u64),
    (out, on_pass): (&mut Outcome, &mut impl FnMut(&Pass)),
) -> Result<()> {
    let now = (a.start_unix_ns + elapsed_ns as i64).max(0) as u64;
    let used_bytes = retention_at(store, plan, &live.health, now)?;
    lock(&live.health).store_bytes = used_bytes;
    let p = Pass {
        elapsed_ns,
        used_bytes,
        file_bytes: file_bytes(&plan.db),
        summarised_intervals: lock(&live.health).summarised_intervals,
    };
    out.passes += 1;
    out.max_used_bytes = out.max_used_bytes.max(p.used_bytes);
    out.max_file_bytes = out.max_file_bytes.max(p.file_bytes);
    on_pass(&p);
    Ok(())
}

/// The bytes of the store's database and write-ahead log on disk.
fn file_bytes(db: &Path) -> u64 {
    let len = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    len(db) + len(Path::new(&format!("{}-wal", db.display())))
}

/// One CPU's synthetic wake-up latencies (ns), as the model's `synth_run`
/// example draws them: a lognormal body (median 15 us, sigma 0.35), a
/// Generalized Pareto tail above 40 us for 0.2 % of the samples (xi 0.25,
/// sigma 15 us), and host preemptions of 0.5 to 8 ms for one sample in
/// 100 000, each followed by one to three late wake-ups. The body comes
/// from a table of 65 536 draws, so that a month's five billion samples
/// take a minute. Deterministic for a seed (SplitMix64).
struct Latencies {
    state: u64,
    body: Vec<u64>,
    aftermath: Vec<u64>,
}

impl Latencies {
    fn new(seed: u64) -> Latencies {
        let mut l = Latencies { state: seed, body: Vec::new(), aftermath: Vec::new() };
        l.body = (0..1 << 16)
            .map(|_| {
                let (u1, u2) = (l.unit(), l.unit());
                let z = (-2.0 * (1.0 - u1).ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                (15_000.0 * (0.35 * z).exp()) as u64
            })
            .collect();
        l
    }

    fn bits(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.bits() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn next(&mut self) -> u64 {
        if let Some(v) = self.aftermath.pop() {
            return v;
        }
        let x = self.bits();
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        if u < 1e-5 {
            let spike = 500_000 + self.bits() % 7_500_000;
            for k in 1..=1 + self.bits() % 3 {
                self.aftermath.push(spike / (k + 1));
            }
            return spike;
        }
        if u < 2e-3 {
            let (sigma, xi) = (15_000.0, 0.25);
            let excess = sigma / xi * ((1.0 - self.unit()).powf(-xi) - 1.0);
            return (40_000.0 + excess) as u64;
        }
        self.body[(x & 0xffff) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_are_a_body_a_tail_and_rare_preemptions() {
        let mut l = Latencies::new(7);
        let mut t = Tally::new();
        for _ in 0..2_000_000 {
            t.record(l.next());
        }
        let median = t.quantile(0.5);
        assert!((14_000..16_000).contains(&median), "median {median}");
        assert!(t.quantile(0.999) > 40_000, "p99.9 {}", t.quantile(0.999));
        assert!(t.max() >= 500_000, "no preemption in 2 million: max {}", t.max());
        let mut again = Latencies::new(7);
        let mut same = Tally::new();
        for _ in 0..2_000_000 {
            same.record(again.next());
        }
        assert_eq!(t.hist, same.hist, "deterministic for a seed");
    }

    #[test]
    fn other_probes_and_odd_lengths_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("m.db").display().to_string();
        let a = |args: &[&str], duration_ns| Accelerated {
            args: args.iter().map(|s| s.to_string()).chain(["--db".into(), db.clone()]).collect(),
            duration_ns,
            start_unix_ns: 0,
            seed: 1,
        };
        let e = |x: Accelerated| run(&x, |_| ()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e(a(&["--probes", "noise", "--cpus", "0"], SECOND)).contains("only the wakeup"));
        assert!(e(a(&["--cpus", "0"], SECOND / 2)).contains("whole seconds"));
        assert!(e(a(&["--cpus", "0", "--probe-args", "wakeup=--interval 3ms"], SECOND)).contains("divides 1 s"));
    }
}
