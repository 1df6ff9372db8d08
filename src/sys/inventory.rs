//! Collect the system [`Inventory`] stored with every run.
//!
//! Every read is relative to a root directory so tests can point
//! [`collect_from`] at a fake `/proc` + `/sys` tree. Nothing here panics: a
//! missing or unreadable file leaves its field empty / `None`.

use std::fs;
use std::path::Path;

use rtscope_model::inventory::{
    CAP_SYS_NICE_BIT, Cache, CpuGovernor, Device, Interrupts, Inventory, cap_eff_has, cmdline_param, parse_cpu_list,
    parse_interrupts_table, preempt_model, preempt_model_from_kconfig,
};

/// Inventory of the running machine and process.
pub fn collect() -> Inventory {
    let u = rustix::system::uname();
    let lossy = |c: &std::ffi::CStr| c.to_string_lossy().into_owned();
    let uts = Uts {
        hostname: lossy(u.nodename()),
        release: lossy(u.release()),
        version: lossy(u.version()),
        machine: lossy(u.machine()),
    };
    let mut inv = collect_impl(Path::new("/"), Some(uts));
    inv.clocks = super::clocks::measure();
    inv.euid = rustix::process::geteuid().as_raw();
    inv.is_root = inv.euid == 0;
    inv.home_cpus = rtscope_model::inventory::format_cpu_list(&super::cpu::home());
    inv.cpuset = super::cpu::cpuset().map(|c| c.describe());
    #[cfg(target_arch = "x86_64")]
    if inv.hypervisor.as_deref() == Some("unknown")
        && let Some(v) = cpuid_hypervisor_vendor()
    {
        inv.hypervisor = Some(v);
    }
    inv
}

/// `/proc/interrupts` now: per interrupt source, its count on each CPU.
pub fn interrupts() -> Option<Interrupts> {
    fs::read_to_string("/proc/interrupts").ok().map(|t| parse_interrupts_table(&t))
}

/// Inventory read from the files under `root` (`/` for the real machine).
/// uname fields come from `proc/sys/kernel/{hostname,osrelease,version,arch}`
/// and the euid from the `Uid:` line of `proc/self/status`.
#[cfg(test)]
pub fn collect_from(root: &Path) -> Inventory {
    collect_impl(root, None)
}

/// uname(2) of the running process.
struct Uts {
    hostname: String,
    release: String,
    version: String,
    machine: String,
}

fn collect_impl(root: &Path, uts: Option<Uts>) -> Inventory {
    let r = |rel: &str| read(root, rel);
    let mut inv = Inventory { tool_version: env!("CARGO_PKG_VERSION").to_string(), ..Default::default() };
    kernel(&mut inv, root, uts);
    boot(&mut inv, root);

    let cs = "sys/devices/system/clocksource/clocksource0";
    inv.clocksource = r(&format!("{cs}/current_clocksource")).unwrap_or_default();
    inv.available_clocksources = r(&format!("{cs}/available_clocksource")).unwrap_or_default();

    let cpuinfo = r("proc/cpuinfo").unwrap_or_default();
    let cpus = cpu_topology(&mut inv, root, &cpuinfo);

    // Scheduler knobs.
    inv.rt_runtime_us = r("proc/sys/kernel/sched_rt_runtime_us").and_then(|s| s.parse().ok());
    inv.rt_period_us = r("proc/sys/kernel/sched_rt_period_us").and_then(|s| s.parse().ok());
    inv.timer_migration = r("proc/sys/kernel/timer_migration").as_deref().and_then(parse_bool01);

    inv.hypervisor = hypervisor(root, &cpuinfo);

    // Privileges of this process.
    let status = r("proc/self/status").unwrap_or_default();
    if let Some(euid) = status_euid(&status) {
        inv.euid = euid;
        inv.is_root = euid == 0;
    }
    inv.cap_sys_nice = cap_eff_has(&status, CAP_SYS_NICE_BIT);

    inv.memory_total_kb = r("proc/meminfo").as_deref().and_then(mem_total_kb).unwrap_or(0);
    inv.tracefs = r("proc/mounts").as_deref().and_then(tracefs_mount);

    inv.caches = caches(root, &cpus);
    inv.devices = devices(root);
    inv
}

