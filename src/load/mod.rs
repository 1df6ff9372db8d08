//! Workloads: what the machine carries while it is measured (the
//! Siemens CE 3.0 assessment and the NT real-time study measure under math,
//! network, disk and compile loads). One
//! file per workload behind [`Workload`], all in [`TABLE`]. A load runs as
//! SCHED_OTHER threads of rtscope (real-time only where `cpu` and `threads`
//! are given a policy: `periodic`), some of which start
//! child processes: each child is tied to rtscope (`PR_SET_PDEATHSIG`, in
//! its process group) and stopped with everything it started when the load
//! stops; temporary files live in one directory removed at the end. Should
//! rtscope be killed (SIGKILL), its janitor (`sys::ipc::janitor`) kills
//! the commands' process groups and removes the directories, each
//! registered with it before it is made.
//!
//! A load is written `NAME[:INTENSITY][@CPUS]` (`cpu`, `cpu:2@1`,
//! `net:1000`, `disk:256@0`), or `cmd:'COMMAND'[:COPIES][@CPUS]` and
//! `stress-ng:'ARGS'[@CPUS]`; a device load names its device
//! (`tty:/dev/ttyS1`, `net-to:10.0.0.2:9`, `block:/dev/vdb`); `cpu` and
//! `threads` take a real-time policy after an `@`
//! (`cpu:2@fifo:50:period=10ms,busy=3ms`, `threads:16@fifo:10-60`), the
//! only loads whose threads are not SCHED_OTHER.

pub mod block;
pub mod cmd;
pub mod compile;
pub mod cpu;
pub mod devices;
pub mod disk;
pub mod fork;
pub mod idle;
pub mod memory;
pub mod net;
pub mod net_to;
pub mod periodic;
pub mod sampler;
pub mod sched;
pub mod stress_ng;
pub mod threads;
pub mod tty;

use crate::sys::ipc::{self, Leftover, Registry};
use crate::sys::{cpu as syscpu, process, sched as syssched, signals};
use anyhow::{Context, Result, anyhow, bail};
use rtscope_model::characterisation::{Measure, Target};
use rtscope_model::inventory::format_cpu_list;
use rtscope_model::rtload::RtLoad;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What a load's intensity means.
pub struct Intensity {
    /// e.g. "threads per CPU", "packets/s".
    pub unit: &'static str,
    pub min: u64,
    pub max: u64,
    /// The default, from the number of the load's CPUs.
    pub default: fn(usize) -> u64,
}

/// A workload.
pub trait Workload: Sync {
    fn name(&self) -> &'static str;
    /// One line: what it does.
    fn about(&self) -> &'static str;
    /// What its intensity means; None when it has none.
    fn intensity(&self) -> Option<Intensity>;
    /// Whether it takes a quoted argument (`cmd:'...'`).
    fn takes_argument(&self) -> bool {
        false
    }
    /// Whether it names a device or an address after its name
    /// (`tty:/dev/ttyS1[:baud]`): the text up to an `@` is its argument,
    /// checked by [`Workload::check`]; it has no intensity of its own.
    fn takes_device(&self) -> bool {
        false
    }
    /// Whether its threads may run at a real-time policy
    /// (`@fifo:50[:period=T,busy=T]`); `Some(true)` when they must.
    fn policy(&self) -> Option<bool> {
        None
    }
    /// Whether it runs commands through [`supervise`] (each in its own
    /// process group, which a janitor kills should rtscope be SIGKILLed).
    fn commands(&self) -> bool {
        false
    }
    /// Checks what it needs on this machine (a compiler, a program),
    /// before anything is measured.
    fn check(&self, _spec: &LoadSpec) -> Result<()> {
        Ok(())
    }
    /// Starts it: threads and children go into `run`.
    fn start(&self, spec: &LoadSpec, run: &mut Running) -> Result<()>;
    /// What it asks of the machine in a figure the kernel counts, checked
    /// against its characterisation; None when it states none (a command's
    /// own work, as fast as TCP goes).
    fn target(&self, _spec: &LoadSpec) -> Option<Target> {
        None
    }
}

/// Flagged below this share of the CPU busy asked of a load whose threads
/// never sleep (`cpu`, `memory`, `stress-ng --cpu`): such a load keeps its
/// CPUs above 99 % busy on a machine that lets it run; below 90 % the
/// machine did not carry the load asked for.
pub const CPU_BUSY_LIMIT: f64 = 0.9;
/// Flagged below this share of the packets/s asked of `net`: its sender
/// paces every datagram against CLOCK_MONOTONIC and catches up, so 10 %
/// short is a sender or a loopback that cannot keep up.
pub const RATE_LIMIT: f64 = 0.9;
/// An idle load (the baseline) is flagged when processes other than
/// rtscope use more than this share of its CPUs, percent: an idle machine
/// runs under 1 % of background work; 5 % is a process that ran on its own
/// for a twentieth of the time, enough to move a baseline's tail.
pub const IDLE_LIMIT_PCT: f64 = 5.0;

