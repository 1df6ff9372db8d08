//! `serial-rtt`: the instrument's side of a two-machine measurement over a
//! serial line (the references' two-machine rigs: a second machine times
//! the machine under test from outside). `rtscope respond` runs on the
//! machine under test; this probe, on the instrument, writes a numbered
//! stimulus frame ([`frame`]) every `--interval` and times each answer:
//!
//! - `rtt` = CLOCK_MONOTONIC before the stimulus' write -> when the read
//!   that completes its answer returns: both wires, both UARTs and
//!   drivers, and the responder's wake-up and answer.
//!
//! An answer that comes after the next stimulus was due is `late`
//! (recorded: its round trip is longer than the interval); a stimulus
//! without an answer within `--timeout` is `lost`: counted, its number
//! named in the run's notes, never a sample. An answer to no stimulus
//! waiting (after its timeout, twice) is a `stray`. One port is one line:
//! the probe measures from one CPU.
//!
//! Before measuring, the probe says hello ([`frame::HELLO`]) until the
//! other end echoes it (`--wait`), so that the instrument may start before
//! the machine under test is ready.

pub mod frame;
mod respond;
pub use respond::{Respond, respond};

use super::{Probe, ThreadCtx};
use crate::recorder::Recorder;
use crate::sys::clock;
use crate::sys::serial::RawPort;
use rtscope_model::descriptor::{self, Descriptor};
use rtscope_model::extra::serial;
use rtscope_model::hist::Tally;
use rtscope_model::units;
use serde::Serialize;
use std::sync::Arc;

/// Stimuli in flight at most: an answer is matched within this window.
const WINDOW: usize = 256;
/// How often a hello is sent again while the other end does not answer.
const HELLO_EVERY_NS: u64 = 200_000_000;
/// How long a wait for answers lasts at most, so that a stop is seen.
const POLL_NS: u64 = 50_000_000;
/// Failed writes in a row after which measuring stops.
const MAX_FAILURES_IN_A_ROW: u64 = 100;
/// Lost stimuli whose numbers the notes name.
const NAMED_LOST: usize = 8;

// Per-thread figures (extra slots).
const SLOT_SENT: usize = 0;
const SLOT_ANSWERED: usize = 1;
const SLOT_LATE: usize = 2;
const SLOT_LOST: usize = 3;
const SLOT_STRAYS: usize = 4;
const SLOT_JUNK: usize = 5;
const SLOT_WRITE_ERRORS: usize = 6;
const SLOT_READ_ERRORS: usize = 7;
const SLOT_ERRNO: usize = 8;
/// The first lost stimuli's numbers, each + 1 (0: none).
const SLOT_LOST_SEQ: usize = 9;
const SLOTS: usize = SLOT_LOST_SEQ + NAMED_LOST;

#[derive(Debug, Serialize)]
pub struct SerialRtt {
    pub tty: std::path::PathBuf,
    pub baud: u32,
    pub interval_ns: u64,
    pub timeout_ns: u64,
    /// The hello's round trip before measuring (the other end answered).
    pub hello_rtt_ns: u64,
    #[serde(skip)]
    port: Arc<RawPort>,
}

impl SerialRtt {
    /// Opens `tty` at `baud` and says hello until the other end answers,
    /// for `wait_ns` at most; refusals name the flag and the fix.
    pub fn open(
        tty: &std::path::Path,
        baud: u32,
        interval_ns: u64,
        timeout_ns: u64,
        wait_ns: u64,
    ) -> Result<SerialRtt, String> {
        let port = RawPort::open("--tty", tty, baud)?;
        let hello_rtt_ns = hello(&port, wait_ns).ok_or_else(|| {
            format!(
                "--tty {}: no answer from the other end within --wait {}: start `rtscope respond --tty PORT --baud {baud}` \
                 on the machine under test first, check the cable (TX to RX both ways) and the speed, or give a longer --wait",
                tty.display(),
                units::human(wait_ns)
            )
        })?;
        Ok(SerialRtt { tty: tty.into(), baud, interval_ns, timeout_ns, hello_rtt_ns, port: Arc::new(port) })
    }
}

/// Says hello until the echo of the latest hello comes back (the line is
/// a stream in order: an older hello's echo comes before it); its round
/// trip, or None after `wait_ns`.
fn hello(port: &RawPort, wait_ns: u64) -> Option<u64> {
    let deadline = clock::now() + wait_ns;
    let mut dec = frame::Decoder::default();
    let mut buf = [0u8; 256];
    for n in 1u16.. {
        let sent = clock::now();
        if sent >= deadline {
            return None;
        }
        let _ = port.write(&frame::encode(frame::HELLO, n));
        let until = (sent + HELLO_EVERY_NS).min(deadline);
        loop {
            let now = clock::now();
            if now >= until {
                break;
            }
            if !port.wait_readable(until - now) {
                continue;
            }
            let Ok(got) = port.read(&mut buf) else { break };
            let now = clock::now();
            if buf[..got].iter().filter_map(|&b| dec.push(b)).any(|f| f == frame::Frame { kind: frame::HELLO, seq: n })
            {
                return Some(now - sent);
            }
        }
    }
    None
}

