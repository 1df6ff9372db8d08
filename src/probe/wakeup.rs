//! `wakeup`: timer interrupt to thread latency, the Linux counterpart of
//! iltiming/IntrTime and of cyclictest.
//!
//! Each thread sleeps with `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`
//! until its next programmed instant and reads CLOCK_MONOTONIC on waking:
//! latency = wake time - programmed time. It covers the timer interrupt,
//! the hrtimer handler, the scheduler's wake-up and context switch, and the
//! return to user space. A wake-up later than the next period counts the
//! missed periods as overruns and resumes on the period grid.
//!
//! With `--timerlat user` (Linux 6.5+) each thread is instead the kernel
//! timerlat tracer's own user thread, as `rtla timerlat -u`'s are: it sleeps
//! in a read of `osnoise/per_cpu/cpuN/timerlat_fd`, which returns on the
//! tracer's next period, and timestamps its return the same way. One run
//! then has, for the same wake-ups, the kernel's IRQ and thread latencies,
//! rtscope's own, and the kernel's return-to-user latency (taken as the
//! thread enters its next read).

use super::{Beside, Common, Probe, RouteCtx, ThreadCtx};
use crate::disturb::{SpinKind, SpinSpec, Spinners};
use crate::recorder::Recorder;
use crate::sys::cache::FlushBuffer;
use crate::sys::marker::{Marker, MarkerSpec};
use crate::sys::sched::{self, Deadline, Policy};
use crate::sys::{clock, process};
use crate::trace::ktracer::{self, Context as At, Rec, Setting, Tracer};
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
    /// What the busy time does (user space, system calls, ...).
    pub kind: SpinKind,
}

