//! Running the selected tests and storing them, a series per test: for
//! `rtscope osbench` (`commands::osbench`) and for the assessment's cell
//! ([`Cell`], a test's series keyed with the cell's load). Both measure
//! and store through [`Bench`].

use super::*;
use crate::session::{CellOutcome, OpenRun, OwnCell};
use rtscope_model::extra::osbench as osb;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// One measurement to make: a test and its variant.
struct Job {
    test: &'static TestDef,
    /// Both parties at one priority (`--priorities equal`).
    equal: bool,
    cross: bool,
    flush: bool,
}

impl Job {
    fn metric(&self) -> String {
        let mut m = self.test.id.to_string();
        if self.equal {
            m.push_str("+equal");
        }
        if self.cross {
            m.push_str("+cross");
        }
        if self.flush {
            m.push_str("+flush");
        }
        m
    }
}

/// The tests an assessment's cell runs when its arguments pick none: the
/// wake-up paths a real-time program waits on, from the signalling call in
/// a lower-priority party to the blocked higher-priority one running, each
/// within a process and across two (the priority-inheritance handoff has
/// no inter-process variant in the table).
pub const CELL_TESTS: [&str; 13] = [
    "wake.futex-intra",
    "wake.futex-inter",
    "pi.unlock-wake",
    "wake.pipe-intra",
    "wake.pipe-inter",
    "wake.eventfd-intra",
    "wake.eventfd-inter",
    "wake.mq-intra",
    "wake.mq-inter",
    "wake.signal-intra",
    "wake.signal-inter",
    "wake.unix-intra",
    "wake.unix-inter",
];

/// In a cell without `-n`, a test takes samples until its share of the
/// cell ends, at most this many (16 bytes each in shared memory).
pub const CELL_MAX_SAMPLES: u64 = 200_000;
/// ... and at least room for this many.
const CELL_MIN_SAMPLES: u64 = 1_000;
/// Warm-up iterations of a test in a cell, at most (its share is short).
const CELL_WARMUP: usize = 100;
/// A test's share of its cell is at least this long, and at least half
/// its fair share (the cell's time divided by its tests): tests before it
/// that ran late make the cell a little longer, not its share tiny.
const CELL_MIN_SHARE_NS: u64 = 25_000_000;
/// A test's next round starts only with at least this much of its share left.
const ROUND_MIN_NS: u64 = 20_000_000;
/// How often a cell's deadline and the signal are checked.
const DEADLINE_POLL: Duration = Duration::from_millis(10);

/// The other party's CPU for --cross-cpu: the first of `prefer` (CPUs
/// checked where they entered), else of the CPUs rtscope was started on,
/// that is not `cpu`.
pub fn other_than(cpu_: usize, prefer: &[usize]) -> Result<usize> {
    prefer.iter().chain(&cpu::home()).copied().find(|&c| c != cpu_).ok_or_else(|| {
        anyhow::anyhow!(
            "--cross-cpu needs a second CPU: rtscope was started on CPU {cpu_} only; name the other with --other-cpu"
        )
    })
}

/// Unique numbers for the tests' POSIX IPC names, across cells.
static SEQ: AtomicU32 = AtomicU32::new(0);

/// What is measured and how: the tests, their variants, CPUs and
/// priorities; validated. `rtscope osbench` and the cell share it.
pub struct Settings {
    pub tests: Vec<&'static TestDef>,
    pub n: Option<u64>,
    pub ips: Option<u32>,
    pub cache_flush: bool,
    pub cross_cpu: bool,
    pub cpu: usize,
    pub other_cpu: Option<usize>,
    pub policy: Policy,
    pub priority: u8,
    /// The parties' priorities in the tests with an equal-priority variant.
    pub priorities: Priorities,
    /// Whether `--cpu` / `--other-cpu` were given (else an assessment
    /// places the parties on its measured CPUs).
    pub cpu_given: bool,
    pub other_given: bool,
}

impl Settings {
    /// An assessment's measured CPUs: the measured party goes to the last
    /// of them and, with --cross-cpu, the other party to the first other
    /// one, unless --cpu / --other-cpu said otherwise.
    pub fn place(&mut self, measured: &[usize]) -> Result<()> {
        if !self.cpu_given
            && let Some(&last) = measured.last()
        {
            self.cpu = last;
        }
        if self.cross_cpu && !self.other_given {
            self.other_cpu = Some(other_than(self.cpu, measured)?);
        }
        if self.other_cpu == Some(self.cpu) {
            bail!("--other-cpu {} is the measured CPU (--cpu); pick another", self.cpu);
        }
        Ok(())
    }

    fn jobs(&self) -> Vec<Job> {
        let mut jobs = Vec::new();
        for &t in &self.tests {
            let one = t.effective_ips(self.ips) == 1;
            let mut crosses = vec![false];
            if self.cross_cpu && t.cross {
                crosses.push(true);
            }
            let equals: &[bool] = match (self.priorities, t.equal.is_some()) {
                (Priorities::Equal, true) => &[true],
                (Priorities::Both, true) => &[false, true],
                _ => &[false],
            };
            let flushes: &[bool] = if self.cache_flush && one { &[false, true] } else { &[false] };
            for &flush in flushes {
                for &equal in equals {
                    for &cross in &crosses {
                        jobs.push(Job { test: t, equal, cross, flush });
                    }
                }
            }
        }
        jobs
    }

