//! Workload characterisation (the NT real-time study's workload table): what the
//! kernel counted while a load ran, as per-second rates. The binary reads
//! the /proc files once a second; parsing them, the deltas and the rates
//! are here, pure. Also the short CPU score stored with an assessment.

use serde::{Deserialize, Serialize};
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

    fn minus(&self, b: &CpuTimes) -> CpuTimes {
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

    fn plus(&mut self, d: &CpuTimes) {
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

/// /proc/PID/stat (or a thread's, /proc/PID/task/TID/stat): `pid (comm)
/// state ppid pgrp ...`, the name in parentheses (which may hold spaces and
/// parentheses itself), then utime (field 14), stime (15), cutime (16),
/// cstime (17), starttime (22) and processor (39). `pid` and `tid` are both
/// the first field. None when malformed.
pub fn parse_proc_stat(text: &str) -> Option<ProcTicks> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text[..open].trim().parse().ok()?;
    let comm = text.get(open + 1..close)?.to_string();
    let f: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // f[0] is field 3 (state).
    let at = |field: usize| f.get(field - 3).and_then(|v| v.parse::<u64>().ok());
    Some(ProcTicks {
        pid,
        tid: pid,
        start: at(22)?,
        comm,
        ppid: at(4)? as u32,
        pgrp: at(5)? as u32,
        ticks: at(14)? + at(15)?,
        children: at(16)? + at(17)?,
        cpu: at(39).unwrap_or(0) as usize,
        own: false,
    })
}

fn num(s: &str) -> u64 {
    s.parse().unwrap_or(0)
}

/// The `cpuN` lines of /proc/stat and its `intr`, `ctxt`, `processes`.
pub fn parse_stat(text: &str, c: &mut Counters) {
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let Some(key) = f.next() else { continue };
        if let Some(n) = key.strip_prefix("cpu").filter(|n| !n.is_empty()) {
            let Ok(cpu) = n.parse() else { continue };
            let v: Vec<u64> = f.map(num).collect();
            let at = |i: usize| v.get(i).copied().unwrap_or(0);
            c.cpus.push(CpuTimes {
                cpu,
                user: at(0),
                nice: at(1),
                system: at(2),
                idle: at(3),
                iowait: at(4),
                irq: at(5),
                softirq: at(6),
                steal: at(7),
            });
        } else {
            let first = f.next().map(num).unwrap_or(0);
            match key {
                "intr" => c.interrupts = first,
                "ctxt" => c.context_switches = first,
                "processes" => c.forks = first,
                _ => {}
            }
        }
    }
}

/// /proc/softirqs: a header of CPUs, then `NAME: n n ...`.
pub fn parse_softirqs(text: &str, c: &mut Counters) {
    for line in text.lines().skip(1) {
        let Some((name, rest)) = line.split_once(':') else { continue };
        c.softirqs.push((name.trim().to_string(), rest.split_whitespace().map(num).sum()));
    }
}

/// /proc/interrupts: a header of CPUs, then per source its count on each
/// CPU and a description. Numbered IRQs are named `N name` (the device,
/// the last field); the others by their description (`LOC Local timer
/// interrupts`). `ERR` and `MIS` are not sources.
pub fn parse_interrupts(text: &str, c: &mut Counters) {
    let mut lines = text.lines();
    let cpus = lines.next().map_or(0, |h| h.split_whitespace().count());
    for line in lines {
        let Some((id, rest)) = line.split_once(':') else { continue };
        let id = id.trim();
        if id == "ERR" || id == "MIS" {
            continue;
        }
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let counts: Vec<u64> = fields.iter().take(cpus).map_while(|f| f.parse().ok()).collect();
        let desc = &fields[counts.len()..];
        let name = if id.chars().all(|ch| ch.is_ascii_digit()) {
            format!("{id} {}", desc.last().copied().unwrap_or("?"))
        } else if desc.is_empty() {
            id.to_string()
        } else {
            format!("{id} {}", desc.join(" "))
        };
        c.irq_sources.push((name, counts.iter().sum()));
    }
}

/// /proc/diskstats, summed over the devices `whole_disk` accepts (whole
/// disks, so that partitions are not counted twice).
pub fn parse_diskstats(text: &str, whole_disk: &dyn Fn(&str) -> bool, c: &mut Counters) {
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 || !whole_disk(f[2]) {
            continue;
        }
        c.disk.reads += num(f[3]);
        c.disk.read_sectors += num(f[5]);
        c.disk.writes += num(f[7]);
        c.disk.write_sectors += num(f[9]);
    }
}

/// /proc/net/dev: two header lines, then `iface: rx_bytes rx_packets ...
/// (8 receive fields) tx_bytes tx_packets ...`.
pub fn parse_net_dev(text: &str, c: &mut Counters) {
    for line in text.lines().skip(2) {
        let Some((iface, rest)) = line.split_once(':') else { continue };
        let f: Vec<u64> = rest.split_whitespace().map(num).collect();
        if f.len() < 10 {
            continue;
        }
        c.net.push(NetCounters {
            iface: iface.trim().to_string(),
            rx_bytes: f[0],
            rx_packets: f[1],
            tx_bytes: f[8],
            tx_packets: f[9],
        });
    }
}

/// /proc/vmstat's page faults.
pub fn parse_vmstat(text: &str, c: &mut Counters) {
    for line in text.lines() {
        match line.split_once(' ') {
            Some(("pgfault", v)) => c.page_faults = num(v.trim()),
            Some(("pgmajfault", v)) => c.major_faults = num(v.trim()),
            _ => {}
        }
    }
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

fn minus_named(a: &[(String, u64)], b: &[(String, u64)]) -> Vec<(String, u64)> {
    a.iter().map(|(n, v)| (n.clone(), v.saturating_sub(b.iter().find(|(m, _)| m == n).map_or(0, |x| x.1)))).collect()
}

fn plus_named(a: &mut Vec<(String, u64)>, d: &[(String, u64)]) {
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
    fn thread_deltas(&self, before: &Counters) -> Vec<ProcTicks> {
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
        self.own_ticks += d.own_ticks;
    }

    /// Busy share of `cpus` (all when empty), percent.
    fn busy_pct(&self, cpus: &[usize]) -> f64 {
        let (busy, total) = self.cpu_sum(cpus, |c| c.busy());
        pct(busy, total)
    }

    /// (sum of `f`, sum of totals) over `cpus` (all when empty).
    fn cpu_sum(&self, cpus: &[usize], f: impl Fn(&CpuTimes) -> u64) -> (u64, u64) {
        self.cpus
            .iter()
            .filter(|c| cpus.is_empty() || cpus.contains(&c.cpu))
            .fold((0, 0), |(a, t), c| (a + f(c), t + c.total()))
    }
}

fn pct(part: u64, total: u64) -> f64 {
    if total == 0 { 0.0 } else { r2(100.0 * part as f64 / total as f64) }
}

/// Two decimals: rates and shares are stored as they are printed.
fn r2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A named rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    pub name: String,
    pub per_s: f64,
}

