//! `osbench`: the cost and wake-up latency of the OS services a real-time
//! program calls at run time, the Linux counterpart of CEBench / OSBench
//! and of the SSC benchmark (the CE 3.0 real-time paper lists CEBench's tests,
//! the CE .NET testing article shows OSBench's output, the Siemens CE 3.0
//! assessment the SSC set), and of lmbench, `perf bench`
//! and rt-tests' ptsematest, pmqtest, svsematest and sigwaittest.
//!
//! Every test says exactly what it times ([`TestDef::def`]). Two-party
//! tests run their parties pinned to one CPU by default, at SCHED_FIFO
//! priorities the test defines (the base priority `-p` is "higher",
//! 5 below "medium", 10 below "lower"); `--cross-cpu` runs them again with
//! the other party on another CPU. Inter-process tests fork a child that
//! dies with rtscope; their shared objects live in anonymous shared
//! memory, POSIX queues are unlinked as soon as they are open and SysV
//! semaphores are removed after the test (by the janitor process should
//! rtscope die first).

mod calls;
pub mod harness;
mod locks;
mod ping;
mod runner;
mod ssc;
mod wakeup;

use crate::recorder::ExceedMode;
use crate::sys::cache::FlushBuffer;
use crate::sys::{clock, cpu, ipc::Janitor, sched::Policy};
use anyhow::{Result, bail};
use harness::{Env, Outcome};
use rtscope_model::descriptor::{OSBENCH, TestGroup};
use rtscope_model::hist::Tally;
use rtscope_model::run::{Exceedance, Interval, SeriesKey};
use rtscope_model::store::Store;
use serde_json::{Value, json};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// The groups, in the order they run and print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    Locks,
    Wakeup,
    Ping,
    Calls,
    Ssc,
}

impl Group {
    pub const ALL: [Group; 5] = [Group::Locks, Group::Wakeup, Group::Ping, Group::Calls, Group::Ssc];

    /// Its name and title: osbench's row in the descriptor table lists the
    /// groups in this order.
    fn row(self) -> &'static TestGroup {
        &OSBENCH.test_groups()[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.row().name
    }

    pub fn title(self) -> &'static str {
        self.row().title
    }
}

/// The parties' priorities in the tests with an equal-priority variant
/// (the wake-up primitives and the mutex handoff): `--priorities`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Priorities {
    /// As each test defines: the waiter 10 above the signaller, so that it preempts inside the signalling call.
    #[default]
    Test,
    /// Both parties at -p, as rt-tests run them: the woken party runs when the signaller blocks for its reply.
    Equal,
    /// Each such test both ways: a +equal row beside the test's own.
    Both,
}

impl Priorities {
    pub fn name(self) -> &'static str {
        match self {
            Priorities::Test => "test",
            Priorities::Equal => "equal",
            Priorities::Both => "both",
        }
    }
}

/// Iterations per sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ips {
    /// One operation per sample, always.
    One,
    /// A loop of this many by default; `--ips` sets another.
    Loop(u32),
    /// A fixed number the test defines (e.g. a queue's capacity).
    Fixed(u32),
}

/// One test.
pub struct TestDef {
    pub id: &'static str,
    pub name: &'static str,
    pub group: Group,
    /// Exactly what is timed: from which event to which event.
    pub def: &'static str,
    /// Whether the other party is another process.
    pub inter: bool,
    /// The parties and their priorities.
    pub parties: &'static str,
    pub ips: Ips,
    /// Whether a --cross-cpu variant means something.
    pub cross: bool,
    /// Whether it has an equal-priority variant (`--priorities equal`):
    /// then the call in which the signalling party blocks for the woken
    /// party's reply right after its signal.
    pub equal: Option<&'static str>,
    /// Samples when -n is not given (default 10000).
    pub n: u64,
    pub run: fn(&Env) -> Result<Outcome>,
}

const N: u64 = 10_000;
const HL: &str = "waiter higher, signaller lower";
const EQ: &str = "two parties, equal priority";
const ONE: &str = "one thread";

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
            run: |e| wakeup::run(e, $prim, $inter),
        }
    };
}

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
            run: |e| ping::run(e, $mech, $inter),
        }
    };
}

