//! A run's lifecycle, the one every measurement records into: a
//! [`Session`] opens the store and takes the machine's settings (its
//! inventory and warnings, locked memory, `/dev/cpu_dma_latency`), then
//! becomes an [`OpenRun`] that cells record into; [`OpenRun::finish`] ends
//! it with the status, exit code and notes that [`verdict`] draws from the
//! cells' [`CellOutcome`]s. A per-CPU probe's cell is `probe::Cell`; a
//! measurement with its own runner (osbench) is an [`OwnCell`]. Nothing
//! here measures or prints.

use crate::sys::{clock, cpu, dma::DmaLatency, inventory, mem, sched, sched::Policy, signals};
use anyhow::{Result, anyhow};
use rtscope_model::episode::TraceSummary;
use rtscope_model::episode::timeline::Timeline;
use rtscope_model::inventory::{Interrupts, Inventory, PRIVILEGES_FIX, Warning, isolation_after};
use rtscope_model::run::{Run, RunHeader, RunStatus};
use rtscope_model::settings::{self, DmaHeld};
use rtscope_model::store::Store;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// A new run header for this process.
pub fn new_header(kind: &str, command_line: Vec<String>, representative: bool, warnings: Vec<Warning>) -> RunHeader {
    let started = clock::now_unix();
    let uuid = format!("{:016x}-{:08x}-{:016x}", started, std::process::id(), clock::now());
    let host = rustix::system::uname().nodename().to_string_lossy().into_owned();
    RunHeader { command_line, representative, warnings, ..RunHeader::new(kind, uuid, &host, started, clock::now()) }
}

/// Before a run exists: the store, the machine and what may make the run
/// unrepresentative. Locks memory and holds `/dev/cpu_dma_latency` for the
/// whole run.
pub struct Session {
    store: Store,
    db: PathBuf,
    pub inv: Inventory,
    pub warnings: Vec<Warning>,
    pub representative: bool,
    dma: Option<DmaLatency>,
    rt_refused: bool,
    /// The measured CPUs and `/proc/interrupts` when the session opened:
    /// what interrupted the isolated ones is told when the run ends.
    interrupts: Interrupted,
}

/// The measured CPUs and `/proc/interrupts` at the start (CLOCK_MONOTONIC).
#[derive(Default)]
struct Interrupted {
    measured: Vec<usize>,
    start: Option<(u64, Interrupts)>,
}

impl Interrupted {
    fn start(measured: &[usize]) -> Interrupted {
        let start = (!measured.is_empty()).then(|| inventory::interrupts().map(|t| (clock::now(), t))).flatten();
        Interrupted { measured: measured.to_vec(), start }
    }

    /// The notes on the isolated measured CPUs and the warning of what
    /// still disturbed them, from `/proc/interrupts` now.
    fn end(&self, inv: &Inventory) -> (Vec<String>, Vec<Warning>) {
        let Some((t0, before)) = &self.start else { return (Vec::new(), Vec::new()) };
        let Some(after) = inventory::interrupts() else { return (Vec::new(), Vec::new()) };
        let seconds = clock::now().saturating_sub(*t0) as f64 / 1e9;
        let own = crate::recorder::own_timers::own_on;
        let (notes, warning) = isolation_after(inv, &self.measured, (before, &after), seconds, &own);
        (notes, warning.into_iter().collect())
    }
}

impl Session {
    /// Opens the store at `db`, takes the machine's inventory (warnings for
    /// `cpus`), locks memory and, with `dma_latency`, holds
    /// `/dev/cpu_dma_latency` at its target (recorded in the inventory).
    pub fn open(db: &Path, cpus: &[usize], dma_latency: Option<settings::DmaLatency>) -> Result<Session> {
        let store = Store::open(db)?;
        let mut inv: Inventory = inventory::collect();
        let mut warnings = inv.warnings(cpus);
        let representative = inv.representative();
        if let Err(e) = mem::lock_all() {
            warnings.push(Warning {
                topic: "memory".into(),
                message: format!("mlockall failed ({e}): page faults may add latency"),
                fix: PRIVILEGES_FIX.into(),
            });
        }
        let dma = if let Some(target) = dma_latency {
            let us = target.us();
            match DmaLatency::hold(target) {
                Ok(d) => {
                    inv.dma_latency = DmaHeld::Held { us };
                    Some(d)
                }
                Err(e) => {
                    inv.dma_latency = DmaHeld::Refused { us };
                    warnings.push(Warning {
                        topic: "cstates".into(),
                        message: format!(
                            "cannot hold /dev/cpu_dma_latency at {us} ({e}): deep C-states may add exit latency"
                        ),
                        fix: "run as root, or pass --no-dma-latency to measure with C-states on purpose".into(),
                    });
                    None
                }
            }
        } else {
            inv.dma_latency = DmaHeld::NotHeld;
            None
        };
        let interrupts = Interrupted::start(cpus);
        Ok(Session { store, db: db.to_path_buf(), inv, warnings, representative, dma, rt_refused: false, interrupts })
    }

