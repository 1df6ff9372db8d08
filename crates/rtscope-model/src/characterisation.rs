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
}

impl Characterisation {
    /// Packets per second over every interface, received and sent.
    pub fn net_packets_per_s(&self) -> (f64, f64) {
        self.net.iter().fold((0.0, 0.0), |(r, t), n| (r + n.rx_packets_per_s, t + n.tx_packets_per_s))
    }

    pub fn iface(&self, name: &str) -> Option<&NetRate> {
        self.net.iter().find(|n| n.iface == name)
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
                .map(|t| CpuBusy { cpu: t.cpu, busy_pct: pct(t.busy(), t.total()) })
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
        assert_eq!(ch.per_cpu, vec![CpuBusy { cpu: 1, busy_pct: 20.0 }]);
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
    fn counters_that_go_back_count_zero() {
        let a = counters(1, 3);
        let b = counters(2, 1);
        let d = b.since(&a);
        assert_eq!(d.interrupts, 0);
        assert_eq!(d.cpus[0].user, 0);
    }
}
