//! The inventory's tests: its CPU lists and kernel strings, its records,
//! and the warnings of a tuned machine, of a typical VM and of each
//! departure from the tuned one.

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
fn a_clock_is_described_in_one_cell() {
    let c =
        ClockSource { name: "CLOCK_MONOTONIC_COARSE".into(), resolution_ns: 4e6, step_ns: Some(4e6), read_ns: 8.33 };
    assert_eq!(c.describe(), "MONOTONIC_COARSE 4.000ms, step 4.000ms, 8.33ns/read");
    let t = ClockSource { name: "rdtsc".into(), resolution_ns: 0.39, step_ns: None, read_ns: 24.0 };
    assert_eq!(t.describe(), "rdtsc 0.39ns, step none seen, 24ns/read");
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
