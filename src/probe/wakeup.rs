//! `wakeup`: timer interrupt to thread latency, the Linux counterpart of
//! iltiming/IntrTime and of cyclictest.
//!
//! Each thread sleeps with `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`
//! until its next programmed instant and reads CLOCK_MONOTONIC on waking:
//! latency = wake time - programmed time. It covers the timer interrupt,
//! the hrtimer handler, the scheduler's wake-up and context switch, and the
//! return to user space. A wake-up later than the next period counts the
//! missed periods as overruns and resumes on the period grid.

use super::{Beside, Common, KernelTracerMode, Probe, RouteCtx, ThreadCtx};
use crate::disturb::{SpinSpec, Spinners};
use crate::recorder::Recorder;
use crate::sys::cache::FlushBuffer;
use crate::sys::{clock, process, sched::Policy};
use crate::trace::ktracer::{self, Rec, Setting, Tracer};
use anyhow::{Context, Result};
use rtscope_model::descriptor::{self, Descriptor};
use rtscope_model::units;
use serde::Serialize;

/// The background spinners of `--spinners N@PRIO`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SpinnerOpt {
    pub per_cpu: usize,
    /// 0: SCHED_OTHER; 1..99: SCHED_FIFO at that priority.
    pub priority: u8,
    /// Spend the busy time in system calls rather than in user space.
    pub syscalls: bool,
}

impl SpinnerOpt {
    /// Parses `N@PRIO` or `N@PRIO:sys`.
    pub fn parse(text: &str) -> Result<SpinnerOpt, String> {
        let hint = "write N@PRIO (e.g. 2@50, or 1@0 for SCHED_OTHER), with :sys to spin in system calls";
        let (body, syscalls) = match text.strip_suffix(":sys") {
            Some(b) => (b, true),
            None => (text, false),
        };
        let (n, p) = body.split_once('@').ok_or_else(|| format!("'{text}': {hint}"))?;
        let per_cpu: usize = n.parse().map_err(|_| format!("'{text}': N is not a number; {hint}"))?;
        let priority: u8 = p.parse().map_err(|_| format!("'{text}': PRIO is not a number; {hint}"))?;
        if !(1..=16).contains(&per_cpu) {
            return Err(format!("'{text}': N must be 1..16 spinners per CPU"));
        }
        if priority > 99 {
            return Err(format!("'{text}': PRIO must be 0..99"));
        }
        Ok(SpinnerOpt { per_cpu, priority, syscalls })
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Wakeup {
    pub interval_ns: u64,
    /// Thread i's interval is `interval + i * distance` (cyclictest -d).
    pub distance_ns: u64,
    pub spinners: Option<SpinnerOpt>,
    /// Spinners' duty cycle: busy `spin_active`, then sleep `spin_pause`.
    pub spin_active_ns: u64,
    pub spin_pause_ns: u64,
    pub second_process: bool,
    pub cache_flush: bool,
    /// Bytes read per `--cache-flush`.
    pub flush_bytes: Option<usize>,
    #[serde(skip)]
    pub flush: Option<FlushBuffer>,
    /// `--timerlat`: the kernel's timerlat tracer beside the probe.
    pub timerlat: KernelTracerMode,
    /// `--aligned`: every thread wakes at the same instants (else thread
    /// i's periods start i/N of a period after the first thread's).
    pub aligned: bool,
}

/// timerlat's period for a probe's interval: whole microseconds, within
/// what the kernel takes (100 us to 1 s).
fn timerlat_period_us(interval_ns: u64) -> u64 {
    (interval_ns / 1000).clamp(100, 1_000_000)
}

/// timerlat's records: the IRQ's latency to the first series, the
/// thread's to the second.
fn timerlat_route(r: &Rec, _: &RouteCtx) -> Option<(usize, u64)> {
    match *r {
        Rec::Timerlat { thread, latency_ns, .. } => Some((usize::from(thread), latency_ns)),
        _ => None,
    }
}

/// What runs beside the measuring threads.
struct Helpers {
    _spinners: Option<Spinners>,
    second: Option<std::process::Child>,
}

impl Drop for Helpers {
    fn drop(&mut self) {
        if let Some(child) = &mut self.second {
            process::stop_child(child, std::time::Duration::from_secs(1));
        }
    }
}

impl Probe for Wakeup {
    fn descriptor(&self) -> &'static Descriptor {
        &descriptor::WAKEUP
    }

    fn metrics(&self) -> &'static [&'static str] {
        &["latency"]
    }