/// A CPU-busy target: `share` (0..1] of the load's CPUs busy, flagged below
/// `limit` times that.
pub fn cpu_target(spec: &LoadSpec, share: f64, limit: f64, why: &str) -> Target {
    let asked = (100.0 * share).min(100.0);
    let limit = (asked * limit * 10.0).round() / 10.0;
    let n = spec.cpus.len();
    Target {
        load: spec.label.clone(),
        cpus: spec.cpus.clone(),
        measure: Measure::CpuBusy,
        asked,
        limit,
        asked_text: format!(
            "its {} {} {asked:.0} % busy{why} (flagged below {limit} %)",
            if n == 1 { "CPU" } else { "CPUs" },
            format_cpu_list(&spec.cpus),
        ),
        devices: Vec::new(),
    }
}

/// The target of `spec`, if its workload states one.
pub fn target(spec: &LoadSpec) -> Option<Target> {
    spec.kind.target(spec)
}

/// Every workload, in the order of `rtscope load --help`.
pub static TABLE: &[&dyn Workload] = &[
    &idle::Idle,
    &cpu::Cpu,
    &memory::Memory,
    &disk::Disk,
    &net::Net(net::Mode::Rate),
    &net::Net(net::Mode::Flood),
    &net::Net(net::Mode::Tcp),
    &net_to::NetTo,
    &tty::Tty,
    &block::Block,
    &threads::Threads,
    &fork::Fork,
    &sched::Sched,
    &compile::Compile,
    &cmd::Cmd,
    &stress_ng::StressNg,
];

/// The workloads for `rtscope load --help`.
pub fn help_table() -> String {
    let mut s = String::from("Loads (NAME[:INTENSITY][@CPUS][@POLICY:PRIORITY[:period=T,busy=T]]):\n");
    for w in TABLE {
        s.push_str(&format!("  {:<10} {}\n", w.name(), w.about()));
    }
    s.push_str(
        "Every thread is SCHED_OTHER but those of cpu and threads given a policy (@fifo:50, @rr:40, \
         @fifo:50:period=10ms,busy=3ms: busy 3 ms of every 10 ms; RT throttling must be on for a spinning one); children are tied to rtscope (PR_SET_PDEATHSIG) and stopped with what they \
         started; temporary files go in $TMPDIR (default /var/tmp) and are removed. A command that cannot start or \
         keeps failing at once fails its load with its error; a load short of its target (cpu: its CPUs 90 % busy, \
         net: 90 % of its rate, idle: other processes under 5 % of its CPUs, ...) is flagged (docs/loads.md).",
    );
    s
}

/// One load as asked for.
#[derive(Clone)]
pub struct LoadSpec {
    /// As written: the load's name in the store and the tables.
    pub label: String,
    pub kind: &'static dyn Workload,
    pub intensity: u64,
    pub cpus: Vec<usize>,
    /// The command of `cmd:` and `stress-ng:`; the device or address of
    /// `tty:`, `net-to:`, `block:`.
    pub arg: Option<String>,
    /// The real-time policy of `cpu` and `threads` (`@fifo:50...`); None:
    /// SCHED_OTHER.
    pub rt: Option<RtLoad>,
}

impl std::fmt::Debug for LoadSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.label)
    }
}

impl serde::Serialize for LoadSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        serde_json::json!({
            "load": self.label,
            "workload": self.kind.name(),
            "intensity": self.kind.intensity().map(|i| serde_json::json!({"value": self.intensity, "unit": i.unit})),
            "cpus": format_cpu_list(&self.cpus),
            "arg": self.arg,
            "policy": self.rt.map(|r| r.describe()),
        })
        .serialize(s)
    }
}

/// Splits a `--loads` list at the commas outside quotes.
pub fn split_list(text: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for ch in text.chars() {
        match (quote, ch) {
            (None, '\'' | '"') => {
                quote = Some(ch);
                cur.push(ch);
            }
            (Some(q), c) if c == q => {
                quote = None;
                cur.push(ch);
            }
            (None, ',') => out.push(std::mem::take(&mut cur)),
            _ => cur.push(ch),
        }
    }
    if quote.is_some() {
        bail!("--loads '{text}': a quote is not closed (e.g. --loads \"cpu,cmd:'make -j2'\")");
    }
    out.push(cur);
    // `cpu@fifo:50:period=10ms,busy=3ms`: a policy's `busy=` or `period=`
    // after a comma belongs to the load before it.
    let mut joined: Vec<String> = Vec::new();
    for item in out {
        let t = item.trim_start();
        match joined.last_mut() {
            Some(prev) if (t.starts_with("busy=") || t.starts_with("period=")) && prev.contains('@') => {
                prev.push(',');
                prev.push_str(&item);
            }
            _ => joined.push(item),
        }
    }
    let out: Vec<String> = joined.into_iter().map(|s| s.trim().to_string()).collect();
    if out.iter().any(String::is_empty) {
        bail!("--loads '{text}': an empty load (e.g. --loads idle,cpu,net)");
    }
    Ok(out)
}

