//! The tail analysis as plots: the mean time to a buffer underrun against
//! the number of buffers (the WDM latency study's soft-modem figures 6
//! and 7), and the expected worst case per hour, day and week with its 95 %
//! interval beside the observed maximum; the response times of a task set
//! against its deadlines. Same conventions as `svg`: plain SVG, Okabe-Ito
//! colours with a dash per curve (a hatch per bar), the requirement in red.

use super::svg::{
    LinAxis, LogAxis, colour, esc, legend, line, num_label, open, patterns, pow10_label, series_line, swatch, text,
};
use std::fmt::Write;

/// How an MTTF point was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// At least 10 latencies above the slack in the data.
    Observed,
    /// From the fitted tail beyond the data.
    Fitted,
    /// From the fitted tail, beyond 10x the observed duration.
    Extrapolated,
}

/// One point of an MTTF curve: n buffers, the MTTF in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MttfPoint {
    pub n: u32,
    pub mttf_s: f64,
    pub mark: Mark,
}

/// A curve: one buffer period (and load).
#[derive(Clone, Debug)]
pub struct MttfCurve {
    pub label: String,
    /// Its buffer period t, ns: a point's total buffering time is n x t.
    pub period_ns: u64,
    pub points: Vec<MttfPoint>,
}

/// What an MTTF plot's x-axis is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MttfAxis {
    /// The number of buffers n.
    #[default]
    Buffers,
    /// The total buffering time n x t, ms (the WDM latency study's figures).
    Buffering,
}

/// Round steps (1, 2, 5 x 10^k) of a linear axis up to `max` with at most
/// about 12 ticks.
fn linear_step(max: f64) -> f64 {
    let raw = (max / 12.0).max(1e-9);
    let k = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * k).find(|s| *s >= raw).unwrap_or(10.0 * k)
}

/// The MTTF axis never goes below a microsecond nor above a thousand years.
const MTTF_FLOOR_S: f64 = 1e-6;
const YEAR_S: f64 = 31_557_600.0;
const MTTF_CEIL_S: f64 = 1000.0 * YEAR_S;

/// Times people read on an axis, in seconds.
const TIME_TICKS: [(f64, &str); 18] = [
    (1e-6, "1 us"),
    (1e-5, "10 us"),
    (1e-4, "100 us"),
    (1e-3, "1 ms"),
    (1e-2, "10 ms"),
    (0.1, "100 ms"),
    (1.0, "1 s"),
    (10.0, "10 s"),
    (60.0, "1 min"),
    (600.0, "10 min"),
    (3_600.0, "1 hour"),
    (86_400.0, "1 day"),
    (604_800.0, "1 week"),
    (YEAR_S / 12.0, "1 month"),
    (YEAR_S, "1 year"),
    (10.0 * YEAR_S, "10 years"),
    (100.0 * YEAR_S, "100 years"),
    (MTTF_CEIL_S, "1000 years"),
];

/// The MTTF axis: whole decades (seconds) covering every finite point and
/// the targets, within a microsecond .. a thousand years.
pub fn mttf_axis(curves: &[MttfCurve], targets_s: &[f64], p0: f64, p1: f64) -> LogAxis {
    let finite = curves.iter().flat_map(|c| c.points.iter()).map(|p| p.mttf_s).filter(|s| s.is_finite() && *s > 0.0);
    let (mut lo, mut hi) = (f64::MAX, 0f64);
    for s in finite.chain(targets_s.iter().copied()) {
        lo = lo.min(s);
        hi = hi.max(s);
    }
    if hi <= 0.0 {
        (lo, hi) = (1e-3, 1.0);
    }
    let mut a = LogAxis::covering(lo.clamp(MTTF_FLOOR_S, MTTF_CEIL_S), hi.clamp(MTTF_FLOOR_S, MTTF_CEIL_S), p0, p1);
    // The last decade may end just short of the thousand years' tick.
    let ceil_decade = MTTF_CEIL_S.log10().ceil() as i32;
    a.hi = a.hi.min(ceil_decade);
    a
}

/// The human ticks within the axis' range (seconds, label).
pub fn time_ticks(a: &LogAxis) -> Vec<(f64, &'static str)> {
    let (lo, hi) = (10f64.powi(a.lo), 10f64.powi(a.hi));
    TIME_TICKS.iter().copied().filter(|(s, _)| *s >= lo * (1.0 - 1e-9) && *s <= hi * (1.0 + 1e-9)).collect()
}