/// The kernel's names: uname(2)'s when given (the running machine), else
/// from `proc/sys/kernel` under `root`.
fn kernel(inv: &mut Inventory, root: &Path, uts: Option<Uts>) {
    let r = |rel: &str| read(root, rel);
    match uts {
        Some(u) => {
            inv.hostname = u.hostname;
            inv.kernel_release = u.release;
            inv.kernel_version = u.version;
            inv.arch = u.machine;
        }
        None => {
            inv.hostname = r("proc/sys/kernel/hostname").or_else(|| r("etc/hostname")).unwrap_or_default();
            inv.kernel_release = r("proc/sys/kernel/osrelease").unwrap_or_default();
            inv.kernel_version = r("proc/sys/kernel/version").unwrap_or_default();
            inv.arch = r("proc/sys/kernel/arch").unwrap_or_default();
        }
    }
}

/// The command line and what it says about isolation and idle, the
/// preemption model (sysfs, debugfs, the command line, the kernel's
/// config) and the CPUs isolated as sysfs sees them. Needs the kernel's
/// version and release.
fn boot(inv: &mut Inventory, root: &Path) {
    let r = |rel: &str| read(root, rel);
    let cpu_dir = "sys/devices/system/cpu";
    inv.cmdline = r("proc/cmdline").unwrap_or_default();
    let param = |k: &str| cmdline_param(&inv.cmdline, k);
    inv.isolcpus = param("isolcpus");
    inv.nohz_full = param("nohz_full");
    inv.rcu_nocbs = param("rcu_nocbs");
    inv.irqaffinity = param("irqaffinity");
    let hints: Vec<String> = ["intel_idle.max_cstate", "processor.max_cstate", "idle", "cpuidle.off"]
        .iter()
        .filter_map(|k| param(k).map(|v| format!("{k}={v}")))
        .collect();
    inv.max_cstate_hint = (!hints.is_empty()).then(|| hints.join(" "));
    let boot_preempt = param("preempt");

    // Preemption model.
    let realtime = r("sys/kernel/realtime");
    inv.realtime_sysfs = realtime.as_deref().and_then(parse_bool01);
    let debug_preempt = r("sys/kernel/debug/sched/preempt").or(boot_preempt);
    inv.preempt_model = preempt_model(realtime.as_deref(), &inv.kernel_version, debug_preempt.as_deref());
    if (inv.preempt_model == "unknown" || inv.preempt_model == "PREEMPT_DYNAMIC")
        && !inv.kernel_release.is_empty()
        && let Some(k) =
            r(&format!("boot/config-{}", inv.kernel_release)).as_deref().and_then(preempt_model_from_kconfig)
        && (inv.preempt_model == "unknown" || k.starts_with("PREEMPT_DYNAMIC("))
    {
        inv.preempt_model = k;
    }

    inv.isolated_sysfs = r(&format!("{cpu_dir}/isolated"));
    inv.nohz_full_sysfs = r(&format!("{cpu_dir}/nohz_full"));
}

