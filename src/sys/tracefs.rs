//! Finding tracefs, and mounting it when nobody has; an instance
//! directory's life: made registered with the janitor, its per-CPU binary
//! buffers, removed.

use crate::sys::ipc::{self, Leftover};
use std::fs::File;
use std::path::{Path, PathBuf};

/// Where tracefs is mounted today, or the standard mount point.
const MOUNT_POINT: &str = "/sys/kernel/tracing";
const LEGACY: &str = "/sys/kernel/debug/tracing";

/// Held while rtscope mounts tracefs, makes or removes an instance in a
/// tracefs it mounted, or unmounts it: two users in one process (the load
/// sampler's system-call counter and a trace, say) never unmount the
/// mount the other has just found. See [`mount_lock`] for other processes.
static MOUNT: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A path the janitor keeps as a C string ([`ipc::LOCK_DIR`],
/// [`ipc::CMD_HOLDERS`]), for this side.
fn path_of(c: &'static std::ffi::CStr) -> &'static Path {
    use std::os::unix::ffi::OsStrExt;
    Path::new(std::ffi::OsStr::from_bytes(c.to_bytes()))
}

/// How long [`mount_lock`] tries for [`ipc::LOCK_DIR`]'s lock.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// [`mount_lock`]'s guard.
pub struct MountLock {
    /// Closing it lets the other processes in.
    _dir: Option<File>,
    _held: std::sync::MutexGuard<'static, ()>,
}

/// Takes [`MOUNT`] and, across processes, [`ipc::LOCK_DIR`]'s `flock`: one
/// rtscope that ends (and unmounts the tracefs it mounted, with no instance
/// left in it) between another's finding that tracefs and its making an
/// instance there would make the other fail; and the holders of
/// `record-cmd` ([`record_cmd_off`]) change under it. Any user may lock that
/// directory, so the lock is tried, not waited for without end: every
/// 10 ms for [`LOCK_WAIT`]; where it is not had by then (someone holds it,
/// or there is no such directory, or its file system refuses `flock`),
/// rtscope goes on with the process's own lock: the window it covers is
/// microseconds wide.
pub fn mount_lock() -> MountLock {
    let held = MOUNT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let until = std::time::Instant::now() + LOCK_WAIT;
    let dir = File::open(path_of(ipc::LOCK_DIR)).ok().filter(|f| {
        loop {
            match rustix::fs::flock(f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => break true,
                Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR) if std::time::Instant::now() < until => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                Err(_) => break false,
            }
        }
    });
    MountLock { _dir: dir, _held: held }
}

/// The id of the trace event `event` (`system/name`), which
/// `perf_event_open` takes as a tracepoint's config. Mounts tracefs for
/// the read when nobody has, and unmounts it at once (unless an instance
/// is in it by then): the id stays valid without the mount. Ids read are
/// kept for the process's life (a built-in event's id does not change), so
/// the mount happens once per event.
pub fn event_id(event: &str) -> Result<u64, String> {
    static IDS: std::sync::Mutex<Vec<(String, u64)>> = std::sync::Mutex::new(Vec::new());
    let known = |ids: &[(String, u64)]| ids.iter().find(|(e, _)| e == event).map(|&(_, id)| id);
    if let Some(id) = known(&IDS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)) {
        return Ok(id);
    }
    let id = read_event_id(event)?;
    IDS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((event.to_string(), id));
    Ok(id)
}

fn read_event_id(event: &str) -> Result<u64, String> {
    let _held = mount_lock();
    let (root, mounted) = find_or_mount()?;
    let p = root.join("events").join(event).join("id");
    let id = match std::fs::read_to_string(&p) {
        Ok(text) => text.trim().parse().map_err(|_| format!("{} holds no id", p.display())),
        Err(e) => Err(format!("trace event {event} is not in this kernel's tracefs ({}: {e})", p.display())),
    };
    if mounted {
        release(&root);
    }
    id
}

