//! `rtscope respond`: the machine under test's side of the serial round
//! trip. A real-time thread (pinned, at `--priority`, memory locked, as a
//! probe's measuring thread) waits on the port and writes back at once
//! whatever it read, then (with `--marker`) toggles the marker's line; it
//! counts the frames it answered. Nothing is stored: the instrument's
//! `serial-rtt` run holds the measurement.

use super::frame;
use crate::sys::marker::Marker;
use crate::sys::serial::RawPort;
use crate::sys::{clock, mem, sched::Policy};
use anyhow::{Result, anyhow};
use std::sync::atomic::{AtomicBool, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

/// How long a wait on the port lasts at most, so that a stop is seen.
const POLL_NS: u64 = 50_000_000;

/// The responder's settings.
pub struct Respond {
    pub port: RawPort,
    pub marker: Option<Marker>,
    pub cpu: usize,
    pub policy: Policy,
    pub priority: u8,
    /// CLOCK_MONOTONIC end (u64::MAX: until a signal or `count`).
    pub until_ns: u64,
    /// Stop after answering this many stimuli.
    pub count: Option<u64>,
    pub quiet: bool,
    /// What /dev/cpu_dma_latency is held at while answering (None: not).
    pub dma_latency: Option<rtscope_model::settings::DmaLatency>,
}

/// What the responder answered.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Answered {
    /// Stimulus frames written back.
    pub stimuli: u64,
    /// Hellos written back (the instrument asking before it measures).
    pub hellos: u64,
    /// Bytes written back, frames or not.
    pub bytes: u64,
    /// Wake-ups that read something.
    pub reads: u64,
    /// Bytes that were no frame.
    pub junk: u64,
    /// Writes and reads the port refused.
    pub errors: u64,
}

/// Answers on `opts.port` until `signal`, the end or the count; prints a
/// ready line when the thread waits on the port, and the counts at the
/// end (unless quiet). The port is put back as found when `opts` drops.
pub fn respond(opts: Respond, signal: &AtomicBool) -> Result<Answered> {
    let _dma = crate::sys::dma::hold_for(opts.dma_latency, opts.quiet);
    let _ = mem::lock_all();
    let ready = AtomicBool::new(false);
    let answered = std::thread::scope(|s| -> Result<Answered> {
        let t = s.spawn(|| -> Result<Answered> {
            crate::probe::responder_thread("respond", opts.cpu, opts.policy, opts.priority)?;
            ready.store(true, Release);
            let stop = || signal.load(Relaxed) || clock::now() >= opts.until_ns;
            Ok(answer(&opts.port, opts.marker.as_ref(), opts.count.unwrap_or(u64::MAX), stop))
        });
        while !ready.load(Acquire) && !t.is_finished() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if ready.load(Acquire) && !opts.quiet {
            eprintln!(
                "rtscope respond: ready on {} at {} baud (CPU {}, SCHED_{} {}); stop with Ctrl-C",
                opts.port.path.display(),
                opts.port.baud,
                opts.cpu,
                format!("{:?}", opts.policy).to_uppercase(),
                opts.priority
            );
        }
        t.join().map_err(|_| anyhow!("the responder thread panicked"))?
    })?;
    if !opts.quiet {
        let a = answered;
        eprintln!(
            "rtscope respond: answered {} stimuli and {} hellos on {} ({} bytes in {} reads; {} bytes no frame; {} \
             errors)",
            a.stimuli,
            a.hellos,
            opts.port.path.display(),
            a.bytes,
            a.reads,
            a.junk,
            a.errors
        );
    }
    Ok(answered)
}

/// The responder's loop, on its real-time thread: no allocation, lock or
/// formatting. Writes back what it read, at once, then toggles the marker.
fn answer(port: &RawPort, marker: Option<&Marker>, count: u64, stop: impl Fn() -> bool) -> Answered {
    let mut buf = [0u8; 256];
    let mut dec = frame::Decoder::default();
    let mut a = Answered::default();
    while !stop() && a.stimuli < count {
        if !port.wait_readable(POLL_NS) {
            continue;
        }
        let n = match port.read(&mut buf) {
            Ok(0) => continue,
            Ok(n) => n,
            Err(_) => {
                // A port gone reads as an error at once: not a busy loop.
                a.errors += 1;
                clock::sleep_until(clock::now() + POLL_NS);
                continue;
            }
        };
        if port.write(&buf[..n]).is_err() {
            a.errors += 1;
        }
        if let Some(m) = marker {
            m.toggle();
        }
        a.reads += 1;
        a.bytes += n as u64;
        for &b in &buf[..n] {
            match dec.push(b) {
                Some(f) if f.kind == frame::STIMULUS => a.stimuli += 1,
                Some(_) => a.hellos += 1,
                None => {}
            }
        }
        a.junk = dec.junk;
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn what_comes_is_written_back_and_the_frames_counted() {
        let (mut master, path) = crate::sys::serial::test_pty();
        let port = RawPort::open("--tty", &path, 115200).unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let t = s.spawn(|| answer(&port, None, 3, || stop.load(Relaxed)));
            let mut sent = Vec::new();
            sent.extend(frame::encode(frame::HELLO, 1));
            sent.push(0x00);
            for seq in 0..3 {
                sent.extend(frame::encode(frame::STIMULUS, seq));
            }
            master.write_all(&sent).unwrap();
            let a = t.join().unwrap();
            assert_eq!((a.stimuli, a.hellos, a.junk, a.bytes, a.errors), (3, 1, 1, sent.len() as u64, 0), "{a:?}");
            let mut back = vec![0u8; sent.len()];
            master.read_exact(&mut back).unwrap();
            assert_eq!(back, sent);
        });
    }
}
