//! `-q`: as quiet as cyclictest's. At the end, one line per measured series
//! (cyclictest -q's `T: 0 ... Min: Avg: Max:`, with the samples and the
//! p99.9 beside), within 100 columns, then where the run is stored: no
//! histogram, no notes (they are stored with the run: `rtscope show`).

use rtscope_model::run::Run;
use rtscope_model::units::ShownIn;
use std::io::Write;

/// The lines of a quiet run's end, its times in `unit` (`--ns`).
pub fn write(run: &Run, unit: ShownIn, out: &mut dyn Write) -> std::io::Result<()> {
    let h = &run.header;
    writeln!(out, "rtscope {} · run {} · {}", h.kind, h.id, h.status.as_str())?;
    let series: Vec<_> = run
        .series
        .iter()
        .filter(|s| !rtscope_model::irqtime::from_trace(&s.key.metric) && s.total().count() > 0)
        .collect();
    let width = series.iter().map(|s| s.key.probe.len() + s.key.metric.len() + 1).max().unwrap_or(0).min(30);
    for s in series {
        let t = s.total();
        let name = format!("{} {}", s.key.probe, s.key.metric);
        let cpu = if s.key.cpu >= 0 { format!("CPU{}", s.key.cpu) } else { "-".into() };
        let v = |ns: i64| if s.unit == "ns" { unit.i(ns) } else { ns.to_string() };
        let unit = if s.unit == "ns" { unit.label() } else { s.unit.as_str() };
        writeln!(
            out,
            "{name:<width$} {cpu:>6} n {:>9} min {:>9} avg {:>9} p99.9 {:>9} max {:>9} {unit}",
            t.count(),
            v(t.min()),
            v(t.mean().round() as i64),
            v(t.quantile(0.999)),
            v(t.max()),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_line_per_series_within_100_columns() {
        let run = crate::report::fixtures::fixture();
        let mut out = Vec::new();
        super::write(&run, Default::default(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("rtscope ") && lines.len() > 1, "{text}");
        assert!(lines.iter().all(|l| l.chars().count() <= 100), "{text}");
        assert!(lines[1].contains(" min ") && lines[1].contains(" max "), "{text}");
        assert!(lines[1].ends_with(" us"), "{text}");
        let mut ns = Vec::new();
        super::write(&run, rtscope_model::units::ShownIn::Ns, &mut ns).unwrap();
        let ns = String::from_utf8(ns).unwrap();
        let line: Vec<&str> = ns.lines().nth(1).unwrap().split_whitespace().collect();
        let min = line.iter().position(|w| *w == "min").map(|i| line[i + 1]).unwrap();
        assert!(line.last() == Some(&"ns") && min.parse::<i64>().is_ok(), "{ns}");
        assert!(ns.lines().all(|l| l.chars().count() <= 100), "{ns}");
    }
}
