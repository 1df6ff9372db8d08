//! Scheduling policy and priority of the calling thread.

use rtscope_model::inventory::{
    CAP_SYS_NICE_BIT, RtRefusal, cap_eff_has, has_rt_group_sched, rt_refusal_fix, v1_rt_runtime_file,
    v2_controllers_file,
};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// SCHED_FIFO: runs until it blocks or a higher priority preempts it.
    Fifo,
    /// SCHED_RR: like FIFO, with round-robin among equal priorities.
    Rr,
    /// SCHED_OTHER: the normal time-sharing policy (priority ignored).
    Other,
}

impl Policy {
    pub fn is_rt(self) -> bool {
        !matches!(self, Policy::Other)
    }

    /// The value of `--policy`: `fifo`, `rr`, `other`.
    pub fn flag_value(self) -> &'static str {
        match self {
            Policy::Fifo => "fifo",
            Policy::Rr => "rr",
            Policy::Other => "other",
        }
    }

    /// The kernel's name: `SCHED_FIFO`, `SCHED_RR`, `SCHED_OTHER`.
    pub fn kernel_name(self) -> &'static str {
        match self {
            Policy::Fifo => "SCHED_FIFO",
            Policy::Rr => "SCHED_RR",
            Policy::Other => "SCHED_OTHER",
        }
    }
}

/// Sets the calling thread's policy and priority (0 for SCHED_OTHER).
pub fn set_self(policy: Policy, priority: u8) -> std::io::Result<()> {
    set_thread(0, policy, priority)
}

