//! `netlat`: how long the UDP/IP stack takes to deliver a datagram to a
//! waiting real-time thread, and to take one from a thread (the NT real-time
//! study's network stack test with a pseudo network card), and the round trip to a
//! responder on another host.
//!
//! Local mode: per measured CPU, a receiver (the measuring thread, at the
//! probe's policy and priority, pinned) and a sender (a thread, or a process
//! with `--processes`, one priority below, pinned to the receiver's CPU
//! unless `--sender-cpu`). The sender sends a datagram every `--interval`
//! carrying its sequence number and CLOCK_MONOTONIC read just before the
//! send call. With `SO_TIMESTAMPING`:
//!
//! - `rx_stack` = send call -> the kernel's software receive timestamp
//!   (taken where the datagram enters the receive path: `netif_rx` on
//!   loopback and veth, the driver's NAPI poll on a NIC);
//! - `rx_wake` = that timestamp -> the receiver's recvmsg() returning (the
//!   softirq's protocol work, the wake-up and the switch to the receiver);
//! - `rx_total` = send call -> recvmsg() returning = rx_stack + rx_wake;
//! - `tx_sched` = send call -> the datagram queued to the device
//!   (`SOF_TIMESTAMPING_TX_SCHED`, before the qdisc);
//! - `tx_sw` = send call -> handed to the driver (`SOF_TIMESTAMPING_TX_SOFTWARE`,
//!   the driver's `skb_tx_timestamp`).
//!
//! The transmit timestamps come back on the sender's error queue, numbered
//! by `SOF_TIMESTAMPING_OPT_ID`; the sender puts those of datagram k into
//! datagram k+1, so that the receiver records every metric (and a sender
//! process needs no channel of its own).
//!
//! Peer mode (`--peer ADDR:PORT`): the measuring thread sends to an
//! `rtscope netlat --serve` on the target and times the echo: `rtt`, its own
//! `rx_wake`, and the target's `target_wake`, `target_turnaround` and
//! `target_tx_sw` from the timestamps the echo carries (each host's
//! differences on its own clock: no clock synchronisation needed);
//! `transit` = rtt - target_turnaround - rx_wake (both trips through the
//! stacks and the wire). Through a NIC with hardware timestamps
//! (`--path iface:NAME`), its stamps add `rtt_wire` (the NIC's transmit
//! stamp -> its receive stamp of the echo), the target NIC's
//! `target_turnaround_wire` and `wire` = rtt_wire - target_turnaround_wire:
//! differences on one NIC's clock each, no conversion to CLOCK_MONOTONIC.
//!
//! The kernel's software timestamps are CLOCK_REALTIME: each is mapped to
//! CLOCK_MONOTONIC with the offset read right after the datagram arrives
//! (`sys::net::realtime_offset`).

use super::{Probe, ThreadCtx};
use crate::recorder::Recorder;
use crate::sys::net::{self, SCM_TSTAMP_SCHED, SCM_TSTAMP_SND, UdpSock};
use crate::sys::netns::NsPair;
use crate::sys::{clock, cpu, mem, process, sched, sched::Policy, signals};
use anyhow::{Context, Result, anyhow, bail};
use rtscope_model::descriptor::{self, Descriptor};
use rtscope_model::extra::netlat;
use rtscope_model::hist::Tally;
use rtscope_model::units;
use serde::Serialize;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// The smallest `--interval`: 10 000 datagrams per second per pair.
pub const MIN_INTERVAL_NS: u64 = 100_000;
/// Payload sizes: the packet's fields, up to one Ethernet frame.
pub const MIN_SIZE: usize = 52;
pub const MAX_SIZE: usize = 1472;
/// How long a blocked receive waits before looking at the stop flag.
const POLL_NS: u64 = 50_000_000;
/// A sender stops by itself this long after the run's planned end.
const SENDER_GRACE_NS: u64 = 2_000_000_000;
/// How long a sender may take to report READY (a process starts first).
const READY_WAIT_NS: u64 = 5_000_000_000;
/// After STOP, how long beyond one interval (at most 1 s) the receiver
/// waits for the sender's count.
const SENT_WAIT_NS: u64 = 100_000_000;

