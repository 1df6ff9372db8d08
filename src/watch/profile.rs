//! `watch --sample-hz HZ`: the application's own profile. A sampler bound
//! to each watched thread (not to a CPU: its samples come only while it
//! runs, wherever it runs) takes its kernel and user stacks, the user
//! stacks unwound with the program's own unwind tables as the probes'
//! profiler does ([`crate::trace::unwind`]). Each sample goes to the
//! activation (period) it fell in, once the trace has ended that
//! activation: late (its response above the deadline, or its wake-up
//! latency above the cause threshold) or on time. At the end the stacks are
//! named and each function's share of the late samples is set against its
//! share of the on-time ones, by innermost function and by any frame.
//!
//! All of it runs in the reader thread, off the watched threads.

use crate::sys::perf::{PerfSample, Sampler, ring_pages, stack_bytes};
use crate::trace::symbols::{Symbols, fold};
use rtscope_model::episode::{Folded, Frame, LateRow, ThreadProfile, WatchProfile};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// Samples held per thread while their activation has not ended (a thread
/// that never sleeps ends none): the oldest beyond are let go, unsorted.
const MAX_HELD: usize = 20_000;
/// Rows kept per table.
const ROWS: usize = 25;
/// Distinct late stacks kept for the flame graph.
const FOLDED: usize = 500;

/// A sample, its stacks unwound: kernel and user addresses, innermost
/// first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taken {
    pub t_ns: u64,
    pub kernel: Vec<u64>,
    pub user: Vec<u64>,
}

/// One thread's samples sorted into its activations. Pure.
#[derive(Default)]
pub struct Sorter {
    held: VecDeque<Taken>,
    /// (kernel, user) -> [late, on time].
    pub stacks: HashMap<(Vec<u64>, Vec<u64>), [u64; 2]>,
    pub late_periods: u64,
    pub on_time_periods: u64,
    pub late_samples: u64,
    pub on_time_samples: u64,
    pub unsorted: u64,
}

impl Sorter {
    /// A sample (in time order).
    pub fn push(&mut self, s: Taken) {
        if self.held.len() >= MAX_HELD {
            self.held.pop_front();
            self.unsorted += 1;
        }
        self.held.push_back(s);
    }

    /// The activation released at `release` ended at `end`, `late` or not:
    /// its samples are counted; those before it fell in no activation seen
    /// whole.
    pub fn period(&mut self, release: u64, end: u64, late: bool) {
        *if late { &mut self.late_periods } else { &mut self.on_time_periods } += 1;
        while self.held.front().is_some_and(|s| s.t_ns <= end) {
            let Some(s) = self.held.pop_front() else { break };
            if s.t_ns < release {
                self.unsorted += 1;
                continue;
            }
            *if late { &mut self.late_samples } else { &mut self.on_time_samples } += 1;
            self.stacks.entry((s.kernel, s.user)).or_insert([0; 2])[usize::from(!late)] += 1;
        }
    }

    /// Samples left in no activation seen whole (the run ended, or the
    /// thread exited, before it did).
    pub fn close(&mut self) {
        self.unsorted += self.held.len() as u64;
        self.held.clear();
    }
}

/// Per function `(name, module)`: [late, on time], by innermost frame
/// and by any frame; and the late stacks folded. `stacks`: each distinct
/// stack named (user, kernel frames, innermost first) and its counts.
#[allow(clippy::type_complexity)]
pub fn tables(
    stacks: &[(Vec<Frame>, Vec<Frame>, [u64; 2])],
) -> (Vec<((String, String), [u64; 2])>, Vec<((String, String), [u64; 2])>, Vec<Folded>) {
    let key = |f: &Frame, kernel: bool| {
        let module = f.module.clone().unwrap_or_else(|| if kernel { "kernel".into() } else { "?".into() });
        (f.name(), module)
    };
    let mut leaf: BTreeMap<(String, String), [u64; 2]> = BTreeMap::new();
    let mut inclusive: BTreeMap<(String, String), [u64; 2]> = BTreeMap::new();
    let mut folded: BTreeMap<String, u64> = BTreeMap::new();
    let add = |m: &mut BTreeMap<(String, String), [u64; 2]>, k: (String, String), n: [u64; 2]| {
        let e = m.entry(k).or_insert([0; 2]);
        e[0] += n[0];
        e[1] += n[1];
    };
    for (user, kernel, n) in stacks {
        let first = kernel.first().map(|f| key(f, true)).or_else(|| user.first().map(|f| key(f, false)));
        add(&mut leaf, first.unwrap_or_else(|| ("?".into(), "?".into())), *n);
        let mut seen = BTreeSet::new();
        seen.extend(kernel.iter().map(|f| key(f, true)));
        seen.extend(user.iter().map(|f| key(f, false)));
        for k in seen {
            add(&mut inclusive, k, *n);
        }
        if n[0] > 0 {
            *folded.entry(fold(user, kernel)).or_default() += n[0];
        }
    }
    let mut folded: Vec<Folded> = folded.into_iter().map(|(stack, samples)| Folded { stack, samples }).collect();
    folded.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.stack.cmp(&b.stack)));
    folded.truncate(FOLDED);
    (leaf.into_iter().collect(), inclusive.into_iter().collect(), folded)
}

