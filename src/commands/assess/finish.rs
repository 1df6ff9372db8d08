//! The assessment's end: the loads' characterisation and the trace
//! summary stored, the run finished with its status, then judged against
//! what is stored with it and printed.

use super::Options;
use super::matrix::Matrix;
use super::plan::Plan;
use crate::load::{self, LoadSpec};
use crate::report::{self, Input};
use crate::session::{OpenRun, verdict};
use anyhow::Result;
use rtscope_model::characterisation::{Accumulator, Characterisation};
use rtscope_model::run::{Run, RunStatus};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Each load's characterisation (those sampled), its target checked and
/// its failure kept; a note for each flagged check.
fn characterise(
    loads: &[LoadSpec],
    accs: &[Accumulator],
    failures: &[Option<String>],
    notes: &mut Vec<String>,
) -> Vec<Characterisation> {
    let mut out = Vec::new();
    for ((spec, acc), failure) in loads.iter().zip(accs).zip(failures) {
        if acc.covered_ns() == 0 {
            continue;
        }
        let mut c = acc.finish();
        if failure.is_none() {
            c.checks = load::target(spec).map(|t| c.check(&t)).into_iter().collect();
        }
        c.failure = failure.clone();
        notes.extend(c.checks.iter().filter(|k| k.flagged).map(|k| format!("load check: {}", k.message)));
        out.push(c);
    }
    out
}

/// Ends the assessment after its cells (`result`: whether their loop
/// failed): stops the load, stores the characterisation and the trace
/// summary, finishes the run with its status, then judges it and prints it.
pub(super) fn finish(
    plan: &Plan,
    mut m: Matrix,
    mut run: OpenRun,
    result: Result<()>,
    opts: &Options,
    signal: &Arc<AtomicBool>,
) -> Result<i32> {
    let run_id = run.run_id;
    m.stop_load();
    m.notes.dedup();
    let characterisation = characterise(&plan.loads, &m.accs, &m.failures, &mut m.notes);
    let stored = m.outcomes.iter().all(|o| o.store_error.is_none());
    if stored {
        let store = run.store()?;
        store.put_run_data(run_id, "characterisation", &serde_json::to_value(&characterisation)?)?;
        if !m.trace.instance.is_empty() {
            store.put_run_data(run_id, "trace", &serde_json::to_value(&m.trace)?)?;
        }
    }
    if !plan.untraced.is_empty() {
        m.notes.push(format!("--trace: {} measured without it (not supported yet)", plan.untraced.join(", ")));
    }
    let (mut status, mut code, more) = verdict(&mut m.outcomes, signal);
    m.notes.extend(more);
    if let Err(e) = &result {
        m.notes.push(format!("the assessment stopped: {e:#}"));
        (status, code) = (RunStatus::Failed, 1);
    }
    let loaded = run.finish(status, code, &m.notes);
    if let Some(e) = m.outcomes.iter_mut().find_map(|o| o.store_error.take()) {
        return Err(e.context(format!("run {run_id} ended failed")));
    }
    result?;
    judge_and_print(&loaded?, opts, code)
}

/// Judges the finished run `loaded` against the requirements stored with
/// it, as `rtscope analyze` would, and prints it: the details, the
/// verdicts, then the answer last (and writes --json); a failed one turns exit code `code` 0 into 2. So does
/// the task set stored with it: a set that misses a deadline with the
/// measured release jitter counts as a failed requirement.
fn judge_and_print(loaded: &Run, opts: &Options, code: i32) -> Result<i32> {
    // The yardstick too: the summary shows it, it never changes the exit code.
    let asked = crate::judge::asked(loaded, &Default::default(), true)?;
    let set = crate::judge::asked_set(loaded, &Default::default())?;
    let (verdicts, sched) = crate::judge::judge(loaded, &asked, set.as_ref());
    // The JSON's verdict keys are those of a run with requirements or a
    // task set (the summary's own block has the yardstick's verdict).
    let gated = (!asked.reqs.is_empty() && asked.source != crate::judge::ReqSource::Default) || set.is_some();
    let judged = gated.then(|| crate::judge::Judged::new(&asked, &verdicts, set.as_ref(), sched.as_ref()));
    // The answer last, after the details and the verdicts: a terminal keeps it.
    let input = Input { judged: judged.as_ref(), answer_last: true, ..Input::one(loaded) };
    let printing = crate::commands::write_run(&input, &[("--json", report::JSON, opts.json.as_deref())], &opts.db)?;
    if !verdicts.is_empty() && printing {
        let mut out = std::io::stdout().lock();
        writeln!(out)?;
        report::analyze::write_verdicts(&verdicts, &asked.origin(), &mut out)?;
    }
    if let Some(note) = asked.short_note(&verdicts) {
        eprintln!("rtscope: {note}");
    }
    if let (Some(set), Some(s), true) = (&set, &sched, printing) {
        let mut out = std::io::stdout().lock();
        writeln!(out)?;
        report::analyze::write_schedulability(s, &set.origin(), &mut out)?;
    }
    if printing {
        let colour = report::colour_on_stdout();
        report::write_answer(&Input { colour, ..input }, &mut std::io::stdout().lock())?;
    }
    let failed = judged.as_ref().is_some_and(|j| !j.passed);
    Ok(if failed && code == 0 { 2 } else { code })
}