/// A stimulus waiting for its answer.
#[derive(Clone, Copy)]
struct Waiting {
    seq: u64,
    /// CLOCK_MONOTONIC before its write (0: nothing waiting here).
    sent: u64,
    /// When the next stimulus was due: an answer after it is late.
    due: u64,
    /// Sent after the warm-up: counted and recorded.
    counted: bool,
}

const NONE: Waiting = Waiting { seq: 0, sent: 0, due: 0, counted: false };

/// The measuring thread's state: what waits, what was counted.
struct Loop<'a> {
    ctx: &'a ThreadCtx<'a>,
    waiting: [Waiting; WINDOW],
    outstanding: usize,
    dec: frame::Decoder,
    lost_named: usize,
}

impl Loop<'_> {
    fn bump(&self, slot: usize) {
        self.ctx.set_extra(slot, self.ctx.extra(slot) + 1);
    }

    /// `w`, waiting no more: lost.
    fn lose(&mut self, w: Waiting) {
        self.outstanding -= 1;
        if w.counted {
            self.bump(SLOT_LOST);
            if self.lost_named < NAMED_LOST {
                self.ctx.set_extra(SLOT_LOST_SEQ + self.lost_named, w.seq + 1);
                self.lost_named += 1;
            }
        }
    }

    /// Gives up on the stimuli waiting longer than `timeout_ns` at `now`.
    fn expire(&mut self, now: u64, timeout_ns: u64) {
        for i in 0..WINDOW {
            let w = self.waiting[i];
            if w.sent != 0 && now.saturating_sub(w.sent) > timeout_ns {
                self.waiting[i] = NONE;
                self.lose(w);
            }
        }
    }

    /// Reads answers until `until`; false when a sample breached
    /// `--threshold` (measuring stops).
    fn answers(&mut self, port: &RawPort, rec: &mut Recorder, until: u64) -> bool {
        let mut buf = [0u8; 64];
        loop {
            let now = clock::now();
            if now >= until || self.ctx.stopping() {
                return true;
            }
            if !port.wait_readable((until - now).min(POLL_NS)) {
                continue;
            }
            let got = match port.read(&mut buf) {
                Ok(n) => n,
                Err(e) => {
                    self.bump(SLOT_READ_ERRORS);
                    self.ctx.set_extra(SLOT_ERRNO, e.raw_os_error().unwrap_or(0) as u64);
                    // A port gone (a USB adapter unplugged) reads as an
                    // error at once: wait for the next turn.
                    clock::sleep_until(until);
                    return true;
                }
            };
            let now = clock::now();
            let junk = self.dec.junk;
            for &b in &buf[..got] {
                let Some(f) = self.dec.push(b) else { continue };
                if f.kind != frame::STIMULUS {
                    // A late echo of a hello from before measuring.
                    continue;
                }
                let i = usize::from(f.seq) % WINDOW;
                let w = self.waiting[i];
                if w.sent == 0 || w.seq as u16 != f.seq {
                    if self.ctx.recording(now) {
                        self.bump(SLOT_STRAYS);
                    }
                    continue;
                }
                self.waiting[i] = NONE;
                self.outstanding -= 1;
                if !w.counted {
                    continue;
                }
                let rtt = now - w.sent;
                rec.record(now, rtt);
                self.bump(SLOT_ANSWERED);
                if now > w.due {
                    self.bump(SLOT_LATE);
                }
                if self.ctx.breached(now, rtt) {
                    return false;
                }
            }
            if self.dec.junk != junk && self.ctx.recording(now) {
                self.ctx.set_extra(SLOT_JUNK, self.ctx.extra(SLOT_JUNK) + (self.dec.junk - junk));
            }
        }
    }
}

