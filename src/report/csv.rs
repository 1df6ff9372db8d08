//! `export --format csv`: one row per non-empty bucket of each series'
//! whole-run histogram (a signed series' negative buckets first, with
//! negative bounds), plus a row for the overflows; an assessment's rows end
//! with the load (a last column `load`).

use super::{Format, Input, Use, Written};
use anyhow::Result;
use rtscope_model::hist;
use std::io::Write;

pub struct Csv;

impl Format for Csv {
    fn name(&self) -> &'static str {
        "csv"
    }

    fn extension(&self) -> &'static str {
        "csv"
    }

    fn description(&self) -> &'static str {
        "One row per non-empty histogram bucket of each series"
    }

    fn uses(&self) -> &'static [Use] {
        &[Use::Export]
    }

    fn reads_summed(&self) -> bool {
        true
    }

    fn write(&self, input: &Input, out: &mut dyn Write) -> Result<Written> {
        let run = input.run()?;
        let loads = run.series.iter().any(|s| s.key.load.is_some());
        writeln!(out, "run_id,probe,metric,cpu,lowest_ns,highest_ns,count{}", if loads { ",load" } else { "" })?;
        for s in &run.series {
            let total = s.total();
            let load = match (&s.key.load, loads) {
                (Some(l), _) => format!(",{}", field(l)),
                (None, true) => ",".into(),
                (None, false) => String::new(),
            };
            let row = |out: &mut dyn Write, lo: i64, hi: i64, n: u64| {
                writeln!(out, "{},{},{},{},{lo},{hi},{n}{load}", run.header.id, s.key.probe, s.key.metric, s.key.cpu)
            };
            let beyond = hist::HIGHEST_NS as i64 + 1;
            if let Some(neg) = total.neg.as_ref().filter(|n| n.stats.overflows > 0) {
                row(out, -(neg.stats.max as i64), -beyond, neg.stats.overflows)?;
            }
            for [lo, hi, n] in hist::signed_buckets(total) {
                row(out, lo, hi, n as u64)?;
            }
            if total.stats.overflows > 0 {
                row(out, beyond, total.stats.max as i64, total.stats.overflows)?;
            }
        }
        Ok(Written::default())
    }
}

/// A CSV field, quoted when it holds a comma or a quote (a `cmd:` load).
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::{fixture, matrix_run, signed_run};

    fn csv(run: &rtscope_model::run::Run) -> String {
        let mut out = Vec::new();
        Csv.write(&Input::one(run), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Every sample once: the buckets and the overflow row add up to each series' count.
    #[test]
    fn every_sample_is_in_a_row() {
        let run = fixture();
        let text = csv(&run);
        assert!(text.starts_with("run_id,probe,metric,cpu,lowest_ns,highest_ns,count\n"), "{text}");
        for s in &run.series {
            let prefix = format!("1,{},{},{},", s.key.probe, s.key.metric, s.key.cpu);
            let n: u64 = text
                .lines()
                .filter(|l| l.starts_with(&prefix))
                .map(|l| l.rsplit(',').next().unwrap().parse::<u64>().unwrap())
                .sum();
            assert_eq!(n, s.total().count(), "{prefix}");
        }
    }

    #[test]
    fn negative_rows_first_and_an_assessment_ends_with_the_load() {
        let text = csv(&signed_run());
        let sleep: Vec<&str> = text.lines().filter(|l| l.contains(",sleep,")).collect();
        assert!(sleep[0].split(',').nth(4).unwrap().starts_with('-'), "{}", sleep[0]);
        let total: u64 = sleep.iter().map(|l| l.rsplit(',').next().unwrap().parse::<u64>().unwrap()).sum();
        assert_eq!(total, 2000);
        let text = csv(&matrix_run());
        assert!(text.starts_with("run_id,probe,metric,cpu,lowest_ns,highest_ns,count,load\n"), "{text}");
        assert!(text.lines().nth(1).unwrap().ends_with(",\"cmd:'a, b'\""), "{text}");
        assert!(text.lines().any(|l| l.ends_with(",idle")), "{text}");
        assert_eq!(field("cmd:'a, b'"), "\"cmd:'a, b'\"");
    }
}
