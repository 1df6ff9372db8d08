//! Flame graphs of the code behind the top causes, drawn here as inline
//! SVG (no dependency: inferno's CDDL licence and its size are not worth
//! one picture). Each of a run's top causes (the sources that were the
//! largest cause of most episodes) gets one graph of the profiler's
//! samples inside those episodes' windows, or, without a profiler, of the
//! stacks recorded when the probe's timer woke it: root at the bottom,
//! each frame as wide as its samples, kernel frames orange, user frames
//! yellow, a tooltip with the count.

use super::doc::{Block, Section, Table};
use super::judged::Analysed;
use super::svg::esc;
use rtscope_model::episode::{Episode, Frame, top_causes};
use std::collections::BTreeMap;

const WIDTH: f64 = 960.0;
const ROW: f64 = 16.0;
/// Causes drawn, and the depth drawn.
const CAUSES: usize = 3;
const DEPTH: usize = 48;
/// Stands for the frames left out between the root and the innermost.
const ELIDED: &str = "[frames between]";

/// A node of the merged stacks.
#[derive(Default)]
struct Node {
    count: u64,
    children: BTreeMap<String, Node>,
}

impl Node {
    fn add(&mut self, path: &[&str], n: u64) {
        self.count += n;
        if let Some((first, rest)) = path.split_first() {
            self.children.entry((*first).to_string()).or_default().add(rest, n);
        }
    }
}

/// The folded stacks (`root;...;leaf` and their counts) of `episodes`:
/// the profiler's samples in their windows, else their recorded stacks.
pub fn folded(episodes: &[&Episode]) -> Vec<(String, u64)> {
    let samples: Vec<(String, u64)> = episodes
        .iter()
        .filter_map(|e| e.samples.as_ref())
        .flat_map(|w| w.folded.iter().map(|f| (f.stack.clone(), f.samples)))
        .collect();
    if !samples.is_empty() {
        return samples;
    }
    episodes
        .iter()
        .filter_map(|e| e.blocker.as_ref().or(e.stack.as_ref()))
        .map(|s| {
            let mut parts: Vec<String> = s.user.iter().rev().map(Frame::name).collect();
            parts.extend(s.interrupted_kernel().iter().rev().map(|f| format!("{} [k]", f.name())));
            if parts.is_empty() {
                parts.push(if s.pid == 0 { "idle".into() } else { s.comm.clone() });
            }
            (parts.join(";"), 1)
        })
        .collect()
}

fn colour(name: &str) -> String {
    let h = name.bytes().fold(5381u32, |h, b| h.wrapping_mul(33) ^ u32::from(b));
    let v = (h % 60) as u8;
    if name.ends_with(" [k]") {
        format!("rgb(230,{},{})", 90 + v, 40 + v / 3)
    } else {
        format!("rgb(235,{},{})", 170 + v / 2, 50 + v / 2)
    }
}

/// The frames of a folded stack drawn: all of them up to [`DEPTH`]; of a
/// deeper one the root, a marker, and the innermost frames, where the code
/// that took the time is.
fn kept_frames(folded: &str) -> Vec<&str> {
    let parts: Vec<&str> = folded.split(';').collect();
    if parts.len() <= DEPTH {
        return parts;
    }
    let mut kept = vec![parts[0], ELIDED];
    kept.extend_from_slice(&parts[parts.len() - (DEPTH - 2)..]);
    kept
}

/// A flame graph of `stacks` as an SVG, `id` unique in the document.
pub fn svg(id: &str, title: &str, stacks: &[(String, u64)]) -> String {
    let mut root = Node::default();
    for (s, n) in stacks {
        root.add(&kept_frames(s), *n);
    }
    let depth = depth(&root).min(DEPTH);
    let height = (depth as f64 + 2.0) * ROW + 10.0;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"{id}\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"monospace\" font-size=\"11\">\
         <text x=\"4\" y=\"13\" font-size=\"12\">{}</text>",
        esc(title)
    );
    let total = root.count.max(1);
    draw(&root, 0.0, WIDTH / total as f64, total, 0, height - ROW - 4.0, &mut out);
    out.push_str("</svg>");
    out
}

