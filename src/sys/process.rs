//! Child processes that never outlive rtscope.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// Spawns `cmd` so that the kernel kills it (SIGKILL) when rtscope exits,
/// by any path, SIGKILL included.
pub fn spawn_tied(cmd: &mut Command) -> std::io::Result<Child> {
    let parent = std::process::id();
    // SAFETY: the closure runs between fork and exec and only calls
    // async-signal-safe functions (prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    cmd.spawn()
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
