//! Ping-pong round trips between two parties of equal priority, and the
//! yield to a same-priority party.

use super::channel::{Cond, Fd, Futex, Pair, Queue, Sem};
use super::harness::{self, Ctl, Env, Outcome, Samples};
use super::{Group, Ips, N, TestDef};
use crate::sys::clock;
use crate::sys::ipc::{self, Shared};
use anyhow::Result;
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

/// Runs the ping-pong of `mech`.
pub fn run(env: &Env, mech: Mech, inter: bool) -> Result<Outcome> {
    // Each pair: (the pong, the ping), in the order made: the ping's first.
    match mech {
        Mech::Event => {
            let ping = Futex::new(inter)?;
            harness::ping_pair(env, inter, &Pair::new(Futex::new(inter)?, ping)?)
        }
        Mech::Sem => {
            let ping = Sem::new(inter)?;
            harness::ping_pair(env, inter, &Pair::new(Sem::new(inter)?, ping)?)
        }
        Mech::Mutex => {
            let ping = Cond::new(inter)?;
            harness::ping_pair(env, inter, &Pair::new(Cond::new(inter)?, ping)?)
        }
        Mech::Mqueue => {
            let ping = Queue::open(env, "ping")?;
            harness::ping_pair(env, inter, &Pair::new(Queue::open(env, "pong")?, ping)?)
        }
        Mech::Pipe => {
            let ping = ipc::pipe()?;
            let pong = ipc::pipe()?;
            harness::ping_pair(env, inter, &Pair::new(Fd::new(pong, 1), Fd::new(ping, 1))?)
        }
        Mech::Socket => {
            // The leader writes and reads its end `a`, the follower `b`.
            let (a, b) = ipc::socketpair(libc::SOCK_STREAM)?;
            let (a2, b2) = (a.try_clone()?, b.try_clone()?);
            harness::ping_pair(env, inter, &Pair::new(Fd::new((a2, b2), 8), Fd::new((b, a), 8))?)
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
            // `+flush`: the caches evicted before t0, so that the other
            // party resumes cold (as the wake-up tests' follower flushes
            // before its signal).
            env.flush();
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
    Ok(Outcome { raw: samples.take(), base_ns, ips: 1, note: None, failed: 0, priorities: None })
}
