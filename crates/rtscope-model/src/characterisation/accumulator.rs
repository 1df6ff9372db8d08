//! Summing one load's one-second deltas over every window it was sampled in.

use super::*;

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
pub(super) fn add_on(on: &mut Vec<(usize, u64)>, cpu: usize, v: u64) {
    match on.iter_mut().find(|x| x.0 == cpu) {
        Some(x) => x.1 += v,
        None => on.push((cpu, v)),
    }
}

pub(super) fn get_on(on: &[(usize, u64)], cpu: usize) -> u64 {
    on.iter().find(|x| x.0 == cpu).map_or(0, |x| x.1)
}

/// Spreads `amount` over places with the room given, evenly but none above
/// its room (those with the least room take what fits first, the others
/// share what is left): what each got, in `rooms`' order. What finds no
/// room is left out.
pub(super) fn spread(amount: u64, rooms: &[u64]) -> Vec<u64> {
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
    pub(super) fn place_own(&mut self, d: &Counters) {
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
            interrupt_sources: c
                .irq_sources
                .iter()
                .filter(|x| x.1 > 0)
                .map(|(n, v)| Rate { name: n.clone(), per_s: rate(*v) })
                .collect(),
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
            syscalls_per_s: c.syscalls.map(rate),
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
