//! CPU lists, affinity and the cpuset that bounds it.
//!
//! Two sets matter. The CPUs rtscope may *measure* are those the cpuset of
//! its cgroup allows ([`measurable`]): a measuring thread pins itself to
//! its CPU as cyclictest's do, so a CPU taken out of every process's
//! default affinity (`isolcpus=`, `taskset`) can still be measured. The
//! CPUs rtscope's *own* threads, loads and spinners keep to are the
//! process's affinity when it started ([`home`]): on a machine booted with
//! `isolcpus=` these are the housekeeping CPUs.

use anyhow::{Result, bail};
use rtscope_model::inventory::{format_cpu_list, parse_cpu_list};
use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Online CPUs, from /sys (falls back to this process's affinity).
pub fn online() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| parse_cpu_list(s.trim()).ok())
        .unwrap_or_else(allowed)
}

/// CPUs the calling thread may run on now.
pub fn allowed() -> Vec<usize> {
    match sched_getaffinity(None) {
        Ok(set) => (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        Err(_) => vec![0],
    }
}

/// The online CPUs of this process's affinity when it started: where its
/// own threads (the writer, the trace reader), its loads and its helpers
/// run unless told otherwise. Taken on the first call, which `main` makes
/// before anything pins a thread.
pub fn home() -> Vec<usize> {
    static HOME: OnceLock<Vec<usize>> = OnceLock::new();
    HOME.get_or_init(|| {
        let online = online();
        let home: Vec<usize> = allowed().into_iter().filter(|c| online.contains(c)).collect();
        if home.is_empty() { online } else { home }
    })
    .clone()
}

/// The cpuset of this process's cgroup: the CPUs a thread of it may be
/// pinned to, whatever its affinity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cpuset {
    /// The cgroup, as `/proc/self/cgroup` names it (`/` for the root).
    pub cgroup: String,
    /// The file its CPUs were read from (`cpuset.cpus.effective` on cgroup
    /// v2, `cpuset.effective_cpus` on v1).
    pub file: PathBuf,
    /// Its CPUs, as the file lists them.
    pub list: String,
    pub cpus: Vec<usize>,
}

impl Cpuset {
    /// "the cgroup /a/b (/sys/fs/cgroup/a/b/cpuset.cpus.effective: 0-1)".
    pub fn describe(&self) -> String {
        format!("the cgroup {} ({}: {})", self.cgroup, self.file.display(), self.list)
    }
}

/// The cpuset of this process's cgroup, None where there is none (no
/// cpuset controller mounted): then every online CPU can be measured.
pub fn cpuset() -> Option<Cpuset> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    cpuset_in(&cgroups, &mounts, &|p: &Path| std::fs::read_to_string(p).ok())
}

/// [`cpuset`] from `/proc/self/cgroup` and `/proc/self/mountinfo`, reading
/// the cgroup files with `read`. The v1 cpuset controller where it is
/// mounted, else the v2 hierarchy's nearest `cpuset.cpus.effective` (a
/// cgroup without the controller enabled has its parent's CPUs).
fn cpuset_in(cgroups: &str, mountinfo: &str, read: &dyn Fn(&Path) -> Option<String>) -> Option<Cpuset> {
    // mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
    let mounts: Vec<(&str, &str, &str, &str)> = mountinfo
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let f: Vec<&str> = left.split_whitespace().collect();
            let r: Vec<&str> = right.split_whitespace().collect();
            Some((*f.get(3)?, *f.get(4)?, *r.first()?, *r.get(2).unwrap_or(&"")))
        })
        .collect();
    let within = |path: &str, root: &str| -> Option<String> {
        let rel = if root == "/" { path } else { path.strip_prefix(root)? };
        Some(rel.trim_start_matches('/').to_string())
    };
    let v1 = cgroups.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
        ctrl.split(',').any(|c| c == "cpuset").then_some(path)
    });
    if let Some(path) = v1 {
        let (root, mnt, _, _) = mounts.iter().find(|m| m.2 == "cgroup" && m.3.split(',').any(|o| o == "cpuset"))?;
        let dir = Path::new(mnt).join(within(path, root)?);
        for name in ["cpuset.effective_cpus", "cpuset.cpus"] {
            let file = dir.join(name);
            if let Some(list) = read(&file) {
                let list = list.trim().to_string();
                let cpus = parse_cpu_list(&list).ok()?;
                return Some(Cpuset { cgroup: path.to_string(), file, list, cpus });
            }
        }
        return None;
    }
    let path = cgroups.lines().find_map(|l| l.strip_prefix("0::"))?;
    let (root, mnt, _, _) = mounts.iter().find(|m| m.2 == "cgroup2")?;
    let mut dir = Path::new(mnt).join(within(path, root)?);
    loop {
        let file = dir.join("cpuset.cpus.effective");
        if let Some(list) = read(&file) {
            let list = list.trim().to_string();
            let cpus = parse_cpu_list(&list).ok()?;
            return Some(Cpuset { cgroup: path.to_string(), file, list, cpus });
        }
        if dir == Path::new(mnt) || !dir.pop() {
            return None;
        }
    }
}

