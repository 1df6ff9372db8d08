//! Known disturbances: SCHED_FIFO spinners of known period and length on
//! known CPUs. They make the IntrTime-style background threads of
//! `wakeup --spinners` and the ground truth of `rtscope disturb`.

use crate::sys::ipc;
use crate::sys::{clock, cpu, sched, sched::Policy, signals};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{
    AtomicBool, AtomicU32, Ordering::AcqRel, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::thread::JoinHandle;

/// One spinner: every `period_ns`, busy-spin `spin_ns` on `cpu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SpinSpec {
    pub cpu: usize,
    pub policy: Policy,
    pub priority: u8,
    pub period_ns: u64,
    pub spin_ns: u64,
    /// Each spin starts at a random offset in [0, phase_ns) of its period,
    /// so that it does not stay in phase with a periodic probe.
    pub phase_ns: u64,
    /// What the burst does with the CPU.
    pub kind: SpinKind,
}

/// What a spinner's burst does with the CPU: IntrTime's idle threads
/// (`-i1` .. `-i4`, and ILTiming's `-i5`), so that the measuring thread
/// meets the kernel in the state each leaves it in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpinKind {
    /// Busy in user space, never entering the kernel (`-i1`).
    #[default]
    User,
    /// A cheap system call (getppid) every turn: the burst in and out of
    /// the kernel.
    Sys,
    /// Setting its own scheduling policy and priority every turn
    /// (`-i2`'s SetThreadPriority): the run queue's lock, taken and left.
    Prio,
    /// Two threads on the CPU handing a futex back and forth, each waiting
    /// with no timeout (`-i4`'s SetEvent / WaitForSingleObject): a
    /// context switch every turn.
    Event,
    /// The same, each wait bounded by 10 s (`-i3`): a timer armed and
    /// cancelled on every wait.
    EventTimeout,
    /// Mapping 64 KiB, touching each page and unmapping it every turn
    /// (ILTiming's `-i5` VirtualAlloc / VirtualFree): page faults, TLB
    /// shootdowns, cold caches.
    Mmap,
}

impl SpinKind {
    pub const ALL: [SpinKind; 6] =
        [SpinKind::User, SpinKind::Sys, SpinKind::Prio, SpinKind::Event, SpinKind::EventTimeout, SpinKind::Mmap];

