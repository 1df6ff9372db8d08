//! The janitor: a child process that removes what rtscope made (SysV
//! sets, process groups, tracefs instances, directories) when rtscope
//! ends by any path, SIGKILL included; the registry rtscope tells it in.

use super::fds::{pipe, read_fd};
use super::process::{fork_with, wait_child};
use super::shm::{Shared, Zeroable};
use std::cell::UnsafeCell;
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};

mod cleanup;
pub use cleanup::kill_marked;

/// What the janitor removes should rtscope die first: SysV semaphore
/// sets, the process groups of loads' commands (killed, with all they
/// started), and what rtscope made in the file system: its tracefs
/// instance (tracing stopped first), the loads' temporary directories,
/// and tracefs itself when rtscope mounted it.
#[repr(C)]
pub struct Registry {
    /// SysV semaphore set ids + 1 (0: free slot).
    sysv: [AtomicI64; 32],
    /// Process group ids (0: free slot). Room for every copy of a `cmd`
    /// load and every job of a `compile` load at their highest intensity.
    groups: [AtomicI64; 1024],
    paths: [PathSlot; 32],
    /// Not 0 once a load's command has been started: its environment
    /// holds [`load_marker`] of this rtscope, which the janitor looks for.
    commands: AtomicU32,
}

/// The variable every load command of rtscope `pid` carries in its
/// environment (with the command's number after the colon), inherited by
/// whatever it starts: `RTSCOPE_LOAD=PID:`. Written into `buf`; the
/// length.
pub fn load_marker(pid: u32, buf: &mut [u8; 32]) -> usize {
    let prefix = b"RTSCOPE_LOAD=";
    buf[..prefix.len()].copy_from_slice(prefix);
    let mut n = prefix.len();
    let mut digits = [0u8; 10];
    let d = decimal(pid, &mut digits);
    buf[n..n + d.len()].copy_from_slice(d);
    n += d.len();
    buf[n] = b':';
    n + 1
}

/// `v` in decimal, written into `digits` without allocating (the janitor
/// runs it after a fork): the digits.
pub fn decimal(v: u32, digits: &mut [u8; 10]) -> &[u8] {
    let (mut d, mut v) = (0, v);
    loop {
        digits[9 - d] = b'0' + (v % 10) as u8;
        d += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &digits[10 - d..]
}

unsafe impl Zeroable for Registry {}

// SAFETY: a slot's path bytes are written only by the thread that claimed
// the slot (state CLAIMED) and read only by a thread that claimed it too,
// or by the janitor after rtscope is gone; the state's Release/Acquire
// orders the bytes before their readers.
unsafe impl Sync for Registry {}

/// The longest path the janitor keeps, with its terminating NUL.
const PATH_BYTES: usize = 512;

/// A path the janitor removes: its state (FREE, CLAIMED, or the
/// [`Leftover`] it is) and the path as a C string.
#[repr(C)]
struct PathSlot {
    state: AtomicU32,
    path: UnsafeCell<[u8; PATH_BYTES]>,
}

const FREE: u32 = 0;
const CLAIMED: u32 = 1;

/// What a registered path is, i.e. how the janitor removes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leftover {
    /// A tracefs instance: `tracing_on` set to 0, then the directory
    /// removed (which frees its buffers and disables its events).
    TraceInstance = 2,
    /// A directory, removed with everything in it.
    Tree = 3,
    /// A tracefs that rtscope mounted: unmounted when no instance is left
    /// in it (as rtscope does when it ends normally).
    TracefsMount = 4,
    /// A tracefs option file that rtscope turned off (`record-cmd`):
    /// turned back on, before tracefs is unmounted, unless another rtscope
    /// still holds it off ([`CMD_HOLDERS`]).
    OptionOn = 5,
    /// A cgroup v2 directory of rtscope's load commands: every process in
    /// it and its children killed (`cgroup.kill`), then the directories
    /// removed.
    Cgroup = 6,
    /// A tracefs settings file that rtscope changed for a kernel tracer
    /// (`osnoise/cpus`, `hwlat_detector/width`, `tracing_thresh`, ...):
    /// its slot holds the path, a NUL, then the value found, which is
    /// written back after the instances are removed (their tracers stopped)
    /// and before tracefs is unmounted.
    Restore = 7,
}

/// The directory that holds tracefs's mount point, locked (`flock`) by
/// every rtscope process while it finds, mounts or unmounts tracefs, or
/// changes who holds `record-cmd` off, and by the janitor before it
/// unmounts or turns `record-cmd` back on: it is there whether tracefs is
/// mounted or not, and no file is left behind.
pub const LOCK_DIR: &CStr = c"/sys/kernel";

/// Where each rtscope process that holds the top-level tracefs option
/// `record-cmd` off keeps a file named by its pid: the last of them to
/// leave, by its own end or its janitor, turns the option back on. On
/// /run, so that the files go at a reboot, as the option's setting does.
pub const CMD_HOLDERS: &CStr = c"/run/rtscope/record-cmd";

