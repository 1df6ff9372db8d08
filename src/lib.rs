//! rtscope's binary crate, as a library: `main.rs` calls
//! [`commands::main`], and benches and tests reach the real recording path.
//! Everything that touches the OS lives here; the result model and the pure
//! analysis are in `rtscope-model`.

pub mod cli;
pub mod commands;
pub mod disturb;
pub mod judge;
pub mod load;
pub mod osbench;
pub mod probe;
pub mod recorder;
pub mod report;
pub mod score;
pub mod session;
pub mod sys;
pub mod trace;

/// The test suites' machine lock: a test that times something, or loads
/// the machine, holds it, so that no measuring test runs beside another
/// one, a load test or a second test binary (under `cargo nextest`, or a
/// developer's second `cargo test`). An exclusive `flock` on one file in
/// the temporary directory: it serialises the threads of one test binary
/// (each takes its own open file) and the binaries alike, and it goes with
/// the process however that ends. Not used by rtscope itself.
#[doc(hidden)]
pub fn machine_lock() -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt;
    let path = std::env::temp_dir().join("rtscope-tests.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o666)
        .open(&path)
        .unwrap_or_else(|e| panic!("the test lock {}: {e}", path.display()));
    loop {
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive) {
            Ok(()) => return file,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => panic!("the test lock {}: flock: {e}", path.display()),
        }
    }
}
