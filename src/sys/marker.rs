//! A marker an instrument outside the machine can time: a modem-control
//! line of a serial port (RTS or DTR), toggled by a measuring thread at
//! each measurement point with one `TIOCMBIS` / `TIOCMBIC` ioctl, or a
//! GPIO line, with one `GPIO_V2_LINE_SET_VALUES_IOCTL` ([`super::gpio`])
//! (no allocation, no lock of rtscope's; the kernel's own only). An
//! oscilloscope, a logic analyser or a second machine's counter on that
//! pin times the machine from outside, as the references' PC-TIO-10 rig
//! and CEBench's marker address did.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// The line the marker drives: a serial port's modem-control line, or
/// a GPIO chip's line by its offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    Rts,
    Dtr,
    Gpio(u32),
}

impl Line {
    fn bit(self) -> libc::c_int {
        match self {
            Line::Rts => libc::TIOCM_RTS,
            Line::Dtr | Line::Gpio(_) => libc::TIOCM_DTR,
        }
    }
}

/// `--marker tty:PATH[:rts|dtr]` or `gpio:PATH:LINE`, as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerSpec {
    pub path: std::path::PathBuf,
    pub line: Line,
}

/// How a bad `--marker` is told to be written.
const FIX: &str = "write tty:PATH[:rts|dtr] or gpio:/dev/gpiochipN:LINE, e.g. --marker tty:/dev/ttyS1:rts (a serial \
                   port's RTS line) or --marker gpio:/dev/gpiochip0:17 (line 17 of that chip), toggled at each sample";

impl MarkerSpec {
    /// Parses `tty:/dev/ttyS1`, `tty:/dev/ttyS1:rts`, `tty:/dev/ttyUSB0:dtr`
    /// or `gpio:/dev/gpiochip0:17`.
    pub fn parse(text: &str) -> Result<MarkerSpec, String> {
        let bad = |why: &str| format!("--marker '{text}': {why}; {FIX}");
        let (path, line) = if let Some(rest) = text.strip_prefix("tty:") {
            match rest.rsplit_once(':') {
                Some((p, "rts")) => (p, Line::Rts),
                Some((p, "dtr")) => (p, Line::Dtr),
                Some((_, other)) => return Err(bad(&format!("unknown line '{other}' (rts or dtr)"))),
                None => (rest, Line::Rts),
            }
        } else if let Some(rest) = text.strip_prefix("gpio:") {
            match rest.rsplit_once(':').map(|(p, n)| (p, n.parse::<u32>())) {
                Some((p, Ok(n))) => (p, Line::Gpio(n)),
                _ => return Err(bad("a GPIO marker names its line's number")),
            }
        } else {
            return Err(bad("the marker's kind is tty or gpio"));
        };
        if !path.starts_with('/') {
            return Err(bad("give the port's or the chip's absolute path"));
        }
        Ok(MarkerSpec { path: path.into(), line })
    }

    /// As written: `tty:/dev/ttyS1:rts`, `gpio:/dev/gpiochip0:17`.
    pub fn spec(&self) -> String {
        let path = self.path.display();
        match self.line {
            Line::Rts => format!("tty:{path}:rts"),
            Line::Dtr => format!("tty:{path}:dtr"),
            Line::Gpio(n) => format!("gpio:{path}:{n}"),
        }
    }
}

impl serde::Serialize for MarkerSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.spec())
    }
}

/// An open marker: its line and level now (set back as found on drop).
pub struct Marker {
    driven: Driven,
    high: AtomicBool,
    /// Toggles the kernel refused (a port gone, a USB adapter unplugged).
    pub failed: std::sync::atomic::AtomicU64,
}

/// What a marker drives.
enum Driven {
    /// A serial port's modem line: the port, the line's bit, the port's
    /// modem lines as found.
    Tty {
        port: File,
        bit: libc::c_int,
        found: libc::c_int,
    },
    Gpio(super::gpio::GpioLine),
}

impl std::fmt::Debug for Marker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.driven {
            Driven::Tty { bit, found, .. } => format!("tty bit {bit} found {found}"),
            Driven::Gpio(_) => "gpio".into(),
        };
        f.debug_struct("Marker").field("driven", &kind).finish_non_exhaustive()
    }
}

