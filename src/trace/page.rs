//! One page of a per-CPU ring buffer as `trace_pipe_raw` returns it: a
//! header (base timestamp, commit = bytes of data plus flags) and a run of
//! compressed records. Each record starts with a 32-bit word: `type_len`
//! (5 bits) and `time_delta` (27 bits), as `events/header_event` states.
//! `type_len` 1..=28: data of `type_len * 4` bytes follows; 0: a 32-bit
//! length follows (it counts itself), then the data; 29: padding (a
//! discarded event, or the end of the page when its delta is 0); 30: a time
//! extension (the delta's upper bits in the next word); 31: an absolute
//! timestamp.

use super::format::PageLayout;

const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
/// Commit flags: events were lost before this page; their count is stored
/// after the data.
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;
const COMMIT_MASK: u64 = (1 << 30) - 1;
/// Absolute timestamps keep 59 bits; the rest comes from the running time.
const TS_MSB: u64 = 0xf8 << 56;

/// A decoded page header and its records.
pub struct Page<'a> {
    pub base_ts: u64,
    data: &'a [u8],
    /// Events the kernel lost before this page: `Some(n)` when it counted
    /// them, `Some(0)` when it only flagged a loss.
    pub missed: Option<u64>,
}

/// A record: its absolute timestamp (the instance's trace clock, ns) and
/// its payload (the event's fields, as its `format` file lays them out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub ts: u64,
    pub payload: &'a [u8],
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|s| u32::from_le_bytes(s.try_into().unwrap_or_default()))
}

fn u64_at(b: &[u8], at: usize, size: usize) -> Option<u64> {
    let s = b.get(at..at + size)?;
    let mut w = [0u8; 8];
    w[..size].copy_from_slice(s);
    Some(u64::from_le_bytes(w))
}

impl<'a> Page<'a> {
    /// Parses the header of `bytes`, one read of `trace_pipe_raw`.
    pub fn parse(layout: &PageLayout, bytes: &'a [u8]) -> Result<Page<'a>, String> {
        let base_ts = u64_at(bytes, layout.timestamp_offset, 8).ok_or("page shorter than its header")?;
        let commit = u64_at(bytes, layout.commit_offset, layout.commit_size).ok_or("page shorter than its header")?;
        let len = (commit & COMMIT_MASK) as usize;
        let data = bytes
            .get(layout.data_offset..layout.data_offset + len)
            .ok_or_else(|| format!("page commit {len} beyond its {} bytes", bytes.len()))?;
        let missed = if commit & MISSED_STORED != 0 {
            Some(u64_at(bytes, layout.data_offset + len, layout.commit_size).unwrap_or(0))
        } else if commit & MISSED_EVENTS != 0 {
            Some(0)
        } else {
            None
        };
        Ok(Page { base_ts, data, missed })
    }

    pub fn records(&self) -> Records<'a> {
        Records { data: self.data, at: 0, ts: self.base_ts }
    }
}

