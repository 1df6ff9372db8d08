//! The kernel's own latency tracers: `timerlat` (a per-CPU kernel thread
//! woken by a timer every period, which records its IRQ and thread
//! latency, as `rtla timerlat` reads them), `osnoise` (its tracepoints:
//! each IRQ, softirq, thread and NMI that interfered with a CPU and for
//! how long, as `rtla osnoise` counts them) and `hwlat` (a kernel thread
//! spinning with interrupts off, recording the gaps in its clock reads
//! that only hardware, firmware or a hypervisor can make, as rt-tests'
//! `hwlatdetect` reads them).
//!
//! Each runs in a tracefs instance of rtscope's own,
//! `instances/rtscope-<pid>-<tracer>`, with the `mono` trace clock, so that
//! its records' times are CLOCK_MONOTONIC and the top-level buffer another
//! tool may use is never touched. Their settings are global (`osnoise/`,
//! `hwlat_detector/`, `tracing_thresh`): each one rtscope changes is
//! registered with the janitor with the value it held before it is
//! written, and written back when the tracer stops, or by the janitor
//! should rtscope be killed; the instance goes the same way
//! ([docs/cleanup.md]). The records are read from the instance's per-CPU
//! binary buffers and decoded with their `format` files.

use super::event::{field, int};
use super::format::{Field, Format, PageLayout};
use super::page::Page;
use crate::sys::ipc::Leftover;
use crate::sys::tracefs::{self, create_registered, open_buffers, remove_registered, write};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A kernel latency tracer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tracer {
    Timerlat,
    Osnoise,
    Hwlat,
}

impl Tracer {
    /// Its name in `available_tracers`.
    pub fn name(self) -> &'static str {
        match self {
            Tracer::Timerlat => "timerlat",
            Tracer::Osnoise => "osnoise",
            Tracer::Hwlat => "hwlat",
        }
    }

    /// The kernel option that builds it.
    pub fn config(self) -> &'static str {
        match self {
            Tracer::Timerlat => "CONFIG_TIMERLAT_TRACER",
            Tracer::Osnoise => "CONFIG_OSNOISE_TRACER",
            Tracer::Hwlat => "CONFIG_HWLAT_TRACER",
        }
    }

    /// The tracers that cannot run beside it (the kernel runs one of the
    /// osnoise family at a time, and one hwlat).
    fn exclusive(self) -> &'static [&'static str] {
        match self {
            Tracer::Timerlat | Tracer::Osnoise => &["timerlat", "osnoise"],
            Tracer::Hwlat => &["hwlat"],
        }
    }
}

/// A setting the tracer needs, written before it starts and written back
/// after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Setting {
    /// A file under the tracefs root (`osnoise/cpus`) and its value.
    File(&'static str, String),
    /// An option of `osnoise/options` (`OSNOISE_WORKLOAD`) on or off.
    OsnoiseOption(&'static str, bool),
}

/// A decoded record of a kernel tracer. Times are CLOCK_MONOTONIC (the
/// instance's `mono` clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rec {
    /// timerlat's sample: the latency from its timer's expiry, ns, to
    /// `context`: its IRQ handler, its thread running, or (a user thread
    /// of `timerlat_fd`) that thread's return to user space.
    Timerlat { seq: u32, context: Context, latency_ns: u64 },
    /// hwlat's sample: the longest gap inside its loop (`inner`) and
    /// between two turns of it (`outer`), microseconds as the kernel keeps
    /// them; the NMIs in the window and their time; `count`: the gaps above
    /// the threshold in the window.
    Hwlat { seq: u32, inner_us: u64, outer_us: u64, nmi_ns: u64, nmi_count: u32, count: u32 },
    /// One interference of osnoise's tracepoints: its source, its own
    /// duration (what nested in it taken out), ns, for a thread its pid,
    /// and the task that was current when it was recorded (for an IRQ,
    /// softirq or NMI: the task it interrupted; -1 when unknown).
    Noise { source: Source, duration_ns: u64, pid: i32, current: i32 },
}

/// Where timerlat took a sample (its `context` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// Its timer's IRQ handler (0).
    Irq,
    /// Its thread, running again in the kernel (1).
    Thread,
    /// Its user thread (`timerlat_fd`, Linux 6.5+) entering its next
    /// read: the wake-up's return to user space and what the thread did
    /// there (2, `rtla timerlat -u`'s "Ret user").
    Return,
}

