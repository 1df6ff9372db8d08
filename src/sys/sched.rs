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
}