/// The records of a page, in order.
pub struct Records<'a> {
    data: &'a [u8],
    at: usize,
    ts: u64,
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        loop {
            let word = u32_at(self.data, self.at)?;
            let type_len = word & 0x1f;
            let delta = (word >> 5) as u64;
            match type_len {
                TYPE_PADDING => {
                    if delta == 0 {
                        return None;
                    }
                    let len = u32_at(self.data, self.at + 4)? as usize;
                    self.at += 4 + len;
                }
                TYPE_TIME_EXTEND => {
                    let hi = u32_at(self.data, self.at + 4)? as u64;
                    self.ts += (hi << 27) | delta;
                    self.at += 8;
                }
                TYPE_TIME_STAMP => {
                    let hi = u32_at(self.data, self.at + 4)? as u64;
                    let mut abs = (hi << 27) | delta;
                    if self.ts & TS_MSB != 0 {
                        abs |= self.ts & TS_MSB;
                        if abs < self.ts {
                            abs += 1 << 59;
                        }
                    }
                    self.ts = abs;
                    self.at += 8;
                }
                0 => {
                    let len = u32_at(self.data, self.at + 4)? as usize;
                    let payload = self.data.get(self.at + 8..self.at + 4 + len)?;
                    self.ts += delta;
                    self.at += 4 + len.max(4);
                    return Some(Record { ts: self.ts, payload });
                }
                n => {
                    let len = n as usize * 4;
                    let payload = self.data.get(self.at + 4..self.at + 4 + len)?;
                    self.ts += delta;
                    self.at += 4 + len;
                    return Some(Record { ts: self.ts, payload });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> PageLayout {
        PageLayout::X86_64
    }

    fn page(commit: u64, body: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 4096];
        p[..8].copy_from_slice(&1_000u64.to_le_bytes());
        p[8..16].copy_from_slice(&commit.to_le_bytes());
        p[16..16 + body.len()].copy_from_slice(body);
        p
    }

    fn word(type_len: u32, delta: u32) -> [u8; 4] {
        (type_len | (delta << 5)).to_le_bytes()
    }

    #[test]
    fn decodes_every_record_type() {
        let mut b = Vec::new();
        b.extend(word(2, 5)); // 8 bytes of data at 1005
        b.extend([1, 0, 0, 0, 2, 0, 0, 0]);
        b.extend(word(TYPE_TIME_EXTEND, 3)); // + (1 << 27) + 3
        b.extend(1u32.to_le_bytes());
        b.extend(word(1, 2)); // 4 bytes at 1005 + 2^27 + 3 + 2
        b.extend([7, 0, 0, 0]);
        b.extend(word(TYPE_PADDING, 9)); // a discarded event of 8 bytes
        b.extend(8u32.to_le_bytes());
        b.extend([0; 4]);
        b.extend(word(0, 1)); // long form: length 12 counts itself, 8 bytes of data
        b.extend(12u32.to_le_bytes());
        b.extend([9; 8]);
        b.extend(word(TYPE_TIME_STAMP, 11)); // absolute: 11
        b.extend(0u32.to_le_bytes());
        b.extend(word(1, 4));
        b.extend([3, 0, 0, 0]);
        let bytes = page(b.len() as u64, &b);
        let p = Page::parse(&layout(), &bytes).unwrap();
        assert_eq!(p.missed, None);
        let r: Vec<_> = p.records().collect();
        let t2 = 1005 + (1 << 27) + 3 + 2;
        assert_eq!(r.len(), 4);
        assert_eq!(r[0], Record { ts: 1005, payload: &[1, 0, 0, 0, 2, 0, 0, 0] });
        assert_eq!(r[1], Record { ts: t2, payload: &[7, 0, 0, 0] });
        assert_eq!(r[2], Record { ts: t2 + 1, payload: &[9; 8] });
        assert_eq!(r[3], Record { ts: 15, payload: &[3, 0, 0, 0] });
    }

    #[test]
    fn missed_events_and_truncation() {
        let mut b = word(1, 1).to_vec();
        b.extend([1, 2, 3, 4]);
        b.extend(42u64.to_le_bytes());
        let bytes = page(8 | MISSED_EVENTS | MISSED_STORED, &b);
        let p = Page::parse(&layout(), &bytes).unwrap();
        assert_eq!(p.missed, Some(42));
        assert_eq!(p.records().count(), 1);
        let flagged = page(8 | MISSED_EVENTS, &b);
        assert_eq!(Page::parse(&layout(), &flagged).unwrap().missed, Some(0));
        // A record running past the commit is not returned.
        let short = page(6, &b);
        assert_eq!(Page::parse(&layout(), &short).unwrap().records().count(), 0);
        assert!(Page::parse(&layout(), &bytes[..10]).is_err());
        assert!(Page::parse(&layout(), &page(5000, &[])).is_err());
    }
}
