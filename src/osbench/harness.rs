//! The machinery every `osbench` test shares: the parties (threads of
//! rtscope, or a forked child), their CPUs and priorities, the timing
//! overhead measured first and subtracted, the sample buffer in shared
//! memory, warm-up, cache flush and stopping on a signal.
//!
//! Timestamps are CLOCK_MONOTONIC (`sys::clock::now`, the vDSO). A sample
//! is `t1 - t0` of two such reads; when the parties are two, `t0` crosses
//! from one to the other through a shared-memory page (MAP_SHARED, so that
//! a forked child writes the same page). The base (the cost of the reads
//! and, for IPS loops, of the empty loop) is measured on the measuring
//! thread with the same code shape (for single-party tests interleaved
//! with the samples, for two-party tests before them) and subtracted from
//! every sample before it is divided by the IPS.

use crate::sys::cache::FlushBuffer;
use crate::sys::ipc::{self, Janitor, Shared, Zeroable};
use crate::sys::{clock, cpu, mem, sched, sched::Policy};
use anyhow::{Result, anyhow};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering::*};
use std::thread::ScopedJoinHandle;
use std::time::Duration;

/// Stack prefaulted by every party before it measures.
const PREFAULT: usize = 128 * 1024;
/// In --cross-cpu runs (and without real-time priorities) a signalling
/// party waits until the other announced that it is about to block, then
/// this much longer, so that the other is asleep in the kernel.
pub const SETTLE_NS: u64 = 30_000;
/// A test measures back to back for at most this long, then both parties
/// sleep [`PAUSE_NS`] (outside any sample): a real-time loop that never
/// leaves its CPU is throttled by the kernel once SCHED_OTHER tasks starve
/// there (RT throttling, or since Linux 6.12 the fair server: 50 ms of
/// every second), which under a CPU-hungry load put 50 ms stalls of
/// rtscope's own making into the samples. 10 ms of every 110 give the
/// other tasks more than their 50 ms per second.
pub const ACTIVE_NS: u64 = 100_000_000;
pub const PAUSE_NS: u64 = 10_000_000;
/// A party that has not finished this long after it was asked to stop is
/// given up: rtscope exits (the janitor removes what is left).
const STOP_GRACE: Duration = Duration::from_secs(5);

/// What a test runs with.
pub struct Env<'a> {
    /// The measuring (woken, or only) party's CPU.
    pub cpu: usize,
    /// The other party's CPU: `cpu`, or another one with --cross-cpu.
    pub other: usize,
    pub cross: bool,
    /// Both parties of a wake-up or handoff test at `prio` (`--priorities
    /// equal`): the woken party runs only once the signaller, right after
    /// its signal, blocks waiting for the woken party's reply.
    pub equal: bool,
    pub policy: Policy,
    /// The base priority: "higher" is this, "medium" 5 below, "lower" 10 below.
    pub prio: u8,
    /// Iterations per sample of this test (1: no loop).
    pub ips: u32,
    pub n: usize,
    pub warmup: usize,
    pub flush: Option<&'a FlushBuffer>,
    /// Set by SIGINT/SIGTERM.
    pub stop: &'a AtomicBool,
    pub janitor: &'a Janitor,
    /// A unique number for IPC names.
    pub seq: u32,
}

impl Env<'_> {
    pub fn total(&self) -> usize {
        self.warmup + self.n
    }
    pub fn high(&self) -> u8 {
        self.prio
    }
    pub fn medium(&self) -> u8 {
        self.prio.saturating_sub(5).max(1)
    }
    pub fn low(&self) -> u8 {
        self.prio.saturating_sub(10).max(1)
    }
    /// The higher-priority party of a two-party test, on the measured CPU.
    pub fn upper(&self) -> Party {
        Party { cpu: self.cpu, prio: self.high() }
    }
    /// The lower-priority party, on the other party's CPU.
    pub fn lower(&self) -> Party {
        Party { cpu: self.other, prio: self.low() }
    }
    pub fn rt(&self) -> bool {
        self.policy.is_rt()
    }
    /// Whether a signalling party must make sure the other blocked.
    pub fn settle(&self) -> bool {
        self.cross || !self.rt()
    }
    pub fn stopping(&self) -> bool {
        self.stop.load(Relaxed)
    }
    /// A POSIX IPC name with rtscope's pid.
    pub fn ipc_name(&self, what: &str) -> std::ffi::CString {
        std::ffi::CString::new(format!("/rtscope-{}-{}-{what}", std::process::id(), self.seq))
            .expect("no NUL in the name")
    }
    #[inline]
    pub fn flush(&self) {
        if let Some(f) = self.flush {
            f.flush();
        }
    }
}

