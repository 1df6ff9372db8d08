//! System inventory stored with every run, and the "is this run
//! representative?" warnings derived from it: the record and what it
//! answers about its CPUs here, its clocks, caches and devices in
//! hardware.rs, the tuning checks and their [`Warning`]s in warnings.rs,
//! the kernel's strings (CPU lists, the command line, the preemption
//! model, capability masks) in parse.rs, why the kernel refused a
//! real-time policy in rt_refusal.rs, the isolated CPUs and what still
//! interrupted them during a run in isolation.rs.
//!
//! Everything here is pure: the binary crate (`src/sys/inventory.rs`) reads
//! `/proc` and `/sys` and fills an [`Inventory`]; this module only parses
//! strings and judges the result, so it can be unit-tested and can judge
//! inventories stored by other machines.

mod hardware;
mod isolation;
mod parse;
mod rt_refusal;
mod warnings;

pub use hardware::{Cache, ClockSource, Device};
pub use isolation::*;
pub use parse::*;
pub use rt_refusal::*;
pub use warnings::*;

use serde::{Deserialize, Serialize};

/// Largest CPU number accepted by [`parse_cpu_list`]; guards against
/// allocating billions of entries for a malformed list such as `0-4000000000`.
pub const MAX_CPU: usize = 1 << 20;

/// Bit of `CAP_SYS_NICE` in the capability masks of `/proc/<pid>/status`.
pub const CAP_SYS_NICE_BIT: u32 = 23;

/// The one fix rtscope gives wherever it lacks a privilege (real-time
/// scheduling, locked memory): root, or the capabilities granted once.
pub const PRIVILEGES_FIX: &str = "run as root, or grant rtscope the capabilities once: \
    sudo setcap cap_sys_nice,cap_ipc_lock+ep \"$(command -v rtscope)\" (or raise RLIMIT_RTPRIO and RLIMIT_MEMLOCK)";

/// cpufreq state of one CPU. All fields are `None` where cpufreq is absent
/// (typical in VMs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CpuGovernor {
    pub cpu: usize,
    /// `cpuN/cpufreq/scaling_governor`.
    pub governor: Option<String>,
    /// `cpuN/cpufreq/scaling_min_freq`, kHz.
    pub min_khz: Option<u64>,
    /// `cpuN/cpufreq/scaling_max_freq`, kHz.
    pub max_khz: Option<u64>,
}