    /// The metrics (series names) in the order they are measured.
    pub fn metrics(&self) -> Vec<String> {
        self.jobs().iter().map(Job::metric).collect()
    }

    /// Whether some job flushes the caches.
    pub fn flushes(&self) -> bool {
        self.jobs().iter().any(|j| j.flush)
    }

    /// The settings as stored in the run's plan.
    pub fn json(&self, flush: Option<&FlushBuffer>) -> Value {
        json!({
            "tests": self.tests.iter().map(|t| t.id).collect::<Vec<_>>(),
            "samples": self.n,
            "ips": self.ips,
            "cache_flush": self.cache_flush,
            "flush_bytes": flush.map(FlushBuffer::bytes),
            "cross_cpu": self.cross_cpu,
            "cpu": self.cpu,
            "other_cpu": self.other_cpu,
            "priority": self.priority,
            "priorities": self.priorities,
            "policy": self.policy,
            "clock": "CLOCK_MONOTONIC, clock_gettime through the vDSO",
            "settle_ns": harness::SETTLE_NS,
            "inversion_ns": locks::INVERSION_NS,
        })
    }

    /// One line: CPUs, priorities and options, for the report's header.
    pub fn describe(&self, policy: Policy) -> String {
        let mut s = format!("CPU {}", self.cpu);
        if let Some(o) = self.other_cpu {
            s += &format!(" (+cross-CPU: other party on CPU {o})");
        }
        if policy.is_rt() {
            s += &format!(", priorities {}/{}/{}", self.priority, self.priority - 5, self.priority - 10);
        }
        match self.priorities {
            Priorities::Test => {}
            Priorities::Equal => s += ", wake-up and handoff tests at equal priorities (+equal)",
            Priorities::Both => s += ", wake-up and handoff tests also at equal priorities (+equal)",
        }
        if let Some(n) = self.n {
            s += &format!(", {n} samples per test");
        }
        if let Some(i) = self.ips {
            s += &format!(", IPS {i}");
        }
        if self.cache_flush {
            s += ", cache flush";
        }
        s
    }
}

/// Settings of an `rtscope osbench` run: what is measured, and where the
/// results go.
pub struct Plan {
    pub settings: Settings,
    pub csv: Option<std::path::PathBuf>,
    pub json: Option<std::path::PathBuf>,
    pub db: std::path::PathBuf,
    pub quiet: bool,
    /// What `/dev/cpu_dma_latency` is held at (None: left alone).
    pub dma_latency: Option<rtscope_model::settings::DmaLatency>,
}

/// What measuring the tests came to.
pub struct Measured {
    /// Tests not measured, or with no sample: one line each.
    pub notes: Vec<String>,
    /// Tests that failed.
    pub failed: usize,
    pub jobs: usize,
}

/// Measures the settings' tests and stores each as a series of a run:
/// the measuring and storing `rtscope osbench` and the cell share.
pub struct Bench<'a> {
    pub settings: &'a Settings,
    /// The policy the parties get (SCHED_OTHER where real-time is refused).
    pub policy: Policy,
    pub janitor: &'a Janitor,
    pub flush: Option<&'a FlushBuffer>,
    /// Set by SIGINT/SIGTERM.
    pub signal: &'a AtomicBool,
    /// The assessment's load of this cell: each series is keyed with it.
    pub load: Option<&'a str>,
    /// The cell's time: the tests share it, each stopping at the end of
    /// its share (the time left divided by the tests left) with what it
    /// measured; without `-n`, a test takes samples until then.
    pub budget_ns: Option<u64>,
    /// Progress on a terminal, and warnings on stderr.
    pub progress: bool,
    pub quiet: bool,
}

/// A test's series in the store, across its rounds.
struct Stored {
    sid: i64,
    rounds: u32,
    below: u64,
    /// Calls that failed, over the rounds.
    failed: u64,
    /// The rounds' other notes, each once.
    notes: Vec<String>,
    /// The last round's median.
    p50: i64,
    /// The series' figures as last stored.
    extra: serde_json::Map<String, Value>,
}