/// The source rtscope gives the tracefs it mounts: the first field of the
/// mount's line in /proc/mounts (where a system's own mount says `tracefs`
/// or `none`). Another rtscope that finds the mount so named knows that
/// rtscope made it, and takes its share of unmounting it: the last rtscope
/// to leave it, however it ends, unmounts it. Without that, a mount made
/// by one rtscope and last used by another was left behind: the one that
/// made it left it to the other, which had found it mounted.
pub const SOURCE: &str = "rtscope";

/// Every tracefs mount in a /proc/mounts text, in its order: (source,
/// mount point), octal escapes (`\040` for a space) decoded.
pub fn mounts_in(text: &str) -> Vec<(String, String)> {
    mount_lines(text).filter(|(_, _, fstype)| fstype == "tracefs").map(|(s, p, _)| (s, p)).collect()
}

/// Every mount in a /proc/mounts text: (source, mount point, type).
fn mount_lines(text: &str) -> impl Iterator<Item = (String, String, String)> + '_ {
    text.lines().filter_map(|l| {
        let mut f = l.split_whitespace();
        let (source, point, fstype) = (f.next()?, f.next()?, f.next()?);
        Some((unescape_mount(source), unescape_mount(point), fstype.to_string()))
    })
}

/// A field of /proc/mounts with its octal escapes decoded.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        // Three octal digits, the first 0-3: a byte (the kernel writes no other).
        if b[i] == b'\\'
            && i + 3 < b.len()
            && (b'0'..=b'3').contains(&b[i + 1])
            && b[i + 2..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether what is seen at `root` in the /proc/mounts text `mounts` is a
/// tracefs rtscope mounted ([`SOURCE`]): of mounts stacked on one point,
/// the last is the one seen (the kernel refuses tracefs over tracefs, but
/// another file system may be mounted over it).
fn made_by_rtscope(mounts: &str, root: &Path) -> bool {
    let seen = mount_lines(mounts).filter(|(_, point, _)| Path::new(point) == root).last();
    seen.is_some_and(|(source, _, fstype)| source == SOURCE && fstype == "tracefs")
}

/// The tracefs root, and whether rtscope mounted it (and should unmount
/// it when done, unless an instance is left in it). A mount another
/// rtscope made ([`SOURCE`]) counts as this one's too, and is registered
/// with the janitor as it is. Callers that may unmount it again hold
/// [`mount_lock`].
pub fn find_or_mount() -> Result<(PathBuf, bool), String> {
    for root in [MOUNT_POINT, LEGACY] {
        if Path::new(root).join("instances").is_dir() {
            let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
            let ours = made_by_rtscope(&mounts, Path::new(root))
                && crate::sys::ipc::janitor()
                    .is_ok_and(|j| j.registry().add_path(Leftover::TracefsMount, Path::new(root)));
            return Ok((root.into(), ours));
        }
    }
    if !Path::new(MOUNT_POINT).is_dir() {
        return Err(format!("{MOUNT_POINT} does not exist: this kernel has no tracefs (CONFIG_TRACING)"));
    }
    // Registered with the janitor before it is mounted: should rtscope be
    // killed from here on, the janitor unmounts it (when no instance is
    // left in it, as [`release`] does).
    let janitor = crate::sys::ipc::janitor().map_err(|e| format!("cannot start rtscope's janitor ({e})"))?;
    if !janitor.registry().add_path(Leftover::TracefsMount, Path::new(MOUNT_POINT)) {
        return Err(format!(
            "tracefs is not mounted, and rtscope's janitor has no room to unmount it should rtscope be killed: \
             mount it yourself (mount -t tracefs tracefs {MOUNT_POINT})"
        ));
    }
    if let Err(e) = rustix::mount::mount(SOURCE, MOUNT_POINT, "tracefs", rustix::mount::MountFlags::empty(), None) {
        forget(Path::new(MOUNT_POINT));
        return Err(format!("tracefs is not mounted and mounting it at {MOUNT_POINT} failed ({e})"));
    }
    if !Path::new(MOUNT_POINT).join("instances").is_dir() {
        let _ = unmount(Path::new(MOUNT_POINT));
        return Err(format!("tracefs mounted at {MOUNT_POINT} has no instances/ (kernel too old)"));
    }
    Ok((MOUNT_POINT.into(), true))
}

/// Lets go of the tracefs at `root` that [`find_or_mount`] counted as this
/// process's (it answered `true`): unmounts it when no instance is left in
/// it; else leaves it to the instances' owners (another rtscope unmounts it
/// when it leaves last) and tells the janitor so. Should the unmount fail
/// (a file in it still open), the janitor tries again when rtscope ends.
/// The caller holds [`mount_lock`].
pub fn release(root: &Path) {
    let used = std::fs::read_dir(root.join("instances")).map_or(true, |mut d| d.next().is_some());
    // A mount someone made over rtscope's meanwhile is theirs: left alone.
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    if used || !made_by_rtscope(&mounts, root) {
        forget(root);
    } else {
        let _ = unmount(root);
    }
}

/// Unmounts the tracefs rtscope mounted.
pub fn unmount(root: &Path) -> Result<(), String> {
    rustix::mount::unmount(root, rustix::mount::UnmountFlags::empty()).map_err(|e| e.to_string())?;
    forget(root);
    Ok(())
}

/// Tells the janitor to leave the tracefs rtscope mounted at `root` as it
/// is (unmounted, or left mounted because another tracer uses it).
pub fn forget(root: &Path) {
    if let Ok(j) = crate::sys::ipc::janitor() {
        j.registry().remove_path(Leftover::TracefsMount, root);
    }
}

/// Writes `value` to the tracefs file `path`.
pub fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| format!("cannot write '{value}' to {}: {e}", path.display()))
}

