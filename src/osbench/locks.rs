//! Locks: pthread mutex fast paths, the handoff to a blocked waiter, the
//! switch to the owner when a waiter blocks, and priority inversion with
//! and without priority inheritance.

use super::harness::{self, Ctl, Env, Outcome, Protocol, Samples, Single};
use super::{Group, Ips, N, ONE, TestDef};
use crate::sys::clock;
use crate::sys::ipc::{self, FutexEvent, PMutex, Shared};
use anyhow::{Result, anyhow};
use std::sync::atomic::{AtomicU32, Ordering::*};

/// The locks: this family's rows of [`TESTS`](super::TESTS), in order.
pub(super) const TESTS: &[TestDef] = &[
    TestDef {
        id: "mutex.lock",
        name: "mutex lock, uncontended",
        group: Group::Locks,
        def: "from before to after IPS calls of pthread_mutex_lock, each on a different unlocked mutex (the user-space fast path, no system call), divided by IPS",
        inter: false,
        parties: ONE,
        ips: Ips::Loop(1000),
        cross: false,
        equal: None,
        n: N,
        run: lock,
    },
    TestDef {
        id: "mutex.unlock",
        name: "mutex unlock, no waiter",
        group: Group::Locks,
        def: "from before to after IPS calls of pthread_mutex_unlock, each on a different mutex this thread holds and nobody waits for, divided by IPS",
        inter: false,
        parties: ONE,
        ips: Ips::Loop(1000),
        cross: false,
        equal: None,
        n: N,
        run: unlock,
    },
    TestDef {
        id: "mutex.handoff-intra",
        name: "mutex handoff",
        group: Group::Locks,
        def: "from the lower-priority thread's call to pthread_mutex_unlock of the mutex it holds to the return from pthread_mutex_lock in the higher-priority thread blocked on it, same process (CEBench 15, ptsematest)",
        inter: false,
        parties: "waiter higher, owner lower",
        ips: Ips::One,
        cross: true,
        equal: Some(
            "FUTEX_WAIT on a futex word (ptsematest's sender blocks in pthread_mutex_lock of a second, held mutex: a FUTEX_WAIT too)",
        ),
        n: N,
        run: |e| handoff(e, false),
    },
    TestDef {
        id: "mutex.handoff-inter",
        name: "mutex handoff",
        group: Group::Locks,
        def: "the same with a process-shared pthread mutex in shared memory, the owner in another process (CEBench 16)",
        inter: true,
        parties: "waiter higher, owner lower",
        ips: Ips::One,
        cross: true,
        equal: Some(
            "FUTEX_WAIT on a futex word (ptsematest's sender blocks in pthread_mutex_lock of a second, held mutex: a FUTEX_WAIT too)",
        ),
        n: N,
        run: |e| handoff(e, true),
    },
    TestDef {
        id: "mutex.block-intra",
        name: "block on a held mutex",
        group: Group::Locks,
        def: "from the higher-priority thread's call to pthread_mutex_lock of a mutex the lower-priority thread holds (it blocks) to the lower-priority thread, which it had preempted, running again: blocking without inversion (CEBench 2)",
        inter: false,
        parties: "blocker higher, owner lower (one CPU only)",
        ips: Ips::One,
        cross: false,
        equal: None,
        n: N,
        run: |e| block(e, false),
    },
    TestDef {
        id: "mutex.block-inter",
        name: "block on a held mutex",
        group: Group::Locks,
        def: "the same with a process-shared mutex, the owner in another process",
        inter: true,
        parties: "blocker higher, owner lower (one CPU only)",
        ips: Ips::One,
        cross: false,
        equal: None,
        n: N,
        run: |e| block(e, true),
    },
    TestDef {
        id: "pi.unlock-wake",
        name: "PI mutex inversion: unlock to waiter",
        group: Group::Locks,
        def: "priority inversion on a PTHREAD_PRIO_INHERIT mutex: the lower-priority owner holds it, the higher-priority thread makes a medium-priority thread ready (it then runs 50 us) and blocks on the mutex; the owner, boosted, runs first; from its call to pthread_mutex_unlock to the waiter's return from pthread_mutex_lock (CEBench 1)",
        inter: false,
        parties: "waiter higher, medium, owner lower",
        ips: Ips::One,
        cross: true,
        equal: None,
        n: N,
        run: |e| inversion(e, true, Span::UnlockWake, 1),
    },
    TestDef {
        id: "plain.unlock-wake",
        name: "plain mutex inversion: unlock to waiter",
        group: Group::Locks,
        def: "the same scenario on a plain (PTHREAD_PRIO_NONE) mutex: the owner is not boosted, the medium thread's 50 us come first; from the owner's call to pthread_mutex_unlock to the waiter's return",
        inter: false,
        parties: "waiter higher, medium, owner lower",
        ips: Ips::One,
        cross: true,
        equal: None,
        n: N,
        run: |e| inversion(e, false, Span::UnlockWake, 1),
    },
    TestDef {
        id: "pi.blocked",
        name: "PI mutex inversion: time blocked",
        group: Group::Locks,
        def: "the PI scenario; from the higher-priority thread's call to pthread_mutex_lock to its return: switch to the boosted owner, its unlock, switch back; the medium thread waits",
        inter: false,
        parties: "waiter higher, medium, owner lower",
        ips: Ips::One,
        cross: true,
        equal: None,
        n: N,
        run: |e| inversion(e, true, Span::Blocked, 1),
    },
    TestDef {
        id: "plain.blocked",
        name: "plain mutex inversion: time blocked",
        group: Group::Locks,
        def: "the plain-mutex scenario; from the higher-priority thread's call to pthread_mutex_lock to its return: the medium thread's 50 us run first (the inversion, unbounded in general), then the owner's unlock",
        inter: false,
        parties: "waiter higher, medium, owner lower",
        ips: Ips::One,
        cross: true,
        equal: None,
        n: N,
        run: |e| inversion(e, false, Span::Blocked, 1),
    },
    TestDef {
        id: "pi.blocked-chain2",
        name: "PI chain of 2: time blocked",
        group: Group::Locks,
        def: "a priority-inheritance chain of depth 2 on PTHREAD_PRIO_INHERIT mutexes: the higher-priority thread makes the medium-priority thread ready (it then runs 50 us) and blocks on mutex 1, held by a middle thread below the medium one that is blocked on mutex 2, held by the lowest thread; from the higher-priority thread's call to pthread_mutex_lock to its return: both links boosted, the owner's unlock, the middle thread's two unlocks; the medium thread waits",
        inter: false,
        parties: "waiter higher, medium, middle, owner lower (one CPU only)",
        ips: Ips::One,
        cross: false,
        equal: None,
        n: N,
        run: |e| inversion(e, true, Span::Blocked, 2),
    },
    TestDef {
        id: "pi.blocked-chain3",
        name: "PI chain of 3: time blocked",
        group: Group::Locks,
        def: "the same with a chain of depth 3: mutex 1 held by a middle thread blocked on mutex 2, held by a second middle thread blocked on mutex 3, held by the lowest thread; from the higher-priority thread's call to pthread_mutex_lock to its return",
        inter: false,
        parties: "waiter higher, medium, two middle, owner lower (one CPU only)",
        ips: Ips::One,
        cross: false,
        equal: None,
        n: N,
        run: |e| inversion(e, true, Span::Blocked, 3),
    },
];

