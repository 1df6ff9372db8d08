//! The measuring loops of the receiving thread: local (a sender of
//! rtscope's own) and peer (round trips to a `--serve` target), both around
//! one receive loop ([`Receiver::receive`]).

use super::*;
use std::ops::ControlFlow::{self, Break, Continue};

/// A datagram received, or None after a timeout or an error; errors
/// other than the receive timeout are counted (`socket_errors`).
fn received(r: io::Result<net::RxInfo>, errors: &mut u64, ctx: &ThreadCtx) -> Option<net::RxInfo> {
    match r {
        Ok(info) => Some(info),
        Err(e) => {
            if !matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) {
                *errors += 1;
                ctx.set_extra(SLOT_ERRORS, *errors);
            }
            None
        }
    }
}

fn record_checked(rec: &mut Recorder, now: u64, value: u32) {
    if value != packet::NONE {
        rec.record(now, u64::from(value));
    }
}

/// A datagram of this run's session: what recvmsg gave with it, the clock
/// read as soon as recvmsg returned, and the CLOCK_REALTIME offset read
/// right after.
struct Datagram {
    p: Packet,
    info: net::RxInfo,
    now: u64,
    offset: i64,
}

/// The receiving socket's receive loop, and what every measuring loop
/// counts on it (its extra slots): receive and send errors, strays,
/// datagrams without a kernel receive timestamp, timestamps clamped.
struct Receiver<'a> {
    sock: &'a UdpSock,
    session: u32,
    buf: [u8; MAX_SIZE + 64],
    errors: u64,
    strays: u64,
    no_stamp: u64,
    clamped: u64,
}

impl<'a> Receiver<'a> {
    fn new(sock: &'a UdpSock, session: u32) -> Receiver<'a> {
        Receiver { sock, session, buf: [0u8; MAX_SIZE + 64], errors: 0, strays: 0, no_stamp: 0, clamped: 0 }
    }

    /// Receives until `on` breaks, and returns what it broke with:
    /// `on(self, None)` after a receive timeout or error, `on(self,
    /// Some(d))` for each datagram of this session. Any other datagram is
    /// a stray.
    #[inline(always)]
    fn receive<B>(&mut self, ctx: &ThreadCtx, mut on: impl FnMut(&mut Self, Option<Datagram>) -> ControlFlow<B>) -> B {
        loop {
            let mut got = None;
            if let Some(info) = received(self.sock.recv(&mut self.buf), &mut self.errors, ctx) {
                let now = clock::now();
                let offset = net::realtime_offset();
                let Some(p) = Packet::decode(&self.buf[..info.len]).filter(|p| p.session == self.session) else {
                    self.stray(ctx);
                    continue;
                };
                got = Some(Datagram { p, info, now, offset });
            }
            if let Break(b) = on(self, got) {
                return b;
            }
        }
    }

    /// Counts a datagram no loop takes.
    fn stray(&mut self, ctx: &ThreadCtx) {
        self.strays += 1;
        ctx.set_extra(SLOT_STRAYS, self.strays);
    }

    /// Counts a send that failed (with the receive errors).
    fn send_error(&mut self, ctx: &ThreadCtx) {
        self.errors += 1;
        ctx.set_extra(SLOT_ERRORS, self.errors);
    }

    /// The kernel's receive timestamp of `d` on CLOCK_MONOTONIC, clamped
    /// into its datagram's span (its send call to recvmsg returning); None
    /// without one. Both are counted.
    #[inline]
    fn rx_stamp(&mut self, ctx: &ThreadCtx, d: &Datagram) -> Option<u64> {
        if d.info.sw_ns == 0 {
            self.no_stamp += 1;
            ctx.set_extra(SLOT_NO_STAMP, self.no_stamp);
            return None;
        }
        let raw = net::to_mono(d.info.sw_ns, d.offset);
        let rx = raw.clamp(d.p.t_send, d.now.max(d.p.t_send));
        if rx != raw {
            self.clamped += 1;
            ctx.set_extra(SLOT_CLAMPED, self.clamped);
        }
        Some(rx)
    }
}

/// A peer-mode receiver's running state besides its receiver's.
#[derive(Default)]
struct Echoes {
    seqs: SeqTracker,
    /// The NIC's stamps, with hardware timestamps.
    nic: HwMatch,
    /// Echoes without a NIC timestamp.
    no_hw: u64,
}

impl Netlat {
    /// Takes data datagram `d`: its numbers and its samples. rx_total needs
    /// no receive timestamp; rx_stack and rx_wake do. Returns rx_total, or
    /// None for a duplicate.
    #[inline]
    fn take_local(
        ctx: &ThreadCtx,
        rec: &mut [Recorder],
        rx: &mut Receiver,
        seqs: &mut SeqTracker,
        d: &Datagram,
    ) -> Option<u64> {
        let (p, now) = (&d.p, d.now);
        if !seqs.see(p.seq) {
            ctx.set_extra(SLOT_DUPLICATES, seqs.duplicates);
            return None;
        }
        ctx.set_extra(SLOT_LOST, seqs.lost);
        ctx.set_extra(SLOT_REORDERED, seqs.reordered);
        let total = now.saturating_sub(p.t_send);
        if let Some(stamp) = rx.rx_stamp(ctx, d) {
            rec[0].record(now, now.saturating_sub(stamp));
            rec[1].record(now, stamp - p.t_send);
        }
        rec[2].record(now, total);
        if p.tx_seq != u64::MAX {
            record_checked(&mut rec[3], now, p.tx_sched);
            record_checked(&mut rec[4], now, p.tx_sw);
        }
        Some(total)
    }

