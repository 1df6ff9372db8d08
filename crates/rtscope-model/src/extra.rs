//! The figures a probe stores beside its histograms, in each series'
//! `extra` (`Series::extra`): each named once here, with how a table shows
//! it. The probe that measures it writes it under this name
//! ([`Figure::put`]), the descriptor table names it as a column, a count
//! compared between runs, or the time a rate is over, and the reports
//! read and show it by the same constant; nothing spells the key again.

use serde_json::{Map, Value};

/// How a table shows a figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shown {
    /// A time in ns, shown in us (1-3 decimals).
    Us,
    /// A time in ns, shown in ns (the reference iteration and the
    /// threshold of the busy loop, as oslat and osnoise print them).
    Ns,
    /// A percentage, 3 decimals.
    Pct,
    /// A rate per second, 1 decimal.
    Rate,
    /// A count or a text, as stored.
    Plain,
}

/// A figure in a series' `extra`: its key and how it is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Figure {
    pub key: &'static str,
    pub shown: Shown,
}

const fn fig(key: &'static str, shown: Shown) -> Figure {
    Figure { key, shown }
}

impl Figure {
    /// Stores `v` as this figure in `m`.
    pub fn put(self, m: &mut Map<String, Value>, v: impl Into<Value>) {
        m.insert(self.key.to_string(), v.into());
    }

    /// Its value in `extra`, if stored.
    pub fn get(self, extra: &Map<String, Value>) -> Option<&Value> {
        extra.get(self.key)
    }

    /// Its value as a table shows it.
    pub fn text(self, v: &Value) -> String {
        let num = |f: &dyn Fn(f64) -> String| v.as_f64().map_or_else(|| v.to_string(), f);
        match self.shown {
            Shown::Us => num(&crate::units::us_f),
            Shown::Pct => num(&|p| format!("{p:.3}")),
            Shown::Rate => num(&|r| format!("{r:.1}")),
            Shown::Ns | Shown::Plain => v.as_str().map_or_else(|| v.to_string(), str::to_string),
        }
    }
}

/// Shared by the probes that time a deviation (sleep, ptimer).
pub const MEAN_ABS: Figure = fig("mean_abs_ns", Shown::Us);
/// Periods or jobs whose deadline passed (ptimer, task).
pub const MISSED: Figure = fig("missed", Shown::Plain);

/// The `noise` probe's.
pub mod noise {
    use super::{Figure, Shown, fig};
    /// The time the busy loop ran (the rates are over it).
    pub const ACTIVE: Figure = fig("active_ns", Shown::Us);
    pub const REFERENCE: Figure = fig("reference_ns", Shown::Ns);
    pub const THRESHOLD: Figure = fig("threshold_ns", Shown::Ns);
    pub const NOISE: Figure = fig("noise_ns", Shown::Us);
    pub const PER_S: Figure = fig("per_s", Shown::Rate);
    pub const AVAILABLE: Figure = fig("available_pct", Shown::Pct);
    pub const ITERATIONS: Figure = fig("iterations", Shown::Plain);
}

/// The `sleep` probe's.
pub mod sleep {
    use super::{Figure, Shown, fig};
    pub const TIMER_SLACK: Figure = fig("timer_slack_ns", Shown::Us);
    pub const FAILED_CALLS: Figure = fig("failed_calls", Shown::Plain);
}

/// The `task` probe's.
pub mod task {
    use super::{Figure, Shown, fig};
    pub const ALLOWED: Figure = fig("allowed_ns", Shown::Us);
}

/// The `netlat` probe's.
pub mod netlat {
    use super::{Figure, Shown, fig};
    pub const SENT: Figure = fig("sent", Shown::Plain);
    pub const LOST: Figure = fig("lost", Shown::Plain);
    pub const REORDERED: Figure = fig("reordered", Shown::Plain);
    pub const DUPLICATES: Figure = fig("duplicates", Shown::Plain);
    pub const SKIPPED: Figure = fig("skipped", Shown::Plain);
    pub const NO_RX_TIMESTAMP: Figure = fig("no_rx_timestamp", Shown::Plain);
    pub const NO_HW_TIMESTAMP: Figure = fig("no_hw_timestamp", Shown::Plain);
    pub const CLOCK_CLAMPED: Figure = fig("clock_clamped", Shown::Plain);
    pub const STRAYS: Figure = fig("strays", Shown::Plain);
    pub const SOCKET_ERRORS: Figure = fig("socket_errors", Shown::Plain);
    pub const PATH: Figure = fig("path", Shown::Plain);
    pub const TIMESTAMPS: Figure = fig("timestamps", Shown::Plain);
}