pub const LOCAL_METRICS: &[&str] = &["rx_wake", "rx_stack", "rx_total", "tx_sched", "tx_sw"];
pub const PEER_METRICS: &[&str] = &["rtt", "transit", "rx_wake", "target_wake", "target_turnaround", "target_tx_sw"];
/// Peer mode through a NIC with hardware timestamps: also the round trip
/// between the NIC's transmit and receive timestamps (`rtt_wire`), the
/// target NIC's receive -> transmit (`target_turnaround_wire`, when the
/// target's NIC has them too) and the difference (`wire`).
pub const PEER_HW_METRICS: &[&str] = &[
    "rtt",
    "transit",
    "rx_wake",
    "target_wake",
    "target_turnaround",
    "target_tx_sw",
    "rtt_wire",
    "target_turnaround_wire",
    "wire",
];

// Per-thread figures (extra slots).
const SLOT_LOST: usize = 0;
const SLOT_REORDERED: usize = 1;
const SLOT_DUPLICATES: usize = 2;
const SLOT_NO_STAMP: usize = 3;
const SLOT_CLAMPED: usize = 4;
const SLOT_STRAYS: usize = 5;
const SLOT_ERRORS: usize = 6;
const SLOT_SENT: usize = 7;
/// Peer mode with hardware timestamps: echoes without a NIC timestamp
/// for the datagram or for its echo.
const SLOT_NO_HW_STAMP: usize = 8;
/// 1: the local sender answered STOP with its count (SLOT_SENT is exact).
const SLOT_SENT_KNOWN: usize = 9;
/// The sender's FAIL: what failed << 32 | errno (0: none).
const SLOT_SENDER_FAILED: usize = 10;
/// 1: measuring ran; 2: and was stopped before its end (a signal, a breach).
const SLOT_ENDED: usize = 11;
/// Periods at which nothing was sent: the sender (the measuring thread in
/// peer mode) ran a period or more late and went back on the grid.
const SLOT_SKIPPED: usize = 12;
const SLOTS: usize = 13;

mod measure;
pub mod packet;
mod sender;
mod serve;
use sender::Senders;
pub use sender::{sender_loop, sender_process};
pub use serve::{Serve, serve};

use packet::Packet;
mod track;
pub use track::{HwMatch, SeqTracker};

/// How the datagrams travel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NetPath {
    /// 127.0.0.1 to 127.0.0.1 (the loopback driver).
    Loopback,
    /// A veth pair between two namespaces rtscope creates.
    Netns,
    /// A real interface, to a `--peer`.
    Iface(String),
}

impl NetPath {
    /// `loopback`, `netns` or `iface:NAME`.
    pub fn parse(s: &str) -> Result<NetPath, String> {
        match s {
            "loopback" | "lo" => Ok(NetPath::Loopback),
            "netns" => Ok(NetPath::Netns),
            _ => match s.strip_prefix("iface:") {
                Some(n) if !n.is_empty() && n.len() < 16 && !n.contains(['/', ' ']) => Ok(NetPath::Iface(n.into())),
                _ => Err(format!("'{s}': write loopback, netns or iface:NAME (e.g. iface:eth1)")),
            },
        }
    }

    pub fn describe(&self) -> String {
        match self {
            NetPath::Loopback => "loopback".into(),
            NetPath::Netns => "veth between two namespaces".into(),
            NetPath::Iface(n) => format!("interface {n}"),
        }
    }
}

/// One measured CPU's sockets.
#[derive(Debug)]
struct Pair {
    /// The receiver's (local mode) or the peer's (peer mode) socket.
    rx: Arc<UdpSock>,
    /// The sender's socket (local mode).
    tx: Option<Arc<UdpSock>>,
}

