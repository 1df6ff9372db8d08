//! What the tracer did during a run, stored with it: per CPU, the stacks,
//! the profiler, the episodes by kind; and how two cells' summaries add up.

use super::cause::{Cause, CauseKind, main_cause};
use super::code::Folded;
use serde::{Deserialize, Serialize};

/// What the tracer did during a run, stored with it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TraceSummary {
    /// The tracefs instance used.
    pub instance: String,
    pub clock: String,
    pub buffer_kb_per_cpu: u64,
    pub events: Vec<String>,
    /// Events asked for that this kernel lacks, with what is lost.
    pub missing: Vec<String>,
    pub per_cpu: Vec<TraceCpu>,
    /// CPU time of the reader thread and its share of the run's wall time.
    pub reader_cpu_ns: u64,
    pub reader_cpu_pct: f64,
    pub cause_threshold: String,
    /// Episodes built, and kept (the worst, per CPU).
    pub episodes_built: u64,
    pub episodes_kept: u64,
    /// The samples are windows of lost time (the noise probe's
    /// interruptions), attributed without a stage split.
    pub windows: bool,
    /// `--stacks`: what the stack instance recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stacks: Option<StacksSummary>,
    /// `--sample-hz`: the sampling profiler.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileSummary>,
    /// The application's own markers: its writes to the kernel's
    /// `trace_marker` on the traced CPUs during the run. None where the
    /// kernel cannot copy them into rtscope's instance (before Linux 6.17),
    /// and in runs stored before they were kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub markers: Option<Markers>,
    /// `watch --sample-hz`: each watched thread's samples in its late
    /// periods against its on-time ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watch_profile: Option<WatchProfile>,
}

/// `watch --sample-hz`: a profiler bound to each watched thread (not to a
/// CPU), its samples sorted by the period (activation) they fell in: late
/// (its response above the deadline, or its wake-up latency above the
/// cause threshold) or on time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WatchProfile {
    /// `cycles (hardware, NMI)` or `cpu-clock (software, timer interrupt)`.
    pub event: String,
    pub hz: u64,
    /// What its samples cannot see.
    pub blind_spot: String,
    /// What made a period late, in words.
    pub late_when: String,
    /// A function is called over-represented on at least this many late
    /// samples and [`WatchProfile::MIN_RATIO`] times its on-time share.
    pub min_late: u64,
    pub threads: Vec<ThreadProfile>,
    pub notes: Vec<String>,
}

impl WatchProfile {
    pub const MIN_LATE: u64 = 5;
    pub const MIN_RATIO: f64 = 2.0;
}

/// One watched thread's profile.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ThreadProfile {
    pub tid: i64,
    pub pid: i64,
    /// `comm (tid)`.
    pub thread: String,
    /// The assessment's load, in a cell of `rtscope run --watch`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<String>,
    /// Periods (activations seen whole) late and on time.
    pub late_periods: u64,
    pub on_time_periods: u64,
    /// Samples in them; samples in no activation seen whole (before the
    /// first, in the last, or lost events) are `unsorted`.
    pub late_samples: u64,
    pub on_time_samples: u64,
    pub unsorted_samples: u64,
    /// Samples the kernel could not hand over (the thread's ring full).
    pub lost: u64,
    /// By innermost function, and by any frame (inclusive), most
    /// over-represented first.
    pub leaf: Vec<LateRow>,
    pub inclusive: Vec<LateRow>,
    /// The late periods' stacks, folded root first, for a flame graph.
    pub late_folded: Vec<Folded>,
}

/// A function's samples in late periods against on-time ones.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LateRow {
    pub function: String,
    pub module: String,
    pub late: u64,
    pub on_time: u64,
    /// Its share of the late samples, and of the on-time samples.
    pub late_share: f64,
    pub on_time_share: f64,
    /// late_share / on_time_share, on-time counted at least once.
    pub ratio: f64,
    /// At least [`WatchProfile::MIN_LATE`] late samples and a ratio of at
    /// least [`WatchProfile::MIN_RATIO`].
    pub over: bool,
}

impl LateRow {
    /// The rows of `(function, module) -> [late, on_time]`: those with at
    /// least 1 % of either side's samples; the over-represented first,
    /// most first, then the others by their samples (so that the code of
    /// the on-time periods shows beside it), at most `max`.
    pub fn rank(by_fn: Vec<((String, String), [u64; 2])>, late: u64, on_time: u64, max: usize) -> Vec<LateRow> {
        let mut rows: Vec<LateRow> = by_fn
            .into_iter()
            .map(|((function, module), [l, o])| {
                let late_share = if late > 0 { l as f64 / late as f64 } else { 0.0 };
                let on_time_share = if on_time > 0 { o as f64 / on_time as f64 } else { 0.0 };
                let ratio = late_share / (o.max(1) as f64 / on_time.max(1) as f64);
                let over = l >= WatchProfile::MIN_LATE && ratio >= WatchProfile::MIN_RATIO;
                LateRow { function, module, late: l, on_time: o, late_share, on_time_share, ratio, over }
            })
            .filter(|r| r.late_share >= 0.01 || r.on_time_share >= 0.01)
            .collect();
        rows.sort_by(|a, b| {
            let by_ratio = if a.over && b.over { b.ratio.total_cmp(&a.ratio) } else { std::cmp::Ordering::Equal };
            b.over
                .cmp(&a.over)
                .then(by_ratio)
                .then((b.late + b.on_time).cmp(&(a.late + a.on_time)))
                .then(a.function.cmp(&b.function))
        });
        rows.truncate(max);
        rows
    }
}

