//! The events rtscope enables, decoded from raw records into a compact
//! form with the offsets their `format` files give. Names (task comms, IRQ
//! names) are kept aside in maps, so an event is a few words.

use super::format::{Field, Format};
use super::page::Record;
use std::collections::HashMap;

/// The events rtscope asks for, `system/name`, and what each one gives.
pub const WANTED: &[(&str, &str)] = &[
    ("irq_vectors/local_timer_entry", "the timer interrupt's entry (IRQ latency)"),
    ("irq_vectors/local_timer_exit", "the timer interrupt's end"),
    ("timer/hrtimer_expire_entry", "the timer handler (handler stage)"),
    ("sched/sched_waking", "the wake-up of the probe thread (wake stage)"),
    ("sched/sched_switch", "which thread runs (thread stage, blocking threads)"),
    ("irq/irq_handler_entry", "device interrupts by IRQ and name"),
    ("irq/irq_handler_exit", "device interrupts' ends"),
    ("irq/softirq_entry", "softirqs by vector"),
    ("irq/softirq_exit", "softirqs' ends"),
];

pub const SOFTIRQ_NAMES: [&str; 10] =
    ["HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"];

/// A decoded event. Times are the trace clock's (`mono`: CLOCK_MONOTONIC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ev {
    pub ts: u64,
    /// The task that was current when the event was recorded (the
    /// interrupted one, in interrupt context); -1 when unknown.
    pub pid: i32,
    pub kind: Kind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    TimerEntry,
    TimerExit,
    /// Another interrupt vector (reschedule, call_function, irq_work, ...):
    /// an index into [`Decoder::vector_name`].
    VectorEntry(u8),
    VectorExit(u8),
    IrqEntry(i32),
    IrqExit(i32),
    SoftEntry(u8),
    SoftExit(u8),
    /// `now`: the hrtimer base's CLOCK_MONOTONIC reading for this expiry
    /// (it anchors a `local` trace clock to CLOCK_MONOTONIC).
    ExpireEntry {
        timer: u64,
        now: i64,
    },
    ExpireExit {
        timer: u64,
    },
    Waking {
        pid: i32,
    },
    /// A probe thread's `sched_waking` recorded on another CPU (`cpu`),
    /// read from the instance that records those alone
    /// ([`crate::trace::wakes`]) and put among this CPU's events in time
    /// order (its `Ev::pid` is -1: it says nothing of this CPU's task).
    RemoteWaking {
        pid: i32,
        cpu: u16,
    },
    Switch {
        prev: i32,
        next: i32,
    },
    /// A write to the top-level `trace_marker` copied into the instance
    /// (`ftrace:print`): its text is `Decoder::markers[.0]` until the
    /// reader takes them.
    Marker(u32),
    /// The kernel lost events before this point (a page's flag): not
    /// decoded, made by the reader ([`crate::trace::reader::Buffer`]).
    Lost,
}

#[derive(Clone, Debug)]
enum Dec {
    TimerEntry,
    TimerExit,
    Vector { idx: u8, entry: bool },
    IrqEntry { irq: Field, name: Field },
    IrqExit { irq: Field },
    Soft { vec: Field, entry: bool },
    ExpireEntry { timer: Field, now: Field },
    ExpireExit { timer: Field },
    Waking { pid: Field, prio: Field, comm: Field },
    Switch { prev_pid: Field, prev_prio: Field, prev_comm: Field, next_pid: Field, next_prio: Field, next_comm: Field },
    Print { buf: Field },
}

/// A task as the trace last showed it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Task {
    pub comm: String,
    /// The kernel's priority: 0..99 real-time (99 - rtprio), 100..139
    /// normal (120 + nice), -1 deadline.
    pub prio: i32,
}

/// Turns records into [`Ev`]s.
#[derive(Default)]
pub struct Decoder {
    table: Vec<Option<Dec>>,
    vectors: Vec<String>,
    pub irq_names: HashMap<i32, String>,
    pub tasks: HashMap<i32, Task>,
    /// Records of events this decoder does not know (should stay 0).
    pub unknown: u64,
    /// The texts of the markers decoded since the reader last took them
    /// ([`Kind::Marker`] holds the index).
    pub markers: Vec<String>,
}

pub(super) fn field(f: &Format, name: &str) -> Result<Field, String> {
    f.field(name).cloned().ok_or_else(|| format!("event {} has no field '{name}'", f.name))
}

