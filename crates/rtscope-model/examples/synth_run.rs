//! Writes a synthetic wake-up run into a run store through the store's own
//! API, as `rtscope wakeup` would store it: one `wakeup.latency` series
//! per CPU, a histogram per checkpoint interval, the exceedances above the
//! running p99.9 (the adaptive threshold), committed a checkpoint at a
//! time. `bench/analyze-speed.sh` times `analyze` and `report` on it.
//!
//! ```sh
//! cargo run --release -p rtscope-model --example synth_run -- --db day.db \
//!     [--hours 24] [--cpus 2] [--rate 1000] [--checkpoint-s 10] [--seed 1]
//! ```
//!
//! The latency of each wake-up: a lognormal body (median 15 us, p99 about
//! 34 us, as a KVM guest measures it), a Generalized Pareto tail above
//! 40 us for 0.2 % of the samples (xi 0.25, sigma 15 us), and host
//! preemptions of 0.5 to 8 ms for one sample in 100 000, each followed by
//! one to three late wake-ups. Deterministic for a seed.

use rtscope_model::hist::{self, Tally};
use rtscope_model::inventory::Inventory;
use rtscope_model::run::{Exceedance, Interval, RunHeader, RunStatus, SeriesKey};
use rtscope_model::store::Store;
use std::path::PathBuf;

struct Args {
    db: PathBuf,
    hours: f64,
    cpus: u32,
    rate: u64,
    checkpoint_s: u64,
    seed: u64,
}