/// The CPUs: model, online list and count, each one's governor and SMT
/// siblings, SMT and the idle driver. Returns the online CPUs (from the
/// `cpuN` directories where the list is missing).
fn cpu_topology(inv: &mut Inventory, root: &Path, cpuinfo: &str) -> Vec<usize> {
    let r = |rel: &str| read(root, rel);
    let cpu_dir = "sys/devices/system/cpu";
    inv.cpu_model = cpu_model(cpuinfo);
    inv.cpus_online = r(&format!("{cpu_dir}/online")).unwrap_or_default();
    let mut cpus = parse_cpu_list(&inv.cpus_online).unwrap_or_default();
    if cpus.is_empty() {
        cpus = cpu_dirs(&root.join(cpu_dir));
    }
    inv.cpu_count = if cpus.is_empty() {
        cpuinfo.lines().filter(|l| cpuinfo_key(l) == Some("processor")).count()
    } else {
        cpus.len()
    };
    for &cpu in &cpus {
        let f = |name: &str| r(&format!("{cpu_dir}/cpu{cpu}/{name}"));
        inv.governors.push(CpuGovernor {
            cpu,
            governor: f("cpufreq/scaling_governor").filter(|s| !s.is_empty()),
            min_khz: f("cpufreq/scaling_min_freq").and_then(|s| s.parse().ok()),
            max_khz: f("cpufreq/scaling_max_freq").and_then(|s| s.parse().ok()),
        });
        if let Some(s) = f("topology/thread_siblings_list") {
            inv.siblings.push((cpu, s));
        }
    }
    inv.smt_active = r(&format!("{cpu_dir}/smt/active")).as_deref().and_then(parse_bool01);
    inv.cpu_idle_driver = r(&format!("{cpu_dir}/cpuidle/current_driver")).filter(|s| !s.is_empty());
    cpus
}

/// Every CPU's caches (`cpuN/cache/indexM`), each cache once (by level,
/// type and the CPUs sharing it), in CPU and index order.
fn caches(root: &Path, cpus: &[usize]) -> Vec<Cache> {
    let mut out: Vec<Cache> = Vec::new();
    for &cpu in cpus {
        let dir = format!("sys/devices/system/cpu/cpu{cpu}/cache");
        let Ok(entries) = std::fs::read_dir(root.join(&dir)) else { continue };
        let mut names: Vec<String> =
            entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).filter(|n| n.starts_with("index")).collect();
        names.sort_by_key(|n| n[5..].parse::<u32>().unwrap_or(u32::MAX));
        for n in names {
            let f = |name: &str| read(root, &format!("{dir}/{n}/{name}"));
            let c = Cache {
                level: f("level").and_then(|l| l.parse().ok()).unwrap_or(0),
                kind: f("type").unwrap_or_default(),
                size: f("size").unwrap_or_default(),
                shared_cpus: f("shared_cpu_list").unwrap_or_else(|| cpu.to_string()),
            };
            if c.level > 0 && !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

/// The devices behind the network interfaces, block devices and GPUs
/// (`/sys/class/net`, `/sys/block`, `/sys/class/drm/cardN`): those with a
/// `device` link (virtual ones have none), with the driver bound to it and
/// its interrupts (the legacy `irq` and the `msi_irqs` vectors, of the
/// device or, for a virtio device, of the PCI function above it).
fn devices(root: &Path) -> Vec<Device> {
    let mut out = Vec::new();
    for (class, dir, keep) in [
        ("net", "sys/class/net", (|_: &str| true) as fn(&str) -> bool),
        ("block", "sys/block", |_: &str| true),
        ("gpu", "sys/class/drm", |n: &str| {
            n.strip_prefix("card").is_some_and(|d| d.chars().all(|c| c.is_ascii_digit()))
        }),
    ] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else { continue };
        let mut names: Vec<String> =
            entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).filter(|n| keep(n)).collect();
        names.sort();
        for name in names {
            let dev = root.join(dir).join(&name).join("device");
            let Ok(real) = std::fs::canonicalize(&dev) else { continue };
            let link_name = |p: &Path| std::fs::read_link(p).ok()?.file_name()?.to_str().map(String::from);
            let mut irqs = irqs_of(&real);
            if irqs.is_empty()
                && let Some(parent) = real.parent()
            {
                irqs = irqs_of(parent);
            }
            out.push(Device {
                class: class.into(),
                name,
                driver: link_name(&dev.join("driver")),
                bus_id: real.file_name().and_then(|f| f.to_str()).unwrap_or_default().to_string(),
                irqs,
            });
        }
    }
    out
}

