//! Units: nanoseconds (u64) inside, microseconds with 1-3 decimals on screen.
//! Durations on the command line always carry a unit.

/// Parses a duration with a unit (`250ns`, `500us`, `1.5ms`, `10s`, `5m`,
/// `12h`, `2d`) into nanoseconds. A bare `0` is accepted; any other bare
/// number is refused, since "100" could mean microseconds (cyclictest) or
/// seconds (most shells) and a silent guess makes a wrong measurement.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration: write it with a unit, e.g. 500us, 1ms, 10s, 5m or 12h".into());
    }
    if s == "0" {
        return Ok(0);
    }
    if let Some(abs) = s.strip_prefix('-') {
        // `-5s`: a negative duration, the fix its positive twin; `--interval`
        // or `-x`: a flag where a value was due (`wakeup -i --interval`).
        let abs = abs.trim();
        if abs.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
            return Err(format!("'{s}' must be positive (a length of time, e.g. {abs})"));
        }
        return Err(format!(
            "'{s}' is a flag, not a length of time: the flag before it needs a value (e.g. 200us, 1ms, 10s)"
        ));
    }
    let mut rest = s;
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let unit_at = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("'{s}' has no unit: write {s}us, {s}ms or {s}s (units: ns, us, ms, s, m, h, d)"))?;
        let (num, after) = rest.split_at(unit_at);
        let unit_len = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let unit_ns: f64 = match unit.trim() {
            "ns" => 1.0,
            "us" | "µs" | "usec" => 1e3,
            "ms" | "msec" => 1e6,
            "s" | "sec" => 1e9,
            "m" | "min" => 60e9,
            "h" => 3600e9,
            "d" => 86400e9,
            other => {
                return Err(format!("unknown unit '{other}' in '{s}' (units: ns, us, ms, s, m, h, d)"));
            }
        };
        if num.is_empty() || num.matches('.').count() > 1 {
            return Err(format!("'{s}' is not a number followed by a unit, e.g. 500us"));
        }
        let value: f64 = num.parse().map_err(|_| format!("'{s}' is not a number followed by a unit, e.g. 500us"))?;
        if unit_ns == 1.0 && value.fract() != 0.0 {
            return Err(format!("'{s}': nanoseconds must be whole"));
        }
        total += value * unit_ns;
        rest = next.trim_start();
    }
    if !total.is_finite() || total > (u64::MAX / 2) as f64 {
        return Err(format!("'{s}' is too long"));
    }
    Ok(total.round() as u64)
}

/// Formats nanoseconds as microseconds with three decimals (`12.345`).
pub fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// Formats signed nanoseconds as microseconds with three decimals (`-0.250`).
pub fn us_i(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    format!("{sign}{}", us(ns.unsigned_abs()))
}

/// Formats signed nanoseconds as microseconds with three decimals.
pub fn us_f(ns: f64) -> String {
    format!("{:.3}", ns / 1000.0)
}

/// What a terminal table shows its times in: microseconds with three
/// decimals (the default), or whole nanoseconds (`--ns`, cyclictest's `-N`,
/// rtla's `--nano`), as the store keeps them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShownIn {
    #[default]
    Us,
    Ns,
}

impl ShownIn {
    /// Nanoseconds with `ns`, else microseconds.
    pub fn of(ns: bool) -> ShownIn {
        if ns { ShownIn::Ns } else { ShownIn::Us }
    }

    /// Its name in a table's title: `us` or `ns`.
    pub fn label(self) -> &'static str {
        match self {
            ShownIn::Us => "us",
            ShownIn::Ns => "ns",
        }
    }

    /// Nanoseconds in this unit (`1.250` or `1250`).
    pub fn u(self, ns: u64) -> String {
        match self {
            ShownIn::Us => us(ns),
            ShownIn::Ns => ns.to_string(),
        }
    }

    /// Signed nanoseconds in this unit (`-0.250` or `-250`).
    pub fn i(self, ns: i64) -> String {
        match self {
            ShownIn::Us => us_i(ns),
            ShownIn::Ns => ns.to_string(),
        }
    }

    /// A mean in this unit (three decimals of a microsecond, or whole
    /// nanoseconds).
    pub fn f(self, ns: f64) -> String {
        match self {
            ShownIn::Us => us_f(ns),
            ShownIn::Ns => format!("{ns:.0}"),
        }
    }
}