    fn plan(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn describe(&self) -> String {
        let mut s = format!("interval {}", units::human(self.interval_ns));
        if self.distance_ns > 0 {
            s += &format!(" (+{} per thread)", units::human(self.distance_ns));
        }
        if let Some(sp) = self.spinners {
            s += &format!(
                ", {} spinner(s)/CPU at {}{}",
                sp.per_cpu,
                sp.priority,
                if sp.syscalls { " in syscalls" } else { "" }
            );
        }
        if self.second_process {
            s += ", second process";
        }
        if self.cache_flush {
            s += ", cache flush";
        }
        if self.aligned {
            s += ", threads aligned";
        }
        s
    }

    fn start_helpers(&self, cpus: &[usize], policy: Policy, priority: u8) -> Result<Box<dyn Send>> {
        let spinners = match self.spinners {
            Some(sp) => {
                let mut specs = Vec::new();
                for &cpu in cpus {
                    for _ in 0..sp.per_cpu {
                        specs.push(SpinSpec {
                            cpu,
                            policy: if sp.priority == 0 { Policy::Other } else { Policy::Fifo },
                            priority: sp.priority,
                            period_ns: self.spin_active_ns + self.spin_pause_ns,
                            spin_ns: self.spin_active_ns,
                            phase_ns: 0,
                            syscalls: sp.syscalls,
                        });
                    }
                }
                Some(Spinners::start(&specs).context("starting --spinners")?)
            }
            None => None,
        };
        let second = if self.second_process {
            let exe = std::env::current_exe().context("--second-process: cannot find rtscope's own executable")?;
            let list = rtscope_model::inventory::format_cpu_list(cpus);
            let prio = if policy.is_rt() { priority.saturating_sub(1).max(1) } else { 0 };
            let mut cmd = std::process::Command::new(exe);
            cmd.args(["__second-process", "--cpus", &list, "--interval-ns", &self.interval_ns.to_string()])
                .args(["--priority", &prio.to_string()])
                .stdin(std::process::Stdio::null());
            Some(process::spawn_tied(&mut cmd).context("starting --second-process")?)
        } else {
            None
        };
        Ok(Box::new(Helpers { _spinners: spinners, second }))
    }

    /// timerlat's threads beside the probe's, on its CPUs, at its period,
    /// one priority below it: the kernel's own IRQ and thread latencies of
    /// their wake-ups, what `rtla timerlat` reports.
    fn beside(&self, common: &Common) -> Option<Beside> {
        if self.timerlat == KernelTracerMode::Off {
            return None;
        }
        let period = timerlat_period_us(self.interval_ns);
        let list = rtscope_model::inventory::format_cpu_list(&common.cpus);
        let prio = if common.policy.is_rt() { common.priority.saturating_sub(1).max(1) } else { 0 };
        let why_beside = if ktracer::has_timerlat_fd() {
            "this kernel has osnoise/timerlat_fd (Linux 6.5+), through which rtscope's threads could be timerlat's \
             own as `rtla timerlat -u` does, but rtscope does not use it yet"
        } else {
            "this kernel has no osnoise/timerlat_fd (Linux 6.5+), through which rtscope's threads would be timerlat's \
             own as `rtla timerlat -u` does"
        };
        let align = (self.distance_ns == 0 && period * 1000 == self.interval_ns).then_some(self.interval_ns);
        let apart = if align.is_some() { ", half a period from the probe's" } else { "" };
        Some(Beside {
            tracer: Tracer::Timerlat,
            settings: vec![
                Setting::File("osnoise/cpus", list.clone()),
                Setting::File("osnoise/timerlat_period_us", period.to_string()),
            ],
            events: &["ftrace/timerlat"],
            metrics: &["timerlat_irq", "timerlat_thread"],
            route: timerlat_route,
            required: self.timerlat == KernelTracerMode::On,
            threads_at: Some((common.policy, prio)),
            align,
            what: format!(
                "its threads woke every {} on CPUs {list}, one priority below the probe's threads and on wake-ups of \
                 their own{apart} ({why_beside}); timerlat_irq is its timer's expiry to its IRQ handler, timerlat_thread to \
                 its thread running, as the kernel timestamps them",
                units::human(period * 1000)
            ),
        })
    }

    /// Thread i of N starts i/N of a period after the first, as cyclictest's
    /// threads do by starting one after the other: timers expiring at once
    /// on every measured CPU make them wait for one another where the CPUs
    /// share what delivers them (a hypervisor's or an emulator's timer
    /// thread, SMT siblings): under QEMU's emulation the p50 was 1.3-1.7
    /// times cyclictest's with every thread on the same instants, as
    /// cyclictest's own with `-A 0`. `--aligned` keeps them together.
    fn first_offset(&self, index: usize, threads: usize) -> u64 {
        if self.aligned || threads < 2 {
            return 0;
        }
        self.interval_ns / threads as u64 * index as u64
    }

    fn measure(&self, ctx: &ThreadCtx, rec: &mut [Recorder]) {
        let rec = &mut rec[0];
        let interval = self.interval_ns.saturating_add((ctx.index as u64).saturating_mul(self.distance_ns));
        let flush = self.flush.as_ref();
        let mut next = ctx.start_ns;
        loop {
            next += interval;
            clock::sleep_until(next);
            let now = clock::now();
            let latency = now.saturating_sub(next);
            rec.record(now, latency);
            if latency >= interval {
                let missed = latency / interval;
                rec.overrun(missed);
                next += missed * interval;
            }
            if ctx.breached(now, latency) || ctx.done(now, rec.count()) {
                break;
            }
            rec.maybe_checkpoint(now);
            if let Some(f) = flush {
                f.flush();
            }
        }
    }
}

/// The `--second-process` child: one thread per CPU, half a period out of
/// phase with the probe, touching its own memory, so that the probe's
/// wake-ups switch address spaces (IntrTime's `-sp`).
pub fn second_process(cpus: &[usize], interval_ns: u64, priority: u8) -> Result<()> {
    use crate::sys::{cpu, mem, sched};
    let _ = mem::lock_all();
    let threads: Vec<_> = cpus
        .iter()
        .map(|&c| {
            std::thread::spawn(move || {
                let _ = cpu::pin_self(&[c]);
                let policy = if priority == 0 { Policy::Other } else { Policy::Fifo };
                let _ = sched::set_self(policy, priority);
                let mut buf = vec![0u8; 256 * 1024];
                let mut next = clock::now() + interval_ns / 2;
                loop {
                    clock::sleep_until(next);
                    for i in (0..buf.len()).step_by(64) {
                        buf[i] = buf[i].wrapping_add(1);
                    }
                    std::hint::black_box(&buf);
                    next += interval_ns;
                    let now = clock::now();
                    if next < now {
                        next += (now - next).div_ceil(interval_ns) * interval_ns;
                    }
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thread i of N starts i/N of a period late; `--aligned`, or one
    /// thread, starts every thread at once.
    #[test]
    fn threads_start_a_share_of_a_period_apart() {
        let mut w = Wakeup {
            interval_ns: 1_000_000,
            distance_ns: 0,
            spinners: None,
            spin_active_ns: 0,
            spin_pause_ns: 0,
            second_process: false,
            cache_flush: false,
            flush_bytes: None,
            flush: None,
            timerlat: KernelTracerMode::Off,
            aligned: false,
        };
        assert_eq!((0..4).map(|i| w.first_offset(i, 4)).collect::<Vec<_>>(), [0, 250_000, 500_000, 750_000]);
        assert_eq!(w.first_offset(0, 1), 0);
        w.aligned = true;
        assert_eq!(w.first_offset(3, 4), 0);
    }

    #[test]
    fn spinner_option_parses() {
        assert_eq!(SpinnerOpt::parse("2@50"), Ok(SpinnerOpt { per_cpu: 2, priority: 50, syscalls: false }));
        assert_eq!(SpinnerOpt::parse("1@0:sys"), Ok(SpinnerOpt { per_cpu: 1, priority: 0, syscalls: true }));
        assert!(SpinnerOpt::parse("2").unwrap_err().contains("N@PRIO"));
        assert!(SpinnerOpt::parse("0@5").is_err());
        assert!(SpinnerOpt::parse("1@100").is_err());
    }
}
