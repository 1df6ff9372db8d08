//! Runs with loads: rtscope in a TMPDIR of the test's own, and what a load
//! may leave behind there and in the process table.

use super::*;
use std::process::Command;

/// rtscope with TMPDIR set to `tmp`, so that its loads' files are there.
pub fn rtscope_in(tmp: &std::path::Path, args: &[&str]) -> std::process::Output {
    rtscope_pid_in(tmp, args).1
}

/// [`rtscope_in`], with the process id of the rtscope it ran.
pub fn rtscope_pid_in(tmp: &std::path::Path, args: &[&str]) -> (u32, std::process::Output) {
    let child = Command::new(BIN)
        .args(args)
        .env("TMPDIR", tmp)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run rtscope");
    (child.id(), child.wait_with_output().expect("run rtscope"))
}

/// Temporary directories of loads left in `tmp`.
pub fn leftovers(tmp: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("rtscope-load-"))
        .collect()
}

/// Processes whose command line holds `mark` (a load's command or its
/// temporary directory), this test's own excepted.
pub fn running_with(mark: &str) -> Vec<String> {
    processes().into_iter().filter(|c| c.contains(mark) && !c.contains("cargo") && !c.contains("/deps/")).collect()
}
