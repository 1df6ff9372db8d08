//! Calls: a trivial system call, a call into a server process, clock
//! reads and atomic operations.

use super::harness::{self, Env, Failures, Outcome, Protocol, Single};
use super::{Group, Ips, N, ONE, TestDef};
use crate::sys::clock;
use crate::sys::ipc::{self, Shared};
use anyhow::Result;
use std::hint::black_box;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering::*};

/// The row of a single-thread call timed `$ips` times per sample by default.
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
            run: |e| run(e, $call),
        }
    };
}

/// The row of a call into a server process passing `$args`.
macro_rules! ipc {
    ($id:literal, $name:literal, $def:literal, $args:expr) => {
        TestDef {
            id: $id,
            name: $name,
            group: Group::Calls,
            def: $def,
            inter: true,
            parties: "server higher, client lower",
            ips: Ips::One,
            cross: true,
            equal: None,
            n: N,
            run: |e| ipc_call(e, $args),
        }
    };
}

/// The calls: this family's rows of [`TESTS`](super::TESTS), in order.
pub(super) const TESTS: &[TestDef] = &[
    call!(
        "call.syscall",
        "system call round trip",
        "from before to after IPS getppid(2) calls through syscall(2) (entry, trivial work, exit), divided by IPS (perf bench syscall basic, CEBench 29)",
        Call::Getppid,
        100
    ),
    call!(
        "call.syscall-words",
        "system call, 6 word arguments",
        "from before to after IPS splice(2) calls of length 0 through syscall(2), six word-sized arguments passed by value (-1, NULL, -1, NULL, 0, 0) that the kernel checks and returns 0 on, touching no memory or file, divided by IPS (CEBench 24: seven DWORDs; Linux passes at most six)",
        Call::Words,
        100
    ),
    call!(
        "call.syscall-ptrs",
        "system call, 5 pointer arguments",
        "from before to after IPS pselect6(2) calls through syscall(2) of one descriptor in three empty fd sets, a zero timeout and no signal mask: five pointers the kernel copies in through (and the sets and timeout back out), polling nothing, divided by IPS (CEBench 25: seven PVOIDs; Linux passes at most six arguments)",
        Call::Pointers,
        100
    ),
    ipc!(
        "call.ipc-none",
        "call into another process, no argument",
        "as call.ipc with a request that carries no argument (one byte, the call's number: a SOCK_SEQPACKET message of length 0 reads as end of file); the server answers 0 (CEBench 26)",
        Args::None
    ),
    ipc!(
        "call.ipc",
        "call into another process, 7 words",
        "from the client's write(2) of a request of 7 u64 arguments on a SOCK_SEQPACKET socketpair to the return of its read(2) of the reply: a server process at higher priority, blocked in read(2), sums the arguments and writes the sum back (CEBench 27)",
        Args::Words
    ),
    ipc!(
        "call.ipc-ptrs",
        "call into another process, 7 pointers",
        "as call.ipc with a request of 7 pointers to u64 arguments in memory both processes map: the server checks each lies in that memory, reads the argument through it and writes the sum back (CEBench 28)",
        Args::Pointers
    ),
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
];

/// What one iteration of a `calls` test does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Getppid,
    Words,
    Pointers,
    MonoVdso,
    RealVdso,
    MonoSyscall,
    RealSyscall,
    Time,
    AtomicInc,
    AtomicDec,
    AtomicXchg,
    AtomicCas,
}

/// Runs the single-thread call test `call`, on one thread at the base
/// priority. Each operation is its own closure, so that the timed loop
/// holds nothing but it.
pub fn run(env: &Env, call: Call) -> Result<Outcome> {
    let p = env.high();
    let a = || AtomicU64::new(1 << 40);
    match call {
        Call::Getppid => harness::single(env, p, || {
            Ok(Op(|| {
                black_box(ipc::syscall_getppid());
            }))
        }),
        Call::Words => harness::single(env, p, || {
            Ok(Op(|| {
                black_box(ipc::syscall_six_words());
            }))
        }),
        Call::Pointers => harness::single(env, p, || {
            let mut a = ipc::PointerArgs::new();
            Ok(Op(move || {
                black_box(ipc::syscall_pointers(black_box(&mut a)));
            }))
        }),
        Call::MonoVdso => harness::single(env, p, || {
            Ok(Op(|| {
                black_box(ipc::clock_vdso(libc::CLOCK_MONOTONIC));
            }))
        }),
        Call::RealVdso => harness::single(env, p, || {
            Ok(Op(|| {
                black_box(ipc::clock_vdso(libc::CLOCK_REALTIME));
            }))
        }),
        Call::MonoSyscall => harness::single(env, p, || {
            Ok(Op(|| {
                black_box(ipc::clock_syscall(libc::CLOCK_MONOTONIC));
            }))
        }),
        Call::RealSyscall => harness::single(env, p, || {
            Ok(Op(|| {
                black_box(ipc::clock_syscall(libc::CLOCK_REALTIME));
            }))
        }),
        Call::Time => harness::single(env, p, || {
            Ok(Op(|| {
                black_box(ipc::time_now());
            }))
        }),
        Call::AtomicInc => harness::single(env, p, move || {
            let a = a();
            Ok(Op(move || {
                black_box(black_box(&a).fetch_add(1, SeqCst));
            }))
        }),
        Call::AtomicDec => harness::single(env, p, move || {
            let a = a();
            Ok(Op(move || {
                black_box(black_box(&a).fetch_sub(1, SeqCst));
            }))
        }),
        Call::AtomicXchg => harness::single(env, p, move || {
            let (a, mut v) = (a(), 0u64);
            Ok(Op(move || {
                v += 1;
                black_box(black_box(&a).swap(v, SeqCst));
            }))
        }),
        Call::AtomicCas => harness::single(env, p, move || {
            let a = a();
            let mut cur = a.load(Relaxed);
            // Always succeeds: it expects what is there.
            Ok(Op(move || {
                let _ = black_box(black_box(&a).compare_exchange(cur, cur + 1, SeqCst, SeqCst));
                cur += 1;
            }))
        }),
    }
}

