//! Processes: signals to a process or a thread, fork, wait, stop,
//! posix_spawn.

use super::{check_pthread, last};
use std::ffi::CStr;
use std::io;

/// Sends `sig` to thread `tid` of process `pid` (tgkill); false when it failed.
#[inline]
pub fn tgkill(pid: i32, tid: i32, sig: i32) -> bool {
    // SAFETY: plain system call.
    unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, sig) == 0 }
}

/// Sends `sig` to process `pid`.
#[inline]
pub fn kill(pid: i32, sig: i32) -> bool {
    // SAFETY: plain system call.
    unsafe { libc::kill(pid, sig) == 0 }
}

pub fn getpid() -> i32 {
    // SAFETY: plain system call.
    unsafe { libc::getpid() }
}

/// sched_yield(2).
#[inline]
pub fn yield_now() {
    // SAFETY: plain system call.
    unsafe { libc::sched_yield() };
}

/// Forks a child that runs `body` and exits with what it returns, never
/// returning here in the child. The child dies with rtscope
/// (PR_SET_PDEATHSIG SIGKILL) and ignores SIGINT, SIGTERM and SIGHUP (a
/// Ctrl-C reaches the whole process group; rtscope stops its children
/// itself). Call it while this process has a single thread: the child
/// then may allocate safely, and holds no lock another thread took (a
/// `flock`, such as tracefs's mount lock, goes with the open file, which
/// the child would share until it exits).
pub fn fork_child(body: impl FnOnce() -> i32) -> io::Result<i32> {
    fork_with(true, body)
}

/// [`fork_child`]; `tied`: whether the child dies with rtscope.
pub(super) fn fork_with(tied: bool, body: impl FnOnce() -> i32) -> io::Result<i32> {
    let parent = getpid();
    // SAFETY: fork; the child only runs `body` and exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(last());
    }
    if pid == 0 {
        // SAFETY: async-signal-safe calls in the child.
        unsafe {
            if tied {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::signal(s, libc::SIG_IGN);
            }
        }
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(101);
        // SAFETY: ends the child without running the parent's atexit handlers.
        unsafe { libc::_exit(code) };
    }
    Ok(pid)
}

/// What waitpid reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildState {
    Running,
    Exited(i32),
    Killed(i32),
    Stopped(i32),
}

fn decode(status: libc::c_int) -> ChildState {
    if libc::WIFEXITED(status) {
        ChildState::Exited(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        ChildState::Killed(libc::WTERMSIG(status))
    } else if libc::WIFSTOPPED(status) {
        ChildState::Stopped(libc::WSTOPSIG(status))
    } else {
        ChildState::Running
    }
}

fn waitpid(pid: i32, flags: libc::c_int) -> io::Result<ChildState> {
    let mut status = 0;
    loop {
        // SAFETY: plain system call with a valid status pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, flags) };
        if rc == pid {
            return Ok(decode(status));
        }
        if rc == 0 {
            return Ok(ChildState::Running);
        }
        if last().raw_os_error() != Some(libc::EINTR) {
            return Err(last());
        }
    }
}

/// Waits for child `pid` to end.
pub fn wait_child(pid: i32) -> io::Result<ChildState> {
    waitpid(pid, 0)
}

/// Whether child `pid` has ended (reaped if so), without blocking.
pub fn try_wait_child(pid: i32) -> io::Result<ChildState> {
    waitpid(pid, libc::WNOHANG)
}

/// Waits until child `pid` stops (or ends): waitpid(WUNTRACED).
#[inline]
pub fn wait_stopped(pid: i32) -> io::Result<ChildState> {
    waitpid(pid, libc::WUNTRACED)
}

/// Stops the calling process (raise(SIGSTOP)) until a SIGCONT.
#[inline]
pub fn stop_self() {
    // SAFETY: plain call.
    unsafe { libc::raise(libc::SIGSTOP) };
}

/// fork(2) of a child that only calls `_exit(0)`, then waitpid(2).
#[inline]
pub fn fork_exit_wait() -> io::Result<()> {
    // SAFETY: the child only calls _exit, which is async-signal-safe.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(last());
    }
    if pid == 0 {
        // SAFETY: see above.
        unsafe { libc::_exit(0) };
    }
    wait_child(pid).map(|_| ())
}

/// posix_spawn(3) of `path` with no argument and an empty environment,
/// then waitpid(2); its exit status.
#[inline]
pub fn spawn_wait(path: &CStr) -> io::Result<i32> {
    let argv = [path.as_ptr() as *mut libc::c_char, std::ptr::null_mut()];
    let envp = [std::ptr::null_mut::<libc::c_char>()];
    let mut pid = 0;
    // SAFETY: valid, null-terminated argv and envp; default attributes.
    let rc = unsafe {
        libc::posix_spawn(&mut pid, path.as_ptr(), std::ptr::null(), std::ptr::null(), argv.as_ptr(), envp.as_ptr())
    };
    check_pthread(rc)?;
    match wait_child(pid)? {
        ChildState::Exited(c) => Ok(c),
        other => Err(io::Error::other(format!("{} ended {other:?}", path.to_string_lossy()))),
    }
}
