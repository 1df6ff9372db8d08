//! A load's scheduling, as written after its `@` (`cpu:2@fifo:50`,
//! `cpu:2@fifo:50:period=10ms,busy=3ms`, `threads:16@fifo:10-60`): parsed
//! once into [`RtLoad`], which holds its own bounds (a priority 1..98, a
//! busy time shorter than its period), so that a real-time load cannot be
//! asked to take a whole CPU by mistake of a period.

use crate::units::{human, parse_duration};
use serde::Serialize;

/// The real-time policy of a load's threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RtPolicy {
    Fifo,
    Rr,
}

/// The shortest period a periodic load may ask: below it the sleeps and
/// wake-ups are the load, not the busy time.
pub const MIN_PERIOD_NS: u64 = 100_000;
/// The longest period (a periodic load checks for its stop once a period).
pub const MAX_PERIOD_NS: u64 = 1_000_000_000;
/// The highest priority a load may take: 99 is the kernel's own (the
/// migration and watchdog threads), and a probe at 99 must stay above.
pub const MAX_PRIORITY: u8 = 98;

/// How a load's threads are scheduled: a real-time policy, a priority (or
/// a range spread over its threads), and either spinning (no period) or
/// busy `busy_ns` of every `period_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RtLoad {
    pub policy: RtPolicy,
    /// The lowest and highest priorities (equal for one priority).
    pub lo: u8,
    pub hi: u8,
    /// Periodic: (period, busy) in ns, busy < period. None: spinning.
    pub periodic: Option<(u64, u64)>,
}

const HINT: &str = "write POLICY:PRIORITY[:period=T,busy=T], e.g. fifo:50, rr:40, fifo:50:period=10ms,busy=3ms, \
                    fifo:10-60";

impl RtLoad {
    /// Parses `fifo:50`, `rr:40`, `fifo:10-60`, `fifo:50:period=10ms,busy=3ms`
    /// (`period` and `busy` both, in either order; `:` also separates them).
    pub fn parse(text: &str) -> Result<RtLoad, String> {
        let mut parts = text.split(':');
        let policy = match parts.next().unwrap_or("") {
            "fifo" => RtPolicy::Fifo,
            "rr" => RtPolicy::Rr,
            p => return Err(format!("'{p}' is not a policy (fifo or rr); {HINT}")),
        };
        let prio = parts.next().ok_or_else(|| format!("a priority is missing after '{text}'; {HINT}"))?;
        let one = |p: &str| -> Result<u8, String> {
            match p.trim().parse::<u8>() {
                Ok(v) if (1..=MAX_PRIORITY).contains(&v) => Ok(v),
                _ => Err(format!("priority '{p}' is not from 1 to {MAX_PRIORITY}; {HINT}")),
            }
        };
        let (lo, hi) = match prio.split_once('-') {
            Some((a, b)) => (one(a)?, one(b)?),
            None => (one(prio)?, one(prio)?),
        };
        if lo > hi {
            return Err(format!("priorities '{prio}' go down: write the lower first, e.g. {hi}-{lo}"));
        }
        let (mut period, mut busy) = (None, None);
        for kv in parts.flat_map(|p| p.split(',')) {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("'{kv}' is not period=T or busy=T; {HINT}"))?;
            let ns = parse_duration(v).map_err(|e| format!("{k}: {e}"))?;
            match k.trim() {
                "period" => period = Some(ns),
                "busy" => busy = Some(ns),
                _ => return Err(format!("'{k}' is not period or busy; {HINT}")),
            }
        }
        let periodic = match (period, busy) {
            (None, None) => None,
            (Some(p), Some(b)) => {
                if !(MIN_PERIOD_NS..=MAX_PERIOD_NS).contains(&p) {
                    return Err(format!(
                        "period={} is not from {} to {}",
                        human(p),
                        human(MIN_PERIOD_NS),
                        human(MAX_PERIOD_NS)
                    ));
                }
                if b == 0 || b >= p {
                    return Err(format!(
                        "busy={} must be above 0 and below period={} (a real-time load that never sleeps is \
                         written without period and busy)",
                        human(b),
                        human(p)
                    ));
                }
                Some((p, b))
            }
            _ => return Err(format!("give period and busy both, e.g. {text}:period=10ms,busy=3ms")),
        };
        Ok(RtLoad { policy, lo, hi, periodic })
    }

    /// The share of a CPU one thread keeps busy: busy / period, or 1
    /// spinning.
    pub fn duty(&self) -> f64 {
        self.periodic.map_or(1.0, |(p, b)| b as f64 / p as f64)
    }

    /// The priority of thread `i` of `n`: spread evenly from `lo` to `hi`.
    pub fn priority(&self, i: usize, n: usize) -> u8 {
        if n <= 1 || self.lo == self.hi {
            return self.lo;
        }
        let span = (self.hi - self.lo) as usize;
        self.lo + ((i * span + (n - 1) / 2) / (n - 1)) as u8
    }

    /// As written back: `fifo:50`, `fifo:10-60:period=10ms,busy=1ms`.
    pub fn describe(&self) -> String {
        let p = match self.policy {
            RtPolicy::Fifo => "fifo",
            RtPolicy::Rr => "rr",
        };
        let prio = if self.lo == self.hi { self.lo.to_string() } else { format!("{}-{}", self.lo, self.hi) };
        match self.periodic {
            Some((per, b)) => format!("{p}:{prio}:period={},busy={}", human(per), human(b)),
            None => format!("{p}:{prio}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_priorities_and_periods_parse_within_their_bounds() {
        let l = RtLoad::parse("fifo:50:period=10ms,busy=3ms").unwrap();
        assert_eq!((l.policy, l.lo, l.hi, l.periodic), (RtPolicy::Fifo, 50, 50, Some((10_000_000, 3_000_000))));
        assert!((l.duty() - 0.3).abs() < 1e-9);
        assert_eq!(RtLoad::parse("fifo:50:busy=3ms:period=10ms").unwrap(), l, "either order, : or ,");
        let r = RtLoad::parse("rr:40").unwrap();
        assert_eq!((r.policy, r.periodic, r.duty()), (RtPolicy::Rr, None, 1.0));
        let spread = RtLoad::parse("fifo:10-60").unwrap();
        let p: Vec<u8> = (0..16).map(|i| spread.priority(i, 16)).collect();
        assert_eq!((p[0], p[15]), (10, 60));
        assert!(p.windows(2).all(|w| w[0] <= w[1]), "{p:?}");
        assert_eq!(spread.priority(0, 1), 10);
        for (bad, word) in [
            ("deadline:5", "not a policy"),
            ("fifo", "priority is missing"),
            ("fifo:0", "from 1 to 98"),
            ("fifo:99", "from 1 to 98"),
            ("fifo:60-10", "go down"),
            ("fifo:50:period=10ms", "both"),
            ("fifo:50:period=10ms,busy=10ms", "below period"),
            ("fifo:50:period=10ms,busy=20ms", "below period"),
            ("fifo:50:period=10us,busy=5us", "period=10"),
            ("fifo:50:period=10,busy=3ms", "no unit"),
            ("fifo:50:every=1ms", "not period or busy"),
            ("fifo:50:1ms", "not period=T"),
        ] {
            let e = RtLoad::parse(bad).unwrap_err();
            assert!(e.contains(word), "{bad}: {e}");
        }
        assert_eq!(l.describe(), "fifo:50:period=10ms,busy=3ms");
    }
}