/// A sysfs device's interrupts: its `irq` (0: none) and `msi_irqs/N`.
fn irqs_of(dev: &Path) -> Vec<u32> {
    let mut irqs: Vec<u32> = std::fs::read_dir(dev.join("msi_irqs"))
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    if let Some(irq) = std::fs::read_to_string(dev.join("irq")).ok().and_then(|s| s.trim().parse().ok())
        && irq > 0
        && !irqs.contains(&irq)
    {
        irqs.push(irq);
    }
    irqs.sort_unstable();
    irqs
}

/// `root/rel` as a string with trailing whitespace removed, None if unreadable.
fn read(root: &Path, rel: &str) -> Option<String> {
    let path = root.join(rel.trim_start_matches('/'));
    let bytes = fs::read(path).ok()?;
    let s = String::from_utf8_lossy(&bytes);
    Some(s.trim_end().to_string())
}

fn parse_bool01(s: &str) -> Option<bool> {
    match s.trim() {
        "1" | "Y" | "y" => Some(true),
        "0" | "N" | "n" => Some(false),
        _ => None,
    }
}

/// Numbers of the `cpuN` directories under `dir`, sorted.
fn cpu_dirs(dir: &Path) -> Vec<usize> {
    let mut cpus: Vec<usize> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
        .collect();
    cpus.sort_unstable();
    cpus
}

/// The key of a `key<tab>: value` line of /proc/cpuinfo.
fn cpuinfo_key(line: &str) -> Option<&str> {
    line.split_once(':').map(|(k, _)| k.trim())
}

fn cpuinfo_value<'a>(cpuinfo: &'a str, key: &str) -> Option<&'a str> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        let v = v.trim();
        (k.trim() == key && !v.is_empty()).then_some(v)
    })
}

/// "model name" (x86), "Hardware" (arm32 boards), "cpu model" (mips),
/// "uarch" (riscv), "cpu" (powerpc), "CPU implementer"/"CPU part" (arm64).
fn cpu_model(cpuinfo: &str) -> String {
    for key in ["model name", "Hardware", "cpu model", "uarch", "cpu"] {
        if let Some(v) = cpuinfo_value(cpuinfo, key) {
            return v.to_string();
        }
    }
    match (cpuinfo_value(cpuinfo, "CPU implementer"), cpuinfo_value(cpuinfo, "CPU part")) {
        (Some(i), Some(p)) => format!("CPU implementer {i} part {p}"),
        (None, Some(p)) => format!("CPU part {p}"),
        _ => "unknown".to_string(),
    }
}

/// DMI vendors / products that only virtual machines report.
const VM_DMI: &[&str] =
    &["QEMU", "KVM", "VMware", "innotek GmbH", "VirtualBox", "Xen", "Parallels", "Bochs", "BHYVE", "Virtual Machine"];

/// Some(name) when running under a hypervisor: the "hypervisor" cpuinfo flag
/// (x86), `/sys/hypervisor/type`, or a DMI vendor/product only VMs report.
/// The name is the hypervisor type, else the DMI vendor, else "unknown".
fn hypervisor(root: &Path, cpuinfo: &str) -> Option<String> {
    let flag = cpuinfo
        .lines()
        .filter(|l| matches!(cpuinfo_key(l), Some("flags" | "Features")))
        .any(|l| l.split_whitespace().any(|w| w == "hypervisor"));
    let nonempty = |rel: &str| read(root, rel).filter(|s| !s.is_empty());
    let hv_type = nonempty("sys/hypervisor/type");
    let vendor = nonempty("sys/class/dmi/id/sys_vendor");
    let product = nonempty("sys/class/dmi/id/product_name");
    let dmi_vm = [&vendor, &product].iter().filter_map(|s| s.as_deref()).any(|s| VM_DMI.iter().any(|v| s.contains(v)));
    if flag || hv_type.is_some() || dmi_vm {
        Some(hv_type.or(vendor).unwrap_or_else(|| "unknown".to_string()))
    } else {
        None
    }
}

