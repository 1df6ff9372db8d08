//! The code behind an episode, as text: the stacks of what ran when the
//! probe's timer woke it, the blocking thread's stacks, the profiler's
//! samples in its window ('N samples in function (module)', as the WDM
//! latency study's cause tool listed them), the unaccounted time named;
//! and per run, the functions over-represented inside episodes.

use anyhow::Result;
use rtscope_model::episode::{CodeStack, Episode, Frame, TraceSummary};
use std::io::Write;

/// Frames printed per stack (the JSON has them all).
const FRAMES: usize = 14;
/// Rows of a window's sample table.
const ROWS: usize = 8;

fn us(ns: u64) -> String {
    format!("{:.1}us", ns as f64 / 1000.0)
}

/// The interrupted code's frames first, innermost first; the interrupt's
/// own frames (the wake-up path) summed up in one line.
fn write_stack(title: &str, s: &CodeStack, at: u64, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "    {title}: {} (pid {}), {} at +{}",
        if s.pid == 0 { "idle" } else { &s.comm },
        s.pid,
        s.taken,
        us(s.t_ns.saturating_sub(at))
    )?;
    let frames = |label: &str, fs: &[Frame], out: &mut dyn Write| -> Result<()> {
        for (i, f) in fs.iter().take(FRAMES).enumerate() {
            writeln!(out, "      {:<7} {}", if i == 0 { label } else { "" }, f.label())?;
        }
        if fs.len() > FRAMES {
            writeln!(out, "      {:<7} ... {} more", "", fs.len() - FRAMES)?;
        }
        Ok(())
    };
    frames("user", &s.user, out)?;
    let below = s.interrupted_kernel();
    if s.taken == "wake-up" {
        frames("kernel", below, out)?;
        let irq = &s.kernel[..s.kernel.len() - below.len()];
        if !irq.is_empty() {
            let names: Vec<String> = irq.iter().map(Frame::name).collect();
            writeln!(out, "      {:<7} (the interrupt: {})", "", names.join(" <- "))?;
        }
    } else {
        frames("kernel", &s.kernel, out)?;
    }
    if s.user.is_empty() && s.kernel.is_empty() {
        writeln!(out, "      (no frames)")?;
    }
    for n in &s.notes {
        writeln!(out, "      note: {n}")?;
    }
    Ok(())
}

/// What `--stacks` and `--sample-hz` recorded for one episode.
pub fn write_episode_code(e: &Episode, out: &mut dyn Write) -> Result<()> {
    if let Some(s) = &e.stack {
        write_stack("when the timer woke the probe, the CPU ran", s, e.programmed_ns, out)?;
    }
    if let Some(s) = &e.blocker {
        write_stack("the blocking thread", s, e.programmed_ns, out)?;
    }
    if let Some(w) = &e.samples {
        let off = w.irqs_off.map(|n| format!(", {n} with interrupts off")).unwrap_or_default();
        writeln!(out, "    samples in the window: {} ({:.1} expected{off})", w.samples, w.expected)?;
        for r in w.rows.iter().take(ROWS) {
            writeln!(out, "      {:>5}  {} ({})", r.samples, r.function, r.module)?;
        }
    }
    if let Some(r) = &e.remainder {
        writeln!(out, "    unaccounted {}: {}: {}", us(r.ns), r.verdict, r.why)?;
    }
    Ok(())
}

/// The run's stacks and profiler in one line each (the run's summary
/// and `show --episodes`): what was recorded, its cost, what the profiler
/// cannot see.
pub fn write_run_code_head(t: &TraceSummary, out: &mut dyn Write) -> Result<()> {
    // A source of no probe samples (watch) takes neither.
    if t.stacks.is_none() && t.profile.is_none() && t.per_cpu.iter().any(|c| c.samples > 0) {
        writeln!(out, "trace: no stacks and no profiler samples (--stacks on and --sample-hz HZ ask for them)")?;
    }
    if let Some(s) = &t.stacks {
        writeln!(
            out,
            "trace: stacks at {} wake-ups, {} episodes with their stacks; the kernel's unwind took {} (median, max {}) \
             on the wake-up path",
            s.taken,
            s.episodes,
            us(s.cost_p50_ns),
            us(s.cost_max_ns)
        )?;
    }
    if let Some(p) = &t.profile {
        writeln!(
            out,
            "trace: profiler {} at {} Hz per CPU, {} samples, {} inside episodes, {} lost; it cannot see {}",
            p.event, p.hz, p.samples, p.in_episodes, p.lost, p.blind_spot
        )?;
    }
    Ok(())
}

/// The run's stacks and profiler after the episodes: what could not be
/// named, and the functions over-represented inside episodes.
pub fn write_run_code(t: &TraceSummary, out: &mut dyn Write) -> Result<()> {
    for n in t.stacks.iter().flat_map(|s| &s.notes) {
        writeln!(out, "stacks: {n}")?;
    }
    let Some(p) = &t.profile else { return Ok(()) };
    for n in p.notes.iter().filter(|n| !n.contains(" Hz per CPU: it cannot see ")) {
        writeln!(out, "profiler: {n}")?;
    }
    if !p.over.is_empty() {
        writeln!(out, "\nfunctions over-represented inside episodes (share inside / share outside)")?;
        writeln!(out, "{:>8} {:>8} {:>8}  function (module)", "inside", "outside", "ratio")?;
        for r in &p.over {
            writeln!(out, "{:>8} {:>8} {:>8.1}  {} ({})", r.inside, r.outside, r.ratio, r.function, r.module)?;
        }
    }
    Ok(())
}
