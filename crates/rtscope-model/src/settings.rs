//! Settings that hold their own range: each is parsed once, where the user
//! wrote it (a flag, a plan or campaign file, the monitor's flags), into a
//! value that cannot be out of range, and is never text again. The words
//! of a refusal are the type's own, whichever way the value came in; the
//! caller puts the flag or the file's key in front.

use crate::units::{human, parse_duration};

/// How often a run commits its histograms, maxima and exceedances: 100ms
/// to 1h.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct Checkpoint(u64);

impl Checkpoint {
    pub const MIN_NS: u64 = 100_000_000;
    pub const MAX_NS: u64 = 3_600_000_000_000;
    /// `rtscope <probe>`'s and a campaign file's default.
    pub const DEFAULT: Checkpoint = Checkpoint(10_000_000_000);

    /// `ns` where it is within range.
    pub fn new(ns: u64) -> Result<Checkpoint, String> {
        if (Self::MIN_NS..=Self::MAX_NS).contains(&ns) {
            Ok(Checkpoint(ns))
        } else {
            Err(format!(
                "{} is outside 100ms..1h (e.g. 250ms: a crash loses up to one checkpoint interval, and the tail's \
                 diagnostics need 20 to 40 of them per cell)",
                human(ns)
            ))
        }
    }

    /// From text (`250ms`, `10s`).
    pub fn parse(text: &str) -> Result<Checkpoint, String> {
        Checkpoint::new(parse_duration(text)?)
    }

    pub fn ns(self) -> u64 {
        self.0
    }
}

/// How long one cell of an assessment (a probe under a load) is recorded:
/// at least 1s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct CellDuration(u64);

impl CellDuration {
    pub const MIN_NS: u64 = 1_000_000_000;
    /// A campaign file's default.
    pub const DEFAULT: CellDuration = CellDuration(10_000_000_000);

    /// `ns` where it is at least a second.
    pub fn new(ns: u64) -> Result<CellDuration, String> {
        if ns >= Self::MIN_NS {
            Ok(CellDuration(ns))
        } else {
            Err(format!("{} is per cell and must be at least 1s (e.g. 10s)", human(ns)))
        }
    }

    /// From text; a bare number is seconds (cyclictest's -D).
    pub fn parse(text: &str) -> Result<CellDuration, String> {
        CellDuration::new(seconds_or_duration(text)?)
    }

    pub fn ns(self) -> u64 {
        self.0
    }
}

/// How long a probe, a load, `watch` or the disturber runs before it stops
/// by itself: longer than 0 (left out, it runs until stopped).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct RunDuration(u64);

impl RunDuration {
    /// `ns` where it is longer than 0.
    pub fn new(ns: u64) -> Result<RunDuration, String> {
        if ns > 0 {
            Ok(RunDuration(ns))
        } else {
            Err("must be longer than 0 (e.g. 30s), or left out to run until stopped".into())
        }
    }

    /// From text; a bare number is seconds (cyclictest's -D).
    pub fn parse(text: &str) -> Result<RunDuration, String> {
        RunDuration::new(seconds_or_duration(text)?)
    }

    pub fn ns(self) -> u64 {
        self.0
    }
}

impl From<CellDuration> for RunDuration {
    /// A cell is a run of at least a second.
    fn from(cell: CellDuration) -> RunDuration {
        RunDuration(cell.0)
    }
}

/// A duration within `MIN_NS..=MAX_NS` that needs no words of its own: a
/// plan's warm-up, ramp-up and CPU-score time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct Within<const MIN_NS: u64, const MAX_NS: u64>(u64);

impl<const MIN_NS: u64, const MAX_NS: u64> Within<MIN_NS, MAX_NS> {
    /// `ns` where it is within range.
    pub fn new(ns: u64) -> Result<Self, String> {
        if (MIN_NS..=MAX_NS).contains(&ns) {
            Ok(Within(ns))
        } else {
            let min = if MIN_NS == 0 { "0".to_string() } else { human(MIN_NS) };
            Err(format!("{} is outside {min}..{}", human(ns), human(MAX_NS)))
        }
    }

    /// From text (`500ms`, `2s`).
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::new(parse_duration(text)?)
    }

    pub fn ns(self) -> u64 {
        self.0
    }
}

impl<const MIN_NS: u64, const MAX_NS: u64> TryFrom<String> for Within<MIN_NS, MAX_NS> {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        Self::parse(&text)
    }
}

