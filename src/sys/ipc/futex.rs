//! Futexes: wait and wake on a word, and a one-shot event built on one.

use super::shm::Zeroable;
use std::sync::atomic::{AtomicU32, Ordering};

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

/// [`futex_wait`] of a private futex bounded by `timeout_ns` (a relative
/// timeout: the kernel arms and cancels a timer on each wait).
#[inline]
pub fn futex_wait_for(word: &AtomicU32, expected: u32, timeout_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as _,
    };
    // SAFETY: a valid aligned u32 and timespec that live while we wait.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &ts as *const libc::timespec,
        );
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
