//! Opening a store: creating or migrating it, read-only access for a user who
//! cannot write it, marking dead runs, and what SQLite's errors mean to the user.

use super::Store;
use super::schema::*;
use super::write::*;
use anyhow::{Context, Result, bail};
use rusqlite::{Connection, ErrorCode, OpenFlags, params};
use std::path::Path;

/// The schema version a store's `meta` records, refused when it is newer
/// than this rtscope's: the read-only and the writable opening both read
/// it here (an older one is theirs to upgrade or refuse).
fn schema_version(conn: &Connection) -> Result<i64> {
    let version: i64 = conn
        .query_row("SELECT value FROM meta WHERE key='schema_version'", [], |r| r.get::<_, String>(0))
        .context("no schema_version in meta")?
        .parse()
        .context("bad schema_version in meta")?;
    if version > SCHEMA_VERSION {
        bail!("schema version {version} is newer than this rtscope understands ({SCHEMA_VERSION}); upgrade rtscope");
    }
    Ok(version)
}

impl Store {
    /// Opens (creating if needed) the store at `path`, checks its schema and
    /// marks runs whose process died as `partial`.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.is_dir()) {
            bail!(
                "run store {}: directory {} does not exist (create it or pick another --db)",
                path.display(),
                dir.display()
            );
        }
        let conn = Connection::open(path).map_err(|e| explain(path, e.into()))?;
        let mut store = Store { conn, path: path.to_path_buf() };
        store.init().map_err(|e| explain(path, e))?;
        store.mark_dead_runs()?;
        Ok(store)
    }

    /// Opens an existing store for a command that only reads it: as
    /// [`Store::open`] where this process can write it (migrating it and
    /// marking dead runs), read-only where it cannot (a store root wrote,
    /// read by another user): then nothing is migrated or written, and a
    /// store of an older schema is refused with the way to upgrade it.
    pub fn open_for_reading(path: &Path) -> Result<Store> {
        if let Err(e) = std::fs::File::open(path) {
            bail!(
                "cannot read run store {}: {e} (run as a user who can read it, or point --db at a copy you can read)",
                path.display()
            );
        }
        if std::fs::OpenOptions::new().write(true).open(path).is_ok() {
            match Store::open(path) {
                Ok(store) => return Ok(store),
                // Writable file, unwritable directory (SQLite cannot make
                // its -wal file): read it as a user who cannot write.
                Err(e) if !unwritable(&e) => return Err(e),
                Err(_) => {}
            }
        }
        Store::open_read_only(path)
    }

    pub(super) fn open_read_only(path: &Path) -> Result<Store> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let open = |uri: String| -> Result<Store> {
            let conn = Connection::open_with_flags(uri, flags)?;
            let store = Store { conn, path: path.to_path_buf() };
            store.check_read_only()?;
            Ok(store)
        };
        match open(sqlite_uri(path, "mode=ro")) {
            Ok(store) => Ok(store),
            // A WAL-mode store is read through its -shm file, which a user
            // who cannot write the directory cannot create. Without a
            // -wal file (no run is being written) the file holds every
            // committed run: read it as immutable.
            Err(e) if unwritable(&e) && !wal_has_frames(path) => {
                open(sqlite_uri(path, "immutable=1")).map_err(|e| explain_read_only(path, e))
            }
            Err(e) if unwritable(&e) => Err(e.context(format!(
                "cannot read run store {} without writing: its -wal file holds commits that only a user who can \
                 write the store and its directory can read (run this as that user, e.g. with sudo, or let the \
                 run end first)",
                path.display()
            ))),
            Err(e) => Err(explain_read_only(path, e)),
        }
    }

    /// A read-only store must already be an rtscope store of this schema:
    /// creating or upgrading one needs write access.
    pub(super) fn check_read_only(&self) -> Result<()> {
        self.conn.busy_timeout(std::time::Duration::from_secs(10))?;
        let tables: Vec<String> = {
            let mut st = self.conn.prepare("SELECT name FROM sqlite_master WHERE type='table'")?;
            st.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?
        };
        if tables.is_empty() {
            bail!("it is an empty file, not yet an rtscope run store, and this user cannot write it");
        }
        if !tables.iter().any(|t| t == "meta") {
            bail!("it is an SQLite database of another application, not an rtscope run store");
        }
        let version = schema_version(&self.conn)?;
        if version < SCHEMA_VERSION {
            bail!(
                "schema version {version} must be upgraded to {SCHEMA_VERSION} before this rtscope reads it, which \
                 writes to it: run any rtscope command on it once as a user who can write it and its directory \
                 (e.g. `sudo rtscope runs --db {}`), or copy it somewhere writable",
                self.path.display()
            );
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn init(&mut self) -> Result<()> {
        self.conn.busy_timeout(std::time::Duration::from_secs(10))?;
        // Switching a new store to WAL takes its lock without the busy
        // handler: another process opening it at the same moment gets
        // SQLITE_BUSY here, so wait for it as the busy timeout would.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mode: String = loop {
            match self.conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)) {
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::DatabaseBusy && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                other => break other?,
            }
        };
        if !mode.eq_ignore_ascii_case("wal") && !mode.eq_ignore_ascii_case("memory") {
            bail!("cannot switch to WAL mode (got {mode})");
        }
        // Foreign keys stay off while the schema is created or migrated: a
        // migration that rebuilds a table must not cascade its DROP to the
        // rows that refer to it (SQLite's documented procedure).
        self.conn.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=OFF;")?;
        self.create_or_migrate()?;
        self.conn.execute_batch("PRAGMA foreign_keys=ON;")?;
        Ok(())
    }

    pub(super) fn create_or_migrate(&mut self) -> Result<()> {
        // The write lock first, then the look: two processes that open a
        // new store at once (a run starting, a `show` polling it) must not
        // both find it empty and both create it.
        let tx = self.write()?;
        let has_meta: bool = tx
            .query_row("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'", [], |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| n > 0)?;
        if !has_meta {
            let tables: i64 = tx.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
            if tables > 0 {
                bail!("it is an SQLite database of another application, not an rtscope run store");
            }
            tx.execute_batch(SCHEMA)?;
            tx.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')", [])?;
            tx.execute("INSERT INTO meta (key, value) VALUES ('application', 'rtscope')", [])?;
            migrate(&tx, 1)?;
            tx.commit()?;
            return Ok(());
        }
        let version = schema_version(&tx)?;
        if version < SCHEMA_VERSION {
            migrate(&tx, version).with_context(|| format!("upgrading the store from schema version {version}"))?;
            let broken: i64 = tx.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| r.get(0))?;
            if broken > 0 {
                bail!("upgrading the store from schema version {version} left {broken} rows without their parent");
            }
        }
        tx.commit()?;
        Ok(())
    }

    pub(super) fn mark_dead_runs(&mut self) -> Result<()> {
        let running: Vec<(i64, i64, Option<String>)> = {
            let mut st = self.conn.prepare("SELECT id, pid, process_id FROM runs WHERE status='running'")?;
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?
        };
        for (id, pid, ident) in running {
            if process_identity(pid as u32) != ident {
                let tx = self.write()?;
                let end: Option<i64> = tx.query_row(
                    "SELECT max(i.end_ns) FROM intervals i JOIN series s ON s.id = i.series_id WHERE s.run_id = ?1",
                    [id],
                    |r| r.get(0),
                )?;
                let (start_unix, start_mono): (i64, i64) =
                    tx.query_row("SELECT started_unix_ns, start_mono_ns FROM runs WHERE id=?1", [id], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })?;
                let ended = end.map(|e| start_unix + (e - start_mono));
                // Under the write lock: another process opening the store at
                // once may have marked it already, and noted it once.
                let marked = tx.execute(
                    "UPDATE runs SET status='partial', ended_unix_ns=?2 WHERE id=?1 AND status='running'",
                    params![id, ended],
                )?;
                if marked == 1 {
                    let note = "the process died before the run ended (SIGKILL, crash or power loss): data up to its \
                                last checkpoint";
                    append_note(&tx, id, note)?;
                }
                tx.commit()?;
            }
        }
        Ok(())
    }
}