/// Pins the calling thread (or child) to `cpu` at `prio` under `policy`
/// and prefaults its stack.
pub fn enter(cpu_: usize, policy: Policy, prio: u8) -> Result<(), String> {
    // The priority first: a thread that moves to a CPU where a real-time
    // party spins must arrive with its own real-time priority.
    let p = if policy.is_rt() { prio } else { 0 };
    sched::set_self(policy, p).map_err(|e| format!("cannot set {} {p}: {e}", policy.kernel_name()))?;
    cpu::pin_self(&[cpu_]).map_err(|e| format!("cannot pin to CPU {cpu_}: {e}"))?;
    mem::prefault_stack(PREFAULT);
    Ok(())
}

/// Where samples go: `(t1, raw ns)` pairs in shared memory, so that a
/// forked party can record too. Index `i` of a test's iterations; the
/// first `warmup` are not kept.
pub struct Samples {
    buf: Shared<AtomicU64>,
    filled: Shared<AtomicU64>,
    warmup: usize,
    n: usize,
}

impl Samples {
    pub fn new(env: &Env) -> Result<Samples> {
        Ok(Samples { buf: Shared::slice(2 * env.n)?, filled: Shared::new()?, warmup: env.warmup, n: env.n })
    }

    /// Records iteration `i`: a sample from `t0` to `t1`.
    #[inline(always)]
    pub fn record(&self, i: usize, t0: u64, t1: u64) {
        if i < self.warmup || i - self.warmup >= self.n {
            return;
        }
        let k = i - self.warmup;
        let b = self.buf.as_slice();
        b[2 * k].store(t1, Relaxed);
        b[2 * k + 1].store(t1.saturating_sub(t0), Relaxed);
        self.filled.fetch_max(k as u64 + 1, Release);
    }

    /// The recorded `(t1, raw)` pairs, in order.
    pub fn take(&self) -> Vec<(u64, u64)> {
        let k = self.filled.load(Acquire) as usize;
        let b = self.buf.as_slice();
        (0..k).map(|i| (b[2 * i].load(Relaxed), b[2 * i + 1].load(Relaxed))).collect()
    }
}

/// What one test measured.
#[derive(Debug, Default)]
pub struct Outcome {
    /// `(t1, raw ns)` per sample; raw = t1 - t0, the base not yet subtracted.
    pub raw: Vec<(u64, u64)>,
    pub base_ns: u64,
    pub ips: u32,
    /// Something else the user should know (a part skipped).
    pub note: Option<String>,
    /// Calls that failed (their time is in the samples): see [`failed_note`].
    pub failed: u64,
    /// Of a wake-up or handoff test: the priorities the waiter and the
    /// signaller read back with sched_getparam(2) before measuring.
    pub priorities: Option<(u8, u8)>,
}

impl Outcome {
    /// Per-operation values: (raw - base) / IPS, rounded, at least 0;
    /// and how many raw samples were below the base.
    pub fn values(&self) -> (Vec<(u64, u64)>, u64) {
        let ips = u64::from(self.ips.max(1));
        let mut below = 0;
        let v = self
            .raw
            .iter()
            .map(|&(t, raw)| {
                if raw < self.base_ns {
                    below += 1;
                }
                (t, (raw.saturating_sub(self.base_ns) + ips / 2) / ips)
            })
            .collect();
        (v, below)
    }
}

/// The note of a test whose calls failed `failed` times (None: none did).
pub fn failed_note(failed: u64) -> Option<String> {
    (failed > 0).then(|| format!("{failed} calls failed (their time is in the samples)"))
}

/// Calls of a two-party test that failed, counted in shared memory so that
/// a forked party's count is seen too: one atomic add on the measuring
/// path, no allocation, no lock.
pub struct Failures(Shared<AtomicU64>);

impl Failures {
    pub fn new() -> Result<Failures> {
        Ok(Failures(Shared::new()?))
    }

    /// Counts a call whose result was `ok == false`.
    #[inline(always)]
    pub fn check(&self, ok: bool) {
        if !ok {
            self.0.fetch_add(1, Relaxed);
        }
    }