/// What the machine looked like when a run was taken. Every field defaults,
/// so JSON written by older versions (with fewer fields) still parses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Inventory {
    /// rtscope version that took the inventory.
    pub tool_version: String,
    pub hostname: String,
    /// `uname -r`.
    pub kernel_release: String,
    /// `uname -v`.
    pub kernel_version: String,
    /// `uname -m`.
    pub arch: String,
    /// See [`preempt_model`]: "PREEMPT_RT", "PREEMPT_DYNAMIC(full)",
    /// "PREEMPT_DYNAMIC", "PREEMPT", "VOLUNTARY", "NONE" or "unknown".
    pub preempt_model: String,
    /// `/sys/kernel/realtime` == 1 (None when the file is absent).
    pub realtime_sysfs: Option<bool>,
    /// `/proc/cmdline`.
    pub cmdline: String,
    /// `isolcpus=` on the cmdline (raw value, flags included).
    pub isolcpus: Option<String>,
    /// `nohz_full=` on the cmdline.
    pub nohz_full: Option<String>,
    /// `rcu_nocbs=` on the cmdline (empty string when given without value).
    pub rcu_nocbs: Option<String>,
    /// `irqaffinity=` on the cmdline.
    pub irqaffinity: Option<String>,
    /// `/sys/devices/system/cpu/isolated`.
    pub isolated_sysfs: Option<String>,
    /// `/sys/devices/system/cpu/nohz_full`.
    pub nohz_full_sysfs: Option<String>,
    /// The CPUs rtscope was started on (its affinity then, online ones):
    /// where its own threads and loads run; on a machine booted with
    /// `isolcpus=`, the housekeeping CPUs. Empty in runs taken before
    /// rtscope recorded it.
    pub home_cpus: String,
    /// The cpuset of rtscope's cgroup, which bounds the CPUs it can
    /// measure: "the cgroup /a (/sys/fs/cgroup/a/cpuset.cpus.effective:
    /// 0-3)"; None where there is no cpuset.
    pub cpuset: Option<String>,
    /// Current clocksource.
    pub clocksource: String,
    /// Available clocksources, space separated as the kernel lists them.
    pub available_clocksources: String,
    pub cpu_model: String,
    /// `/sys/devices/system/cpu/online`, kernel list syntax.
    pub cpus_online: String,
    /// Number of online CPUs.
    pub cpu_count: usize,
    pub governors: Vec<CpuGovernor>,
    /// `/sys/devices/system/cpu/smt/active`.
    pub smt_active: Option<bool>,
    /// `(cpu, cpuN/topology/thread_siblings_list)`.
    pub siblings: Vec<(usize, String)>,
    /// `/proc/sys/kernel/sched_rt_runtime_us` (-1: unlimited).
    pub rt_runtime_us: Option<i64>,
    /// `/proc/sys/kernel/sched_rt_period_us`.
    pub rt_period_us: Option<i64>,
    /// `/proc/sys/kernel/timer_migration`.
    pub timer_migration: Option<bool>,
    /// Hypervisor name ("kvm", "xen", "QEMU", "unknown", ...) when running
    /// under one, None on bare metal (or when it cannot be told).
    pub hypervisor: Option<String>,
    pub euid: u32,
    pub is_root: bool,
    /// CAP_SYS_NICE in the effective capability set.
    pub cap_sys_nice: bool,
    /// `MemTotal` of `/proc/meminfo`.
    pub memory_total_kb: u64,
    /// Mount point of tracefs, if mounted.
    pub tracefs: Option<String>,
    /// `/sys/devices/system/cpu/cpuidle/current_driver`.
    pub cpu_idle_driver: Option<String>,
    /// C-state limits given on the cmdline (`intel_idle.max_cstate=`,
    /// `processor.max_cstate=`, `idle=`, `cpuidle.off=`), space separated.
    pub max_cstate_hint: Option<String>,
    /// What the run held `/dev/cpu_dma_latency` at while it measured
    /// (`--dma-latency`, `--no-dma-latency`).
    pub dma_latency: crate::settings::DmaHeld,
    /// The CPU caches (`cpuN/cache/indexM`), each once however many CPUs
    /// share it; empty where sysfs has none (and in runs taken before
    /// rtscope recorded them).
    pub caches: Vec<Cache>,
    /// The network interfaces, block devices and GPUs backed by a device
    /// (virtual ones left out), with their drivers and interrupts: what
    /// may interrupt a measured CPU.
    pub devices: Vec<Device>,
    /// The clocks rtscope can read, side by side: resolution, smallest
    /// step seen and cost of a read (measured at the run's start).
    pub clocks: Vec<ClockSource>,
}

impl Inventory {
    /// True when probes can run with a real-time policy (root or
    /// CAP_SYS_NICE); otherwise they run at SCHED_OTHER.
    pub fn representative(&self) -> bool {
        self.is_root || self.cap_sys_nice
    }

    /// Online CPUs parsed from `cpus_online` (empty if unknown or malformed).
    pub fn online_cpus(&self) -> Vec<usize> {
        parse_cpu_list(&self.cpus_online).unwrap_or_default()
    }

    /// Isolated CPUs: `/sys/devices/system/cpu/isolated` when known, else the
    /// CPU part of `isolcpus=` on the cmdline.
    pub fn isolated_cpus(&self) -> Vec<usize> {
        if let Some(s) = &self.isolated_sysfs {
            return parse_cpu_list(s).unwrap_or_default();
        }
        self.isolcpus.as_deref().and_then(|s| isolcpus_cpus(s).ok()).unwrap_or_default()
    }

    /// Tickless CPUs: `/sys/devices/system/cpu/nohz_full` when known, else
    /// `nohz_full=` on the cmdline. The kernel writes "(null)" when unset.
    pub fn nohz_full_cpus(&self) -> Vec<usize> {
        let src = self.nohz_full_sysfs.as_deref().or(self.nohz_full.as_deref());
        match src {
            Some(s) if s.trim() != "(null)" => parse_cpu_list(s).unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// The governor entry of `cpu`, if any.
    pub fn governor_of(&self, cpu: usize) -> Option<&CpuGovernor> {
        self.governors.iter().find(|g| g.cpu == cpu)
    }

    /// SMT siblings of `cpu` (including `cpu` itself), empty if unknown.
    pub fn siblings_of(&self, cpu: usize) -> Vec<usize> {
        self.siblings.iter().find(|(c, _)| *c == cpu).and_then(|(_, s)| parse_cpu_list(s).ok()).unwrap_or_default()
    }

    /// The preemption mode of a PREEMPT_DYNAMIC kernel ("full", "voluntary",
    /// ...), None when not dynamic or unknown.
    pub fn preempt_dynamic_mode(&self) -> Option<&str> {
        self.preempt_model.strip_prefix("PREEMPT_DYNAMIC(").and_then(|s| s.strip_suffix(')'))
    }
}

#[cfg(test)]
mod tests;
