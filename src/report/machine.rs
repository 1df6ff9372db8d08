//! The machine and the run's setup as labelled rows: what every format with
//! a machine header shows (the report's "Machine and setup" table, the
//! text of `rtscope show`), so that they never disagree. Sizes in binary
//! units (MiB).

use rtscope_model::run::Run;
use rtscope_model::settings::InstancesMode;

/// The machine's rows: host, CPU, kernel and preemption model, command
/// line and isolation, clocksource, governor, SMT, RT throttling,
/// hypervisor, idle driver and what /dev/cpu_dma_latency was held at, memory, privileges; then the run's command,
/// scheduling, rtscope's version and peak RSS, and the run itself.
pub fn rows(run: &Run) -> Vec<(&'static str, String)> {
    let h = &run.header;
    let inv = &run.inventory;
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let yes = |b: Option<bool>| match b {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    };
    let mut govs: Vec<String> = inv.governors.iter().filter_map(|g| g.governor.clone()).collect();
    govs.sort();
    govs.dedup();
    let sched = scheduling(&run.plan).unwrap_or_else(|| "-".into());
    let mut rows = vec![
        ("host", format!("{} ({})", h.hostname, inv.arch)),
        ("CPU", format!("{} · {} online ({})", inv.cpu_model, inv.cpu_count, inv.cpus_online)),
        ("kernel", format!("{} {}", inv.kernel_release, inv.kernel_version)),
        ("preemption model", inv.preempt_model.clone()),
        ("cmdline", inv.cmdline.clone()),
        (
            "isolation",
            format!(
                "isolcpus {} · nohz_full {} · rcu_nocbs {} · irqaffinity {}",
                opt(&inv.isolcpus),
                opt(&inv.nohz_full),
                opt(&inv.rcu_nocbs),
                opt(&inv.irqaffinity)
            ),
        ),
        (
            "isolated CPUs",
            inv.isolated_measured(&measured(run)).map_or_else(|| "none measured".into(), |l| format!("measured: {l}")),
        ),
        ("clocksource", inv.clocksource.clone()),
        ("governor", if govs.is_empty() { "no cpufreq".into() } else { govs.join(", ") }),
        ("SMT active", yes(inv.smt_active).into()),
        (
            "RT throttling",
            match inv.rt_runtime_us {
                Some(-1) => "off".into(),
                Some(r) => format!("{r} us per {} us", inv.rt_period_us.unwrap_or(0)),
                None => "unknown".into(),
            },
        ),
        ("hypervisor", inv.hypervisor.clone().unwrap_or_else(|| "none seen".into())),
        ("idle driver", opt(&inv.cpu_idle_driver)),
        ("CPU latency target", inv.dma_latency.describe()),
        ("memory", mib(inv.memory_total_kb)),
    ];
    // Runs taken before rtscope recorded caches and devices have neither row.
    if !inv.caches.is_empty() {
        // Each size once, with how many there are (one L1 per core, one L3 per socket).
        let mut groups: Vec<(String, usize)> = Vec::new();
        for c in &inv.caches {
            let name = c.name();
            match groups.iter_mut().find(|g| g.0 == name) {
                Some(g) => g.1 += 1,
                None => groups.push((name, 1)),
            }
        }
        let text: Vec<String> = groups.into_iter().map(|(n, k)| if k > 1 { format!("{n} x{k}") } else { n }).collect();
        rows.push(("caches", text.join(" · ")));
    }
    if !inv.clocks.is_empty() {
        rows.push(("clocks", inv.clocks.iter().map(|c| c.describe()).collect::<Vec<_>>().join(" · ")));
    }
    for (class, label) in [("net", "NICs"), ("block", "storage"), ("gpu", "GPUs")] {
        let list: Vec<String> = inv.devices.iter().filter(|d| d.class == class).map(|d| d.describe()).collect();
        if !list.is_empty() {
            rows.push((label, list.join(" · ")));
        }
    }
    rows.extend([
        (
            "privileges",
            format!(
                "{}{}",
                if inv.is_root { "root" } else { "not root" },
                if inv.cap_sys_nice { ", CAP_SYS_NICE" } else { "" }
            ),
        ),
        ("command", h.command_line.join(" ")),
        (
            "rtscope's CPUs",
            format!(
                "started on {} · cpuset {}",
                if inv.home_cpus.is_empty() { "-" } else { inv.home_cpus.as_str() },
                opt(&inv.cpuset)
            ),
        ),
        ("scheduling", sched),
        (
            "rtscope",
            format!(
                "{}{}",
                h.tool_version,
                h.peak_rss_kb.map(|k| format!(" · peak RSS {}", mib(k))).unwrap_or_default()
            ),
        ),
        ("run", format!("{} ({}) · {}", h.id, h.uuid, h.status.as_str())),
    ]);
    rows
}

/// The CPUs the run's series measured, each once.
fn measured(run: &Run) -> Vec<usize> {
    let mut cpus: Vec<usize> = run.series.iter().filter_map(|s| usize::try_from(s.key.cpu).ok()).collect();
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// A size given in KiB, in whole MiB.
fn mib(kb: u64) -> String {
    format!("{} MiB", kb / 1024)
}

/// The measuring threads' scheduling, "SCHED_FIFO 95" ("SCHED_DEADLINE
/// runtime 100us, period 1ms" under `--policy deadline`): the run's, and
/// each other scheduling of a probe's instances (`wakeup@80`) in its cells
/// ("SCHED_FIFO 95, 80", "SCHED_FIFO 95, SCHED_RR 80"), and how they were
/// measured ("; instances measured together"); None for a run without
/// measuring threads.
pub(super) fn scheduling(plan: &serde_json::Value) -> Option<String> {
    let (pol, prio) = (plan["effective_policy"].as_str()?, plan["effective_priority"].as_u64()?);
    if pol == "deadline" {
        return rtscope_model::settings::stored::<rtscope_model::settings::Deadline>(&plan["common"]["deadline"])
            .map(|d| d.describe());
    }
    let mut all = vec![(pol, prio)];
    let cells = plan["cells"].as_array().map(Vec::as_slice).unwrap_or_default();
    for c in cells.iter().filter(|c| c["probe"].as_str().is_some_and(|p| p.contains('@'))) {
        let p = c["effective_policy"].as_str().unwrap_or(pol);
        if let Some(n) = c["effective_priority"].as_u64().filter(|&n| !all.contains(&(p, n))) {
            all.push((p, n));
        }
    }
    let mut text = String::new();
    for (i, &(p, n)) in all.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        if i > 0 && all[i - 1].0 == p {
            text += &format!("{sep}{n}");
        } else {
            text += &format!("{sep}SCHED_{} {n}", p.to_uppercase());
        }
    }
    if let Some(mode) = InstancesMode::stored(plan) {
        text += &format!("; {}", mode.describe());
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_in_mib() {
        let rows = rows(&crate::report::fixtures::fixture());
        let row = |k: &str| rows.iter().find(|(l, _)| *l == k).map(|(_, v)| v.as_str()).unwrap();
        assert_eq!(row("memory"), "24105 MiB");
        assert_eq!(row("rtscope"), "0.1.0 · peak RSS 42 MiB");
        // A run taken before rtscope recorded its CPUs and cpuset.
        assert_eq!(row("rtscope's CPUs"), "started on - · cpuset -");
        assert_eq!(row("isolated CPUs"), "none measured");
        assert_eq!(row("CPU latency target"), "not recorded");
        assert_eq!(rows.len(), 21);
    }
}