    pub(super) fn measure_local(&self, ctx: &ThreadCtx, rec: &mut [Recorder]) {
        ctx.set_extra(SLOT_ENDED, 1);
        let mut rx = Receiver::new(&self.pairs[ctx.index].rx, self.session);
        let mut out = [0u8; packet::LEN];
        let mut start = Packet::new(packet::START, self.session, ctx.end_ns(), ctx.start_ns + self.interval_ns);
        start.a = (self.interval_ns / 1000).min(u64::from(u32::MAX)) as u32;
        start.encode(&mut out);
        let end = ctx.end_ns();
        let mut seqs = SeqTracker::default();
        let mut failed = false;
        // The end of the measured time, on the sender's clock reads: the
        // planned end, or when measuring stopped before it.
        let mut cut = end;
        // The sender waits for this; a lost START would leave it waiting.
        for _ in 0..3 {
            let _ = rx.sock.send(&out);
        }
        rx.receive(ctx, |rx, got| {
            let Some(d) = got else {
                let now = clock::now();
                if ctx.done(now, rec[2].count()) {
                    cut = cut.min(now);
                    return Break(());
                }
                return Continue(());
            };
            let (p, now) = (&d.p, d.now);
            match p.kind {
                packet::DATA if p.seq != u64::MAX => {}
                packet::FAIL => {
                    ctx.set_extra(SLOT_SENDER_FAILED, u64::from(p.a) << 32 | u64::from(p.b));
                    failed = true;
                    cut = cut.min(now);
                    return Break(());
                }
                _ => {
                    rx.stray(ctx);
                    return Continue(());
                }
            }
            if p.t_send >= cut {
                // Sent after the end: every number below it was sent
                // before, so a gap just before the end is lost.
                seqs.end_at(p.seq);
                ctx.set_extra(SLOT_LOST, seqs.lost);
                return Break(());
            }
            let taken = Self::take_local(ctx, rec, rx, &mut seqs, &d);
            if taken.is_some_and(|total| ctx.breached(now, total)) {
                cut = now;
                return Break(());
            }
            if ctx.done(now, rec[2].count()) {
                cut = if now >= end {
                    end
                } else if ctx.stopping() {
                    now
                } else {
                    // --loops: this datagram is the last one measured.
                    p.t_send + 1
                };
                return Break(());
            }
            for r in rec.iter_mut() {
                r.maybe_checkpoint(now);
            }
            Continue(())
        });
        if ctx.stopping() && clock::now() < end {
            ctx.set_extra(SLOT_ENDED, 2);
        }
        // STOP carries the end of the measured time; the sender answers
        // how many it sent before it.
        Packet::new(packet::STOP, self.session, 0, cut).encode(&mut out);
        for _ in 0..3 {
            let _ = rx.sock.send(&out);
        }
        if !failed {
            Self::after_stop(ctx, rec, &mut rx, &mut seqs, cut, self.interval_ns);
        }
    }