/// One CPU's busy share.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuBusy {
    pub cpu: usize,
    pub busy_pct: f64,
    /// The part of it that processes other than rtscope's own used: the
    /// busy share less rtscope's own (`own_pct`) and less interrupt and
    /// softirq time, so processes that came and went between two samples
    /// count (see [`Characterisation::others_busy_pct`]).
    #[serde(default)]
    pub others_pct: f64,
    /// The part of it that rtscope's own processes used (the load, the
    /// probes, their helpers), counted from their CPU time.
    #[serde(default)]
    pub own_pct: f64,
    /// The part of `others_pct` that no thread alive at a sample used:
    /// processes that started and ended between two samples (a build's
    /// compiler runs), and threads that ended.
    #[serde(default)]
    pub others_gone_pct: f64,
}

/// A process other than rtscope's own, and the CPU it used.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessBusy {
    pub pid: u32,
    pub comm: String,
    /// Its CPU time on the load's CPUs, percent of one CPU over the time
    /// sampled.
    pub cpu_pct: f64,
}

impl ProcessBusy {
    /// `comm (pid N) 12.3 %`.
    pub fn describe(&self) -> String {
        format!("{} (pid {}) {:.1} %", self.comm, self.pid, self.cpu_pct)
    }
}

/// What a load is asked to do, in a figure the kernel counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// Its CPUs busy with rtscope's work (the load, the probes, their
    /// helpers): each CPU's share that rtscope's own processes used
    /// ([`CpuBusy::own_pct`]), percent.
    CpuBusy,
    /// Datagrams received on the loopback interface, per second.
    LoopbackPackets,
    /// Writes that reached a whole disk, per second.
    DiskWrites,
    /// Processes created, per second.
    Forks,
    /// Its CPUs used by processes other than rtscope's own, percent: an
    /// idle load's (the baseline's) must stay below the limit.
    OthersBusy,
}

impl Measure {
    /// `%` or the rate's unit.
    pub fn unit(self) -> &'static str {
        match self {
            Measure::CpuBusy | Measure::OthersBusy => "%",
            Measure::LoopbackPackets => "packets/s",
            Measure::DiskWrites => "writes/s",
            Measure::Forks => "processes/s",
        }
    }
}

/// A load's target: what it was asked for and how far below it (above,
/// for [`Measure::OthersBusy`]) it is flagged.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// The load as given.
    pub load: String,
    /// Its CPUs (every CPU of the characterisation when empty).
    pub cpus: Vec<usize>,
    pub measure: Measure,
    pub asked: f64,
    pub limit: f64,
    /// What was asked and why the limit, in words, e.g. `its 2 CPUs 100 %
    /// busy (flagged below 90 %)`.
    pub asked_text: String,
}

/// A load's target against what the kernel counted while it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadCheck {
    pub load: String,
    pub measure: Measure,
    pub asked: f64,
    /// Flagged below it (above it for `others_busy`).
    pub limit: f64,
    pub achieved: f64,
    pub flagged: bool,
    /// One line: what was asked, what it achieved, and when flagged, which
    /// other processes used the CPUs.
    pub message: String,
}

/// One network interface's rates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetRate {
    pub iface: String,
    pub rx_packets_per_s: f64,
    pub tx_packets_per_s: f64,
    pub rx_kb_per_s: f64,
    pub tx_kb_per_s: f64,
}

/// The highest one-second figures seen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Peaks {
    pub cpu_busy_pct: f64,
    pub interrupts_per_s: f64,
    pub context_switches_per_s: f64,
    pub softirqs_per_s: f64,
    pub net_packets_per_s: f64,
    pub disk_write_kb_per_s: f64,
}