/// MTTF against the number of buffers n: a curve per period (and load),
/// points filled where observed, hollow where from the fitted tail, a
/// triangle on the top edge where beyond the axis or never; the targets
/// as dashed red lines.
pub fn mttf(
    id: &str,
    title: &str,
    curves: &[MttfCurve],
    n_max: u32,
    targets: &[(f64, String)],
    axis: MttfAxis,
) -> String {
    let (w, legend_w) = (820.0, 250.0);
    let legend_rows = curves.len() + 3 + targets.len();
    let h = 400.0f64.max(60.0 + legend_rows as f64 * 17.0);
    let target_s: Vec<f64> = targets.iter().map(|t| t.0).collect();
    let f = MttfFrame::new(curves, n_max, &target_s, axis, w - legend_w, h);
    let mut o = String::new();
    open(&mut o, id, w, h, title);
    f.grid(&mut o);
    for (t, label) in targets {
        let yy = f.y(*t);
        line(&mut o, [f.left, yy, f.right, yy], "#b30000", 1.6, " stroke-dasharray=\"4 3\" class=\"requirement\"");
        text(&mut o, f.right - 4.0, yy - 4.0, "end", 10.0, label);
    }
    for (i, c) in curves.iter().enumerate() {
        f.curve(&mut o, i, c);
    }
    f.legend(&mut o, curves, targets);
    o.push_str("</svg>");
    o
}

/// An MTTF plot's frame: its plot area, its axes, and where a point of a
/// curve goes.
struct MttfFrame {
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    ya: LogAxis,
    n_max: u32,
    /// The x axis' end as buffering time: n_max x the longest period, ms.
    b_max: f64,
    /// The top of the y axis, s: a point above it is drawn on the edge.
    top_s: f64,
    axis: MttfAxis,
}

impl MttfFrame {
    /// The frame of `curves` up to `n_max`, the plot area ending at
    /// `right`, the figure `h` high.
    fn new(curves: &[MttfCurve], n_max: u32, target_s: &[f64], axis: MttfAxis, right: f64, h: f64) -> MttfFrame {
        let (left, top, bottom) = (74.0, 14.0, h - 48.0);
        let ya = mttf_axis(curves, target_s, bottom, top);
        let n_max = n_max.max(2);
        // Buffering time: from 0 to n_max x the longest period, ms.
        let t_max_ms = curves.iter().map(|c| c.period_ns).max().unwrap_or(1_000_000) as f64 / 1e6;
        let b_max = n_max as f64 * t_max_ms;
        let top_s = 10f64.powi(ya.hi);
        MttfFrame { left, right, top, bottom, ya, n_max, b_max, top_s, axis }
    }

    fn xb(&self, ms: f64) -> f64 {
        self.left + 14.0 + ms / self.b_max * (self.right - self.left - 28.0)
    }

    fn xn(&self, n: u32) -> f64 {
        self.left + 14.0 + (n - 1) as f64 / (self.n_max - 1) as f64 * (self.right - self.left - 28.0)
    }

    /// The x of n buffers of period `t_ns`.
    fn x(&self, n: u32, t_ns: u64) -> f64 {
        match self.axis {
            MttfAxis::Buffers => self.xn(n),
            MttfAxis::Buffering => self.xb(n as f64 * t_ns as f64 / 1e6),
        }
    }

    /// The y of an MTTF of `s` seconds; the top edge where beyond the axis or never.
    fn y(&self, s: f64) -> f64 {
        if s.is_finite() && s <= self.top_s { self.ya.map(s) } else { self.top }
    }

    /// The x axis' ticks: every n (every few when many), or round
    /// buffering times.
    fn x_ticks(&self) -> Vec<(f64, String)> {
        match self.axis {
            MttfAxis::Buffers => {
                let n_max = self.n_max;
                let step = if n_max > 16 { n_max.div_ceil(16) } else { 1 };
                (1..=n_max).filter(|n| (n - 1) % step == 0).map(|n| (self.xn(n), n.to_string())).collect()
            }
            MttfAxis::Buffering => {
                let step = linear_step(self.b_max);
                let ticks = (self.b_max / step).floor() as u32;
                (0..=ticks).map(|k| (self.xb(k as f64 * step), format!("{}", k as f64 * step))).collect()
            }
        }
    }