#[derive(Debug, Serialize)]
pub struct Netlat {
    pub interval_ns: u64,
    /// UDP payload bytes.
    pub size: usize,
    pub path: NetPath,
    /// Senders are processes rather than threads.
    pub processes: bool,
    /// Where the senders run (None: on their receiver's CPU).
    pub sender_cpu: Option<usize>,
    /// Peer mode: the `--serve` address.
    pub peer: Option<SocketAddrV4>,
    /// `software`, or what hardware timestamps were used.
    pub timestamps: String,
    /// Peer mode: the interface's hardware timestamps are on (and put
    /// back as they were when this is dropped).
    #[serde(skip)]
    hw: Option<net::HwStamping>,
    /// Tags this run's datagrams.
    pub session: u32,
    #[serde(skip)]
    pairs: Vec<Pair>,
    /// The namespaces of `--path netns`: removed by the kernel once these
    /// descriptors and the sockets in them are closed.
    #[serde(skip)]
    ns: Option<NsPair>,
}

/// Timestamps every sender socket asks for.
pub fn tx_flags() -> u32 {
    net::SOFTWARE_FLAGS.iter().fold(0, |f, (x, _)| f | x)
}

/// Timestamps a receiving socket asks for.
fn rx_flags() -> u32 {
    libc::SOF_TIMESTAMPING_RX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE
}

/// What a socket adds for the NIC's timestamps (its own clock, raw):
/// transmit ones numbered on the error queue, both software and hardware
/// transmit stamps when both are asked (OPT_TX_SWHW).
pub fn hw_flags() -> u32 {
    libc::SOF_TIMESTAMPING_TX_HARDWARE
        | libc::SOF_TIMESTAMPING_RX_HARDWARE
        | libc::SOF_TIMESTAMPING_RAW_HARDWARE
        | libc::SOF_TIMESTAMPING_OPT_ID
        | libc::SOF_TIMESTAMPING_OPT_TSONLY
        | libc::SOF_TIMESTAMPING_OPT_TX_SWHW
}

fn session_id() -> u32 {
    let t = clock::now() ^ (u64::from(std::process::id()) << 20);
    (t ^ (t >> 32)) as u32 | 1
}

/// What the sender of a pair needs to know.
#[derive(Clone, Copy, Debug)]
pub struct SenderCfg {
    pub size: usize,
    pub session: u32,
}

