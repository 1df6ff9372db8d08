//! What a load was measured as: per-second rates, busy shares, the other
//! processes, peaks, and a load's target against what the kernel counted.

use serde::{Deserialize, Serialize};

pub(super) fn pct(part: u64, total: u64) -> f64 {
    if total == 0 { 0.0 } else { r2(100.0 * part as f64 / total as f64) }
}

/// Two decimals: rates and shares are stored as they are printed.
pub(super) fn r2(x: f64) -> f64 {
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
    /// Interrupts per second on the IRQ lines of the device the load
    /// drives ([`Target::devices`]: the lines' numbers or names as in
    /// /proc/interrupts): a serial port, a NIC, a disk.
    DeviceInterrupts,
    /// Packets per second sent on the interface [`Target::devices`] names:
    /// a network load whose interface has no IRQ line of its own (a veth).
    IfacePackets,
}

impl Measure {
    /// `%` or the rate's unit.
    pub fn unit(self) -> &'static str {
        match self {
            Measure::CpuBusy | Measure::OthersBusy => "%",
            Measure::LoopbackPackets => "packets/s",
            Measure::DiskWrites => "writes/s",
            Measure::Forks => "processes/s",
            Measure::DeviceInterrupts => "interrupts/s",
            Measure::IfacePackets => "packets/s",
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
    /// What [`Measure::DeviceInterrupts`] counts: IRQ lines, each an IRQ
    /// number (`36`) or a name (`ttyS1`, `virtio1-req.0`) of
    /// /proc/interrupts; or the interface [`Measure::IfacePackets`]
    /// counts. Empty for the other measures.
    pub devices: Vec<String>,
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
    /// Every interrupt source that moved, in the kernel's order, named
    /// `N name` (numbered IRQ lines) or by description: what a device
    /// load's check counts ([`Measure::DeviceInterrupts`]). Empty in runs
    /// stored before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interrupt_sources: Vec<Rate>,
    pub disk_reads_per_s: f64,
    pub disk_writes_per_s: f64,
    pub disk_read_kb_per_s: f64,
    pub disk_write_kb_per_s: f64,
    /// Every interface that moved a packet.
    pub net: Vec<NetRate>,
    pub page_faults_per_s: f64,
    pub major_faults_per_s: f64,
    /// System calls per second on every CPU (the NT real-time study's
    /// workload row), from the `raw_syscalls:sys_enter` tracepoint counted
    /// by perf; None where they could not be counted (not root, no
    /// tracefs) and in runs taken before they were.
    #[serde(default)]
    pub syscalls_per_s: Option<f64>,
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

    /// The interrupt sources that `devices` name (an IRQ number, or a
    /// source's name: the last word of its /proc/interrupts line).
    pub fn device_lines(&self, devices: &[String]) -> Vec<&Rate> {
        self.interrupt_sources
            .iter()
            .filter(|r| {
                let (id, name) = r.name.split_once(' ').unwrap_or((r.name.as_str(), ""));
                devices.iter().any(|d| d == id || (!name.is_empty() && d == name))
            })
            .collect()
    }

    pub fn iface(&self, name: &str) -> Option<&NetRate> {
        self.net.iter().find(|n| n.iface == name)
    }

    /// The per-CPU figures of `cpus` (all when empty).
    pub(super) fn cpus_of<'a>(&'a self, cpus: &'a [usize]) -> impl Iterator<Item = &'a CpuBusy> + 'a {
        self.per_cpu.iter().filter(move |c| cpus.is_empty() || cpus.contains(&c.cpu))
    }

    /// The busiest other processes, for a message: `: comm (pid N) 12.3 %, ...`
    /// or nothing when none used 1 % of a CPU.
    pub(super) fn others_text(&self) -> String {
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
            Measure::DeviceInterrupts => r2(self.device_lines(&t.devices).iter().map(|r| r.per_s).sum()),
            Measure::IfacePackets => t.devices.first().and_then(|i| self.iface(i)).map_or(0.0, |n| n.tx_packets_per_s),
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
            (Measure::DeviceInterrupts, _) => {
                let lines: Vec<String> =
                    self.device_lines(&t.devices).iter().map(|r| format!("{} {:.1}/s", r.name, r.per_s)).collect();
                let lines = if lines.is_empty() { "none moved".to_string() } else { lines.join(", ") };
                let head = if flagged { format!("{load} fell short") } else { load.to_string() };
                format!("{head}: asked {}; achieved {achieved:.1} {unit} ({lines})", t.asked_text)
            }
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
