//! The VM test bed: a Debian kernel (PREEMPT_RT, or the stock one) booted
//! under QEMU by `tests/vm/boot.sh`, with this machine's root read-only and
//! a writable directory for results; rtscope (this build) runs inside as
//! root. Under emulation (TCG, where the CPU has no vmx/svm) every latency
//! is the emulator's: tests judge mechanisms and names there, never times.
//! A test file boots once and runs every command its tests look at in that
//! boot ([`Boot`]); a VM that cannot start fails each of them, saying why.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The boot script, in the repository.
pub const BOOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vm/boot.sh");

/// What a boot left: its files (text) by name, and what boot.sh said.
pub struct Guest {
    pub files: BTreeMap<String, String>,
    /// boot.sh's stderr: the kernel, the accelerator, how long it took.
    pub said: String,
}

impl Guest {
    /// The file `name` the script wrote under `$O`; fails naming the files
    /// there and the script's stderr where it is missing.
    pub fn file(&self, name: &str) -> &str {
        self.files.get(name).map(String::as_str).unwrap_or_else(|| {
            panic!(
                "the guest wrote no {name} (files: {:?}); its stderr:\n{}",
                self.files.keys().collect::<Vec<_>>(),
                self.files.get("stderr").map_or("", |s| s.as_str())
            )
        })
    }

    /// A JSON file the script wrote.
    pub fn json(&self, name: &str) -> serde_json::Value {
        serde_json::from_str(self.file(name))
            .unwrap_or_else(|e| panic!("{name} is not JSON ({e}): {}", self.file(name)))
    }

    /// The exit status the script recorded for `step` (its line `step rc N`
    /// in the script's stdout, as [`step`] writes it).
    pub fn rc(&self, step: &str) -> Option<i32> {
        let want = format!("{step} rc ");
        self.file("stdout").lines().find_map(|l| l.strip_prefix(&want)).and_then(|r| r.trim().parse().ok())
    }
}

/// A shell function, `tracefs`, printing the kernel tracers' settings and
/// instances (with `T` the tracefs mount).
pub const TRACEFS: &str = "tracefs() { echo \"timerlat_period_us $(cat $T/osnoise/timerlat_period_us) cpus \
                           $(cat $T/osnoise/cpus) tracer $(cat $T/current_tracer) instances $(ls $T/instances | tr '\\n' ' ') \
                           options $(cat $T/osnoise/options)\"; }\n";

/// A probe's run `step` completed in the guest: exit 0 and stored
/// complete; its JSON (`json`, a file the script wrote).
pub fn completed(g: &Guest, step: &str, json: &str) -> serde_json::Value {
    assert_eq!(g.rc(step), Some(0), "{step}:\n{}", g.file(&format!("{step}.txt")));
    let v = g.json(json);
    assert_eq!(v["status"], "complete", "{step}: {v}");
    v
}

/// A script line that runs rtscope's `args` as `step`: its stdout and
/// stderr to `$O/STEP.txt`, its exit status and the guest's uptime before
/// and after it on the script's stdout.
pub fn step(step: &str, args: &str) -> String {
    format!(
        "t0=$(cut -d' ' -f1 /proc/uptime); \"$B\" {args} >\"$O/{step}.txt\" 2>&1; rc=$?; echo \"{step} rc $rc\"; \
         echo \"{step} took from $t0 to $(cut -d' ' -f1 /proc/uptime)\"\n"
    )
}

/// A boot whose result the tests of one file share: booted by the first
/// test that asks, under the machine lock (the emulator keeps every CPU
/// busy), and the same `Result` for each test after.
pub struct Boot {
    cell: std::sync::OnceLock<Result<Guest, String>>,
}

impl Boot {
    pub const fn new() -> Boot {
        Boot { cell: std::sync::OnceLock::new() }
    }

    /// The guest of this boot: booted once with `kernel` ("rt", "stock"),
    /// the kernel command line `append` and `script`; a test whose VM
    /// could not run the script to its end fails with boot.sh's reason.
    pub fn guest(&self, kernel: &str, append: &str, script: &str) -> &Guest {
        self.guest_with(kernel, append, &[], script)
    }

    /// [`Boot::guest`] with boot.sh's `flags` (`--uart-writes`).
    pub fn guest_with(&self, kernel: &str, append: &str, flags: &[&str], script: &str) -> &Guest {
        self.guest_beside(kernel, append, flags, script, None)
    }

    /// [`Boot::guest_with`], with `host` run on the host while the guest
    /// boots and runs the script (see [`Host`]).
    pub fn guest_beside(
        &self,
        kernel: &str,
        append: &str,
        flags: &[&str],
        script: &str,
        host: Option<&Host>,
    ) -> &Guest {
        let got = self.cell.get_or_init(|| {
            let _serial = super::serial();
            let got = boot(kernel, append, flags, script, host);
            // What it cost, past the harness's capture (as `skipped` does).
            if let Ok(g) = &got {
                use std::io::Write;
                let _ = write!(std::io::stderr(), "{}", g.said);
                if std::env::var_os("RTSCOPE_VM_STDOUT").is_some() {
                    let _ = write!(std::io::stderr(), "{}", g.files.get("stdout").map_or("", |s| s.as_str()));
                }
            }
            got
        });
        match got {
            Ok(g) => g,
            Err(e) => panic!("the {kernel} kernel's VM: {e}"),
        }
    }
}

