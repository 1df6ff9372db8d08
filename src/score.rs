//! The short CPU score stored with every assessment, so that machines can
//! be compared: an integer and string loop in the spirit of Dhrystone
//! (record assignment, string copy and compare, array indexing, integer
//! arithmetic and branches), written here, on one pinned SCHED_OTHER
//! thread. The score is the median of short slices, in thousands of
//! iterations per second, so that one preempted slice does not move it.

use crate::sys::{clock, cpu, sched, signals};
use rtscope_model::characterisation::CpuScore;
use std::hint::black_box;

/// The loop's version: a changed loop is a new scale.
pub const VERSION: u32 = 1;
const METHOD: &str = "rtscope integer+string loop v1 (record copy, 30-byte string copy and compare, \
                      array indexing, integer multiply/divide, branches)";

#[derive(Clone, Copy)]
struct Record {
    kind: u8,
    value: u32,
    name: [u8; 30],
    next: usize,
}

const STR_A: &[u8; 30] = b"DHRYSTONE PROGRAM, SOME STRING";
const STR_B: &[u8; 30] = b"DHRYSTONE PROGRAM, 2'ND STRING";

struct State {
    records: [Record; 8],
    array: [u32; 64],
    grid: [[u32; 16]; 16],
    text: [u8; 30],
    seed: u32,
    acc: u32,
}

impl State {
    fn new() -> State {
        let r = Record { kind: 0, value: 0, name: *STR_A, next: 0 };
        State { records: [r; 8], array: [0; 64], grid: [[0; 16]; 16], text: [0; 30], seed: 42, acc: 0 }
    }

    /// One iteration.
    #[inline(never)]
    fn step(&mut self, i: u32) {
        self.seed = self.seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let a = (self.seed >> 16) % 50 + 1;
        let b = a * 3 / (a % 7 + 1);
        let c = b.wrapping_sub(a).wrapping_mul(7) ^ i;
        // Records: copy one onto another, follow a link, branch on a kind.
        let from = (a % 8) as usize;
        let to = (b % 8) as usize;
        self.records[to] = self.records[from];
        let r = &mut self.records[to];
        r.value = r.value.wrapping_add(c);
        r.next = (r.next + 1) % 8;
        r.kind = match r.kind {
            0 => 1,
            1 if c & 1 == 0 => 2,
            1 => 0,
            _ => (c % 3) as u8,
        };
        // Strings: copy and compare 30 bytes.
        let src = if c & 4 == 0 { STR_A } else { STR_B };
        self.text.copy_from_slice(src);
        self.text[(a % 30) as usize] = b'A' + (c % 26) as u8;
        if self.text[..] > r.name[..] {
            r.name = self.text;
            self.acc = self.acc.wrapping_add(1);
        }
        // Arrays.
        self.array[(a % 64) as usize] = b;
        self.grid[(a % 16) as usize][(b % 16) as usize] += self.array[(c % 64) as usize] & 0xff;
        self.acc = self.acc.wrapping_add(self.grid[(c % 16) as usize][(a % 16) as usize]);
    }
}

/// Iterations per slice between two clock reads.
const BATCH: u32 = 1_000;

/// Measures `slices` slices of `slice_ms` on `cpu`.
pub fn measure(cpu_id: usize, slices: u32, slice_ms: u64) -> CpuScore {
    let rates: Vec<u64> = std::thread::spawn(move || {
        signals::block_in_this_thread();
        let _ = cpu::pin_self(&[cpu_id]);
        let _ = sched::set_self(sched::Policy::Other, 0);
        let mut st = State::new();
        // Warm the caches and the branch predictors.
        for i in 0..50 * BATCH {
            st.step(i);
        }
        let mut rates = Vec::new();
        for _ in 0..slices {
            let t0 = clock::now();
            let end = t0 + slice_ms * 1_000_000;
            let mut n = 0u64;
            let mut now = t0;
            while now < end {
                for i in 0..BATCH {
                    st.step(black_box(i));
                }
                n += u64::from(BATCH);
                now = clock::now();
            }
            rates.push(n * 1_000_000 / (now - t0).max(1));
        }
        black_box(st.acc);
        rates
    })
    .join()
    .unwrap_or_default();
    summarize(cpu_id, slice_ms, rates)
}

/// The score from the slices' rates (thousands of iterations per second).
fn summarize(cpu: usize, slice_ms: u64, mut rates: Vec<u64>) -> CpuScore {
    rates.sort_unstable();
    let median = rates.get(rates.len() / 2).copied().unwrap_or(0);
    CpuScore {
        score: median,
        method: METHOD.into(),
        version: VERSION,
        cpu,
        slices: rates.len() as u32,
        slice_ms,
        min: rates.first().copied().unwrap_or(0),
        max: rates.last().copied().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_short_score_is_stable_and_positive() {
        let s = super::measure(0, 5, 20);
        assert!(s.score > 0 && s.min <= s.score && s.score <= s.max, "{s:?}");
        assert_eq!(s.slices, 5);
        let t = super::summarize(1, 10, vec![5, 1, 9]);
        assert_eq!((t.score, t.min, t.max), (5, 1, 9));
    }
}
