//! System inventory stored with every run, and the "is this run
//! representative?" warnings derived from it.
//!
//! Everything here is pure: the binary crate (`src/sys/inventory.rs`) reads
//! `/proc` and `/sys` and fills an [`Inventory`]; this module only parses
//! strings and judges the result, so it can be unit-tested and can judge
//! inventories stored by other machines.

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
}

/// One reason why a latency figure may not be what the machine can do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// Short stable identifier, one of the `TOPIC_*` constants.
    pub topic: String,
    /// One line: what is wrong.
    pub message: String,
    /// One line: the concrete fix.
    pub fix: String,
}

pub const TOPIC_PRIVILEGES: &str = "privileges";
pub const TOPIC_GOVERNOR: &str = "governor";
pub const TOPIC_SMT: &str = "smt";
pub const TOPIC_ISOLATION: &str = "isolation";
pub const TOPIC_RT_THROTTLING: &str = "rt-throttling";
pub const TOPIC_KERNEL: &str = "kernel";
pub const TOPIC_PREEMPT_MODE: &str = "preempt-mode";
pub const TOPIC_CLOCKSOURCE: &str = "clocksource";
pub const TOPIC_HYPERVISOR: &str = "hypervisor";
pub const TOPIC_CSTATES: &str = "cstates";

/// Topics that are notes about the setup rather than problems with the run.
const INFORMATIONAL_TOPICS: &[&str] =
    &[TOPIC_ISOLATION, TOPIC_RT_THROTTLING, TOPIC_KERNEL, TOPIC_HYPERVISOR, TOPIC_CSTATES];

impl Warning {
    fn new(topic: &str, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Warning { topic: topic.to_string(), message: message.into(), fix: fix.into() }
    }

    /// True for notes (no isolation, RT throttling on, not PREEMPT_RT,
    /// hypervisor, C-states) rather than problems that distort the figures.
    pub fn is_informational(&self) -> bool {
        INFORMATIONAL_TOPICS.contains(&self.topic.as_str())
    }
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

    /// Warnings a real-time engineer wants to see before trusting a latency
    /// figure measured on `measured_cpus` (empty: all online CPUs), most
    /// serious first. Use [`Warning::is_informational`] to tell notes apart.
    pub fn warnings(&self, measured_cpus: &[usize]) -> Vec<Warning> {
        let mut measured: Vec<usize> =
            if measured_cpus.is_empty() { self.online_cpus() } else { measured_cpus.to_vec() };
        measured.sort_unstable();
        measured.dedup();
        CHECKS.iter().filter_map(|check| check(self, &measured)).collect()
    }

    /// The preemption model, "unknown" when not known.
    fn model(&self) -> &str {
        if self.preempt_model.is_empty() { "unknown" } else { self.preempt_model.as_str() }
    }
}

/// One check of an inventory for the measured CPUs (sorted, each once):
/// its warning, or None.
type Check = fn(&Inventory, &[usize]) -> Option<Warning>;

/// Every check, in the order [`Inventory::warnings`] gives them: the
/// problems that distort the figures, most serious first, then the notes.
const CHECKS: [Check; 11] = [
    privileges,
    governor,
    smt,
    preempt_dynamic,
    preempt_built,
    clocksource,
    isolation,
    rt_throttling,
    kernel,
    hypervisor,
    cstates,
];

/// Not root and no CAP_SYS_NICE: the probes run at SCHED_OTHER.
fn privileges(inv: &Inventory, _: &[usize]) -> Option<Warning> {
    (!inv.representative()).then(|| {
        Warning::new(
            TOPIC_PRIVILEGES,
            "not root and no CAP_SYS_NICE: probes run at SCHED_OTHER; results are not representative",
            PRIVILEGES_FIX,
        )
    })
}

/// Frequency scaling on a measured CPU.
fn governor(inv: &Inventory, measured: &[usize]) -> Option<Warning> {
    let slow: Vec<String> = measured
        .iter()
        .filter_map(|&c| {
            let g = inv.governor_of(c)?.governor.as_deref()?;
            (g != "performance").then(|| format!("cpu{c}={g}"))
        })
        .collect();
    (!slow.is_empty()).then(|| {
        Warning::new(
            TOPIC_GOVERNOR,
            format!(
                "cpufreq governor is not performance on measured CPUs ({}): frequency ramps add latency",
                abbreviate(&slow, 8)
            ),
            "cpupower frequency-set -g performance (or echo performance > /sys/devices/system/cpu/cpuN/cpufreq/scaling_governor)",
        )
    })
}

