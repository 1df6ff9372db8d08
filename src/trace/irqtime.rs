//! Interrupt and softirq runtime per driver: the trace reader folds each
//! traced CPU's events into the runtime of every hard interrupt (a
//! device's `irq_handler_entry` -> `irq_handler_exit`, an interrupt
//! vector's `irq_vectors:*_entry` -> `*_exit`) and of every softirq
//! (`softirq_entry` -> `softirq_exit`), over the whole traced window, and
//! ships each checkpoint interval's histograms to the writer, which stores
//! them as series named by the interrupt (`irq:local_timer`,
//! `irq:virtio0-input`, `softirq:NET_RX`; see
//! [`rtscope_model::irqtime`]). The reader thread folds: never a measuring
//! thread.
//!
//! A runtime is the interrupt's own time: an interrupt nested in another
//! (a hard interrupt inside a softirq) is taken out of the outer one. A
//! lost event never makes a runtime: an exit with no entry open (lost, or
//! before the trace began) is skipped; an entry of an interrupt already
//! open (its exit lost), a softirq entry or a task switch while a hard
//! interrupt is open (neither happens inside one) forget what was open;
//! and the kernel's mark of lost events forgets everything open.

use super::event::{Decoder, Ev, Kind, SOFTIRQ_NAMES};
use crate::recorder::{EpisodeMsg, RuntimeBatch};
use rtscope_model::hist::Tally;
use rtscope_model::irqtime::{Class, metric};
use std::collections::BTreeMap;

/// An interrupt as the events name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    /// The local timer interrupt (`irq_vectors:local_timer_*`).
    Timer,
    /// Another interrupt vector: [`Decoder::vector_name`]'s index.
    Vector(u8),
    /// A device's IRQ line.
    Irq(i32),
    /// A softirq vector.
    Soft(u8),
}

impl Key {
    /// Its series' metric.
    pub fn metric(self, decoder: &Decoder) -> String {
        match self {
            Key::Timer => metric(Class::Irq, "local_timer"),
            Key::Vector(v) => metric(Class::Irq, decoder.vector_name(v)),
            Key::Irq(n) => match decoder.irq_names.get(&n) {
                Some(name) if !name.is_empty() => metric(Class::Irq, name),
                _ => metric(Class::Irq, &format!("irq{n}")),
            },
            Key::Soft(v) => metric(Class::Softirq, SOFTIRQ_NAMES.get(v as usize).copied().unwrap_or("softirq")),
        }
    }
}

/// Hard interrupts open at once at most (nesting is rare; more are lost
/// exits).
const DEPTH: usize = 4;

/// A hard interrupt open: since when, and the time of those nested in it.
#[derive(Clone, Copy, Debug)]
struct Open {
    key: Key,
    since: u64,
    nested: u64,
}

/// A softirq open: its vector, since when, the task it runs in, the time
/// of the interrupts nested in it and, while that task is switched out (a
/// softirq preempted on PREEMPT_RT), since when.
#[derive(Clone, Copy, Debug)]
struct OpenSoft {
    vec: u8,
    since: u64,
    pid: i32,
    nested: u64,
    away: Option<u64>,
}

/// One CPU's pairing of entries and exits.
#[derive(Default)]
pub struct Pairing {
    hard: Vec<Open>,
    soft: Option<OpenSoft>,
    /// Exits with no entry open, and entries forgotten (lost events).
    pub unpaired: u64,
}

