//! rtscope's binary crate, as a library: `main.rs` calls
//! [`commands::main`], and benches and tests reach the real recording path.
//! Everything that touches the OS lives here; the result model and the pure
//! analysis are in `rtscope-model`.

pub mod analyze;
pub mod assess;
pub mod cli;
pub mod commands;
pub mod disturb;
pub mod load;
pub mod osbench;
pub mod probe;
pub mod recorder;
pub mod report;
pub mod score;
pub mod sys;
pub mod trace;

/// Unit tests that time something, or load the machine, take this lock in
/// turn: the unit-test binary runs its tests on parallel threads, and a
/// test that keeps a CPU busy would otherwise slow down one that measures.
#[cfg(test)]
pub(crate) fn machine_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A test that failed holding it poisons it; the next one still runs.
    LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