fn depth(n: &Node) -> usize {
    n.children.values().map(|c| 1 + depth(c)).max().unwrap_or(0)
}

fn draw(n: &Node, x0: f64, scale: f64, total: u64, level: usize, y: f64, out: &mut String) {
    let mut x = x0;
    for (name, c) in &n.children {
        let w = c.count as f64 * scale;
        if w >= 0.5 {
            let tip = format!("{name} ({} samples, {:.1}%)", c.count, 100.0 * c.count as f64 / total as f64);
            out.push_str(&format!(
                "<g><title>{}</title><rect class=\"series\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\" \
                 rx=\"2\"/>",
                esc(&tip),
                (w - 0.5).max(0.5),
                ROW - 1.0,
                colour(name)
            ));
            let chars = ((w - 6.0) / 6.7) as usize;
            if chars >= 3 {
                let label: String = if name.chars().count() > chars {
                    name.chars().take(chars.saturating_sub(2)).chain("..".chars()).collect()
                } else {
                    name.clone()
                };
                out.push_str(&format!("<text x=\"{:.1}\" y=\"{:.1}\">{}</text>", x + 3.0, y + ROW - 4.5, esc(&label)));
            }
            out.push_str("</g>");
            if level + 1 < DEPTH {
                draw(c, x, scale, total, level + 1, y - ROW, out);
            }
        }
        x += w;
    }
}

/// The report's sections: a flame graph per top cause that has code, and
/// per watched thread sampled (`watch --sample-hz`) one of its late
/// periods.
pub fn sections(a: &Analysed, p: &str) -> Vec<Section> {
    let mut out = cause_sections(a, p);
    out.extend(watch_section(a, p));
    out
}

/// `watch --sample-hz`: per sampled thread with late samples, its
/// functions over-represented in late periods and a flame graph of the
/// late periods' stacks.
fn watch_section(a: &Analysed, p: &str) -> Option<Section> {
    let w = a.run.trace.as_ref()?.watch_profile.as_ref()?;
    let mut sec = Section::new(format!("{p}-watch-flame"), "The code of the watched threads' late periods");
    sec.push(Block::Para(format!(
        "{} at {} Hz of each watched thread's CPU time; a period is late with {}. A function is over-represented with \
         at least {} late samples and {}x its share of the on-time samples.",
        w.event,
        w.hz,
        w.late_when,
        w.min_late,
        rtscope_model::episode::WatchProfile::MIN_RATIO
    )));
    for (i, t) in w.threads.iter().enumerate().filter(|(_, t)| t.late_samples > 0) {
        let load = t.load.as_ref().map(|l| format!(" under {l}")).unwrap_or_default();
        let mut table = Table::new(
            ["function (any frame)", "module", "", "late", "on time", "late %", "on-time %", "ratio"]
                .map(String::from)
                .to_vec(),
            3,
        );
        for r in t.inclusive.iter().take(10) {
            table.row(vec![
                r.function.clone(),
                r.module.clone(),
                if r.over { "over".into() } else { String::new() },
                r.late.to_string(),
                r.on_time.to_string(),
                format!("{:.1}", 100.0 * r.late_share),
                format!("{:.1}", 100.0 * r.on_time_share),
                format!("{:.1}", r.ratio),
            ]);
        }
        sec.push(Block::Para(format!(
            "{}{load}: {} late periods ({} samples) against {} on time ({} samples).",
            t.thread, t.late_periods, t.late_samples, t.on_time_periods, t.on_time_samples
        )));
        sec.push(Block::Table(table));
        let stacks: Vec<(String, u64)> = t.late_folded.iter().map(|f| (f.stack.clone(), f.samples)).collect();
        if !stacks.is_empty() {
            sec.push(Block::Figure {
                svg: svg(
                    &format!("{p}-watch-flame-{i}"),
                    &format!("{}{load}: {} samples in {} late periods", t.thread, t.late_samples, t.late_periods),
                    &stacks,
                ),
                caption: format!(
                    "{}{load}: the stacks of its late periods' samples, root at the bottom ([k]: kernel frames)",
                    t.thread
                ),
            });
        }
    }
    Some(sec)
}