/// Creates the instance directory `dir`, registered with the janitor
/// before it exists: should rtscope be killed (SIGKILL) at any moment from
/// here on, the janitor stops tracing in it and removes it.
pub fn create_registered(dir: &Path) -> Result<(), String> {
    let janitor = ipc::janitor().map_err(|e| format!("cannot start rtscope's janitor ({e})"))?;
    if !janitor.registry().add_path(Leftover::TraceInstance, dir) {
        return Err(format!("cannot register the tracefs instance {} with rtscope's janitor", dir.display()));
    }
    if let Err(e) = std::fs::create_dir(dir) {
        janitor.registry().remove_path(Leftover::TraceInstance, dir);
        return Err(format!("cannot create the tracefs instance {}: {e}", dir.display()));
    }
    Ok(())
}

/// Removes the instance directory `dir` (which frees its buffers and
/// disables its events) and unregisters it from the janitor; where the
/// kernel refuses, it stays registered and the janitor tries again when
/// rtscope ends. Whether it is gone.
pub fn remove_registered(dir: &Path) -> bool {
    let mut removed = std::fs::remove_dir(dir).is_ok();
    if !removed {
        std::thread::sleep(std::time::Duration::from_millis(50));
        removed = std::fs::remove_dir(dir).is_ok();
    }
    if removed {
        if let Ok(j) = ipc::janitor() {
            j.registry().remove_path(Leftover::TraceInstance, dir);
        }
    } else {
        eprintln!("rtscope: warning: could not remove the tracefs instance {}", dir.display());
    }
    removed
}

/// Opens the per-CPU binary buffers of the instance `dir`, non-blocking.
pub fn open_buffers(dir: &Path, cpus: &[usize]) -> Result<Vec<File>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    cpus.iter()
        .map(|c| {
            let p = dir.join(format!("per_cpu/cpu{c}/trace_pipe_raw"));
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
                .open(&p)
                .map_err(|e| format!("cannot open {}: {e}", p.display()))
        })
        .collect()
}

