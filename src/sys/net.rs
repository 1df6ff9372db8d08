//! UDP sockets with the kernel's own timestamps (`SO_TIMESTAMPING`): the
//! software receive timestamp of each datagram, and the scheduler and
//! software transmit timestamps of each sent one, read back from the
//! socket's error queue (`SOF_TIMESTAMPING_OPT_ID` numbers them), and what
//! an interface can timestamp in hardware (`ethtool -T`). Nothing here allocates after a
//! socket is made: the receive paths use fixed buffers on the stack.
//!
//! The kernel's software timestamps are CLOCK_REALTIME; [`realtime_offset`]
//! maps them to CLOCK_MONOTONIC (see there).

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `ee_info` of a transmit timestamp: handed to the driver.
pub const SCM_TSTAMP_SND: u32 = 0;
/// `ee_info` of a transmit timestamp: queued to the device (qdisc).
pub const SCM_TSTAMP_SCHED: u32 = 1;

/// The timestamps a socket asks for, by name (for error messages).
pub const SOFTWARE_FLAGS: &[(u32, &str)] = &[
    (libc::SOF_TIMESTAMPING_RX_SOFTWARE, "SOF_TIMESTAMPING_RX_SOFTWARE"),
    (libc::SOF_TIMESTAMPING_TX_SOFTWARE, "SOF_TIMESTAMPING_TX_SOFTWARE"),
    (libc::SOF_TIMESTAMPING_TX_SCHED, "SOF_TIMESTAMPING_TX_SCHED"),
    (libc::SOF_TIMESTAMPING_SOFTWARE, "SOF_TIMESTAMPING_SOFTWARE"),
    (libc::SOF_TIMESTAMPING_OPT_ID, "SOF_TIMESTAMPING_OPT_ID"),
    (libc::SOF_TIMESTAMPING_OPT_TSONLY, "SOF_TIMESTAMPING_OPT_TSONLY"),
];

/// The hardware timestamps a socket asks for on top of the software ones.
pub const HARDWARE_FLAGS: &[(u32, &str)] = &[
    (libc::SOF_TIMESTAMPING_RX_HARDWARE, "SOF_TIMESTAMPING_RX_HARDWARE"),
    (libc::SOF_TIMESTAMPING_TX_HARDWARE, "SOF_TIMESTAMPING_TX_HARDWARE"),
    (libc::SOF_TIMESTAMPING_RAW_HARDWARE, "SOF_TIMESTAMPING_RAW_HARDWARE"),
    (libc::SOF_TIMESTAMPING_OPT_TX_SWHW, "SOF_TIMESTAMPING_OPT_TX_SWHW"),
];

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

fn sockaddr(addr: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain data; all-zero is a valid value.
    let mut sa: libc::sockaddr_in = unsafe { zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = addr.port().to_be();
    sa.sin_addr.s_addr = u32::from(*addr.ip()).to_be();
    sa
}

fn from_sockaddr(sa: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)), u16::from_be(sa.sin_port))
}

fn ts_ns(t: &libc::timespec) -> u64 {
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}

/// What came with a received datagram.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxInfo {
    /// Bytes of payload.
    pub len: usize,
    /// The kernel's software receive timestamp, CLOCK_REALTIME ns (0: none).
    pub sw_ns: u64,
    /// The NIC's receive timestamp, its own clock (PHC) ns (0: none).
    pub hw_ns: u64,
    /// Who sent it.
    pub from: Option<SocketAddrV4>,
}

/// A transmit timestamp from the error queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxStamp {
    /// The datagram's number on this socket (`SOF_TIMESTAMPING_OPT_ID`),
    /// from 0.
    pub id: u32,
    /// [`SCM_TSTAMP_SCHED`] or [`SCM_TSTAMP_SND`].
    pub kind: u32,
    /// Software timestamp, CLOCK_REALTIME ns (0: none).
    pub sw_ns: u64,
    /// Hardware timestamp, the NIC's clock ns (0: none).
    pub hw_ns: u64,
}

/// A UDP/IPv4 socket.
#[derive(Debug)]
pub struct UdpSock {
    fd: OwnedFd,
}

