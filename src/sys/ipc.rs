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

use std::cell::UnsafeCell;
use std::ffi::CStr;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};

fn last() -> io::Error {
    io::Error::last_os_error()
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 { Err(last()) } else { Ok(rc) }
}

fn check_pthread(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(rc)) }
}

/// Types for which all-zero bytes are a valid value (atomics, the pthread
/// objects before their init).
///
/// # Safety
/// Implement only for such types.
pub unsafe trait Zeroable {}

unsafe impl Zeroable for std::sync::atomic::AtomicU64 {}
unsafe impl Zeroable for AtomicU32 {}

/// A `T` in anonymous `MAP_SHARED` memory: children forked after it is made
/// see the same memory. Zeroed at creation; unmapped on drop.
pub struct Shared<T: Zeroable> {
    ptr: *mut T,
    len: usize,
    count: usize,
    _t: PhantomData<T>,
}

// SAFETY: the memory holds `T`s that are themselves shared by reference only.
unsafe impl<T: Zeroable + Sync> Send for Shared<T> {}
unsafe impl<T: Zeroable + Sync> Sync for Shared<T> {}

impl<T: Zeroable> Shared<T> {
    /// One zeroed `T`.
    pub fn new() -> io::Result<Shared<T>> {
        Self::slice(1)
    }

    /// `count` zeroed `T`s (at least one).
    pub fn slice(count: usize) -> io::Result<Shared<T>> {
        let count = count.max(1);
        let len = (std::mem::size_of::<T>() * count).max(1);
        // SAFETY: a fresh anonymous mapping; the kernel zeroes it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(last());
        }
        Ok(Shared { ptr: ptr.cast(), len, count, _t: PhantomData })
    }

    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `count` zero-initialised (valid) Ts, alive until drop.
        unsafe { std::slice::from_raw_parts(self.ptr, self.count) }
    }
}

impl<T: Zeroable> std::ops::Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: at least one valid T.
        unsafe { &*self.ptr }
    }
}

impl<T: Zeroable> Drop for Shared<T> {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Blocks while `word` holds `expected` (FUTEX_WAIT); returns on a wake-up,
/// a signal, or at once when the word differs. `shared`: a futex other
/// processes may wake (no FUTEX_PRIVATE_FLAG).
#[inline]
pub fn futex_wait(word: &AtomicU32, expected: u32, shared: bool) {
    let op = if shared { libc::FUTEX_WAIT } else { libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG };
    // SAFETY: a valid aligned u32 that lives while we wait; no timeout.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), op, expected, std::ptr::null::<libc::timespec>());
    }
}

/// Wakes up to `n` waiters of `word` (FUTEX_WAKE); returns how many woke.
#[inline]
pub fn futex_wake(word: &AtomicU32, n: i32, shared: bool) -> i64 {
    let op = if shared { libc::FUTEX_WAKE } else { libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG };
    // SAFETY: a valid aligned u32.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), op, n) }
}

/// A binary event on a futex word: [`FutexEvent::set`] then wakes one waiter.
#[repr(C)]
#[derive(Default)]
pub struct FutexEvent {
    word: AtomicU32,
}

unsafe impl Zeroable for FutexEvent {}

impl FutexEvent {
    /// Sets the event and wakes a waiter (one FUTEX_WAKE system call).
    #[inline]
    pub fn set(&self, shared: bool) {
        self.word.store(1, Ordering::Release);
        futex_wake(&self.word, 1, shared);
    }

    /// Waits until the event is set, and clears it.
    #[inline]
    pub fn wait(&self, shared: bool) {
        while self.word.swap(0, Ordering::Acquire) == 0 {
            futex_wait(&self.word, 0, shared);
        }
    }
}

/// A pthread mutex that stays where it was made (shared memory or a boxed slice).
#[repr(C)]
pub struct PMutex(UnsafeCell<libc::pthread_mutex_t>);

