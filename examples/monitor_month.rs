//! A month of `rtscope monitor` at accelerated time: its own flags,
//! recorders, writer and retention (src/commands/monitor/accelerated.rs),
//! with synthetic 1 kHz wake-up latencies on two CPUs, in minutes.
//! `bench/scale.sh` reads the store back with `analyze`, `report` and
//! `show`.
//!
//! ```sh
//! cargo run --release --example monitor_month -- --db month.db [--days 30] [--seed 1] \
//!     [--seconds N (instead of days)] [-- MONITOR FLAGS, default: --cpus 0,1 --quiet]
//! ```
//!
//! On a store that holds a run already (a copy of an older month's), its
//! first retention pass is that of a monitor opening the store: it
//! back-fills the chunks of the older run (`--seconds 60` does little else).
//!
//! Prints the store's size once a day of the monitor's time, then one line
//! of `key=value` figures: the run, the largest used bytes after a
//! retention pass (what `--max-store` bounds) and the largest files.

use rtscope::commands::monitor::accelerated::{self, Accelerated};

fn main() {
    let mut db = None;
    let (mut days, mut seed, mut seconds) = (30u64, 1u64, None);
    let mut flags: Vec<String> = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--" {
            flags.extend(it.by_ref());
            break;
        }
        let value = it.next().unwrap_or_else(|| fail(&format!("{flag} needs a value")));
        let number = || value.parse().unwrap_or_else(|_| fail(&format!("{flag} {value}: not a whole number")));
        match flag.as_str() {
            "--db" => db = Some(value.clone()),
            "--days" => days = number(),
            "--seconds" => seconds = Some(number()),
            "--seed" => seed = number(),
            _ => fail(&format!("unknown flag {flag}")),
        }
    }
    let db = db.unwrap_or_else(|| fail("--db PATH is required"));
    if flags.is_empty() {
        flags = ["--cpus", "0,1", "--quiet"].map(String::from).to_vec();
    }
    flags.extend(["--db".to_string(), db]);
    let day = 86_400_000_000_000u64;
    let duration_ns = seconds.map_or(days * day, |s| s * 1_000_000_000);
    let a = Accelerated { args: flags, duration_ns, start_unix_ns: 1_800_000_000_000_000_000, seed };
    let started = std::time::Instant::now();
    let out = accelerated::run(&a, |p| {
        if p.elapsed_ns % day == 0 || p.elapsed_ns == a.duration_ns {
            eprintln!(
                "day {:>5.2}: store {:>5} MiB used, {:>5} MiB on disk, {} intervals summarised ({:.0} s)",
                p.elapsed_ns as f64 / day as f64,
                p.used_bytes >> 20,
                p.file_bytes >> 20,
                p.summarised_intervals,
                started.elapsed().as_secs_f64()
            );
        }
    })
    .unwrap_or_else(|e| fail(&format!("{e:#}")));
    let samples: u64 = out.committed.iter().map(|(_, t)| t.count()).sum();
    println!(
        "run={} days={} samples={samples} max_store={} passes={} max_used={} max_file={} summarised={} \
         thinned={} seconds={:.0}",
        out.run_id,
        a.duration_ns / day,
        out.max_store,
        out.passes,
        out.max_used_bytes,
        out.max_file_bytes,
        out.summarised_intervals,
        out.thinned_exceedances,
        started.elapsed().as_secs_f64()
    );
}

fn fail(message: &str) -> ! {
    eprintln!("monitor_month: {message}");
    std::process::exit(1);
}
