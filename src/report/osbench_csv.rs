//! `rtscope osbench -o FILE.csv`: one row per test, its figures in us.

use super::{Format, Input, Use, Written};
use anyhow::Result;
use rtscope_model::descriptor;
use rtscope_model::extra::{Figure, osbench as osb};
use rtscope_model::units;
use serde_json::Value;
use std::io::Write;

/// `-o FILE.csv`: one row per test, times in microseconds.
pub struct OsbenchCsv;

impl Format for OsbenchCsv {
    fn name(&self) -> &'static str {
        "osbench-csv"
    }

    fn extension(&self) -> &'static str {
        "csv"
    }

    fn description(&self) -> &'static str {
        "One row per osbench test (and variant), times in microseconds"
    }

    fn uses(&self) -> &'static [Use] {
        &[Use::Osbench]
    }

    fn write(&self, input: &Input, out: &mut dyn Write) -> Result<Written> {
        let run = input.run()?;
        writeln!(
            out,
            "run_id,group,num,id,metric,name,ips,inter_process,cache_flush,cross_cpu,equal_priorities,cpu,other_cpu,samples,last_us,min_us,mean_us,p50_us,p99_us,max_us,base_ns"
        )?;
        for s in run.series.iter().filter(|s| descriptor::per_test(&s.key.probe)) {
            let m = s.total().summary();
            let x =
                |f: Figure| f.get(&s.extra).map_or(String::new(), |v| v.as_str().map_or(v.to_string(), str::to_string));
            let last = osb::LAST.get(&s.extra).and_then(Value::as_u64).unwrap_or(0);
            let name = x(osb::NAME).replace('"', "'");
            writeln!(
                out,
                "{},{},{},{},{},\"{name}\",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                run.header.id,
                x(osb::GROUP),
                x(osb::NUM),
                x(osb::TEST),
                s.key.metric,
                x(osb::IPS),
                x(osb::INTER_PROCESS),
                x(osb::CACHE_FLUSH),
                x(osb::CROSS_CPU),
                osb::EQUAL_PRIORITIES.get(&s.extra).and_then(Value::as_bool).unwrap_or(false),
                s.key.cpu,
                x(osb::OTHER_CPU).replace("null", ""),
                m.count,
                units::us(last),
                units::us_i(m.min_ns),
                units::us_f(m.mean_ns),
                units::us_i(m.p50_ns),
                units::us_i(m.p99_ns),
                units::us_i(m.max_ns),
                x(osb::BASE),
            )?;
        }
        Ok(Written::default())
    }
}
