//! Descriptors: eventfd, pipes, unix socket pairs, and their reads and
//! writes.

use super::{check, fd, last};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// Writes all of `buf` to `fd` (one write(2) unless interrupted).
#[inline]
pub fn write_fd(fd: &OwnedFd, buf: &[u8]) -> io::Result<()> {
    loop {
        // SAFETY: a valid descriptor and buffer.
        let n = unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
        if n == buf.len() as isize {
            return Ok(());
        }
        if n < 0 && last().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return Err(if n < 0 { last() } else { io::Error::other("short write") });
    }
}

/// Reads up to `buf.len()` bytes (one read(2) unless interrupted); 0 at end.
#[inline]
pub fn read_fd(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: a valid descriptor and buffer.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        if last().raw_os_error() != Some(libc::EINTR) {
            return Err(last());
        }
    }
}

/// An eventfd (a counter the kernel wakes readers of).
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain system call.
    check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) }).map(fd)
}

/// A pipe: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: room for two descriptors.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    Ok((fd(fds[0]), fd(fds[1])))
}

/// A connected pair of unix sockets of `kind` (SOCK_DGRAM, SOCK_STREAM, SOCK_SEQPACKET).
pub fn socketpair(kind: libc::c_int) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: room for two descriptors.
    check(unsafe { libc::socketpair(libc::AF_UNIX, kind | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) })?;
    Ok((fd(fds[0]), fd(fds[1])))
}
