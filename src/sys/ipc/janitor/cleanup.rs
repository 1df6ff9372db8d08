//! The janitor's file-system work: system calls on stack buffers, nothing
//! allocated (it runs in a child forked from a process with threads).

use libc::c_char;

/// Retries of a removal that the kernel refuses while rtscope's last
/// descriptors close (EBUSY) or its killed commands end (ENOTEMPTY),
/// 10 ms apart: a second in all.
const TRIES: u32 = 100;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn nap() {
    let ts = libc::timespec { tv_sec: 0, tv_nsec: 10_000_000 };
    // SAFETY: a valid timespec; no remainder wanted.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

/// The length of the C string `p`.
unsafe fn len(p: *const c_char) -> usize {
    // SAFETY: the caller's NUL-terminated string.
    unsafe { libc::strlen(p) }
}

/// `dir` + `tail` (which starts with '/') as a C string in `buf`;
/// None when it does not fit.
unsafe fn join(buf: &mut [u8; super::PATH_BYTES + 64], dir: *const c_char, tail: &[u8]) -> Option<*const c_char> {
    // SAFETY: `dir` is NUL-terminated; the copy stays inside `buf`.
    let n = unsafe { len(dir) };
    if n + tail.len() >= buf.len() {
        return None;
    }
    unsafe { std::ptr::copy_nonoverlapping(dir.cast::<u8>(), buf.as_mut_ptr(), n) };
    buf[n..n + tail.len()].copy_from_slice(tail);
    buf[n + tail.len()] = 0;
    Some(buf.as_ptr().cast())
}

/// The directory above `path` (no trailing '/') as a C string in `buf`;
/// None at the root or when it does not fit.
unsafe fn parent(buf: &mut [u8; super::PATH_BYTES + 64], path: *const c_char) -> Option<*const c_char> {
    // SAFETY: `path` is NUL-terminated (the caller's) and `buf` holds it.
    unsafe { join(buf, path, b"")? };
    let n = buf.iter().position(|&b| b == 0)?;
    let slash = buf[..n].iter().rposition(|&b| b == b'/').filter(|&i| i > 0)?;
    buf[slash] = 0;
    Some(buf.as_ptr().cast())
}

/// Stops tracing in the instance `dir`, then removes it.
///
/// # Safety
/// `dir` is a NUL-terminated path.
pub unsafe fn remove_instance(dir: *const c_char) {
    let mut buf = [0u8; super::PATH_BYTES + 64];
    // SAFETY: C strings; rmdir is a plain system call.
    unsafe {
        if let Some(on) = join(&mut buf, dir, b"/tracing_on") {
            write_file(on, b"0");
        }
        for _ in 0..TRIES {
            if libc::rmdir(dir) == 0 || errno() == libc::ENOENT {
                return;
            }
            nap();
        }
    }
}

/// Writes `value` to the (tracefs) file `path`, if it opens.
///
/// # Safety
/// `path` is a NUL-terminated path.
unsafe fn write_file(path: *const c_char, value: &[u8]) {
    // SAFETY: a C string and a slice of ours; open/write/close are plain
    // system calls.
    unsafe {
        let fd = libc::open(path, libc::O_WRONLY | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::write(fd, value.as_ptr().cast(), value.len());
            libc::close(fd);
        }
    }
}

/// Writes back a tracefs file registered with its value
/// ([`super::Leftover::Restore`]): `slot` holds the path, a NUL, the value
/// and a NUL.
///
/// # Safety
/// `slot` is a path and a value, each NUL-terminated, one after the other.
pub unsafe fn restore(slot: *const c_char) {
    // SAFETY: both strings are NUL-terminated in the slot.
    unsafe {
        let n = len(slot);
        let value = slot.add(n + 1);
        let v = std::slice::from_raw_parts(value.cast::<u8>(), len(value));
        write_file(slot, v);
    }
}

/// Turns the tracefs option file `option` back on (writes "1") unless
/// another rtscope still holds it off: under the lock of the directory
/// `lock` (`tracefs::LOCK_DIR`, as rtscope takes it), this rtscope's file
/// (`owner`, its pid) in the directory `holders` goes, with the files of
/// processes that are gone; where no file is left, the option is written
/// and `holders` removed, with the directory above it when that is empty.
///
/// # Safety
/// `option`, `holders` and `lock` are NUL-terminated paths.
pub unsafe fn option_on(option: *const c_char, holders: *const c_char, owner: i32, lock: *const c_char) {
    // SAFETY: C strings and descriptors of our own; plain system calls.
    unsafe {
        locked(lock, || {
            let fd = libc::open(holders, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
            let mut others = false;
            if fd >= 0 {
                each_entry(fd, |name| {
                    let pid = pid_of(name);
                    if pid > 0 && pid != owner && is_rtscope(pid) {
                        others = true;
                    } else {
                        libc::unlinkat(fd, name.as_ptr().cast(), 0);
                    }
                    true
                });
                libc::close(fd);
            }
            if others {
                return;
            }
            write_file(option, b"1");
            if libc::rmdir(holders) == 0 {
                let mut above = [0u8; super::PATH_BYTES + 64];
                if let Some(parent) = parent(&mut above, holders) {
                    libc::rmdir(parent);
                }
            }
        })
    }
}

/// Whether the process `pid` is an rtscope: its `/proc/PID/comm` starts
/// so (as `sys::process::is_rtscope` asks), not another program that has
/// taken a gone rtscope's pid.
unsafe fn is_rtscope(pid: i32) -> bool {
    // "/proc/" + at most 10 digits + "/comm" + NUL.
    let mut path = [0u8; 32];
    let mut n = 0;
    let mut put = |bytes: &[u8]| {
        path[n..n + bytes.len()].copy_from_slice(bytes);
        n += bytes.len();
    };
    put(b"/proc/");
    let mut digits = [0u8; 10];
    put(super::decimal(pid as u32, &mut digits));
    put(b"/comm\0");
    let mut comm = [0u8; 16];
    // SAFETY: a NUL-terminated path and a buffer of ours; plain system calls.
    let read = unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let r = libc::read(fd, comm.as_mut_ptr().cast(), comm.len());
        libc::close(fd);
        r
    };
    read >= 7 && comm.starts_with(b"rtscope")
}

/// The pid a holder's file is named by (its name, NUL-terminated); 0 for
/// any other name.
fn pid_of(name: &[u8]) -> i32 {
    let digits = name.iter().take_while(|&&b| b != 0);
    let mut pid: i32 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return 0;
        }
        pid = match pid.checked_mul(10).and_then(|p| p.checked_add(i32::from(b - b'0'))) {
            Some(p) => p,
            None => return 0,
        };
    }
    pid
}