/// A flame graph per top cause that has code.
fn cause_sections(a: &Analysed, p: &str) -> Vec<Section> {
    let run = a.run;
    if run.episodes.iter().all(|e| e.stack.is_none() && e.blocker.is_none() && e.samples.is_none()) {
        return Vec::new();
    }
    let mut sec = Section::new(format!("{p}-flame"), "The code behind the top causes");
    let top: Vec<_> = top_causes(&run.episodes).into_iter().filter(|t| t.main_in > 0).take(CAUSES).collect();
    for (i, t) in top.iter().enumerate() {
        let eps: Vec<&Episode> = run
            .episodes
            .iter()
            .filter(|e| {
                rtscope_model::episode::main_cause(&e.causes).is_some_and(|c| c.kind == t.kind && c.name == t.name)
            })
            .collect();
        let stacks = folded(&eps);
        if stacks.is_empty() {
            continue;
        }
        let n: u64 = stacks.iter().map(|s| s.1).sum();
        let what = &t.name;
        let from = if eps.iter().any(|e| e.samples.as_ref().is_some_and(|w| w.samples > 0)) {
            "profiler samples in their windows"
        } else {
            "stacks at the wake-up"
        };
        sec.push(Block::Figure {
            svg: svg(
                &format!("{p}-flame-{i}"),
                &format!("{} {what}: {} episodes, {n} {from}", t.kind.as_str(), eps.len()),
                &stacks,
            ),
            caption: format!(
                "{} {what}, the largest cause of {} episodes: {from}, root at the bottom ([k]: kernel frames)",
                t.kind.as_str(),
                eps.len()
            ),
        });
    }
    if sec.blocks.is_empty() { Vec::new() } else { vec![sec] }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_as_wide_as_their_samples() {
        let stacks = vec![("main;run;spin_burst".to_string(), 3), ("main;run;sleep;entry [k]".to_string(), 1)];
        let s = svg("f", "t <1>", &stacks);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert!(s.contains("t &lt;1&gt;"));
        // main spans the width; spin_burst three quarters of it.
        assert!(s.contains("main (4 samples, 100.0%)") && s.contains("spin_burst (3 samples, 75.0%)"), "{s}");
        assert!(s.contains("width=\"719.5\""), "spin_burst's box: {s}");
        assert!(s.contains("rgb(230,"), "kernel frames are orange");
        // Drawn data, as every plot of the report marks it.
        assert_eq!(s.matches("<rect class=\"series\"").count(), 5, "{s}");
    }

    /// A watched thread's late periods get their table and flame graph.
    #[test]
    fn a_watched_threads_late_periods_are_drawn() {
        use rtscope_model::episode::{Folded, LateRow, ThreadProfile, WatchProfile};
        let mut run = crate::report::fixtures::code_run();
        run.episodes.clear();
        let row =
            LateRow { function: "slow_path".into(), module: "prog".into(), late: 40, over: true, ..Default::default() };
        let thread = ThreadProfile {
            thread: "loop (42)".into(),
            late_periods: 5,
            late_samples: 40,
            inclusive: vec![row],
            late_folded: vec![Folded { stack: "main;slow_path".into(), samples: 40 }],
            ..Default::default()
        };
        run.trace.get_or_insert_with(Default::default).watch_profile =
            Some(WatchProfile { threads: vec![thread], ..Default::default() });
        let a = Analysed::new(&run, crate::judge::Asked::none(), None, None);
        let secs = sections(&a, "r");
        let sec = secs.iter().find(|s| s.id == "r-watch-flame").expect("the watch section");
        let svg = sec.blocks.iter().find_map(|b| match b {
            Block::Figure { svg, .. } => Some(svg.clone()),
            _ => None,
        });
        assert!(svg.is_some_and(|s| s.contains("slow_path (40 samples, 100.0%)")));
        assert!(sec.blocks.iter().any(|b| matches!(b, Block::Table(t) if t.rows[0][0] == "slow_path")));
    }

    #[test]
    fn a_deep_stack_keeps_its_root_and_innermost_frames() {
        let deep: Vec<String> = (0..100).map(|i| format!("f{i}")).collect();
        let kept = kept_frames(&deep.join(";")[..]).iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(kept.len(), DEPTH);
        assert_eq!((kept[0].as_str(), kept[1].as_str()), ("f0", ELIDED));
        assert_eq!(kept.last().map(String::as_str), Some("f99"), "the leaf, where the time went, is drawn");
        assert_eq!(kept[2], format!("f{}", 100 - (DEPTH - 2)));
        assert_eq!(kept_frames("a;b;c"), ["a", "b", "c"]);
        let s = svg("f", "t", &[(deep.join(";"), 2)]);
        assert!(s.contains("f99 (2 samples, 100.0%)"), "{s}");
    }

    /// The top cause with code gets its graph: of the profiler's samples in
    /// its episodes' windows, else of the stacks at the wake-up (the
    /// interrupted code, not the interrupt); the fixture's other top
    /// causes have no code and get none.
    #[test]
    fn the_top_cause_is_drawn_from_its_samples_else_its_stacks() {
        let mut run = crate::report::fixtures::code_run();
        run.series.clear();
        let figures = |run: &rtscope_model::run::Run| -> Vec<(String, String)> {
            let a = Analysed::new(run, crate::judge::Asked::none(), None, None);
            let secs = sections(&a, "r");
            secs.iter()
                .inspect(|s| {
                    assert_eq!((s.id.as_str(), s.title.as_str()), ("r-flame", "The code behind the top causes"))
                })
                .flat_map(|s| &s.blocks)
                .map(|b| match b {
                    Block::Figure { svg, caption } => (svg.clone(), caption.clone()),
                    b => panic!("{b:?}"),
                })
                .collect()
        };
        let [(svg, caption)] = &figures(&run)[..] else { panic!("one cause has code") };
        assert_eq!(
            caption,
            "thread forker, the largest cause of 1 episodes: profiler samples in their windows, root at the bottom \
             ([k]: kernel frames)"
        );
        assert!(svg.contains("id=\"r-flame-1\""), "the second top cause, after tokio-rt-worker: {svg}");
        assert!(svg.contains(">thread forker: 1 episodes, 10 profiler samples in their windows</text>"), "{svg}");
        for tip in [
            "main (10 samples, 100.0%)",
            "dup_mmap [k] (9 samples, 90.0%)",
            "anon_vma_interval_tree_insert [k] (4 samples, 40.0%)",
            "copy_page_range [k] (2 samples, 20.0%)",
        ] {
            assert!(svg.contains(tip), "{tip}: {svg}");
        }
        assert!(!svg.contains("security_vm_enough_memory_mm"), "the samples, not the stacks: {svg}");
        // Without a profiler: the stack at the wake-up, below its interrupt.
        let e = &mut run.episodes[0];
        (e.samples, e.blocker) = (None, None);
        let [(svg, caption)] = &figures(&run)[..] else { panic!("one cause has code") };
        assert!(caption.contains(": stacks at the wake-up, root at the bottom"), "{caption}");
        for tip in ["main (1 samples, 100.0%)", "__libc_fork (1 samples", "security_vm_enough_memory_mm [k] (1 samples"]
        {
            assert!(svg.contains(tip), "{tip}: {svg}");
        }
        assert!(!svg.contains("try_to_wake_up") && !svg.contains("asm_sysvec"), "not the interrupt: {svg}");
        run.episodes[0].stack = None;
        assert!(figures(&run).is_empty());
    }
}
