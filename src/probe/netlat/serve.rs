//! `--serve`: the responder of the two-host mode.

use super::*;

/// The responder's settings.
pub struct Serve<'a> {
    pub addr: SocketAddrV4,
    pub iface: Option<&'a str>,
    pub cpu: usize,
    pub policy: Policy,
    pub priority: u8,
    /// CLOCK_MONOTONIC end (u64::MAX: until a signal).
    pub until_ns: u64,
    pub quiet: bool,
    /// What /dev/cpu_dma_latency is held at while serving (as measuring
    /// does; None: left alone).
    pub dma_latency: Option<rtscope_model::settings::DmaLatency>,
    /// Turn on the interface's hardware timestamps where it has them.
    pub hw_wanted: bool,
}

/// The transmit stamps of the last echo, carried in the next one to the
/// same peer.
#[derive(Clone, Copy)]
struct Pending {
    to: SocketAddrV4,
    seq: u64,
    /// Send call -> handed to the driver (software), ns.
    tx_sw: u32,
    /// The NIC's receive stamp of the datagram -> its transmit stamp of the
    /// echo, ns.
    wire: u32,
}

/// An echo sent: (seq, its send call on CLOCK_MONOTONIC, the peer, the
/// NIC's receive stamp of the datagram it answers (0: none)), by OPT_ID.
type Sent = [(u64, u64, Option<SocketAddrV4>, u64); 256];

/// Reads the error queue: each echo's transmit stamps into `pending`.
fn drain(sock: &UdpSock, sent: &Sent, pending: &mut Option<Pending>, tx_sw: &mut Tally, wire: &mut Tally) {
    while let Ok(Some(st)) = sock.next_tx_stamp() {
        let (seq, t, who, rx_hw) = sent[(u64::from(st.id) % 256) as usize];
        let Some(who) = who else { continue };
        if st.kind != SCM_TSTAMP_SND {
            continue;
        }
        let mut p = match *pending {
            Some(p) if p.seq == seq && p.to == who => p,
            _ => Pending { to: who, seq, tx_sw: packet::NONE, wire: packet::NONE },
        };
        if st.sw_ns != 0 {
            let d = net::to_mono(st.sw_ns, net::realtime_offset()).saturating_sub(t);
            tx_sw.record(d);
            p.tx_sw = packet::d32(d);
        }
        if st.hw_ns != 0 && rx_hw != 0 && st.hw_ns >= rx_hw {
            let d = st.hw_ns - rx_hw;
            wire.record(d);
            p.wire = packet::d32(d);
        }
        *pending = Some(p);
    }
}

/// `rtscope netlat --serve ADDR:PORT`: echoes every rtscope datagram with
/// the target's own receive and send timing, on a thread pinned to `cpu`
/// at `policy`/`priority`, until `signal` or `until_ns`. Prints a summary.
pub fn serve(opts: Serve, signal: &AtomicBool) -> Result<()> {
    let _dma = crate::sys::dma::hold_for(opts.dma_latency, opts.quiet);
    let (sock, hw) = open(&opts)?;
    let _ = mem::lock_all();
    let Serve { cpu, policy, priority, until_ns, quiet, .. } = opts;
    if !quiet {
        eprintln!(
            "rtscope netlat: serving on {} (CPU {cpu}, SCHED_{} {priority}, {} timestamps); stop with Ctrl-C",
            sock.local_addr()?,
            format!("{policy:?}").to_uppercase(),
            hw.as_ref().map_or("software".into(), |h| format!("{} + software", h.describe()))
        );
    }
    let mut counts = Counts::new();
    std::thread::scope(|s| -> Result<()> {
        let t = s.spawn(|| -> Result<()> {
            crate::probe::responder_thread("--serve", cpu, policy, priority)?;
            respond(&sock, || signal.load(Relaxed) || clock::now() >= until_ns, &mut counts);
            Ok(())
        });
        t.join().map_err(|_| anyhow!("the responder thread panicked"))?
    })?;
    if !quiet {
        counts.print(hw.is_some());
    }
    Ok(())
}

/// The responder's socket: bound to the address (and the interface),
/// with the interface's hardware timestamps where wanted and there,
/// software ones always, and the receive timeout that lets it see a stop.
fn open(opts: &Serve) -> Result<(UdpSock, Option<net::HwStamping>)> {
    let Serve { addr, iface, quiet, hw_wanted, .. } = *opts;
    let sock = UdpSock::bind(addr).with_context(|| format!("--serve {addr}: cannot bind"))?;
    if let Some(name) = iface {
        sock.bind_device(name).with_context(|| format!("--path iface:{name}: cannot bind to the interface"))?;
    }
    let hw = match iface {
        Some(name) if hw_wanted => match net::HwStamping::enable(name) {
            Ok(h) => Some(h),
            Err(e) => {
                if !quiet {
                    eprintln!("rtscope: warning: --path iface:{name}: software timestamps only: {e}");
                }
                None
            }
        },
        _ => None,
    };
    let flags = if hw.is_some() { tx_flags() | hw_flags() } else { tx_flags() };
    sock.enable_timestamps(flags).map_err(|e| anyhow!("--serve: {e}"))?;
    sock.set_recv_timeout(POLL_NS)?;
    Ok((sock, hw))
}

