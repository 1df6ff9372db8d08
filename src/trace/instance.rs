//! rtscope's own tracefs instance, `instances/rtscope-<pid>`: its own ring
//! buffers, clock and events, so the top-level buffer another tool may be
//! using is never touched. Removed on every exit path: by rtscope, or
//! should it be killed (SIGKILL), by its janitor (`sys::ipc::janitor`),
//! with which the instance is registered before it is made; a stale one
//! of a dead rtscope is also removed at the next start.

use super::event::{Decoder, WANTED};
use super::format::{Format, PageLayout};
use super::stacks::StackInstance;
use super::wakes::WakeInstance;
use crate::sys::tracefs::{self, CmdNames, create_registered, open_buffers, record_cmd_off, remove_registered, write};
use rtscope_model::inventory::Warning;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

pub struct Instance {
    pub root: PathBuf,
    pub dir: PathBuf,
    pub name: String,
    mounted: bool,
    pub layout: PageLayout,
    pub decoder: Decoder,
    pub enabled: Vec<String>,
    pub missing: Vec<String>,
    /// Whether `local_timer_entry` is there (else the irq stage runs to the
    /// hrtimer callback).
    pub timer_entry: bool,
    /// Whether the wake-up path can be followed at all.
    pub stages: bool,
    /// Whether a received datagram's path (NET_RX softirq, waking, switch)
    /// can be followed.
    pub net_stages: bool,
    pub buffer_kb: u64,
    /// Whether the application's writes to the top-level `trace_marker`
    /// are copied into this instance (`options/copy_trace_marker`).
    pub markers: bool,
    clock: String,
    /// `--stacks`: the instance that records the probe's wake-ups' stacks.
    pub stacks: Option<StackInstance>,
    /// The probe threads' wakings on the CPUs not traced here.
    pub wakes: Option<WakeInstance>,
    /// What became of the top-level option `record-cmd`; held off while
    /// the instance lives where rtscope turned it off.
    pub record_cmd: CmdNames,
}

/// Reads a tracefs file. One large read: some of these files (e.g.
/// `events/header_page`) answer only the first read() of an open file.
fn read(path: &Path) -> Result<String, String> {
    let fail = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let mut f = File::open(path).map_err(fail)?;
    let mut buf = vec![0u8; 64 << 10];
    let mut len = 0;
    loop {
        let n = std::io::Read::read(&mut f, &mut buf[len..]).map_err(fail)?;
        len += n;
        if n == 0 || len == buf.len() {
            break;
        }
    }
    String::from_utf8(buf[..len].to_vec()).map_err(|_| format!("{} is not text", path.display()))
}

/// `tracing_cpumask` text: hex, in comma-separated 32-bit groups.
pub fn cpumask(cpus: &[usize]) -> String {
    let words = cpus.iter().max().map_or(1, |m| m / 32 + 1);
    let mut w = vec![0u32; words];
    for &c in cpus {
        w[c / 32] |= 1 << (c % 32);
    }
    w.iter().rev().map(|x| format!("{x:08x}")).collect::<Vec<_>>().join(",")
}