/// Frames that could not be named (the vDSO's, say) as one function per
/// module, `[unnamed]`: by address, each would be a row and a box of its
/// own, too few samples each to tell anything.
fn unnamed(mut frames: Vec<Frame>) -> Vec<Frame> {
    for f in frames.iter_mut().filter(|f| f.function.is_none()) {
        f.function = Some("[unnamed]".into());
        f.offset = None;
    }
    frames
}

/// A watched thread's sampler and its sorted samples.
struct Sampled {
    tid: i32,
    pid: i32,
    thread: String,
    sampler: Sampler,
    sorter: Sorter,
}

/// The samplers of the watched threads.
pub struct Profiler {
    hz: u64,
    threads: Vec<Sampled>,
    by_tid: HashMap<i32, usize>,
    symbols: Symbols,
    /// The event and what it cannot see, from the first sampler opened.
    event: Option<(String, String)>,
    /// Threads whose sampler could not be opened, and the first reason.
    refused: (u64, Option<String>),
    notes: Vec<String>,
}

impl Profiler {
    pub fn new(hz: u64) -> Profiler {
        Profiler {
            hz,
            threads: Vec::new(),
            by_tid: HashMap::new(),
            symbols: Symbols::new(),
            event: None,
            refused: (0, None),
            notes: Vec::new(),
        }
    }

    /// Samples thread `tid` of process `pid` from now on.
    pub fn add(&mut self, tid: i32, pid: i32, thread: String) {
        if self.by_tid.contains_key(&tid) {
            return;
        }
        let opened = Sampler::open_thread(tid, self.hz, ring_pages(self.hz, stack_bytes(self.hz)))
            .and_then(|s| s.enable(true).map(|_| s));
        match opened {
            Ok(sampler) => {
                if self.event.is_none() {
                    let mut blind = sampler.source.blind_spot().to_string();
                    if let Some(why) = &sampler.software_because {
                        blind += &format!("; not cycles: {why}");
                    }
                    self.event = Some((sampler.source.name().to_string(), blind));
                    if let Some(why) = &sampler.no_stack_because {
                        self.notes.push(why.clone());
                    }
                }
                self.by_tid.insert(tid, self.threads.len());
                self.threads.push(Sampled { tid, pid, thread, sampler, sorter: Sorter::default() });
            }
            Err(e) => {
                self.refused.0 += 1;
                self.refused.1.get_or_insert(e);
            }
        }
    }

    /// Takes every sampler's new samples, their user stacks unwound.
    pub fn drain(&mut self) {
        let symbols = &mut self.symbols;
        for t in &mut self.threads {
            let sorter = &mut t.sorter;
            t.sampler.drain(&mut |s: PerfSample| {
                let user = symbols.unwind_sample(&s);
                sorter.push(Taken { t_ns: s.t_ns, kernel: s.kernel, user });
            });
        }
    }

    /// Thread `tid`'s activation `[release, end]` ended, `late` or not.
    pub fn period(&mut self, tid: i32, release: u64, end: u64, late: bool) {
        if let Some(&i) = self.by_tid.get(&tid) {
            self.threads[i].sorter.period(release, end, late);
        }
    }

