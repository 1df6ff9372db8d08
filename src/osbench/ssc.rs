//! The SSC benchmark's services on Linux: task creation, suspend and
//! resume, message queue fill / drain / send-to-self, events, memory.

use super::harness::{self, Ctl, Env, Failures, Outcome, Samples, Single};
use super::{Group, Ips, N, ONE, TestDef};
use crate::sys::clock;
use crate::sys::ipc::{self, ChildState, FutexEvent, Mq, Shared, ThreadAttr};
use anyhow::{Result, anyhow, bail};
use std::ffi::CStr;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering::*;

/// The SSC set: this family's rows of [`TESTS`](super::TESTS), in order.
pub(super) const TESTS: &[TestDef] = &[
    TestDef {
        id: "ssc.thread",
        name: "thread create+run+exit+join",
        group: Group::Ssc,
        def: "from the creator's call to pthread_create of a SCHED_FIFO thread at a higher priority on the same CPU (which runs at once and returns) to the creator's return from pthread_join (SSC Create Task)",
        inter: false,
        parties: "creator lower, thread higher",
        ips: Ips::One,
        cross: false,
        equal: None,
        n: N,
        run: thread_create,
    },
    TestDef {
        id: "ssc.fork",
        name: "fork+exit+wait",
        group: Group::Ssc,
        def: "from the call to fork(2) (the child calls _exit(0) at once) to the return of waitpid(2) with its status; grows with rtscope's memory map",
        inter: true,
        parties: ONE,
        ips: Ips::One,
        cross: false,
        equal: None,
        n: 5_000,
        run: fork,
    },
    TestDef {
        id: "ssc.spawn",
        name: "posix_spawn /bin/true + wait",
        group: Group::Ssc,
        def: "from the call to posix_spawn(3) of /bin/true (no argument, empty environment) to the return of waitpid(2) with its exit status: exec, dynamic loading, exit",
        inter: true,
        parties: ONE,
        ips: Ips::One,
        cross: false,
        equal: None,
        n: 2_000,
        run: spawn,
    },
    TestDef {
        id: "ssc.suspend-ping",
        name: "suspend ping",
        group: Group::Ssc,
        def: "a higher-priority child process suspends itself (raise(SIGSTOP)); from the lower-priority process's kill(SIGCONT) resuming it to waitpid(WUNTRACED) reporting it suspended again (SSC Suspend Ping)",
        inter: true,
        parties: "suspended higher, resumer lower",
        ips: Ips::One,
        cross: true,
        equal: None,
        n: N,
        run: |e| suspend(e, true),
    },
    TestDef {
        id: "ssc.suspend-resume",
        name: "suspend/resume without a switch",
        group: Group::Ssc,
        def: "from before kill(SIGSTOP) to after kill(SIGCONT) of a lower-priority child process blocked in a futex wait, sent by the higher-priority process, which keeps the CPU (SSC Suspend/Resume)",
        inter: true,
        parties: "sender higher, target lower",
        ips: Ips::One,
        cross: false,
        equal: None,
        n: N,
        run: |e| suspend(e, false),
    },
    TestDef {
        id: "ssc.mq-fill",
        name: "message queue fill",
        group: Group::Ssc,
        def: "from before to after 10 non-blocking mq_send of 8 bytes that fill an empty POSIX queue of 10 messages, divided by 10 (SSC Fill Queue)",
        inter: false,
        parties: ONE,
        ips: Ips::Fixed(QUEUE_MSGS),
        cross: false,
        equal: None,
        n: N,
        run: |e| queue(e, QueueMode::Fill),
    },
    TestDef {
        id: "ssc.mq-drain",
        name: "message queue drain",
        group: Group::Ssc,
        def: "from before to after 10 non-blocking mq_receive that empty a full queue of 10 messages, divided by 10 (SSC Empty Queue)",
        inter: false,
        parties: ONE,
        ips: Ips::Fixed(QUEUE_MSGS),
        cross: false,
        equal: None,
        n: N,
        run: |e| queue(e, QueueMode::Drain),
    },
    TestDef {
        id: "ssc.mq-self",
        name: "message queue send/receive to self",
        group: Group::Ssc,
        def: "from before mq_send of 8 bytes to an empty queue to after this thread's mq_receive of it (SSC Queue Send/Recv)",
        inter: false,
        parties: ONE,
        ips: Ips::One,
        cross: false,
        equal: None,
        n: N,
        run: |e| queue(e, QueueMode::SendReceive),
    },
    TestDef {
        id: "ssc.event-pending",
        name: "event pending",
        group: Group::Ssc,
        def: "the higher-priority thread makes the lower one ready (FUTEX_WAKE), then from its call to read(2) of an unset eventfd (it blocks; the lower thread runs and writes 1) to the return of that read (SSC Event Pending)",
        inter: false,
        parties: "waiter higher, setter lower (one CPU only)",
        ips: Ips::One,
        cross: false,
        equal: None,
        n: N,
        run: event_pending,
    },
    TestDef {
        id: "ssc.set-event",
        name: "set event, no waiter",
        group: Group::Ssc,
        def: "from before to after IPS write(2) of 1 to an eventfd nobody waits on, divided by IPS (SSC Set Event)",
        inter: false,
        parties: ONE,
        ips: Ips::Loop(100),
        cross: false,
        equal: None,
        n: N,
        run: set_event,
    },
    TestDef {
        id: "ssc.malloc-32",
        name: "malloc 32 B",
        group: Group::Ssc,
        def: "from before to after IPS malloc(32) in a row (glibc), divided by IPS; freed outside the timed part (SSC LocalAlloc 32B)",
        inter: false,
        parties: ONE,
        ips: Ips::Loop(1000),
        cross: false,
        equal: None,
        n: N,
        run: |e| alloc(e, 32, true),
    },
    TestDef {
        id: "ssc.free-32",
        name: "free 32 B",
        group: Group::Ssc,
        def: "from before to after IPS free of blocks of 32 B allocated in a row outside the timed part, divided by IPS (SSC LocalFree)",
        inter: false,
        parties: ONE,
        ips: Ips::Loop(1000),
        cross: false,
        equal: None,
        n: N,
        run: |e| alloc(e, 32, false),
    },
    TestDef {
        id: "ssc.malloc-128",
        name: "malloc 128 B",
        group: Group::Ssc,
        def: "the same as ssc.malloc-32 with 128 B (SSC LocalAlloc 128B)",
        inter: false,
        parties: ONE,
        ips: Ips::Loop(1000),
        cross: false,
        equal: None,
        n: N,
        run: |e| alloc(e, 128, true),
    },
    TestDef {
        id: "ssc.free-128",
        name: "free 128 B",
        group: Group::Ssc,
        def: "the same as ssc.free-32 with 128 B",
        inter: false,
        parties: ONE,
        ips: Ips::Loop(1000),
        cross: false,
        equal: None,
        n: N,
        run: |e| alloc(e, 128, false),
    },
    TestDef {
        id: "ssc.mmap",
        name: "mmap+touch+munmap a page",
        group: Group::Ssc,
        def: "from before mmap(2) of one anonymous private page to after munmap(2), one write to the page between (with rtscope's mlockall the page is populated by mmap itself)",
        inter: false,
        parties: ONE,
        ips: Ips::One,
        cross: false,
        equal: None,
        n: N,
        run: mmap,
    },
];