    /// The grid (a faint line per decade, a labelled one per human tick,
    /// a line per x tick), the frame and the axes' titles.
    fn grid(&self, o: &mut String) {
        let (left, right, top, bottom) = (self.left, self.right, self.top, self.bottom);
        for k in self.ya.lo..=self.ya.hi {
            let yy = self.ya.map(10f64.powi(k));
            line(o, [left, yy, right, yy], "#eeeeee", 0.6, "");
        }
        for (s, label) in time_ticks(&self.ya) {
            let yy = self.ya.map(s);
            line(o, [left, yy, right, yy], "#bbb", 0.8, "");
            text(o, left - 6.0, yy + 4.0, "end", 11.0, label);
        }
        for (xx, label) in &self.x_ticks() {
            line(o, [*xx, top, *xx, bottom], "#e6e6e6", 0.6, "");
            text(o, *xx, bottom + 16.0, "middle", 11.0, label);
        }
        let _ = write!(
            o,
            "<rect x=\"{left:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#444\" stroke-width=\"1\"/>",
            right - left,
            bottom - top
        );
        text(
            o,
            (left + right) / 2.0,
            bottom + 34.0,
            "middle",
            12.0,
            match self.axis {
                MttfAxis::Buffers => "buffers n (slack = (n - 1) x period - compute time)",
                MttfAxis::Buffering => "total buffering time n x period, ms (slack = (n - 1) x period - compute time)",
            },
        );
        let _ = write!(
            o,
            "<text x=\"14\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"12\" fill=\"#222\" transform=\"rotate(-90 14 {:.1})\">mean time to an underrun</text>",
            (top + bottom) / 2.0,
            (top + bottom) / 2.0
        );
    }

    /// Curve `i`: its line and a marker per point, with its tooltip.
    fn curve(&self, o: &mut String, i: usize, c: &MttfCurve) {
        let pts: Vec<(f64, f64)> = c.points.iter().map(|p| (self.x(p.n, c.period_ns), self.y(p.mttf_s))).collect();
        if pts.is_empty() {
            return;
        }
        series_line(o, i, &pts, &c.label);
        for p in &c.points {
            let tip = format!(
                "{}, n={}: {}",
                c.label,
                p.n,
                match p.mark {
                    Mark::Observed => format!("MTTF {} (observed)", human_s(p.mttf_s)),
                    Mark::Fitted => format!("MTTF {} (fitted tail)", human_s(p.mttf_s)),
                    Mark::Extrapolated => format!(
                        "MTTF {} (fitted tail, extrapolated beyond 10x the observed duration)",
                        human_s(p.mttf_s)
                    ),
                }
            );
            let (x, y) = (self.x(p.n, c.period_ns), self.y(p.mttf_s));
            marker(o, x, y, colour(i), beyond(p, self.top_s), p.mark, &tip);
        }
    }

    /// The legend right of the plot: the curves, the markers, the targets.
    fn legend(&self, o: &mut String, curves: &[MttfCurve], targets: &[(f64, String)]) {
        let labels: Vec<String> = curves.iter().map(|c| c.label.clone()).collect();
        let lx = self.right + 16.0;
        legend(o, lx, self.top + 10.0, &labels);
        let mut ly = self.top + 10.0 + curves.len() as f64 * 17.0 + 6.0;
        for (mark, beyond, label) in [
            (Mark::Observed, false, "observed (>= 10 above the slack)"),
            (Mark::Fitted, false, "from the fitted tail"),
            (Mark::Fitted, true, "beyond the axis"),
        ] {
            marker(o, lx + 14.0, ly, "#444", beyond, mark, label);
            text(o, lx + 34.0, ly + 4.0, "start", 11.0, label);
            ly += 17.0;
        }
        for (_, label) in targets {
            line(o, [lx, ly, lx + 28.0, ly], "#b30000", 1.6, " stroke-dasharray=\"4 3\"");
            text(o, lx + 34.0, ly + 4.0, "start", 11.0, label);
            ly += 17.0;
        }
    }
}

fn beyond(p: &MttfPoint, top_s: f64) -> bool {
    !p.mttf_s.is_finite() || p.mttf_s > top_s
}

/// A point: filled (observed) or hollow (fitted) circle, or an upward
/// triangle for one beyond the axis.
fn marker(o: &mut String, x: f64, y: f64, c: &str, beyond: bool, mark: Mark, tip: &str) {
    if beyond {
        let _ = write!(
            o,
            "<path class=\"pt\" d=\"M{x:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z\" fill=\"{c}\"><title>{}</title></path>",
            y - 1.0,
            x - 4.5,
            y + 7.0,
            x + 4.5,
            y + 7.0,
            esc(tip)
        );
    } else {
        let fill = if mark == Mark::Observed { c } else { "#fff" };
        let _ = write!(
            o,
            "<circle class=\"pt\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.4\" fill=\"{fill}\" stroke=\"{c}\" stroke-width=\"1.5\"><title>{}</title></circle>",
            esc(tip)
        );
    }
}