/// What each cell of an assessment measures before it records (at most
/// 10m); its load's ramp-up before its first cell, alike.
pub type Warmup = Within<0, 600_000_000_000>;
/// How long an assessment's CPU score measures: 100ms..1m.
pub type ScoreTime = Within<100_000_000, 60_000_000_000>;

/// A duration whose bare number is seconds, as cyclictest's -D and
/// `timeout` read one; the range is the caller's.
fn seconds_or_duration(text: &str) -> Result<u64, String> {
    let t = text.trim();
    match t.parse::<u64>() {
        Ok(s) => {
            s.checked_mul(1_000_000_000).filter(|&ns| ns <= u64::MAX / 2).ok_or_else(|| format!("'{text}' is too long"))
        }
        Err(_) => parse_duration(t),
    }
}

/// A list of CPUs as written (`0,2-3`): at least one, each once. Whether
/// they are online and allowed is the machine's to say, when it is used.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct CpuList(Vec<usize>);

impl CpuList {
    /// From text; the words say what is wrong and give an example.
    pub fn parse(text: &str) -> Result<CpuList, String> {
        match crate::inventory::parse_cpu_list(text) {
            Ok(c) if !c.is_empty() => Ok(CpuList(c)),
            Ok(_) => Err(format!("'{text}' selects no CPU (e.g. 0,2-3)")),
            Err(e) => Err(format!("'{text}': {e} (e.g. 0,2-3)")),
        }
    }

    /// From CPUs already known (the machine's own).
    pub fn of(cpus: Vec<usize>) -> Option<CpuList> {
        (!cpus.is_empty()).then_some(CpuList(cpus))
    }

    pub fn cpus(&self) -> &[usize] {
        &self.0
    }
}

/// The CPU wake-up latency a run asks the kernel for through
/// `/dev/cpu_dma_latency` (the PM QoS CPU latency target) while it
/// measures: 0us..10ms in whole microseconds, a bare number being
/// microseconds (cyclictest's `--latency`, rtla's `--dma-latency`). 0 keeps
/// every CPU out of the idle states that take any time to leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DmaLatency(u32);

impl DmaLatency {
    /// What measuring holds unless told otherwise.
    pub const ZERO: DmaLatency = DmaLatency(0);
    pub const MAX_US: u32 = 10_000;

    /// `us` microseconds where it is within range.
    pub fn new(us: u64) -> Result<DmaLatency, String> {
        match u32::try_from(us) {
            Ok(us) if us <= Self::MAX_US => Ok(DmaLatency(us)),
            _ => Err(format!("{us}us is outside 0..10000us (e.g. 0: no deep C-state; 20: the shallow ones allowed)")),
        }
    }

    /// From text: a bare number of microseconds (`0`, `20`) or a duration
    /// in whole microseconds (`20us`, `1ms`).
    pub fn parse(text: &str) -> Result<DmaLatency, String> {
        let t = text.trim();
        let ns = match t.parse::<u64>() {
            Ok(us) => return DmaLatency::new(us),
            Err(_) => parse_duration(t)
                .map_err(|_| format!("'{text}' is not a latency in microseconds (0..10000, e.g. 0 or 20)"))?,
        };
        if ns % 1_000 != 0 {
            return Err(format!("'{text}' is not a whole number of microseconds (e.g. 20us)"));
        }
        DmaLatency::new(ns / 1_000)
    }

    pub fn us(self) -> u32 {
        self.0
    }
}

/// What a run did with `/dev/cpu_dma_latency`, kept in its machine record
/// (`Inventory::dma_latency`): held at a target for the whole run, left
/// alone (`--no-dma-latency`, a monitor by default), or asked and refused
/// (not root). A run recorded before rtscope kept it says nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DmaHeld {
    #[default]
    Unrecorded,
    NotHeld,
    Held {
        us: u32,
    },
    Refused {
        us: u32,
    },
}

impl DmaHeld {
    /// The machine record's line: "held at 0 us (/dev/cpu_dma_latency)".
    pub fn describe(self) -> String {
        match self {
            DmaHeld::Unrecorded => "not recorded".into(),
            DmaHeld::NotHeld => "not held: the kernel's own".into(),
            DmaHeld::Held { us } => format!("held at {us} us (/dev/cpu_dma_latency)"),
            DmaHeld::Refused { us } => format!("{us} us asked, not held (see the warnings): the kernel's own"),
        }
    }
}

