//! Two network namespaces joined by a veth pair, for `netlat --path netns`:
//! the NT real-time study's pseudo network card, with a real driver (veth) between
//! the sender and the receiver.
//!
//! The namespaces are anonymous: a helper thread `unshare(CLONE_NEWNET)`s
//! and keeps only a descriptor of each (`/proc/thread-self/ns/net`); nothing
//! is mounted or named. They live exactly as long as something refers to
//! them (those descriptors, the sockets made inside them), so when rtscope
//! ends, by any path (SIGKILL included), the kernel removes both namespaces
//! and with them the veth pair. The host's own namespace is never touched.
//! The links are set up by hand over rtnetlink; IPv6 is turned off inside
//! the two namespaces so that no router solicitation crosses the pair.

use super::net::UdpSock;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The RFC 2544 benchmarking range: never routed, private to the namespaces.
pub const ADDR_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const ADDR_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PREFIX: u8 = 30;
pub const IF_A: &str = "rtscope-a";
pub const IF_B: &str = "rtscope-b";

/// Two namespaces, `a` and `b`, with `IF_A` (ADDR_A) in `a` and `IF_B`
/// (ADDR_B) in `b`, both up.
#[derive(Debug)]
pub struct NsPair {
    pub a: OwnedFd,
    pub b: OwnedFd,
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

fn ctx<T>(what: &str, r: io::Result<T>) -> io::Result<T> {
    r.map_err(|e| io::Error::new(e.kind(), format!("{what}: {e}")))
}

fn own_ns() -> io::Result<OwnedFd> {
    let f = std::fs::File::open("/proc/thread-self/ns/net")?;
    Ok(OwnedFd::from(f))
}

fn enter(ns: &OwnedFd) -> io::Result<()> {
    // SAFETY: setns() on a namespace descriptor; affects this thread only.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } == 0 { Ok(()) } else { Err(last_error()) }
}

/// Runs `f` on a fresh thread that has entered namespace `ns`: the calling
/// thread stays where it is. Sockets `f` makes belong to `ns`.
pub fn within<T: Send>(ns: &OwnedFd, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            enter(ns)?;
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("a namespace thread panicked")))
    })
}

