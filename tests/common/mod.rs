//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod dist;
pub mod loads;
pub mod netns;
pub mod periodic;
pub mod prom;
pub mod reports;
pub mod timeline;
pub mod truth;
pub mod vm;

pub const BIN: &str = env!("CARGO_BIN_EXE_rtscope");

/// Probe runs measure the same CPUs: one at a time, across the test
/// binaries too (a file lock shared with the unit tests that time things).
pub fn serial() -> std::fs::File {
    rtscope::machine_lock()
}

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        .unwrap_or(false)
}

/// Whether this is CI: `.ci/run` runs with `CI=true`.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !["", "0", "false"].contains(&v.as_str()))
}

/// The root-only tests are built to run (the cfg `rtscope_root`, see
/// build.rs) when root builds them and to be ignored otherwise: a test
/// binary built by one user and run by another would skip them as root or
/// run them without root. It fails instead, saying how to fix it.
pub fn check_built_for_this_user() {
    match (cfg!(rtscope_root), is_root()) {
        (true, false) => panic!(
            "these tests were built by root and run by another user: build them as this user, \
             in a target directory of its own (CARGO_TARGET_DIR)"
        ),
        (false, true) => panic!(
            "these tests were built by another user and run by root, so the root-only ones are \
             ignored: rebuild them as root (`touch build.rs`, then the same cargo command)"
        ),
        _ => {}
    }
}

/// Every test binary checks that it was built for the user who runs it
/// and, in CI, that this user is root: CI fails if a root-only test was
/// ignored.
#[test]
fn built_for_the_user_who_runs_it() {
    check_built_for_this_user();
    assert!(is_root() || !in_ci(), "CI runs as root: as another user the root-only tests are ignored");
}

/// Whether a condition that CI guarantees holds (two CPUs, tracefs,
/// chromium, iproute2), `needs` naming it. Where it does not, the test
/// fails in CI; elsewhere it prints `skipped: TEST: needs ...` past the
/// harness's capture, so that it shows beside the test's result, and its
/// caller returns (or leaves out the part that needs it).
pub fn has(needs: &str, holds: bool) -> bool {
    if holds {
        return true;
    }
    let test = std::thread::current().name().unwrap_or("a test").to_string();
    assert!(!in_ci(), "{test} needs {needs}, which CI guarantees");
    skipped(&format!("needs {needs} (CI fails here)"));
    false
}

/// Prints `skipped: TEST: what` where the test harness does not capture
/// it (stderr itself, not `eprintln!`), so that it shows however the test
/// ends.
pub fn skipped(what: &str) {
    use std::io::Write;
    let test = std::thread::current().name().unwrap_or("a test").to_string();
    let _ = writeln!(std::io::stderr(), "skipped: {test}: {what}");
}

/// The episodes of `cpu` in an export, each with its window [programmed, woke].
pub fn episodes_of<'a>(doc: &'a serde_json::Value, cpu: &str) -> Vec<&'a serde_json::Value> {
    doc["episodes"].as_array().unwrap().iter().filter(|e| e["cpu"].as_u64() == cpu.parse().ok()).collect()
}

/// Whether tracefs is mounted anywhere.
pub fn tracefs_mounted() -> bool {
    std::fs::read_to_string("/proc/mounts").unwrap().lines().any(|l| l.split_whitespace().nth(2) == Some("tracefs"))
}