macro_rules! from_text {
    ($($t:ident),*) => {$(
        /// A file's value (a plan's TOML), by the same parser as a flag's.
        impl TryFrom<String> for $t {
            type Error = String;
            fn try_from(text: String) -> Result<$t, String> {
                $t::parse(&text)
            }
        }
    )*};
}
from_text!(Checkpoint, CellDuration, RunDuration, CpuList);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_runtime_defaults_and_errors_name_the_flag() {
        let d = Deadline::new(None, 1_000_000).unwrap();
        assert_eq!(d, Deadline { runtime_ns: 100_000, period_ns: 1_000_000 });
        assert_eq!(d.describe(), "SCHED_DEADLINE runtime 100us, period 1ms");
        assert_eq!(Deadline::new(Some(50_000), 1_000_000).unwrap().runtime_ns, 50_000);
        assert_eq!(Deadline::new(Some(1_000_000), 1_000_000).unwrap().runtime_ns, 1_000_000);
        let e = Deadline::new(Some(2_000_000), 1_000_000).unwrap_err();
        assert!(e.starts_with("--dl-runtime 2ms is longer than the period, --interval 1ms"), "{e}");
        let e = Deadline::new(Some(1000), 1_000_000).unwrap_err();
        assert!(e.starts_with("--dl-runtime") && e.contains("1.024us"), "{e}");
        // A period too short for a tenth of it still gets the smallest runtime.
        assert_eq!(Deadline::new(None, 5000).unwrap().runtime_ns, DL_MIN_RUNTIME_NS);
    }

    #[test]
    fn instances_are_together_unless_in_turn() {
        let mode = |v: serde_json::Value| InstancesMode::stored(&serde_json::json!({ "instances": v }));
        assert_eq!(mode("together".into()), Some(InstancesMode::Together));
        assert_eq!(mode("in-turn".into()), Some(InstancesMode::InTurn));
        assert_eq!(mode("apart".into()), None);
        assert_eq!(InstancesMode::stored(&serde_json::json!({})), None);
        assert_eq!(InstancesMode::default().describe(), "instances measured together");
        assert_eq!(InstancesMode::InTurn.describe(), "instances measured one after the other");
    }

    #[test]
    fn each_value_holds_its_range_and_says_so() {
        assert_eq!(Checkpoint::parse("250ms").unwrap().ns(), 250_000_000);
        assert_eq!(Checkpoint::parse("1h").unwrap().ns(), Checkpoint::MAX_NS);
        let e = Checkpoint::parse("50ms").unwrap_err();
        assert!(e.starts_with("50.000ms is outside 100ms..1h") || e.contains("outside 100ms..1h"), "{e}");
        assert!(Checkpoint::parse("2h").is_err() && Checkpoint::parse("soon").is_err());
        assert_eq!(CellDuration::parse("2").unwrap().ns(), 2_000_000_000);
        assert_eq!(CellDuration::parse("1500ms").unwrap().ns(), 1_500_000_000);
        assert!(CellDuration::parse("500ms").unwrap_err().contains("must be at least 1s"));
        assert_eq!(RunDuration::parse("5").unwrap().ns(), 5_000_000_000);
        assert_eq!(RunDuration::parse("1ms").unwrap().ns(), 1_000_000);
        assert!(RunDuration::parse("0").unwrap_err().starts_with("must be longer than 0"));
        assert!(RunDuration::parse("0s").is_err() && RunDuration::parse("99999999999999999999").is_err());
        assert_eq!(Warmup::parse("0").unwrap().ns(), 0);
        assert_eq!(Warmup::parse("11m").unwrap_err(), "11m is outside 0..10m");
        assert_eq!(ScoreTime::parse("50ms").unwrap_err(), "50ms is outside 100ms..1m");
        assert_eq!(RunDuration::from(CellDuration::parse("2s").unwrap()).ns(), 2_000_000_000);
        assert_eq!(CpuList::parse("0,2-3").unwrap().cpus(), &[0, 2, 3]);
        assert!(CpuList::parse("x").unwrap_err().contains("(e.g. 0,2-3)"));
        assert_eq!(CpuList::of(Vec::new()), None);
        assert_eq!(DmaLatency::parse("0").unwrap().us(), 0);
        assert_eq!(DmaLatency::parse("20").unwrap().us(), 20);
        assert_eq!(DmaLatency::parse("1ms").unwrap().us(), 1000);
        assert!(DmaLatency::parse("10001").unwrap_err().starts_with("10001us is outside 0..10000us"));
        assert!(DmaLatency::parse("1500ns").unwrap_err().contains("whole number of microseconds"));
        assert!(DmaLatency::parse("-1").unwrap_err().contains("not a latency in microseconds"));
        assert!(DmaLatency::parse("soon").is_err());
    }
}