/// An operation given as a closure.
struct Op<F: FnMut()>(F);

impl<F: FnMut()> Single for Op<F> {
    #[inline(always)]
    fn op(&mut self) {
        (self.0)()
    }
}

/// The request: seven arguments; the reply: their sum.
const ARGS: usize = 7;

/// What a call into the server passes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Args {
    /// Nothing but the call's number (one byte).
    None,
    /// [`ARGS`] u64 values.
    Words,
    /// [`ARGS`] pointers to u64 values in [`ArgPage`].
    Pointers,
}

/// The arguments the pointers of [`Args::Pointers`] point to, in memory
/// the client and the server process share (at the same address).
#[repr(C)]
pub struct ArgPage {
    v: [AtomicU64; ARGS],
}

// SAFETY: atomics, valid at all-zero.
unsafe impl ipc::Zeroable for ArgPage {}

/// A call into a server process over a SOCK_SEQPACKET pair.
struct Rpc {
    client: OwnedFd,
    server: OwnedFd,
    args: Args,
    page: Shared<ArgPage>,
    sum: AtomicU64,
    failed: Failures,
}

impl ArgPage {
    /// The address of argument `k`, as the request passes it.
    fn addr(&self, k: usize) -> u64 {
        &self.v[k] as *const AtomicU64 as u64
    }

    /// The value a pointer of a request points to, once checked to be one
    /// of this page's arguments; None otherwise.
    fn deref(&self, addr: u64) -> Option<u64> {
        let off = addr.checked_sub(self.v.as_ptr() as u64)?;
        (off % 8 == 0).then_some(())?;
        self.v.get((off / 8) as usize).map(|a| a.load(Relaxed))
    }
}

impl Rpc {
    /// The request's bytes for [`Rpc::args`].
    fn request_len(&self) -> usize {
        if self.args == Args::None { 1 } else { 8 * ARGS }
    }
}

impl Protocol for Rpc {
    /// The request.
    fn to_follower(&self) {
        let mut req = [0u8; 8 * ARGS];
        for (k, c) in req.chunks_exact_mut(8).enumerate() {
            let v = match self.args {
                Args::Pointers => self.page.addr(k),
                _ => k as u64 + 1,
            };
            c.copy_from_slice(&v.to_ne_bytes());
        }
        self.failed.check(ipc::write_fd(&self.client, &req[..self.request_len()]).is_ok());
    }
    /// The reply.
    fn leader_wait(&self) -> u64 {
        let mut b = [0u8; 8];
        self.failed.check(ipc::read_fd(&self.client, &mut b).is_ok_and(|n| n == b.len()));
        clock::now()
    }
    fn follower_wait(&self) {
        let mut req = [0u8; 8 * ARGS];
        let len = self.request_len();
        self.failed.check(ipc::read_fd(&self.server, &mut req[..len]).is_ok_and(|n| n == len));
        let words = req[..len].chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])));
        let sum = match self.args {
            Args::None => 0,
            Args::Words => words.sum::<u64>(),
            Args::Pointers => words
                .map(|a| {
                    let v = self.page.deref(a);
                    self.failed.check(v.is_some());
                    v.unwrap_or(0)
                })
                .sum::<u64>(),
        };
        self.sum.store(sum, Relaxed);
    }
    fn to_leader(&self) {
        self.failed.check(ipc::write_fd(&self.server, &self.sum.load(Relaxed).to_ne_bytes()).is_ok());
    }
    fn failures(&self) -> u64 {
        self.failed.count()
    }
}

/// `call.ipc*`: the client (this process, lower priority) sends a request
/// passing `args` and waits for the reply of a server process at higher
/// priority.
pub fn ipc_call(env: &Env, args: Args) -> Result<Outcome> {
    let (client, server) = ipc::socketpair(libc::SOCK_SEQPACKET)?;
    let page: Shared<ArgPage> = Shared::new()?;
    for (k, a) in page.v.iter().enumerate() {
        a.store(k as u64 + 1, Relaxed);
    }
    let rpc = Rpc { client, server, args, page, sum: AtomicU64::new(0), failed: Failures::new()? };
    harness::ping_pair_at(env, true, &rpc, env.low(), env.high())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pointer_argument_is_read_only_when_it_is_one_of_the_page() {
        let page: Shared<ArgPage> = Shared::new().unwrap();
        page.v[3].store(42, Relaxed);
        assert_eq!(page.deref(page.addr(3)), Some(42));
        assert_eq!(page.deref(page.addr(0)), Some(0));
        let end = page.addr(ARGS - 1) + 8;
        for bad in [0, page.addr(0) - 8, page.addr(2) + 4, end, u64::MAX] {
            assert_eq!(page.deref(bad), None, "{bad:#x}");
        }
    }
}