/// The top-level option `record-cmd`: with it on (the kernel's default),
/// every recorded event in any instance makes the next `sched_switch` and
/// `sched_wakeup` save the command names of the tasks involved, under a
/// lock, for the text `trace` output. rtscope reads the names from the
/// switch records themselves and never needs them, and on a wake-up path
/// they cost a probe on `sched_wakeup` (a tracepoint otherwise off) and
/// two saves: 0.2-0.4 us of the trace's cost on a KVM guest. An instance
/// has no option of its own: the top level's applies to every instance.
const RECORD_CMD: &str = "options/record-cmd";

/// How many of this process's instances hold `record-cmd` off (while any
/// does, this process holds it off, and the last lets go of it), and what
/// their plans say of it.
static RECORD_CMD_HELD: std::sync::Mutex<(usize, String)> = std::sync::Mutex::new((0, String::new()));

/// Set by a process that runs as a service, without end (the monitor):
/// it leaves `record-cmd` as found, since a tracer started meanwhile would
/// lose task names for as long as it runs.
static RECORD_CMD_LEFT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// This process leaves `record-cmd` as found (see [`RECORD_CMD_LEFT`]).
pub fn leave_record_cmd() {
    RECORD_CMD_LEFT.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// What became of `record-cmd` for an instance.
pub enum CmdNames {
    /// rtscope holds it off: back on when the last holder, of this process
    /// and of every other rtscope holding it ([`ipc::CMD_HOLDERS`]), lets
    /// go, or by the last one's janitor should it be killed.
    Off(CmdNamesOff),
    /// It was off already (the user's choice).
    WasOff,
    /// Left as found: this process runs without end ([`leave_record_cmd`]).
    Service,
    /// Left on, and why: another tracer uses tracefs (its text output would
    /// lose the names of tasks started meanwhile), or it cannot be turned
    /// back on for sure.
    LeftOn(String),
}

/// Holds `record-cmd` off (see [`CmdNames::Off`]).
pub struct CmdNamesOff {
    path: PathBuf,
    /// Where this process's file goes among the holders'.
    holders: PathBuf,
    /// For the plan ([`CmdNames::describe`]).
    said: String,
}

impl CmdNames {
    /// For the run's plan: "off for the run", "off for the run, held with
    /// another rtscope" (either followed by "; not seen by other rtscope
    /// processes: why" where its holder's file cannot be written), "off
    /// already", "as found: a monitor runs without end" or "left on: why".
    pub fn describe(&self) -> String {
        match self {
            CmdNames::Off(off) => off.said.clone(),
            CmdNames::WasOff => "off already".into(),
            CmdNames::Service => "as found: a monitor runs without end".into(),
            CmdNames::LeftOn(why) => format!("left on: {why}"),
        }
    }
}

/// Another tracer using tracefs at `root`, named; None when none is: the
/// top level's tracer is `nop` with no event enabled, and every instance
/// that is not rtscope's is the same.
fn other_tracer(root: &Path) -> Option<String> {
    let busy = |dir: &Path| {
        let tracer = std::fs::read_to_string(dir.join("current_tracer")).unwrap_or_default();
        let events = std::fs::read_to_string(dir.join("set_event")).unwrap_or_default();
        (!matches!(tracer.trim(), "" | "nop")) || !events.trim().is_empty()
    };
    if busy(root) {
        return Some("the top-level buffer".into());
    }
    let entries = std::fs::read_dir(root.join("instances")).ok()?;
    entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| !n.starts_with("rtscope-") && busy(&root.join("instances").join(n)))
        .map(|n| format!("the instance {n}"))
}

/// Who else holds `record-cmd` off, by the files in the holders'
/// directory.
#[derive(Debug, PartialEq)]
enum Holders {
    /// Nobody.
    None,
    /// Only processes that are gone (their janitors killed too): rtscope
    /// turned it off and nobody turned it back on. Their files are removed.
    Gone,
    /// Another live process.
    Live,
}