/// IPS distinct uncontended mutexes: each iteration takes (or releases) the next.
struct Mutexes {
    m: Box<[PMutex]>,
    k: usize,
    lock: bool,
    failed: u64,
}

impl Mutexes {
    fn new(ips: u32, lock: bool) -> Result<Mutexes> {
        let m: Box<[PMutex]> = (0..ips).map(|_| PMutex::zeroed()).collect();
        for x in m.iter() {
            x.init(false, false)?;
        }
        Ok(Mutexes { m, k: 0, lock, failed: 0 })
    }
}

impl Single for Mutexes {
    fn pre(&mut self) {
        self.k = 0;
        if !self.lock {
            for x in self.m.iter() {
                x.lock();
            }
        }
    }

    #[inline(always)]
    fn op(&mut self) {
        let x = &self.m[self.k];
        let ok = if self.lock { x.lock() } else { x.unlock() };
        self.failed += u64::from(!ok);
        self.k += 1;
    }

    fn post(&mut self) {
        if self.lock {
            for x in self.m.iter() {
                x.unlock();
            }
        }
    }

    fn failures(&self) -> u64 {
        self.failed
    }
}

/// `mutex.lock`: pthread_mutex_lock of an uncontended mutex.
pub fn lock(env: &Env) -> Result<Outcome> {
    let ips = env.ips;
    harness::single(env, env.high(), move || Mutexes::new(ips, true))
}

