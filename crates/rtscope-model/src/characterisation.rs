//! Workload characterisation (the NT real-time study's workload table): what the
//! kernel counted while a load ran, as per-second rates. The binary reads
//! the /proc files once a second; parsing them, the deltas and the rates
//! are here, pure. Also the short CPU score stored with an assessment.

use serde::{Deserialize, Serialize};

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
    /// The CPU it last ran on.
    pub cpu: usize,
    /// rtscope itself or one of its descendants (its loads' commands, its
    /// helpers): set by the reader.
    pub own: bool,
}

/// /proc/PID/stat (or a thread's, /proc/PID/task/TID/stat): `pid (comm)
/// state ppid pgrp ...`, the name in parentheses (which may hold spaces and
/// parentheses itself), then utime (field 14), stime (15), starttime (22)
/// and processor (39). `pid` and `tid` are both the first field. None when
/// malformed.
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
            procs: {
                let earlier: std::collections::HashMap<(u32, u64), u64> =
                    before.procs.iter().map(|p| ((p.tid, p.start), p.ticks)).collect();
                // A thread not there before started since: all its time counts.
                self.procs
                    .iter()
                    .filter_map(|p| {
                        let d = p.ticks.saturating_sub(earlier.get(&(p.tid, p.start)).copied().unwrap_or(0));
                        (d > 0).then(|| ProcTicks { ticks: d, ..p.clone() })
                    })
                    .collect()
            },
        }
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
    /// The part of it that processes other than rtscope's own used (see
    /// [`Characterisation::others`]).
    #[serde(default)]
    pub others_pct: f64,
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
    /// Its CPUs busy with rtscope's work (the load, the probes, interrupts):
    /// each CPU's busy share less what other processes used of it, percent.
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
    /// (rtscope, its loads' commands, its helpers) used: each process's CPU
    /// time in each one-second sample counted on the CPU it last ran on.
    #[serde(default)]
    pub others_busy_pct: f64,
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
        let achieved = match t.measure {
            Measure::CpuBusy => mean(&|c| (c.busy_pct - c.others_pct).max(0.0)),
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
                "{load} was not idle: processes other than rtscope kept its CPUs {achieved:.1} % busy (flagged above \
                 {} %){}",
                t.limit,
                self.others_text()
            ),
            (Measure::OthersBusy, false) => {
                format!(
                    "{load}: processes other than rtscope kept its CPUs {achieved:.1} % busy (flagged above {} %)",
                    t.limit
                )
            }
            (Measure::CpuBusy, true) => format!(
                "{load} fell short: asked {}; achieved {achieved:.1} %{}",
                t.asked_text,
                if others >= 1.0 {
                    format!(" (other processes used {others:.1} % of its CPUs{})", self.others_text())
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
    /// Other processes' ticks on each CPU (the one each last ran on).
    others_on: Vec<(usize, u64)>,
    /// Other processes' ticks on the load's CPUs, per (pid, comm).
    others: Vec<ProcTicks>,
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
        for p in d.procs.iter().filter(|p| !p.own) {
            match self.others_on.iter_mut().find(|x| x.0 == p.cpu) {
                Some(x) => x.1 += p.ticks,
                None => self.others_on.push((p.cpu, p.ticks)),
            }
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
        let others_on = |cpu: usize| self.others_on.iter().find(|x| x.0 == cpu).map_or(0, |x| x.1);
        let (others_ticks, total) = c.cpu_sum(&self.cpus, |t| others_on(t.cpu).min(t.total()));
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
                .map(|t| CpuBusy {
                    cpu: t.cpu,
                    busy_pct: pct(t.busy(), t.total()),
                    others_pct: pct(others_on(t.cpu).min(t.total()), t.total()),
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
        assert_eq!(ch.per_cpu, vec![CpuBusy { cpu: 1, busy_pct: 20.0, others_pct: 0.0 }]);
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
        ProcTicks { pid, tid, start, comm: format!("p{pid}"), ppid: 1, pgrp: pid, ticks, cpu, own }
    }

    /// One second of two CPUs, `busy` ticks of 100 busy on each, with `procs`.
    fn second(t: u64, busy: [u64; 2], procs: Vec<ProcTicks>) -> Counters {
        let cpus =
            (0..2).map(|c| CpuTimes { cpu: c, user: busy[c] * t, idle: (100 - busy[c]) * t, ..Default::default() });
        Counters { t_ns: t * 1_000_000_000, cpus: cpus.collect(), procs, ..Default::default() }
    }

    #[test]
    fn other_processes_are_counted_on_the_cpu_they_ran_on() {
        let a = second(1, [100, 100], vec![thread(10, 10, 5, 1000, 1, false), thread(20, 21, 6, 50, 0, true)]);
        // Over the next second: 10 ran 60 ticks on CPU 1; 20's thread 21
        // ran 90 on CPU 0 (rtscope's own); 30 is new (all its 20 ticks
        // count); 11 reuses an id with another start (all its 5 count).
        let b = second(
            2,
            [100, 100],
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
        assert_eq!(c.per_cpu, vec![CpuBusy { cpu: 1, busy_pct: 100.0, others_pct: 65.0 }]);
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
        // CPU 0 busy 100 % with 30 % by another process; CPU 1 busy 70 %.
        acc.add(&second(1, [100, 70], vec![thread(10, 10, 5, 30, 0, false)]).since(&second(0, [0, 0], vec![])));
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
        for k in ["others_busy_pct", "others", "checks", "failure"] {
            v.as_object_mut().unwrap().remove(k);
        }
        v["per_cpu"][0].as_object_mut().unwrap().remove("others_pct");
        let old: Characterisation = serde_json::from_value(v).unwrap();
        assert!(old.checks.is_empty() && old.failure.is_none() && old.others_busy_pct == 0.0);
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
