//! The probe threads' wake-ups recorded on the CPUs the main instance does
//! not trace. A datagram sent from another CPU (`netlat --sender-cpu`) is
//! delivered by that CPU's NET_RX softirq, which wakes the receiver from
//! there: the receiver's CPU sees the wake-up arrive (an IPI, or the
//! switch) but not when it was made. Until then, whatever ran on the
//! receiver's CPU did not delay it; after it, it did. A second instance,
//! `instances/rtscope-<pid>-wakes`, has one event, `sched:sched_waking`,
//! filtered to the probe's threads, on those other CPUs only: one record
//! per datagram, whatever else those CPUs do. The reader puts each among
//! the events of the woken thread's CPU ([`crate::trace::event::Kind::RemoteWaking`]).

use super::stacks::filter;
use crate::sys::tracefs::{create_registered, open_buffers, remove_registered, write};
use std::fs::File;
use std::path::{Path, PathBuf};

/// Per-CPU buffer: a waking record is about 50 bytes.
const BUFFER_KB: u64 = 64;

/// The wakings instance.
pub struct WakeInstance {
    pub dir: PathBuf,
    /// The CPUs it records (those the main instance does not).
    pub cpus: Vec<usize>,
}

impl WakeInstance {
    /// Creates `<main>-wakes` beside the main instance, tracing off, for the
    /// wakings of `tids` on `cpus` (`cpumask`, as `tracing_cpumask` reads),
    /// with the main instance's `clock`.
    pub fn create(
        root: &Path,
        main: &str,
        (cpus, cpumask): (&[usize], &str),
        clock: &str,
        tids: &[i32],
    ) -> Result<WakeInstance, String> {
        let dir = root.join("instances").join(format!("{main}-wakes"));
        create_registered(&dir)?;
        // From here on, Drop removes it on any error.
        let inst = WakeInstance { dir, cpus: cpus.to_vec() };
        let d = &inst.dir;
        write(&d.join("tracing_on"), "0")?;
        write(&d.join("trace_clock"), clock)?;
        write(&d.join("buffer_size_kb"), &BUFFER_KB.to_string())?;
        write(&d.join("tracing_cpumask"), cpumask)?;
        write(&d.join("events/sched/sched_waking/filter"), &filter(tids, false))?;
        write(&d.join("events/sched/sched_waking/enable"), "1")?;
        Ok(inst)
    }

    pub fn set_on(&self, on: bool) -> Result<(), String> {
        write(&self.dir.join("tracing_on"), if on { "1" } else { "0" })
    }

    /// Opens its per-CPU binary buffers, non-blocking, with their CPUs.
    pub fn buffers(&self) -> Result<Vec<(usize, File)>, String> {
        Ok(self.cpus.iter().copied().zip(open_buffers(&self.dir, &self.cpus)?).collect())
    }
}

impl Drop for WakeInstance {
    fn drop(&mut self) {
        let _ = self.set_on(false);
        remove_registered(&self.dir);
    }
}
