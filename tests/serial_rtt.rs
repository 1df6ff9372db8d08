//! The serial round trip on this machine: `rtscope respond` on one
//! pseudo-terminal, `rtscope serial-rtt` on another, the test copying
//! bytes between their masters as a null-modem cable would (the VM test
//! bed, tests/rt_kernel.rs, runs it over an emulated UART). Refusals of
//! bad ports and markers, and the GPIO marker where a GPIO chip exists.

mod common;
use common::*;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// A pseudo-terminal: its master, non-blocking, and its slave's path.
fn pty() -> (File, PathBuf) {
    // SAFETY: posix_openpt gives a new descriptor or -1; ptsname's string
    // is copied at once.
    unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NONBLOCK);
        assert!(fd >= 0);
        assert_eq!((libc::grantpt(fd), libc::unlockpt(fd)), (0, 0));
        let name = std::ffi::CStr::from_ptr(libc::ptsname(fd)).to_string_lossy().into_owned();
        (File::from_raw_fd(fd), PathBuf::from(name))
    }
}

/// Copies bytes between the two masters until `stop`.
fn cable(a: File, b: File, stop: &AtomicBool) {
    let mut buf = [0u8; 4096];
    while !stop.load(Relaxed) {
        let mut moved = false;
        for (mut from, mut to) in [(&a, &b), (&b, &a)] {
            if let Ok(n) = from.read(&mut buf)
                && n > 0
            {
                // A slave not yet opened takes the bytes all the same.
                let _ = to.write_all(&buf[..n]);
                moved = true;
            }
        }
        if !moved {
            let mut fds =
                [a.as_raw_fd(), b.as_raw_fd()].map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
            // SAFETY: two valid pollfds.
            unsafe { libc::poll(fds.as_mut_ptr(), 2, 10) };
        }
    }
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn the_round_trip_through_respond_stores_one_sample_per_stimulus() {
    let fx = Fixture::root();
    let ((ma, pa), (mb, pb)) = (pty(), pty());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| cable(ma, mb, &stop));
        let responder = Command::new(BIN)
            .args(["respond", "--tty", pa.to_str().unwrap(), "-N", "200", "-D", "30s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let cpu = last_cpu().to_string();
        let v = fx.run_json(
            "rtt.json",
            &["serial-rtt", "--tty", pb.to_str().unwrap(), "-l", "200", "-i", "2ms", "--cpus", &cpu, "--wait", "10s"],
        );
        let said = responder.wait_with_output().unwrap();
        stop.store(true, Relaxed);
        let said = text(&said);
        assert!(said.contains("ready on") && said.contains("answered 200 stimuli"), "{said}");
        let rows = v["results"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{v}");
        let r = &rows[0];
        assert_eq!((r["probe"].as_str(), r["metric"].as_str()), (Some("serial-rtt"), Some("rtt")), "{r}");
        // One stored sample per stimulus: none lost.
        assert_eq!(
            (r["count"].as_u64(), r["sent"].as_u64(), r["lost"].as_u64()),
            (Some(200), Some(200), Some(0)),
            "{r}"
        );
        assert!(r["min_ns"].as_u64() > Some(0), "{r}");
        let shown = show_json(&fx.db, "last");
        assert_eq!(shown["status"], "complete", "{shown}");
        assert_eq!(shown["results"], v["results"]);
    });
}

#[test]
fn bad_ports_are_refused_naming_the_flag_and_the_fix() {
    let dir = tempdir();
    let file = dir.join("plain");
    std::fs::write(&file, "").unwrap();
    let db = db(&dir);
    for (args, words) in [
        (vec!["serial-rtt", "--tty", "/nonexistent/ttyS9"], "cannot open"),
        (vec!["serial-rtt", "--tty", file.to_str().unwrap()], "not a terminal"),
        (vec!["respond", "--tty", file.to_str().unwrap()], "not a terminal"),
        (vec!["serial-rtt", "--tty", "/dev/null", "--baud", "12345"], "--baud 115200"),
        (vec!["wakeup", "--marker", &format!("gpio:{}:3", file.display())], "not a GPIO chip"),
        (vec!["wakeup", "--marker", "gpio:/dev/gpiochip99:3"], "cannot open"),
        (vec!["wakeup", "--marker", "gpio:/dev/gpiochip0"], "gpio:/dev/gpiochipN:LINE"),
    ] {
        let mut all = args.clone();
        all.extend(["-D", "1s"]);
        if args[0] != "respond" {
            all.extend(["--db", &db]);
        }
        let o = rtscope(&all);
        let t = text(&o);
        assert_ne!(o.status.code(), Some(0), "{args:?}: {t}");
        assert!(t.contains(words), "{args:?}: {t}");
        assert!(!t.contains("panicked"), "{t}");
    }
}

#[test]
#[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
fn a_gpio_marker_toggles_a_real_line() {
    let chip = std::fs::read_dir("/dev")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("gpiochip")));
    let Some(chip) = chip else {
        skipped("no /dev/gpiochip* here (no GPIO chip, gpio-sim or gpio-mockup in this kernel)");
        return;
    };
    let fx = Fixture::root();
    let marker = format!("gpio:{}:0", chip.display());
    let v = fx.run_json("gpio.json", &["wakeup", "--cpus", "0", "-D", "1s", "--marker", &marker]);
    assert!(v["results"][0]["count"].as_u64() > Some(0), "{v}");
}