impl Context {
    fn of(value: i64) -> Context {
        match value {
            0 => Context::Irq,
            1 => Context::Thread,
            _ => Context::Return,
        }
    }
}

/// The sources of noise osnoise tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Irq,
    Softirq,
    Thread,
    Nmi,
}

/// How to decode one event: its id and fields.
#[derive(Clone, Debug)]
enum Dec {
    Timerlat { seq: Field, context: Field, latency: Field },
    Hwlat { seq: Field, inner: Field, outer: Field, nmi_ts: Field, nmi_count: Field, count: Field },
    Noise { source: Source, duration: Field, pid: Option<Field>, current: Option<Field> },
}

/// Reads a tracefs file whole (some answer only one read).
fn read(path: &Path) -> Result<String, String> {
    let mut f = File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut buf = vec![0u8; 64 << 10];
    let mut len = 0;
    loop {
        let n = f.read(&mut buf[len..]).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        len += n;
        if n == 0 || len == buf.len() {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&buf[..len]).into_owned())
}

/// Where another tracer of `tracer`'s kind runs (the top level, or an
/// instance, this process's own among them), named; None where none does.
fn busy(root: &Path, tracer: Tracer) -> Option<String> {
    let runs = |dir: &Path| {
        let t = std::fs::read_to_string(dir.join("current_tracer")).unwrap_or_default();
        let t = t.trim().to_string();
        tracer.exclusive().contains(&t.as_str()).then_some(t)
    };
    if let Some(t) = runs(root) {
        return Some(format!("the top-level buffer runs the {t} tracer"));
    }
    // This process's own count too: the monitor's wakeup and noise would
    // each run one, and the kernel runs one of the family at a time, on
    // settings (osnoise/cpus) they share. Its own are known by name, as
    // they are made under the mount lock (their tracer set after it).
    let own = format!("rtscope-{}-", std::process::id());
    let entries = std::fs::read_dir(root.join("instances")).ok()?;
    entries.flatten().find_map(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        let mine = n.strip_prefix(&own).and_then(|t| tracer.exclusive().iter().find(|&&x| x == t));
        mine.map(|t| t.to_string()).or_else(|| runs(&e.path())).map(|t| format!("the instance {n} runs the {t} tracer"))
    })
}

/// The value to write back for `setting`, from what its file holds now.
fn found(root: &Path, setting: &Setting) -> Result<(PathBuf, String), String> {
    match setting {
        Setting::File(rel, _) => {
            let p = root.join(rel);
            Ok((p.clone(), read(&p)?.trim().to_string()))
        }
        Setting::OsnoiseOption(name, _) => {
            let p = root.join("osnoise/options");
            let text = read(&p)?;
            let words: Vec<&str> = text.split_whitespace().collect();
            let no = format!("NO_{name}");
            let was = if words.contains(name) {
                name.to_string()
            } else if words.contains(&no.as_str()) {
                no
            } else {
                return Err(format!("this kernel's osnoise/options has no {name} ({})", text.trim()));
            };
            Ok((p, was))
        }
    }
}

/// What a setting writes.
fn value(setting: &Setting) -> String {
    match setting {
        Setting::File(_, v) => v.clone(),
        Setting::OsnoiseOption(name, on) => {
            if *on {
                name.to_string()
            } else {
                format!("NO_{name}")
            }
        }
    }
}

/// A kernel tracer running in rtscope's instance for it; stopped, the
/// instance removed and its settings written back when dropped.
pub struct KernelTracer {
    pub tracer: Tracer,
    root: PathBuf,
    pub dir: PathBuf,
    pub name: String,
    mounted: bool,
    layout: PageLayout,
    decoders: Vec<(u16, Dec)>,
    /// The settings' files and the values to write back, in the order
    /// they were written.
    restore: Vec<(PathBuf, String)>,
    /// Per measured CPU: the CPU and its binary buffer (until
    /// [`KernelTracer::readers`] takes them).
    buffers: Vec<(usize, File)>,
    /// The CPUs it was started on.
    pub cpus: Vec<usize>,
}

