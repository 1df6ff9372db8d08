//! Known disturbances: SCHED_FIFO spinners of known period and length on
//! known CPUs. They make the IntrTime-style background threads of
//! `wakeup --spinners` and the ground truth of `rtscope disturb`.

use crate::sys::{clock, cpu, sched, sched::Policy, signals};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
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
    /// Make a system call in every turn of the loop, so that the CPU spends
    /// its time in the kernel (IntrTime's kernel-call idle threads).
    pub syscalls: bool,
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
                    .stack_size(crate::probe::STACK_SIZE)
                    .spawn(move || {
                        signals::block_in_this_thread();
                        let _ = cpu::pin_self(&[spec.cpu]);
                        let _ = sched::set_self(spec.policy, spec.priority);
                        spin_loop(&spec, &stop, u64::MAX);
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

/// Runs the spinner until `stop` or `until_ns`. Returns the spins done.
pub fn spin_loop(spec: &SpinSpec, stop: &AtomicBool, until_ns: u64) -> u64 {
    let mut rng = Rng::seeded();
    let mut period_start = clock::now();
    let mut spins = 0;
    while !stop.load(Relaxed) {
        let begin = period_start + rng.below(spec.phase_ns);
        if begin >= until_ns {
            break;
        }
        clock::sleep_until(begin);
        let end = clock::now() + spec.spin_ns;
        if spec.syscalls {
            while clock::now() < end {
                // SAFETY: getppid has no preconditions; a real system call.
                unsafe { libc::syscall(libc::SYS_getppid) };
            }
        } else {
            clock::spin_until(end);
        }
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
