//! The primitives of the two-party tests as one-way channels: one party
//! posts, the other, blocked in its wait, returns. Two of them, one each
//! way, are a [`Pair`]: the [`Protocol`] that the wake-up family (the
//! follower's post is the signal, the leader's the reply of `--priorities
//! equal`) and the ping-pong family (the leader's post is the ping, the
//! follower's the pong) both run.
//!
//! A pair's protocol methods are what the harness calls through `dyn`, one
//! call per message as before; the channels' own calls are inlined into
//! them. No allocation; a failed call costs one atomic add.

use super::harness::{Env, Failures, Protocol};
use crate::sys::clock;
use crate::sys::ipc::{self, FutexEvent, Mq, PCond, PMutex, PSem, Shared, Zeroable};
use anyhow::{Result, anyhow};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering::*};

/// One direction between the two parties. Failed calls are counted in
/// the pair's [`Failures`].
pub trait Channel: Sync {
    /// Untimed, right before a post whose instant starts a sample (the
    /// wake-up family's signal). Nothing, but for [`CondSignal`], whose
    /// post relies on it and so serves only that family.
    #[inline(always)]
    fn prepare(&self) {}
    /// Wakes the other party.
    fn post(&self, failed: &Failures);
    /// Blocks until the other party posts.
    fn wait(&self, failed: &Failures);
    /// [`Channel::wait`], then the instant it returned (t1).
    #[inline(always)]
    fn wait_timed(&self, failed: &Failures) -> u64 {
        self.wait(failed);
        clock::now()
    }
}

/// A channel each way, and the count of the calls that failed on either.
pub struct Pair<L: Channel, F: Channel> {
    /// The follower posts, the leader (the measuring party) waits.
    to_leader: L,
    /// The leader posts, the follower waits.
    to_follower: F,
    failed: Failures,
}

impl<L: Channel, F: Channel> Pair<L, F> {
    pub fn new(to_leader: L, to_follower: F) -> Result<Pair<L, F>> {
        Ok(Pair { to_leader, to_follower, failed: Failures::new()? })
    }
}

impl<L: Channel, F: Channel> Protocol for Pair<L, F> {
    fn prepare_to_leader(&self) {
        self.to_leader.prepare();
    }
    fn to_leader(&self) {
        self.to_leader.post(&self.failed);
    }
    fn leader_wait(&self) -> u64 {
        self.to_leader.wait_timed(&self.failed)
    }
    fn to_follower(&self) {
        self.to_follower.post(&self.failed);
    }
    fn follower_wait(&self) {
        self.to_follower.wait(&self.failed);
    }
    fn failures(&self) -> u64 {
        self.failed.count()
    }
}

/// A futex word (FUTEX_WAKE / FUTEX_WAIT), process-shared or private.
pub struct Futex {
    ev: Shared<FutexEvent>,
    shared: bool,
}

impl Futex {
    pub fn new(shared: bool) -> Result<Futex> {
        Ok(Futex { ev: Shared::new()?, shared })
    }
}

impl Channel for Futex {
    #[inline(always)]
    fn post(&self, _: &Failures) {
        self.ev.set(self.shared);
    }
    #[inline(always)]
    fn wait(&self, _: &Failures) {
        self.ev.wait(self.shared);
    }
}

/// An unnamed POSIX semaphore (sem_post / sem_wait), process-shared or not.
pub struct Sem(Shared<PSem>);

impl Sem {
    pub fn new(shared: bool) -> Result<Sem> {
        let s: Shared<PSem> = Shared::new()?;
        s.init(shared, 0)?;
        Ok(Sem(s))
    }
}

impl Channel for Sem {
    #[inline(always)]
    fn post(&self, _: &Failures) {
        self.0.post();
    }
    #[inline(always)]
    fn wait(&self, _: &Failures) {
        self.0.wait();
    }
}

/// An event made of a pthread mutex, a condition variable and a flag.
#[repr(C)]
struct CondEvent {
    m: PMutex,
    c: PCond,
    flag: AtomicU32,
}

unsafe impl Zeroable for CondEvent {}