    /// After STOP (for the end of the measured time `cut`): takes the
    /// datagrams sent before it and still queued, until the sender's count
    /// comes (or its FAIL), or one interval (at most 1 s) and a little
    /// more have passed.
    fn after_stop(
        ctx: &ThreadCtx,
        rec: &mut [Recorder],
        rx: &mut Receiver,
        seqs: &mut SeqTracker,
        cut: u64,
        interval_ns: u64,
    ) {
        let until = clock::now() + interval_ns.min(1_000_000_000) + SENT_WAIT_NS;
        if clock::now() >= until {
            return;
        }
        rx.receive(ctx, |rx, got| {
            if let Some(d) = got {
                let p = &d.p;
                match p.kind {
                    packet::DATA if p.seq != u64::MAX && p.t_send < cut => {
                        Self::take_local(ctx, rec, rx, seqs, &d);
                    }
                    packet::DATA => {
                        seqs.end_at(p.seq);
                        ctx.set_extra(SLOT_LOST, seqs.lost);
                    }
                    packet::SENT if p.t_send == cut => {
                        seqs.end_at(p.seq);
                        ctx.set_extra(SLOT_LOST, seqs.lost);
                        ctx.set_extra(SLOT_SENT, p.seq);
                        ctx.set_extra(SLOT_SKIPPED, u64::from(p.a));
                        ctx.set_extra(SLOT_SENT_KNOWN, 1);
                        return Break(());
                    }
                    packet::FAIL => {
                        ctx.set_extra(SLOT_SENDER_FAILED, u64::from(p.a) << 32 | u64::from(p.b));
                        return Break(());
                    }
                    _ => rx.stray(ctx),
                }
            }
            if clock::now() < until { Continue(()) } else { Break(()) }
        });
    }

    /// Takes echo `d` (not a duplicate): its samples. Returns its round trip.
    #[inline]
    fn take_echo(ctx: &ThreadCtx, rec: &mut [Recorder], rx: &mut Receiver, e: &mut Echoes, d: &Datagram) -> u64 {
        let (p, now) = (&d.p, d.now);
        ctx.set_extra(SLOT_REORDERED, e.seqs.reordered);
        let rtt = now.saturating_sub(p.t_send);
        let wake = rx.rx_stamp(ctx, d).map(|stamp| now - stamp);
        rec[0].record(now, rtt);
        if let Some(w) = wake {
            rec[2].record(now, w);
            if p.b != packet::NONE {
                rec[1].record(now, rtt.saturating_sub(w).saturating_sub(u64::from(p.b)));
            }
        }
        record_checked(&mut rec[3], now, p.a);
        record_checked(&mut rec[4], now, p.b);
        if p.tx_seq != u64::MAX {
            record_checked(&mut rec[5], now, p.tx_sw);
        }
        rtt
    }