/// The CPUs rtscope can measure: the online CPUs the cpuset of its cgroup
/// allows (every online CPU where there is no cpuset), whatever this
/// process's affinity.
pub fn measurable() -> Vec<usize> {
    let online = online();
    match cpuset() {
        Some(set) if online.iter().any(|c| set.cpus.contains(c)) => {
            online.into_iter().filter(|c| set.cpus.contains(c)).collect()
        }
        _ => online,
    }
}

/// Parses `--cpus` and checks every CPU is online and in the cpuset of
/// rtscope's cgroup. This process's affinity is no bound: each measuring
/// thread pins itself to its CPU.
pub fn parse_selection(flag: &str, text: &str) -> Result<Vec<usize>> {
    let cpus = match parse_cpu_list(text) {
        Ok(c) if !c.is_empty() => c,
        Ok(_) => bail!("{flag} '{text}' selects no CPU (e.g. {flag} 0,2-3)"),
        Err(e) => bail!("{flag} '{text}': {e} (e.g. {flag} 0,2-3)"),
    };
    check_selection(flag, &cpus, &online(), cpuset().as_ref())?;
    Ok(cpus)
}

/// CPUs parsed where they were given (`flag`'s), checked against the
/// machine: online, and allowed by the cpuset of rtscope's cgroup.
pub fn selected(flag: &str, list: &rtscope_model::settings::CpuList) -> Result<Vec<usize>> {
    check_selection(flag, list.cpus(), &online(), cpuset().as_ref())?;
    Ok(list.cpus().to_vec())
}

/// CPUs given as numbers (`flag`'s: `--cpu 1`), checked against the
/// machine as [`selected`] checks a list.
pub fn check(flag: &str, cpus: &[usize]) -> Result<()> {
    check_selection(flag, cpus, &online(), cpuset().as_ref())
}

/// [`parse_selection`]'s check of `cpus` against the `online` CPUs and the
/// cgroup's `cpuset`.
fn check_selection(flag: &str, cpus: &[usize], online: &[usize], cpuset: Option<&Cpuset>) -> Result<()> {
    for &c in cpus {
        if !online.contains(&c) {
            bail!("{flag}: CPU {c} is not online (online: {})", format_cpu_list(online));
        }
        if let Some(set) = cpuset.filter(|s| !s.cpus.contains(&c)) {
            bail!(
                "{flag}: CPU {c} is outside the cpuset of rtscope's cgroup: {}; run rtscope in a cgroup whose \
                 cpuset allows CPU {c} (add it to that cgroup's cpuset.cpus, or start rtscope with \
                 `systemd-run --scope -p AllowedCPUs={} rtscope ...`), or pick among its CPUs ({})",
                set.describe(),
                format_cpu_list(online),
                set.list
            );
        }
    }
    Ok(())
}

/// Pins the calling thread to `cpus`.
pub fn pin_self(cpus: &[usize]) -> std::io::Result<()> {
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c);
    }
    sched_setaffinity(None, &set).map_err(Into::into)
}

/// CPUs of `home` (see [`home`]) that are neither in `measured` nor SMT
/// siblings of a measured CPU: where rtscope's own non-RT threads should
/// run. Empty when every one of them is measured.
pub fn housekeeping(home: &[usize], measured: &[usize], siblings: &[(usize, String)]) -> Vec<usize> {
    let mut busy: Vec<usize> = measured.to_vec();
    for (cpu, list) in siblings {
        if measured.contains(cpu) {
            busy.extend(parse_cpu_list(list).unwrap_or_default());
        }
    }
    home.iter().copied().filter(|c| !busy.contains(c)).collect()
}

