//! CPU lists and affinity.

use anyhow::{Result, bail};
use rtscope_model::inventory::{format_cpu_list, parse_cpu_list};
use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

/// Online CPUs, from /sys (falls back to this process's affinity).
pub fn online() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(s.trim()).ok())
        .unwrap_or_else(allowed)
}

/// CPUs this process may run on.
pub fn allowed() -> Vec<usize> {
    match sched_getaffinity(None) {
        Ok(set) => (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        Err(_) => vec![0],
    }
}

/// Parses `--cpus` and checks every CPU is online and allowed.
pub fn parse_selection(flag: &str, text: &str) -> Result<Vec<usize>> {
    let cpus = match parse_cpu_list(text) {
        Ok(c) if !c.is_empty() => c,
        Ok(_) => bail!("{flag} '{text}' selects no CPU (e.g. {flag} 0,2-3)"),
        Err(e) => bail!("{flag} '{text}': {e} (e.g. {flag} 0,2-3)"),
    };
    let online = online();
    let allowed = allowed();
    for &c in &cpus {
        if !online.contains(&c) {
            bail!("{flag}: CPU {c} is not online (online: {})", format_cpu_list(&online));
        }
        if !allowed.contains(&c) {
            bail!(
                "{flag}: CPU {c} is outside this process's affinity ({}); run rtscope with taskset/cgroups allowing it",
                format_cpu_list(&allowed)
            );
        }
    }
    Ok(cpus)
}

/// Pins the calling thread to `cpus`.
pub fn pin_self(cpus: &[usize]) -> std::io::Result<()> {
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c);
    }
    sched_setaffinity(None, &set).map_err(Into::into)
}

/// CPUs of `online` that are neither in `measured` nor SMT siblings of a
/// measured CPU: where rtscope's own non-RT threads should run. Empty when
/// every CPU is measured.
pub fn housekeeping(online: &[usize], measured: &[usize], siblings: &[(usize, String)]) -> Vec<usize> {
    let mut busy: Vec<usize> = measured.to_vec();
    for (cpu, list) in siblings {
        if measured.contains(cpu) {
            busy.extend(parse_cpu_list(list).unwrap_or_default());
        }
    }
    online.iter().copied().filter(|c| !busy.contains(c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_checks_online_cpus() {
        assert_eq!(parse_selection("--cpus", "0").unwrap(), vec![0]);
        let e = parse_selection("--cpus", "4095").unwrap_err().to_string();
        assert!(e.contains("--cpus") && e.contains("not online"), "{e}");
        let e = parse_selection("--cpus", "x").unwrap_err().to_string();
        assert!(e.contains("--cpus"), "{e}");
    }

    #[test]
    fn housekeeping_avoids_measured_cpus_and_siblings() {
        let sib = vec![(0, "0,4".to_string()), (1, "1,5".to_string())];
        assert_eq!(housekeeping(&[0, 1, 2, 3, 4, 5], &[1], &sib), vec![0, 2, 3, 4]);
        assert!(housekeeping(&[0, 1], &[0, 1], &[]).is_empty());
    }
}