    /// A session for a run that measures nothing itself (`rtscope load`):
    /// the store and the machine's inventory, without warnings; memory is
    /// not locked and C-states are left as they are.
    pub fn open_unmeasured(db: &Path) -> Result<Session> {
        let store = Store::open(db)?;
        let inv: Inventory = inventory::collect();
        let representative = inv.representative();
        Ok(Session {
            store,
            db: db.to_path_buf(),
            inv,
            warnings: Vec::new(),
            representative,
            dma: None,
            rt_refused: false,
            interrupts: Interrupted::default(),
        })
    }

    /// The policy and priority a cell can have: the asked ones, or
    /// SCHED_OTHER (once with a warning, and the run is not representative)
    /// when real-time scheduling is refused.
    pub fn effective(&mut self, policy: Policy, priority: u8) -> (Policy, u8) {
        self.effective_or(policy, priority, &format!("priority {priority}"), "")
    }

    /// As [`Session::effective`], for two parties at their own priorities
    /// (osbench): the warning says what measuring without them loses.
    pub fn effective_parties(&mut self, policy: Policy, priority: u8) -> (Policy, u8) {
        self.effective_or(
            policy,
            priority,
            "priorities",
            ", where the higher-priority party does not preempt the lower one",
        )
    }

    /// The policy and priority a cell can have; the warning, when refused,
    /// names what was `asked` for and what measuring without it `loses`.
    fn effective_or(&mut self, policy: Policy, priority: u8, asked: &str, loses: &str) -> (Policy, u8) {
        if !policy.is_rt() {
            return (policy, priority);
        }
        let Some(fix) = sched::rt_refused(priority) else {
            return (policy, priority);
        };
        if !self.rt_refused {
            self.rt_refused = true;
            self.representative = false;
            self.warnings.insert(
                0,
                Warning {
                    topic: "privileges".into(),
                    message: format!(
                        "cannot use SCHED_{} {asked}: measuring at SCHED_OTHER{loses}; the run is NOT representative",
                        format!("{policy:?}").to_uppercase()
                    ),
                    fix,
                },
            );
        }
        (Policy::Other, 0)
    }

    /// Prints the warnings that matter (not the informational ones).
    pub fn print_warnings(&self) {
        for w in self.warnings.iter().filter(|w| !w.is_informational()) {
            eprintln!("rtscope: warning: {} (fix: {})", w.message, w.fix);
        }
    }

    /// Pins the calling thread (and so the threads it creates: the writer,
    /// the trace reader) off the measured CPUs and their SMT siblings.
    /// Returns those housekeeping CPUs' description for the plan.
    pub fn pin_housekeeping(&self, measured: &[usize]) -> String {
        let housekeeping = self.pin_housekeeping_cpus(measured);
        if housekeeping.is_empty() {
            return "none: every CPU is measured, rtscope's writer shares them at SCHED_OTHER".to_string();
        }
        rtscope_model::inventory::format_cpu_list(&housekeeping)
    }

    /// As [`Session::pin_housekeeping`]; returns the housekeeping CPUs
    /// (none when every CPU is measured: then the thread stays unpinned).
    pub fn pin_housekeeping_cpus(&self, measured: &[usize]) -> Vec<usize> {
        cpu::pin_housekeeping(measured, &self.inv.siblings)
    }

    /// Stores the run as `running` with its plan.
    pub fn create(mut self, kind: &str, plan: &serde_json::Value) -> Result<OpenRun> {
        let header = new_header(kind, std::env::args().collect(), self.representative, self.warnings);
        let run_id = self.store.create_run(&header, &self.inv, plan)?;
        signals::recording(run_id);
        let reserve = Reserve::make(&self.db);
        Ok(OpenRun {
            store: Some(self.store),
            db: self.db,
            run_id,
            _dma: self.dma,
            inv: self.inv,
            interrupts: self.interrupts,
            reserve,
        })
    }
}