impl Netlat {
    /// Sets up the sockets (and the namespaces) of a local run on `cpus`,
    /// and checks that the path gives every timestamp needed. Returns the
    /// probe and its warnings.
    pub fn local(
        interval_ns: u64,
        size: usize,
        path: NetPath,
        processes: bool,
        sender_cpu: Option<usize>,
        cpus: &[usize],
    ) -> Result<(Netlat, Vec<String>)> {
        let ns = match path {
            NetPath::Netns => Some(NsPair::create().map_err(|e| {
                anyhow!(
                    "--path netns: cannot create the two network namespaces and their veth pair: {e} \
                     (needs root or CAP_SYS_ADMIN and CAP_NET_ADMIN, and a kernel with CONFIG_VETH)"
                )
            })?),
            NetPath::Loopback => None,
            NetPath::Iface(_) => bail!(
                "--path iface:NAME measures the round trip to a responder: give --peer ADDR:PORT of a host running \
                 `rtscope netlat --serve ADDR:PORT` (rtscope sends only to loopback, its own namespaces, or a \
                 responder that answers)"
            ),
        };
        let session = session_id();
        let mut pairs = Vec::new();
        let mut warnings = Vec::new();
        for _ in cpus {
            let lo = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);
            let (rx, tx) = match &ns {
                Some(n) => (n.socket(false)?, n.socket(true)?),
                None => (UdpSock::bind(lo)?, UdpSock::bind(lo)?),
            };
            rx.connect(tx.local_addr()?)?;
            tx.connect(rx.local_addr()?)?;
            rx.enable_timestamps(rx_flags()).map_err(|e| anyhow!("netlat: {e}"))?;
            tx.enable_timestamps(tx_flags()).map_err(|e| anyhow!("netlat: {e}"))?;
            if let Some(w) = self_test(&rx, &tx, size, session, &path)?
                && !warnings.contains(&w)
            {
                warnings.push(w);
            }
            rx.set_recv_timeout(POLL_NS)?;
            pairs.push(Pair { rx: Arc::new(rx), tx: Some(Arc::new(tx)) });
        }
        let probe = Netlat {
            interval_ns,
            size,
            path,
            processes,
            sender_cpu,
            peer: None,
            timestamps: "software".into(),
            hw: None,
            session,
            pairs,
            ns,
        };
        Ok((probe, warnings))
    }

    /// Sets up peer mode: one socket per measured CPU to the responder at
    /// `peer`, which must answer a hello first.
    pub fn peer(
        interval_ns: u64,
        size: usize,
        path: NetPath,
        peer: SocketAddrV4,
        cpus: &[usize],
        hw_wanted: bool,
    ) -> Result<(Netlat, Vec<String>)> {
        if path == NetPath::Netns {
            bail!(
                "--path netns is a local path: drop --peer to measure across rtscope's own namespaces, or run \
                 `rtscope netlat --serve` inside one namespace and --peer in the other"
            );
        }
        let session = session_id();
        let mut warnings = Vec::new();
        let mut timestamps = "software".to_string();
        let hw = match &path {
            NetPath::Iface(name) if hw_wanted => match net::HwStamping::enable(name) {
                Ok(h) => {
                    timestamps = format!("{} + software", h.describe());
                    Some(h)
                }
                Err(e) => {
                    warnings.push(format!("--path iface:{name}: software timestamps only: {e}"));
                    None
                }
            },
            NetPath::Iface(name) => {
                timestamps = format!("software (--software-timestamps: {name}'s hardware timestamping left alone)");
                None
            }
            _ => None,
        };
        let flags = if hw.is_some() { rx_flags() | hw_flags() } else { rx_flags() };
        let mut pairs = Vec::new();
        for _ in cpus {
            let sock = UdpSock::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))?;
            if let NetPath::Iface(name) = &path {
                sock.bind_device(name).with_context(|| {
                    format!("--path iface:{name}: cannot bind to the interface (does it exist? `ip link`)")
                })?;
            }
            sock.connect(peer).with_context(|| format!("--peer {peer}: cannot reach it"))?;
            sock.enable_timestamps(flags).map_err(|e| anyhow!("netlat: {e}"))?;
            hello(&sock, size, session, peer)?;
            if hw.is_some() {
                // Number the measured datagrams from 0 (OPT_ID) and forget
                // the hello's transmit stamps.
                sock.enable_timestamps(flags & !libc::SOF_TIMESTAMPING_OPT_ID).map_err(|e| anyhow!("netlat: {e}"))?;
                sock.enable_timestamps(flags).map_err(|e| anyhow!("netlat: {e}"))?;
                std::thread::sleep(std::time::Duration::from_millis(2));
                while let Ok(Some(_)) = sock.next_tx_stamp() {}
            }
            sock.set_recv_timeout(interval_ns.clamp(MIN_INTERVAL_NS, POLL_NS))?;
            pairs.push(Pair { rx: Arc::new(sock), tx: None });
        }
        let probe = Netlat {
            interval_ns,
            size,
            path,
            processes: false,
            sender_cpu: None,
            peer: Some(peer),
            timestamps,
            hw,
            session,
            pairs,
            ns: None,
        };
        Ok((probe, warnings))
    }

    fn sender_cfg(&self) -> SenderCfg {
        SenderCfg { size: self.size, session: self.session }
    }

    /// The namespaces' inode numbers (`--path netns`), for the run's plan.
    pub fn namespaces(&self) -> Option<(u64, u64)> {
        self.ns.as_ref().map(NsPair::inodes)
    }
}