impl CondEvent {
    fn new(shared: bool) -> Result<Shared<CondEvent>> {
        let e: Shared<CondEvent> = Shared::new()?;
        e.m.init(shared, false)?;
        e.c.init(shared)?;
        Ok(e)
    }

    /// Sets the flag and signals, under the mutex.
    fn set(&self) {
        self.m.lock();
        self.flag.store(1, Relaxed);
        self.c.signal();
        self.m.unlock();
    }

    /// Waits for the flag and clears it; the instant pthread_cond_wait
    /// returned with the flag set (0 when it was set before the wait).
    fn wait(&self) -> u64 {
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

/// A [`CondEvent`] posted the pthread way: the flag set and the condition
/// signalled under the mutex.
pub struct Cond(Shared<CondEvent>);

impl Cond {
    pub fn new(shared: bool) -> Result<Cond> {
        Ok(Cond(CondEvent::new(shared)?))
    }
}

impl Channel for Cond {
    #[inline(always)]
    fn post(&self, _: &Failures) {
        self.0.set();
    }
    #[inline(always)]
    fn wait(&self, _: &Failures) {
        self.0.wait();
    }
    #[inline(always)]
    fn wait_timed(&self, _: &Failures) -> u64 {
        self.0.wait()
    }
}

/// A [`CondEvent`] posted in two parts, for the wake-up test that times
/// pthread_cond_signal alone: `prepare` sets the flag under the mutex and
/// releases it, `post` signals.
pub struct CondSignal(Shared<CondEvent>);

impl CondSignal {
    pub fn new(shared: bool) -> Result<CondSignal> {
        Ok(CondSignal(CondEvent::new(shared)?))
    }
}

impl Channel for CondSignal {
    #[inline(always)]
    fn prepare(&self) {
        self.0.m.lock();
        self.0.flag.store(1, Relaxed);
        self.0.m.unlock();
    }
    #[inline(always)]
    fn post(&self, _: &Failures) {
        self.0.c.signal();
    }
    #[inline(always)]
    fn wait(&self, _: &Failures) {
        self.0.wait();
    }
    #[inline(always)]
    fn wait_timed(&self, _: &Failures) -> u64 {
        self.0.wait()
    }
}

/// A POSIX message queue of 10 messages of 8 bytes (mq_send /
/// mq_receive).
pub struct Queue(Mq);

impl Queue {
    /// A new queue, its name made of `what`.
    pub fn open(env: &Env, what: &str) -> Result<Queue> {
        Mq::new(&env.ipc_name(what), 10, 8, false)
            .map(Queue)
            .map_err(|e| anyhow!("POSIX message queues unavailable ({e}; CONFIG_POSIX_MQUEUE?)"))
    }
}

impl Channel for Queue {
    #[inline(always)]
    fn post(&self, failed: &Failures) {
        failed.check(self.0.send(&[1u8; 8]));
    }
    #[inline(always)]
    fn wait(&self, failed: &Failures) {
        let mut b = [0u8; 8];
        failed.check(self.0.receive(&mut b));
    }
}

/// File descriptors: a message of `len` bytes (the u64 1, or its first
/// byte) written on `tx` and read on `rx`.
pub struct Fd {
    rx: OwnedFd,
    tx: OwnedFd,
    len: usize,
}

impl Fd {
    /// `(rx, tx)`: a pipe's ends, or a socket's on each side.
    pub fn new((rx, tx): (OwnedFd, OwnedFd), len: usize) -> Fd {
        Fd { rx, tx, len }
    }

    /// An eventfd, written and read through two descriptors of it.
    pub fn eventfd() -> Result<Fd> {
        let e = ipc::eventfd()?;
        let tx = e.try_clone()?;
        Ok(Fd::new((e, tx), 8))
    }
}

impl Channel for Fd {
    #[inline(always)]
    fn post(&self, failed: &Failures) {
        failed.check(ipc::write_fd(&self.tx, &1u64.to_ne_bytes()[..self.len]).is_ok());
    }
    /// Reads one message; a short read or the end of the stream fails.
    #[inline(always)]
    fn wait(&self, failed: &Failures) {
        let mut b = [0u8; 8];
        failed.check(ipc::read_fd(&self.rx, &mut b[..self.len]).is_ok_and(|n| n == self.len));
    }
}
