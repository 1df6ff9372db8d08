//! `export --format perfetto`: the cause episodes as a Chrome JSON trace,
//! which ui.perfetto.dev (and chrome://tracing) open. One process per
//! episode, named by its verdict's head; threads (lanes) for the CPU's
//! tasks, hard IRQs, softirqs and the probe's stages; instant events mark
//! the programmed and the actual wake-up, and the stacks recorded (`--stacks`,
//! the profiler) with their frames as arguments; the verdict's arguments
//! carry the profiler's sample table. The application's own markers (its
//! writes to `trace_marker`) are instants of their own process, one thread
//! per CPU. Times are CLOCK_MONOTONIC in us.

use super::{Format, Input, Use, Written};
use anyhow::{Result, bail};
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
        "The cause episodes of a --trace run as a timeline (Chrome JSON trace): open it in ui.perfetto.dev"
    }

    fn uses(&self) -> &'static [Use] {
        &[Use::Export]
    }

    fn write(&self, input: &Input, out: &mut dyn Write) -> Result<Written> {
        let run = input.run()?;
        let markers = run.trace.as_ref().and_then(|t| t.markers.as_ref()).filter(|m| !m.list.is_empty());
        if run.episodes.is_empty() && markers.is_none() {
            bail!(
                "run {} has no cause episodes or markers to export (measure with --trace; see rtscope show {} \
                 --episodes)",
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
        let doc = json!({
            "displayTimeUnit": "ns",
            "otherData": {"rtscope_run": run.header.uuid, "tool_version": run.header.tool_version},
            "traceEvents": events,
        });
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
        assert!(err.contains("no cause episodes or markers"), "{err}");
    }
}
