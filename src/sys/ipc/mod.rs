//! The operating-system services `osbench` times, as small safe wrappers:
//! memory shared with forked children, futexes, pthread mutexes, condition
//! variables and semaphores (process-private or process-shared), eventfd,
//! pipes, unix sockets, SysV semaphores, POSIX message queues, thread and
//! process creation, signals to a thread, and the calls of the `calls` and
//! `ssc` groups. Nothing here allocates after construction; every call that
//! a measuring loop makes is one system call (or none) and a check.
//!
//! Nothing outlives rtscope: shared memory is anonymous (no /dev/shm
//! entry), POSIX message queues are unlinked right after they are opened,
//! SysV semaphore sets are removed when dropped and, should rtscope die
//! before that, by the [`Janitor`] process.
//!
//! One file per mechanism: shm.rs (the shared memory), futex.rs,
//! pthread.rs (mutexes, condition variables, semaphores), fds.rs (eventfd,
//! pipes, unix sockets), sysv.rs, mq.rs, process.rs (signals, fork, wait,
//! spawn), thread.rs (threads at a policy and priority), calls.rs (the
//! `calls` and `ssc` groups' calls), janitor.rs (the janitor and its
//! registry; janitor/cleanup.rs its file-system work).

mod calls;
mod fds;
mod futex;
mod janitor;
mod mq;
mod process;
mod pthread;
mod shm;
mod sysv;
mod thread;

pub use calls::*;
pub use fds::*;
pub use futex::*;
pub use janitor::*;
pub use mq::*;
pub use process::*;
pub use pthread::*;
pub use shm::*;
pub use sysv::*;
pub use thread::*;

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

fn last() -> io::Error {
    io::Error::last_os_error()
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 { Err(last()) } else { Ok(rc) }
}

fn check_pthread(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(rc)) }
}