/// Each online CPU's SMT siblings (`cpuN/topology/thread_siblings_list`).
pub fn siblings() -> Vec<(usize, String)> {
    online()
        .into_iter()
        .filter_map(|c| {
            let list = std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"));
            list.ok().map(|l| (c, l.trim().to_string()))
        })
        .collect()
}

/// Pins the calling thread (and so the threads it creates after) to the
/// [`housekeeping`] CPUs of `measured`; returns them (none when every CPU
/// of [`home`] is measured: then the thread keeps its affinity).
pub fn pin_housekeeping(measured: &[usize], siblings: &[(usize, String)]) -> Vec<usize> {
    let housekeeping = housekeeping(&home(), measured, siblings);
    if !housekeeping.is_empty() {
        let _ = pin_self(&housekeeping);
    }
    housekeeping
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
    fn selection_is_bounded_by_the_cpuset_not_the_affinity() {
        let set = Cpuset {
            cgroup: "/rt.slice".into(),
            file: "/sys/fs/cgroup/rt.slice/cpuset.cpus.effective".into(),
            list: "0-2".into(),
            cpus: vec![0, 1, 2],
        };
        // CPU 2 is in the cpuset: taken, whatever this process's affinity.
        check_selection("--cpus", &[1, 2], &[0, 1, 2, 3], Some(&set)).unwrap();
        let e = check_selection("--cpus", &[3], &[0, 1, 2, 3], Some(&set)).unwrap_err().to_string();
        for part in ["--cpus: CPU 3", "/rt.slice", "cpuset.cpus.effective: 0-2", "AllowedCPUs=0-3"] {
            assert!(e.contains(part), "{part} in {e}");
        }
        check_selection("--cpus", &[3], &[0, 1, 2, 3], None).unwrap();
    }

    fn files(list: &'static [(&'static str, &'static str)]) -> impl Fn(&Path) -> Option<String> {
        move |p: &Path| list.iter().find(|(f, _)| Path::new(f) == p).map(|(_, v)| v.to_string())
    }

    #[test]
    fn cpuset_of_a_v2_cgroup_or_its_nearest_parent() {
        let cgroups = "0::/system.slice/rt.service\n";
        let mounts = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let own = files(&[("/sys/fs/cgroup/system.slice/rt.service/cpuset.cpus.effective", "2-3\n")]);
        let set = cpuset_in(cgroups, mounts, &own).unwrap();
        assert_eq!((set.cgroup.as_str(), set.cpus.clone()), ("/system.slice/rt.service", vec![2, 3]));
        // Without the controller in its cgroup: the parent's.
        let parent = files(&[("/sys/fs/cgroup/system.slice/cpuset.cpus.effective", "0-1")]);
        let set = cpuset_in(cgroups, mounts, &parent).unwrap();
        assert_eq!(set.file, Path::new("/sys/fs/cgroup/system.slice/cpuset.cpus.effective"));
        assert_eq!(set.cpus, vec![0, 1]);
        // No cpuset anywhere: none.
        assert_eq!(cpuset_in(cgroups, mounts, &files(&[])), None);
    }

    #[test]
    fn cpuset_of_a_v1_hierarchy_in_a_container() {
        let cgroups = "4:memory:/x\n3:cpuset:/docker/abc\n0::/\n";
        let mounts = "40 30 0:33 /docker/abc /sys/fs/cgroup/cpuset ro - cgroup cgroup rw,cpuset\n\
                      41 30 0:34 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        let read = files(&[("/sys/fs/cgroup/cpuset/cpuset.effective_cpus", "1\n")]);
        let set = cpuset_in(cgroups, mounts, &read).unwrap();
        assert_eq!((set.cgroup.as_str(), set.cpus.clone(), set.list.as_str()), ("/docker/abc", vec![1], "1"));
    }

    #[test]
    fn housekeeping_avoids_measured_cpus_and_siblings() {
        let sib = vec![(0, "0,4".to_string()), (1, "1,5".to_string())];
        assert_eq!(housekeeping(&[0, 1, 2, 3, 4, 5], &[1], &sib), vec![0, 2, 3, 4]);
        assert!(housekeeping(&[0, 1], &[0, 1], &[]).is_empty());
        // Only the CPUs rtscope started on: an isolated CPU 1 is no home.
        assert_eq!(housekeeping(&[0], &[1], &[]), vec![0]);
    }
}