/// One CPU's buffer of a kernel tracer, read and decoded.
pub struct CpuReader {
    pub cpu: usize,
    file: File,
    layout: PageLayout,
    decoders: Vec<(u16, Dec)>,
    /// Records of events not decoded (should stay 0), pages unreadable,
    /// events the kernel said it lost.
    pub unknown: u64,
    pub read_errors: u64,
    pub lost: u64,
}

impl CpuReader {
    /// Reads every record the kernel has for its CPU, decoded, in time
    /// order: `each(t_ns, rec)`. Allocates nothing: `page` is one of the
    /// instance's pages long ([`CpuReader::page_size`]).
    pub fn drain(&mut self, page: &mut [u8], mut each: impl FnMut(u64, Rec)) {
        loop {
            match self.file.read(page) {
                Ok(0) => break,
                Ok(n) => {
                    let Ok(p) = Page::parse(&self.layout, &page[..n]) else {
                        self.read_errors += 1;
                        continue;
                    };
                    self.lost += p.missed.unwrap_or(0);
                    for r in p.records() {
                        let id = r.payload.get(..2).map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
                        match self.decoders.iter().find(|(i, _)| *i == id) {
                            Some((_, dec)) => each(r.ts, decode(dec, r.payload)),
                            None => self.unknown += 1,
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.read_errors += 1;
                    break;
                }
            }
        }
    }

    /// The ring-buffer page size.
    pub fn page_size(&self) -> usize {
        self.layout.page_size
    }
}

/// Why this kernel cannot run `tracer`, or None where it can: tracefs
/// there, and the tracer among its `available_tracers`.
pub fn unavailable(tracer: Tracer) -> Option<String> {
    let _held = tracefs::mount_lock();
    let (root, mounted) = match tracefs::find_or_mount() {
        Ok(r) => r,
        Err(e) => return Some(e),
    };
    let why = missing(&root, tracer);
    if mounted {
        tracefs::release(&root);
    }
    why
}

/// Why the tracefs at `root` lacks `tracer`.
fn missing(root: &Path, tracer: Tracer) -> Option<String> {
    let list = std::fs::read_to_string(root.join("available_tracers")).unwrap_or_default();
    if list.split_whitespace().any(|t| t == tracer.name()) {
        return None;
    }
    let release = rustix::system::uname().release().to_string_lossy().into_owned();
    Some(format!(
        "this kernel ({release}) has no {} tracer (built without {}; its tracers: {})",
        tracer.name(),
        tracer.config(),
        if list.trim().is_empty() { "none" } else { list.trim() }
    ))
}

/// Where this kernel's timerlat takes a user thread of its own on `cpu`
/// (`rtla timerlat -u`): `osnoise/per_cpu/cpuN/timerlat_fd` (Linux 6.5+)
/// under the tracefs at `root`; None where the kernel has no such file.
pub fn timerlat_fd(root: &Path, cpu: usize) -> Option<PathBuf> {
    Some(root.join(format!("osnoise/per_cpu/cpu{cpu}/timerlat_fd"))).filter(|p| p.exists())
}

/// Whether this kernel's timerlat can take user threads of its own
/// ([`timerlat_fd`], Linux 6.5+), where tracefs is mounted.
pub fn has_timerlat_fd() -> bool {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"].iter().any(|r| timerlat_fd(Path::new(r), 0).is_some())
}

impl KernelTracer {
    /// Starts `tracer` on `cpus`: its instance made (registered with the
    /// janitor first), the `mono` clock, a buffer of `buffer_kb` per CPU,
    /// `settings` written (each registered with its old value first), the
    /// `events` to decode (the tracer's own, `ftrace/timerlat`, and
    /// osnoise's tracepoints, `osnoise/irq_noise`, enabled in the instance)
    /// and the tracer set; tracing starts with [`KernelTracer::set_on`]. Fails saying why: the tracer missing,
    /// another one of its kind running, a setting refused.
    pub fn start(
        tracer: Tracer,
        cpus: &[usize],
        settings: &[Setting],
        events: &[&str],
        buffer_kb: u64,
    ) -> Result<KernelTracer, String> {
        let held = tracefs::mount_lock();
        let (root, mounted) = tracefs::find_or_mount()?;
        let fail = |e: String| {
            if mounted {
                tracefs::release(&root);
            }
            Err(e)
        };
        if let Some(why) = missing(&root, tracer) {
            return fail(why);
        }
        if let Some(other) = busy(&root, tracer) {
            return fail(format!(
                "{other} (another rtla, hwlatdetect or rtscope): the kernel runs one at a time; stop it, or run \
                 rtscope after it"
            ));
        }
        let name = format!("rtscope-{}-{}", std::process::id(), tracer.name());
        let dir = root.join("instances").join(&name);
        if let Err(e) = create_registered(&dir) {
            return fail(e);
        }
        drop(held);
        let mut k = KernelTracer {
            tracer,
            root,
            dir,
            name,
            mounted,
            layout: PageLayout::X86_64,
            decoders: Vec::new(),
            restore: Vec::new(),
            buffers: Vec::new(),
            cpus: cpus.to_vec(),
        };
        // From here on, Drop undoes what was done.
        k.configure(cpus, settings, events, buffer_kb)?;
        Ok(k)
    }

    fn configure(
        &mut self,
        cpus: &[usize],
        settings: &[Setting],
        events: &[&str],
        buffer_kb: u64,
    ) -> Result<(), String> {
        let d = self.dir.clone();
        write(&d.join("tracing_on"), "0")?;
        write(&d.join("trace_clock"), "mono")?;
        write(&d.join("buffer_size_kb"), &buffer_kb.to_string())?;
        write(&d.join("tracing_cpumask"), &super::instance::cpumask(cpus))?;
        self.layout = PageLayout::parse(&read(&self.root.join("events/header_page"))?)?;
        let janitor = crate::sys::ipc::janitor().map_err(|e| format!("cannot start rtscope's janitor ({e})"))?;
        let mut refused = Vec::new();
        for s in settings {
            let (path, was) = found(&self.root, s)?;
            let new = value(s);
            if was == new {
                continue;
            }
            if !janitor.registry().add_restore(&path, &was) {
                return Err(format!(
                    "cannot register {} with rtscope's janitor (no room), which would write it back should rtscope \
                     be killed",
                    path.display()
                ));
            }
            self.restore.push((path.clone(), was));
            if write(&path, &new).is_err() {
                refused.push((path, new));
            }
        }
        // Again, once the others are written: a value refused for another's
        // sake (hwlat's width above the window it is written with).
        for (path, new) in refused {
            write(&path, &new)?;
        }
        for &event in events {
            let f = Format::parse(&read(&self.root.join("events").join(event).join("format"))?)?;
            self.decoders.push((f.id, decoder(event, &f)?));
            if !event.starts_with("ftrace/") {
                write(&d.join("events").join(event).join("enable"), "1")?;
            }
        }
        write(&d.join("current_tracer"), self.tracer.name())
            .map_err(|e| format!("{e} (the kernel refused the {} tracer)", self.tracer.name()))?;
        self.buffers = cpus.iter().copied().zip(open_buffers(&d, cpus)?).collect();
        Ok(())
    }

    /// The tracefs it runs in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Turns tracing on (or off) in the instance.
    pub fn set_on(&self, on: bool) -> Result<(), String> {
        write(&self.dir.join("tracing_on"), if on { "1" } else { "0" })
    }

    /// The per-CPU readers of its buffers, in the order of `cpus`, taken
    /// once (none after).
    pub fn readers(&mut self) -> Vec<CpuReader> {
        std::mem::take(&mut self.buffers)
            .into_iter()
            .map(|(cpu, file)| CpuReader {
                cpu,
                file,
                layout: self.layout,
                decoders: self.decoders.clone(),
                unknown: 0,
                read_errors: 0,
                lost: 0,
            })
            .collect()
    }

    /// A file of the instance, trimmed (`tracing_max_latency`).
    pub fn instance_file(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.dir.join(name)).ok().map(|s| s.trim().to_string())
    }

    /// Events the kernel lost on `cpu` (overwritten or dropped).
    pub fn lost_on(&self, cpu: usize) -> u64 {
        tracefs::lost_events(&self.dir, cpu)
    }

    /// The kernel threads the tracer runs its workload in (`timerlat/N`,
    /// `osnoise/N`, `hwlatd`): (tid, comm).
    pub fn threads(&self) -> Vec<(i32, String)> {
        let prefix = match self.tracer {
            Tracer::Timerlat => "timerlat/",
            Tracer::Osnoise => "osnoise/",
            Tracer::Hwlat => "hwlatd",
        };
        let mut found = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            let comm = comm.trim();
            if comm.starts_with(prefix) {
                found.push((pid, comm.to_string()));
            }
        }
        found.sort();
        found
    }
}

