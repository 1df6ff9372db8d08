//! `rtscope watch`: the machine's own threads followed through the
//! scheduler's events. Pure: the events of every CPU, merged in time
//! order, in; each watched thread's wake-ups and activations out.
//!
//! A thread's **activation** begins when it is woken (`sched_waking`, on
//! whichever CPU woke it: its release `K`) and ends when it next sleeps.
//! Its **wake-up latency** runs from `K` to the `sched_switch` that puts it
//! on a CPU (`S`); its **period** from one release to the next; its
//! **runtime** is the time it spent on a CPU within the activation (the
//! sum of its slices, preemptions left out); its **response** runs from
//! `K` to the switch out of its last slice, when it slept again. A thread
//! woken while it is still on its CPU (it woke before it could switch out)
//! begins a new activation at once, with a wake-up latency of 0.
//!
//! Some kernels (this project's test machine's among them) do not trace
//! the switch out of the idle task: a thread woken on an idle CPU then
//! shows up as the current task of that CPU's next event. Its switch-in
//! is taken at the last event that CPU recorded in idle (the exit of the
//! interrupt that woke it; the idle loop switches as soon as it returns),
//! early by the switch itself (a few microseconds), and counted.

use super::event::{Ev, Kind};
use std::collections::HashMap;

/// What the events say about a watched thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Obs {
    /// Woken at `waking_ns`, on `cpu` at `ran_ns`.
    Latency { tid: i32, cpu: i64, waking_ns: u64, ran_ns: u64 },
    /// Released at `t_ns`, `period_ns` after its previous release.
    Period { tid: i32, t_ns: u64, period_ns: u64 },
    /// The activation released at `release_ns` ended (the thread slept)
    /// at `end_ns`, after `runtime_ns` on a CPU.
    Done { tid: i32, release_ns: u64, end_ns: u64, runtime_ns: u64 },
    /// A wake-up whose switch onto a CPU was not in the trace.
    Unmatched { tid: i32 },
}

#[derive(Clone, Copy, Debug, Default)]
struct State {
    /// Woken at, not yet on a CPU.
    pending: Option<u64>,
    /// The current activation's release.
    release: Option<u64>,
    /// On a CPU since.
    on_cpu: Option<u64>,
    /// Time on a CPU in the current activation.
    runtime: u64,
    /// The end of its last slice.
    last_out: u64,
}

impl State {
    /// Ends the activation in progress (if one began in sight) at `end`.
    fn close(&mut self, tid: i32, end: u64, out: &mut impl FnMut(Obs)) {
        if let Some(release) = self.release.take() {
            out(Obs::Done { tid, release_ns: release, end_ns: end.max(release), runtime_ns: self.runtime });
        }
        self.runtime = 0;
    }
}

/// The watched threads' states.
#[derive(Default)]
pub struct Tracker {
    states: HashMap<i32, State>,
    /// The previous release of each watched thread, kept across
    /// activations for the period.
    last_release: HashMap<i32, u64>,
    /// The last event each CPU recorded in its idle task.
    last_idle: HashMap<i64, u64>,
    /// Switches onto a CPU inferred (see [`Tracker::event`]).
    pub inferred: u64,
}

impl Tracker {
    /// Follows `tid` from now on; `running`: on a CPU since then (it was
    /// found current there, not switched in).
    pub fn watch(&mut self, tid: i32, running: Option<u64>) {
        self.states.entry(tid).or_insert(State { on_cpu: running, ..State::default() });
    }

    /// Stops following `tid` (it exited); its activation in progress, if
    /// any, is left incomplete.
    pub fn forget(&mut self, tid: i32) {
        self.states.remove(&tid);
        self.last_release.remove(&tid);
    }

    pub fn watched(&self, tid: i32) -> bool {
        self.states.contains_key(&tid)
    }

