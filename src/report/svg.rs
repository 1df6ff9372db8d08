//! Hand-written SVG plots for the HTML reports: a log-log exceedance plot,
//! min / mean / max per checkpoint interval, stacked bars and an episode
//! timeline. Plain SVG 1.1 with no script and no font to fetch; colours
//! from the Okabe-Ito palette (distinct for colour-blind readers), with a
//! dash pattern or a hatch per series so that they also stay apart when
//! printed in grey.

use std::fmt::Write;

/// Okabe-Ito, yellow left out (too pale on white paper).
pub const PALETTE: [&str; 7] = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"];
/// Dash patterns; with 7 colours and 4 dashes, 28 series look different.
pub const DASHES: [&str; 4] = ["", "7 3", "2 2.5", "10 3 2 3"];

pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Curve `i` of a plot through `pts` (SVG coordinates), in the i-th
/// colour and dash, with its label as a tooltip.
pub(super) fn series_line(o: &mut String, i: usize, pts: &[(f64, f64)], label: &str) {
    let _ = write!(
        o,
        "<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\"{} stroke-linejoin=\"round\" points=\"{}\"><title>{}</title></polyline>",
        colour(i),
        dash_attr(i),
        points(pts),
        esc(label)
    );
}

pub(super) fn dash_attr(i: usize) -> String {
    let d = DASHES[i % DASHES.len()];
    if d.is_empty() { String::new() } else { format!(" stroke-dasharray=\"{d}\"") }
}

/// Escapes text for HTML and SVG.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// `10^k` as people write it: 1000, 1, 0.01.
pub fn pow10_label(k: i32) -> String {
    if k >= 0 { format!("{}", 10u64.pow(k as u32)) } else { format!("{:.*}", (-k) as usize, 10f64.powi(k)) }
}

/// A log10 axis over whole decades, mapped onto pixels [p0, p1].
#[derive(Clone, Copy, Debug)]
pub struct LogAxis {
    pub lo: i32,
    pub hi: i32,
    pub p0: f64,
    pub p1: f64,
}

impl LogAxis {
    /// Decades covering [min, max] (both > 0).
    pub fn covering(min: f64, max: f64, p0: f64, p1: f64) -> LogAxis {
        let lo = min.max(1e-12).log10().floor() as i32;
        let mut hi = max.max(1e-12).log10().ceil() as i32;
        if hi <= lo {
            hi = lo + 1;
        }
        LogAxis { lo, hi, p0, p1 }
    }

    pub fn map(&self, v: f64) -> f64 {
        let l = v.max(10f64.powi(self.lo)).log10();
        self.p0 + (l - self.lo as f64) / (self.hi - self.lo) as f64 * (self.p1 - self.p0)
    }
}

/// A linear axis with "nice" ticks (1, 2, 5 x 10^k).
#[derive(Clone, Copy, Debug)]
pub struct LinAxis {
    pub lo: f64,
    pub hi: f64,
    pub step: f64,
    pub p0: f64,
    pub p1: f64,
}

impl LinAxis {
    pub fn covering(min: f64, max: f64, p0: f64, p1: f64) -> LinAxis {
        let (mut min, mut max) = (min.min(max), max.max(min));
        if max - min < 1e-9 {
            max = min + 1.0;
            min -= 1.0;
        }
        let raw = (max - min) / 6.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
        LinAxis { lo: (min / step).floor() * step, hi: (max / step).ceil() * step, step, p0, p1 }
    }

    pub fn map(&self, v: f64) -> f64 {
        self.p0 + (v - self.lo) / (self.hi - self.lo) * (self.p1 - self.p0)
    }

    pub fn ticks(&self) -> Vec<f64> {
        let n = ((self.hi - self.lo) / self.step).round() as i64;
        (0..=n).map(|i| self.lo + i as f64 * self.step).collect()
    }
}

/// A tick value without noise digits: 0.25, 10, 1500.
pub fn num_label(v: f64) -> String {
    let t = format!("{v:.3}");
    let t = t.trim_end_matches('0').trim_end_matches('.');
    if t == "-0" { "0".into() } else { t.to_string() }
}