impl Pairing {
    /// One event of this CPU, in time order; `done` takes each finished
    /// interrupt's (key, exit time, runtime).
    pub fn event(&mut self, e: &Ev, done: &mut impl FnMut(Key, u64, u64)) {
        match e.kind {
            Kind::TimerEntry => self.enter(Key::Timer, e.ts),
            Kind::TimerExit => self.exit(Key::Timer, e.ts, done),
            Kind::VectorEntry(v) => self.enter(Key::Vector(v), e.ts),
            Kind::VectorExit(v) => self.exit(Key::Vector(v), e.ts, done),
            Kind::IrqEntry(n) => self.enter(Key::Irq(n), e.ts),
            Kind::IrqExit(n) => self.exit(Key::Irq(n), e.ts, done),
            Kind::SoftEntry(vec) => {
                // Softirqs run after the hard interrupt's exit, in task
                // context or ksoftirqd: any still open lost their exits.
                self.forget_hard();
                if self.soft.take().is_some() {
                    self.unpaired += 1;
                }
                self.soft = Some(OpenSoft { vec, since: e.ts, pid: e.pid, nested: 0, away: None });
            }
            Kind::SoftExit(vec) => {
                self.forget_hard();
                match self.soft.take() {
                    Some(s) if s.vec == vec && s.away.is_none() => {
                        done(Key::Soft(vec), e.ts, e.ts.saturating_sub(s.since).saturating_sub(s.nested))
                    }
                    _ => self.unpaired += 1,
                }
            }
            Kind::Switch { prev, next } => {
                // No task switch inside a hard interrupt.
                self.forget_hard();
                if let Some(s) = &mut self.soft {
                    match s.away {
                        None if prev == s.pid => s.away = Some(e.ts),
                        Some(at) if next == s.pid => {
                            s.nested += e.ts.saturating_sub(at);
                            s.away = None;
                        }
                        _ => {}
                    }
                }
            }
            Kind::Lost => self.lost(),
            _ => {}
        }
    }

    /// The kernel lost events here: whatever is open is forgotten.
    pub fn lost(&mut self) {
        self.forget_hard();
        if self.soft.take().is_some() {
            self.unpaired += 1;
        }
    }

    fn forget_hard(&mut self) {
        self.unpaired += self.hard.len() as u64;
        self.hard.clear();
    }

    fn enter(&mut self, key: Key, ts: u64) {
        // Already open: its exit was lost (with whatever opened after it).
        if let Some(at) = self.hard.iter().position(|o| o.key == key) {
            self.unpaired += (self.hard.len() - at) as u64;
            self.hard.truncate(at);
        }
        if self.hard.len() == DEPTH {
            self.hard.remove(0);
            self.unpaired += 1;
        }
        self.hard.push(Open { key, since: ts, nested: 0 });
    }

    fn exit(&mut self, key: Key, ts: u64, done: &mut impl FnMut(Key, u64, u64)) {
        let Some(at) = self.hard.iter().rposition(|o| o.key == key) else {
            self.unpaired += 1;
            return;
        };
        // Those opened inside it and still open lost their exits.
        self.unpaired += (self.hard.len() - at - 1) as u64;
        self.hard.truncate(at + 1);
        let Some(o) = self.hard.pop() else { return };
        let inclusive = ts.saturating_sub(o.since);
        done(key, ts, inclusive.saturating_sub(o.nested));
        match self.hard.last_mut() {
            Some(outer) => outer.nested += inclusive,
            None => {
                if let Some(s) = &mut self.soft
                    && s.away.is_none()
                {
                    s.nested += inclusive;
                }
            }
        }
    }
}

/// One traced CPU's runtimes: the pairing, and the histograms of the
/// interval in progress, per interrupt.
pub struct CpuRuntimes {
    cpu: i64,
    pairing: Pairing,
    open: BTreeMap<Key, Tally>,
    /// Start of the interval in progress (0: not started).
    since: u64,
    /// Interval length.
    every_ns: u64,
}

impl CpuRuntimes {
    pub fn new(cpu: i64, every_ns: u64) -> CpuRuntimes {
        CpuRuntimes { cpu, pairing: Pairing::default(), open: BTreeMap::new(), since: 0, every_ns: every_ns.max(1) }
    }

    /// Starts the first interval at `now`.
    pub fn start(&mut self, now: u64) {
        self.since = now;
    }

    pub fn event(&mut self, e: &Ev) {
        let open = &mut self.open;
        self.pairing.event(e, &mut |key, _, ns| open.entry(key).or_default().record(ns));
    }

    /// Exits with no entry and entries forgotten (lost events).
    pub fn unpaired(&self) -> u64 {
        self.pairing.unpaired
    }

