//! Writes what a fleet of `rtscope monitor`s would have served to
//! Prometheus, as OpenMetrics text with timestamps for `promtool tsdb
//! create-blocks-from openmetrics` (the fleet report's bench,
//! `bench/fleet-scale.sh`, and `tests/fleet.rs`). Each scrape of each
//! machine is the monitor's own page ([`Exposition::render`], OpenMetrics):
//! the same families, labels and buckets, with `instance` and `job` added
//! as Prometheus adds them; the counters are fed per checkpoint interval
//! as the monitor feeds them.
//!
//! ```sh
//! cargo run --release -p rtscope-model --example fleet_openmetrics -- --out DIR --truth truth.json \
//!     [--machines 1000] [--cpus 2] [--hours 24] [--end UNIX_S] [--scrape-s 60] [--checkpoint-s 10] \
//!     [--bad 10] [--seed 1] [--promtool DATA_DIR]
//! ```
//!
//! Every machine runs the wakeup probe at 1 kHz on each CPU, its monitor
//! started an hour before the range. A wake-up's latency: a body between 1
//! and 50 us (each machine its own mix), and per checkpoint interval a
//! Poisson number of spikes from a Pareto tail of the machine's own rate
//! and shape, below 900 us. `--bad` machines (drawn by the seed) also have
//! bursts of 2 to 40 ms about once an hour and 2 % of their wake-ups
//! between 50 and 100 us. Deterministic for a seed.
//!
//! The output is one file per two hours of Unix time (promtool's block
//! length: a file that spans one block is read twice, not once per block),
//! `fleet-<start>.om` in `--out`; with `--promtool DATA_DIR` each file is
//! backfilled into DATA_DIR while the next is written, then removed. The
//! truth (`--truth`): per machine whether it is bad, and per series the
//! samples, the largest value and the bound of the bucket holding the p99,
//! of the checkpoint intervals first scraped within the range.

use rtscope_model::metrics::{BUCKETS_NS, DEFAULT_THRESHOLDS_NS, Exposition, Format, Health, SeriesCounters};
use rtscope_model::run::SeriesKey;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command};

/// What to write (the flags above); `tests/fleet.rs` fills it itself.
pub struct Args {
    pub out: PathBuf,
    pub truth: PathBuf,
    pub machines: usize,
    pub cpus: usize,
    pub hours: f64,
    pub end_s: u64,
    pub scrape_s: u64,
    pub checkpoint_s: u64,
    pub bad: usize,
    pub seed: u64,
    pub promtool: Option<PathBuf>,
}

