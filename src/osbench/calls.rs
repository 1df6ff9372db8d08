//! Calls: a trivial system call, a call into a server process, clock
//! reads and atomic operations.

use super::harness::{self, Env, Failures, Outcome, PingPong, Single};
use crate::sys::clock;
use crate::sys::ipc;
use anyhow::Result;
use std::hint::black_box;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering::*};

/// What one iteration of a `calls` test does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Getppid,
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

/// A call into a server process over a SOCK_SEQPACKET pair.
struct Rpc {
    client: OwnedFd,
    server: OwnedFd,
    sum: AtomicU64,
    failed: Failures,
}

impl PingPong for Rpc {
    fn ping(&self) {
        let mut req = [0u8; 8 * ARGS];
        for (k, c) in req.chunks_exact_mut(8).enumerate() {
            c.copy_from_slice(&(k as u64 + 1).to_ne_bytes());
        }
        self.failed.check(ipc::write_fd(&self.client, &req).is_ok());
    }
    fn wait_pong(&self) -> u64 {
        let mut b = [0u8; 8];
        self.failed.check(ipc::read_fd(&self.client, &mut b).is_ok_and(|n| n == b.len()));
        clock::now()
    }
    fn wait_ping(&self) {
        let mut req = [0u8; 8 * ARGS];
        self.failed.check(ipc::read_fd(&self.server, &mut req).is_ok_and(|n| n == req.len()));
        let sum = req.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]))).sum::<u64>();
        self.sum.store(sum, Relaxed);
    }
    fn pong(&self) {
        self.failed.check(ipc::write_fd(&self.server, &self.sum.load(Relaxed).to_ne_bytes()).is_ok());
    }
    fn failures(&self) -> u64 {
        self.failed.count()
    }
}

/// `call.ipc`: the client (this process, lower priority) sends a request
/// and waits for the reply of a server process at higher priority.
pub fn ipc_call(env: &Env) -> Result<Outcome> {
    let (client, server) = ipc::socketpair(libc::SOCK_SEQPACKET)?;
    let rpc = Rpc { client, server, sum: AtomicU64::new(0), failed: Failures::new()? };
    harness::ping_pair_at(env, true, &rpc, env.low(), env.high())
}