/// rtscope's tracefs instances.
pub fn instances() -> Vec<String> {
    in_tracefs(|root| {
        std::fs::read_dir(root.join("instances"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("rtscope-"))
            .collect()
    })
}

/// Runs `f` on the tracefs root, mounting tracefs for it where nobody has
/// (and unmounting it after, unless a run's instance is in it): an instance
/// outlives an unmount, so a stale one is there whether tracefs is mounted
/// or not.
pub fn in_tracefs<T>(f: impl FnOnce(&Path) -> T) -> T {
    let _held = rtscope::sys::tracefs::mount_lock();
    let (root, mounted) = rtscope::sys::tracefs::find_or_mount().expect("tracefs");
    let out = f(&root);
    if mounted {
        rtscope::sys::tracefs::release(&root);
    }
    out
}

/// The top-level tracefs option `record-cmd` ("1" or "0").
pub fn record_cmd() -> String {
    in_tracefs(|root| std::fs::read_to_string(root.join("options/record-cmd")).expect("options/record-cmd"))
        .trim()
        .to_string()
}

/// Whether tracefs can be used: mounted, or mountable (rtscope mounts it
/// when nobody has); see [`has`].
pub fn has_tracefs() -> bool {
    let _held = rtscope::sys::tracefs::mount_lock();
    match rtscope::sys::tracefs::find_or_mount() {
        Ok((root, mounted)) => {
            if mounted {
                rtscope::sys::tracefs::release(&root);
            }
            true
        }
        Err(e) => has(&format!("tracefs ({e})"), false),
    }
}

pub fn rtscope(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run rtscope")
}

/// `s` with the lines the terminal output wraps at 100 columns joined
/// again: a line indented under a line too long to take its first word
/// continues it (a title, a note, a warning), so that a phrase can be
/// looked for wherever the wrap fell.
pub fn unwrapped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev = 0;
    for (i, line) in s.lines().enumerate() {
        let body = line.trim_start();
        let indent = line.len() - body.len();
        if i > 0 && indent >= 2 && !body.is_empty() && prev + 1 + body.split(' ').next().unwrap().chars().count() > 100
        {
            out.push(' ');
        } else if i > 0 {
            out.push('\n');
            out.push_str(&line[..indent]);
        }
        out.push_str(body);
        prev = line.chars().count();
    }
    out
}

pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub fn db(dir: &Path) -> String {
    dir.join("rt.db").display().to_string()
}

pub fn json_file(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("json file")).expect("valid json")
}

/// `rtscope export last` (the full document: every interval and
/// exceedance, the episodes) of the store `db`, with `args`.
pub fn export(db: &str, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["export", "last", "--db", db];
    all.extend_from_slice(args);
    let o = rtscope(&all);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&o.stdout).expect("export is JSON")
}

/// The series `metric` of `cpu` in an export: its exceedances as (t, value)
/// and the span [first interval's start, last interval's end].
pub fn series_exceedances(doc: &serde_json::Value, metric: &str, cpu: u64) -> (Vec<(u64, u64)>, (u64, u64)) {
    probe_exceedances(doc, None, metric, cpu)
}

/// [`series_exceedances`] of `probe`'s series (an instance's, `wakeup@80`),
/// or of any probe's.
pub fn probe_exceedances(
    doc: &serde_json::Value,
    probe: Option<&str>,
    metric: &str,
    cpu: u64,
) -> (Vec<(u64, u64)>, (u64, u64)) {
    let s = doc["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["metric"] == metric && s["cpu"].as_u64() == Some(cpu) && probe.is_none_or(|p| s["probe"] == p))
        .unwrap_or_else(|| panic!("no series {metric} cpu{cpu}"));
    let ivs = s["intervals"].as_array().unwrap();
    let span = (ivs[0]["start_ns"].as_u64().unwrap(), ivs.last().unwrap()["end_ns"].as_u64().unwrap());
    let exc =
        s["exceedances"].as_array().unwrap().iter().map(|e| (e[0].as_u64().unwrap(), e[1].as_u64().unwrap())).collect();
    (exc, span)
}

pub fn show_json(db: &str, run: &str) -> serde_json::Value {
    let o = rtscope(&["show", run, "--json", "--db", db]);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&o.stdout).expect("show --json is JSON")
}

/// The online CPUs.
pub fn online_cpus() -> Vec<usize> {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    rtscope_model::inventory::parse_cpu_list(online.trim()).unwrap()
}

/// The last online CPU (a CPU other than 0 where there is one).
pub fn last_cpu() -> usize {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let last = online.trim().rsplit([',', '-']).next().unwrap();
    last.parse().unwrap()
}

