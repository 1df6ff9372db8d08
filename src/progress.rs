//! Progress on stderr, printed by rtscope's non-measuring threads only (it
//! formats and writes): on a terminal one status line, redrawn in place
//! about once a second and cleared at the end; otherwise plain lines, few
//! enough for a log. [`Status`] is a cell's (`probe::Cell` draws it from
//! its main loop); [`Ticker`] is a slow command's (`analyze`, `report`,
//! `compare`), its stages redrawn by a thread of its own.

use rtscope_model::units;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A terminal's line is redrawn this often.
const TTY_EVERY_NS: u64 = 1_000_000_000;
/// Plain lines come at most this often ...
const PLAIN_MIN_NS: u64 = 10_000_000_000;
/// ... and, for a run without a planned end, this often.
const PLAIN_OPEN_NS: u64 = 60_000_000_000;

/// Whether stderr is a terminal.
pub fn stderr_is_tty() -> bool {
    std::io::stderr().is_terminal()
}

/// The terminal's width, for a line that must not wrap (80 if unknown).
fn tty_width() -> usize {
    match rustix::termios::tcgetwinsize(std::io::stderr()) {
        Ok(w) if w.ws_col > 0 => usize::from(w.ws_col).clamp(20, 1000),
        _ => 80,
    }
}

/// The terminal's height, for a block that must fit (24 if unknown).
pub fn tty_height() -> usize {
    match rustix::termios::tcgetwinsize(std::io::stderr()) {
        Ok(w) if w.ws_row > 0 => usize::from(w.ws_row).clamp(5, 1000),
        _ => 24,
    }
}

/// A line redrawn in place on a terminal, or plain lines.
pub struct Status {
    on: bool,
    tty: bool,
    /// Plain lines: one every this many ns.
    plain_every_ns: u64,
    /// When the last line was printed (ns since the start of the work).
    last_ns: u64,
    /// The lines drawn on the terminal, to redraw or clear (0: none).
    drawn: usize,
}

impl Status {
    /// Progress of work planned to take `planned_ns` (None: until stopped)
    /// when `on`: on a terminal every second, otherwise every tenth of a
    /// minute or a hundredth of the work, whichever is longer (a minute
    /// without a planned end).
    pub fn new(on: bool, tty: bool, planned_ns: Option<u64>) -> Status {
        let plain_every_ns = planned_ns.map_or(PLAIN_OPEN_NS, |p| (p / 100).max(PLAIN_MIN_NS));
        Status { on, tty, plain_every_ns, last_ns: 0, drawn: 0 }
    }

    /// Whether a line is due `elapsed_ns` into the work.
    pub fn due(&self, elapsed_ns: u64) -> bool {
        let every = if self.tty { TTY_EVERY_NS } else { self.plain_every_ns };
        self.on && elapsed_ns >= self.last_ns + every
    }

    /// Whether it draws on a terminal (in place), not plain lines.
    pub fn on_tty(&self) -> bool {
        self.on && self.tty
    }

    /// Prints `line`, `elapsed_ns` into the work.
    pub fn show(&mut self, elapsed_ns: u64, line: &str) {
        self.last_ns = elapsed_ns;
        if self.tty && self.drawn <= 1 {
            draw(line);
            self.drawn = 1;
        } else if self.tty {
            self.show_block(elapsed_ns, &[line.to_string()]);
        } else {
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    }

    /// Redraws `lines` in place on the terminal (the status line and the
    /// live per-CPU view under it), each cut to its width; plain lines
    /// print the first only.
    pub fn show_block(&mut self, elapsed_ns: u64, lines: &[String]) {
        if !self.tty {
            return self.show(elapsed_ns, lines.first().map_or("", |l| l.as_str()));
        }
        self.last_ns = elapsed_ns;
        let width = tty_width() - 1;
        let mut out = self.back_to_top();
        for (i, l) in lines.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str("\x1b[K");
            out.extend(l.chars().take(width));
        }
        out.push_str("\x1b[J");
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{out}");
        let _ = err.flush();
        self.drawn = lines.len();
    }

    /// The escapes that bring the cursor to the first drawn line's start.
    fn back_to_top(&self) -> String {
        match self.drawn {
            0 | 1 => "\r".into(),
            n => format!("\x1b[{}A\r", n - 1),
        }
    }

    /// Clears what it drew on the terminal (nothing for plain lines).
    pub fn clear(&mut self) {
        if self.drawn > 0 {
            let _ = write!(std::io::stderr().lock(), "{}\x1b[J", self.back_to_top());
            self.drawn = 0;
        }
    }
}