impl Bench<'_> {
    /// Measures every job and stores it in run `run_id`. Errors only when
    /// storing fails; a test that cannot be measured is a note.
    pub fn measure(&self, store: &mut Store, run_id: i64) -> Result<Measured> {
        let jobs = self.settings.jobs();
        match self.budget_ns {
            Some(budget) => self.measure_shares(store, run_id, &jobs, budget),
            None => self.measure_rounds(store, run_id, &jobs),
        }
    }

    /// Without a cell's time: a test's variants (`+equal`, `+cross`,
    /// `+flush`) are measured in alternating rounds (see [`rounds`]), each
    /// round a checkpoint interval of its variant's series, so that the
    /// host's changes of speed fall on each variant alike; a test without
    /// variants runs once.
    fn measure_rounds(&self, store: &mut Store, run_id: i64, jobs: &[Job]) -> Result<Measured> {
        let steps = rounds(jobs, |j| self.settings.n.unwrap_or(j.test.n) as usize);
        let mut stored: Vec<Option<Stored>> = jobs.iter().map(|_| None).collect();
        // Each job's round medians, by round, for `paired`.
        let mut medians: Vec<Vec<(usize, i64)>> = vec![Vec::new(); jobs.len()];
        let mut stopped = vec![false; jobs.len()];
        let (mut notes, mut failed) = (Vec::new(), 0);
        for step in &steps {
            if self.signal.load(Relaxed) {
                break;
            }
            let (k, job) = (step.job, &jobs[step.job]);
            if stopped[k] {
                continue;
            }
            if self.progress {
                let round =
                    if step.of > 1 { format!(" (round {}/{})", step.round + 1, step.of) } else { String::new() };
                eprint!("\r\x1b[K[{}/{}] {}{round}", k + 1, jobs.len(), job.metric());
            }
            let warmup = (step.n / 10).clamp(5, 1000);
            let last = step.round + 1 == step.of;
            match self.run_once(job, step.n, warmup, self.signal) {
                Ok((out, _)) if out.raw.is_empty() => {
                    if last && stored[k].is_none() && !self.signal.load(Relaxed) {
                        notes.push(format!("{}{}: no sample", job.metric(), self.under()));
                    }
                }
                Ok((out, cpus)) => {
                    let s = self.store(store, run_id, job, cpus, &out, stored[k].take())?;
                    medians[k].push((step.round, s.p50));
                    stored[k] = Some(s);
                }
                Err(e) => {
                    stopped[k] = true;
                    if let Some(s) = &stored[k] {
                        // Its earlier rounds are stored: measured, in part.
                        let what = format!("measured in part ({} of {} rounds stored)", s.rounds, step.of);
                        notes.push(self.not_measured(job, &what, &e));
                    } else {
                        failed += 1;
                        notes.push(self.not_measured(job, "not measured", &e));
                    }
                }
            }
        }
        if self.progress {
            eprint!("\r\x1b[K");
        }
        self.store_pairs(store, jobs, &steps, &medians, &mut stored)?;
        Ok(Measured { notes, failed, jobs: jobs.len() })
    }

    /// Adds to each variant's series its comparison with the first of its
    /// test's ways in the run (the first job of its group in [`rounds`]),
    /// round by round: `paired` holds the median, over the rounds both
    /// measured, of the variant's round median over the first way's, each
    /// pair measured one right after the other. On a host whose speed
    /// changes, two medians over the whole runs may each fall on a
    /// different side of two modes; the pairs do not. Only where the ways
    /// took turns (more than one round).
    fn store_pairs(
        &self,
        store: &mut Store,
        jobs: &[Job],
        steps: &[Step],
        medians: &[Vec<(usize, i64)>],
        stored: &mut [Option<Stored>],
    ) -> Result<()> {
        let mut groups = steps.iter().filter(|st| st.round == 0 && st.of > 1).peekable();
        while let Some(first) = groups.next() {
            let mut members = Vec::new();
            while let Some(st) = groups.next_if(|st| jobs[st.job].test.id == jobs[first.job].test.id) {
                members.push(st.job);
            }
            for k in members {
                let Some(s) = stored[k].as_mut() else { continue };
                let Some((ratio, rounds)) = paired(&medians[first.job], &medians[k]) else { continue };
                osb::PAIRED.put(
                    &mut s.extra,
                    json!({
                        "against": jobs[first.job].metric(),
                        "rounds": rounds,
                        "p50_ratio": (ratio * 1000.0).round() / 1000.0,
                    }),
                );
                store.set_series_extra(s.sid, &s.extra)?;
            }
        }
        Ok(())
    }

    /// A cell's tests, one after the other, each in its share of the
    /// cell's `budget_ns`: without `-n`, a test runs in rounds of at most
    /// [`CELL_MAX_SAMPLES`] until its share ends (each round a checkpoint
    /// interval of its series), so that a long cell measures for its
    /// whole length with a bounded buffer.
    fn measure_shares(&self, store: &mut Store, run_id: i64, jobs: &[Job], budget: u64) -> Result<Measured> {
        let end = clock::now() + budget;
        let floor = share_floor(budget, jobs.len());
        let under = self.under();
        let mut notes = Vec::new();
        let mut failed = 0;
        for (k, job) in jobs.iter().enumerate() {
            if self.signal.load(Relaxed) {
                break;
            }
            // The end of this test's share: the cell's time left divided by
            // the tests left, and never less than `floor`.
            let mut job_end = share_end(clock::now(), end, jobs.len() - k, floor);
            // A share that ends before the first sample (a slow start under
            // a heavy load) gets one more of the same length.
            let mut retried = false;
            if self.progress {
                eprint!("\r\x1b[K[{}/{}] {}", k + 1, jobs.len(), job.metric());
            }
            let mut stored: Option<Stored> = None;
            loop {
                let left = job_end.saturating_sub(clock::now());
                let n = self.settings.n.unwrap_or_else(|| cell_samples(left)) as usize;
                let warmup = (n / 10).clamp(5, CELL_WARMUP);
                match until(job_end, self.signal, |stop| self.run_once(job, n, warmup, stop)) {
                    Ok((out, _)) if out.raw.is_empty() => {
                        if stored.is_none() && !retried && !self.signal.load(Relaxed) {
                            retried = true;
                            job_end = clock::now() + floor;
                            continue;
                        }
                        if stored.is_none() && !self.signal.load(Relaxed) {
                            notes.push(format!("{}{under}: no sample within its share of the cell", job.metric()));
                        }
                        break;
                    }
                    Ok((out, cpus)) => {
                        let full = out.raw.len() >= n;
                        stored = Some(self.store(store, run_id, job, cpus, &out, stored)?);
                        // Another round while its share lasts (a cell without -n).
                        let more = clock::now() + ROUND_MIN_NS < job_end;
                        if !full || !more || self.settings.n.is_some() || self.signal.load(Relaxed) {
                            break;
                        }
                    }
                    Err(e) => {
                        failed += 1;
                        notes.push(self.not_measured(job, "not measured", &e));
                        break;
                    }
                }
            }
        }
        if self.progress {
            eprint!("\r\x1b[K");
        }
        Ok(Measured { notes, failed, jobs: jobs.len() })
    }

    /// Measures `job` once: `n` samples after `warmup`, until `stop`.
    /// The outcome, and the CPUs of its measured and its other party.
    fn run_once(&self, job: &Job, n: usize, warmup: usize, stop: &AtomicBool) -> Result<(Outcome, (usize, usize))> {
        let t = job.test;
        let env = Env {
            cpu: self.settings.cpu,
            other: if job.cross { self.settings.other_cpu.unwrap_or(self.settings.cpu) } else { self.settings.cpu },
            cross: job.cross,
            equal: job.equal,
            policy: self.policy,
            prio: self.settings.priority,
            ips: t.effective_ips(self.settings.ips),
            n,
            warmup,
            flush: if job.flush { self.flush } else { None },
            stop,
            janitor: self.janitor,
            seq: SEQ.fetch_add(1, Relaxed),
        };
        (t.run)(&env).map(|out| (out, (env.cpu, env.other)))
    }

    /// " under LOAD" in a cell, else nothing.
    fn under(&self) -> String {
        self.load.map(|l| format!(" under {l}")).unwrap_or_default()
    }

    /// The note of a test that could not be measured (`what`: "not
    /// measured", or how far it was), warned of on stderr unless quiet.
    fn not_measured(&self, job: &Job, what: &str, e: &anyhow::Error) -> String {
        let msg = format!("{}{}: {what}: {e:#}", job.metric(), self.under());
        if !self.quiet {
            if self.progress {
                eprintln!();
            }
            eprintln!("rtscope: warning: {msg}");
        }
        msg
    }

    /// Stores one test (one round of it) as a series: its histogram, its
    /// samples at or above its p99.9, and its own figures. A later round
    /// (`prev`) adds a checkpoint interval to the same series.
    fn store(
        &self,
        store: &mut Store,
        run_id: i64,
        job: &Job,
        (cpu_, other): (usize, usize),
        out: &Outcome,
        prev: Option<Stored>,
    ) -> Result<Stored> {
        let t = job.test;
        let (values, below) = out.values();
        let mut tally = Tally::new();
        for &(_, v) in &values {
            tally.record(v);
        }
        let first = out.raw.first().map_or(0, |&(t1, raw)| t1.saturating_sub(raw));
        let last = values.last().map_or((0, 0), |&p| p);
        let rounds = prev.as_ref().map_or(0, |p| p.rounds);
        let iv = Interval::new(rounds, first, last.0.max(first), &tally, 0, 0);
        let threshold = tally.quantile(0.999).max(0) as u64;
        let exc: Vec<Exceedance> = values
            .iter()
            .filter(|&&(_, v)| v >= threshold)
            .map(|&(t_ns, value_ns)| Exceedance { t_ns, value_ns })
            .collect();
        let sid = match &prev {
            Some(p) => p.sid,
            None => {
                let key = SeriesKey {
                    load: self.load.map(String::from),
                    ..SeriesKey::new("osbench", &job.metric(), cpu_ as i64)
                };
                store.add_series(run_id, &key, "ns", &ExceedMode::Adaptive.describe())?
            }
        };
        store.commit_checkpoint(&[(sid, &iv)], &[(sid, &exc)])?;
        let below = below + prev.as_ref().map_or(0, |p| p.below);
        let mut extra = serde_json::Map::new();
        osb::TEST.put(&mut extra, json!(t.id));
        osb::NUM.put(&mut extra, json!(t.num()));
        osb::NAME.put(&mut extra, json!(t.name));
        osb::GROUP.put(&mut extra, json!(t.group.name()));
        osb::IPS.put(&mut extra, json!(out.ips));
        osb::INTER_PROCESS.put(&mut extra, json!(t.inter));
        osb::CACHE_FLUSH.put(&mut extra, json!(job.flush));
        osb::CROSS_CPU.put(&mut extra, json!(job.cross));
        osb::EQUAL_PRIORITIES.put(&mut extra, json!(job.equal));
        if let Some((waiter, signaller)) = out.priorities {
            osb::PRIORITIES.put(&mut extra, json!({ "waiter": waiter, "signaller": signaller }));
        }
        osb::OTHER_CPU.put(&mut extra, if t.parties == ONE { Value::Null } else { json!(other) });
        osb::BASE.put(&mut extra, json!(out.base_ns));
        osb::LAST.put(&mut extra, json!(last.1));
        osb::BELOW_BASE.put(&mut extra, json!(below));
        if rounds > 0 {
            osb::ROUNDS.put(&mut extra, json!(rounds + 1));
        }
        // The calls failed over every round, and each other note once.
        let failed = out.failed + prev.as_ref().map_or(0, |p| p.failed);
        let mut notes = prev.map_or_else(Vec::new, |p| p.notes);
        if let Some(n) = out.note.as_ref().filter(|n| !notes.contains(n)) {
            notes.push(n.clone());
        }
        let said: Vec<String> = harness::failed_note(failed).into_iter().chain(notes.iter().cloned()).collect();
        if !said.is_empty() {
            osb::NOTE.put(&mut extra, json!(said.join("; ")));
        }
        store.set_series_extra(sid, &extra)?;
        Ok(Stored { sid, rounds: rounds + 1, below, failed, notes, p50: tally.quantile(0.5), extra })
    }
}