fn names() -> String {
    TABLE.iter().map(|w| w.name()).collect::<Vec<_>>().join(", ")
}

/// Parses one load, its CPUs defaulting to `default_cpus`. `flag` names
/// where it came from in errors.
pub fn parse(text: &str, default_cpus: &[usize], flag: &str) -> Result<LoadSpec> {
    let hint = "write NAME[:INTENSITY][@CPUS][@POLICY:PRIORITY], e.g. cpu, cpu:2@1, net:1000, cmd:'make -j2'@0-1, \
                cpu:2@fifo:50:period=10ms,busy=3ms";
    // The name ends at the first `:` (an argument or intensity follows) or `@`.
    let (name, rest) = match text.find([':', '@']) {
        Some(i) if text[i..].starts_with(':') => (&text[..i], Some(&text[i + 1..])),
        Some(i) => (&text[..i], None),
        None => (text, None),
    };
    let kind = *TABLE
        .iter()
        .find(|w| w.name() == name)
        .ok_or_else(|| anyhow!("{flag}: no load '{name}' in '{text}' (known: {}); {hint}", names()))?;
    let mut arg = None;
    let mut tail = if rest.is_none() { &text[name.len()..] } else { "" };
    if kind.takes_device() {
        // `tty:/dev/ttyS1:115200@0`: the device up to the `@`.
        let dev = rest.map(|r| r.split('@').next().unwrap_or(r)).unwrap_or("");
        if dev.trim().is_empty() {
            bail!("{flag}: '{text}': {name} names its device, e.g. {}", kind.about().split(';').next().unwrap_or(name));
        }
        arg = Some(dev.to_string());
        tail = &text[name.len() + 1 + dev.len()..];
    } else if let Some(rest) = rest {
        if kind.takes_argument() {
            match rest.chars().next() {
                Some(q @ ('\'' | '"')) => {
                    let end = rest[1..].find(q).ok_or_else(|| anyhow!("{flag}: '{text}': the quote is not closed"))?;
                    arg = Some(rest[1..1 + end].to_string());
                    tail = &rest[end + 2..];
                }
                _ => {
                    arg = Some(rest.to_string());
                }
            }
            if arg.as_deref().is_some_and(|a| a.trim().is_empty()) {
                bail!("{flag}: '{text}': {name} needs a command, e.g. {name}:'{}'", example_arg(name));
            }
        } else {
            tail = &text[name.len()..];
        }
    } else if kind.takes_argument() {
        bail!("{flag}: '{text}': {name} needs a command, e.g. {name}:'{}'", example_arg(name));
    }
    // What follows: [:INTENSITY][@CPUS][@POLICY], the CPUs and the policy
    // in either order (a policy starts with a letter).
    let mut at = tail.split('@');
    let intensity_text = at.next().unwrap_or("");
    let (mut cpus_text, mut rt) = (None, None);
    for part in at {
        if part.starts_with(|c: char| c.is_ascii_alphabetic()) {
            if rt.is_some() {
                bail!("{flag}: '{text}': two policies; give one, e.g. cpu:2@fifo:50");
            }
            if kind.policy().is_none() {
                bail!(
                    "{flag}: '{text}': {name} runs at SCHED_OTHER only; a policy is for cpu and threads, e.g. cpu:2@fifo:50"
                );
            }
            rt = Some(RtLoad::parse(part).map_err(|e| anyhow!("{flag}: '{text}': {e}"))?);
        } else if cpus_text.replace(part).is_some() {
            bail!("{flag}: '{text}': two CPU lists; give one, e.g. cpu:2@0-1");
        }
    }
    if kind.policy() == Some(true) && rt.is_none() {
        bail!("{flag}: '{text}': {name} needs a policy and priorities, e.g. {name}:16@fifo:10-60");
    }
    let cpus = match cpus_text {
        Some(list) => syscpu::parse_selection(&format!("{flag} {text}: @CPUS"), list)?,
        None => default_cpus.to_vec(),
    };
    let intensity = match (intensity_text.strip_prefix(':'), kind.intensity()) {
        (None, _) if !intensity_text.is_empty() => bail!("{flag}: '{text}': {hint}"),
        (None, Some(i)) => (i.default)(cpus.len()),
        (None, None) => 0,
        (Some(_), None) if kind.takes_device() => {
            bail!(
                "{flag}: '{text}': {name} takes its device's settings only, e.g. {}",
                kind.about().split(';').next().unwrap_or(name)
            )
        }
        (Some(_), None) => bail!("{flag}: '{text}': {name} takes no intensity; {hint}"),
        (Some(n), Some(i)) => {
            let v: u64 = n.parse().map_err(|_| anyhow!("{flag}: '{text}': intensity '{n}' is not a number; {hint}"))?;
            if !(i.min..=i.max).contains(&v) {
                bail!("{flag}: '{text}': {name}'s intensity is {} from {} to {}", i.unit, i.min, i.max);
            }
            v
        }
    };
    if let Some(r) = &mut rt {
        // `threads` are periodic whether or not a period is given; `cpu`
        // without one spins.
        let spread = kind.policy() == Some(true);
        if spread && r.periodic.is_none() {
            r.periodic = Some(threads::DEFAULT_PERIODIC);
        }
        let per_cpu = if spread { intensity as f64 / cpus.len().max(1) as f64 } else { intensity as f64 };
        periodic::check_share(text, flag, r, per_cpu)?;
    }
    Ok(LoadSpec { label: text.to_string(), kind, intensity, cpus, arg, rt })
}

