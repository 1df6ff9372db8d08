//! What rtscope says of itself: every command's `--help` (exit 0, no
//! internal names), the one setcap hint, the README's commands and the CI
//! and bench scripts that parse. No root needed.

mod common;
use common::*;

#[test]
fn help_names_every_command_and_exits_zero() {
    let o = rtscope(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    for cmd in [
        "run",
        "load",
        "wakeup",
        "noise",
        "sleep",
        "ptimer",
        "task",
        "netlat",
        "osbench",
        "runs",
        "show",
        "export",
        "import",
        "report",
        "compare",
        "analyze",
        "disturb",
        "monitor",
        "serial-rtt",
        "respond",
    ] {
        assert!(out.contains(cmd), "{cmd} missing from --help");
    }
    assert!(!out.contains("__second-process"));
    for cmd in commands() {
        let o = rtscope(&[cmd.as_str(), "--help"]);
        assert_eq!(o.status.code(), Some(0), "{cmd} --help");
    }
    let o = rtscope(&["wakeup", "--help"]);
    let out = String::from_utf8_lossy(&o.stdout);
    for flag in [
        "--interval",
        "--distance",
        "--spinners",
        "--second-process",
        "--cache-flush",
        "--threshold",
        "--exceed",
        "--json",
        "--no-dma-latency",
        "--loops",
    ] {
        assert!(out.contains(flag), "{flag} missing from wakeup --help");
    }
    // Every probe's --help says what is timed, from which event to which.
    for (cmd, words) in [
        ("noise", &["--ratio", "--gap", "--active", "--pause", "reference", "minus the reference"][..]),
        ("sleep", &["--api", "--sleep", "--phase", "--timer-slack", "just before the call", "when it returns"][..]),
        ("ptimer", &["--period", "--timer", "when the wait returns", "start + k x period"][..]),
    ] {
        let o = rtscope(&[cmd, "--help"]);
        // Help wraps at the terminal width: compare words.
        let out = String::from_utf8_lossy(&o.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
        for w in words {
            assert!(out.contains(w), "{w} missing from {cmd} --help: {out}");
        }
    }
}

/// Every message that asks for privileges gives the same fix: the one
/// `setcap` line of `PRIVILEGES_FIX`, nowhere written out a second time.
#[test]
fn the_setcap_hint_is_one_and_the_same_everywhere() {
    fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("crates"), &mut files);
    let mut hints = Vec::new();
    for f in &files {
        for (i, line) in std::fs::read_to_string(f).unwrap().lines().enumerate() {
            if line.contains("setcap ") && !line.trim_start().starts_with("//") && !line.contains("assert") {
                hints.push(format!("{}:{}: {}", f.strip_prefix(root).unwrap().display(), i + 1, line.trim()));
            }
        }
    }
    assert_eq!(hints.len(), 1, "one setcap hint (PRIVILEGES_FIX), not: {hints:#?}");
    assert!(hints[0].contains("sudo setcap cap_sys_nice,cap_ipc_lock+ep"), "{hints:?}");
}

/// CI runs `.ci/run`, and the benchmarks are scripts: a shell syntax error in
/// any of them (a lost `fi` in a merge) must fail here, not in CI after 0 s.
/// The scripts must also run exactly the README's test command.
#[test]
fn ci_and_bench_scripts_parse() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut scripts = vec![root.join(".ci/run")];
    for e in std::fs::read_dir(root.join("bench")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "sh") {
            scripts.push(p);
        }
    }
    assert!(scripts.len() > 3, "bench scripts missing: {scripts:?}");
    for s in &scripts {
        let o = std::process::Command::new("bash").arg("-n").arg(s).output().unwrap();
        assert!(o.status.success(), "{}: {}", s.display(), String::from_utf8_lossy(&o.stderr));
    }
    // .ci/run installs what the tests need, then ends with the tests.
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    let cmd = "cargo test --workspace --locked --no-fail-fast";
    let last = ci.lines().map(str::trim).rev().find(|l| !l.is_empty() && !l.starts_with('#'));
    assert_eq!(last, Some(cmd), ".ci/run must end with `{cmd}`");
    // The README's test command (its second command, the block after the
    // set-up's) is .ci/run itself, so that it passes on a fresh machine.
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let blocks: Vec<&str> = readme.split("```sh\n").skip(1).filter_map(|b| b.split("```").next()).collect();
    assert!(blocks.len() >= 2, "the README's commands: {blocks:?}");
    assert_eq!(blocks[1].trim(), ".ci/run", "the README's second command must be .ci/run");
}

/// Every command's `--help` speaks to its user: no doc link to an internal
/// name (`[`CONST`]`), as rustdoc's comments would leave.
#[test]
fn no_help_names_an_internal_constant() {
    for c in commands() {
        let help = String::from_utf8(rtscope(&[c.as_str(), "--help"]).stdout).unwrap();
        assert!(!help.contains("[`") && !help.contains("`]"), "{c} --help names an internal: {help}");
    }
}

/// The commands `rtscope --help` lists (but `help`).
fn commands() -> Vec<String> {
    let top = String::from_utf8(rtscope(&["--help"]).stdout).unwrap();
    let commands: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect();
    assert!(commands.len() > 10 && commands.iter().any(|c| c == "wakeup"), "{commands:?}");
    commands
}