fn args() -> Result<Args, String> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut a = Args {
        out: PathBuf::new(),
        truth: PathBuf::new(),
        machines: 1000,
        cpus: 2,
        hours: 24.0,
        end_s: now / 60 * 60,
        scrape_s: 60,
        checkpoint_s: 10,
        bad: 10,
        seed: 1,
        promtool: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let bad = || format!("{flag} {value}: not a number");
        match flag.as_str() {
            "--out" => a.out = value.into(),
            "--truth" => a.truth = value.into(),
            "--promtool" => a.promtool = Some(value.into()),
            "--machines" => a.machines = value.parse().map_err(|_| bad())?,
            "--cpus" => a.cpus = value.parse().map_err(|_| bad())?,
            "--hours" => a.hours = value.parse().map_err(|_| bad())?,
            "--end" => a.end_s = value.parse().map_err(|_| bad())?,
            "--scrape-s" => a.scrape_s = value.parse().map_err(|_| bad())?,
            "--checkpoint-s" => a.checkpoint_s = value.parse().map_err(|_| bad())?,
            "--bad" => a.bad = value.parse().map_err(|_| bad())?,
            "--seed" => a.seed = value.parse().map_err(|_| bad())?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if a.out.as_os_str().is_empty() || a.truth.as_os_str().is_empty() {
        return Err("--out DIR and --truth FILE are required".into());
    }
    if a.machines == 0 || a.cpus == 0 || a.scrape_s == 0 || a.checkpoint_s == 0 || a.hours.is_nan() || a.hours <= 0.0 {
        return Err("--machines, --cpus, --hours, --scrape-s and --checkpoint-s must be above 0".into());
    }
    if a.bad > a.machines {
        return Err(format!("--bad {}: more than --machines {}", a.bad, a.machines));
    }
    Ok(a)
}

/// Wake-ups per second per CPU (the monitor's 1 kHz).
const RATE: u64 = 1000;
/// promtool's block length, s.
const BLOCK_S: u64 = 7200;
/// The body's buckets: up to 50 us (indices into [`BUCKETS_NS`]).
const BODY: usize = 6;

/// A machine's nature.
struct Nature {
    /// Share of the body in each bucket up to 50 us.
    body: [f64; BODY],
    /// Spikes per checkpoint interval, their Pareto shape and scale (ns).
    spikes: f64,
    alpha: f64,
    bad: bool,
}

impl Nature {
    fn draw(rng: &mut fastrand::Rng, bad: bool) -> Nature {
        // Most wake-ups in 2-20 us, the mode moving with the machine.
        let mode = rng.usize(2..=3);
        let mut body = [0.0; BODY];
        body[mode] = 0.85 + 0.1 * rng.f64();
        let rest = 1.0 - body[mode];
        body[mode - 1] = rest * 0.4;
        body[mode + 1] = rest * (0.3 + 0.2 * rng.f64());
        body[mode + 2] = 1.0 - body.iter().sum::<f64>();
        if bad {
            // 2 % of the wake-ups between 50 and 100 us (the p99's bucket).
            for b in &mut body {
                *b *= 0.98;
            }
        }
        Nature { body, spikes: 0.05 + 0.5 * rng.f64(), alpha: 1.2 + 1.3 * rng.f64(), bad }
    }
}

/// The bucket (index into [`BUCKETS_NS`], its length for +Inf) holding `ns`.
fn bucket_of(ns: u64) -> usize {
    BUCKETS_NS.iter().position(|&le| ns <= le).unwrap_or(BUCKETS_NS.len())
}

fn poisson(rng: &mut fastrand::Rng, lambda: f64) -> u64 {
    let (l, mut k, mut p) = ((-lambda).exp(), 0, 1.0);
    loop {
        p *= rng.f64();
        if p <= l {
            return k;
        }
        k += 1;
    }
}

/// One checkpoint interval of one CPU: counts per bucket (+Inf last), the
/// sum, the maximum and the periods missed.
struct Drawn {
    counts: [u64; BUCKETS_NS.len() + 1],
    sum_ns: u64,
    max_ns: u64,
    missed: u64,
}

fn interval(rng: &mut fastrand::Rng, n: &Nature, checkpoint_s: u64) -> Drawn {
    let mut d = Drawn { counts: [0; BUCKETS_NS.len() + 1], sum_ns: 0, max_ns: 0, missed: 0 };
    let mut values = Vec::new();
    let spikes = poisson(rng, n.spikes);
    for _ in 0..spikes {
        // Pareto above 20 us, below 900 us.
        let v = (20_000.0 * (1.0 - rng.f64()).powf(-1.0 / n.alpha)).min(900_000.0) as u64;
        values.push(v);
    }
    if n.bad && rng.f64() < checkpoint_s as f64 / 3600.0 {
        // A burst: 2 to 40 ms, log-uniform.
        let v = (2e6 * 20f64.powf(rng.f64())) as u64;
        d.missed = v / 1_000_000;
        values.push(v);
    }
    let total = checkpoint_s * RATE - d.missed;
    let body_n = total - values.len() as u64;
    let mut left = body_n;
    let lo = |b: usize| if b == 0 { 0 } else { BUCKETS_NS[b - 1] };
    for (b, (share, le)) in n.body.iter().zip(BUCKETS_NS).enumerate() {
        let c = ((body_n as f64 * share * (0.97 + 0.06 * rng.f64())) as u64).min(left);
        d.counts[b] += c;
        left -= c;
        d.sum_ns += c * (lo(b) + le) / 2;
    }
    if n.bad {
        let c = (body_n as f64 * 0.02) as u64;
        let c = c.min(left);
        d.counts[BODY] += c;
        left -= c;
        d.sum_ns += c * 75_000;
    }
    // What is left, in the mode's bucket.
    let mode = (0..BODY).max_by(|&a, &b| n.body[a].total_cmp(&n.body[b])).unwrap_or(0);
    d.counts[mode] += left;
    d.sum_ns += left * BUCKETS_NS[mode];
    let top = (0..d.counts.len()).rev().find(|&b| d.counts[b] > 0).unwrap_or(0);
    d.max_ns = rng.u64(lo(top) + 1..=BUCKETS_NS[top.min(BUCKETS_NS.len() - 1)]);
    for v in values {
        d.counts[bucket_of(v)] += 1;
        d.sum_ns += v;
        d.max_ns = d.max_ns.max(v);
    }
    d
}

/// Adds an interval to a series' counters, as `SeriesCounters::add` does.
fn add(c: &mut SeriesCounters, d: &Drawn, end_s: f64) {
    let mut below = 0;
    for (b, n) in d.counts.iter().enumerate().take(BUCKETS_NS.len()) {
        below += n;
        c.buckets[b] += below;
    }
    let count: u64 = d.counts.iter().sum();
    for (a, th) in c.above.iter_mut().zip(DEFAULT_THRESHOLDS_NS) {
        *a += d.counts[bucket_of(th) + 1..].iter().sum::<u64>();
    }
    c.count += count;
    c.sum_ns += i128::from(d.sum_ns);
    c.missed_periods += d.missed;
    c.checkpoints += 1;
    c.interval_max_ns = Some(d.max_ns);
    c.max_ns = c.max_ns.max(d.max_ns);
    c.last_checkpoint_s = end_s;
}

/// What the range holds of one series.
#[derive(Default)]
struct Truth {
    counts: [u64; BUCKETS_NS.len() + 1],
    max_ns: u64,
}

impl Truth {
    fn p99_le_ns(&self) -> Option<u64> {
        let n: u64 = self.counts.iter().sum();
        let mut below = 0;
        for (b, c) in self.counts.iter().enumerate() {
            below += c;
            if n > 0 && below as f64 >= 0.99 * n as f64 {
                return Some(BUCKETS_NS.get(b).copied().unwrap_or(u64::MAX));
            }
        }
        None
    }
}

/// One machine: its monitor's counters, when its intervals end and when it is scraped.
struct Machine {
    instance: String,
    nature: Nature,
    rng: fastrand::Rng,
    exposition: Exposition,
    health: Health,
    /// The end of its next checkpoint interval, and the phase of its scrapes, s.
    next_end_s: u64,
    scrape_phase_s: u64,
    truth: Vec<Truth>,
}

/// The page `m` serves, as Prometheus stores it at `t_s`: every sample line
/// with `instance` and `job` and the scrape's timestamp; the metadata only
/// when `meta`.
fn write_page(out: &mut impl Write, m: &Machine, t_s: u64, meta: bool) -> std::io::Result<()> {
    let page = m.exposition.render(&m.health, Format::OpenMetrics);
    let page = String::from_utf8_lossy(&page);
    let target = format!("instance=\"{}\",job=\"rtscope\"", m.instance);
    for line in page.lines() {
        if line.starts_with('#') {
            if meta && !line.starts_with("# EOF") {
                writeln!(out, "{line}")?;
            }
            continue;
        }
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => continue,
        };
        match rest.strip_prefix('{') {
            Some(labels) => writeln!(out, "{name}{{{target},{labels} {t_s}")?,
            None => writeln!(out, "{name}{{{target}}}{rest} {t_s}")?,
        }
    }
    Ok(())
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("fleet_openmetrics: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&a) {
        eprintln!("fleet_openmetrics: {e}");
        std::process::exit(1);
    }
}

