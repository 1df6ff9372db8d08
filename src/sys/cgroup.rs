//! A cgroup v2 of rtscope's own for its loads' commands: each command in
//! a cgroup of its own (`rtscope-PID/cmd-N`, under rtscope's cgroup), so
//! that everything it starts, whatever its process group or session
//! (`setsid`, a double fork), is killed with it: by rtscope when the
//! command ends, by the janitor after a SIGKILL (`cgroup.kill`). Where
//! cgroup v2 cannot be had (no cgroup2 mount, not allowed to make one, a
//! kernel before 5.14 without `cgroup.kill`) the commands run as before
//! and the marker in their environment finds what they left
//! (`ipc::kill_marked`).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// rtscope's cgroup directory for its loads: made once, registered with
/// the janitor before it is made; None where it cannot be had.
fn loads_dir() -> Option<PathBuf> {
    static DIR: Mutex<Option<Option<PathBuf>>> = Mutex::new(None);
    let mut d = DIR.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(made) = &*d {
        return made.clone();
    }
    let made = make_loads_dir();
    *d = Some(made.clone());
    made
}

/// Where the cgroup2 file system is mounted, and this process's cgroup in
/// it: `MOUNT/PATH` from /proc/self/mounts and /proc/self/cgroup's `0::`.
fn own_cgroup() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let mount = mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
    })?;
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(mount.join(own.trim_start_matches('/')))
}

fn make_loads_dir() -> Option<PathBuf> {
    let own = own_cgroup()?;
    let dir = own.join(format!("rtscope-{}", std::process::id()));
    let registry = super::ipc::janitor().ok()?.registry();
    if !registry.add_path(super::ipc::Leftover::Cgroup, &dir) {
        return None;
    }
    // A cgroup below the root has `cgroup.kill` from Linux 5.14 on.
    if std::fs::create_dir(&dir).is_ok() {
        if dir.join("cgroup.kill").exists() {
            return Some(dir);
        }
        let _ = std::fs::remove_dir(&dir);
    }
    registry.remove_path(super::ipc::Leftover::Cgroup, &dir);
    None
}

/// One command's cgroup: its directory and its `cgroup.procs`, open for
/// the command to write itself into between fork and exec.
pub struct CommandCgroup {
    dir: PathBuf,
    pub procs: OwnedFd,
}

impl CommandCgroup {
    /// A new cgroup for command number `n`, or None where cgroups cannot
    /// be had.
    pub fn new(n: u64) -> Option<CommandCgroup> {
        let dir = loads_dir()?.join(format!("cmd-{n}"));
        std::fs::create_dir(&dir).ok()?;
        match std::fs::OpenOptions::new().write(true).open(dir.join("cgroup.procs")) {
            Ok(f) => Some(CommandCgroup { dir, procs: f.into() }),
            Err(_) => {
                let _ = std::fs::remove_dir(&dir);
                None
            }
        }
    }

    /// Kills everything in it and removes it (waiting up to a second for
    /// the killed processes to go).
    pub fn end(self) {
        kill_and_remove(&self.dir);
    }
}

fn kill_and_remove(dir: &Path) {
    let _ = std::fs::write(dir.join("cgroup.kill"), "1");
    for _ in 0..100 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Removes the load cgroups of rtscope processes gone (their janitor
/// killed too), and what still runs in them.
pub fn remove_stale() {
    let Some(own) = own_cgroup() else { return };
    let Ok(entries) = std::fs::read_dir(&own) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("rtscope-").and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !super::process::alive(pid) {
            let _ = std::fs::write(e.path().join("cgroup.kill"), "1");
            if let Ok(children) = std::fs::read_dir(e.path()) {
                for c in children.flatten().filter(|c| c.path().is_dir()) {
                    kill_and_remove(&c.path());
                }
            }
            kill_and_remove(&e.path());
        }
    }
}