fn example_arg(name: &str) -> &'static str {
    if name == "stress-ng" { "--cpu 2 --io 1" } else { "make -j2" }
}

/// Parses a whole `--loads` list and checks each load can run here.
pub fn parse_list(text: &str, default_cpus: &[usize], flag: &str) -> Result<Vec<LoadSpec>> {
    let mut specs: Vec<LoadSpec> = Vec::new();
    for item in split_list(text)? {
        let spec = parse(&item, default_cpus, flag)?;
        if specs.iter().any(|s| s.label == spec.label) {
            bail!("{flag}: '{}' is listed twice", spec.label);
        }
        spec.kind.check(&spec)?;
        specs.push(spec);
    }
    Ok(specs)
}

/// What a load's thread sees.
#[derive(Clone)]
pub struct LoadCtx {
    stop: Arc<AtomicBool>,
    signal: Arc<AtomicBool>,
    errors: Arc<Mutex<Vec<String>>>,
    /// Why the load failed: it does not load the machine as asked (its
    /// command cannot start, or keeps failing at once).
    failure: Arc<Mutex<Option<String>>>,
    /// For loads that run commands ([`Workload::commands`]): where their
    /// process groups are registered with rtscope's janitor, which kills
    /// them should rtscope die by SIGKILL.
    groups: Option<&'static Registry>,
}

impl LoadCtx {
    /// Whether the load is being stopped (or rtscope got a signal).
    pub fn stopping(&self) -> bool {
        self.stop.load(Relaxed) || self.signal.load(Relaxed)
    }

    /// Reports a failure (kept once per text) for the run's notes.
    pub fn error(&self, text: String) {
        if let Ok(mut e) = self.errors.lock()
            && !e.contains(&text)
        {
            e.push(text);
        }
    }

    /// Fails the load (the first failure is kept): what runs under it is
    /// not measured under the load asked for. The thread that calls it
    /// ends its part of the load.
    pub fn fail(&self, text: String) {
        if let Ok(mut f) = self.failure.lock()
            && f.is_none()
        {
            *f = Some(text);
        }
    }

    /// Sleeps `d` in short steps, returning early when stopping.
    pub fn pause(&self, d: Duration) {
        let end = std::time::Instant::now() + d;
        while !self.stopping() {
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
    }
}

/// A running load: its threads (which own its children) and its
/// temporary directory. Dropping it stops everything and removes the
/// directory.
pub struct Running {
    pub label: String,
    pub cpus: Vec<usize>,
    ctx: LoadCtx,
    threads: Vec<JoinHandle<()>>,
    tmp: Option<PathBuf>,
}

/// The directory the temporary directories of loads go in: `$TMPDIR`, or
/// /var/tmp (on disk, where /tmp may be memory).
pub fn temp_base() -> PathBuf {
    std::env::var_os("TMPDIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/var/tmp"))
}

const TMP_PREFIX: &str = "rtscope-load-";