macro_rules! call {
    ($id:literal, $name:literal, $def:literal, $call:expr, $ips:expr) => {
        TestDef {
            id: $id,
            name: $name,
            group: Group::Calls,
            def: $def,
            inter: false,
            parties: ONE,
            ips: Ips::Loop($ips),
            cross: false,
            equal: None,
            n: N,
            run: |e| calls::run(e, $call),
        }
    };
}

use calls::Call;
pub use locks::INVERSION_NS;
use ping::Mech;
pub use runner::{Bench, CELL_MAX_SAMPLES, CELL_TESTS, Cell, Measured, Plan, Settings, other_than};
use wakeup::Prim;

/// Every test, in the order they run. `-t` takes an id, a number (the
/// position here, from 1) or a group name.
pub static TESTS: &[TestDef] = &[
    // Locks.
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
        run: locks::lock,
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
        run: locks::unlock,
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
        run: |e| locks::handoff(e, false),
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
        run: |e| locks::handoff(e, true),
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
        run: |e| locks::block(e, false),
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
        run: |e| locks::block(e, true),
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
        run: |e| locks::inversion(e, true, locks::Span::UnlockWake),
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
        run: |e| locks::inversion(e, false, locks::Span::UnlockWake),
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
        run: |e| locks::inversion(e, true, locks::Span::Blocked),
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
        run: |e| locks::inversion(e, false, locks::Span::Blocked),
    },
    // Wake-up primitives.
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
    // Ping-pong and yield.
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
        run: |e| ping::yield_test(e, false),
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
        run: |e| ping::yield_test(e, true),
    },
    // Calls.
    call!(
        "call.syscall",
        "system call round trip",
        "from before to after IPS getppid(2) calls through syscall(2) (entry, trivial work, exit), divided by IPS (perf bench syscall basic, CEBench 29)",
        Call::Getppid,
        100
    ),
    TestDef {
        id: "call.ipc",
        name: "call into another process",
        group: Group::Calls,
        def: "from the client's write(2) of a request of 7 u64 arguments on a SOCK_SEQPACKET socketpair to the return of its read(2) of the reply: a server process at higher priority, blocked in read(2), sums the arguments and writes the sum back (CEBench 26-28)",
        inter: true,
        parties: "server higher, client lower",
        ips: Ips::One,
        cross: true,
        equal: None,
        n: N,
        run: calls::ipc_call,
    },
    call!(
        "clock.mono",
        "clock_gettime MONOTONIC (vDSO)",
        "from before to after IPS calls of clock_gettime(CLOCK_MONOTONIC) through the C library (the vDSO, no system call), divided by IPS",
        Call::MonoVdso,
        1000
    ),
    call!("clock.real", "clock_gettime REALTIME (vDSO)", "the same with CLOCK_REALTIME", Call::RealVdso, 1000),
    call!(
        "clock.mono-syscall",
        "clock_gettime MONOTONIC (syscall)",
        "from before to after IPS clock_gettime(CLOCK_MONOTONIC) system calls through syscall(2) (no vDSO), divided by IPS",
        Call::MonoSyscall,
        100
    ),
    call!(
        "clock.real-syscall",
        "clock_gettime REALTIME (syscall)",
        "the same with CLOCK_REALTIME",
        Call::RealSyscall,
        100
    ),
    call!(
        "clock.time",
        "time()",
        "from before to after IPS calls of time(NULL) through the C library (the vDSO on x86_64), divided by IPS",
        Call::Time,
        1000
    ),
    call!(
        "atomic.inc",
        "atomic increment",
        "from before to after IPS atomic fetch-add of 1 (SeqCst; lock xadd on x86_64) on an uncontended 64-bit word, divided by IPS (CEBench 30)",
        Call::AtomicInc,
        1000
    ),
    call!("atomic.dec", "atomic decrement", "the same with fetch-sub of 1 (CEBench 31)", Call::AtomicDec, 1000),
    call!("atomic.xchg", "atomic exchange", "the same with an atomic swap (CEBench 32)", Call::AtomicXchg, 1000),
    call!(
        "atomic.cas",
        "atomic compare-exchange",
        "the same with a compare-exchange that succeeds (CEBench 33)",
        Call::AtomicCas,
        1000
    ),
    // The SSC set.
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
        run: ssc::thread_create,
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
        run: ssc::fork,
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
        run: ssc::spawn,
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
        run: |e| ssc::suspend(e, true),
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
        run: |e| ssc::suspend(e, false),
    },
    TestDef {
        id: "ssc.mq-fill",
        name: "message queue fill",
        group: Group::Ssc,
        def: "from before to after 10 non-blocking mq_send of 8 bytes that fill an empty POSIX queue of 10 messages, divided by 10 (SSC Fill Queue)",
        inter: false,
        parties: ONE,
        ips: Ips::Fixed(ssc::QUEUE_MSGS),
        cross: false,
        equal: None,
        n: N,
        run: |e| ssc::queue(e, ssc::QueueMode::Fill),
    },
    TestDef {
        id: "ssc.mq-drain",
        name: "message queue drain",
        group: Group::Ssc,
        def: "from before to after 10 non-blocking mq_receive that empty a full queue of 10 messages, divided by 10 (SSC Empty Queue)",
        inter: false,
        parties: ONE,
        ips: Ips::Fixed(ssc::QUEUE_MSGS),
        cross: false,
        equal: None,
        n: N,
        run: |e| ssc::queue(e, ssc::QueueMode::Drain),
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
        run: |e| ssc::queue(e, ssc::QueueMode::SendReceive),
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
        run: ssc::event_pending,
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
        run: ssc::set_event,
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
        run: |e| ssc::alloc(e, 32, true),
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
        run: |e| ssc::alloc(e, 32, false),
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
        run: |e| ssc::alloc(e, 128, true),
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
        run: |e| ssc::alloc(e, 128, false),
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
        run: ssc::mmap,
    },
];

