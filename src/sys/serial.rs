//! A serial port (or a pseudo-terminal) in raw mode, for the two ends of
//! the serial round trip: `rtscope respond` on the machine under test and
//! the `serial-rtt` probe on the instrument. Raw 8N1, no flow control,
//! VMIN=1/VTIME=0, at a chosen speed; the port's settings as found are put
//! back when it is dropped. Reads and writes do not block: a thread waits
//! with [`RawPort::wait_readable`] (one `ppoll`), so that it sees a stop
//! request, and nothing here allocates once the port is open.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The speeds a port is set to, as `--baud` takes them.
const SPEEDS: &[(u32, libc::speed_t)] = &[
    (9600, libc::B9600),
    (19200, libc::B19200),
    (38400, libc::B38400),
    (57600, libc::B57600),
    (115200, libc::B115200),
    (230400, libc::B230400),
    (460800, libc::B460800),
    (921600, libc::B921600),
    (1000000, libc::B1000000),
    (1500000, libc::B1500000),
    (2000000, libc::B2000000),
    (3000000, libc::B3000000),
    (4000000, libc::B4000000),
];

/// `--baud`: one of the speeds the kernel names.
pub fn parse_baud(text: &str) -> Result<u32, String> {
    let known = || SPEEDS.iter().map(|(b, _)| b.to_string()).collect::<Vec<_>>().join(", ");
    match text.parse::<u32>() {
        Ok(b) if SPEEDS.iter().any(|&(s, _)| s == b) => Ok(b),
        _ => Err(format!("'{text}' is not a serial speed rtscope sets; give one of {} (e.g. --baud 115200)", known())),
    }
}

/// An open port in raw mode; its settings as found are set back on drop.
pub struct RawPort {
    file: File,
    found: libc::termios,
    pub path: PathBuf,
    pub baud: u32,
}

impl std::fmt::Debug for RawPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawPort").field("path", &self.path).field("baud", &self.baud).finish_non_exhaustive()
    }
}

