//! Wake-up primitives: from the signal in the lower-priority party to the
//! blocked higher-priority party running, intra- and inter-process. Each
//! has a second object of its kind for the reply of `--priorities equal`
//! (the waiter answers, the signaller blocks for the answer right after
//! its signal), as rt-tests' ptsematest, pmqtest, svsematest and
//! sigwaittest do.

use super::channel::{Cond, CondSignal, Fd, Futex, Pair, Queue, Sem};
use super::harness::{self, Ctl, Env, Failures, Outcome, Protocol};
use super::{Group, Ips, N, TestDef};
use crate::sys::clock;
use crate::sys::ipc::{self, Shared, SysvSem, Zeroable};
use crate::sys::timers::{SigSet, rt_signal};
use anyhow::{Result, anyhow};
use std::sync::atomic::{AtomicI32, Ordering::*};

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

/// A set of two: semaphore 0 for the signal, 1 for the reply.
struct Sysv(SysvSem, Failures);

impl Protocol for Sysv {
    fn to_leader(&self) {
        self.1.check(self.0.op(0, 1));
    }
    fn leader_wait(&self) -> u64 {
        self.1.check(self.0.op(0, -1));
        clock::now()
    }
    fn to_follower(&self) {
        self.1.check(self.0.op(1, 1));
    }
    fn follower_wait(&self) {
        self.1.check(self.0.op(1, -1));
    }
    fn failures(&self) -> u64 {
        self.1.count()
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

impl Protocol for Sig {
    fn leader_start(&self) {
        self.set.block();
        self.ctl.tid.store(crate::sys::sched::thread_id(), Release);
    }
    fn follower_start(&self) {
        self.back.block();
        self.peer.pid.store(ipc::getpid(), Relaxed);
        self.peer.tid.store(crate::sys::sched::thread_id(), Release);
    }
    fn to_leader(&self) {
        self.failed.check(ipc::tgkill(self.pid, self.ctl.tid.load(Acquire), self.sig));
    }
    fn leader_wait(&self) -> u64 {
        self.failed.check(self.set.wait().is_ok_and(|s| s == self.sig));
        clock::now()
    }
    fn to_follower(&self) {
        let tid = self.peer.tid.load(Acquire);
        self.failed.check(ipc::tgkill(self.peer.pid.load(Relaxed), tid, self.back_sig));
    }
    fn follower_wait(&self) {
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
        Prim::Futex => harness::wake_pair(env, inter, &Pair::new(Futex::new(inter)?, Futex::new(inter)?)?),
        Prim::Eventfd => harness::wake_pair(env, inter, &Pair::new(Fd::eventfd()?, Fd::eventfd()?)?),
        Prim::Condvar => harness::wake_pair(env, inter, &Pair::new(CondSignal::new(inter)?, Cond::new(inter)?)?),
        Prim::PosixSem => harness::wake_pair(env, inter, &Pair::new(Sem::new(inter)?, Sem::new(inter)?)?),
        Prim::SysvSem => harness::wake_pair(env, inter, &Sysv(SysvSem::new(2, env.janitor)?, Failures::new()?)),
        Prim::Mqueue => {
            harness::wake_pair(env, inter, &Pair::new(Queue::open(env, "wake")?, Queue::open(env, "reply")?)?)
        }
        Prim::Pipe => harness::wake_pair(env, inter, &Pair::new(Fd::new(ipc::pipe()?, 1), Fd::new(ipc::pipe()?, 1))?),
        Prim::UnixDgram => {
            // The reply goes back over the same socket pair.
            let (rx, tx) = ipc::socketpair(libc::SOCK_DGRAM)?;
            let back = (tx.try_clone()?, rx.try_clone()?);
            harness::wake_pair(env, inter, &Pair::new(Fd::new((rx, tx), 8), Fd::new(back, 8))?)
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