/// Seconds for a tooltip: 1.8 s, 3.2 hours, 41 years.
pub fn human_s(s: f64) -> String {
    if !s.is_finite() {
        return "never".into();
    }
    for (unit, name) in [(YEAR_S, "years"), (86_400.0, "days"), (3_600.0, "hours"), (60.0, "min"), (1.0, "s")] {
        if s >= unit {
            return format!("{} {name}", num_label((s / unit * 10.0).round() / 10.0));
        }
    }
    format!("{} ms", num_label((s * 1e4).round() / 10.0))
}

/// One return level: its value and 95 % interval (us; no upper end:
/// unbounded), hollow when extrapolated beyond 10x the observed time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LevelMark {
    pub value_us: f64,
    pub low_us: Option<f64>,
    pub high_us: Option<f64>,
    pub extrapolated: bool,
}

/// A series' row: the observed maximum and its hour, day and week levels
/// (None: refused).
#[derive(Clone, Debug)]
pub struct LevelRow {
    pub label: String,
    pub observed_max_us: f64,
    pub levels: [Option<LevelMark>; 3],
}

const LEVEL_NAMES: [&str; 3] = ["per hour", "per day", "per week"];

/// The x range (us) of a levels plot: every value, bounded interval end,
/// observed maximum and the requirement.
pub fn levels_range(rows: &[LevelRow], requirement_us: Option<f64>) -> (f64, f64) {
    let mut v: Vec<f64> = requirement_us.into_iter().collect();
    for r in rows {
        v.push(r.observed_max_us);
        for m in r.levels.iter().flatten() {
            v.push(m.value_us);
            v.extend(m.low_us);
            v.extend(m.high_us);
        }
    }
    let pos = v.into_iter().filter(|x| x.is_finite() && *x > 0.0);
    let (lo, hi) = pos.fold((f64::MAX, 0f64), |(a, b), x| (a.min(x), b.max(x)));
    if hi <= 0.0 { (1.0, 10.0) } else { (lo, hi) }
}

/// The expected worst case per hour, day and week of each series as a
/// point with its 95 % interval as an error bar (an arrow where unbounded),
/// beside the observed maximum (a black diamond); log x in us.
pub fn levels(id: &str, title: &str, rows: &[LevelRow], requirement_us: Option<f64>) -> String {
    let label_w = 6.6 * rows.iter().map(|r| r.label.chars().count()).max().unwrap_or(6).clamp(6, 40) as f64;
    let (w, row_h) = (820.0, 42.0);
    let (left, right, top) = (label_w + 16.0, w - 24.0, 46.0);
    let bottom = top + rows.len() as f64 * row_h;
    let h = bottom + 44.0;
    let (lo, hi) = levels_range(rows, requirement_us);
    let xa = LogAxis::covering(lo, hi, left, right);
    let mut o = String::new();
    open(&mut o, id, w, h, title);
    levels_legend(&mut o, left, requirement_us);
    levels_grid(&mut o, &xa, [left, top, right, bottom]);
    for (i, r) in rows.iter().enumerate() {
        let y0 = top + i as f64 * row_h;
        if i > 0 {
            line(&mut o, [left, y0, right, y0], "#ddd", 0.6, "");
        }
        text(&mut o, left - 6.0, y0 + row_h / 2.0 + 4.0, "end", 11.0, &r.label);
        for (k, m) in r.levels.iter().enumerate() {
            let yy = y0 + 9.0 + k as f64 * 12.0;
            match m {
                Some(m) => level_bar(&mut o, &xa, right, &r.label, k, m, yy),
                None => {
                    let _ = write!(
                        o,
                        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\" font-style=\"italic\" fill=\"#666\">{}: refused</text>",
                        left + 6.0,
                        yy + 3.5,
                        LEVEL_NAMES[k]
                    );
                }
            }
        }
        diamond(
            &mut o,
            xa.map(r.observed_max_us),
            y0 + row_h / 2.0,
            &format!("{}: observed max {} us", r.label, num_label(r.observed_max_us)),
        );
    }
    if let Some(req) = requirement_us {
        let x = xa.map(req);
        line(&mut o, [x, top, x, bottom], "#b30000", 1.6, " stroke-dasharray=\"4 3\" class=\"requirement\"");
    }
    o.push_str("</svg>");
    o
}

