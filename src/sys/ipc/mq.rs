//! POSIX message queues, unlinked as soon as they are open.

use super::last;
use std::ffi::CStr;
use std::io;

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
