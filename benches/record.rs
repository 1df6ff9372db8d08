//! Micro-benchmark of the per-sample record path: what a measuring thread
//! does between reading the clock and going back to sleep.
//!
//! `cargo bench --bench record` (harness = false: plain `std::time::Instant`,
//! no extra dependencies).
//!
//! A bench cannot import the binary crate's `recorder` module, so this file
//! measures what it can reach, `rtscope_model::hist::Tally::record` (the
//! HdrHistogram plus exact count/min/max/sum), and re-creates the rest of
//! `Recorder::record` (src/recorder.rs) line for line: the Relaxed store of
//! the running count into the shared `Live` figures, the running maximum,
//! and the push of a 16-byte `Exceedance { t_ns, value_ns }` into an `rtrb`
//! ring of the same capacity when the value is above the `AtomicU64`
//! threshold. Keep `Rec::record` below in step with `Recorder::record`.
//!
//! Samples: latencies of 2-200 us from an xorshift PRNG (90 % in 2-30 us,
//! 10 % in 30-200 us) and about 0.1 % (1/1024) above the 200 us threshold
//! (200 us - 1 ms), like the adaptive p99.9 threshold. Time is accumulated
//! over blocks of 4096 samples; between blocks, outside the timed part, the
//! bench drains the exceedance ring as the writer thread would.
//!
//! The PASS/FAIL line judges the median of the hot-loop runs of the mirrored
//! `Recorder::record`, PRNG included. A last, informational figure times
//! single samples with the private caches evicted before each one, as after
//! a real 1 ms sleep.
//!
//! Environment: RECORD_SAMPLES (default 50000000), RECORD_RUNS (default 5),
//! RECORD_COLD_SAMPLES (default 20000), RECORD_TARGET_NS (default 50).

use rtscope_model::hist::Tally;
use rtscope_model::run::Exceedance;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// As src/recorder.rs: exceedances in flight per series.
const EXCEED_RING: usize = 1 << 13;
/// Samples per timed block; the ring is drained between blocks.
const BLOCK: u64 = 4096;
/// The fixed exceedance threshold of the bench, ns.
const THRESHOLD_NS: u64 = 200_000;
/// The clock advances by one period per sample.
const PERIOD_NS: u64 = 1_000_000;

/// As `recorder::Live`: figures the progress line reads, one cache line.
#[repr(align(64))]
#[derive(Default)]
struct Live {
    count: AtomicU64,
    max: AtomicU64,
    #[allow(dead_code)]
    overruns: AtomicU64,
}

/// The measuring thread's state that `Recorder::record` touches.
struct Rec {
    cur: Box<Tally>,
    lost: u64,
    total_max: u64,
    total_count: u64,
    threshold: Arc<AtomicU64>,
    live: Arc<Live>,
    exc_tx: rtrb::Producer<Exceedance>,
}

impl Rec {
    /// A copy of `Recorder::record`.
    #[inline(always)]
    fn record(&mut self, t_ns: u64, value: u64) {
        self.cur.record(value);
        self.total_count += 1;
        self.live.count.store(self.total_count, Relaxed);
        if value > self.total_max {
            self.total_max = value;
            self.live.max.store(value, Relaxed);
        }
        if value > self.threshold.load(Relaxed) && self.exc_tx.push(Exceedance { t_ns, value_ns: value }).is_err() {
            self.lost += 1;
        }
    }
}

/// xorshift64*: a few cycles per value.
struct Rng(u64);

impl Rng {
    #[inline(always)]
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A latency, ns: 90 % in 2-30 us, 10 % in 30-200 us, 1/1024 above
    /// the threshold (200 us - 1 ms).
    #[inline(always)]
    fn latency(&mut self) -> u64 {
        let r = self.next();
        let sel = r >> 54; // 0..1023
        let low = r & 0xffff_ffff;
        let pick = |lo: u64, span: u64| lo + ((low * span) >> 32);
        if sel == 0 {
            pick(THRESHOLD_NS + 1, 800_000)
        } else if sel < 103 {
            pick(30_000, 170_000)
        } else {
            pick(2_000, 28_000)
        }
    }
}