/// A duration for people: `1ms`, `10s`, `2m30s`, `1h`, `1.5ms`.
pub fn human(ns: u64) -> String {
    const UNITS: [(u64, &str); 4] = [(3_600_000_000_000, "h"), (60_000_000_000, "m"), (1_000_000_000, "s"), (1, "")];
    if ns >= 60_000_000_000 {
        let mut rest = ns;
        let mut out = String::new();
        for (size, name) in UNITS.iter().take(3) {
            let n = rest / size;
            if n > 0 {
                out.push_str(&format!("{n}{name}"));
                rest -= n * size;
            }
        }
        if rest > 0 {
            out.push_str(&human(rest));
        }
        return out;
    }
    for (size, name) in [(1_000_000_000u64, "s"), (1_000_000, "ms"), (1_000, "us")] {
        if ns >= size {
            let whole = ns / size;
            let frac = ns % size;
            if frac == 0 {
                return format!("{whole}{name}");
            }
            let text = format!("{:.3}", ns as f64 / size as f64);
            let text = text.trim_end_matches('0').trim_end_matches('.');
            return format!("{text}{name}");
        }
    }
    format!("{ns}ns")
}

/// `n` and `word`, with an `s` unless `n` is 1: `1 probe`, `2 probes`, `0 cells`.
pub fn plural(n: usize, word: &str) -> String {
    if n == 1 { format!("{n} {word}") } else { format!("{n} {word}s") }
}

/// The unit of the numbers in another tool's file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    Ns,
    Us,
    Ms,
    S,
}

impl TimeUnit {
    /// `ns`, `us`, `ms` or `s`.
    pub fn parse(text: &str) -> Result<TimeUnit, String> {
        match text {
            "ns" => Ok(TimeUnit::Ns),
            "us" => Ok(TimeUnit::Us),
            "ms" => Ok(TimeUnit::Ms),
            "s" => Ok(TimeUnit::S),
            _ => Err(format!("'{text}' is not a unit: ns, us, ms or s")),
        }
    }

    pub fn ns(self) -> u64 {
        match self {
            TimeUnit::Ns => 1,
            TimeUnit::Us => 1_000,
            TimeUnit::Ms => 1_000_000,
            TimeUnit::S => 1_000_000_000,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TimeUnit::Ns => "ns",
            TimeUnit::Us => "us",
            TimeUnit::Ms => "ms",
            TimeUnit::S => "s",
        }
    }
}

/// A number of `unit_ns` nanoseconds as written in another tool's file
/// (`19920`, `19.92047666533381`, `-3.5`, `1.2e3`), rounded to the
/// nearest nanosecond; None when it is not a finite number or does not fit.
/// A whole number is converted exactly (no float rounding of large
/// timestamps).
pub fn scaled_ns(text: &str, unit_ns: u64) -> Option<i64> {
    let unit = i64::try_from(unit_ns).ok()?;
    if let Ok(n) = text.parse::<i64>() {
        return n.checked_mul(unit);
    }
    let v: f64 = text.parse().ok()?;
    let ns = (v * unit_ns as f64).round();
    // i64::MAX as f64 rounds up to 2^63, which does not fit.
    (ns.is_finite() && ns >= i64::MIN as f64 && ns < i64::MAX as f64).then_some(ns as i64)
}

/// Seconds for people: whole seconds from a minute on, whole ms from a
/// second on (rounded up: these are mostly "measure at least" figures).
pub(crate) fn dur_s(s: f64) -> String {
    let s = s.clamp(0.0, 1e9 * 86_400.0);
    let ns = if s >= 60.0 {
        (s * (1.0 - 1e-9)).ceil() * 1e9
    } else if s >= 1.0 {
        (s * 1e3 * (1.0 - 1e-9)).ceil() * 1e6
    } else {
        (s * 1e9).round()
    };
    human(ns as u64)
}

