//! `export --format perfetto`: the cause episodes as a Chrome JSON trace,
//! which ui.perfetto.dev (and chrome://tracing) open. One process per
//! episode, named by its verdict's head; threads (lanes) for the CPU's
//! tasks, hard IRQs, softirqs and the probe's stages; instant events mark
//! the programmed and the actual wake-up, and the stacks recorded (`--stacks`,
//! the profiler) with their frames as arguments; the verdict's arguments
//! carry the profiler's sample table. Times are CLOCK_MONOTONIC in us.

use super::{Format, Input, Use, Written};
use anyhow::{Result, bail};
use rtscope_model::episode::{Frame, Lane};
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
        if run.episodes.is_empty() {
            bail!(
                "run {} has no cause episodes to export (measure with --trace; see rtscope show {} --episodes)",
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
                             "kernel": frames(&st.kernel), "notes": st.notes},
                }));
            }
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
