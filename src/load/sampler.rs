//! The /proc sampler: a SCHED_OTHER thread that reads the kernel's
//! counters once a second while a load runs (/proc/stat, /proc/softirqs,
//! /proc/interrupts, /proc/diskstats, /proc/net/dev, /proc/vmstat) and adds
//! each second's deltas to the load's characterisation. The figures come
//! from the kernel, not from the load's own claims.

use crate::sys::{clock, signals};
use rtscope_model::characterisation::{self as ch, Accumulator, Counters};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::Duration;

/// Block devices that are not whole disks of their own (their I/O is
/// counted on the disk below them) or not disks at all.
const NOT_DISKS: [&str; 7] = ["loop", "ram", "zram", "dm-", "md", "sr", "fd"];

/// The whole disks, from /sys/block.
fn whole_disks() -> Vec<String> {
    std::fs::read_dir("/sys/block")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !NOT_DISKS.iter().any(|p| n.starts_with(p)))
                .collect()
        })
        .unwrap_or_default()
}

/// Reads every counter now. A file that cannot be read counts nothing.
pub fn read(disks: &[String]) -> Counters {
    let file = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let mut c = Counters { t_ns: clock::now(), ..Default::default() };
    ch::parse_stat(&file("/proc/stat"), &mut c);
    ch::parse_softirqs(&file("/proc/softirqs"), &mut c);
    ch::parse_interrupts(&file("/proc/interrupts"), &mut c);
    ch::parse_diskstats(&file("/proc/diskstats"), &|d: &str| disks.iter().any(|x| x == d), &mut c);
    ch::parse_net_dev(&file("/proc/net/dev"), &mut c);
    ch::parse_vmstat(&file("/proc/vmstat"), &mut c);
    c
}

/// A sampling window in progress.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Accumulator>,
}

impl Sampler {
    /// Starts sampling into `acc` (which may hold earlier windows).
    pub fn start(mut acc: Accumulator) -> std::io::Result<Sampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new().name("rtscope-proc".into()).spawn(move || {
            signals::block_in_background_thread();
            let disks = whole_disks();
            let mut prev = read(&disks);
            let mut next = prev.t_ns + 1_000_000_000;
            loop {
                while clock::now() < next && !flag.load(Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let now = read(&disks);
                acc.add(&now.since(&prev));
                prev = now;
                next += 1_000_000_000;
                if flag.load(Relaxed) {
                    return acc;
                }
            }
        })?;
        Ok(Sampler { stop, thread })
    }

    /// Ends the window (its last partial second included).
    pub fn stop(self) -> Accumulator {
        self.stop.store(true, Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_this_machine() {
        let disks = super::whole_disks();
        assert!(disks.iter().all(|d| !d.starts_with("loop")));
        let a = super::read(&disks);
        assert!(!a.cpus.is_empty() && a.context_switches > 0 && a.interrupts > 0, "{a:?}");
        assert!(a.net.iter().any(|n| n.iface == "lo"));
        let mut acc = rtscope_model::characterisation::Accumulator::new("idle", &[]);
        let s = super::Sampler::start(acc).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        acc = s.stop();
        let c = acc.finish();
        assert!((0.2..1.0).contains(&c.seconds), "{}", c.seconds);
        assert!(c.context_switches_per_s > 0.0);
    }
}
