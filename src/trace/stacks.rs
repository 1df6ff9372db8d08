//! `--stacks`: the kernel and user stacks of whatever ran on a probe's CPU
//! at the moment the probe's timer woke it. A second tracefs instance,
//! `instances/rtscope-<pid>-stacks`, has one event: `sched:sched_waking`,
//! filtered to the probe's threads (once the unwind has been timed, to
//! the wake-ups that interrupted a task: [`filter`]), with its `stacktrace` and
//! `userstacktrace` options on, so that each such wake-up of a probe thread is
//! followed in that instance's ring by a `kernel_stack` record (the
//! interrupt's frames, then the interrupted code's when it was in the
//! kernel) and a `user_stack` record (the interrupted task's user frames:
//! its instruction pointer, then a frame-pointer walk). In its own
//! instance, the options cost nothing to the main instance's events. The
//! records are decoded from the binary buffer with the `format` files of
//! `events/ftrace/kernel_stack` and `user_stack`, as every other event.

use super::event::{field, int};
use super::format::{Field, Format, PageLayout};
use super::page::Page;
use crate::sys::tracefs::{create_registered, open_buffers, remove_registered, write};
use std::collections::VecDeque;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Per-CPU buffer of the stack instance: a wake-up's stacks are about
/// 300 bytes, 300 kB/s per CPU at 1 kHz; the reader drains every 10 ms.
const BUFFER_KB: u64 = 1024;
/// Frames kept per stack.
pub const MAX_FRAMES: usize = 64;

/// One probe wake-up with the stacks that followed it in the ring.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WakeStack {
    /// The `sched_waking` record's time (mapped to CLOCK_MONOTONIC).
    pub ts: u64,
    /// The woken probe thread.
    pub woken: i32,
    /// The task that was running (the interrupted one; 0: idle).
    pub pid: i32,
    /// Kernel frames, innermost first.
    pub kernel: Vec<u64>,
    /// The kernel stack record's time minus the waking's: the unwind's cost.
    pub cost_ns: u64,
    /// The last stack record's time (the user stack's, where one came)
    /// minus the waking's: what recording the stacks added to the probe's
    /// timer interrupt.
    pub unwind_ns: u64,
    /// User frames, innermost first, and the process they belong to.
    pub user: Vec<u64>,
    pub tgid: i32,
}

#[derive(Clone, Debug)]
struct Ids {
    waking: u16,
    waking_pid: Field,
    kernel: u16,
    kernel_size: Field,
    kernel_caller: Field,
    user: u16,
    user_tgid: Field,
    user_caller: Field,
}

/// The stack instance.
pub struct StackInstance {
    pub dir: PathBuf,
    ids: Ids,
}

