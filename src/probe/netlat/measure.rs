//! The measuring loops of the receiving thread: local (a sender of
//! rtscope's own) and peer (round trips to a `--serve` target).

use super::*;

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

/// A local receiver's running counts (its extra slots).
#[derive(Default)]
struct LocalCounts {
    seqs: SeqTracker,
    no_stamp: u64,
    clamped: u64,
}

impl Netlat {
    /// Takes data datagram `p` received at `now`: its numbers and its
    /// samples. rx_total needs no receive timestamp; rx_stack and rx_wake
    /// do. Returns rx_total, or None for a duplicate.
    #[inline]
    fn take_local(
        ctx: &ThreadCtx,
        rec: &mut [Recorder],
        c: &mut LocalCounts,
        p: &Packet,
        info: &net::RxInfo,
        now: u64,
        offset: i64,
    ) -> Option<u64> {
        if !c.seqs.see(p.seq) {
            ctx.set_extra(SLOT_DUPLICATES, c.seqs.duplicates);
            return None;
        }
        ctx.set_extra(SLOT_LOST, c.seqs.lost);
        ctx.set_extra(SLOT_REORDERED, c.seqs.reordered);
        let total = now.saturating_sub(p.t_send);
        if info.sw_ns == 0 {
            c.no_stamp += 1;
            ctx.set_extra(SLOT_NO_STAMP, c.no_stamp);
        } else {
            let raw = net::to_mono(info.sw_ns, offset);
            let rx = raw.clamp(p.t_send, now.max(p.t_send));
            if rx != raw {
                c.clamped += 1;
                ctx.set_extra(SLOT_CLAMPED, c.clamped);
            }
            rec[0].record(now, now.saturating_sub(rx));
            rec[1].record(now, rx - p.t_send);
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
        let sock = &self.pairs[ctx.index].rx;
        let mut buf = [0u8; MAX_SIZE + 64];
        let mut out = [0u8; packet::LEN];
        let mut start = Packet::new(packet::START, self.session, ctx.end_ns(), ctx.start_ns + self.interval_ns);
        start.a = (self.interval_ns / 1000).min(u64::from(u32::MAX)) as u32;
        start.encode(&mut out);
        let end = ctx.end_ns();
        let mut c = LocalCounts::default();
        let (mut strays, mut errors) = (0u64, 0u64);
        let mut failed = false;
        // The end of the measured time, on the sender's clock reads: the
        // planned end, or when measuring stopped before it.
        let mut cut = end;
        // The sender waits for this; a lost START would leave it waiting.
        for _ in 0..3 {
            let _ = sock.send(&out);
        }
        loop {
            let Some(info) = received(sock.recv(&mut buf), &mut errors, ctx) else {
                let now = clock::now();
                if ctx.done(now, rec[2].count()) {
                    cut = cut.min(now);
                    break;
                }
                continue;
            };
            let now = clock::now();
            let offset = net::realtime_offset();
            let p = match Packet::decode(&buf[..info.len]) {
                Some(p) if p.session == self.session && p.kind == packet::DATA && p.seq != u64::MAX => p,
                Some(p) if p.session == self.session && p.kind == packet::FAIL => {
                    ctx.set_extra(SLOT_SENDER_FAILED, u64::from(p.a) << 32 | u64::from(p.b));
                    failed = true;
                    cut = cut.min(now);
                    break;
                }
                _ => {
                    strays += 1;
                    ctx.set_extra(SLOT_STRAYS, strays);
                    continue;
                }
            };
            if p.t_send >= cut {
                // Sent after the end: every number below it was sent
                // before, so a gap just before the end is lost.
                c.seqs.end_at(p.seq);
                ctx.set_extra(SLOT_LOST, c.seqs.lost);
                break;
            }
            let taken = Self::take_local(ctx, rec, &mut c, &p, &info, now, offset);
            if taken.is_some_and(|total| ctx.breached(now, total)) {
                cut = now;
                break;
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
                break;
            }
            for r in rec.iter_mut() {
                r.maybe_checkpoint(now);
            }
        }
        if ctx.stopping() && clock::now() < end {
            ctx.set_extra(SLOT_ENDED, 2);
        }
        // STOP carries the end of the measured time; the sender answers
        // how many it sent before it. Datagrams sent before it and still
        // queued are taken meanwhile.
        Packet::new(packet::STOP, self.session, 0, cut).encode(&mut out);
        for _ in 0..3 {
            let _ = sock.send(&out);
        }
        let until = clock::now() + self.interval_ns.min(1_000_000_000) + SENT_WAIT_NS;
        while !failed && clock::now() < until {
            let Some(info) = received(sock.recv(&mut buf), &mut errors, ctx) else { continue };
            let now = clock::now();
            let offset = net::realtime_offset();
            let Some(p) = Packet::decode(&buf[..info.len]).filter(|p| p.session == self.session) else {
                strays += 1;
                ctx.set_extra(SLOT_STRAYS, strays);
                continue;
            };
            match p.kind {
                packet::DATA if p.seq != u64::MAX && p.t_send < cut => {
                    Self::take_local(ctx, rec, &mut c, &p, &info, now, offset);
                }
                packet::DATA => {
                    c.seqs.end_at(p.seq);
                    ctx.set_extra(SLOT_LOST, c.seqs.lost);
                }
                packet::SENT if p.t_send == cut => {
                    c.seqs.end_at(p.seq);
                    ctx.set_extra(SLOT_LOST, c.seqs.lost);
                    ctx.set_extra(SLOT_SENT, p.seq);
                    ctx.set_extra(SLOT_SKIPPED, u64::from(p.a));
                    ctx.set_extra(SLOT_SENT_KNOWN, 1);
                    break;
                }
                packet::FAIL => {
                    ctx.set_extra(SLOT_SENDER_FAILED, u64::from(p.a) << 32 | u64::from(p.b));
                    break;
                }
                _ => {
                    strays += 1;
                    ctx.set_extra(SLOT_STRAYS, strays);
                }
            }
        }
    }

    pub(super) fn measure_peer(&self, ctx: &ThreadCtx, rec: &mut [Recorder]) {
        ctx.set_extra(SLOT_ENDED, 1);
        let sock = &self.pairs[ctx.index].rx;
        let mut buf = [0u8; MAX_SIZE + 64];
        let mut out = [0u8; MAX_SIZE];
        let size = self.size.clamp(MIN_SIZE, MAX_SIZE);
        let mut seqs = SeqTracker::default();
        let (mut sent, mut no_stamp, mut clamped, mut strays, mut errors) = (0u64, 0u64, 0u64, 0u64, 0u64);
        let hw = self.hw.is_some();
        let mut nic = HwMatch::default();
        let mut no_hw = 0u64;
        let mut next = ctx.start_ns + self.interval_ns;
        let mut seq = 0u64;
        let mut skips = sender::SkipLog::default();
        'run: loop {
            clock::sleep_until(next);
            let t = clock::now();
            if ctx.done(t, rec[0].count()) {
                break;
            }
            Packet::new(packet::DATA, self.session, seq, t).encode(&mut out);
            if sock.send(&out[..size]).is_err() {
                errors += 1;
                ctx.set_extra(SLOT_ERRORS, errors);
            } else if hw {
                nic.sent(seq);
            }
            sent += 1;
            ctx.set_extra(SLOT_SENT, sent);
            seq += 1;
            next += self.interval_ns;
            // Echoes until the next send is due: this one, or late ones.
            loop {
                let Some(info) = received(sock.recv(&mut buf), &mut errors, ctx) else {
                    if clock::now() >= next || ctx.stopping() {
                        break;
                    }
                    continue;
                };
                let now = clock::now();
                let offset = net::realtime_offset();
                let p = match Packet::decode(&buf[..info.len]) {
                    Some(p) if p.session == self.session && p.kind == packet::ECHO && p.seq < seq => p,
                    _ => {
                        strays += 1;
                        ctx.set_extra(SLOT_STRAYS, strays);
                        continue;
                    }
                };
                if seqs.see(p.seq) {
                    ctx.set_extra(SLOT_REORDERED, seqs.reordered);
                    let rtt = now.saturating_sub(p.t_send);
                    let wake = if info.sw_ns == 0 {
                        no_stamp += 1;
                        ctx.set_extra(SLOT_NO_STAMP, no_stamp);
                        None
                    } else {
                        let raw = net::to_mono(info.sw_ns, offset);
                        let rx = raw.clamp(p.t_send, now.max(p.t_send));
                        if rx != raw {
                            clamped += 1;
                            ctx.set_extra(SLOT_CLAMPED, clamped);
                        }
                        Some(now - rx)
                    };
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
                    if hw {
                        // The NIC's stamps: this datagram's transmit one
                        // from the error queue, the echo's receive one.
                        while let Ok(Some(st)) = sock.next_tx_stamp() {
                            if st.kind == SCM_TSTAMP_SND
                                && st.hw_ns != 0
                                && let Some((_, w)) = nic.tx_stamp(st.id, st.hw_ns)
                            {
                                rec[6].record(now, w);
                            }
                        }
                        if info.hw_ns == 0 {
                            no_hw += 1;
                            ctx.set_extra(SLOT_NO_HW_STAMP, no_hw);
                        } else if let Some((_, w)) = nic.echo(p.seq, info.hw_ns) {
                            rec[6].record(now, w);
                        }
                        // The target NIC's turnaround of an earlier echo.
                        if p.tx_seq != u64::MAX && p.tx_sched != packet::NONE {
                            rec[7].record(now, u64::from(p.tx_sched));
                            if let Some(w) = nic.rtt_of(p.tx_seq) {
                                rec[8].record(now, w.saturating_sub(u64::from(p.tx_sched)));
                            }
                        }
                    }
                    if ctx.breached(now, rtt) {
                        break 'run;
                    }
                    for r in rec.iter_mut() {
                        r.maybe_checkpoint(now);
                    }
                } else {
                    ctx.set_extra(SLOT_DUPLICATES, seqs.duplicates);
                }
                if p.seq == seq - 1 && clock::now() < next {
                    // This period's echo is in: wait for the next send.
                    break;
                }
                if clock::now() >= next {
                    break;
                }
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
        ctx.set_extra(SLOT_LOST, sent.saturating_sub(seqs.received));
        if ctx.stopping() && clock::now() < ctx.end_ns() {
            ctx.set_extra(SLOT_ENDED, 2);
        }
    }
}
