//! Matching by sequence number: lost, reordered and duplicated datagrams,
//! and peer mode's NIC timestamps. Fixed-size state, no allocation: both
//! live on the measuring thread.

/// Lost, reordered and duplicated datagrams from their sequence numbers.
/// A gap counts as lost until its datagram comes late: then it counts as
/// reordered instead. Duplicates are found within the last 1024 numbers.
#[derive(Clone, Debug, Default)]
pub struct SeqTracker {
    /// The next number expected (one past the highest seen).
    next: u64,
    /// Bit i: number `next - 1 - i` was seen.
    window: [u64; 16],
    pub received: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
}

impl SeqTracker {
    const BITS: u64 = 16 * 64;

    fn bit(&self, back: u64) -> bool {
        self.window[(back / 64) as usize] >> (back % 64) & 1 == 1
    }

    fn set(&mut self, back: u64) {
        self.window[(back / 64) as usize] |= 1 << (back % 64);
    }

    /// Shifts the window by `n` numbers (towards older).
    fn shift(&mut self, n: u64) {
        if n >= Self::BITS {
            self.window = [0; 16];
            return;
        }
        let (words, bits) = ((n / 64) as usize, n % 64);
        for i in (0..16).rev() {
            let hi = if i >= words { self.window[i - words] } else { 0 };
            let lo = if i > words { self.window[i - words - 1] } else { 0 };
            self.window[i] = if bits == 0 { hi } else { hi << bits | lo >> (64 - bits) };
        }
    }

    /// Numbers below `n` were all sent: those not seen yet are lost (until
    /// one of them comes late: then reordered).
    pub fn end_at(&mut self, n: u64) {
        if n > self.next {
            self.lost += n - self.next;
            self.shift(n - self.next);
            self.next = n;
        }
    }

    /// Takes number `seq`; false when it is a duplicate (not to record).
    pub fn see(&mut self, seq: u64) -> bool {
        if seq >= self.next {
            self.lost += seq - self.next;
            self.shift(seq + 1 - self.next);
            self.next = seq + 1;
            self.set(0);
            self.received += 1;
            return true;
        }
        let back = self.next - 1 - seq;
        if back < Self::BITS {
            if self.bit(back) {
                self.duplicates += 1;
                return false;
            }
            self.set(back);
        }
        self.lost = self.lost.saturating_sub(1);
        self.reordered += 1;
        self.received += 1;
        true
    }
}

/// Peer mode's NIC timestamps, matched by sequence number over the last
/// 256 datagrams (fixed arrays: it lives on the measuring thread's stack).
/// The NIC's transmit stamp of a datagram (from the error queue, numbered
/// by OPT_ID) and its receive stamp of the echo may come in either order.
#[derive(Clone, Debug)]
pub struct HwMatch {
    /// OPT_ID -> sequence number.
    id_seq: [u64; 256],
    next_id: u64,
    /// (seq, NIC transmit ns) of each datagram.
    tx: [(u64, u64); 256],
    /// (seq, NIC receive ns) of each echo.
    rx: [(u64, u64); 256],
    /// (seq, rtt_wire ns).
    rtt: [(u64, u64); 256],
}

impl Default for HwMatch {
    fn default() -> Self {
        let none = [(u64::MAX, 0); 256];
        HwMatch { id_seq: [u64::MAX; 256], next_id: 0, tx: none, rx: none, rtt: none }
    }
}

impl HwMatch {
    /// Datagram `seq` left (the socket's next OPT_ID).
    pub fn sent(&mut self, seq: u64) {
        self.id_seq[(self.next_id % 256) as usize] = seq;
        self.next_id += 1;
    }

    fn pair(&mut self, seq: u64) -> Option<(u64, u64)> {
        let i = (seq % 256) as usize;
        let ((ts, t), (rs, r)) = (self.tx[i], self.rx[i]);
        if ts != seq || rs != seq || r < t {
            return None;
        }
        self.rtt[i] = (seq, r - t);
        Some((seq, r - t))
    }

    /// The NIC's transmit stamp of the datagram with OPT_ID `id`: its
    /// (seq, rtt_wire) when the echo is already in.
    pub fn tx_stamp(&mut self, id: u32, ns: u64) -> Option<(u64, u64)> {
        let seq = self.id_seq[(id % 256) as usize];
        if seq == u64::MAX {
            return None;
        }
        self.tx[(seq % 256) as usize] = (seq, ns);
        self.pair(seq)
    }