/// The levels plot's legend, above it: the three levels, the observed
/// maximum, the extrapolated mark; the requirement and what the bars are.
fn levels_legend(o: &mut String, left: f64, requirement_us: Option<f64>) {
    let mut lx = left;
    for (k, name) in LEVEL_NAMES.iter().enumerate() {
        line(o, [lx, 14.0, lx + 22.0, 14.0], colour(k), 2.0, "");
        let _ = write!(o, "<circle cx=\"{:.1}\" cy=\"14\" r=\"3.4\" fill=\"{}\"/>", lx + 11.0, colour(k));
        text(o, lx + 27.0, 18.0, "start", 11.0, name);
        lx += 34.0 + 6.5 * name.len() as f64;
    }
    diamond(o, lx + 6.0, 14.0, "observed maximum");
    text(o, lx + 15.0, 18.0, "start", 11.0, "observed max");
    lx += 100.0;
    let _ = write!(
        o,
        "<circle cx=\"{:.1}\" cy=\"14\" r=\"3.4\" fill=\"#fff\" stroke=\"#444\" stroke-width=\"1.5\"/>",
        lx + 4.0
    );
    text(o, lx + 12.0, 18.0, "start", 11.0, "extrapolated (> 10x the time observed)");
    let mut lx = left;
    if let Some(req) = requirement_us {
        line(o, [lx, 30.0, lx + 22.0, 30.0], "#b30000", 1.6, " stroke-dasharray=\"4 3\"");
        let label = format!("requirement {} us", num_label(req));
        text(o, lx + 27.0, 34.0, "start", 11.0, &label);
        lx += 40.0 + 6.0 * label.len() as f64;
    }
    text(o, lx, 34.0, "start", 11.0, "bars: the 95 % interval, an arrow where it has no upper bound");
}

/// The levels plot's grid (a line per decade, faint ones between), its x
/// axis' title and its frame.
fn levels_grid(o: &mut String, xa: &LogAxis, [left, top, right, bottom]: [f64; 4]) {
    for k in xa.lo..=xa.hi {
        let x = xa.map(10f64.powi(k));
        line(o, [x, top, x, bottom], "#bbb", 0.8, "");
        text(o, x, bottom + 15.0, "middle", 11.0, &pow10_label(k));
        if k < xa.hi {
            for m in 2..10 {
                let x = xa.map(m as f64 * 10f64.powi(k));
                line(o, [x, top, x, bottom], "#eeeeee", 0.6, "");
            }
        }
    }
    text(o, (left + right) / 2.0, bottom + 32.0, "middle", 12.0, "latency (us)");
    let _ = write!(
        o,
        "<rect x=\"{left:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#444\" stroke-width=\"1\"/>",
        right - left,
        bottom - top
    );
}

/// Level `k` of the series `label` at height `yy`: its interval as a bar
/// (an arrow to the plot's `right` edge where unbounded) and its value as
/// a point, hollow where extrapolated.
fn level_bar(o: &mut String, xa: &LogAxis, right: f64, label: &str, k: usize, m: &LevelMark, yy: f64) {
    let x0 = xa.map(m.low_us.unwrap_or(m.value_us));
    let x1 = m.high_us.map_or(right, |h| xa.map(h));
    let tip = format!(
        "{} {}: {} us (95 % interval {} .. {}){}",
        label,
        LEVEL_NAMES[k],
        num_label(m.value_us),
        m.low_us.map_or("?".into(), num_label),
        m.high_us.map_or("unbounded".into(), num_label),
        if m.extrapolated { ", extrapolated" } else { "" }
    );
    let _ = write!(
        o,
        "<line class=\"series\" x1=\"{x0:.1}\" y1=\"{yy:.1}\" x2=\"{x1:.1}\" y2=\"{yy:.1}\" stroke=\"{}\" stroke-width=\"2\"><title>{}</title></line>",
        colour(k),
        esc(&tip)
    );
    if m.low_us.is_some() {
        line(o, [x0, yy - 3.5, x0, yy + 3.5], colour(k), 1.5, "");
    }
    match m.high_us {
        Some(_) => line(o, [x1, yy - 3.5, x1, yy + 3.5], colour(k), 1.5, ""),
        None => {
            let _ = write!(
                o,
                "<path d=\"M{:.1},{:.1} L{x1:.1},{yy:.1} L{:.1},{:.1} Z\" fill=\"{}\"/>",
                x1 - 7.0,
                yy - 4.0,
                x1 - 7.0,
                yy + 4.0,
                colour(k)
            );
        }
    }
    let fill = if m.extrapolated { "#fff" } else { colour(k) };
    let _ = write!(
        o,
        "<circle cx=\"{:.1}\" cy=\"{yy:.1}\" r=\"3.4\" fill=\"{fill}\" stroke=\"{}\" stroke-width=\"1.5\"><title>{}</title></circle>",
        xa.map(m.value_us),
        colour(k),
        esc(&tip)
    );
}