impl SpinnerOpt {
    /// Parses `N@PRIO` or `N@PRIO:KIND` (user, sys, prio, event,
    /// event-timeout, mmap).
    pub fn parse(text: &str) -> Result<SpinnerOpt, String> {
        let kinds = SpinKind::ALL.map(SpinKind::name).join(", ");
        let hint = format!(
            "write N@PRIO[:KIND] (e.g. 2@50, 1@0 for SCHED_OTHER, 1@50:event), KIND one of {kinds} (default user)"
        );
        let (body, kind) = match text.split_once(':') {
            Some((b, k)) => match SpinKind::parse(k) {
                Some(kind) => (b, kind),
                None => return Err(format!("'{text}': unknown kind '{k}'; {hint}")),
            },
            None => (text, SpinKind::User),
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
        Ok(SpinnerOpt { per_cpu, priority, kind })
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Wakeup {
    /// Its timer (`--interval`, `--distance`), stored as the model reads it.
    #[serde(flatten)]
    pub timer: rtscope_model::settings::WakeupTimer,
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
    /// `--timerlat`: the kernel's timerlat tracer beside the probe, or
    /// driving its threads.
    pub timerlat: TimerlatMode,
    /// `--aligned`: every thread wakes at the same instants (else thread
    /// i's periods start i/N of a period after the first thread's).
    pub aligned: bool,
    /// `--marker`: the serial port's line the first measured CPU's thread
    /// toggles at each sample it records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marker: Option<MarkerSpec>,
    #[serde(skip)]
    pub marker_line: Option<std::sync::Arc<Marker>>,
    /// `--timerlat user`: each measured CPU's `timerlat_fd`, found when the
    /// tracer is asked for (before the threads start, which open them).
    #[serde(skip)]
    pub timerlat_fds: std::sync::OnceLock<Vec<(usize, std::ffi::CString)>>,
    /// `--policy deadline`: the threads' SCHED_DEADLINE reservation (each
    /// thread's period is its own interval).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Deadline>,
}

/// `--timerlat`: how the kernel's timerlat tracer takes part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum TimerlatMode {
    /// Beside the probe where the kernel has it; the run says why not
    /// elsewhere.
    Auto,
    /// Beside the probe; a kernel without it fails the run.
    On,
    Off,
    /// The probe's threads are timerlat's own user threads (`rtla timerlat
    /// -u`; Linux 6.5+, `osnoise/per_cpu/cpuN/timerlat_fd`); a kernel
    /// without it fails the run.
    User,
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
        Rec::Timerlat { context, latency_ns, .. } => {
            let metric = match context {
                At::Irq => 0,
                At::Thread => 1,
                At::Return => 2,
            };
            Some((metric, latency_ns))
        }
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

    /// Slot 0: with `--timerlat user`, 1 where the thread kept its own grid
    /// (the kernel's timestamps of its timer never reached it). Slot 1:
    /// `--marker`'s toggles the port refused.
    fn extra_slots(&self) -> usize {
        2
    }

    fn notes(&self, slots: &[u64]) -> Vec<String> {
        if let Some(&refused) = slots.get(1).filter(|&&n| n > 0) {
            return vec![format!(
                "--marker: the port refused {refused} of the line's toggles: an instrument on it missed those edges"
            )];
        }
        if slots.first() == Some(&1) {
            return vec![format!(
                "--timerlat user: no timestamp of timerlat's timer reached the thread within {}, so its latencies \
                 are from its own clock read before its first read of timerlat_fd, and can be high by the time the \
                 kernel took to take its own",
                units::human(SYNC_WAIT_NS)
            )];
        }
        Vec::new()
    }

    fn describe(&self) -> String {
        let mut s = format!("interval {}", units::human(self.timer.interval_ns));
        if self.timer.distance_ns > 0 {
            s += &format!(" (+{} per thread)", units::human(self.timer.distance_ns));
        }
        if let Some(sp) = self.spinners {
            s += &format!(", {} spinner(s)/CPU at {} {}", sp.per_cpu, sp.priority, sp.kind.describe());
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
        if let Some(m) = &self.marker {
            s += &format!(", marker {}", m.spec());
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
                            kind: sp.kind,
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
            cmd.args(["__second-process", "--cpus", &list, "--interval-ns", &self.timer.interval_ns.to_string()])
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
    /// their wake-ups, what `rtla timerlat` reports. With `--timerlat
    /// user`, the probe's threads are timerlat's own instead.
    fn beside(&self, common: &Common) -> Option<Beside> {
        if self.timerlat == TimerlatMode::Off {
            return None;
        }
        let period = timerlat_period_us(self.timer.interval_ns);
        let list = rtscope_model::inventory::format_cpu_list(&common.cpus);
        let every = units::human(period * 1000);
        let mut settings = vec![
            Setting::File("osnoise/cpus", list.clone()),
            Setting::File("osnoise/timerlat_period_us", period.to_string()),
        ];
        if self.timerlat == TimerlatMode::User {
            // Without its workload, timerlat starts no thread of its own and
            // takes user threads through timerlat_fd.
            settings.push(Setting::OsnoiseOption("OSNOISE_WORKLOAD", false));
            return Some(Beside {
                tracer: Tracer::Timerlat,
                settings,
                events: &["ftrace/timerlat"],
                metrics: &["timerlat_irq", "timerlat_thread", "timerlat_user"],
                route: timerlat_route,
                required: Some("--timerlat user"),
                threads_at: None,
                align: None,
                own_timer: false,
                what: format!(
                    "the probe's threads were its own user threads (osnoise/per_cpu/cpuN/timerlat_fd, as `rtla \
                     timerlat -u`), each woken every {every} on CPUs {list} by its timer: timerlat_irq is the timer's \
                     expiry to its IRQ handler, timerlat_thread to the thread running in the kernel, latency to the \
                     thread's own timestamp in user space, timerlat_user to the thread entering its next read (its \
                     return to user space and what it did there), for the same wake-ups, as the kernel timestamps \
                     them"
                ),
            });
        }
        // Under SCHED_DEADLINE the probe's threads come before any
        // SCHED_FIFO thread: timerlat's run at the probe's priority, below.
        let (policy, prio, below) = if self.deadline.is_some() {
            (Policy::Fifo, common.priority.max(1), format!("at SCHED_FIFO {}, below", common.priority.max(1)))
        } else if common.policy.is_rt() {
            (common.policy, common.priority.saturating_sub(1).max(1), "one priority below".to_string())
        } else {
            (common.policy, 0, "at SCHED_OTHER, as".to_string())
        };
        let why_beside = if ktracer::has_timerlat_fd() {
            "this kernel has osnoise/per_cpu/cpuN/timerlat_fd (Linux 6.5+): with --timerlat user the probe's threads \
             are timerlat's own, as `rtla timerlat -u`'s"
        } else {
            "this kernel has no osnoise/per_cpu/cpuN/timerlat_fd (Linux 6.5+), through which the probe's threads would \
             be timerlat's own, as `rtla timerlat -u`'s"
        };
        let align =
            (self.timer.distance_ns == 0 && period * 1000 == self.timer.interval_ns).then_some(self.timer.interval_ns);
        let apart = if align.is_some() { ", half a period from the probe's" } else { "" };
        Some(Beside {
            tracer: Tracer::Timerlat,
            settings,
            events: &["ftrace/timerlat"],
            metrics: &["timerlat_irq", "timerlat_thread"],
            route: timerlat_route,
            required: (self.timerlat == TimerlatMode::On).then_some("--timerlat on"),
            threads_at: Some((policy, prio)),
            align,
            own_timer: true,
            what: format!(
                "its threads woke every {every} on CPUs {list}, {below} the probe's threads and on \
                 wake-ups of their own{apart} ({why_beside}); timerlat_irq is its timer's expiry to its IRQ handler, \
                 timerlat_thread to its thread running, as the kernel timestamps them"
            ),
        })
    }

    /// `--timerlat user`: each measured CPU's `timerlat_fd` in the tracefs
    /// the tracer started in, for the threads to open.
    fn tracer_started(&self, common: &Common, root: &std::path::Path) -> Result<(), String> {
        if self.timerlat != TimerlatMode::User {
            return Ok(());
        }
        let mut fds = Vec::new();
        for &c in &common.cpus {
            let Some(p) = ktracer::timerlat_fd(root, c) else {
                let release = rustix::system::uname().release().to_string_lossy().into_owned();
                return Err(format!(
                    "this kernel ({release}) has no osnoise/per_cpu/cpu{c}/timerlat_fd (Linux 6.5+), through which \
                     the probe's threads would be timerlat's own; use --timerlat on to run timerlat beside them"
                ));
            };
            let path = std::ffi::CString::new(p.into_os_string().into_encoded_bytes())
                .map_err(|_| "a timerlat_fd path with a NUL byte".to_string())?;
            fds.push((c, path));
        }
        let _ = self.timerlat_fds.set(fds);
        Ok(())
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
        self.timer.interval_ns / threads as u64 * index as u64
    }

    fn measure(&self, ctx: &ThreadCtx, rec: &mut [Recorder]) {
        if self.timerlat == TimerlatMode::User {
            return self.measure_as_timerlat(ctx, &mut rec[0]);
        }
        let rec = &mut rec[0];
        let interval = self.timer.interval_ns.saturating_add((ctx.index as u64).saturating_mul(self.timer.distance_ns));
        if let Some(dl) = self.deadline {
            return self.measure_under_deadline(ctx, rec, Deadline { period_ns: interval, ..dl });
        }
        self.periodic(ctx, rec, ctx.start_ns, interval, Release::Sleep);
    }
}

/// How a measuring thread's next period begins.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Release {
    /// It sleeps to the period's start (clock_nanosleep, TIMER_ABSTIME).
    Sleep,
    /// It yields under SCHED_DEADLINE and the kernel releases it.
    Deadline,
}

impl Wakeup {
    /// `--policy deadline`: at its start instant the thread takes its
    /// SCHED_DEADLINE reservation, and the kernel starts its first period
    /// inside that call (from its own clock: the thread's grid starts at
    /// its clock read just before the call, so a latency is if anything a
    /// little long). Each job records one sample and ends in sched_yield:
    /// the kernel throttles the thread until its next period begins and
    /// releases it then. Latency = the job's start - its period's start, as
    /// rt-tests' cyclicdeadline measures it; a late job's successor is
    /// timed as the kernel releases it (see `periodic`). The thread ends
    /// under SCHED_DEADLINE (its reservation goes with it).
    fn measure_under_deadline(&self, ctx: &ThreadCtx, rec: &mut Recorder, dl: Deadline) {
        clock::sleep_until(ctx.start_ns);
        let start = clock::now();
        if let Err(e) = sched::set_deadline_self(&dl) {
            return ctx.fail(sched::refusal_here(&dl, ctx.cpu, &e));
        }
        self.periodic(ctx, rec, start, dl.period_ns, Release::Deadline);
    }

    /// The measuring loop from `start`, a period at a time, latency = now -
    /// the period's start. `Release::Sleep`: the thread sleeps to each
    /// period's start; a latency of a whole period or more counts the
    /// periods it missed as overruns and the next sleep is to the next
    /// period still ahead. `Release::Deadline`: each job ends in
    /// sched_yield and the kernel releases the next at its period's start,
    /// or at once where that is past: a late job's successor belongs to
    /// the period after the late job's own (no period is skipped), unless
    /// the job ended a whole period after its deadline, when the kernel
    /// starts a new period at the yield (CBS's replenishment that lags too
    /// far); a job a period or more late counts as many overruns.
    /// `--marker` toggles its line each sample of the first thread.
    fn periodic(&self, ctx: &ThreadCtx, rec: &mut Recorder, start: u64, period: u64, release: Release) {
        let flush = self.flush.as_ref();
        // `--marker`: the first thread's samples, edge for edge.
        let marker = self.marker_line.as_deref().filter(|_| ctx.index == 0);
        let mut next = start;
        loop {
            next += period;
            match release {
                Release::Sleep => clock::sleep_until(next),
                Release::Deadline => {
                    let ended = clock::now();
                    if ended >= next + period {
                        next = ended;
                    }
                    // SAFETY: sched_yield has no preconditions.
                    unsafe { libc::sched_yield() };
                }
            }
            let now = clock::now();
            let latency = now.saturating_sub(next);
            rec.record(now, latency);
            if let Some(m) = marker
                && now >= ctx.record_from_ns
            {
                m.toggle();
            }
            if latency >= period {
                let missed = latency / period;
                rec.overrun(missed);
                if release == Release::Sleep {
                    next += missed * period;
                }
            }
            if ctx.breached(now, latency) || ctx.done(now, rec.count()) {
                break;
            }
            rec.maybe_checkpoint(now);
            if let Some(f) = flush {
                f.flush();
            }
        }
        if let Some(m) = marker {
            ctx.set_extra(1, m.failed.load(std::sync::atomic::Ordering::Relaxed));
        }
    }

    /// `--timerlat user`: the thread sleeps in a read of its CPU's
    /// `timerlat_fd` and the kernel's timer wakes it every period. The
    /// kernel's periods start inside the first read (its clock read there)
    /// and keep to their grid, skipping the instants already past when the
    /// thread reads again. The thread keeps the same grid: first from its
    /// own clock read before that first read, then, once the tracer's
    /// reader has seen one, from the kernel's own timestamp of a timer
    /// expiry (the IRQ record's time less its latency, a little late if
    /// anything: the grid is moved earlier by any later one that says so).
    /// Samples are recorded from then on; a second without any (the
    /// tracer's records lost) and the thread keeps its own grid, saying so.
    fn measure_as_timerlat(&self, ctx: &ThreadCtx, rec: &mut Recorder) {
        let fd = self.timerlat_fds.get().and_then(|v| v.iter().find(|(c, _)| *c == ctx.cpu)).map(|(_, p)| p);
        let Some(path) = fd else {
            return ctx.fail(format!(
                "--timerlat user: this kernel has no osnoise/per_cpu/cpu{}/timerlat_fd (Linux 6.5+); use --timerlat \
                 on to run timerlat beside the probe",
                ctx.cpu
            ));
        };
        use rustix::fs::{Mode, OFlags};
        let fd = match rustix::fs::open(path.as_c_str(), OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) => {
                return ctx.fail(format!(
                    "--timerlat user: cannot open {} ({e}): another program (rtla timerlat -u) may hold it",
                    path.to_string_lossy()
                ));
            }
        };
        let period = timerlat_period_us(self.timer.interval_ns) * 1000;
        let flush = self.flush.as_ref();
        let mut byte = [0u8; 1];
        clock::sleep_until(ctx.start_ns);
        let (mut due, mut fresh) = (0, true);
        let (mut seen, mut synced) = (0, false);
        let give_up = ctx.start_ns.saturating_add(SYNC_WAIT_NS);
        loop {
            // Where the kernel will wake the thread: its next period, or
            // the first still ahead (it returns at once, waking nothing,
            // before its current one has passed).
            let entry = clock::now();
            if fresh {
                due = entry;
            }
            let waits = fresh || entry >= due;
            if waits {
                due += period;
                if entry > due {
                    let missed = (entry - due).div_ceil(period);
                    if !fresh {
                        rec.overrun(missed);
                    }
                    due += missed * period;
                }
                fresh = false;
            }
            if let Err(e) = rustix::io::read(&fd, &mut byte) {
                if e == rustix::io::Errno::INTR {
                    continue;
                }
                return ctx.fail(format!(
                    "--timerlat user: reading {} failed ({e}): the tracer stopped (another program changed it, or \
                     the thread left its CPU)",
                    path.to_string_lossy()
                ));
            }
            let now = clock::now();
            if !waits || now < due {
                continue;
            }
            let expiry = ctx.tracer_expiry();
            if expiry != 0 && expiry != seen {
                seen = expiry;
                let shift = grid_shift(due, expiry, period);
                if !synced || shift < 0 {
                    due = due.saturating_add_signed(shift);
                }
                synced = true;
            } else if !synced && now >= give_up {
                synced = true;
                ctx.set_extra(0, 1);
            }
            if !synced {
                continue;
            }
            let latency = now.saturating_sub(due);
            rec.record(now, latency);
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

/// How long a `--timerlat user` thread waits for the kernel's timestamp of
/// its timer before it keeps its own grid.
const SYNC_WAIT_NS: u64 = 1_000_000_000;

/// How far to move the instant `due` to the nearest one of the grid of
/// `period` on which `expiry` lies: in [-period/2, period/2).
fn grid_shift(due: u64, expiry: u64, period: u64) -> i64 {
    let p = period as i128;
    let d = (expiry as i128 - due as i128).rem_euclid(p);
    (if d >= p / 2 { d - p } else { d }) as i64
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
            timer: rtscope_model::settings::WakeupTimer { interval_ns: 1_000_000, distance_ns: 0 },
            spinners: None,
            spin_active_ns: 0,
            spin_pause_ns: 0,
            second_process: false,
            cache_flush: false,
            flush_bytes: None,
            flush: None,
            timerlat: TimerlatMode::Off,
            aligned: false,
            marker: None,
            marker_line: None,
            timerlat_fds: Default::default(),
            deadline: None,
        };
        assert_eq!((0..4).map(|i| w.first_offset(i, 4)).collect::<Vec<_>>(), [0, 250_000, 500_000, 750_000]);
        assert_eq!(w.first_offset(0, 1), 0);
        w.aligned = true;
        assert_eq!(w.first_offset(3, 4), 0);
    }

    /// The grid is moved to the kernel's instant nearest the thread's own,
    /// either way, by less than half a period.
    #[test]
    fn grid_shift_moves_to_the_nearest_instant_of_the_kernels_grid() {
        assert_eq!(grid_shift(10_000, 10_000, 1_000), 0);
        assert_eq!(grid_shift(10_000, 20_300, 1_000), 300);
        assert_eq!(grid_shift(10_000, 5_700, 1_000), -300);
        assert_eq!(grid_shift(10_300, 3_000_000, 1_000), -300);
        assert_eq!(grid_shift(10_000, 10_500, 1_000), -500);
    }

    #[test]
    fn spinner_option_parses() {
        assert_eq!(SpinnerOpt::parse("2@50"), Ok(SpinnerOpt { per_cpu: 2, priority: 50, kind: SpinKind::User }));
        assert_eq!(SpinnerOpt::parse("1@0:sys"), Ok(SpinnerOpt { per_cpu: 1, priority: 0, kind: SpinKind::Sys }));
        for k in SpinKind::ALL {
            assert_eq!(SpinnerOpt::parse(&format!("1@40:{}", k.name())).map(|o| o.kind), Ok(k));
        }
        let e = SpinnerOpt::parse("1@40:disk").unwrap_err();
        assert!(e.contains("unknown kind 'disk'") && e.contains("event-timeout"), "{e}");
        assert!(SpinnerOpt::parse("2").unwrap_err().contains("N@PRIO"));
        assert!(SpinnerOpt::parse("0@5").is_err());
        assert!(SpinnerOpt::parse("1@100").is_err());
    }
}
