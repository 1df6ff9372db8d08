//! The kernel's counters at an instant, their deltas and sums, and rtscope's
//! own CPU time between two instants.

use super::*;
use std::collections::{HashMap, HashSet};

/// One CPU's times from a `cpuN` line of /proc/stat, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub cpu: usize,
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTimes {
    pub fn total(&self) -> u64 {
        self.user + self.nice + self.system + self.idle + self.iowait + self.irq + self.softirq + self.steal
    }

    /// Not idle and not waiting for I/O (steal counts as busy: the vCPU
    /// wanted to run).
    pub fn busy(&self) -> u64 {
        self.total() - self.idle - self.iowait
    }

    pub(super) fn minus(&self, b: &CpuTimes) -> CpuTimes {
        CpuTimes {
            cpu: self.cpu,
            user: self.user.saturating_sub(b.user),
            nice: self.nice.saturating_sub(b.nice),
            system: self.system.saturating_sub(b.system),
            idle: self.idle.saturating_sub(b.idle),
            iowait: self.iowait.saturating_sub(b.iowait),
            irq: self.irq.saturating_sub(b.irq),
            softirq: self.softirq.saturating_sub(b.softirq),
            steal: self.steal.saturating_sub(b.steal),
        }
    }

    pub(super) fn plus(&mut self, d: &CpuTimes) {
        self.user += d.user;
        self.nice += d.nice;
        self.system += d.system;
        self.idle += d.idle;
        self.iowait += d.iowait;
        self.irq += d.irq;
        self.softirq += d.softirq;
        self.steal += d.steal;
    }
}

/// Whole-disk I/O from /proc/diskstats (sectors are 512 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskCounters {
    pub reads: u64,
    pub read_sectors: u64,
    pub writes: u64,
    pub write_sectors: u64,
}

/// One interface of /proc/net/dev.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetCounters {
    pub iface: String,
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
}

/// The kernel's counters at one instant (or, as a sum of deltas, over a time).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    /// CLOCK_MONOTONIC ns when read (a sum: the time covered).
    pub t_ns: u64,
    pub cpus: Vec<CpuTimes>,
    /// All interrupts (/proc/stat `intr`).
    pub interrupts: u64,
    /// /proc/stat `ctxt`.
    pub context_switches: u64,
    /// Processes and threads created (/proc/stat `processes`).
    pub forks: u64,
    /// Per softirq vector, over every CPU (/proc/softirqs).
    pub softirqs: Vec<(String, u64)>,
    /// Per interrupt source, over every CPU (/proc/interrupts).
    pub irq_sources: Vec<(String, u64)>,
    pub disk: DiskCounters,
    pub net: Vec<NetCounters>,
    /// /proc/vmstat `pgfault` and `pgmajfault`.
    pub page_faults: u64,
    pub major_faults: u64,
    /// System calls entered on every CPU (the `raw_syscalls:sys_enter`
    /// tracepoint, counted by perf); None where they were not counted.
    pub syscalls: Option<u64>,
    /// Every thread's CPU time (/proc/PID/task/TID/stat): at an instant, its
    /// total; in a delta, what it used in it (threads that used none left
    /// out). Per thread, for the CPU each ran on.
    /// A sum of deltas ([`Counters::add`]) leaves them out: the
    /// [`Accumulator`] keeps what it needs of them.
    pub procs: Vec<ProcTicks>,
    /// Every process at an instant (/proc/PID/stat, `tid` = `pid`):
    /// `ticks` the whole process's user + system time, its exited threads
    /// included, and `children` its waited-for children's. Empty in a
    /// delta: [`Counters::own_ticks`] holds what it tells.
    pub processes: Vec<ProcTicks>,
    /// In a delta: rtscope's own CPU time in it, clock ticks, from the
    /// processes' totals ([`own_ticks_since`]): its threads that ended and
    /// its processes that came and went included. Signed: the kernel
    /// rounds each figure down, so a quiet second may read a tick or two
    /// below zero (the [`Accumulator`] carries that over). 0 at an instant.
    pub own_ticks: i64,
}

/// One thread's CPU time from /proc/PID/task/TID/stat, with its process's
/// name, parent and group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcTicks {
    /// The process (thread group).
    pub pid: u32,
    pub tid: u32,
    /// When the thread started (clock ticks after boot): an id used again
    /// is another thread.
    pub start: u64,
    /// The process's name (`comm`, at most 15 bytes).
    pub comm: String,
    pub ppid: u32,
    /// The process group.
    pub pgrp: u32,
    /// User + system time, clock ticks (the unit of /proc/stat).
    pub ticks: u64,
    /// The process's waited-for children's user + system time (cutime +
    /// cstime, fields 16 and 17: each reaped child's own time and its
    /// children's, transitively), clock ticks. Only [`Counters::processes`]
    /// uses it.
    pub children: u64,
    /// The CPU it last ran on.
    pub cpu: usize,
    /// rtscope itself or one of its descendants (its loads' commands, its
    /// helpers): set by the reader.
    pub own: bool,
}