    /// The interval up to `now`, when it is due (or `last`), as a message
    /// for the writer of `probe`'s series (named by `decoder`); None when
    /// not due or nothing ran.
    pub fn ship(&mut self, probe: &str, decoder: &Decoder, now: u64, last: bool) -> Option<EpisodeMsg> {
        if !last && now < self.since.saturating_add(self.every_ns) {
            return None;
        }
        let start_ns = std::mem::replace(&mut self.since, now);
        // IRQ lines of one name (a driver's queues) make one series.
        let mut series: Vec<(String, Tally)> = Vec::new();
        for (k, t) in std::mem::take(&mut self.open).into_iter().filter(|(_, t)| t.stats.count > 0) {
            let m = k.metric(decoder);
            match series.iter_mut().find(|(n, _)| *n == m) {
                Some((_, into)) => into.merge(&t),
                None => series.push((m, t)),
            }
        }
        if series.is_empty() {
            return None;
        }
        Some(EpisodeMsg::Runtime(Box::new(RuntimeBatch {
            probe: probe.to_string(),
            cpu: self.cpu,
            start_ns,
            end_ns: now.max(start_ns),
            series,
        })))
    }
}

/// [`irqs_off_note`], once per process: an assessment's or a probe's
/// several traced cells say it once.
pub fn irqs_off_note_once(root: &std::path::Path) -> Option<String> {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    (!SAID.swap(true, std::sync::atomic::Ordering::Relaxed)).then(|| irqs_off_note(root))
}

/// Whether the kernel can tell when interrupts are masked, and how:
/// the `preemptirq` tracepoints (`irq_disable`/`irq_enable`,
/// CONFIG_TRACE_IRQFLAGS with CONFIG_TRACE_PREEMPT_TOGGLE or
/// CONFIG_IRQSOFF_TRACER) or the irqsoff tracer; a sentence for the run's
/// notes (informational: not a `--trace:` problem).
pub fn irqs_off_note(root: &std::path::Path) -> String {
    let events = root.join("events/preemptirq/irq_disable").exists();
    let tracer = std::fs::read_to_string(root.join("available_tracers"))
        .is_ok_and(|t| t.split_whitespace().any(|n| n == "irqsoff"));
    irqs_off_text(events, tracer)
}