/// Messages in the queue of the fill and drain tests: Linux's default
/// `fs.mqueue.msg_max`, which any user may create.
pub const QUEUE_MSGS: u32 = 10;

/// The tiny program `ssc.spawn` starts.
pub const TRUE: &CStr = c"/bin/true";

/// Counts the calls that failed.
#[derive(Default)]
struct Failed(u64);

impl Failed {
    #[inline(always)]
    fn check(&mut self, ok: bool) {
        self.0 += u64::from(!ok);
    }
}

struct Create(ThreadAttr, Failed);

impl Single for Create {
    fn op(&mut self) {
        let ok = self.0.create_join();
        self.1.check(ok);
    }
    fn failures(&self) -> u64 {
        self.1.0
    }
}

/// `ssc.thread`: the creator at the lower priority makes a thread at the
/// higher one, on the same CPU.
pub fn thread_create(env: &Env) -> Result<Outcome> {
    let (cpu, rt, high) = (env.cpu, env.rt(), env.high());
    harness::single(env, env.low(), move || Ok(Create(ThreadAttr::new(cpu, rt.then_some(high))?, Failed::default())))
}

struct Fork(Failed);

impl Single for Fork {
    fn op(&mut self) {
        let ok = ipc::fork_exit_wait().is_ok();
        self.0.check(ok);
    }
    fn failures(&self) -> u64 {
        self.0.0
    }
}

/// `ssc.fork`.
pub fn fork(env: &Env) -> Result<Outcome> {
    harness::single(env, env.high(), || Ok(Fork(Failed::default())))
}

struct Spawn(Failed);

impl Single for Spawn {
    fn op(&mut self) {
        let ok = ipc::spawn_wait(TRUE).is_ok_and(|c| c == 0);
        self.0.check(ok);
    }
    fn failures(&self) -> u64 {
        self.0.0
    }
}