/// Who other than this process holds `record-cmd` off (has its file in
/// `holders`); the files of processes gone (or whose pid another program
/// has taken since) are removed. Under [`mount_lock`].
fn held_by_another(holders: &Path) -> Holders {
    let me = std::process::id();
    let Ok(files) = std::fs::read_dir(holders) else { return Holders::None };
    let mut found = Holders::None;
    for f in files.flatten() {
        match f.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
            Some(pid) if pid == me => {}
            Some(pid) if crate::sys::process::is_rtscope(pid) => found = Holders::Live,
            _ => {
                let _ = std::fs::remove_file(f.path());
                if found == Holders::None {
                    found = Holders::Gone;
                }
            }
        }
    }
    found
}

/// This process's file among `holders`, named by its pid.
fn own_file(holders: &Path) -> PathBuf {
    holders.join(std::process::id().to_string())
}

/// Adds this process to `holders`; where it cannot (/run not writable),
/// why: then no other rtscope sees it hold the option. Under
/// [`mount_lock`].
fn hold(holders: &Path) -> Result<(), String> {
    let file = own_file(holders);
    std::fs::create_dir_all(holders)
        .and_then(|()| File::create(&file))
        .map(drop)
        .map_err(|e| format!("cannot write {}: {e}", file.display()))
}

/// Takes this process out of `holders`; whether it was the last: then the
/// directory goes, and the one above it when empty. Under [`mount_lock`].
fn let_go(holders: &Path) -> bool {
    let _ = std::fs::remove_file(own_file(holders));
    if held_by_another(holders) == Holders::Live {
        return false;
    }
    if std::fs::remove_dir(holders).is_ok()
        && let Some(above) = holders.parent()
    {
        let _ = std::fs::remove_dir(above);
    }
    true
}

/// Turns `record-cmd` off at `root` for as long as the answer's
/// [`CmdNamesOff`] lives, unless it is off by the user's choice, another
/// tracer uses tracefs, or this process runs as a service. Where another
/// rtscope turned it off, this one joins it: the last of them to leave
/// turns it back on; where only gone ones hold it, this one takes it over.
/// Registered with the janitor before it is written.
/// Not called under [`mount_lock`] (it takes it).
pub fn record_cmd_off(root: &Path) -> CmdNames {
    record_cmd_off_with(root, path_of(ipc::CMD_HOLDERS))
}

/// [`record_cmd_off`], the holders kept in `holders`.
fn record_cmd_off_with(root: &Path, holders: &Path) -> CmdNames {
    if RECORD_CMD_LEFT.load(std::sync::atomic::Ordering::Relaxed) {
        return CmdNames::Service;
    }
    let mut held = RECORD_CMD_HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let path = root.join(RECORD_CMD);
    let holders = holders.to_path_buf();
    if held.0 > 0 {
        held.0 += 1;
        return CmdNames::Off(CmdNamesOff { path, holders, said: held.1.clone() });
    }
    let _lock = mount_lock();
    let on = std::fs::read_to_string(&path).is_ok_and(|v| v.trim() == "1");
    // Off, held by holders all gone: rtscope's, left off by a janitor that
    // was killed too; this one takes it over and turns it back on.
    let others = if on { Holders::None } else { held_by_another(&holders) };
    let joined = others == Holders::Live;
    if !on && others == Holders::None {
        return CmdNames::WasOff;
    }
    if on && let Some(other) = other_tracer(root) {
        return CmdNames::LeftOn(format!("another tracer uses {other}"));
    }
    // The janitor acts on the real holders' directory: a test's own one
    // is not registered with it.
    let real = holders == path_of(ipc::CMD_HOLDERS);
    let Ok(janitor) = ipc::janitor() else { return CmdNames::LeftOn("no janitor to turn it back on".into()) };
    if real && !janitor.registry().add_path(Leftover::OptionOn, &path) {
        return CmdNames::LeftOn("no room in the janitor's table to turn it back on".into());
    }
    if on && let Err(e) = write(&path, "0") {
        janitor.registry().remove_path(Leftover::OptionOn, &path);
        return CmdNames::LeftOn(e);
    }
    let mut said = String::from(if joined { "off for the run, held with another rtscope" } else { "off for the run" });
    if let Err(why) = hold(&holders) {
        said.push_str(&format!("; not seen by other rtscope processes: {why}"));
    }
    *held = (1, said.clone());
    CmdNames::Off(CmdNamesOff { path, holders, said })
}