    /// Applies one event recorded on `cpu`; events come in time order
    /// across every CPU.
    pub fn event(&mut self, cpu: i64, e: &Ev, out: &mut impl FnMut(Obs)) {
        // A woken thread current on this CPU without a traced switch onto
        // it: this kernel does not trace the switch out of the idle task.
        // It came right after the last event the CPU recorded in idle (the
        // exit of the interrupt that woke it) and before this one.
        if e.pid > 0
            && let Some(st) = self.states.get_mut(&e.pid)
            && st.on_cpu.is_none()
            && let Some(k) = st.pending.take()
        {
            let ran = self.last_idle.get(&cpu).map_or(k, |&t| t.max(k)).min(e.ts);
            st.on_cpu = Some(ran);
            self.inferred += 1;
            out(Obs::Latency { tid: e.pid, cpu, waking_ns: k, ran_ns: ran });
        }
        if e.pid == 0 {
            self.last_idle.insert(cpu, e.ts);
        }
        match e.kind {
            Kind::Waking { pid } => {
                let Some(st) = self.states.get_mut(&pid) else { return };
                let prev = self.last_release.insert(pid, e.ts);
                if st.pending.is_some() {
                    // Woken again without having run: its switch onto a
                    // CPU was not traced (lost events). That wake-up and
                    // its activation are left out.
                    st.release = None;
                    st.runtime = 0;
                    out(Obs::Unmatched { tid: pid });
                }
                match st.on_cpu {
                    // Woken before it could switch out: the activation
                    // ends and the next begins here, on its CPU.
                    Some(since) => {
                        st.runtime += e.ts.saturating_sub(since);
                        st.on_cpu = Some(e.ts);
                        st.close(pid, e.ts, out);
                        out(Obs::Latency { tid: pid, cpu, waking_ns: e.ts, ran_ns: e.ts });
                    }
                    None => {
                        let end = st.last_out;
                        st.close(pid, end, out);
                        st.pending = Some(e.ts);
                    }
                }
                if let Some(p) = prev {
                    out(Obs::Period { tid: pid, t_ns: e.ts, period_ns: e.ts.saturating_sub(p) });
                }
                st.release = Some(e.ts);
            }
            Kind::Switch { prev, next } => {
                if let Some(st) = self.states.get_mut(&prev)
                    && let Some(since) = st.on_cpu.take()
                {
                    st.runtime += e.ts.saturating_sub(since);
                    st.last_out = e.ts;
                }
                if let Some(st) = self.states.get_mut(&next) {
                    st.on_cpu = Some(e.ts);
                    if let Some(k) = st.pending.take() {
                        out(Obs::Latency { tid: next, cpu, waking_ns: k, ran_ns: e.ts });
                    }
                }
            }
            _ => {}
        }
    }
}

/// The threads an event shows running on its CPU, by which a thread to
/// watch is found: the task current when it was recorded (0 in idle) and,
/// at a switch, the task switched onto the CPU. The switch itself is not
/// enough: where the kernel does not trace the switch out of the idle task
/// (see the module's text), a thread that only ever wakes on an idle CPU
/// shows in no switch as the next task, only as the current task of its
/// CPU's events (its own switch out among them).
pub fn shown(e: &Ev) -> [i32; 2] {
    match e.kind {
        Kind::Switch { next, .. } => [e.pid, next],
        _ => [e.pid, 0],
    }
}

/// Merges each CPU's events (each in time order) into one time order, and
/// hands out those before a watermark: the events of one read pass may be
/// older than another CPU's of the pass before it.
#[derive(Default)]
pub struct Merge {
    held: Vec<(u64, u32, Ev)>,
}

impl Merge {
    pub fn push(&mut self, cpu_index: u32, e: Ev) {
        self.held.push((e.ts, cpu_index, e));
    }