impl NsPair {
    /// Creates both namespaces and the veth pair between them.
    pub fn create() -> io::Result<NsPair> {
        std::thread::scope(|s| {
            s.spawn(|| -> io::Result<NsPair> {
                // SAFETY: unshare() of this thread's network namespace only.
                let fresh = || ctx("unshare(CLONE_NEWNET)", cvt(unsafe { libc::unshare(libc::CLONE_NEWNET) }));
                fresh()?;
                let b = own_ns()?;
                no_ipv6()?;
                fresh()?;
                let a = own_ns()?;
                no_ipv6()?;
                let pair = NsPair { a, b };
                // In `a` now: make the pair, its far end moved into `b`.
                let nl = Netlink::open()?;
                ctx("creating the veth pair", nl.new_veth(IF_A, IF_B, pair.b.as_raw_fd()))?;
                let ia = index(IF_A)?;
                ctx("addressing the veth", nl.add_addr(ia, ADDR_A, PREFIX))?;
                ctx("bringing the veth up", nl.set_up(ia))?;
                drop(nl);
                enter(&pair.b)?;
                let nl = Netlink::open()?;
                let ib = index(IF_B)?;
                ctx("addressing the veth peer", nl.add_addr(ib, ADDR_B, PREFIX))?;
                ctx("bringing the veth peer up", nl.set_up(ib))?;
                Ok(pair)
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the namespace thread panicked")))
        })
    }

    /// A UDP socket in namespace `a` (`true`) or `b`, bound to its address.
    pub fn socket(&self, in_a: bool) -> io::Result<UdpSock> {
        let (ns, ip) = if in_a { (&self.a, ADDR_A) } else { (&self.b, ADDR_B) };
        within(ns, || UdpSock::bind(SocketAddrV4::new(ip, 0)))
    }

    /// The inode numbers of the two namespaces (as `ip netns identify`
    /// and /proc/PID/ns/net links show them: `net:[INODE]`).
    pub fn inodes(&self) -> (u64, u64) {
        let ino = |fd: &OwnedFd| {
            // SAFETY: fstat on an open descriptor into a zeroed stat.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0 { st.st_ino } else { 0 }
        };
        (ino(&self.a), ino(&self.b))
    }
}

fn cvt(rc: i32) -> io::Result<()> {
    if rc == 0 { Ok(()) } else { Err(last_error()) }
}

/// Turns IPv6 off in the calling thread's (fresh) namespace: /proc/sys/net
/// shows the namespace of the thread that opens it.
fn no_ipv6() -> io::Result<()> {
    for f in ["all", "default"] {
        let path = format!("/proc/sys/net/ipv6/conf/{f}/disable_ipv6");
        if std::path::Path::new(&path).exists() {
            ctx(&path, std::fs::write(&path, "1"))?;
        }
    }
    Ok(())
}

fn index(name: &str) -> io::Result<u32> {
    let c = std::ffi::CString::new(name).map_err(|_| io::Error::other("interface name with NUL"))?;
    // SAFETY: c is a valid C string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 { Err(io::Error::new(last_error().kind(), format!("no interface {name}"))) } else { Ok(i) }
}

const RTM_NEWLINK: u16 = 16;
const RTM_NEWADDR: u16 = 20;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const NLMSG_ERROR: u16 = 2;
const IFLA_IFNAME: u16 = 3;
const IFLA_LINKINFO: u16 = 18;
const IFLA_NET_NS_FD: u16 = 28;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_INFO_DATA: u16 = 2;
const VETH_INFO_PEER: u16 = 1;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const NLA_F_NESTED: u16 = 0x8000;
const IFINFOMSG_LEN: usize = 16;

/// A netlink message being built: a header, a fixed part, attributes.
struct Msg {
    buf: Vec<u8>,
    /// Start offsets of the nested attributes still open.
    open: Vec<usize>,
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

impl Msg {
    fn new(kind: u16, flags: u16, seq: u32) -> Msg {
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(&0u32.to_ne_bytes()); // length, set in finish()
        buf.extend_from_slice(&kind.to_ne_bytes());
        buf.extend_from_slice(&(flags | NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        buf.extend_from_slice(&seq.to_ne_bytes());
        buf.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel's
        Msg { buf, open: Vec::new() }
    }

    /// An ifinfomsg: family, type, index, flags, change.
    fn ifinfo(&mut self, index: i32, flags: u32, change: u32) {
        self.buf.extend_from_slice(&[libc::AF_UNSPEC as u8, 0]);
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf.extend_from_slice(&index.to_ne_bytes());
        self.buf.extend_from_slice(&flags.to_ne_bytes());
        self.buf.extend_from_slice(&change.to_ne_bytes());
    }

    fn attr(&mut self, kind: u16, data: &[u8]) {
        let len = 4 + data.len();
        self.buf.extend_from_slice(&(len as u16).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(data);
        self.buf.resize(align4(self.buf.len()), 0);
    }

    fn attr_str(&mut self, kind: u16, s: &str) {
        let mut d = s.as_bytes().to_vec();
        d.push(0);
        self.attr(kind, &d);
    }

    fn nest(&mut self, kind: u16) {
        self.open.push(self.buf.len());
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf.extend_from_slice(&(kind | NLA_F_NESTED).to_ne_bytes());
    }

    fn end(&mut self) {
        if let Some(start) = self.open.pop() {
            let len = (self.buf.len() - start) as u16;
            self.buf[start..start + 2].copy_from_slice(&len.to_ne_bytes());
        }
    }

    fn finish(mut self) -> Vec<u8> {
        let len = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&len.to_ne_bytes());
        self.buf
    }
}

/// An rtnetlink socket in the calling thread's namespace.
struct Netlink {
    fd: OwnedFd,
    seq: std::cell::Cell<u32>,
}

impl Netlink {
    fn open() -> io::Result<Netlink> {
        // SAFETY: plain socket(2); the fd is owned from here on.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) };
        if fd < 0 {
            return Err(ctx::<()>("netlink socket", Err(last_error())).unwrap_err());
        }
        // SAFETY: fd is fresh and owned here.
        Ok(Netlink { fd: unsafe { OwnedFd::from_raw_fd(fd) }, seq: std::cell::Cell::new(1) })
    }

    fn next_seq(&self) -> u32 {
        let s = self.seq.get();
        self.seq.set(s + 1);
        s
    }

    /// Sends one request and waits for its acknowledgement.
    fn request(&self, msg: Vec<u8>) -> io::Result<()> {
        // SAFETY: msg is valid for its length.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if n < 0 {
            return Err(last_error());
        }
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: buf is valid for its length.
            let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                return Err(last_error());
            }
            let n = n as usize;
            let mut off = 0;
            while off + 16 <= n {
                let len = u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap_or_default()) as usize;
                let kind = u16::from_ne_bytes([buf[off + 4], buf[off + 5]]);
                if kind == NLMSG_ERROR && off + 20 <= n {
                    let err = i32::from_ne_bytes(buf[off + 16..off + 20].try_into().unwrap_or_default());
                    return if err == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(-err)) };
                }
                if len < 16 {
                    break;
                }
                off += align4(len);
            }
        }
    }

    /// A veth pair: `name` here, `peer` created in namespace `peer_ns`.
    fn new_veth(&self, name: &str, peer: &str, peer_ns: i32) -> io::Result<()> {
        let mut m = Msg::new(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, self.next_seq());
        m.ifinfo(0, 0, 0);
        m.attr_str(IFLA_IFNAME, name);
        m.nest(IFLA_LINKINFO);
        m.attr_str(IFLA_INFO_KIND, "veth");
        m.nest(IFLA_INFO_DATA);
        m.nest(VETH_INFO_PEER);
        let at = m.buf.len();
        m.ifinfo(0, 0, 0);
        debug_assert_eq!(m.buf.len() - at, IFINFOMSG_LEN);
        m.attr_str(IFLA_IFNAME, peer);
        m.attr(IFLA_NET_NS_FD, &(peer_ns as u32).to_ne_bytes());
        m.end();
        m.end();
        m.end();
        self.request(m.finish())
    }

    fn set_up(&self, index: u32) -> io::Result<()> {
        let mut m = Msg::new(RTM_NEWLINK, 0, self.next_seq());
        let up = libc::IFF_UP as u32;
        m.ifinfo(index as i32, up, up);
        self.request(m.finish())
    }

    fn add_addr(&self, index: u32, addr: Ipv4Addr, prefix: u8) -> io::Result<()> {
        let mut m = Msg::new(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, self.next_seq());
        m.buf.extend_from_slice(&[libc::AF_INET as u8, prefix, 0, 0]);
        m.buf.extend_from_slice(&index.to_ne_bytes());
        m.attr(IFA_LOCAL, &addr.octets());
        m.attr(IFA_ADDRESS, &addr.octets());
        self.request(m.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_aligned_and_nested() {
        let mut m = Msg::new(RTM_NEWLINK, 0, 7);
        m.ifinfo(3, 1, 1);
        m.nest(IFLA_LINKINFO);
        m.attr_str(IFLA_INFO_KIND, "veth");
        m.end();
        let b = m.finish();
        assert_eq!(u32::from_ne_bytes(b[..4].try_into().unwrap()) as usize, b.len());
        assert_eq!(b.len() % 4, 0);
        // header 16 + ifinfomsg 16 + nest 4 + "veth\0" attr 4 + 5 -> 12.
        assert_eq!(b.len(), 16 + 16 + 4 + 12);
        assert_eq!(u16::from_ne_bytes([b[32], b[33]]), 16, "the nest covers its attribute");
    }

    /// Root only: ignored, saying so, when not built by root (build.rs).
    #[test]
    #[cfg_attr(not(rtscope_root), ignore = "needs root (CI runs as root): see docs/testing.md")]
    fn a_pair_of_namespaces_passes_datagrams_and_vanishes() {
        // SAFETY: geteuid has no preconditions.
        assert_eq!(unsafe { libc::geteuid() }, 0, "built by root, run by another user: rebuild as this user");
        let pair = NsPair::create().unwrap();
        let (ia, ib) = pair.inodes();
        assert!(ia != ib && ia != 0);
        let a = pair.socket(true).unwrap();
        let b = pair.socket(false).unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.set_recv_timeout(2_000_000_000).unwrap();
        a.send(b"hello").unwrap();
        let mut buf = [0u8; 16];
        let info = b.recv(&mut buf).unwrap();
        assert_eq!(&buf[..info.len], b"hello");
        assert_eq!(info.from.unwrap().ip(), &ADDR_A);
        // Not visible from the host's namespace.
        assert!(index(IF_A).is_err() && index(IF_B).is_err());
    }
}