/// Kills (SIGKILL) every process whose environment holds `marker` (the
/// variable a load's commands carry, `RTSCOPE_LOAD=PID:`), whatever its
/// process group, session or parent: what a load's command started and
/// left behind after `setsid` or a double fork. Passes over /proc, 10 ms
/// apart, so that a child forked during a pass (it inherits the
/// environment) is found by the next (`passes` in all). Not this process.
/// System calls on stack buffers only (the janitor calls it, forked from a
/// process with threads).
pub fn kill_marked(marker: &[u8], passes: u32) {
    if marker.is_empty() || marker.len() > 64 {
        return;
    }
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    for pass in 0..passes {
        if pass > 0 {
            nap();
        }
        // SAFETY: a NUL-terminated path; the descriptor is ours, closed below.
        let proc_fd = unsafe { libc::open(c"/proc".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if proc_fd < 0 {
            return;
        }
        // SAFETY: `proc_fd` is an open directory of ours.
        unsafe {
            each_entry(proc_fd, |name| {
                let pid = pid_of(name);
                if pid > 0 && pid != me && environ_holds(proc_fd, name, marker) {
                    libc::kill(pid, libc::SIGKILL);
                }
                true
            });
            libc::close(proc_fd);
        }
    }
}

/// Whether `/proc/NAME/environ` (NAME a NUL-terminated pid, `proc_fd`
/// /proc) holds `marker` at the start of one of its variables.
unsafe fn environ_holds(proc_fd: libc::c_int, name: &[u8], marker: &[u8]) -> bool {
    let n = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    let mut path = [0u8; 32];
    if n + 9 > path.len() {
        return false;
    }
    path[..n].copy_from_slice(&name[..n]);
    path[n..n + 8].copy_from_slice(b"/environ");
    // SAFETY: a NUL-terminated relative path and a descriptor of ours.
    let fd = unsafe { libc::openat(proc_fd, path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    // The marker may straddle two reads: the last bytes of one (the
    // marker's length and the byte before it) are kept before the next.
    // buf[0] starts as a NUL: the first variable starts after it.
    let mut buf = [0u8; 4096 + 128];
    let mut keep = 1;
    let mut found = false;
    loop {
        // SAFETY: reads into the part of `buf` after what is kept.
        let r = unsafe { libc::read(fd, buf[keep..].as_mut_ptr().cast(), buf.len() - keep) };
        if r <= 0 {
            break;
        }
        let len = keep + r as usize;
        if (1..len).any(|i| buf[i - 1] == 0 && buf[i..len].starts_with(marker)) {
            found = true;
            break;
        }
        let tail = (marker.len() + 1).min(len);
        buf.copy_within(len - tail..len, 0);
        keep = tail;
    }
    // SAFETY: our own descriptor.
    unsafe { libc::close(fd) };
    found
}

/// Ends every process in the cgroup v2 `dir` and its children (writes
/// "1" to its `cgroup.kill`, Linux 5.14 and later), then removes the
/// children's directories and `dir`, retried while the killed processes
/// go.
///
/// # Safety
/// `dir` is a NUL-terminated path.
pub unsafe fn remove_cgroup(dir: *const c_char) {
    let mut buf = [0u8; super::PATH_BYTES + 64];
    // SAFETY: C strings and descriptors of our own; plain system calls.
    unsafe {
        if let Some(kill) = join(&mut buf, dir, b"/cgroup.kill") {
            write_file(kill, b"1");
        }
        for _ in 0..TRIES {
            let fd = libc::open(dir, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
            if fd < 0 {
                return;
            }
            each_entry(fd, |name| {
                // The children (cmd-N): directories; the interface files
                // cannot be removed, and rmdir of one fails harmlessly.
                libc::unlinkat(fd, name.as_ptr().cast(), libc::AT_REMOVEDIR);
                true
            });
            libc::close(fd);
            if libc::rmdir(dir) == 0 || errno() == libc::ENOENT {
                return;
            }
            nap();
        }
    }
}

/// Removes the directory `path` and everything in it.
///
/// # Safety
/// `path` is a NUL-terminated path.
pub unsafe fn remove_tree(path: *const c_char) {
    for _ in 0..TRIES {
        // SAFETY: C strings and descriptors of our own; plain system calls.
        unsafe {
            let fd = libc::open(path, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC);
            if fd < 0 {
                if errno() == libc::ENOENT {
                    return;
                }
                // Not a directory (or a link to one): the name goes.
                libc::unlink(path);
                return;
            }
            empty(fd, 0);
            libc::close(fd);
            if libc::rmdir(path) == 0 || errno() == libc::ENOENT {
                return;
            }
        }
        nap();
    }
}

/// Calls `f` with the name of each entry of the directory `fd` but `.`
/// and `..` (the slice starts at the name and holds its NUL), until `f`
/// answers false.
unsafe fn each_entry(fd: libc::c_int, mut f: impl FnMut(&[u8]) -> bool) {
    // linux_dirent64: d_ino (8 bytes), d_off (8), d_reclen (2),
    // d_type (1), d_name (NUL-terminated).
    let mut buf = [0u8; 2048];
    loop {
        // SAFETY: a buffer of buf.len() bytes for the kernel to fill.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
        if n <= 0 {
            return;
        }
        let n = n as usize;
        let mut at = 0;
        while at + 19 < n {
            let reclen = usize::from(u16::from_ne_bytes([buf[at + 16], buf[at + 17]]));
            if reclen == 0 {
                return;
            }
            let name = &buf[at + 19..at + reclen];
            at += reclen;
            let dots = name.starts_with(b".\0") || name.starts_with(b"..\0");
            if !dots && !f(name) {
                return;
            }
        }
    }
}

/// Removes what the directory `fd` holds, `depth` levels down.
unsafe fn empty(fd: libc::c_int, depth: u32) {
    // SAFETY: the entries' names are NUL-terminated inside their records;
    // `fd` and `sub` are our own descriptors.
    unsafe {
        each_entry(fd, |name| {
            let c = name.as_ptr().cast::<c_char>();
            if libc::unlinkat(fd, c, 0) == 0 {
                return true;
            }
            // A directory: emptied, then removed (a tree deeper than 32
            // levels is left to the next rtscope).
            if depth < 32 {
                let sub = libc::openat(fd, c, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC);
                if sub >= 0 {
                    empty(sub, depth + 1);
                    libc::close(sub);
                }
            }
            libc::unlinkat(fd, c, libc::AT_REMOVEDIR);
            true
        })
    }
}

/// Runs `f` holding the `flock` of the directory `dir` (which every
/// rtscope holds while it finds, mounts or unmounts tracefs, or changes
/// who holds `record-cmd` off), where it is had within a second: any user
/// may hold it, so then `f` runs without it.
unsafe fn locked(dir: *const c_char, f: impl FnOnce()) {
    // SAFETY: a C string and a descriptor of our own; plain system calls.
    // The lock goes with the descriptor, closed on every path.
    unsafe {
        let lock = libc::open(dir, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
        for _ in 0..TRIES {
            if lock < 0 || libc::flock(lock, libc::LOCK_EX | libc::LOCK_NB) == 0 {
                break;
            }
            nap();
        }
        f();
        if lock >= 0 {
            libc::close(lock);
        }
    }
}

/// Unmounts the tracefs at `root` when its `instances/` is empty and
/// tracefs is what is seen there (not a file system someone mounted over
/// it meanwhile), holding the lock of the directory above it (another
/// rtscope that has just found this mount makes its instance first).
///
/// # Safety
/// `root` is a NUL-terminated path.
pub unsafe fn unmount_if_unused(root: *const c_char) {
    let mut above = [0u8; super::PATH_BYTES + 64];
    let mut buf = [0u8; super::PATH_BYTES + 64];
    // SAFETY: C strings, a statfs buffer and a descriptor of our own;
    // plain system calls.
    unsafe {
        let Some(parent) = join(&mut above, root, b"/..") else { return };
        let Some(instances) = join(&mut buf, root, b"/instances") else { return };
        locked(parent, || {
            let mut fs: libc::statfs = std::mem::zeroed();
            if libc::statfs(root, &mut fs) != 0 || fs.f_type != libc::TRACEFS_MAGIC {
                return;
            }
            let fd = libc::open(instances, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
            if fd < 0 {
                return;
            }
            let mut used = false;
            each_entry(fd, |_| {
                used = true;
                false
            });
            libc::close(fd);
            if used {
                return;
            }
            for _ in 0..TRIES {
                if libc::umount2(root, 0) == 0 || errno() != libc::EBUSY {
                    return;
                }
                nap();
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    fn c(p: &std::path::Path) -> CString {
        CString::new(p.as_os_str().as_bytes()).unwrap()
    }

    #[test]
    fn pids_are_read_from_holders_names_only() {
        assert_eq!(pid_of(b"4242\0\0\0"), 4242);
        assert_eq!(pid_of(b"42a\0"), 0);
        assert_eq!(pid_of(b"99999999999\0"), 0, "overflow");
        assert_eq!(pid_of(b"\0"), 0);
    }

    #[test]
    fn rtscope_is_told_by_its_name() {
        let base = tempfile::tempdir().unwrap();
        let mut other = crate::sys::process::rtscope_named_sleeper(base.path());
        // SAFETY: plain system calls.
        unsafe {
            assert!(is_rtscope(std::process::id() as i32), "this test binary is rtscope's");
            assert!(is_rtscope(other.id() as i32));
            assert!(!is_rtscope(1), "pid 1 is not rtscope");
            assert!(!is_rtscope(i32::MAX), "no such process");
        }
        other.kill().unwrap();
        other.wait().unwrap();
    }

    /// The janitor turns the option back on only as the last live holder.
    #[test]
    fn the_option_goes_back_on_with_its_last_holder() {
        let base = tempfile::tempdir().unwrap();
        let option = base.path().join("record-cmd");
        let holders = base.path().join("run/rtscope/record-cmd");
        std::fs::create_dir_all(&holders).unwrap();
        std::fs::write(&option, "0").unwrap();
        // This process (an rtscope, alive) holds it too; the janitor's
        // owner (alive: the janitor runs while rtscope ends), a process
        // gone (a reaped child) and one that is not rtscope (pid 1, as if
        // it had taken a gone holder's pid) leave.
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let gone_pid = gone.id();
        gone.wait().unwrap();
        let mut owner = crate::sys::process::rtscope_named_sleeper(base.path());
        let me = std::process::id();
        for f in [me, owner.id(), gone_pid, 1] {
            std::fs::write(holders.join(f.to_string()), "").unwrap();
        }
        std::fs::write(holders.join("stray"), "").unwrap();
        let (o, h, l) = (c(&option), c(&holders), c(base.path()));
        let owner_pid = owner.id() as i32;
        // SAFETY: C strings of paths in a directory of the test's own.
        unsafe { option_on(o.as_ptr(), h.as_ptr(), owner_pid, l.as_ptr()) };
        assert_eq!(std::fs::read_to_string(&option).unwrap(), "0", "left off: this process holds it");
        let mut left: Vec<String> =
            std::fs::read_dir(&holders).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, [me.to_string()], "the owner's, the gone process's, pid 1's and a stray name go");
        // The owner's janitor, this process gone: the option goes back on
        // though the owner, ending, is still there.
        std::fs::write(holders.join(owner.id().to_string()), "").unwrap();
        std::fs::remove_file(holders.join(me.to_string())).unwrap();
        // SAFETY: as above.
        unsafe { option_on(o.as_ptr(), h.as_ptr(), owner_pid, l.as_ptr()) };
        assert_eq!(std::fs::read_to_string(&option).unwrap(), "1", "the owner is not another holder");
        owner.kill().unwrap();
        owner.wait().unwrap();
        assert!(!holders.exists() && !holders.parent().unwrap().exists(), "the holders' directories go");
        assert!(base.path().join("run").exists(), "only as far up as rtscope's own");
    }

    /// What is mounted over tracefs meanwhile is not unmounted.
    #[test]
    #[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
    fn only_tracefs_is_unmounted() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("root");
        std::fs::create_dir(&root).unwrap();
        rustix::mount::mount("none", &root, "tmpfs", rustix::mount::MountFlags::empty(), None).unwrap();
        std::fs::create_dir(root.join("instances")).unwrap();
        let r = c(&root);
        // SAFETY: a C string of a path of the test's own.
        unsafe { unmount_if_unused(r.as_ptr()) };
        let still = root.join("instances").is_dir();
        rustix::mount::unmount(&root, rustix::mount::UnmountFlags::empty()).unwrap();
        assert!(still, "a tmpfs with an empty instances/ was unmounted");
    }
}
