//! SIGINT / SIGTERM end a run cleanly: they set a stop flag that every
//! thread polls. Measuring threads block the signals so that their sleeps
//! are never interrupted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering::SeqCst};

/// The run being recorded (its id), the last one stored (its id negated),
/// or none (0): what a second signal says before exiting.
static RUN: AtomicI64 = AtomicI64::new(0);
/// SIGINT, SIGTERM and SIGHUP received so far.
static SIGNALS: AtomicUsize = AtomicUsize::new(0);

/// Run `run_id` is stored as `running`: a second signal leaves it partial.
pub fn recording(run_id: i64) {
    RUN.store(run_id, SeqCst);
}

/// Run `run_id` is stored with its final status.
pub fn stored(run_id: i64) {
    RUN.store(-run_id, SeqCst);
}

/// Installs handlers that set `stop` on SIGINT, SIGTERM and SIGHUP. A
/// second signal while stopping says what is stored (a run being recorded
/// stays partial: its data up to its last checkpoint) and exits at once
/// with status 130.
pub fn install(stop: &Arc<AtomicBool>) -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        let stop = Arc::clone(stop);
        // SAFETY: the action only touches atomics, and the second signal's
        // formats into a stack buffer, write(2)s it and _exit(2)s: all
        // async-signal-safe.
        unsafe {
            signal_hook::low_level::register(sig, move || {
                if SIGNALS.fetch_add(1, SeqCst) == 0 {
                    stop.store(true, SeqCst);
                } else {
                    second_signal();
                }
            })?;
        }
    }
    Ok(())
}

/// A buffer for a signal handler's message: no allocation, no formatting
/// machinery.
struct Message {
    buf: [u8; 320],
    len: usize,
}

impl Message {
    fn push(&mut self, text: &[u8]) {
        let n = text.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&text[..n]);
        self.len += n;
    }

    fn number(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
}

/// The message of a second signal, for the run state `run` (see [`RUN`]).
fn second_signal_message(run: i64) -> Message {
    let mut m = Message { buf: [0; 320], len: 0 };
    m.push(b"\nrtscope: a second signal: exiting at once (exit code 130); ");
    if run > 0 {
        m.push(b"run ");
        m.number(run as u64);
        m.push(b" is stored partial, with its data up to its last checkpoint (rtscope show ");
        m.number(run as u64);
        m.push(b")\n");
    } else if run < 0 {
        m.push(b"run ");
        m.number(run.unsigned_abs());
        m.push(b" is stored\n");
    } else {
        m.push(b"nothing was stored\n");
    }
    m
}

fn second_signal() -> ! {
    let m = second_signal_message(RUN.load(SeqCst));
    // SAFETY: write(2) of a valid buffer and _exit(2), both async-signal-safe.
    unsafe {
        libc::write(2, m.buf.as_ptr().cast(), m.len);
        libc::_exit(130);
    }
}

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (and the
/// threads it creates afterwards).
pub fn block_in_this_thread() {
    // SAFETY: plain sigset manipulation on a local, zeroed sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Blocks SIGINT, SIGTERM, SIGHUP, SIGPIPE and every real-time signal in
/// the calling thread: for rtscope's background threads (loads, the /proc
/// sampler), which live across cells. A probe's timers signal the process
/// with real-time signals that only its measuring threads may take; a
/// thread started before them, with those signals open, would take (and,
/// as they are ignored, lose) them.
pub fn block_in_background_thread() {
    block_in_this_thread();
    // SAFETY: plain sigset manipulation on a local, zeroed sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in libc::SIGRTMIN()..=libc::SIGRTMAX() {
            libc::sigaddset(&mut set, s);
        }
        // A load writing to a socket whose reader has stopped gets EPIPE,
        // not the SIGPIPE that ends rtscope (see `default_sigpipe`).
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Output piped into `head` ends rtscope quietly, as any Unix tool: SIGPIPE
/// gets its default action back (Rust ignores it).
pub fn default_sigpipe() {
    // SAFETY: restoring the default disposition of SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_signal_says_what_is_stored() {
        let text = |run| {
            let m = second_signal_message(run);
            String::from_utf8(m.buf[..m.len].to_vec()).unwrap()
        };
        assert_eq!(
            text(12),
            "\nrtscope: a second signal: exiting at once (exit code 130); run 12 is stored partial, with its data up \
             to its last checkpoint (rtscope show 12)\n"
        );
        assert!(text(-3).ends_with("; run 3 is stored\n"));
        assert!(text(0).ends_with("; nothing was stored\n"));
    }
}