/// Samples a test of a cell without `-n` has room for: one per
/// microsecond of its share, within [`CELL_MIN_SAMPLES`, `CELL_MAX_SAMPLES`].
fn cell_samples(share_ns: u64) -> u64 {
    (share_ns / 1_000).clamp(CELL_MIN_SAMPLES, CELL_MAX_SAMPLES)
}

/// The shortest share a test of a cell of `budget_ns` with `jobs` tests
/// gets: half an even share, at least [`CELL_MIN_SHARE_NS`].
fn share_floor(budget_ns: u64, jobs: usize) -> u64 {
    (budget_ns / jobs.max(1) as u64 / 2).max(CELL_MIN_SHARE_NS)
}

/// When the share of a test starting at `now` ends: the cell's time left
/// (to `end`) divided by the `left` tests still to run, at least `floor`.
fn share_end(now: u64, end: u64, left: usize, floor: u64) -> u64 {
    now + (end.saturating_sub(now) / left.max(1) as u64).max(floor)
}

/// One round of a job in [`rounds`]: `n` samples of `jobs[job]`, round
/// `round` of `of`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Step {
    job: usize,
    n: usize,
    round: usize,
    of: usize,
}

/// A test with variants takes its samples in rounds of at least this
/// many...
const ROUND_SAMPLES: usize = 2_000;
/// ... and at most this many rounds.
const MAX_ROUNDS: usize = 10;