/// SMT siblings of measured CPUs doing other work.
fn smt(inv: &Inventory, measured: &[usize]) -> Option<Warning> {
    if inv.smt_active != Some(true) {
        return None;
    }
    let isolated = inv.isolated_cpus();
    let mut busy: Vec<usize> = measured
        .iter()
        .flat_map(|&c| inv.siblings_of(c))
        .filter(|s| !measured.contains(s) && !isolated.contains(s))
        .collect();
    busy.sort_unstable();
    busy.dedup();
    (!busy.is_empty()).then(|| {
        Warning::new(
            TOPIC_SMT,
            format!(
                "SMT is active and sibling {} {} of the measured CPUs {} neither measured nor isolated: they share \
                 the core",
                if busy.len() == 1 { "CPU" } else { "CPUs" },
                format_cpu_list(&busy),
                if busy.len() == 1 { "is" } else { "are" }
            ),
            format!(
                "boot with nosmt (or echo off > /sys/devices/system/cpu/smt/control), or isolate CPUs {}",
                format_cpu_list(&busy)
            ),
        )
    })
}

/// A PREEMPT_DYNAMIC kernel running in a mode that does not preempt kernel code.
fn preempt_dynamic(inv: &Inventory, _: &[usize]) -> Option<Warning> {
    let mode @ ("none" | "voluntary") = inv.preempt_dynamic_mode()? else { return None };
    Some(Warning::new(
        TOPIC_PREEMPT_MODE,
        format!("PREEMPT_DYNAMIC kernel running in preempt={mode} mode: kernel code is not preempted for RT tasks"),
        "boot with preempt=full (or echo full > /sys/kernel/debug/sched/preempt)",
    ))
}

/// A kernel built without preemption of kernel code (never PREEMPT_DYNAMIC,
/// so never together with [`preempt_dynamic`]'s warning).
fn preempt_built(inv: &Inventory, _: &[usize]) -> Option<Warning> {
    let model = inv.model();
    matches!(model, "NONE" | "VOLUNTARY").then(|| {
        Warning::new(
            TOPIC_PREEMPT_MODE,
            format!("kernel is built with preemption model {model}: kernel code is not preempted for RT tasks"),
            "use a PREEMPT or PREEMPT_RT kernel (e.g. Debian's linux-image-rt-*)",
        )
    })
}

/// Another clocksource than the TSC on x86_64.
fn clocksource(inv: &Inventory, _: &[usize]) -> Option<Warning> {
    (inv.arch == "x86_64" && !inv.clocksource.is_empty() && inv.clocksource != "tsc").then(|| {
        Warning::new(
            TOPIC_CLOCKSOURCE,
            format!(
                "clocksource is {} rather than tsc: clock reads are slower and timestamps coarser",
                inv.clocksource
            ),
            "boot with clocksource=tsc once the TSC is known stable (check dmesg for \"TSC unstable\")",
        )
    })
}

/// A note: measured CPUs that are neither isolated nor tickless.
fn isolation(inv: &Inventory, measured: &[usize]) -> Option<Warning> {
    let isolated = inv.isolated_cpus();
    let nohz = inv.nohz_full_cpus();
    let housekeeping: Vec<usize> =
        measured.iter().copied().filter(|c| !isolated.contains(c) && !nohz.contains(c)).collect();
    if housekeeping.is_empty() {
        return None;
    }
    // Never suggest isolating every CPU: keep the first one for
    // housekeeping.
    let online = inv.online_cpus();
    let mut to_isolate = housekeeping.clone();
    if online.len() > 1 && online.iter().all(|c| to_isolate.contains(c)) {
        to_isolate.retain(|&c| c != online[0]);
    }
    let fix = if online.len() == 1 || to_isolate.is_empty() {
        "isolation needs a second CPU for housekeeping; measure on a machine with more CPUs".to_string()
    } else {
        format!(
            "boot with isolcpus=domain,managed_irq,{0} nohz_full={0} rcu_nocbs={0} and measure those",
            format_cpu_list(&to_isolate)
        )
    };
    Some(Warning::new(
        TOPIC_ISOLATION,
        format!(
            "measured {} {} {} not in isolcpus/nohz_full: per-CPU figures include housekeeping noise",
            if housekeeping.len() == 1 { "CPU" } else { "CPUs" },
            format_cpu_list(&housekeeping),
            if housekeeping.len() == 1 { "is" } else { "are" }
        ),
        fix,
    ))
}

/// A note: RT throttling is on.
fn rt_throttling(inv: &Inventory, _: &[usize]) -> Option<Warning> {
    let rt = inv.rt_runtime_us.filter(|&rt| rt >= 0)?;
    let period = inv.rt_period_us.map_or_else(|| "rt_period_us".to_string(), |p| format!("{p} us"));
    Some(Warning::new(
        TOPIC_RT_THROTTLING,
        format!("RT throttling on: a SCHED_FIFO thread is throttled after {rt} us per {period}"),
        "echo -1 > /proc/sys/kernel/sched_rt_runtime_us (only if you know what you do: a runaway RT thread then hangs the CPU)",
    ))
}

