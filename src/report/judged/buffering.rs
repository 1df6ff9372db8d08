//! The MTTF section: the mean time to a buffer underrun against the
//! number of buffers, a curve per period and load, and each series' MTTF
//! table.

use super::{Analysed, probes_of, series_name};
use crate::report::analyze::{MTTF_LEGEND, dur_s, mttf_cell, smallest_cell};
use crate::report::doc::{Block, Section, Table};
use crate::report::tailplot::{self, Mark, MttfAxis, MttfCurve, MttfPoint};
use rtscope_model::analysis::mttf::{self, Compute, Source};
use rtscope_model::analysis::pot::REFUSED;
use rtscope_model::analysis::series::{Options, SeriesAnalysis};
use rtscope_model::analysis::verdict::{Lhs, Op};
use rtscope_model::descriptor;
use rtscope_model::run::{Run, Series};
use rtscope_model::units;

/// One MTTF curve: a period and compute time, over the series of one load.
struct CurveSpec {
    t_ns: u64,
    c_ns: u64,
    load: Option<String>,
}

/// The worst MTTF of `list` (every CPU of one load) at each n = 1 ..=
/// `n_max`: the highest underrun probability decides; where any series
/// has not enough data the point is left out (its worst case is unknown).
pub fn worst_curve(list: &[&SeriesAnalysis], t_ns: u64, c: &Compute, n_max: u32) -> Vec<MttfPoint> {
    let per: Vec<Vec<mttf::Mttf>> =
        list.iter().map(|s| mttf::curve(&s.obs, s.model.as_ref(), t_ns, c, n_max, false)).collect();
    (0..n_max as usize)
        .filter_map(|i| {
            let at: Vec<&mttf::Mttf> = per.iter().map(|c| &c[i]).collect();
            if at.is_empty() || at.iter().any(|m| m.source == Source::NotEnoughData || m.p_exceed.is_none()) {
                return None;
            }
            let worst = at.iter().max_by(|x, y| x.p_exceed.unwrap_or(0.0).total_cmp(&y.p_exceed.unwrap_or(0.0)))?;
            // A fitted tail's MTTF beyond 100x the observed duration (no
            // underrun at all included) is refused: no point.
            if worst.refused.is_some() {
                return None;
            }
            let (mttf_s, mark) = match (worst.mttf_s?, worst.source) {
                (s, Source::Observed) => (s, Mark::Observed),
                (s, _) if worst.extrapolated => (s, Mark::Extrapolated),
                (s, _) => (s, Mark::Fitted),
            };
            Some(MttfPoint { n: worst.buffers, mttf_s, mark })
        })
        .collect()
}

/// The x range of an MTTF plot: up to one past the first n at which every
/// curve reaches the highest target (or has no underrun), 6 at least, 16 at
/// most.
pub fn n_range(curves: &[MttfCurve], target_s: f64) -> u32 {
    let reach = curves
        .iter()
        .map(|c| c.points.iter().find(|p| p.mttf_s >= target_s).map(|p| p.n + 1))
        .try_fold(0u32, |acc, n| n.map(|n| acc.max(n)));
    reach.unwrap_or(16).clamp(6, 16)
}

/// The cell of a curve's point in the figure's table.
pub(super) fn point_cell(p: Option<&MttfPoint>) -> String {
    match p {
        None => "?".into(),
        Some(p) => match p.mark {
            Mark::Observed => format!("{} o", dur_s(p.mttf_s)),
            Mark::Fitted => format!("{} f", dur_s(p.mttf_s)),
            Mark::Extrapolated => format!("{} e", dur_s(p.mttf_s)),
        },
    }
}

/// Curves beyond this many on one MTTF plot: a plot per period instead.
const MTTF_CURVES: usize = 8;
/// The highest n computed for an MTTF curve.
const N_MAX: u32 = 16;