    /// Events held.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The events at or before `watermark`, in time order (a stable order
    /// by CPU at equal times), removed from those held.
    pub fn take_until(&mut self, watermark: u64) -> Vec<(u32, Ev)> {
        self.held.sort_by_key(|&(ts, cpu, _)| (ts, cpu));
        let n = self.held.partition_point(|&(ts, _, _)| ts <= watermark);
        self.held.drain(..n).map(|(_, c, e)| (c, e)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waking(ts: u64, pid: i32) -> Ev {
        Ev { ts, pid: 7, kind: Kind::Waking { pid } }
    }

    fn switch(ts: u64, prev: i32, next: i32) -> Ev {
        Ev { ts, pid: prev, kind: Kind::Switch { prev, next } }
    }

    fn run(evs: &[(i64, Ev)], watched: &[i32]) -> Vec<Obs> {
        let mut t = Tracker::default();
        for &w in watched {
            t.watch(w, None);
        }
        let mut out = Vec::new();
        for (cpu, e) in evs {
            t.event(*cpu, e, &mut |o| out.push(o));
        }
        out
    }

    /// A periodic thread: woken on CPU 0 by the timer, runs on CPU 1,
    /// preempted once in its second activation.
    #[test]
    fn latency_period_runtime_and_response_of_a_periodic_thread() {
        let evs = [
            (1, waking(1_000, 42)),
            (1, switch(1_010, 0, 42)),
            (1, switch(1_110, 42, 0)),
            (0, waking(3_000, 42)),
            (1, switch(3_030, 0, 42)),
            (1, switch(3_050, 42, 99)),
            (1, switch(3_200, 99, 42)),
            (1, switch(3_280, 42, 0)),
            (1, waking(5_002, 42)),
            // Another thread is not watched.
            (1, waking(5_003, 43)),
            (1, switch(5_004, 0, 43)),
        ];
        let out = run(&evs, &[42]);
        assert_eq!(
            out,
            vec![
                Obs::Latency { tid: 42, cpu: 1, waking_ns: 1_000, ran_ns: 1_010 },
                Obs::Done { tid: 42, release_ns: 1_000, end_ns: 1_110, runtime_ns: 100 },
                Obs::Period { tid: 42, t_ns: 3_000, period_ns: 2_000 },
                Obs::Latency { tid: 42, cpu: 1, waking_ns: 3_000, ran_ns: 3_030 },
                Obs::Done { tid: 42, release_ns: 3_000, end_ns: 3_280, runtime_ns: 20 + 80 },
                Obs::Period { tid: 42, t_ns: 5_002, period_ns: 2_002 },
            ]
        );
    }

    /// A switch out of idle that the kernel did not trace: the switch-in is
    /// taken at the last event the CPU recorded in idle.
    #[test]
    fn an_untraced_switch_from_idle_is_inferred() {
        let idle = |ts: u64, kind: Kind| Ev { ts, pid: 0, kind };
        let mut t = Tracker::default();
        t.watch(42, None);
        let mut out = Vec::new();
        for e in [
            idle(990, Kind::TimerEntry),
            idle(1_000, Kind::Waking { pid: 42 }),
            idle(1_004, Kind::TimerExit),
            // The thread runs; its switch-out is its CPU's next event.
            switch(1_104, 42, 0),
        ] {
            t.event(1, &e, &mut |o| out.push(o));
        }
        assert_eq!(out, [Obs::Latency { tid: 42, cpu: 1, waking_ns: 1_000, ran_ns: 1_004 }]);
        assert_eq!(t.inferred, 1);
        t.event(1, &waking(3_000, 42), &mut |o| out.push(o));
        assert_eq!(out[1], Obs::Done { tid: 42, release_ns: 1_000, end_ns: 1_104, runtime_ns: 100 });
    }

    /// A switch-in missing from the trace: that wake-up is left out and
    /// counted; the next one is measured from its own waking.
    #[test]
    fn a_missing_switch_in_leaves_that_wakeup_out() {
        let evs = [
            (0, waking(1_000, 42)),
            (0, switch(1_010, 0, 42)),
            (0, switch(1_100, 42, 0)),
            (0, waking(3_000, 42)),
            (0, waking(5_000, 42)),
            (0, switch(5_020, 0, 42)),
        ];
        let out = run(&evs, &[42]);
        assert_eq!(
            out[2..],
            [
                Obs::Period { tid: 42, t_ns: 3_000, period_ns: 2_000 },
                Obs::Unmatched { tid: 42 },
                Obs::Period { tid: 42, t_ns: 5_000, period_ns: 2_000 },
                Obs::Latency { tid: 42, cpu: 0, waking_ns: 5_000, ran_ns: 5_020 },
            ]
        );
    }

    /// Seen first mid-activation: nothing until its first wake-up; woken
    /// while still on its CPU: a new activation at once, latency 0.
    #[test]
    fn starts_at_its_first_wakeup_and_handles_a_wakeup_on_cpu() {
        let evs = [(0, switch(500, 42, 0)), (0, switch(900, 0, 42)), (0, waking(1_000, 42)), (0, switch(1_100, 42, 0))];
        let out = run(&evs, &[42]);
        assert_eq!(
            out,
            vec![Obs::Latency { tid: 42, cpu: 0, waking_ns: 1_000, ran_ns: 1_000 }],
            "the activation that began before it was seen is not reported"
        );
        let evs = [
            (0, waking(1_000, 42)),
            (0, switch(1_010, 0, 42)),
            (0, waking(1_500, 42)),
            (0, switch(1_600, 42, 0)),
            (0, waking(3_000, 42)),
        ];
        let out = run(&evs, &[42]);
        assert_eq!(out[1], Obs::Done { tid: 42, release_ns: 1_000, end_ns: 1_500, runtime_ns: 490 });
        assert_eq!(out[2], Obs::Latency { tid: 42, cpu: 0, waking_ns: 1_500, ran_ns: 1_500 });
        assert_eq!(out[3], Obs::Period { tid: 42, t_ns: 1_500, period_ns: 500 });
        assert_eq!(out[4], Obs::Done { tid: 42, release_ns: 1_500, end_ns: 1_600, runtime_ns: 100 });
        assert_eq!(out[5], Obs::Period { tid: 42, t_ns: 3_000, period_ns: 1_500 });
    }

    /// A thread that wakes on an idle CPU whose switch out of idle is not
    /// traced is shown by the events it is current in, its switch out
    /// among them; a switch also shows the task it puts on the CPU.
    #[test]
    fn an_event_shows_its_current_task_and_a_switch_its_next() {
        let idle = |ts: u64, kind: Kind| Ev { ts, pid: 0, kind };
        assert_eq!(shown(&idle(1_000, Kind::Waking { pid: 42 })), [0, 0], "the woken thread is not on a CPU yet");
        assert_eq!(shown(&Ev { ts: 1_010, pid: 42, kind: Kind::TimerEntry }), [42, 0]);
        assert_eq!(shown(&switch(1_104, 42, 0)), [42, 0], "its switch out");
        assert_eq!(shown(&switch(1_200, 0, 43)), [0, 43], "a traced switch out of idle");
        assert_eq!(shown(&switch(1_300, 43, 44)), [43, 44]);
    }

    /// Found while current on its CPU (not switched in): its slice is
    /// known, so a wake-up before it switches out is one on its CPU
    /// (latency 0), not a switch-in the trace missed.
    #[test]
    fn a_thread_found_running_is_on_its_cpu() {
        let mut t = Tracker::default();
        t.watch(42, Some(1_000));
        let mut out = Vec::new();
        for e in [waking(1_500, 42), switch(1_600, 42, 0), waking(3_000, 42), switch(3_010, 0, 42)] {
            t.event(1, &e, &mut |o| out.push(o));
        }
        assert_eq!(
            out,
            [
                Obs::Latency { tid: 42, cpu: 1, waking_ns: 1_500, ran_ns: 1_500 },
                Obs::Done { tid: 42, release_ns: 1_500, end_ns: 1_600, runtime_ns: 100 },
                Obs::Period { tid: 42, t_ns: 3_000, period_ns: 1_500 },
                Obs::Latency { tid: 42, cpu: 1, waking_ns: 3_000, ran_ns: 3_010 },
            ]
        );
        assert_eq!(t.inferred, 0);
    }

    #[test]
    fn merges_cpus_in_time_order_up_to_the_watermark() {
        let mut m = Merge::default();
        m.push(0, waking(10, 1));
        m.push(0, waking(30, 1));
        m.push(1, waking(20, 2));
        m.push(1, waking(40, 2));
        let got: Vec<u64> = m.take_until(30).iter().map(|(_, e)| e.ts).collect();
        assert_eq!(got, [10, 20, 30]);
        m.push(0, waking(35, 1));
        let got: Vec<(u32, u64)> = m.take_until(u64::MAX).iter().map(|(c, e)| (*c, e.ts)).collect();
        assert_eq!(got, [(0, 35), (1, 40)]);
        assert!(m.is_empty());
    }
}