pub(super) fn open(out: &mut String, id: &str, w: f64, h: f64, title: &str) {
    let _ = write!(
        out,
        "<svg id=\"{id}\" class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-labelledby=\"{id}-t\"><title id=\"{id}-t\">{}</title>",
        esc(title)
    );
    let _ = write!(out, "<rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#fff\"/>");
}

/// A plot's title, written above it (bold, cut to the plot's width).
pub(super) fn heading(out: &mut String, w: f64, title: &str) {
    let max = ((w - 16.0) / 7.0) as usize;
    let t: String = if title.chars().count() > max {
        format!("{}...", title.chars().take(max.saturating_sub(3)).collect::<String>())
    } else {
        title.to_string()
    };
    let _ = write!(
        out,
        "<text class=\"heading\" x=\"8\" y=\"18\" font-size=\"13\" font-weight=\"bold\" fill=\"#111\">{}</text>",
        esc(&t)
    );
}

pub(super) fn text(out: &mut String, x: f64, y: f64, anchor: &str, size: f64, s: &str) {
    let _ = write!(
        out,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\" font-size=\"{size}\" fill=\"#222\">{}</text>",
        esc(s)
    );
}

pub(super) fn line(out: &mut String, [x1, y1, x2, y2]: [f64; 4], stroke: &str, width: f64, extra: &str) {
    let _ = write!(
        out,
        "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"{stroke}\" stroke-width=\"{width}\"{extra}/>"
    );
}

/// Polyline points, leaving out points less than half a pixel from the
/// last one kept (a histogram has thousands of buckets) but always the last.
pub(super) fn points(pts: &[(f64, f64)]) -> String {
    let mut s = String::new();
    let mut last: Option<(f64, f64)> = None;
    for (i, &(x, y)) in pts.iter().enumerate() {
        let keep = match last {
            None => true,
            Some((lx, ly)) => (x - lx).abs() >= 0.5 || (y - ly).abs() >= 0.5 || i + 1 == pts.len(),
        };
        if keep {
            let _ = write!(s, "{}{x:.1},{y:.1}", if s.is_empty() { "" } else { " " });
            last = Some((x, y));
        }
    }
    s
}

/// A log-x, log-y grid with labelled decades and minor ticks.
fn log_grid(out: &mut String, xa: &LogAxis, ya: &LogAxis, x_label: &str, y_label: &str, y_fmt: impl Fn(i32) -> String) {
    let (top, bottom) = (ya.p1, ya.p0);
    let (left, right) = (xa.p0, xa.p1);
    for k in xa.lo..=xa.hi {
        let x = xa.map(10f64.powi(k));
        line(out, [x, top, x, bottom], "#bbb", 0.8, "");
        text(out, x, bottom + 16.0, "middle", 11.0, &pow10_label(k));
        if k < xa.hi {
            for m in 2..10 {
                let x = xa.map(m as f64 * 10f64.powi(k));
                line(out, [x, top, x, bottom], "#e6e6e6", 0.6, "");
            }
        }
    }
    for k in ya.lo..=ya.hi {
        let y = ya.map(10f64.powi(k));
        line(out, [left, y, right, y], "#bbb", 0.8, "");
        text(out, left - 6.0, y + 4.0, "end", 11.0, &y_fmt(k));
    }
    let _ = write!(
        out,
        "<rect x=\"{left:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#444\" stroke-width=\"1\"/>",
        right - left,
        bottom - top
    );
    text(out, (left + right) / 2.0, bottom + 34.0, "middle", 12.0, x_label);
    let _ = write!(
        out,
        "<text x=\"14\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"12\" fill=\"#222\" transform=\"rotate(-90 14 {:.1})\">{}</text>",
        (top + bottom) / 2.0,
        (top + bottom) / 2.0,
        esc(y_label)
    );
}

/// A legend: a line sample (colour and dash of series i) and a label per entry.
pub(super) fn legend(out: &mut String, x: f64, y: f64, labels: &[String]) {
    for (i, l) in labels.iter().enumerate() {
        let yy = y + i as f64 * 17.0;
        line(out, [x, yy, x + 28.0, yy], colour(i), 2.2, &dash_attr(i));
        text(out, x + 34.0, yy + 4.0, "start", 11.0, l);
    }
}