/// `mutex.unlock`: pthread_mutex_unlock of a mutex nobody waits for.
pub fn unlock(env: &Env) -> Result<Outcome> {
    let ips = env.ips;
    harness::single(env, env.high(), move || Mutexes::new(ips, false))
}

/// The lower-priority party holds the mutex; the higher one blocks in
/// pthread_mutex_lock; the sample runs from the holder's unlock to the
/// waiter's return from lock. The reply of `--priorities equal` is a futex
/// event: the holder blocks in FUTEX_WAIT, the system call in which
/// ptsematest's sender blocks (pthread_mutex_lock of a second, held, mutex).
struct Handoff(Shared<PMutex>, Shared<FutexEvent>, bool);

impl Protocol for Handoff {
    fn needs_arm(&self) -> bool {
        true
    }
    fn arm(&self) {
        self.0.lock();
    }
    fn to_leader(&self) {
        self.0.unlock();
    }
    fn leader_wait(&self) -> u64 {
        self.0.lock();
        clock::now()
    }
    fn after(&self) {
        self.0.unlock();
    }
    fn to_follower(&self) {
        self.1.set(self.2);
    }
    fn follower_wait(&self) {
        self.1.wait(self.2);
    }
}

/// `mutex.handoff-*`.
pub fn handoff(env: &Env, inter: bool) -> Result<Outcome> {
    let m: Shared<PMutex> = Shared::new()?;
    m.init(inter, false)?;
    harness::wake_pair(env, inter, &Handoff(m, Shared::new()?, inter))
}

/// `mutex.block-*`: the higher-priority party reads t0 and blocks in
/// pthread_mutex_lock of a mutex the lower one holds; the lower one, which
/// it had preempted, reads t1 when it runs again.
pub fn block(env: &Env, inter: bool) -> Result<Outcome> {
    let ctl: Shared<Ctl> = Shared::new()?;
    let m: Shared<PMutex> = Shared::new()?;
    m.init(inter, false)?;
    let samples = Samples::new(env)?;
    let total = env.total();
    let (ctl, m, s) = (&*ctl, &*m, &samples);
    let leader = move || {
        let mut duty = harness::Duty::new();
        for i in 0..total {
            if env.stopping() {
                break;
            }
            duty.pace(Some(ctl));
            let step = i as u32 + 1;
            ctl.ready.store(step, Release);
            ctl.wait_armed(step, inter);
            env.flush();
            ctl.t0.store(clock::now(), Release);
            m.lock();
            m.unlock();
        }
        ctl.stop.store(1, Release);
        ctl.ready.store(u32::MAX, Release);
    };
    let follower = move || {
        for i in 0.. {
            // The leader waits for this iteration (on one CPU it has
            // blocked by now: the follower runs only then).
            if !ctl.wait_ready(i as u32 + 1) || ctl.stopped() {
                return;
            }
            m.lock();
            ctl.armed.store(i as u32 + 1, Release);
            ipc::futex_wake(&ctl.armed, 1, inter);
            let t1 = clock::now();
            s.record(i, ctl.t0.load(Acquire), t1);
            m.unlock();
        }
    };
    let base_ns = harness::pair(env, inter, env.upper(), env.lower(), leader, follower)?;
    Ok(Outcome { raw: samples.take(), base_ns, ips: 1, note: None, failed: 0, priorities: None })
}

/// How long the medium-priority thread of the inversion tests runs once
/// woken: the inversion a plain mutex lets happen.
pub const INVERSION_NS: u64 = 50_000;

/// Which span of the inversion scenario a test records.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// The owner's unlock to the waiter's return from lock.
    UnlockWake,
    /// The waiter's lock call to its return (the whole time it was blocked).
    Blocked,
}

/// The deepest priority-inheritance chain the tests build.
pub const MAX_DEPTH: usize = 3;

/// The mutexes of an inversion scenario, one per link of the chain, and
/// the steps the middle threads publish to each other.
struct Links {
    /// `m[0]` is the one the higher-priority thread blocks on; the owner at
    /// the chain's end holds `m[depth - 1]`.
    m: [PMutex; MAX_DEPTH],
    /// `taken[k]`: the step for which the holder of `m[k]` (k >= 1) has
    /// taken it (the middle thread above it waits for that).
    taken: [AtomicU32; MAX_DEPTH],
}

// SAFETY: zeroed mutexes (initialised before use) and atomics.
unsafe impl ipc::Zeroable for Links {}

