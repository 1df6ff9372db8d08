//! `export --format perfetto`: a traced run as a Chrome JSON trace (the
//! Trace Event Format), which ui.perfetto.dev (and chrome://tracing) open.
//! The whole traced window's timeline first: a process per traced CPU,
//! its threads the tasks that ran on it, its hard IRQs, its softirqs and
//! its wake-ups; a process of periods, a thread per probe or watched thread
//! (a probe's samples from programmed time to wake-up, a watched thread's
//! activations from release to end); what a timeline over its limit let go
//! is said in `otherData.timeline`. Then the cause episodes: one process per
//! episode, named by its verdict's head; threads (lanes) for the CPU's
//! tasks, hard IRQs, softirqs and the probe's stages; instant events mark
//! the programmed and the actual wake-up, and the stacks recorded (`--stacks`,
//! the profiler) with their frames as arguments; the verdict's arguments
//! carry the profiler's sample table. The application's own markers (its
//! writes to `trace_marker`) are instants of their own process, one thread
//! per CPU. Times are CLOCK_MONOTONIC in us.

use super::{Format, Input, Use, Written};
use anyhow::{Result, bail};
use rtscope_model::episode::timeline::{Timeline, Track};
use rtscope_model::episode::{Frame, Lane, Markers};
use serde_json::json;
use std::io::Write;

pub struct Perfetto;

const LANES: [(Lane, &str); 4] =
    [(Lane::Stage, "stages"), (Lane::Task, "tasks"), (Lane::Irq, "hard irq"), (Lane::Softirq, "softirq")];

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

