//! `rtscope wakeup --histogram N` (`-h N`): cyclictest's histogram, in
//! the format its scripts parse: `# Histogram`, one line per microsecond
//! `NNNNNN` with one tab-separated `CCCCCC` count per thread (here: per
//! measured CPU, in order), then `# Total:`, `# Min Latencies:`, `# Avg
//! Latencies:`, `# Max Latencies:`, `# Histogram Overflows:` and `#
//! Histogram Overflow at cycle number:`.

use anyhow::Result;
use rtscope_model::hist::{Tally, nonzero_buckets};
use rtscope_model::inventory::format_cpu_list;
use rtscope_model::run::{Run, Series};
use std::io::Write;

/// cyclictest's histogram of metric `metric` of a run's series.
pub struct CyclictestHist<'a> {
    pub metric: &'a str,
    /// Buckets of 1 us, 0..buckets_us-1; a sample of buckets_us us or more
    /// is an overflow.
    pub buckets_us: u32,
    /// A last column of every CPU together (cyclictest -H).
    pub all: bool,
}

/// One column: counts per microsecond, overflows and the figures in us
/// (truncated, as cyclictest's integer microseconds).
struct Column {
    counts: Vec<u64>,
    overflows: u64,
    min_us: u64,
    avg_us: u64,
    max_us: u64,
}

impl Column {
    /// A bucket of the HdrHistogram (0.1 % wide) counts in the microsecond
    /// of its lowest value: exact below 16 us, where its buckets are at
    /// most 8 ns wide and never straddle a microsecond.
    fn of(t: &Tally, buckets: usize) -> Column {
        let mut counts = vec![0u64; buckets];
        let mut overflows = t.stats.overflows;
        for [lo, _, count] in nonzero_buckets(&t.hist) {
            match counts.get_mut((lo / 1000) as usize) {
                Some(c) => *c += count,
                None => overflows += count,
            }
        }
        // A signed series' negative values (not wakeup's) count as 0 us.
        if let Some(neg) = &t.neg {
            counts[0] += neg.count();
        }
        let n = t.count();
        Column {
            counts,
            overflows,
            min_us: if n == 0 { 0 } else { t.min().max(0) as u64 / 1000 },
            avg_us: if n == 0 { 0 } else { (t.sum().max(0) / n as i128 / 1000) as u64 },
            max_us: if n == 0 { 0 } else { t.max().max(0) as u64 / 1000 },
        }
    }
}

impl CyclictestHist<'_> {
    /// Writes the histogram of `run`'s series of the metric.
    pub fn write(&self, run: &Run, out: &mut dyn Write) -> Result<()> {
        let mut series: Vec<&Series> =
            run.series.iter().filter(|s| s.key.metric == self.metric && s.key.load.is_none()).collect();
        series.sort_by_key(|s| s.key.cpu);
        let buckets = self.buckets_us as usize;
        let mut columns: Vec<Column> = series.iter().map(|s| Column::of(s.total(), buckets)).collect();
        if self.all && columns.len() > 1 {
            let mut all = Tally::new();
            for s in &series {
                all.merge(s.total());
            }
            columns.push(Column::of(&all, buckets));
        }
        writeln!(out, "# Histogram")?;
        for us in 0..buckets {
            let counts: Vec<String> = columns.iter().map(|c| format!("{:06}", c.counts[us])).collect();
            writeln!(out, "{us:06} {}", counts.join("\t"))?;
        }
        let total: Vec<String> = columns.iter().map(|c| format!(" {:09}", c.counts.iter().sum::<u64>())).collect();
        writeln!(out, "# Total:{}", total.concat())?;
        let per = |f: fn(&Column) -> u64| columns.iter().map(|c| format!(" {:05}", f(c))).collect::<String>();
        writeln!(out, "# Min Latencies:{}", per(|c| c.min_us))?;
        writeln!(out, "# Avg Latencies:{}", per(|c| c.avg_us))?;
        writeln!(out, "# Max Latencies:{}", per(|c| c.max_us))?;
        writeln!(out, "# Histogram Overflows:{}", per(|c| c.overflows))?;
        // rtscope keeps the time of each sample above its exceedance
        // threshold, not its cycle number: the overflows are "others".
        writeln!(out, "# Histogram Overflow at cycle number:")?;
        for (i, c) in columns.iter().take(series.len()).enumerate() {
            let others = if c.overflows > 0 { format!(" # {:05} others", c.overflows) } else { String::new() };
            writeln!(out, "# Thread {i}:{others}")?;
        }
        writeln!(out)?;
        let cpus: Vec<usize> = series.iter().map(|s| s.key.cpu.max(0) as usize).collect();
        writeln!(
            out,
            "# rtscope {} run {}: thread i is CPU i of {}{}; {} in us, truncated",
            run.header.kind,
            run.header.id,
            format_cpu_list(&cpus),
            if columns.len() > series.len() { ", the last column every CPU together" } else { "" },
            self.metric
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtscope_model::run::{Interval, SeriesKey};

    fn run_of(cpus: &[(i64, &[u64])]) -> Run {
        let series = cpus
            .iter()
            .map(|&(cpu, values)| {
                let mut t = Tally::new();
                for &v in values {
                    t.record(v);
                }
                let iv = Interval::new(0, 0, 1_000_000_000, &t, 0, 0);
                Series::new(SeriesKey::new("wakeup", "latency", cpu), "ns".into(), "none".into(), vec![iv], vec![])
                    .unwrap()
            })
            .collect();
        let mut run = rtscope_model::export::read_json(include_str!("../../tests/data/report-run.json"), "fixture")
            .expect("the fixture reads");
        run.series = series;
        run
    }

    #[test]
    fn writes_cyclictest_histogram_format() {
        let run = run_of(&[(0, &[1_500, 1_900, 2_100, 9_000, 12_000]), (2, &[3_000, 3_999])]);
        let mut out = Vec::new();
        CyclictestHist { metric: "latency", buckets_us: 10, all: false }.write(&run, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "# Histogram");
        assert_eq!(lines[1], "000000 000000\t000000");
        assert_eq!(lines[2], "000001 000002\t000000");
        assert_eq!(lines[3], "000002 000001\t000000");
        assert_eq!(lines[4], "000003 000000\t000002");
        assert_eq!(lines[10], "000009 000001\t000000");
        assert_eq!(lines[11], "# Total: 000000004 000000002");
        assert_eq!(lines[12], "# Min Latencies: 00001 00003");
        assert_eq!(lines[13], "# Avg Latencies: 00005 00003");
        assert_eq!(lines[14], "# Max Latencies: 00012 00003");
        assert_eq!(lines[15], "# Histogram Overflows: 00001 00000");
        assert_eq!(lines[16], "# Histogram Overflow at cycle number:");
        assert_eq!(lines[17], "# Thread 0: # 00001 others");
        assert_eq!(lines[18], "# Thread 1:");
        assert_eq!(lines[19], "");
        assert!(lines[20].contains("run 1: thread i is CPU i of 0,2"), "{}", lines[20]);
        // -H: every CPU together in a last column.
        let mut out = Vec::new();
        CyclictestHist { metric: "latency", buckets_us: 10, all: true }.write(&run, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\n000003 000000\t000002\t000002\n"), "{text}");
        assert!(text.contains("# Total: 000000004 000000002 000000006\n"), "{text}");
        assert!(text.contains("# Max Latencies: 00012 00003 00012\n"), "{text}");
    }
}