impl Links {
    /// Publishes that the holder of `m[k]` has taken it for `step`: to the
    /// higher-priority thread (`armed`) when k is 0, else to the middle
    /// thread above.
    fn taken(&self, ctl: &Ctl, k: usize, step: u32) {
        let word = if k == 0 { &ctl.armed } else { &self.taken[k] };
        word.store(step, Release);
        ipc::futex_wake(word, 1, false);
    }

    /// Every waiter returns: the scenario is over.
    fn release(&self) {
        for w in &self.taken {
            w.store(u32::MAX, Release);
            ipc::futex_wake(w, 1, false);
        }
    }
}

/// Priority inversion: the lower-priority owner L holds the mutex; the
/// higher-priority H wakes a medium-priority M (runnable, busy for
/// [`INVERSION_NS`] once it runs) and blocks on the mutex. With priority
/// inheritance L is boosted above M and releases at once; without, M runs
/// first. With `depth` above 1 the mutex H blocks on is held by a middle
/// thread below M that is itself blocked on the next mutex of a chain
/// whose last one L holds: priority inheritance must boost every link
/// (one CPU only: [`TESTS`]' chain rows have no cross variant).
pub fn inversion(env: &Env, pi: bool, span: Span, depth: usize) -> Result<Outcome> {
    assert!((1..=MAX_DEPTH).contains(&depth));
    let ctl: Shared<Ctl> = Shared::new()?;
    let links: Shared<Links> = Shared::new()?;
    for m in &links.m[..depth] {
        m.init(false, pi)?;
    }
    let mgo: Shared<AtomicU32> = Shared::new()?;
    let go: Shared<AtomicU32> = Shared::new()?;
    let samples = Samples::new(env)?;
    let inv = Inversion {
        env,
        ctl: &ctl,
        links: &links,
        mgo: &mgo,
        go: &go,
        samples: &samples,
        span,
        depth,
        total: env.total(),
        settle: env.settle(),
    };
    let base_ns = inv.run()?;
    Ok(Outcome { raw: samples.take(), base_ns, ips: 1, note: None, failed: 0, priorities: None })
}

/// An inversion scenario's parties and what they share: each party
/// thread's body is a method.
struct Inversion<'a> {
    env: &'a Env<'a>,
    ctl: &'a Ctl,
    links: &'a Links,
    /// The medium thread's go: bumped once a step (and to stop).
    mgo: &'a AtomicU32,
    /// The owner spins (yields) while it waits for the higher-priority
    /// thread: not before that thread runs, i.e. every party exists.
    go: &'a AtomicU32,
    samples: &'a Samples,
    span: Span,
    depth: usize,
    total: usize,
    settle: bool,
}

