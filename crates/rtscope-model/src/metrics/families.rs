//! The monitor's families of values, one per meaning
//! ([`crate::descriptor::Meaning`]): a histogram and its two gauges (the
//! largest value of the last checkpoint interval, and since the start),
//! each family holding one kind of value in seconds, as Prometheus'
//! conventions ask. Wake-up, timer and network latencies keep the names
//! they always had (`rtscope_latency_seconds`, `rtscope_interval_max_seconds`,
//! `rtscope_max_seconds`); before, every other kind of value was served
//! in them too (docs/monitor.md, "Families renamed").

use crate::descriptor::Meaning;

/// One meaning's families: the histogram, the interval maximum, the maximum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Values {
    pub meaning: Meaning,
    pub histogram: &'static str,
    pub interval_max: &'static str,
    pub max: &'static str,
    /// What its values are, for its HELP text.
    pub what: &'static str,
}

/// Every meaning's families, latencies first.
pub const ALL: [Values; 6] = [
    Values {
        meaning: Meaning::Latency,
        histogram: "rtscope_latency_seconds",
        interval_max: "rtscope_interval_max_seconds",
        max: "rtscope_max_seconds",
        what: "latencies: a probe's wake-up, timer or network latency (and its traced stages), a watched thread's \
               wake-up latency",
    },
    Values {
        meaning: Meaning::Interruption,
        histogram: "rtscope_interruption_seconds",
        interval_max: "rtscope_interruption_interval_max_seconds",
        max: "rtscope_interruption_max_seconds",
        what: "interruption lengths: how long the noise probe's busy loop was interrupted",
    },
    Values {
        meaning: Meaning::Deviation,
        histogram: "rtscope_deviation_seconds",
        interval_max: "rtscope_deviation_interval_max_seconds",
        max: "rtscope_deviation_max_seconds",
        what: "signed deviations: a sleep's actual - requested length, a periodic timer's event - its programmed \
               instant (negative: early)",
    },
    Values {
        meaning: Meaning::Period,
        histogram: "rtscope_period_seconds",
        interval_max: "rtscope_period_interval_max_seconds",
        max: "rtscope_period_max_seconds",
        what: "periods: a watched thread's time from one release to the next",
    },
    Values {
        meaning: Meaning::Runtime,
        histogram: "rtscope_runtime_seconds",
        interval_max: "rtscope_runtime_interval_max_seconds",
        max: "rtscope_runtime_max_seconds",
        what: "runtimes: CPU time of one activation, a watched thread's or an interrupt handler's (metric \
               irq:NAME, softirq:NAME)",
    },
    Values {
        meaning: Meaning::Response,
        histogram: "rtscope_response_seconds",
        interval_max: "rtscope_response_interval_max_seconds",
        max: "rtscope_response_max_seconds",
        what: "response times: a watched thread's release to its sleeping again",
    },
];

/// The families of `meaning`.
pub fn of(meaning: Meaning) -> &'static Values {
    ALL.iter().find(|v| v.meaning == meaning).unwrap_or(&ALL[0])
}

/// The families of `probe`'s `metric`.
pub fn of_series(probe: &str, metric: &str) -> &'static Values {
    of(crate::descriptor::meaning(probe, metric))
}

/// A selector of the families `names`, with the label `matchers` (a
/// selector's inside): `{__name__=~"a|b",matchers}`, or `a{matchers}` for one.
pub fn selector<S: AsRef<str>>(names: impl IntoIterator<Item = S>, matchers: &str) -> String {
    let names: Vec<S> = names.into_iter().collect();
    let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
    if let [one] = names.as_slice() {
        return format!("{one}{{{matchers}}}");
    }
    let sep = if matchers.is_empty() { "" } else { "," };
    format!("{{__name__=~\"{}\"{sep}{matchers}}}", names.join("|"))
}

/// Every family's name that `pick` gives, followed by `suffix` (`_bucket`, `_count`, or "").
pub fn all_names(pick: fn(&Values) -> &'static str, suffix: &str) -> Vec<String> {
    ALL.iter().map(|v| format!("{}{suffix}", pick(v))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_value_has_its_own_families() {
        for (probe, metric, family) in [
            ("wakeup", "latency", "rtscope_latency_seconds"),
            ("wakeup", "thread", "rtscope_latency_seconds"),
            ("hwlat", "latency", "rtscope_latency_seconds"),
            ("noise", "interruption", "rtscope_interruption_seconds"),
            ("sleep", "nanosleep@1ms", "rtscope_deviation_seconds"),
            ("ptimer", "timerfd@1ms", "rtscope_deviation_seconds"),
            ("watch", "latency", "rtscope_latency_seconds"),
            ("watch", "period", "rtscope_period_seconds"),
            ("watch", "runtime", "rtscope_runtime_seconds"),
            ("watch", "response", "rtscope_response_seconds"),
            ("wakeup", "irq:local_timer", "rtscope_runtime_seconds"),
            ("noise", "softirq:NET_RX", "rtscope_runtime_seconds"),
        ] {
            assert_eq!(of_series(probe, metric).histogram, family, "{probe} {metric}");
        }
        assert_eq!(of_series("hwlat", "latency").max, "rtscope_max_seconds");
        assert_eq!(of_series("ptimer", "x").interval_max, "rtscope_deviation_interval_max_seconds");
        // Every name once, each a base unit's.
        let mut names: Vec<&str> = ALL.iter().flat_map(|v| [v.histogram, v.interval_max, v.max]).collect();
        assert!(names.iter().all(|n| n.starts_with("rtscope_") && n.ends_with("_seconds")));
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 3 * ALL.len());
        let s = selector(all_names(|v| v.histogram, "_bucket"), "job=\"x\"");
        assert!(
            s.starts_with("{__name__=~\"rtscope_latency_seconds_bucket|rtscope_interruption_seconds_bucket|"),
            "{s}"
        );
        assert!(s.ends_with("_bucket\",job=\"x\"}"), "{s}");
        assert_eq!(selector(["a"], "b=\"c\""), "a{b=\"c\"}");
        assert!(selector(all_names(|v| v.max, ""), "").ends_with("rtscope_response_max_seconds\"}"));
    }
}