impl Marker {
    /// Opens the port or the GPIO line of `spec`; refuses a file that is
    /// not a serial port with modem control, or not a GPIO chip, a line
    /// that is not there or busy, naming the flag.
    pub fn open(spec: &MarkerSpec) -> Result<Marker, String> {
        let name = spec.spec();
        if let Line::Gpio(offset) = spec.line {
            let (line, high) = super::gpio::GpioLine::request(&format!("--marker {name}"), &spec.path, offset)?;
            return Ok(Marker { driven: Driven::Gpio(line), high: AtomicBool::new(high), failed: Default::default() });
        }
        let port = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&spec.path)
            .map_err(|e| format!("--marker {name}: cannot open {}: {e}", spec.path.display()))?;
        let mut found: libc::c_int = 0;
        // SAFETY: TIOCMGET writes one c_int to the pointer given.
        if unsafe { libc::ioctl(port.as_raw_fd(), libc::TIOCMGET, &mut found) } < 0 {
            return Err(format!(
                "--marker {name}: {} has no modem-control lines ({}): give a serial port (/dev/ttyS*, /dev/ttyUSB*), \
                 not a pseudo-terminal or a file",
                spec.path.display(),
                std::io::Error::last_os_error()
            ));
        }
        let bit = spec.line.bit();
        let high = AtomicBool::new(found & bit != 0);
        Ok(Marker { driven: Driven::Tty { port, bit, found }, high, failed: Default::default() })
    }

    /// Flips the line: one ioctl, nothing else. For the measuring thread.
    #[inline]
    pub fn toggle(&self) {
        let high = !self.high.load(Relaxed);
        self.high.store(high, Relaxed);
        let ok = match &self.driven {
            Driven::Tty { port, bit, .. } => {
                let req = if high { libc::TIOCMBIS } else { libc::TIOCMBIC };
                // SAFETY: TIOCMBIS/TIOCMBIC read one c_int from the pointer given.
                unsafe { libc::ioctl(port.as_raw_fd(), req, bit) >= 0 }
            }
            Driven::Gpio(line) => line.set(high).is_ok(),
        };
        if !ok {
            self.failed.fetch_add(1, Relaxed);
        }
    }
}

impl Drop for Marker {
    /// The port's modem lines as they were found (a GPIO line sets itself
    /// back as it drops).
    fn drop(&mut self) {
        if let Driven::Tty { port, found, .. } = &self.driven {
            // SAFETY: TIOCMSET reads one c_int from the pointer given.
            unsafe { libc::ioctl(port.as_raw_fd(), libc::TIOCMSET, found) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_read_and_bad_ones_refused_naming_the_fix() {
        let m = MarkerSpec::parse("tty:/dev/ttyS1").unwrap();
        assert_eq!((m.path.to_str(), m.line), (Some("/dev/ttyS1"), Line::Rts));
        assert_eq!(m.spec(), "tty:/dev/ttyS1:rts");
        assert_eq!(MarkerSpec::parse("tty:/dev/ttyUSB0:dtr").unwrap().line, Line::Dtr);
        let g = MarkerSpec::parse("gpio:/dev/gpiochip0:17").unwrap();
        assert_eq!((g.line, g.spec().as_str()), (Line::Gpio(17), "gpio:/dev/gpiochip0:17"));
        for (bad, why) in [
            ("usb:/dev/ttyUSB0", "kind is tty or gpio"),
            ("gpio:/dev/gpiochip0", "names its line's number"),
            ("gpio:/dev/gpiochip0:x", "names its line's number"),
            ("tty:/dev/ttyS1:cts", "unknown line 'cts'"),
            ("tty:ttyS1", "absolute path"),
        ] {
            let e = MarkerSpec::parse(bad).unwrap_err();
            assert!(e.starts_with(&format!("--marker '{bad}'")) && e.contains(why) && e.contains("e.g."), "{e}");
        }
    }

    #[test]
    fn a_file_that_is_no_serial_port_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("port");
        std::fs::write(&path, "").unwrap();
        let e = Marker::open(&MarkerSpec { path, line: Line::Rts }).err().unwrap();
        assert!(e.contains("no modem-control lines") && e.contains("/dev/ttyS"), "{e}");
    }
}