impl Drop for Status {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Where a cell is: what its status line says.
pub struct CellProgress<'a> {
    /// `wakeup`, or `wakeup under cpu` in an assessment.
    pub label: &'a str,
    /// The metric whose worst case is shown (the probe's first).
    pub metric: &'a str,
    /// Since recording started (0 during the warm-up).
    pub elapsed_ns: u64,
    /// Of the warm-up, still to go.
    pub warmup_left_ns: u64,
    /// The recording's planned length (`--duration`), if any.
    pub planned_ns: Option<u64>,
    /// `--loops`: samples per thread, if any.
    pub loops: Option<u64>,
    pub samples: u64,
    /// The largest sample so far and its CPU.
    pub worst: Option<(u64, usize)>,
}

impl CellProgress<'_> {
    /// `wakeup: 12s of 1m, 48s left; 11988 samples; worst latency 23.456us on CPU 1`.
    pub fn line(&self) -> String {
        let whole =
            |ns: u64| if ns < 1_000_000_000 { "0s".into() } else { units::human(ns / 1_000_000_000 * 1_000_000_000) };
        if self.warmup_left_ns > 0 {
            return format!("{}: warming up, {} left", self.label, whole(self.warmup_left_ns + 999_999_999));
        }
        let mut out = format!("{}: {}", self.label, whole(self.elapsed_ns));
        match self.planned_ns {
            Some(p) => {
                let left = p.saturating_sub(self.elapsed_ns);
                out.push_str(&format!(" of {}, {} left", whole(p), whole(left + 999_999_999)));
            }
            None if self.loops.is_none() => out.push_str(" (until Ctrl-C)"),
            None => {}
        }
        match self.loops {
            Some(l) => out.push_str(&format!("; {} samples (--loops {l} per CPU)", self.samples)),
            None => out.push_str(&format!("; {} samples", self.samples)),
        }
        if let Some((ns, cpu)) = self.worst {
            out.push_str(&format!("; worst {} {}us on CPU {cpu}", self.metric, units::us(ns)));
        }
        out
    }
}

/// One measured CPU's figures so far, for [`cpu_table`] (ns; `cur` and
/// `min` signed, for the signed series).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuFigures {
    pub count: u64,
    pub cur: i64,
    pub min: i64,
    pub mean: f64,
    pub max: u64,
}

/// The live per-CPU view under a probe's status line on a terminal, in
/// rtla timerlat top's columns: per measured CPU the samples so far, the
/// last, the smallest, the mean and the largest, of the probe's first
/// metric, in `unit`. At most `max_rows` lines: beyond them the CPUs with
/// the largest worst cases are kept (in CPU order) and a last line counts
/// the rest.
pub fn cpu_table(
    metric: &str,
    unit: units::ShownIn,
    rows: &[(usize, Option<CpuFigures>)],
    max_rows: usize,
) -> Vec<String> {
    let mut out = vec![
        format!("{metric} ({}), per CPU, since recording started:", unit.label()),
        format!("{:>5} {:>10} {:>12} {:>12} {:>12} {:>12}", "CPU", "count", "cur", "min", "avg", "max"),
    ];
    let room = max_rows.saturating_sub(out.len()).max(1);
    let mut shown: Vec<&(usize, Option<CpuFigures>)> = rows.iter().collect();
    let hidden = shown.len().saturating_sub(room);
    if hidden > 0 {
        // One line says how many are hidden: keep room - 1 of the worst.
        shown.sort_by_key(|(cpu, f)| (std::cmp::Reverse(f.map_or(0, |f| f.max)), *cpu));
        shown.truncate(room - 1);
        shown.sort_by_key(|(cpu, _)| *cpu);
    }
    for (cpu, f) in shown {
        out.push(match f {
            Some(f) => format!(
                "{cpu:>5} {:>10} {:>12} {:>12} {:>12} {:>12}",
                f.count,
                unit.i(f.cur),
                unit.i(f.min),
                unit.f(f.mean),
                unit.u(f.max)
            ),
            None => format!("{cpu:>5} {:>10} {:>12} {:>12} {:>12} {:>12}", 0, "-", "-", "-", "-"),
        });
    }
    if hidden > 0 {
        let more = rows.len() - (out.len() - 2);
        out.push(format!("  ... {more} more CPUs (the worst cases are shown; the terminal is {max_rows} lines)"));
    }
    out
}

/// The stage and since when, and whether to stop: shared with the thread.
type Shared = Arc<(Mutex<(String, Instant)>, AtomicBool)>;