/// What the responder timed and counted.
struct Counts {
    /// Receive timestamp -> recvmsg returning.
    wake: Tally,
    /// Receive timestamp -> the echo's send call.
    turnaround: Tally,
    tx_sw: Tally,
    wire: Tally,
    /// The peers' sockets (the first 64).
    peers: Vec<SocketAddrV4>,
    echoed: u64,
    strays: u64,
}

impl Counts {
    fn new() -> Counts {
        Counts {
            wake: Tally::new(),
            turnaround: Tally::new(),
            tx_sw: Tally::new(),
            wire: Tally::new(),
            peers: Vec::with_capacity(64),
            echoed: 0,
            strays: 0,
        }
    }

    /// The summary, on stderr; the wire's turnaround with hardware timestamps.
    fn print(&self, hw: bool) {
        let line = |name: &str, t: &Tally| {
            let m = t.summary();
            eprintln!(
                "  {name:<18} {:>8} samples  min {}us  p50 {}us  p99 {}us  max {}us",
                m.count,
                units::us_i(m.min_ns),
                units::us_i(m.p50_ns),
                units::us_i(m.p99_ns),
                units::us_i(m.max_ns)
            );
        };
        eprintln!(
            "rtscope netlat --serve: echoed {} datagrams for {} peer socket(s), {} strays",
            self.echoed,
            self.peers.len(),
            self.strays
        );
        line("target_wake", &self.wake);
        line("target_turnaround", &self.turnaround);
        line("target_tx_sw", &self.tx_sw);
        if hw {
            line("target_turnaround_wire", &self.wire);
        }
    }
}

/// The responder's loop, on its pinned thread: answers HELLO, echoes DATA
/// with its timing, until `stop` says so.
fn respond(sock: &UdpSock, stop: impl Fn() -> bool, c: &mut Counts) {
    let mut buf = [0u8; MAX_SIZE + 64];
    let mut sent: Sent = [(u64::MAX, 0, None, 0); 256];
    let mut id = 0u64;
    // The last echo's transmit stamps, for the next echo to that peer.
    let mut pending: Option<Pending> = None;
    while !stop() {
        let info = match sock.recv(&mut buf) {
            Ok(i) => i,
            Err(_) => continue,
        };
        let now = clock::now();
        let offset = net::realtime_offset();
        let (Some(mut p), Some(from)) = (Packet::decode(&buf[..info.len]), info.from) else {
            c.strays += 1;
            continue;
        };
        let slot = (id % 256) as usize;
        match p.kind {
            packet::HELLO => {
                p.kind = packet::HELLO_ACK;
                p.encode(&mut buf);
                sent[slot] = (u64::MAX, 0, None, 0);
            }
            packet::DATA => {
                // The last echo's stamps that came since it left.
                drain(sock, &sent, &mut pending, &mut c.tx_sw, &mut c.wire);
                let echo = Echo { from, info: &info, now, offset };
                sent[slot] = echo.answer(&mut p, &mut pending, c, &mut buf);
            }
            _ => {
                c.strays += 1;
                continue;
            }
        }
        if sock.send_to(&buf[..info.len], from).is_ok() {
            id += 1;
        }
        drain(sock, &sent, &mut pending, &mut c.tx_sw, &mut c.wire);
    }
}

/// A DATA datagram to echo: who sent it, what came with it, when
/// recvmsg returned and the CLOCK_REALTIME offset read then.
struct Echo<'a> {
    from: SocketAddrV4,
    info: &'a net::RxInfo,
    now: u64,
    offset: i64,
}

impl Echo<'_> {
    /// Turns `p` into its echo in `buf`: the target's wake-up and
    /// turnaround, and the transmit stamps of the last echo to the same
    /// peer (taken from `pending`). Returns its entry of [`Sent`].
    #[inline(always)]
    fn answer(
        &self,
        p: &mut Packet,
        pending: &mut Option<Pending>,
        c: &mut Counts,
        buf: &mut [u8],
    ) -> (u64, u64, Option<SocketAddrV4>, u64) {
        let (info, now, from) = (self.info, self.now, self.from);
        p.kind = packet::ECHO;
        let t = if info.sw_ns != 0 {
            let rx = net::to_mono(info.sw_ns, self.offset).min(now);
            p.a = packet::d32(now - rx);
            c.wake.record(now - rx);
            p.b = 0; // set right before sending
            p.tx_seq = u64::MAX;
            p.tx_sched = packet::NONE;
            if let Some(q) = pending.take() {
                if q.to == from {
                    p.tx_seq = q.seq;
                    p.tx_sw = q.tx_sw;
                    p.tx_sched = q.wire;
                } else {
                    *pending = Some(q);
                }
            }
            let t = clock::now();
            p.b = packet::d32(t - rx);
            c.turnaround.record(t - rx);
            t
        } else {
            clock::now()
        };
        p.encode(buf);
        if !c.peers.contains(&from) && c.peers.len() < c.peers.capacity() {
            c.peers.push(from);
        }
        c.echoed += 1;
        (p.seq, t, Some(from), info.hw_ns)
    }
}