/// A task's row in the response-time plot (ns): its deadline, the
/// response time as written and with the measured release jitter.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskBar {
    pub name: String,
    pub deadline_ns: u64,
    pub given_ns: u64,
    pub measured_ns: Option<u64>,
}

/// The unit of a time axis up to `max_ns`: its size in ns and its name.
fn time_unit(max_ns: f64) -> (f64, &'static str) {
    if max_ns >= 2e9 {
        (1e9, "s")
    } else if max_ns >= 2e6 {
        (1e6, "ms")
    } else {
        (1e3, "us")
    }
}

/// The worst-case response time of each task as a bar from its release
/// (as written, and with the measured release jitter, hatched) against its
/// deadline (a dashed red tick); a bar that misses its deadline says so.
/// The axis ends at twice the longest deadline: a longer bar ends in an
/// arrow.
pub fn response_times(id: &str, title: &str, tasks: &[TaskBar], jitter_label: &str) -> String {
    let label_w = 7.0 * tasks.iter().map(|t| t.name.chars().count()).max().unwrap_or(4).clamp(4, 28) as f64;
    let measured = tasks.iter().any(|t| t.measured_ns.is_some());
    let (w, bar_h, gap) = (820.0, 12.0, 12.0);
    let row_h = if measured { 2.0 * bar_h + 2.0 + gap } else { bar_h + gap };
    let (left, right, top) = (label_w + 16.0, w - 90.0, 48.0);
    let bottom = top + tasks.len() as f64 * row_h;
    let h = bottom + 42.0;
    let d_max = tasks.iter().map(|t| t.deadline_ns).max().unwrap_or(1) as f64;
    let r_max = tasks.iter().flat_map(|t| [Some(t.given_ns), t.measured_ns]).flatten().max().unwrap_or(0) as f64;
    let cap = r_max.max(1.05 * d_max).min(2.0 * d_max);
    let (unit, unit_name) = time_unit(cap);
    let xa = LinAxis::covering(0.0, cap / unit, left, right);
    let x = |ns: u64| xa.map((ns as f64).min(cap) / unit);
    let mut o = String::new();
    open(&mut o, id, w, h, title);
    patterns(&mut o, id);
    // The legend on top.
    let mut lx = left;
    let mut entries = vec![(Some(0), "R as written".to_string())];
    if measured {
        entries.push((Some(1), format!("R with the measured release jitter ({jitter_label})")));
    }
    entries.push((None, "deadline D".into()));
    for (i, label) in &entries {
        match i {
            Some(i) => swatch(&mut o, id, *i, [lx, 8.0, 14.0, 12.0], label),
            None => line(&mut o, [lx + 7.0, 6.0, lx + 7.0, 22.0], "#b30000", 2.0, " stroke-dasharray=\"3 2\""),
        }
        text(&mut o, lx + 19.0, 18.0, "start", 11.0, label);
        lx += 34.0 + 6.2 * label.chars().count() as f64;
    }
    for t in xa.ticks() {
        let xx = xa.map(t);
        line(&mut o, [xx, top - 4.0, xx, bottom], "#ddd", 0.7, "");
        text(&mut o, xx, bottom + 15.0, "middle", 10.0, &num_label(t));
    }
    text(&mut o, (left + right) / 2.0, bottom + 32.0, "middle", 11.0, &format!("time from release ({unit_name})"));
    for (row, t) in tasks.iter().enumerate() {
        let y0 = top + row as f64 * row_h;
        text(&mut o, left - 6.0, y0 + row_h / 2.0 - gap / 2.0 + 4.0, "end", 11.0, &t.name);
        for (k, r) in [Some(t.given_ns), t.measured_ns].into_iter().enumerate() {
            let Some(r) = r else { continue };
            let y = y0 + k as f64 * (bar_h + 2.0);
            let misses = r > t.deadline_ns;
            let tip = format!(
                "{}: R = {} {} D = {}{}",
                t.name,
                rtscope_model::units::human(r),
                if misses { ">" } else { "<=" },
                rtscope_model::units::human(t.deadline_ns),
                if k == 1 { format!(" with the measured release jitter ({jitter_label})") } else { String::new() }
            );
            let x1 = x(r).max(left + 1.0);
            swatch(&mut o, id, k, [left, y, x1 - left, bar_h], &tip);
            if r as f64 > cap {
                let _ = write!(
                    o,
                    "<path d=\"M{x1:.1},{:.1} L{:.1},{:.1} L{x1:.1},{:.1} Z\" fill=\"{}\"/>",
                    y - 2.0,
                    x1 + 8.0,
                    y + bar_h / 2.0,
                    y + bar_h + 2.0,
                    colour(k)
                );
            }
            let note = format!("{}{}", rtscope_model::units::human(r), if misses { " MISSES" } else { "" });
            text(&mut o, x1 + if r as f64 > cap { 11.0 } else { 4.0 }, y + bar_h - 2.0, "start", 10.0, &note);
        }
        let xd = x(t.deadline_ns);
        let y1 = y0 + row_h - gap + 3.0;
        line(&mut o, [xd, y0 - 3.0, xd, y1], "#b30000", 2.0, " stroke-dasharray=\"3 2\" class=\"requirement\"");
    }
    let _ = write!(
        o,
        "<rect x=\"{left:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#444\" stroke-width=\"1\"/>",
        top - 4.0,
        right - left,
        bottom - top + 4.0
    );
    o.push_str("</svg>");
    o
}

