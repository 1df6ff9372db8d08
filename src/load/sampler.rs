//! The /proc sampler: a SCHED_OTHER thread that reads the kernel's
//! counters once a second while a load runs (/proc/stat, /proc/softirqs,
//! /proc/interrupts, /proc/diskstats, /proc/net/dev, /proc/vmstat) and adds
//! each second's deltas to the load's characterisation, and every
//! process's CPU time (/proc/PID/stat), to tell rtscope's own work from
//! other processes'. The figures come from the kernel, not from the load's
//! own claims.

use crate::sys::syscount::SyscallCounter;
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

/// Reads every counter now. A file that cannot be read counts nothing;
/// system calls are counted where `syscalls` could be opened.
pub fn read(disks: &[String], syscalls: Option<&mut SyscallCounter>) -> Counters {
    let file = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let mut c = Counters { t_ns: clock::now(), ..Default::default() };
    ch::parse_stat(&file("/proc/stat"), &mut c);
    ch::parse_softirqs(&file("/proc/softirqs"), &mut c);
    ch::parse_interrupts(&file("/proc/interrupts"), &mut c);
    ch::parse_diskstats(&file("/proc/diskstats"), &|d: &str| disks.iter().any(|x| x == d), &mut c);
    ch::parse_net_dev(&file("/proc/net/dev"), &mut c);
    ch::parse_vmstat(&file("/proc/vmstat"), &mut c);
    processes(&mut c);
    c.syscalls = syscalls.and_then(SyscallCounter::read);
    c
}

/// Every process's CPU time (/proc/PID/stat: its own, its exited threads'
/// included, and its reaped children's) into `c.processes`, and every
/// thread's (/proc/PID/task/TID/stat) into `c.procs`, with its process's
/// name; rtscope's own marked: this process and its descendants (its
/// loads' commands and what they started, its helpers), and the members of
/// its descendants' own process groups (what a load's command left running
/// when its parent ended). Per thread, for the CPU each last ran on (a
/// process's own figure follows its main thread only). A few microseconds
/// per thread, once a second.
pub fn processes(c: &mut Counters) {
    let Ok(dir) = std::fs::read_dir("/proc") else { return };
    // Processes (pid, ppid, pgrp, comm), then their threads.
    let mut procs: Vec<ch::ProcTicks> = dir
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())))
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|t| ch::parse_proc_stat(&t))
        .collect();
    procs.sort_unstable_by_key(|p| p.pid);
    let me = std::process::id();
    let parent = |pid: u32| procs.binary_search_by_key(&pid, |p| p.pid).ok().map(|i| procs[i].ppid);
    let descends = |pid: u32| {
        let mut at = pid;
        for _ in 0..64 {
            if at == me {
                return true;
            }
            match parent(at) {
                Some(pp) if pp > 1 => at = pp,
                _ => return false,
            }
        }
        false
    };
    let own: Vec<bool> = procs.iter().map(|p| descends(p.pid)).collect();
    let my_group = procs.binary_search_by_key(&me, |p| p.pid).map_or(0, |i| procs[i].pgrp);
    let mut groups: Vec<u32> =
        procs.iter().zip(&own).filter(|(p, o)| **o && p.pgrp != my_group).map(|(p, _)| p.pgrp).collect();
    groups.sort_unstable();
    groups.dedup();
    let mut out = Vec::with_capacity(procs.len() * 2);
    for (mut p, o) in procs.into_iter().zip(own) {
        let own = o || groups.binary_search(&p.pgrp).is_ok();
        p.own = own;
        c.processes.push(p.clone());
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", p.pid)) else { continue };
        for t in tasks.flatten() {
            let Some(thread) =
                std::fs::read_to_string(t.path().join("stat")).ok().and_then(|t| ch::parse_proc_stat(&t))
            else {
                continue;
            };
            out.push(ch::ProcTicks {
                pid: p.pid,
                tid: thread.pid,
                start: thread.start,
                comm: p.comm.clone(),
                ppid: p.ppid,
                pgrp: p.pgrp,
                ticks: thread.ticks,
                children: 0,
                cpu: thread.cpu,
                own,
            });
        }
    }
    c.procs = out;
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
            // Counted on every online CPU while the window lasts; not
            // counted where perf cannot (the rate stays absent).
            let mut syscalls = SyscallCounter::open(&crate::sys::cpu::online()).ok();
            let mut prev = read(&disks, syscalls.as_mut());
            let mut next = prev.t_ns + 1_000_000_000;
            loop {
                while clock::now() < next && !flag.load(Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let now = read(&disks, syscalls.as_mut());
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
        let a = super::read(&disks, None);
        assert!(!a.cpus.is_empty() && a.context_switches > 0 && a.interrupts > 0, "{a:?}");
        assert!(a.net.iter().any(|n| n.iface == "lo"));
        let mut acc = rtscope_model::characterisation::Accumulator::new("idle", &[]);
        let s = super::Sampler::start(acc).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        acc = s.stop();
        let c = acc.finish();
        assert!((0.2..1.0).contains(&c.seconds), "{}", c.seconds);
        assert!(c.context_switches_per_s > 0.0);
        // As root the system calls are counted (this test's own sleeps and
        // /proc reads among them).
        if rustix::process::geteuid().is_root() {
            assert!(c.syscalls_per_s.is_some_and(|r| r > 0.0), "{:?}", c.syscalls_per_s);
        }
    }

    #[test]
    fn knows_its_own_processes_from_the_others() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let mut c = rtscope_model::characterisation::Counters::default();
        super::processes(&mut c);
        let procs = c.procs;
        let _ = child.kill();
        let _ = child.wait();
        let find = |pid: u32| procs.iter().find(|p| p.tid == pid).unwrap_or_else(|| panic!("pid {pid}: {procs:?}"));
        let me = find(std::process::id());
        assert!(me.own, "{me:?}");
        let sleep = find(child.id());
        assert!(sleep.own && sleep.comm == "sleep", "a child is rtscope's own: {sleep:?}");
        assert!(!find(1).own, "init is another process");
        let parent = find(std::os::unix::process::parent_id());
        assert!(!parent.own, "{parent:?}");
        // Every thread of this process, under its process's name.
        let mine: Vec<_> = procs.iter().filter(|p| p.pid == std::process::id()).collect();
        assert!(mine.len() >= 2 && mine.iter().all(|t| t.own && t.comm == me.comm), "{mine:?}");
        let me = c.processes.iter().find(|p| p.pid == std::process::id()).unwrap();
        assert!(me.own && me.tid == me.pid, "{me:?}");
        assert!(c.processes.iter().any(|p| p.pid == 1 && !p.own));
    }

    #[test]
    fn counts_its_children_that_came_and_went() {
        // A child that burns a fixed work's CPU time (about 0.35 s here,
        // 0.15 s on a fast machine) and is reaped between two samples: no
        // sample sees it, its time counts as rtscope's own.
        let disks = super::whole_disks();
        let a = super::read(&disks, None);
        let o = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 500000 ]; do i=$((i+1)); done"])
            .status()
            .unwrap();
        assert!(o.success());
        let d = super::read(&disks, None).since(&a);
        let seen: u64 = d.procs.iter().filter(|p| p.own).map(|p| p.ticks).sum();
        // Ticks are 1/100 s.
        assert!(d.own_ticks >= seen as i64 + 10, "own {} ticks, threads seen {seen}", d.own_ticks);
    }
}
