use super::*;
use crate::probe::TestThread;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// The other end on the pty's master: echoes frames, leaves stimulus
/// `drop` unanswered and answers stimulus `slow` `delay_ms` late.
fn echo(master: &mut std::fs::File, stop: &AtomicBool, drop: u16, slow: u16, delay_ms: u64) {
    let mut dec = frame::Decoder::default();
    let mut buf = [0u8; 64];
    // Non-blocking reads on the master, so that a stop is seen.
    // SAFETY: F_SETFL on an open descriptor.
    unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(master), libc::F_SETFL, libc::O_NONBLOCK) };
    while !stop.load(Relaxed) {
        let n = match master.read(&mut buf) {
            Ok(n) => n,
            Err(_) => {
                std::thread::sleep(std::time::Duration::from_millis(1));
                continue;
            }
        };
        for &b in &buf[..n] {
            let Some(f) = dec.push(b) else { continue };
            if f.kind == frame::STIMULUS && f.seq == drop {
                continue;
            }
            if f.kind == frame::STIMULUS && f.seq == slow {
                std::thread::sleep(std::time::Duration::from_millis(delay_ms));
            }
            master.write_all(&frame::encode(f.kind, f.seq)).unwrap();
        }
    }
}

#[test]
fn each_stimulus_is_a_sample_or_a_named_loss_and_late_answers_are_counted() {
    let (mut master, path) = crate::sys::serial::test_pty();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| echo(&mut master, &stop, 3, 5, 15));
        let probe = SerialRtt::open(&path, 115200, 5_000_000, 100_000_000, 2_000_000_000).unwrap();
        assert!(probe.hello_rtt_ns > 0);
        let t = TestThread::new(probe.extra_slots());
        let start = clock::now() + 1_000_000;
        let ctx = t.ctx(start, start, start + 20 * 5_000_000);
        let mut rec = [TestThread::recorder(false, start)];
        probe.measure(&ctx, &mut rec);
        stop.store(true, Relaxed);
        let x = t.extras();
        let (sent, answered, lost) = (x[SLOT_SENT], x[SLOT_ANSWERED], x[SLOT_LOST]);
        assert!(sent >= 15, "{x:?}");
        assert_eq!((lost, answered, rec[0].count()), (1, sent - 1, sent - 1), "{x:?}");
        assert!(x[SLOT_LATE] >= 1, "{x:?}");
        assert_eq!((x[SLOT_STRAYS], x[SLOT_JUNK], x[SLOT_WRITE_ERRORS] + x[SLOT_READ_ERRORS]), (0, 0, 0), "{x:?}");
        let notes = probe.notes(&x).join("\n");
        assert!(
            notes.contains(&format!("1 of {sent} stimuli got no answer")) && notes.contains("(stimulus 3)"),
            "{notes}"
        );
        assert!(probe.thread_error(0, &x, &[]).is_none());
    });
}

#[test]
fn a_silent_other_end_is_refused_naming_the_flag_and_the_fix() {
    let (_master, path) = crate::sys::serial::test_pty();
    let e = SerialRtt::open(&path, 115200, 5_000_000, 100_000_000, 300_000_000).unwrap_err();
    assert!(e.starts_with("--tty ") && e.contains("rtscope respond") && e.contains("--wait"), "{e}");
}
