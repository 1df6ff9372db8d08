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
}

/// `rtscope netlat --serve ADDR:PORT`: echoes every rtscope datagram with
/// the target's own receive and send timing, on a thread pinned to `cpu`
/// at `policy`/`priority`, until `signal` or `until_ns`. Prints a summary.
pub fn serve(opts: Serve, signal: &AtomicBool) -> Result<()> {
    let Serve { addr, iface, cpu, policy, priority, until_ns, quiet, dma_latency } = opts;
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
    sock.enable_timestamps(tx_flags()).map_err(|e| anyhow!("--serve: {e}"))?;
    sock.set_recv_timeout(POLL_NS)?;
    let _ = mem::lock_all();
    let mut wake = Tally::new();
    let mut turnaround = Tally::new();
    let mut tx_sw = Tally::new();
    let mut peers: Vec<SocketAddrV4> = Vec::with_capacity(64);
    let (mut echoed, mut strays) = (0u64, 0u64);
    if !quiet {
        eprintln!(
            "rtscope netlat: serving on {} (CPU {cpu}, SCHED_{} {priority}); stop with Ctrl-C",
            sock.local_addr()?,
            format!("{policy:?}").to_uppercase()
        );
    }
    std::thread::scope(|s| -> Result<()> {
        let t = s.spawn(|| -> Result<()> {
            signals::block_in_this_thread();
            cpu::pin_self(&[cpu]).with_context(|| format!("--serve: cannot pin to CPU {cpu}"))?;
            sched::set_self(policy, priority).with_context(|| format!("--serve: cannot set priority {priority}"))?;
            mem::prefault_stack(64 * 1024);
            let mut buf = [0u8; MAX_SIZE + 64];
            // Echo id (OPT_ID) -> (seq, send call, peer).
            let mut sent: [(u64, u64, Option<SocketAddrV4>); 256] = [(u64::MAX, 0, None); 256];
            let mut id = 0u64;
            // The last echo's transmit time, for the next echo to that peer.
            let mut pending: Option<(SocketAddrV4, u64, u32)> = None;
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
                        if info.sw_ns != 0 {
                            let rx = net::to_mono(info.sw_ns, offset).min(now);
                            p.a = packet::d32(now - rx);
                            wake.record(now - rx);
                            p.b = 0; // set right before sending
                            p.tx_seq = u64::MAX;
                            if let Some((who, seq, d)) = pending.take() {
                                if who == from {
                                    p.tx_seq = seq;
                                    p.tx_sw = d;
                                } else {
                                    pending = Some((who, seq, d));
                                }
                            }
                            let t = clock::now();
                            p.b = packet::d32(t - rx);
                            turnaround.record(t - rx);
                            p.encode(&mut buf);
                            sent[(id % 256) as usize] = (p.seq, t, Some(from));
                        } else {
                            let t = clock::now();
                            p.encode(&mut buf);
                            sent[(id % 256) as usize] = (p.seq, t, Some(from));
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
                    sent[(id % 256) as usize] = (u64::MAX, 0, None);
                }
                if sock.send_to(&buf[..info.len], from).is_ok() {
                    id += 1;
                }
                while let Ok(Some(st)) = sock.next_tx_stamp() {
                    let (seq, t, who) = sent[(u64::from(st.id) % 256) as usize];
                    if st.kind == SCM_TSTAMP_SND
                        && st.sw_ns != 0
                        && let Some(who) = who
                    {
                        let d = net::to_mono(st.sw_ns, net::realtime_offset()).saturating_sub(t);
                        tx_sw.record(d);
                        pending = Some((who, seq, packet::d32(d)));
                    }
                }
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
    }
    Ok(())
}