// SAFETY: a pthread mutex is made to be used from several threads.
unsafe impl Sync for PMutex {}
unsafe impl Send for PMutex {}
unsafe impl Zeroable for PMutex {}

impl PMutex {
    pub fn zeroed() -> PMutex {
        // SAFETY: zeroed bytes are a valid (default) glibc mutex.
        PMutex(UnsafeCell::new(unsafe { std::mem::zeroed() }))
    }

    /// Initialises in place: process-shared when `shared`, priority
    /// inheritance (PTHREAD_PRIO_INHERIT) when `pi`.
    pub fn init(&self, shared: bool, pi: bool) -> io::Result<()> {
        // SAFETY: attr is initialised before use and destroyed after.
        unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            check_pthread(libc::pthread_mutexattr_init(&mut attr))?;
            let pshared = if shared { libc::PTHREAD_PROCESS_SHARED } else { libc::PTHREAD_PROCESS_PRIVATE };
            let mut rc = libc::pthread_mutexattr_setpshared(&mut attr, pshared);
            if rc == 0 && pi {
                rc = libc::pthread_mutexattr_setprotocol(&mut attr, libc::PTHREAD_PRIO_INHERIT);
            }
            if rc == 0 {
                rc = libc::pthread_mutex_init(self.0.get(), &attr);
            }
            libc::pthread_mutexattr_destroy(&mut attr);
            check_pthread(rc)
        }
    }

    #[inline]
    pub fn lock(&self) -> bool {
        // SAFETY: an initialised mutex at a fixed address.
        unsafe { libc::pthread_mutex_lock(self.0.get()) == 0 }
    }

    #[inline]
    pub fn unlock(&self) -> bool {
        // SAFETY: as above.
        unsafe { libc::pthread_mutex_unlock(self.0.get()) == 0 }
    }

    fn raw(&self) -> *mut libc::pthread_mutex_t {
        self.0.get()
    }
}

/// A pthread condition variable that stays where it was made.
#[repr(C)]
pub struct PCond(UnsafeCell<libc::pthread_cond_t>);

unsafe impl Sync for PCond {}
unsafe impl Zeroable for PCond {}

impl PCond {
    pub fn init(&self, shared: bool) -> io::Result<()> {
        // SAFETY: attr initialised before use and destroyed after.
        unsafe {
            let mut attr: libc::pthread_condattr_t = std::mem::zeroed();
            check_pthread(libc::pthread_condattr_init(&mut attr))?;
            let pshared = if shared { libc::PTHREAD_PROCESS_SHARED } else { libc::PTHREAD_PROCESS_PRIVATE };
            let mut rc = libc::pthread_condattr_setpshared(&mut attr, pshared);
            if rc == 0 {
                rc = libc::pthread_condattr_setclock(&mut attr, libc::CLOCK_MONOTONIC);
            }
            if rc == 0 {
                rc = libc::pthread_cond_init(self.0.get(), &attr);
            }
            libc::pthread_condattr_destroy(&mut attr);
            check_pthread(rc)
        }
    }

    #[inline]
    pub fn signal(&self) {
        // SAFETY: an initialised condition variable.
        unsafe { libc::pthread_cond_signal(self.0.get()) };
    }

    /// `pthread_cond_wait`: `m` must be locked by the caller.
    #[inline]
    pub fn wait(&self, m: &PMutex) {
        // SAFETY: initialised objects; the caller holds `m`.
        unsafe { libc::pthread_cond_wait(self.0.get(), m.raw()) };
    }
}

/// An unnamed POSIX semaphore (`sem_init`), process-shared or not.
#[repr(C)]
pub struct PSem(UnsafeCell<libc::sem_t>);

unsafe impl Sync for PSem {}
unsafe impl Zeroable for PSem {}