/// Samples of a result row's histogram within [lo_ns, hi_ns].
pub fn samples_between(row: &serde_json::Value, lo_ns: u64, hi_ns: u64) -> u64 {
    row["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b[0].as_u64().unwrap(), b[1].as_u64().unwrap(), b[2].as_u64().unwrap()))
        .filter(|(lo, hi, _)| *lo >= lo_ns && *hi <= hi_ns)
        .map(|(_, _, n)| n)
        .sum()
}

/// A fresh directory, removed when the returned guard drops (however the
/// test ends).
pub fn tempdir() -> TempDir {
    let dir = std::env::temp_dir().join(format!("rtscope-test-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

pub struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for TempDir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

/// Command lines of every process.
pub fn processes() -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .collect()
}

/// A root-only test's setup: the probe lock held, a fresh directory with a
/// store path; the directory goes when it drops. A test that takes it
/// carries `#[cfg_attr(not(rtscope_root), ignore = "needs root: ...")]`
/// (see build.rs), so that it runs as root only and is listed as ignored
/// otherwise.
pub struct Fixture {
    pub dir: TempDir,
    pub db: String,
    // Dropped last: the lock is held until the directory is gone.
    _serial: std::fs::File,
}

impl Fixture {
    /// Fails, saying why, when not root: the test was run with `--ignored`,
    /// or built by another user.
    pub fn root() -> Fixture {
        check_built_for_this_user();
        assert!(is_root(), "this test runs real-time probes and needs root (CI runs as root)");
        let serial = serial();
        let dir = tempdir();
        let db = db(&dir);
        Fixture { dir, db, _serial: serial }
    }

    /// Runs rtscope (a probe, or `run`) on the store with `--json` into
    /// the file `name`, checks that it completed, each result row with the
    /// common keys, and returns the whole JSON.
    pub fn run_json(&self, name: &str, args: &[&str]) -> serde_json::Value {
        let json = self.dir.join(name);
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--quiet", "--db", &self.db, "--json", json.to_str().unwrap()]);
        let o = rtscope(&all);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v = json_file(&json);
        assert_eq!(v["status"], "complete", "{v}");
        for r in v["results"].as_array().unwrap() {
            for k in rtscope_model::export::RESULT_KEYS {
                assert!(!r[k].is_null(), "{k} missing in {r}");
            }
        }
        v
    }

    /// [`Fixture::run_json`]'s result rows.
    pub fn rows(&self, name: &str, args: &[&str]) -> Vec<serde_json::Value> {
        self.run_json(name, args)["results"].as_array().unwrap().clone()
    }

    /// A command that runs a copy of rtscope as the unprivileged user
    /// nobody, in the fixture's directory opened to it (wherever the
    /// checkout lives).
    pub fn as_nobody(&self) -> Command {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        std::fs::set_permissions(&*self.dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let bin = self.dir.join("rtscope");
        std::fs::copy(BIN, &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut c = Command::new(&bin);
        c.uid(65534).gid(65534);
        c
    }
}

/// The row of `metric` among result rows.
pub fn row<'a>(rows: &'a [serde_json::Value], metric: &str) -> &'a serde_json::Value {
    rows.iter().find(|r| r["metric"] == metric).unwrap_or_else(|| panic!("no {metric} in {rows:?}"))
}

/// Sends `sig` to `pid`, a process this test started.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill() has no memory preconditions; the pid is the test's child.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, sig) }, 0, "kill -{sig} {pid}");
}

/// Waits (at most 60 s) until the last run in `db` has stored its first
/// checkpoint interval, i.e. has measured at least one `--checkpoint`:
/// a fixed sleep before signalling a run depends on how long the start
/// takes on a loaded machine. Returns when it saw it.
pub fn wait_for_first_checkpoint(db: &str) -> std::time::Instant {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if Path::new(db).exists() {
            let o = rtscope(&["show", "last", "--json", "--db", db]);
            if o.status.success() {
                let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("show --json is JSON");
                if v["results"].as_array().is_some_and(|r| r.iter().any(|r| r["count"].as_u64() > Some(0))) {
                    return std::time::Instant::now();
                }
            }
        }
        assert!(std::time::Instant::now() < until, "no checkpoint stored in {db} after 60 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Exceedances of the series `metric` of `cpu` that the recorder could not
/// keep (a full ring), over all its intervals.
pub fn lost_exceedances(doc: &serde_json::Value, metric: &str, cpu: u64) -> u64 {
    doc["series"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["metric"] == metric && s["cpu"].as_u64() == Some(cpu))
        .flat_map(|s| s["intervals"].as_array().unwrap())
        .map(|i| i["lost_exceedances"].as_u64().expect("an interval's lost_exceedances"))
        .sum()
}

/// An episode's main cause as rtscope ranks it
/// (`rtscope_model::episode::main_cause`: the one that held the CPU
/// longest, a thread counted with the softirqs it ran from its own kernel
/// code).
pub fn main_cause(e: &serde_json::Value) -> &serde_json::Value {
    let all = e["causes"].as_array().unwrap();
    let causes: Vec<rtscope_model::episode::Cause> =
        all.iter().map(|c| serde_json::from_value(c.clone()).expect("a stored cause")).collect();
    let main = rtscope_model::episode::main_cause(&causes).expect("an episode has causes");
    &all[causes.iter().position(|c| std::ptr::eq(c, main)).unwrap()]
}