    /// The NIC's receive stamp of the echo of `seq`: (seq, rtt_wire) when
    /// the transmit stamp is already in.
    pub fn echo(&mut self, seq: u64, ns: u64) -> Option<(u64, u64)> {
        self.rx[(seq % 256) as usize] = (seq, ns);
        self.pair(seq)
    }

    /// rtt_wire of `seq`, if both its stamps came.
    pub fn rtt_of(&self, seq: u64) -> Option<u64> {
        let (s, v) = self.rtt[(seq % 256) as usize];
        (s == seq).then_some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nic_stamps_pair_in_either_order_by_sequence_number() {
        let mut m = HwMatch::default();
        // Datagrams 0..3 leave as OPT_ID 0..3.
        for seq in 0..3 {
            m.sent(seq);
        }
        // Transmit stamp first, then the echo.
        assert_eq!(m.tx_stamp(0, 1_000), None);
        assert_eq!(m.echo(0, 31_000), Some((0, 30_000)));
        // Echo first, then the transmit stamp.
        assert_eq!(m.echo(1, 52_000), None);
        assert_eq!(m.tx_stamp(1, 2_000), Some((1, 50_000)));
        assert_eq!(m.rtt_of(0), Some(30_000));
        assert_eq!(m.rtt_of(1), Some(50_000));
        assert_eq!(m.rtt_of(2), None, "no stamp yet");
        // A stamp for an id never sent, and an echo older than its
        // transmit stamp (a clock step), give nothing.
        assert_eq!(m.tx_stamp(200, 9), None);
        assert_eq!(m.tx_stamp(2, 100_000), None);
        assert_eq!(m.echo(2, 99_000), None);
        // 256 datagrams later the slots hold the new numbers: no stale pair.
        for seq in 3..=258 {
            m.sent(seq);
        }
        assert_eq!(m.rtt_of(1), Some(50_000));
        assert_eq!(m.echo(257, 70_000), None, "datagram 1's transmit stamp is not 257's");
        assert_eq!(m.tx_stamp(257, 60_000), Some((257, 10_000)));
        assert_eq!(m.rtt_of(1), None, "overwritten by 257");
        // OPT_ID is 32 bits: it wraps at a multiple of 256.
        let mut w = HwMatch { next_id: u64::from(u32::MAX), ..HwMatch::default() };
        w.sent(7);
        w.sent(8);
        assert_eq!(w.tx_stamp(u32::MAX, 5), None);
        assert_eq!(w.tx_stamp(0, 6), None);
        assert_eq!(w.echo(7, 10), Some((7, 5)));
        assert_eq!(w.echo(8, 10), Some((8, 4)));
    }

    #[test]
    fn sequence_numbers_count_losses_reordering_and_duplicates() {
        let mut s = SeqTracker::default();
        for q in [0, 1, 2, 5, 3, 6, 6, 4, 7] {
            s.see(q);
        }
        // 3 and 4 came late: reordered, not lost; 6 twice: a duplicate.
        assert_eq!((s.lost, s.reordered, s.duplicates, s.received), (0, 2, 1, 8));
        s.see(100);
        assert_eq!(s.lost, 92);
        assert!(!s.see(100), "a duplicate");
        s.see(50);
        assert_eq!((s.lost, s.reordered), (91, 3));
        // Far back (beyond the window): taken as reordered.
        s.see(5000);
        assert!(s.see(10));
    }

    #[test]
    fn the_end_counts_a_gap_just_before_it() {
        let mut s = SeqTracker::default();
        for q in [0, 1, 2, 3] {
            s.see(q);
        }
        // 4 and 5 never came; the sender says 6 were sent.
        s.end_at(6);
        assert_eq!((s.received, s.lost), (4, 2));
        s.end_at(5);
        assert_eq!(s.lost, 2, "an earlier end changes nothing");
        // 5 comes late after all: reordered, not lost, no duplicate.
        assert!(s.see(5));
        assert_eq!((s.received, s.lost, s.reordered, s.duplicates), (5, 1, 1, 0));
        assert!(!s.see(3), "still a duplicate");
        // sent == received + lost.
        assert_eq!(s.received + s.lost, 6);
    }

    #[test]
    fn window_shifts_keep_older_bits() {
        let mut s = SeqTracker::default();
        s.see(0);
        s.see(70);
        assert!(!s.see(0), "seen 70 numbers ago");
        s.see(1200);
        assert!(s.see(0), "out of the window: not recognised as a duplicate");
    }
}