    /// Each thread's tables, named; `late_when`: what made a period late,
    /// in words; `load`: the assessment's load of the cell.
    pub fn finish(mut self, late_when: String, load: Option<&str>) -> WatchProfile {
        self.drain();
        let mut threads = Vec::new();
        for mut t in std::mem::take(&mut self.threads) {
            t.sorter.close();
            let s = &t.sorter;
            let named: Vec<(Vec<Frame>, Vec<Frame>, [u64; 2])> = s
                .stacks
                .iter()
                .map(|((k, u), n)| (unnamed(self.symbols.user(t.pid, u)), unnamed(self.symbols.kernel(k)), *n))
                .collect();
            let (leaf, inclusive, late_folded) = tables(&named);
            let (late, on_time) = (s.late_samples, s.on_time_samples);
            threads.push(ThreadProfile {
                tid: i64::from(t.tid),
                pid: i64::from(t.pid),
                thread: t.thread.clone(),
                load: load.map(str::to_string),
                late_periods: s.late_periods,
                on_time_periods: s.on_time_periods,
                late_samples: late,
                on_time_samples: on_time,
                unsorted_samples: s.unsorted,
                lost: t.sampler.lost(),
                leaf: LateRow::rank(leaf, late, on_time, ROWS),
                inclusive: LateRow::rank(inclusive, late, on_time, ROWS),
                late_folded,
            });
        }
        let mut notes = std::mem::take(&mut self.notes);
        if let (n @ 1.., Some(why)) = &self.refused {
            notes.push(format!("{n} watched threads were not sampled: {why}"));
        }
        if let Some(u) = self.symbols.unwound() {
            // Here the reader unwinds, as it reads each sample.
            notes.push(u.replace("in the symbols thread", "in rtscope's reader"));
        }
        notes.extend(self.symbols.all_notes());
        let (event, blind_spot) = self.event.unwrap_or_default();
        WatchProfile { event, hz: self.hz, blind_spot, late_when, min_late: WatchProfile::MIN_LATE, threads, notes }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(t_ns: u64, leaf: u64) -> Taken {
        Taken { t_ns, kernel: Vec::new(), user: vec![leaf, 0x1000] }
    }

    /// Each sample counts in the activation it fell in, once that
    /// activation ended; one before any activation, or in one not yet
    /// ended at the close, is unsorted.
    #[test]
    fn samples_go_to_the_period_they_fell_in() {
        let mut s = Sorter::default();
        for (t, leaf) in [(50, 1), (110, 2), (150, 2), (320, 3), (330, 3), (340, 3), (520, 2)] {
            s.push(taken(t, leaf));
        }
        s.period(100, 200, false);
        s.period(300, 400, true);
        assert_eq!((s.on_time_periods, s.late_periods), (1, 1));
        assert_eq!((s.on_time_samples, s.late_samples, s.unsorted), (2, 3, 1));
        assert_eq!(s.stacks[&(vec![], vec![2, 0x1000])], [0, 2]);
        assert_eq!(s.stacks[&(vec![], vec![3, 0x1000])], [3, 0]);
        s.close();
        assert_eq!(s.unsorted, 2, "the sample at 520 is in no period seen whole");
    }

    fn frame(name: &str, module: &str) -> Frame {
        Frame { function: Some(name.into()), module: Some(module.into()), ..Default::default() }
    }

    /// The innermost frame is the leaf; a function counts once per sample
    /// inclusively; the late stacks fold root first. A function on fewer
    /// than 5 late samples is never called over-represented.
    #[test]
    fn a_slow_function_is_over_represented_inclusively() {
        let (main, slow, fast, clock) =
            (frame("main", "prog"), frame("slow_path", "prog"), frame("fast_path", "prog"), frame("gettime", "vdso"));
        let stacks = vec![
            (vec![clock.clone(), slow.clone(), main.clone()], vec![], [40, 0]),
            (vec![fast.clone(), main.clone()], vec![], [0, 50]),
            (vec![main.clone()], vec![frame("irq", "kernel")], [3, 2]),
        ];
        let (leaf, inclusive, folded) = tables(&stacks);
        let rows = LateRow::rank(inclusive, 43, 52, 10);
        let row = |n: &str| rows.iter().find(|r| r.function == n).unwrap();
        assert!(row("slow_path").over && row("slow_path").late == 40 && row("slow_path").on_time == 0);
        assert!((row("slow_path").ratio - 40.0 / 43.0 * 52.0).abs() < 1e-9);
        assert!(!row("fast_path").over && row("fast_path").ratio == 0.0);
        assert!(!row("main").over, "every sample has main: ratio 1");
        assert!(!row("irq").over, "3 late samples are too few: {:?}", row("irq"));
        assert!(rows[..2].iter().all(|r| r.over) && !rows[2].over, "the over-represented first: {rows:?}");
        let leaf = LateRow::rank(leaf, 43, 52, 10);
        assert!(leaf.iter().any(|r| r.function == "gettime" && r.over));
        assert!(!leaf.iter().any(|r| r.function == "slow_path"), "not innermost");
        assert_eq!(folded[0], Folded { stack: "main;slow_path;gettime".into(), samples: 40 });
        assert_eq!(folded[1], Folded { stack: "main;irq [k]".into(), samples: 3 });
    }
}
