//! Bad input: a clear message naming the flag or file, exit code 1, and
//! nothing measured or stored. No root needed.

mod common;
use common::*;

fn refused(args: &[&str], must_name: &[&str]) {
    refused_in(args, must_name);
}

/// [`refused`], returning the peak resident memory (kB) of the rtscope
/// process that refused it.
// Reaped by wait4(2), which also gives its resource usage.
#[allow(clippy::zombie_processes)]
fn refused_in(args: &[&str], must_name: &[&str]) -> u64 {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let dir = tempdir();
    let db = db(&dir);
    let mut all: Vec<&str> = args.to_vec();
    // `analyze tail` and `mttf` read sample files, not a store.
    if !args.contains(&"--samples") {
        all.extend(["--db", &db]);
    }
    let mut child = std::process::Command::new(BIN)
        .args(&all)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run rtscope");
    let mut status = 0;
    // SAFETY: rusage is plain integers, for which zeroes are valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // A refusal comes at once: what blocks (a FIFO opened for reading) or
    // reads without end (a device) fails here within 30 s, killed.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        // SAFETY: waits for our own child; `status` and `usage` are ours to
        // fill. Its message fits in the pipes' buffers, read once it has ended.
        let got = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, libc::WNOHANG, &mut usage) };
        if got == child.id() as i32 {
            break;
        }
        if std::time::Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?}: not refused within 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut o =
        std::process::Output { status: std::process::ExitStatus::from_raw(status), stdout: vec![], stderr: vec![] };
    child.stdout.take().unwrap().read_to_end(&mut o.stdout).unwrap();
    child.stderr.take().unwrap().read_to_end(&mut o.stderr).unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{args:?} should fail with 1: {}", text(&o));
    for word in must_name {
        assert!(err.contains(word), "{args:?}: message should name {word}: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    assert!(!std::path::Path::new(&db).exists(), "{args:?}: nothing may be stored before validation");
    usage.ru_maxrss as u64
}

#[test]
fn bad_wakeup_flags_are_refused_before_measuring() {
    refused(&["wakeup", "--interval", "10us"], &["--interval", "--force"]);
    refused(&["wakeup", "--interval", "1ms", "--distance", "5parsecs"], &["--distance", "unit"]);
    refused(&["wakeup", "--priority", "100"], &["--priority"]);
    // A negative number is the flag's value, judged by its parser, not
    // taken for a flag of its own.
    refused(&["wakeup", "-p", "-1"], &["--priority", "0..=99"]);
    refused(&["task", "--buffers", "-1"], &["--buffers", "1..=64"]);
    refused(&["noise", "--ratio", "-2"], &["--ratio", "between 1 and 1000"]);
    refused(&["compare", "1", "2", "--max-regression", "-10"], &["--max-regression", "between 0"]);
    // A flag that only means something with another is refused without it.
    for (flag, value) in [("--episodes", "5"), ("--trace-buffer", "8M"), ("--trace-clock", "mono")] {
        refused(&["wakeup", flag, value], &["--trace"]);
    }
    refused(&["wakeup", "--spin-active", "1ms"], &["--spinners"]);
    refused(&["watch", "--episodes", "5"], &["--cause-threshold"]);
    refused(&["run", "--quick", "--seed", "5"], &["--shuffle"]);
    refused(&["run", "--probes", "wakeup@95,wakeup@80", "--trace"], &["--trace", "--instances-in-turn"]);
    refused(&["run", "--probes", "wakeup@80:idle"], &["wakeup@80:idle", "rr"]);
    refused(&["wakeup", "--cpus", "4000"], &["--cpus", "not online"]);
    refused(&["wakeup", "--cpus", "zero"], &["--cpus"]);
    refused(&["wakeup", "--duration", "5parsecs"], &["--duration", "unit"]);
    refused(&["wakeup", "--spinners", "lots"], &["--spinners", "N@PRIO"]);
    refused(&["wakeup", "--checkpoint", "1ms"], &["--checkpoint"]);
    refused(&["wakeup", "--policy", "deadline"], &["--policy"]);
    refused(&["run", "--duration=-1s"], &["--duration"]);
    refused(&["wakeup", "--interval", "11s"], &["--interval", "10s"]);
    refused(&["wakeup", "--interval", "1ms", "--duration", "500us"], &["--duration", "--interval"]);
    refused(&["wakeup", "--checkpoint", "2h"], &["--checkpoint"]);
    refused(&["wakeup", "--json", "/nonexistent-dir/w.json"], &["--json"]);
    refused(&["run", "--json", "/nonexistent-dir/w.json"], &["--json"]);
    refused(&["wakeup", "--spinners", "1@50", "--spin-pause", "0"], &["--spin-pause", "--force"]);
    refused(&["wakeup", "--priority", "0"], &["--priority"]);
    // The policy as it is written on the command line.
    refused(&["wakeup", "-p", "0"], &["--priority must be 1..99 for --policy fifo"]);
    refused(&["wakeup", "-p", "0", "--policy", "rr"], &["--policy rr"]);
    refused(&["wakeup", "--cause-threshold", "100us"], &["--cause-threshold", "--trace"]);
    refused(&["wakeup", "--trace", "--trace-buffer", "1K"], &["--trace-buffer", "64K"]);
    refused(&["wakeup", "--trace", "--trace-clock", "tsc"], &["--trace-clock", "mono"]);
    refused(&["wakeup", "--trace", "--episodes", "0"], &["--episodes"]);
    refused(&["export", "last", "--format", "perfetto2"], &["--format", "perfetto"]);
}

#[test]
fn bad_noise_sleep_and_ptimer_flags_are_refused_before_measuring() {
    refused(&["noise", "--ratio", "0.5"], &["--ratio"]);
    refused(&["noise", "--active", "10us"], &["--active"]);
    refused(&["noise", "--pause", "11s"], &["--pause", "10s"]);
    refused(&["noise", "--gap", "40ms"], &["--gap", "--active"]);
    refused(&["noise", "--gap", "5"], &["--gap", "5us"]);
    refused(&["noise", "--duration", "10ms"], &["--duration", "--active"]);
    refused(&["noise", "--cpus", "4000"], &["--cpus"]);
    refused(&["sleep", "--sleep", "0"], &["--sleep"]);
    refused(&["sleep", "--sleep", "1ms,20s"], &["--sleep", "10s"]);
    refused(&["sleep", "--api", "usleep"], &["--api", "nanosleep"]);
    refused(&["sleep", "--timer-slack", "0"], &["--timer-slack", "1ns"]);
    refused(&["sleep", "--phase", "1"], &["--phase", "1us"]);
    refused(&["ptimer", "--period", "10us"], &["--period", "--force"]);
    refused(&["ptimer", "--period", "0"], &["--period"]);
    refused(&["wakeup", "--instances", "95,80", "--policy", "other"], &["--instances", "--policy", "rr"]);
    refused(&["wakeup", "--instances", "95,80", "--trace"], &["--trace", "--instances-in-turn"]);
    refused(&["wakeup", "--instances", "95,80", "--timerlat", "on"], &["--timerlat on", "--instances-in-turn"]);
    refused(&["wakeup", "--instances-in-turn"], &["--instances"]);
    refused(&["wakeup", "--instances", "95,80", "-h", "100"], &["--instances", "histogram"]);
    refused(&["ptimer", "--timer", "itimer"], &["--timer", "posix-signal"]);
    refused(&["ptimer", "--duration", "500us"], &["--duration", "--period"]);
    refused(&["ptimer", "--policy", "fifo", "--priority", "0"], &["--priority"]);
    refused(&["sleep", "--trace"], &["--trace", "sleep"]);
    refused(&["ptimer", "--trace", "--duration", "1s"], &["--trace", "ptimer"]);
}

#[test]
fn bad_assessments_and_loads_are_refused_before_measuring() {
    refused(&["run", "--loads", "idle,spin"], &["--loads", "spin", "known"]);
    refused(&["run", "--loads", "cpu:lots"], &["--loads", "not a number"]);
    refused(&["run", "--loads", "cmd:'make"], &["--loads", "quote"]);
    refused(&["run", "--probes", "wakeup,nope"], &["--probes", "nope"]);
    refused(&["run", "--duration", "500ms"], &["--duration", "1s"]);
    refused(&["run", "--cpus", "4000"], &["--cpus"]);
    refused(&["run", "/nonexistent-dir/plan.toml"], &["plan.toml"]);
    refused(&["run", "--quick", "plan.toml"], &["--quick"]);
    // A gate on what the plan cannot produce is refused before anything
    // is measured, naming what it can judge: it could never pass honestly.
    let gate = ["run", "--probes", "wakeup", "--loads", "idle", "-D", "1s", "--require"];
    refused(
        &[&gate[..], &["wakup.latency.max < 5us"]].concat(),
        &["'wakup.latency.max < 5us'", "no probe 'wakup'", "wakeup (latency"],
    );
    refused(&[&gate[..], &["wakeup.bogus.max < 5us"]].concat(), &["no metric 'bogus'", "latency"]);
    refused(&[&gate[..], &["noise.latency.max < 5us"]].concat(), &["no probe 'noise'"]);
    refused(&[&gate[..], &["wakeup.irq.max < 5us"]].concat(), &["no metric 'irq'"]);
    refused(&["run", "--probes", "noise", "--loads", "idle", "--profile", "omac"], &["omac", "wakeup"]);
    refused(&["load", "spin"], &["LOAD", "spin"]);
    refused(&["load", "cpu", "--duration", "0"], &["--duration"]);
    refused(&["load", "net:0"], &["net", "packets/s"]);
    refused(&["load", "cpu", "--json", "/nonexistent-dir/l.json"], &["--json"]);
    if std::process::Command::new("sh").args(["-c", "command -v stress-ng"]).status().unwrap().success() {
        skipped("the stress-ng load's message when it is missing: stress-ng is installed");
    } else {
        refused(&["load", "stress-ng:'--cpu 1'"], &["stress-ng", "apt-get install stress-ng"]);
    }
    // A campaign file's mistakes name the file and the key.
    let dir = tempdir();
    let plan = dir.join("bad-plan.toml");
    std::fs::write(&plan, "probes = [\"wakeup\"]\nloads = [\"idle\"]\nduration = \"forever\"\n").unwrap();
    refused(&["run", plan.to_str().unwrap()], &["bad-plan.toml", "duration"]);
    std::fs::write(&plan, "probes = [\"wakeup\"]\nlods = [\"idle\"]\n").unwrap();
    refused(&["run", plan.to_str().unwrap()], &["bad-plan.toml", "lods"]);
}

#[test]
fn unwritable_db_is_named() {
    let o = rtscope(&["wakeup", "--duration", "1s", "--db", "/nonexistent-dir/x.db"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--db"), "{}", text(&o));
    let o = rtscope(&["wakeup", "--duration", "1s", "--db", "/proc/x.db"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--db"), "{}", text(&o));
}

/// A `--db` that is not a regular file or a new path is refused before
/// SQLite touches it: a device (SQLite would make a world-writable
/// `/dev/null-journal`), a FIFO (its open blocks for ever), a name too long
/// for Linux; each named with the fix, nothing left beside it.
#[test]
fn a_db_that_is_not_a_file_is_refused_before_sqlite_opens_it() {
    let dir = tempdir();
    let fifo = dir.join("fifo.db");
    let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path of the test's own.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let journal_before = std::path::Path::new("/dev/null-journal").exists();
    for args in [&["runs"][..], &["wakeup", "-D", "1s"], &["import", "tests/data/report-run.json"]] {
        for (db, words) in [("/dev/null", "a character device"), (fifo.to_str().unwrap(), "a pipe (FIFO)")] {
            let mut all = args.to_vec();
            all.extend(["--db", db]);
            let t = std::time::Instant::now();
            let o = rtscope_timeout(&all, 30);
            assert!(t.elapsed() < std::time::Duration::from_secs(20), "{all:?} took {:?}", t.elapsed());
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{all:?}: {}", text(&o));
            assert!(err.contains(db) && err.contains(words) && err.contains("--db"), "{all:?}: {err}");
        }
    }
    if !journal_before {
        assert!(!std::path::Path::new("/dev/null-journal").exists(), "a /dev/null-journal was made");
    }
    let files: Vec<_> = std::fs::read_dir(&*dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(files.len(), 1, "only the FIFO: {files:?}");
    let long = dir.join("a".repeat(5000));
    for args in [&["runs"][..], &["wakeup", "-D", "1s"]] {
        let mut all = args.to_vec();
        all.extend(["--db", long.to_str().unwrap()]);
        let o = rtscope(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(err.contains("too long") && err.contains("--db") && err.len() < 1000, "{err}");
    }
}

/// [`rtscope`], killed after `secs` seconds.
fn rtscope_timeout(args: &[&str], secs: u64) -> std::process::Output {
    let child = std::process::Command::new(BIN)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let killer = std::thread::spawn(move || {
        if ended.recv_timeout(std::time::Duration::from_secs(secs)).is_err() {
            // SAFETY: kill() of our own child, not yet reaped (the waiting
            // thread is told below only after the output is read).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    });
    // Its pipes close when it ends (or is killed); it is reaped after the
    // killer has stood down, so its pid cannot be another's by then.
    let mut child = child;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    use std::io::Read;
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_end(&mut err).unwrap();
    let _ = done.send(());
    killer.join().unwrap();
    let status = child.wait().unwrap();
    std::process::Output { status, stdout: out, stderr: err }
}

#[test]
fn corrupt_imports_are_named() {
    let dir = tempdir();
    let db = db(&dir);
    let bad = dir.join("broken.json");
    std::fs::write(&bad, b"{\"format\": \"rtscope-run\", \"run_id\": ").unwrap();
    let o = rtscope(&["import", bad.to_str().unwrap(), "--db", &db]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("broken.json"), "{}", text(&o));
    let o = rtscope(&["import", dir.join("missing.json").to_str().unwrap(), "--db", &db]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.json"), "{}", text(&o));
    // A series whose CPU was edited to a negative number.
    let run = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/report-run.json");
    let mut doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(run).unwrap()).unwrap();
    doc["series"][0]["cpu"] = (-5).into();
    let edited = dir.join("edited.json");
    std::fs::write(&edited, serde_json::to_string(&doc).unwrap()).unwrap();
    let o = rtscope(&["import", edited.to_str().unwrap(), "--db", &db]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("has cpu -5"), "{}", text(&o));
    let o = rtscope(&["show", "last", "--db", &db]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--db"), "{}", text(&o));
}

/// cyclictest's habits on `rtscope wakeup`: its flags taken where rtscope
/// has the concept, the others refused naming rtscope's way; its units for
/// bare numbers; `-h N` is its histogram, `-h` alone the help.
#[test]
fn cyclictest_habits_are_taken_or_pointed_to_rtscope() {
    // Refused with rtscope's flag, before anything is stored.
    refused(&["wakeup", "-t", "9999"], &["-t 9999", "one thread per measured CPU", "or less"]);
    refused(&["wakeup", "-t9999"], &["-t 9999"]);
    refused(&["wakeup", "-t2", "-a0"], &["-t 2 with 1 CPUs (0)", "give -t 1"]);
    refused(&["wakeup", "-t", "0"], &["-t 0", "above 0"]);
    refused(&["wakeup", "--mainaffinity", "0"], &["--mainaffinity", "off the measured CPUs"]);
    refused(&["wakeup", "-a", "4000"], &["--cpus", "not online"]);
    refused(&["wakeup", "-a", "0", "--cpus", "0"], &["--affinity", "--cpus"]);
    refused(&["wakeup", "--histfile", "h.txt"], &["--histfile", "--histogram"]);
    // -h with a number is the histogram (0 buckets is none), not the help.
    refused(&["wakeup", "-h", "0"], &["--histogram", "0"]);
    refused(&["wakeup", "-h0"], &["--histogram"]);
    // A bare number takes cyclictest's unit: -i 10 is 10us (below 50us).
    refused(&["wakeup", "-i", "10"], &["--interval 10us", "--force"]);
    refused(&["wakeup", "-i", "1000", "-D", "0"], &["--duration"]);
    refused(&["wakeup", "-b", "0"], &["--threshold"]);
    // A negative duration is not a flag: its parser says what is wrong.
    refused(&["wakeup", "-D", "-5s"], &["--duration", "'-5s' must be positive"]);
    refused(&["wakeup", "-D", "-5"], &["--duration", "must be positive"]);
    refused(&["wakeup", "-b", "-5us"], &["--threshold", "must be positive"]);
    refused(&["wakeup", "-i", "--interval"], &["--interval", "is a flag", "needs a value"]);
    refused(&["run", "--duration", "-1s"], &["--duration", "must be positive"]);
    refused(&["analyze", "last", "--require", "wakeup.latency.max < -5us"], &["--require", "must be positive"]);
    // -h alone is the help, which lists cyclictest's flags and the units.
    for help in ["-h", "--help"] {
        let o = rtscope(&["wakeup", help]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
        for w in ["cyclictest's flags", "-a, --affinity", "-t, --threads", "-m, --mlockall", "-S, --smp", "--histogram"]
        {
            assert!(out.contains(w), "{w} missing from wakeup {help}: {out}");
        }
    }
    let o = rtscope(&["wakeup", "--help"]);
    let out = String::from_utf8_lossy(&o.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
    for w in
        ["a bare number is microseconds", "a bare number is seconds", "# Max Latencies:", "only the summary at the end"]
    {
        assert!(out.contains(w), "{w} missing from wakeup --help: {out}");
    }
}

/// `--db` works before the command as after it, and RTSCOPE_DB names the
/// store when --db does not.
#[test]
fn db_is_taken_before_the_command_and_from_rtscope_db() {
    let dir = tempdir();
    let db = db(&dir);
    let o = rtscope(&["--db", &db, "runs"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("--db {db}: no run store there")), "{err}");
    let o = std::process::Command::new(BIN).args(["show", "last"]).env("RTSCOPE_DB", &db).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("--db {db}: no run store there")), "{}", text(&o));
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/report-run.json");
    let o = std::process::Command::new(BIN).args(["import", fixture]).env("RTSCOPE_DB", &db).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = rtscope(&[&format!("--db={db}"), "runs"]);
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("wakeup"), "{}", text(&o));
    let o = rtscope(&["--help"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("RTSCOPE_DB"), "{}", text(&o));
}

/// The list says how long a short run took, and an import with no sample
/// in it is not a complete run.
#[test]
fn runs_lists_short_runs_and_sample_less_imports_as_they_are() {
    let dir = tempdir();
    let db = db(&dir);
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/report-run.json");
    let mut doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let start = doc["run"]["started_unix_ns"].as_i64().unwrap();
    doc["run"]["ended_unix_ns"] = (start + 153_400_000).into();
    let short = dir.join("short.json");
    std::fs::write(&short, doc.to_string()).unwrap();
    let o = rtscope(&["import", short.to_str().unwrap(), "--db", &db]);
    assert!(o.status.success(), "{}", text(&o));
    doc["run"]["uuid"] = "no-samples".into();
    doc["series"] = serde_json::json!([]);
    doc["results"] = serde_json::json!([]);
    let empty = dir.join("empty.json");
    std::fs::write(&empty, doc.to_string()).unwrap();
    let o = rtscope(&["import", empty.to_str().unwrap(), "--db", &db]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("as run 2 (")
            && String::from_utf8_lossy(&o.stdout).contains("): partial"),
        "{}",
        text(&o)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("without a single sample"), "{}", text(&o));
    let o = rtscope(&["runs", "--db", &db]);
    let out = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<&str> = out.lines().skip(1).collect();
    assert!(rows[0].contains(" complete ") && rows[0].contains(" 153ms "), "{out}");
    assert!(rows[1].contains(" partial ") && !rows[1].contains(" 0ns "), "{out}");
}

/// MemAvailable, bytes.
fn mem_available() -> u64 {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = info.lines().find(|l| l.starts_with("MemAvailable:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[test]
fn sizes_beyond_half_the_available_memory_are_refused_at_once() {
    // Refused before anything is allocated (nothing measured or stored, as
    // `refused` checks): judged by the process's own peak memory, not by
    // how fast a machine touches gigabytes. Every size refused here is
    // over a gigabyte or half of MemAvailable; rtscope itself takes a few
    // MB to say no.
    let at_once = |args: &[&str], words: &[&str]| {
        let peak_kb = refused_in(args, words);
        assert!(peak_kb < 64 * 1024, "{args:?}: {peak_kb} kB resident before refusing");
    };
    let avail = mem_available();
    let mib = |bytes: u64| format!("{}M", bytes >> 20);
    // 90% of what is available: more than the half allowed, and allocating
    // it would have been possible (the old code read all of it first).
    let most = mib(avail / 10 * 9);
    at_once(&["wakeup", "--cache-flush", "--flush-size", "200G"], &["--flush-size", "half", "MemAvailable"]);
    at_once(&["wakeup", "--cache-flush", "--flush-size", &most], &["--flush-size", "half", "MemAvailable"]);
    at_once(&["wakeup", "--cache-flush", "--flush-size", "99999999999999999G"], &["--flush-size"]);
    // The flags whose own ranges keep them small refuse only where the
    // machine is small; each is checked where it applies.
    let cpus = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .unwrap()
        .trim()
        .split(',')
        .map(|r| r.split_once('-').map_or(1, |(a, b)| b.parse::<u64>().unwrap() - a.parse::<u64>().unwrap() + 1))
        .sum::<u64>();
    if (1u64 << 30) * cpus > avail / 10 * 6 {
        at_once(&["wakeup", "--trace", "--trace-buffer", "1G"], &["--trace-buffer", "half"]);
    } else {
        eprintln!("skipped: --trace-buffer 1G x {cpus} CPUs fits in half of MemAvailable here");
    }
    if (4096u64 << 20) * cpus > avail / 10 * 6 {
        at_once(&["load", "memory:4096", "--duration", "1s"], &["memory:4096", "half"]);
        at_once(&["run", "--loads", "memory:4096"], &["memory:4096", "half"]);
    } else {
        eprintln!("skipped: memory:4096 x {cpus} CPUs fits in half of MemAvailable here");
    }
    if 10_000_000u64 * 24 > avail / 10 * 6 {
        at_once(&["osbench", "-n", "10000000"], &["--samples", "half"]);
    } else {
        eprintln!("skipped: osbench -n 10000000 fits in half of MemAvailable here");
    }
}

/// Every file the user names is read bounded by what it is: a device
/// (`/dev/zero` never ends), a FIFO nobody writes to (its open blocks), a
/// directory, a /proc file are refused at once, naming the flag or file
/// and the fix, within a few MB of memory; a plan, a campaign file, a
/// sample file, an export to import or report, a task file and a web
/// configuration alike.
#[test]
fn inputs_that_are_not_regular_files_are_refused_at_once() {
    let dir = tempdir();
    let fifo = dir.join("fifo");
    let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path of the test's own.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let fifo = fifo.to_str().unwrap();
    let at_once = |args: &[&str], words: &[&str]| {
        let peak_kb = refused_in(args, words);
        assert!(peak_kb < 64 * 1024, "{args:?}: {peak_kb} kB resident before refusing");
    };
    for input in ["/dev/zero", fifo] {
        at_once(&["run", input], &[input, "not a regular file"]);
        at_once(&["analyze", "tail", "--samples", input], &["--samples", input, "not a regular file"]);
        at_once(&["import", input], &[input, "not a regular file"]);
        at_once(&["report", input, "-o", "-"], &[input, "not a regular file"]);
        at_once(&["analyze", "rta", "--tasks", input], &["--tasks", input, "not a regular file"]);
        at_once(&["monitor", "--web-config", input], &["--web-config", input, "not a regular file"]);
        at_once(&["run", "--quick", "--tasks", input], &["--tasks", input, "not a regular file"]);
    }
    at_once(&["run", "/proc/self/status"], &["/proc/self/status", "copy it to a regular file"]);
    at_once(&["analyze", "tail", "--samples", dir.to_str().unwrap()], &["--samples", "a directory"]);
}

/// An output flag given the run store's own path (or one of its journals,
/// or the same file by another name) is refused before anything is
/// measured or written: written, it would replace every stored run.
#[test]
fn an_output_that_is_the_run_store_is_refused_and_the_store_kept() {
    let dir = tempdir();
    let db = db(&dir);
    let run = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/report-run.json");
    let o = rtscope(&["import", run.to_str().unwrap(), "--db", &db]);
    assert!(o.status.success(), "{}", text(&o));
    let before = std::fs::read(&db).unwrap();
    let same = dir.join(".").join(std::path::Path::new(&db).file_name().unwrap());
    let same = same.to_str().unwrap();
    let wal = format!("{db}-wal");
    let cases: [(&[&str], &str); 9] = [
        (&["export", "last", "-o", &db], "--output"),
        (&["report", "last", "-o", same], "--output"),
        (&["compare", "last", "last", "--html", &wal], "--html"),
        (&["wakeup", "-D", "1s", "--json", &db], "--json"),
        (&["wakeup", "-D", "1s", "-h", "10", "--histfile", same], "--histfile"),
        (&["osbench", "-t", "wake.futex-intra", "-n", "100", "-o", &db], "--output"),
        (&["run", "--quick", "--json", &db], "--json"),
        (&["watch", "-D", "1s", "--json", &db], "--json"),
        (&["load", "idle", "-D", "1s", "--json", &db], "--json"),
    ];
    for (args, flag) in cases {
        let mut all = args.to_vec();
        all.extend(["--db", &db]);
        let o = rtscope(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{all:?}: {}", text(&o));
        assert!(err.contains(flag) && err.contains("is the run store"), "{all:?}: {err}");
        assert_eq!(std::fs::read(&db).unwrap(), before, "{all:?} changed the store");
        assert!(!std::path::Path::new(&wal).exists(), "{all:?} wrote the store's journal");
    }
    let o = rtscope(&["runs", "--db", &db]);
    let listed = String::from_utf8_lossy(&o.stdout).lines().nth(1).unwrap_or_default().to_string();
    assert!(o.status.success() && listed.contains(" complete ") && listed.contains("wakeup "), "{}", text(&o));
    // Nor may an output be another output's file, or a run's export read.
    let copy = dir.join("run.json");
    std::fs::copy(&run, &copy).unwrap();
    let (copy, f) = (copy.to_str().unwrap(), dir.join("out.json"));
    let f = f.to_str().unwrap();
    let kept = std::fs::read(copy).unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["osbench", "-t", "wake.futex-intra", "--json", f, "-o", f], "both name"),
        (&["wakeup", "-D", "1s", "--json", f, "-h", "10", "--histfile", f], "both name"),
        (&["report", copy, "-o", copy], "is the run read from"),
        (&["compare", copy, "last", "--html", copy], "is the run read from"),
    ];
    for (args, words) in cases {
        let mut all = args.to_vec();
        all.extend(["--db", &db]);
        let o = rtscope(&all);
        assert_eq!(o.status.code(), Some(1), "{all:?}: {}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains(words), "{all:?}: {}", text(&o));
    }
    assert_eq!(std::fs::read(copy).unwrap(), kept, "the export read is kept");
    assert!(!std::path::Path::new(f).exists());
    // disturb keeps no store, but the one of RTSCOPE_DB is not its log.
    let o = std::process::Command::new(BIN)
        .args(["disturb", "--cpu", "0", "-D", "1s", "--log", &db])
        .env("RTSCOPE_DB", &db)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--log"), "{}", text(&o));
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

/// Values that would make nonsense (a zero period or target, a rate
/// beyond a sample a nanosecond, an id above pid_max, two writers on
/// stdout, exclusive options together) are refused, naming the flag.
#[test]
fn nonsense_values_are_refused_naming_the_flag() {
    // `disturb` and `analyze tail` take no --db.
    let plain = |args: &[&str], words: &[&str]| {
        let o = rtscope(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(words.iter().all(|w| err.contains(w)), "{args:?} should name {words:?}: {err}");
    };
    // (-D 1s: were the refusal to go, the spinner would not spin for ever.)
    plain(&["disturb", "--cpu", "0", "--spin", "0", "-D", "1s"], &["--spin", "above 0"]);
    plain(&["disturb", "--cpu", "0", "-D", "0"], &["--duration"]);
    plain(&["analyze", "tail", "--samples", "x", "--rate", "1e30"], &["--rate", "1e9"]);
    refused(&["analyze", "1", "--period", "0"], &["--period", "above 0"]);
    refused(&["analyze", "1", "--target", "0"], &["--target", "above 0"]);
    refused(&["noise", "--gap", "1us", "--ratio", "4"], &["--gap", "--ratio"]);
    refused(&["osbench", "--json", "-", "-o", "-"], &["--json", "--output", "stdout"]);
    refused(&["watch", "--pid", "999999999"], &["--pid", "pid_max"]);
    refused(&["analyze", "1", "--profile", "omac", "--profile", "none"], &["--profile none", "--profile omac"]);
    // A directory given as the store is called one.
    let dir = tempdir();
    let o = rtscope(&["runs", "--db", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is a directory: --db names a file"), "{}", text(&o));
}

/// A write that fails names the file it was to: `export -o /dev/full`.
#[test]
fn a_full_output_is_named() {
    let dir = tempdir();
    let db = db(&dir);
    let run = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/report-run.json");
    let o = rtscope(&["import", run.to_str().unwrap(), "--db", &db]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = rtscope(&["export", "1", "-o", "/dev/full", "--db", &db]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--output /dev/full: cannot write it: No space left"), "{err}");
}

/// Each typed setting is refused with the same words however it comes in:
/// a probe's flag, `run`'s flag, a plan file's key, the monitor's and
/// watch's flags, a plan's `[args]` (where the plan's own settings are not
/// a probe's). The type holds its range; the words are its own.
#[test]
fn a_bad_setting_is_refused_with_the_same_words_however_it_comes_in() {
    let dir = tempdir();
    let plan = |body: &str| {
        let p = dir.join(format!("p{}.toml", body.len()));
        std::fs::write(&p, format!("probes = [\"wakeup\"]\n{body}")).unwrap();
        p.to_str().unwrap().to_string()
    };
    let words = "50ms is outside 100ms..1h (e.g. 250ms: a crash loses up to one checkpoint interval";
    let toml = plan("checkpoint = \"50ms\"\n");
    for args in [
        vec!["wakeup", "--checkpoint", "50ms"],
        vec!["run", "--checkpoint", "50ms"],
        vec!["run", &toml],
        vec!["monitor", "--checkpoint", "50ms"],
        vec!["watch", "--comm", "x", "--checkpoint", "50ms"],
    ] {
        refused(&args, &[words]);
    }
    let words = "500ms is per cell and must be at least 1s (e.g. 10s)";
    let toml = plan("duration = \"500ms\"\n");
    for args in [vec!["run", "--duration", "500ms"], vec!["run", &toml]] {
        refused(&args, &[words]);
    }
    let words = "must be longer than 0 (e.g. 30s), or left out to run until stopped";
    for args in [
        vec!["wakeup", "-D", "0"],
        vec!["noise", "--duration=0s"],
        vec!["load", "cpu", "-D", "0"],
        vec!["watch", "--comm", "x", "-D", "0"],
    ] {
        refused(&args, &[words]);
    }
    // disturb keeps no store (no --db).
    let o = std::process::Command::new(BIN).args(["disturb", "--cpu", "0", "-D", "0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains(words), "{}", text(&o));
    let words = "11m is outside 0..10m";
    for (flag, key) in [("--warmup", "warmup"), ("--ramp-up", "ramp_up")] {
        let toml = plan(&format!("{key} = \"11m\"\n"));
        for args in [vec!["run", flag, "11m"], vec!["run", &toml]] {
            refused(&args, &[words]);
        }
    }
    refused(&["run", &plan("score = \"50ms\"\n")], &["50ms is outside 100ms..1m"]);
    let words = "'25h/day': 25h a day is not between 1s and 24h; write HOURS/day[,DAYS/week]";
    for args in [vec!["run", "--usage", "25h/day"], vec!["run", &plan("usage = \"25h/day\"\n")]] {
        refused(&args, &[words]);
    }
    let words = "'1-x': ";
    let toml = plan("cpus = \"1-x\"\n");
    for args in [
        vec!["wakeup", "--cpus", "1-x"],
        vec!["run", "--cpus", "1-x"],
        vec!["run", &toml],
        vec!["monitor", "--cpus", "1-x"],
    ] {
        refused(&args, &[words, "(e.g. 0,2-3)"]);
    }
    // A plan's own settings are not a probe's: in [args] they are refused
    // by name, not run twice.
    let toml = plan("[args]\nwakeup = [\"--checkpoint\", \"1s\"]\n");
    refused(&["run", &toml], &["[args] wakeup", "--checkpoint is the plan's own setting, not a probe's"]);
    refused(&["monitor", "--probe-args", "wakeup=--checkpoint 1s"], &["--checkpoint is the monitor's own setting"]);
    refused(&["monitor", "--cpus", "0", "--probe-args", "wakeup=--cpus 0"], &["--cpus is the monitor's own setting"]);
}
