//! Wake-up primitives: from the signal in the lower-priority party to the
//! blocked higher-priority party running, intra- and inter-process. Each
//! has a second object of its kind for the reply of `--priorities equal`
//! (the waiter answers, the signaller blocks for the answer right after
//! its signal), as rt-tests' ptsematest, pmqtest, svsematest and
//! sigwaittest do.

use super::harness::{self, Ctl, Env, Failures, Outcome, Wake};
use super::{Group, Ips, N, TestDef};
use crate::sys::clock;
use crate::sys::ipc::{self, FutexEvent, Mq, PCond, PMutex, PSem, Shared, SysvSem, Zeroable};
use crate::sys::timers::{SigSet, rt_signal};
use anyhow::{Result, anyhow};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering::*};

/// The parties of a wake-up test.
const HL: &str = "waiter higher, signaller lower";

/// The row of a wake-up test: `$prim` intra- or inter-process (`$inter`);
/// `$reply` is the call the signaller blocks in under `--priorities equal`.
macro_rules! wake {
    ($id:literal, $name:literal, $def:literal, $reply:literal, $prim:expr, $inter:literal) => {
        TestDef {
            id: $id,
            name: $name,
            group: Group::Wakeup,
            def: $def,
            inter: $inter,
            parties: HL,
            ips: Ips::One,
            cross: true,
            equal: Some($reply),
            n: N,
            run: |e| run(e, $prim, $inter),
        }
    };
}

/// The wake-up primitives: this family's rows of [`TESTS`](super::TESTS), in order.
pub(super) const TESTS: &[TestDef] = &[
    wake!(
        "wake.futex-intra",
        "futex wake",
        "from the lower-priority thread's FUTEX_WAKE to the return of FUTEX_WAIT in the higher-priority thread blocked on the word, same process (private futex)",
        "FUTEX_WAIT on a second futex word",
        Prim::Futex,
        false
    ),
    wake!(
        "wake.futex-inter",
        "futex wake",
        "the same on a shared futex word in shared memory, the waker in another process",
        "FUTEX_WAIT on a second futex word",
        Prim::Futex,
        true
    ),
    wake!(
        "wake.eventfd-intra",
        "eventfd",
        "from the lower-priority thread's write(2) of 1 to an eventfd to the return of read(2) in the higher-priority thread blocked on it, same process",
        "read(2) of a second eventfd",
        Prim::Eventfd,
        false
    ),
    wake!(
        "wake.eventfd-inter",
        "eventfd",
        "the same, the writer in another process",
        "read(2) of a second eventfd",
        Prim::Eventfd,
        true
    ),
    wake!(
        "wake.condvar-intra",
        "condition variable",
        "the lower-priority thread sets the predicate under the mutex and releases it; from its call to pthread_cond_signal to the return of pthread_cond_wait (mutex re-taken) in the higher-priority thread, same process (CEBench event)",
        "pthread_cond_wait on a second condition variable",
        Prim::Condvar,
        false
    ),
    wake!(
        "wake.condvar-inter",
        "condition variable",
        "the same with a process-shared mutex and condition variable in shared memory, the signaller in another process",
        "pthread_cond_wait on a second condition variable",
        Prim::Condvar,
        true
    ),
    wake!(
        "wake.sem-intra",
        "POSIX semaphore",
        "from the lower-priority thread's sem_post to the return of sem_wait in the higher-priority thread blocked on the unnamed semaphore, same process (CEBench 11)",
        "sem_wait on a second semaphore",
        Prim::PosixSem,
        false
    ),
    wake!(
        "wake.sem-inter",
        "POSIX semaphore",
        "the same with a process-shared semaphore in shared memory, the poster in another process (CEBench 12)",
        "sem_wait on a second semaphore",
        Prim::PosixSem,
        true
    ),
    wake!(
        "wake.sysv-intra",
        "SysV semaphore",
        "from the lower-priority thread's semop(+1) to the return of semop(-1) in the higher-priority thread blocked on it, same process",
        "semop(-1) on the set's second semaphore (svsematest)",
        Prim::SysvSem,
        false
    ),
    wake!(
        "wake.sysv-inter",
        "SysV semaphore",
        "the same, the poster in another process (svsematest)",
        "semop(-1) on the set's second semaphore (svsematest)",
        Prim::SysvSem,
        true
    ),
    wake!(
        "wake.mq-intra",
        "POSIX message queue",
        "from the lower-priority thread's mq_send of an 8-byte message to the return of mq_receive in the higher-priority thread blocked on the empty queue, same process",
        "mq_receive on a second, empty queue (pmqtest)",
        Prim::Mqueue,
        false
    ),
    wake!(
        "wake.mq-inter",
        "POSIX message queue",
        "the same, the sender in another process (pmqtest)",
        "mq_receive on a second, empty queue (pmqtest)",
        Prim::Mqueue,
        true
    ),
    wake!(
        "wake.pipe-intra",
        "pipe",
        "from the lower-priority thread's write(2) of 1 byte to a pipe to the return of read(2) in the higher-priority thread blocked on it, same process",
        "read(2) of a second pipe",
        Prim::Pipe,
        false
    ),
    wake!(
        "wake.pipe-inter",
        "pipe",
        "the same, the writer in another process",
        "read(2) of a second pipe",
        Prim::Pipe,
        true
    ),
    wake!(
        "wake.unix-intra",
        "unix datagram socket",
        "from the lower-priority thread's write(2) of an 8-byte datagram on a SOCK_DGRAM socketpair to the return of read(2) in the higher-priority thread blocked on the other end, same process",
        "read(2) of the reply datagram on its own end of the socket pair",
        Prim::UnixDgram,
        false
    ),
    wake!(
        "wake.unix-inter",
        "unix datagram socket",
        "the same, the sender in another process",
        "read(2) of the reply datagram on its own end of the socket pair",
        Prim::UnixDgram,
        true
    ),
    wake!(
        "wake.signal-intra",
        "signal",
        "from the lower-priority thread's tgkill(2) of a real-time signal to the higher-priority thread to the return of sigwaitinfo(2) there (the signal blocked, never delivered to a handler), same process (sigwaittest -t)",
        "sigwaitinfo(2) of a second real-time signal (sigwaittest: sigwait(3))",
        Prim::Signal,
        false
    ),
    wake!(
        "wake.signal-inter",
        "signal",
        "the same, the sender in another process (sigwaittest -f)",
        "sigwaitinfo(2) of a second real-time signal (sigwaittest: sigwait(3))",
        Prim::Signal,
        true
    ),
];

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
    back: Shared<FutexEvent>,
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
    fn reply(&self) {
        self.back.set(self.shared);
    }
    fn wait_reply(&self) {
        self.back.wait(self.shared);
    }
}