/// The order in which `jobs` are measured without a cell's time, each
/// with its `n(job)` samples. A test's variants (the jobs of one test,
/// which [`Settings::jobs`] lists together) take turns in rounds: round 1
/// of each, then round 2 of each, and so on, `n` split as evenly as it
/// goes into at most [`MAX_ROUNDS`] of at least [`ROUND_SAMPLES`]. On a
/// virtual machine the host's share of the CPU and its clock speed change
/// from one fraction of a second to the next (a futex wake-up's median of
/// 2000 samples moved between 1.2 and 1.9 us in turns of tens to hundreds
/// of milliseconds on a 2-vCPU guest): measured one after the other, two
/// variants of ~0.1 s each may fall in different states, and the one
/// that should be the longer come out shorter; in turns, both are
/// measured in the same states. A test without variants runs once.
fn rounds(jobs: &[Job], n: impl Fn(&Job) -> usize) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut first = 0;
    while first < jobs.len() {
        let id = jobs[first].test.id;
        let len = jobs[first..].iter().take_while(|j| j.test.id == id).count();
        let group = first..first + len;
        let total = n(&jobs[first]);
        let of = if len > 1 { (total / ROUND_SAMPLES).clamp(1, MAX_ROUNDS) } else { 1 };
        for round in 0..of {
            let n = total * (round + 1) / of - total * round / of;
            steps.extend(group.clone().map(|job| Step { job, n, round, of }));
        }
        first += len;
    }
    steps
}