/// MTTF against buffering (the WDM latency study's soft-modem and audio analysis):
/// a plot of MTTF against the number of buffers, a curve per period and
/// load (the worst CPU), the targets as lines, and the figure's data as a
/// table for Markdown; then each series' MTTF table.
pub fn mttf(a: &Analysed, p: &str) -> Vec<Section> {
    let measured: Vec<(&Series, &SeriesAnalysis)> = a.measured().filter_map(|(s, an)| Some((s, an.ok()?))).collect();
    let tables: Vec<(&Series, &mttf::MttfTable)> =
        measured.iter().filter_map(|(s, an)| Some((*s, an.report.mttf.as_ref()?))).collect();
    if measured.is_empty() {
        return Vec::new();
    }
    let mut sec = Section::new(format!("{p}-mttf"), "MTTF against buffering");
    sec.push(Block::Para(
        "A consumer with n buffers of period t and a compute time c per period underruns when a latency exceeds the \
         slack (n - 1) t - c; with p the probability of that per period (observed where at least 10 samples exceed \
         the slack, from the fitted tail beyond) and theta the extremal index, the mean time to an underrun is \
         MTTF = t / (theta p). Periods 1.333, 2.667 and 5.333 ms (48 kHz audio with 64, 128 and 256 frames) and the \
         1 ms cycle, c = half the period, and the periods of any mttf requirement; at each n the worst CPU decides."
            .into(),
    ));
    let asked = CurvesAsked::new(a, &measured);
    for (mi, (probe, metric)) in asked.metrics.iter().enumerate() {
        let of: Vec<&SeriesAnalysis> =
            measured.iter().filter(|(s, _)| &s.key.probe == probe && &s.key.metric == metric).map(|m| m.1).collect();
        if of.is_empty() {
            continue;
        }
        let loads = curve_loads(a.run, &of);
        let specs: Vec<CurveSpec> = asked
            .pairs
            .iter()
            .flat_map(|&(t_ns, c_ns)| loads.iter().map(move |l| CurveSpec { t_ns, c_ns, load: l.clone() }))
            .collect();
        let curves: Vec<MttfCurve> = specs.iter().map(|sp| worst_of_load(&of, sp)).collect();
        let top = asked.targets.iter().map(|t| t.0).fold(0f64, f64::max);
        for (gi, g) in plot_groups(&specs, &asked.pairs, loads.len()).iter().enumerate() {
            let cs: Vec<MttfCurve> = g.iter().map(|&i| curves[i].clone()).collect();
            if cs.iter().all(|c| c.points.is_empty()) {
                continue;
            }
            let id = format!("{p}-mttf-{mi}-{gi}");
            let title = format!(
                "{probe} {metric}: mean time to a buffer underrun against {}",
                match a.mttf_axis {
                    MttfAxis::Buffers => "the number of buffers",
                    MttfAxis::Buffering => "the total buffering time",
                }
            );
            for b in mttf_figure(&id, &title, cs, top, &asked.targets, a.mttf_axis, loads.len() > 1) {
                sec.push(b);
            }
        }
    }
    for b in mttf_tables(a, tables, &asked.metrics) {
        sec.push(b);
    }
    vec![sec]
}

/// What the MTTF curves are drawn of: the series (probe, metric), the
/// periods with their compute times (ns), and the targets (s, label).
struct CurvesAsked {
    metrics: Vec<(String, String)>,
    pairs: Vec<(u64, u64)>,
    targets: Vec<(f64, String)>,
}

impl CurvesAsked {
    /// Wake-up latency (else the run's first metric) at the default periods
    /// against the default target, and any series, period and target an
    /// mttf requirement names.
    fn new(a: &Analysed, measured: &[(&Series, &SeriesAnalysis)]) -> CurvesAsked {
        let mut metrics: Vec<(String, String)> = Vec::new();
        if let Some((p, m)) = descriptor::release_jitter()
            .filter(|&(p, m)| measured.iter().any(|(s, _)| s.key.probe == p && s.key.metric == m))
        {
            metrics.push((p.into(), m.into()));
        } else {
            metrics.push((measured[0].0.key.probe.clone(), measured[0].0.key.metric.clone()));
        }
        let mut pairs: Vec<(u64, u64)> = Options::default().periods.iter().map(|&t| (t, t / 2)).collect();
        let mut targets: Vec<(f64, String)> = vec![(Options::default().target_s, "target 1 day".into())];
        for r in &a.asked.reqs {
            if let Lhs::Mttf { t_ns, c_ns, series, .. } = &r.lhs {
                if let Some(m) = series.clone().filter(|m| !metrics.contains(m)) {
                    metrics.push(m);
                }
                // The audio profiles' periods are the defaults, rounded up.
                if !pairs.iter().any(|&(t, c)| t.abs_diff(*t_ns) <= 1 && c.abs_diff(*c_ns) <= 1) {
                    pairs.push((*t_ns, *c_ns));
                }
                let s = r.limit_ns as f64 / 1e9;
                if !targets.iter().any(|t| (t.0 - s).abs() < 1e-9 * s) {
                    targets.push((
                        s,
                        format!("requirement {} {}", if matches!(r.op, Op::Gt | Op::Ge) { ">" } else { "<" }, dur_s(s)),
                    ));
                }
            }
        }
        CurvesAsked { metrics, pairs, targets }
    }
}

/// The loads of `of` in the plan's order; None for a run without loads.
fn curve_loads(run: &Run, of: &[&SeriesAnalysis]) -> Vec<Option<String>> {
    let mut loads: Vec<Option<String>> =
        run.loads().into_iter().filter(|l| of.iter().any(|s| s.key.load.as_ref() == Some(l))).map(Some).collect();
    if of.iter().any(|s| s.key.load.is_none()) {
        loads.push(None);
    }
    loads
}

/// The curve of `sp`: the worst CPU of its load at each n.
fn worst_of_load(of: &[&SeriesAnalysis], sp: &CurveSpec) -> MttfCurve {
    let list: Vec<&SeriesAnalysis> = of.iter().filter(|s| s.key.load == sp.load).copied().collect();
    MttfCurve {
        period_ns: sp.t_ns,
        label: format!(
            "t={}, c={}{}",
            units::human(sp.t_ns),
            units::human(sp.c_ns),
            sp.load.as_deref().map(|l| format!(" [{l}]")).unwrap_or_default()
        ),
        points: worst_curve(&list, sp.t_ns, &Compute::Fixed(sp.c_ns), N_MAX),
    }
}

