//! The sender of a local pair and its transmit timestamps.

use super::*;

/// The transmit timestamps of recent datagrams, by sequence number.
struct TxRing {
    /// (seq, send call, sched, snd) per slot; times CLOCK_MONOTONIC.
    slots: [(u64, u64, u64, u64); 64],
}

impl TxRing {
    fn new() -> TxRing {
        TxRing { slots: [(u64::MAX, 0, 0, 0); 64] }
    }

    fn sent(&mut self, seq: u64, t: u64) {
        self.slots[(seq % 64) as usize] = (seq, t, 0, 0);
    }

    /// Reads every stamp queued on `sock` (id = seq + `base`).
    fn drain(&mut self, sock: &UdpSock) -> io::Result<()> {
        while let Some(t) = sock.next_tx_stamp()? {
            let seq = u64::from(t.id);
            let slot = &mut self.slots[(seq % 64) as usize];
            if slot.0 != seq || t.sw_ns == 0 {
                continue;
            }
            let mono = net::to_mono(t.sw_ns, net::realtime_offset());
            match t.kind {
                SCM_TSTAMP_SCHED => slot.2 = mono,
                SCM_TSTAMP_SND => slot.3 = mono,
                _ => {}
            }
        }
        Ok(())
    }

    /// Puts datagram `seq`'s transmit times into `p`, if it was sent.
    fn report(&self, seq: u64, p: &mut Packet) {
        let (s, t, sched, snd) = self.slots[(seq % 64) as usize];
        if s != seq {
            return;
        }
        p.tx_seq = seq;
        let d = |x: u64| if x == 0 { packet::NONE } else { packet::d32(x.saturating_sub(t)) };
        p.tx_sched = d(sched);
        p.tx_sw = d(snd);
    }
}

/// The sender of a local pair (a thread, or the `--processes` child):
/// waits for the receiver's START, then sends a datagram every interval
/// until STOP, the planned end (plus a grace), `stop`, or an error (the
/// receiver's socket gone). Returns the datagrams sent.
pub fn sender_loop(sock: &UdpSock, cfg: SenderCfg, stop: &AtomicBool) -> io::Result<u64> {
    let mut buf = [0u8; MAX_SIZE];
    let mut inbox = [0u8; MAX_SIZE + 64];
    let size = cfg.size.clamp(MIN_SIZE, MAX_SIZE);
    // A STOP sent before this sender started is a previous cell's (an
    // assessment measures the same pair under several loads): stale.
    let born = clock::now();
    let stop_now = |p: &Packet| p.session == cfg.session && p.kind == packet::STOP && p.t_send >= born;
    // The kernel numbers datagrams per socket (OPT_ID): restart at 0 so
    // that datagram k is id k in this cell too, and forget older stamps.
    sock.enable_timestamps(tx_flags() & !libc::SOF_TIMESTAMPING_OPT_ID).map_err(io::Error::other)?;
    sock.enable_timestamps(tx_flags()).map_err(io::Error::other)?;
    while let Ok(Some(_)) = sock.next_tx_stamp() {}
    sock.set_recv_timeout(POLL_NS)?;
    let (t0, interval, end) = loop {
        if stop.load(Relaxed) {
            return Ok(0);
        }
        match sock.recv(&mut inbox) {
            Ok(info) => {
                if let Some(p) = Packet::decode(&inbox[..info.len])
                    && p.session == cfg.session
                {
                    match p.kind {
                        packet::START => break (p.t_send, u64::from(p.a) * 1000, p.seq),
                        packet::STOP if stop_now(&p) => return Ok(0),
                        _ => {}
                    }
                }
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e),
        }
    };
    let interval = interval.max(MIN_INTERVAL_NS);
    let deadline = end.saturating_add(SENDER_GRACE_NS);
    let mut ring = TxRing::new();
    let mut next = t0;
    let mut seq = 0u64;
    loop {
        clock::sleep_until(next);
        if stop.load(Relaxed) || clock::now() >= deadline {
            break;
        }
        // STOP, or stray datagrams, queued meanwhile.
        while let Ok(info) = sock.try_recv(&mut inbox) {
            if Packet::decode(&inbox[..info.len]).is_some_and(|p| stop_now(&p)) {
                return Ok(seq);
            }
        }
        ring.drain(sock)?;
        let t = clock::now();
        let mut p = Packet::new(packet::DATA, cfg.session, seq, t);
        if seq > 0 {
            ring.report(seq - 1, &mut p);
        }
        p.encode(&mut buf);
        ring.sent(seq, t);
        match sock.send(&buf[..size]) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
            Err(e) => return Err(e),
        }
        seq += 1;
        ring.drain(sock)?;
        next += interval;
        let now = clock::now();
        if now > next + interval {
            // Fell behind by a period or more: back on the grid, no burst.
            next += (now - next) / interval * interval;
        }
    }
    Ok(seq)
}

/// The sender threads or processes of a run; stopped when dropped.
pub(super) struct Senders {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) threads: Vec<std::thread::JoinHandle<()>>,
    pub(super) children: Vec<std::process::Child>,
}

impl Drop for Senders {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        for c in &mut self.children {
            process::stop_child(c, std::time::Duration::from_secs(1));
        }
    }
}

/// The sender process (`rtscope __netlat-sender`): its socket is fd 3.
pub fn sender_process(cpu: usize, policy: Policy, priority: u8, cfg: SenderCfg) -> Result<()> {
    // SAFETY: the parent made fd 3 this process's copy of the sender socket.
    let sock = unsafe { UdpSock::from_raw(3) };
    let _ = mem::lock_all();
    cpu::pin_self(&[cpu]).context("netlat sender: cannot pin")?;
    sched::set_self(policy, priority).context("netlat sender: cannot set its priority")?;
    sender_loop(&sock, cfg, &AtomicBool::new(false))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_ring_reports_deltas() {
        let mut r = TxRing::new();
        r.sent(5, 1000);
        r.slots[5].2 = 1700;
        let mut p = Packet::new(packet::DATA, 1, 6, 0);
        r.report(5, &mut p);
        assert_eq!((p.tx_seq, p.tx_sched, p.tx_sw), (5, 700, packet::NONE));
        let mut q = Packet::new(packet::DATA, 1, 6, 0);
        r.report(69, &mut q);
        assert_eq!(q.tx_seq, u64::MAX, "slot reused by another number");
    }
}