impl PSem {
    pub fn init(&self, shared: bool, value: u32) -> io::Result<()> {
        // SAFETY: a fixed address that outlives every use.
        check(unsafe { libc::sem_init(self.0.get(), i32::from(shared), value) }).map(|_| ())
    }

    #[inline]
    pub fn post(&self) {
        // SAFETY: an initialised semaphore.
        unsafe { libc::sem_post(self.0.get()) };
    }

    #[inline]
    pub fn wait(&self) {
        // SAFETY: as above; EINTR retries.
        while unsafe { libc::sem_wait(self.0.get()) } != 0 && last().raw_os_error() == Some(libc::EINTR) {}
    }
}

fn fd(raw: RawFd) -> OwnedFd {
    // SAFETY: a descriptor the kernel just gave us, owned from now on.
    unsafe { OwnedFd::from_raw_fd(raw) }
}

/// Writes all of `buf` to `fd` (one write(2) unless interrupted).
#[inline]
pub fn write_fd(fd: &OwnedFd, buf: &[u8]) -> io::Result<()> {
    loop {
        // SAFETY: a valid descriptor and buffer.
        let n = unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
        if n == buf.len() as isize {
            return Ok(());
        }
        if n < 0 && last().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return Err(if n < 0 { last() } else { io::Error::other("short write") });
    }
}

/// Reads up to `buf.len()` bytes (one read(2) unless interrupted); 0 at end.
#[inline]
pub fn read_fd(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: a valid descriptor and buffer.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        if last().raw_os_error() != Some(libc::EINTR) {
            return Err(last());
        }
    }
}

/// An eventfd (a counter the kernel wakes readers of).
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain system call.
    check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) }).map(fd)
}

/// A pipe: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: room for two descriptors.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    Ok((fd(fds[0]), fd(fds[1])))
}

/// A connected pair of unix sockets of `kind` (SOCK_DGRAM, SOCK_STREAM, SOCK_SEQPACKET).
pub fn socketpair(kind: libc::c_int) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: room for two descriptors.
    check(unsafe { libc::socketpair(libc::AF_UNIX, kind | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) })?;
    Ok((fd(fds[0]), fd(fds[1])))
}

/// A SysV semaphore set (IPC_PRIVATE), removed on drop.
pub struct SysvSem {
    id: libc::c_int,
    registry: &'static Registry,
}

impl SysvSem {
    /// `n` semaphores at 0, registered with `janitor` until dropped.
    pub fn new(n: i32, janitor: &Janitor) -> io::Result<SysvSem> {
        // SAFETY: plain system call.
        let id = check(unsafe { libc::semget(libc::IPC_PRIVATE, n, libc::IPC_CREAT | 0o600) })?;
        janitor.registry.register(id);
        Ok(SysvSem { id, registry: janitor.registry })
    }

    pub fn id(&self) -> i32 {
        self.id
    }

    /// semop(2) of `delta` on semaphore `num`; retries on EINTR.
    #[inline]
    pub fn op(&self, num: u16, delta: i16) -> bool {
        let mut op = libc::sembuf { sem_num: num, sem_op: delta, sem_flg: 0 };
        loop {
            // SAFETY: one valid sembuf.
            if unsafe { libc::semop(self.id, &mut op, 1) } == 0 {
                return true;
            }
            if last().raw_os_error() != Some(libc::EINTR) {
                return false;
            }
        }
    }
}

impl Drop for SysvSem {
    fn drop(&mut self) {
        // SAFETY: our own set, removed once.
        unsafe { libc::semctl(self.id, 0, libc::IPC_RMID) };
        self.registry.unregister(self.id);
    }
}

/// A POSIX message queue, unlinked as soon as it is open (the descriptor
/// stays valid here and in children forked afterwards).
pub struct Mq {
    mqd: libc::mqd_t,
}

unsafe impl Sync for Mq {}
unsafe impl Send for Mq {}

