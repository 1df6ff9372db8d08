//! Why the kernel refused a real-time policy, and the fix for that cause.
//!
//! Root, or CAP_SYS_NICE, is not always enough: a kernel built with
//! `CONFIG_RT_GROUP_SCHED` gives real-time threads time per cgroup, and a
//! cgroup without a budget of its own makes `sched_setscheduler(2)` fail
//! with EPERM for every process in it, root's too (a container, a systemd
//! service with CPU accounting, a job scheduler's cgroup). `chrt` then says
//! only "Operation not permitted". The binary reads the facts; this judges
//! them, and blames a cgroup only on evidence: its zero budget (v1), or
//! its own cpu controller on a kernel with per-cgroup real-time scheduling
//! (v2, where no budget can be read).

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
    /// The kernel's configuration says whether it has `CONFIG_RT_GROUP_SCHED`
    /// (`/boot/config-RELEASE`); None where it cannot be read.
    pub rt_group_sched: Option<bool>,
    /// `/proc/self/cgroup`.
    pub cgroup: &'a str,
    /// `/proc/self/mounts`.
    pub mounts: &'a str,
    /// `cpu.rt_runtime_us` of the process's cgroup in the v1 `cpu` hierarchy.
    pub group_runtime_us: Option<i64>,
    /// Under cgroup v2: the `cpu` controller is enabled for the process's
    /// cgroup (its `cgroup.controllers` lists it), so that cgroup is its
    /// scheduling group.
    pub v2_cpu_controller: bool,
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

/// Whether a kernel configuration's text has `CONFIG_RT_GROUP_SCHED=y`.
pub fn has_rt_group_sched(kconfig: &str) -> bool {
    kconfig.lines().any(|l| l.trim() == "CONFIG_RT_GROUP_SCHED=y")
}

/// The path of the process's cgroup v2 `cgroup.controllers`.
pub fn v2_controllers_file(proc_cgroup: &str, mounts: &str) -> Option<String> {
    let (mount, path) = (v2_mount(mounts)?, v2_cgroup(proc_cgroup)?);
    Some(format!("{}/cgroup.controllers", join(mount, path)))
}

