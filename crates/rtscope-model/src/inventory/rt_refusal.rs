//! Why the kernel refused a real-time policy, and the fix for that cause.
//!
//! Root, or CAP_SYS_NICE, is not always enough: a kernel built with
//! `CONFIG_RT_GROUP_SCHED` gives real-time threads time per cgroup, and a
//! cgroup without a budget of its own makes `sched_setscheduler(2)` fail
//! with EPERM for every process in it, root's too (a container, a systemd
//! service with CPU accounting, a job scheduler's cgroup). `chrt` then says
//! only "Operation not permitted". The binary reads the facts; this judges
//! them.

use super::PRIVILEGES_FIX;

/// What a refusal is judged from, as the process sees it.
#[derive(Debug, Clone, Default)]
pub struct RtRefusal<'a> {
    /// The kernel's error, as text (`Operation not permitted (os error 1)`).
    pub error: &'a str,
    /// The error was EPERM (an EINVAL is a priority out of range, not a privilege).
    pub eperm: bool,
    /// CAP_SYS_NICE is in the effective set.
    pub cap_sys_nice: bool,
    /// `/proc/sys/kernel/sched_rt_runtime_us`.
    pub global_runtime_us: Option<i64>,
    /// `/proc/self/cgroup`.
    pub cgroup: &'a str,
    /// `/proc/self/mounts`.
    pub mounts: &'a str,
    /// `cpu.rt_runtime_us` of the process's cgroup in the v1 `cpu` hierarchy.
    pub group_runtime_us: Option<i64>,
}

/// The process's cgroup in the v1 `cpu` hierarchy (`4:cpu,cpuacct:/a/b`),
/// if the `cpu` controller is mounted as v1.
pub fn v1_cpu_cgroup(proc_cgroup: &str) -> Option<&str> {
    proc_cgroup.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        ctrls.split(',').any(|c| c == "cpu").then_some(path)
    })
}

/// The process's cgroup in the unified (v2) hierarchy (`0::/a/b`).
pub fn v2_cgroup(proc_cgroup: &str) -> Option<&str> {
    proc_cgroup.lines().find_map(|l| l.strip_prefix("0::"))
}

/// Where the v1 `cpu` controller is mounted (its `cpu` option, not `cpuset`
/// or `cpuacct` alone), from `/proc/self/mounts`.
pub fn v1_cpu_mount(mounts: &str) -> Option<&str> {
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 4 && f[2] == "cgroup" && f[3].split(',').any(|o| o == "cpu")).then(|| f[1])
    })
}

/// Where the unified (v2) hierarchy is mounted.
pub fn v2_mount(mounts: &str) -> Option<&str> {
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 3 && f[2] == "cgroup2").then(|| f[1])
    })
}

/// The path of `cpu.rt_runtime_us` for the process's v1 `cpu` cgroup.
pub fn v1_rt_runtime_file(proc_cgroup: &str, mounts: &str) -> Option<String> {
    let (mount, path) = (v1_cpu_mount(mounts)?, v1_cpu_cgroup(proc_cgroup)?);
    Some(format!("{}/cpu.rt_runtime_us", join(mount, path)))
}

fn join(mount: &str, path: &str) -> String {
    format!("{}{}", mount.trim_end_matches('/'), if path == "/" { "" } else { path })
}