/// Hypervisor vendor from CPUID leaf 0x40000000 ("kvm", "hyperv", ...).
#[cfg(target_arch = "x86_64")]
fn cpuid_hypervisor_vendor() -> Option<String> {
    // Leaf 1 ECX bit 31: running under a hypervisor.
    if std::arch::x86_64::__cpuid(1).ecx & (1 << 31) == 0 {
        return None;
    }
    let r = std::arch::x86_64::__cpuid(0x4000_0000);
    let mut b = Vec::with_capacity(12);
    for x in [r.ebx, r.ecx, r.edx] {
        b.extend_from_slice(&x.to_le_bytes());
    }
    let raw = String::from_utf8_lossy(&b).trim_matches(['\0', ' ']).to_string();
    let name = match raw.as_str() {
        "KVMKVMKVM" => "kvm",
        "Microsoft Hv" => "hyperv",
        "VMwareVMware" => "vmware",
        "XenVMMXenVMM" => "xen",
        "TCGTCGTCGTCG" => "qemu-tcg",
        "bhyve bhyve" => "bhyve",
        "lrpepyh  vr" => "parallels",
        "ACRNACRNACRN" => "acrn",
        "" => return None,
        other => other,
    };
    Some(name.to_string())
}

/// Effective uid from the `Uid:` line (real, effective, saved, fs).
fn status_euid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
}

fn mem_total_kb(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|s| s.parse().ok())
}