/// The fix for a refused real-time policy: the cause the facts point to,
/// and what to do about it. The kernel refuses SCHED_FIFO with EPERM for
/// no privilege (capability or RLIMIT_RTPRIO), a security module's veto,
/// or, with `CONFIG_RT_GROUP_SCHED`, a scheduling group whose real-time
/// budget is zero; a budget can be read under cgroup v1 only.
pub fn rt_refusal_fix(r: &RtRefusal) -> String {
    if !r.eperm {
        return format!("the kernel refused it ({}): a real-time priority is 1 to 99", r.error);
    }
    if !r.cap_sys_nice {
        return PRIVILEGES_FIX.to_string();
    }
    let root_or = |mount: &str| {
        format!(
            "start rtscope from the root cgroup (echo $$ > {}/cgroup.procs, then run it from that shell)",
            mount.trim_end_matches('/')
        )
    };
    // Under v1 the budget says it, whatever the path (inside a cgroup
    // namespace a container's own cgroup reads as "/").
    if let (Some(path), Some(mount), Some(0)) = (v1_cpu_cgroup(r.cgroup), v1_cpu_mount(r.mounts), r.group_runtime_us) {
        return format!(
            "rtscope has CAP_SYS_NICE, but its cgroup {path} gives real-time threads no time \
             (its cpu.rt_runtime_us is 0: this kernel schedules real-time threads per cgroup, \
             CONFIG_RT_GROUP_SCHED); {}, or give the cgroup a budget (echo 950000 > {}/cpu.rt_runtime_us, \
             each parent's first)",
            root_or(mount),
            join(mount, path)
        );
    }
    if let (Some(path), Some(mount), true, Some(true) | None) =
        (v2_cgroup(r.cgroup), v2_mount(r.mounts), r.v2_cpu_controller, r.rt_group_sched)
        && path != "/"
    {
        return format!(
            "rtscope has CAP_SYS_NICE, but it runs in the cgroup {path}, whose cpu controller makes it its own \
             scheduling group, and where the kernel schedules real-time threads per cgroup \
             (CONFIG_RT_GROUP_SCHED{}) cgroup v2 gives no cgroup but the root real-time time; {}, or boot with \
             rt_group_sched=0 where the kernel has that switch",
            if r.rt_group_sched.is_none() {
                ", which this kernel's configuration, unreadable here, may have"
            } else {
                ", which this kernel has"
            },
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
            rt_group_sched: Some(true),
            cgroup,
            mounts,
            group_runtime_us: None,
            v2_cpu_controller: true,
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
        let fix = rt_refusal_fix(&r);
        assert!(fix.contains("Invalid argument") && fix.contains("1 to 99") && !fix.contains("setcap"), "{fix}");

        // A v1 cpu cgroup without a budget: its file named, and the root cgroup's procs.
        let mut r = refused("1:cpu:/batch/job7\n0::/\n", V1_MOUNTS);
        r.group_runtime_us = Some(0);
        let fix = rt_refusal_fix(&r);
        assert!(fix.contains("its cgroup /batch/job7") && fix.contains("cpu.rt_runtime_us is 0"), "{fix}");
        assert!(fix.contains("echo 950000 > /sys/fs/cgroup/cpu/batch/job7/cpu.rt_runtime_us"), "{fix}");
        assert!(fix.contains("echo $$ > /sys/fs/cgroup/cpu/cgroup.procs"), "{fix}");

        // A v1 cgroup whose budget is not zero, or cannot be read, is not
        // the cause; one seen as "/" from inside a namespace with a zero
        // budget is.
        let mut r = refused("1:cpu:/batch/job7\n0::/\n", V1_MOUNTS);
        r.group_runtime_us = Some(950_000);
        assert!(rt_refusal_fix(&r).contains("security module"));
        r.group_runtime_us = None;
        assert!(rt_refusal_fix(&r).contains("security module"));
        let mut r = refused("1:cpu:/\n0::/\n", V1_MOUNTS);
        r.group_runtime_us = Some(0);
        assert!(rt_refusal_fix(&r).contains("its cgroup / gives real-time threads no time"));

        // cgroup v2: no budget to give, the root cgroup or the boot switch;
        // only where the cpu controller makes the cgroup its group, and the
        // kernel has (or may have) per-cgroup real-time scheduling.
        let fix = rt_refusal_fix(&refused("0::/process_api/85fa\n", V2_MOUNTS));
        assert!(fix.contains("the cgroup /process_api/85fa") && fix.contains("which this kernel has"), "{fix}");
        assert!(fix.contains("echo $$ > /sys/fs/cgroup/cgroup.procs") && fix.contains("rt_group_sched=0"), "{fix}");
        let mut r = refused("0::/process_api/85fa\n", V2_MOUNTS);
        r.rt_group_sched = None;
        assert!(rt_refusal_fix(&r).contains("unreadable here, may have"));
        r.v2_cpu_controller = false;
        assert!(rt_refusal_fix(&r).contains("security module"), "no cpu controller: the root group");
        let mut r = refused("0::/user.slice\n", V2_MOUNTS);
        r.rt_group_sched = Some(false);
        assert!(rt_refusal_fix(&r).contains("security module"), "no per-cgroup real-time scheduling");
        assert!(
            has_rt_group_sched("# x\nCONFIG_RT_GROUP_SCHED=y\n")
                && !has_rt_group_sched("# CONFIG_RT_GROUP_SCHED is not set")
        );
        assert_eq!(
            v2_controllers_file("0::/a/b\n", V2_MOUNTS).as_deref(),
            Some("/sys/fs/cgroup/a/b/cgroup.controllers")
        );

        // In the root cgroup with the privilege: something else forbids it.
        let fix = rt_refusal_fix(&refused("1:cpu:/\n0::/\n", V1_MOUNTS));
        assert!(fix.contains("security module"), "{fix}");
    }
}