impl std::fmt::Debug for TestDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TestDef({})", self.id)
    }
}

impl TestDef {
    /// The test's 1-based number in [`TESTS`].
    pub fn num(&self) -> usize {
        TESTS.iter().position(|t| std::ptr::eq(t, self)).map_or(0, |p| p + 1)
    }

    /// What is timed with `--priorities equal`, when it has that variant.
    pub fn equal_def(&self) -> Option<String> {
        self.equal.map(|w| {
            format!(
                "the same span with both parties at -p: the woken party does not preempt the signaller and runs only when the signaller, right after its call, blocks in {w} until the woken party has taken its sample and answers (as rt-tests' senders do), so the span adds the return from the signalling call and the entry into that wait up to the switch"
            )
        })
    }

    /// Its IPS under `--ips`.
    pub fn effective_ips(&self, ips: Option<u32>) -> u32 {
        match self.ips {
            Ips::One => 1,
            Ips::Loop(d) => ips.unwrap_or(d),
            Ips::Fixed(n) => n,
        }
    }
}

/// The tests `-t` selects (all when none), in table order, or an error
/// naming the unknown one.
pub fn select(wanted: &[String]) -> Result<Vec<&'static TestDef>> {
    if wanted.is_empty() {
        return Ok(TESTS.iter().collect());
    }
    let mut picked = vec![false; TESTS.len()];
    for w in wanted {
        let w = w.trim();
        let hits: Vec<usize> = match w.parse::<usize>() {
            Ok(n) if (1..=TESTS.len()).contains(&n) => vec![n - 1],
            Ok(n) => bail!("-t {n}: there are tests 1 to {} (rtscope osbench --list)", TESTS.len()),
            Err(_) => {
                let exact: Vec<usize> = (0..TESTS.len()).filter(|&i| TESTS[i].id == w).collect();
                if exact.is_empty() {
                    (0..TESTS.len())
                        .filter(|&i| TESTS[i].group.name() == w || TESTS[i].id.split('.').next() == Some(w))
                        .collect()
                } else {
                    exact
                }
            }
        };
        if hits.is_empty() {
            bail!(
                "-t {w}: no such test; give an id (e.g. -t wake.futex-intra), a number or a group ({}); see rtscope osbench --list",
                Group::ALL.map(Group::name).join(", ")
            );
        }
        for h in hits {
            picked[h] = true;
        }
    }
    Ok(TESTS.iter().zip(picked).filter(|(_, p)| *p).map(|(t, _)| t).collect())
}