/// The markers of a run, in time order: the first [`Markers::MAX`], and
/// how many came after them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Markers {
    pub list: Vec<Marker>,
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped: u64,
}

impl Markers {
    /// Markers kept per run (some 5 MB in the store at 50 bytes each).
    pub const MAX: usize = 100_000;

    /// One more, after the others, unless [`Markers::MAX`] are kept.
    pub fn push(&mut self, m: Marker) {
        if self.list.len() < Self::MAX {
            self.list.push(m);
        } else {
            self.dropped += 1;
        }
    }

    /// `more` added, in time order, the first [`Markers::MAX`] kept.
    pub fn extend(&mut self, more: impl IntoIterator<Item = Marker>, dropped: u64) {
        self.list.extend(more);
        self.list.sort_by_key(|m| (m.t_ns, m.cpu));
        let over = self.list.len().saturating_sub(Self::MAX);
        self.list.truncate(Self::MAX);
        self.dropped += dropped + over as u64;
    }
}

/// One write to `trace_marker`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// When the kernel recorded it (CLOCK_MONOTONIC ns).
    pub t_ns: u64,
    pub cpu: u32,
    /// The writing thread.
    pub pid: i32,
    pub text: String,
}

/// What `--stacks` recorded during a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StacksSummary {
    /// The probe's wake-ups whose stacks were recorded, and the episodes
    /// that got one.
    pub taken: u64,
    pub episodes: u64,
    /// What one wake-up's stacks cost on the wake-up path: from the
    /// `sched_waking` record to the kernel stack's (the kernel's unwind).
    pub cost_p50_ns: u64,
    pub cost_max_ns: u64,
    /// Stack records the kernel could not write (the stack instance's ring
    /// full): wake-ups without their stacks.
    pub lost: u64,
    /// Symbolisation problems and their fixes.
    pub notes: Vec<String>,
}

/// The sampling profiler of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProfileSummary {
    /// `cycles (hardware, NMI)` or `cpu-clock (software, timer interrupt)`.
    pub event: String,
    pub hz: u64,
    /// What its samples cannot see, and, for cpu-clock, why not cycles.
    pub blind_spot: String,
    pub samples: u64,
    /// Samples inside episodes' windows.
    pub in_episodes: u64,
    /// Samples the kernel could not hand over (ring full).
    pub lost: u64,
    /// Functions more frequent inside episodes than outside them.
    pub over: Vec<OverRow>,
    pub notes: Vec<String>,
    /// After [`TraceSummary::absorb`]: the samples inside episodes of the
    /// cell whose ranking `over` is (0: this summary's own).
    #[serde(skip)]
    pub over_of: u64,
}

impl ProfileSummary {
    /// The samples inside episodes behind the ranking `over`.
    fn ranked_on(&self) -> u64 {
        if self.over_of > 0 { self.over_of } else { self.in_episodes }
    }
}

/// A function's share of samples inside episodes against outside.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverRow {
    pub function: String,
    pub module: String,
    pub inside: u64,
    pub outside: u64,
    /// (inside / all inside) / (outside / all outside), outside counted
    /// at least once.
    pub ratio: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TraceCpu {
    pub cpu: i64,
    pub events: u64,
    /// Events the kernel lost (ring buffer overrun or dropped).
    pub lost: u64,
    pub bytes: u64,
    /// Samples the probe handed to the tracer, and those it split into stages.
    pub samples: u64,
    pub decomposed: u64,
    /// Samples whose wake-up path was not (fully) in the trace.
    pub incomplete: u64,
    /// Samples whose switch into the probe thread was not traced (some
    /// kernels skip the switch out of idle) and was taken at the last
    /// interrupt exit before the wake-up.
    pub switch_inferred: u64,
    /// Samples the tracer could not take (its ring from the probe was full).
    pub samples_dropped: u64,
    /// Reads of the CPU's buffer that failed or returned an unreadable page.
    pub read_errors: u64,
    /// The probe thread's wakings recorded on other CPUs (a datagram sent
    /// from another CPU): each gives its sample's wake-up time.
    #[serde(skip_serializing_if = "is_zero")]
    pub remote_wakings: u64,
    /// When samples are windows of lost time (the noise probe), every one
    /// of them attributed, per kind of cause (like rtla osnoise's IRQ,
    /// softirq, thread and HW noise columns); empty otherwise.
    pub by_kind: Vec<KindTotal>,
}