    /// Its name in `--spinners N@PRIO:KIND`.
    pub fn name(self) -> &'static str {
        match self {
            SpinKind::User => "user",
            SpinKind::Sys => "sys",
            SpinKind::Prio => "prio",
            SpinKind::Event => "event",
            SpinKind::EventTimeout => "event-timeout",
            SpinKind::Mmap => "mmap",
        }
    }

    /// What a burst of it does, for a run's description.
    pub fn describe(self) -> &'static str {
        match self {
            SpinKind::User => "in user space",
            SpinKind::Sys => "in system calls",
            SpinKind::Prio => "setting their priority",
            SpinKind::Event => "in pairs waking each other",
            SpinKind::EventTimeout => "in pairs waking each other, 10 s timeouts",
            SpinKind::Mmap => "mapping and unmapping 64 KiB",
        }
    }

    pub fn parse(name: &str) -> Option<SpinKind> {
        SpinKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Running spinner threads; stopped and joined on drop.
pub struct Spinners {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Spinners {
    pub fn start(specs: &[SpinSpec]) -> std::io::Result<Spinners> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for &spec in specs {
            let stop = Arc::clone(&stop);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("rtscope-spin{}", spec.cpu))
                    .stack_size(crate::sys::mem::STACK_SIZE)
                    .spawn(move || {
                        signals::block_in_this_thread();
                        let _ = cpu::pin_self(&[spec.cpu]);
                        let _ = sched::set_self(spec.policy, spec.priority);
                        spin_loop(&spec, &stop, u64::MAX, |_| {});
                    })?,
            );
        }
        Ok(Spinners { stop, threads })
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// xorshift64*: enough randomness for phases, no allocation.
pub struct Rng(u64);

impl Rng {
    pub fn seeded() -> Rng {
        Rng(clock::now() | 1)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// One burst as it ran: from the instant the spinner had the CPU (its
/// first clock read after its sleep) to its last clock read of the spin,
/// CLOCK_MONOTONIC ns. A host stall inside the burst is inside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Burst {
    pub start_ns: u64,
    pub end_ns: u64,
    /// The spinning thread.
    pub tid: i32,
    /// The CPU time the spinner itself got in the burst: less than its
    /// length when something took the CPU from it (the kernel's real-time
    /// throttling, which runs other threads once real-time ones have had
    /// 95 % of a second, or a higher priority), so that a judge knows the
    /// burst did not hold the CPU throughout.
    pub cpu_ns: u64,
    /// The instant its sleep before the burst was programmed to end: the
    /// spinner's own wake-up (timer interrupt, wake, switch in) took
    /// `start_ns - due_ns`, and took the CPU from what ran there too.
    pub due_ns: u64,
}

/// Runs the spinner until `stop` or `until_ns`, handing each burst to
/// `burst` as it ends (on this thread: keep it to a push into a
/// preallocated ring). Returns the spins done.
pub fn spin_loop(spec: &SpinSpec, stop: &AtomicBool, until_ns: u64, mut burst: impl FnMut(Burst)) -> u64 {
    let mut rng = Rng::seeded();
    let tid = sched::thread_id();
    // The burst watches the cycle counter, read inline, where it runs at a
    // constant rate: then no clock read's code shows in its samples.
    let counter = if spec.kind != SpinKind::User || !cfg!(target_arch = "x86_64") {
        None
    } else {
        Some(crate::sys::tsc::calibrate(10_000_000)).filter(|c| c.invariant)
    };
    let pair = Pair::default();
    std::thread::scope(|scope| {
        // The event kinds' other thread, on this CPU at this priority,
        // blocked between bursts.
        if matches!(spec.kind, SpinKind::Event | SpinKind::EventTimeout) {
            let pair = &pair;
            let started = std::thread::Builder::new()
                .name("rtscope-spin-pair".into())
                .stack_size(crate::sys::mem::STACK_SIZE)
                .spawn_scoped(scope, move || {
                    signals::block_in_this_thread();
                    let _ = cpu::pin_self(&[spec.cpu]);
                    let _ = sched::set_self(spec.policy, spec.priority);
                    pair.answer(spec.kind == SpinKind::EventTimeout);
                });
            if started.is_err() {
                // No other thread to answer: the bursts only wake nobody.
                pair.done.store(true, Release);
            }
        }
        let spins = bursts(spec, stop, until_ns, counter.as_ref(), &pair, &mut rng, tid, &mut burst);
        pair.end();
        spins
    })
}

/// The bursts of [`spin_loop`].
#[allow(clippy::too_many_arguments)]
fn bursts(
    spec: &SpinSpec,
    stop: &AtomicBool,
    until_ns: u64,
    counter: Option<&crate::sys::tsc::Calibration>,
    pair: &Pair,
    rng: &mut Rng,
    tid: i32,
    burst: &mut impl FnMut(Burst),
) -> u64 {
    let mut period_start = clock::now();
    let mut spins = 0;
    while !stop.load(Relaxed) {
        let begin = period_start + rng.below(spec.phase_ns);
        if begin >= until_ns {
            break;
        }
        clock::sleep_until(begin);
        let cpu_start = clock::thread_cpu_ns();
        let start_ns = clock::now();
        let end = start_ns + spec.spin_ns;
        let now = match spec.kind {
            SpinKind::User => spin_burst(end, counter),
            SpinKind::Sys => spin_burst_in_kernel(end),
            SpinKind::Prio => spin_burst_setting_priority(end, spec.policy, spec.priority),
            SpinKind::Event => pair.burst(end, false),
            SpinKind::EventTimeout => pair.burst(end, true),
            SpinKind::Mmap => spin_burst_mapping(end),
        };
        let cpu_ns = clock::thread_cpu_ns().saturating_sub(cpu_start);
        burst(Burst { start_ns, end_ns: now, tid, cpu_ns, due_ns: begin });
        spins += 1;
        period_start += spec.period_ns;
        let now = clock::now();
        if period_start < now {
            // Fell behind (throttled or preempted): skip missed periods.
            period_start += (now - period_start).div_ceil(spec.period_ns) * spec.period_ns;
        }
    }
    spins
}

/// Spins until CLOCK_MONOTONIC `end`; returns the clock read at its end.
/// A function of its own, never inlined, so that a profiler or a stack
/// taken during a burst names it. With a calibrated cycle counter it reads
/// only that, inline (no call, even in a debug build), so that all the
/// burst's time is in this function; else the clock, once per 256 pauses.
#[inline(never)]
pub fn spin_burst(end: u64, counter: Option<&crate::sys::tsc::Calibration>) -> u64 {
    let mut now = clock::now();
    if let Some(cal) = counter
        && now < end
    {
        let stop = rdtsc() + cal.ticks(end - now);
        while rdtsc() < stop {
            let mut i = 0;
            while i < 32 {
                pause();
                i += 1;
            }
        }
        now = clock::now();
    }
    while now < end {
        let mut i = 0;
        while i < 256 {
            pause();
            i += 1;
        }
        now = clock::now();
    }
    now
}

/// The cycle counter, inline even in a debug build.
#[inline(always)]
fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let (lo, hi): (u32, u32);
        // SAFETY: rdtsc only reads the time-stamp counter into eax:edx.
        unsafe { std::arch::asm!("rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack, preserves_flags)) };
        (u64::from(hi) << 32) | u64::from(lo)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        clock::now()
    }
}

/// The CPU's spin-wait hint, inline even in a debug build (where
/// `std::hint::spin_loop` calls a function of its own).
#[inline(always)]
fn pause() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `pause` only hints the CPU; it touches no memory or stack.
    unsafe {
        std::arch::asm!("pause", options(nomem, nostack, preserves_flags))
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::hint::spin_loop();
}

/// Makes system calls until CLOCK_MONOTONIC `end`, so that the CPU spends
/// the burst in the kernel; returns the last clock read.
#[inline(never)]
pub fn spin_burst_in_kernel(end: u64) -> u64 {
    let mut now = clock::now();
    while now < end {
        // SAFETY: getppid has no preconditions; a real system call.
        unsafe { libc::syscall(libc::SYS_getppid) };
        now = clock::now();
    }
    now
}

/// Sets this thread's own policy and priority until CLOCK_MONOTONIC `end`
/// (to what they are: the kernel still takes the run queue's lock and
/// requeues the thread); returns the last clock read.
#[inline(never)]
pub fn spin_burst_setting_priority(end: u64, policy: Policy, priority: u8) -> u64 {
    let mut now = clock::now();
    while now < end {
        let _ = sched::set_self(policy, priority);
        now = clock::now();
    }
    now
}

/// Bytes mapped, touched and unmapped per turn of an `mmap` spinner.
const MAPPED: usize = 64 * 1024;

/// Maps `MAPPED` anonymous bytes, writes a byte of each page and unmaps
/// them, until CLOCK_MONOTONIC `end`; returns the last clock read.
#[inline(never)]
pub fn spin_burst_mapping(end: u64) -> u64 {
    let mut now = clock::now();
    while now < end {
        // SAFETY: a fresh private anonymous mapping, written within its
        // length and unmapped before the next turn.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                MAPPED,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p != libc::MAP_FAILED {
                let bytes = p.cast::<u8>();
                let mut at = 0;
                while at < MAPPED {
                    std::ptr::write_volatile(bytes.add(at), 1);
                    at += 4096;
                }
                libc::munmap(p, MAPPED);
            }
        }
        now = clock::now();
    }
    now
}