/// File descriptors: write one message on `tx`, read it on `rx`; the reply
/// is written on `back_tx` and read on `back_rx`.
struct Fds {
    rx: OwnedFd,
    tx: OwnedFd,
    back_rx: OwnedFd,
    back_tx: OwnedFd,
    len: usize,
    failed: Failures,
}

impl Fds {
    /// A one-way pair `(rx, tx)` and another one for the reply.
    fn two(one: (OwnedFd, OwnedFd), back: (OwnedFd, OwnedFd), len: usize) -> Result<Fds> {
        Ok(Fds { rx: one.0, tx: one.1, back_rx: back.0, back_tx: back.1, len, failed: Failures::new()? })
    }

    #[inline(always)]
    fn write(&self, fd: &OwnedFd) {
        self.failed.check(ipc::write_fd(fd, &1u64.to_ne_bytes()[..self.len]).is_ok());
    }

    /// Reads one message; a short read or the end of the stream fails.
    #[inline(always)]
    fn read(&self, fd: &OwnedFd) {
        let mut b = [0u8; 8];
        self.failed.check(ipc::read_fd(fd, &mut b[..self.len]).is_ok_and(|n| n == self.len));
    }
}

impl Wake for Fds {
    fn signal(&self) {
        self.write(&self.tx);
    }
    fn wait(&self) -> u64 {
        self.read(&self.rx);
        clock::now()
    }
    fn reply(&self) {
        self.write(&self.back_tx);
    }
    fn wait_reply(&self) {
        self.read(&self.back_rx);
    }
    fn failures(&self) -> u64 {
        self.failed.count()
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

/// The event, and the one of the reply.
struct Cond(Shared<CondEvent>, Shared<CondEvent>);

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
    fn reply(&self) {
        self.1.set();
    }
    fn wait_reply(&self) {
        self.1.wait();
    }
}

/// The semaphore, and the one of the reply.
struct Sem(Shared<PSem>, Shared<PSem>);

impl Wake for Sem {
    fn signal(&self) {
        self.0.post();
    }
    fn wait(&self) -> u64 {
        self.0.wait();
        clock::now()
    }
    fn reply(&self) {
        self.1.post();
    }
    fn wait_reply(&self) {
        self.1.wait();
    }
}

/// A set of two: semaphore 0 for the signal, 1 for the reply.
struct Sysv(SysvSem, Failures);

impl Wake for Sysv {
    fn signal(&self) {
        self.1.check(self.0.op(0, 1));
    }
    fn wait(&self) -> u64 {
        self.1.check(self.0.op(0, -1));
        clock::now()
    }
    fn reply(&self) {
        self.1.check(self.0.op(1, 1));
    }
    fn wait_reply(&self) {
        self.1.check(self.0.op(1, -1));
    }
    fn failures(&self) -> u64 {
        self.1.count()
    }
}

/// The queue, and the one of the reply.
struct Queue(Mq, Mq, Failures);

impl Wake for Queue {
    fn signal(&self) {
        self.2.check(self.0.send(&[1u8; 8]));
    }
    fn wait(&self) -> u64 {
        let mut b = [0u8; 8];
        self.2.check(self.0.receive(&mut b));
        clock::now()
    }
    fn reply(&self) {
        self.2.check(self.1.send(&[2u8; 8]));
    }
    fn wait_reply(&self) {
        let mut b = [0u8; 8];
        self.2.check(self.1.receive(&mut b));
    }
    fn failures(&self) -> u64 {
        self.2.count()
    }
}

/// Where the signalling party is, for the reply signal.
#[repr(C)]
#[derive(Default)]
struct Peer {
    pid: AtomicI32,
    tid: AtomicI32,
}

unsafe impl Zeroable for Peer {}

/// A real-time signal sent with tgkill to the waiting thread, taken with
/// sigwaitinfo (blocked in that thread, so never delivered to a handler);
/// the reply is another one, sent to the signalling thread the same way.
struct Sig {
    sig: i32,
    set: SigSet,
    pid: i32,
    ctl: Shared<Ctl>,
    back: SigSet,
    back_sig: i32,
    peer: Shared<Peer>,
    failed: Failures,
}

impl Wake for Sig {
    fn leader_start(&self) {
        self.set.block();
        self.ctl.tid.store(crate::sys::sched::thread_id(), Release);
    }
    fn follower_start(&self) {
        self.back.block();
        self.peer.pid.store(ipc::getpid(), Relaxed);
        self.peer.tid.store(crate::sys::sched::thread_id(), Release);
    }
    fn signal(&self) {
        self.failed.check(ipc::tgkill(self.pid, self.ctl.tid.load(Acquire), self.sig));
    }
    fn wait(&self) -> u64 {
        self.failed.check(self.set.wait().is_ok_and(|s| s == self.sig));
        clock::now()
    }
    fn reply(&self) {
        let tid = self.peer.tid.load(Acquire);
        self.failed.check(ipc::tgkill(self.peer.pid.load(Relaxed), tid, self.back_sig));
    }
    fn wait_reply(&self) {
        self.failed.check(self.back.wait().is_ok_and(|s| s == self.back_sig));
    }
    fn failures(&self) -> u64 {
        self.failed.count()
    }
}

/// The signal the `signal` tests send: a real-time one no other part of
/// rtscope uses in this command.
pub fn test_signal() -> Option<i32> {
    rt_signal(10)
}

/// The signal of the reply in `--priorities equal`.
pub fn reply_signal() -> Option<i32> {
    rt_signal(11)
}

/// Runs the wake-up test of `prim`.
pub fn run(env: &Env, prim: Prim, inter: bool) -> Result<Outcome> {
    match prim {
        Prim::Futex => {
            harness::wake_pair(env, inter, &Futex { ev: Shared::new()?, back: Shared::new()?, shared: inter })
        }
        Prim::Eventfd => {
            let eventfd = || -> Result<(OwnedFd, OwnedFd)> {
                let e = ipc::eventfd()?;
                let tx = e.try_clone()?;
                Ok((e, tx))
            };
            harness::wake_pair(env, inter, &Fds::two(eventfd()?, eventfd()?, 8)?)
        }
        Prim::Condvar => harness::wake_pair(env, inter, &Cond(CondEvent::new(inter)?, CondEvent::new(inter)?)),
        Prim::PosixSem => {
            let sem = || -> Result<Shared<PSem>> {
                let s: Shared<PSem> = Shared::new()?;
                s.init(inter, 0)?;
                Ok(s)
            };
            harness::wake_pair(env, inter, &Sem(sem()?, sem()?))
        }
        Prim::SysvSem => harness::wake_pair(env, inter, &Sysv(SysvSem::new(2, env.janitor)?, Failures::new()?)),
        Prim::Mqueue => {
            let queue = |what: &str| {
                Mq::new(&env.ipc_name(what), 10, 8, false)
                    .map_err(|e| anyhow!("POSIX message queues unavailable ({e}; CONFIG_POSIX_MQUEUE?)"))
            };
            harness::wake_pair(env, inter, &Queue(queue("wake")?, queue("reply")?, Failures::new()?))
        }
        Prim::Pipe => harness::wake_pair(env, inter, &Fds::two(ipc::pipe()?, ipc::pipe()?, 1)?),
        Prim::UnixDgram => {
            // The reply goes back over the same socket pair.
            let (rx, tx) = ipc::socketpair(libc::SOCK_DGRAM)?;
            let back = (tx.try_clone()?, rx.try_clone()?);
            harness::wake_pair(env, inter, &Fds::two((rx, tx), back, 8)?)
        }
        Prim::Signal => {
            let few = || anyhow!("this system has too few real-time signals");
            let sig = test_signal().ok_or_else(few)?;
            let back_sig = reply_signal().ok_or_else(few)?;
            harness::wake_pair(
                env,
                inter,
                &Sig {
                    sig,
                    set: SigSet::of(&[sig]),
                    pid: ipc::getpid(),
                    ctl: Shared::new()?,
                    back: SigSet::of(&[back_sig]),
                    back_sig,
                    peer: Shared::new()?,
                    failed: Failures::new()?,
                },
            )
        }
    }
}
