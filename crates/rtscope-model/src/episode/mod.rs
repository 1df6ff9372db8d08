//! Cause episodes: a sample above the cause threshold, with the kernel
//! events of its CPU turned into stages (where the time went along the
//! wake-up path) and causes (who had the CPU meanwhile), a one-line
//! verdict, and a timeline for Perfetto. Also the per-run trace summary and
//! the "top causes" table over a run's episodes.

mod cause;
mod code;
mod summary;
#[cfg(test)]
pub(crate) mod tests;
pub mod timeline;

pub use cause::*;
pub use code::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
pub use summary::*;

/// One explained sample.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    pub probe: String,
    /// The workload, in an assessment (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<String>,
    pub metric: String,
    pub cpu: i64,
    /// The sample's number on its CPU, from 1.
    pub sample: u64,
    /// When the probe should have run (CLOCK_MONOTONIC ns).
    pub programmed_ns: u64,
    /// When it did (its own timestamp).
    pub woke_ns: u64,
    pub latency_ns: u64,
    /// The stages, when every event of the wake-up path was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Stages>,
    /// Who had the CPU from the programmed time to the wake-up, largest
    /// first; they add up to the latency.
    pub causes: Vec<Cause>,
    pub verdict: String,
    /// The CPU's timeline from the probe's previous wake-up to this one.
    #[serde(default)]
    pub slices: Vec<Slice>,
    /// The kernel and user stacks of what ran on the CPU when the probe's
    /// timer woke it (`--stacks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<CodeStack>,
    /// The stacks of the thread that held the CPU longest (the main cause,
    /// when a thread) while it ran: the profiler's middle sample of it in
    /// the window, one in its own (user) code where there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocker: Option<CodeStack>,
    /// The sampling profiler's samples inside the window from the
    /// programmed time to the wake-up (`--sample-hz`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<WindowSamples>,
    /// The unaccounted time, named where the evidence allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remainder: Option<Remainder>,
}

/// `842.1us`: a verdict's durations.
fn us(ns: u64) -> String {
    format!("{:.1}us", ns as f64 / 1000.0)
}

/// Causes smaller than this are left out of a verdict (they stay stored).
const VERDICT_MIN_NS: u64 = 500;

/// The one-line verdict, e.g. `cpu1 #8412 latency 842.1us: thread 815.0us,
/// blocked by kworker/1:2 (pid 77, SCHED_OTHER) 790.3us; irq 12.0us
/// (virtio0-input 10.1us); softirq NET_RX 8.2us; unaccounted 3.1us`.
pub fn verdict(
    cpu: i64,
    sample: u64,
    metric: &str,
    latency_ns: u64,
    stages: Option<&Stages>,
    causes: &[Cause],
) -> String {
    verdict_named(&Stages::NAMES, cpu, sample, metric, latency_ns, stages, causes)
}