/// One curve of an exceedance plot: (value in us, fraction of samples at
/// or above it, in (0, 1]).
pub struct Curve {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// The WDM latency study's log-log "percent of samples over latency" plot: every
/// curve overlaid, a decade grid labelled in us and percent, a legend, and
/// the requirement as a vertical line where one applies.
pub fn exceedance(id: &str, title: &str, x_label: &str, curves: &[Curve], requirement_us: Option<f64>) -> String {
    exceedance_sized(id, title, x_label, curves, requirement_us, (820.0, 400.0))
}

/// The width of a legend of `labels` (11 px text after a 34 px line sample).
fn legend_width(labels: impl Iterator<Item = usize>) -> f64 {
    (46.0 + 6.3 * labels.max().unwrap_or(8) as f64).clamp(120.0, 340.0)
}

/// [`exceedance`] in a box of `(w, h)` px (taller when the legend needs it),
/// its title written above the plot.
pub fn exceedance_sized(
    id: &str,
    title: &str,
    x_label: &str,
    curves: &[Curve],
    requirement_us: Option<f64>,
    (w, h): (f64, f64),
) -> String {
    let req_label = requirement_us.map(|r| format!("requirement {} us", num_label(r)));
    let legend_w =
        legend_width(curves.iter().map(|c| c.label.chars().count()).chain(req_label.iter().map(|l| l.len())));
    let h = h.max(100.0 + curves.len() as f64 * 17.0);
    let (left, top, bottom) = (62.0, 30.0, h - 48.0);
    let right = w - legend_w;
    let all = curves.iter().flat_map(|c| c.points.iter()).filter(|p| p.0 > 0.0 && p.1 > 0.0);
    let (mut xmin, mut xmax, mut ymin) = (f64::MAX, 0f64, 1f64);
    for &(x, y) in all {
        xmin = xmin.min(x);
        xmax = xmax.max(x);
        ymin = ymin.min(y);
    }
    if let Some(r) = requirement_us {
        xmin = xmin.min(r);
        xmax = xmax.max(r);
    }
    if xmax <= 0.0 {
        (xmin, xmax) = (1.0, 10.0);
    }
    let xa = LogAxis::covering(xmin, xmax, left, right);
    // Percent from 100 % down to the rarest point's decade.
    let ya = LogAxis::covering(ymin * 100.0, 100.0, bottom, top);
    let mut o = String::new();
    open(&mut o, id, w, h, title);
    heading(&mut o, w, title);
    log_grid(&mut o, &xa, &ya, x_label, "% of samples at or over", |k| format!("{}%", pow10_label(k)));
    for (i, c) in curves.iter().enumerate() {
        let pts: Vec<(f64, f64)> =
            c.points.iter().filter(|p| p.0 > 0.0 && p.1 > 0.0).map(|&(x, y)| (xa.map(x), ya.map(y * 100.0))).collect();
        if pts.is_empty() {
            continue;
        }
        series_line(&mut o, i, &pts, &c.label);
    }
    let labels: Vec<String> = curves.iter().map(|c| c.label.clone()).collect();
    if let Some(r) = requirement_us {
        let x = xa.map(r);
        line(&mut o, [x, top, x, bottom], "#b30000", 1.6, " stroke-dasharray=\"4 3\" class=\"requirement\"");
    }
    legend(&mut o, right + 16.0, top + 10.0, &labels);
    if let Some(l) = &req_label {
        let y = top + 10.0 + curves.len() as f64 * 17.0;
        line(&mut o, [right + 16.0, y, right + 44.0, y], "#b30000", 1.6, " stroke-dasharray=\"4 3\"");
        text(&mut o, right + 50.0, y + 4.0, "start", 11.0, l);
    }
    o.push_str("</svg>");
    o
}

/// One checkpoint interval: start and end (s since the run began) and its
/// min, mean and max in us.
#[derive(Clone, Copy, Debug)]
pub struct IntervalBar {
    pub t0_s: f64,
    pub t1_s: f64,
    pub min: f64,
    pub mean: f64,
    pub max: f64,
}

/// Min / mean / max per checkpoint interval over time, as the Siemens CE 3.0
/// assessment's per-cycle bars: a bar from min to max and a tick at the mean; beyond 150
/// intervals, a band and a mean line. Log y, or linear for signed values.
pub fn intervals(id: &str, title: &str, y_label: &str, bars: &[IntervalBar]) -> String {
    let (w, h) = (370.0, 210.0);
    let (left, right, top, bottom) = (58.0, w - 12.0, 26.0, h - 42.0);
    let tmax = bars.iter().map(|b| b.t1_s).fold(0f64, f64::max).max(1e-3);
    let ymin = bars.iter().map(|b| b.min).fold(f64::MAX, f64::min);
    let ymax = bars.iter().map(|b| b.max).fold(f64::MIN, f64::max);
    let xa = LinAxis::covering(0.0, tmax, left, right);
    let log = ymin > 0.0;
    let (la, lin) = (LogAxis::covering(ymin, ymax, bottom, top), LinAxis::covering(ymin, ymax, bottom, top));
    let y = |v: f64| if log { la.map(v) } else { lin.map(v) };
    let mut o = String::new();
    open(&mut o, id, w, h, title);
    heading(&mut o, w, title);
    for t in xa.ticks() {
        let x = xa.map(t);
        line(&mut o, [x, top, x, bottom], "#e6e6e6", 0.6, "");
        text(&mut o, x, bottom + 15.0, "middle", 10.0, &num_label(t));
    }
    if log {
        for k in la.lo..=la.hi {
            let yy = la.map(10f64.powi(k));
            line(&mut o, [left, yy, right, yy], "#bbb", 0.8, "");
            text(&mut o, left - 5.0, yy + 4.0, "end", 10.0, &pow10_label(k));
        }
    } else {
        for t in lin.ticks() {
            let yy = lin.map(t);
            line(&mut o, [left, yy, right, yy], if t == 0.0 { "#888" } else { "#ddd" }, 0.8, "");
            text(&mut o, left - 5.0, yy + 4.0, "end", 10.0, &num_label(t));
        }
    }
    let _ = write!(
        o,
        "<rect x=\"{left}\" y=\"{top}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#444\"/>",
        right - left,
        bottom - top
    );
    text(&mut o, (left + right) / 2.0, bottom + 32.0, "middle", 11.0, "time since start (s)");
    let _ = write!(
        o,
        "<text x=\"12\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"11\" fill=\"#222\" transform=\"rotate(-90 12 {:.1})\">{}</text>",
        (top + bottom) / 2.0,
        (top + bottom) / 2.0,
        esc(y_label)
    );
    if bars.len() <= 150 {
        let bw = ((right - left) / bars.len().max(1) as f64 * 0.5).clamp(1.5, 14.0);
        for b in bars {
            let x = xa.map((b.t0_s + b.t1_s) / 2.0);
            let _ = write!(
                o,
                "<line class=\"series\" x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"{}\" stroke-width=\"{:.1}\" stroke-linecap=\"butt\"><title>min {} / mean {} / max {} us</title></line>",
                y(b.min),
                y(b.max),
                PALETTE[0],
                bw,
                num_label(b.min),
                num_label(b.mean),
                num_label(b.max)
            );
            line(&mut o, [x - bw, y(b.mean), x + bw, y(b.mean)], "#000", 1.6, "");
        }
    } else {
        let mut band: Vec<(f64, f64)> = bars.iter().map(|b| (xa.map((b.t0_s + b.t1_s) / 2.0), y(b.max))).collect();
        band.extend(bars.iter().rev().map(|b| (xa.map((b.t0_s + b.t1_s) / 2.0), y(b.min))));
        let _ = write!(
            o,
            "<polygon class=\"series\" fill=\"{}\" fill-opacity=\"0.35\" stroke=\"{}\" stroke-width=\"0.8\" points=\"{}\"/>",
            PALETTE[0],
            PALETTE[0],
            points(&band)
        );
        let mean: Vec<(f64, f64)> = bars.iter().map(|b| (xa.map((b.t0_s + b.t1_s) / 2.0), y(b.mean))).collect();
        let _ =
            write!(o, "<polyline fill=\"none\" stroke=\"#000\" stroke-width=\"1.2\" points=\"{}\"/>", points(&mean));
    }
    o.push_str("</svg>");
    o
}

/// Fill patterns laid over the colours, so that segments stay apart in grey.
pub(super) fn patterns(o: &mut String, id: &str) {
    let defs = [
        "",
        "<path d=\"M0,6 L6,0\" stroke=\"#fff\" stroke-width=\"1.2\"/>",
        "<circle cx=\"3\" cy=\"3\" r=\"1.1\" fill=\"#fff\"/>",
        "<path d=\"M0,3 L6,3\" stroke=\"#fff\" stroke-width=\"1.2\"/>",
        "<path d=\"M0,0 L6,6 M0,6 L6,0\" stroke=\"#fff\" stroke-width=\"1\"/>",
        "<path d=\"M3,0 L3,6\" stroke=\"#fff\" stroke-width=\"1.2\"/>",
        "<path d=\"M0,0 L6,6\" stroke=\"#fff\" stroke-width=\"1.2\"/>",
    ];
    o.push_str("<defs>");
    for (i, d) in defs.iter().enumerate().skip(1) {
        let _ = write!(
            o,
            "<pattern id=\"{id}-p{i}\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\">{d}</pattern>"
        );
    }
    o.push_str("</defs>");
}

pub(super) fn swatch(o: &mut String, id: &str, i: usize, [x, y, w, h]: [f64; 4], tip: &str) {
    let i = i % PALETTE.len();
    let _ = write!(
        o,
        "<rect class=\"series\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{}\"><title>{}</title></rect>",
        PALETTE[i],
        esc(tip)
    );
    if i > 0 {
        let _ =
            write!(o, "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"url(#{id}-p{i})\"/>");
    }
}

/// Horizontal stacked bars: a bar per category, a segment per part (in
/// us), a legend above and the value written in every wide-enough segment.
pub fn stacked(id: &str, title: &str, x_label: &str, parts: &[&str], bars: &[(String, Vec<f64>)]) -> String {
    let label_w = 8.0 * bars.iter().map(|b| b.0.chars().count()).max().unwrap_or(4).clamp(6, 24) as f64;
    let (w, bar_h, gap) = (820.0, 18.0, 7.0);
    let (left, right, top) = (label_w + 14.0, w - 20.0, 46.0);
    let h = top + bars.len() as f64 * (bar_h + gap) + 40.0;
    let bottom = h - 40.0;
    let total = bars.iter().map(|b| b.1.iter().sum::<f64>()).fold(0f64, f64::max).max(1e-3);
    let xa = LinAxis::covering(0.0, total, left, right);
    let mut o = String::new();
    open(&mut o, id, w, h, title);
    patterns(&mut o, id);
    let mut lx = left;
    for (i, p) in parts.iter().enumerate() {
        swatch(&mut o, id, i, [lx, 8.0, 14.0, 14.0], p);
        text(&mut o, lx + 19.0, 19.0, "start", 11.0, p);
        lx += 30.0 + 7.0 * p.len() as f64;
    }
    for t in xa.ticks() {
        let x = xa.map(t);
        line(&mut o, [x, top - 4.0, x, bottom], "#ddd", 0.7, "");
        text(&mut o, x, bottom + 15.0, "middle", 10.0, &num_label(t));
    }
    text(&mut o, (left + right) / 2.0, bottom + 32.0, "middle", 11.0, x_label);
    for (row, (name, values)) in bars.iter().enumerate() {
        let y = top + row as f64 * (bar_h + gap);
        text(&mut o, left - 6.0, y + 13.0, "end", 11.0, name);
        let mut acc = 0.0;
        for (i, v) in values.iter().enumerate() {
            let (x0, x1) = (xa.map(acc), xa.map(acc + v));
            if x1 - x0 > 0.05 {
                let tip = format!("{name}: {} {} us", parts.get(i).copied().unwrap_or(""), num_label(*v));
                swatch(&mut o, id, i, [x0, y, x1 - x0, bar_h], &tip);
                if x1 - x0 > 46.0 {
                    let _ = write!(
                        o,
                        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\" fill=\"#000\" stroke=\"#fff\" stroke-width=\"2.5\" paint-order=\"stroke\">{}</text>",
                        (x0 + x1) / 2.0,
                        y + 13.0,
                        num_label((v * 10.0).round() / 10.0)
                    );
                }
            }
            acc += v;
        }
    }
    o.push_str("</svg>");
    o
}

/// One bar of a timeline: lane index, name, start and length in us.
pub struct Bar {
    pub lane: usize,
    pub name: String,
    pub start_us: f64,
    pub dur_us: f64,
}

/// An episode as a small timeline: a row per lane, a bar per slice
/// (coloured by name), vertical marks at given instants (us).
pub fn timeline(id: &str, title: &str, lanes: &[&str], bars: &[Bar], marks: &[(f64, &str)]) -> String {
    let (w, lane_h) = (820.0, 20.0);
    let (left, right, top) = (80.0, w - 16.0, 22.0);
    let bottom = top + lanes.len() as f64 * lane_h;
    let h = bottom + 34.0;
    let lo = bars.iter().map(|b| b.start_us).chain(marks.iter().map(|m| m.0)).fold(f64::MAX, f64::min);
    let hi = bars.iter().map(|b| b.start_us + b.dur_us).chain(marks.iter().map(|m| m.0)).fold(f64::MIN, f64::max);
    let xa = LinAxis::covering(lo, hi, left, right);
    let mut o = String::new();
    open(&mut o, id, w, h, title);
    for t in xa.ticks() {
        let x = xa.map(t);
        line(&mut o, [x, top, x, bottom], "#e6e6e6", 0.6, "");
        text(&mut o, x, bottom + 13.0, "middle", 10.0, &num_label(t));
    }
    text(&mut o, (left + right) / 2.0, bottom + 28.0, "middle", 10.0, "us from the programmed wake-up");
    for (i, l) in lanes.iter().enumerate() {
        let y = top + i as f64 * lane_h;
        text(&mut o, left - 6.0, y + 14.0, "end", 11.0, l);
        line(&mut o, [left, y + lane_h, right, y + lane_h], "#eee", 0.6, "");
    }
    // Colours by name, in order of appearance, so that one name keeps one colour.
    let mut names: Vec<&str> = Vec::new();
    for b in bars {
        if !names.contains(&b.name.as_str()) {
            names.push(&b.name);
        }
    }
    for b in bars {
        let (x0, x1) = (xa.map(b.start_us), xa.map(b.start_us + b.dur_us));
        let y = top + b.lane as f64 * lane_h + 3.0;
        let c = names.iter().position(|n| *n == b.name).unwrap_or(0);
        let _ = write!(
            o,
            "<rect class=\"series\" x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\" fill-opacity=\"0.85\"><title>{}: {} us</title></rect>",
            (x1 - x0).max(0.8),
            lane_h - 6.0,
            colour(c),
            esc(&b.name),
            num_label(b.dur_us)
        );
        if x1 - x0 > 7.0 * b.name.len() as f64 + 6.0 {
            let _ = write!(
                o,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#fff\">{}</text>",
                x0 + 3.0,
                y + 11.0,
                esc(&b.name)
            );
        }
    }
    for (t, name) in marks {
        let x = xa.map(*t);
        line(&mut o, [x, top - 4.0, x, bottom], "#b30000", 1.4, " stroke-dasharray=\"3 2\"");
        text(&mut o, x, top - 8.0, "middle", 10.0, name);
    }
    o.push_str("</svg>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_cover_their_range_in_whole_decades_and_nice_steps() {
        let a = LogAxis::covering(7.3, 4385.0, 0.0, 300.0);
        assert_eq!((a.lo, a.hi), (0, 4));
        assert_eq!(a.map(1.0), 0.0);
        assert_eq!(a.map(10_000.0), 300.0);
        assert!((a.map(100.0) - 150.0).abs() < 1e-9);
        let one = LogAxis::covering(5.0, 5.0, 0.0, 1.0);
        assert!(one.hi > one.lo);
        let l = LinAxis::covering(0.0, 842.1, 0.0, 100.0);
        assert_eq!(l.step, 200.0);
        assert_eq!(l.ticks(), [0.0, 200.0, 400.0, 600.0, 800.0, 1000.0]);
        let n = LinAxis::covering(-5.5, 3.0, 0.0, 1.0);
        assert!(n.lo <= -5.5 && n.hi >= 3.0 && n.ticks().contains(&0.0));
        assert_eq!(pow10_label(3), "1000");
        assert_eq!(pow10_label(-2), "0.01");
        assert_eq!(num_label(0.25), "0.25");
        assert_eq!(num_label(1500.0), "1500");
    }

    #[test]
    fn exceedance_plot_has_a_line_per_curve_a_legend_and_the_requirement() {
        let c = |label: &str, k: f64| Curve {
            label: label.into(),
            points: (0..200).map(|i| (10.0 + i as f64 * k, 1.0 - i as f64 / 200.0)).collect(),
        };
        let svg = exceedance("x", "t", "latency (us)", &[c("CPU0 <a>", 1.0), c("CPU1", 2.0)], Some(100.0));
        assert_eq!(svg.matches("<polyline class=\"series\"").count(), 2);
        assert!(svg.contains("CPU0 &lt;a&gt;"), "labels are escaped");
        assert!(svg.contains("class=\"requirement\"") && svg.contains("requirement 100 us"));
        assert!(svg.contains(">100%<") && svg.contains(">1000<"), "axes in percent and us");
        assert!(svg.contains("stroke-dasharray=\"7 3\""), "the second curve is dashed");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        // Thinned: no two kept points closer than half a pixel.
        assert!(points(&[(0.0, 0.0), (0.1, 0.1), (0.2, 0.2), (5.0, 5.0)]) == "0.0,0.0 5.0,5.0");
        assert_eq!(points(&[(0.0, 0.0), (0.1, 0.1)]), "0.0,0.0 0.1,0.1", "the last point stays");
    }

    #[test]
    fn interval_bars_switch_to_a_band_and_to_a_linear_axis() {
        let bar = |i: usize, min: f64| IntervalBar { t0_s: i as f64, t1_s: i as f64 + 1.0, min, mean: 20.0, max: 90.0 };
        let few: Vec<IntervalBar> = (0..5).map(|i| bar(i, 8.0)).collect();
        let svg = intervals("i", "CPU 0", "latency (us)", &few);
        assert_eq!(svg.matches("<line class=\"series\"").count(), 5);
        let many: Vec<IntervalBar> = (0..400).map(|i| bar(i, 8.0)).collect();
        assert!(intervals("i", "CPU 0", "us", &many).contains("<polygon class=\"series\""));
        let signed: Vec<IntervalBar> = (0..3).map(|i| bar(i, -4.0)).collect();
        assert!(intervals("i", "s", "us", &signed).contains(">-20<"), "linear ticks through the negative values");
    }

    #[test]
    fn stacked_bars_and_timelines_draw_every_part() {
        let svg = stacked("s", "t", "us", &["irq", "thread"], &[("CPU 0".into(), vec![3.0, 100.0])]);
        assert_eq!(svg.matches("<rect class=\"series\"").count(), 2 + 2, "two legend swatches, two segments");
        assert!(svg.contains("url(#s-p1)"), "the second part is hatched");
        let bars = [
            Bar { lane: 0, name: "irq".into(), start_us: 0.0, dur_us: 3.0 },
            Bar { lane: 1, name: "kworker/1:2".into(), start_us: 3.0, dur_us: 800.0 },
        ];
        let t = timeline("e", "ep", &["stages", "tasks"], &bars, &[(0.0, "programmed"), (842.0, "woke")]);
        assert_eq!(t.matches("<rect class=\"series\"").count(), 2);
        assert!(t.contains(">kworker/1:2<") && t.contains(">woke<"));
    }
}
