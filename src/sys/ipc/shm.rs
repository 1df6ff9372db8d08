//! Memory shared with forked children: anonymous, all-zero at first.

use super::last;
use std::io;
use std::marker::PhantomData;
use std::sync::atomic::AtomicU32;

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
