//! `export --format hdr`: the HdrHistogram interval log, from each
//! checkpoint interval's histogram (the model's HdrHistogram encoding).

use super::{Format, Input, Use, Written};
use anyhow::{Result, anyhow};
use base64::Engine;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use rtscope_model::hist;
use rtscope_model::run::{Interval, Run};
use std::io::Write;
use std::time::Duration;

pub struct Hdr;

impl Format for Hdr {
    fn name(&self) -> &'static str {
        "hdr"
    }

    fn extension(&self) -> &'static str {
        "hlog"
    }

    fn description(&self) -> &'static str {
        "HdrHistogram interval log (tags probe.metric.cpuN, values in ns): HdrHistogram's own tools read it"
    }

    fn uses(&self) -> &'static [Use] {
        &[Use::Export]
    }

    fn write(&self, input: &Input, out: &mut dyn Write) -> Result<Written> {
        let run = input.run()?;
        match input.intervals {
            Some(each) => write_log(run, each, out)?,
            None => write_log(run, &|f| in_time_order(run, f), out)?,
        }
        Ok(Written::default())
    }

    fn streams_intervals(&self) -> bool {
        true
    }
}

/// `f` of each interval of `run`'s series (held whole) in the order of
/// their start times, as [`rtscope_model::store::Store::for_each_interval_in_time`]
/// gives a stored run's.
fn in_time_order(run: &Run, f: &mut dyn FnMut(usize, Interval) -> Result<()>) -> Result<()> {
    let mut all: Vec<(u64, usize, &Interval)> = Vec::new();
    for (i, s) in run.series.iter().enumerate() {
        all.extend(s.intervals.iter().map(|iv| (iv.start_ns, i, iv)));
    }
    all.sort_by_key(|&(start, i, _)| (start, i));
    all.into_iter().try_for_each(|(_, i, iv)| f(i, iv.clone()))
}

/// The HdrHistogram interval log: one line per checkpoint interval and
/// series, tagged `probe.metric.cpuN` (`probe.metric.cpuN@load` in an
/// assessment), values in nanoseconds. It opens with the header that
/// HdrHistogram's own `HistogramLogWriter` (Java) writes: the logger, the
/// log format version, StartTime (with its date), BaseTime and the column
/// legend; interval timestamps are seconds from the BaseTime, the run's
/// start. The lines are in time order, lines that start together by tag;
/// `intervals` gives the run's intervals in time order (streamed from the
/// store, or from the run held whole), and the lines are written as they
/// come: an interval's stored histogram is already the log's V2 + DEFLATE
/// encoding, written as it is (decoded and encoded again only where it is
/// not rtscope's).
fn write_log(run: &Run, intervals: &super::Intervals, out: &mut dyn Write) -> Result<()> {
    let start_ns = run.header.started_unix_ns.max(0) as u64;
    let start = format!("{}.{:03}", start_ns / 1_000_000_000, start_ns % 1_000_000_000 / 1_000_000);
    writeln!(out, "#[Logged with rtscope {}]", env!("CARGO_PKG_VERSION"))?;
    writeln!(out, "#[Histogram log format version {HDR_LOG_FORMAT_VERSION}]")?;
    writeln!(out, "#[StartTime: {start} (seconds since epoch), {}]", java_date(start_ns / 1_000_000_000))?;
    writeln!(out, "#[BaseTime: {start} (seconds since epoch)]")?;
    writeln!(
        out,
        "#rtscope run {} ({}) of {}: values in nanoseconds, tags PROBE.METRIC.cpuN[@LOAD][.neg]",
        run.header.id, run.header.uuid, run.header.hostname
    )?;
    writeln!(out, "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"")?;
    // The BaseTime above as the writer's intervals see it: offsets from
    // the millisecond it names.
    let base_ns = start_ns / 1_000_000 * 1_000_000;
    let tags: Vec<String> = run
        .series
        .iter()
        .map(|s| {
            let mut tag = format!("{}.{}.cpu{}", s.key.probe, s.key.metric, s.key.cpu);
            if let Some(l) = &s.key.load {
                // Tags hold no whitespace or comma.
                tag.push('@');
                tag.extend(l.chars().map(|c| if c.is_whitespace() || c == ',' { '_' } else { c }));
            }
            tag
        })
        .collect();
    let mut lines = Lines { out, serializer: V2DeflateSerializer::new(), encoded: Vec::new(), text: String::new() };
    // The intervals that start together, to be written by tag.
    let mut together: Vec<(usize, Interval)> = Vec::new();
    let flush = |together: &mut Vec<(usize, Interval)>, lines: &mut Lines| -> Result<()> {
        // A signed series' negative half goes under its own tag, `.neg`,
        // as magnitudes (an HdrHistogram holds no negative value).
        let mut order: Vec<(String, usize, bool)> = Vec::new();
        for (k, (i, iv)) in together.iter().enumerate() {
            order.push((tags[*i].clone(), k, false));
            if iv.neg.is_some() {
                order.push((format!("{}.neg", tags[*i]), k, true));
            }
        }
        order.sort();
        for (tag, k, neg) in order {
            let iv = &together[k].1;
            let offset = Duration::from_nanos(
                (start_ns - base_ns).saturating_add(iv.start_ns.saturating_sub(run.header.start_mono_ns)),
            );
            let length = Duration::from_nanos(iv.end_ns.saturating_sub(iv.start_ns));
            lines.write(&tag, offset, length, iv, neg)?;
        }
        together.clear();
        Ok(())
    };
    intervals(&mut |i, iv| {
        if together.first().is_some_and(|(_, first)| first.start_ns != iv.start_ns) {
            flush(&mut together, &mut lines)?;
        }
        together.push((i, iv));
        Ok(())
    })?;
    flush(&mut together, &mut lines)
}

/// The log's lines, as HdrHistogram's `IntervalLogWriter` writes them.
struct Lines<'w> {
    out: &'w mut dyn Write,
    serializer: V2DeflateSerializer,
    encoded: Vec<u8>,
    text: String,
}

