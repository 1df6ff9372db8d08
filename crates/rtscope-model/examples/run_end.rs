//! Times what a run's end costs on a stored run: the sums pass
//! (`Store::store_sums`, which `rtscope`'s session runs when a run ends)
//! and the read of the finished run that follows it (`Store::load_run`;
//! and, for comparison, a summed read `Store::load_run_summed`),
//! each with the user and system CPU seconds it took and the peak resident
//! memory while it ran (the process' peak is reset before each step through
//! `/proc/self/clear_refs`; a step after one that freed much starts from
//! what the allocator kept). `bench/scale.sh` runs it with `RUN_END=1`.
//!
//! ```sh
//! cargo run --release -p rtscope-model --example run_end -- --db day.db [--run 1]
//! ```
//!
//! It rewrites the run's stored sums (the same rows as before, on a run
//! whose intervals did not change since it ended).

use rtscope_model::store::Store;
use std::path::PathBuf;
use std::time::Instant;

/// (user, system) CPU seconds of this process so far.
fn cpu_s() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's closing parenthesis; utime and stime
    // are the 14th and 15th of the line, in clock ticks (100 a second).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest.split_whitespace().map(|x| x.parse().unwrap_or(0.0)).collect();
    let tick = |i: usize| f.get(i).copied().unwrap_or(0.0) / 100.0;
    (tick(11), tick(12))
}

/// The process' peak resident memory (VmHWM), MiB.
fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

/// Resets the peak resident memory to the present one.
fn reset_peak() {
    if let Err(e) = std::fs::write("/proc/self/clear_refs", "5") {
        eprintln!("run_end: cannot reset the peak RSS ({e}): the figures are the process' peaks so far");
    }
}

/// Runs `f`, printing its elapsed, user and system seconds and peak RSS.
fn step<T>(name: &str, f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    reset_peak();
    let (u0, s0) = cpu_s();
    let t = Instant::now();
    let out = f()?;
    let (u1, s1) = cpu_s();
    println!(
        "{name}: {:.2} s ({:.2} s user, {:.2} s system), peak RSS {:.0} MiB",
        t.elapsed().as_secs_f64(),
        u1 - u0,
        s1 - s0,
        peak_mib()
    );
    Ok(out)
}

fn main() -> anyhow::Result<()> {
    let mut db = PathBuf::new();
    let mut run = 1i64;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| anyhow::anyhow!("{flag} needs a value"))?;
        match flag.as_str() {
            "--db" => db = value.into(),
            "--run" => run = value.parse().map_err(|_| anyhow::anyhow!("--run {value}: not a run id"))?,
            _ => anyhow::bail!("unknown flag {flag} (--db PATH [--run ID])"),
        }
    }
    if db.as_os_str().is_empty() {
        anyhow::bail!("--db PATH is required");
    }
    let mut store = Store::open(&db)?;
    println!("run {run} of {}: open, peak RSS {:.0} MiB", db.display(), peak_mib());
    step("store_sums", || store.store_sums(run))?;
    // What a read after it takes (show, analyze, report), then the read
    // the session makes to print the run's summary and write its files.
    step("load_run_summed", || store.load_run_summed(run)).map(drop)?;
    step("load_run", || store.load_run(run)).map(drop)
}