impl RawPort {
    /// Opens `path` and puts it in raw mode at `baud`; what is refused
    /// names `flag` (`--tty`) and the fix. Whatever was waiting in the
    /// port's buffers is dropped.
    pub fn open(flag: &str, path: &Path, baud: u32) -> Result<RawPort, String> {
        let shown = path.display();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| {
                let fix = match e.kind() {
                    io::ErrorKind::NotFound => "give the port's path (e.g. /dev/ttyS1, /dev/ttyUSB0)",
                    io::ErrorKind::PermissionDenied => "run as root, or as a member of the port's group (dialout)",
                    _ => "give a serial port that exists and is free",
                };
                format!("{flag} {shown}: cannot open it ({e}): {fix}")
            })?;
        let fd = file.as_raw_fd();
        // SAFETY: termios is plain data; tcgetattr fills it or fails.
        let mut found: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: fd is open for the call; found is a valid termios.
        if unsafe { libc::tcgetattr(fd, &mut found) } < 0 {
            return Err(format!(
                "{flag} {shown}: not a terminal ({}): give a serial port (/dev/ttyS*, /dev/ttyUSB*) or a \
                 pseudo-terminal (/dev/pts/N), not a file",
                io::Error::last_os_error()
            ));
        }
        let speed = SPEEDS
            .iter()
            .find(|&&(b, _)| b == baud)
            .map(|&(_, s)| s)
            .ok_or_else(|| parse_baud(&baud.to_string()).unwrap_err())?;
        let mut raw = found;
        // SAFETY: raw is a valid termios; these only change its fields.
        unsafe {
            libc::cfmakeraw(&mut raw);
            libc::cfsetispeed(&mut raw, speed);
            libc::cfsetospeed(&mut raw, speed);
        }
        raw.c_cflag |= libc::CLOCAL | libc::CREAD;
        raw.c_cflag &= !(libc::CRTSCTS | libc::CSTOPB | libc::PARENB);
        raw.c_iflag &= !(libc::IXON | libc::IXOFF | libc::IXANY);
        raw.c_cc[libc::VMIN] = 1;
        raw.c_cc[libc::VTIME] = 0;
        // SAFETY: fd is open; raw is a valid termios.
        if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &raw) } < 0 {
            return Err(format!(
                "{flag} {shown}: the port refused raw mode at {baud} baud ({}): give another --baud",
                io::Error::last_os_error()
            ));
        }
        // SAFETY: fd is open.
        unsafe { libc::tcflush(fd, libc::TCIOFLUSH) };
        Ok(RawPort { file, found, path: path.into(), baud })
    }

    /// Waits up to `timeout_ns` for bytes to read: true when some are
    /// there (or the port hung up, which the next read says), false on
    /// the timeout or a signal.
    #[inline]
    pub fn wait_readable(&self, timeout_ns: u64) -> bool {
        let mut pfd = libc::pollfd { fd: self.file.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ts = libc::timespec {
            tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: one valid pollfd, a valid timespec, no signal mask.
        let n = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        n > 0
    }

    /// Reads what is there into `buf` (0: nothing yet).
    #[inline]
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: buf is valid for buf.len() bytes.
        let n = unsafe { libc::read(self.file.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        match n {
            n if n >= 0 => Ok(n as usize),
            _ => match io::Error::last_os_error() {
                e if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => Ok(0),
                e => Err(e),
            },
        }
    }

    /// Writes `buf` whole, or says how much of it the port refused.
    #[inline]
    pub fn write(&self, buf: &[u8]) -> io::Result<()> {
        // SAFETY: buf is valid for buf.len() bytes.
        let n = unsafe { libc::write(self.file.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if (n as usize) < buf.len() {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        Ok(())
    }

    /// Drops what was received and not read yet.
    pub fn flush_input(&self) {
        // SAFETY: the fd is open.
        unsafe { libc::tcflush(self.file.as_raw_fd(), libc::TCIFLUSH) };
    }
}

impl Drop for RawPort {
    /// The port's settings as they were found.
    fn drop(&mut self) {
        // SAFETY: the fd is open; found is the termios tcgetattr gave.
        unsafe { libc::tcsetattr(self.file.as_raw_fd(), libc::TCSANOW, &self.found) };
    }
}

/// A pseudo-terminal pair for tests: the master's descriptor and the
/// slave's path (`/dev/pts/N`).
#[cfg(test)]
pub fn test_pty() -> (File, PathBuf) {
    use std::os::fd::FromRawFd;
    // SAFETY: posix_openpt returns a new fd or -1; grantpt/unlockpt/ptsname
    // take it; ptsname's string is copied at once.
    unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(fd >= 0, "posix_openpt: {}", io::Error::last_os_error());
        assert_eq!(libc::grantpt(fd), 0);
        assert_eq!(libc::unlockpt(fd), 0);
        let name = std::ffi::CStr::from_ptr(libc::ptsname(fd)).to_string_lossy().into_owned();
        (File::from_raw_fd(fd), PathBuf::from(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn speeds_are_the_kernels_and_others_are_refused_naming_the_flag() {
        assert_eq!(parse_baud("115200"), Ok(115200));
        let e = parse_baud("100000").unwrap_err();
        assert!(e.contains("--baud 115200") && e.contains("9600"), "{e}");
    }

    #[test]
    fn a_pty_is_put_in_raw_mode_and_set_back_as_found() {
        let (mut master, path) = test_pty();
        let before = {
            let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
            // SAFETY: a zeroed termios filled by tcgetattr.
            let mut t: libc::termios = unsafe { std::mem::zeroed() };
            assert_eq!(unsafe { libc::tcgetattr(f.as_raw_fd(), &mut t) }, 0);
            (t.c_lflag, f)
        };
        let port = RawPort::open("--tty", &path, 115200).unwrap();
        // Raw: no echo, no line editing; bytes pass as they are.
        master.write_all(&[0xA5, b'\n', 3]).unwrap();
        assert!(port.wait_readable(1_000_000_000));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut buf = [0u8; 16];
        let n = port.read(&mut buf).unwrap();
        assert_eq!(&buf[..n], &[0xA5, b'\n', 3]);
        port.write(&[7, 8]).unwrap();
        let mut got = [0u8; 2];
        master.read_exact(&mut got).unwrap();
        assert_eq!(got, [7, 8]);
        assert!(!port.wait_readable(10_000_000));
        drop(port);
        // SAFETY: as above.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::tcgetattr(before.1.as_raw_fd(), &mut t) }, 0);
        assert_eq!(t.c_lflag, before.0);
    }

    #[test]
    fn a_file_and_a_missing_path_are_refused_naming_the_flag_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("port");
        std::fs::write(&file, "").unwrap();
        let e = RawPort::open("--tty", &file, 115200).unwrap_err();
        assert!(e.starts_with("--tty ") && e.contains("not a terminal") && e.contains("/dev/ttyS"), "{e}");
        let e = RawPort::open("--tty", &dir.path().join("none"), 115200).unwrap_err();
        assert!(e.contains("cannot open") && e.contains("e.g. /dev/ttyS1"), "{e}");
    }
}
