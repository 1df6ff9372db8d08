//! The code behind an episode, as text: the stacks of what ran when the
//! probe's timer woke it, the blocking thread's stacks, the profiler's
//! samples in its window ('N samples in function (module)', as the WDM
//! latency study's cause tool listed them), the unaccounted time named;
//! and per run, the functions over-represented inside episodes.

use anyhow::Result;
use rtscope_model::episode::{CodeStack, Episode, Frame, LateRow, TraceSummary, WatchProfile};
use std::io::Write;

/// Frames printed per stack (the JSON has them all).
const FRAMES: usize = 14;
/// Rows of a window's sample table.
const ROWS: usize = 8;
/// Rows of a watched thread's late-period tables (the JSON has more).
const LATE_ROWS: usize = 10;

fn us(ns: u64) -> String {
    format!("{:.1}us", ns as f64 / 1000.0)
}

/// How a stack's user frames were walked, in words after its title.
fn unwinder_words(u: &str) -> &'static str {
    match u {
        "dwarf" => "; user frames by the files' unwind tables",
        "dwarf+fp" => "; user frames by the files' unwind tables, some by frame pointers",
        "fp" => "; user frames by frame pointers",
        _ => "",
    }
}

/// The interrupted code's frames first, innermost first; the interrupt's
/// own frames (the wake-up path) summed up in one line.
fn write_stack(title: &str, s: &CodeStack, at: u64, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "    {title}: {} (pid {}), {} at +{}{}",
        if s.pid == 0 { "idle" } else { &s.comm },
        s.pid,
        s.taken,
        us(s.t_ns.saturating_sub(at)),
        s.unwinder.as_deref().filter(|_| !s.user.is_empty()).map(unwinder_words).unwrap_or_default()
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
    if !s.is_sample() {
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
        writeln!(out, "      (no frames recorded or kept)")?;
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
        if let Some(u) = s.unwind_ns.filter(|&u| u.saturating_mul(10) >= e.latency_ns) {
            writeln!(
                out,
                "      note: recording these stacks took {} of this latency, inside the interrupt that woke the probe: \
                 --stacks' own cost (measure the tail without --stacks)",
                us(u)
            )?;
        }
    }
    if let Some(s) = &e.blocker {
        write_stack("the blocking thread", s, e.programmed_ns, out)?;
    }
    if let Some(w) = &e.samples {
        let off = w.irqs_off.map(|n| format!(", {n} with interrupts off")).unwrap_or_default();
        let by: Vec<String> = w.unwinders.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let by = if by.is_empty() { String::new() } else { format!("; user stacks by {}", by.join(", ")) };
        writeln!(out, "    samples in the window: {} ({:.1} expected{off}){by}", w.samples, w.expected)?;
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
    match &t.stacks {
        Some(s) if s.taken == 0 => {
            writeln!(out, "trace: stacks at no wake-up: none came while a task ran (idle wake-ups take none)")?
        }
        Some(s) => writeln!(
            out,
            "trace: stacks at {} wake-ups, {} episodes with their stacks; the kernel's unwind took {} (median, max {}) \
             on the wake-up path",
            s.taken,
            s.episodes,
            us(s.cost_p50_ns),
            us(s.cost_max_ns)
        )?,
        None => {}
    }
    if let Some(p) = &t.profile {
        writeln!(
            out,
            "trace: profiler {} at {} Hz per CPU, {} samples, {} inside episodes, {} lost; it cannot see {}",
            p.event, p.hz, p.samples, p.in_episodes, p.lost, p.blind_spot
        )?;
    }
    if let Some(p) = &t.watch_profile {
        write_watch_profile(p, out)?;
    }
    if let Some(m) = t.markers.as_ref().filter(|m| !m.list.is_empty() || m.dropped > 0) {
        let more = if m.dropped > 0 { format!(" ({} more not kept)", m.dropped) } else { String::new() };
        writeln!(
            out,
            "trace: {} markers the application wrote to trace_marker on the traced CPUs{more}: `export --format \
             perfetto` shows them on the timeline",
            m.list.len()
        )?;
    }
    Ok(())
}

/// `watch --sample-hz`: per watched thread, the functions of its late
/// periods against its on-time ones, by any frame and by the innermost.
pub fn write_watch_profile(p: &WatchProfile, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "watch profile: {} at {} Hz of each watched thread's CPU time; a period is late with {}; it cannot see {}",
        p.event, p.hz, p.late_when, p.blind_spot
    )?;
    for t in &p.threads {
        let load = t.load.as_ref().map(|l| format!(" [{l}]")).unwrap_or_default();
        writeln!(
            out,
            "  {}{load}: {} late periods ({} samples), {} on time ({} samples); {} samples in no period seen whole, {} \
             lost",
            t.thread, t.late_periods, t.late_samples, t.on_time_periods, t.on_time_samples, t.unsorted_samples, t.lost
        )?;
        if t.late_samples < p.min_late {
            writeln!(
                out,
                "    too few late samples ({} of at least {}) to call a function over-represented",
                t.late_samples, p.min_late
            )?;
        }
        if t.late_samples == 0 {
            continue;
        }
        let table = |title: &str, rows: &[LateRow], out: &mut dyn Write| -> Result<()> {
            writeln!(out, "    {title}")?;
            writeln!(
                out,
                "    {:>7} {:>7} {:>7} {:>8} {:>7}       function (module)",
                "late", "on-time", "late%", "on-time%", "ratio"
            )?;
            for r in rows.iter().take(LATE_ROWS) {
                writeln!(
                    out,
                    "    {:>7} {:>7} {:>7.1} {:>8.1} {:>7.1} {:<5} {} ({})",
                    r.late,
                    r.on_time,
                    100.0 * r.late_share,
                    100.0 * r.on_time_share,
                    r.ratio,
                    if r.over { "over" } else { "" },
                    r.function,
                    r.module
                )?;
            }
            Ok(())
        };
        table("by any frame (inclusive): share of the late samples against the on-time ones", &t.inclusive, out)?;
        table("by innermost function", &t.leaf, out)?;
    }
    if p.threads.iter().any(|t| t.late_samples > 0) {
        writeln!(
            out,
            "  over: at least {} late samples and {}x the function's on-time share (on-time counted at least once)",
            p.min_late,
            WatchProfile::MIN_RATIO
        )?;
    }
    for n in &p.notes {
        writeln!(out, "  profiler: {n}")?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::{code_episode, code_run};

    fn text(f: impl FnOnce(&mut dyn Write) -> Result<()>) -> String {
        let mut out = Vec::new();
        f(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// As docs/trace.md shows it: the interrupted code's frames with their
    /// modules, the interrupt in one line, 'N  function (module)' rows, the
    /// remainder's verdict and evidence.
    #[test]
    fn an_episodes_code_reads_frame_by_frame() {
        let e = code_episode();
        let got = text(|out| write_episode_code(&e, out));
        let fork = "              copy_process+0x65 (kernel)
              kernel_clone+0x65 (kernel)
              __do_sys_clone+0x65 (kernel)
              do_syscall_64+0x65 (kernel)
              entry_SYSCALL_64_after_hwframe+0x65 (kernel)
";
        let want = format!(
            "    when the timer woke the probe, the CPU ran: forker (pid 20092), wake-up at +7.7us; user frames by frame \
             pointers
      user    __libc_fork+0x53 (libc.so.6)
              main+0x2c (forker) forker.c:31
      kernel  security_vm_enough_memory_mm+0x36 (kernel)
              dup_mmap+0x255 (kernel)
{fork}              (the interrupt: try_to_wake_up <- hrtimer_wakeup <- __hrtimer_run_queues <- hrtimer_interrupt \
             <- asm_sysvec_apic_timer_interrupt)
      note: libc.so.6 has no debug symbols: no file and line
    the blocking thread: forker (pid 20092), profiler sample at +400.0us; user frames by the files' unwind \
             tables
      user    __libc_fork+0x53 (libc.so.6)
              main+0x2c (forker) forker.c:31
      kernel  anon_vma_interval_tree_insert+0x1c (kernel)
              dup_mmap+0x1e0 (kernel)
{fork}    samples in the window: 10 (9.4 expected, 2 with interrupts off); user stacks by dwarf 9, dwarf+fp 1
          4  anon_vma_interval_tree_insert (kernel)
          3  dup_mmap (kernel)
          2  copy_page_range (kernel)
          1  main (forker)
    unaccounted 120.0us: interrupts off: 2 of 2 NMI samples in the stretch had interrupts off; interrupts came \
             back in dup_mmap (forker)
"
        );
        assert_eq!(got, want);
        // The idle task by name; a deep stack cut at FRAMES with the rest counted.
        let mut idle = code_episode();
        let s = idle.blocker.as_mut().unwrap();
        s.pid = 0;
        s.user.clear();
        s.kernel = (0..FRAMES + 6).map(|i| Frame { addr: 0x1000 + i as u64, ..Default::default() }).collect();
        let got = text(|out| write_episode_code(&idle, out));
        assert!(got.contains("    the blocking thread: idle (pid 0), profiler sample at +400.0us\n"), "{got}");
        assert!(
            got.contains("      kernel  0x1000\n") && got.contains(&format!("{:#x}\n", 0x1000 + FRAMES - 1)),
            "{got}"
        );
        assert!(
            !got.contains(&format!("{:#x}\n", 0x1000 + FRAMES)) && got.contains("              ... 6 more\n"),
            "{got}"
        );
    }

    /// Stacks whose recording took a tenth of the latency or more say that
    /// this part of the latency is `--stacks`' own; a quicker one says
    /// nothing (the fixture's 6.1 us of 942 us).
    #[test]
    fn says_when_recording_the_stacks_made_the_episode() {
        let mut e = code_episode();
        assert!(!text(|out| write_episode_code(&e, out)).contains("recording these stacks"));
        e.stack.as_mut().unwrap().unwind_ns = Some(e.latency_ns / 10);
        let got = text(|out| write_episode_code(&e, out));
        let want = format!(
            "      note: libc.so.6 has no debug symbols: no file and line\n      note: recording these stacks took {} of \
             this latency, inside the interrupt that woke the probe: --stacks' own cost (measure the tail without \
             --stacks)\n    the blocking thread",
            us(e.latency_ns / 10)
        );
        assert!(got.contains(&want), "{got}");
    }

    /// `show --episodes`: each verdict with its code under it, the run's
    /// stacks and profiler, the functions over-represented inside episodes.
    #[test]
    fn show_episodes_puts_the_code_under_each_verdict() {
        let run = code_run();
        let got = text(|out| crate::report::write_episodes(&run, out));
        let verdict = format!("{}\n    when the timer woke the probe", run.episodes[0].verdict);
        assert!(got.contains(&verdict), "{got}");
        assert!(run.episodes[0].verdict.contains("blocked by forker (pid 20092, SCHED_OTHER) 740.0us"), "{got}");
        assert_eq!(got.matches("    when the timer woke").count(), 1, "the other episodes have no code: {got}");
        for line in [
            "trace: stacks at 4001 wake-ups, 1 episodes with their stacks; the kernel's unwind took 2.9us \
             (median, max 10.4us) on the wake-up path",
            "trace: profiler cycles (hardware, NMI) at 10000 Hz per CPU, 60000 samples, 10 inside episodes, 0 lost; \
             it cannot see time the hypervisor takes",
            "stacks: the user frames of 3 processes were not named: they had exited",
            "profiler: forker was built without frame pointers: its user stacks end at the first frame",
            "  inside  outside    ratio  function (module)",
            "       4       40    599.9  anon_vma_interval_tree_insert (kernel)",
        ] {
            assert!(got.lines().any(|l| l == line), "{line:?} missing: {got}");
        }
        assert!(!got.contains("profiler: cycles"), "the blind spot is said once, in the trace line: {got}");
        let mut bare = code_run();
        bare.trace.as_mut().unwrap().stacks = None;
        bare.trace.as_mut().unwrap().profile = None;
        let got = text(|out| write_run_code_head(bare.trace.as_ref().unwrap(), out));
        assert_eq!(got, "trace: no stacks and no profiler samples (--stacks on and --sample-hz HZ ask for them)\n");
        // A quiet run: stacks on, but no wake-up came while a task ran.
        let mut quiet = code_run();
        let t = quiet.trace.as_mut().unwrap();
        t.profile = None;
        t.stacks.as_mut().unwrap().taken = 0;
        let got = text(|out| write_run_code_head(quiet.trace.as_ref().unwrap(), out));
        assert_eq!(got, "trace: stacks at no wake-up: none came while a task ran (idle wake-ups take none)\n");
        // The application's markers, when it wrote any.
        let mut marked = quiet.clone();
        let t = marked.trace.as_mut().unwrap();
        t.markers = Some(rtscope_model::episode::Markers { list: vec![Default::default(); 3], dropped: 2 });
        let got = text(|out| write_run_code_head(marked.trace.as_ref().unwrap(), out));
        assert!(
            got.ends_with(
                "trace: 3 markers the application wrote to trace_marker on the traced CPUs (2 more not kept): \
                 `export --format perfetto` shows them on the timeline\n"
            ),
            "{got}"
        );
    }
}