pub(super) fn int(p: &[u8], f: &Field) -> i64 {
    let Some(b) = p.get(f.offset..f.offset + f.size) else { return 0 };
    match (f.size, f.signed) {
        (1, true) => b[0] as i8 as i64,
        (1, false) => b[0] as i64,
        (2, true) => i16::from_le_bytes([b[0], b[1]]) as i64,
        (2, false) => u16::from_le_bytes([b[0], b[1]]) as i64,
        (4, true) => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
        (4, false) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
        (8, _) => i64::from_le_bytes(b.try_into().unwrap_or_default()),
        _ => 0,
    }
}

fn text(p: &[u8], f: &Field) -> String {
    let bytes = if f.data_loc {
        let loc = int(p, f) as u32;
        let (off, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
        p.get(off..off + len).unwrap_or(&[])
    } else {
        p.get(f.offset..f.offset + f.size).unwrap_or(&[])
    };
    let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

impl Decoder {
    /// Learns an event from its `format` file (`system` as in `events/`).
    pub fn add(&mut self, system: &str, f: &Format) -> Result<(), String> {
        let dec = match (system, f.name.as_str()) {
            ("irq_vectors", "local_timer_entry") => Dec::TimerEntry,
            ("irq_vectors", "local_timer_exit") => Dec::TimerExit,
            ("irq_vectors", n) if n.ends_with("_entry") || n.ends_with("_exit") => {
                let (base, entry) = match n.strip_suffix("_entry") {
                    Some(b) => (b, true),
                    None => (n.trim_end_matches("_exit"), false),
                };
                let idx = match self.vectors.iter().position(|v| v == base) {
                    Some(i) => i,
                    None => {
                        self.vectors.push(base.to_string());
                        self.vectors.len() - 1
                    }
                };
                Dec::Vector { idx: idx.min(255) as u8, entry }
            }
            ("irq", "irq_handler_entry") => Dec::IrqEntry { irq: field(f, "irq")?, name: field(f, "name")? },
            ("irq", "irq_handler_exit") => Dec::IrqExit { irq: field(f, "irq")? },
            ("irq", "softirq_entry") => Dec::Soft { vec: field(f, "vec")?, entry: true },
            ("irq", "softirq_exit") => Dec::Soft { vec: field(f, "vec")?, entry: false },
            ("timer", "hrtimer_expire_entry") => {
                Dec::ExpireEntry { timer: field(f, "hrtimer")?, now: field(f, "now")? }
            }
            ("timer", "hrtimer_expire_exit") => Dec::ExpireExit { timer: field(f, "hrtimer")? },
            ("sched", "sched_waking") => {
                Dec::Waking { pid: field(f, "pid")?, prio: field(f, "prio")?, comm: field(f, "comm")? }
            }
            ("sched", "sched_switch") => Dec::Switch {
                prev_pid: field(f, "prev_pid")?,
                prev_prio: field(f, "prev_prio")?,
                prev_comm: field(f, "prev_comm")?,
                next_pid: field(f, "next_pid")?,
                next_prio: field(f, "next_prio")?,
                next_comm: field(f, "next_comm")?,
            },
            ("ftrace", "print") => Dec::Print { buf: field(f, "buf")? },
            _ => return Err(format!("rtscope does not decode {system}/{}", f.name)),
        };
        let id = f.id as usize;
        if self.table.len() <= id {
            self.table.resize(id + 1, None);
        }
        self.table[id] = Some(dec);
        Ok(())
    }

    /// The name of vector index `idx` (e.g. `reschedule`).
    pub fn vector_name(&self, idx: u8) -> &str {
        self.vectors.get(idx as usize).map_or("vector", String::as_str)
    }

    fn note_task(&mut self, pid: i32, comm: String, prio: i32) {
        match self.tasks.get_mut(&pid) {
            Some(t) if t.comm == comm => t.prio = prio,
            _ => {
                self.tasks.insert(pid, Task { comm, prio });
            }
        }
    }

    /// Decodes one record; `None` for an event this decoder was not given.
    pub fn decode(&mut self, r: Record) -> Option<Ev> {
        let p = r.payload;
        let id = u16::from_le_bytes([*p.first()?, *p.get(1)?]) as usize;
        let Some(Some(dec)) = self.table.get(id) else {
            self.unknown += 1;
            return None;
        };
        let kind = match dec {
            Dec::TimerEntry => Kind::TimerEntry,
            Dec::TimerExit => Kind::TimerExit,
            Dec::Vector { idx, entry: true } => Kind::VectorEntry(*idx),
            Dec::Vector { idx, entry: false } => Kind::VectorExit(*idx),
            Dec::IrqEntry { irq, name } => {
                let n = int(p, irq) as i32;
                self.irq_names.entry(n).or_insert_with(|| text(p, name));
                Kind::IrqEntry(n)
            }
            Dec::IrqExit { irq } => Kind::IrqExit(int(p, irq) as i32),
            Dec::Soft { vec, entry } => {
                let v = int(p, vec).clamp(0, 255) as u8;
                if *entry { Kind::SoftEntry(v) } else { Kind::SoftExit(v) }
            }
            Dec::ExpireEntry { timer, now } => Kind::ExpireEntry { timer: int(p, timer) as u64, now: int(p, now) },
            Dec::ExpireExit { timer } => Kind::ExpireExit { timer: int(p, timer) as u64 },
            Dec::Waking { pid, prio, comm } => {
                let (pid, prio, comm) = (int(p, pid) as i32, int(p, prio) as i32, text(p, comm));
                self.note_task(pid, comm, prio);
                Kind::Waking { pid }
            }
            Dec::Switch { prev_pid, prev_prio, prev_comm, next_pid, next_prio, next_comm } => {
                let (prev, prev_prio, prev_comm) =
                    (int(p, prev_pid) as i32, int(p, prev_prio) as i32, text(p, prev_comm));
                let (next, next_prio, next_comm) =
                    (int(p, next_pid) as i32, int(p, next_prio) as i32, text(p, next_comm));
                self.note_task(prev, prev_comm, prev_prio);
                self.note_task(next, next_comm, next_prio);
                Kind::Switch { prev, next }
            }
            // The text runs from the field to the end of the record, up to
            // its NUL; the newline `echo` adds is left out.
            Dec::Print { buf } => {
                let b = p.get(buf.offset..).unwrap_or(&[]);
                let b = &b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())];
                self.markers.push(String::from_utf8_lossy(b).trim_end_matches('\n').to_string());
                Kind::Marker((self.markers.len() - 1) as u32)
            }
        };
        let pid = i32::from_le_bytes([*p.get(4)?, *p.get(5)?, *p.get(6)?, *p.get(7)?]);
        Some(Ev { ts: r.ts, pid, kind })
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::trace::format::PageLayout;
    use crate::trace::page::Page;

    pub fn data_dir() -> String {
        format!("{}/tests/data/trace", env!("CARGO_MANIFEST_DIR"))
    }

    /// A decoder for the formats captured from this kernel.
    pub fn captured_decoder() -> Decoder {
        let mut d = Decoder::default();
        for entry in std::fs::read_dir(format!("{}/format", data_dir())).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let system = name.split('.').next().unwrap().to_string();
            let f = Format::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
            d.add(&system, &f).unwrap();
        }
        d
    }

    /// Every event of a captured per-CPU buffer.
    pub fn captured_events(d: &mut Decoder, cpu: usize) -> Vec<Ev> {
        let dir = data_dir();
        let layout = PageLayout::parse(&std::fs::read_to_string(format!("{dir}/header_page")).unwrap()).unwrap();
        let raw = std::fs::read(format!("{dir}/cpu{cpu}.raw")).unwrap();
        let mut out = Vec::new();
        for chunk in raw.chunks(layout.page_size) {
            let page = Page::parse(&layout, chunk).unwrap();
            out.extend(page.records().filter_map(|r| d.decode(r)));
        }
        out
    }

    /// The text trace of the same capture: (cpu, seconds.micros, event, rest).
    fn text_events() -> Vec<(usize, String, String, String)> {
        let text = std::fs::read_to_string(format!("{}/trace.txt", data_dir())).unwrap();
        let mut out = Vec::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some(open) = line.find("] ") else { continue };
            let cpu: usize = line[open - 3..open].parse().unwrap();
            let rest = line[open + 2..].trim_start();
            let (_flags, rest) = rest.split_once(' ').unwrap();
            let (ts, tail) = rest.trim_start().split_once(' ').unwrap();
            let ts = ts.trim_end_matches(':').to_string();
            let (event, fields) = tail.split_once(": ").unwrap();
            out.push((cpu, ts, event.to_string(), fields.to_string()));
        }
        out
    }

    fn kind_name(k: &Kind, d: &Decoder) -> String {
        match k {
            Kind::TimerEntry => "local_timer_entry".into(),
            Kind::TimerExit => "local_timer_exit".into(),
            Kind::VectorEntry(i) => format!("{}_entry", d.vector_name(*i)),
            Kind::VectorExit(i) => format!("{}_exit", d.vector_name(*i)),
            Kind::IrqEntry(_) => "irq_handler_entry".into(),
            Kind::IrqExit(_) => "irq_handler_exit".into(),
            Kind::SoftEntry(_) => "softirq_entry".into(),
            Kind::SoftExit(_) => "softirq_exit".into(),
            Kind::ExpireEntry { .. } => "hrtimer_expire_entry".into(),
            Kind::ExpireExit { .. } => "hrtimer_expire_exit".into(),
            Kind::Waking { .. } | Kind::RemoteWaking { .. } => "sched_waking".into(),
            Kind::Switch { .. } => "sched_switch".into(),
            Kind::Lost => "lost events".into(),
            Kind::Marker(_) => "tracing_mark_write".into(),
        }
    }

    /// A `trace_marker` write (`ftrace:print`): its text, up to its NUL and
    /// without the newline, kept until the reader takes it.
    #[test]
    fn decodes_a_marker() {
        let format = "name: print\nID: 5\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
                      \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
                      \tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\
                      \tfield:char buf[];\toffset:16;\tsize:0;\tsigned:0;\n";
        let mut d = Decoder::default();
        d.add("ftrace", &Format::parse(format).unwrap()).unwrap();
        let mut p = vec![0u8; 16];
        p[..2].copy_from_slice(&5u16.to_le_bytes());
        p[4..8].copy_from_slice(&4242i32.to_le_bytes());
        p.extend(b"frame 17 begins\n\0\0\0");
        for _ in 0..2 {
            let e = d.decode(Record { ts: 1_000, payload: &p }).unwrap();
            assert_eq!(e.pid, 4242);
            assert!(matches!(e.kind, Kind::Marker(_)));
        }
        assert_eq!(d.markers, ["frame 17 begins", "frame 17 begins"]);
        assert!(matches!(d.decode(Record { ts: 1_000, payload: &p }).unwrap().kind, Kind::Marker(2)));
    }

    #[test]
    fn decodes_pages_captured_from_this_kernel_like_the_text_trace() {
        let mut d = captured_decoder();
        let text = text_events();
        for cpu in 0..2 {
            let evs = captured_events(&mut d, cpu);
            let want: Vec<_> = text.iter().filter(|t| t.0 == cpu).collect();
            assert!(evs.len() > 50, "cpu{cpu}: {} events", evs.len());
            assert_eq!(evs.len(), want.len(), "cpu{cpu}");
            for (e, w) in evs.iter().zip(&want) {
                // The text shows microseconds, rounded.
                let r = (e.ts + 500) / 1000;
                let us = format!("{}.{:06}", r / 1_000_000, r % 1_000_000);
                assert_eq!(us, w.1, "cpu{cpu} {e:?} vs {w:?}");
                assert_eq!(kind_name(&e.kind, &d), w.2);
                match e.kind {
                    Kind::Switch { prev, next } => {
                        let f = &w.3;
                        assert!(f.contains(&format!("prev_pid={prev} ")), "{f}");
                        assert!(f.contains(&format!("next_pid={next} ")), "{f}");
                    }
                    Kind::Waking { pid } => assert!(w.3.contains(&format!(" pid={pid} ")), "{}", w.3),
                    Kind::SoftEntry(v) => assert!(w.3.contains(&format!("action={}]", SOFTIRQ_NAMES[v as usize]))),
                    Kind::IrqEntry(n) => {
                        assert!(w.3.contains(&format!("irq={n} name={}", d.irq_names[&n])), "{}", w.3)
                    }
                    _ => {}
                }
            }
            assert!(evs.windows(2).all(|w| w[0].ts <= w[1].ts), "cpu{cpu}: time order");
        }
        assert_eq!(d.unknown, 0);
        assert!(d.tasks.values().any(|t| t.comm.starts_with("rtscope-wakeup") && t.prio == 4));
    }
}
