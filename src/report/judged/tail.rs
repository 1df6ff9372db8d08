//! The tail section: each measured series' expected worst case per hour,
//! day and week with its interval, a return-levels plot per probe, each
//! fit's diagnostics.

use super::{Analysed, check_cell, probes_of, series_name, short_limits, test_cell};
use crate::report::analyze::{dur_s, level_cell, levels};
use crate::report::doc::{Block, Section, Table};
use crate::report::tailplot::{self, LevelMark, LevelRow};
use rtscope_model::analysis::pot::{Level, REFUSED, TailReport};
use rtscope_model::analysis::series::SeriesAnalysis;
use rtscope_model::run::Series;
use rtscope_model::units::{self, us_f, us_i};

/// A return level as a plot mark; None when refused.
fn mark(l: &Level) -> Option<LevelMark> {
    if l.refused.is_some() {
        return None;
    }
    Some(LevelMark {
        value_us: l.value_ns? as f64 / 1000.0,
        low_us: l.ci_low_ns.map(|v| v as f64 / 1000.0),
        high_us: l.ci_high_ns.map(|v| v as f64 / 1000.0),
        extrapolated: l.extrapolated,
    })
}

/// The rows of the return-levels plot of one probe: every fit with at
/// least one level not refused.
fn level_rows(list: &[(&Series, &TailReport, i64)], metrics: usize) -> Vec<LevelRow> {
    list.iter()
        .filter_map(|(s, t, max_ns)| {
            let lv = levels(t).map(|(_, l)| mark(l));
            lv.iter().any(Option::is_some).then(|| {
                let load = s.key.load.as_deref().map(|l| format!(" [{l}]")).unwrap_or_default();
                let label = if metrics > 1 {
                    format!("{} CPU{}{load}", s.key.metric, s.key.cpu)
                } else {
                    format!("CPU{}{load}", s.key.cpu)
                };
                LevelRow { label, observed_max_us: *max_ns as f64 / 1000.0, levels: lv }
            })
        })
        .collect()
}

/// A measured series with its analysis, or why there is none.
type Measured<'a> = (&'a Series, Result<&'a SeriesAnalysis, &'a String>);

/// Rows beyond this many are left out of a return-levels plot.
const LEVEL_ROWS: usize = 24;

/// The tail analysis of every measured series (as `rtscope analyze RUN`
/// with its defaults): the expected worst case per hour, day and week with
/// its 95 % interval, or why it is refused, as a table and a plot per
/// probe; and each fit's diagnostics in one row.
pub fn tail(a: &Analysed, p: &str) -> Vec<Section> {
    let list: Vec<_> = a.measured().collect();
    if list.is_empty() {
        return Vec::new();
    }
    let mut sec = Section::new(format!("{p}-tail"), "Tail analysis: the expected worst case");
    sec.push(Block::Para(format!(
        "A generalised Pareto tail fitted above a threshold (peaks over threshold), declustered; the expected worst \
         case over an hour, a day and a week of the same conditions, with its 95 % profile-likelihood interval; \
         refused when it would extrapolate beyond 100x the time observed. Diagnostics and options: rtscope analyze {}",
        a.run.header.id
    )));
    let rows = TailRows::gather(&list);
    let any_level = !rows.levels.rows.is_empty();
    if any_level {
        sec.push(Block::Table(rows.levels));
    }
    if !rows.refused.is_empty() {
        sec.push(refused_para(&rows.refused, any_level));
    }
    if !rows.unfit.is_empty() {
        sec.push(unfit_para(&rows.unfit));
    }
    for b in level_figures(a, p, &rows.fits) {
        sec.push(b);
    }
    if !rows.diag.rows.is_empty() {
        sec.push(Block::Para(
            "Each fit's diagnostics: Ljung-Box (20 lags) and a runs test on the interval maxima (independence), KPSS \
             (stationarity), a GEV fit of the interval maxima against the hour's level, the first and second half's \
             agreement, and the shape's stability over five thresholds; not run: too few interval maxima or \
             exceedances (a shorter --checkpoint or a longer run gives more). Failed or missing checks limit the \
             confidence."
                .into(),
        ));
        sec.push(Block::Table(rows.diag));
    }
    vec![sec]
}