/// The median over the rounds both measured of `mine`'s round median over
/// `reference`'s, and how many rounds that is; rounds are `(round,
/// median)`, a round either missed (no sample) left out. None: no round in
/// common.
fn paired(reference: &[(usize, i64)], mine: &[(usize, i64)]) -> Option<(f64, usize)> {
    let mut ratios: Vec<f64> = mine
        .iter()
        .filter_map(|&(round, v)| {
            let r = reference.iter().find(|&&(r, _)| r == round)?.1;
            (r > 0).then(|| v as f64 / r as f64)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let mid = ratios.len() / 2;
    let median = match ratios.len() {
        0 => return None,
        n if n % 2 == 1 => ratios[mid],
        _ => f64::midpoint(ratios[mid - 1], ratios[mid]),
    };
    Some((median, ratios.len()))
}

/// Runs `f` with a stop flag that a watching thread sets at `deadline` or
/// on the signal (the measuring loops only read a flag, never the clock,
/// between samples).
fn until<R>(deadline: u64, signal: &AtomicBool, f: impl FnOnce(&AtomicBool) -> R) -> R {
    let stop = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let watcher = std::thread::Builder::new().name("rtscope-osbench-deadline".into()).spawn_scoped(scope, || {
            crate::sys::signals::block_in_background_thread();
            while !done.load(Relaxed) {
                let now = clock::now();
                if now >= deadline || signal.load(Relaxed) {
                    stop.store(true, Relaxed);
                    return;
                }
                std::thread::sleep(DEADLINE_POLL.min(Duration::from_nanos(deadline - now)));
            }
        });
        if watcher.is_err() {
            // No thread: the signal alone stops the test, which ends with its samples.
            return f(signal);
        }
        let r = f(&stop);
        done.store(true, Relaxed);
        r
    })
}

/// osbench as a cell of the assessment (`rtscope run`): its tests under
/// each load, a series per test keyed with the load, measured and stored
/// as `rtscope osbench` does.
pub struct Cell {
    settings: Settings,
    janitor: Option<Janitor>,
    flush: Option<FlushBuffer>,
}

impl Cell {
    /// A cell measuring `settings`; [`OwnCell::start`] starts it.
    pub fn new(settings: Settings) -> Cell {
        Cell { settings, janitor: None, flush: None }
    }
}

