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
    /// Hold /dev/cpu_dma_latency at 0 while serving (as measuring does).
    pub dma_latency: bool,
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
    let Serve { addr, iface, cpu, policy, priority, until_ns, quiet, dma_latency, hw_wanted } = opts;
    let _dma = match dma_latency.then(|| crate::sys::dma::DmaLatency::hold(0)) {
        Some(Err(e)) if !quiet => {
            eprintln!(
                "rtscope: warning: cannot hold /dev/cpu_dma_latency at 0 ({e}): deep C-states may add exit latency"
            );
            None
        }
        Some(Ok(d)) => Some(d),
        _ => None,
    };
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
    let _ = mem::lock_all();
    let mut wake = Tally::new();
    let mut turnaround = Tally::new();
    let mut tx_sw = Tally::new();
    let mut wire = Tally::new();
    let mut peers: Vec<SocketAddrV4> = Vec::with_capacity(64);
    let (mut echoed, mut strays) = (0u64, 0u64);
    if !quiet {
        eprintln!(
            "rtscope netlat: serving on {} (CPU {cpu}, SCHED_{} {priority}, {} timestamps); stop with Ctrl-C",
            sock.local_addr()?,
            format!("{policy:?}").to_uppercase(),
            hw.as_ref().map_or("software".into(), |h| format!("{} + software", h.describe()))
        );
    }
    std::thread::scope(|s| -> Result<()> {
        let t = s.spawn(|| -> Result<()> {
            signals::block_in_this_thread();
            cpu::pin_self(&[cpu]).with_context(|| format!("--serve: cannot pin to CPU {cpu}"))?;
            sched::set_self(policy, priority).with_context(|| format!("--serve: cannot set priority {priority}"))?;
            mem::prefault_stack(64 * 1024);
            let mut buf = [0u8; MAX_SIZE + 64];
            let mut sent: Sent = [(u64::MAX, 0, None, 0); 256];
            let mut id = 0u64;
            // The last echo's transmit stamps, for the next echo to that peer.
            let mut pending: Option<Pending> = None;
            while !signal.load(Relaxed) && clock::now() < until_ns {
                let info = match sock.recv(&mut buf) {
                    Ok(i) => i,
                    Err(_) => continue,
                };
                let now = clock::now();
                let offset = net::realtime_offset();
                let (Some(mut p), Some(from)) = (Packet::decode(&buf[..info.len]), info.from) else {
                    strays += 1;
                    continue;
                };
                match p.kind {
                    packet::HELLO => p.kind = packet::HELLO_ACK,
                    packet::DATA => {
                        p.kind = packet::ECHO;
                        // The last echo's stamps that came since it left.
                        drain(&sock, &sent, &mut pending, &mut tx_sw, &mut wire);
                        if info.sw_ns != 0 {
                            let rx = net::to_mono(info.sw_ns, offset).min(now);
                            p.a = packet::d32(now - rx);
                            wake.record(now - rx);
                            p.b = 0; // set right before sending
                            p.tx_seq = u64::MAX;
                            p.tx_sched = packet::NONE;
                            if let Some(q) = pending.take() {
                                if q.to == from {
                                    p.tx_seq = q.seq;
                                    p.tx_sw = q.tx_sw;
                                    p.tx_sched = q.wire;
                                } else {
                                    pending = Some(q);
                                }
                            }
                            let t = clock::now();
                            p.b = packet::d32(t - rx);
                            turnaround.record(t - rx);
                            p.encode(&mut buf);
                            sent[(id % 256) as usize] = (p.seq, t, Some(from), info.hw_ns);
                        } else {
                            let t = clock::now();
                            p.encode(&mut buf);
                            sent[(id % 256) as usize] = (p.seq, t, Some(from), info.hw_ns);
                        }
                        if !peers.contains(&from) && peers.len() < peers.capacity() {
                            peers.push(from);
                        }
                        echoed += 1;
                    }
                    _ => {
                        strays += 1;
                        continue;
                    }
                }
                if p.kind == packet::HELLO_ACK {
                    p.encode(&mut buf);
                    sent[(id % 256) as usize] = (u64::MAX, 0, None, 0);
                }
                if sock.send_to(&buf[..info.len], from).is_ok() {
                    id += 1;
                }
                drain(&sock, &sent, &mut pending, &mut tx_sw, &mut wire);
            }
            Ok(())
        });
        t.join().map_err(|_| anyhow!("the responder thread panicked"))?
    })?;
    if !quiet {
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
            "rtscope netlat --serve: echoed {echoed} datagrams for {} peer socket(s), {strays} strays",
            peers.len()
        );
        line("target_wake", &wake);
        line("target_turnaround", &turnaround);
        line("target_tx_sw", &tx_sw);
        if hw.is_some() {
            line("target_turnaround_wire", &wire);
        }
    }
    Ok(())
}
