//! The serial round trip's two sides: the `serial-rtt` probe's arguments
//! (the instrument) and `rtscope respond`'s (the machine under test).

use super::*;
use crate::probe::serial::{Respond, SerialRtt};
use crate::sys::marker::{Marker, MarkerSpec};
use crate::sys::serial::{RawPort, parse_baud};

/// The shortest `--interval`: a 4-byte frame each way at 115200 baud
/// takes about 0.7 ms on the wire.
const MIN_INTERVAL_NS: u64 = 100_000;

#[derive(Args, Debug)]
pub struct SerialRttArgs {
    /// The serial port to the machine under test, where `rtscope respond` answers (e.g. /dev/ttyS1, /dev/ttyUSB0,
    /// or a pseudo-terminal /dev/pts/N).
    #[arg(long, value_name = "PATH")]
    pub tty: PathBuf,
    /// The line's speed, the same on both ends.
    #[arg(long, value_name = "BAUD", default_value = "115200", value_parser = parse_baud)]
    pub baud: u32,
    /// Send a stimulus every DUR (100us..10s; a bare number is microseconds, as cyclictest's -i).
    #[arg(long, short = 'i', value_name = "DUR", default_value = "10ms", value_parser = dur_us)]
    pub interval: u64,
    /// Send HZ stimuli per second (instead of --interval).
    #[arg(long, value_name = "HZ", conflicts_with = "interval",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub rate: Option<u32>,
    /// A stimulus whose answer has not come after DUR is lost: counted and named in the run's notes.
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = dur)]
    pub timeout: u64,
    /// Before measuring, say hello on the line until the other end answers, for DUR at most (the machine under
    /// test may start `rtscope respond` after this).
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = dur)]
    pub wait: u64,
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ProbeArgs for SerialRttArgs {
    fn resolve(&self, kind: &str) -> Result<ProbePlan> {
        use rtscope_model::units::human;
        let interval = self.rate.map_or(self.interval, |hz| 1_000_000_000 / u64::from(hz));
        if !(MIN_INTERVAL_NS..=10_000_000_000).contains(&interval) {
            bail!("--interval {} must be between 100us and 10s (e.g. --interval 10ms)", human(interval));
        }
        if self.timeout < 1_000_000 || self.timeout > 60_000_000_000 {
            bail!("--timeout {} must be between 1ms and 60s (e.g. --timeout 1s)", human(self.timeout));
        }
        if !self.common.instances.is_empty() {
            bail!("--instances with serial-rtt: one line is one round trip at a time; give one priority with -p");
        }
        let mut common = self.common.resolve(kind)?;
        // One port, one thread: the last of the CPUs (a plan's are all).
        let mut warnings = Vec::new();
        if let [.., last] = common.cpus[..] {
            if common.cpus.len() > 1 && self.common.measure.cpus.is_some() {
                warnings.push(format!(
                    "serial-rtt times one port from one thread: measuring from CPU {last}, the last of --cpus"
                ));
            }
            common.cpus = vec![last];
        }
        let probe =
            SerialRtt::open(&self.tty, self.baud, interval, self.timeout, self.wait).map_err(anyhow::Error::msg)?;
        Ok(ProbePlan::Measure(Box::new(common), Box::new(probe), warnings))
    }
}

/// `rtscope respond`.
#[derive(Args, Debug)]
pub struct RespondArgs {
    /// The serial port to the instrument, where its `rtscope serial-rtt` sends (e.g. /dev/ttyS1).
    #[arg(long, value_name = "PATH")]
    pub tty: PathBuf,
    /// The line's speed, the same on both ends.
    #[arg(long, value_name = "BAUD", default_value = "115200", value_parser = parse_baud)]
    pub baud: u32,
    /// The CPU the responder's thread is pinned to [default: the last CPU rtscope may use]
    #[arg(long, value_name = "CPU", value_parser = rtscope_model::settings::CpuList::parse)]
    pub cpus: Option<rtscope_model::settings::CpuList>,
    #[arg(long, value_enum, default_value = "fifo")]
    pub policy: Policy,
    /// The responder's real-time priority (0 with --policy other).
    #[arg(long, short = 'p', default_value_t = 95, value_parser = clap::value_parser!(u8).range(0..=99))]
    pub priority: u8,
    /// Answer for DUR, then stop [default: until Ctrl-C or --count].
    #[arg(long, short = 'D', value_name = "DUR", value_parser = RunDuration::parse)]
    pub duration: Option<RunDuration>,
    /// Stop after answering N stimuli.
    #[arg(long, short = 'N', value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Also toggle a marker line at each answer, for an instrument timing the line from outside
    /// (tty:PATH[:rts|dtr] or gpio:/dev/gpiochipN:LINE, as wakeup's --marker).
    #[arg(long, value_name = "KIND:PATH[:LINE]", value_parser = MarkerSpec::parse)]
    pub marker: Option<MarkerSpec>,
    /// Print nothing but errors.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    #[command(flatten)]
    pub dma: DmaArgs,
}

impl RespondArgs {
    /// Checked and opened: the port in raw mode, the marker's line, the
    /// thread's CPU and scheduling (a refused real-time priority is a
    /// warning and SCHED_OTHER, as netlat --serve's).
    pub fn resolve(&self) -> Result<Respond> {
        let cpu = match &self.cpus {
            Some(list) => match cpu::selected("--cpus", list)?.as_slice() {
                [c] => *c,
                _ => bail!("--cpus: respond answers from one thread; give one CPU (e.g. --cpus 1)"),
            },
            None => *cpu::measurable().last().unwrap_or(&0),
        };
        if self.policy.is_rt() && self.priority == 0 {
            bail!("--priority must be 1..99 for --policy {} (0 is only for --policy other)", self.policy.flag_value());
        }
        let (mut policy, mut priority) = (self.policy, self.priority);
        if let Some(fix) = policy.is_rt().then(|| crate::sys::sched::rt_refused(priority)).flatten() {
            if !self.quiet {
                eprintln!(
                    "rtscope: warning: cannot use real-time priority {priority}: answering at SCHED_OTHER (fix: {fix})"
                );
            }
            (policy, priority) = (Policy::Other, 0);
        }
        let marker = self.marker.as_ref().map(Marker::open).transpose().map_err(anyhow::Error::msg)?;
        let port = RawPort::open("--tty", &self.tty, self.baud).map_err(anyhow::Error::msg)?;
        let until_ns = self.duration.map_or(u64::MAX, |d| crate::sys::clock::now() + d.ns());
        Ok(Respond {
            port,
            marker,
            cpu,
            policy,
            priority,
            until_ns,
            count: self.count,
            quiet: self.quiet,
            dma_latency: self.dma.held(),
        })
    }
}
