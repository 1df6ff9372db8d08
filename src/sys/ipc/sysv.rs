//! SysV semaphore sets, removed on drop (or by the janitor).

use super::janitor::{Janitor, Registry};
use super::{check, last};
use std::io;

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
        janitor.registry().register(id);
        Ok(SysvSem { id, registry: janitor.registry() })
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