/// What the kernel counted while one load ran: the mean per-second rates
/// over the time sampled, and the highest one-second figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Characterisation {
    /// The load as given (`cpu`, `net:1000@1`, `cmd:'make'`).
    pub load: String,
    /// The CPUs it ran on: the CPU shares below are over these.
    pub cpus: Vec<usize>,
    /// Time sampled, s, and one-second samples taken.
    pub seconds: f64,
    pub samples: u64,
    /// Share of the load's CPUs not idle (nor waiting for I/O), and its parts.
    pub cpu_busy_pct: f64,
    pub user_pct: f64,
    pub system_pct: f64,
    pub irq_pct: f64,
    pub softirq_pct: f64,
    pub iowait_pct: f64,
    pub steal_pct: f64,
    pub per_cpu: Vec<CpuBusy>,
    /// Machine-wide rates.
    pub interrupts_per_s: f64,
    pub context_switches_per_s: f64,
    pub forks_per_s: f64,
    pub softirqs_per_s: f64,
    /// Every softirq vector, in the kernel's order.
    pub softirqs: Vec<Rate>,
    /// The busiest interrupt sources (at most 5), busiest first.
    pub top_interrupts: Vec<Rate>,
    pub disk_reads_per_s: f64,
    pub disk_writes_per_s: f64,
    pub disk_read_kb_per_s: f64,
    pub disk_write_kb_per_s: f64,
    /// Every interface that moved a packet.
    pub net: Vec<NetRate>,
    pub page_faults_per_s: f64,
    pub major_faults_per_s: f64,
    pub peak: Peaks,
    /// Share of the load's CPUs that processes other than rtscope's own
    /// (rtscope, its loads' commands, its helpers) used: their busy share
    /// less rtscope's own CPU time and less interrupt and softirq time, so
    /// that processes that came and went between two samples count too.
    #[serde(default)]
    pub others_busy_pct: f64,
    /// Share of the load's CPUs that rtscope's own processes used, from
    /// their CPU time (/proc/PID/stat, their exited threads and reaped
    /// children included): each thread's on the CPU it last ran on, the
    /// time of those that came and went spread over the load's CPUs.
    #[serde(default)]
    pub own_pct: f64,
    /// The part of `others_busy_pct` that no thread alive at a sample
    /// used: processes that came and went between two samples.
    #[serde(default)]
    pub others_gone_pct: f64,
    /// Those processes, busiest first: at most 5, each above 0.5 % of one CPU.
    #[serde(default)]
    pub others: Vec<ProcessBusy>,
    /// Each load's target against what it achieved (none in runs made
    /// before rtscope checked them).
    #[serde(default)]
    pub checks: Vec<LoadCheck>,
    /// Why the load failed (its command could not start, or kept failing
    /// at once): the cells under it failed with this error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl Characterisation {
    /// Packets per second over every interface, received and sent.
    pub fn net_packets_per_s(&self) -> (f64, f64) {
        self.net.iter().fold((0.0, 0.0), |(r, t), n| (r + n.rx_packets_per_s, t + n.tx_packets_per_s))
    }

    pub fn iface(&self, name: &str) -> Option<&NetRate> {
        self.net.iter().find(|n| n.iface == name)
    }

    /// The per-CPU figures of `cpus` (all when empty).
    fn cpus_of<'a>(&'a self, cpus: &'a [usize]) -> impl Iterator<Item = &'a CpuBusy> + 'a {
        self.per_cpu.iter().filter(move |c| cpus.is_empty() || cpus.contains(&c.cpu))
    }

    /// The busiest other processes, for a message: `: comm (pid N) 12.3 %, ...`
    /// or nothing when none used 1 % of a CPU.
    fn others_text(&self) -> String {
        let list: Vec<String> = self.others.iter().filter(|p| p.cpu_pct >= 1.0).take(3).map(|p| p.describe()).collect();
        if list.is_empty() { String::new() } else { format!(": {}", list.join(", ")) }
    }

    /// One word for a report's cell: `failed`, `not idle`, `short`, `ok`,
    /// or `-` when nothing was checked.
    pub fn verdict(&self) -> &'static str {
        if self.failure.is_some() {
            "failed"
        } else if self.checks.iter().any(|c| c.flagged && c.measure == Measure::OthersBusy) {
            "not idle"
        } else if self.checks.iter().any(|c| c.flagged) {
            "short"
        } else if self.checks.is_empty() {
            "-"
        } else {
            "ok"
        }
    }

    /// Checks `t` against what was counted.
    pub fn check(&self, t: &Target) -> LoadCheck {
        let mean = |f: &dyn Fn(&CpuBusy) -> f64| {
            let v: Vec<f64> = self.cpus_of(&t.cpus).map(f).collect();
            if v.is_empty() { 0.0 } else { r2(v.iter().sum::<f64>() / v.len() as f64) }
        };
        let others = mean(&|c| c.others_pct);
        let gone = mean(&|c| c.others_gone_pct);
        let gone_text =
            if gone >= 1.0 { format!(", {gone:.1} % of it by processes that came and went") } else { String::new() };
        let achieved = match t.measure {
            Measure::CpuBusy => mean(&|c| c.own_pct),
            Measure::OthersBusy => others,
            Measure::LoopbackPackets => self.iface("lo").map_or(0.0, |n| n.rx_packets_per_s),
            Measure::DiskWrites => self.disk_writes_per_s,
            Measure::Forks => self.forks_per_s,
        };
        let flagged = match t.measure {
            Measure::OthersBusy => achieved > t.limit,
            _ => achieved < t.limit,
        };
        let unit = t.measure.unit();
        let load = &t.load;
        let message = match (t.measure, flagged) {
            (Measure::OthersBusy, true) => format!(
                "{load} was not idle: processes other than rtscope kept its CPUs {achieved:.1} % busy{gone_text} \
                 (flagged above {} %){}",
                t.limit,
                self.others_text()
            ),
            (Measure::OthersBusy, false) => {
                format!(
                    "{load}: processes other than rtscope kept its CPUs {achieved:.1} % busy{gone_text} (flagged \
                     above {} %)",
                    t.limit
                )
            }
            (Measure::CpuBusy, true) => format!(
                "{load} fell short: asked {}; achieved {achieved:.1} %{}",
                t.asked_text,
                if others >= 1.0 {
                    format!(" (other processes used {others:.1} % of its CPUs{gone_text}{})", self.others_text())
                } else {
                    String::new()
                }
            ),
            (_, true) => format!("{load} fell short: asked {}; achieved {achieved:.1} {unit}", t.asked_text),
            (_, false) => format!("{load}: asked {}; achieved {achieved:.1} {unit}", t.asked_text),
        };
        LoadCheck {
            load: t.load.clone(),
            measure: t.measure,
            asked: t.asked,
            limit: t.limit,
            achieved,
            flagged,
            message,
        }
    }
}

/// Sums the one-second deltas of one load (over every window it was
/// sampled in) and keeps their peaks.
#[derive(Clone, Debug, Default)]
pub struct Accumulator {
    pub load: String,
    pub cpus: Vec<usize>,
    sum: Counters,
    samples: u64,
    peak: Peaks,
    /// Other processes' ticks on each CPU (the one each last ran on), of
    /// the threads seen at a sample.
    others_on: Vec<(usize, u64)>,
    /// Other processes' ticks on the load's CPUs, per (pid, comm).
    others: Vec<ProcTicks>,
    /// rtscope's own ticks on each CPU: its threads' on the one each last
    /// ran on, and the rest of its time spread over the load's CPUs.
    own_on: Vec<(usize, u64)>,
    /// rtscope's own time not placed yet, ticks: below zero when the
    /// kernel's roundings made a second's total fall short of its threads'
    /// (the next seconds' rest makes up for it).
    own_unplaced: i64,
}

/// Adds `v` to `cpu`'s entry of `on`.
fn add_on(on: &mut Vec<(usize, u64)>, cpu: usize, v: u64) {
    match on.iter_mut().find(|x| x.0 == cpu) {
        Some(x) => x.1 += v,
        None => on.push((cpu, v)),
    }
}

