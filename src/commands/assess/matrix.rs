//! The assessment's cells measured in order: each under its load, started
//! (and ramped up, and sampled) when the cell before ran under another.

use super::Options;
use super::plan::Plan;
use crate::cli::registry::Built;
use crate::load::Running;
use crate::load::sampler::Sampler;
use crate::probe::Cell;
use crate::session::{CellOutcome, OpenRun};
use crate::sys::clock;
use crate::sys::sched::Policy;
use anyhow::{Context, Result};
use rtscope_model::characterisation::Accumulator;
use rtscope_model::episode::TraceSummary;
use rtscope_model::inventory::format_cpu_list;
use rtscope_model::units;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

/// The running load and its characterisation so far.
struct Active {
    index: usize,
    running: Running,
    sampler: Sampler,
}

/// Sleeps `ns` unless a signal comes.
fn wait(ns: u64, signal: &AtomicBool) {
    let end = clock::now() + ns;
    while clock::now() < end && !signal.load(Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The cells measured so far: their outcomes, the loads' characterisations
/// and failures, the notes and the trace summary; and the load running.
pub(super) struct Matrix {
    pub(super) accs: Vec<Accumulator>,
    pub(super) failures: Vec<Option<String>>,
    pub(super) outcomes: Vec<CellOutcome>,
    pub(super) notes: Vec<String>,
    pub(super) trace: TraceSummary,
    active: Option<Active>,
}

impl Matrix {
    pub(super) fn new(plan: &Plan) -> Matrix {
        Matrix {
            accs: plan.loads.iter().map(|l| Accumulator::new(&l.label, &l.cpus)).collect(),
            failures: vec![None; plan.loads.len()],
            outcomes: Vec::new(),
            notes: Vec::new(),
            trace: TraceSummary::default(),
            active: None,
        }
    }

    /// Measures the plan's cells in order until they are done, a signal
    /// comes or a cell ends the assessment (a store error, a breach).
    pub(super) fn measure(
        &mut self,
        plan: &Plan,
        effective: &[(Policy, u8)],
        run: &mut OpenRun,
        opts: &Options,
        signal: &Arc<AtomicBool>,
    ) -> Result<()> {
        for (n, &(l, _)) in plan.cells.iter().enumerate() {
            if signal.load(Relaxed) {
                break;
            }
            self.switch_load(plan, l, opts, signal)?;
            if !self.cell(plan, n, effective, run, opts, signal)? {
                break;
            }
        }
        Ok(())
    }

    /// Starts load `l` unless it runs already (stopping the one that
    /// does): it ramps up, then the /proc sampler characterises it.
    fn switch_load(&mut self, plan: &Plan, l: usize, opts: &Options, signal: &Arc<AtomicBool>) -> Result<()> {
        if self.active.as_ref().is_some_and(|a| a.index == l) {
            return Ok(());
        }
        self.stop_load();
        let spec = &plan.loads[l];
        if !opts.quiet {
            eprintln!(
                "load {} on CPUs {}: ramping up {}",
                spec.label,
                format_cpu_list(&spec.cpus),
                units::human(plan.ramp_ns)
            );
        }
        let running = Running::start(spec, signal)?;
        wait(plan.ramp_ns, signal);
        let acc = std::mem::take(&mut self.accs[l]);
        let sampler = Sampler::start(acc).context("starting the /proc sampler")?;
        self.active = Some(Active { index: l, running, sampler });
        Ok(())
    }

    /// Stops the active load; its errors become notes, its failure is
    /// kept (by load).
    pub(super) fn stop_load(&mut self) {
        if let Some(a) = self.active.take() {
            self.accs[a.index] = a.sampler.stop();
            if let Some(f) = a.running.failure() {
                self.failures[a.index].get_or_insert(f);
            }
            let label = a.running.label.clone();
            self.notes.extend(a.running.stop().into_iter().map(|e| format!("load {label}: {e}")));
        }
    }

    /// Why load `l` failed, when it did (it is the active one).
    fn load_failure(&self, l: usize) -> Option<String> {
        self.active.as_ref().and_then(|a| a.running.failure()).or(self.failures[l].clone())
    }

    /// The cell that probe `p` leads, under `label`: its instances
    /// measured together with it, each at its scheduling.
    fn prepare<'p>(
        plan: &'p Plan,
        p: usize,
        effective: &[(Policy, u8)],
        label: &str,
        warnings: &mut Vec<rtscope_model::inventory::Warning>,
    ) -> Result<Cell<'p>> {
        let mut parts = Vec::new();
        for &q in &plan.together[p] {
            if let Built::PerCpu(common, probe) = &plan.probes[q] {
                parts.push((probe.as_ref(), common.as_ref(), effective[q]));
            }
        }
        let (probe, common, first) = parts.remove(0);
        let cell = Cell::prepare(probe, common, first, Some(label.to_string()), warnings)?;
        cell.with(&parts, "instances = \"in-turn\" in the plan, or --instances-in-turn", warnings)
    }

    /// Measures cell `n` under its load, now running. Returns false when
    /// the assessment must stop (a store error, a breach).
    fn cell(
        &mut self,
        plan: &Plan,
        n: usize,
        effective: &[(Policy, u8)],
        run: &mut OpenRun,
        opts: &Options,
        signal: &Arc<AtomicBool>,
    ) -> Result<bool> {
        let (l, p) = plan.cells[n];
        let label = plan.loads[l].label.clone();
        let name = plan.cell_name(p);
        if !opts.quiet {
            eprintln!("[{}/{}] {name} under {label}", n + 1, plan.cells.len());
        }
        // A load that failed (its command cannot start, or keeps
        // failing at once) fails its cells: what would be measured is
        // not the machine under that load.
        if let Some(f) = self.load_failure(l) {
            if !opts.quiet {
                eprintln!("rtscope: load {label} failed: {f}");
            }
            self.outcomes.push(CellOutcome {
                errors: vec![format!("{name} under {label}: not measured: load {label} failed: {f}")],
                ..Default::default()
            });
            return Ok(true);
        }
        let mut outcome = match &plan.probes[p] {
            Built::PerCpu(..) => {
                let mut warnings = Vec::new();
                let cell = Self::prepare(plan, p, effective, &label, &mut warnings);
                for w in warnings {
                    self.notes.push(format!("{name} under {label}: {} (fix: {})", w.message, w.fix));
                }
                match cell {
                    Ok(cell) => cell.measure(run, signal)?,
                    Err(e) => {
                        CellOutcome { errors: vec![format!("{name} under {label}: {e:#}")], ..Default::default() }
                    }
                }
            }
            Built::Own(o) => o.measure(run, &label, plan.cell_ns, effective[p], signal)?,
        };
        if let Some(f) = self.load_failure(l) {
            outcome.errors.push(format!("{name} under {label}: load {label} failed while it was measured: {f}"));
        }
        if let Some(t) = &outcome.trace {
            self.trace.absorb(t);
        }
        let stop = outcome.store_error.is_some() || outcome.breach.is_some();
        self.outcomes.push(outcome);
        if stop {
            return Ok(false);
        }
        if let Some(a) = &self.active {
            let errors = a.running.errors();
            if !errors.is_empty() && !opts.quiet {
                for e in &errors {
                    eprintln!("rtscope: load {label}: {e}");
                }
            }
        }
        Ok(true)
    }
}