/// Removes instances left by rtscope processes that no longer exist.
fn remove_stale(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root.join("instances")) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        // `rtscope-<pid>`, and its stack and wakings instances
        // `rtscope-<pid>-stacks`, `rtscope-<pid>-wakes`.
        let pid = name.strip_prefix("rtscope-").map(|p| p.split('-').next().unwrap_or(p));
        let Some(pid) = pid.and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !crate::sys::process::is_rtscope(pid) {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// How many instances this process holds now: the monitor traces wakeup
/// and noise at once, each in an instance of its own.
static LIVE: AtomicU32 = AtomicU32::new(0);

/// The name and directory of this process's next instance (called under
/// the mount lock): `rtscope-<pid>` where it holds none (one left by an
/// earlier process of the same pid removed), else the first free
/// `rtscope-<pid>-<n>` from 2 on.
fn own_name(root: &Path) -> (String, PathBuf) {
    let pid = std::process::id();
    let at = |name: String| {
        let dir = root.join("instances").join(&name);
        (name, dir)
    };
    if LIVE.load(Relaxed) == 0 {
        let (name, dir) = at(format!("rtscope-{pid}"));
        if dir.exists() {
            let _ = std::fs::remove_dir(&dir);
        }
        return (name, dir);
    }
    (2..).map(|n| at(format!("rtscope-{pid}-{n}"))).find(|(_, dir)| !dir.exists()).expect("a free name")
}

impl Instance {
    /// Creates and configures the instance for `cpus`, tracing off until
    /// [`Instance::start`]. Returns the warnings to store with the run.
    pub fn create(cpus: &[usize], buffer_kb: u64, clock: &str) -> Result<(Instance, Vec<Warning>), String> {
        let held = tracefs::mount_lock();
        let (root, mounted) = tracefs::find_or_mount()?;
        remove_stale(&root);
        let (name, dir) = own_name(&root);
        if let Err(e) = create_registered(&dir) {
            if mounted {
                tracefs::release(&root);
            }
            return Err(e);
        }
        LIVE.fetch_add(1, Relaxed);
        drop(held);
        let mut inst = Instance {
            root,
            dir,
            name,
            mounted,
            layout: PageLayout::X86_64,
            decoder: Decoder::default(),
            enabled: Vec::new(),
            missing: Vec::new(),
            timer_entry: false,
            stages: false,
            net_stages: false,
            buffer_kb,
            markers: false,
            clock: clock.to_string(),
            stacks: None,
            wakes: None,
            record_cmd: CmdNames::WasOff,
        };
        // From here on, Drop removes the instance on any error.
        let warnings = inst.configure(cpus, clock)?;
        Ok((inst, warnings))
    }

    fn configure(&mut self, cpus: &[usize], clock: &str) -> Result<Vec<Warning>, String> {
        let d = self.dir.clone();
        write(&d.join("tracing_on"), "0")?;
        let clocks = read(&d.join("trace_clock"))?;
        if !clocks.split_whitespace().any(|c| c.trim_matches(|x| x == '[' || x == ']') == clock) {
            return Err(format!("this kernel's trace clocks ({}) lack '{clock}'", clocks.trim()));
        }
        write(&d.join("trace_clock"), clock)?;
        write(&d.join("buffer_size_kb"), &self.buffer_kb.to_string())?;
        write(&d.join("tracing_cpumask"), &cpumask(cpus))?;
        self.layout = PageLayout::parse(&read(&self.root.join("events/header_page"))?)?;
        let mut warnings = Vec::new();
        self.record_cmd = record_cmd_off(&self.root);
        if let CmdNames::LeftOn(why) = &self.record_cmd {
            warnings.push(Warning {
                topic: "trace".into(),
                message: format!(
                    "--trace: the top-level tracefs option record-cmd stays on ({why}): the kernel saves task names \
                     at every switch and wake-up, which adds about 0.2-0.4 us to each traced wake-up"
                ),
                fix: "stop the other tracer, or set options/record-cmd to 0 yourself".into(),
            });
        }
        let mut wanted: Vec<(String, String)> =
            WANTED.iter().map(|(e, why)| (e.to_string(), why.to_string())).collect();
        // Every other interrupt vector, to name IPIs and the like.
        if let Ok(list) = std::fs::read_dir(self.root.join("events/irq_vectors")) {
            let mut extra: Vec<String> = list
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| (n.ends_with("_entry") || n.ends_with("_exit")) && !n.starts_with("local_timer"))
                .map(|n| format!("irq_vectors/{n}"))
                .collect();
            extra.sort();
            wanted.extend(extra.into_iter().map(|e| (e, String::new())));
        }
        for (event, why) in &wanted {
            let (system, _) = event.split_once('/').unwrap_or((event, ""));
            let ok = read(&self.root.join("events").join(event).join("format"))
                .and_then(|t| Format::parse(&t))
                .and_then(|f| self.decoder.add(system, &f))
                .and_then(|()| write(&d.join("events").join(event).join("enable"), "1"));
            match ok {
                Ok(()) => self.enabled.push(event.clone()),
                Err(e) if !why.is_empty() => self.missing.push(format!("{event} ({why}): {e}")),
                Err(_) => {}
            }
        }
        // The application's own markers: its writes to the top-level
        // `trace_marker`, copied into this instance as `ftrace:print`
        // records (Linux 6.17's instance option); none where it is missing.
        self.markers = read(&self.root.join("events/ftrace/print/format"))
            .and_then(|t| Format::parse(&t))
            .and_then(|f| self.decoder.add("ftrace", &f))
            .and_then(|()| write(&d.join("options/copy_trace_marker"), "1"))
            .is_ok();
        if self.markers {
            self.enabled.push("ftrace/print".into());
        }
        let has = |e: &str| self.enabled.iter().any(|x| x == e);
        self.timer_entry = has("irq_vectors/local_timer_entry") && has("irq_vectors/local_timer_exit");
        self.stages = has("timer/hrtimer_expire_entry") && has("sched/sched_waking") && has("sched/sched_switch");
        self.net_stages = has("irq/softirq_entry")
            && has("irq/softirq_exit")
            && has("sched/sched_waking")
            && has("sched/sched_switch");
        if !self.stages {
            warnings.push(Warning {
                topic: "trace".into(),
                message: "--trace: the wake-up path cannot be followed (hrtimer_expire_entry, sched_waking or \
                          sched_switch missing): no stage split; episodes attribute time by context only"
                    .into(),
                fix: "use a kernel with CONFIG_FTRACE and scheduler/timer trace events".into(),
            });
        } else if !self.timer_entry {
            warnings.push(Warning {
                topic: "trace".into(),
                message: "--trace: this architecture has no irq_vectors:local_timer_entry; the irq stage runs to the \
                          hrtimer callback and the handler stage reads 0"
                    .into(),
                fix: "none needed on non-x86 machines; the total and the other stages are exact".into(),
            });
        }
        for m in &self.missing {
            warnings.push(Warning {
                topic: "trace".into(),
                message: format!("--trace: event {m}; time in it shows as unaccounted"),
                fix: "enable the event's kernel configuration (CONFIG_FTRACE, CONFIG_IRQSOFF not needed)".into(),
            });
        }
        Ok(warnings)
    }

    /// Whether the events to split a sample along `path` are enabled.
    pub fn can_follow(&self, path: crate::trace::decompose::WakePath) -> bool {
        match path {
            crate::trace::decompose::WakePath::Timer => self.stages,
            crate::trace::decompose::WakePath::NetRx => self.net_stages,
        }
    }

    /// Opens the per-CPU binary buffers, non-blocking.
    pub fn buffers(&self, cpus: &[usize]) -> Result<Vec<File>, String> {
        open_buffers(&self.dir, cpus)
    }

    pub fn set_on(&self, on: bool) -> Result<(), String> {
        if let Some(s) = &self.stacks {
            s.set_on(on)?;
        }
        if let Some(w) = &self.wakes {
            w.set_on(on)?;
        }
        write(&self.dir.join("tracing_on"), if on { "1" } else { "0" })
    }

    /// `--stacks`: records the kernel and user stacks at the wake-ups of
    /// the threads `tids` (the probe's) in an instance of their own.
    pub fn add_stacks(&mut self, cpus: &[usize], tids: &[i32]) -> Result<(), String> {
        self.stacks = Some(StackInstance::create(&self.root, &self.name, &cpumask(cpus), &self.clock, tids)?);
        Ok(())
    }

    /// Records the wakings of the threads `tids` (the probe's) on the online
    /// CPUs other than `traced`, in an instance of their own; none where
    /// every CPU is traced.
    pub fn add_wakes(&mut self, traced: &[usize], tids: &[i32]) -> Result<(), String> {
        let others: Vec<usize> = crate::sys::cpu::online().into_iter().filter(|c| !traced.contains(c)).collect();
        if !others.is_empty() {
            let mask = cpumask(&others);
            self.wakes = Some(WakeInstance::create(&self.root, &self.name, (&others, &mask), &self.clock, tids)?);
        }
        Ok(())
    }

    /// Events the kernel lost on `cpu`: overwritten before they were read
    /// (`overrun`) or refused when the buffer was full (`dropped events`).
    pub fn lost(&self, cpu: usize) -> u64 {
        tracefs::lost_events(&self.dir, cpu)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.set_on(false);
        // The stack instance first: the mount may go with the main one.
        drop(self.stacks.take());
        drop(self.wakes.take());
        // Back on (if this was its last holder) before tracefs may go;
        // it takes the mount lock itself.
        drop(std::mem::replace(&mut self.record_cmd, CmdNames::WasOff));
        let _held = tracefs::mount_lock();
        let removed = remove_registered(&self.dir);
        LIVE.fetch_sub(1, Relaxed);
        // Where the instance is left (the kernel refused), the janitor
        // tries again, and unmounts, when rtscope ends.
        if self.mounted && removed {
            tracefs::release(&self.root);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpumasks() {
        assert_eq!(cpumask(&[0, 1]), "00000003");
        assert_eq!(cpumask(&[1]), "00000002");
        assert_eq!(cpumask(&[0, 33]), "00000002,00000001");
    }
}