/// Control-message space for SCM_TIMESTAMPING (3 timespecs) plus a
/// sock_extended_err with its offender address, with room to spare.
const CMSG_BUF: usize = 256;

#[repr(C, align(8))]
struct CmsgBuf([u8; CMSG_BUF]);

impl UdpSock {
    /// A socket bound to `addr` (port 0: any free port).
    pub fn bind(addr: SocketAddrV4) -> io::Result<UdpSock> {
        // SAFETY: plain socket(2); the fd is owned from here on.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(last_error());
        }
        // SAFETY: fd is a fresh descriptor this function owns.
        let sock = UdpSock { fd: unsafe { OwnedFd::from_raw_fd(fd) } };
        let sa = sockaddr(addr);
        // SAFETY: sa is a valid sockaddr_in of the given length.
        let rc =
            unsafe { libc::bind(fd, (&sa as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as u32) };
        if rc != 0 {
            return Err(last_error());
        }
        Ok(sock)
    }

    /// Takes over an inherited descriptor (the sender process's fd 3).
    ///
    /// # Safety
    /// `fd` must be an open UDP socket that nothing else owns.
    pub unsafe fn from_raw(fd: RawFd) -> UdpSock {
        // SAFETY: the caller hands over ownership.
        UdpSock { fd: unsafe { OwnedFd::from_raw_fd(fd) } }
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Sends and receives to and from `peer` only.
    pub fn connect(&self, peer: SocketAddrV4) -> io::Result<()> {
        let sa = sockaddr(peer);
        // SAFETY: sa is a valid sockaddr_in of the given length.
        let rc = unsafe {
            libc::connect(self.raw(), (&sa as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as u32)
        };
        if rc == 0 { Ok(()) } else { Err(last_error()) }
    }

    pub fn local_addr(&self) -> io::Result<SocketAddrV4> {
        // SAFETY: getsockname fills at most `len` bytes of sa.
        let mut sa: libc::sockaddr_in = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_in>() as u32;
        let rc = unsafe { libc::getsockname(self.raw(), (&mut sa as *mut libc::sockaddr_in).cast(), &mut len) };
        if rc == 0 { Ok(from_sockaddr(&sa)) } else { Err(last_error()) }
    }

    fn setsockopt<T>(&self, level: i32, name: i32, value: &T) -> io::Result<()> {
        // SAFETY: value points to a T of size_of::<T>() bytes.
        let rc = unsafe {
            libc::setsockopt(self.raw(), level, name, (value as *const T).cast(), size_of::<T>() as libc::socklen_t)
        };
        if rc == 0 { Ok(()) } else { Err(last_error()) }
    }

    /// Asks for the timestamps `flags` (SOF_TIMESTAMPING_*). The error
    /// names the option and every flag asked for.
    pub fn enable_timestamps(&self, flags: u32) -> Result<(), String> {
        let value = flags as libc::c_int;
        self.setsockopt(libc::SOL_SOCKET, libc::SO_TIMESTAMPING, &value).map_err(|e| {
            let names: Vec<&str> =
                SOFTWARE_FLAGS.iter().chain(HARDWARE_FLAGS).filter(|(f, _)| flags & f != 0).map(|(_, n)| *n).collect();
            format!("setsockopt(SO_TIMESTAMPING, {}) failed: {e}", names.join("|"))
        })
    }

    /// recvmsg() and friends give up after `ns` (0: block for ever).
    pub fn set_recv_timeout(&self, ns: u64) -> io::Result<()> {
        let tv = libc::timeval { tv_sec: (ns / 1_000_000_000) as _, tv_usec: (ns % 1_000_000_000 / 1000) as _ };
        self.setsockopt(libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv)
    }

    /// Sends and receives only through interface `name`.
    pub fn bind_device(&self, name: &str) -> io::Result<()> {
        let mut buf = [0u8; libc::IFNAMSIZ];
        if name.is_empty() || name.len() >= buf.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "interface name too long"));
        }
        buf[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: buf holds a NUL-terminated name of name.len() + 1 bytes.
        let rc = unsafe {
            libc::setsockopt(
                self.raw(),
                libc::SOL_SOCKET,
                libc::SO_BINDTODEVICE,
                buf.as_ptr().cast(),
                (name.len() + 1) as libc::socklen_t,
            )
        };
        if rc == 0 { Ok(()) } else { Err(last_error()) }
    }

