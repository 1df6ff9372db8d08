//! Wake-up primitives: from the signal in the lower-priority party to the
//! blocked higher-priority party running, intra- and inter-process.

use super::harness::{self, Ctl, Env, Outcome, Wake};
use crate::sys::clock;
use crate::sys::ipc::{self, FutexEvent, Mq, PCond, PMutex, PSem, Shared, SysvSem, Zeroable};
use crate::sys::timers::{SigSet, rt_signal};
use anyhow::{Result, anyhow};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering::*};

/// Which primitive a wake-up test uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prim {
    Futex,
    Eventfd,
    Condvar,
    PosixSem,
    SysvSem,
    Mqueue,
    Pipe,
    UnixDgram,
    Signal,
}

struct Futex {
    ev: Shared<FutexEvent>,
    shared: bool,
}

impl Wake for Futex {
    fn signal(&self) {
        self.ev.set(self.shared);
    }
    fn wait(&self) -> u64 {
        self.ev.wait(self.shared);
        clock::now()
    }
}

/// A file descriptor pair: write one message on `tx`, read it on `rx`.
struct Fds {
    rx: OwnedFd,
    tx: OwnedFd,
    len: usize,
}

impl Wake for Fds {
    fn signal(&self) {
        let _ = ipc::write_fd(&self.tx, &1u64.to_ne_bytes()[..self.len]);
    }
    fn wait(&self) -> u64 {
        let mut b = [0u8; 8];
        let _ = ipc::read_fd(&self.rx, &mut b[..self.len]);
        clock::now()
    }
}

/// An event made of a pthread mutex, a condition variable and a flag.
#[repr(C)]
pub struct CondEvent {
    m: PMutex,
    c: PCond,
    flag: AtomicU32,
}

unsafe impl Zeroable for CondEvent {}

impl CondEvent {
    pub fn new(shared: bool) -> Result<Shared<CondEvent>> {
        let e: Shared<CondEvent> = Shared::new()?;
        e.m.init(shared, false)?;
        e.c.init(shared)?;
        Ok(e)
    }

    /// Sets the flag and signals, under the mutex.
    pub fn set(&self) {
        self.m.lock();
        self.flag.store(1, Relaxed);
        self.c.signal();
        self.m.unlock();
    }

    /// Waits for the flag and clears it; the instant pthread_cond_wait
    /// returned with the flag set (0 when it was set before the wait).
    pub fn wait(&self) -> u64 {
        let mut t = 0;
        self.m.lock();
        while self.flag.load(Relaxed) == 0 {
            self.c.wait(&self.m);
            t = clock::now();
        }
        self.flag.store(0, Relaxed);
        self.m.unlock();
        if t == 0 { clock::now() } else { t }
    }
}

struct Cond(Shared<CondEvent>);

impl Wake for Cond {
    fn pre_signal(&self) {
        self.0.m.lock();
        self.0.flag.store(1, Relaxed);
        self.0.m.unlock();
    }
    fn signal(&self) {
        self.0.c.signal();
    }
    fn wait(&self) -> u64 {
        self.0.wait()
    }
}

struct Sem(Shared<PSem>);

impl Wake for Sem {
    fn signal(&self) {
        self.0.post();
    }
    fn wait(&self) -> u64 {
        self.0.wait();
        clock::now()
    }
}

struct Sysv(SysvSem);

impl Wake for Sysv {
    fn signal(&self) {
        self.0.op(0, 1);
    }
    fn wait(&self) -> u64 {
        self.0.op(0, -1);
        clock::now()
    }
}

struct Queue(Mq);

impl Wake for Queue {
    fn signal(&self) {
        self.0.send(&[1u8; 8]);
    }
    fn wait(&self) -> u64 {
        let mut b = [0u8; 8];
        self.0.receive(&mut b);
        clock::now()
    }
}

/// A real-time signal sent with tgkill to the waiting thread, taken with
/// sigwaitinfo (blocked in that thread, so never delivered to a handler).
struct Sig {
    sig: i32,
    set: SigSet,
    pid: i32,
    ctl: Shared<Ctl>,
}

impl Wake for Sig {
    fn leader_start(&self) {
        self.set.block();
        self.ctl.tid.store(crate::sys::sched::thread_id(), Release);
    }
    fn signal(&self) {
        ipc::tgkill(self.pid, self.ctl.tid.load(Acquire), self.sig);
    }
    fn wait(&self) -> u64 {
        let _ = self.set.wait();
        clock::now()
    }
}

/// The signal the `signal` tests send: a real-time one no other part of
/// rtscope uses in this command.
pub fn test_signal() -> Option<i32> {
    rt_signal(10)
}

/// Runs the wake-up test of `prim`.
pub fn run(env: &Env, prim: Prim, inter: bool) -> Result<Outcome> {
    match prim {
        Prim::Futex => harness::wake_pair(env, inter, &Futex { ev: Shared::new()?, shared: inter }),
        Prim::Eventfd => {
            let e = ipc::eventfd()?;
            let tx = e.try_clone()?;
            harness::wake_pair(env, inter, &Fds { rx: e, tx, len: 8 })
        }
        Prim::Condvar => harness::wake_pair(env, inter, &Cond(CondEvent::new(inter)?)),
        Prim::PosixSem => {
            let s: Shared<PSem> = Shared::new()?;
            s.init(inter, 0)?;
            harness::wake_pair(env, inter, &Sem(s))
        }
        Prim::SysvSem => harness::wake_pair(env, inter, &Sysv(SysvSem::new(1, env.janitor)?)),
        Prim::Mqueue => {
            let q = Mq::new(&env.ipc_name("wake"), 10, 8, false)
                .map_err(|e| anyhow!("POSIX message queues unavailable ({e}; CONFIG_POSIX_MQUEUE?)"))?;
            harness::wake_pair(env, inter, &Queue(q))
        }
        Prim::Pipe => {
            let (rx, tx) = ipc::pipe()?;
            harness::wake_pair(env, inter, &Fds { rx, tx, len: 1 })
        }
        Prim::UnixDgram => {
            let (rx, tx) = ipc::socketpair(libc::SOCK_DGRAM)?;
            harness::wake_pair(env, inter, &Fds { rx, tx, len: 8 })
        }
        Prim::Signal => {
            let sig = test_signal().ok_or_else(|| anyhow!("this system has too few real-time signals"))?;
            harness::wake_pair(
                env,
                inter,
                &Sig { sig, set: SigSet::of(&[sig]), pid: ipc::getpid(), ctl: Shared::new()? },
            )
        }
    }
}