/// Writes the fleet `a` asks for, and its truth.
pub fn run(a: &Args) -> Result<(), String> {
    let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
    std::fs::create_dir_all(&a.out).map_err(|e| io(&a.out.display().to_string(), e))?;
    let end = a.end_s;
    let start = end - (a.hours * 3600.0) as u64;
    let began = start - 3600;
    let mut rng = fastrand::Rng::with_seed(a.seed);
    let mut bad = vec![false; a.machines];
    let mut picked = 0;
    while picked < a.bad {
        let i = rng.usize(..a.machines);
        if !bad[i] {
            bad[i] = true;
            picked += 1;
        }
    }
    let cpus = if a.cpus == 1 { "0".to_string() } else { format!("0-{}", a.cpus - 1) };
    let mut machines: Vec<Machine> = (0..a.machines)
        .map(|i| {
            let mut r = fastrand::Rng::with_seed(a.seed.wrapping_mul(1_000_003).wrapping_add(i as u64));
            let nature = Nature::draw(&mut r, bad[i]);
            let created = began as f64 + r.f64();
            let mut exposition = Exposition::new(DEFAULT_THRESHOLDS_NS.to_vec());
            for cpu in 0..a.cpus {
                let key = SeriesKey::new("wakeup", "latency", cpu as i64);
                exposition
                    .series
                    .insert(cpu as i64 + 1, SeriesCounters::new(key, DEFAULT_THRESHOLDS_NS.len(), created));
            }
            let health = Health {
                version: env!("CARGO_PKG_VERSION").into(),
                probes: vec![("wakeup".into(), cpus.clone(), "every 1ms, SCHED_FIFO 95".into())],
                probes_running: 1,
                start_time_s: created,
                resident_bytes: 9 << 20,
                store_limit_bytes: 1 << 30,
                ..Default::default()
            };
            Machine {
                instance: format!("m{i:04}.fleet:9733"),
                next_end_s: began + r.u64(1..=a.checkpoint_s),
                scrape_phase_s: r.u64(0..a.scrape_s),
                nature,
                rng: r,
                exposition,
                health,
                truth: (0..a.cpus).map(|_| Truth::default()).collect(),
            }
        })
        .collect();

    // Scrape rounds in time order, a file per block of Unix time.
    let mut file: Option<(u64, PathBuf, std::io::BufWriter<std::fs::File>)> = None;
    let mut backfill: Option<(Child, PathBuf)> = None;
    let finish = |f: Option<(u64, PathBuf, std::io::BufWriter<std::fs::File>)>,
                  backfill: &mut Option<(Child, PathBuf)>|
     -> Result<(), String> {
        let Some((_, path, mut w)) = f else { return Ok(()) };
        writeln!(w, "# EOF").map_err(|e| io("write", e))?;
        w.flush().map_err(|e| io("write", e))?;
        drop(w);
        wait(backfill)?;
        if let Some(dir) = &a.promtool {
            let child = Command::new("promtool")
                .args(["tsdb", "create-blocks-from", "openmetrics", "-q"])
                .arg(&path)
                .arg(dir)
                .spawn()
                .map_err(|e| io("promtool", e))?;
            *backfill = Some((child, path));
        }
        Ok(())
    };
    let mut round = began;
    while round < end + a.scrape_s {
        let block = round / BLOCK_S * BLOCK_S;
        if file.as_ref().is_none_or(|f| f.0 != block) {
            finish(file.take(), &mut backfill)?;
            let path = a.out.join(format!("fleet-{block}.om"));
            let f = std::fs::File::create(&path).map_err(|e| io(&path.display().to_string(), e))?;
            file = Some((block, path, std::io::BufWriter::with_capacity(1 << 20, f)));
        }
        let (_, _, w) = file.as_mut().expect("opened above");
        let mut meta = true;
        for m in &mut machines {
            let t = round + m.scrape_phase_s;
            if t > end || t < began {
                continue;
            }
            while m.next_end_s <= t {
                let end_s = m.next_end_s;
                for (cpu, s) in m.exposition.series.values_mut().enumerate() {
                    let d = interval(&mut m.rng, &m.nature, a.checkpoint_s);
                    add(s, &d, end_s as f64);
                    // Scraped first at t: in the range when t is.
                    if t > start {
                        let tr = &mut m.truth[cpu];
                        for (x, y) in tr.counts.iter_mut().zip(d.counts) {
                            *x += y;
                        }
                        tr.max_ns = tr.max_ns.max(d.max_ns);
                    }
                }
                m.health.store_bytes += 1200 * a.cpus as u64;
                m.next_end_s += a.checkpoint_s;
            }
            m.health.scrapes += 1;
            m.health.cpu_seconds += a.scrape_s as f64 * 0.002;
            write_page(w, m, t, meta).map_err(|e| io("write", e))?;
            meta = false;
        }
        round += a.scrape_s;
    }
    finish(file.take(), &mut backfill)?;
    wait(&mut backfill)?;

    let truth: Vec<serde_json::Value> = machines
        .iter()
        .map(|m| {
            let series: Vec<serde_json::Value> = m
                .truth
                .iter()
                .enumerate()
                .map(|(cpu, t)| {
                    serde_json::json!({
                        "cpu": cpu,
                        "samples": t.counts.iter().sum::<u64>(),
                        "max_ns": t.max_ns,
                        "p99_le_ns": t.p99_le_ns(),
                    })
                })
                .collect();
            serde_json::json!({
                "instance": m.instance,
                "bad": m.nature.bad,
                "worst_ns": m.truth.iter().map(|t| t.max_ns).max(),
                "series": series,
            })
        })
        .collect();
    let doc = serde_json::json!({ "start_unix_s": start, "end_unix_s": end, "machines": truth });
    std::fs::write(&a.truth, serde_json::to_string_pretty(&doc).unwrap_or_default())
        .map_err(|e| io(&a.truth.display().to_string(), e))
}

/// Waits for the backfill of the file before, and removes that file.
fn wait(backfill: &mut Option<(Child, PathBuf)>) -> Result<(), String> {
    let Some((mut child, path)) = backfill.take() else { return Ok(()) };
    let status = child.wait().map_err(|e| format!("promtool: {e}"))?;
    if !status.success() {
        return Err(format!("promtool tsdb create-blocks-from openmetrics {}: {status}", path.display()));
    }
    let _ = std::fs::remove_file(&path);
    Ok(())
}