/// Removes the temporary directories of rtscope processes that died
/// without cleaning up (SIGKILL).
pub fn remove_stale_temp_dirs() {
    crate::sys::cgroup::remove_stale();
    let Ok(dir) = std::fs::read_dir(temp_base()) else { return };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(TMP_PREFIX).and_then(|r| r.split('-').next()?.parse::<u32>().ok()) else {
            continue;
        };
        if !process::alive(pid) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Running {
    /// Starts `spec`. `signal` is rtscope's stop flag.
    pub fn start(spec: &LoadSpec, signal: &Arc<AtomicBool>) -> Result<Running> {
        let mut run = Running {
            label: spec.label.clone(),
            cpus: spec.cpus.clone(),
            ctx: LoadCtx {
                stop: Arc::new(AtomicBool::new(false)),
                signal: Arc::clone(signal),
                errors: Arc::new(Mutex::new(Vec::new())),
                failure: Arc::new(Mutex::new(None)),
                groups: if spec.kind.commands() {
                    Some(ipc::janitor().context("cannot start the janitor of load commands")?.registry())
                } else {
                    None
                },
            },
            threads: Vec::new(),
            tmp: None,
        };
        spec.kind.start(spec, &mut run).with_context(|| format!("starting load {}", spec.label))?;
        Ok(run)
    }

    /// A thread of the load on `cpus`, at SCHED_OTHER nice 0, with
    /// rtscope's signals blocked.
    pub fn spawn(&mut self, name: &str, cpus: &[usize], f: impl FnOnce(&LoadCtx) + Send + 'static) -> Result<()> {
        let ctx = self.ctx.clone();
        let cpus = cpus.to_vec();
        let t = std::thread::Builder::new()
            .name(format!("load-{name}"))
            .spawn(move || {
                signals::block_in_background_thread();
                let _ = syscpu::pin_self(&cpus);
                let _ = syssched::set_self(syssched::Policy::Other, 0);
                let _ = process::set_nice(0);
                f(&ctx)
            })
            .with_context(|| format!("cannot start a {name} thread"))?;
        self.threads.push(t);
        Ok(())
    }

    /// A thread of the load on `cpus` at the real-time `policy` and
    /// `priority`, with rtscope's signals blocked. A refusal of the policy
    /// fails the load (the kernel's words and the fix) and ends the thread.
    pub fn spawn_rt(
        &mut self,
        name: &str,
        cpus: &[usize],
        policy: syssched::Policy,
        priority: u8,
        f: impl FnOnce(&LoadCtx) + Send + 'static,
    ) -> Result<()> {
        self.spawn(name, cpus, move |ctx| match syssched::set_self(policy, priority) {
            Ok(()) => f(ctx),
            Err(e) => ctx.fail(format!(
                "cannot run at {} {priority}: {e}{}",
                policy.kernel_name(),
                syssched::rt_refused(priority).map(|fix| format!(" ({fix})")).unwrap_or_default()
            )),
        })
    }

    /// The load's temporary directory, created on first use.
    pub fn temp_dir(&mut self) -> Result<PathBuf> {
        if let Some(t) = &self.tmp {
            return Ok(t.clone());
        }
        let base = temp_base();
        let janitor = ipc::janitor().context("cannot start the janitor that removes loads' temporary directories")?;
        // Registered before it exists, so that a SIGKILL at any moment
        // leaves nothing: the janitor removes it (a name not there is no
        // error).
        let fail =
            |e: std::io::Error| anyhow!("cannot create a temporary directory in {}: {e} (set TMPDIR)", base.display());
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        for attempt in 0u32.. {
            let n = NEXT.fetch_add(1, Relaxed);
            let dir = base.join(format!("{TMP_PREFIX}{}-{n}", std::process::id()));
            if !janitor.registry().add_path(Leftover::Tree, &dir) {
                return Err(anyhow!(
                    "cannot register the temporary directory {} with the janitor (path too long or too many); \
                     set TMPDIR to a shorter path",
                    dir.display()
                ));
            }
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    self.tmp = Some(dir.clone());
                    return Ok(dir);
                }
                Err(e) => {
                    janitor.registry().remove_path(Leftover::Tree, &dir);
                    if e.kind() != std::io::ErrorKind::AlreadyExists || attempt >= 100 {
                        return Err(fail(e));
                    }
                }
            }
        }
        unreachable!("the loop returns")
    }

    /// Failures the load's threads reported.
    pub fn errors(&self) -> Vec<String> {
        self.ctx.errors.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// Why the load failed, if it did ([`LoadCtx::fail`]).
    pub fn failure(&self) -> Option<String> {
        self.ctx.failure.lock().ok().and_then(|f| f.clone())
    }

    /// Stops everything and returns the failures reported.
    pub fn stop(mut self) -> Vec<String> {
        self.halt();
        self.errors()
    }

    fn halt(&mut self) {
        self.ctx.stop.store(true, Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Some(t) = self.tmp.take()
            && (std::fs::remove_dir_all(&t).is_ok() || !t.exists())
            && let Ok(j) = ipc::janitor()
        {
            j.registry().remove_path(Leftover::Tree, &t);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.halt();
    }
}

/// A command that exits with a failure this soon after its start failed
/// at once ([`FAILURES_IN_A_ROW`] of them fail the load).
const FAILS_AT_ONCE: Duration = Duration::from_secs(1);
/// Failures at once in a row that fail the load: one may be a passing
/// hiccup, three are the command.
pub const FAILURES_IN_A_ROW: u32 = 3;
/// A restarted command that ends, whatever its status, this soon after its
/// start exits at once ([`QUICK_EXITS_IN_A_ROW`] of them fail the load: it
/// loads nothing but fork and exec).
const EXITS_AT_ONCE: Duration = Duration::from_millis(200);
pub const QUICK_EXITS_IN_A_ROW: u32 = 20;

/// How one command of a load has been ending: failures and quick exits in
/// a row. `restarted`: the command is started again whenever it ends, so
/// that quick exits count (a compiler run once per file ends quickly by
/// nature).
#[derive(Default)]
pub struct Streak {
    pub restarted: bool,
    failures: u32,
    quick: u32,
}

/// The end of what a command wrote to its standard error: the lines of the
/// last [`StderrTail::KEEP`] bytes, read without blocking as it runs.
struct StderrTail {
    pipe: Option<std::process::ChildStderr>,
    tail: Vec<u8>,
}

impl StderrTail {
    const KEEP: usize = 600;

    fn new(pipe: Option<std::process::ChildStderr>) -> StderrTail {
        let pipe = pipe.filter(|p| rustix::io::ioctl_fionbio(p, true).is_ok());
        StderrTail { pipe, tail: Vec::new() }
    }

    /// Reads what is there now.
    fn read(&mut self) {
        use std::io::Read;
        let Some(p) = &mut self.pipe else { return };
        let mut buf = [0u8; 4096];
        loop {
            match p.read(&mut buf) {
                Ok(0) => {
                    self.pipe = None;
                    return;
                }
                Ok(n) => {
                    self.tail.extend_from_slice(&buf[..n]);
                    if self.tail.len() > 2 * Self::KEEP {
                        self.tail.drain(..self.tail.len() - Self::KEEP);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    /// `; its stderr: LINE | LINE` (the last lines, at most KEEP bytes),
    /// or `; nothing on its stderr`.
    fn describe(&self) -> String {
        let text = String::from_utf8_lossy(&self.tail[self.tail.len().saturating_sub(Self::KEEP)..]).into_owned();
        let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        if lines.is_empty() {
            return "; nothing on its stderr".into();
        }
        let last = &lines[lines.len().saturating_sub(4)..];
        format!("; its stderr: {}", last.join(" | "))
    }
}

/// How a command ended, in words.
fn ended(status: Option<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => s.to_string(),
        },
        None => "its status could not be read".into(),
    }
}

/// Runs `make()`'s command until the load stops: waits for it, starts it
/// again when it ends (`restart`), and kills it and everything it started
/// when the load stops. A command that cannot start, or that keeps failing
/// or exiting at once, fails the load ([`LoadCtx::fail`]).
pub fn supervise(ctx: &LoadCtx, what: &str, restart: bool, make: impl Fn() -> std::process::Command) {
    let mut streak = Streak { restarted: restart, ..Default::default() };
    while run_once(ctx, what, &mut streak, &make) && restart {}
}

/// Runs `make()`'s command once, to its end or until the load stops, its
/// standard error kept for a failure's message. False when the load stops
/// or when this command failed it:
/// - it cannot be started, or its shell says it cannot (exit status 126:
///   not executable, 127: not found);
/// - it failed (a status other than 0, or a signal) within 1 s of its
///   start, 3 times in a row;
/// - restarted, it ended within 200 ms of its start, 20 times in a row.
///
/// The message holds the command's own error: its exit status and the last
/// lines of its standard error.
pub fn run_once(ctx: &LoadCtx, what: &str, streak: &mut Streak, make: impl Fn() -> std::process::Command) -> bool {
    if ctx.stopping() {
        return false;
    }
    let started = std::time::Instant::now();
    let mut command = make();
    command.stderr(std::process::Stdio::piped());
    let groups = ctx.groups;
    // Each command is marked (its number after rtscope's pid) and, where
    // cgroup v2 allows, in a cgroup of its own: what it starts is found
    // and ended with it even when it left the process group (`setsid`).
    static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let serial = SERIAL.fetch_add(1, Relaxed);
    let mut mark = [0u8; 32];
    let n = crate::sys::ipc::load_marker(std::process::id(), &mut mark);
    let marker = format!("{}{serial}=", String::from_utf8_lossy(&mark[..n]));
    let (name, value) = marker.trim_end_matches('=').split_once('=').unwrap_or_default();
    command.env(name, value);
    let cgroup = groups.and_then(|_| crate::sys::cgroup::CommandCgroup::new(serial));
    if let Some(g) = groups {
        g.commands_started();
    }
    let spawned = match groups {
        Some(g) => {
            use std::os::fd::AsRawFd;
            process::spawn_grouped(&mut command, g, cgroup.as_ref().map(|c| c.procs.as_raw_fd()))
        }
        None => process::spawn_tied(&mut command),
    };
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            ctx.fail(format!("{what}: cannot start: {e}"));
            return false;
        }
    };
    let mut stderr = StderrTail::new(child.stderr.take());
    // The command's process group goes with it: what it left running
    // (a `cmd &` of a shell, say) belongs to the load.
    let pgid = child.id();
    let mut cgroup = cgroup;
    let mut end = || {
        if let Some(g) = groups {
            process::kill_group(pgid);
            g.remove_group(pgid as i32);
            match cgroup.take() {
                Some(c) => c.end(),
                None => {
                    // The variable whole (`RTSCOPE_LOAD=PID:N` and its
                    // NUL): this command's, not another copy's.
                    let mut exact = marker.clone().into_bytes();
                    exact.pop();
                    exact.push(0);
                    crate::sys::ipc::kill_marked(&exact, 2);
                }
            }
        }
    };
    let status = loop {
        stderr.read();
        if ctx.stopping() {
            process::stop_tree(&mut child);
            end();
            return false;
        }
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break None,
        }
    };
    stderr.read();
    end();
    let ran = started.elapsed();
    let failed = status.is_none_or(|s| !s.success());
    let code = status.and_then(|s| s.code());
    if failed && ran < FAILS_AT_ONCE && matches!(code, Some(126 | 127)) {
        ctx.fail(format!("{what}: cannot start: {}{}", ended(status), stderr.describe()));
        return false;
    }
    streak.failures = if failed && ran < FAILS_AT_ONCE { streak.failures + 1 } else { 0 };
    if streak.failures >= FAILURES_IN_A_ROW {
        ctx.fail(format!(
            "{what}: fails at once: {} within {} ms of its start, {FAILURES_IN_A_ROW} times in a row{}",
            ended(status),
            ran.as_millis(),
            stderr.describe()
        ));
        return false;
    }
    if streak.restarted {
        streak.quick = if ran < EXITS_AT_ONCE { streak.quick + 1 } else { 0 };
        if streak.quick >= QUICK_EXITS_IN_A_ROW {
            ctx.fail(format!(
                "{what}: exits at once ({} within {} ms of its start), {QUICK_EXITS_IN_A_ROW} times in a row: it \
                 loads little but fork and exec{}",
                ended(status),
                ran.as_millis(),
                stderr.describe()
            ));
            return false;
        }
    }
    if streak.quick > 0 || streak.failures > 0 {
        ctx.pause(Duration::from_millis(100));
    }
    true
}

/// `cmd` for `program` with its output discarded.
pub fn quiet_command(program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut c = std::process::Command::new(program);
    c.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_split_outside_quotes() {
        assert_eq!(split_list("idle,cpu, net:1000").unwrap(), vec!["idle", "cpu", "net:1000"]);
        assert_eq!(split_list("cmd:'a, b'@0,cpu").unwrap(), vec!["cmd:'a, b'@0", "cpu"]);
        assert!(split_list("cmd:'a").unwrap_err().to_string().contains("quote"));
        assert!(split_list("cpu,,net").unwrap_err().to_string().contains("empty"));
    }

    #[test]
    fn loads_parse_with_intensity_and_cpus() {
        let all = [0usize];
        let l = parse("cpu", &all, "--loads").unwrap();
        assert_eq!((l.kind.name(), l.intensity, l.cpus.clone()), ("cpu", 1, vec![0]));
        let l = parse("cpu:3@0", &all, "--loads").unwrap();
        assert_eq!((l.intensity, l.label.as_str()), (3, "cpu:3@0"));
        assert_eq!(parse("net", &all, "--loads").unwrap().intensity, 250);
        assert_eq!(parse("net:1000", &all, "--loads").unwrap().intensity, 1000);
        let l = parse("cmd:'sleep 1; echo a,b'@0", &all, "--loads").unwrap();
        assert_eq!(l.arg.as_deref(), Some("sleep 1; echo a,b"));
        assert_eq!(l.intensity, 1);
        let l = parse("cmd:'true':2", &all, "--loads").unwrap();
        assert_eq!(l.intensity, 2);
        let l = parse("cmd:/bin/true", &all, "--loads").unwrap();
        assert_eq!(l.arg.as_deref(), Some("/bin/true"));
        assert!(parse("idle@0", &all, "--loads").is_ok());
        for (bad, word) in [
            ("spin", "no load 'spin'"),
            ("cpu:lots", "not a number"),
            ("cpu:0", "from 1"),
            ("idle:3", "no intensity"),
            ("cpu@4000", "not online"),
            ("cmd", "needs a command"),
            ("cmd:''", "needs a command"),
            ("cpux", "no load"),
        ] {
            let e = parse(bad, &all, "--loads").err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains(word) && e.contains("--loads"), "{bad}: {e}");
        }
        assert!(parse_list("cpu,cpu", &all, "--loads").unwrap_err().to_string().contains("twice"));
    }

    #[test]
    fn policies_and_devices_parse_typed() {
        let all = [0usize, 1];
        assert_eq!(
            split_list("idle,cpu:2@fifo:50:period=10ms,busy=3ms@0,net").unwrap(),
            vec!["idle", "cpu:2@fifo:50:period=10ms,busy=3ms@0", "net"],
            "a policy's busy= stays with its load"
        );
        let l = parse("cpu:2@fifo:50:period=10ms,busy=3ms@1", &all, "--loads").unwrap();
        let rt = l.rt.unwrap();
        assert_eq!((l.intensity, l.cpus.clone(), rt.lo, rt.periodic), (2, vec![1], 50, Some((10_000_000, 3_000_000))));
        assert_eq!(parse("cpu@0@rr:40", &all, "--loads").unwrap().cpus, vec![0], "CPUs and policy in either order");
        assert!(parse("cpu", &all, "--loads").unwrap().rt.is_none());
        let t = parse("threads:16@fifo:10-60", &all, "--loads").unwrap();
        let rt = t.rt.unwrap();
        assert_eq!((t.intensity, rt.lo, rt.hi, rt.periodic), (16, 10, 60, Some(threads::DEFAULT_PERIODIC)));
        let target = t.kind.target(&t).unwrap();
        assert_eq!(target.asked, 40.0, "16 x 5 % over 2 CPUs");
        let d = parse("tty:/dev/ttyS1:9600@1", &all, "--loads").unwrap();
        assert_eq!((d.arg.as_deref(), d.cpus.clone()), (Some("/dev/ttyS1:9600"), vec![1]));
        assert_eq!(parse("net-to:10.0.0.2:9:500", &all, "--loads").unwrap().arg.as_deref(), Some("10.0.0.2:9:500"));
        for (bad, word) in [
            ("threads:16", "needs a policy"),
            ("net@fifo:50", "SCHED_OTHER only"),
            ("cpu@fifo:50@rr:40", "two policies"),
            ("cpu@0@1", "two CPU lists"),
            ("cpu:2@fifo:50:period=1ms,busy=1ms", "below period"),
            ("threads:64@fifo:10-60:period=1ms,busy=100us", "busy at real-time priority"),
            ("cpu@deadline:3", "not a policy"),
            ("tty", "names its device"),
            ("block@0", "names its device"),
        ] {
            let e = parse(bad, &all, "--loads").err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains(word) && e.contains("--loads"), "{bad}: {e}");
        }
    }

    /// The failure of `load`, waited for up to 5 s.
    fn failure_of(load: &str) -> Option<String> {
        let spec = parse(load, &[0], "--loads").unwrap();
        let signal = Arc::new(AtomicBool::new(false));
        let run = Running::start(&spec, &signal).unwrap();
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while run.failure().is_none() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let f = run.failure();
        run.stop();
        f
    }

    #[test]
    fn a_command_that_cannot_start_or_keeps_failing_fails_the_load_with_its_error() {
        let f = failure_of("cmd:'/nope/y'").expect("fails");
        assert!(f.contains("cannot start: exit status 127") && f.contains("/nope/y: not found"), "{f}");
        let f = failure_of("cmd:'echo one >&2; echo two-lines >&2; exit 3'").expect("fails");
        assert!(f.contains("fails at once: exit status 3") && f.contains("3 times in a row"), "{f}");
        assert!(f.ends_with("its stderr: one | two-lines"), "{f}");
        let f = failure_of("cmd:'kill -9 $$'").expect("fails");
        assert!(f.contains("killed by signal 9") && f.contains("nothing on its stderr"), "{f}");
        assert_eq!(failure_of("cmd:'sleep 1; exit 1'"), None, "a failure after a second is not at once");
    }

    #[test]
    fn every_load_has_a_sane_default_intensity() {
        for w in TABLE {
            if let Some(i) = w.intensity() {
                for n in [1, 2, 64] {
                    assert!((i.min..=i.max).contains(&(i.default)(n)), "{}", w.name());
                }
            }
        }
        let names: Vec<&str> = TABLE.iter().map(|w| w.name()).collect();
        for n in [
            "idle",
            "cpu",
            "memory",
            "disk",
            "net",
            "net-flood",
            "net-tcp",
            "net-to",
            "tty",
            "block",
            "threads",
            "fork",
            "sched",
            "compile",
            "cmd",
        ] {
            assert!(names.contains(&n), "{n}");
        }
    }
}
