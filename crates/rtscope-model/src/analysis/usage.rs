//! The usage model: what "a day" and "a week" of a machine's use are. The
//! WDM latency study counts a day as 6 to 8 hours of use and a week as 5
//! days, and reads its expected worst cases per hour, day and week of that
//! use; rtscope's default is continuous operation (24 h a day, 7 days a
//! week). The return levels are levels per time of operation, so a usage
//! of 8 h/day, 5 d/week asks for the worst case in 8 h (a day) and in 40 h
//! (a week) of measured-like operation. An hour is an hour either way.
//!
//! A stress load that packs more of the disturbances a machine meets into
//! each hour than its use does is an accelerated test: the WDM study counted
//! 4 h of its accelerated load as a 40-hour week. `x10` in the usage says
//! so: each hour measured stands for 10 hours of use, and every level is
//! read at a tenth of the time of use it names.

use crate::units;
use serde::{Deserialize, Serialize};

const HOUR_NS: u64 = 3_600_000_000_000;
const DAY_NS: u64 = 24 * HOUR_NS;

/// Hours of use per day and days of use per week.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Time in use per day, ns (1 s ..= 24 h).
    pub per_day_ns: u64,
    /// Days in use per week (1 ..= 7).
    pub days_per_week: u32,
    /// Hours of use one hour measured stands for (1: the measured load is
    /// the load of use; 10: an accelerated stress load, 1 ..= 10,000).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub acceleration: f64,
}

fn one() -> f64 {
    1.0
}

fn is_one(x: &f64) -> bool {
    *x == 1.0
}

/// The largest acceleration factor taken.
const MAX_ACCELERATION: f64 = 10_000.0;

impl Default for Usage {
    fn default() -> Self {
        Usage::CONTINUOUS
    }
}

/// How a bad --usage is told to be written.
const FIX: &str = "write HOURS/day[,DAYS/week][,xFACTOR], e.g. --usage 8h/day,5d/week or, for a stress load that \
                   counts 10x, --usage 8h/day,5d/week,x10 (the default is continuous operation: 24h/day,7d/week)";

impl Usage {
    /// Continuous operation: 24 h a day, 7 days a week.
    pub const CONTINUOUS: Usage = Usage { per_day_ns: DAY_NS, days_per_week: 7, acceleration: 1.0 };

    /// Parses `8h/day,5d/week`, `8h/day` (7 days a week), `6.5h/day`,
    /// `5d/week` (24 h a day) or `continuous`, each with an acceleration
    /// factor `x10` (alone: continuous use, accelerated). The error names
    /// `flag` and the fix.
    pub fn parse(flag: &str, text: &str) -> Result<Usage, String> {
        let bad = |why: String| format!("{flag} '{text}': {why}; {FIX}");
        let t = text.trim();
        if t.eq_ignore_ascii_case("continuous") {
            return Ok(Usage::CONTINUOUS);
        }
        if t.is_empty() {
            return Err(bad("empty".into()));
        }
        let mut usage = Usage::CONTINUOUS;
        let (mut day_seen, mut week_seen, mut x_seen) = (false, false, false);
        for part in t.split(',').map(str::trim) {
            if let Some(factor) = part.strip_prefix('x').or_else(|| part.strip_suffix('x')) {
                if x_seen {
                    return Err(bad(format!("'{part}': the acceleration factor is given twice")));
                }
                x_seen = true;
                match factor.trim().parse::<f64>() {
                    Ok(f) if (1.0..=MAX_ACCELERATION).contains(&f) => usage.acceleration = f,
                    _ => {
                        return Err(bad(format!(
                            "'{part}': the acceleration factor is a number from 1 to {MAX_ACCELERATION} (x10: an hour \
                             measured stands for 10 hours of use)"
                        )));
                    }
                }
                continue;
            }
            let Some((amount, per)) = part.split_once('/') else {
                return Err(bad(format!("'{part}' names no /day or /week")));
            };
            match per.trim() {
                "day" | "d" if !day_seen => {
                    day_seen = true;
                    let ns = units::parse_duration(amount.trim()).map_err(&bad)?;
                    if !(1_000_000_000..=DAY_NS).contains(&ns) {
                        return Err(bad(format!("{} a day is not between 1s and 24h", amount.trim())));
                    }
                    usage.per_day_ns = ns;
                }
                "week" | "w" if !week_seen => {
                    week_seen = true;
                    let a = amount.trim();
                    let days = a.strip_suffix('d').unwrap_or(a).trim();
                    match days.parse::<u32>() {
                        Ok(d @ 1..=7) => usage.days_per_week = d,
                        _ => return Err(bad(format!("'{a}' a week is not a whole number of days from 1d to 7d"))),
                    }
                }
                "day" | "d" | "week" | "w" => return Err(bad(format!("'/{}' is given twice", per.trim()))),
                other => return Err(bad(format!("unknown period '/{other}' (day or week)"))),
            }
        }
        Ok(usage)
    }