fn get_on(on: &[(usize, u64)], cpu: usize) -> u64 {
    on.iter().find(|x| x.0 == cpu).map_or(0, |x| x.1)
}

/// Spreads `amount` over places with the room given, evenly but none above
/// its room (those with the least room take what fits first, the others
/// share what is left): what each got, in `rooms`' order. What finds no
/// room is left out.
fn spread(amount: u64, rooms: &[u64]) -> Vec<u64> {
    let mut order: Vec<usize> = (0..rooms.len()).collect();
    order.sort_by_key(|&i| rooms[i]);
    let mut out = vec![0; rooms.len()];
    let mut left = amount;
    for (k, &i) in order.iter().enumerate() {
        let give = rooms[i].min(left.div_ceil((rooms.len() - k) as u64));
        out[i] = give;
        left -= give;
    }
    out
}

impl Accumulator {
    pub fn new(load: &str, cpus: &[usize]) -> Accumulator {
        Accumulator { load: load.into(), cpus: cpus.to_vec(), ..Default::default() }
    }

    /// Adds the delta `d` (from [`Counters::since`]); a delta of about a
    /// second also counts toward the peaks.
    pub fn add(&mut self, d: &Counters) {
        if d.t_ns == 0 {
            return;
        }
        self.sum.add(d);
        self.place_own(d);
        for p in d.procs.iter().filter(|p| !p.own) {
            add_on(&mut self.others_on, p.cpu, p.ticks);
            if !(self.cpus.is_empty() || self.cpus.contains(&p.cpu)) {
                continue;
            }
            match self.others.iter_mut().find(|x| x.pid == p.pid && x.comm == p.comm) {
                Some(x) => x.ticks += p.ticks,
                None => self.others.push(ProcTicks { tid: p.pid, ..p.clone() }),
            }
        }
        if d.t_ns >= 500_000_000 {
            self.samples += 1;
            let s = d.t_ns as f64 / 1e9;
            let p = &mut self.peak;
            let max = |a: &mut f64, b: f64| *a = a.max(r2(b));
            max(&mut p.cpu_busy_pct, d.busy_pct(&self.cpus));
            max(&mut p.interrupts_per_s, d.interrupts as f64 / s);
            max(&mut p.context_switches_per_s, d.context_switches as f64 / s);
            max(&mut p.softirqs_per_s, d.softirqs.iter().map(|x| x.1).sum::<u64>() as f64 / s);
            max(&mut p.net_packets_per_s, d.net.iter().map(|n| n.rx_packets).sum::<u64>() as f64 / s);
            max(&mut p.disk_write_kb_per_s, d.disk.write_sectors as f64 / 2.0 / s);
        }
    }

    /// Puts rtscope's own time in `d` on CPUs: each own thread's on the CPU
    /// it last ran on; the rest of [`Counters::own_ticks`] (threads that
    /// ended, processes that came and went: a load's short-lived commands)
    /// over the load's CPUs, which its processes are pinned to, evenly, but
    /// on none beyond the time that no thread seen accounts for (its busy
    /// time less interrupts and less the threads seen there), so never
    /// above what the kernel counted busy. A negative rest (roundings) is
    /// carried to the next second, down to what roundings can take (a tick
    /// for each of utime and stime of each thread that ran, a few more for
    /// the processes: anything beyond is an error of the bookkeeping's
    /// assumptions, not carried); a rest that finds no room is left out.
    fn place_own(&mut self, d: &Counters) {
        let (mut seen, mut ran) = (0, 0);
        for p in d.procs.iter().filter(|p| p.own) {
            add_on(&mut self.own_on, p.cpu, p.ticks);
            seen += p.ticks;
            ran += 1;
        }
        let rest = self.own_unplaced.min(0) + d.own_ticks - seen as i64;
        self.own_unplaced = rest.clamp(-(2 * ran + 4), 0);
        if rest <= 0 {
            return;
        }
        let cpus: Vec<&CpuTimes> =
            d.cpus.iter().filter(|c| self.cpus.is_empty() || self.cpus.contains(&c.cpu)).collect();
        let rooms: Vec<u64> = cpus
            .iter()
            .map(|c| {
                let threads: u64 = d.procs.iter().filter(|p| p.cpu == c.cpu).map(|p| p.ticks).sum();
                c.busy().saturating_sub(c.irq + c.softirq).saturating_sub(threads)
            })
            .collect();
        for (c, v) in cpus.iter().zip(spread(rest as u64, &rooms)) {
            add_on(&mut self.own_on, c.cpu, v);
        }
    }

    /// Time covered so far, ns.
    pub fn covered_ns(&self) -> u64 {
        self.sum.t_ns
    }