impl Format for Perfetto {
    fn name(&self) -> &'static str {
        "perfetto"
    }

    fn extension(&self) -> &'static str {
        "json"
    }

    fn description(&self) -> &'static str {
        "A traced run's whole window, its cause episodes and markers (Chrome JSON trace): open it in ui.perfetto.dev"
    }

    fn uses(&self) -> &'static [Use] {
        &[Use::Export]
    }

    fn reads_timeline(&self) -> bool {
        true
    }

    fn reads_summed(&self) -> bool {
        true
    }

    fn write(&self, input: &Input, out: &mut dyn Write) -> Result<Written> {
        let run = input.run()?;
        let markers = run.trace.as_ref().and_then(|t| t.markers.as_ref()).filter(|m| !m.list.is_empty());
        let timeline = input.timeline.filter(|t| t.items().next().is_some());
        if run.episodes.is_empty() && markers.is_none() && timeline.is_none() {
            bail!(
                "run {} has no timeline, cause episodes or markers to export (measure with --trace, or watch; see \
                 rtscope show {} --episodes)",
                run.header.id,
                run.header.id
            );
        }
        let mut events = Vec::new();
        for (i, e) in run.episodes.iter().enumerate() {
            let pid = i + 1;
            let head = format!(
                "{}cpu{} #{} {:.1}us{}",
                e.load.as_ref().map(|l| format!("[{l}] ")).unwrap_or_default(),
                e.cpu,
                e.sample,
                e.latency_ns as f64 / 1000.0,
                e.causes.first().map(|c| format!(" · {}", c.label())).unwrap_or_default()
            );
            events.push(json!({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": head}}));
            events.push(json!({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": i}}));
            for (tid, (_, name)) in LANES.iter().enumerate() {
                events.push(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}));
            }
            for s in &e.slices {
                let tid = LANES.iter().position(|(l, _)| *l == s.lane).unwrap_or(1);
                events.push(json!({
                    "ph": "X", "name": s.name, "cat": format!("{:?}", s.lane).to_lowercase(),
                    "pid": pid, "tid": tid, "ts": us(s.start_ns), "dur": us(s.dur_ns),
                }));
            }
            for (name, t) in [("programmed", e.programmed_ns), ("woke", e.woke_ns)] {
                events.push(json!({"ph": "i", "s": "p", "name": name, "pid": pid, "tid": 0, "ts": us(t)}));
            }
            events.push(json!({
                "ph": "i", "s": "p", "name": "verdict", "pid": pid, "tid": 0, "ts": us(e.woke_ns),
                "args": {"verdict": e.verdict, "causes": e.causes, "samples": e.samples.as_ref().map(|w| &w.rows),
                         "remainder": e.remainder},
            }));
            // The stacks, as instants with their frames (innermost first).
            for (name, st) in [("stack at the wake-up", &e.stack), ("blocking thread's stack", &e.blocker)] {
                let Some(st) = st else { continue };
                let frames = |f: &[Frame]| f.iter().map(Frame::label).collect::<Vec<_>>();
                let top = st.interrupted_kernel().first().or(st.user.first()).map(Frame::name).unwrap_or_default();
                events.push(json!({
                    "ph": "i", "s": "t", "name": format!("{name}: {} {top}", st.comm), "pid": pid, "tid": 1,
                    "ts": us(st.t_ns),
                    "args": {"task": st.comm, "pid": st.pid, "taken": st.taken, "user": frames(&st.user),
                             "unwinder": st.unwinder, "kernel": frames(&st.kernel), "notes": st.notes},
                }));
                if let (Some(u), Some(args)) = (st.unwind_ns, events.last_mut().map(|e| &mut e["args"])) {
                    args["unwind_ns"] = json!(u);
                }
            }
        }
        if let Some(m) = markers {
            marker_events(m, run.episodes.len() + 1, &mut events);
        }
        let mut other = json!({"rtscope_run": run.header.uuid, "tool_version": run.header.tool_version});
        if let Some(t) = timeline {
            timeline_events(t, run.episodes.len() + 2, &mut events);
            other["timeline"] = timeline_meta(t);
        }
        let doc = json!({"displayTimeUnit": "ns", "otherData": other, "traceEvents": events});
        serde_json::to_writer(&mut *out, &doc)?;
        writeln!(out)?;
        Ok(Written::default())
    }
}

/// The markers as instants of process `pid`, a thread per CPU (its id the
/// CPU's), each with its writer; a last instant says how many were not kept.
fn marker_events(m: &Markers, pid: usize, events: &mut Vec<serde_json::Value>) {
    let name = if m.dropped > 0 {
        format!("markers (the first {}; {} more not kept)", m.list.len(), m.dropped)
    } else {
        "markers".to_string()
    };
    events.push(json!({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}}));
    events.push(json!({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": -1}}));
    let mut cpus: Vec<u32> = m.list.iter().map(|x| x.cpu).collect();
    cpus.sort_unstable();
    cpus.dedup();
    for c in cpus {
        events
            .push(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": c, "args": {"name": format!("cpu{c}")}}));
    }
    for x in &m.list {
        events.push(json!({
            "ph": "i", "s": "t", "name": x.text, "cat": "marker", "pid": pid, "tid": x.cpu, "ts": us(x.t_ns),
            "args": {"pid": x.pid, "t_ns": x.t_ns},
        }));
    }
}

/// The timeline's threads of a CPU's process: (track, tid, name).
const TRACKS: [(Track, u32, &str); 4] = [
    (Track::Task, 1, "tasks"),
    (Track::Irq, 2, "hard irq"),
    (Track::Softirq, 3, "softirq"),
    (Track::Wake, 4, "wake-ups"),
];

/// The whole window's timeline: a process per CPU from `first_pid` (its
/// threads the [`TRACKS`]), then one of periods, a thread per probe or
/// watched thread.
fn timeline_events(t: &Timeline, first_pid: usize, events: &mut Vec<serde_json::Value>) {
    let mut cpus: Vec<u32> = t.items().filter(|i| i.track != Track::Period).map(|i| i.cpu).collect();
    cpus.sort_unstable();
    cpus.dedup();
    let pid_of = |cpu: u32| first_pid + cpus.binary_search(&cpu).unwrap_or(0);
    let periods = first_pid + cpus.len();
    for (k, &c) in cpus.iter().enumerate() {
        let pid = pid_of(c);
        events.push(json!({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": format!("cpu{c}")}}));
        events.push(
            json!({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": -1000 + k as i64}}),
        );
        for (_, tid, name) in TRACKS {
            events.push(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}));
        }
    }
    let mut threads: Vec<(i32, &str, u32)> =
        t.items().filter(|i| i.track == Track::Period).map(|i| (i.pid, t.name_of(i), i.cpu)).collect();
    threads.sort_unstable();
    threads.dedup_by_key(|x| x.0);
    if !threads.is_empty() {
        events.push(json!({"ph": "M", "name": "process_name", "pid": periods, "args": {"name": "periods"}}));
        events.push(json!({"ph": "M", "name": "process_sort_index", "pid": periods, "args": {"sort_index": -1001}}));
        for (tid, name, cpu) in threads {
            let name = if cpu == u32::MAX { format!("{name} ({tid})") } else { format!("{name} cpu{cpu} ({tid})") };
            events.push(json!({"ph": "M", "name": "thread_name", "pid": periods, "tid": tid, "args": {"name": name}}));
        }
    }
    for i in t.items() {
        let name = t.name_of(i);
        let cat = format!("{:?}", i.track).to_lowercase();
        let e = match i.track {
            Track::Period => json!({
                "ph": "X", "name": name, "cat": cat, "pid": periods, "tid": i.pid, "ts": us(i.start_ns),
                "dur": us(i.dur_ns), "args": {"ns": i.value_ns},
            }),
            Track::Wake => json!({
                "ph": "i", "s": "t", "name": format!("wakes {name}"), "cat": cat, "pid": pid_of(i.cpu), "tid": 4,
                "ts": us(i.start_ns), "args": {"tid": i.pid},
            }),
            track => {
                let key = match track {
                    Track::Task => "tid",
                    Track::Irq => "irq",
                    _ => "vec",
                };
                json!({
                    "ph": "X", "name": name, "cat": cat, "pid": pid_of(i.cpu),
                    "tid": TRACKS.iter().find(|x| x.0 == track).map_or(1, |x| x.1), "ts": us(i.start_ns),
                    "dur": us(i.dur_ns), "args": {key: i.pid},
                })
            }
        };
        events.push(e);
    }
}

/// What the timeline holds and what it let go (`otherData.timeline`).
fn timeline_meta(t: &Timeline) -> serde_json::Value {
    json!({
        "window_ns": [t.window_ns.0, t.window_ns.1],
        "items": t.items_seen - t.items_dropped,
        "items_seen": t.items_seen,
        "items_dropped": t.items_dropped,
        "max_items": t.max_items,
        "complete": !t.cut(),
        "kept_ns": t.kept_ranges(),
        "note": t.cut_note(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::code_run;
    use serde_json::Value;

    /// The stacks as instants on the tasks lane, each frame an argument;
    /// the verdict's arguments carry the sample table and the remainder.
    #[test]
    fn the_stacks_are_instants_with_their_frames() {
        let run = code_run();
        let mut out = Vec::new();
        Perfetto.write(&Input::one(&run), &mut out).unwrap();
        let doc: Value = serde_json::from_slice(&out).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let named = |prefix: &str| -> Vec<&Value> {
            events.iter().filter(|e| e["name"].as_str().is_some_and(|n| n.starts_with(prefix))).collect()
        };
        let [wake] = named("stack at the wake-up")[..] else { panic!("one episode has stacks: {doc}") };
        assert_eq!(wake["name"], "stack at the wake-up: forker security_vm_enough_memory_mm", "the interrupted code");
        assert_eq!((&wake["ph"], &wake["pid"], &wake["tid"]), (&json!("i"), &json!(1), &json!(1)), "{wake}");
        assert_eq!(wake["ts"].as_f64(), Some(5_000_007.7));
        let a = &wake["args"];
        assert_eq!((&a["task"], &a["pid"], &a["taken"]), (&json!("forker"), &json!(20092), &json!("wake-up")));
        assert_eq!(a["user"], json!(["__libc_fork+0x53 (libc.so.6)", "main+0x2c (forker) forker.c:31"]));
        let kernel: Vec<&str> = a["kernel"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
        assert_eq!(kernel.len(), 12, "the interrupt's frames too: {kernel:?}");
        assert_eq!(kernel[0], "try_to_wake_up+0x1e (kernel)");
        assert_eq!(kernel[6], "dup_mmap+0x255 (kernel)");
        assert_eq!(a["notes"], json!(["libc.so.6 has no debug symbols: no file and line"]));
        assert_eq!(a["unwind_ns"], json!(6_100), "what recording the stacks took");
        let [blocker] = named("blocking thread's stack")[..] else { panic!("{doc}") };
        assert_eq!(blocker["name"], "blocking thread's stack: forker anon_vma_interval_tree_insert", "where it ran");
        assert_eq!(blocker["ts"].as_f64(), Some(5_000_400.0));
        assert_eq!(blocker["args"]["taken"], "profiler sample");
        assert_eq!(blocker["args"].get("unwind_ns"), None, "a profiler sample took no unwind");
        assert_eq!(blocker["args"]["kernel"][0], "anon_vma_interval_tree_insert+0x1c (kernel)");
        let verdicts = named("verdict");
        assert_eq!(verdicts.len(), run.episodes.len());
        assert_eq!(verdicts[0]["pid"], 1);
        let v = &verdicts[0]["args"];
        assert_eq!(
            v["samples"][0],
            json!({"function": "anon_vma_interval_tree_insert", "module": "kernel", "samples": 4})
        );
        assert_eq!(v["samples"].as_array().map(Vec::len), Some(4));
        assert_eq!((&v["remainder"]["verdict"], &v["remainder"]["ns"]), (&json!("interrupts off"), &json!(120_000)));
        assert_eq!(v["causes"][0]["name"], "forker");
        // The fixture's other episodes have no code: their verdicts carry none.
        assert!(verdicts[1..].iter().all(|e| e["args"]["samples"].is_null() && e["args"]["remainder"].is_null()));
        assert_eq!((&wake["args"]["unwinder"], &blocker["args"]["unwinder"]), (&json!("fp"), &json!("dwarf")));
    }

    /// The whole window's timeline: a process per CPU with its tracks'
    /// threads, slices and wake-up instants at their times; a process of
    /// periods, a thread per probe thread; the metadata says what was kept.
    #[test]
    fn the_whole_window_is_a_process_per_cpu() {
        use rtscope_model::episode::timeline::Item;
        let mut run = code_run();
        run.episodes.clear();
        run.trace = None;
        let mut t = Timeline::new(100);
        let item = |t: &mut Timeline, cpu, track, start_ns, dur_ns, name: &str, pid| {
            let name = t.name(name);
            t.push(Item { cpu, track, start_ns, dur_ns, name, pid, value_ns: dur_ns });
        };
        item(&mut t, 3, Track::Task, 1_000_000, 500_000, "spin", 77);
        item(&mut t, 3, Track::Irq, 1_200_000, 2_500, "local_timer", -1);
        item(&mut t, 3, Track::Softirq, 1_203_000, 1_000, "TIMER", 1);
        item(&mut t, 3, Track::Wake, 1_202_000, 0, "rtscope-wakeup", 80);
        item(&mut t, 1, Track::Task, 1_100_000, 10_000, "kworker/1:1", 12);
        item(&mut t, 3, Track::Period, 1_200_000, 4_000, "wakeup latency", 80);
        let t = t.finish();
        // No episodes, no markers: the timeline alone is exported.
        assert!(Perfetto.write(&Input::one(&run), &mut Vec::new()).is_err());
        let mut out = Vec::new();
        Perfetto.write(&Input { timeline: Some(&t), ..Input::one(&run) }, &mut out).unwrap();
        let doc: Value = serde_json::from_slice(&out).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let meta = |name: &str| -> Vec<(u64, u64, String)> {
            events
                .iter()
                .filter(|e| e["ph"] == "M" && e["name"] == name)
                .map(|e| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap_or(0), e["args"]["name"].to_string()))
                .collect()
        };
        let procs = meta("process_name");
        assert_eq!(procs, [(2, 0, "\"cpu1\"".into()), (3, 0, "\"cpu3\"".into()), (4, 0, "\"periods\"".into())]);
        assert!(meta("thread_name").contains(&(4, 80, "\"wakeup latency cpu3 (80)\"".into())));
        assert!(meta("thread_name").contains(&(3, 2, "\"hard irq\"".into())));
        let of = |cat: &str| events.iter().filter(|e| e["cat"] == cat).collect::<Vec<_>>();
        let [spin] = of("task")[..].iter().filter(|e| e["pid"] == 3).copied().collect::<Vec<_>>()[..] else {
            panic!("{doc}")
        };
        assert_eq!((&spin["ph"], &spin["tid"], &spin["args"]["tid"]), (&json!("X"), &json!(1), &json!(77)));
        assert_eq!((spin["ts"].as_f64(), spin["dur"].as_f64()), (Some(1_000.0), Some(500.0)));
        let [wake] = of("wake")[..] else { panic!("{doc}") };
        assert_eq!(
            (&wake["ph"], &wake["name"], wake["ts"].as_f64()),
            (&json!("i"), &json!("wakes rtscope-wakeup"), Some(1_202.0))
        );
        let [period] = of("period")[..] else { panic!("{doc}") };
        assert_eq!((&period["pid"], &period["tid"], &period["args"]["ns"]), (&json!(4), &json!(80), &json!(4_000)));
        assert_eq!(of("irq")[0]["args"]["irq"], -1);
        let m = &doc["otherData"]["timeline"];
        assert_eq!((&m["complete"], &m["items"], &m["note"]), (&json!(true), &json!(6), &Value::Null));
        assert_eq!(m["window_ns"], json!([1_000_000, 1_500_000]));
    }

    /// The application's markers: instants of their own process, a thread
    /// per CPU, at their times with their writer, in order; a run with
    /// markers and no episode exports them; those not kept are counted in
    /// the process's name.
    #[test]
    fn the_markers_are_instants_of_their_own() {
        use rtscope_model::episode::{Marker, Markers};
        let mut run = code_run();
        run.episodes.clear();
        let mut m = Markers::default();
        let mk = |t_ns, cpu, text: &str| Marker { t_ns, cpu, pid: 4242, text: text.into() };
        m.extend([mk(2_000_500, 1, "frame 2"), mk(1_000_250, 1, "frame 1"), mk(1_500_000, 0, "other")], 7);
        run.trace.get_or_insert_with(Default::default).markers = Some(m);
        let mut out = Vec::new();
        Perfetto.write(&Input::one(&run), &mut out).unwrap();
        let doc: Value = serde_json::from_slice(&out).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let marks: Vec<&Value> = events.iter().filter(|e| e["cat"] == "marker").collect();
        let got: Vec<(&str, f64, u64)> = marks
            .iter()
            .map(|e| (e["name"].as_str().unwrap(), e["ts"].as_f64().unwrap(), e["tid"].as_u64().unwrap()))
            .collect();
        assert_eq!(got, [("frame 1", 1_000.25, 1), ("other", 1_500.0, 0), ("frame 2", 2_000.5, 1)]);
        assert!(marks.iter().all(|e| e["ph"] == "i" && e["args"]["pid"] == 4242 && e["pid"] == 1), "{marks:?}");
        assert_eq!(marks[0]["args"]["t_ns"], 1_000_250);
        let names: Vec<&Value> = events.iter().filter(|e| e["ph"] == "M" && e["name"] == "process_name").collect();
        assert_eq!(names[0]["args"]["name"], "markers (the first 3; 7 more not kept)");
        let threads: Vec<&Value> =
            events.iter().filter(|e| e["name"] == "thread_name").map(|e| &e["args"]["name"]).collect();
        assert_eq!(threads, [&json!("cpu0"), &json!("cpu1")]);
        // Neither episodes nor markers: nothing to export, and it says so.
        run.trace = None;
        let err = Perfetto.write(&Input::one(&run), &mut Vec::new()).unwrap_err().to_string();
        assert!(err.contains("no timeline, cause episodes or markers"), "{err}");
    }
}