/// `rtscope osbench --list`.
pub fn list(out: &mut dyn Write) -> Result<()> {
    writeln!(out, "rtscope osbench tests: id, name, inter-process, IPS default, parties; what exactly is timed")?;
    writeln!(
        out,
        "(times are CLOCK_MONOTONIC reads through the vDSO; the timing overhead, measured first, is subtracted;\n two-party tests: both parties on one CPU unless --cross-cpu; priorities: higher = -p, medium = -p - 5, lower = -p - 10;\n tests marked --priorities equal also run with both parties at -p, as rt-tests do: a +equal row)"
    )?;
    for g in Group::ALL {
        writeln!(out, "\n{}", g.title())?;
        for t in TESTS.iter().filter(|t| t.group == g) {
            let ips = match t.ips {
                Ips::One => "1".to_string(),
                Ips::Loop(n) => format!("{n} (--ips)"),
                Ips::Fixed(n) => format!("{n} (fixed)"),
            };
            writeln!(
                out,
                "{:>3}  {:<22} {}  [{}; IPS {ips}; {}{}{}{}]",
                t.num(),
                t.id,
                t.name,
                if t.inter { "inter-process" } else { "intra-process" },
                t.parties,
                if t.cross { "; --cross-cpu" } else { "" },
                if t.equal.is_some() { "; --priorities equal" } else { "" },
                if t.n != N { format!("; -n default {}", t.n) } else { String::new() },
            )?;
            writeln!(out, "     timed: {}", t.def)?;
            if let Some(e) = t.equal_def() {
                writeln!(out, "     timed, --priorities equal: {e}")?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_has_its_row_in_the_descriptor_table_in_order() {
        assert_eq!(OSBENCH.test_groups().len(), Group::ALL.len());
        for (i, g) in Group::ALL.into_iter().enumerate() {
            assert_eq!(g as usize, i);
            assert!(!g.name().is_empty() && g.title().starts_with(|c: char| c.is_lowercase()), "{g:?}");
        }
        assert_eq!(Group::Ssc.name(), "ssc");
    }

    #[test]
    fn ids_are_unique_and_defined() {
        let mut ids: Vec<&str> = TESTS.iter().map(|t| t.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), TESTS.len());
        for t in TESTS {
            assert!(t.def.len() > 20 && t.def.starts_with(|c: char| c.is_lowercase()), "{}", t.id);
            assert!(t.id.contains('.') && !t.id.contains(' '), "{}", t.id);
        }
        // Every wake-up primitive and ping-pong comes intra and inter.
        for g in [Group::Wakeup, Group::Ping] {
            let of: Vec<&TestDef> = TESTS.iter().filter(|t| t.group == g).collect();
            assert_eq!(of.iter().filter(|t| t.inter).count() * 2, of.len());
        }
        // Every wake-up test and the handoff have an equal-priority variant
        // (the tests rt-tests' peers time), and nothing else has.
        for t in TESTS {
            let want = t.group == Group::Wakeup || t.id.starts_with("mutex.handoff");
            assert_eq!(t.equal.is_some(), want, "{}", t.id);
            if let Some(e) = t.equal {
                assert!(e.len() > 10 && !e.starts_with("the same"), "{}: {e}", t.id);
                assert!(t.equal_def().unwrap().contains(e));
            }
        }
    }

    #[test]
    fn selection_by_id_number_and_group() {
        assert_eq!(select(&[]).unwrap().len(), TESTS.len());
        assert_eq!(select(&["wake.futex-intra".into()]).unwrap()[0].id, "wake.futex-intra");
        assert_eq!(select(&["1".into()]).unwrap()[0].id, TESTS[0].id);
        let calls = select(&["atomic".into()]).unwrap();
        assert_eq!(calls.len(), 4);
        assert_eq!(select(&["ssc".into(), "ssc.fork".into()]).unwrap().len(), 15);
        let e = select(&["nope".into()]).unwrap_err().to_string();
        assert!(e.contains("-t nope") && e.contains("--list"), "{e}");
        assert!(select(&["999".into()]).is_err());
    }

    #[test]
    fn the_list_names_every_test() {
        let mut out = Vec::new();
        list(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        for t in TESTS {
            assert!(text.contains(t.id) && text.contains(t.def), "{}", t.id);
            if let Some(e) = t.equal_def() {
                assert!(text.contains(&format!("timed, --priorities equal: {e}")), "{}", t.id);
            }
        }
    }
}
