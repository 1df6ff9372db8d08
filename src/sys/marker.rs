//! A marker an instrument outside the machine can time: a modem-control
//! line of a serial port (RTS or DTR), toggled by a measuring thread at
//! each measurement point with one `TIOCMBIS` / `TIOCMBIC` ioctl (no
//! allocation, no lock of rtscope's; the kernel's port lock only). An
//! oscilloscope, a logic analyser or a second machine's counter on that
//! pin times the machine from outside, as the references' PC-TIO-10 rig
//! and CEBench's marker address did.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// The modem-control line the marker drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    Rts,
    Dtr,
}

impl Line {
    fn bit(self) -> libc::c_int {
        match self {
            Line::Rts => libc::TIOCM_RTS,
            Line::Dtr => libc::TIOCM_DTR,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Line::Rts => "rts",
            Line::Dtr => "dtr",
        }
    }
}

/// `--marker tty:PATH[:rts|dtr]`, as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerSpec {
    pub path: std::path::PathBuf,
    pub line: Line,
}

/// How a bad `--marker` is told to be written.
const FIX: &str = "write tty:PATH[:rts|dtr], e.g. --marker tty:/dev/ttyS1:rts (a serial port's RTS line, toggled at \
                   each sample)";

impl MarkerSpec {
    /// Parses `tty:/dev/ttyS1`, `tty:/dev/ttyS1:rts` or `tty:/dev/ttyUSB0:dtr`.
    pub fn parse(text: &str) -> Result<MarkerSpec, String> {
        let bad = |why: &str| format!("--marker '{text}': {why}; {FIX}");
        let Some(rest) = text.strip_prefix("tty:") else {
            return Err(bad("the marker's kind is tty"));
        };
        let (path, line) = match rest.rsplit_once(':') {
            Some((p, "rts")) => (p, Line::Rts),
            Some((p, "dtr")) => (p, Line::Dtr),
            Some((_, other)) => return Err(bad(&format!("unknown line '{other}' (rts or dtr)"))),
            None => (rest, Line::Rts),
        };
        if !path.starts_with('/') {
            return Err(bad("give the port's absolute path"));
        }
        Ok(MarkerSpec { path: path.into(), line })
    }

    /// As written: `tty:/dev/ttyS1:rts`.
    pub fn spec(&self) -> String {
        format!("tty:{}:{}", self.path.display(), self.line.name())
    }
}

impl serde::Serialize for MarkerSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.spec())
    }
}

/// An open marker: the port, the line, its level now and the port's
/// modem lines as found (set back on drop).
pub struct Marker {
    port: File,
    bit: libc::c_int,
    high: AtomicBool,
    found: libc::c_int,
    /// Toggles the kernel refused (a port gone, a USB adapter unplugged).
    pub failed: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Marker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Marker").field("bit", &self.bit).field("found", &self.found).finish_non_exhaustive()
    }
}

impl Marker {
    /// Opens the port of `spec` and reads its modem lines; refuses a file
    /// that is not a serial port with modem control, naming the flag.
    pub fn open(spec: &MarkerSpec) -> Result<Marker, String> {
        let name = spec.spec();
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
        let m = Marker { port, bit, high: AtomicBool::new(found & bit != 0), found, failed: Default::default() };
        Ok(m)
    }

    /// Flips the line: one ioctl, nothing else. For the measuring thread.
    #[inline]
    pub fn toggle(&self) {
        let high = !self.high.load(Relaxed);
        self.high.store(high, Relaxed);
        let req = if high { libc::TIOCMBIS } else { libc::TIOCMBIC };
        // SAFETY: TIOCMBIS/TIOCMBIC read one c_int from the pointer given.
        if unsafe { libc::ioctl(self.port.as_raw_fd(), req, &self.bit) } < 0 {
            self.failed.fetch_add(1, Relaxed);
        }
    }
}

impl Drop for Marker {
    /// The port's modem lines as they were found.
    fn drop(&mut self) {
        // SAFETY: TIOCMSET reads one c_int from the pointer given.
        unsafe { libc::ioctl(self.port.as_raw_fd(), libc::TIOCMSET, &self.found) };
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
        for (bad, why) in [
            ("gpio:/dev/gpiochip0:4", "kind is tty"),
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