    pub fn count(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// The median of `v` (sorted in place); 0 when empty.
fn median(v: &mut [u64]) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

/// The timing base of a sample of `ips` iterations of an empty operation
/// in the loop shape every test uses: the median of 501 tries.
pub fn base(ips: u32) -> u64 {
    let mut empty = Empty;
    let mut v: Vec<u64> = (0..501)
        .map(|_| {
            let t0 = clock::now();
            timed(&mut empty, ips);
            clock::now() - t0
        })
        .collect();
    median(&mut v)
}

/// An operation timed `ips` times in a row per sample by [`single`].
pub trait Single {
    /// Untimed, before each sample (e.g. fill what the timed part empties).
    fn pre(&mut self) {}
    /// One iteration of the timed operation.
    fn op(&mut self);
    /// Untimed, after each sample.
    fn post(&mut self) {}
    /// Calls that failed (counted, never hidden).
    fn failures(&self) -> u64 {
        0
    }
}

/// The empty operation: what the base measures.
pub struct Empty;

impl Single for Empty {
    #[inline(always)]
    fn op(&mut self) {
        std::hint::black_box(());
    }
}

#[inline(always)]
fn timed<S: Single + ?Sized>(s: &mut S, ips: u32) {
    for _ in 0..ips {
        s.op();
    }
}

/// The loop of [`single`] on the calling thread: `warmup + n` samples of
/// `ips` operations, each paired with a timing of `ips` empty iterations
/// (before `pre` and the flush, so neither touches it). The base is the
/// median of those empty timings, so it is measured under the same
/// conditions as the samples: a machine whose speed changes during a test
/// (a frequency step, a VM's neighbour) shifts both alike instead of
/// biasing the subtraction. Returns the outcome.
pub fn single_loop<S: Single>(
    s: &mut S,
    ips: u32,
    warmup: usize,
    n: usize,
    flush: Option<&FlushBuffer>,
    stop: &AtomicBool,
) -> Outcome {
    let (mut raw, mut empties) = (Vec::new(), Vec::new());
    if raw.try_reserve_exact(n).is_err() || empties.try_reserve_exact(warmup + n).is_err() {
        let note = format!("cannot allocate memory for {n} samples (give fewer --samples)");
        return Outcome { raw: Vec::new(), base_ns: 0, ips, note: Some(note), failed: 0, priorities: None };
    }
    let mut empty = Empty;
    let mut duty = Duty::new();
    for i in 0..warmup + n {
        if stop.load(Relaxed) {
            break;
        }
        duty.pace(None);
        let t0 = clock::now();
        timed(&mut empty, ips);
        empties.push(clock::now() - t0);
        s.pre();
        if let Some(f) = flush {
            f.flush();
        }
        let t0 = clock::now();
        timed(s, ips);
        let t1 = clock::now();
        s.post();
        if i >= warmup {
            raw.push((t1, t1 - t0));
        }
    }
    // Stopped before the first sample: the base of a separate measurement.
    let base_ns = if empties.is_empty() { base(ips) } else { median(&mut empties) };
    let failed = s.failures();
    Outcome { raw, base_ns, ips, note: None, failed, priorities: None }
}

/// Runs a single-party test on a thread pinned to `env.cpu` at `prio`:
/// `make` builds the state there, outside the timed part.
pub fn single<S: Single>(env: &Env, prio: u8, make: impl FnOnce() -> Result<S> + Send) -> Result<Outcome> {
    let (ips, warmup, n, flush, stop, policy, c) =
        (env.ips, env.warmup, env.n, env.flush, env.stop, env.policy, env.cpu);
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("rtscope-osbench".into())
            .stack_size(crate::sys::mem::STACK_SIZE)
            .spawn_scoped(scope, move || -> Result<Outcome> {
                crate::sys::signals::block_in_this_thread();
                enter(c, policy, prio).map_err(anyhow::Error::msg)?;
                let mut s = make()?;
                Ok(single_loop(&mut s, ips, warmup, n, flush, stop))
            })?
            .join()
            .map_err(|_| anyhow!("the measuring thread panicked"))?
    })
}

/// The control page two parties share.
#[repr(C)]
#[derive(Default)]
pub struct Ctl {
    /// 1: the leader is done; the follower returns.
    pub stop: AtomicU32,
    /// Iteration + 1 the leader is about to block in.
    pub ready: AtomicU32,
    /// Iteration + 1 the follower has prepared.
    pub armed: AtomicU32,
    /// The start of the sample, from the party that takes it.
    pub t0: AtomicU64,
    /// A thread id one party publishes for the other.
    pub tid: AtomicI32,
    /// A counter both parties advance (yield).
    pub turn: AtomicU64,
    pub who: AtomicU32,
    /// The leader's and the follower's priority as each read it back, + 1
    /// (0: not read).
    pub prio_lead: AtomicU32,
    pub prio_follow: AtomicU32,
    /// CLOCK_MONOTONIC until which the leader pauses ([`Duty`]): a party
    /// waiting for it sleeps too instead of yielding.
    pub pause_until: AtomicU64,
}