/// The two threads of an `event` spinner: the spinner sets `ping` and
/// waits for `pong`; the other, waiting on `ping`, answers on `pong`.
#[derive(Default)]
struct Pair {
    ping: AtomicU32,
    pong: AtomicU32,
    done: AtomicBool,
}

/// The event kinds' bounded wait (IntrTime's 10 s).
const EVENT_TIMEOUT_NS: u64 = 10_000_000_000;

impl Pair {
    /// The spinner's burst: hand the word over and wait for it back, until
    /// CLOCK_MONOTONIC `end`; returns the last clock read.
    #[inline(never)]
    fn burst(&self, end: u64, timeout: bool) -> u64 {
        let mut now = clock::now();
        while now < end {
            let turn = self.ping.load(Acquire).wrapping_add(1);
            self.ping.store(turn, Release);
            ipc::futex_wake(&self.ping, 1, false);
            while self.pong.load(Acquire) != turn && !self.done.load(Relaxed) {
                wait(&self.pong, self.pong.load(Acquire), timeout);
            }
            now = clock::now();
        }
        now
    }

    /// The other thread: answers each turn until [`Pair::end`].
    fn answer(&self, timeout: bool) {
        // From the word's first value, not what it holds now: the spinner
        // may have handed over its first turn before this thread ran.
        let mut seen = 0;
        while !self.done.load(Acquire) {
            wait(&self.ping, seen, timeout);
            let turn = self.ping.load(Acquire);
            if turn != seen {
                seen = turn;
                self.pong.store(turn, Release);
                ipc::futex_wake(&self.pong, 1, false);
            }
        }
    }

