//! The trace reader's fold of each traced CPU's decoded events into the
//! run's [`Timeline`] of the whole window: a task's slice from one
//! `sched_switch` to the next, hard IRQs (devices' and vectors') and
//! softirqs from entry to exit, wake-ups as instants; and the probe's
//! samples or the watched threads' activations beside them. The reader
//! thread folds (never a measuring thread); names are taken from the
//! decoder once a drain is over (it holds the tasks' names meanwhile).

use super::event::{Decoder, Ev, Kind, SOFTIRQ_NAMES};
use super::watch::Obs;
use rtscope_model::episode::timeline::{Item, Timeline, Track};
use std::collections::HashMap;

/// What an item's name is made of, until the drain is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    Task(i32),
    Irq(i32),
    Vector(u8),
    Timer,
    Soft(u8),
}

/// An item before its name: (track, start, duration, what names it, pid).
type Pending = (Track, u64, u64, Key, i32);

/// One traced CPU's fold: what is open on it, and the items of the drain
/// in progress.
pub struct CpuFold {
    cpu: u32,
    /// The task on the CPU and since when.
    task: Option<(i32, u64)>,
    /// The hard interrupts open, innermost last (a device's inside a
    /// vector's).
    irqs: Vec<(Key, u64)>,
    soft: Option<(u8, u64)>,
    /// While the CPU idles: the tasks woken on it (at what time), and the
    /// end of its last interrupt. A kernel may trace no switch out of the
    /// idle task (a guest's `haltpoll` idle has been seen tracing none):
    /// a task woken here then runs from the end of the interrupt that woke
    /// it, as the wake-up path's decomposition infers it too.
    woken: Vec<(i32, u64)>,
    idle_exit_ns: u64,
    last_ts: u64,
    pending: Vec<Pending>,
    /// The names of IRQs, vectors and softirqs, once made.
    named: HashMap<Key, u32>,
}

impl CpuFold {
    pub fn new(cpu: u32) -> CpuFold {
        CpuFold {
            cpu,
            task: None,
            irqs: Vec::with_capacity(4),
            soft: None,
            woken: Vec::with_capacity(4),
            idle_exit_ns: 0,
            last_ts: 0,
            pending: Vec::with_capacity(1024),
            named: HashMap::new(),
        }
    }

    /// One event of this CPU, in time order.
    pub fn event(&mut self, e: &Ev) {
        self.last_ts = self.last_ts.max(e.ts);
        // The task an event shows current (the interrupted one in an
        // interrupt): where no switch onto it was traced (some kernels
        // trace no switch out of the idle task), its slice begins here.
        if e.pid >= 0 && !matches!(e.kind, Kind::RemoteWaking { .. }) && self.task.is_none_or(|t| t.0 != e.pid) {
            let since = match self.task {
                Some((pid, since)) if pid != 0 => {
                    if e.ts > since {
                        self.pending.push((Track::Task, since, e.ts - since, Key::Task(pid), pid));
                    }
                    e.ts
                }
                // Off the idle task with no switch traced: from the end of
                // the interrupt that woke it here, where one did.
                _ => self.woken.iter().find(|w| w.0 == e.pid).map_or(e.ts, |w| w.1.max(self.idle_exit_ns).min(e.ts)),
            };
            self.task = Some((e.pid, since));
            self.woken.clear();
        }
        let idle = self.task.is_none_or(|t| t.0 == 0);
        let irq = |k: &mut Self, key: Key, entry: bool| {
            if entry {
                k.irqs.push((key, e.ts));
            } else if let Some(at) = k.irqs.iter().rposition(|(open, _)| *open == key) {
                let (_, since) = k.irqs.remove(at);
                let pid = if let Key::Irq(n) = key { n } else { -1 };
                k.pending.push((Track::Irq, since, e.ts.saturating_sub(since), key, pid));
            }
        };
        if idle {
            match e.kind {
                Kind::Waking { pid } | Kind::RemoteWaking { pid, .. } => {
                    match self.woken.iter_mut().find(|w| w.0 == pid) {
                        Some(w) => w.1 = e.ts,
                        None => self.woken.push((pid, e.ts)),
                    }
                }
                Kind::TimerExit | Kind::IrqExit(_) | Kind::SoftExit(_) | Kind::VectorExit(_) => {
                    self.idle_exit_ns = e.ts;
                }
                _ => {}
            }
        }
        match e.kind {
            Kind::Switch { next, .. } => {
                self.woken.clear();
                if let Some((pid, since)) = self.task.replace((next, e.ts))
                    && pid != 0
                    && e.ts > since
                {
                    self.pending.push((Track::Task, since, e.ts - since, Key::Task(pid), pid));
                }
            }
            Kind::TimerEntry => irq(self, Key::Timer, true),
            Kind::TimerExit => irq(self, Key::Timer, false),
            Kind::VectorEntry(v) => irq(self, Key::Vector(v), true),
            Kind::VectorExit(v) => irq(self, Key::Vector(v), false),
            Kind::IrqEntry(n) => irq(self, Key::Irq(n), true),
            Kind::IrqExit(n) => irq(self, Key::Irq(n), false),
            Kind::SoftEntry(v) => self.soft = Some((v, e.ts)),
            Kind::SoftExit(v) => {
                if let Some((open, since)) = self.soft.take()
                    && open == v
                {
                    self.pending.push((Track::Softirq, since, e.ts.saturating_sub(since), Key::Soft(v), v.into()));
                }
            }
            Kind::Waking { pid } => self.pending.push((Track::Wake, e.ts, 0, Key::Task(pid), pid)),
            _ => {}
        }
    }