/// The curves (indices into `specs`) of each plot: one plot, or a plot per
/// period when one would hold too many curves.
fn plot_groups(specs: &[CurveSpec], pairs: &[(u64, u64)], loads: usize) -> Vec<Vec<usize>> {
    if specs.len() > MTTF_CURVES && loads > 1 {
        pairs
            .iter()
            .map(|&(t, c)| (0..specs.len()).filter(|&i| specs[i].t_ns == t && specs[i].c_ns == c).collect())
            .collect()
    } else {
        vec![(0..specs.len()).collect()]
    }
}

/// One MTTF plot of `cs` up to the n at which they reach the highest
/// target `top`, and its data as a table.
fn mttf_figure(
    id: &str,
    title: &str,
    cs: Vec<MttfCurve>,
    top: f64,
    targets: &[(f64, String)],
    axis: MttfAxis,
    per_load: bool,
) -> [Block; 2] {
    let n_max = n_range(&cs, top);
    let cs: Vec<MttfCurve> = cs
        .into_iter()
        .map(|mut c| {
            c.points.retain(|p| p.n <= n_max);
            c
        })
        .collect();
    let figure = Block::Figure {
        svg: tailplot::mttf(id, title, &cs, n_max, targets, axis),
        caption: format!(
            "{title} (log MTTF; a curve per period{}; filled: observed, hollow: from the fitted tail; no point where \
             the data and the fit cannot tell)",
            if per_load { " and load, the worst CPU of each" } else { ", the worst CPU" }
        ),
    };
    let mut head = vec!["curve".to_string()];
    head.extend((1..=n_max).map(|n| format!("n={n}")));
    let mut tab = Table::new(head, 1);
    for c in &cs {
        let mut cells = vec![c.label.clone()];
        cells.extend((1..=n_max).map(|n| point_cell(c.points.iter().find(|p| p.n == n))));
        tab.row(cells);
    }
    [figure, Block::FigureData(tab)]
}

/// Per series the MTTF table, for the series the curves are about and only
/// where it holds a figure; the rest in a sentence.
fn mttf_tables(a: &Analysed, tables: Vec<(&Series, &mttf::MttfTable)>, metrics: &[(String, String)]) -> Vec<Block> {
    let informative = |m: &mttf::MttfTable| {
        m.rows.iter().any(|r| r.refused.is_none() && r.source != Source::NotEnoughData && r.mttf_s.is_some())
    };
    let (shown, rest): (Vec<_>, Vec<_>) = tables
        .into_iter()
        .partition(|(s, m)| metrics.iter().any(|(p, mm)| *p == s.key.probe && *mm == s.key.metric) && informative(m));
    let mut out = Vec::new();
    if !rest.is_empty() {
        let target = rest[0].1.target_s;
        out.push(Block::Para(format!(
            "The MTTF tables of {} other series{} are left out: {}a target of {} needs at least {} of measurement \
             per series to be judged from the fitted tail. Every table: rtscope analyze {}.",
            rest.len(),
            probes_of(&rest.iter().map(|r| r.0).collect::<Vec<_>>()),
            if rest.iter().any(|r| informative(r.1)) {
                "they are not the series of the curves above, or hold no figure within 100x the time observed; "
            } else {
                "none holds a figure within 100x the time observed; "
            },
            dur_s(target),
            dur_s(target / REFUSED),
            a.run.header.id
        )));
    }
    for (s, m) in shown {
        out.extend(series_mttf(s, m));
    }
    out
}

/// One series' MTTF table: a sentence on what it is, then a row per period
/// with its smallest n.
fn series_mttf(s: &Series, m: &mttf::MttfTable) -> [Block; 2] {
    let para = Block::Para(format!(
        "{}: mean time to a buffer underrun of a consumer with n buffers of one period each, compute time = {}, \
         target {} ({MTTF_LEGEND}){}",
        series_name(s),
        m.compute,
        dur_s(m.target_s),
        m.smallest_n_notes()
            .iter()
            .map(|(ts, w)| {
                let ts: Vec<String> = ts.iter().map(|&t| units::human(t)).collect();
                format!("; smallest n ({}): {w}", ts.join(", "))
            })
            .collect::<String>()
    ));
    let mut ns: Vec<u32> = m.rows.iter().map(|r| r.buffers).collect();
    ns.sort_unstable();
    ns.dedup();
    let mut head = vec!["period".to_string()];
    head.extend(ns.iter().map(|n| format!("n={n}")));
    head.push("smallest n".into());
    let mut tab = Table::new(head, 1);
    for (period, small) in &m.smallest_n {
        let mut cells = vec![units::human(*period)];
        cells.extend(
            ns.iter().map(|n| {
                m.rows.iter().find(|r| r.period_ns == *period && r.buffers == *n).map_or("-".into(), mttf_cell)
            }),
        );
        cells.push(smallest_cell(*small, m.smallest_n_why.iter().find(|w| w.0 == *period)));
        tab.row(cells);
    }
    [para, Block::Table(tab)]
}
