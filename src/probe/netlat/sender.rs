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

    /// How many of the `total` datagrams sent (numbers 0..total) left
    /// before `cut`: the first number sent at or after it, among the last
    /// 64 (send times grow with the number).
    fn sent_before(&self, cut: u64, total: u64) -> u64 {
        self.slots.iter().filter(|s| s.0 < total && s.1 >= cut).map(|s| s.0).min().unwrap_or(total)
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

/// Tells the receiver something about the sender (READY, FAIL).
fn tell(sock: &UdpSock, cfg: SenderCfg, kind: u8, what: u32, err: Option<&io::Error>) {
    let mut buf = [0u8; MAX_SIZE];
    let mut p = Packet::new(kind, cfg.session, 0, clock::now());
    p.a = what;
    p.b = err.and_then(io::Error::raw_os_error).map_or(0, |e| e as u32);
    p.encode(&mut buf);
    let _ = sock.send(&buf[..cfg.size.clamp(MIN_SIZE, MAX_SIZE)]);
}

/// A sender's life (a thread, or the `--processes` child): takes its CPU
/// and priority, tells the receiver READY (or FAIL, and returns the
/// error), sends until stopped, and tells FAIL if sending broke.
pub fn run_sender(
    sock: &UdpSock,
    cpu: usize,
    policy: Policy,
    priority: u8,
    cfg: SenderCfg,
    stop: &AtomicBool,
) -> io::Result<u64> {
    let setup = cpu::pin_self(&[cpu])
        .map_err(|e| (packet::FAIL_PIN, e))
        .and_then(|()| sched::set_self(policy, priority).map_err(|e| (packet::FAIL_PRIORITY, e)));
    if let Err((what, e)) = setup {
        tell(sock, cfg, packet::FAIL, what, Some(&e));
        return Err(e);
    }
    mem::prefault_stack(64 * 1024);
    tell(sock, cfg, packet::READY, 0, None);
    sender_loop(sock, cfg, stop).inspect_err(|e| tell(sock, cfg, packet::FAIL, packet::FAIL_SEND, Some(e)))
}

/// What went wrong in a sender, from its FAIL datagram, naming the flag
/// that decides it.
pub(super) fn failure(what: u32, errno: u32, cpu: usize, on: usize, policy: Policy, priority: u8) -> String {
    let err =
        if errno == 0 { "unknown error".to_string() } else { io::Error::from_raw_os_error(errno as i32).to_string() };
    match what {
        packet::FAIL_PIN => format!(
            "netlat: the sender for CPU {cpu} cannot pin itself to CPU {on}: {err} (--sender-cpu, or --cpus without it:              pick a CPU this process may run on)"
        ),
        packet::FAIL_PRIORITY => format!(
            "netlat: the sender for CPU {cpu} cannot set SCHED_{} {priority}: {err} (it runs one below --priority;              lower --priority or use --policy other, or run as root / with CAP_SYS_NICE and an RT runtime budget)",
            format!("{policy:?}").to_uppercase()
        ),
        _ => format!("netlat: the sender for CPU {cpu} stopped: sending failed: {err}"),
    }
}

/// The sender of a local pair: waits for the receiver's START, then sends
/// a datagram every interval until STOP, the planned end (plus a grace),
/// `stop`, or an error (the receiver's socket gone). STOP is answered
/// with SENT: how many left before the end of the measured time. Returns
/// the datagrams sent.
pub fn sender_loop(sock: &UdpSock, cfg: SenderCfg, stop: &AtomicBool) -> io::Result<u64> {
    let mut buf = [0u8; MAX_SIZE];
    let mut inbox = [0u8; MAX_SIZE + 64];
    let size = cfg.size.clamp(MIN_SIZE, MAX_SIZE);
    // A STOP sent before this sender started is a previous cell's (an
    // assessment measures the same pair under several loads): stale.
    let born = clock::now();
    let stop_now = |p: &Packet| p.session == cfg.session && p.kind == packet::STOP && p.t_send >= born;
    // The answer to STOP: `n` datagrams before its end of the measured
    // time, and the periods skipped (the sender ran a period or more late).
    let answer = |stop: &Packet, n: u64, skipped: u64| {
        let mut out = [0u8; MAX_SIZE];
        let mut p = Packet::new(packet::SENT, cfg.session, n, stop.t_send);
        p.a = packet::d32(skipped);
        p.encode(&mut out);
        let _ = sock.send(&out[..size]);
    };
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
                        packet::STOP if stop_now(&p) => {
                            answer(&p, 0, 0);
                            return Ok(0);
                        }
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
    // Periods skipped before the end of the measured time (STOP's): the
    // times they were due, so that those after it are not counted.
    let mut skips = SkipLog::default();
    loop {
        clock::sleep_until(next);
        if stop.load(Relaxed) || clock::now() >= deadline {
            break;
        }
        // STOP, or stray datagrams, queued meanwhile.
        while let Ok(info) = sock.try_recv(&mut inbox) {
            if let Some(p) = Packet::decode(&inbox[..info.len])
                && stop_now(&p)
            {
                answer(&p, ring.sent_before(p.t_send, seq), skips.before(p.t_send));
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
            let skip = (now - next) / interval;
            skips.add(next, interval, skip);
            next += skip * interval;
        }
    }
    Ok(seq)
}

/// The periods a sender skipped, by when they were due (the last 64
/// skips), and the total.
pub(super) struct SkipLog {
    /// (first skipped period's due time, interval, periods).
    recent: [(u64, u64, u64); 64],
    n: usize,
    total: u64,
}

impl Default for SkipLog {
    fn default() -> Self {
        SkipLog { recent: [(0, 0, 0); 64], n: 0, total: 0 }
    }
}

impl SkipLog {
    pub(super) fn add(&mut self, due: u64, interval: u64, periods: u64) {
        if periods == 0 {
            return;
        }
        self.recent[self.n % 64] = (due, interval, periods);
        self.n += 1;
        self.total += periods;
    }

    /// Periods skipped that were due before `cut`.
    pub(super) fn before(&self, cut: u64) -> u64 {
        let mut after = 0;
        for &(due, interval, periods) in self.recent.iter().take(self.n.min(64)) {
            if due.saturating_add((periods - 1).saturating_mul(interval)) >= cut {
                // Those of this skip due at or after the cut.
                let first_after = if due >= cut { 0 } else { (cut - due).div_ceil(interval) };
                after += periods - first_after.min(periods);
            }
        }
        self.total - after
    }
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
    // A failure is told to the receiver, which names it in the run.
    run_sender(&sock, cpu, policy, priority, cfg, &AtomicBool::new(false)).context("netlat sender")?;
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

    #[test]
    fn sent_before_counts_the_datagrams_that_left_before_the_cut() {
        let mut r = TxRing::new();
        for seq in 0..100 {
            r.sent(seq, 1_000 + seq * 10);
        }
        // Datagram 50 left at 1500: 50 before 1500, 51 before 1501.
        assert_eq!(r.sent_before(1_500, 100), 50);
        assert_eq!(r.sent_before(1_501, 100), 51);
        assert_eq!(r.sent_before(5_000, 100), 100, "all before");
        // A number written to the ring but never sent does not count.
        r.sent(100, 2_000);
        assert_eq!(r.sent_before(1_995, 100), 100);
    }

    #[test]
    fn skipped_periods_count_until_the_cut() {
        let mut s = SkipLog::default();
        s.add(1_000, 10, 0);
        s.add(1_000, 10, 3); // due 1000, 1010, 1020
        s.add(2_000, 10, 2); // due 2000, 2010
        assert_eq!(s.before(5_000), 5);
        assert_eq!(s.before(2_005), 4);
        assert_eq!(s.before(2_000), 3);
        assert_eq!(s.before(1_010), 1);
        assert_eq!(s.before(1_000), 0);
    }

    #[test]
    fn failures_name_the_flag() {
        let m = failure(packet::FAIL_PIN, libc::EINVAL as u32, 1, 3, Policy::Fifo, 94);
        assert!(m.contains("CPU 3") && m.contains("--sender-cpu") && m.contains("Invalid argument"), "{m}");
        let m = failure(packet::FAIL_PRIORITY, libc::EPERM as u32, 1, 1, Policy::Fifo, 94);
        assert!(m.contains("SCHED_FIFO 94") && m.contains("--priority"), "{m}");
        let m = failure(packet::FAIL_SEND, 0, 0, 0, Policy::Other, 0);
        assert!(m.contains("sending failed"), "{m}");
    }
}
