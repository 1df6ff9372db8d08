//! Setting up what takes the causes down to the code: the stack instance
//! (`--stacks`, timed before measuring starts) and the per-CPU profilers
//! (`--sample-hz`). Each degrades to a note, never an error.

use super::instance::Instance;
use super::stacks::{self, StackDecoder};
use super::{CHEAP_STACKS_NS, CodeReport, StacksMode};
use crate::sys::perf::{self, MapWatch, Sampler};
use std::collections::VecDeque;
use std::fs::File;

/// How long the probe's threads are watched before the start: they wake
/// every millisecond while they wait, each wake-up's stacks timed.
const CALIBRATION_MS: u64 = 60;
/// Wake-ups that interrupted a task, at least, to time the unwind on them
/// rather than on the idle loop's.
const MIN_BUSY: usize = 5;
/// The mapping records' ring per CPU, in pages (64 kB: some 500 mappings,
/// a burst of execs in the reader's 10 ms).
const MAP_PAGES: usize = 16;

/// The stack instance's per-CPU buffers and decoders, once the cost of a
/// wake-up's stacks is known and (with `auto`) small enough; None, with a
/// note in `code`, otherwise.
pub fn stacks(
    inst: &mut Instance,
    cpus: &[usize],
    tids: &[i32],
    mode: StacksMode,
    code: &mut CodeReport,
) -> Option<Vec<(File, StackDecoder)>> {
    if mode == StacksMode::Off {
        return None;
    }
    let fail = |code: &mut CodeReport, e: String| {
        code.stack_notes.push(format!("{e}; no stacks"));
        None
    };
    if let Err(e) = inst.add_stacks(cpus, tids) {
        return fail(code, e);
    }
    let si = inst.stacks.as_ref()?;
    let mut files = match si.buffers(cpus) {
        Ok(f) => f,
        Err(e) => {
            inst.stacks = None;
            return fail(code, e);
        }
    };
    if let Err(e) = si.set_on(true) {
        drop(files);
        inst.stacks = None;
        return fail(code, e);
    }
    std::thread::sleep(std::time::Duration::from_millis(CALIBRATION_MS));
    let _ = si.set_on(false);
    let mut page = vec![0u8; inst.layout.page_size];
    // (interrupted pid, unwind ns) of each wake-up timed.
    let mut timed: Vec<(i32, u64)> = Vec::new();
    let mut decoders = Vec::new();
    for f in &mut files {
        let mut dec = si.decoder();
        let mut got = VecDeque::new();
        stacks::drain(f, &inst.layout, &mut page, &mut dec, &|ts| Some(ts), &mut got);
        dec.flush(&mut got);
        timed.extend(got.iter().filter(|w| !w.kernel.is_empty()).map(|w| (w.pid, w.cost_ns)));
        decoders.push(si.decoder());
    }
    // The stacks kept are those of running tasks (below): timed on them
    // where enough came, else on the idle loop's, which are shallower.
    let busy: Vec<u64> = timed.iter().filter(|t| t.0 != 0).map(|t| t.1).collect();
    let (mut costs, on_idle) =
        if busy.len() >= MIN_BUSY { (busy, false) } else { (timed.iter().map(|t| t.1).collect(), true) };
    costs.sort_unstable();
    let p50 = costs.get(costs.len() / 2).copied();
    let cost = p50.map_or("unknown (no wake-up seen)".to_string(), |c| format!("{:.2}us", c as f64 / 1e3));
    let over = if on_idle && p50.is_some() {
        ", over the idle loop's stacks: a running task's is deeper and costs more"
    } else {
        ""
    };
    let cheap = p50.is_some_and(|c| c <= CHEAP_STACKS_NS);
    if mode == StacksMode::Auto && !cheap {
        // Its buffers closed first: an instance with open files stays.
        drop(files);
        inst.stacks = None;
        code.stack_notes.push(format!(
            "auto: off: recording a wake-up's stacks costs {cost} here (the kernel's unwind, on the wake-up path{over}; \
             auto takes them up to {:.1}us); --stacks on takes them anyway",
            CHEAP_STACKS_NS as f64 / 1000.0
        ));
        return None;
    }
    code.stack_notes.push(format!("recording a wake-up's stacks cost {cost} before the start (median{over})"));
    // Timed on every wake-up, then kept only where the timer interrupted a
    // task. A filter the kernel refuses leaves the event unfiltered: then
    // back to the probe's threads alone, else no stacks.
    match si.set_filter(tids, true) {
        Ok(()) => code.stack_notes.push(
            "taken only at the wake-ups whose timer interrupt came while a task ran: at an idle one the trace \
             already shows the idle loop, and skipping its unwind spares the quiet wake-ups"
                .into(),
        ),
        Err(e) => match si.set_filter(tids, false) {
            Ok(()) => code.stack_notes.push(format!("taken at every wake-up, the idle loop's too ({e})")),
            Err(again) => {
                drop(files);
                inst.stacks = None;
                return fail(code, format!("{e}; {again}"));
            }
        },
    }
    Some(files.into_iter().zip(decoders).collect())
}

/// One profiler per CPU, disabled; None with a note when one cannot open.
/// Its ring holds some 125 ms of samples with their user stacks
/// ([`perf::ring_pages`]).
pub fn samplers(cpus: &[usize], hz: u64, code: &mut CodeReport) -> Option<Vec<Sampler>> {
    let mut out = Vec::new();
    let pages = perf::ring_pages(hz, perf::stack_bytes(hz));
    for &c in cpus {
        match Sampler::open(c, hz, pages) {
            Ok(s) => out.push(s),
            Err(e) => {
                code.profile_notes.push(format!("{e}; no samples"));
                return None;
            }
        }
    }
    if let Some(s) = out.first() {
        code.profile_notes.push(format!(
            "{} at {hz} Hz per CPU: it cannot see {}",
            s.source.name(),
            s.source.blind_spot()
        ));
        code.cycles_refused.clone_from(&s.software_because);
        code.profile_notes.push(match &s.no_stack_because {
            Some(why) => why.clone(),
            None => format!(
                "each sample copies the user registers and {} bytes of the user stack (in the sampling interrupt, on the \
                 measured CPU; {} kB of ring per CPU), unwound after with the programs' own unwind tables, off the \
                 measured CPUs",
                s.stack_bytes,
                pages * 4
            ),
        });
    }
    Some(out)
}

/// The kernel's records of execs and executable mappings, on every online
/// CPU (a process maps its code wherever it runs); none, with a note in
/// `notes`, when one cannot open: processes are then read from their
/// `/proc/PID/maps` alone.
pub fn map_watches(notes: &mut Vec<String>) -> Vec<MapWatch> {
    match crate::sys::cpu::online().into_iter().map(|c| MapWatch::open(c, MAP_PAGES)).collect() {
        Ok(w) => w,
        Err(e) => {
            notes.push(format!(
                "--trace: {e}: a process's code mappings are read from /proc when a wake-up shows it, and one \
                 that lived under 10 ms goes unnamed"
            ));
            Vec::new()
        }
    }
}