unsafe impl Zeroable for Ctl {}

impl Ctl {
    pub fn stopped(&self) -> bool {
        self.stop.load(Acquire) != 0
    }

    /// One turn of a wait for the other party: a yield, or a sleep to the
    /// end of the leader's pause while there is one.
    pub fn idle(&self) {
        let until = self.pause_until.load(Acquire);
        if clock::now() < until {
            clock::sleep_until(until);
        } else {
            ipc::yield_now();
        }
    }

    /// The leader's wait until the follower has prepared iteration `step`
    /// (`armed`), blocked on the word.
    #[inline(always)]
    pub fn wait_armed(&self, step: u32, shared: bool) {
        loop {
            let a = self.armed.load(Acquire);
            if a >= step {
                break;
            }
            ipc::futex_wait(&self.armed, a, shared);
        }
    }

    /// The follower's wait until the leader is about to block in
    /// iteration `step` (`ready`); false when the leader stopped first.
    #[inline(always)]
    pub fn wait_ready(&self, step: u32) -> bool {
        self.wait_for(|c| c.ready.load(Acquire) >= step)
    }

    /// The follower's wait until the leader is done with iteration `turn`
    /// (`turn`); false when the leader stopped first.
    #[inline(always)]
    pub fn wait_turn(&self, turn: u64) -> bool {
        self.wait_for(|c| c.turn.load(Acquire) >= turn)
    }

    /// One [`Ctl::idle`] a turn until `reached`; false when the leader
    /// stopped first.
    #[inline(always)]
    fn wait_for(&self, reached: impl Fn(&Ctl) -> bool) -> bool {
        while !reached(self) {
            if self.stopped() {
                return false;
            }
            self.idle();
        }
        true
    }
}

/// The measuring loop's duty cycle: [`ACTIVE_NS`] back to back, then a
/// pause of [`PAUSE_NS`], announced in the control page so that the other
/// party sleeps as well.
pub struct Duty {
    since: u64,
}

impl Duty {
    pub fn new() -> Duty {
        Duty { since: clock::now() }
    }

    /// Called between samples: pauses when the active part is over.
    #[inline]
    pub fn pace(&mut self, ctl: Option<&Ctl>) {
        let now = clock::now();
        if now - self.since < ACTIVE_NS {
            return;
        }
        let until = now + PAUSE_NS;
        if let Some(c) = ctl {
            c.pause_until.store(until, Release);
        }
        clock::sleep_until(until);
        self.since = clock::now();
    }
}

impl Default for Duty {
    fn default() -> Duty {
        Duty::new()
    }
}

/// The wait of a party that must not start before the measuring one has
/// its CPU and priority and has measured the base: blocked on `go`, never
/// spinning, so that a party at real-time priority does not hold off the
/// threads still being created on its CPU (they start at SCHED_OTHER, and
/// a spinning real-time thread would starve them until RT throttling).
pub fn wait_go(go: &AtomicU32, shared: bool) {
    while go.load(Acquire) == 0 {
        ipc::futex_wait(go, 0, shared);
    }
}

/// How long a leader waits for its follower to take its CPU and priority.
const ARRIVAL: Duration = Duration::from_secs(10);

