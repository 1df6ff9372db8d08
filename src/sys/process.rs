//! Child processes that never outlive rtscope.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// Spawns `cmd` so that the kernel kills it (SIGKILL) when rtscope exits,
/// by any path, SIGKILL included (strictly: when the thread that spawned it
/// ends, so that thread must outlive the child). The child stays in
/// rtscope's process group, with no signal blocked.
pub fn spawn_tied(cmd: &mut Command) -> std::io::Result<Child> {
    tie(cmd);
    cmd.spawn()
}

/// The child part of [`spawn_tied`], run between fork and exec.
fn tie(cmd: &mut Command) {
    let parent = std::process::id();
    // SAFETY: the closure runs between fork and exec and only calls
    // async-signal-safe functions (prctl, getppid, _exit, sigemptyset,
    // sigprocmask) on a local sigset.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            // rtscope's threads block SIGINT/SIGTERM; the child must not
            // inherit that, or it could not be asked to stop.
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            Ok(())
        });
    }
}

/// As [`spawn_tied`], and the child leads a new process group that it
/// registers with `groups` itself, before exec (so that no moment exists
/// where it runs unregistered): should rtscope die, even by SIGKILL, the
/// janitor kills the group, i.e. the command and whatever it started (a
/// shell's commands, a compiler driver's passes), which the kernel's
/// parent-death signal alone would leave running. The child is not in
/// rtscope's process group, so a Ctrl-C at the terminal reaches rtscope
/// alone, which stops its loads. Unregister with `groups.remove_group`
/// once the group is gone ([`kill_group`]).
///
/// With `cgroup` (a cgroup's `cgroup.procs`, open for writing), the child
/// first moves itself there, so that all it starts stays in it.
pub fn spawn_grouped(
    cmd: &mut Command,
    groups: &'static crate::sys::ipc::Registry,
    cgroup: Option<std::os::fd::RawFd>,
) -> std::io::Result<Child> {
    tie(cmd);
    if let Some(procs) = cgroup {
        // SAFETY: write(2) of a constant to a descriptor the parent holds
        // open until the spawn returns: async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                // Refused (a cgroup rtscope may not move into): the
                // marker in the environment still finds what it starts.
                libc::write(procs, b"0".as_ptr().cast(), 1);
                Ok(())
            });
        }
    }
    // Last, so that nothing fails after the registration.
    // SAFETY: setpgid, getpid and the registry's compare-exchange on shared
    // memory are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if !groups.add_group(libc::getpid()) {
                // Not io::Error::other: no allocation between fork and exec.
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// Kills every process left in process group `pgid` (SIGKILL).
pub fn kill_group(pgid: u32) {
    // SAFETY: kill() of a process group rtscope made; one already empty
    // makes it fail harmlessly.
    unsafe {
        libc::kill(-(pgid as libc::pid_t), libc::SIGKILL);
    }
}

/// Asks the child to stop (SIGTERM), then kills it after `grace`.
pub fn stop_child(child: &mut Child, grace: std::time::Duration) {
    // SAFETY: kill() on our own child's pid.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Every descendant of `pid` (children, their children, ...), from the
/// parent pids in /proc: a shell's commands, a compiler driver's passes.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else { continue };
            // Field 4 (ppid) follows the ")" that closes the name.
            let ppid = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
                .and_then(|f| f.parse::<u32>().ok());
            if let Some(pp) = ppid {
                parents.push((p, pp));
            }
        }
    }
    let mut out = vec![];
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for &(child, parent) in &parents {
            if parent == p && !out.contains(&child) {
                out.push(child);
                frontier.push(child);
            }
        }
    }
    out
}

/// Kills `child` and everything it started, and reaps it. The family is
/// frozen first (SIGSTOP, again for each process found, until no new one
/// appears) so that nobody can start another process while it is being
/// collected; then every member gets SIGKILL.
pub fn stop_tree(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    let mut family = vec![child.id()];
    signal(child.id(), libc::SIGSTOP);
    for _ in 0..100 {
        let found: Vec<u32> = descendants(child.id()).into_iter().filter(|p| !family.contains(p)).collect();
        if found.is_empty() {
            break;
        }
        for &p in &found {
            signal(p, libc::SIGSTOP);
        }
        family.extend(found);
    }
    for &p in &family {
        kill(p);
    }
    let _ = child.wait();
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill() with a plain pid and signal; a process already gone
    // makes it fail harmlessly.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Kills process `pid` (SIGKILL); a process already gone is no error.
pub fn kill(pid: u32) {
    signal(pid, libc::SIGKILL);
}

/// Sets the calling thread's nice value (threads and processes it creates
/// from now on inherit it).
pub fn set_nice(nice: i32) -> std::io::Result<()> {
    let tid = crate::sys::sched::thread_id();
    // SAFETY: setpriority on this thread's own id.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// Whether a process with this pid exists.
pub fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether the process `pid` is an rtscope (its name starts so: the
/// binary, or a test binary of its crate), not another that has taken a
/// gone rtscope's pid. The janitor asks the same its own way.
pub fn is_rtscope(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.starts_with("rtscope"))
}

/// A `sleep 30` whose process is named `rtscope` (run through a link of
/// that name in `dir`), for tests of what tells an rtscope by its name.
#[cfg(test)]
pub fn rtscope_named_sleeper(dir: &std::path::Path) -> std::process::Child {
    let link = dir.join("rtscope");
    if !link.exists() {
        std::os::unix::fs::symlink(on_path("sleep").expect("sleep on PATH"), &link).unwrap();
    }
    // argv[0] `sleep`, for a multi-call coreutils (busybox) that goes by
    // it; the name the kernel gives the process is the link's.
    let child = std::os::unix::process::CommandExt::arg0(&mut std::process::Command::new(&link), "sleep")
        .arg("30")
        .spawn()
        .unwrap();
    // Named at its exec: waited for.
    let t = std::time::Instant::now();
    while !is_rtscope(child.id()) {
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "/proc/{}/comm never said rtscope", child.id());
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child
}

/// The program `name` on PATH, if there.
pub fn on_path(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}