/// The SQLite error code under `e`, if SQLite raised it.
pub(super) fn sqlite_code(e: &anyhow::Error) -> Option<ErrorCode> {
    e.chain().find_map(|c| c.downcast_ref::<rusqlite::Error>()).and_then(rusqlite::Error::sqlite_error_code)
}

/// Whether `e` says the store (or its -wal/-shm files) cannot be written.
pub(super) fn unwritable(e: &anyhow::Error) -> bool {
    matches!(sqlite_code(e), Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied))
}

/// Whether `e` says the file is not an SQLite database or a damaged one.
pub fn corrupt(e: &anyhow::Error) -> bool {
    matches!(sqlite_code(e), Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt))
}

/// What a damaged store is told, when the store's path is known.
pub fn corrupt_message(path: &Path) -> String {
    format!(
        "run store {} is corrupt or not an SQLite file: point --db at an rtscope run store, or move the file away \
         and rtscope makes a new one there",
        path.display()
    )
}

/// `e` with what it means for the user: a corrupt file is not a
/// permission problem, and only an unwritable one asks for another path.
pub(super) fn explain(path: &Path, e: anyhow::Error) -> anyhow::Error {
    if path.is_dir() {
        return e.context(directory_message(path));
    }
    if corrupt(&e) {
        e.context(corrupt_message(path))
    } else if unwritable(&e) {
        e.context(format!("cannot write run store {} (pick a writable --db PATH)", path.display()))
    } else {
        e.context(format!("run store {} is not usable", path.display()))
    }
}

/// What a store path that is a directory is told.
fn directory_message(path: &Path) -> String {
    format!(
        "run store {} is a directory: --db names a file (e.g. --db {})",
        path.display(),
        path.join("rtscope.db").display()
    )
}

pub(super) fn explain_read_only(path: &Path, e: anyhow::Error) -> anyhow::Error {
    if path.is_dir() {
        return e.context(directory_message(path));
    }
    if corrupt(&e) {
        e.context(corrupt_message(path))
    } else {
        e.context(format!("cannot read run store {} (opened read-only: this user cannot write it)", path.display()))
    }
}

/// Whether `path`'s write-ahead log holds anything.
pub(super) fn wal_has_frames(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(wal).is_ok_and(|m| m.len() > 0)
}

/// `file:PATH?query` with PATH percent-encoded (SQLite's URI filenames).
pub(super) fn sqlite_uri(path: &Path, query: &str) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push('?');
    uri.push_str(query);
    uri
}