/// Sets thread `tid`'s policy and priority (0: the calling thread), as
/// rtla's `-P` sets the kernel tracers' threads.
pub fn set_thread(tid: i32, policy: Policy, priority: u8) -> std::io::Result<()> {
    let (pol, prio) = match policy {
        Policy::Fifo => (libc::SCHED_FIFO, i32::from(priority)),
        Policy::Rr => (libc::SCHED_RR, i32::from(priority)),
        Policy::Other => (libc::SCHED_OTHER, 0),
    };
    let param = libc::sched_param { sched_priority: prio };
    // SAFETY: `tid` is a thread id (0: the calling thread); `param` is a
    // valid sched_param.
    let rc = unsafe { libc::sched_setscheduler(tid, pol, &param) };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

pub use rtscope_model::settings::{DL_MIN_RUNTIME_NS, Deadline};

/// The kernel's sched_attr for `dl`.
fn dl_attr(dl: &Deadline) -> libc::sched_attr {
    // SAFETY: sched_attr is plain old data; all-zero is a valid value.
    let mut a: libc::sched_attr = unsafe { std::mem::zeroed() };
    a.size = std::mem::size_of::<libc::sched_attr>() as u32;
    a.sched_policy = SCHED_DEADLINE;
    a.sched_runtime = dl.runtime_ns;
    a.sched_deadline = dl.period_ns;
    a.sched_period = dl.period_ns;
    a
}

/// Puts the calling thread under SCHED_DEADLINE at `dl` (sched_setattr(2)).
/// No allocation: a measuring thread calls it.
pub fn set_deadline_self(dl: &Deadline) -> std::io::Result<()> {
    let a = dl_attr(dl);
    // SAFETY: `a` is a valid sched_attr of the size it says; pid 0 is the
    // calling thread; the flags argument is 0.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &a as *const libc::sched_attr, 0u32) };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// Why the kernel refused SCHED_DEADLINE `dl` for a thread pinned to `cpu`,
/// and the fix: `errno` is sched_setattr's, `root` whether rtscope has the
/// privilege, `isolated` the kernel's isolated CPUs
/// (/sys/devices/system/cpu/isolated), `bandwidth` the root domain's
/// limit (sched_rt_runtime_us / sched_rt_period_us, e.g. "95%").
pub fn dl_refusal(dl: &Deadline, cpu: usize, errno: i32, root: bool, isolated: &str, bandwidth: &str) -> String {
    use rtscope_model::units::human;
    let what = format!("--policy deadline ({}) on CPU {cpu}", dl.describe());
    match errno {
        libc::EPERM if !root => format!(
            "{what}: the kernel refused it (EPERM): SCHED_DEADLINE needs root or CAP_SYS_NICE; run rtscope as root, or use --policy fifo"
        ),
        libc::EPERM => {
            let isolated = isolated.trim();
            let now = if isolated.is_empty() {
                "no CPU is isolated now".to_string()
            } else {
                format!("isolated now: {isolated}")
            };
            format!(
                "{what}: the kernel refused it (EPERM): a SCHED_DEADLINE thread's allowed CPUs must cover its whole \
                 root domain, and CPU {cpu} shares its root domain with other CPUs ({now}), so a thread pinned to it \
                 cannot be one. Fix: make CPU {cpu} its own root domain, either at boot with \
                 isolcpus=domain,{cpu} (one isolated CPU; several isolated CPUs share one root domain), or with an \
                 exclusive cpuset partition of cgroup v2 run from a root shell: mkdir /sys/fs/cgroup/rt; echo \
                 +cpuset > /sys/fs/cgroup/cgroup.subtree_control; echo {cpu} > /sys/fs/cgroup/rt/cpuset.cpus; echo \
                 root > /sys/fs/cgroup/rt/cpuset.cpus.partition; echo $$ > /sys/fs/cgroup/rt/cgroup.procs; then run \
                 rtscope from that shell (undo: move the shell back with echo $$ > /sys/fs/cgroup/cgroup.procs and \
                 rmdir /sys/fs/cgroup/rt); or measure at --policy fifo"
            )
        }
        libc::EBUSY => format!(
            "{what}: the kernel refused it (EBUSY, admission control): its bandwidth, {} of every {}, does not fit \
             in what CPU {cpu}'s root domain has left for SCHED_DEADLINE (at most {bandwidth} of each CPU, less the \
             deadline threads already there); give a smaller --dl-runtime or a longer --interval, or stop the other \
             SCHED_DEADLINE threads",
            human(dl.runtime_ns),
            human(dl.period_ns)
        ),
        libc::EINVAL => format!(
            "{what}: the kernel refused it (EINVAL): its period must lie within \
             /proc/sys/kernel/sched_deadline_period_min_us and _max_us (100us and 4s by default) and its runtime \
             from 1.024us to the period; give another --interval or --dl-runtime"
        ),
        _ => format!("{what}: the kernel refused it: {}", std::io::Error::from_raw_os_error(errno)),
    }
}

/// None when a thread pinned to each of `cpus` may run under `dl`
/// (tried on a throw-away thread per CPU, which gives its reservation
/// back as it ends); else the first refusal and its fix ([`dl_refusal`]).
pub fn dl_refused(cpus: &[usize], dl: &Deadline) -> Option<String> {
    for &cpu in cpus {
        let dl_ = *dl;
        // A CPU the thread cannot be pinned to is the measuring thread's
        // own error, said as it starts.
        let tried = std::thread::spawn(move || match crate::sys::cpu::pin_self(&[cpu]) {
            Ok(()) => set_deadline_self(&dl_),
            Err(_) => Ok(()),
        })
        .join();
        let err = match tried {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e,
            Err(_) => return Some(format!("--policy deadline on CPU {cpu}: the probing thread panicked")),
        };
        return Some(refusal_here(dl, cpu, &err));
    }
    None
}

/// [`dl_refusal`] for `err`, with this machine's facts.
pub fn refusal_here(dl: &Deadline, cpu: usize, err: &std::io::Error) -> String {
    let Some(errno) = err.raw_os_error() else {
        return format!("--policy deadline on CPU {cpu}: {err}");
    };
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let status = read("/proc/self/status");
    let root = rustix::process::geteuid().is_root() || cap_eff_has(&status, CAP_SYS_NICE_BIT);
    let num = |p: &str| read(p).trim().parse::<i64>().ok();
    let bandwidth = match (num("/proc/sys/kernel/sched_rt_runtime_us"), num("/proc/sys/kernel/sched_rt_period_us")) {
        (Some(r), Some(p)) if r >= 0 && p > 0 => format!("{}%", r * 100 / p),
        _ => "all".to_string(),
    };
    dl_refusal(dl, cpu, errno, root, &read("/sys/devices/system/cpu/isolated"), &bandwidth)
}

/// The calling thread's real-time priority as the kernel holds it
/// (sched_getparam(2); 0 under SCHED_OTHER).
pub fn priority_of_self() -> std::io::Result<u8> {
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param to fill.
    let rc = unsafe { libc::sched_getparam(0, &mut param) };
    if rc == 0 { Ok(param.sched_priority.clamp(0, 99) as u8) } else { Err(std::io::Error::last_os_error()) }
}

/// None when this process may use SCHED_FIFO at `priority` (root,
/// CAP_SYS_NICE or an RLIMIT_RTPRIO allowing it, and a cgroup that gives
/// real-time threads time; probed on a throw-away thread); else the fix
/// for the cause the kernel's refusal points to (no privilege, or a cgroup
/// or system without real-time time: see `rt_refusal_fix`).
pub fn rt_refused(priority: u8) -> Option<String> {
    let err = match std::thread::spawn(move || set_self(Policy::Fifo, priority)).join() {
        Ok(Ok(())) => return None,
        Ok(Err(e)) => e,
        Err(_) => std::io::Error::other("the probing thread panicked"),
    };
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let (cgroup, mounts) = (read("/proc/self/cgroup"), read("/proc/self/mounts"));
    let number = |p: &str| read(p).trim().parse().ok();
    let release = rustix::system::uname().release().to_string_lossy().into_owned();
    let kconfig = std::fs::read_to_string(format!("/boot/config-{release}")).ok();
    Some(rt_refusal_fix(&RtRefusal {
        error: &err.to_string(),
        eperm: err.raw_os_error() == Some(libc::EPERM),
        cap_sys_nice: cap_eff_has(&read("/proc/self/status"), CAP_SYS_NICE_BIT),
        rt_group_sched: kconfig.as_deref().map(has_rt_group_sched),
        group_runtime_us: v1_rt_runtime_file(&cgroup, &mounts).and_then(|f| number(&f)),
        v2_cpu_controller: v2_controllers_file(&cgroup, &mounts)
            .is_some_and(|f| read(&f).split_whitespace().any(|c| c == "cpu")),
        cgroup: &cgroup,
        mounts: &mounts,
    }))
}

/// This thread's id, as the kernel's trace events and `SIGEV_THREAD_ID`
/// name it.
pub fn thread_id() -> i32 {
    rustix::thread::gettid().as_raw_nonzero().get()
}

/// A thread's scheduling as the kernel holds it (sched_getattr(2)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attr {
    /// 0 OTHER, 1 FIFO, 2 RR, 3 BATCH, 5 IDLE, 6 DEADLINE.
    pub policy: u32,
    /// The real-time priority (1..99; 0 for the other policies).
    pub priority: u32,
    /// SCHED_DEADLINE's runtime, deadline and period, ns (0 otherwise).
    pub runtime_ns: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
}

/// The kernel's policy numbers.
pub const SCHED_FIFO: u32 = 1;
pub const SCHED_RR: u32 = 2;
pub const SCHED_DEADLINE: u32 = 6;

/// The scheduling of thread `tid` (any process's); None when it is gone.
pub fn attr_of(tid: i32) -> Option<Attr> {
    // SAFETY: sched_attr is plain old data; all-zero is a valid value.
    let mut a: libc::sched_attr = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::sched_attr>() as u32;
    // SAFETY: sched_getattr writes at most `size` bytes into `a`, which is
    // that large; the flags argument must be 0.
    let rc = unsafe { libc::syscall(libc::SYS_sched_getattr, tid, &mut a as *mut libc::sched_attr, size, 0u32) };
    (rc == 0).then_some(Attr {
        policy: a.sched_policy,
        priority: a.sched_priority,
        runtime_ns: a.sched_runtime,
        deadline_ns: a.sched_deadline,
        period_ns: a.sched_period,
    })
}

/// A policy number's name: `SCHED_FIFO`, ...
pub fn policy_name(policy: u32) -> &'static str {
    match policy {
        0 => "SCHED_OTHER",
        1 => "SCHED_FIFO",
        2 => "SCHED_RR",
        3 => "SCHED_BATCH",
        5 => "SCHED_IDLE",
        6 => "SCHED_DEADLINE",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_own_scheduling() {
        let a = attr_of(thread_id()).unwrap();
        assert_eq!(policy_name(a.policy), "SCHED_OTHER");
        assert!(attr_of(i32::MAX).is_none());
    }

    #[test]
    fn other_is_always_allowed() {
        std::thread::spawn(|| {
            set_self(Policy::Other, 0).unwrap();
            assert_eq!(priority_of_self().unwrap(), 0);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn deadline_refusals_say_why_and_the_fix() {
        let d = Deadline { runtime_ns: 50_000, period_ns: 1_000_000 };
        let m = dl_refusal(&d, 1, libc::EPERM, true, "\n", "95%");
        assert!(m.starts_with("--policy deadline (SCHED_DEADLINE runtime 50us, period 1ms) on CPU 1"), "{m}");
        assert!(m.contains("root domain") && m.contains("no CPU is isolated now"), "{m}");
        assert!(m.contains("isolcpus=domain,1") && m.contains("cpuset.cpus.partition"), "{m}");
        assert!(dl_refusal(&d, 1, libc::EPERM, true, "2-3\n", "95%").contains("isolated now: 2-3"));
        assert!(dl_refusal(&d, 1, libc::EPERM, false, "", "95%").contains("CAP_SYS_NICE"));
        let m = dl_refusal(&d, 0, libc::EBUSY, true, "", "95%");
        assert!(m.contains("admission control") && m.contains("50us of every 1ms") && m.contains("95%"), "{m}");
        assert!(m.contains("--dl-runtime"), "{m}");
        assert!(dl_refusal(&d, 0, libc::EINVAL, true, "", "95%").contains("sched_deadline_period_min_us"));
    }

    #[test]
    fn a_deadline_thread_over_its_whole_root_domain_is_admitted() {
        // Unpinned, a thread's CPUs cover its root domain: the kernel
        // admits it where rtscope has the privilege.
        let d = Deadline { runtime_ns: 10_000, period_ns: 1_000_000 };
        let got = std::thread::spawn(move || set_deadline_self(&d).map(|()| attr_of(thread_id()))).join().unwrap();
        match got {
            Ok(a) => {
                assert_eq!(a.map(|a| (a.policy, a.runtime_ns, a.period_ns)), Some((SCHED_DEADLINE, 10_000, 1_000_000)))
            }
            Err(e) => eprintln!("skipped: SCHED_DEADLINE refused here: {e}"),
        }
    }
}