struct Outcome {
    ns_per_sample: f64,
    exceedances: u64,
    lost: u64,
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(default)
}

/// The PRNG and loop alone: what the figures below include besides recording.
fn run_baseline(samples: u64, seed: u64) -> Outcome {
    let mut rng = Rng(seed);
    let mut acc = 0u64;
    let mut t = 0u64;
    let mut timed = Duration::ZERO;
    let mut done = 0;
    while done < samples {
        let n = BLOCK.min(samples - done);
        let start = Instant::now();
        for _ in 0..n {
            t += PERIOD_NS;
            acc = acc.wrapping_add(black_box(rng.latency()) ^ t);
        }
        timed += start.elapsed();
        done += n;
    }
    black_box(acc);
    Outcome { ns_per_sample: timed.as_nanos() as f64 / samples as f64, exceedances: 0, lost: 0 }
}

/// `Tally::record` alone.
fn run_tally(samples: u64, seed: u64) -> Outcome {
    let mut rng = Rng(seed);
    let mut tally = Box::new(Tally::new());
    let mut t = 0u64;
    let mut timed = Duration::ZERO;
    let mut done = 0;
    while done < samples {
        let n = BLOCK.min(samples - done);
        let start = Instant::now();
        for _ in 0..n {
            t += PERIOD_NS;
            tally.record(black_box(rng.latency()));
        }
        timed += start.elapsed();
        done += n;
    }
    assert_eq!(tally.stats.count, samples);
    black_box(&tally);
    black_box(t);
    Outcome { ns_per_sample: timed.as_nanos() as f64 / samples as f64, exceedances: 0, lost: 0 }
}

/// The whole of `Recorder::record`, the ring drained between blocks.
fn run_recorder(samples: u64, seed: u64) -> Outcome {
    let mut rng = Rng(seed);
    let (exc_tx, mut exc_rx) = rtrb::RingBuffer::<Exceedance>::new(EXCEED_RING);
    let live = Arc::new(Live::default());
    let mut rec = Rec {
        cur: Box::new(Tally::new()),
        lost: 0,
        total_max: 0,
        total_count: 0,
        threshold: Arc::new(AtomicU64::new(THRESHOLD_NS)),
        live: Arc::clone(&live),
        exc_tx,
    };
    let mut drained = 0u64;
    let mut t = 0u64;
    let mut timed = Duration::ZERO;
    let mut done = 0;
    while done < samples {
        let n = BLOCK.min(samples - done);
        let start = Instant::now();
        for _ in 0..n {
            t += PERIOD_NS;
            rec.record(t, black_box(rng.latency()));
        }
        timed += start.elapsed();
        done += n;
        // The writer's side, untimed.
        let slots = exc_rx.slots();
        if let Ok(chunk) = exc_rx.read_chunk(slots) {
            let (a, b) = chunk.as_slices();
            black_box((a, b));
            drained += (a.len() + b.len()) as u64;
            chunk.commit_all();
        }
    }
    assert_eq!(rec.cur.stats.count, samples);
    assert_eq!(live.count.load(Relaxed), samples);
    assert_eq!(live.max.load(Relaxed), rec.cur.stats.max);
    black_box(&rec.cur);
    Outcome { ns_per_sample: timed.as_nanos() as f64 / samples as f64, exceedances: drained, lost: rec.lost }
}