/// The leader's wait for the follower to arrive (`arrived` set), sleeping
/// so that the follower, still at SCHED_OTHER, can run on the leader's
/// CPU; at most [`ARRIVAL`], after which the leader goes on and the
/// follower's failure (its exit status, its thread's error) is reported.
fn wait_arrived(arrived: &AtomicU32) {
    let since = std::time::Instant::now();
    while arrived.load(Acquire) == 0 && since.elapsed() < ARRIVAL {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Lets every party waiting in [`wait_go`] start.
pub fn open_go(go: &AtomicU32, shared: bool) {
    go.store(1, Release);
    ipc::futex_wake(go, i32::MAX, shared);
}

/// A party: its CPU and priority.
#[derive(Clone, Copy, Debug)]
pub struct Party {
    pub cpu: usize,
    pub prio: u8,
}

/// Runs `leader` on a thread of rtscope and `follower` on another thread
/// (`inter` false) or in a forked child (`inter` true). The leader
/// measures the base, then runs; when it returns, it must have left the
/// follower able to return (its protocol's stop). Returns the base.
pub fn pair(
    env: &Env,
    inter: bool,
    lead: Party,
    follow: Party,
    leader: impl FnOnce() + Send,
    follower: impl FnOnce() + Send,
) -> Result<u64> {
    let policy = env.policy;
    let base_ns = AtomicU64::new(0);
    // The follower starts once the leader has its CPU and priority and
    // has measured the base.
    let go: Shared<AtomicU32> = Shared::new()?;
    let go = &*go;
    // Set by the follower once it has its CPU and priority (or could not
    // take them): the leader starts no sooner, so that a leader at the
    // follower's priority on its CPU (the yield tests) does not hold off a
    // follower still at SCHED_OTHER, locking its memory, until RT
    // throttling lets it in (a short test then ended with no sample).
    let arrived: Shared<AtomicU32> = Shared::new()?;
    let arrived = &*arrived;
    let wait_go = move || {
        arrived.store(1, Release);
        wait_go(go, inter)
    };
    let mut child = None;
    let mut follower = Some(follower);
    if inter {
        let f = follower.take().expect("a follower");
        child = Some(fork_follower(follow, policy, arrived, wait_go, f)?);
    }
    let outcome = std::thread::scope(|scope| -> Result<()> {
        let mut follower_thread = None;
        if let Some(f) = follower.take() {
            follower_thread = Some(
                std::thread::Builder::new()
                    .name("rtscope-osbench-b".into())
                    .stack_size(crate::sys::mem::STACK_SIZE)
                    .spawn_scoped(scope, move || -> Result<(), String> {
                        crate::sys::signals::block_in_this_thread();
                        if let Err(e) = enter(follow.cpu, policy, follow.prio) {
                            arrived.store(1, Release);
                            return Err(e);
                        }
                        wait_go();
                        f();
                        Ok(())
                    })?,
            );
        }
        let base_ns = &base_ns;
        let leader_thread = std::thread::Builder::new()
            .name("rtscope-osbench-a".into())
            .stack_size(crate::sys::mem::STACK_SIZE)
            .spawn_scoped(scope, move || -> Result<(), String> {
                crate::sys::signals::block_in_this_thread();
                let entered = enter(lead.cpu, policy, lead.prio);
                base_ns.store(base(1), Relaxed);
                wait_arrived(arrived);
                open_go(go, inter);
                entered?;
                leader();
                Ok(())
            })?;
        watch(env, &leader_thread, follower_thread.as_ref(), &mut child);
        let led = leader_thread.join().map_err(|_| anyhow!("the measuring thread panicked"))?;
        if let Some(t) = follower_thread {
            join_follower(t)?;
        }
        led.map_err(anyhow::Error::msg)
    });
    if let Some(pid) = child {
        reap(pid)?;
    }
    outcome?;
    Ok(base_ns.load(Relaxed))
}

/// The follower in a forked child: its memory locked, its CPU and
/// priority taken (else it exits with 2), then `wait_go` and `f`.
fn fork_follower(
    follow: Party,
    policy: Policy,
    arrived: &AtomicU32,
    wait_go: impl FnOnce(),
    f: impl FnOnce() + Send,
) -> Result<i32> {
    Ok(ipc::fork_child(move || {
        let _ = mem::lock_all();
        if enter(follow.cpu, policy, follow.prio).is_err() {
            arrived.store(1, Release);
            return 2;
        }
        wait_go();
        f();
        0
    })?)
}

/// Watches the leader until it returns: a signal it does not act on in
/// time, or a follower (child or thread) that ended under it, leave no
/// way to unblock it: then rtscope gives up and exits. A child seen gone
/// is reaped here, and `child` emptied.
fn watch<T>(
    env: &Env,
    leader: &ScopedJoinHandle<'_, T>,
    follower: Option<&ScopedJoinHandle<'_, T>>,
    child: &mut Option<i32>,
) {
    let mut stop_seen: Option<std::time::Instant> = None;
    let mut child_gone: Option<std::time::Instant> = None;
    while !leader.is_finished() {
        std::thread::sleep(Duration::from_millis(5));
        if env.stopping() && stop_seen.is_none() {
            stop_seen = Some(std::time::Instant::now());
        }
        if let Some(pid) = *child
            && child_gone.is_none()
            && !matches!(ipc::try_wait_child(pid), Ok(ipc::ChildState::Running))
        {
            child_gone = Some(std::time::Instant::now());
            *child = None;
        }
        if child_gone.is_none() && follower.is_some_and(|t| t.is_finished()) {
            child_gone = Some(std::time::Instant::now());
        }
        let late = |t: Option<std::time::Instant>| t.is_some_and(|t| t.elapsed() > STOP_GRACE);
        if late(stop_seen) || late(child_gone) {
            eprintln!(
                "rtscope: error: osbench: {} and the measuring thread is stuck; exiting (the tests before this one are stored)",
                if late(child_gone) { "the other party ended early" } else { "a stop was requested" }
            );
            std::process::exit(1);
        }
    }
}

/// Joins the follower thread once the leader has returned: it must
/// return within [`STOP_GRACE`], else rtscope exits.
fn join_follower(t: ScopedJoinHandle<'_, Result<(), String>>) -> Result<()> {
    let deadline = std::time::Instant::now() + STOP_GRACE;
    while !t.is_finished() {
        if std::time::Instant::now() > deadline {
            eprintln!("rtscope: error: osbench: the other thread did not stop; exiting");
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    t.join().map_err(|_| anyhow!("the other thread panicked"))?.map_err(anyhow::Error::msg)
}

/// Waits up to a second for child `pid` to end, then kills it; an exit
/// status other than 0 is an error.
pub fn reap(pid: i32) -> Result<()> {
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    loop {
        match ipc::try_wait_child(pid)? {
            ipc::ChildState::Running | ipc::ChildState::Stopped(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1))
            }
            ipc::ChildState::Running | ipc::ChildState::Stopped(_) => {
                ipc::kill(pid, libc::SIGKILL);
                ipc::wait_child(pid)?;
                return Err(anyhow!("the other process did not stop and was killed"));
            }
            ipc::ChildState::Exited(0) => return Ok(()),
            ipc::ChildState::Exited(2) => {
                return Err(anyhow!("the other process could not take its CPU or priority"));
            }
            other => return Err(anyhow!("the other process ended {other:?}")),
        }
    }
}

/// The protocol of the two-party tests: a message from the follower to
/// the leader (the measuring party, which reads t1 as soon as its wait
/// returns) and one from the leader to the follower. [`wake_pair`] times
/// the follower's message (the signal; the leader's is the reply of
/// `--priorities equal`), [`ping_pair`] the leader's message and the
/// follower's answer (ping and pong). A `Pair` of one-way channels
/// (`channel.rs`) is the protocol of each primitive; the hooks with
/// defaults are the wake-up family's, which calls them where it says.
pub trait Protocol: Sync {
    /// Once, on the leader's thread before its first wait.
    fn leader_start(&self) {}
    /// Once, on the follower's thread before its first message (equal
    /// priorities).
    fn follower_start(&self) {}
    /// Whether the follower must prepare (`arm`) before each of the
    /// leader's waits.
    fn needs_arm(&self) -> bool {
        false
    }
    /// The follower's preparation (e.g. take the mutex).
    fn arm(&self) {}
    /// Untimed, just before the follower's t0 and its message.
    fn prepare_to_leader(&self) {}
    /// The follower's message to the leader.
    fn to_leader(&self);
    /// The leader blocks until the follower's message; returns t1, read
    /// as soon as it returns.
    fn leader_wait(&self) -> u64;
    /// Untimed, after the leader's t1 (e.g. release the mutex).
    fn after(&self) {}
    /// The leader's message to the follower.
    fn to_follower(&self);
    /// The follower blocks until the leader's message. In the wake-up
    /// family with equal priorities it is called right after the signal:
    /// on one CPU the woken leader runs when the follower blocks here, so
    /// the sample includes this call's entry.
    fn follower_wait(&self);
    /// Calls that failed (counted by both parties, never hidden).
    fn failures(&self) -> u64 {
        0
    }
}

/// The calling party's priority as the kernel holds it, + 1 (0: unknown).
fn read_back() -> u32 {
    sched::priority_of_self().map_or(0, |p| u32::from(p) + 1)
}

/// The wake-up family: `w.to_leader()` in the follower (lower priority)
/// to `w.leader_wait()` returning in the leader (higher priority). Both on
/// one CPU by default: the follower only runs once the leader has blocked.
///
/// With `env.equal` both run at the higher priority: the woken leader does
/// not preempt the follower, which after its signal blocks in
/// `w.follower_wait()` until the leader, done with its sample, replies; on
/// one CPU the leader runs when the follower blocks there (rt-tests'
/// pattern).
pub fn wake_pair(env: &Env, inter: bool, w: &dyn Protocol) -> Result<Outcome> {
    let ctl: Shared<Ctl> = Shared::new()?;
    let samples = Samples::new(env)?;
    let total = env.total();
    let settle = env.settle();
    let arm = w.needs_arm();
    let equal = env.equal;
    let (ctl, samples_ref) = (&*ctl, &samples);
    let leader = move || {
        ctl.prio_lead.store(read_back(), Release);
        w.leader_start();
        let mut duty = Duty::new();
        for i in 0..total {
            if env.stopping() {
                break;
            }
            // Before this iteration's handshake: the follower is waiting
            // for `ready` (or `turn`), and sleeps through the pause.
            duty.pace(Some(ctl));
            let step = i as u32 + 1;
            if arm {
                ctl.wait_armed(step, inter);
            }
            env.flush();
            ctl.ready.store(step, Release);
            let t1 = w.leader_wait();
            samples_ref.record(i, ctl.t0.load(Acquire), t1);
            w.after();
            ctl.turn.store(u64::from(step), Release);
            if equal {
                w.to_follower();
            }
        }
        ctl.stop.store(1, Release);
        ctl.ready.store(u32::MAX, Release);
    };
    let follower = move || {
        ctl.prio_follow.store(read_back(), Release);
        if equal {
            w.follower_start();
        }
        for i in 0.. {
            let step = i as u32 + 1;
            if arm {
                // Not before the leader is done with the last iteration: on
                // two CPUs the follower would take the mutex back first.
                if !ctl.wait_turn(u64::from(step - 1)) {
                    return;
                }
                w.arm();
                ctl.armed.store(step, Release);
                ipc::futex_wake(&ctl.armed, 1, inter);
            }
            if !ctl.wait_ready(step) || ctl.stopped() {
                return;
            }
            if settle {
                let until = clock::now() + SETTLE_NS;
                while clock::now() < until {
                    ipc::yield_now();
                }
            }
            env.flush();
            w.prepare_to_leader();
            ctl.t0.store(clock::now(), Release);
            w.to_leader();
            if equal {
                w.follower_wait();
            }
        }
    };
    let follow = if equal { Party { prio: env.high(), ..env.lower() } } else { env.lower() };
    let base_ns = pair(env, inter, env.upper(), follow, leader, follower)?;
    let (l, f) = (ctl.prio_lead.load(Acquire), ctl.prio_follow.load(Acquire));
    let priorities = (l > 0 && f > 0).then(|| ((l - 1) as u8, (f - 1) as u8));
    Ok(Outcome { raw: samples.take(), base_ns, ips: 1, note: None, failed: w.failures(), priorities })
}

/// The ping-pong family: a round trip from the leader's t0, read just
/// before its ping (`p.to_follower()`), to its t1, read as soon as the
/// pong (`p.to_leader()`) arrives; both parties at the same priority.
pub fn ping_pair(env: &Env, inter: bool, p: &dyn Protocol) -> Result<Outcome> {
    ping_pair_at(env, inter, p, env.high(), env.high())
}

/// [`ping_pair`] with the leader at `lp` and the follower at `fp`.
pub fn ping_pair_at(env: &Env, inter: bool, p: &dyn Protocol, lp: u8, fp: u8) -> Result<Outcome> {
    let ctl: Shared<Ctl> = Shared::new()?;
    let samples = Samples::new(env)?;
    let total = env.total();
    let (ctl, samples_ref) = (&*ctl, &samples);
    let leader = move || {
        let mut duty = Duty::new();
        for i in 0..total {
            if env.stopping() {
                break;
            }
            // The follower is blocked waiting for the ping.
            duty.pace(None);
            env.flush();
            let t0 = clock::now();
            p.to_follower();
            let t1 = p.leader_wait();
            samples_ref.record(i, t0, t1);
        }
        ctl.stop.store(1, Release);
        p.to_follower();
    };
    let follower = move || {
        loop {
            p.follower_wait();
            if ctl.stopped() {
                return;
            }
            p.to_leader();
        }
    };
    let base_ns =
        pair(env, inter, Party { cpu: env.cpu, prio: lp }, Party { cpu: env.other, prio: fp }, leader, follower)?;
    Ok(Outcome { raw: samples.take(), base_ns, ips: 1, note: None, failed: p.failures(), priorities: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A busy loop of a fixed number of turns.
    struct Busy(u64);

    impl Single for Busy {
        #[inline(always)]
        fn op(&mut self) {
            let mut x = 0u64;
            for k in 0..self.0 {
                x = std::hint::black_box(x.wrapping_add(k));
            }
            std::hint::black_box(x);
        }
    }

    /// A busy operation of a known length: it spins on CLOCK_MONOTONIC
    /// until `0` ns after its start. Preemption cannot stretch it (the end
    /// is a deadline), so it stays calibrated on a busy machine.
    struct Spin(u64);

    impl Single for Spin {
        #[inline(always)]
        fn op(&mut self) {
            let end = clock::now() + self.0;
            while clock::now() < end {
                std::hint::spin_loop();
            }
        }
    }

    fn median_value(o: &Outcome) -> u64 {
        let (v, _) = o.values();
        let mut v: Vec<u64> = v.into_iter().map(|p| p.1).collect();
        median(&mut v)
    }

    /// The base subtraction: a busy operation of 2 us, measured one per
    /// sample and ten per sample, comes out at its length plus its own
    /// clock reads (the first, and the last one's overshoot past the end),
    /// which the base measures: two reads at most, whatever a read costs
    /// on the machine, and 100 ns for the rest.
    #[test]
    fn a_calibrated_2us_operation_measures_its_length() {
        let _machine = crate::machine_lock();
        let stop = AtomicBool::new(false);
        // One read's cost: the base of one empty operation per sample is
        // the time between the two reads around it.
        let read = base(1);
        for ips in [1, 10] {
            let o = single_loop(&mut Spin(2_000), ips, 50, 2000, None, &stop);
            let m = median_value(&o) as f64;
            eprintln!("ips {ips}: median {m} ns for a 2000 ns operation, base {} ns, a read {read} ns", o.base_ns);
            let most = 2_100.0 + 2.0 * read as f64;
            assert!(
                (1_900.0..=most).contains(&m),
                "ips {ips}: {m} ns for a 2000 ns operation, want 1900..={most}, base {}",
                o.base_ns
            );
            // The base is the reads' own cost (tens of ns), and it is what
            // separates the raw samples from the values: the same sample is
            // the median of both (the subtraction keeps the order), so raw
            // median - IPS x value median is the base, up to the rounding.
            // Below half of the operation: it holds none of it.
            assert!(o.base_ns > 0 && o.base_ns < 1_000, "ips {ips}: base {} ns", o.base_ns);
            let mut raw: Vec<u64> = o.raw.iter().map(|p| p.1).collect();
            let raw_median = median(&mut raw);
            let removed = raw_median as i64 - (median_value(&o) * u64::from(ips)) as i64;
            assert!(
                (removed - o.base_ns as i64).abs() <= i64::from(ips),
                "ips {ips}: raw median {raw_median} ns - {ips} x value median {m} ns = {removed} ns, base {} ns",
                o.base_ns
            );
        }
    }

    /// IPS loops are not optimised away, and an empty operation measures
    /// near 0 per iteration, never below.
    #[test]
    fn an_empty_operation_measures_near_zero() {
        let _machine = crate::machine_lock();
        let stop = AtomicBool::new(false);
        let o = single_loop(&mut Empty, 1000, 50, 3000, None, &stop);
        let (v, below) = o.values();
        let mean = v.iter().map(|p| p.1).sum::<u64>() as f64 / v.len() as f64;
        let mut sorted: Vec<u64> = v.iter().map(|p| p.1).collect();
        sorted.sort_unstable();
        let q25 = sorted[sorted.len() / 4];
        eprintln!("empty op: base {} ns per 1000, mean {mean:.3} ns, q25 {q25}, {below} below the base", o.base_ns);
        assert!(o.base_ns > 0, "the empty loop of 1000 took no time: optimised away?");
        // Other unit tests run on the same two CPUs meanwhile and slow
        // some samples' loops down (a shared core, a preemption): the
        // quietest quarter must measure nothing.
        assert!(q25 <= 1, "lower quartile {q25} ns for an empty operation");
        // A real operation in the same loop is not optimised away either.
        let mut b = Busy(10);
        let o = single_loop(&mut b, 1000, 10, 300, None, &stop);
        assert!(median_value(&o) >= 1, "a 10-turn loop measured 0");
    }

    #[test]
    fn values_subtract_the_base_and_divide_by_ips() {
        let o = Outcome { raw: vec![(1, 1_050), (2, 40), (3, 2_049)], base_ns: 50, ips: 10, ..Default::default() };
        let (v, below) = o.values();
        assert_eq!(v, vec![(1, 100), (2, 0), (3, 200)]);
        assert_eq!(below, 1);
    }
}