    /// The drain is over: its items named (by `decoder`) into `into`.
    pub fn flush(&mut self, decoder: &Decoder, into: &mut Timeline) {
        for (track, start_ns, dur_ns, key, pid) in self.pending.drain(..) {
            let name = match key {
                Key::Task(p) => match decoder.tasks.get(&p) {
                    Some(t) => into.name(&t.comm),
                    None => into.name(&format!("pid {p}")),
                },
                _ => *self.named.entry(key).or_insert_with(|| {
                    into.name(&match key {
                        Key::Irq(n) => format!("irq {n} {}", decoder.irq_names.get(&n).map_or("", String::as_str)),
                        Key::Vector(v) => decoder.vector_name(v).to_string(),
                        Key::Soft(v) => SOFTIRQ_NAMES.get(v as usize).map_or("softirq", |n| n).to_string(),
                        Key::Timer | Key::Task(_) => "local_timer".to_string(),
                    })
                }),
            };
            into.push(Item { cpu: self.cpu, track, start_ns, dur_ns, name, pid, value_ns: 0 });
        }
    }

    /// The end of the trace: the task still on the CPU gets its slice up
    /// to the last event.
    pub fn finish(&mut self, decoder: &Decoder, into: &mut Timeline) {
        if let Some((pid, since)) = self.task.take()
            && pid != 0
            && self.last_ts > since
        {
            self.pending.push((Track::Task, since, self.last_ts - since, Key::Task(pid), pid));
        }
        self.flush(decoder, into);
    }
}

/// A probe's sample on `cpu` (its thread `tid`): a period slice from its
/// programmed time to its wake-up, named `label`, and its span scored by
/// its latency.
pub fn sample(into: &mut Timeline, (cpu, tid, label): (i64, i32, &str), t_ns: u64, value_ns: u64) {
    into.score(t_ns, value_ns);
    let name = into.name(label);
    let start_ns = t_ns.saturating_sub(value_ns);
    let cpu = u32::try_from(cpu).unwrap_or(u32::MAX);
    into.push(Item { cpu, track: Track::Period, start_ns, dur_ns: value_ns, name, pid: tid, value_ns });
}