fn irqs_off_text(events: bool, tracer: bool) -> String {
    let what = match (events, tracer) {
        (false, false) => {
            "this kernel has neither the preemptirq tracepoints (irq_disable/irq_enable) nor the irqsoff tracer \
             (CONFIG_TRACE_IRQFLAGS, CONFIG_IRQSOFF_TRACER), as Debian's kernels"
        }
        (true, false) => "this kernel has the preemptirq tracepoints; rtscope does not read them yet",
        (false, true) => "this kernel has the irqsoff tracer; rtscope does not run it beside --trace yet",
        (true, true) => "this kernel has the preemptirq tracepoints and the irqsoff tracer; rtscope reads neither yet",
    };
    format!(
        "interrupts-masked time is not measured (--trace): {what}; where interrupts were masked, a late sample's \
         episode shows the time as its unaccounted remainder (the timer interrupt came late with nothing traced \
         running in interrupt context), named from the evidence where it can be"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, pid: i32, kind: Kind) -> Ev {
        Ev { ts, pid, kind }
    }

    fn fold(events: &[Ev]) -> (Vec<(Key, u64, u64)>, u64) {
        let mut p = Pairing::default();
        let mut got = Vec::new();
        for e in events {
            p.event(e, &mut |k, t, ns| got.push((k, t, ns)));
        }
        (got, p.unpaired)
    }

    /// Entries and exits pair per interrupt; a hard interrupt inside a
    /// softirq is its own and is taken out of the softirq's runtime; a
    /// device's interrupt inside a vector's is taken out of the vector's.
    #[test]
    fn pairs_and_nests() {
        let (got, unpaired) = fold(&[
            ev(100, 7, Kind::TimerEntry),
            ev(110, 7, Kind::IrqEntry(11)),
            ev(130, 7, Kind::IrqExit(11)),
            ev(160, 7, Kind::TimerExit),
            ev(170, 7, Kind::SoftEntry(1)),
            ev(180, 7, Kind::VectorEntry(2)),
            ev(185, 7, Kind::VectorExit(2)),
            ev(200, 7, Kind::SoftExit(1)),
        ]);
        assert_eq!(
            got,
            [(Key::Irq(11), 130, 20), (Key::Timer, 160, 40), (Key::Vector(2), 185, 5), (Key::Soft(1), 200, 25),]
        );
        assert_eq!(unpaired, 0);
    }

    /// The trace begins inside an interrupt (an exit with no entry), an
    /// exit is lost (the next entry of the same interrupt, a softirq entry
    /// or a switch forgets it), the kernel marks lost events: none of them
    /// makes a runtime, and the next pairs are right.
    #[test]
    fn lost_events_make_no_giant_runtime() {
        let (got, unpaired) = fold(&[
            // Began inside the timer interrupt and a softirq.
            ev(5, 7, Kind::TimerExit),
            ev(8, 7, Kind::SoftExit(1)),
            // The timer's exit lost: the next entry forgets it.
            ev(100, 7, Kind::TimerEntry),
            ev(1_000_000, 7, Kind::TimerEntry),
            ev(1_000_010, 7, Kind::TimerExit),
            // A device's exit lost, then a switch.
            ev(2_000_000, 7, Kind::IrqEntry(11)),
            ev(2_000_500, 7, Kind::Switch { prev: 7, next: 9 }),
            ev(9_000_000, 9, Kind::IrqExit(11)),
            // A softirq's exit lost, then the next softirq.
            ev(10_000_000, 9, Kind::SoftEntry(3)),
            ev(11_000_000, 9, Kind::SoftEntry(3)),
            ev(11_000_020, 9, Kind::SoftExit(3)),
            // The kernel lost events between an entry and an exit.
            ev(12_000_000, 9, Kind::TimerEntry),
            ev(12_000_001, -1, Kind::Lost),
            ev(19_000_000, 9, Kind::TimerExit),
            ev(20_000_000, 9, Kind::SoftEntry(1)),
            ev(20_000_001, -1, Kind::Lost),
            ev(29_000_000, 9, Kind::SoftExit(1)),
        ]);
        assert_eq!(got, [(Key::Timer, 1_000_010, 10), (Key::Soft(3), 11_000_020, 20)]);
        assert!(got.iter().all(|g| g.2 < 1_000), "{got:?}");
        assert_eq!(unpaired, 10);
    }

    /// A softirq preempted (PREEMPT_RT: its task switched out) counts only
    /// its own task's time; a hard interrupt while it is away is not taken
    /// out of it.
    #[test]
    fn a_preempted_softirq_counts_its_own_time() {
        let (got, _) = fold(&[
            ev(100, 7, Kind::SoftEntry(3)),
            ev(150, 7, Kind::Switch { prev: 7, next: 9 }),
            ev(160, 9, Kind::TimerEntry),
            ev(170, 9, Kind::TimerExit),
            ev(400, 9, Kind::Switch { prev: 9, next: 7 }),
            ev(420, 7, Kind::SoftExit(3)),
        ]);
        assert_eq!(got, [(Key::Timer, 170, 10), (Key::Soft(3), 420, 70)]);
    }

    /// Intervals ship when due, named by the decoder, and only what ran.
    #[test]
    fn ships_named_intervals_when_due() {
        let mut d = Decoder::default();
        d.irq_names.insert(11, "virtio0-input".into());
        d.irq_names.insert(12, "virtio0-input".into());
        let mut c = CpuRuntimes::new(1, 1_000);
        c.start(0);
        for e in [
            ev(10, 7, Kind::IrqEntry(11)),
            ev(30, 7, Kind::IrqExit(11)),
            ev(32, 7, Kind::IrqEntry(12)),
            ev(35, 7, Kind::IrqExit(12)),
            ev(40, 7, Kind::TimerEntry),
        ] {
            c.event(&e);
        }
        assert!(c.ship("wakeup", &d, 999, false).is_none());
        c.event(&ev(45, 7, Kind::TimerExit));
        let Some(EpisodeMsg::Runtime(b)) = c.ship("wakeup", &d, 1_000, false) else { panic!("due") };
        let names: Vec<(&str, u64, u64)> =
            b.series.iter().map(|(m, t)| (m.as_str(), t.stats.count, t.stats.max)).collect();
        assert_eq!(names, [("irq:local_timer", 1, 5), ("irq:virtio0-input", 2, 20)]);
        assert_eq!((b.cpu, b.start_ns, b.end_ns), (1, 0, 1_000));
        assert!(c.ship("wakeup", &d, 5_000, true).is_none(), "nothing ran since");
    }

    #[test]
    fn the_masked_time_note_says_what_the_kernel_has() {
        let none = irqs_off_text(false, false);
        assert!(none.contains("neither the preemptirq tracepoints") && none.contains("unaccounted remainder"));
        assert!(irqs_off_text(true, false).contains("does not read them yet"));
    }
}
