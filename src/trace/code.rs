//! Setting up what takes the causes down to the code: the stack instance
//! (`--stacks`, timed before measuring starts) and the per-CPU profilers
//! (`--sample-hz`). Each degrades to a note, never an error.

use super::instance::Instance;
use super::stacks::{self, StackDecoder};
use super::{CHEAP_STACKS_NS, CodeReport, StacksMode};
use crate::sys::perf::Sampler;
use std::collections::VecDeque;
use std::fs::File;

/// How long the probe's threads are watched before the start: they wake
/// every millisecond while they wait, each wake-up's stacks timed.
const CALIBRATION_MS: u64 = 60;
/// The profiler's ring per CPU, in pages (256 kB: over half a second of
/// samples at 2 kHz with deep stacks).
const PROFILE_PAGES: usize = 64;

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
    let mut costs: Vec<u64> = Vec::new();
    let mut decoders = Vec::new();
    for f in &mut files {
        let mut dec = si.decoder();
        let mut got = VecDeque::new();
        stacks::drain(f, &inst.layout, &mut page, &mut dec, &|ts| Some(ts), &mut got);
        dec.flush(&mut got);
        costs.extend(got.iter().filter(|w| !w.kernel.is_empty()).map(|w| w.cost_ns));
        decoders.push(si.decoder());
    }
    costs.sort_unstable();
    let p50 = costs.get(costs.len() / 2).copied();
    code.calibrated_ns = p50;
    let cost = p50.map_or("unknown (no wake-up seen)".to_string(), |c| format!("{:.2}us", c as f64 / 1000.0));
    let cheap = p50.is_some_and(|c| c <= CHEAP_STACKS_NS);
    if mode == StacksMode::Auto && !cheap {
        // Its buffers closed first: an instance with open files stays.
        drop(files);
        inst.stacks = None;
        code.stack_notes.push(format!(
            "auto: off: recording a wake-up's stacks costs {cost} here (the kernel's unwind, on the wake-up path; \
             auto takes them up to {:.1}us); --stacks on takes them anyway",
            CHEAP_STACKS_NS as f64 / 1000.0
        ));
        return None;
    }
    code.stack_notes.push(format!("recording a wake-up's stacks cost {cost} before the start (median)"));
    // Measured on every wake-up (the idle loop's stacks among them), then
    // kept only where the timer interrupted a task.
    match si.busy_only(tids) {
        Ok(()) => code.stack_notes.push(
            "taken only at the wake-ups whose timer interrupt came while a task ran: at an idle one the trace \
             already shows the idle loop, and skipping its unwind spares the quiet wake-ups"
                .into(),
        ),
        Err(e) => code.stack_notes.push(format!("taken at every wake-up, the idle loop's too ({e})")),
    }
    Some(files.into_iter().zip(decoders).collect())
}

/// One profiler per CPU, disabled; None with a note when one cannot open.
pub fn samplers(cpus: &[usize], hz: u64, code: &mut CodeReport) -> Option<Vec<Sampler>> {
    let mut out = Vec::new();
    for &c in cpus {
        match Sampler::open(c, hz, PROFILE_PAGES) {
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
    }
    Some(out)
}