/// The `serial-rtt` probe's: stimuli sent on the port, answers lost
/// (none within `--timeout`), late (after the next stimulus was due:
/// recorded all the same), strays (answers to no stimulus waiting), junk
/// (bytes that were no frame), errors (writes and reads the port refused).
pub mod serial {
    use super::{Figure, Shown, fig};
    pub const SENT: Figure = fig("sent", Shown::Plain);
    pub const LOST: Figure = fig("lost", Shown::Plain);
    pub const LATE: Figure = fig("late", Shown::Plain);
    pub const STRAYS: Figure = fig("strays", Shown::Plain);
    pub const JUNK: Figure = fig("junk_bytes", Shown::Plain);
    pub const ERRORS: Figure = fig("errors", Shown::Plain);
    pub const TTY: Figure = fig("tty", Shown::Plain);
    pub const BAUD: Figure = fig("baud", Shown::Plain);
}

/// The `hwlat` probe's.
pub mod hwlat {
    use super::{Figure, Shown, fig};
    pub const GAPS: Figure = fig("gaps", Shown::Plain);
    pub const NMI_COUNT: Figure = fig("nmi_count", Shown::Plain);
    pub const NMI_NS: Figure = fig("nmi_ns", Shown::Us);
    pub const RECORDS_LOST: Figure = fig("records_lost", Shown::Plain);
    pub const TRACER_RECORDS: Figure = fig("tracer_records", Shown::Plain);
    pub const TRACER_SEQ_MAX: Figure = fig("tracer_seq_max", Shown::Plain);
    pub const TRACER_MAX_LATENCY_FILE: Figure = fig("tracer_max_latency_file", Shown::Plain);
}

/// `watch`'s, per watched thread.
pub mod watch {
    use super::{Figure, Shown, fig};
    pub const THREAD: Figure = fig("thread", Shown::Plain);
    pub const SCHED: Figure = fig("sched", Shown::Plain);
    pub const CPUS: Figure = fig("cpus", Shown::Plain);
    pub const DEADLINE: Figure = fig("deadline_ns", Shown::Us);
    pub const DEADLINE_MISSES: Figure = fig("deadline_misses", Shown::Plain);
}

/// `osbench`'s, per test: who it is and how it ran (its tables and CSV).
pub mod osbench {
    use super::{Figure, Shown, fig};
    pub const TEST: Figure = fig("test", Shown::Plain);
    pub const NUM: Figure = fig("num", Shown::Plain);
    pub const NAME: Figure = fig("name", Shown::Plain);
    pub const GROUP: Figure = fig("group", Shown::Plain);
    pub const IPS: Figure = fig("ips", Shown::Plain);
    pub const INTER_PROCESS: Figure = fig("inter_process", Shown::Plain);
    pub const CACHE_FLUSH: Figure = fig("cache_flush", Shown::Plain);
    pub const CROSS_CPU: Figure = fig("cross_cpu", Shown::Plain);
    pub const EQUAL_PRIORITIES: Figure = fig("equal_priorities", Shown::Plain);
    pub const PRIORITIES: Figure = fig("priorities", Shown::Plain);
    pub const OTHER_CPU: Figure = fig("other_cpu", Shown::Plain);
    pub const BASE: Figure = fig("base_ns", Shown::Plain);
    pub const LAST: Figure = fig("last_ns", Shown::Us);
    pub const BELOW_BASE: Figure = fig("below_base", Shown::Plain);
    pub const ROUNDS: Figure = fig("rounds", Shown::Plain);
    pub const NOTE: Figure = fig("note", Shown::Plain);
    pub const PAIRED: Figure = fig("paired", Shown::Plain);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_figure_is_shown_by_its_kind() {
        assert_eq!(noise::REFERENCE.text(&json!(41.5)), "41.5");
        assert_eq!(noise::AVAILABLE.text(&json!(99.12345)), "99.123");
        assert_eq!(noise::PER_S.text(&json!(12.34)), "12.3");
        assert_eq!(watch::THREAD.text(&json!("rtapp/4242")), "rtapp/4242");
        assert_eq!(MEAN_ABS.text(&json!(1500.0)), crate::units::us_f(1500.0));
        let mut m = Map::new();
        netlat::LOST.put(&mut m, 3u64);
        assert_eq!(netlat::LOST.get(&m), Some(&json!(3)));
    }
}
