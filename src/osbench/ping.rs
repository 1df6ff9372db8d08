//! Ping-pong round trips between two parties of equal priority, and the
//! yield to a same-priority party.

use super::harness::{self, Ctl, Env, Failures, Outcome, PingPong, Samples};
use super::wakeup::CondEvent;
use super::{Group, Ips, N, TestDef};
use crate::sys::clock;
use crate::sys::ipc::{self, FutexEvent, Mq, PSem, Shared};
use anyhow::{Result, anyhow};
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering::*;

/// The parties of a ping-pong.
const EQ: &str = "two parties, equal priority";

/// The row of a ping-pong: `$mech` intra- or inter-process (`$inter`).
macro_rules! ping {
    ($id:literal, $name:literal, $def:literal, $mech:expr, $inter:literal) => {
        TestDef {
            id: $id,
            name: $name,
            group: Group::Ping,
            def: $def,
            inter: $inter,
            parties: EQ,
            ips: Ips::One,
            cross: true,
            equal: None,
            n: N,
            run: |e| run(e, $mech, $inter),
        }
    };
}

/// The ping-pongs and the yield: this family's rows of [`TESTS`](super::TESTS), in order.
pub(super) const TESTS: &[TestDef] = &[
    ping!(
        "ping.event-intra",
        "ping event (futex)",
        "round trip: from party A's read of the clock before setting event 1 (a futex word and FUTEX_WAKE) to A's return from waiting on event 2, which party B sets as soon as its wait on event 1 returns; same process (SSC Ping Event)",
        Mech::Event,
        false
    ),
    ping!(
        "ping.event-inter",
        "ping event (futex)",
        "the same on shared futex words, B in another process",
        Mech::Event,
        true
    ),
    ping!(
        "ping.sem-intra",
        "ping semaphores",
        "the same round trip through two POSIX semaphores (sem_post / sem_wait), same process (SSC Sema/Mutex Ping)",
        Mech::Sem,
        false
    ),
    ping!(
        "ping.sem-inter",
        "ping semaphores",
        "the same with process-shared semaphores, B in another process",
        Mech::Sem,
        true
    ),
    ping!(
        "ping.mutex-intra",
        "ping mutex+condvar",
        "the same round trip through two events built from a pthread mutex, a condition variable and a flag each (the pthread way), same process",
        Mech::Mutex,
        false
    ),
    ping!(
        "ping.mutex-inter",
        "ping mutex+condvar",
        "the same with process-shared mutexes and condition variables, B in another process",
        Mech::Mutex,
        true
    ),
    ping!(
        "ping.mq-intra",
        "ping message queues",
        "the same round trip through two POSIX message queues (mq_send / mq_receive of 8 bytes), same process (SSC Ping Queue)",
        Mech::Mqueue,
        false
    ),
    ping!("ping.mq-inter", "ping message queues", "the same, B in another process", Mech::Mqueue, true),
    ping!(
        "ping.pipe-intra",
        "ping pipes",
        "the same round trip through two pipes (write / read of 1 byte), B a thread (perf bench sched pipe -T)",
        Mech::Pipe,
        false
    ),
    ping!("ping.pipe-inter", "ping pipes", "the same, B in another process (perf bench sched pipe)", Mech::Pipe, true),
    ping!(
        "ping.socket-intra",
        "ping unix socket",
        "the same round trip over a SOCK_STREAM socketpair (write / read of 8 bytes each way), same process",
        Mech::Socket,
        false
    ),
    ping!("ping.socket-inter", "ping unix socket", "the same, B in another process", Mech::Socket, true),
    TestDef {
        id: "ping.yield-intra",
        name: "yield to a thread",
        group: Group::Ping,
        def: "from a thread's call to sched_yield to the return from sched_yield in the other thread of the same priority on the CPU, same process (CEBench 19)",
        inter: false,
        parties: "two parties, equal priority (one CPU only)",
        ips: Ips::One,
        cross: false,
        equal: None,
        n: N,
        run: |e| yield_test(e, false),
    },
    TestDef {
        id: "ping.yield-inter",
        name: "yield to a process",
        group: Group::Ping,
        def: "the same, the other party in another process (CEBench 20)",
        inter: true,
        parties: "two parties, equal priority (one CPU only)",
        ips: Ips::One,
        cross: false,
        equal: None,
        n: N,
        run: |e| yield_test(e, true),
    },
];

/// Which mechanism a ping-pong uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mech {
    Event,
    Sem,
    Mutex,
    Mqueue,
    Pipe,
    Socket,
}

struct Futexes {
    ab: Shared<FutexEvent>,
    ba: Shared<FutexEvent>,
    shared: bool,
}

impl PingPong for Futexes {
    fn ping(&self) {
        self.ab.set(self.shared);
    }
    fn wait_pong(&self) -> u64 {
        self.ba.wait(self.shared);
        clock::now()
    }
    fn wait_ping(&self) {
        self.ab.wait(self.shared);
    }
    fn pong(&self) {
        self.ba.set(self.shared);
    }
}

struct Sems(Shared<PSem>, Shared<PSem>);

impl PingPong for Sems {
    fn ping(&self) {
        self.0.post();
    }
    fn wait_pong(&self) -> u64 {
        self.1.wait();
        clock::now()
    }
    fn wait_ping(&self) {
        self.0.wait();
    }
    fn pong(&self) {
        self.1.post();
    }
}

struct Conds(Shared<CondEvent>, Shared<CondEvent>);