fn fd(raw: RawFd) -> OwnedFd {
    // SAFETY: a descriptor the kernel just gave us, owned from now on.
    unsafe { OwnedFd::from_raw_fd(raw) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn shared_memory_is_shared_with_a_child() {
        let word: Shared<AtomicU32> = Shared::new().unwrap();
        let pid = fork_child(|| {
            word.store(7, Ordering::Release);
            0
        })
        .unwrap();
        assert_eq!(wait_child(pid).unwrap(), ChildState::Exited(0));
        assert_eq!(word.load(Ordering::Acquire), 7);
    }

    #[test]
    fn the_janitor_removes_registered_trees_and_only_those() {
        let base = tempfile::tempdir().unwrap();
        let tree = base.path().join("tree");
        let kept = base.path().join("kept");
        std::fs::create_dir_all(tree.join("a/b/c")).unwrap();
        for (i, d) in ["", "a", "a/b", "a/b/c"].iter().enumerate() {
            for f in 0..40 {
                std::fs::write(tree.join(d).join(format!("file-{i}-{f}.o")), b"x").unwrap();
            }
        }
        std::os::unix::fs::symlink("/etc", tree.join("a/link")).unwrap();
        std::fs::create_dir(&kept).unwrap();
        let janitor = Janitor::start().unwrap();
        let r = janitor.registry();
        assert!(r.add_path(Leftover::Tree, &tree));
        assert!(r.add_path(Leftover::Tree, &kept));
        r.remove_path(Leftover::Tree, &kept);
        // A path of another kind, or a prefix, is not forgotten by mistake.
        r.remove_path(Leftover::TraceInstance, &tree);
        r.remove_path(Leftover::Tree, base.path());
        assert!(!r.add_path(Leftover::Tree, &base.path().join("x".repeat(600))), "too long");
        // Settings written back to what they held: a forgotten one is not.
        let (width, window) = (base.path().join("width"), base.path().join("window"));
        std::fs::write(&width, "100").unwrap();
        std::fs::write(&window, "200").unwrap();
        assert!(r.add_restore(&width, "500000"));
        assert!(r.add_restore(&window, "1000000"));
        r.remove_path(Leftover::Restore, &window);
        assert!(!r.add_restore(&width, &"9".repeat(600)), "too long");
        // Ends the janitor as rtscope's death would, and waits for it.
        drop(janitor);
        assert!(!tree.exists(), "the registered tree is removed");
        assert!(kept.exists(), "a path forgotten is left");
        assert_eq!(std::fs::read_to_string(&width).unwrap(), "500000", "written back");
        assert_eq!(std::fs::read_to_string(&window).unwrap(), "200", "forgotten: left");
        assert!(std::path::Path::new("/etc/hostname").exists() || std::path::Path::new("/etc").is_dir());
    }

    /// Live processes whose command line holds `mark`.
    fn running(mark: &str) -> Vec<u32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|p| {
                let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                let zombie = stat.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z'));
                !zombie && String::from_utf8_lossy(&cmd).contains(mark)
            })
            .collect()
    }

    /// What a command left in another session (`setsid`, as a daemon
    /// does) is found by the variable in its environment and killed; a
    /// command with another number, or of another rtscope, is left.
    #[test]
    fn processes_are_found_by_their_marker_whatever_their_session() {
        let mark = format!("37{}.5", std::process::id() % 1000);
        let other = format!("38{}.5", std::process::id() % 1000);
        let spawn = |value: &str, m: &str| {
            std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(format!("setsid sleep {m} & sleep {m}; wait"))
                .env("RTSCOPE_LOAD", value)
                .env("PADDING", "x".repeat(5000))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        };
        let mut ours = spawn("4242424:7", &mark);
        let mut theirs = spawn("4242424:70", &other);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while running(&mark).len() < 3 || running(&other).len() < 3 {
            assert!(std::time::Instant::now() < until, "the sleeps never started");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        kill_marked(b"RTSCOPE_LOAD=4242424:7\0", 2);
        let _ = ours.wait();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !running(&mark).is_empty() {
            assert!(std::time::Instant::now() < until, "left: {:?}", running(&mark));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // The shell and its two sleeps.
        assert_eq!(running(&other).len(), 3, "another command's were killed");
        kill_marked(b"RTSCOPE_LOAD=4242424:", 2);
        let _ = theirs.wait();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !running(&other).is_empty() {
            assert!(std::time::Instant::now() < until, "left: {:?}", running(&other));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let mut buf = [0u8; 32];
        let n = load_marker(4242424, &mut buf);
        assert_eq!(&buf[..n], b"RTSCOPE_LOAD=4242424:");
    }

    #[test]
    fn primitives_work() {
        let e = eventfd().unwrap();
        write_fd(&e, &1u64.to_ne_bytes()).unwrap();
        let mut b = [0u8; 8];
        assert_eq!(read_fd(&e, &mut b).unwrap(), 8);
        let (r, w) = pipe().unwrap();
        write_fd(&w, b"x").unwrap();
        assert_eq!(read_fd(&r, &mut b).unwrap(), 1);
        let m: Shared<PMutex> = Shared::new().unwrap();
        m.init(true, true).unwrap();
        assert!(m.lock() && m.unlock());
        let s: Shared<PSem> = Shared::new().unwrap();
        s.init(true, 1).unwrap();
        s.wait();
        let ev = FutexEvent::default();
        ev.set(false);
        ev.wait(false);
        assert!(map_touch_unmap());
        assert!(syscall_getppid() > 0);
        // The argument variants succeed and change nothing they point to.
        assert_eq!(syscall_six_words(), 0);
        let mut a = PointerArgs::new();
        for _ in 0..3 {
            assert_eq!(syscall_pointers(&mut a), 0, "{}", std::io::Error::last_os_error());
        }
        assert_eq!((a.timeout.tv_sec, a.timeout.tv_nsec, a.sigmask), (0, 0, [0, 8]));
        let p = malloc(32);
        assert!(!p.is_null());
        unsafe { free(p) };
        let attr = ThreadAttr::new(0, None).unwrap();
        assert!(attr.create_join());
    }
}