fn args() -> Result<Args, String> {
    let mut a = Args { db: PathBuf::new(), hours: 24.0, cpus: 2, rate: 1000, checkpoint_s: 10, seed: 1 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let bad = || format!("{flag} {value}: not a number");
        match flag.as_str() {
            "--db" => a.db = value.into(),
            "--hours" => a.hours = value.parse().map_err(|_| bad())?,
            "--cpus" => a.cpus = value.parse().map_err(|_| bad())?,
            "--rate" => a.rate = value.parse().map_err(|_| bad())?,
            "--checkpoint-s" => a.checkpoint_s = value.parse().map_err(|_| bad())?,
            "--seed" => a.seed = value.parse().map_err(|_| bad())?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if a.db.as_os_str().is_empty() {
        return Err("--db PATH is required".into());
    }
    if a.rate == 0
        || a.checkpoint_s == 0
        || a.cpus == 0
        || a.hours.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
    {
        return Err("--rate, --checkpoint-s, --cpus and --hours must be above 0".into());
    }
    Ok(a)
}

/// One CPU's wake-up latencies, ns.
struct Latency {
    rng: fastrand::Rng,
    /// Late wake-ups still to come after a host preemption.
    aftermath: Vec<u64>,
}

impl Latency {
    fn next(&mut self) -> u64 {
        if let Some(v) = self.aftermath.pop() {
            return v;
        }
        let r = &mut self.rng;
        let u = r.f64();
        if u < 1e-5 {
            let spike = r.u64(500_000..8_000_000);
            for k in 1..=r.u64(1..4) {
                self.aftermath.push(spike / (k + 1));
            }
            return spike;
        }
        if u < 2e-3 {
            // GPD(sigma 15 us, xi 0.25) above 40 us.
            let (sigma, xi) = (15_000.0, 0.25);
            let excess = sigma / xi * ((1.0 - r.f64()).powf(-xi) - 1.0);
            return (40_000.0 + excess) as u64;
        }
        // Lognormal: median 15 us, sigma 0.35 (Box-Muller).
        let z = (-2.0 * (1.0 - r.f64()).ln()).sqrt() * (std::f64::consts::TAU * r.f64()).cos();
        (15_000.0 * (0.35 * z).exp()) as u64
    }
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("synth_run: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = write(&a) {
        eprintln!("synth_run: {e:#}");
        std::process::exit(1);
    }
}

fn write(a: &Args) -> anyhow::Result<()> {
    let mut store = Store::open(&a.db)?;
    let interval_ns = 1_000_000_000 / a.rate;
    let duration_ns = (a.hours * 3600e9) as u64;
    let checkpoint_ns = a.checkpoint_s * 1_000_000_000;
    let cpus: Vec<i64> = (0..i64::from(a.cpus)).collect();
    let started_unix_ns = 1_800_000_000_000_000_000i64;
    let start_mono_ns = 1_000_000_000_000u64;
    let command_line: Vec<String> = format!(
        "rtscope wakeup --cpus 0-{} --interval {}us --duration {}s --checkpoint {}s",
        a.cpus - 1,
        interval_ns / 1000,
        duration_ns / 1_000_000_000,
        a.checkpoint_s
    )
    .split(' ')
    .map(String::from)
    .collect();
    let uuid = format!("synth-{}-{}-{}", std::process::id(), a.seed, started_unix_ns);
    let header = RunHeader { command_line, ..RunHeader::new("wakeup", uuid, "synth", started_unix_ns, start_mono_ns) };
    let inventory =
        Inventory { tool_version: header.tool_version.clone(), hostname: "synth".into(), ..Default::default() };
    let plan = serde_json::json!({
        "common": {"checkpoint_ns": checkpoint_ns, "cpus": cpus, "db": a.db, "dma_latency": true,
                   "duration_ns": duration_ns, "json": null, "kind": "wakeup", "loops": null, "policy": "fifo",
                   "priority": 95, "quiet": true, "threshold_ns": null, "trace": null, "tracemark": false,
                   "warmup_ns": 0},
        "describe": format!("interval {}us", interval_ns / 1000),
        "effective_policy": "fifo", "effective_priority": 95, "exceed": "adaptive p99.9",
        "housekeeping_cpus": "none: every CPU is measured, rtscope's writer shares them at SCHED_OTHER",
        "metrics": ["latency"], "probe": "wakeup",
        "settings": {"cache_flush": false, "distance_ns": 0, "flush_bytes": null, "interval_ns": interval_ns,
                     "second_process": false, "spin_active_ns": 33_000_000, "spin_pause_ns": 33_000_000,
                     "spinners": null},
        "trace": null
    });
    let run = store.create_run(&header, &inventory, &plan)?;
    let mut cpu_state: Vec<(i64, Latency, Tally, u64)> = Vec::new();
    for &cpu in &cpus {
        let key = SeriesKey::new("wakeup", "latency", cpu);
        let id = store.add_series(run, &key, "ns", "adaptive p99.9")?;
        let rng = fastrand::Rng::with_seed(a.seed.wrapping_mul(1_000_003).wrapping_add(cpu as u64));
        // (series id, latencies, the series so far, the running p99.9)
        cpu_state.push((id, Latency { rng, aftermath: Vec::new() }, Tally::new(), 0));
    }
    let per_interval = checkpoint_ns / interval_ns;
    let checkpoints = duration_ns.div_ceil(checkpoint_ns);
    // Commit a batch of checkpoints at a time: the same rows, fewer syncs.
    const BATCH: u64 = 100;
    let mut pending: Vec<(i64, Interval)> = Vec::new();
    let mut pending_exc: Vec<(i64, Vec<Exceedance>)> = Vec::new();
    for seq in 0..checkpoints {
        let start = start_mono_ns + seq * checkpoint_ns;
        let end = (start + checkpoint_ns).min(start_mono_ns + duration_ns);
        let samples = if end - start == checkpoint_ns { per_interval } else { (end - start) / interval_ns };
        for (id, lat, total, threshold) in &mut cpu_state {
            let mut t = Tally::new();
            let mut exc = Vec::new();
            let mut overruns = 0;
            for i in 0..samples {
                let v = lat.next();
                t.record(v);
                if v >= interval_ns {
                    overruns += v / interval_ns;
                }
                // The adaptive threshold: the p99.9 of the first 1000
                // samples, then of the whole series at each checkpoint.
                if *threshold == 0 && total.stats.count == 0 && i + 1 == 1000.min(samples) {
                    *threshold = hist::quantile(&t.hist, &t.stats, 0.999);
                }
                if *threshold == 0 || v >= *threshold {
                    exc.push(Exceedance { t_ns: start + i * interval_ns + v, value_ns: v });
                }
            }
            if *threshold > 0 && total.stats.count == 0 {
                exc.retain(|e| e.value_ns >= *threshold);
            }
            total.merge(&t);
            *threshold = hist::quantile(&total.hist, &total.stats, 0.999);
            pending.push((*id, Interval::new(seq as u32, start, end, &t, overruns, 0)));
            pending_exc.push((*id, exc));
        }
        if (seq + 1) % BATCH == 0 || seq + 1 == checkpoints {
            let ivs: Vec<(i64, &Interval)> = pending.iter().map(|(id, iv)| (*id, iv)).collect();
            let exs: Vec<(i64, &[Exceedance])> = pending_exc.iter().map(|(id, e)| (*id, e.as_slice())).collect();
            store.commit_checkpoint(&ivs, &exs)?;
            pending.clear();
            pending_exc.clear();
        }
    }
    let ended = started_unix_ns + duration_ns as i64;
    store.finish_run(run, RunStatus::Complete, Some(0), ended, &[], &[], Some(6_000))?;
    store.store_sums(run)?;
    println!("{run}");
    Ok(())
}