/// Puts `v` (not 0) in a free slot; false when none is free. Lock-free and
/// async-signal-safe: a child calls it between fork and exec.
fn put(slots: &[AtomicI64], v: i64) -> bool {
    slots.iter().any(|s| s.compare_exchange(0, v, Ordering::AcqRel, Ordering::Relaxed).is_ok())
}

fn take(slots: &[AtomicI64], v: i64) {
    for s in slots {
        let _ = s.compare_exchange(v, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
}

impl Registry {
    pub(super) fn register(&self, id: i32) {
        put(&self.sysv, i64::from(id) + 1);
    }

    pub(super) fn unregister(&self, id: i32) {
        take(&self.sysv, i64::from(id) + 1);
    }

    /// Registers process group `pgid`; false when the table is full.
    /// Async-signal-safe (called by the group's leader before exec).
    pub fn add_group(&self, pgid: i32) -> bool {
        pgid > 0 && put(&self.groups, i64::from(pgid))
    }

    pub fn remove_group(&self, pgid: i32) {
        take(&self.groups, i64::from(pgid));
    }

    /// Says that load commands are started: should rtscope die, the
    /// janitor also kills what carries their marker ([`load_marker`]).
    pub fn commands_started(&self) {
        self.commands.store(1, Ordering::Release);
    }

    /// Registers `path` for the janitor to remove as `kind`, should
    /// rtscope die before [`Registry::remove_path`]. Register before
    /// making it, so that no moment exists where it is there unregistered
    /// (the janitor finds nothing to do for a path that is not there).
    /// False when the path is longer than 511 bytes or the table is full.
    pub fn add_path(&self, kind: Leftover, path: &std::path::Path) -> bool {
        self.claim(kind, path, None)
    }

    /// Registers the tracefs file `path` to be written back to `value`
    /// (what it held before rtscope changed it), should rtscope die before
    /// [`Registry::remove_path`] with [`Leftover::Restore`]. Register before
    /// writing the new value. False when path and value do not fit a slot
    /// (511 bytes with their NULs) or the table is full.
    pub fn add_restore(&self, path: &std::path::Path, value: &str) -> bool {
        self.claim(Leftover::Restore, path, Some(value.as_bytes()))
    }

    /// A free slot taken for `kind`: the path, a NUL, and where given the
    /// value and its NUL. False when that does not fit a slot, holds a
    /// NUL of its own, or the table is full.
    fn claim(&self, kind: Leftover, path: &std::path::Path, value: Option<&[u8]>) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.as_os_str().as_bytes();
        let need = bytes.len() + 1 + value.map_or(0, |v| v.len() + 1);
        if bytes.is_empty() || need > PATH_BYTES || bytes.contains(&0) || value.is_some_and(|v| v.contains(&0)) {
            return false;
        }
        for s in &self.paths {
            if s.state.compare_exchange(FREE, CLAIMED, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                // SAFETY: the slot is claimed: nobody else touches its bytes.
                let buf = unsafe { &mut *s.path.get() };
                buf[..bytes.len()].copy_from_slice(bytes);
                buf[bytes.len()] = 0;
                if let Some(v) = value {
                    buf[bytes.len() + 1..bytes.len() + 1 + v.len()].copy_from_slice(v);
                    buf[bytes.len() + 1 + v.len()] = 0;
                }
                s.state.store(kind as u32, Ordering::Release);
                return true;
            }
        }
        false
    }

    /// Forgets `path` (registered as `kind`): it is gone, or rtscope has
    /// decided, as it ends normally, to leave it.
    pub fn remove_path(&self, kind: Leftover, path: &std::path::Path) {
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.as_os_str().as_bytes();
        for s in &self.paths {
            if s.state.compare_exchange(kind as u32, CLAIMED, Ordering::AcqRel, Ordering::Acquire).is_err() {
                continue;
            }
            // SAFETY: claimed, as above.
            let buf = unsafe { &*s.path.get() };
            let same = buf.get(bytes.len()) == Some(&0) && &buf[..bytes.len()] == bytes;
            s.state.store(if same { FREE } else { kind as u32 }, Ordering::Release);
            if same {
                return;
            }
        }
    }

    /// The paths registered as `kind`, as C strings (for the janitor).
    fn paths_of(&self, kind: Leftover) -> impl Iterator<Item = *const libc::c_char> + '_ {
        self.paths
            .iter()
            .filter(move |s| s.state.load(Ordering::Acquire) == kind as u32)
            .map(|s| s.path.get().cast::<libc::c_char>() as *const libc::c_char)
    }

    /// What the janitor does when rtscope is gone: the process groups
    /// first (so that no command writes in a directory being removed),
    /// then the trace instances, the directories, the tracefs options,
    /// and last tracefs. `owner` is rtscope's pid.
    fn clean(&self, owner: i32) {
        for s in &self.sysv {
            let id = s.load(Ordering::Acquire);
            if id > 0 {
                // SAFETY: removing a set rtscope made.
                unsafe { libc::semctl((id - 1) as i32, 0, libc::IPC_RMID) };
            }
        }
        for s in &self.groups {
            let g = s.load(Ordering::Acquire);
            if g > 0 {
                // SAFETY: killing a process group a load's command leads.
                unsafe { libc::kill(-(g as libc::pid_t), libc::SIGKILL) };
            }
        }
        // What left its process group (setsid, a double fork): by its
        // cgroup, and by the marker in its environment where cgroups could
        // not be had (or a process left its cgroup).
        for p in self.paths_of(Leftover::Cgroup) {
            // SAFETY: a NUL-terminated path in this process's copy of the registry.
            unsafe { cleanup::remove_cgroup(p) };
        }
        if self.commands.load(Ordering::Acquire) != 0 {
            let mut marker = [0u8; 32];
            let n = load_marker(owner as u32, &mut marker);
            cleanup::kill_marked(&marker[..n], 3);
        }
        // SAFETY (the five loops): NUL-terminated paths in this process's
        // own copy of the registry; the helpers make system calls only.
        for p in self.paths_of(Leftover::TraceInstance) {
            unsafe { cleanup::remove_instance(p) };
        }
        for p in self.paths_of(Leftover::Tree) {
            unsafe { cleanup::remove_tree(p) };
        }
        // Twice: a value refused for another's sake (hwlat's width above
        // the window it is restored with) takes on the second pass.
        for _ in 0..2 {
            for p in self.paths_of(Leftover::Restore) {
                unsafe { cleanup::restore(p) };
            }
        }
        for p in self.paths_of(Leftover::OptionOn) {
            unsafe { cleanup::option_on(p, CMD_HOLDERS.as_ptr(), owner, LOCK_DIR.as_ptr()) };
        }
        for p in self.paths_of(Leftover::TracefsMount) {
            unsafe { cleanup::unmount_if_unused(p) };
        }
    }
}