    /// Ends the other thread's loop.
    fn end(&self) {
        self.done.store(true, Release);
        self.ping.fetch_add(1, AcqRel);
        ipc::futex_wake(&self.ping, 1, false);
    }
}

/// Waits on `word` while it holds `seen`, with IntrTime's 10 s bound or none.
fn wait(word: &AtomicU32, seen: u32, timeout: bool) {
    if timeout {
        ipc::futex_wait_for(word, seen, EVENT_TIMEOUT_NS);
    } else {
        ipc::futex_wait(word, seen, false);
    }
}

/// Bursts in flight from the spinner to the log's writer (a drain every
/// 20 ms sees at most a few; a full ring is counted, never waited on).
const BURST_RING: usize = 4096;

/// The burst log of `rtscope disturb --log FILE`: one line per burst,
/// `start_ns end_ns tid cpu_ns due_ns`, written as the bursts happen by a thread other
/// than the spinner, so that a test can judge a measurement against the
/// disturbance it really got.
pub struct BurstLog {
    out: std::io::BufWriter<std::fs::File>,
    rx: rtrb::Consumer<Burst>,
    pub written: u64,
}

impl BurstLog {
    /// Creates `path` with its header; the producer goes to the spinner.
    pub fn create(path: &std::path::Path, header: &str) -> std::io::Result<(BurstLog, rtrb::Producer<Burst>)> {
        let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
        writeln!(out, "# {header}")?;
        writeln!(
            out,
            "# start_ns end_ns tid cpu_ns due_ns (CLOCK_MONOTONIC; the spinner spun from start to end and had cpu_ns of CPU \
             time in it; its sleep before was programmed to end at due_ns)"
        )?;
        out.flush()?;
        let (tx, rx) = rtrb::RingBuffer::new(BURST_RING);
        Ok((BurstLog { out, rx, written: 0 }, tx))
    }

    /// Writes the bursts that have ended and flushes them to the file.
    pub fn drain(&mut self) -> std::io::Result<()> {
        while let Ok(b) = self.rx.pop() {
            writeln!(self.out, "{} {} {} {} {}", b.start_ns, b.end_ns, b.tid, b.cpu_ns, b.due_ns)?;
            self.written += 1;
        }
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_burst_is_logged_with_its_times_and_thread() {
        let _machine = crate::machine_lock();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bursts");
        let (mut log, mut tx) = BurstLog::create(&path, "test").unwrap();
        let spec = SpinSpec {
            cpu: 0,
            policy: Policy::Other,
            priority: 0,
            period_ns: 3_000_000,
            spin_ns: 200_000,
            phase_ns: 0,
            kind: SpinKind::User,
        };
        let stop = AtomicBool::new(false);
        let t0 = clock::now();
        // 40 ms: the first 10 calibrate the cycle counter the bursts watch.
        let spins = spin_loop(&spec, &stop, t0 + 40_000_000, |b| {
            let _ = tx.push(b);
        });
        log.drain().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let bursts: Vec<Vec<u64>> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split(' ').map(|x| x.parse().unwrap()).collect())
            .collect();
        assert_eq!(bursts.len() as u64, spins);
        assert_eq!(log.written, spins);
        assert!(spins >= 2, "{spins} spins in 40 ms at 3 ms");
        let mut last_end = t0;
        for b in &bursts {
            assert_eq!(b[2], sched::thread_id() as u64);
            assert!(b[0] >= last_end && b[1] >= b[0] + 200_000, "{b:?} after {last_end}");
            // Its own CPU time, read around the spin, holds no more than it
            // (plus the two reads' own costs).
            assert!(b[3] > 0 && b[3] <= b[1] - b[0] + 50_000, "{b:?}");
            // It woke no earlier than its sleep was programmed to end.
            assert!(b[4] <= b[0] && b[4] >= last_end, "{b:?}");
            last_end = b[1];
        }
    }
}