/// One datagram from the sender to the receiver of a fresh pair: a
/// software receive timestamp must come with it, and the sender's error
/// queue must give its scheduler and software transmit timestamps. A
/// missing transmit software timestamp (a driver without
/// `skb_tx_timestamp`) is a warning; the rest is an error naming the option.
fn self_test(rx: &UdpSock, tx: &UdpSock, size: usize, session: u32, path: &NetPath) -> Result<Option<String>> {
    let mut buf = vec![0u8; size.max(packet::LEN)];
    let mut back = vec![0u8; MAX_SIZE + 64];
    rx.set_recv_timeout(2_000_000_000)?;
    // The kernel turns receive timestamping on from a work item when the
    // first socket asks for it: the first datagrams may come without.
    let mut stamped = false;
    for _ in 0..50 {
        Packet::new(packet::DATA, session, u64::MAX, clock::now()).encode(&mut buf);
        tx.send(&buf).with_context(|| format!("netlat: cannot send over {}", path.describe()))?;
        let info = rx
            .recv(&mut back)
            .map_err(|e| anyhow!("netlat: a test datagram over {} did not arrive within 2 s: {e}", path.describe()))?;
        if info.sw_ns != 0 {
            stamped = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    if !stamped {
        bail!(
            "netlat: SO_TIMESTAMPING with SOF_TIMESTAMPING_RX_SOFTWARE gave no software receive timestamp over {} \
             (this kernel lacks it?); netlat cannot time the receive path without it",
            path.describe()
        );
    }
    let (mut sched, mut snd) = (false, false);
    let until = clock::now() + 200_000_000;
    while clock::now() < until && !(sched && snd) {
        match tx.next_tx_stamp() {
            Ok(Some(t)) if t.kind == SCM_TSTAMP_SCHED && t.sw_ns != 0 => sched = true,
            Ok(Some(t)) if t.kind == SCM_TSTAMP_SND && t.sw_ns != 0 => snd = true,
            Ok(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
            Err(e) => bail!("netlat: reading the transmit timestamps from the error queue (MSG_ERRQUEUE): {e}"),
        }
    }
    if !sched {
        bail!(
            "netlat: SO_TIMESTAMPING with SOF_TIMESTAMPING_TX_SCHED gave no scheduler transmit timestamp over {} \
             (kernel older than 4.8?); netlat needs it for tx_sched",
            path.describe()
        );
    }
    // Reset the OPT_ID numbering so that the sender's datagram k is id k,
    // and forget the test's stamps.
    tx.enable_timestamps(tx_flags() & !libc::SOF_TIMESTAMPING_OPT_ID).map_err(|e| anyhow!("netlat: {e}"))?;
    tx.enable_timestamps(tx_flags()).map_err(|e| anyhow!("netlat: {e}"))?;
    std::thread::sleep(std::time::Duration::from_millis(2));
    while let Ok(Some(_)) = tx.next_tx_stamp() {}
    Ok((!snd).then(|| {
        format!(
            "no SOF_TIMESTAMPING_TX_SOFTWARE timestamp from the driver of {} (it does not call skb_tx_timestamp): \
             tx_sw stays empty",
            path.describe()
        )
    }))
}

/// Asks the responder at `peer` whether it is an rtscope `--serve`.
fn hello(sock: &UdpSock, size: usize, session: u32, peer: SocketAddrV4) -> Result<()> {
    let mut buf = vec![0u8; size.max(packet::LEN)];
    let mut back = vec![0u8; MAX_SIZE + 64];
    sock.set_recv_timeout(300_000_000)?;
    for _ in 0..5 {
        Packet::new(packet::HELLO, session, 0, clock::now()).encode(&mut buf);
        let _ = sock.send(&buf);
        while let Ok(info) = sock.recv(&mut back) {
            if let Some(p) = Packet::decode(&back[..info.len])
                && p.kind == packet::HELLO_ACK
                && p.session == session
            {
                return Ok(());
            }
        }
    }
    bail!(
        "--peer {peer}: no rtscope responder answered within 1.5 s; start `rtscope netlat --serve {peer}` on the \
         target first (and let UDP port {} through its firewall)",
        peer.port()
    )
}

/// Why a sender did not become ready.
enum NotReady {
    /// Its FAIL: what failed, errno.
    Failed(u32, u32),
    /// Its process ended first.
    Exited(std::process::ExitStatus),
    Silent,
}

impl NotReady {
    fn message(&self, cpu: usize, on: usize, policy: Policy, priority: u8) -> String {
        match self {
            NotReady::Failed(what, errno) => sender::failure(*what, *errno, cpu, on, policy, priority),
            NotReady::Exited(st) => {
                format!("netlat: the sender process for CPU {cpu} ended ({st}) before it was ready (--processes)")
            }
            NotReady::Silent => format!(
                "netlat: the sender for CPU {cpu} did not report ready within {} (a machine too loaded to start it? \
                 try again, or without --processes)",
                units::human(READY_WAIT_NS)
            ),
        }
    }
}

impl Netlat {
    /// Waits for sender `i`'s READY on its receiver's socket (what else
    /// is queued there, e.g. a previous cell's late datagrams, is dropped).
    fn wait_ready(&self, rx: &UdpSock, senders: &mut Senders, i: usize) -> Result<(), NotReady> {
        let mut buf = [0u8; MAX_SIZE + 64];
        let until = clock::now() + READY_WAIT_NS;
        while clock::now() < until {
            if let Ok(info) = rx.recv(&mut buf)
                && let Some(p) = Packet::decode(&buf[..info.len]).filter(|p| p.session == self.session)
            {
                match p.kind {
                    packet::READY => return Ok(()),
                    packet::FAIL => return Err(NotReady::Failed(p.a, p.b)),
                    _ => {}
                }
            }
            if let Some(child) = senders.children.get_mut(i)
                && let Ok(Some(st)) = child.try_wait()
            {
                return Err(NotReady::Exited(st));
            }
        }
        Err(NotReady::Silent)
    }
}

impl Probe for Netlat {
    fn descriptor(&self) -> &'static Descriptor {
        &descriptor::NETLAT
    }

    fn metrics(&self) -> &'static [&'static str] {
        match (self.peer, &self.hw) {
            (Some(_), Some(_)) => PEER_HW_METRICS,
            (Some(_), None) => PEER_METRICS,
            (None, _) => LOCAL_METRICS,
        }
    }

    fn plan(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some((a, b)) = self.namespaces() {
            v["namespaces"] = serde_json::json!({
                "sender": format!("net:[{a}]"),
                "receiver": format!("net:[{b}]"),
                "sender_addr": crate::sys::netns::ADDR_A.to_string(),
                "receiver_addr": crate::sys::netns::ADDR_B.to_string(),
            });
        }
        v
    }

    fn describe(&self) -> String {
        let mut s = match self.peer {
            Some(p) => format!("round trip to {p}"),
            None => self.path.describe(),
        };
        s += &format!(", {}-byte UDP every {}", self.size, units::human(self.interval_ns));
        if self.peer.is_none() {
            s += if self.processes { ", sender processes" } else { ", sender threads" };
            match self.sender_cpu {
                Some(c) => s += &format!(" on CPU {c}"),
                None => s += " on the receiver's CPU",
            }
        }
        s += &format!(", {} timestamps", self.timestamps);
        s
    }

    fn trace_stages(&self) -> Option<bool> {
        // Local mode: a datagram's path to the receiver is split into
        // stages; peer mode: the round trip is a window to attribute.
        Some(self.peer.is_none())
    }

    fn start_helpers(&self, cpus: &[usize], policy: Policy, priority: u8) -> Result<Box<dyn Send>> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut senders = Senders { stop: Arc::clone(&stop), threads: Vec::new(), children: Vec::new() };
        if self.peer.is_some() {
            return Ok(Box::new(senders));
        }
        let prio = if policy.is_rt() { priority.saturating_sub(1).max(1) } else { 0 };
        let cfg = self.sender_cfg();
        for (pair, &c) in self.pairs.iter().zip(cpus) {
            let Some(tx) = &pair.tx else { continue };
            let on = self.sender_cpu.unwrap_or(c);
            if self.processes {
                let exe = std::env::current_exe().context("--processes: cannot find rtscope's own executable")?;
                let mut cmd = std::process::Command::new(exe);
                cmd.args(["__netlat-sender", "--cpu", &on.to_string(), "--priority", &prio.to_string()])
                    .args(["--size", &cfg.size.to_string(), "--session", &cfg.session.to_string()])
                    .args(["--policy", &format!("{policy:?}").to_lowercase()])
                    .stdin(std::process::Stdio::null());
                let fd = tx.raw();
                // SAFETY: dup2 and fcntl are async-signal-safe; fd stays open
                // in the parent until the child has exec'd.
                unsafe {
                    use std::os::unix::process::CommandExt;
                    cmd.pre_exec(move || {
                        let rc = if fd == 3 { libc::fcntl(3, libc::F_SETFD, 0) } else { libc::dup2(fd, 3) };
                        if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
                    });
                }
                senders.children.push(process::spawn_tied(&mut cmd).context("--processes: starting a sender")?);
            } else {
                let (tx, stop) = (Arc::clone(tx), Arc::clone(&stop));
                let t = std::thread::Builder::new()
                    .name(format!("rtscope-netsend{c}"))
                    .stack_size(crate::sys::mem::STACK_SIZE)
                    .spawn(move || {
                        signals::block_in_this_thread();
                        // A failure is told to the receiver (FAIL).
                        let _ = sender::run_sender(&tx, on, policy, prio, cfg, &stop);
                    })
                    .context("starting a sender thread")?;
                senders.threads.push(t);
            }
        }
        // Every sender reports READY, or why it cannot run: then the cell
        // fails now, naming the flag (dropping `senders` stops the rest).
        for (i, (pair, &c)) in self.pairs.iter().zip(cpus).enumerate() {
            let on = self.sender_cpu.unwrap_or(c);
            self.wait_ready(&pair.rx, &mut senders, i).map_err(|e| anyhow!("{}", e.message(c, on, policy, prio)))?;
        }
        Ok(Box::new(senders))
    }

    fn measure(&self, ctx: &ThreadCtx, rec: &mut [Recorder]) {
        if self.peer.is_some() { self.measure_peer(ctx, rec) } else { self.measure_local(ctx, rec) }
    }

    fn extra_slots(&self) -> usize {
        SLOTS
    }

    fn row_extras(&self, _metric: usize, slots: &[u64], _total: &Tally) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        netlat::LOST.put(&mut m, slots[SLOT_LOST]);
        netlat::REORDERED.put(&mut m, slots[SLOT_REORDERED]);
        netlat::DUPLICATES.put(&mut m, slots[SLOT_DUPLICATES]);
        if self.peer.is_some() || slots[SLOT_SENT_KNOWN] == 1 {
            netlat::SENT.put(&mut m, slots[SLOT_SENT]);
            netlat::SKIPPED.put(&mut m, slots[SLOT_SKIPPED]);
        }
        for (slot, key) in [
            (SLOT_NO_STAMP, netlat::NO_RX_TIMESTAMP),
            (SLOT_NO_HW_STAMP, netlat::NO_HW_TIMESTAMP),
            (SLOT_CLAMPED, netlat::CLOCK_CLAMPED),
            (SLOT_STRAYS, netlat::STRAYS),
            (SLOT_ERRORS, netlat::SOCKET_ERRORS),
        ] {
            if slots[slot] > 0 {
                key.put(&mut m, slots[slot]);
            }
        }
        let path = match (self.peer, &self.path) {
            (Some(p), NetPath::Iface(n)) => format!("round trip to {p} through {n}"),
            (Some(p), _) => format!("round trip to {p}"),
            (None, path) => path.describe(),
        };
        netlat::PATH.put(&mut m, path);
        netlat::TIMESTAMPS.put(&mut m, self.timestamps.clone());
        m
    }

    fn thread_error(&self, cpu: usize, slots: &[u64], totals: &[&Tally]) -> Option<String> {
        let failed = slots[SLOT_SENDER_FAILED];
        if failed != 0 {
            let on = self.sender_cpu.unwrap_or(cpu);
            return Some(sender::failure((failed >> 32) as u32, failed as u32, cpu, on, Policy::Other, 0));
        }
        // Not measured (the thread's own error says why), or stopped early.
        if slots[SLOT_ENDED] != 1 {
            return None;
        }
        let measured = if self.peer.is_some() { totals[0].count() } else { totals[2].count() };
        if measured > 0 {
            return None;
        }
        let sent = if self.peer.is_some() || slots[SLOT_SENT_KNOWN] == 1 {
            format!("{} sent", slots[SLOT_SENT])
        } else {
            "the sender did not say how many it sent".into()
        };
        Some(match self.peer {
            Some(p) => format!(
                "netlat: no echo came back from {p} ({sent}): is `rtscope netlat --serve {p}` still running there, and \
                 does UDP pass both ways?"
            ),
            None => format!("netlat: no datagram arrived over {} ({sent})", self.path.describe()),
        })
    }
}

#[cfg(test)]
mod tests;