/// A slow command's stage (`reading run 12`, `analysing 64 series`),
/// drawn on a terminal at once and then redrawn every second with the
/// time it has taken, by a thread of its own; cleared when dropped.
/// Nothing when stderr is not a terminal.
pub struct Ticker {
    command: &'static str,
    shared: Option<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    /// A ticker for `command` (e.g. `rtscope analyze`), drawing only on a
    /// terminal.
    pub fn start(command: &'static str) -> Ticker {
        if !stderr_is_tty() {
            return Ticker { command, shared: None, thread: None };
        }
        let shared: Shared = Arc::new((Mutex::new((String::new(), Instant::now())), AtomicBool::new(false)));
        let mine = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("rtscope-progress".into())
            .spawn(move || {
                let mut drawn = Instant::now();
                while !mine.1.load(Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    if drawn.elapsed() >= Duration::from_secs(1) {
                        drawn = Instant::now();
                        let (stage, since) =
                            mine.0.lock().map(|g| g.clone()).unwrap_or_else(|e| e.into_inner().clone());
                        if !stage.is_empty() && !mine.1.load(Relaxed) {
                            draw(&format!("{command}: {stage} ({}s)", since.elapsed().as_secs()));
                        }
                    }
                }
            })
            .ok();
        let shared = thread.is_some().then_some(shared);
        Ticker { command, shared, thread }
    }

    /// Now at `stage`: drawn at once.
    pub fn stage(&self, stage: impl Into<String>) {
        if let Some(shared) = &self.shared {
            let stage = stage.into();
            draw(&format!("{}: {stage}", self.command));
            if let Ok(mut g) = shared.0.lock() {
                *g = (stage, Instant::now());
            }
        }
    }
}

/// Redraws the terminal's line with `line`, cut to its width.
fn draw(line: &str) {
    let line: String = line.chars().take(tty_width() - 1).collect();
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r\x1b[K{line}");
    let _ = err.flush();
}

impl Ticker {
    /// Stops and clears the line (before output to the terminal).
    pub fn done(&mut self) {
        if let Some(shared) = self.shared.take() {
            shared.1.store(true, Relaxed);
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
            let _ = write!(std::io::stderr().lock(), "\r\x1b[K");
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.done();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cells_line_says_elapsed_remaining_and_the_worst_case() {
        let mut p = CellProgress {
            label: "wakeup",
            metric: "latency",
            elapsed_ns: 12_300_000_000,
            warmup_left_ns: 0,
            planned_ns: Some(60_000_000_000),
            loops: None,
            samples: 11_988,
            worst: Some((23_456, 1)),
        };
        assert_eq!(p.line(), "wakeup: 12s of 1m, 48s left; 11988 samples; worst latency 23.456us on CPU 1");
        p.planned_ns = None;
        p.worst = None;
        assert_eq!(p.line(), "wakeup: 12s (until Ctrl-C); 11988 samples");
        p.loops = Some(30_000);
        assert_eq!(p.line(), "wakeup: 12s; 11988 samples (--loops 30000 per CPU)");
        p.warmup_left_ns = 400_000_000;
        assert_eq!(p.line(), "wakeup: warming up, 1s left");
    }

    #[test]
    fn the_live_view_is_a_row_per_cpu_and_keeps_the_worst_when_short_of_lines() {
        let f = |count, cur, min, max| Some(CpuFigures { count, cur, min, mean: 1_500.0, max });
        let rows = [(0, f(10, 1_000, 900, 2_000)), (1, None), (2, f(10, 1_200, 800, 9_000)), (3, f(5, 1, 1, 5_000))];
        let t = cpu_table("latency", units::ShownIn::Us, &rows, 20);
        assert_eq!(t.len(), 6, "{t:?}");
        assert_eq!(t[1], "  CPU      count          cur          min          avg          max");
        assert_eq!(t[2], "    0         10        1.000        0.900        1.500        2.000");
        assert_eq!(t[3], "    1          0            -            -            -            -");
        let t = cpu_table("latency", units::ShownIn::Ns, &rows, 5);
        // Two lines of head, two CPUs (the worst: 2 and 3), one more line.
        assert_eq!(t.len(), 5, "{t:?}");
        assert!(t[2].starts_with("    2         10         1200          800         1500         9000"), "{t:?}");
        assert!(t[3].starts_with("    3 "), "{t:?}");
        assert!(t[4].contains("2 more CPUs"), "{t:?}");
        assert!(t.iter().all(|l| l.len() <= 100), "{t:?}");
    }

    #[test]
    fn plain_lines_come_seldom_and_a_terminal_every_second() {
        let mut tty = Status::new(true, true, Some(3_600_000_000_000));
        assert!(!tty.due(500_000_000) && tty.due(1_000_000_000));
        tty.last_ns = 1_000_000_000;
        assert!(!tty.due(1_500_000_000) && tty.due(2_000_000_000));
        // An hour: every 36 s; a minute: every 10 s; open-ended: every minute.
        let plain = Status::new(true, false, Some(3_600_000_000_000));
        assert!(!plain.due(35_000_000_000) && plain.due(36_000_000_000));
        let plain = Status::new(true, false, Some(60_000_000_000));
        assert!(!plain.due(9_000_000_000) && plain.due(10_000_000_000));
        let plain = Status::new(true, false, None);
        assert!(!plain.due(59_000_000_000) && plain.due(60_000_000_000));
        assert!(!Status::new(false, true, None).due(u64::MAX / 2));
    }
}