/// Mount point of tracefs in a /proc/mounts text, preferring
/// /sys/kernel/tracing. Octal escapes (`\040` for space) are decoded.
fn tracefs_mount(mounts: &str) -> Option<String> {
    let points: Vec<String> = crate::sys::tracefs::mounts_in(mounts).into_iter().map(|(_, point)| point).collect();
    points.iter().find(|p| *p == "/sys/kernel/tracing").or_else(|| points.first()).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn put(root: &Path, rel: &str, content: &str) {
        let p: PathBuf = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    /// A 4-CPU SMT x86 box: PREEMPT_DYNAMIC in voluntary mode, CPUs 2-3
    /// isolated, cpufreq on cpus 0-1 only, KVM guest, unprivileged user.
    fn fake_tree(root: &Path) {
        put(root, "proc/sys/kernel/hostname", "rig\n");
        put(root, "proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
        put(root, "proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1\n");
        put(root, "proc/sys/kernel/arch", "x86_64\n");
        put(
            root,
            "proc/cmdline",
            "BOOT_IMAGE=/boot/vmlinuz ro isolcpus=domain,managed_irq,2-3 nohz_full=2-3 \
             rcu_nocbs=2-3 irqaffinity=0-1 intel_idle.max_cstate=1 quiet\n",
        );
        put(root, "sys/kernel/debug/sched/preempt", "none (voluntary) full\n");
        put(root, "sys/devices/system/cpu/online", "0-3\n");
        put(root, "sys/devices/system/cpu/isolated", "2-3\n");
        put(root, "sys/devices/system/cpu/nohz_full", "2-3\n");
        put(root, "sys/devices/system/cpu/smt/active", "1\n");
        put(root, "sys/devices/system/cpu/cpuidle/current_driver", "intel_idle\n");
        for cpu in 0..4 {
            let sib = if cpu < 2 { "0-1" } else { "2-3" };
            put(root, &format!("sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"), sib);
        }
        for cpu in 0..2 {
            let d = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq");
            put(root, &format!("{d}/scaling_governor"), "powersave\n");
            put(root, &format!("{d}/scaling_min_freq"), "800000\n");
            put(root, &format!("{d}/scaling_max_freq"), "3600000\n");
        }
        put(root, "sys/devices/system/clocksource/clocksource0/current_clocksource", "hpet\n");
        put(root, "sys/devices/system/clocksource/clocksource0/available_clocksource", "tsc hpet acpi_pm \n");
        put(
            root,
            "proc/cpuinfo",
            "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) E-2278G\n\
             flags\t\t: fpu tsc hypervisor ht\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) E-2278G\n",
        );
        put(root, "sys/class/dmi/id/sys_vendor", "QEMU\n");
        put(root, "proc/sys/kernel/sched_rt_runtime_us", "950000\n");
        put(root, "proc/sys/kernel/sched_rt_period_us", "1000000\n");
        put(root, "proc/sys/kernel/timer_migration", "0\n");
        put(root, "proc/self/status", "Name:\trtscope\nUid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000800000\n");
        put(root, "proc/meminfo", "MemTotal:       16314332 kB\nMemFree: 1 kB\n");
        put(
            root,
            "proc/mounts",
            "sysfs /sys sysfs rw 0 0\ntracefs /sys/kernel/debug/tracing tracefs rw 0 0\n\
             tracefs /sys/kernel/tracing tracefs rw 0 0\n",
        );
        // Caches: private L1d/L1i/L2 per CPU, one L3 for all four.
        for cpu in 0..4 {
            let d = format!("sys/devices/system/cpu/cpu{cpu}/cache");
            for (i, (level, kind, size, shared)) in [
                ("1", "Data", "48K", cpu.to_string()),
                ("1", "Instruction", "32K", cpu.to_string()),
                ("2", "Unified", "1280K", cpu.to_string()),
                ("3", "Unified", "12288K", "0-3".to_string()),
            ]
            .into_iter()
            .enumerate()
            {
                put(root, &format!("{d}/index{i}/level"), level);
                put(root, &format!("{d}/index{i}/type"), kind);
                put(root, &format!("{d}/index{i}/size"), size);
                put(root, &format!("{d}/index{i}/shared_cpu_list"), &shared);
            }
        }
        // A PCI NIC with MSI vectors, a virtio disk whose interrupts are its
        // PCI function's, a GPU with a legacy IRQ; lo has no device.
        let pci = "sys/devices/pci0000:00";
        put(root, &format!("{pci}/0000:00:1f.6/msi_irqs/130"), "msi");
        put(root, &format!("{pci}/0000:00:1f.6/msi_irqs/131"), "msi");
        put(root, &format!("{pci}/0000:00:05.0/msi_irqs/35"), "msi");
        put(root, &format!("{pci}/0000:00:05.0/virtio1/features"), "1");
        put(root, &format!("{pci}/0000:00:02.0/irq"), "16");
        put(root, "sys/bus/pci/drivers/e1000e/bind", "");
        put(root, "sys/bus/virtio/drivers/virtio_blk/bind", "");
        put(root, "sys/bus/pci/drivers/i915/bind", "");
        put(root, "sys/class/net/lo/address", "00:00:00:00:00:00");
        let link = |target: &str, at: &str| {
            let at = root.join(at);
            fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(root.join(target), at).unwrap();
        };
        link(&format!("{pci}/0000:00:1f.6"), "sys/class/net/eno1/device");
        link("sys/bus/pci/drivers/e1000e", &format!("{pci}/0000:00:1f.6/driver"));
        link(&format!("{pci}/0000:00:05.0/virtio1"), "sys/block/vda/device");
        link("sys/bus/virtio/drivers/virtio_blk", &format!("{pci}/0000:00:05.0/virtio1/driver"));
        link(&format!("{pci}/0000:00:02.0"), "sys/class/drm/card0/device");
        link(&format!("{pci}/0000:00:02.0"), "sys/class/drm/card0-DP-1/device");
        link("sys/bus/pci/drivers/i915", &format!("{pci}/0000:00:02.0/driver"));
    }

    #[test]
    fn collect_from_fake_tree() {
        let dir = tempfile::tempdir().unwrap();
        fake_tree(dir.path());
        let inv = collect_from(dir.path());
        assert_eq!(inv.tool_version, env!("CARGO_PKG_VERSION"));
        assert_eq!(inv.hostname, "rig");
        assert_eq!(inv.kernel_release, "6.1.0-18-amd64");
        assert_eq!(inv.arch, "x86_64");
        assert_eq!(inv.preempt_model, "PREEMPT_DYNAMIC(voluntary)");
        assert_eq!(inv.realtime_sysfs, None);
        assert_eq!(inv.isolcpus.as_deref(), Some("domain,managed_irq,2-3"));
        assert_eq!(inv.nohz_full.as_deref(), Some("2-3"));
        assert_eq!(inv.rcu_nocbs.as_deref(), Some("2-3"));
        assert_eq!(inv.irqaffinity.as_deref(), Some("0-1"));
        assert_eq!(inv.isolated_sysfs.as_deref(), Some("2-3"));
        assert_eq!(inv.nohz_full_sysfs.as_deref(), Some("2-3"));
        assert_eq!(inv.max_cstate_hint.as_deref(), Some("intel_idle.max_cstate=1"));
        assert_eq!(inv.clocksource, "hpet");
        assert_eq!(inv.available_clocksources, "tsc hpet acpi_pm");
        assert_eq!(inv.cpu_model, "Intel(R) Xeon(R) E-2278G");
        assert_eq!(inv.cpus_online, "0-3");
        assert_eq!(inv.cpu_count, 4);
        assert_eq!(inv.governors.len(), 4);
        assert_eq!(
            inv.governors[1],
            CpuGovernor {
                cpu: 1,
                governor: Some("powersave".into()),
                min_khz: Some(800_000),
                max_khz: Some(3_600_000),
            }
        );
        assert_eq!(inv.governors[3], CpuGovernor { cpu: 3, ..Default::default() });
        assert_eq!(inv.smt_active, Some(true));
        assert_eq!(inv.siblings[2], (2, "2-3".to_string()));
        assert_eq!(inv.rt_runtime_us, Some(950_000));
        assert_eq!(inv.rt_period_us, Some(1_000_000));
        assert_eq!(inv.timer_migration, Some(false));
        assert_eq!(inv.hypervisor.as_deref(), Some("QEMU"));
        assert_eq!(inv.euid, 1000);
        assert!(!inv.is_root);
        assert!(inv.cap_sys_nice);
        assert!(inv.representative());
        assert_eq!(inv.memory_total_kb, 16_314_332);
        assert_eq!(inv.tracefs.as_deref(), Some("/sys/kernel/tracing"));
        assert_eq!(inv.cpu_idle_driver.as_deref(), Some("intel_idle"));
        let names: Vec<String> = inv.caches.iter().map(Cache::name).collect();
        assert_eq!(names.len(), 13, "{names:?}: 3 private caches x 4 CPUs and one shared L3");
        assert_eq!(names.iter().filter(|n| *n == "L1d 48K").count(), 4);
        assert_eq!(
            inv.caches.iter().filter(|c| c.level == 3).map(|c| c.shared_cpus.as_str()).collect::<Vec<_>>(),
            ["0-3"]
        );
        let devs: Vec<String> = inv.devices.iter().map(|d| format!("{} {}", d.class, d.describe())).collect();
        assert_eq!(
            devs,
            [
                "net eno1 (e1000e, 0000:00:1f.6, IRQs 130-131)",
                "block vda (virtio_blk, virtio1, IRQ 35)",
                "gpu card0 (i915, 0000:00:02.0, IRQ 16)"
            ]
        );

        let topics: Vec<String> = inv.warnings(&[0]).into_iter().map(|w| w.topic).collect();
        for t in ["governor", "smt", "preempt-mode", "clocksource", "isolation", "hypervisor"] {
            assert!(topics.iter().any(|x| x == t), "missing {t} in {topics:?}");
        }
    }

    #[test]
    fn collect_from_empty_tree_leaves_fields_empty() {
        let dir = tempfile::tempdir().unwrap();
        let inv = collect_from(dir.path());
        assert_eq!(inv.tool_version, env!("CARGO_PKG_VERSION"));
        assert_eq!(inv.preempt_model, "unknown");
        assert_eq!(inv.cpu_model, "unknown");
        assert_eq!(inv.cpu_count, 0);
        assert!(inv.governors.is_empty());
        assert_eq!(inv.rt_runtime_us, None);
        assert_eq!(inv.hypervisor, None);
        assert_eq!(inv.tracefs, None);
        assert!(!inv.is_root && !inv.cap_sys_nice);
        // A missing directory as root is fine too.
        let gone = collect_from(&dir.path().join("nope"));
        assert_eq!(gone.cpu_count, 0);
    }

    #[test]
    fn fallbacks_kconfig_cmdline_and_cpu_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        put(root, "proc/sys/kernel/osrelease", "6.6.0\n");
        put(root, "proc/sys/kernel/version", "#1 SMP Mon Jan 1 00:00:00 UTC 2024\n");
        put(root, "boot/config-6.6.0", "CONFIG_PREEMPT_VOLUNTARY=y\n");
        put(root, "sys/devices/system/cpu/cpu0/topology/thread_siblings_list", "0\n");
        put(root, "sys/devices/system/cpu/cpu1/topology/thread_siblings_list", "1\n");
        put(root, "proc/cpuinfo", "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n");
        put(root, "proc/mounts", "none /mnt/my\\040trace tracefs rw 0 0\n");
        let inv = collect_from(root);
        assert_eq!(inv.preempt_model, "VOLUNTARY");
        assert_eq!(inv.cpu_count, 2);
        assert_eq!(inv.governors.len(), 2);
        assert_eq!(inv.cpu_model, "CPU implementer 0x41 part 0xd0c");
        assert_eq!(inv.tracefs.as_deref(), Some("/mnt/my trace"));

        // PREEMPT_DYNAMIC without debugfs: preempt= on the cmdline, else the
        // kconfig default.
        put(root, "proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC\n");
        put(root, "boot/config-6.6.0", "CONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_PREEMPT_DYNAMIC=y\n");
        assert_eq!(collect_from(root).preempt_model, "PREEMPT_DYNAMIC(voluntary)");
        put(root, "proc/cmdline", "quiet preempt=full\n");
        assert_eq!(collect_from(root).preempt_model, "PREEMPT_DYNAMIC(full)");

        // PREEMPT_RT via /sys/kernel/realtime.
        put(root, "sys/kernel/realtime", "1\n");
        let inv = collect_from(root);
        assert_eq!(inv.preempt_model, "PREEMPT_RT");
        assert_eq!(inv.realtime_sysfs, Some(true));
    }

    #[test]
    fn collect_real_machine() {
        let inv = collect();
        assert!(inv.cpu_count >= 1, "{inv:?}");
        assert!(!inv.online_cpus().is_empty(), "online {:?}", inv.cpus_online);
        assert!(!inv.kernel_release.is_empty());
        assert!(!inv.arch.is_empty());
        assert_ne!(inv.preempt_model, "");
        assert_eq!(inv.is_root, inv.euid == 0);
        if inv.is_root {
            assert!(inv.cap_sys_nice);
        }
        assert!(inv.memory_total_kb > 0);
        // Round-trips through JSON.
        let json = serde_json::to_string(&inv).unwrap();
        let back: Inventory = serde_json::from_str(&json).unwrap();
        assert_eq!(back, inv);
        let _ = inv.warnings(&[]);
    }

    #[test]
    fn small_parsers() {
        assert_eq!(status_euid("Uid:\t1000\t0\t0\t0\n"), Some(0));
        assert_eq!(status_euid("Name: x\n"), None);
        assert_eq!(mem_total_kb("MemTotal:  42 kB\n"), Some(42));
        assert_eq!(parse_bool01("1\n"), Some(true));
        assert_eq!(parse_bool01("x"), None);
        assert_eq!(tracefs_mount("sysfs /sys sysfs rw 0 0\n"), None);
    }
}