impl OwnCell for Cell {
    fn name(&self) -> &'static str {
        "osbench"
    }

    fn plan(&self) -> Value {
        self.settings.json(self.flush.as_ref())
    }

    fn metrics(&self) -> Vec<String> {
        self.settings.metrics()
    }

    fn describe(&self) -> String {
        let s = &self.settings;
        format!("{} tests, {}", s.tests.len(), s.describe(s.policy))
    }

    fn scheduling(&self) -> (Policy, u8) {
        (self.settings.policy, self.settings.priority)
    }

    fn place(&mut self, measured: &[usize]) -> Result<()> {
        self.settings.place(measured)
    }

    fn start(&mut self) -> Result<()> {
        self.janitor = Some(Janitor::start()?);
        if self.settings.flushes() {
            self.flush = Some(FlushBuffer::new(None).map_err(anyhow::Error::msg)?);
        }
        Ok(())
    }

    fn measure(
        &self,
        run: &mut OpenRun,
        load: &str,
        duration_ns: u64,
        (policy, _): (Policy, u8),
        signal: &Arc<AtomicBool>,
    ) -> Result<CellOutcome> {
        let janitor = self.janitor.as_ref().ok_or_else(|| anyhow::anyhow!("osbench: the cell was not started"))?;
        let bench = Bench {
            settings: &self.settings,
            policy,
            janitor,
            flush: self.flush.as_ref(),
            signal,
            load: Some(load),
            budget_ns: Some(duration_ns),
            progress: false,
            quiet: true,
        };
        let run_id = run.run_id;
        let mut outcome = CellOutcome::default();
        match bench.measure(run.store()?, run_id) {
            Ok(m) => {
                outcome.notes = m.notes.into_iter().map(|n| format!("osbench {n}")).collect();
                if m.failed > 0 && m.failed == m.jobs {
                    outcome.errors.push(format!("osbench under {load}: no test could be measured"));
                }
            }
            Err(e) => outcome.store_error = Some(e),
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::OsbenchArgs;
    use clap::Parser;

    fn args(line: &[&str]) -> OsbenchArgs {
        let argv = ["rtscope", "osbench"].iter().chain(line).map(|s| s.to_string());
        match crate::cli::Cli::try_parse_from(argv).unwrap().cmd {
            crate::cli::Cmd::Osbench(a) => a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_cell_test_stops_at_its_deadline_or_on_the_signal() {
        let wait = |stop: &AtomicBool| {
            while !stop.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        let quiet = AtomicBool::new(false);
        let t0 = clock::now();
        until(t0 + 50_000_000, &quiet, wait);
        let took = clock::now() - t0;
        // A noisy machine may wake the watcher late, never early.
        assert!((50_000_000..1_000_000_000).contains(&took), "stopped after {took} ns for a 50 ms deadline");
        let signal = AtomicBool::new(true);
        let t0 = clock::now();
        until(t0 + 60_000_000_000, &signal, wait);
        assert!(clock::now() - t0 < 1_000_000_000, "a signal stops the test at once");
    }

    /// Rounds pair by their number; a round one of them missed is left out.
    #[test]
    fn a_variant_is_paired_round_by_round() {
        let reference = [(0, 1000), (1, 1500), (2, 1000), (3, 1600)];
        // The variant 1.2x its reference in every round, though its whole
        // median falls in the other mode.
        let mine = [(0, 1200), (1, 1800), (2, 1200), (3, 1920)];
        let (r, n) = paired(&reference, &mine).unwrap();
        assert!((r - 1.2).abs() < 1e-9 && n == 4, "{r} {n}");
        // Round 1 missed by the reference: rounds 0 and 2 are paired, not
        // shifted onto each other.
        let (r, n) = paired(&[(0, 1000), (2, 1500)], &[(0, 1100), (1, 9999), (2, 1800)]).unwrap();
        assert!((r - 1.15).abs() < 1e-9 && n == 2, "{r} {n}");
        assert_eq!(paired(&[(0, 1000)], &[(1, 1000)]), None);
        assert_eq!(paired(&[(0, 0)], &[(0, 1000)]), None);
        assert_eq!(paired(&[], &[]), None);
    }

    /// A test's variants take turns in rounds; a test without variants
    /// runs once; every job gets its samples, no more.
    #[test]
    fn a_tests_variants_take_turns() {
        let line = ["-t", "wake.futex-intra", "-t", "ping.pipe-intra", "-t", "mutex.handoff-inter"];
        let s = args(&[&line[..], &["--priorities", "both"]].concat()).settings(&[]).unwrap();
        let jobs = s.jobs();
        let names: Vec<String> = jobs.iter().map(Job::metric).collect();
        let at = |m: &str| names.iter().position(|n| n == m).unwrap();
        let steps = rounds(&jobs, |_| 20_000);
        let order: Vec<&str> = steps.iter().map(|st| names[st.job].as_str()).collect();
        // 10 rounds of 2000 for each variant of the two tests that have
        // them, in turns; the ping-pong once, with all its samples.
        assert_eq!(steps.len(), 2 * 10 * 2 + 1, "{order:?}");
        assert_eq!(&order[..4], ["mutex.handoff-inter", "mutex.handoff-inter+equal"].repeat(2), "{order:?}");
        for m in &names {
            let mine: Vec<&Step> = steps.iter().filter(|st| st.job == at(m)).collect();
            assert_eq!(mine.iter().map(|st| st.n).sum::<usize>(), 20_000, "{m}");
            let of = if m.starts_with("ping") { 1 } else { 10 };
            assert!(mine.iter().enumerate().all(|(r, st)| st.round == r && st.of == of && st.n == 20_000 / of), "{m}");
        }
        // A test's rounds come before the next test's.
        let last_handoff = steps.iter().rposition(|st| names[st.job].starts_with("mutex")).unwrap();
        let first_futex = steps.iter().position(|st| names[st.job].starts_with("wake")).unwrap();
        assert_eq!(last_handoff + 1, first_futex, "{order:?}");
        // Samples that do not split evenly: every sample is taken, and
        // rounds never fall under 2000 (n below that: one round).
        for (n, of) in [(2_001, 1), (3_999, 1), (4_001, 2), (25_001, 10), (1_000_000, 10), (300, 1)] {
            let steps = rounds(&jobs[..2], |_| n);
            assert_eq!(steps.len(), 2 * of, "n {n}");
            assert_eq!(steps.iter().filter(|st| st.job == 0).map(|st| st.n).sum::<usize>(), n, "n {n}");
            assert!(of == 1 || steps.iter().all(|st| st.n >= ROUND_SAMPLES), "n {n}: {steps:?}");
        }
        // Without variants every test runs once, in the order given.
        let s = args(&line).settings(&[]).unwrap();
        let steps = rounds(&s.jobs(), |_| 20_000);
        assert_eq!(
            steps.iter().map(|st| (st.job, st.n, st.of)).collect::<Vec<_>>(),
            [(0, 20_000, 1), (1, 20_000, 1), (2, 20_000, 1)]
        );
    }

    #[test]
    fn equal_priorities_add_a_variant_to_the_tests_that_have_one() {
        let pick = ["-t", "wake.futex-intra", "-t", "ping.pipe-intra", "-t", "mutex.handoff-inter"];
        let with = |mode: &str| {
            let mut line = pick.to_vec();
            line.extend(["--priorities", mode]);
            args(&line).settings(&[]).unwrap()
        };
        // The default: every test as it is defined.
        let s = args(&pick).settings(&[]).unwrap();
        assert_eq!(s.priorities, Priorities::Test);
        assert_eq!(s.metrics(), ["mutex.handoff-inter", "wake.futex-intra", "ping.pipe-intra"]);
        assert_eq!(s.json(None)["priorities"], "test");
        // equal: the wake-up and handoff tests at equal priorities only; a
        // ping-pong has equal priorities by definition and runs as it is.
        let s = with("equal");
        assert_eq!(s.metrics(), ["mutex.handoff-inter+equal", "wake.futex-intra+equal", "ping.pipe-intra"]);
        assert_eq!(s.json(None)["priorities"], "equal");
        assert!(s.describe(Policy::Fifo).contains("equal priorities"), "{}", s.describe(Policy::Fifo));
        // both: each such test both ways, back to back.
        let s = with("both");
        assert_eq!(
            s.metrics(),
            [
                "mutex.handoff-inter",
                "mutex.handoff-inter+equal",
                "wake.futex-intra",
                "wake.futex-intra+equal",
                "ping.pipe-intra"
            ]
        );
        // With the other variants: +equal comes before +cross and +flush.
        let mut line = vec!["-t", "wake.sem-intra", "--priorities", "both", "--cache-flush"];
        if cpu::online().len() > 1 {
            line.push("--cross-cpu");
        }
        let m = args(&line).settings(&[]).unwrap().metrics();
        assert!(m.contains(&"wake.sem-intra+equal+flush".to_string()), "{m:?}");
        if cpu::online().len() > 1 {
            assert!(m.contains(&"wake.sem-intra+equal+cross+flush".to_string()), "{m:?}");
            assert_eq!(m.len(), 8, "{m:?}");
        }
        // In a cell (rtscope run's [args]) too.
        let c = args(&["--priorities", "both"]).cell().unwrap();
        let m = c.metrics();
        assert!(m.contains(&"wake.mq-inter+equal".to_string()) && m.contains(&"wake.mq-inter".to_string()), "{m:?}");
        assert!(m.contains(&"pi.unlock-wake".to_string()) && !m.contains(&"pi.unlock-wake+equal".to_string()));
        assert_eq!(c.plan()["priorities"], "both");
    }

    #[test]
    fn bad_priorities_are_refused_naming_the_flag() {
        // Tests without an equal-priority variant.
        for t in ["ping", "pi.unlock-wake", "call.syscall"] {
            let e = args(&["-t", t, "--priorities", "equal"]).settings(&[]).err().unwrap().to_string();
            assert!(e.contains("--priorities equal") && e.contains("-t wakeup"), "{e}");
        }
        let e = args(&["-t", "ssc", "--priorities", "both"]).settings(&[]).err().unwrap().to_string();
        assert!(e.contains("--priorities both"), "{e}");
        // A value that is not a mode.
        let argv = ["rtscope", "osbench", "--priorities", "same"];
        let e = crate::cli::Cli::try_parse_from(argv).err().unwrap().to_string();
        assert!(e.contains("--priorities") && e.contains("equal"), "{e}");
    }

    #[test]
    fn late_tests_keep_at_least_half_an_even_share() {
        // 13 tests in a 2 s cell: about 154 ms each, never below 77 ms.
        let floor = share_floor(2_000_000_000, 13);
        assert_eq!(floor, 76_923_076);
        assert_eq!(share_end(0, 2_000_000_000, 13, floor), 153_846_153);
        // The tests before the last ran 1.9 s late: it still gets 77 ms.
        assert_eq!(share_end(1_950_000_000, 2_000_000_000, 1, floor), 1_950_000_000 + floor);
        // Past the cell's end entirely, likewise.
        assert_eq!(share_end(2_500_000_000, 2_000_000_000, 1, floor), 2_500_000_000 + floor);
        // A short cell: 25 ms at least.
        assert_eq!(share_floor(100_000_000, 13), CELL_MIN_SHARE_NS);
    }

    #[test]
    fn a_cell_takes_samples_for_its_share_within_bounds() {
        assert_eq!(cell_samples(0), CELL_MIN_SAMPLES);
        assert_eq!(cell_samples(100_000_000), 100_000);
        assert_eq!(cell_samples(3_600_000_000_000), CELL_MAX_SAMPLES);
    }

    #[test]
    fn a_cell_runs_the_wakeup_set_on_the_last_measured_cpu() {
        let mut s = args(&[]).settings(&CELL_TESTS).unwrap();
        assert_eq!(s.metrics(), {
            let mut v: Vec<String> = CELL_TESTS.iter().map(|t| t.to_string()).collect();
            v.sort_by_key(|m| TESTS.iter().position(|t| t.id == m).unwrap());
            v
        });
        s.place(&[0]).unwrap();
        assert_eq!(s.cpu, 0);
        // -t replaces the set; --cpu stays where it was put.
        let mut s = args(&["-t", "ping.pipe-inter", "--cpu", "0"]).settings(&CELL_TESTS).unwrap();
        assert_eq!(s.metrics(), ["ping.pipe-inter"]);
        s.place(&[1, 2]).unwrap();
        assert_eq!(s.cpu, 0);
        // Without CELL_TESTS (`rtscope osbench`), every test.
        assert_eq!(args(&[]).settings(&[]).unwrap().tests.len(), TESTS.len());
        if cpu::online().len() > 1 {
            let mut s = args(&["--cross-cpu"]).settings(&CELL_TESTS).unwrap();
            s.place(&[0, 1]).unwrap();
            assert_eq!((s.cpu, s.other_cpu), (1, Some(0)));
            assert!(s.metrics().contains(&"wake.futex-intra+cross".to_string()));
        }
    }
}