    /// Sends `buf` to the connected peer.
    #[inline]
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: buf is valid for buf.len() bytes.
        let n = unsafe { libc::send(self.raw(), buf.as_ptr().cast(), buf.len(), 0) };
        if n < 0 { Err(last_error()) } else { Ok(n as usize) }
    }

    /// Sends `buf` to `to`.
    #[inline]
    pub fn send_to(&self, buf: &[u8], to: SocketAddrV4) -> io::Result<usize> {
        let sa = sockaddr(to);
        // SAFETY: buf and sa are valid for their lengths.
        let n = unsafe {
            libc::sendto(
                self.raw(),
                buf.as_ptr().cast(),
                buf.len(),
                0,
                (&sa as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as u32,
            )
        };
        if n < 0 { Err(last_error()) } else { Ok(n as usize) }
    }

    /// One recvmsg() into `buf`, with `flags` (MSG_*); the control
    /// messages are parsed into the returned [`RxInfo`] or, from the error
    /// queue, into `tx`.
    #[inline]
    fn recvmsg(&self, buf: &mut [u8], flags: i32, tx: Option<&mut TxStamp>) -> io::Result<RxInfo> {
        let mut cbuf = CmsgBuf([0; CMSG_BUF]);
        // SAFETY: sockaddr_in and msghdr are plain data.
        let mut from: libc::sockaddr_in = unsafe { zeroed() };
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        let mut msg: libc::msghdr = unsafe { zeroed() };
        msg.msg_name = (&mut from as *mut libc::sockaddr_in).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_in>() as u32;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.0.as_mut_ptr().cast();
        msg.msg_controllen = CMSG_BUF as _;
        let n = loop {
            // SAFETY: msg points to live buffers of the lengths it states.
            let n = unsafe { libc::recvmsg(self.raw(), &mut msg, flags) };
            if n >= 0 {
                break n as usize;
            }
            let e = last_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        };
        let mut info = RxInfo {
            len: n,
            from: (msg.msg_namelen as usize >= size_of::<libc::sockaddr_in>() && from.sin_family != 0)
                .then(|| from_sockaddr(&from)),
            ..RxInfo::default()
        };
        let mut tx = tx;
        // SAFETY: the CMSG_* macros walk the control buffer the kernel
        // filled, within msg_controllen; data is read unaligned.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let data = libc::CMSG_DATA(c);
                let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
                if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPING {
                    let t: [libc::timespec; 3] = std::ptr::read_unaligned(data.cast());
                    info.sw_ns = ts_ns(&t[0]);
                    info.hw_ns = ts_ns(&t[2]);
                } else if level == libc::SOL_IP && kind == libc::IP_RECVERR {
                    let ee: libc::sock_extended_err = std::ptr::read_unaligned(data.cast());
                    if ee.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING
                        && let Some(t) = tx.as_deref_mut()
                    {
                        t.id = ee.ee_data;
                        t.kind = ee.ee_info;
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        if let Some(t) = tx {
            t.sw_ns = info.sw_ns;
            t.hw_ns = info.hw_ns;
        }
        Ok(info)
    }

    /// Blocks (up to the receive timeout) for a datagram.
    #[inline]
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<RxInfo> {
        self.recvmsg(buf, 0, None)
    }

    /// A datagram if one is queued (else `WouldBlock`).
    #[inline]
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<RxInfo> {
        self.recvmsg(buf, libc::MSG_DONTWAIT, None)
    }

    /// The next transmit timestamp from the error queue, if any. Other
    /// errors queued there (an ICMP error from the peer) come back as Err.
    #[inline]
    pub fn next_tx_stamp(&self) -> io::Result<Option<TxStamp>> {
        let mut buf = [0u8; 64];
        let mut t = TxStamp { kind: u32::MAX, ..TxStamp::default() };
        match self.recvmsg(&mut buf, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT, Some(&mut t)) {
            Ok(_) if t.kind != u32::MAX => Ok(Some(t)),
            Ok(_) => Err(io::Error::other("a non-timestamp error was queued on the socket")),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// CLOCK_REALTIME - CLOCK_MONOTONIC, ns: the best of three readings of
/// CLOCK_REALTIME between two of CLOCK_MONOTONIC (the shortest bracket).
/// The two clocks are slewed alike by NTP, so the offset only moves when
/// the wall clock is stepped; a kernel software timestamp `sw` (REALTIME)
/// is CLOCK_MONOTONIC `sw - offset`. Its error is half the bracket, a few
/// tens of ns where the clocks are read through the vDSO.
#[inline]
pub fn realtime_offset() -> i64 {
    let mut best = (u64::MAX, 0i64);
    for _ in 0..3 {
        let a = super::clock::now();
        let r = super::clock::now_unix();
        let b = super::clock::now();
        let width = b - a;
        if width < best.0 {
            best = (width, r - (a + width / 2) as i64);
        }
    }
    best.1
}

/// A kernel software timestamp (CLOCK_REALTIME ns) on CLOCK_MONOTONIC.
#[inline]
pub fn to_mono(realtime_ns: u64, offset: i64) -> u64 {
    (realtime_ns as i64).saturating_sub(offset).max(0) as u64
}

/// What an interface can timestamp in hardware (`ethtool -T`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TsInfo {
    pub so_timestamping: u32,
    /// The PTP hardware clock index, -1 when none.
    pub phc_index: i32,
    pub tx_types: u32,
    pub rx_filters: u32,
}

impl TsInfo {
    pub fn hardware(&self) -> bool {
        let need = libc::SOF_TIMESTAMPING_TX_HARDWARE
            | libc::SOF_TIMESTAMPING_RX_HARDWARE
            | libc::SOF_TIMESTAMPING_RAW_HARDWARE;
        self.so_timestamping & need == need && self.phc_index >= 0
    }
}

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GET_TS_INFO: u32 = 0x41;

#[repr(C)]
#[derive(Default)]
struct EthtoolTsInfo {
    cmd: u32,
    so_timestamping: u32,
    phc_index: i32,
    tx_types: u32,
    tx_reserved: [u32; 3],
    rx_filters: u32,
    rx_reserved: [u32; 3],
}

#[repr(C)]
struct Ifreq {
    name: [u8; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

fn ifreq(name: &str, data: *mut libc::c_void) -> io::Result<Ifreq> {
    let mut r = Ifreq { name: [0; libc::IFNAMSIZ], data, _pad: [0; 16] };
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("'{name}' is not an interface name")));
    }
    r.name[..name.len()].copy_from_slice(name.as_bytes());
    Ok(r)
}

impl UdpSock {
    fn ioctl(&self, request: libc::c_ulong, r: &mut Ifreq) -> io::Result<()> {
        // SAFETY: r is a valid ifreq whose data pointer targets a live
        // struct of the kind `request` expects.
        let rc = unsafe { libc::ioctl(self.raw(), request as _, r as *mut Ifreq) };
        if rc == 0 { Ok(()) } else { Err(last_error()) }
    }

    /// The timestamping abilities of interface `name`.
    pub fn ts_info(&self, name: &str) -> io::Result<TsInfo> {
        let mut info = EthtoolTsInfo { cmd: ETHTOOL_GET_TS_INFO, ..EthtoolTsInfo::default() };
        let mut r = ifreq(name, (&mut info as *mut EthtoolTsInfo).cast())?;
        self.ioctl(SIOCETHTOOL, &mut r)?;
        Ok(TsInfo {
            so_timestamping: info.so_timestamping,
            phc_index: info.phc_index,
            tx_types: info.tx_types,
            rx_filters: info.rx_filters,
        })
    }
}

/// `SIOCSHWTSTAMP` / `SIOCGHWTSTAMP` (linux/sockios.h).
const SIOCSHWTSTAMP: libc::c_ulong = 0x89b0;
const SIOCGHWTSTAMP: libc::c_ulong = 0x89b1;
/// linux/net_tstamp.h: `hwtstamp_tx_types` and `hwtstamp_rx_filters`.
pub const HWTSTAMP_TX_ON: i32 = 1;
pub const HWTSTAMP_FILTER_NONE: i32 = 0;
pub const HWTSTAMP_FILTER_ALL: i32 = 1;

/// An interface's hardware timestamping configuration (`struct
/// hwtstamp_config`, what `hwstamp_ctl` shows).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HwConfig {
    pub flags: i32,
    pub tx_type: i32,
    pub rx_filter: i32,
}

impl HwConfig {
    /// Transmit and receive of every packet timestamped: what netlat needs.
    pub fn full(&self) -> bool {
        self.tx_type == HWTSTAMP_TX_ON && self.rx_filter == HWTSTAMP_FILTER_ALL
    }
}

impl UdpSock {
    fn hw_ioctl(&self, request: libc::c_ulong, name: &str, cfg: &mut HwConfig) -> io::Result<()> {
        let mut r = ifreq(name, (cfg as *mut HwConfig).cast())?;
        self.ioctl(request, &mut r)
    }

    /// Interface `name`'s hardware timestamping configuration.
    pub fn hw_config(&self, name: &str) -> io::Result<HwConfig> {
        let mut cfg = HwConfig::default();
        self.hw_ioctl(SIOCGHWTSTAMP, name, &mut cfg)?;
        Ok(cfg)
    }

    /// Sets it; returns what the driver applied (it may widen a filter).
    pub fn set_hw_config(&self, name: &str, cfg: HwConfig) -> io::Result<HwConfig> {
        let mut c = cfg;
        self.hw_ioctl(SIOCSHWTSTAMP, name, &mut c)?;
        Ok(c)
    }
}

/// Hardware timestamping of every packet on an interface, for as long as
/// this lives: the interface's previous configuration is put back on drop
/// (the machine is left as found). When the interface already timestamps
/// everything, nothing is changed and nothing is put back.
#[derive(Debug)]
pub struct HwStamping {
    sock: UdpSock,
    name: String,
    previous: Option<HwConfig>,
    /// The NIC's PTP hardware clock (`/dev/ptpN`).
    pub phc_index: i32,
}

impl HwStamping {
    /// Turns it on for `name`. The error says why not (no hardware
    /// timestamps, no filter for every packet, a driver that does not
    /// report its configuration so that it could not be put back).
    pub fn enable(name: &str) -> Result<HwStamping, String> {
        let sock = UdpSock::bind(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0)).map_err(|e| e.to_string())?;
        let info = sock.ts_info(name).map_err(|e| format!("ethtool -T {name}: {e}"))?;
        if !info.hardware() {
            return Err(format!("{name} has no hardware timestamps (ethtool -T {name})"));
        }
        if info.rx_filters & (1 << HWTSTAMP_FILTER_ALL) == 0 || info.tx_types & (1 << HWTSTAMP_TX_ON) == 0 {
            return Err(format!(
                "{name} cannot timestamp every received packet in hardware (its receive filters are PTP-only; \
                 ethtool -T {name})"
            ));
        }
        let previous = sock.hw_config(name).map_err(|e| {
            format!("{name}: its timestamping configuration cannot be read (SIOCGHWTSTAMP: {e}), so it could not be put back")
        })?;
        let mut me = HwStamping { sock, name: name.to_string(), previous: None, phc_index: info.phc_index };
        if previous.full() {
            return Ok(me);
        }
        let want = HwConfig { flags: 0, tx_type: HWTSTAMP_TX_ON, rx_filter: HWTSTAMP_FILTER_ALL };
        let applied = me.sock.set_hw_config(name, want).map_err(|e| format!("{name}: SIOCSHWTSTAMP: {e}"))?;
        me.previous = Some(previous);
        if !applied.full() {
            return Err(format!("{name}: the driver applied {applied:?}, not every packet"));
        }
        Ok(me)
    }

    /// What was changed, for the run's record.
    pub fn describe(&self) -> String {
        let what = match self.previous {
            Some(p) => {
                format!("turned on for the run (was tx_type {}, rx_filter {}; put back after)", p.tx_type, p.rx_filter)
            }
            None => "already on".into(),
        };
        format!("hardware (NIC {}, /dev/ptp{}, {what})", self.name, self.phc_index)
    }
}

impl Drop for HwStamping {
    fn drop(&mut self) {
        if let Some(p) = self.previous
            && let Err(e) = self.sock.set_hw_config(&self.name, p)
        {
            eprintln!("rtscope: warning: {}: could not put back its timestamping configuration {p:?}: {e}", self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lo() -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)
    }

    #[test]
    fn loopback_datagrams_carry_kernel_timestamps() {
        let a = UdpSock::bind(lo()).unwrap();
        let b = UdpSock::bind(lo()).unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        let flags = SOFTWARE_FLAGS.iter().fold(0, |f, (x, _)| f | x);
        a.enable_timestamps(flags).unwrap();
        b.enable_timestamps(flags).unwrap();
        b.set_recv_timeout(1_000_000_000).unwrap();
        // The kernel turns receive timestamping on from a work item.
        std::thread::sleep(std::time::Duration::from_millis(100));
        let off = realtime_offset();
        let t0 = crate::sys::clock::now();
        for i in 0..3u8 {
            assert_eq!(a.send(&[i; 54]).unwrap(), 54);
        }
        let mut buf = [0u8; 128];
        for i in 0..3u8 {
            let info = b.recv(&mut buf).unwrap();
            assert_eq!((info.len, buf[0]), (54, i));
            assert_eq!(info.from, Some(a.local_addr().unwrap()));
            let rx = to_mono(info.sw_ns, off);
            assert!(rx >= t0 && rx <= crate::sys::clock::now(), "{rx} outside [{t0}, now]");
        }
        // Each datagram: a SCHED and a SND stamp, numbered 0, 1, 2.
        let mut stamps = Vec::new();
        while let Some(t) = a.next_tx_stamp().unwrap() {
            stamps.push(t);
        }
        assert_eq!(stamps.len(), 6, "{stamps:?}");
        for id in 0..3 {
            let sched = stamps.iter().find(|t| t.id == id && t.kind == SCM_TSTAMP_SCHED).unwrap();
            let snd = stamps.iter().find(|t| t.id == id && t.kind == SCM_TSTAMP_SND).unwrap();
            assert!(to_mono(sched.sw_ns, off) >= t0 && snd.sw_ns >= sched.sw_ns, "{sched:?} {snd:?}");
        }
        assert!(matches!(b.try_recv(&mut buf), Err(e) if e.kind() == io::ErrorKind::WouldBlock));
    }

    #[test]
    fn offset_is_stable() {
        let a = realtime_offset();
        let b = realtime_offset();
        assert!((a - b).abs() < 1_000_000, "{a} {b}");
    }

    #[test]
    fn loopback_has_no_hardware_timestamps() {
        let a = UdpSock::bind(lo()).unwrap();
        if let Ok(info) = a.ts_info("lo") {
            assert!(!info.hardware(), "{info:?}");
        }
        assert!(a.ts_info("").is_err());
    }

    #[test]
    fn hardware_stamping_is_refused_with_the_reason_where_there_is_none() {
        // struct hwtstamp_config is three ints.
        assert_eq!(size_of::<HwConfig>(), 12);
        let e = HwStamping::enable("lo").unwrap_err();
        assert!(e.contains("lo has no hardware timestamps"), "{e}");
        let e = HwStamping::enable("rtscope-none0").unwrap_err();
        assert!(e.contains("ethtool -T rtscope-none0"), "{e}");
        // Nothing was changed on lo: it still reports no configuration or
        // timestamps nothing.
        let a = UdpSock::bind(lo()).unwrap();
        if let Ok(c) = a.hw_config("lo") {
            assert!(!c.full(), "{c:?}");
        }
        assert!(HwConfig { flags: 0, tx_type: HWTSTAMP_TX_ON, rx_filter: HWTSTAMP_FILTER_ALL }.full());
        assert!(!HwConfig { flags: 0, tx_type: HWTSTAMP_TX_ON, rx_filter: HWTSTAMP_FILTER_NONE }.full());
    }
}