impl Lines<'_> {
    /// The line of `iv`'s histogram (its negative half's when `neg`).
    fn write(&mut self, tag: &str, offset: Duration, length: Duration, iv: &Interval, neg: bool) -> Result<()> {
        let (stats, hdr) = match (&iv.neg, neg) {
            (Some(n), true) => (n.stats, n.hdr.as_slice()),
            _ => (iv.stats, iv.hdr.as_slice()),
        };
        let (max, bytes) = match hist::encoded_max(hdr, &stats) {
            Some(max) => (max, hdr),
            None => {
                let t = iv.tally().map_err(|e| anyhow!("{tag}: {e}"))?;
                let h = if neg { t.neg.map(|n| n.hist).unwrap_or_else(hist::new_hist) } else { t.hist };
                self.encoded.clear();
                self.serializer
                    .serialize(&h, &mut self.encoded)
                    .map_err(|e| anyhow!("writing the HdrHistogram log: {e:?}"))?;
                (h.max(), self.encoded.as_slice())
            }
        };
        self.text.clear();
        base64::engine::general_purpose::STANDARD.encode_string(bytes, &mut self.text);
        writeln!(
            self.out,
            "Tag={tag},{:.3},{:.3},{:.3},{}",
            offset.as_secs_f64(),
            length.as_secs_f64(),
            max as f64,
            self.text
        )?;
        Ok(())
    }
}

/// The version HdrHistogram's Java `HistogramLogWriter` writes (2.1.x):
/// compressed V2 histograms, optional `Tag=` prefixes.
pub const HDR_LOG_FORMAT_VERSION: &str = "1.3";