/// A note: the kernel is not PREEMPT_RT.
fn kernel(inv: &Inventory, _: &[usize]) -> Option<Warning> {
    let model = inv.model();
    (model != "PREEMPT_RT").then(|| {
        Warning::new(
            TOPIC_KERNEL,
            format!("kernel is {model}, not PREEMPT_RT: expect worse tails than PREEMPT_RT"),
            "use a PREEMPT_RT kernel (e.g. Debian's linux-image-rt-*, or CONFIG_PREEMPT_RT=y on 6.12+)",
        )
    })
}

/// A note: a hypervisor can preempt the machine.
fn hypervisor(inv: &Inventory, _: &[usize]) -> Option<Warning> {
    let h = inv.hypervisor.as_ref()?;
    Some(Warning::new(
        TOPIC_HYPERVISOR,
        format!(
            "running under a hypervisor ({h}): the host can preempt this VM; spikes of milliseconds are the host's, not Linux's"
        ),
        "measure on bare metal, or pin and isolate the vCPUs on the host",
    ))
}

/// A note: deep C-states allowed on bare metal (in a VM the host decides).
fn cstates(inv: &Inventory, _: &[usize]) -> Option<Warning> {
    (inv.hypervisor.is_none()
        && inv.max_cstate_hint.is_none()
        && matches!(inv.cpu_idle_driver.as_deref(), Some("intel_idle" | "acpi_idle")))
    .then(|| {
        Warning::new(
            TOPIC_CSTATES,
            "deep C-states are allowed: waking from them adds tens of us to the first wake-ups after idle",
            "boot with intel_idle.max_cstate=1 processor.max_cstate=1, or hold /dev/cpu_dma_latency at 0",
        )
    })
}

/// `a, b, c, ... (+N more)` for long lists.
fn abbreviate(items: &[String], max: usize) -> String {
    if items.len() <= max {
        items.join(", ")
    } else {
        format!("{}, ... (+{} more)", items[..max].join(", "), items.len() - max)
    }
}

/// Parse a kernel CPU list: `0`, `0-3`, `0,2-3`, `0-15:2/4` (the first 2 of
/// every group of 4). Whitespace around the list is ignored; an empty list
/// gives an empty vector. The result is sorted and deduplicated.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let list = s.trim();
    let mut cpus = Vec::new();
    if list.is_empty() {
        return Ok(cpus);
    }
    let num = |t: &str| -> Result<usize, String> {
        let t = t.trim();
        let n: usize = t.parse().map_err(|_| format!("invalid CPU list {list:?}: {t:?} is not a CPU number"))?;
        if n > MAX_CPU {
            return Err(format!("invalid CPU list {list:?}: CPU {n} is above the limit {MAX_CPU}"));
        }
        Ok(n)
    };
    for token in list.split(',') {
        let token = token.trim();
        if token.is_empty() {
            return Err(format!("invalid CPU list {list:?}: empty entry"));
        }
        let (range, group) = match token.split_once(':') {
            Some((r, g)) => (r, Some(g)),
            None => (token, None),
        };
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let n = num(range)?;
                (n, n)
            }
        };
        if lo > hi {
            return Err(format!("invalid CPU list {list:?}: range {lo}-{hi} is reversed"));
        }
        let (used, size) = match group {
            None => (1, 1),
            Some(g) => {
                let (u, z) = g
                    .split_once('/')
                    .ok_or_else(|| format!("invalid CPU list {list:?}: group {g:?} is not used/size"))?;
                let (u, z) = (num(u)?, num(z)?);
                if u == 0 || z == 0 || u > z {
                    return Err(format!("invalid CPU list {list:?}: group {g:?} needs 0 < used <= size"));
                }
                (u, z)
            }
        };
        cpus.extend((lo..=hi).filter(|c| (c - lo) % size < used));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Inverse of [`parse_cpu_list`]: `[0, 1, 2, 3, 5, 8, 9]` → `"0-3,5,8-9"`.
/// Input need not be sorted; duplicates are ignored.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        parts.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    parts.join(",")
}

/// CPUs of an `isolcpus=` value, skipping its leading flags
/// (`isolcpus=nohz,domain,managed_irq,2-3` → `[2, 3]`).
pub fn isolcpus_cpus(value: &str) -> Result<Vec<usize>, String> {
    let mut rest = value.trim();
    loop {
        let (head, tail) = rest.split_once(',').unwrap_or((rest, ""));
        if !head.is_empty() && head.chars().all(|c| c.is_ascii_alphabetic() || c == '_') {
            rest = tail;
        } else {
            break;
        }
    }
    parse_cpu_list(rest)
}