/// Closes every descriptor from 3 up but `keep`. Async-signal-safe.
fn close_all_but(keep: RawFd) {
    let keep = keep as libc::c_uint;
    // SAFETY: close_range(2) on descriptors this (forked) process owns.
    let ranges = unsafe {
        (keep <= 3 || libc::syscall(libc::SYS_close_range, 3 as libc::c_uint, keep - 1, 0 as libc::c_uint) == 0)
            && libc::syscall(libc::SYS_close_range, keep + 1, libc::c_uint::MAX, 0 as libc::c_uint) == 0
    };
    if !ranges {
        // Before Linux 5.9.
        for fd in 3..65_536 {
            if fd != keep as RawFd {
                // SAFETY: as above; closing a descriptor not open is harmless.
                unsafe { libc::close(fd) };
            }
        }
    }
}

/// A child process that cleans up after rtscope when it ends by any path
/// (SIGKILL included): it removes the SysV objects, kills the process
/// groups and removes the paths registered with it ([`Registry`]). It waits for end-of-file on a pipe whose
/// only writer is rtscope (the end is close-on-exec, and the janitor
/// closes every descriptor it inherited but its own, so a second janitor
/// never holds the first one's pipe open). It ignores SIGINT/SIGTERM/SIGHUP,
/// so a Ctrl-C to the process group leaves the cleaning to it and to
/// rtscope. It may be started at any time: the child only makes
/// async-signal-safe calls.
pub struct Janitor {
    pid: i32,
    writer: Option<OwnedFd>,
    registry: &'static Registry,
}

impl Janitor {
    /// Starts the janitor.
    pub fn start() -> io::Result<Janitor> {
        let shared: Shared<Registry> = Shared::new()?;
        // The page stays mapped for the life of the process (a few bytes,
        // once per run): semaphore sets reach it when they drop.
        // SAFETY: the mapping is never unmapped (forgotten below).
        let registry: &'static Registry = unsafe { &*(&*shared as *const Registry) };
        std::mem::forget(shared);
        let (r, w) = pipe()?;
        let owner = std::process::id() as i32;
        // Not tied: the janitor outlives a SIGKILL of rtscope.
        let pid = fork_with(false, move || {
            close_all_but(r.as_raw_fd());
            let mut buf = [0u8; 16];
            while let Ok(n) = read_fd(&r, &mut buf) {
                if n == 0 {
                    break;
                }
            }
            registry.clean(owner);
            0
        })?;
        Ok(Janitor { pid, writer: Some(w), registry })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Where process groups are registered (also from a child before exec).
    pub fn registry(&self) -> &'static Registry {
        self.registry
    }
}

impl Drop for Janitor {
    fn drop(&mut self) {
        self.writer.take();
        let _ = wait_child(self.pid);
    }
}

/// rtscope's own janitor, started on first use and kept for the life of
/// the process: loads register their commands' process groups and their
/// temporary directories with it, `--trace` its tracefs instance (and the
/// tracefs it mounted), each as it is made. When rtscope ends normally it
/// has removed all of them and the janitor finds nothing left to do.
pub fn janitor() -> io::Result<&'static Janitor> {
    static JANITOR: std::sync::Mutex<Option<&'static Janitor>> = std::sync::Mutex::new(None);
    let mut j = JANITOR.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(j) = *j {
        return Ok(j);
    }
    let started: &'static Janitor = Box::leak(Box::new(Janitor::start()?));
    *j = Some(started);
    Ok(started)
}