/// How a run measures several instances of a per-CPU probe
/// (`--probes wakeup@95,wakeup@80`, `--instances 95,80`): all together,
/// each its own threads on the same CPUs, each disturbing the others (the
/// default); or one after the other, each for the whole duration. Stored
/// with the run as its plan's `instances`: `together` or `in-turn`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstancesMode {
    #[default]
    Together,
    InTurn,
}

impl InstancesMode {
    /// What the run says of it: "instances measured together" or
    /// "instances measured one after the other".
    pub fn describe(self) -> &'static str {
        match self {
            InstancesMode::Together => "instances measured together",
            InstancesMode::InTurn => "instances measured one after the other",
        }
    }

    /// The mode a run's plan stored (`instances`), if it has one.
    pub fn stored(plan: &serde_json::Value) -> Option<InstancesMode> {
        serde_json::from_value(plan.get("instances")?.clone()).ok()
    }
}

/// `--policy deadline`: a measuring thread's SCHED_DEADLINE reservation,
/// its relative deadline equal to its period (the probe's `--interval`),
/// as rt-tests' cyclicdeadline and `rtla timerlat -P d:RUNTIME:PERIOD` set
/// it; stored with the run's common settings as `deadline`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Deadline {
    /// The budget per period, ns (`--dl-runtime`).
    pub runtime_ns: u64,
    /// The period and relative deadline, ns.
    pub period_ns: u64,
}

/// The kernel's smallest SCHED_DEADLINE runtime (2^10 ns).
pub const DL_MIN_RUNTIME_NS: u64 = 1024;

impl Deadline {
    /// `--dl-runtime` (None: a tenth of the period) over `period_ns`
    /// (`--interval`); errors name the flag.
    pub fn new(runtime_ns: Option<u64>, period_ns: u64) -> Result<Deadline, String> {
        let runtime_ns = runtime_ns.unwrap_or((period_ns / 10).max(DL_MIN_RUNTIME_NS));
        if runtime_ns < DL_MIN_RUNTIME_NS {
            return Err(format!(
                "--dl-runtime {}: the kernel's smallest SCHED_DEADLINE runtime is 1.024us; give a longer one (e.g. 50us)",
                human(runtime_ns)
            ));
        }
        if runtime_ns > period_ns {
            return Err(format!(
                "--dl-runtime {} is longer than the period, --interval {}: give a runtime below the interval (e.g. {})",
                human(runtime_ns),
                human(period_ns),
                human((period_ns / 10).max(DL_MIN_RUNTIME_NS))
            ));
        }
        Ok(Deadline { runtime_ns, period_ns })
    }

    /// "SCHED_DEADLINE runtime 50us, period 1ms".
    pub fn describe(&self) -> String {
        format!("SCHED_DEADLINE runtime {}, period {}", human(self.runtime_ns), human(self.period_ns))
    }
}

/// What `wakeup` stores of its timer with its settings (the run's plan):
/// written by the probe (its settings flatten this), read here by field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WakeupTimer {
    /// Each thread's period (cyclictest -i), ns.
    pub interval_ns: u64,
    /// Thread i's interval is `interval + i * distance` (cyclictest -d), ns.
    #[serde(default)]
    pub distance_ns: u64,
}

impl WakeupTimer {
    /// The one period of its threads; None where `--distance` makes them
    /// differ.
    pub fn period(&self) -> Option<u64> {
        (self.distance_ns == 0).then_some(self.interval_ns)
    }
}

/// What a probe with one periodic timer (`ptimer`) stores of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TimerPeriod {
    /// The timer's period, ns.
    pub period_ns: u64,
}

/// What a periodic task's misses are judged by (ns): the `task` probe's
/// timing, which it stores with its settings (they flatten this) and the
/// analysis reads back by field ([`crate::settings::stored`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TaskModel {
    pub period_ns: u64,
    pub compute_ns: u64,
    pub deadline_ns: u64,
    pub buffers: u32,
}

impl TaskModel {
    /// How late after its release a job may complete.
    pub fn allowed_ns(&self) -> u64 {
        self.deadline_ns + u64::from(self.buffers.saturating_sub(1)) * self.period_ns
    }

    /// s = D + (N - 1) T - c.
    pub fn slack_ns(&self) -> i64 {
        self.allowed_ns() as i64 - self.compute_ns as i64
    }
}

/// Reads a probe's stored settings (a run plan's `settings`, or an
/// assessment cell's) as `T`; None where they are not of that shape.
pub fn stored<T: serde::de::DeserializeOwned>(settings: &serde_json::Value) -> Option<T> {
    T::deserialize(settings).ok()
}