/// Disk space held beside the store while a run is recorded, given back
/// when the disk fills, so that the run can still be ended `failed` with
/// what happened (a full disk), not left `running` for the next rtscope
/// to call a crash: a hidden file `.NAME.rtscope-reserve-PID-N` of
/// [`Reserve::BYTES`] in the store's directory, registered with the
/// janitor (which removes it after a SIGKILL) before it is made, removed
/// when the run ends. None where it cannot be had (no janitor, no room):
/// the run is recorded as before.
struct Reserve {
    path: PathBuf,
}

impl Reserve {
    /// Enough for a run's end (its status and notes: a few pages of the
    /// write-ahead log).
    const BYTES: usize = 256 << 10;
    const TAG: &str = ".rtscope-reserve-";

    fn make(db: &Path) -> Option<Reserve> {
        use std::io::Write;
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = db.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = db.file_name()?.to_string_lossy().into_owned();
        Reserve::remove_stale(dir, &name);
        let n = NEXT.fetch_add(1, Relaxed);
        let path = dir.join(format!(".{name}{}{}-{n}", Reserve::TAG, std::process::id()));
        let registry = crate::sys::ipc::janitor().ok()?.registry();
        if !registry.add_path(crate::sys::ipc::Leftover::Tree, &path) {
            return None;
        }
        let reserve = Reserve { path };
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&reserve.path).ok()?;
        // Written, not a sparse length: the blocks are the disk's now.
        f.write_all(&vec![0u8; Reserve::BYTES]).ok()?;
        Some(reserve)
    }

    /// Removes the reserves of rtscope processes gone without removing
    /// theirs (their janitor killed too).
    fn remove_stale(dir: &Path, name: &str) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let prefix = format!(".{name}{}", Reserve::TAG);
        for e in entries.flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            let pid = file.strip_prefix(&prefix).and_then(|r| r.split('-').next()?.parse::<u32>().ok());
            if pid.is_some_and(|p| !crate::sys::process::alive(p)) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        if let Ok(j) = crate::sys::ipc::janitor() {
            j.registry().remove_path(crate::sys::ipc::Leftover::Tree, &self.path);
        }
    }
}

/// A run in the store, being recorded.
pub struct OpenRun {
    /// None while a cell's writer thread has it.
    store: Option<Store>,
    pub db: PathBuf,
    pub run_id: i64,
    _dma: Option<DmaLatency>,
    inv: Inventory,
    interrupts: Interrupted,
    reserve: Option<Reserve>,
}

impl OpenRun {
    pub fn store(&mut self) -> Result<&mut Store> {
        self.store.as_mut().ok_or_else(|| anyhow!("the run store was lost with the writer thread"))
    }

    /// Hands the store to a cell's writer thread; [`OpenRun::put_store`]
    /// gives it back.
    pub fn take_store(&mut self) -> Result<Store> {
        self.store.take().ok_or_else(|| anyhow!("the run store was lost with the writer thread"))
    }

    /// The store, back from a cell's writer thread.
    pub fn put_store(&mut self, store: Store) {
        self.store = Some(store);
    }

    /// Adds a traced cell's timeline of its whole window to the run's, and
    /// says in `notes` when the timeline was cut to fit its limit or could
    /// not be stored.
    pub fn store_timeline(&mut self, timeline: Option<Timeline>, notes: &mut Vec<String>) {
        let Some(t) = timeline.filter(|t| !t.is_off()) else { return };
        if let Some(n) = t.cut_note() {
            notes.push(format!("--trace: {n} (rtscope export RUN --format perfetto)"));
        }
        let run_id = self.run_id;
        if let Err(e) = self.store().and_then(|s| s.add_timeline(run_id, t)) {
            notes.push(format!("--trace: the timeline of the traced window was not stored: {e:#}"));
        }
    }