    /// Whether this is continuous operation (the default).
    pub fn is_continuous(&self) -> bool {
        *self == Usage::CONTINUOUS
    }

    /// Whether the measured load stands for more than its time of use.
    pub fn is_accelerated(&self) -> bool {
        self.acceleration != 1.0
    }

    /// Seconds of use in one `period` (`hour`, `day`, `week`); None for
    /// another name.
    pub fn use_s(&self, period: &str) -> Option<f64> {
        let day = self.per_day_ns as f64 / 1e9;
        match period {
            "hour" => Some(3_600.0),
            "day" => Some(day),
            "week" => Some(day * f64::from(self.days_per_week)),
            _ => None,
        }
    }

    /// Seconds of operation as measured in one `period` (`hour`, `day`,
    /// `week`) of use: its time of use over the acceleration factor; None
    /// for another name.
    pub fn period_s(&self, period: &str) -> Option<f64> {
        self.use_s(period).map(|s| s / self.acceleration)
    }

    /// What one `period` of use is, for a level's label: `8 h of use`
    /// (`24 h: continuous operation` by default), `5 days of 8 h: 40 h
    /// of use`; "" for an hour. Accelerated, the time measured that
    /// stands for it follows: `5 days of 8 h: 40 h of use, 4 h measured
    /// at x10`.
    pub fn describe(&self, period: &str) -> String {
        let hours = |s: f64| format!("{} h", fmt_num(s / 3_600.0));
        let continuous = self.per_day_ns == DAY_NS && self.days_per_week == 7;
        let of_use = match (period, continuous) {
            ("day", true) => "24 h: continuous operation".into(),
            ("week", true) => "7 x 24 h: continuous operation".into(),
            ("day", false) => format!("{} of use", hours(self.use_s("day").unwrap_or(0.0))),
            ("week", false) => format!(
                "{} days of {}: {} of use",
                self.days_per_week,
                hours(self.use_s("day").unwrap_or(0.0)),
                hours(self.use_s("week").unwrap_or(0.0))
            ),
            _ => String::new(),
        };
        match self.period_s(period) {
            Some(measured) if self.is_accelerated() => {
                let head = if of_use.is_empty() { "1 h of use".to_string() } else { of_use };
                format!("{head}, {} measured at {}", units::human((measured * 1e9) as u64), self.factor())
            }
            _ => of_use,
        }
    }

    /// The acceleration as written: `x10`, `x2.5`.
    fn factor(&self) -> String {
        format!("x{}", fmt_num(self.acceleration))
    }

    /// `per day (8 h of use)`; `per hour` for an hour.
    pub fn label(&self, period: &str) -> String {
        match self.describe(period) {
            d if d.is_empty() => format!("per {period}"),
            d => format!("per {period} ({d})"),
        }
    }

    /// One line saying what a day and a week are, for the reports.
    pub fn sentence(&self) -> String {
        let measured = |p: &str| units::human((self.period_s(p).unwrap_or(0.0) * 1e9) as u64);
        if self.is_continuous() {
            "Usage: continuous operation (a day is 24 h, a week 7 days; --usage 8h/day,5d/week for a working \
             day and week)."
                .into()
        } else if self.is_accelerated() {
            format!(
                "Usage: {} a day, {} days a week, the measured load accelerated {} (an hour measured stands for \
                 {} h of use: an hour's level is that of {} of operation as measured, a day's of {}, a week's of {}).",
                units::human(self.per_day_ns),
                self.days_per_week,
                self.factor(),
                fmt_num(self.acceleration),
                measured("hour"),
                measured("day"),
                measured("week"),
            )
        } else {
            format!(
                "Usage: {} a day, {} days a week (a day's level is that of {} of operation, a week's of {}; \
                 an hour is an hour).",
                units::human(self.per_day_ns),
                self.days_per_week,
                units::human(self.per_day_ns),
                units::human(self.per_day_ns * u64::from(self.days_per_week)),
            )
        }
    }

    /// The flag's own spelling: `8h/day,5d/week` (`,x10` accelerated).
    pub fn spec(&self) -> String {
        let x = if self.is_accelerated() { format!(",{}", self.factor()) } else { String::new() };
        format!("{}/day,{}d/week{x}", units::human(self.per_day_ns), self.days_per_week)
    }

    /// The usage stored with a run (its plan's `usage`); continuous for a
    /// run stored without one (older runs, and every run measured without
    /// --usage).
    pub fn of_plan(plan: &serde_json::Value) -> Usage {
        serde_json::from_value(plan["usage"].clone()).unwrap_or_default()
    }
}