/// What the watched threads' tracker saw: a wake-up's latency scores its
/// span; an activation is a period slice from its release to its end
/// (named by the thread, its value the response).
pub fn watched(into: &mut Timeline, decoder: &Decoder, o: &Obs) {
    match *o {
        Obs::Latency { waking_ns, ran_ns, .. } => into.score(ran_ns, ran_ns.saturating_sub(waking_ns)),
        Obs::Done { tid, release_ns, end_ns, .. } => {
            let name = match decoder.tasks.get(&tid) {
                Some(t) => into.name(&t.comm),
                None => into.name(&format!("pid {tid}")),
            };
            let dur_ns = end_ns.saturating_sub(release_ns);
            into.push(Item {
                cpu: u32::MAX,
                track: Track::Period,
                start_ns: release_ns,
                dur_ns,
                name,
                pid: tid,
                value_ns: dur_ns,
            });
        }
        Obs::Period { .. } | Obs::Unmatched { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, pid: i32, kind: Kind) -> Ev {
        Ev { ts, pid, kind }
    }

    /// Switches make task slices (not the idle task's), interrupts and
    /// softirqs their slices (a device's inside the timer's), wakings
    /// instants; a task shown on the CPU with no switch onto it gets its
    /// slice from that event, or, woken on the idle CPU, from the end of
    /// the interrupts that woke it.
    #[test]
    fn events_fold_into_slices() {
        let mut d = Decoder::default();
        for (pid, comm) in [(7, "spin"), (9, "probe")] {
            d.tasks.insert(pid, super::super::event::Task { comm: comm.into(), prio: 120 });
        }
        d.irq_names.insert(11, "eth0".into());
        let mut f = CpuFold::new(1);
        for e in [
            ev(100, 7, Kind::TimerEntry),
            ev(110, 7, Kind::IrqEntry(11)),
            ev(130, 7, Kind::IrqExit(11)),
            ev(150, 7, Kind::Waking { pid: 9 }),
            ev(160, 7, Kind::TimerExit),
            ev(170, 7, Kind::SoftEntry(3)),
            ev(190, 7, Kind::SoftExit(3)),
            ev(200, 7, Kind::Switch { prev: 7, next: 9 }),
            ev(260, 9, Kind::Switch { prev: 9, next: 0 }),
            ev(300, 0, Kind::Switch { prev: 0, next: 7 }),
            ev(350, 7, Kind::Waking { pid: 9 }),
            // No switch from the idle task traced: the timer shows 9 on.
            ev(370, 7, Kind::Switch { prev: 7, next: 0 }),
            ev(400, 9, Kind::TimerEntry),
            ev(410, 9, Kind::TimerExit),
            ev(420, 9, Kind::Switch { prev: 9, next: 0 }),
            // No switch out of the idle task traced: 9, woken in the idle
            // CPU's timer interrupt, runs from the end of its softirq.
            ev(500, 0, Kind::TimerEntry),
            ev(505, 0, Kind::Waking { pid: 9 }),
            ev(510, 0, Kind::TimerExit),
            ev(515, 0, Kind::SoftEntry(1)),
            ev(520, 0, Kind::SoftExit(1)),
            ev(560, 9, Kind::Switch { prev: 9, next: 0 }),
            // 7 woken here runs elsewhere; 9, not woken here, shows first
            // in an interrupt.
            ev(600, 0, Kind::Waking { pid: 7 }),
            ev(700, 9, Kind::TimerEntry),
            ev(710, 9, Kind::TimerExit),
            ev(730, 9, Kind::Switch { prev: 9, next: 0 }),
        ] {
            f.event(&e);
        }
        let mut t = Timeline::new(100);
        f.flush(&d, &mut t);
        f.finish(&d, &mut t);
        let t = t.finish();
        let got: Vec<(Track, u64, u64, &str, i32)> =
            t.items().map(|i| (i.track, i.start_ns, i.dur_ns, t.name_of(i), i.pid)).collect();
        assert_eq!(
            got,
            [
                (Track::Irq, 100, 60, "local_timer", -1),
                (Track::Task, 100, 100, "spin", 7),
                (Track::Irq, 110, 20, "irq 11 eth0", 11),
                (Track::Wake, 150, 0, "probe", 9),
                (Track::Softirq, 170, 20, "NET_RX", 3),
                (Track::Task, 200, 60, "probe", 9),
                (Track::Task, 300, 70, "spin", 7),
                (Track::Wake, 350, 0, "probe", 9),
                (Track::Irq, 400, 10, "local_timer", -1),
                (Track::Task, 400, 20, "probe", 9),
                (Track::Irq, 500, 10, "local_timer", -1),
                (Track::Wake, 505, 0, "probe", 9),
                (Track::Softirq, 515, 5, "TIMER", 1),
                (Track::Task, 520, 40, "probe", 9),
                (Track::Wake, 600, 0, "spin", 7),
                (Track::Irq, 700, 10, "local_timer", -1),
                (Track::Task, 700, 30, "probe", 9),
            ]
        );
        assert!(t.items().all(|i| i.cpu == 1));
    }
}
