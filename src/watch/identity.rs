//! Which threads `rtscope watch` takes, and who they are: the filter of
//! its flags, a thread's identity from `/proc`, the scan at the start.

use crate::sys::sched;

/// Which threads to watch.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Filter {
    /// Thread or process ids (empty: any).
    pub pids: Vec<i32>,
    /// Thread or process names (empty: any).
    pub comms: Vec<String>,
    /// Thread ids: that thread alone, not its process's others (empty: any).
    pub tids: Vec<i32>,
    /// Policies, the kernel's numbers (1 FIFO, 2 RR, 6 DEADLINE, 0 OTHER).
    pub policies: Vec<u32>,
    /// CPUs: a thread is taken when it runs on one of them (None: any).
    pub cpus: Option<Vec<usize>>,
}

impl Filter {
    /// Whether `id`, seen on `cpu`, is to be watched.
    pub fn takes(&self, id: &Identity, cpu: usize) -> bool {
        self.takes_on_its_cpus(id) && self.cpus.as_ref().is_none_or(|c| c.contains(&cpu))
    }

    /// Whether `id` is to be watched when it runs on one of --cpus.
    pub(super) fn takes_on_its_cpus(&self, id: &Identity) -> bool {
        let named = (self.pids.is_empty() && self.comms.is_empty() && self.tids.is_empty())
            || self.pids.iter().any(|&p| p == id.tid || p == id.pid)
            || self.tids.contains(&id.tid)
            || self.comms.iter().any(|c| *c == id.comm || *c == id.process);
        self.policies.contains(&id.policy) && named
    }

    /// Whether a thread of the kernel priority `prio` (from the trace:
    /// 0..99 real-time, -1 deadline, 100.. normal) may be one to watch.
    pub(super) fn may_take(&self, prio: i32) -> bool {
        prio < 100 || self.policies.iter().any(|&p| p == 0 || p == 3 || p == 5)
    }
}

/// A thread as it was when found.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Identity {
    pub tid: i32,
    /// Its process.
    pub pid: i32,
    pub comm: String,
    /// Its process's name.
    pub process: String,
    pub policy: u32,
    pub priority: u32,
    /// SCHED_DEADLINE's parameters (0 for the other policies).
    pub dl_runtime_ns: u64,
    pub dl_deadline_ns: u64,
    pub dl_period_ns: u64,
}

impl Identity {
    /// `comm (tid)`.
    pub fn label(&self) -> String {
        format!("{} ({})", self.comm, self.tid)
    }

    pub fn sched(&self) -> String {
        match self.policy {
            sched::SCHED_FIFO | sched::SCHED_RR => format!("{} {}", sched::policy_name(self.policy), self.priority),
            p => sched::policy_name(p).to_string(),
        }
    }
}

pub(super) fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim_end().to_string())
}

/// The identity of thread `tid`, None when it is gone.
pub fn identify(tid: i32) -> Option<Identity> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let pid = status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())?;
    let comm = read_trim(&format!("/proc/{tid}/comm"))?;
    let process = read_trim(&format!("/proc/{pid}/comm")).unwrap_or_else(|| comm.clone());
    let a = sched::attr_of(tid)?;
    Some(Identity {
        tid,
        pid,
        comm,
        process,
        policy: a.policy,
        priority: a.priority,
        dl_runtime_ns: a.runtime_ns,
        dl_deadline_ns: a.deadline_ns,
        dl_period_ns: a.period_ns,
    })
}

/// The CPU thread `tid` last ran on (`/proc/TID/stat`, field 39).
fn last_cpu(tid: i32) -> Option<usize> {
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].split_whitespace().nth(36)?.parse().ok()
}

/// The threads `filter` takes now, rtscope's own left out.
pub fn scan(filter: &Filter) -> Vec<Identity> {
    let own = std::process::id() as i32;
    let mut found = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else { return found };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if pid == own {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else { continue };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
            let Some(id) = identify(tid) else { continue };
            if last_cpu(tid).is_some_and(|c| filter.takes(&id, c)) {
                found.push(id);
            }
        }
    }
    found.sort_by_key(|i| i.tid);
    found
}