impl Probe for SerialRtt {
    fn descriptor(&self) -> &'static Descriptor {
        &descriptor::SERIAL_RTT
    }

    fn metrics(&self) -> &'static [&'static str] {
        &["rtt"]
    }

    fn plan(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn describe(&self) -> String {
        format!(
            "{} at {} baud, a stimulus every {}, lost after {} (hello answered in {})",
            self.tty.display(),
            self.baud,
            units::human(self.interval_ns),
            units::human(self.timeout_ns),
            units::human(self.hello_rtt_ns)
        )
    }

    fn extra_slots(&self) -> usize {
        SLOTS
    }

    fn row_extras(&self, _metric: usize, slots: &[u64], _total: &Tally) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        serial::SENT.put(&mut m, slots[SLOT_SENT]);
        serial::LOST.put(&mut m, slots[SLOT_LOST]);
        serial::LATE.put(&mut m, slots[SLOT_LATE]);
        serial::STRAYS.put(&mut m, slots[SLOT_STRAYS]);
        serial::JUNK.put(&mut m, slots[SLOT_JUNK]);
        serial::ERRORS.put(&mut m, slots[SLOT_WRITE_ERRORS] + slots[SLOT_READ_ERRORS]);
        serial::TTY.put(&mut m, self.tty.display().to_string());
        serial::BAUD.put(&mut m, self.baud);
        m
    }

    fn thread_error(&self, _cpu: usize, slots: &[u64], _totals: &[&Tally]) -> Option<String> {
        let (sent, answered) = (slots[SLOT_SENT], slots[SLOT_ANSWERED]);
        (sent > 0 && answered == 0).then(|| {
            format!(
                "--tty {}: none of the {sent} stimuli was answered: is `rtscope respond` still running on the other end?",
                self.tty.display()
            )
        })
    }

    fn notes(&self, slots: &[u64]) -> Vec<String> {
        let mut notes = Vec::new();
        let (sent, lost) = (slots[SLOT_SENT], slots[SLOT_LOST]);
        if lost > 0 {
            let named: Vec<String> =
                slots[SLOT_LOST_SEQ..SLOTS].iter().filter(|&&s| s > 0).map(|s| (s - 1).to_string()).collect();
            let more = if lost as usize > named.len() { ", ..." } else { "" };
            notes.push(format!(
                "{lost} of {sent} stimuli got no answer within --timeout {} (stimulus {}{more}): counted \
                 as lost, not samples",
                units::human(self.timeout_ns),
                named.join(", ")
            ));
        }
        if slots[SLOT_LATE] > 0 {
            notes.push(format!(
                "{} answers came after the next stimulus was due (recorded: their round trip is longer \
                 than --interval {})",
                slots[SLOT_LATE],
                units::human(self.interval_ns)
            ));
        }
        if slots[SLOT_STRAYS] > 0 {
            notes.push(format!(
                "{} answers to no stimulus waiting (after --timeout, or twice): not samples",
                slots[SLOT_STRAYS]
            ));
        }
        if slots[SLOT_JUNK] > 0 {
            notes.push(format!(
                "{} bytes read were no frame (noise on the line, a wrong --baud, another writer)",
                slots[SLOT_JUNK]
            ));
        }
        let errors = slots[SLOT_WRITE_ERRORS] + slots[SLOT_READ_ERRORS];
        if errors > 0 {
            notes.push(format!(
                "the port refused {} writes and {} reads (last: {})",
                slots[SLOT_WRITE_ERRORS],
                slots[SLOT_READ_ERRORS],
                std::io::Error::from_raw_os_error(slots[SLOT_ERRNO] as i32)
            ));
        }
        notes
    }

    fn measure(&self, ctx: &ThreadCtx, rec: &mut [Recorder]) {
        let port = &*self.port;
        let rec = &mut rec[0];
        let mut l = Loop { ctx, waiting: [NONE; WINDOW], outstanding: 0, dec: Default::default(), lost_named: 0 };
        let mut failed_in_a_row = 0u64;
        let mut next = ctx.start_ns;
        clock::sleep_until(next);
        port.flush_input();
        for seq in 0u64.. {
            let i = (seq % WINDOW as u64) as usize;
            let old = l.waiting[i];
            if old.sent != 0 {
                // Its slot is needed: it waited WINDOW stimuli.
                l.waiting[i] = NONE;
                l.lose(old);
            }
            next += self.interval_ns;
            let t0 = clock::now();
            let counted = ctx.recording(t0);
            match port.write(&frame::encode(frame::STIMULUS, seq as u16)) {
                Ok(()) => {
                    failed_in_a_row = 0;
                    l.waiting[i] = Waiting { seq, sent: t0, due: next.max(t0), counted };
                    l.outstanding += 1;
                    if counted {
                        l.bump(SLOT_SENT);
                    }
                }
                Err(e) => {
                    l.bump(SLOT_WRITE_ERRORS);
                    ctx.set_extra(SLOT_ERRNO, e.raw_os_error().unwrap_or(0) as u64);
                    failed_in_a_row += 1;
                    if failed_in_a_row >= MAX_FAILURES_IN_A_ROW {
                        ctx.fail(format!(
                            "--tty {}: {failed_in_a_row} writes in a row failed ({e}); measuring stopped",
                            self.tty.display()
                        ));
                        return;
                    }
                }
            }
            if next < t0 {
                // Behind by more than a period: back on a grid from now.
                next = t0 + self.interval_ns;
            }
            if !l.answers(port, rec, next) {
                return;
            }
            let now = clock::now();
            l.expire(now, self.timeout_ns);
            if ctx.done(now, ctx.extra(SLOT_SENT)) {
                break;
            }
            rec.maybe_checkpoint(now);
        }
        // The last stimuli's answers, for --timeout at most.
        let end = clock::now() + self.timeout_ns;
        while l.outstanding > 0 && !ctx.stopping() {
            let now = clock::now();
            if now >= end {
                break;
            }
            if !l.answers(port, rec, end.min(now + POLL_NS)) {
                return;
            }
        }
        l.expire(u64::MAX, 0);
    }
}

#[cfg(test)]
mod tests;