impl Mq {
    /// A new queue of `maxmsg` messages of `msgsize` bytes, named `name`
    /// ("/rtscope-PID-N") for the instant between open and unlink.
    pub fn new(name: &CStr, maxmsg: i64, msgsize: i64, nonblock: bool) -> io::Result<Mq> {
        // SAFETY: a zeroed mq_attr with its fields set; a valid name.
        unsafe {
            let mut attr: libc::mq_attr = std::mem::zeroed();
            attr.mq_maxmsg = maxmsg as _;
            attr.mq_msgsize = msgsize as _;
            let mut flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC;
            if nonblock {
                flags |= libc::O_NONBLOCK;
            }
            let mqd = libc::mq_open(name.as_ptr(), flags, 0o600 as libc::mode_t, &mut attr as *mut libc::mq_attr);
            if mqd == -1 as libc::mqd_t {
                return Err(last());
            }
            libc::mq_unlink(name.as_ptr());
            Ok(Mq { mqd })
        }
    }

    /// mq_send(2); false when it failed (EAGAIN on a full non-blocking queue).
    #[inline]
    pub fn send(&self, msg: &[u8]) -> bool {
        loop {
            // SAFETY: a valid queue and buffer.
            if unsafe { libc::mq_send(self.mqd, msg.as_ptr().cast(), msg.len(), 0) } == 0 {
                return true;
            }
            if last().raw_os_error() != Some(libc::EINTR) {
                return false;
            }
        }
    }

    /// mq_receive(2) into `buf` (at least the queue's message size).
    #[inline]
    pub fn receive(&self, buf: &mut [u8]) -> bool {
        loop {
            // SAFETY: a valid queue and buffer.
            if unsafe { libc::mq_receive(self.mqd, buf.as_mut_ptr().cast(), buf.len(), std::ptr::null_mut()) } >= 0 {
                return true;
            }
            if last().raw_os_error() != Some(libc::EINTR) {
                return false;
            }
        }
    }
}

impl Drop for Mq {
    fn drop(&mut self) {
        // SAFETY: our own descriptor, closed once.
        unsafe { libc::mq_close(self.mqd) };
    }
}

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
/// then may allocate safely.
pub fn fork_child(body: impl FnOnce() -> i32) -> io::Result<i32> {
    fork_with(true, body)
}