impl Drop for CmdNamesOff {
    fn drop(&mut self) {
        let mut held = RECORD_CMD_HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        held.0 -= 1;
        if held.0 == 0 {
            let _lock = mount_lock();
            if let_go(&self.holders) {
                let _ = write(&self.path, "1");
            }
            if let Ok(j) = ipc::janitor() {
                j.registry().remove_path(Leftover::OptionOn, &self.path);
            }
        }
    }
}

/// Events the kernel lost on `cpu` of the instance at `dir`: overwritten
/// before they were read (`overrun`) or refused when the buffer was full
/// (`dropped events`), from its `per_cpu/cpuN/stats`.
pub fn lost_events(dir: &Path, cpu: usize) -> u64 {
    let stats = std::fs::read_to_string(dir.join(format!("per_cpu/cpu{cpu}/stats"))).unwrap_or_default();
    stats
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| matches!(k.trim(), "overrun" | "dropped events"))
        .filter_map(|(_, v)| v.trim().parse::<u64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two rtscope processes holding `record-cmd` off: the last to leave
    /// turns it back on; the user's own setting is left alone.
    #[test]
    fn record_cmd_goes_back_on_with_the_last_rtscope() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("tracing");
        let holders = base.path().join("run/rtscope/record-cmd");
        std::fs::create_dir_all(root.join("options")).unwrap();
        let option = root.join(RECORD_CMD);
        let value = || std::fs::read_to_string(&option).unwrap();
        let names = |d: &Path| {
            let mut n: Vec<String> =
                std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
            n.sort();
            n
        };
        let me = std::process::id().to_string();
        // Alone: off for the run, this process among the holders.
        std::fs::write(&option, "1").unwrap();
        let first = record_cmd_off_with(&root, &holders);
        assert_eq!(first.describe(), "off for the run");
        assert_eq!(value(), "0");
        assert_eq!(names(&holders), std::slice::from_ref(&me));
        // A second instance of the same process counts in the process.
        let second = record_cmd_off_with(&root, &holders);
        drop(first);
        assert_eq!(value(), "0", "held by the process's other instance");
        drop(second);
        assert_eq!(value(), "1", "back on with the last");
        assert!(!holders.exists() && !holders.parent().unwrap().exists(), "no file left behind");
        // Another rtscope (alive) turned it off: joined, and left off when
        // this one leaves first. The files of a gone holder and of a
        // process that is not rtscope (pid 1) are dropped.
        std::fs::write(&option, "0").unwrap();
        std::fs::create_dir_all(&holders).unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let gone_pid = gone.id().to_string();
        gone.wait().unwrap();
        let mut other = crate::sys::process::rtscope_named_sleeper(base.path());
        let other_pid = other.id().to_string();
        for f in [other_pid.as_str(), &gone_pid, "1"] {
            std::fs::write(holders.join(f), "").unwrap();
        }
        let joined = record_cmd_off_with(&root, &holders);
        assert_eq!(joined.describe(), "off for the run, held with another rtscope");
        let mut both = vec![other_pid.clone(), me.clone()];
        both.sort();
        assert_eq!(names(&holders), both);
        drop(joined);
        assert_eq!(value(), "0", "left off for the other rtscope");
        assert_eq!(names(&holders), std::slice::from_ref(&other_pid));
        other.kill().unwrap();
        other.wait().unwrap();
        // Off with nobody holding it: the user's choice, left alone.
        std::fs::remove_file(holders.join(&other_pid)).unwrap();
        assert_eq!(record_cmd_off_with(&root, &holders).describe(), "off already");
        assert_eq!(value(), "0");
        // Off, held only by a process gone whose janitor could not turn it
        // back on: taken over, and turned on at the end.
        std::fs::write(holders.join(&gone_pid), "").unwrap();
        let taken = record_cmd_off_with(&root, &holders);
        assert_eq!(taken.describe(), "off for the run");
        assert_eq!(names(&holders), std::slice::from_ref(&me));
        drop(taken);
        assert_eq!(value(), "1");
        assert!(!holders.exists());
        std::fs::create_dir_all(&holders).unwrap();
        // On, but another tracer uses tracefs: left on.
        std::fs::write(&option, "1").unwrap();
        std::fs::write(root.join("current_tracer"), "function\n").unwrap();
        let left = record_cmd_off_with(&root, &holders);
        assert!(
            left.describe().starts_with("left on: another tracer uses the top-level buffer"),
            "{}",
            left.describe()
        );
        assert_eq!(value(), "1");
    }

    #[test]
    fn mounts_are_read_with_their_source() {
        let text = "sysfs /sys sysfs rw 0 0\ntracefs /sys/kernel/tracing tracefs rw 0 0\n\
                    none /mnt/my\\040trace tracefs rw 0 0\nrtscope /sys/kernel/tracing tracefs rw,relatime 0 0\n";
        assert_eq!(
            mounts_in(text),
            [
                ("tracefs".to_string(), "/sys/kernel/tracing".to_string()),
                ("none".into(), "/mnt/my trace".into()),
                ("rtscope".into(), "/sys/kernel/tracing".into())
            ]
        );
        // The last mount on a point is the one seen there.
        let root = Path::new(MOUNT_POINT);
        assert!(made_by_rtscope(text, root));
        assert!(!made_by_rtscope(&text.replace("rtscope /sys", "tracefs /sys"), root));
        assert!(!made_by_rtscope(
            "rtscope /sys/kernel/tracing tracefs rw 0 0\nnone /sys/kernel/tracing tracefs rw 0 0\n",
            root
        ));
        assert!(!made_by_rtscope(text, Path::new(LEGACY)));
        // Another file system mounted over rtscope's: not rtscope's to unmount.
        assert!(!made_by_rtscope(&format!("{text}tmpfs /sys/kernel/tracing tmpfs rw 0 0\n"), root));
        assert!(!made_by_rtscope("", root));
        assert_eq!(unescape_mount("/a\\040b\\011c"), "/a b\tc");
        assert_eq!(unescape_mount("/trail\\04"), "/trail\\04");
        // Not a byte: left as written, never an overflow.
        assert_eq!(unescape_mount("/x\\777y"), "/x\\777y");
    }

    /// While one holder has the mount lock, another process's attempt (an
    /// open file of its own) is refused; once it is dropped, it is taken;
    /// and the mount lock does not wait for ever on another holder.
    #[test]
    fn the_mount_lock_holds_other_processes_off() {
        let other = File::open(path_of(ipc::LOCK_DIR)).expect("the lock directory");
        let try_lock = || rustix::fs::flock(&other, rustix::fs::FlockOperation::NonBlockingLockExclusive);
        let held = mount_lock();
        assert!(held._dir.is_some(), "{:?} cannot be locked", ipc::LOCK_DIR);
        assert_eq!(try_lock(), Err(rustix::io::Errno::WOULDBLOCK), "taken beside the mount lock");
        drop(held);
        // Another test may hold it by now: a blocking wait, then.
        rustix::fs::flock(&other, rustix::fs::FlockOperation::LockExclusive).expect("taken once let go");
        // Held elsewhere for good (any user can): given up after LOCK_WAIT.
        let t = std::time::Instant::now();
        let held = mount_lock();
        assert!(held._dir.is_none(), "the lock taken while another holds it");
        assert!(t.elapsed() >= LOCK_WAIT, "given up after {:?}", t.elapsed());
    }
}
