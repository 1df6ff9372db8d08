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

/// A line redrawn in place on a terminal, or plain lines.
pub struct Status {
    on: bool,
    tty: bool,
    /// Plain lines: one every this many ns.
    plain_every_ns: u64,
    /// When the last line was printed (ns since the start of the work).
    last_ns: u64,
    drawn: bool,
}

impl Status {
    /// Progress of work planned to take `planned_ns` (None: until stopped)
    /// when `on`: on a terminal every second, otherwise every tenth of a
    /// minute or a hundredth of the work, whichever is longer (a minute
    /// without a planned end).
    pub fn new(on: bool, tty: bool, planned_ns: Option<u64>) -> Status {
        let plain_every_ns = planned_ns.map_or(PLAIN_OPEN_NS, |p| (p / 100).max(PLAIN_MIN_NS));
        Status { on, tty, plain_every_ns, last_ns: 0, drawn: false }
    }

    /// Whether a line is due `elapsed_ns` into the work.
    pub fn due(&self, elapsed_ns: u64) -> bool {
        let every = if self.tty { TTY_EVERY_NS } else { self.plain_every_ns };
        self.on && elapsed_ns >= self.last_ns + every
    }

    /// Prints `line`, `elapsed_ns` into the work.
    pub fn show(&mut self, elapsed_ns: u64, line: &str) {
        self.last_ns = elapsed_ns;
        if self.tty {
            draw(line);
            self.drawn = true;
        } else {
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
    }

    /// Clears the terminal's line (nothing for plain lines).
    pub fn clear(&mut self) {
        if self.drawn {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[K");
            self.drawn = false;
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
