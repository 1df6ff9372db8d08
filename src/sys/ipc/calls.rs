//! The calls the `calls` and `ssc` groups time: system calls, clock
//! reads, malloc/free, a page mapped, touched and unmapped.

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