/// [`fork_child`]; `tied`: whether the child dies with rtscope.
fn fork_with(tied: bool, body: impl FnOnce() -> i32) -> io::Result<i32> {
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

extern "C" fn empty_thread(_: *mut libc::c_void) -> *mut libc::c_void {
    std::ptr::null_mut()
}

/// Attributes of the threads [`ThreadAttr::create_join`] makes: SCHED_FIFO
/// at a priority (or SCHED_OTHER), pinned to one CPU, 64 KiB of stack.
pub struct ThreadAttr(libc::pthread_attr_t);

impl ThreadAttr {
    pub fn new(cpu: usize, fifo_priority: Option<u8>) -> io::Result<ThreadAttr> {
        // SAFETY: the attr is initialised first; cpu_set_t is zeroed then set.
        unsafe {
            let mut attr: libc::pthread_attr_t = std::mem::zeroed();
            check_pthread(libc::pthread_attr_init(&mut attr))?;
            let mut a = ThreadAttr(attr);
            check_pthread(libc::pthread_attr_setstacksize(&mut a.0, 64 << 10))?;
            if let Some(p) = fifo_priority {
                check_pthread(libc::pthread_attr_setinheritsched(&mut a.0, libc::PTHREAD_EXPLICIT_SCHED))?;
                check_pthread(libc::pthread_attr_setschedpolicy(&mut a.0, libc::SCHED_FIFO))?;
                let param = libc::sched_param { sched_priority: i32::from(p) };
                check_pthread(libc::pthread_attr_setschedparam(&mut a.0, &param))?;
            }
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            check_pthread(libc::pthread_attr_setaffinity_np(&mut a.0, std::mem::size_of::<libc::cpu_set_t>(), &set))?;
            Ok(a)
        }
    }

    /// pthread_create(3) of a thread that returns at once, then pthread_join(3).
    #[inline]
    pub fn create_join(&self) -> bool {
        // SAFETY: an initialised attr; the thread takes no argument.
        unsafe {
            let mut t: libc::pthread_t = std::mem::zeroed();
            if libc::pthread_create(&mut t, &self.0, empty_thread, std::ptr::null_mut()) != 0 {
                return false;
            }
            libc::pthread_join(t, std::ptr::null_mut()) == 0
        }
    }
}

impl Drop for ThreadAttr {
    fn drop(&mut self) {
        // SAFETY: initialised in new.
        unsafe { libc::pthread_attr_destroy(&mut self.0) };
    }
}

/// getppid(2) through syscall(2) (no C library shortcut).
#[inline(always)]
pub fn syscall_getppid() -> i64 {
    // SAFETY: plain system call.
    unsafe { libc::syscall(libc::SYS_getppid) }
}

/// clock_gettime through the C library (the vDSO: no system call).
#[inline(always)]
pub fn clock_vdso(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_nsec
}

/// clock_gettime as a real system call (syscall(2), bypassing the vDSO).
#[inline(always)]
pub fn clock_syscall(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec.
    unsafe { libc::syscall(libc::SYS_clock_gettime, clock, &mut ts) };
    ts.tv_nsec
}

/// time(2) through the C library (the vDSO on x86_64).
#[inline(always)]
pub fn time_now() -> i64 {
    // SAFETY: a null pointer is allowed.
    unsafe { libc::time(std::ptr::null_mut()) }
}

/// malloc(3); null on failure.
#[inline(always)]
pub fn malloc(bytes: usize) -> *mut u8 {
    // SAFETY: plain call.
    unsafe { libc::malloc(bytes).cast() }
}

/// free(3) of what [`malloc`] returned.
///
/// # Safety
/// `p` comes from [`malloc`] and is freed once.
#[inline(always)]
pub unsafe fn free(p: *mut u8) {
    // SAFETY: the caller's promise.
    unsafe { libc::free(p.cast()) };
}

/// mmap(2) of one anonymous private page, a write to it, munmap(2).
#[inline]
pub fn map_touch_unmap() -> bool {
    // SAFETY: a fresh private mapping, written within bounds, unmapped once.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return false;
        }
        std::ptr::write_volatile(p.cast::<u8>(), 1);
        libc::munmap(p, 4096) == 0
    }
}

/// What the janitor removes should rtscope die first: SysV semaphore
/// sets, and the process groups of loads' commands (killed, with all they
/// started).
#[repr(C)]
pub struct Registry {
    /// SysV semaphore set ids + 1 (0: free slot).
    sysv: [AtomicI64; 32],
    /// Process group ids (0: free slot).
    groups: [AtomicI64; 32],
}

unsafe impl Zeroable for Registry {}

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
    fn register(&self, id: i32) {
        put(&self.sysv, i64::from(id) + 1);
    }

    fn unregister(&self, id: i32) {
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

    /// What the janitor does when rtscope is gone.
    fn clean(&self) {
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
/// (SIGKILL included): it removes the SysV objects and kills the process
/// groups registered with it. It waits for end-of-file on a pipe whose
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
        // Not tied: the janitor outlives a SIGKILL of rtscope.
        let pid = fork_with(false, move || {
            close_all_but(r.as_raw_fd());
            let mut buf = [0u8; 16];
            while let Ok(n) = read_fd(&r, &mut buf) {
                if n == 0 {
                    break;
                }
            }
            registry.clean();
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let p = malloc(32);
        assert!(!p.is_null());
        unsafe { free(p) };
        let attr = ThreadAttr::new(0, None).unwrap();
        assert!(attr.create_join());
    }
}