/// [`verdict`] with the stages named `names` (e.g. [`Stages::NET_NAMES`]).
pub fn verdict_named(
    names: &[&str; 5],
    cpu: i64,
    sample: u64,
    metric: &str,
    latency_ns: u64,
    stages: Option<&Stages>,
    causes: &[Cause],
) -> String {
    let mut s = format!("cpu{cpu} #{sample} {metric} {}", us(latency_ns));
    let main = main_cause(causes);
    // The softirqs the main thread ran from its own kernel code go with it.
    let with: Vec<&Cause> = main.map(|m| causes.iter().filter(|s| run_by(s, m)).collect()).unwrap_or_default();
    let mut parts: Vec<String> = Vec::new();
    // The stage the main cause fell in (else the longest), as the head.
    let mut first = String::new();
    if let Some(st) = stages {
        let named = main.and_then(|m| m.stage.as_deref()).and_then(|n| names.iter().position(|x| *x == n));
        let (name, ns) = match named {
            Some(i) => (names[i], st.values()[i]),
            None => {
                let (largest, ns) = st.largest();
                (Stages::NAMES.iter().position(|x| *x == largest).map_or(largest, |i| names[i]), ns)
            }
        };
        first = format!("{name} {}", us(ns));
    }
    if let Some(m) = main {
        let total = m.ns + with.iter().map(|s| s.ns).sum::<u64>();
        let what = match m.kind {
            CauseKind::Thread => format!("blocked by {} {}{}", m.label(), us(total), in_kernel(m, &with)),
            CauseKind::Irq => format!("in irq {} {}", m.label(), us(m.ns)),
            CauseKind::Softirq => match &m.host {
                Some(h) if h.in_kernel => {
                    format!("in softirq {} {} (run by {} (pid {}))", m.name, us(m.ns), h.name, h.pid)
                }
                Some(h) => format!("in softirq {} {} (on {} (pid {}))", m.name, us(m.ns), h.name, h.pid),
                None => format!("in softirq {} {}", m.name, us(m.ns)),
            },
            CauseKind::Timer => format!("in the probe's timer interrupt {}", us(m.ns)),
            CauseKind::User if m.name == BUSY_RECEIVER => {
                format!("queued behind earlier datagrams (the receiver was still handling them) {}", us(m.ns))
            }
            CauseKind::User => format!("returning to user space {}", us(m.ns)),
            CauseKind::Unaccounted if m.pid.is_some_and(|p| p != 0) => {
                format!("unaccounted (interrupts off, hypervisor or SMI; {} was running) {}", m.name, us(m.ns))
            }
            CauseKind::Unaccounted => {
                format!("unaccounted (interrupts off, hypervisor, SMI or idle exit) {}", us(m.ns))
            }
            CauseKind::Remote => format!("its wake-up still on the way from {} {}", m.name, us(m.ns)),
        };
        let head = if first.is_empty() { what } else { format!("{first}, {what}") };
        parts.push(head);
    } else if !first.is_empty() {
        parts.push(first);
    }
    // The rest, grouped by kind, largest first.
    let mut groups: BTreeMap<CauseKind, Vec<&Cause>> = BTreeMap::new();
    for c in causes.iter().filter(|c| Some(*c) != main && !with.contains(c) && c.ns >= VERDICT_MIN_NS) {
        groups.entry(c.kind).or_default().push(c);
    }
    let mut rest: Vec<(u64, String)> = groups
        .into_iter()
        .map(|(kind, list)| {
            let total: u64 = list.iter().map(|c| c.ns).sum();
            let top = list.iter().max_by_key(|c| c.ns).map(|c| (c.name.clone(), c.ns));
            let text = match (kind, top) {
                (CauseKind::Softirq, Some((name, _))) if list.len() == 1 => format!("softirq {name} {}", us(total)),
                (CauseKind::Remote, Some((name, _))) if list.len() == 1 => {
                    format!("wake-up on the way from {name} {}", us(total))
                }
                (CauseKind::Timer | CauseKind::User | CauseKind::Unaccounted, _) => {
                    format!("{} {}", kind.as_str(), us(total))
                }
                (_, Some((name, ns))) => format!("{} {} ({name} {})", kind.as_str(), us(total), us(ns)),
                (_, None) => format!("{} {}", kind.as_str(), us(total)),
            };
            (total, text)
        })
        .collect();
    rest.sort_by_key(|r| std::cmp::Reverse(r.0));
    parts.extend(rest.into_iter().map(|(_, t)| t));
    if !parts.is_empty() {
        s.push_str(": ");
        s.push_str(&parts.join("; "));
    }
    s
}

/// What a blocking thread `m` did in the kernel, for its verdict: the
/// softirqs it ran there (`with`) and its time not preempted (see
/// [`Cause::kernel_ns`], said from [`HELD_MIN_NS`]); empty when neither.
fn in_kernel(m: &Cause, with: &[&Cause]) -> String {
    let mut inside: Vec<String> = with.iter().map(|s| format!("softirq {} {}", s.name, us(s.ns))).collect();
    if let Some(k) = m.kernel_ns.filter(|&k| k >= HELD_MIN_NS) {
        inside.push(format!("not preemptible {}", us(k)));
    }
    if inside.is_empty() { String::new() } else { format!(" in the kernel ({} of it)", inside.join(", ")) }
}

/// A blocking thread's time not preempted is said from this: a return to
/// user space that preempts takes a few microseconds to switch.
pub const HELD_MIN_NS: u64 = 10_000;

/// One row of the top-causes table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopCause {
    pub kind: CauseKind,
    pub name: String,
    /// Episodes in which this was the largest cause.
    pub main_in: u64,
    /// Episodes in which it appears at all.
    pub seen_in: u64,
    pub total_ns: u64,
    /// Its share of all episodes' latency, %.
    pub share_pct: f64,
    pub max_ns: u64,
}

/// Aggregates episodes by cause (kind and name; threads by comm), largest
/// total first: which sources account for how much of the tail.
pub fn top_causes(episodes: &[Episode]) -> Vec<TopCause> {
    let all: u64 = episodes.iter().map(|e| e.latency_ns).sum();
    let mut by: BTreeMap<(CauseKind, String), TopCause> = BTreeMap::new();
    for e in episodes {
        let main = main_cause(&e.causes);
        let mut seen: Vec<(CauseKind, String)> = Vec::new();
        for c in &e.causes {
            let key = (c.kind, c.name.clone());
            let row = by.entry(key.clone()).or_insert_with(|| TopCause {
                kind: c.kind,
                name: c.name.clone(),
                main_in: 0,
                seen_in: 0,
                total_ns: 0,
                share_pct: 0.0,
                max_ns: 0,
            });
            row.total_ns += c.ns;
            row.max_ns = row.max_ns.max(c.ns);
            if !seen.contains(&key) {
                row.seen_in += 1;
                if main.is_some_and(|m| m.kind == c.kind && m.name == c.name) {
                    row.main_in += 1;
                }
                seen.push(key);
            }
        }
    }
    let mut rows: Vec<TopCause> = by.into_values().collect();
    for r in &mut rows {
        r.share_pct = if all == 0 { 0.0 } else { 100.0 * r.total_ns as f64 / all as f64 };
    }
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    rows
}