    /// Takes the NIC's stamps of echo `d`: this datagram's transmit one
    /// from the error queue, the echo's receive one, and the target NIC's
    /// turnaround of an earlier echo.
    #[inline]
    fn take_nic_stamps(ctx: &ThreadCtx, rec: &mut [Recorder], rx: &Receiver, e: &mut Echoes, d: &Datagram) {
        let (p, now) = (&d.p, d.now);
        while let Ok(Some(st)) = rx.sock.next_tx_stamp() {
            if st.kind == SCM_TSTAMP_SND
                && st.hw_ns != 0
                && let Some((_, w)) = e.nic.tx_stamp(st.id, st.hw_ns)
            {
                rec[6].record(now, w);
            }
        }
        if d.info.hw_ns == 0 {
            e.no_hw += 1;
            ctx.set_extra(SLOT_NO_HW_STAMP, e.no_hw);
        } else if let Some((_, w)) = e.nic.echo(p.seq, d.info.hw_ns) {
            rec[6].record(now, w);
        }
        if p.tx_seq != u64::MAX && p.tx_sched != packet::NONE {
            rec[7].record(now, u64::from(p.tx_sched));
            if let Some(w) = e.nic.rtt_of(p.tx_seq) {
                rec[8].record(now, w.saturating_sub(u64::from(p.tx_sched)));
            }
        }
    }

    pub(super) fn measure_peer(&self, ctx: &ThreadCtx, rec: &mut [Recorder]) {
        ctx.set_extra(SLOT_ENDED, 1);
        let mut rx = Receiver::new(&self.pairs[ctx.index].rx, self.session);
        let mut out = [0u8; MAX_SIZE];
        let size = self.size.clamp(MIN_SIZE, MAX_SIZE);
        let mut e = Echoes::default();
        let mut sent = 0u64;
        let hw = self.hw.is_some();
        let mut next = ctx.start_ns + self.interval_ns;
        let mut seq = 0u64;
        let mut skips = sender::SkipLog::default();
        loop {
            clock::sleep_until(next);
            let t = clock::now();
            if ctx.done(t, rec[0].count()) {
                break;
            }
            Packet::new(packet::DATA, self.session, seq, t).encode(&mut out);
            if rx.sock.send(&out[..size]).is_err() {
                rx.send_error(ctx);
            } else if hw {
                e.nic.sent(seq);
            }
            sent += 1;
            ctx.set_extra(SLOT_SENT, sent);
            seq += 1;
            next += self.interval_ns;
            // Echoes until the next send is due: this one, or late ones.
            // Breaks with whether measuring ends (a breach).
            let breached = rx.receive(ctx, |rx, got| {
                let Some(d) = got else {
                    return if clock::now() >= next || ctx.stopping() { Break(false) } else { Continue(()) };
                };
                let (p, now) = (&d.p, d.now);
                if p.kind != packet::ECHO || p.seq >= seq {
                    rx.stray(ctx);
                    return Continue(());
                }
                if e.seqs.see(p.seq) {
                    let rtt = Self::take_echo(ctx, rec, rx, &mut e, &d);
                    if hw {
                        Self::take_nic_stamps(ctx, rec, rx, &mut e, &d);
                    }
                    if ctx.breached(now, rtt) {
                        return Break(true);
                    }
                    for r in rec.iter_mut() {
                        r.maybe_checkpoint(now);
                    }
                } else {
                    ctx.set_extra(SLOT_DUPLICATES, e.seqs.duplicates);
                }
                if p.seq == seq - 1 && clock::now() < next {
                    // This period's echo is in: wait for the next send.
                    return Break(false);
                }
                if clock::now() >= next { Break(false) } else { Continue(()) }
            });
            if breached {
                break;
            }
            let now = clock::now();
            if now > next + self.interval_ns {
                let skip = (now - next) / self.interval_ns;
                skips.add(next, self.interval_ns, skip);
                next += skip * self.interval_ns;
            }
        }
        ctx.set_extra(SLOT_SKIPPED, skips.before(ctx.end_ns().min(clock::now())));
        // Echoes still owed when measuring stopped are lost.
        ctx.set_extra(SLOT_LOST, sent.saturating_sub(e.seqs.received));
        if ctx.stopping() && clock::now() < ctx.end_ns() {
            ctx.set_extra(SLOT_ENDED, 2);
        }
    }
}