fn diamond(o: &mut String, x: f64, y: f64, tip: &str) {
    let _ = write!(
        o,
        "<path d=\"M{x:.1},{:.1} L{:.1},{y:.1} L{x:.1},{:.1} L{:.1},{y:.1} Z\" fill=\"#000\"><title>{}</title></path>",
        y - 5.5,
        x + 4.5,
        y + 5.5,
        x - 4.5,
        esc(tip)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_times_draw_a_bar_per_task_and_analysis_and_a_tick_per_deadline() {
        let t = |name: &str, d: u64, g: u64, m: Option<u64>| TaskBar {
            name: name.into(),
            deadline_ns: d,
            given_ns: g,
            measured_ns: m,
        };
        let tasks = [t("io", 1_000_000, 200_000, Some(300_000)), t("ctl", 4_000_000, 1_950_000, Some(9_000_000))];
        let svg = response_times("s", "tasks", &tasks, "J = 100 us");
        assert_eq!(svg.matches("<rect class=\"series\"").count(), 4 + 2, "2 bars per task and 2 legend swatches");
        assert_eq!(svg.matches("class=\"requirement\"").count(), 2, "a deadline tick per task");
        assert!(svg.contains("time from release (ms)") && svg.contains(">9ms MISSES<"), "{svg}");
        assert_eq!(svg.matches("Z\" fill=").count(), 1, "9 ms is beyond twice the longest deadline: an arrow");
        assert!(svg.contains("R with the measured release jitter (J = 100 us)"));
        // Without a measured jitter: one bar per task, no second legend entry.
        let plain = response_times("p", "tasks", &[t("a", 500_000, 100_000, None)], "");
        assert_eq!(plain.matches("<rect class=\"series\"").count(), 2);
        assert!(plain.contains("time from release (us)") && !plain.contains("measured"));
    }

    fn curve(label: &str, pts: &[(u32, f64, Mark)]) -> MttfCurve {
        MttfCurve {
            period_ns: 1_000_000,
            label: label.into(),
            points: pts.iter().map(|&(n, mttf_s, mark)| MttfPoint { n, mttf_s, mark }).collect(),
        }
    }

    #[test]
    fn the_mttf_axis_covers_the_points_and_targets_within_a_microsecond_and_a_thousand_years() {
        let c = [curve("1ms", &[(1, 1e-3, Mark::Observed), (2, 2.5, Mark::Observed), (3, 9e40, Mark::Fitted)])];
        // 9e40 s is beyond the ceiling: the axis stops at 10^11 s; the
        // target (a day) is inside it.
        let a = mttf_axis(&c, &[86_400.0], 400.0, 0.0);
        assert_eq!((a.lo, a.hi), (-3, 11));
        let ticks: Vec<&str> = time_ticks(&a).iter().map(|t| t.1).collect();
        assert_eq!(ticks.first(), Some(&"1 ms"));
        assert_eq!(ticks.last(), Some(&"1000 years"));
        assert!(ticks.contains(&"1 day") && ticks.contains(&"1 hour") && !ticks.contains(&"100 us"), "{ticks:?}");
        // A target above every point widens the axis; no point at all gives a default.
        let small = [curve("t", &[(1, 0.002, Mark::Observed), (2, 0.03, Mark::Observed)])];
        let a = mttf_axis(&small, &[3_600.0], 0.0, 1.0);
        assert_eq!((a.lo, a.hi), (-3, 4));
        let never = [curve("t", &[(4, f64::INFINITY, Mark::Fitted)])];
        let a = mttf_axis(&never, &[], 0.0, 1.0);
        assert!(a.hi > a.lo);
        assert_eq!(human_s(5_400.0), "1.5 hours");
        assert_eq!(human_s(0.0123), "12.3 ms");
        assert_eq!(human_s(3.0 * YEAR_S), "3 years");
    }

    #[test]
    fn the_mttf_plot_draws_a_curve_per_period_its_marks_and_the_target() {
        let c = [
            curve("1ms", &[(1, 1e-3, Mark::Observed), (2, 2.0, Mark::Observed), (3, 5e5, Mark::Fitted)]),
            curve(
                "2.667ms [cpu]",
                &[(1, 2.7e-3, Mark::Observed), (2, 1e3, Mark::Fitted), (3, 9e40, Mark::Extrapolated)],
            ),
        ];
        let svg = mttf("m", "MTTF", &c, 6, &[(86_400.0, "target 1 day".into())], MttfAxis::Buffers);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline class=\"series\"").count(), 2);
        assert!(svg.contains("stroke-dasharray=\"7 3\""), "the second curve is dashed");
        assert_eq!(svg.matches("class=\"requirement\"").count(), 1);
        assert!(svg.contains(">target 1 day<") && svg.contains(">1 day<") && svg.contains(">1 ms<"));
        // Observed filled, fitted hollow, beyond the axis a triangle (plus one each in the legend).
        assert_eq!(svg.matches("<circle class=\"pt\"").count(), 5 + 2);
        assert_eq!(svg.matches("<path class=\"pt\"").count(), 1 + 1);
        assert!(svg.contains("extrapolated beyond 10x the observed duration"));
        assert!(svg.contains(">2.667ms [cpu]<"));
        for n in 1..=6 {
            assert!(svg.contains(&format!(">{n}</text>")), "the n axis tick {n}");
        }
        // On the total buffering time n x t: a 2.667 ms curve reaches 16 ms at n = 6.
        let c = [curve("1ms", &[(1, 1e-3, Mark::Observed)]), MttfCurve { period_ns: 2_666_667, ..c[1].clone() }];
        let svg = mttf("m", "MTTF", &c, 6, &[], MttfAxis::Buffering);
        assert!(svg.contains("total buffering time n x period, ms"));
        assert_eq!(linear_step(16.0), 2.0);
        for tick in ["0", "8", "16"] {
            assert!(svg.contains(&format!(">{tick}</text>")), "the buffering axis tick {tick}");
        }
    }

    #[test]
    fn the_levels_plot_has_an_error_bar_per_level_and_the_observed_max() {
        let m = |v: f64, lo: f64, hi: Option<f64>, extrapolated: bool| {
            Some(LevelMark { value_us: v, low_us: Some(lo), high_us: hi, extrapolated })
        };
        let rows = [
            LevelRow {
                label: "wakeup latency CPU0".into(),
                observed_max_us: 80.0,
                levels: [m(90.0, 70.0, Some(120.0), false), m(110.0, 80.0, Some(300.0), true), None],
            },
            LevelRow {
                label: "wakeup latency CPU1 <x>".into(),
                observed_max_us: 3.0,
                levels: [m(5.0, 4.0, None, false), None, None],
            },
        ];
        assert_eq!(levels_range(&rows, Some(1000.0)), (3.0, 1000.0));
        let svg = levels("l", "levels", &rows, Some(100.0));
        assert_eq!(svg.matches("<line class=\"series\"").count(), 3, "one bar per level not refused");
        assert_eq!(svg.matches(": refused<").count(), 3);
        assert!(svg.contains("class=\"requirement\"") && svg.contains("requirement 100 us"));
        assert!(svg.contains("CPU1 &lt;x&gt;"), "labels are escaped");
        assert!(svg.contains("observed max 80 us") && svg.contains("unbounded"));
        assert!(svg.contains(">1000<") && svg.contains(">1<"), "decades from 1 to 1000 us");
    }
}