fn format_of(root: &Path, event: &str) -> Result<Format, String> {
    let p = root.join("events").join(event).join("format");
    let text = std::fs::read_to_string(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
    Format::parse(&text)
}

/// The filter that keeps only the probe threads' wake-ups; `busy`: only
/// those whose timer interrupt came while a task ran (`common_pid`, the
/// interrupted task, is not the idle task's 0). The idle loop's stack is
/// the same at every idle wake-up, and the trace already says the CPU was
/// idle: skipping it spares the kernel's unwind on every quiet wake-up.
pub fn filter(tids: &[i32], busy: bool) -> String {
    let any = tids.iter().map(|t| format!("pid == {t}")).collect::<Vec<_>>().join(" || ");
    if busy { format!("({any}) && common_pid != 0") } else { any }
}

impl StackInstance {
    /// Creates `<main>-stacks` beside the main instance, tracing off, for
    /// the wake-ups of `tids`, with the main instance's `clock`.
    /// `cpumask`: the main instance's `tracing_cpumask`.
    pub fn create(root: &Path, main: &str, cpumask: &str, clock: &str, tids: &[i32]) -> Result<StackInstance, String> {
        let ids = Ids::read(root)?;
        let dir = root.join("instances").join(format!("{main}-stacks"));
        create_registered(&dir)?;
        // From here on, Drop removes it on any error.
        let inst = StackInstance { dir, ids };
        let d = &inst.dir;
        write(&d.join("tracing_on"), "0")?;
        write(&d.join("trace_clock"), clock)?;
        write(&d.join("buffer_size_kb"), &BUFFER_KB.to_string())?;
        write(&d.join("tracing_cpumask"), cpumask)?;
        inst.set_filter(tids, false)?;
        write(&d.join("events/sched/sched_waking/enable"), "1")?;
        write(&d.join("options/stacktrace"), "1")?;
        write(&d.join("options/userstacktrace"), "1")?;
        Ok(inst)
    }

    pub fn set_on(&self, on: bool) -> Result<(), String> {
        write(&self.dir.join("tracing_on"), if on { "1" } else { "0" })
    }

    /// Stacks at the wake-ups of `tids`; `busy`: only at those that
    /// interrupted a task (see [`filter`]). The kernel leaves the event
    /// unfiltered when it refuses a filter.
    pub fn set_filter(&self, tids: &[i32], busy: bool) -> Result<(), String> {
        write(&self.dir.join("events/sched/sched_waking/filter"), &filter(tids, busy))
    }

    /// Opens the per-CPU binary buffers, non-blocking.
    pub fn buffers(&self, cpus: &[usize]) -> Result<Vec<File>, String> {
        open_buffers(&self.dir, cpus)
    }

    /// The decoder of this instance's records.
    pub fn decoder(&self) -> StackDecoder {
        StackDecoder { ids: self.ids.clone(), partial: None }
    }
}

impl Drop for StackInstance {
    fn drop(&mut self) {
        let _ = self.set_on(false);
        remove_registered(&self.dir);
    }
}

impl Ids {
    fn read(root: &Path) -> Result<Ids, String> {
        let w = format_of(root, "sched/sched_waking")?;
        let k = format_of(root, "ftrace/kernel_stack")?;
        let u = format_of(root, "ftrace/user_stack")?;
        Ok(Ids {
            waking: w.id,
            waking_pid: field(&w, "pid")?,
            kernel: k.id,
            kernel_size: field(&k, "size")?,
            kernel_caller: field(&k, "caller")?,
            user: u.id,
            user_tgid: field(&u, "tgid")?,
            user_caller: field(&u, "caller")?,
        })
    }

    #[cfg(test)]
    fn from_formats(w: &Format, k: &Format, u: &Format) -> Ids {
        Ids {
            waking: w.id,
            waking_pid: field(w, "pid").unwrap(),
            kernel: k.id,
            kernel_size: field(k, "size").unwrap(),
            kernel_caller: field(k, "caller").unwrap(),
            user: u.id,
            user_tgid: field(u, "tgid").unwrap(),
            user_caller: field(u, "caller").unwrap(),
        }
    }
}

/// `n` addresses from `at`, stopping at the end of the record or a zero.
fn addrs(p: &[u8], at: usize, n: usize) -> Vec<u64> {
    (0..n.min(MAX_FRAMES))
        .map_while(|i| p.get(at + 8 * i..at + 8 * i + 8))
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
        .take_while(|&a| a != 0)
        .collect()
}

/// Decodes the stack instance's records into [`WakeStack`]s.
pub struct StackDecoder {
    ids: Ids,
    /// The wake-up whose stacks are still coming.
    partial: Option<WakeStack>,
}

impl StackDecoder {
    #[cfg(test)]
    fn new(ids: Ids) -> StackDecoder {
        StackDecoder { ids, partial: None }
    }

    /// Takes one record (time already mapped to CLOCK_MONOTONIC); a
    /// wake-up is handed to `out` once its stacks are in (or the next
    /// wake-up begins).
    pub fn push(&mut self, ts: u64, p: &[u8], out: &mut VecDeque<WakeStack>) {
        let Some(id) = p.get(..2).map(|b| u16::from_le_bytes([b[0], b[1]])) else { return };
        let common_pid = p.get(4..8).map_or(-1, |b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        let ids = &self.ids;
        if id == ids.waking {
            if let Some(w) = self.partial.take() {
                out.push_back(w);
            }
            self.partial =
                Some(WakeStack { ts, woken: int(p, &ids.waking_pid) as i32, pid: common_pid, ..Default::default() });
        } else if id == ids.kernel {
            if let Some(w) = self.partial.as_mut().filter(|w| w.kernel.is_empty()) {
                let n = int(p, &ids.kernel_size).max(0) as usize;
                w.kernel = addrs(p, ids.kernel_caller.offset, n);
                w.cost_ns = ts.saturating_sub(w.ts);
                w.unwind_ns = w.cost_ns;
            }
        } else if id == ids.user
            && let Some(mut w) = self.partial.take()
        {
            w.tgid = int(p, &ids.user_tgid) as i32;
            w.unwind_ns = ts.saturating_sub(w.ts);
            w.user = addrs(p, ids.user_caller.offset, ids.user_caller.size / 8);
            out.push_back(w);
        }
    }

    /// Hands over a wake-up still waiting for its user stack (none comes
    /// for a kernel thread).
    pub fn flush(&mut self, out: &mut VecDeque<WakeStack>) {
        if let Some(w) = self.partial.take() {
            out.push_back(w);
        }
    }
}

/// Reads every page of one CPU's stack buffer; `map` turns a trace-clock
/// time into CLOCK_MONOTONIC (None: not yet mappable, the record is
/// skipped). Returns (bytes, events lost by the kernel).
pub fn drain(
    buffer: &mut File,
    layout: &PageLayout,
    page: &mut [u8],
    dec: &mut StackDecoder,
    map: &dyn Fn(u64) -> Option<u64>,
    out: &mut VecDeque<WakeStack>,
) -> (u64, u64) {
    let (mut bytes, mut lost) = (0, 0);
    loop {
        match buffer.read(page) {
            Ok(0) => break,
            Ok(n) => {
                bytes += n as u64;
                let Ok(p) = Page::parse(layout, &page[..n]) else { continue };
                lost += p.missed.unwrap_or(0);
                for r in p.records() {
                    if let Some(ts) = map(r.ts) {
                        dec.push(ts, r.payload, out);
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    (bytes, lost)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAKING: &str = "name: sched_waking\nID: 375\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n";
    const KSTACK: &str = "name: kernel_stack\nID: 4\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:int size;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:unsigned long caller[8];\toffset:16;\tsize:64;\tsigned:0;\n";
    const USTACK: &str = "name: user_stack\nID: 13\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:unsigned int tgid;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:unsigned long caller[8];\toffset:16;\tsize:64;\tsigned:0;\n";

    fn decoder() -> StackDecoder {
        let f = |t: &str| Format::parse(t).unwrap();
        StackDecoder::new(Ids::from_formats(&f(WAKING), &f(KSTACK), &f(USTACK)))
    }

    fn head(id: u16, pid: i32, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[..2].copy_from_slice(&id.to_le_bytes());
        b[4..8].copy_from_slice(&pid.to_le_bytes());
        b
    }

    /// A kernel stack longer than the format's `caller[8]` (the kernel
    /// records `size` entries), and a user stack ended by a zero.
    #[test]
    fn a_wakeup_collects_the_stacks_after_it() {
        let mut d = decoder();
        let mut out = VecDeque::new();
        let mut w = head(375, 555, 32);
        w[24..28].copy_from_slice(&77i32.to_le_bytes());
        d.push(1_000, &w, &mut out);
        let mut k = head(4, 555, 16 + 10 * 8);
        k[8..12].copy_from_slice(&10i32.to_le_bytes());
        for i in 0..10u64 {
            k[16 + 8 * i as usize..24 + 8 * i as usize].copy_from_slice(&(0xffff_ffff_8100_0000 + i).to_le_bytes());
        }
        d.push(3_500, &k, &mut out);
        assert!(out.is_empty(), "waits for the user stack");
        let mut u = head(13, 555, 80);
        u[8..12].copy_from_slice(&555u32.to_le_bytes());
        u[16..24].copy_from_slice(&0x5555_1234u64.to_le_bytes());
        u[24..32].copy_from_slice(&0x5555_0042u64.to_le_bytes());
        d.push(3_600, &u, &mut out);
        let got = out.pop_front().unwrap();
        assert_eq!((got.ts, got.woken, got.pid, got.tgid, got.cost_ns), (1_000, 77, 555, 555, 2_500));
        assert_eq!(got.kernel.len(), 10);
        assert_eq!(got.kernel[9], 0xffff_ffff_8100_0009);
        assert_eq!(got.user, [0x5555_1234, 0x5555_0042]);
        // A kernel thread's wake-up has no user stack: the next one ends it.
        d.push(5_000, &w, &mut out);
        d.push(6_000, &w, &mut out);
        assert_eq!(out.len(), 1);
        d.flush(&mut out);
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|x| x.kernel.is_empty() && x.user.is_empty()));
    }

    #[test]
    fn the_filter_names_every_thread() {
        assert_eq!(filter(&[12, 34], false), "pid == 12 || pid == 34");
        assert_eq!(filter(&[12, 34], true), "(pid == 12 || pid == 34) && common_pid != 0");
    }
}
