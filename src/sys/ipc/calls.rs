//! The calls the `calls` and `ssc` groups time: system calls, clock
//! reads, malloc/free, a page mapped, touched and unmapped.

/// getppid(2) through syscall(2) (no C library shortcut).
#[inline(always)]
pub fn syscall_getppid() -> i64 {
    // SAFETY: plain system call.
    unsafe { libc::syscall(libc::SYS_getppid) }
}

/// A system call of six word-sized arguments that the kernel takes by
/// value and checks without touching memory or a file: splice(2) of length
/// 0 (`splice(-1, NULL, -1, NULL, 0, 0)`), which returns 0 on its first
/// check. Six: Linux passes at most six arguments, all in registers.
#[inline(always)]
pub fn syscall_six_words() -> i64 {
    let null = std::ptr::null_mut::<libc::loff_t>();
    // SAFETY: a length of 0 returns before any argument is used.
    unsafe { libc::syscall(libc::SYS_splice, -1, null, -1, null, 0usize, 0u32) }
}

/// What [`syscall_pointers`] points to: three empty fd sets, a zero
/// timeout and pselect6's signal-mask descriptor (no mask).
#[repr(C)]
pub struct PointerArgs {
    fds: [libc::fd_set; 3],
    pub(super) timeout: libc::timespec,
    pub(super) sigmask: [usize; 2],
}

impl PointerArgs {
    pub fn new() -> PointerArgs {
        // SAFETY: all-zero is an empty fd set, a zero timespec and a null mask.
        let mut a: PointerArgs = unsafe { std::mem::zeroed() };
        a.sigmask[1] = 8;
        a
    }
}

impl Default for PointerArgs {
    fn default() -> Self {
        Self::new()
    }
}

/// A system call of six arguments, five of them pointers the kernel reads
/// (and writes back) through: pselect6(2) of one descriptor in three empty
/// sets with a zero timeout and no signal mask. It copies in the three
/// sets, the timeout and the mask descriptor, polls nothing, copies the
/// sets and the timeout back out and returns 0: no side effect.
#[inline(always)]
pub fn syscall_pointers(a: &mut PointerArgs) -> i64 {
    let [r, w, e] = &mut a.fds;
    // SAFETY: every pointer is to a live, writable field of `a`.
    unsafe {
        libc::syscall(
            libc::SYS_pselect6,
            1,
            r as *mut libc::fd_set,
            w as *mut libc::fd_set,
            e as *mut libc::fd_set,
            &mut a.timeout as *mut libc::timespec,
            a.sigmask.as_ptr(),
        )
    }
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
