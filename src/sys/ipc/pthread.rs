//! POSIX mutexes, condition variables and semaphores that stay where
//! they were made (shared memory or a boxed slice), process-private or
//! process-shared.

use super::shm::Zeroable;
use super::{check, check_pthread, last};
use std::cell::UnsafeCell;
use std::io;

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
