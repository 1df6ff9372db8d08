//! The frames of the serial round trip: four bytes, a kind, a 16-bit
//! sequence number (little-endian) and a check byte, so that an answer is
//! matched to its stimulus, a late one told from a lost one, and a byte
//! lost or garbled on the line skipped rather than misread.
//!
//! - `STIMULUS` (0xA5): one measured round trip;
//! - `HELLO` (0xA6): the instrument asking whether the other end answers,
//!   before measuring (its echo says `respond` is ready).
//!
//! `respond` echoes bytes as they come without decoding them first; it
//! counts the frames it echoed after writing them back.

/// A stimulus: one measured round trip.
pub const STIMULUS: u8 = 0xA5;
/// Before measuring: does the other end answer?
pub const HELLO: u8 = 0xA6;
/// Bytes in a frame.
pub const LEN: usize = 4;

/// The frame of `kind` numbered `seq`.
#[inline]
pub fn encode(kind: u8, seq: u16) -> [u8; LEN] {
    let [lo, hi] = seq.to_le_bytes();
    [kind, lo, hi, check(kind, lo, hi)]
}

#[inline]
fn check(kind: u8, lo: u8, hi: u8) -> u8 {
    kind ^ lo ^ hi ^ 0x5A
}

/// A frame read back: its kind and number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    pub kind: u8,
    pub seq: u16,
}

/// Finds frames in a byte stream; what is not part of one is counted.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: [u8; LEN],
    len: usize,
    /// Bytes skipped: not the start of a frame, or a frame whose check
    /// failed (its first byte).
    pub junk: u64,
}

impl Decoder {
    /// Takes one byte; a whole frame when it completes one.
    #[inline]
    pub fn push(&mut self, b: u8) -> Option<Frame> {
        if self.len == 0 && b != STIMULUS && b != HELLO {
            self.junk += 1;
            return None;
        }
        self.buf[self.len] = b;
        self.len += 1;
        if self.len < LEN {
            return None;
        }
        let [kind, lo, hi, c] = self.buf;
        if c == check(kind, lo, hi) {
            self.len = 0;
            return Some(Frame { kind, seq: u16::from_le_bytes([lo, hi]) });
        }
        // Not a frame: drop its first byte and look again from the next
        // one that may start a frame.
        self.junk += 1;
        let rest = self.buf;
        self.len = 0;
        for (i, &b) in rest[1..].iter().enumerate() {
            if self.len == 0 && b != STIMULUS && b != HELLO {
                self.junk += 1;
                continue;
            }
            self.buf[self.len] = rest[1 + i];
            self.len += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(bytes: &[u8]) -> (Vec<Frame>, u64) {
        let mut d = Decoder::default();
        let got = bytes.iter().filter_map(|&b| d.push(b)).collect();
        (got, d.junk)
    }

    #[test]
    fn frames_are_found_in_a_stream_and_junk_is_counted() {
        let mut s = Vec::new();
        s.extend(encode(STIMULUS, 1));
        s.extend([0x00, 0xFF]);
        s.extend(encode(HELLO, 0xA5A6));
        // A frame whose check byte was lost: its start is skipped, the
        // next frame still found.
        s.extend(&encode(STIMULUS, 7)[..3]);
        s.extend(encode(STIMULUS, 0x1234));
        let (got, junk) = frames(&s);
        assert_eq!(
            got,
            [
                Frame { kind: STIMULUS, seq: 1 },
                Frame { kind: HELLO, seq: 0xA5A6 },
                Frame { kind: STIMULUS, seq: 0x1234 }
            ]
        );
        assert_eq!(junk, 2 + 3);
    }

    #[test]
    fn every_number_survives_the_round_trip() {
        for seq in (0..=u16::MAX).step_by(97).chain([u16::MAX]) {
            assert_eq!(frames(&encode(STIMULUS, seq)).0, [Frame { kind: STIMULUS, seq }]);
        }
    }
}