/// `Tue Nov 14 22:13:20 UTC 2023`: Java's `Date.toString()`, in UTC, as
/// HdrHistogram's log writer puts it after the StartTime.
fn java_date(unix_secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let (days, rem) = ((unix_secs / 86_400) as i64, unix_secs % 86_400);
    let (y, m, d) = rtscope_model::units::civil(days);
    format!(
        "{} {} {d:02} {:02}:{:02}:{:02} UTC {y}",
        DAYS[(days % 7) as usize],
        MONTHS[(m - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::{fixture, matrix_run, signed_run};
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

    fn log(run: &Run) -> Vec<u8> {
        let mut out = Vec::new();
        Hdr.write(&Input::one(run), &mut out).unwrap();
        out
    }

    fn tags(log: &[u8]) -> Vec<String> {
        IntervalLogIterator::new(log)
            .filter_map(|e| match e.unwrap() {
                LogEntry::Interval(h) => h.tag().map(|t| t.as_str().to_string()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_line_per_series_and_interval_after_the_java_writers_header() {
        let run = fixture();
        let log = log(&run);
        let intervals: usize = run.series.iter().map(|s| s.intervals.len()).sum();
        let tags = tags(&log);
        assert_eq!(tags.len(), intervals);
        assert!(tags.iter().any(|t| t == "wakeup.latency.cpu0"), "{tags:?}");
        // The header HdrHistogram's Java writer puts first, in its order.
        let text = String::from_utf8(log).unwrap();
        let lines: Vec<&str> = text.lines().take(6).collect();
        assert_eq!(lines[0], format!("#[Logged with rtscope {}]", env!("CARGO_PKG_VERSION")));
        assert_eq!(lines[1], "#[Histogram log format version 1.3]");
        assert_eq!(lines[2], "#[StartTime: 1795249501.362 (seconds since epoch), Sat Nov 21 08:25:01 UTC 2026]");
        assert_eq!(lines[3], "#[BaseTime: 1795249501.362 (seconds since epoch)]");
        assert_eq!(lines[5], r#""StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram""#);
    }

    #[test]
    fn negative_halves_and_loads_get_their_tags() {
        let signed = tags(&log(&signed_run()));
        assert!(signed.iter().any(|t| t == "sleep.nanosleep@5ms.cpu1.neg"), "{signed:?}");
        let tags = tags(&log(&matrix_run()));
        assert!(tags.iter().any(|t| t == "wakeup.latency.cpu0@idle"), "{tags:?}");
        assert!(tags.iter().any(|t| t == "wakeup.latency.cpu0@cmd:'a__b'"), "{tags:?}");
    }

    /// Each line's histogram and maximum are its interval's, whether its
    /// stored encoding was written as it is or decoded and encoded again;
    /// the lines in time order, by tag within a time.
    #[test]
    fn each_line_holds_its_intervals_histogram_and_maximum() {
        use base64::Engine;
        for run in [fixture(), signed_run(), matrix_run()] {
            let mut expected: Vec<(u64, String, hist::Hist)> = Vec::new();
            for s in &run.series {
                let mut tag = format!("{}.{}.cpu{}", s.key.probe, s.key.metric, s.key.cpu);
                if let Some(l) = &s.key.load {
                    tag.push('@');
                    tag.extend(l.chars().map(|c| if c.is_whitespace() || c == ',' { '_' } else { c }));
                }
                for iv in &s.intervals {
                    let t = iv.tally().unwrap();
                    expected.push((iv.start_ns, tag.clone(), t.hist));
                    if let Some(n) = t.neg {
                        expected.push((iv.start_ns, format!("{tag}.neg"), n.hist));
                    }
                }
            }
            expected.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
            let log = log(&run);
            let lines: Vec<_> = IntervalLogIterator::new(&log)
                .filter_map(|e| match e.unwrap() {
                    LogEntry::Interval(h) => Some(h),
                    _ => None,
                })
                .collect();
            assert_eq!(lines.len(), expected.len());
            for (line, (_, tag, h)) in lines.iter().zip(&expected) {
                assert_eq!(line.tag().unwrap().as_str(), tag);
                let bytes = base64::engine::general_purpose::STANDARD.decode(line.encoded_histogram()).unwrap();
                let got = hist::decode(&bytes).unwrap();
                assert!(got == *h, "{tag}: another histogram");
                assert_eq!(line.max(), h.max() as f64, "{tag}: its maximum");
            }
        }
    }

    #[test]
    fn java_dates() {
        assert_eq!(java_date(0), "Thu Jan 01 00:00:00 UTC 1970");
        assert_eq!(java_date(1_700_000_000), "Tue Nov 14 22:13:20 UTC 2023");
        assert_eq!(java_date(1_795_000_000), "Wed Nov 18 11:06:40 UTC 2026");
        assert_eq!(java_date(951_782_400), "Tue Feb 29 00:00:00 UTC 2000");
    }
}
