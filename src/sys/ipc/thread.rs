//! Threads made with pthread attributes: policy, priority, CPU, stack.

use super::check_pthread;
use std::io;

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

extern "C" fn empty_thread(_: *mut libc::c_void) -> *mut libc::c_void {
    std::ptr::null_mut()
}