/// rtscope's own CPU time from `before` to `now`, clock ticks, from every
/// process at each of the two instants ([`Counters::processes`]): counted
/// positively, and exact in the cases below whatever ran in between.
///
/// Let T(P) = utime + stime + cutime + cstime of process P (/proc/PID/stat):
/// its own time, its exited threads' included, and its reaped children's,
/// theirs included (a child's own cutime is added to its parent's when
/// reaped, so transitively). Let S(t) = the sum of T over rtscope's own
/// processes alive at t (zombies included: they are still in /proc). Then
/// own time = S(now) - S(before), computed process by process (a process
/// is the pair pid + start time):
///
/// - alive at both (own at either: one orphaned since stays own): T(now) -
///   T(before). A thread that ended inside it is in its utime/stime, so its
///   time counts though the thread is gone; a child it reaped in between is
///   in its cutime/cstime, with all the child's time.
/// - alive now only (started in between): all of T(now).
/// - gone, and reaped by an own parent: that parent's cutime/cstime grew by
///   the child's whole T, the part before `before` included; subtracting
///   T(before) of the child leaves exactly its time after `before` (without
///   it, a child seen alive at `before` and reaped since would count its
///   whole life again: the double-count trap). "Reaped by an own parent":
///   its parent at `before` is own and alive now (then it reaped it: a
///   living parent's child is not orphaned), or is gone itself and, going
///   up, an own ancestor alive now is reached (assumed: each waited for
///   its children before it ended, as shells, make and stress-ng do).
/// - gone, and reaped by another process (its parent at `before` not own:
///   an orphan reparented to init or a subreaper, own only by its process
///   group; or a parent that ended without waiting for it, whose children
///   the kernel gives to init): its time after `before` is lost, and so is
///   a child's that its parent does not wait for (SIGCHLD ignored): not
///   subtracted, so only that remainder is missed.
/// - started and ended in between, reaped by an own parent: never seen, it
///   is all in that parent's cutime/cstime growth, so it counts in full;
///   one whose parent is gone as well counts through the first own
///   ancestor alive now when each waited for its children.
///
/// The kernel rounds each field down to a tick, so the result may be a
/// few ticks off in a second (below zero when nothing ran); over many
/// seconds the roundings cancel.
pub fn own_ticks_since(now: &[ProcTicks], before: &[ProcTicks]) -> i64 {
    let total = |p: &ProcTicks| (p.ticks + p.children) as i64;
    let then: HashMap<(u32, u64), &ProcTicks> = before.iter().map(|p| ((p.pid, p.start), p)).collect();
    let then_by_pid: HashMap<u32, &ProcTicks> = before.iter().map(|p| (p.pid, p)).collect();
    let alive: HashSet<(u32, u64)> = now.iter().map(|p| (p.pid, p.start)).collect();
    let mut own = 0;
    for p in now {
        let was = then.get(&(p.pid, p.start));
        if p.own || was.is_some_and(|w| w.own) {
            own += total(p) - was.map_or(0, |w| total(w));
        }
    }
    // Reaped by an own process alive now, through own ancestors that ended
    // too (the chain at `before`).
    let reaped_by_own = |child: &ProcTicks| {
        let mut at = child;
        for _ in 0..64 {
            match then_by_pid.get(&at.ppid) {
                Some(parent) if parent.own && at.ppid != at.pid => {
                    if alive.contains(&(parent.pid, parent.start)) {
                        return true;
                    }
                    at = parent;
                }
                _ => return false,
            }
        }
        false
    };
    for c in before.iter().filter(|c| c.own && !alive.contains(&(c.pid, c.start))) {
        if reaped_by_own(c) {
            own -= total(c);
        }
    }
    own
}

pub(super) fn minus_named(a: &[(String, u64)], b: &[(String, u64)]) -> Vec<(String, u64)> {
    a.iter().map(|(n, v)| (n.clone(), v.saturating_sub(b.iter().find(|(m, _)| m == n).map_or(0, |x| x.1)))).collect()
}

pub(super) fn plus_named(a: &mut Vec<(String, u64)>, d: &[(String, u64)]) {
    for (n, v) in d {
        match a.iter_mut().find(|(m, _)| m == n) {
            Some(x) => x.1 += v,
            None => a.push((n.clone(), *v)),
        }
    }
}