/// One kind of cause over all of a CPU's samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KindTotal {
    pub kind: CauseKind,
    /// Samples in which it took part, and in which it was the largest.
    pub samples: u64,
    pub main: u64,
    /// Its time over all samples.
    pub ns: u64,
}

impl KindTotal {
    /// Adds one sample's causes to the totals.
    pub fn add(totals: &mut Vec<KindTotal>, causes: &[Cause]) {
        let main = main_cause(causes).map(|c| c.kind);
        let mut seen: Vec<CauseKind> = Vec::with_capacity(causes.len());
        for c in causes.iter().filter(|c| c.ns > 0) {
            let i = match totals.iter().position(|t| t.kind == c.kind) {
                Some(i) => i,
                None => {
                    totals.push(KindTotal { kind: c.kind, samples: 0, main: 0, ns: 0 });
                    totals.len() - 1
                }
            };
            let t = &mut totals[i];
            t.ns += c.ns;
            if !seen.contains(&c.kind) {
                seen.push(c.kind);
                t.samples += 1;
                t.main += u64::from(main == Some(c.kind));
            }
        }
        totals.sort_by_key(|t| std::cmp::Reverse(t.ns));
    }
}

impl TraceSummary {
    pub fn lost(&self) -> u64 {
        self.per_cpu.iter().map(|c| c.lost).sum()
    }

    /// Adds what the tracer did in another part of the same run (an
    /// assessment traces each cell with its own instance): counts add up
    /// per CPU, the reader's CPU share is over both parts' wall time.
    pub fn absorb(&mut self, other: &TraceSummary) {
        if self.instance.is_empty() {
            *self = other.clone();
            return;
        }
        let wall = |t: &TraceSummary| {
            if t.reader_cpu_pct > 0.0 { t.reader_cpu_ns as f64 * 100.0 / t.reader_cpu_pct } else { 0.0 }
        };
        let walls = wall(self) + wall(other);
        self.reader_cpu_ns += other.reader_cpu_ns;
        self.reader_cpu_pct = if walls > 0.0 { 100.0 * self.reader_cpu_ns as f64 / walls } else { 0.0 };
        for e in &other.events {
            if !self.events.contains(e) {
                self.events.push(e.clone());
            }
        }
        for m in &other.missing {
            if !self.missing.contains(m) {
                self.missing.push(m.clone());
            }
        }
        for c in &other.per_cpu {
            match self.per_cpu.iter_mut().find(|x| x.cpu == c.cpu) {
                Some(x) => {
                    x.events += c.events;
                    x.lost += c.lost;
                    x.bytes += c.bytes;
                    x.samples += c.samples;
                    x.decomposed += c.decomposed;
                    x.incomplete += c.incomplete;
                    x.switch_inferred += c.switch_inferred;
                    x.samples_dropped += c.samples_dropped;
                    x.read_errors += c.read_errors;
                    x.remote_wakings += c.remote_wakings;
                }
                None => self.per_cpu.push(c.clone()),
            }
        }
        self.episodes_built += other.episodes_built;
        self.episodes_kept += other.episodes_kept;
        match (&mut self.stacks, &other.stacks) {
            (Some(a), Some(b)) => {
                a.taken += b.taken;
                a.episodes += b.episodes;
                a.cost_p50_ns = a.cost_p50_ns.max(b.cost_p50_ns);
                a.cost_max_ns = a.cost_max_ns.max(b.cost_max_ns);
                a.lost += b.lost;
                a.notes.extend(b.notes.iter().filter(|n| !a.notes.contains(n)).cloned().collect::<Vec<_>>());
            }
            (None, Some(b)) => self.stacks = Some(b.clone()),
            _ => {}
        }
        match (&mut self.profile, &other.profile) {
            (Some(a), Some(b)) => {
                // Each cell ranks its own (the rows are its top ones only,
                // so they cannot be summed): the ranking from the cell with
                // the most samples inside episodes is kept.
                let kept = a.ranked_on();
                if b.ranked_on() > kept {
                    a.over.clone_from(&b.over);
                    a.over_of = b.ranked_on();
                } else {
                    a.over_of = kept;
                }
                a.samples += b.samples;
                a.in_episodes += b.in_episodes;
                a.lost += b.lost;
            }
            (None, Some(b)) => self.profile = Some(b.clone()),
            _ => {}
        }
        if let Some(b) = &other.markers {
            self.markers.get_or_insert_with(Markers::default).extend(b.list.iter().cloned(), b.dropped);
        }
        // Each cell's threads apart (each carries its load).
        match (&mut self.watch_profile, &other.watch_profile) {
            (Some(a), Some(b)) => {
                a.threads.extend(b.threads.iter().cloned());
                a.notes.extend(b.notes.iter().filter(|n| !a.notes.contains(n)).cloned().collect::<Vec<_>>());
            }
            (None, Some(b)) => self.watch_profile = Some(b.clone()),
            _ => {}
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