    /// Ends the run with `status`, `exit_code` and `notes` (and the notes
    /// on what interrupted its isolated CPUs), unlocks memory and loads it
    /// back summed (`Store::load_run_summed`: its intervals' statistics,
    /// not their histograms, which no summary or file written at a run's
    /// end reads; a day of 64 CPUs read whole took 940 MiB, summed 85 MiB).
    pub fn finish(mut self, status: RunStatus, exit_code: i32, notes: &[String]) -> Result<Run> {
        mem::unlock_all();
        let (isolated, warnings) = self.interrupts.end(&self.inv);
        let notes: Vec<String> = notes.iter().cloned().chain(isolated).collect();
        let id = self.run_id;
        let (ended, peak) = (clock::now_unix(), mem::peak_rss_kb());
        let mut finished = self.store()?.finish_run(id, status, Some(exit_code), ended, &notes, &warnings, peak);
        // The disk is full: its reserve given back, the end fits.
        if let Err(e) = &finished
            && rtscope_model::store::is_full(&self.db, e)
            && self.reserve.take().is_some()
        {
            finished = self.store()?.finish_run(id, status, Some(exit_code), ended, &notes, &warnings, peak);
        }
        finished?;
        self.reserve.take();
        let store = self.store()?;
        // The sums of its series' halves, for later reads to start from: a
        // cache, without which a read folds every interval's histogram.
        if let Err(e) = store.store_sums(id) {
            eprintln!("rtscope: warning: run {id}: its series' sums were not stored ({e:#}); reading it takes longer");
        }
        signals::stored(id);
        store.load_run_summed(id)
    }
}

/// What measuring a cell came to.
#[derive(Default)]
pub struct CellOutcome {
    /// The `--threshold` breach, as a note.
    pub breach: Option<String>,
    /// Threads that could not be set up or started.
    pub errors: Vec<String>,
    /// Storing failed: data after the last commit is lost.
    pub store_error: Option<anyhow::Error>,
    pub notes: Vec<String>,
    pub lost_exceedances: u64,
    /// What the tracer did, when traced.
    pub trace: Option<TraceSummary>,
}

/// A run's status, exit code and notes from its cells' outcomes.
pub fn verdict(outcomes: &mut [CellOutcome], signal: &AtomicBool) -> (RunStatus, i32, Vec<String>) {
    let mut notes: Vec<String> = outcomes.iter_mut().flat_map(|o| std::mem::take(&mut o.notes)).collect();
    let errors: Vec<String> = outcomes.iter().flat_map(|o| o.errors.iter().cloned()).collect();
    let (status, code) = if let Some(e) = outcomes.iter().find_map(|o| o.store_error.as_ref()) {
        notes.push(format!("storing failed, data after the last commit is lost: {e:#}"));
        (RunStatus::Failed, 1)
    } else if let Some(b) = outcomes.iter().find_map(|o| o.breach.clone()) {
        notes.push(b);
        (RunStatus::Interrupted, 2)
    } else if !errors.is_empty() {
        notes.extend(errors);
        (RunStatus::Failed, 1)
    } else if signal.load(Relaxed) {
        notes.push("stopped by a signal (SIGINT/SIGTERM) before its planned end".into());
        (RunStatus::Interrupted, 0)
    } else {
        (RunStatus::Complete, 0)
    };
    let lost: u64 = outcomes.iter().map(|o| o.lost_exceedances).sum();
    if lost > 0 {
        notes.push(format!(
            "{lost} exceedances did not fit the ring to the writer and were dropped (histograms are complete)"
        ));
    }
    (status, code, notes)
}

/// A measurement that is not a per-CPU periodic probe: it records its
/// series (keyed with the cell's load) into the open run itself.
pub trait OwnCell {
    fn name(&self) -> &'static str;
    /// Its settings, for the run's plan.
    fn plan(&self) -> serde_json::Value;
    /// Its metrics, in the order of its rows in the matrix.
    fn metrics(&self) -> Vec<String>;
    /// One line on what it measures where, for the run's plan.
    fn describe(&self) -> String {
        String::new()
    }
    /// The policy and priority it asks for; the assessment checks that it
    /// can have them and passes what it can to [`OwnCell::measure`].
    fn scheduling(&self) -> (Policy, u8) {
        (Policy::Other, 0)
    }
    /// The assessment's measured CPUs (`--cpus`), before anything starts.
    fn place(&mut self, _measured: &[usize]) -> Result<()> {
        Ok(())
    }
    /// Called once when the assessment starts, before its store is open
    /// and before any load, thread or child process (e.g. to fork a helper
    /// process, such as osbench's janitor, while nothing else runs).
    fn start(&mut self) -> Result<()> {
        Ok(())
    }
    /// Measures for about `duration_ns` (or until `signal`) at `effective`
    /// scheduling, its series keyed with `load`.
    fn measure(
        &self,
        run: &mut OpenRun,
        load: &str,
        duration_ns: u64,
        effective: (Policy, u8),
        signal: &Arc<AtomicBool>,
    ) -> Result<CellOutcome>;
}
