//! The probes' arguments (`wakeup`, `noise`, `sleep`, `ptimer`, `task`, `netlat`)
//! and their checks before measuring: each resolves ([`ProbeArgs`]) into
//! a [`ProbePlan`]. [`ProbeCmd`] is their subcommands, one line each.

use super::*;
use crate::probe::Probe;
use crate::probe::wakeup::TimerlatMode;
use crate::sys::marker::{Marker, MarkerSpec};
use crate::sys::sched::Deadline;
use rtscope_model::descriptor::{self, Descriptor, Duty};
use rtscope_model::settings::WakeupTimer;

/// The per-CPU probes' subcommands, and what each resolves with: a probe's
/// one line, its row in the descriptor table (which names the subcommand),
/// its variant and its arguments ([`ProbeArgs`]).
macro_rules! probe_commands {
    ($($(#[$doc:meta])* $row:ident => $variant:ident($args:ty),)*) => {
        /// A per-CPU probe's subcommand (flattened into [`Cmd`]).
        #[derive(Subcommand, Debug)]
        pub enum ProbeCmd {
            $($(#[$doc])* #[command(name = descriptor::$row.name)] $variant($args),)*
        }

        impl ProbeCmd {
            /// The probe's row in the descriptor table.
            pub fn descriptor(&self) -> &'static Descriptor {
                match self {
                    $(ProbeCmd::$variant(_) => &descriptor::$row,)*
                }
            }

            /// Its common settings, as parsed.
            pub fn common_mut(&mut self) -> &mut super::CommonArgs {
                match self {
                    $(ProbeCmd::$variant(a) => &mut a.common,)*
                }
            }

            /// cyclictest's histogram to print at the end, if asked.
            pub fn histogram(&self) -> Option<HistogramOpts> {
                match self {
                    $(ProbeCmd::$variant(a) => ProbeArgs::histogram(a),)*
                }
            }

            /// Takes a duty (the monitor's) where it spins for part of
            /// each window, where the flags `set` (ids) do not set it.
            pub fn take_duty(&mut self, duty: Duty, set: &[String]) {
                match self {
                    $(ProbeCmd::$variant(a) => ProbeArgs::take_duty(a, duty, set),)*
                }
            }

            /// Its arguments, checked and resolved for a run of `kind` (the
            /// subcommand that makes it: the probe's own, or `run`).
            pub fn resolve(&self, kind: &str) -> Result<ProbePlan> {
                match self {
                    $(ProbeCmd::$variant(a) => ProbeArgs::resolve(a, kind),)*
                }
            }
        }
    };
}

probe_commands! {
    /// Timer interrupt to thread latency (like cyclictest and IntrTime): one SCHED_FIFO thread per CPU sleeps to an
    /// absolute CLOCK_MONOTONIC instant; latency = wake time - programmed time.
    WAKEUP => Wakeup(WakeupArgs),
    /// OS noise (like oslat and rtla osnoise, the NT real-time study's preemption test): one SCHED_FIFO thread per CPU
    /// busy-loops reading the CPU counter; a gap between two reads longer than --ratio x the shortest (reference)
    /// iteration is an interruption, recorded as its length minus the reference.
    NOISE => Noise(NoiseArgs),
    /// Sleep accuracy (the NT real-time study's SleepEx test): relative sleeps through nanosleep, clock_nanosleep, poll,
    /// epoll_wait, select and a one-shot timerfd; deviation = actual - requested, signed.
    SLEEP => Sleep(SleepArgs),
    /// Periodic timer drift (the NT real-time study's multimedia timers): timerfd and POSIX timers (SIGEV_SIGNAL,
    /// SIGEV_THREAD_ID); drift = event seen - programmed expiry, signed, and missed expirations.
    PTIMER => Ptimer(PtimerArgs),
    /// A periodic task that counts its missed deadlines: one SCHED_FIFO thread per CPU releases a job every --period
    /// that runs --compute of calibrated work; release = start - release instant, response = completion - release,
    /// lateness = completion - deadline; a job later than --deadline plus --buffers - 1 periods is a miss.
    TASK => Task(TaskArgs),
    /// UDP/IP stack latency (the NT real-time study's network stack test): a sender and a real-time receiver per CPU over
    /// loopback or a veth pair between two namespaces; rx_stack = send call -> kernel receive timestamp, rx_wake ->
    /// recvmsg returns, tx_sched / tx_sw = send call -> queued / handed to the driver. --serve / --peer: round trip
    /// to a responder on another host.
    NETLAT => Netlat(NetlatArgs),
    /// Hardware, firmware and hypervisor latency (like rt-tests' hwlatdetect): the kernel's hwlat tracer spins on a
    /// CPU with interrupts off for --width of every --window reading the clock; each window's longest gap above --min
    /// is a sample (latency, inner, outer), recorded on the CPU it was measured on.
    HWLAT => Hwlat(HwlatArgs),
    /// Serial round trip to another machine (the references' two-machine rigs): a numbered stimulus frame written
    /// to --tty every --interval, answered by `rtscope respond` on the machine under test; rtt = the write -> the
    /// answer read back, lost answers counted and named.
    SERIAL_RTT => SerialRtt(SerialRttArgs),
}

/// A probe's arguments: checked, then resolved into what to do.
pub trait ProbeArgs {
    /// Resolves for a run of `kind` (the subcommand that makes the run).
    fn resolve(&self, kind: &str) -> Result<ProbePlan>;
    /// cyclictest's histogram of its first metric, printed at the end
    /// (`-h N`, wakeup's cyclictest habit); none by default.
    fn histogram(&self) -> Option<HistogramOpts> {
        None
    }
    /// Takes `duty` (the monitor's low duty) where the probe spins for part
    /// of each window, for each of its two flags that `set` (the ids of the
    /// flags the user's arguments set) does not hold; the other probes keep
    /// their own settings.
    fn take_duty(&mut self, _duty: Duty, _set: &[String]) {}
}

/// Whether the user's arguments set the flag `id` (its long name with `_`).
pub(super) fn is_set(set: &[String], id: &str) -> bool {
    set.iter().any(|s| s == id)
}

/// What a probe's subcommand asks for.
pub enum ProbePlan {
    /// A measuring run: the common settings, the probe, and warnings to
    /// print before it (unless quiet).
    Measure(Box<Common>, Box<dyn Probe>, Vec<String>),
    /// `netlat --serve`: the responder to a peer's round trips, not a
    /// measurement.
    Serve { addr: std::net::SocketAddrV4, iface: Option<String>, cpu: usize, hw_wanted: bool, common: Box<Common> },
}

impl ProbePlan {
    fn measure(common: Common, probe: impl Probe + 'static) -> ProbePlan {
        ProbePlan::Measure(Box::new(common), Box::new(probe), Vec::new())
    }
}

#[derive(Args, Debug)]
pub struct WakeupArgs {
    /// Period of each thread (a bare number is microseconds, as cyclictest's -i).
    #[arg(long, short = 'i', value_name = "DUR", default_value = "1ms", value_parser = dur_us_above_0)]
    pub interval: u64,
    /// Add DUR to each further thread's interval (cyclictest -d, whose default is 500us; rtscope's is 0; a bare
    /// number is microseconds).
    #[arg(long, short = 'd', value_name = "DUR", default_value = "0", value_parser = dur_us)]
    pub distance: u64,
    /// N background busy threads per measured CPU at priority PRIO (0: SCHED_OTHER), busy --spin-active then
    /// idle --spin-pause (IntrTime's idle threads); `:KIND` says what they do busy: user (spin, -i1), prio (set
    /// their priority, -i2), event-timeout (pairs waking each other, 10 s waits, -i3), event (no timeout, -i4),
    /// mmap (map and unmap 64 KiB, ILTiming's -i5), sys (a system call a turn).
    #[arg(long, value_name = "N@PRIO[:KIND]", value_parser = SpinnerOpt::parse)]
    pub spinners: Option<SpinnerOpt>,
    /// Spinners' busy time per cycle.
    #[arg(long, value_name = "DUR", default_value = "33ms", value_parser = dur, requires = "spinners")]
    pub spin_active: u64,
    /// Spinners' idle time per cycle.
    #[arg(long, value_name = "DUR", default_value = "33ms", value_parser = dur, requires = "spinners")]
    pub spin_pause: u64,
    /// Run a second process that wakes on the same CPUs half a period apart, so that every wake-up switches address
    /// spaces (IntrTime -sp).
    #[arg(long)]
    pub second_process: bool,
    /// Evict the caches after each sample, outside the timed part: read a buffer twice the size of the CPU's private
    /// caches (L1/L2).
    #[arg(long)]
    pub cache_flush: bool,
    /// Bytes read per --cache-flush (e.g. 64M to evict a 32 MB L3 too; needs a long --interval); at most half of
    /// the memory available (MemAvailable in /proc/meminfo), checked before anything is measured.
    #[arg(long, value_name = "SIZE", requires = "cache_flush", value_parser = flush_size)]
    pub flush_size: Option<usize>,
    /// The kernel's timerlat tracer beside the probe (what `rtla timerlat` reads): its threads wake on the measured
    /// CPUs every --interval, one priority below the probe's, and its IRQ and thread latencies are stored as the
    /// series timerlat_irq and timerlat_thread. auto: where the kernel has it (the run says why not elsewhere); on:
    /// fail where it cannot run; user: the probe's threads are timerlat's own (`rtla timerlat -u`, Linux 6.5+), and
    /// timerlat_user (their return to user space) is stored too, for the same wake-ups.
    #[arg(long, value_name = "WHEN", default_value = "auto")]
    pub timerlat: TimerlatMode,
    /// Every thread wakes at the same instants (cyclictest -A 0); by default thread i's periods start i/N of a period
    /// after the first thread's, as cyclictest's threads do by starting one after the other.
    #[arg(long)]
    pub aligned: bool,
    /// A marker an instrument outside the machine can time: the first measured CPU's thread toggles this serial
    /// port's RTS (or DTR) line, or this GPIO line, at each sample it records, right after its wake-up
    /// (tty:PATH[:rts|dtr], e.g. tty:/dev/ttyS1:rts; gpio:/dev/gpiochipN:LINE, e.g. gpio:/dev/gpiochip0:17); the
    /// line is set back as found at the end.
    #[arg(long, value_name = "KIND:PATH[:LINE]", value_parser = MarkerSpec::parse)]
    pub marker: Option<MarkerSpec>,
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub cyclictest: Cyclictest,
}

#[derive(Args, Debug)]
pub struct HwlatArgs {
    /// Time the kernel's thread spins with interrupts off per window (hwlat_detector/width; hwlatdetect's --width).
    #[arg(long, value_name = "DUR", default_value = "500ms", value_parser = dur)]
    pub width: u64,
    /// The window (hwlat_detector/window; hwlatdetect's --window): one sample at most per window.
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = dur)]
    pub window: u64,
    /// A gap at or below this is not a sample (tracing_thresh; hwlatdetect's --threshold).
    #[arg(long, value_name = "DUR", default_value = "10us", value_parser = dur)]
    pub min: u64,
    /// round-robin: one thread moved across the measured CPUs, a window each (the kernel's default, hwlatdetect's);
    /// per-cpu: a thread on every measured CPU at once.
    #[arg(long, value_name = "MODE", default_value = "round-robin")]
    pub mode: crate::probe::hwlat::HwlatMode,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct NoiseArgs {
    /// An interruption is a gap between two consecutive counter reads longer than RATIO x the reference iteration
    /// (the shortest mean iteration over the 1 ms windows of a 20 ms warm-up of the same loop); it is recorded as
    /// its length minus the reference (metric `interruption`).
    #[arg(long, value_name = "RATIO", default_value_t = 4.0)]
    pub ratio: f64,
    /// Instead of --ratio: an interruption is a gap longer than DUR (e.g. 1us, as oslat's buckets).
    #[arg(long, value_name = "DUR", value_parser = dur, conflicts_with = "ratio")]
    pub gap: Option<u64>,
    /// Busy-loop this long per cycle.
    #[arg(long, value_name = "DUR", default_value = "33ms", value_parser = dur)]
    pub active: u64,
    /// Then sleep this long, so that a real-time spinner never starves the machine (0: no pause; RT throttling
    /// then still stops the thread for what it reserves, which shows as interruptions).
    #[arg(long, value_name = "DUR", default_value = "33ms", value_parser = dur)]
    pub pause: u64,
    /// The kernel's osnoise tracepoints beside the probe (what `rtla osnoise` counts, without its own workload): the
    /// IRQs, softirqs and NMIs that interrupted the probe's loop and the threads that outranked it, timed as the kernel
    /// accounts them, stored as the series osnoise_irq, osnoise_softirq, osnoise_thread and osnoise_nmi. auto: where
    /// the kernel has the osnoise tracer and its OSNOISE_WORKLOAD option; on: fail where it cannot run.
    #[arg(long, value_name = "WHEN", default_value = "auto")]
    pub osnoise: crate::probe::KernelTracerMode,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct SleepArgs {
    /// The APIs to time, each its own metric `<api>@<length>`: from CLOCK_MONOTONIC read just before the call to
    /// CLOCK_MONOTONIC read when it returns, minus the requested length (signed: an early wake-up is negative).
    /// poll uses ppoll and epoll_wait uses epoll_pwait2 (ns timeouts; before Linux 5.11 epoll_wait, whose
    /// timeout is in ms, rounded up, with a warning); select rounds up to 1us. A call that fails is counted
    /// (failed_calls, a note); an API failing 10 times in a row ends the run with an error.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "API,...",
        default_value = "nanosleep,clock-nanosleep,poll,epoll-wait,select,timerfd"
    )]
    pub api: Vec<timers::SleepApi>,
    /// Sleep lengths, e.g. 100us,1ms,5ms.
    #[arg(long, value_name = "DUR,...", value_delimiter = ',', default_value = "5ms", value_parser = dur_above_0)]
    pub sleep: Vec<u64>,
    /// Busy-wait a random time in [0, DUR) before each sleep, so that the sleeps do not stay in phase with the
    /// timer interrupt; capped at each sleep's length (a 100us sleep gets [0, 100us)), so that the real-time thread
    /// is busy at most about a third of the time.
    #[arg(long, value_name = "DUR", default_value = "1ms", value_parser = dur)]
    pub phase: u64,
    /// Set the measuring threads' timer slack (PR_SET_TIMERSLACK) [default: leave it; the value in force is stored]
    #[arg(long, value_name = "DUR", value_parser = dur)]
    pub timer_slack: Option<u64>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct PtimerArgs {
    /// Timer period (1ms: the OMAC cycle; the NT real-time study used 5ms).
    #[arg(long, value_name = "DUR", default_value = "1ms", value_parser = dur_above_0)]
    pub period: u64,
    /// The timer kinds, each its own metric: drift = CLOCK_MONOTONIC when the wait returns (read(2) of the timerfd,
    /// sigwaitinfo(2) for the POSIX timers) minus the programmed expiry start + k x period, signed.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "KIND,...",
        default_value = "timerfd,posix-signal,posix-thread"
    )]
    pub timer: Vec<TimerKind>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct TaskArgs {
    /// The jobs' period: a job is released at start + k x DUR.
    #[arg(long, value_name = "DUR", default_value = "1ms", value_parser = dur_above_0)]
    pub period: u64,
    /// Each job's work: a busy loop (or with --memory, reads of a buffer) calibrated before the run to take DUR
    /// when nothing interrupts it.
    #[arg(long, value_name = "DUR", default_value = "200us", value_parser = dur)]
    pub compute: u64,
    /// A job's deadline after its release [default: the period]
    #[arg(long, value_name = "DUR", value_parser = dur)]
    pub deadline: Option<u64>,
    /// A job may complete up to N - 1 periods after its deadline before it counts as a miss (N buffers of an audio
    /// or modem stream).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub buffers: u32,
    /// Make the work memory-touching: read one byte per cache line of a buffer of SIZE, wrapping round it (e.g. 8M,
    /// beyond the last-level cache), instead of a busy loop.
    #[arg(long, value_name = "SIZE", value_parser = flush_size)]
    pub memory: Option<usize>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct NetlatArgs {
    /// Send one datagram every DUR per measured CPU (the NT real-time study's 10 ms; 100us..10s; a bare number is
    /// microseconds, as cyclictest's -i).
    #[arg(long, short = 'i', value_name = "DUR", default_value = "10ms", value_parser = dur_us)]
    pub interval: u64,
    /// UDP payload bytes (the NT real-time study's 54; 52..1472, one Ethernet frame at most).
    #[arg(long, value_name = "BYTES", default_value_t = 54,
          value_parser = clap::value_parser!(u16).range(netlat::MIN_SIZE as i64..=netlat::MAX_SIZE as i64))]
    pub size: u16,
    /// loopback (127.0.0.1, the loopback driver); netns (a veth pair between two network namespaces rtscope creates
    /// and the kernel removes with rtscope, on any exit); iface:NAME (with --peer or --serve: through interface
    /// NAME, with its NIC's hardware timestamps where it has them).
    #[arg(long, value_name = "PATH", default_value = "loopback", value_parser = NetPath::parse)]
    pub path: NetPath,
    /// With --path iface:NAME: leave the NIC's hardware timestamping configuration alone (e.g. when ptp4l owns it)
    /// and use software timestamps only. Without it, rtscope turns the NIC's timestamping of every packet on for
    /// the run where the NIC can, and puts the previous configuration back after.
    #[arg(long)]
    pub software_timestamps: bool,
    /// Run each sender as its own process (the receive then crosses address spaces), not a thread.
    #[arg(long)]
    pub processes: bool,
    /// Pin every sender to CPU N [default: its receiver's CPU, so that the receive softirq runs there]
    #[arg(long, value_name = "N")]
    pub sender_cpu: Option<usize>,
    /// Be the responder on the target: echo every rtscope datagram arriving at ADDR:PORT at --priority on the first
    /// of --cpus [default: the last CPU], with the target's own receive and send timing. Runs until Ctrl-C or
    /// --duration; stores nothing (the --peer side does).
    #[arg(long, value_name = "ADDR:PORT", conflicts_with_all = ["peer", "processes", "sender_cpu"])]
    pub serve: Option<std::net::SocketAddrV4>,
    /// Measure the round trip to an `rtscope netlat --serve ADDR:PORT` on the target (it must answer a hello
    /// first): rtt, transit, rx_wake and the target's target_wake, target_turnaround, target_tx_sw.
    #[arg(long, value_name = "ADDR:PORT", conflicts_with_all = ["processes", "sender_cpu"])]
    pub peer: Option<std::net::SocketAddrV4>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct NetlatSenderArgs {
    #[arg(long)]
    pub cpu: usize,
    #[arg(long, value_enum)]
    pub policy: Policy,
    #[arg(long)]
    pub priority: u8,
    #[arg(long)]
    pub size: usize,
    #[arg(long)]
    pub session: u32,
}

#[derive(Args, Debug)]
pub struct SecondArgs {
    #[arg(long)]
    pub cpus: String,
    #[arg(long)]
    pub interval_ns: u64,
    #[arg(long)]
    pub priority: u8,
}

impl ProbeArgs for WakeupArgs {
    fn histogram(&self) -> Option<HistogramOpts> {
        self.cyclictest.histogram()
    }

    fn resolve(&self, kind: &str) -> Result<ProbePlan> {
        const MIN_INTERVAL: u64 = 50_000;
        if let Some(d) = self.common.duration.map(RunDuration::ns).filter(|&d| d < self.interval) {
            bail!(
                "--duration {} is shorter than --interval {}: no sample would be taken",
                rtscope_model::units::human(d),
                rtscope_model::units::human(self.interval)
            );
        }
        if self.interval < MIN_INTERVAL && !self.common.force {
            bail!(
                "--interval {} is below 50us: the probe would mostly measure itself and can starve the CPU; add --force if you mean it",
                rtscope_model::units::human(self.interval)
            );
        }
        if self.spinners.is_some() && (self.spin_active == 0 || self.spin_pause == 0) && !self.common.force {
            bail!(
                "--spin-active and --spin-pause must both be above 0 so that spinners cannot starve the machine (or add --force)"
            );
        }
        if self.timerlat == TimerlatMode::User {
            if self.distance > 0 {
                bail!(
                    "--distance with --timerlat user: timerlat wakes every thread at one period; drop --distance, or use --timerlat on"
                );
            }
            if !(100_000..=1_000_000_000).contains(&self.interval) || !self.interval.is_multiple_of(1000) {
                bail!(
                    "--interval {} with --timerlat user: timerlat's period is whole microseconds from 100us to 1s; give one such --interval",
                    rtscope_model::units::human(self.interval)
                );
            }
        }
        let given = self.cyclictest.apply(&self.common)?;
        let mut common = given.resolve(kind)?;
        if given.policy == MeasurePolicy::Deadline {
            if self.timerlat == TimerlatMode::User {
                bail!(
                    "--policy deadline with --timerlat user: the kernel's timerlat tracer wakes those threads; drop one \
                     of them (--timerlat on runs the tracer beside deadline threads)"
                );
            }
            common.deadline = Some(Deadline::new(given.dl_runtime, self.interval).map_err(anyhow::Error::msg)?);
        }
        const MAX_PERIOD: u64 = 10_000_000_000;
        let longest = (common.cpus.len() as u64 - 1).saturating_mul(self.distance).saturating_add(self.interval);
        if longest > MAX_PERIOD {
            bail!(
                "--interval (plus --distance per further thread) must stay within 10s: a thread only sees a stop request when it wakes"
            );
        }
        if let Some(size) = self.flush_size {
            crate::sys::mem::check_share("--flush-size", size as u64, "give a smaller --flush-size (e.g. 64M)")
                .map_err(anyhow::Error::msg)?;
        }
        if self.marker.is_some() && !self.common.instances.is_empty() {
            bail!("--marker with --instances: one line marks one thread; measure one instance with --marker");
        }
        let marker = self.marker.as_ref().map(Marker::open).transpose().map_err(anyhow::Error::msg)?;
        let flush =
            self.cache_flush.then(|| FlushBuffer::new(self.flush_size)).transpose().map_err(anyhow::Error::msg)?;
        if let Some(f) = &flush {
            let cost = f.cost_ns();
            if cost > self.interval / 2 && !self.common.force {
                bail!(
                    "--cache-flush reads {} KiB in {} per sample, more than half of --interval {}: use a longer --interval or a smaller --flush-size (or --force)",
                    f.bytes() >> 10,
                    rtscope_model::units::human(cost),
                    rtscope_model::units::human(self.interval)
                );
            }
        }
        let deadline = common.deadline;
        Ok(ProbePlan::measure(
            common,
            Wakeup {
                timer: WakeupTimer { interval_ns: self.interval, distance_ns: self.distance },
                spinners: self.spinners,
                spin_active_ns: self.spin_active,
                spin_pause_ns: self.spin_pause,
                second_process: self.second_process,
                cache_flush: self.cache_flush,
                flush_bytes: flush.as_ref().map(FlushBuffer::bytes),
                flush,
                timerlat: self.timerlat,
                aligned: self.aligned,
                marker: self.marker.clone(),
                marker_line: marker.map(std::sync::Arc::new),
                timerlat_fds: Default::default(),
                deadline,
            },
        ))
    }
}

/// Refuses a `--duration` shorter than `what` (`flag` `len`): no sample would be taken.
fn check_duration_covers(common: &CommonArgs, flag: &str, len: u64) -> Result<()> {
    if let Some(d) = common.duration.map(RunDuration::ns).filter(|&d| d < len) {
        bail!(
            "--duration {} is shorter than {flag} {}: no sample would be taken",
            rtscope_model::units::human(d),
            rtscope_model::units::human(len)
        );
    }
    Ok(())
}

/// At most 10 s: a thread only sees a stop request between two of them.
fn check_at_most_10s(flag: &str, ns: u64) -> Result<()> {
    if ns > 10_000_000_000 {
        bail!("{flag} must be at most 10s: a thread only sees a stop request between two of them (e.g. {flag} 33ms)");
    }
    Ok(())
}

impl ProbeArgs for NetlatArgs {
    fn resolve(&self, kind: &str) -> Result<ProbePlan> {
        use rtscope_model::units::human;
        if self.interval < netlat::MIN_INTERVAL_NS {
            bail!(
                "--interval {} is below 100us: netlat sends at most 10000 datagrams per second per CPU (e.g. --interval 1ms)",
                human(self.interval)
            );
        }
        check_at_most_10s("--interval", self.interval)?;
        check_duration_covers(&self.common, "--interval", self.interval)?;
        let common = self.common.resolve(kind)?;
        if let Some(c) = self.sender_cpu {
            cpu::check("--sender-cpu", &[c])?;
        }
        let iface = match &self.path {
            NetPath::Iface(n) => Some(n.clone()),
            _ => None,
        };
        if let Some(addr) = self.serve {
            if self.path == NetPath::Netns {
                bail!(
                    "--serve with --path netns: run the responder inside a namespace of your own instead (ip netns exec NS rtscope netlat --serve ...)"
                );
            }
            let cpu = match &self.common.measure.cpus {
                Some(_) => common.cpus[0],
                None => *common.cpus.last().unwrap_or(&0),
            };
            return Ok(ProbePlan::Serve {
                addr,
                iface,
                cpu,
                hw_wanted: !self.software_timestamps,
                common: Box::new(common),
            });
        }
        let (probe, warnings) = match self.peer {
            Some(peer) => Netlat::peer(
                self.interval,
                self.size as usize,
                self.path.clone(),
                peer,
                &common.cpus,
                !self.software_timestamps,
            )?,
            None => Netlat::local(
                self.interval,
                self.size as usize,
                self.path.clone(),
                self.processes,
                self.sender_cpu,
                &common.cpus,
            )?,
        };
        Ok(ProbePlan::Measure(Box::new(common), Box::new(probe), warnings))
    }
}

impl ProbeArgs for HwlatArgs {
    fn take_duty(&mut self, duty: Duty, set: &[String]) {
        if !is_set(set, "width") {
            self.width = duty.on_ns;
        }
        if !is_set(set, "window") {
            self.window = duty.every_ns;
        }
    }

    fn resolve(&self, kind: &str) -> Result<ProbePlan> {
        use rtscope_model::units::human;
        if self.window < 1_000 || self.window > 1_000_000_000 {
            bail!("--window {} must be between 1us and 1s (e.g. --window 1s, hwlatdetect's)", human(self.window));
        }
        if self.width < 1_000 || self.width >= self.window {
            bail!(
                "--width {} must be at least 1us and shorter than --window {} (e.g. --width 500ms with --window 1s)",
                human(self.width),
                human(self.window)
            );
        }
        if self.min < 1_000 {
            bail!(
                "--min {}: the tracer counts whole microseconds; give at least 1us (e.g. --min 10us)",
                human(self.min)
            );
        }
        check_duration_covers(&self.common, "--window", self.window)?;
        let common = self.common.resolve(kind)?;
        Ok(ProbePlan::measure(common, crate::probe::hwlat::Hwlat::new(self.width, self.window, self.min, self.mode)))
    }
}

impl ProbeArgs for NoiseArgs {
    fn take_duty(&mut self, duty: Duty, set: &[String]) {
        if !is_set(set, "active") {
            self.active = duty.on_ns;
        }
        if !is_set(set, "pause") {
            self.pause = duty.every_ns - duty.on_ns;
        }
    }

    fn resolve(&self, kind: &str) -> Result<ProbePlan> {
        if !(1.0..=1000.0).contains(&self.ratio) {
            bail!("--ratio must be between 1 and 1000 (e.g. --ratio 4, the NT real-time study's)");
        }
        if self.active < 100_000 {
            bail!("--active must be at least 100us (e.g. --active 33ms)");
        }
        check_at_most_10s("--active", self.active)?;
        check_at_most_10s("--pause", self.pause)?;
        if let Some(g) = self.gap.filter(|&g| g < 10 || g >= self.active) {
            bail!("--gap {} must be between 10ns and --active (e.g. --gap 1us)", rtscope_model::units::human(g));
        }
        check_duration_covers(&self.common, "--active", self.active)?;
        let common = self.common.resolve(kind)?;
        // --pause 0 is warned about with the run's warnings (Noise::warnings).
        let throttling_off =
            std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").map(|s| s.trim() == "-1").unwrap_or(false);
        if self.pause == 0 && common.policy.is_rt() && throttling_off && !self.common.force {
            bail!(
                "--pause 0 at --policy {} with RT throttling off (sched_rt_runtime_us = -1) would starve everything else on the measured CPUs: give a --pause, use --policy other, or add --force",
                common.policy.flag_value()
            );
        }
        let calibration = crate::sys::tsc::calibrate(50_000_000);
        let mut noise = Noise::new(self.ratio, self.gap, self.active, self.pause, calibration);
        noise.osnoise = self.osnoise;
        Ok(ProbePlan::measure(common, noise))
    }
}

impl ProbeArgs for SleepArgs {
    fn resolve(&self, kind: &str) -> Result<ProbePlan> {
        let mut apis = self.api.clone();
        dedup(&mut apis);
        let mut lengths = self.sleep.clone();
        dedup(&mut lengths);
        for &l in &lengths {
            check_at_most_10s("--sleep", l)?;
        }
        check_at_most_10s("--phase", self.phase)?;
        if self.timer_slack == Some(0) {
            bail!(
                "--timer-slack 0 would reset the slack to the thread's default (a kernel rule); use --timer-slack 1ns for the least"
            );
        }
        check_duration_covers(&self.common, "--sleep", lengths.iter().copied().min().unwrap_or(0))?;
        let common = self.common.resolve(kind)?;
        let epoll_pwait2 = !apis.contains(&timers::SleepApi::EpollWait) || timers::has_epoll_pwait2();
        Ok(ProbePlan::measure(common, Sleep::new(apis, lengths, self.phase, self.timer_slack, epoll_pwait2)))
    }
}

impl ProbeArgs for PtimerArgs {
    fn resolve(&self, kind: &str) -> Result<ProbePlan> {
        const MIN_PERIOD: u64 = 50_000;
        if self.period < MIN_PERIOD && !self.common.force {
            bail!(
                "--period {} is below 50us: the probe would mostly measure itself and can starve the CPU; add --force if you mean it",
                rtscope_model::units::human(self.period)
            );
        }
        check_at_most_10s("--period", self.period)?;
        check_duration_covers(&self.common, "--period", self.period)?;
        let mut kinds = self.timer.clone();
        dedup(&mut kinds);
        let common = self.common.resolve(kind)?;
        let probe = Ptimer::new(self.period, kinds, common.cpus.len()).ok_or_else(|| {
            anyhow::anyhow!(
                "--timer posix-signal needs one real-time signal per measured CPU and this system has {} for {} CPUs: measure fewer --cpus or leave posix-signal out of --timer",
                ptimer::max_signal_threads(),
                common.cpus.len()
            )
        })?;
        Ok(ProbePlan::measure(common, probe))
    }
}

impl ProbeArgs for TaskArgs {
    fn resolve(&self, kind: &str) -> Result<ProbePlan> {
        use rtscope_model::units::human;
        const MIN_PERIOD: u64 = 50_000;
        if self.period < MIN_PERIOD && !self.common.force {
            bail!(
                "--period {} is below 50us: the task would mostly measure itself and can starve the CPU; add --force if you mean it",
                human(self.period)
            );
        }
        check_at_most_10s("--period", self.period)?;
        check_duration_covers(&self.common, "--period", self.period)?;
        if self.compute == 0 || self.compute >= self.period {
            bail!(
                "--compute {} must be above 0 and shorter than --period {}: the jobs would never catch up (e.g. --compute 200us)",
                human(self.compute),
                human(self.period)
            );
        }
        if self.compute > self.period / 2 && !self.common.force {
            bail!(
                "--compute {} is more than half of --period {}: a SCHED_FIFO thread that busy can starve the CPU's other work; add --force if you mean it",
                human(self.compute),
                human(self.period)
            );
        }
        let deadline = self.deadline.unwrap_or(self.period);
        if deadline < self.compute {
            bail!(
                "--deadline {} is shorter than --compute {}: every job would miss it (e.g. --deadline {})",
                human(deadline),
                human(self.compute),
                human(self.period)
            );
        }
        check_at_most_10s("--deadline", deadline)?;
        if let Some(size) = self.memory {
            crate::sys::mem::check_share("--memory", size as u64, "give a smaller --memory (e.g. 8M)")
                .map_err(anyhow::Error::msg)?;
        }
        let memory = self.memory.map(|m| FlushBuffer::new(Some(m))).transpose().map_err(anyhow::Error::msg)?;
        let common = self.common.resolve(kind)?;
        Ok(ProbePlan::measure(common, Task::new(self.period, self.compute, deadline, self.buffers, memory)))
    }
}

/// Removes repeats, keeping the first of each.
fn dedup<T: PartialEq + Copy>(v: &mut Vec<T>) {
    let mut seen = Vec::new();
    v.retain(|x| {
        let new = !seen.contains(x);
        seen.push(*x);
        new
    });
}