/// One sample at a time with the private caches evicted before each (as
/// after a 1 ms sleep), each timed on its own; informational. Returns the
/// median and p99 of (record + clock reads) - (clock reads alone), ns.
fn run_cold(samples: u64, seed: u64) -> (f64, f64) {
    let mut rng = Rng(seed);
    let (exc_tx, mut exc_rx) = rtrb::RingBuffer::<Exceedance>::new(EXCEED_RING);
    let mut rec = Rec {
        cur: Box::new(Tally::new()),
        lost: 0,
        total_max: 0,
        total_count: 0,
        threshold: Arc::new(AtomicU64::new(THRESHOLD_NS)),
        live: Arc::new(Live::default()),
        exc_tx,
    };
    // Larger than a core's L1 + L2 on the machines rtscope targets.
    let evict: Vec<u64> = (0..(4usize << 20) / 8).map(|i| i as u64).collect();
    let flush = |v: &Vec<u64>| {
        let mut acc = 0u64;
        for i in (0..v.len()).step_by(8) {
            acc = acc.wrapping_add(v[i]);
        }
        black_box(acc);
    };
    let mut with = Vec::with_capacity(samples as usize);
    let mut without = Vec::with_capacity(samples as usize);
    let mut t = 0u64;
    for _ in 0..samples {
        t += PERIOD_NS;
        let value = rng.latency();
        flush(&evict);
        let start = Instant::now();
        rec.record(t, black_box(value));
        with.push(start.elapsed().as_nanos() as f64);
        flush(&evict);
        let start = Instant::now();
        black_box(value);
        without.push(start.elapsed().as_nanos() as f64);
        if let Ok(chunk) = exc_rx.read_chunk(exc_rx.slots()) {
            chunk.commit_all();
        }
    }
    let pct = |mut v: Vec<f64>, q: f64| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]
    };
    let (w50, w99) = (pct(with.clone(), 0.5), pct(with, 0.99));
    let (o50, o99) = (pct(without.clone(), 0.5), pct(without, 0.99));
    ((w50 - o50).max(0.0), (w99 - o99).max(0.0))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

fn series(name: &str, runs: u64, samples: u64, f: fn(u64, u64) -> Outcome) -> f64 {
    // One short warm-up: page in the histogram and the ring.
    black_box(f(samples.min(1_000_000), 0x9e37_79b9_7f4a_7c15).ns_per_sample);
    let mut figures = Vec::new();
    let mut last = None;
    for i in 0..runs {
        let o = f(samples, 0x1234_5678_9abc_def1 ^ (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        figures.push(o.ns_per_sample);
        last = Some(o);
    }
    let m = median(figures.clone());
    let list: Vec<String> = figures.iter().map(|f| format!("{f:.2}")).collect();
    println!("{name:<34} median {m:6.2} ns/sample   runs [{}]", list.join(", "));
    if let Some(o) = last
        && (o.exceedances > 0 || o.lost > 0)
    {
        println!(
            "{:<34} last run: {} exceedances pushed and drained ({:.3} %), {} lost",
            "",
            o.exceedances,
            o.exceedances as f64 * 100.0 / samples as f64,
            o.lost
        );
    }
    m
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is ignored.
    let samples = env_u64("RECORD_SAMPLES", 50_000_000).max(BLOCK);
    let runs = env_u64("RECORD_RUNS", 5).max(1);
    let target = env_u64("RECORD_TARGET_NS", 50) as f64;
    println!("record path: {samples} samples per run, {runs} runs, median reported; timed in blocks of {BLOCK}");
    let base = series("baseline (PRNG + loop only)", runs, samples, run_baseline);
    let tally = series("Tally::record", runs, samples, run_tally);
    let full = series("Recorder::record (mirrored)", runs, samples, run_recorder);
    println!(
        "net of the baseline: Tally::record {:.2} ns, Recorder::record {:.2} ns",
        (tally - base).max(0.0),
        (full - base).max(0.0)
    );
    let cold_samples = env_u64("RECORD_COLD_SAMPLES", 20_000).max(100);
    let (c50, c99) = run_cold(cold_samples, 0xdead_beef_cafe_f00d);
    println!(
        "cold caches (4 MiB evicted before each sample, {cold_samples} samples, clock reads subtracted; \
         informational): Recorder::record median {c50:.0} ns, p99 {c99:.0} ns"
    );
    let verdict = if full <= target { "PASS" } else { "FAIL" };
    println!("{verdict}: Recorder::record {full:.2} ns/sample (PRNG included) against the {target:.0} ns target");
}
