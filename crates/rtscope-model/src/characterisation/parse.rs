//! Parsing the /proc files the counters come from: /proc/stat, softirqs,
//! interrupts, diskstats, net/dev, vmstat and a process's or thread's stat.

use super::*;

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

pub(super) fn num(s: &str) -> u64 {
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
    for row in crate::inventory::parse_interrupts_table(text).rows {
        let name = if row.name.is_empty() { row.id } else { format!("{} {}", row.id, row.name) };
        c.irq_sources.push((name, row.counts.iter().sum()));
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