    /// The mean rates over everything added.
    pub fn finish(&self) -> Characterisation {
        let c = &self.sum;
        let s = (c.t_ns as f64 / 1e9).max(1e-9);
        let rate = |n: u64| r2(n as f64 / s);
        let kb = |sectors: u64| r2(sectors as f64 / 2.0 / s);
        let share = |f: fn(&CpuTimes) -> u64| {
            let (a, t) = c.cpu_sum(&self.cpus, f);
            pct(a, t)
        };
        let mut top: Vec<Rate> =
            c.irq_sources.iter().filter(|x| x.1 > 0).map(|(n, v)| Rate { name: n.clone(), per_s: rate(*v) }).collect();
        top.sort_by(|a, b| b.per_s.total_cmp(&a.per_s).then_with(|| a.name.cmp(&b.name)));
        top.truncate(5);
        // Per CPU: rtscope's own ticks (at most its busy ones), the others'
        // (the busy rest, interrupts aside), and of these the ones that no
        // thread seen at a sample accounts for.
        let split = |t: &CpuTimes| {
            let own = get_on(&self.own_on, t.cpu).min(t.busy());
            let others = t.busy().saturating_sub(t.irq + t.softirq).saturating_sub(own);
            (own, others, others - get_on(&self.others_on, t.cpu).min(others))
        };
        let (others_ticks, total) = c.cpu_sum(&self.cpus, |t| split(t).1);
        let (own_ticks, _) = c.cpu_sum(&self.cpus, |t| split(t).0);
        let (gone_ticks, _) = c.cpu_sum(&self.cpus, |t| split(t).2);
        // Ticks per second of one CPU, from the CPUs' own totals.
        let cpus_seen = c.cpus.iter().filter(|t| self.cpus.is_empty() || self.cpus.contains(&t.cpu)).count();
        let hz = total as f64 / cpus_seen.max(1) as f64 / s;
        let mut others: Vec<ProcessBusy> = self
            .others
            .iter()
            .map(|p| ProcessBusy {
                pid: p.pid,
                comm: p.comm.clone(),
                cpu_pct: if hz > 0.0 { r2(100.0 * p.ticks as f64 / hz / s) } else { 0.0 },
            })
            .filter(|p| p.cpu_pct > 0.5)
            .collect();
        others.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct).then_with(|| a.pid.cmp(&b.pid)));
        others.truncate(5);
        Characterisation {
            load: self.load.clone(),
            cpus: self.cpus.clone(),
            seconds: r2(c.t_ns as f64 / 1e9),
            samples: self.samples,
            cpu_busy_pct: c.busy_pct(&self.cpus),
            user_pct: share(|t| t.user + t.nice),
            system_pct: share(|t| t.system),
            irq_pct: share(|t| t.irq),
            softirq_pct: share(|t| t.softirq),
            iowait_pct: share(|t| t.iowait),
            steal_pct: share(|t| t.steal),
            per_cpu: c
                .cpus
                .iter()
                .filter(|t| self.cpus.is_empty() || self.cpus.contains(&t.cpu))
                .map(|t| {
                    let (own, others, gone) = split(t);
                    CpuBusy {
                        cpu: t.cpu,
                        busy_pct: pct(t.busy(), t.total()),
                        others_pct: pct(others, t.total()),
                        own_pct: pct(own, t.total()),
                        others_gone_pct: pct(gone, t.total()),
                    }
                })
                .collect(),
            interrupts_per_s: rate(c.interrupts),
            context_switches_per_s: rate(c.context_switches),
            forks_per_s: rate(c.forks),
            softirqs_per_s: rate(c.softirqs.iter().map(|x| x.1).sum()),
            softirqs: c.softirqs.iter().map(|(n, v)| Rate { name: n.clone(), per_s: rate(*v) }).collect(),
            top_interrupts: top,
            disk_reads_per_s: rate(c.disk.reads),
            disk_writes_per_s: rate(c.disk.writes),
            disk_read_kb_per_s: kb(c.disk.read_sectors),
            disk_write_kb_per_s: kb(c.disk.write_sectors),
            net: c
                .net
                .iter()
                .filter(|n| n.rx_packets + n.tx_packets > 0)
                .map(|n| NetRate {
                    iface: n.iface.clone(),
                    rx_packets_per_s: rate(n.rx_packets),
                    tx_packets_per_s: rate(n.tx_packets),
                    rx_kb_per_s: r2(n.rx_bytes as f64 / 1024.0 / s),
                    tx_kb_per_s: r2(n.tx_bytes as f64 / 1024.0 / s),
                })
                .collect(),
            page_faults_per_s: rate(c.page_faults),
            major_faults_per_s: rate(c.major_faults),
            peak: self.peak.clone(),
            others_busy_pct: pct(others_ticks, total),
            own_pct: pct(own_ticks, total),
            others_gone_pct: pct(gone_ticks, total),
            others,
            checks: Vec::new(),
            failure: None,
        }
    }
}