/// Value of `key=` on a kernel command line; `Some("")` when the key is given
/// without a value, None when absent. Like the kernel, `-` and `_` are the
/// same in key names, double-quoted values may hold spaces, the last
/// occurrence wins, and everything after a bare `--` belongs to init.
pub fn cmdline_param(cmdline: &str, key: &str) -> Option<String> {
    let norm = |s: &str| s.replace('-', "_");
    let want = norm(key);
    let mut found = None;
    for arg in split_cmdline(cmdline) {
        if arg == "--" {
            break;
        }
        let (k, v) = match arg.split_once('=') {
            Some((k, v)) => (k, v),
            None => (arg.as_str(), ""),
        };
        if norm(k) == want {
            found = Some(v.replace('"', ""));
        }
    }
    found
}

/// Split a command line on whitespace outside double quotes.
fn split_cmdline(cmdline: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in cmdline.chars() {
        if c == '"' {
            quoted = !quoted;
            cur.push(c);
        } else if c.is_whitespace() && !quoted {
            if !cur.is_empty() {
                args.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        args.push(cur);
    }
    args
}

/// Preemption model from `/sys/kernel/realtime` (content, if the file
/// exists), `uname -v` and `/sys/kernel/debug/sched/preempt` (content, if
/// readable, e.g. `none voluntary (full) lazy`; a bare mode word such as
/// `full` is accepted too).
///
/// Returns "PREEMPT_RT", "PREEMPT_DYNAMIC(<mode>)", "PREEMPT_DYNAMIC" (mode
/// unknown), "PREEMPT", "PREEMPT_LAZY" or "unknown" (no PREEMPT token: NONE or
/// VOLUNTARY, which only the kernel config tells; see
/// [`preempt_model_from_kconfig`]).
pub fn preempt_model(realtime: Option<&str>, uname_v: &str, debug_preempt: Option<&str>) -> String {
    if realtime.map(str::trim) == Some("1") {
        return "PREEMPT_RT".to_string();
    }
    let has = |t: &str| uname_v.split_whitespace().any(|w| w == t);
    if has("PREEMPT_RT") {
        "PREEMPT_RT".to_string()
    } else if has("PREEMPT_DYNAMIC") {
        match debug_preempt.and_then(preempt_mode_word) {
            Some(mode) => format!("PREEMPT_DYNAMIC({mode})"),
            None => "PREEMPT_DYNAMIC".to_string(),
        }
    } else if has("PREEMPT_LAZY") {
        "PREEMPT_LAZY".to_string()
    } else if has("PREEMPT") {
        "PREEMPT".to_string()
    } else {
        "unknown".to_string()
    }
}

/// The current mode in `none voluntary (full) lazy`, or a bare word.
fn preempt_mode_word(s: &str) -> Option<&str> {
    let s = s.trim();
    if let (Some(a), Some(b)) = (s.find('('), s.find(')'))
        && a < b
    {
        let w = s[a + 1..b].trim();
        return (!w.is_empty()).then_some(w);
    }
    let mut words = s.split_whitespace();
    match (words.next(), words.next()) {
        (Some(w), None) if w.chars().all(|c| c.is_ascii_alphabetic()) => Some(w),
        _ => None,
    }
}

/// Preemption model from a kernel `.config` (`/boot/config-$(uname -r)`):
/// "PREEMPT_RT", "PREEMPT_DYNAMIC(<default mode>)", "PREEMPT_LAZY", "PREEMPT",
/// "VOLUNTARY" or "NONE"; None if the config says nothing about it.
/// For PREEMPT_DYNAMIC the mode is the boot default, which `preempt=` on the
/// cmdline or debugfs may have changed.
pub fn preempt_model_from_kconfig(kconfig: &str) -> Option<String> {
    let on = |opt: &str| kconfig.lines().any(|l| l.trim().strip_prefix(opt).is_some_and(|r| r == "=y"));
    let base = if on("CONFIG_PREEMPT_LAZY") {
        "lazy"
    } else if on("CONFIG_PREEMPT") {
        "full"
    } else if on("CONFIG_PREEMPT_VOLUNTARY") {
        "voluntary"
    } else if on("CONFIG_PREEMPT_NONE") {
        "none"
    } else {
        ""
    };
    if on("CONFIG_PREEMPT_RT") {
        Some("PREEMPT_RT".to_string())
    } else if on("CONFIG_PREEMPT_DYNAMIC") {
        Some(if base.is_empty() { "PREEMPT_DYNAMIC".to_string() } else { format!("PREEMPT_DYNAMIC({base})") })
    } else {
        match base {
            "lazy" => Some("PREEMPT_LAZY".to_string()),
            "full" => Some("PREEMPT".to_string()),
            "voluntary" => Some("VOLUNTARY".to_string()),
            "none" => Some("NONE".to_string()),
            _ => None,
        }
    }
}

/// Whether capability `bit` is in the `CapEff:` mask of a
/// `/proc/<pid>/status` text. False when the line is missing or malformed.
pub fn cap_eff_has(status: &str, bit: u32) -> bool {
    if bit >= 64 {
        return false;
    }
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|mask| mask & (1u64 << bit) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_cpu_list_basic() {
        assert_eq!(parse_cpu_list("0"), Ok(vec![0]));
        assert_eq!(parse_cpu_list("0-3"), Ok(vec![0, 1, 2, 3]));
        assert_eq!(parse_cpu_list("0,2-3"), Ok(vec![0, 2, 3]));
        assert_eq!(parse_cpu_list("0-1\n"), Ok(vec![0, 1]));
        assert_eq!(parse_cpu_list(""), Ok(vec![]));
        assert_eq!(parse_cpu_list(" \n"), Ok(vec![]));
        assert_eq!(parse_cpu_list("5,1,3-4,1"), Ok(vec![1, 3, 4, 5]));
        assert_eq!(parse_cpu_list("2-2"), Ok(vec![2]));
    }

    #[test]
    fn parse_cpu_list_groups() {
        assert_eq!(parse_cpu_list("8-15:2/4"), Ok(vec![8, 9, 12, 13]));
        assert_eq!(parse_cpu_list("0-7:1/2"), Ok(vec![0, 2, 4, 6]));
        assert_eq!(parse_cpu_list("0,8-15:2/4"), Ok(vec![0, 8, 9, 12, 13]));
    }

    #[test]
    fn parse_cpu_list_errors() {
        for bad in ["a", "1-", "-1", "3-1", "0,,1", "1:2", "0-7:0/2", "0-7:3/2", "N", "0-99999999"] {
            let err = parse_cpu_list(bad).expect_err(bad);
            assert!(err.starts_with("invalid CPU list"), "{bad}: {err}");
        }
        assert!(parse_cpu_list("3-1").unwrap_err().contains("reversed"));
        assert!(parse_cpu_list("x").unwrap_err().contains("\"x\" is not a CPU number"));
    }

    #[test]
    fn format_cpu_list_roundtrip() {
        assert_eq!(format_cpu_list(&[]), "");
        assert_eq!(format_cpu_list(&[0]), "0");
        assert_eq!(format_cpu_list(&[0, 1]), "0-1");
        assert_eq!(format_cpu_list(&[9, 8, 0, 1, 2, 3, 5, 3]), "0-3,5,8-9");
        for s in ["0", "0-3", "0,2-3", "1,3,5,7", "0-3,8-11,16"] {
            assert_eq!(format_cpu_list(&parse_cpu_list(s).unwrap()), s);
        }
    }

    #[test]
    fn isolcpus_flags() {
        assert_eq!(isolcpus_cpus("2-3"), Ok(vec![2, 3]));
        assert_eq!(isolcpus_cpus("nohz,domain,managed_irq,2-3"), Ok(vec![2, 3]));
        assert_eq!(isolcpus_cpus("domain,1,5"), Ok(vec![1, 5]));
        assert!(isolcpus_cpus("domain,x-1").is_err());
    }

    #[test]
    fn cmdline_param_cases() {
        let c = "BOOT_IMAGE=/vmlinuz root=UUID=ab-cd ro isolcpus=domain,2-3 nohz-full=2-3 \
                 rcu_nocbs quiet foo=\"a b\" idle=poll idle=halt -- isolcpus=7";
        assert_eq!(cmdline_param(c, "isolcpus").as_deref(), Some("domain,2-3"));
        assert_eq!(cmdline_param(c, "nohz_full").as_deref(), Some("2-3"));
        assert_eq!(cmdline_param(c, "rcu_nocbs").as_deref(), Some(""));
        assert_eq!(cmdline_param(c, "root").as_deref(), Some("UUID=ab-cd"));
        assert_eq!(cmdline_param(c, "foo").as_deref(), Some("a b"));
        assert_eq!(cmdline_param(c, "idle").as_deref(), Some("halt"));
        assert_eq!(cmdline_param(c, "irqaffinity"), None);
        assert_eq!(cmdline_param(c, "iso"), None);
        assert_eq!(cmdline_param("", "quiet"), None);
    }

    #[test]
    fn preempt_model_cases() {
        let v = "#1 SMP PREEMPT_DYNAMIC Debian 6.1.0";
        assert_eq!(preempt_model(Some("1\n"), v, None), "PREEMPT_RT");
        assert_eq!(preempt_model(Some("0"), "#1 SMP PREEMPT_RT", None), "PREEMPT_RT");
        assert_eq!(preempt_model(None, v, Some("none voluntary (full) lazy\n")), "PREEMPT_DYNAMIC(full)");
        assert_eq!(preempt_model(None, v, Some("none (voluntary) full")), "PREEMPT_DYNAMIC(voluntary)");
        assert_eq!(preempt_model(None, v, Some("full")), "PREEMPT_DYNAMIC(full)");
        assert_eq!(preempt_model(None, v, Some("")), "PREEMPT_DYNAMIC");
        assert_eq!(preempt_model(None, v, None), "PREEMPT_DYNAMIC");
        assert_eq!(preempt_model(None, "#1 SMP PREEMPT Mon Jan 1", None), "PREEMPT");
        assert_eq!(preempt_model(None, "#1 SMP Mon Jan 1", None), "unknown");
        assert_eq!(preempt_model(None, "", None), "unknown");
    }

    #[test]
    fn preempt_model_kconfig() {
        let k = |s: &str| preempt_model_from_kconfig(s);
        assert_eq!(k("CONFIG_PREEMPT_RT=y\nCONFIG_PREEMPT=y\n").as_deref(), Some("PREEMPT_RT"));
        assert_eq!(
            k("CONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\n").as_deref(),
            Some("PREEMPT_DYNAMIC(voluntary)")
        );
        assert_eq!(k("CONFIG_PREEMPT_VOLUNTARY=y\n").as_deref(), Some("VOLUNTARY"));
        assert_eq!(k("CONFIG_PREEMPT_NONE=y\n# CONFIG_PREEMPT_VOLUNTARY is not set\n").as_deref(), Some("NONE"));
        assert_eq!(k("CONFIG_PREEMPT=y\nCONFIG_PREEMPT_COUNT=y\n").as_deref(), Some("PREEMPT"));
        assert_eq!(k("CONFIG_HZ=250\n"), None);
    }

    #[test]
    fn cap_eff_bits() {
        let root = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001fffeffffff\n";
        assert!(cap_eff_has(root, CAP_SYS_NICE_BIT));
        assert!(cap_eff_has(root, 0));
        assert!(!cap_eff_has(root, 24));
        let user = "CapEff:\t0000000000000000\n";
        assert!(!cap_eff_has(user, CAP_SYS_NICE_BIT));
        let nice_only = "CapEff:\t0000000000800000\n";
        assert!(cap_eff_has(nice_only, CAP_SYS_NICE_BIT));
        assert!(!cap_eff_has("CapEff:\tzz\n", 0));
        assert!(!cap_eff_has("", 0));
        assert!(!cap_eff_has(root, 64));
    }

    /// A tuned bare-metal PREEMPT_RT box: no warnings at all.
    fn tuned() -> Inventory {
        Inventory {
            arch: "x86_64".into(),
            preempt_model: "PREEMPT_RT".into(),
            is_root: true,
            cap_sys_nice: true,
            clocksource: "tsc".into(),
            cpus_online: "0-3".into(),
            cpu_count: 4,
            isolated_sysfs: Some("2-3".into()),
            nohz_full_sysfs: Some("2-3".into()),
            smt_active: Some(true),
            siblings: vec![(0, "0-1".into()), (1, "0-1".into()), (2, "2-3".into()), (3, "2-3".into())],
            governors: (0..4)
                .map(|cpu| CpuGovernor {
                    cpu,
                    governor: Some("performance".into()),
                    min_khz: Some(800_000),
                    max_khz: Some(3_000_000),
                })
                .collect(),
            rt_runtime_us: Some(-1),
            rt_period_us: Some(1_000_000),
            cpu_idle_driver: Some("intel_idle".into()),
            max_cstate_hint: Some("intel_idle.max_cstate=1".into()),
            ..Default::default()
        }
    }

    fn topics(w: &[Warning]) -> Vec<&str> {
        w.iter().map(|w| w.topic.as_str()).collect()
    }

    #[test]
    fn tuned_machine_has_no_warnings() {
        let inv = tuned();
        assert!(inv.representative());
        assert_eq!(inv.warnings(&[2]), vec![]);
        assert_eq!(inv.warnings(&[2, 3]), vec![]);
    }

    #[test]
    fn privileges_warning() {
        let mut inv = tuned();
        inv.is_root = false;
        inv.cap_sys_nice = false;
        assert!(!inv.representative());
        let w = inv.warnings(&[2]);
        assert_eq!(topics(&w), vec![TOPIC_PRIVILEGES]);
        assert!(w[0].message.contains("SCHED_OTHER"));
        assert_eq!(w[0].fix, PRIVILEGES_FIX);
        assert!(PRIVILEGES_FIX.contains("setcap cap_sys_nice,cap_ipc_lock+ep"));
        assert!(!w[0].is_informational());
        inv.cap_sys_nice = true;
        assert!(inv.representative());
        assert!(inv.warnings(&[2]).is_empty());
    }

    #[test]
    fn governor_warning_only_for_measured_cpus() {
        let mut inv = tuned();
        inv.governors[3].governor = Some("powersave".into());
        assert!(inv.warnings(&[2]).is_empty());
        let w = inv.warnings(&[2, 3]);
        assert_eq!(topics(&w), vec![TOPIC_GOVERNOR]);
        assert!(w[0].message.contains("cpu3=powersave"));
        assert!(w[0].fix.contains("cpupower frequency-set -g performance"));
        // No cpufreq (VM): no governor warning.
        inv.governors.iter_mut().for_each(|g| g.governor = None);
        assert!(inv.warnings(&[2, 3]).is_empty());
    }

    #[test]
    fn smt_sibling_warning() {
        let mut inv = tuned();
        // Measuring cpu 0 whose sibling 1 is busy and not isolated.
        inv.isolated_sysfs = Some("0,2-3".into());
        inv.nohz_full_sysfs = Some("0,2-3".into());
        let w = inv.warnings(&[0]);
        assert_eq!(topics(&w), vec![TOPIC_SMT]);
        assert!(w[0].message.contains("sibling CPU 1 of the measured CPUs is neither"), "{}", w[0].message);
        assert!(w[0].fix.contains("nosmt"));
        // Measuring both siblings, or SMT off: fine.
        assert!(!topics(&inv.warnings(&[0, 1])).contains(&TOPIC_SMT));
        inv.smt_active = Some(false);
        assert!(inv.warnings(&[0]).is_empty());
    }

    #[test]
    fn isolation_note_and_cmdline_fallback() {
        let mut inv = tuned();
        let w = inv.warnings(&[0, 1, 2]);
        assert_eq!(topics(&w), vec![TOPIC_ISOLATION]);
        assert!(w[0].message.contains("measured CPUs 0-1 are not"));
        assert!(w[0].message.contains("housekeeping noise"));
        let one = inv.warnings(&[1, 2]);
        let one = one.iter().find(|w| w.topic == TOPIC_ISOLATION).expect("the isolation note");
        assert!(one.message.contains("measured CPU 1 is not in isolcpus"), "{}", one.message);
        assert!(w[0].fix.contains("isolcpus="));
        assert!(w[0].is_informational());
        // Sysfs unknown: fall back to the cmdline (with isolcpus flags).
        inv.isolated_sysfs = None;
        inv.nohz_full_sysfs = None;
        inv.isolcpus = Some("domain,managed_irq,2-3".into());
        assert!(inv.warnings(&[2]).is_empty());
        inv.isolcpus = None;
        inv.nohz_full = Some("2-3".into());
        // (cpu 3 is no longer isolated: measure both siblings.)
        assert!(inv.warnings(&[2, 3]).is_empty());
        // Kernel writes "(null)" when nohz_full is unset.
        inv.nohz_full_sysfs = Some("(null)\n".into());
        assert_eq!(topics(&inv.warnings(&[2, 3])), vec![TOPIC_ISOLATION]);
    }

    #[test]
    fn rt_throttling_note() {
        let mut inv = tuned();
        inv.rt_runtime_us = Some(950_000);
        let w = inv.warnings(&[2]);
        assert_eq!(topics(&w), vec![TOPIC_RT_THROTTLING]);
        assert!(w[0].message.contains("950000 us per 1000000 us"));
        assert!(w[0].fix.starts_with("echo -1 > /proc/sys/kernel/sched_rt_runtime_us"));
        assert!(w[0].is_informational());
        inv.rt_runtime_us = None;
        assert!(inv.warnings(&[2]).is_empty());
    }

    #[test]
    fn preempt_warnings() {
        let mut inv = tuned();
        inv.preempt_model = "PREEMPT_DYNAMIC(full)".into();
        assert_eq!(topics(&inv.warnings(&[2])), vec![TOPIC_KERNEL]);
        assert!(inv.warnings(&[2])[0].message.contains("expect worse tails than PREEMPT_RT"));
        inv.preempt_model = "PREEMPT_DYNAMIC(voluntary)".into();
        let w = inv.warnings(&[2]);
        assert_eq!(topics(&w), vec![TOPIC_PREEMPT_MODE, TOPIC_KERNEL]);
        assert!(w[0].fix.contains("preempt=full"));
        assert!(!w[0].is_informational());
        inv.preempt_model = "PREEMPT_DYNAMIC(lazy)".into();
        assert_eq!(topics(&inv.warnings(&[2])), vec![TOPIC_KERNEL]);
        inv.preempt_model = "NONE".into();
        assert_eq!(topics(&inv.warnings(&[2])), vec![TOPIC_PREEMPT_MODE, TOPIC_KERNEL]);
        inv.preempt_model = String::new();
        let w = inv.warnings(&[2]);
        assert_eq!(topics(&w), vec![TOPIC_KERNEL]);
        assert!(w[0].message.contains("kernel is unknown"));
    }

    #[test]
    fn clocksource_warning_on_x86_only() {
        let mut inv = tuned();
        inv.clocksource = "hpet".into();
        let w = inv.warnings(&[2]);
        assert_eq!(topics(&w), vec![TOPIC_CLOCKSOURCE]);
        assert!(w[0].fix.contains("clocksource=tsc"));
        inv.arch = "aarch64".into();
        inv.clocksource = "arch_sys_counter".into();
        assert!(inv.warnings(&[2]).is_empty());
    }

    #[test]
    fn hypervisor_and_cstates_notes() {
        let mut inv = tuned();
        inv.max_cstate_hint = None;
        let w = inv.warnings(&[2]);
        assert_eq!(topics(&w), vec![TOPIC_CSTATES]);
        assert!(w[0].is_informational());
        inv.hypervisor = Some("kvm".into());
        inv.cpu_idle_driver = Some("haltpoll".into());
        let w = inv.warnings(&[2]);
        assert_eq!(topics(&w), vec![TOPIC_HYPERVISOR]);
        assert!(w[0].message.contains("(kvm)"));
        assert!(w[0].message.contains("the host's, not Linux's"));
    }

    #[test]
    fn typical_vm_and_empty_measured_means_all_online() {
        // Like a 2-vCPU Debian VM on a PREEMPT_DYNAMIC kernel, root.
        let inv = Inventory {
            arch: "x86_64".into(),
            preempt_model: "PREEMPT_DYNAMIC".into(),
            is_root: true,
            cap_sys_nice: true,
            clocksource: "kvm-clock".into(),
            cpus_online: "0-1".into(),
            cpu_count: 2,
            isolated_sysfs: Some(String::new()),
            smt_active: Some(false),
            governors: vec![CpuGovernor { cpu: 0, ..Default::default() }],
            rt_runtime_us: Some(950_000),
            rt_period_us: Some(1_000_000),
            hypervisor: Some("unknown".into()),
            ..Default::default()
        };
        let w = inv.warnings(&[]);
        assert_eq!(
            topics(&w),
            vec![TOPIC_CLOCKSOURCE, TOPIC_ISOLATION, TOPIC_RT_THROTTLING, TOPIC_KERNEL, TOPIC_HYPERVISOR]
        );
        assert!(w[1].message.contains("measured CPUs 0-1 "));
        // All CPUs measured: suggest keeping cpu 0 for housekeeping.
        assert!(w[1].fix.contains("isolcpus=domain,managed_irq,1 nohz_full=1 "));
        let mut one = inv.clone();
        one.cpus_online = "0".into();
        let w = one.warnings(&[]);
        let iso = w.iter().find(|w| w.topic == TOPIC_ISOLATION).unwrap();
        assert!(iso.fix.contains("second CPU"));
        for w in &w {
            assert!(!w.message.contains('\n') && !w.fix.contains('\n'));
        }
    }

    #[test]
    fn helpers_on_inventory() {
        let inv = tuned();
        assert_eq!(inv.online_cpus(), vec![0, 1, 2, 3]);
        assert_eq!(inv.isolated_cpus(), vec![2, 3]);
        assert_eq!(inv.nohz_full_cpus(), vec![2, 3]);
        assert_eq!(inv.siblings_of(2), vec![2, 3]);
        assert_eq!(inv.siblings_of(9), Vec::<usize>::new());
        assert_eq!(inv.governor_of(1).and_then(|g| g.max_khz), Some(3_000_000));
        let mut d = inv.clone();
        d.preempt_model = "PREEMPT_DYNAMIC(full)".into();
        assert_eq!(d.preempt_dynamic_mode(), Some("full"));
        assert_eq!(inv.preempt_dynamic_mode(), None);
    }

    #[test]
    fn serde_roundtrip_and_old_json() {
        let inv = tuned();
        let json = serde_json::to_string(&inv).unwrap();
        let back: Inventory = serde_json::from_str(&json).unwrap();
        assert_eq!(back, inv);
        // An older, smaller record still parses; unknown fields are ignored.
        let old: Inventory = serde_json::from_str(r#"{"hostname":"h","kernel_release":"6.1.0","future":1}"#).unwrap();
        assert_eq!(old.hostname, "h");
        assert_eq!(old.kernel_release, "6.1.0");
        assert_eq!(old.rt_runtime_us, None);
        assert!(old.governors.is_empty());
        let g: CpuGovernor = serde_json::from_str(r#"{"cpu":3}"#).unwrap();
        assert_eq!(g.cpu, 3);
        let w = Warning::new(TOPIC_SMT, "m", "f");
        let back: Warning = serde_json::from_str(&serde_json::to_string(&w).unwrap()).unwrap();
        assert_eq!(back, w);
    }
}