/// Boots `kernel` with `append` on its command line and runs `script` in
/// it as root, with `$B` this build's rtscope and `$O` the writable
/// directory it leaves its files in (read back here, then removed).
/// What runs on the host beside a boot (the instrument of a two-machine
/// measurement): it gets OUT (where boot.sh writes `serial1-pty`) and a
/// flag that says the VM has ended, and returns files to keep, put in
/// [`Guest::files`] under `host/`. It must end soon after the flag is set.
pub type Host = dyn Fn(&Path, &std::sync::atomic::AtomicBool) -> BTreeMap<String, String> + Sync;

pub fn boot(kernel: &str, append: &str, flags: &[&str], script: &str, host: Option<&Host>) -> Result<Guest, String> {
    // Under TCG the guest kernel now and then dies in an interrupt: the
    // 6.12 RT kernel, once in several boots, at about 1.7 s in
    // sched_clock_cpu, and once (CI, 2026-11-29) at 17.8 s while the
    // script ran, at a two-byte nop of sysvec_reschedule_ipi: the site of
    // a static key the kernel rewrites as tracepoints are switched on and
    // off, which QEMU's multi-threaded TCG does not always see rewritten
    // on the other vCPU. That is the emulator's, not rtscope's: a boot
    // whose kernel panicked is tried again and said, twice at most where
    // it died before the script started, once where it died after (a
    // panic that comes back is the test's). boot.sh prints the oops' first
    // lines and where the script had got to.
    let mut tries = 0;
    loop {
        match boot_once(kernel, append, flags, script, host) {
            Err((e, started)) if tries < if started { 1 } else { 2 } && e.contains("Kernel panic") => {
                tries += 1;
                let when = if started { "while it ran the script" } else { "while booting" };
                // Past the harness's capture, so that CI's log shows it.
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "the {kernel} kernel died {when} under the emulator; booting it again ({tries}):\n{e}"
                );
            }
            got => return got.map_err(|(e, _)| e),
        }
    }
}

/// One boot; on failure, why and whether the script had started.
fn boot_once(
    kernel: &str,
    append: &str,
    flags: &[&str],
    script: &str,
    host: Option<&Host>,
) -> Result<Guest, (String, bool)> {
    let dir = super::tempdir();
    let out = dir.join("out");
    let file = dir.join("script.sh");
    let body = format!("B={}\nO={}\ncd /tmp\n{script}", super::BIN, out.display());
    std::fs::write(&file, body).map_err(|e| (format!("cannot write the script: {e}"), false))?;
    // The binary's directory and the test bed's scripts, where a clone
    // under /tmp puts them: the guest has a tmpfs of its own there.
    let bin_dir = Path::new(super::BIN).parent().unwrap_or(Path::new("/"));
    let scripts = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vm");
    let mut cmd = Command::new(BOOT);
    cmd.args(["--kernel", kernel, "--append", append, "--out", out.to_str().unwrap(), "--timeout", "900"])
        .arg("--keep")
        .arg(bin_dir)
        .args(["--keep", scripts])
        .args(flags)
        .arg(&file);
    let ended = std::sync::atomic::AtomicBool::new(false);
    let (o, host_files) = std::thread::scope(|s| {
        let side = host.map(|h| s.spawn(|| h(&out, &ended)));
        let o = cmd.output();
        ended.store(true, std::sync::atomic::Ordering::Relaxed);
        (o, side.map(|t| t.join().unwrap_or_default()).unwrap_or_default())
    });
    let o = o.map_err(|e| (format!("cannot run {BOOT}: {e}"), false))?;
    let said = String::from_utf8_lossy(&o.stderr).into_owned();
    if o.status.code() == Some(125) || !out.join("rc").exists() {
        return Err((format!("{BOOT} could not run the script in the VM: {said}"), out.join("stdout").exists()));
    }
    let mut files = BTreeMap::new();
    read_into(&out, "", &mut files);
    files.extend(host_files.into_iter().map(|(name, text)| (format!("host/{name}"), text)));
    Ok(Guest { files, said })
}

fn read_into(dir: &Path, prefix: &str, files: &mut BTreeMap<String, String>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = format!("{prefix}{}", e.file_name().to_string_lossy());
        if e.path().is_dir() {
            read_into(&e.path(), &format!("{name}/"), files);
        } else if let Ok(bytes) = std::fs::read(e.path()) {
            files.insert(name, String::from_utf8_lossy(&bytes).into_owned());
        }
    }
}