impl Drop for KernelTracer {
    fn drop(&mut self) {
        let _ = self.set_on(false);
        // The tracer stopped (its threads gone) before its settings change.
        let _ = write(&self.dir.join("current_tracer"), "nop");
        self.buffers.clear();
        let _held = tracefs::mount_lock();
        let removed = remove_registered(&self.dir);
        // Twice: a value refused for another's sake (hwlat's width above the
        // window it is restored with) takes on the second pass.
        for _ in 0..2 {
            for (path, was) in self.restore.iter().rev() {
                let _ = write(path, was);
            }
        }
        if let Ok(j) = crate::sys::ipc::janitor() {
            for (path, _) in &self.restore {
                j.registry().remove_path(Leftover::Restore, path);
            }
        }
        if self.mounted && removed {
            tracefs::release(&self.root);
        }
    }
}

/// The decoder of `event` (`ftrace/timerlat`, `osnoise/irq_noise`, ...).
fn decoder(event: &str, f: &Format) -> Result<Dec, String> {
    let noise = |source, pid: bool| -> Result<Dec, String> {
        Ok(Dec::Noise {
            source,
            duration: field(f, "duration")?,
            pid: if pid { Some(field(f, "pid")?) } else { None },
            current: f.field("common_pid").cloned(),
        })
    };
    match event {
        "ftrace/timerlat" => Ok(Dec::Timerlat {
            seq: field(f, "seqnum")?,
            context: field(f, "context")?,
            latency: field(f, "timer_latency")?,
        }),
        "ftrace/hwlat" => Ok(Dec::Hwlat {
            seq: field(f, "seqnum")?,
            inner: field(f, "duration")?,
            outer: field(f, "outer_duration")?,
            nmi_ts: field(f, "nmi_total_ts")?,
            nmi_count: field(f, "nmi_count")?,
            count: field(f, "count")?,
        }),
        "osnoise/irq_noise" => noise(Source::Irq, false),
        "osnoise/softirq_noise" => noise(Source::Softirq, false),
        "osnoise/thread_noise" => noise(Source::Thread, true),
        "osnoise/nmi_noise" => noise(Source::Nmi, false),
        _ => Err(format!("rtscope does not decode the event {event}")),
    }
}