/// The tail section's data, gathered from every measured series: a row of
/// levels and a row of diagnostics per fit, and the series with nothing to
/// show but a refusal or a missing fit (a sentence each kind, not a row
/// each).
struct TailRows<'a> {
    levels: Table,
    diag: Table,
    /// Each fit with a level not refused, with its series' observed maximum (ns).
    fits: Vec<(&'a Series, &'a TailReport, i64)>,
    /// Every level refused: the series and its observed duration (s).
    refused: Vec<(&'a Series, f64)>,
    /// No analysis or no fit: the series and why.
    unfit: Vec<(&'a Series, String)>,
}

impl<'a> TailRows<'a> {
    fn gather(list: &[Measured<'a>]) -> TailRows<'a> {
        let mut level_table = Table::new(
            ["series", "samples", "max (us)", "tail fit", "per hour", "per day", "per week", "confidence"]
                .map(String::from)
                .to_vec(),
            1,
        );
        for i in [3, 4, 5, 6, 7] {
            level_table.numeric[i] = false;
        }
        let diag = Table::new(
            [
                "series",
                "Ljung-Box",
                "runs",
                "KPSS",
                "GEV cross-check",
                "halves agree",
                "shape stable",
                "confidence",
                "limited by",
            ]
            .map(String::from)
            .to_vec(),
            9,
        );
        let mut rows = TailRows { levels: level_table, diag, fits: Vec::new(), refused: Vec::new(), unfit: Vec::new() };
        for &(s, an) in list {
            let an = match an {
                Ok(an) => an,
                Err(e) => {
                    rows.unfit.push((s, format!("no analysis: {e}")));
                    continue;
                }
            };
            let r = &an.report;
            let tl = match (&r.tail, &r.tail_error) {
                (Some(tl), _) => tl,
                (None, e) => {
                    rows.unfit.push((s, e.clone().unwrap_or_else(|| "unknown reason".into())));
                    continue;
                }
            };
            if levels(tl).iter().all(|(_, l)| l.refused.is_some()) {
                rows.refused.push((s, r.stats.observed_duration_s));
                continue;
            }
            rows.fit(s, an, tl);
        }
        rows
    }

    /// A fit's row of levels and row of diagnostics.
    fn fit(&mut self, s: &'a Series, an: &'a SeriesAnalysis, tl: &'a TailReport) {
        let name = series_name(s);
        let stats = &an.report.stats;
        let mut cells = vec![name.clone(), stats.count.to_string(), us_i(stats.max_ns)];
        cells.push(format!(
            "above {} us: {} exceedances, xi {:.3} ± {:.3}",
            us_f(tl.threshold_ns),
            tl.exceedances,
            tl.xi,
            tl.se_xi
        ));
        cells.extend(levels(tl).iter().map(|(_, l)| level_cell(l).trim().to_string()));
        cells.push(tl.confidence.to_string());
        let d = &tl.diagnostics;
        self.diag.row(vec![
            name,
            test_cell(&d.ljung_box),
            test_cell(&d.runs),
            test_cell(&d.kpss),
            check_cell(d.gev.passed),
            check_cell(d.halves.passed),
            check_cell(d.threshold_stability.passed),
            tl.confidence.to_string(),
            short_limits(&tl.reasons),
        ]);
        self.fits.push((s, tl, stats.max_ns));
        self.levels.row(cells);
    }
}

/// The sentence on the series whose every level is refused: how long to
/// measure for each level.
fn refused_para(refused: &[(&Series, f64)], any_level: bool) -> Block {
    let longest = refused.iter().map(|r| r.1).fold(0.0, f64::max);
    let need = |period_s: f64| units::human((period_s / REFUSED * 1e9).ceil() as u64);
    Block::Para(format!(
        "{}{}: a tail is fitted, but every level lies beyond {REFUSED:.0}x the time observed (at most {} per \
         series). Measure at least {} per series (per cell) for the hour's level, {} for the day's, {} for the \
         week's.",
        if any_level { "The other series" } else { "Every series" },
        probes_of(&refused.iter().map(|r| r.0).collect::<Vec<_>>()),
        dur_s(longest),
        need(3600.0),
        need(86_400.0),
        need(604_800.0)
    ))
}

/// The sentence on the series without a fit: how many, and the first three
/// reasons.
fn unfit_para(unfit: &[(&Series, String)]) -> Block {
    let mut why: Vec<&str> = unfit.iter().map(|u| u.1.as_str()).collect();
    why.sort_unstable();
    why.dedup();
    let shown: Vec<&str> = why.iter().take(3).copied().collect();
    Block::Para(format!(
        "No tail fit for {} series{}: {}{}.",
        unfit.len(),
        probes_of(&unfit.iter().map(|u| u.0).collect::<Vec<_>>()),
        shown.join("; "),
        if why.len() > shown.len() {
            format!("; and {} other reasons", why.len() - shown.len())
        } else {
            String::new()
        }
    ))
}

/// A return-levels plot per probe, of the fits with a level not refused.
fn level_figures(a: &Analysed, p: &str, fits: &[(&Series, &TailReport, i64)]) -> Vec<Block> {
    let mut probes: Vec<&str> = fits.iter().map(|f| f.0.key.probe.as_str()).collect();
    probes.dedup();
    let mut out = Vec::new();
    for (i, probe) in probes.iter().enumerate() {
        let of: Vec<(&Series, &TailReport, i64)> = fits.iter().filter(|f| f.0.key.probe == *probe).copied().collect();
        let mut metrics: Vec<&str> = of.iter().map(|f| f.0.key.metric.as_str()).collect();
        metrics.sort_unstable();
        metrics.dedup();
        let mut rows = level_rows(&of, metrics.len());
        if rows.is_empty() {
            continue;
        }
        let total = rows.len();
        rows.truncate(LEVEL_ROWS);
        let req = a.limit_us(probe, &metrics);
        let title = format!("{probe}: expected worst case per hour, day and week");
        out.push(Block::Figure {
            svg: tailplot::levels(&format!("{p}-levels-{i}"), &title, &rows, req),
            caption: format!(
                "{title}, with the 95 % interval, beside the observed maximum (log us{}{}; refused levels are marked, \
                 see the table)",
                if req.is_some() { "; dashed red: the requirement" } else { "" },
                if total > LEVEL_ROWS { format!("; the first {LEVEL_ROWS} of {total} series") } else { String::new() }
            ),
        });
    }
    out
}
