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
    paths: [PathSlot; 16],
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
}

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

    /// Registers `path` for the janitor to remove as `kind`, should
    /// rtscope die before [`Registry::remove_path`]. Register before
    /// making it, so that no moment exists where it is there unregistered
    /// (the janitor finds nothing to do for a path that is not there).
    /// False when the path is longer than 511 bytes or the table is full.
    pub fn add_path(&self, kind: Leftover, path: &std::path::Path) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.as_os_str().as_bytes();
        if bytes.is_empty() || bytes.len() >= PATH_BYTES || bytes.contains(&0) {
            return false;
        }
        for s in &self.paths {
            if s.state.compare_exchange(FREE, CLAIMED, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                // SAFETY: the slot is claimed: nobody else touches its bytes.
                let buf = unsafe { &mut *s.path.get() };
                buf[..bytes.len()].copy_from_slice(bytes);
                buf[bytes.len()] = 0;
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
    /// then the trace instances, the directories, and last tracefs.
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
        // SAFETY (the three loops): NUL-terminated paths in this process's
        // own copy of the registry; the helpers make system calls only.
        for p in self.paths_of(Leftover::TraceInstance) {
            unsafe { cleanup::remove_instance(p) };
        }
        for p in self.paths_of(Leftover::Tree) {
            unsafe { cleanup::remove_tree(p) };
        }
        for p in self.paths_of(Leftover::TracefsMount) {
            unsafe { cleanup::unmount_if_unused(p) };
        }
    }
}

/// The janitor's file-system work: system calls on stack buffers, nothing
/// allocated (it runs in a child forked from a process with threads).
mod cleanup {
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
        // SAFETY: C strings; open/write/close/rmdir are plain system calls.
        unsafe {
            if let Some(on) = join(&mut buf, dir, b"/tracing_on") {
                let fd = libc::open(on, libc::O_WRONLY | libc::O_CLOEXEC);
                if fd >= 0 {
                    libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                }
            }
            for _ in 0..TRIES {
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
                        let sub = libc::openat(
                            fd,
                            c,
                            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                        );
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

    /// Unmounts the tracefs at `root` when its `instances/` is empty.
    ///
    /// # Safety
    /// `root` is a NUL-terminated path.
    pub unsafe fn unmount_if_unused(root: *const c_char) {
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
        // Ends the janitor as rtscope's death would, and waits for it.
        drop(janitor);
        assert!(!tree.exists(), "the registered tree is removed");
        assert!(kept.exists(), "a path forgotten is left");
        assert!(std::path::Path::new("/etc/hostname").exists() || std::path::Path::new("/etc").is_dir());
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