/// A number with at most two decimals and no trailing zeros.
fn fmt_num(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_periods() {
        let u = Usage::parse("--usage", "8h/day,5d/week").unwrap();
        assert_eq!(u, Usage { per_day_ns: 8 * HOUR_NS, days_per_week: 5, acceleration: 1.0 });
        assert_eq!(u.period_s("hour"), Some(3_600.0));
        assert_eq!(u.period_s("day"), Some(28_800.0));
        assert_eq!(u.period_s("week"), Some(144_000.0));
        assert_eq!(u.period_s("year"), None);
        assert_eq!(u.label("day"), "per day (8 h of use)");
        assert_eq!(u.label("week"), "per week (5 days of 8 h: 40 h of use)");
        assert_eq!(u.label("hour"), "per hour");
        assert!(!u.is_continuous());

        let c = Usage::default();
        assert!(c.is_continuous());
        assert_eq!(c.period_s("day"), Some(86_400.0));
        assert_eq!(c.period_s("week"), Some(604_800.0));
        assert_eq!(c.label("day"), "per day (24 h: continuous operation)");
        assert!(c.sentence().contains("continuous operation"));

        let half = Usage::parse("--usage", " 6.5h/day ").unwrap();
        assert_eq!((half.period_s("day"), half.days_per_week), (Some(23_400.0), 7));
        assert_eq!(half.label("day"), "per day (6.5 h of use)");
        assert_eq!(Usage::parse("--usage", "5d/week").unwrap().period_s("week"), Some(432_000.0));
        assert_eq!(Usage::parse("--usage", "continuous").unwrap(), Usage::CONTINUOUS);
        assert_eq!(Usage::parse("--usage", "24h/day,7d/week").unwrap(), Usage::CONTINUOUS);
    }

    /// The WDM study's accelerated week: 4 h of its stress load counted as
    /// a 40-hour week.
    #[test]
    fn an_accelerated_load_reads_each_period_at_its_share_of_the_time_measured() {
        let u = Usage::parse("--usage", "8h/day,5d/week,x10").unwrap();
        assert_eq!(u.acceleration, 10.0);
        assert_eq!(u.use_s("week"), Some(144_000.0));
        assert_eq!(u.period_s("week"), Some(14_400.0), "40 h of use: 4 h measured");
        assert_eq!(u.period_s("hour"), Some(360.0));
        assert_eq!(u.label("week"), "per week (5 days of 8 h: 40 h of use, 4h measured at x10)");
        assert_eq!(u.label("hour"), "per hour (1 h of use, 6m measured at x10)");
        assert!(u.sentence().contains("accelerated x10"), "{}", u.sentence());
        assert_eq!(Usage::parse("--usage", &u.spec()).unwrap(), u);
        let c = Usage::parse("--usage", "10x").unwrap();
        assert_eq!((c.per_day_ns, c.days_per_week, c.acceleration), (DAY_NS, 7, 10.0));
        assert_eq!(c.label("day"), "per day (24 h: continuous operation, 2h24m measured at x10)");
        assert!(!c.is_continuous());
        // Stored: the field only when accelerated, so older readers and
        // runs keep their shape; a run stored without it is not accelerated.
        assert!(serde_json::to_value(Usage::CONTINUOUS).unwrap().get("acceleration").is_none());
        assert_eq!(serde_json::to_value(u).unwrap()["acceleration"], 10.0);
        assert_eq!(
            Usage::of_plan(&serde_json::json!({"usage": {"per_day_ns": DAY_NS, "days_per_week": 7}})),
            Usage::CONTINUOUS
        );
        for bad in ["x0.5", "x", "xten", "x10,x2", "x20000"] {
            let e = Usage::parse("--usage", bad).unwrap_err();
            assert!(e.contains("acceleration factor") && e.contains("x10"), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_input_names_the_flag_and_the_fix() {
        for (text, why) in [
            ("", "empty"),
            ("8h", "names no /day"),
            ("25h/day", "not between 1s and 24h"),
            ("0h/day", "not between"),
            ("8x/day", "unknown unit"),
            ("8h/day,8d/week", "from 1d to 7d"),
            ("8h/day,2.5d/week", "whole number"),
            ("8h/day,6h/day", "given twice"),
            ("8h/month", "unknown period"),
        ] {
            let e = Usage::parse("--usage", text).unwrap_err();
            assert!(e.starts_with(&format!("--usage '{text}'")), "{e}");
            assert!(e.contains(why), "{text}: {e}");
            assert!(e.contains("e.g. --usage 8h/day,5d/week"), "{e}");
        }
    }

    #[test]
    fn stored_in_the_plan_and_read_back() {
        let u = Usage::parse("--usage", "8h/day,5d/week").unwrap();
        let plan = serde_json::json!({ "usage": u });
        assert_eq!(Usage::of_plan(&plan), u);
        assert_eq!(Usage::of_plan(&serde_json::json!({})), Usage::CONTINUOUS);
        assert_eq!(Usage::of_plan(&serde_json::Value::Null), Usage::CONTINUOUS);
        assert_eq!(u.spec(), "8h/day,5d/week");
        assert_eq!(Usage::parse("--usage", &u.spec()).unwrap(), u);
    }
}