impl Inversion<'_> {
    /// Runs the parties, the owner first and the higher-priority thread
    /// last, and joins them; returns the higher-priority thread's clock
    /// base.
    fn run(&self) -> Result<u64> {
        let (env, depth, go) = (self.env, self.depth, self.go);
        let base_ns = std::sync::atomic::AtomicU64::new(0);
        let (cpu, other) = (env.cpu, if depth > 1 { env.cpu } else { env.other });
        let (hp, mp, lp) = (env.high(), env.medium(), env.low());
        let policy = env.policy;
        // A thread that cannot take its CPU or priority lets the others return.
        let abort = || self.abort();
        let base_ref = &base_ns;
        std::thread::scope(|scope| -> Result<()> {
            let mut threads = vec![spawn_in(scope, "l", other, policy, lp, &abort, || self.low())?];
            // Below M, each link above the one below it.
            for k in (1..depth).rev() {
                let prio = lp.saturating_add((depth - k) as u8).min(mp.saturating_sub(1)).max(1);
                threads.push(spawn_in(scope, "c", other, policy, prio, &abort, move || self.middle(k))?);
            }
            threads.push(spawn_in(scope, "m", other, policy, mp, &abort, || self.medium())?);
            threads.push(spawn_in(scope, "h", cpu, policy, hp, &abort, move || {
                base_ref.store(harness::base(1), Relaxed);
                harness::open_go(go, false);
                self.high()
            })?);
            for t in threads.into_iter().rev() {
                t.join().map_err(|_| anyhow!("a measuring thread panicked"))?.map_err(anyhow::Error::msg)?;
            }
            Ok(())
        })?;
        Ok(base_ns.load(Relaxed))
    }

    /// H: each step wakes M, blocks on `m[0]` and records the span.
    fn high(&self) {
        let (env, ctl, mgo, s, span) = (self.env, self.ctl, self.mgo, self.samples, self.span);
        let m = &self.links.m[0];
        let mut duty = harness::Duty::new();
        for i in 0..self.total {
            if env.stopping() || ctl.stopped() {
                break;
            }
            // The owner waits for `turn` or `ready`, the medium thread for
            // its go: both sleep through the pause.
            duty.pace(Some(ctl));
            let step = i as u32 + 1;
            ctl.wait_armed(step, false);
            if ctl.stopped() {
                break;
            }
            env.flush();
            mgo.fetch_add(1, Release);
            ipc::futex_wake(mgo, 1, false);
            ctl.ready.store(step, Release);
            let t_lock = clock::now();
            m.lock();
            let t1 = clock::now();
            s.record(i, if span == Span::Blocked { t_lock } else { ctl.t0.load(Acquire) }, t1);
            m.unlock();
            ctl.turn.store(u64::from(step), Release);
        }
        ctl.stop.store(1, Release);
        ctl.ready.store(u32::MAX, Release);
        mgo.fetch_add(1, Release);
        ipc::futex_wake(mgo, 1, false);
        self.links.release();
    }

    /// M: busy for [`INVERSION_NS`] at each go.
    fn medium(&self) {
        let (ctl, mgo) = (self.ctl, self.mgo);
        let mut seen = 0;
        loop {
            let now = loop {
                let v = mgo.load(Acquire);
                if v != seen {
                    break v;
                }
                ipc::futex_wait(mgo, v, false);
            };
            seen = now;
            if ctl.stopped() {
                return;
            }
            clock::spin_until(clock::now() + INVERSION_NS);
        }
    }

    /// L, the owner: once H runs, each step takes the chain's last mutex,
    /// waits for H to be ready, stamps `t0` and releases it.
    fn low(&self) {
        let (ctl, links, depth) = (self.ctl, self.links, self.depth);
        let last = &links.m[depth - 1];
        harness::wait_go(self.go, false);
        for i in 0.. {
            let step = i as u32 + 1;
            // Not before the waiter has taken and released the mutex of the
            // last iteration (on two CPUs the owner would take it back first).
            if !ctl.wait_turn(u64::from(step - 1)) || ctl.stopped() {
                return;
            }
            last.lock();
            links.taken(ctl, depth - 1, step);
            if !ctl.wait_ready(step) {
                last.unlock();
                return;
            }
            if self.settle {
                let until = clock::now() + harness::SETTLE_NS;
                while clock::now() < until {
                    ipc::yield_now();
                }
            }
            ctl.t0.store(clock::now(), Release);
            last.unlock();
        }
    }

    /// The middle thread of link k (1 <= k < depth): it takes m[k - 1] once
    /// the thread below holds m[k], publishes that, and blocks on m[k].
    fn middle(&self, k: usize) {
        let (ctl, links) = (self.ctl, self.links);
        for step in 1.. {
            loop {
                let v = links.taken[k].load(Acquire);
                if v >= step {
                    break;
                }
                ipc::futex_wait(&links.taken[k], v, false);
            }
            if ctl.stopped() {
                return;
            }
            links.m[k - 1].lock();
            links.taken(ctl, k - 1, step);
            links.m[k].lock();
            links.m[k].unlock();
            links.m[k - 1].unlock();
        }
    }

    /// Lets every party return: a thread could not take its CPU or
    /// priority.
    fn abort(&self) {
        let (ctl, mgo) = (self.ctl, self.mgo);
        ctl.stop.store(1, Release);
        harness::open_go(self.go, false);
        ctl.ready.store(u32::MAX, Release);
        ctl.armed.store(u32::MAX, Release);
        ipc::futex_wake(&ctl.armed, 1, false);
        mgo.fetch_add(1, Release);
        ipc::futex_wake(mgo, 1, false);
        self.links.release();
    }
}

/// A party thread of the inversion tests.
fn spawn_in<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    name: &str,
    cpu: usize,
    policy: crate::sys::sched::Policy,
    prio: u8,
    abort: &'scope (dyn Fn() + Sync),
    f: impl FnOnce() + Send + 'scope,
) -> std::io::Result<std::thread::ScopedJoinHandle<'scope, Result<(), String>>> {
    std::thread::Builder::new()
        .name(format!("rtscope-osbench-{name}"))
        .stack_size(crate::sys::mem::STACK_SIZE)
        .spawn_scoped(scope, move || {
            crate::sys::signals::block_in_this_thread();
            if let Err(e) = harness::enter(cpu, policy, prio) {
                abort();
                return Err(e);
            }
            f();
            Ok(())
        })
}