impl PingPong for Conds {
    fn ping(&self) {
        self.0.set();
    }
    fn wait_pong(&self) -> u64 {
        self.1.wait()
    }
    fn wait_ping(&self) {
        self.0.wait();
    }
    fn pong(&self) {
        self.1.set();
    }
}

struct Queues(Mq, Mq, Failures);

impl PingPong for Queues {
    fn ping(&self) {
        self.2.check(self.0.send(&[1u8; 8]));
    }
    fn wait_pong(&self) -> u64 {
        let mut b = [0u8; 8];
        self.2.check(self.1.receive(&mut b));
        clock::now()
    }
    fn wait_ping(&self) {
        let mut b = [0u8; 8];
        self.2.check(self.0.receive(&mut b));
    }
    fn pong(&self) {
        self.2.check(self.1.send(&[2u8; 8]));
    }
    fn failures(&self) -> u64 {
        self.2.count()
    }
}

/// Two byte streams: the leader writes `a_tx` and reads `a_rx`; the
/// follower reads `b_rx` and writes `b_tx`.
struct Streams {
    a_tx: OwnedFd,
    a_rx: OwnedFd,
    b_rx: OwnedFd,
    b_tx: OwnedFd,
    len: usize,
    failed: Failures,
}

impl Streams {
    #[inline(always)]
    fn write(&self, fd: &OwnedFd, byte: u8) {
        self.failed.check(ipc::write_fd(fd, &[byte; 8][..self.len]).is_ok());
    }

    /// Reads one message; a short read or the end of the stream fails.
    #[inline(always)]
    fn read(&self, fd: &OwnedFd) {
        let mut b = [0u8; 8];
        self.failed.check(ipc::read_fd(fd, &mut b[..self.len]).is_ok_and(|n| n == self.len));
    }
}

impl PingPong for Streams {
    fn ping(&self) {
        self.write(&self.a_tx, 1);
    }
    fn wait_pong(&self) -> u64 {
        self.read(&self.a_rx);
        clock::now()
    }
    fn wait_ping(&self) {
        self.read(&self.b_rx);
    }
    fn pong(&self) {
        self.write(&self.b_tx, 2);
    }
    fn failures(&self) -> u64 {
        self.failed.count()
    }
}

/// Runs the ping-pong of `mech`.
pub fn run(env: &Env, mech: Mech, inter: bool) -> Result<Outcome> {
    match mech {
        Mech::Event => {
            harness::ping_pair(env, inter, &Futexes { ab: Shared::new()?, ba: Shared::new()?, shared: inter })
        }
        Mech::Sem => {
            let (a, b): (Shared<PSem>, Shared<PSem>) = (Shared::new()?, Shared::new()?);
            a.init(inter, 0)?;
            b.init(inter, 0)?;
            harness::ping_pair(env, inter, &Sems(a, b))
        }
        Mech::Mutex => harness::ping_pair(env, inter, &Conds(CondEvent::new(inter)?, CondEvent::new(inter)?)),
        Mech::Mqueue => {
            let q = |w: &str| {
                Mq::new(&env.ipc_name(w), 10, 8, false)
                    .map_err(|e| anyhow!("POSIX message queues unavailable ({e}; CONFIG_POSIX_MQUEUE?)"))
            };
            harness::ping_pair(env, inter, &Queues(q("ping")?, q("pong")?, Failures::new()?))
        }
        Mech::Pipe => {
            let (b_rx, a_tx) = ipc::pipe()?;
            let (a_rx, b_tx) = ipc::pipe()?;
            harness::ping_pair(env, inter, &Streams { a_tx, a_rx, b_rx, b_tx, len: 1, failed: Failures::new()? })
        }
        Mech::Socket => {
            let (a, b) = ipc::socketpair(libc::SOCK_STREAM)?;
            let (a2, b2) = (a.try_clone()?, b.try_clone()?);
            harness::ping_pair(
                env,
                inter,
                &Streams { a_tx: a, a_rx: a2, b_rx: b, b_tx: b2, len: 8, failed: Failures::new()? },
            )
        }
    }
}

/// `yield-*`: two parties of equal priority on one CPU take turns through
/// sched_yield. Each reads t0 and calls sched_yield; the other, returning
/// from its own sched_yield, reads t1 (only when the first one's mark
/// shows that it ran in between).
pub fn yield_test(env: &Env, inter: bool) -> Result<Outcome> {
    let ctl: Shared<Ctl> = Shared::new()?;
    let samples = Samples::new(env)?;
    let total = env.total() as u64;
    let (ctl, s) = (&*ctl, &samples);
    let party = move |me: u32, watch: bool| {
        let mut turns = 0u64;
        loop {
            if ctl.stopped() || (watch && env.stopping()) {
                ctl.stop.store(1, Release);
                return;
            }
            ctl.t0.store(clock::now(), Release);
            ctl.who.store(me, Release);
            ipc::yield_now();
            let t1 = clock::now();
            if ctl.who.load(Acquire) != me {
                let k = ctl.turn.fetch_add(1, AcqRel);
                if k >= total {
                    ctl.stop.store(1, Release);
                    return;
                }
                s.record(k as usize, ctl.t0.load(Acquire), t1);
            }
            turns += 1;
            // Alone on the CPU (the other party gone or elsewhere), a yield
            // returns at once: give up after many turns without a switch.
            if turns > 100 * total + 100_000 {
                ctl.stop.store(1, Release);
                return;
            }
        }
    };
    let p = env.upper();
    let base_ns = harness::pair(env, inter, p, p, move || party(1, true), move || party(2, false))?;
    Ok(Outcome { raw: samples.take(), base_ns, ips: 1, note: None, priorities: None })
}
