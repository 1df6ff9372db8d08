//! The run store: SQLite in WAL mode. Schema documented in docs/store.md.
//!
//! A run is inserted as `running` before anything is measured; each
//! checkpoint interval is committed in its own transaction, so a SIGKILL
//! loses at most the interval in progress. A `running` run whose process is
//! gone is marked `partial` the next time the store is opened.

use crate::run::RunHeader;
use rusqlite::Connection;
use std::path::PathBuf;

/// A cause episode's key in a run: (load, probe, metric, cpu, sample).
pub type EpisodeKey = (Option<String>, String, String, i64, u64);

/// The load column: '' for none.
fn load_col(load: &Option<String>) -> &str {
    load.as_deref().unwrap_or("")
}

fn load_of(col: String) -> Option<String> {
    (!col.is_empty()).then_some(col)
}

/// An open run store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// A write transaction that holds the write lock from its start. A
    /// deferred one that reads first (a note appended, intervals
    /// summarised) takes a snapshot, and when another connection commits
    /// before its first write, SQLite refuses the upgrade at once
    /// (SQLITE_BUSY_SNAPSHOT, "database is locked") without the busy
    /// timeout: the monitor's runs and its retention write one store
    /// from several connections.
    fn write(&mut self) -> rusqlite::Result<rusqlite::Transaction<'_>> {
        self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
    }
}

/// A run as listed by `rtscope runs`.
#[derive(Clone, Debug)]
pub struct RunListing {
    pub header: RunHeader,
    pub series: usize,
    /// The measured samples (a traced run's stage series aside), as `show` counts them.
    pub samples: u64,
}

fn i(v: u64) -> i64 {
    v as i64
}
fn u(v: i64) -> u64 {
    v as u64
}

mod chunks;
mod open;
mod read;
mod retention;
mod schema;
mod timeline;
mod write;

pub use open::{
    check_path, corrupt, corrupt_message, disk_full, fault, full_message, is_full, shown, sqlite_in_words, sqlite_words,
};
pub use retention::Summarised;
pub use schema::SCHEMA_VERSION;
pub use write::{imported_header, process_identity};

#[cfg(test)]
pub(crate) mod tests_support;

#[cfg(test)]
mod tests;