fn decode(dec: &Dec, p: &[u8]) -> Rec {
    match dec {
        Dec::Timerlat { seq, context, latency } => Rec::Timerlat {
            seq: int(p, seq) as u32,
            context: Context::of(int(p, context)),
            latency_ns: int(p, latency) as u64,
        },
        Dec::Hwlat { seq, inner, outer, nmi_ts, nmi_count, count } => Rec::Hwlat {
            seq: int(p, seq) as u32,
            inner_us: int(p, inner) as u64,
            outer_us: int(p, outer) as u64,
            nmi_ns: int(p, nmi_ts) as u64,
            nmi_count: int(p, nmi_count) as u32,
            count: int(p, count) as u32,
        },
        Dec::Noise { source, duration, pid, current } => Rec::Noise {
            source: *source,
            duration_ns: int(p, duration) as u64,
            pid: pid.as_ref().map_or(-1, |f| int(p, f) as i32),
            current: current.as_ref().map_or(-1, |f| int(p, f) as i32),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMERLAT: &str = "name: timerlat\nID: 17\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\
        \tfield:unsigned char common_preempt_lazy_count;\toffset:8;\tsize:1;\tsigned:0;\n\n\
        \tfield:unsigned int seqnum;\toffset:12;\tsize:4;\tsigned:0;\n\
        \tfield:int context;\toffset:16;\tsize:4;\tsigned:1;\n\
        \tfield:u64 timer_latency;\toffset:24;\tsize:8;\tsigned:0;\n\n\
        print fmt: \"seq:%u\"\n";

    const HWLAT: &str = "name: hwlat\nID: 15\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:u64 duration;\toffset:16;\tsize:8;\tsigned:0;\n\
        \tfield:u64 outer_duration;\toffset:24;\tsize:8;\tsigned:0;\n\
        \tfield:u64 nmi_total_ts;\toffset:32;\tsize:8;\tsigned:0;\n\
        \tfield:s64 tv_sec;\toffset:40;\tsize:8;\tsigned:1;\n\
        \tfield:long tv_nsec;\toffset:48;\tsize:8;\tsigned:1;\n\
        \tfield:unsigned int nmi_count;\toffset:56;\tsize:4;\tsigned:0;\n\
        \tfield:unsigned int seqnum;\toffset:60;\tsize:4;\tsigned:0;\n\
        \tfield:unsigned int count;\toffset:64;\tsize:4;\tsigned:0;\n\n\
        print fmt: \"cnt:%u\"\n";

    /// Records laid out as Debian's 6.1 RT kernel's format files say
    /// decode to what its text trace prints for them.
    #[test]
    fn decodes_timerlat_and_hwlat_records() {
        let f = Format::parse(TIMERLAT).unwrap();
        let dec = decoder("ftrace/timerlat", &f).unwrap();
        let mut p = vec![0u8; 32];
        p[..2].copy_from_slice(&17u16.to_le_bytes());
        p[12..16].copy_from_slice(&9u32.to_le_bytes());
        p[16..20].copy_from_slice(&1i32.to_le_bytes());
        p[24..32].copy_from_slice(&94_410u64.to_le_bytes());
        assert_eq!(decode(&dec, &p), Rec::Timerlat { seq: 9, context: Context::Thread, latency_ns: 94_410 });
        let f = Format::parse(HWLAT).unwrap();
        let dec = decoder("ftrace/hwlat", &f).unwrap();
        let mut p = vec![0u8; 68];
        p[16..24].copy_from_slice(&28_408u64.to_le_bytes());
        p[24..32].copy_from_slice(&18_963u64.to_le_bytes());
        p[56..60].copy_from_slice(&2u32.to_le_bytes());
        p[60..64].copy_from_slice(&1u32.to_le_bytes());
        p[64..68].copy_from_slice(&156u32.to_le_bytes());
        assert_eq!(
            decode(&dec, &p),
            Rec::Hwlat { seq: 1, inner_us: 28_408, outer_us: 18_963, nmi_ns: 0, nmi_count: 2, count: 156 }
        );
        assert!(decoder("sched/sched_switch", &f).is_err());
    }

    #[test]
    fn options_are_written_back_as_found() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("osnoise")).unwrap();
        std::fs::write(dir.path().join("osnoise/options"), "DEFAULTS OSNOISE_WORKLOAD NO_PANIC_ON_STOP\n").unwrap();
        let off = Setting::OsnoiseOption("OSNOISE_WORKLOAD", false);
        assert_eq!(found(dir.path(), &off).unwrap().1, "OSNOISE_WORKLOAD");
        assert_eq!(value(&off), "NO_OSNOISE_WORKLOAD");
        let missing = Setting::OsnoiseOption("OSNOISE_IRQ_DISABLE", true);
        assert!(found(dir.path(), &missing).unwrap_err().contains("has no OSNOISE_IRQ_DISABLE"));
        std::fs::write(dir.path().join("tracing_thresh"), "0\n").unwrap();
        assert_eq!(found(dir.path(), &Setting::File("tracing_thresh", "10".into())).unwrap().1, "0");
        // Another tracer of the same kind, in another instance, is named.
        std::fs::create_dir_all(dir.path().join("instances/timerlat_top")).unwrap();
        std::fs::write(dir.path().join("instances/timerlat_top/current_tracer"), "timerlat\n").unwrap();
        std::fs::write(dir.path().join("current_tracer"), "nop\n").unwrap();
        assert_eq!(
            busy(dir.path(), Tracer::Osnoise).as_deref(),
            Some("the instance timerlat_top runs the timerlat tracer")
        );
        assert_eq!(busy(dir.path(), Tracer::Hwlat), None);
        // This process's own, by its name, before its tracer is set.
        std::fs::remove_dir_all(dir.path().join("instances/timerlat_top")).unwrap();
        let own = format!("rtscope-{}-timerlat", std::process::id());
        std::fs::create_dir_all(dir.path().join("instances").join(&own)).unwrap();
        assert_eq!(busy(dir.path(), Tracer::Osnoise), Some(format!("the instance {own} runs the timerlat tracer")));
        assert_eq!(busy(dir.path(), Tracer::Hwlat), None);
    }
}