/// The short CPU score: an integer and string loop in the spirit of
/// Dhrystone, on one thread, so that machines can be compared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuScore {
    /// Thousands of loop iterations per second: the median of the slices.
    pub score: u64,
    /// What one iteration does, and the version of that loop (a new
    /// version is a new scale).
    pub method: String,
    pub version: u32,
    /// The CPU it ran on, at SCHED_OTHER.
    pub cpu: usize,
    pub slices: u32,
    pub slice_ms: u64,
    /// The slowest and fastest slice, thousands of iterations per second.
    pub min: u64,
    pub max: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The /proc texts of a machine whose counters are `k` times a base.
    fn counters(t_ns: u64, k: u64) -> Counters {
        let mut c = Counters { t_ns, ..Default::default() };
        let stat = format!(
            "cpu  {a} 0 {a} {b} 0 0 0 0 0 0\ncpu0 {h} 0 {h} {q} 0 0 0 0 0 0\ncpu1 {h} 0 {h} {q} 0 0 0 0 0 0\n\
             intr {} 5 6 0\nctxt {}\nbtime 1\nprocesses {}\n",
            1000 * k,
            5000 * k,
            300 * k,
            a = 10 * k,
            b = 80 * k,
            h = 5 * k,
            q = 40 * k
        );
        parse_stat(&stat, &mut c);
        let softirqs = format!(
            "                    CPU0       CPU1\n          HI:          0          0\n       TIMER:  {}  {}\n      NET_RX:  {}  {}\n",
            100 * k,
            200 * k,
            10 * k,
            20 * k
        );
        parse_softirqs(&softirqs, &mut c);
        let interrupts = format!(
            "           CPU0       CPU1\n  0:         22          0   IO-APIC   2-edge      timer\n \
             24:  {}  {}   PCI-MSIX-0000:00:03.0   0-edge      virtio0-input.0\n\
             LOC:  {}  {}   Local timer interrupts\nERR:          0\n",
            100 * k,
            50 * k,
            1000 * k,
            2000 * k
        );
        parse_interrupts(&interrupts, &mut c);
        let disk = format!(
            "   7       0 loop0 9 0 9 0 9 0 9 0 0 0 0\n 253       0 vda {} 0 {} 5 {} 0 {} 9 0 0 0\n \
             253       1 vda1 10 0 80 5 20 0 160 9 0 0 0\n",
            10 * k,
            80 * k,
            20 * k,
            160 * k
        );
        parse_diskstats(&disk, &|d: &str| d == "vda", &mut c);
        let net = format!(
            "Inter-|   Receive   |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes\n    \
             lo: {} {} 0 0 0 0 0 0 {} {} 0 0 0 0 0 0\n  eth0: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
            1024 * k,
            10 * k,
            1024 * k,
            10 * k
        );
        parse_net_dev(&net, &mut c);
        parse_vmstat(&format!("nr_free_pages 5\npgfault {}\npgmajfault {}\n", 100 * k, k), &mut c);
        c
    }

    #[test]
    fn parses_the_proc_files() {
        let c = counters(0, 1);
        assert_eq!(c.cpus.len(), 2);
        assert_eq!(c.cpus[1], CpuTimes { cpu: 1, user: 5, system: 5, idle: 40, ..Default::default() });
        assert_eq!((c.interrupts, c.context_switches, c.forks), (1000, 5000, 300));
        assert_eq!(c.softirqs[1], ("TIMER".to_string(), 300));
        assert_eq!(c.irq_sources[1], ("24 virtio0-input.0".to_string(), 150));
        assert_eq!(c.irq_sources[2], ("LOC Local timer interrupts".to_string(), 3000));
        assert_eq!(c.irq_sources.len(), 3, "ERR is not a source");
        assert_eq!(c.disk, DiskCounters { reads: 10, read_sectors: 80, writes: 20, write_sectors: 160 });
        assert_eq!(c.net[0].rx_packets, 10);
        assert_eq!(c.net[0].tx_bytes, 1024);
        assert_eq!((c.page_faults, c.major_faults), (100, 1));
    }

    #[test]
    fn rates_from_deltas() {
        let a = counters(1_000_000_000, 1);
        let b = counters(3_000_000_000, 3);
        let d = b.since(&a);
        assert_eq!(d.t_ns, 2_000_000_000);
        assert_eq!(d.interrupts, 2000);
        let mut acc = Accumulator::new("cpu", &[1]);
        acc.add(&d);
        let ch = acc.finish();
        assert_eq!(ch.seconds, 2.0);
        assert_eq!(ch.samples, 1);
        assert_eq!(ch.interrupts_per_s, 1000.0);
        assert_eq!(ch.context_switches_per_s, 5000.0);
        assert_eq!(ch.forks_per_s, 300.0);
        assert_eq!(ch.cpu_busy_pct, 20.0);
        // No process seen: all the busy time is other processes', unseen.
        assert_eq!(
            ch.per_cpu,
            vec![CpuBusy { cpu: 1, busy_pct: 20.0, others_pct: 20.0, own_pct: 0.0, others_gone_pct: 20.0 }]
        );
        assert_eq!(ch.user_pct, 10.0);
        assert_eq!(ch.softirqs_per_s, 330.0);
        assert_eq!(ch.top_interrupts[0].name, "LOC Local timer interrupts");
        assert_eq!(ch.top_interrupts[0].per_s, 3000.0);
        assert_eq!(ch.top_interrupts.len(), 2, "IRQ 0 did not move");
        assert_eq!(ch.disk_write_kb_per_s, 80.0, "320 sectors of 512 bytes in 2 s");
        assert_eq!(ch.disk_writes_per_s, 20.0);
        assert_eq!(ch.iface("lo").unwrap().rx_packets_per_s, 10.0);
        assert!(ch.iface("eth0").is_none(), "an interface that moved nothing is left out");
        assert_eq!(ch.page_faults_per_s, 100.0);
        assert_eq!(ch.peak.interrupts_per_s, 1000.0);
        // A second window adds up: rates stay means over the whole time.
        acc.add(&counters(5_000_000_000, 5).since(&b));
        let ch = acc.finish();
        assert_eq!(ch.seconds, 4.0);
        assert_eq!(ch.interrupts_per_s, 1000.0);
        assert_eq!(ch.samples, 2);
    }

    #[test]
    fn process_stat_lines_parse_whatever_the_name() {
        let line = "4242 (a (weird) name) R 17 4242 4242 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 3 0 98765 \
                    1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let p = parse_proc_stat(line).unwrap();
        assert_eq!((p.pid, p.tid, p.ppid, p.pgrp), (4242, 4242, 17, 4242));
        assert_eq!((p.comm.as_str(), p.ticks, p.start, p.cpu), ("a (weird) name", 300, 98765, 1));
        assert!(parse_proc_stat("12 (gone").is_none());
        assert!(parse_proc_stat("12 (short) R 1 1").is_none());
    }

    fn thread(pid: u32, tid: u32, start: u64, ticks: u64, cpu: usize, own: bool) -> ProcTicks {
        ProcTicks { pid, tid, start, comm: format!("p{pid}"), ppid: 1, pgrp: pid, ticks, children: 0, cpu, own }
    }

    /// One second of two CPUs, `busy` ticks of 100 busy on each, with `procs`.
    fn second(t: u64, busy: [u64; 2], procs: Vec<ProcTicks>) -> Counters {
        let cpus =
            (0..2).map(|c| CpuTimes { cpu: c, user: busy[c] * t, idle: (100 - busy[c]) * t, ..Default::default() });
        Counters { t_ns: t * 1_000_000_000, cpus: cpus.collect(), procs, ..Default::default() }
    }

    #[test]
    fn other_processes_are_counted_on_the_cpu_they_ran_on() {
        let a = second(1, [100, 65], vec![thread(10, 10, 5, 1000, 1, false), thread(20, 21, 6, 50, 0, true)]);
        // Over the next second: 10 ran 60 ticks on CPU 1; 20's thread 21
        // ran 90 on CPU 0 (rtscope's own); 30 is new (all its 20 ticks
        // count); 11 reuses an id with another start (all its 5 count).
        let b = second(
            2,
            [100, 65],
            vec![
                thread(10, 10, 5, 1060, 1, false),
                thread(20, 21, 6, 140, 0, true),
                thread(30, 30, 9, 20, 0, false),
                thread(40, 11, 99, 5, 1, false),
            ],
        );
        let d = b.since(&a);
        let ticks: Vec<(u32, u64)> = d.procs.iter().map(|p| (p.tid, p.ticks)).collect();
        assert_eq!(ticks, [(10, 60), (21, 90), (30, 20), (11, 5)]);
        let mut acc = Accumulator::new("idle", &[1]);
        acc.add(&d);
        let c = acc.finish();
        assert_eq!(
            c.per_cpu,
            vec![CpuBusy { cpu: 1, busy_pct: 65.0, others_pct: 65.0, own_pct: 0.0, others_gone_pct: 0.0 }]
        );
        assert_eq!(c.others_busy_pct, 65.0);
        let names: Vec<(u32, f64)> = c.others.iter().map(|p| (p.pid, p.cpu_pct)).collect();
        assert_eq!(names, [(10, 60.0), (40, 5.0)], "only CPU 1's, busiest first; rtscope's own left out");
        assert_eq!(c.others[0].describe(), "p10 (pid 10) 60.0 %");
    }

    fn target(measure: Measure, cpus: &[usize], asked: f64, limit: f64) -> Target {
        Target { load: "l".into(), cpus: cpus.to_vec(), measure, asked, limit, asked_text: "x".into() }
    }

    #[test]
    fn checks_compare_what_was_asked_with_what_the_kernel_counted() {
        let mut acc = Accumulator::new("cpu", &[0, 1]);
        // CPU 0 busy 100 % with 30 % by another process; CPU 1 busy 70 %;
        // the rest rtscope's own.
        let threads =
            vec![thread(10, 10, 5, 30, 0, false), thread(20, 20, 6, 70, 0, true), thread(20, 22, 7, 70, 1, true)];
        acc.add(&second(1, [100, 70], threads).since(&second(0, [0, 0], vec![])));
        let mut c = acc.finish();
        let busy = c.check(&target(Measure::CpuBusy, &[0, 1], 100.0, 90.0));
        assert_eq!((busy.achieved, busy.flagged), (70.0, true), "(70 + 70) / 2: {busy:?}");
        assert!(busy.message.contains("other processes used 15.0 %") && busy.message.contains("p10 (pid 10)"));
        let one = c.check(&target(Measure::CpuBusy, &[1], 60.0, 54.0));
        assert_eq!((one.achieved, one.flagged), (70.0, false));
        let idle = c.check(&target(Measure::OthersBusy, &[0], 0.0, 5.0));
        assert_eq!((idle.achieved, idle.flagged), (30.0, true));
        assert!(idle.message.starts_with("l was not idle") && idle.message.contains("p10 (pid 10) 30.0 %"), "{idle:?}");
        assert!(!c.check(&target(Measure::OthersBusy, &[1], 0.0, 5.0)).flagged);
        let net = c.check(&target(Measure::LoopbackPackets, &[], 250.0, 225.0));
        assert_eq!((net.achieved, net.flagged), (0.0, true));
        assert_eq!(c.verdict(), "-");
        c.checks = vec![one.clone()];
        assert_eq!(c.verdict(), "ok");
        c.checks.push(busy);
        assert_eq!(c.verdict(), "short");
        c.checks.push(idle);
        assert_eq!(c.verdict(), "not idle");
        c.failure = Some("cannot start".into());
        assert_eq!(c.verdict(), "failed");
        // Older runs: none of the new fields.
        let mut v = serde_json::to_value(&c).unwrap();
        for k in ["others_busy_pct", "others", "checks", "failure", "own_pct", "others_gone_pct"] {
            v.as_object_mut().unwrap().remove(k);
        }
        for k in ["others_pct", "own_pct", "others_gone_pct"] {
            v["per_cpu"][0].as_object_mut().unwrap().remove(k);
        }
        let old: Characterisation = serde_json::from_value(v).unwrap();
        assert!(old.checks.is_empty() && old.failure.is_none() && old.others_busy_pct == 0.0);
        assert_eq!((old.own_pct, old.per_cpu[0].own_pct, old.per_cpu[0].others_gone_pct), (0.0, 0.0, 0.0));
    }

    /// A process as /proc/PID/stat shows it: `ticks` its own time (its
    /// threads', live and exited), `children` its reaped children's.
    fn process(pid: u32, ppid: u32, start: u64, ticks: u64, children: u64, own: bool) -> ProcTicks {
        ProcTicks { pid, tid: pid, start, comm: format!("p{pid}"), ppid, pgrp: pid, ticks, children, cpu: 0, own }
    }

    #[test]
    fn own_time_counts_ended_threads_and_reaped_children_once() {
        // rtscope (100, started by a shell 1) and its load's command (200).
        let rt = |ticks, children| process(100, 1, 10, ticks, children, true);
        let shell = process(1, 0, 1, 5000, 900, false);
        // A thread that ended inside a live process: its time stays in the
        // process's utime + stime.
        assert_eq!(own_ticks_since(&[rt(150, 0)], &[rt(100, 0)]), 50);
        // A child seen at the first sample and reaped since by its own
        // parent: the parent's cutime gets its whole life (530), of which
        // 500 was counted before. The double-count trap: 32, not 532.
        let before = [shell.clone(), rt(10, 0), process(200, 100, 20, 500, 0, true)];
        assert_eq!(own_ticks_since(&[shell.clone(), rt(12, 530)], &before), 2 + 30);
        // ... and its own child (300, 40 ticks seen), reaped by it (at 45)
        // before it ended: 2 + 30 + 5.
        let mut before2 = before.to_vec();
        before2.push(process(300, 200, 30, 40, 0, true));
        assert_eq!(own_ticks_since(&[shell.clone(), rt(12, 530 + 45)], &before2), 37);
        // A child that started and ended in between, never seen: all of it.
        assert_eq!(own_ticks_since(&[shell.clone(), rt(10, 75)], &[shell.clone(), rt(10, 0)]), 75);
        // A process started in between and alive: all its time, its reaped
        // children's included.
        let now = [shell.clone(), rt(10, 0), process(201, 100, 25, 40, 8, true)];
        assert_eq!(own_ticks_since(&now, &[shell.clone(), rt(10, 0)]), 48);
        // An orphan (own by its process group, its parent init): when it
        // ends init reaps it and its time after the first sample is lost;
        // its time before is not taken off either.
        let orphan = process(400, 1, 40, 700, 0, true);
        assert_eq!(own_ticks_since(&[shell.clone(), rt(11, 0)], &[shell.clone(), rt(10, 0), orphan.clone()]), 1);
        // Orphaned since and no longer own at the second sample: its time
        // in between still counts (it was rtscope's own).
        let left = process(400, 1, 40, 720, 0, false);
        assert_eq!(own_ticks_since(&[shell.clone(), rt(10, 0), left], &[shell.clone(), rt(10, 0), orphan]), 20);
        // Other processes and their children never count; a pid used again
        // (another start) is another process.
        let other = |ticks, children| process(500, 1, 50, ticks, children, false);
        assert_eq!(own_ticks_since(&[other(90, 60), rt(10, 0)], &[other(10, 0), rt(10, 0)]), 0);
        let reused = process(200, 100, 99, 7, 0, true);
        assert_eq!(own_ticks_since(&[rt(12, 530), reused], &before), 2 + 30 + 7);
    }

    /// One second on CPUs 0 and 1: `busy` ticks of 100 on each, the threads
    /// seen, and rtscope's own total from its processes.
    fn own_second(busy: [u64; 2], procs: Vec<ProcTicks>, own_ticks: i64) -> Counters {
        let d = second(1, busy, procs).since(&second(0, [0, 0], vec![]));
        Counters { own_ticks, ..d }
    }

    #[test]
    fn what_others_started_and_ended_between_samples_is_not_rtscope_s() {
        // The fake stress-ng that sleeps, pinned to CPU 1, beside a stream
        // of short processes: CPU 1 busy 100 %, 40 ticks by a shell seen at
        // the sample, 60 by processes that came and went; rtscope used 1
        // tick (its sampler, on CPU 0).
        let mut acc = Accumulator::new("stress-ng", &[1]);
        acc.add(&own_second([5, 100], vec![thread(7, 7, 1, 40, 1, false), thread(100, 101, 1, 1, 0, true)], 1));
        let c = acc.finish();
        assert_eq!(
            c.per_cpu,
            vec![CpuBusy { cpu: 1, busy_pct: 100.0, others_pct: 100.0, own_pct: 0.0, others_gone_pct: 60.0 }]
        );
        assert_eq!((c.own_pct, c.others_busy_pct, c.others_gone_pct), (0.0, 100.0, 60.0));
        let busy = c.check(&target(Measure::CpuBusy, &[1], 100.0, 90.0));
        assert_eq!((busy.achieved, busy.flagged), (0.0, true));
        assert!(
            busy.message.contains(
                "achieved 0.0 % (other processes used 100.0 % of its CPUs, 60.0 % of it by processes that came and \
                 went: p7 (pid 7) 40.0 %)"
            ),
            "{busy:?}"
        );
        // An idle column beside the same stream is not idle, though the
        // processes seen used 40 % only.
        let idle = c.check(&target(Measure::OthersBusy, &[1], 0.0, 5.0));
        assert_eq!((idle.achieved, idle.flagged), (100.0, true));
        assert!(idle.message.contains("100.0 % busy, 60.0 % of it by processes that came and went"), "{idle:?}");
    }

    #[test]
    fn rtscope_s_own_short_lived_processes_are_spread_over_the_load_s_cpus() {
        // A fork load on CPUs 0 and 1: 80 ticks of children that came and
        // went, 10 of its supervising thread on CPU 0; each CPU 50 busy.
        let mut acc = Accumulator::new("fork", &[0, 1]);
        acc.add(&own_second([50, 50], vec![thread(100, 101, 1, 10, 0, true)], 90));
        let c = acc.finish();
        let own: Vec<(f64, f64, f64)> =
            c.per_cpu.iter().map(|x| (x.own_pct, x.others_pct, x.others_gone_pct)).collect();
        assert_eq!(own, [(50.0, 0.0, 0.0), (40.0, 10.0, 10.0)], "10 + 40 on CPU 0, whose room is 40");
        // Beside another process seen on CPU 0 (60 of its 100): the rest
        // goes where there is room, never above a CPU's busy time, and what
        // finds none is left out.
        let mut acc = Accumulator::new("fork", &[0, 1]);
        acc.add(&own_second([100, 30], vec![thread(7, 7, 1, 60, 0, false)], 80));
        let c = acc.finish();
        let own: Vec<(f64, f64)> = c.per_cpu.iter().map(|x| (x.own_pct, x.others_pct)).collect();
        assert_eq!(own, [(40.0, 60.0), (30.0, 0.0)]);
        // Roundings: a second whose total falls 2 ticks short of its
        // threads' takes them off the next second's rest.
        let mut acc = Accumulator::new("cpu", &[0]);
        acc.add(&own_second([20, 0], vec![thread(100, 101, 1, 10, 0, true)], 8));
        acc.add(&own_second([20, 0], vec![thread(100, 101, 1, 10, 0, true)], 12));
        let c = acc.finish();
        assert_eq!(c.per_cpu[0].own_pct, 10.0, "20 of 200 ticks, not 22");
        // A shortfall no rounding makes (50 ticks; one thread ran: at most
        // 2 + 4) is not carried beyond what roundings could take.
        let mut acc = Accumulator::new("cpu", &[0]);
        acc.add(&own_second([20, 0], vec![thread(100, 101, 1, 10, 0, true)], -40));
        acc.add(&own_second([40, 0], vec![thread(100, 101, 1, 10, 0, true)], 30));
        assert_eq!(acc.finish().per_cpu[0].own_pct, 17.0, "10 + 10 + (20 - 6) of 200 ticks");
        assert_eq!(spread(10, &[0, 100, 3]), [0, 7, 3]);
        assert_eq!(spread(5, &[]), Vec::<u64>::new());
    }

    #[test]
    fn own_time_from_two_samples_of_processes_and_threads() {
        // rtscope (pid 100) and its load's command (200) seen at the first
        // sample; the command ends and is reaped in between (it had used 50,
        // then 20 more); a thread of rtscope's ends too (5 ticks in
        // between); rtscope's main thread ran 3.
        let rt = |t, ticks, children, threads: &[(u32, u64)]| {
            let mut c =
                second(t, [100, 100], threads.iter().map(|&(tid, n)| thread(100, tid, 1, n, 1, true)).collect());
            c.processes = vec![process(100, 1, 1, ticks, children, true)];
            c
        };
        let mut a = rt(1, 100, 0, &[(100, 60), (101, 40)]);
        a.procs.push(thread(200, 200, 2, 50, 1, true));
        a.processes.push(process(200, 100, 2, 50, 0, true));
        let b = rt(2, 108, 70, &[(100, 63)]);
        let d = b.since(&a);
        assert_eq!(d.own_ticks, 3 + 5 + 20);
        let mut acc = Accumulator::new("cmd", &[1]);
        acc.add(&d);
        assert_eq!(acc.finish().per_cpu[0].own_pct, 28.0, "3 seen on CPU 1, 25 spread there");
    }

    #[test]
    fn counters_that_go_back_count_zero() {
        let a = counters(1, 3);
        let b = counters(2, 1);
        let d = b.since(&a);
        assert_eq!(d.interrupts, 0);
        assert_eq!(d.cpus[0].user, 0);
    }
}
