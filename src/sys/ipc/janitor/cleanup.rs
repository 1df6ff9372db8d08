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

/// Turns the tracefs option file `path` back on (writes "1").
///
/// # Safety
/// `path` is a NUL-terminated path.
pub unsafe fn option_on(path: *const c_char) {
    // SAFETY: the caller's C string.
    unsafe { write_file(path, b"1") };
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

/// Removes what the directory `fd` holds, `depth` levels down.
unsafe fn empty(fd: libc::c_int, depth: u32) {
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
            if name.starts_with(b".\0") || name.starts_with(b"..\0") {
                continue;
            }
            let c = name.as_ptr().cast::<c_char>();
            // SAFETY: `c` is NUL-terminated inside the record; `fd` and
            // `sub` are our own descriptors.
            unsafe {
                if libc::unlinkat(fd, c, 0) == 0 {
                    continue;
                }
                // A directory: emptied, then removed (a tree deeper
                // than 32 levels is left to the next rtscope).
                if depth < 32 {
                    let sub =
                        libc::openat(fd, c, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC);
                    if sub >= 0 {
                        empty(sub, depth + 1);
                        libc::close(sub);
                    }
                }
                libc::unlinkat(fd, c, libc::AT_REMOVEDIR);
            }
        }
    }
}

/// Unmounts the tracefs at `root` when its `instances/` is empty, holding
/// the lock of the directory above it (`tracefs::LOCK_DIR`, which every
/// rtscope holds while it finds, mounts or unmounts tracefs) where it is
/// had within a second: another rtscope that has just found this mount
/// makes its instance first.
///
/// # Safety
/// `root` is a NUL-terminated path.
pub unsafe fn unmount_if_unused(root: *const c_char) {
    let mut above = [0u8; super::PATH_BYTES + 64];
    // SAFETY: C strings and descriptors of our own; plain system calls.
    // The lock goes with the descriptor, closed on every path.
    unsafe {
        let Some(parent) = join(&mut above, root, b"/..") else { return };
        let lock = libc::open(parent, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
        // Tried for a second at most, as rtscope tries for it (any user
        // may hold it): then the unmount goes ahead without it.
        for _ in 0..TRIES {
            if lock < 0 || libc::flock(lock, libc::LOCK_EX | libc::LOCK_NB) == 0 {
                break;
            }
            nap();
        }
        unmount_if_empty(root);
        if lock >= 0 {
            libc::close(lock);
        }
    }
}

/// [`unmount_if_unused`]'s work, under the lock where it was had.
unsafe fn unmount_if_empty(root: *const c_char) {
    let mut buf = [0u8; super::PATH_BYTES + 64];
    // SAFETY: C strings and a descriptor of our own; plain system calls.
    unsafe {
        let Some(instances) = join(&mut buf, root, b"/instances") else { return };
        let fd = libc::open(instances, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
        if fd < 0 {
            return;
        }
        let mut used = false;
        let mut d = [0u8; 2048];
        loop {
            let n = libc::syscall(libc::SYS_getdents64, fd, d.as_mut_ptr(), d.len());
            if n <= 0 {
                break;
            }
            let mut at = 0;
            while at + 19 < n as usize {
                let reclen = usize::from(u16::from_ne_bytes([d[at + 16], d[at + 17]]));
                if reclen == 0 {
                    break;
                }
                let name = &d[at + 19..at + reclen];
                at += reclen;
                if !(name.starts_with(b".\0") || name.starts_with(b"..\0")) {
                    used = true;
                }
            }
        }
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
    }
}