impl Counters {
    /// What happened from `before` to `self` (counters that went back, as
    /// after a CPU went offline, count 0).
    pub fn since(&self, before: &Counters) -> Counters {
        let s = |a: u64, b: u64| a.saturating_sub(b);
        Counters {
            t_ns: s(self.t_ns, before.t_ns),
            cpus: self
                .cpus
                .iter()
                .map(|c| match before.cpus.iter().find(|b| b.cpu == c.cpu) {
                    Some(b) => c.minus(b),
                    None => CpuTimes { cpu: c.cpu, ..Default::default() },
                })
                .collect(),
            interrupts: s(self.interrupts, before.interrupts),
            context_switches: s(self.context_switches, before.context_switches),
            forks: s(self.forks, before.forks),
            softirqs: minus_named(&self.softirqs, &before.softirqs),
            irq_sources: minus_named(&self.irq_sources, &before.irq_sources),
            disk: DiskCounters {
                reads: s(self.disk.reads, before.disk.reads),
                read_sectors: s(self.disk.read_sectors, before.disk.read_sectors),
                writes: s(self.disk.writes, before.disk.writes),
                write_sectors: s(self.disk.write_sectors, before.disk.write_sectors),
            },
            net: self
                .net
                .iter()
                .map(|n| {
                    let b = before.net.iter().find(|b| b.iface == n.iface).cloned().unwrap_or_default();
                    NetCounters {
                        iface: n.iface.clone(),
                        rx_bytes: s(n.rx_bytes, b.rx_bytes),
                        rx_packets: s(n.rx_packets, b.rx_packets),
                        tx_bytes: s(n.tx_bytes, b.tx_bytes),
                        tx_packets: s(n.tx_packets, b.tx_packets),
                    }
                })
                .collect(),
            page_faults: s(self.page_faults, before.page_faults),
            major_faults: s(self.major_faults, before.major_faults),
            syscalls: self.syscalls.zip(before.syscalls).map(|(a, b)| s(a, b)),
            procs: self.thread_deltas(before),
            processes: Vec::new(),
            own_ticks: if self.processes.is_empty() || before.processes.is_empty() {
                // No process totals (a reader that had none): the threads seen.
                self.thread_deltas(before).iter().filter(|p| p.own).map(|p| p.ticks as i64).sum()
            } else {
                own_ticks_since(&self.processes, &before.processes)
            },
        }
    }

    /// Each thread's CPU time since `before`: a thread not there before
    /// started since and all its time counts; a thread rtscope's own then
    /// stays its own (its process orphaned since, say).
    pub(super) fn thread_deltas(&self, before: &Counters) -> Vec<ProcTicks> {
        let earlier: HashMap<(u32, u64), (u64, bool)> =
            before.procs.iter().map(|p| ((p.tid, p.start), (p.ticks, p.own))).collect();
        self.procs
            .iter()
            .filter_map(|p| {
                let (was, own) = earlier.get(&(p.tid, p.start)).copied().unwrap_or((0, false));
                let d = p.ticks.saturating_sub(was);
                (d > 0).then(|| ProcTicks { ticks: d, own: p.own || own, ..p.clone() })
            })
            .collect()
    }

    /// Adds a delta (from [`Counters::since`]) to this sum.
    pub fn add(&mut self, d: &Counters) {
        self.t_ns += d.t_ns;
        for c in &d.cpus {
            match self.cpus.iter_mut().find(|x| x.cpu == c.cpu) {
                Some(x) => x.plus(c),
                None => self.cpus.push(*c),
            }
        }
        self.interrupts += d.interrupts;
        self.context_switches += d.context_switches;
        self.forks += d.forks;
        plus_named(&mut self.softirqs, &d.softirqs);
        plus_named(&mut self.irq_sources, &d.irq_sources);
        self.disk.reads += d.disk.reads;
        self.disk.read_sectors += d.disk.read_sectors;
        self.disk.writes += d.disk.writes;
        self.disk.write_sectors += d.disk.write_sectors;
        for n in &d.net {
            match self.net.iter_mut().find(|x| x.iface == n.iface) {
                Some(x) => {
                    x.rx_bytes += n.rx_bytes;
                    x.rx_packets += n.rx_packets;
                    x.tx_bytes += n.tx_bytes;
                    x.tx_packets += n.tx_packets;
                }
                None => self.net.push(n.clone()),
            }
        }
        self.page_faults += d.page_faults;
        self.major_faults += d.major_faults;
        if let Some(n) = d.syscalls {
            self.syscalls = Some(self.syscalls.unwrap_or(0) + n);
        }
        self.own_ticks += d.own_ticks;
    }

    /// Busy share of `cpus` (all when empty), percent.
    pub(super) fn busy_pct(&self, cpus: &[usize]) -> f64 {
        let (busy, total) = self.cpu_sum(cpus, |c| c.busy());
        pct(busy, total)
    }

    /// (sum of `f`, sum of totals) over `cpus` (all when empty).
    pub(super) fn cpu_sum(&self, cpus: &[usize], f: impl Fn(&CpuTimes) -> u64) -> (u64, u64) {
        self.cpus
            .iter()
            .filter(|c| cpus.is_empty() || cpus.contains(&c.cpu))
            .fold((0, 0), |(a, t), c| (a + f(c), t + c.total()))
    }
}