/// `ssc.spawn`: posix_spawn of /bin/true.
pub fn spawn(env: &Env) -> Result<Outcome> {
    if !std::path::Path::new(TRUE.to_str().unwrap_or("/bin/true")).exists() {
        bail!("{} is missing: nothing tiny to spawn", TRUE.to_string_lossy());
    }
    harness::single(env, env.high(), || Ok(Spawn(Failed::default())))
}

struct Resume {
    pid: i32,
    ping: bool,
    failed: Failed,
}

impl Single for Resume {
    #[inline]
    fn op(&mut self) {
        if self.ping {
            let ok = ipc::kill(self.pid, libc::SIGCONT);
            self.failed.check(ok && matches!(ipc::wait_stopped(self.pid), Ok(ChildState::Stopped(_))));
        } else {
            let ok = ipc::kill(self.pid, libc::SIGSTOP) & ipc::kill(self.pid, libc::SIGCONT);
            self.failed.check(ok);
        }
    }
    fn failures(&self) -> u64 {
        self.failed.0
    }
}

/// `ssc.suspend-ping` (`ping`) and `ssc.suspend-resume`: a child process
/// that suspends itself (raise(SIGSTOP)) at the higher priority, resumed
/// by this process at the lower one; or a child blocked at the lower
/// priority that this process, at the higher one, suspends and resumes.
pub fn suspend(env: &Env, ping: bool) -> Result<Outcome> {
    let ctl: Shared<Ctl> = Shared::new()?;
    let c = &*ctl;
    let (policy, other) = (env.policy, env.other);
    let (child_prio, my_prio) = if ping { (env.high(), env.low()) } else { (env.low(), env.high()) };
    let pid = ipc::fork_child(move || {
        let _ = crate::sys::mem::lock_all();
        if harness::enter(other, policy, child_prio).is_err() {
            return 2;
        }
        c.ready.store(1, Release);
        loop {
            if ping {
                ipc::stop_self();
            } else {
                ipc::futex_wait(&c.armed, 0, true);
            }
            if c.stopped() {
                return 0;
            }
        }
    })?;
    let out = harness::single(env, my_prio, move || {
        let until = clock::now() + 2_000_000_000;
        while c.ready.load(Acquire) == 0 {
            if clock::now() > until {
                bail!("the child process did not start");
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if ping {
            match ipc::wait_stopped(pid)? {
                ChildState::Stopped(_) => {}
                other => bail!("the child process ended {other:?}"),
            }
        }
        Ok(Resume { pid, ping, failed: Failed::default() })
    });
    c.stop.store(1, Release);
    c.armed.store(1, Release);
    ipc::futex_wake(&c.armed, 1, true);
    ipc::kill(pid, libc::SIGCONT);
    let reaped = harness::reap(pid);
    let out = out?;
    reaped?;
    Ok(out)
}

/// A non-blocking queue of [`QUEUE_MSGS`] messages of 8 bytes.
struct Queue {
    q: Mq,
    mode: QueueMode,
    failed: Failed,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum QueueMode {
    Fill,
    Drain,
    SendReceive,
}

impl Queue {
    fn drain(&self) {
        let mut b = [0u8; 8];
        while self.q.receive(&mut b) {}
    }
    fn fill(&self) {
        for _ in 0..QUEUE_MSGS {
            self.q.send(&[0u8; 8]);
        }
    }
}

impl Single for Queue {
    fn pre(&mut self) {
        if self.mode == QueueMode::Drain {
            self.fill();
        }
    }
    #[inline]
    fn op(&mut self) {
        let mut b = [0u8; 8];
        let ok = match self.mode {
            QueueMode::Fill => self.q.send(&[7u8; 8]),
            QueueMode::Drain => self.q.receive(&mut b),
            QueueMode::SendReceive => self.q.send(&[7u8; 8]) && self.q.receive(&mut b),
        };
        self.failed.check(ok);
    }
    fn post(&mut self) {
        if self.mode == QueueMode::Fill {
            self.drain();
        }
    }
    fn failures(&self) -> u64 {
        self.failed.0
    }
}

/// The message queue tests.
pub fn queue(env: &Env, mode: QueueMode) -> Result<Outcome> {
    let q = Mq::new(&env.ipc_name("ssc"), i64::from(QUEUE_MSGS), 8, true)
        .map_err(|e| anyhow!("POSIX message queues unavailable ({e}; CONFIG_POSIX_MQUEUE?)"))?;
    harness::single(env, env.high(), move || Ok(Queue { q, mode, failed: Failed::default() }))
}

/// `ssc.event-pending`: the higher-priority party makes the lower one
/// runnable (a futex wake), reads t0 and waits on an unset event (eventfd
/// read); the lower one runs and sets it (eventfd write); t1 when the wait
/// returns.
pub fn event_pending(env: &Env) -> Result<Outcome> {
    let ctl: Shared<Ctl> = Shared::new()?;
    let gate: Shared<FutexEvent> = Shared::new()?;
    let efd = ipc::eventfd()?;
    let samples = Samples::new(env)?;
    let failed = Failures::new()?;
    let total = env.total();
    let (ctl, gate, efd, s, failed) = (&*ctl, &*gate, &efd, &samples, &failed);
    let leader = move || {
        let mut b = [0u8; 8];
        let mut duty = harness::Duty::new();
        for i in 0..total {
            if env.stopping() {
                break;
            }
            // The follower is blocked on the gate.
            duty.pace(None);
            env.flush();
            gate.set(false);
            let t0 = clock::now();
            let ok = ipc::read_fd(efd, &mut b).is_ok_and(|n| n == b.len());
            s.record(i, t0, clock::now());
            failed.check(ok);
        }
        ctl.stop.store(1, Release);
        gate.set(false);
    };
    let follower = move || {
        loop {
            gate.wait(false);
            if ctl.stopped() {
                return;
            }
            failed.check(ipc::write_fd(efd, &1u64.to_ne_bytes()).is_ok());
        }
    };
    let base_ns = harness::pair(env, false, env.upper(), env.lower(), leader, follower)?;
    Ok(Outcome { raw: samples.take(), base_ns, ips: 1, note: None, failed: failed.count(), priorities: None })
}

struct SetEvent(OwnedFd, Failed);

impl Single for SetEvent {
    #[inline]
    fn op(&mut self) {
        let ok = ipc::write_fd(&self.0, &1u64.to_ne_bytes()).is_ok();
        self.1.check(ok);
    }
    fn post(&mut self) {
        let mut b = [0u8; 8];
        let _ = ipc::read_fd(&self.0, &mut b);
    }
    fn failures(&self) -> u64 {
        self.1.0
    }
}

/// `ssc.set-event`: eventfd write with nobody waiting.
pub fn set_event(env: &Env) -> Result<Outcome> {
    harness::single(env, env.high(), || Ok(SetEvent(ipc::eventfd()?, Failed::default())))
}

/// IPS allocations of one size: each iteration allocates (or frees) the next.
struct Alloc {
    size: usize,
    ptrs: Vec<*mut u8>,
    k: usize,
    alloc: bool,
    failed: Failed,
}

impl Alloc {
    fn free_all(&mut self) {
        for p in &mut self.ptrs {
            if !p.is_null() {
                // SAFETY: from ipc::malloc, freed once (then nulled).
                unsafe { ipc::free(*p) };
                *p = std::ptr::null_mut();
            }
        }
    }
}

impl Single for Alloc {
    fn pre(&mut self) {
        self.k = 0;
        if !self.alloc {
            for p in &mut self.ptrs {
                *p = ipc::malloc(self.size);
            }
        }
    }
    #[inline(always)]
    fn op(&mut self) {
        let p = &mut self.ptrs[self.k];
        if self.alloc {
            *p = ipc::malloc(self.size);
            self.failed.check(!p.is_null());
        } else {
            // SAFETY: from ipc::malloc in pre, freed once.
            unsafe { ipc::free(*p) };
            *p = std::ptr::null_mut();
        }
        self.k += 1;
    }
    fn post(&mut self) {
        self.free_all();
    }
    fn failures(&self) -> u64 {
        self.failed.0
    }
}

impl Drop for Alloc {
    fn drop(&mut self) {
        self.free_all();
    }
}

/// `ssc.malloc-*` and `ssc.free-*`.
pub fn alloc(env: &Env, size: usize, allocate: bool) -> Result<Outcome> {
    let ips = env.ips as usize;
    harness::single(env, env.high(), move || {
        Ok(Alloc { size, ptrs: vec![std::ptr::null_mut(); ips], k: 0, alloc: allocate, failed: Failed::default() })
    })
}

struct Map(Failed);

impl Single for Map {
    fn op(&mut self) {
        let ok = ipc::map_touch_unmap();
        self.0.check(ok);
    }
    fn failures(&self) -> u64 {
        self.0.0
    }
}

/// `ssc.mmap`.
pub fn mmap(env: &Env) -> Result<Outcome> {
    harness::single(env, env.high(), || Ok(Map(Failed::default())))
}