/// `2026-11-21 06:10:00` from ns since the epoch (UTC, civil calendar).
pub fn utc(unix_ns: i64) -> String {
    let secs = unix_ns.div_euclid(1_000_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil(days);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// (year, month 1-12, day 1-31) of `days` since 1970-01-01: Howard
/// Hinnant's days-to-civil.
pub fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `32K`, `1M`, `1024` (bytes): sysfs cache sizes and `--flush-size`.
pub fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, shift) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 10),
        'M' | 'm' => (&s[..s.len() - 1], 20),
        'G' | 'g' => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    num.parse::<usize>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_unit_shows_microseconds_or_whole_nanoseconds() {
        let (us, ns) = (ShownIn::of(false), ShownIn::of(true));
        assert_eq!(
            (us.label(), us.u(1250), us.i(-250), us.f(1234.5)),
            ("us", "1.250".into(), "-0.250".into(), "1.234".into())
        );
        assert_eq!(
            (ns.label(), ns.u(1250), ns.i(-250), ns.f(1234.5)),
            ("ns", "1250".into(), "-250".into(), "1234".into())
        );
    }

    #[test]
    fn parses_every_unit() {
        assert_eq!(parse_duration("250ns"), Ok(250));
        assert_eq!(parse_duration("500us"), Ok(500_000));
        assert_eq!(parse_duration("1ms"), Ok(1_000_000));
        assert_eq!(parse_duration("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration("10s"), Ok(10_000_000_000));
        assert_eq!(parse_duration("5m"), Ok(300_000_000_000));
        assert_eq!(parse_duration("12h"), Ok(43_200_000_000_000));
        assert_eq!(parse_duration("2d"), Ok(172_800_000_000_000));
        assert_eq!(parse_duration(" 20 ms "), Ok(20_000_000));
        assert_eq!(parse_duration("0"), Ok(0));
    }

    #[test]
    fn refuses_bad_input_with_a_hint() {
        assert!(parse_duration("100").unwrap_err().contains("100us"));
        assert!(parse_duration("5parsecs").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("1.2.3ms").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-5ms").unwrap_err().contains("'-5ms' must be positive"));
        assert!(parse_duration("1.5ns").is_err());
        assert!(parse_duration("99999999999999999d").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("32K"), Some(32 << 10));
        assert_eq!(parse_size("64M"), Some(64 << 20));
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("lots"), None);
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_795_000_000_000_000_000), "2026-11-18 11:06:40");
    }

    #[test]
    fn formats_for_people() {
        assert_eq!(us(12_345), "12.345");
        assert_eq!(us(7), "0.007");
        assert_eq!(us_i(-250), "-0.250");
        assert_eq!(us_i(12_345), "12.345");
        assert_eq!(human(1_000_000), "1ms");
        assert_eq!(human(1_500_000), "1.5ms");
        assert_eq!(human(10_000_000_000), "10s");
        assert_eq!(human(150_000_000_000), "2m30s");
        assert_eq!(human(3_600_000_000_000), "1h");
        assert_eq!(human(800), "800ns");
        for ns in [250, 500_000, 1_500_000, 10_000_000_000, 150_000_000_000] {
            assert_eq!(parse_duration(&human(ns)), Ok(ns), "{ns}");
        }
    }

    #[test]
    fn numbers_of_other_tools_in_nanoseconds() {
        use super::scaled_ns;
        assert_eq!(scaled_ns("19.92047666533381", 1), Some(20));
        assert_eq!(scaled_ns("19.92047666533381", 1_000), Some(19_920));
        assert_eq!(scaled_ns("19.5", 1), Some(20), "half away from zero");
        assert_eq!(scaled_ns("-3.5", 1_000), Some(-3_500));
        assert_eq!(scaled_ns("1.2e3", 1), Some(1_200));
        assert_eq!(scaled_ns("0.001", 1_000_000_000), Some(1_000_000));
        assert_eq!(scaled_ns("1700000000123456789", 1), Some(1_700_000_000_123_456_789), "exact");
        assert_eq!(scaled_ns("9223372036854775807", 1_000), None);
        assert_eq!(scaled_ns("1e300", 1), None);
        for bad in ["abc", "", "inf", "NaN", "1,5", "12us"] {
            assert_eq!(scaled_ns(bad, 1), None, "{bad}");
        }
        assert_eq!(super::TimeUnit::parse("us").map(super::TimeUnit::ns), Ok(1_000));
        assert!(super::TimeUnit::parse("parsecs").unwrap_err().contains("ns, us, ms or s"));
    }
}