/// The fix for a refused real-time policy: the cause the facts point to,
/// and what to do about it.
pub fn rt_refusal_fix(r: &RtRefusal) -> String {
    if !r.eperm {
        return format!("the kernel refused it ({}); {PRIVILEGES_FIX}", r.error);
    }
    if !r.cap_sys_nice {
        return PRIVILEGES_FIX.to_string();
    }
    if r.global_runtime_us == Some(0) {
        return "kernel.sched_rt_runtime_us is 0, which gives real-time threads no time at all: \
                sysctl kernel.sched_rt_runtime_us=950000 (the kernel's default)"
            .to_string();
    }
    let root_or = |mount: &str| {
        format!(
            "start rtscope from the root cgroup (echo $$ > {}/cgroup.procs, then run it from that shell)",
            mount.trim_end_matches('/')
        )
    };
    if let (Some(path), Some(mount)) = (v1_cpu_cgroup(r.cgroup), v1_cpu_mount(r.mounts))
        && path != "/"
    {
        let budget = r.group_runtime_us.map_or("unreadable".to_string(), |n| n.to_string());
        return format!(
            "rtscope has CAP_SYS_NICE, but its cgroup {path} gives real-time threads no time \
             (its cpu.rt_runtime_us is {budget}: this kernel schedules real-time threads per cgroup, \
             CONFIG_RT_GROUP_SCHED); {}, or give the cgroup a budget (echo 950000 > {}/cpu.rt_runtime_us, \
             each parent's first)",
            root_or(mount),
            join(mount, path)
        );
    }
    if let (Some(path), Some(mount)) = (v2_cgroup(r.cgroup), v2_mount(r.mounts))
        && path != "/"
    {
        return format!(
            "rtscope has CAP_SYS_NICE, but it runs in the cgroup {path}, and where the kernel schedules \
             real-time threads per cgroup (CONFIG_RT_GROUP_SCHED) cgroup v2 gives no cgroup but the root \
             real-time time; {}, or boot with rt_group_sched=0 where the kernel has that switch (6.16 and later)",
            root_or(mount)
        );
    }
    format!(
        "the kernel refused it although rtscope has CAP_SYS_NICE ({}): a security module (SELinux, \
         AppArmor) or a container's seccomp policy may forbid real-time policies here",
        r.error
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1_MOUNTS: &str = "cgroup /sys/fs/cgroup/cpuset cgroup rw,nosuid,cpuset 0 0\n\
        cgroup /sys/fs/cgroup/cpu cgroup rw,nosuid,nodev,noexec,relatime,cpu 0 0\n\
        cgroup /sys/fs/cgroup/cpuacct cgroup rw,cpuacct 0 0\n\
        cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid 0 0\n";
    const V2_MOUNTS: &str = "proc /proc proc rw 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n";

    fn refused<'a>(cgroup: &'a str, mounts: &'a str) -> RtRefusal<'a> {
        RtRefusal {
            error: "Operation not permitted (os error 1)",
            eperm: true,
            cap_sys_nice: true,
            global_runtime_us: Some(950_000),
            cgroup,
            mounts,
            group_runtime_us: None,
        }
    }

    #[test]
    fn finds_the_cpu_cgroup_of_either_hierarchy() {
        let hybrid = "9:name=systemd:/\n2:cpuacct:/\n1:cpu,cpuacct:/batch/job7\n0::/user.slice\n";
        assert_eq!(v1_cpu_cgroup(hybrid), Some("/batch/job7"));
        assert_eq!(v2_cgroup(hybrid), Some("/user.slice"));
        assert_eq!(v1_cpu_cgroup("3:cpuset:/a\n0::/b\n"), None, "cpuset is not cpu");
        assert_eq!(v1_cpu_mount(V1_MOUNTS), Some("/sys/fs/cgroup/cpu"));
        assert_eq!(v2_mount(V1_MOUNTS), Some("/sys/fs/cgroup/unified"));
        assert_eq!(v1_cpu_mount(V2_MOUNTS), None);
        assert_eq!(
            v1_rt_runtime_file("1:cpu:/batch/job7\n", V1_MOUNTS).as_deref(),
            Some("/sys/fs/cgroup/cpu/batch/job7/cpu.rt_runtime_us")
        );
        assert_eq!(v1_rt_runtime_file("1:cpu:/\n", V1_MOUNTS).as_deref(), Some("/sys/fs/cgroup/cpu/cpu.rt_runtime_us"));
    }

    #[test]
    fn names_the_cause_and_its_fix() {
        // No privilege: the usual fix.
        let mut r = refused("0::/\n", V2_MOUNTS);
        r.cap_sys_nice = false;
        assert_eq!(rt_refusal_fix(&r), PRIVILEGES_FIX);

        // A priority out of range is no privilege matter.
        let mut r = refused("0::/\n", V2_MOUNTS);
        (r.eperm, r.error) = (false, "Invalid argument (os error 22)");
        assert!(rt_refusal_fix(&r).contains("Invalid argument"), "{}", rt_refusal_fix(&r));

        // The global budget is zero.
        let mut r = refused("0::/\n", V2_MOUNTS);
        r.global_runtime_us = Some(0);
        assert!(rt_refusal_fix(&r).contains("sysctl kernel.sched_rt_runtime_us=950000"));

        // A v1 cpu cgroup without a budget: its file named, and the root cgroup's procs.
        let mut r = refused("1:cpu:/batch/job7\n0::/\n", V1_MOUNTS);
        r.group_runtime_us = Some(0);
        let fix = rt_refusal_fix(&r);
        assert!(fix.contains("its cgroup /batch/job7") && fix.contains("cpu.rt_runtime_us is 0"), "{fix}");
        assert!(fix.contains("echo 950000 > /sys/fs/cgroup/cpu/batch/job7/cpu.rt_runtime_us"), "{fix}");
        assert!(fix.contains("echo $$ > /sys/fs/cgroup/cpu/cgroup.procs"), "{fix}");

        // cgroup v2: no budget to give, the root cgroup or the boot switch.
        let fix = rt_refusal_fix(&refused("0::/process_api/85fa\n", V2_MOUNTS));
        assert!(fix.contains("the cgroup /process_api/85fa"), "{fix}");
        assert!(fix.contains("echo $$ > /sys/fs/cgroup/cgroup.procs") && fix.contains("rt_group_sched=0"), "{fix}");

        // In the root cgroup with the privilege: something else forbids it.
        let fix = rt_refusal_fix(&refused("1:cpu:/\n0::/\n", V1_MOUNTS));
        assert!(fix.contains("security module"), "{fix}");
    }
}
