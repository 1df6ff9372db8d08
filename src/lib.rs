//! rtscope's binary crate, as a library: `main.rs` calls
//! [`commands::main`], and benches and tests reach the real recording path.
//! Everything that touches the OS lives here; the result model and the pure
//! analysis are in `rtscope-model`.

// The layers, bottom up: a module imports only modules listed before its
// own (and the model crate); docs/architecture.md has the map.

// The kernel.
pub mod sys;
// Progress lines on stderr, for rtscope's non-measuring threads.
pub mod progress;
// Histograms and checkpoints, handed off the measuring thread.
pub mod recorder;
// `--trace`: the tracefs instance, its reader, decomposition, episodes.
pub mod trace;
// A run's lifecycle: the store, the machine's settings, cells, finish.
pub mod session;
// Measuring: the disturbances, loads and CPU score, then the probes and
// the OS-service benchmarks.
pub mod disturb;
pub mod load;
pub mod score;

pub mod osbench;
pub mod probe;
// The machine's own threads, through the scheduler's events.
pub mod watch;
// Requirements and task sets, judged.
pub mod judge;
pub mod prometheus;
// Output formats.
pub mod report;
// clap's structs, resolved into the types above.
pub mod cli;
// One file per subcommand (or group): act, map to an exit code.
pub mod commands;

/// The test suites' machine lock: a test that times something, or loads
/// the machine, holds it, so that no measuring test runs beside another
/// one, a load test or a second test binary (under `cargo nextest`, or a
/// developer's second `cargo test`). An exclusive `flock` on one file in
/// the temporary directory: it serialises the threads of one test binary
/// (each takes its own open file) and the binaries alike, and it goes with
/// the process however that ends. Every user's tests share it: it is
/// opened read-only where it exists (`flock` needs no more), so that a
/// user can take the one root made, and it is made readable by all. Not
/// used by rtscope itself.
#[doc(hidden)]
pub fn machine_lock() -> std::fs::File {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let path = std::env::temp_dir().join("rtscope-tests.lock");
    let file = match std::fs::File::open(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::OpenOptions::new().create(true).append(true).mode(0o644).open(&path).inspect(|f| {
                // Whatever the umask (where another user made it, its mode stays).
                let _ = f.set_permissions(std::fs::Permissions::from_mode(0o644));
            })
        }
        opened => opened,
    }
    .unwrap_or_else(|e| panic!("the test lock {}: {e}", path.display()));
    loop {
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive) {
            Ok(()) => return file,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => panic!("the test lock {}: flock: {e}", path.display()),
        }
    }
}
