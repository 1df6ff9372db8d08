//! Sets the cfg `rtscope_root` when the package is built by root
//! (effective uid 0). The tests that need root carry
//! `#[cfg_attr(not(rtscope_root), ignore = "needs root: ...")]`: built by
//! another user they are listed as ignored, with the reason, rather than
//! passing having checked nothing (stable Rust has no run-time skip).
//! See docs/testing.md.
//!
//! The cfg is decided when this script runs, so it is run again when the
//! user seems to change (su, sudo and a login set HOME and USER); a test
//! binary built by one user and run by another fails, saying so
//! (tests/common/mod.rs), rather than skipping or running the wrong tests.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(rtscope_root)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=HOME");
    println!("cargo::rerun-if-env-changed=USER");
    if effective_uid() == Some(0) {
        println!("cargo::rustc-cfg=rtscope_root");
    }
}

/// The effective uid, from /proc/self/status (`Uid: real effective saved fs`).
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}
