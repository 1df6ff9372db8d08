//! The datagram: little-endian fields, zero padding to the size.

pub const MAGIC: u32 = 0x4353_5452; // "RTSC"
pub const DATA: u8 = 1;
/// Receiver -> sender: start at `t_send`, stop by `seq` (u64::MAX: no end).
pub const START: u8 = 2;
pub const STOP: u8 = 3;
/// Peer -> server and back: is an rtscope responder there?
pub const HELLO: u8 = 4;
pub const HELLO_ACK: u8 = 5;
pub const ECHO: u8 = 6;
/// Sender -> receiver: pinned and at its priority, waiting for START.
pub const READY: u8 = 7;
/// Sender -> receiver: it gave up; `a` = what failed (`FAIL_*`), `b` =
/// the errno (0: none).
pub const FAIL: u8 = 8;
/// Sender -> receiver, the answer to STOP: `seq` datagrams were sent before
/// STOP's `t_send` (the end of the measured time), which `t_send` repeats.
pub const SENT: u8 = 9;
/// What a FAIL reports.
pub const FAIL_PIN: u32 = 1;
pub const FAIL_PRIORITY: u32 = 2;
pub const FAIL_SEND: u32 = 3;
/// A missing 32-bit duration.
pub const NONE: u32 = u32::MAX;
pub const LEN: usize = 52;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    pub kind: u8,
    pub session: u32,
    pub seq: u64,
    /// The originator's CLOCK_MONOTONIC just before its send call.
    pub t_send: u64,
    /// ECHO: the target's kernel receive timestamp -> its recvmsg returning.
    pub a: u32,
    /// ECHO: the target's kernel receive timestamp -> its send call.
    pub b: u32,
    /// The datagram whose transmit timestamps follow (u64::MAX: none).
    pub tx_seq: u64,
    /// DATA: its send call -> queued to the device, ns. ECHO: the target
    /// NIC's turnaround of echo `tx_seq`, its hardware receive stamp of the
    /// datagram -> its hardware transmit stamp of the echo, ns (the NIC's
    /// clock). NONE: missing.
    pub tx_sched: u32,
    /// Its send call -> handed to the driver, ns (NONE: missing).
    pub tx_sw: u32,
}

/// A duration in 32 bits: saturates just below NONE (4.29 s).
pub fn d32(ns: u64) -> u32 {
    ns.min(u64::from(NONE - 1)) as u32
}

impl Packet {
    pub fn new(kind: u8, session: u32, seq: u64, t_send: u64) -> Packet {
        Packet { kind, session, seq, t_send, a: NONE, b: NONE, tx_seq: u64::MAX, tx_sched: NONE, tx_sw: NONE }
    }

    /// Writes the packet into `buf` (at least LEN bytes; the rest is
    /// left as it is: zero padding the caller set once).
    pub fn encode(&self, buf: &mut [u8]) {
        buf[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        buf[4] = self.kind;
        buf[5] = 0;
        buf[6..8].copy_from_slice(&0u16.to_le_bytes());
        buf[8..16].copy_from_slice(&self.seq.to_le_bytes());
        buf[16..24].copy_from_slice(&self.t_send.to_le_bytes());
        buf[24..28].copy_from_slice(&self.a.to_le_bytes());
        buf[28..32].copy_from_slice(&self.b.to_le_bytes());
        buf[32..40].copy_from_slice(&self.tx_seq.to_le_bytes());
        buf[40..44].copy_from_slice(&self.tx_sched.to_le_bytes());
        buf[44..48].copy_from_slice(&self.tx_sw.to_le_bytes());
        buf[48..52].copy_from_slice(&self.session.to_le_bytes());
    }

    /// None unless `buf` is an rtscope packet.
    pub fn decode(buf: &[u8]) -> Option<Packet> {
        if buf.len() < LEN {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[i..i + 8]);
            u64::from_le_bytes(b)
        };
        if u32_at(0) != MAGIC {
            return None;
        }
        Some(Packet {
            kind: buf[4],
            session: u32_at(48),
            seq: u64_at(8),
            t_send: u64_at(16),
            a: u32_at(24),
            b: u32_at(28),
            tx_seq: u64_at(32),
            tx_sched: u32_at(40),
            tx_sw: u32_at(44),
        })
    }
}
