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

/// `path` shortened for a message: a name of thousands of characters is
/// shown by its two ends.
pub fn shown(path: &Path) -> String {
    let s = path.display().to_string();
    if s.chars().count() <= 100 {
        return s;
    }
    let head: String = s.chars().take(60).collect();
    let tail: String = s.chars().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect();
    format!("{head}...{tail} ({} bytes)", s.len())
}

/// The longest name of one directory entry, and of a whole path (Linux's
/// NAME_MAX and PATH_MAX less its NUL).
const NAME_MAX: usize = 255;
const PATH_MAX: usize = 4095;

/// The store's files besides itself, which SQLite makes beside it.
pub const JOURNALS: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Refuses a store path SQLite must not touch, before it does: a name
/// too long for Linux; something that is not a regular file (a device
/// such as /dev/null, where SQLite would make a world-writable
/// `/dev/null-journal`; a FIFO, whose open blocks for ever; a socket; a
/// directory), or a journal beside it that is not one. A new path, or a
/// link to a regular file, passes. Every command that opens a store asks
/// this first.
pub fn check_path(path: &Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let longest = path.components().map(|c| c.as_os_str().len()).max().unwrap_or(0);
    if bytes.len() > PATH_MAX || longest > NAME_MAX {
        bail!(
            "run store {}: the name is too long for Linux (at most {NAME_MAX} bytes a name, {PATH_MAX} in all): give \
             a shorter --db PATH",
            shown(path)
        );
    }
    if bytes.is_empty() {
        bail!("run store: --db is empty: give a file (e.g. --db ./rtscope.db)");
    }
    let not_a_file = |p: &Path, what: &str| -> Result<()> {
        use std::os::unix::fs::FileTypeExt;
        let Ok(m) = std::fs::metadata(p) else { return Ok(()) };
        let t = m.file_type();
        let kind = if t.is_file() {
            return Ok(());
        } else if t.is_dir() {
            if p == path {
                bail!(directory_message(path));
            }
            "a directory"
        } else if t.is_char_device() {
            "a character device"
        } else if t.is_block_device() {
            "a block device"
        } else if t.is_fifo() {
            "a pipe (FIFO)"
        } else if t.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        bail!(
            "run store {}: {what} is {kind}, not a file: --db names an rtscope run store or a new file (e.g. --db \
             ./rtscope.db)",
            shown(path)
        )
    };
    not_a_file(path, "it")?;
    for j in JOURNALS {
        let mut p = path.as_os_str().to_owned();
        p.push(j);
        not_a_file(Path::new(&p), &format!("its {j} file"))?;
    }
    Ok(())
}

/// The store's files (itself and its journals) that exist now.
fn existing_files(path: &Path) -> Vec<std::path::PathBuf> {
    std::iter::once(path.to_path_buf())
        .chain(JOURNALS.iter().map(|j| {
            let mut p = path.as_os_str().to_owned();
            p.push(j);
            p.into()
        }))
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect()
}

impl Store {
    /// Opens (creating if needed) the store at `path`, checks its schema and
    /// marks runs whose process died as `partial`. A new store that cannot
    /// be made (a full disk, say) leaves no file behind.
    pub fn open(path: &Path) -> Result<Store> {
        check_path(path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.is_dir()) {
            bail!(
                "run store {}: directory {} does not exist (create it or pick another --db)",
                shown(path),
                dir.display()
            );
        }
        let before = existing_files(path);
        let opened = Connection::open(path).map_err(anyhow::Error::from).and_then(|conn| {
            let mut store = Store { conn, path: path.to_path_buf() };
            store.init()?;
            Ok(store)
        });
        let mut store = match opened {
            Ok(store) => store,
            Err(e) => {
                // The connection is closed: what it made goes (never what
                // was there before).
                for made in existing_files(path).into_iter().filter(|p| !before.contains(p)) {
                    let _ = std::fs::remove_file(made);
                }
                return Err(explain(path, e));
            }
        };
        store.mark_dead_runs()?;
        Ok(store)
    }

    /// Opens an existing store for a command that only reads it: as
    /// [`Store::open`] where this process can write it (migrating it and
    /// marking dead runs), read-only where it cannot (a store root wrote,
    /// read by another user): then nothing is migrated or written, and a
    /// store of an older schema is refused with the way to upgrade it.
    pub fn open_for_reading(path: &Path) -> Result<Store> {
        check_path(path)?;
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
        // The write-ahead log back to at most 64 MiB whenever it restarts:
        // one large transaction (a retention pass) does not leave it at its
        // high-water size beside a store bounded by --max-store.
        self.conn
            .execute_batch("PRAGMA synchronous=NORMAL; PRAGMA journal_size_limit=67108864; PRAGMA foreign_keys=OFF;")?;
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
    if is_full(path, &e) {
        return e.context(full_message(path));
    }
    let words = sqlite_extended(&e).map(|c| format!(": {} (SQLite code {c})", sqlite_words(c))).unwrap_or_default();
    if corrupt(&e) {
        e.context(corrupt_message(path))
    } else if unwritable(&e) {
        e.context(format!("cannot write run store {}{words} (pick a writable --db PATH)", shown(path)))
    } else {
        e.context(format!("run store {} is not usable{words}", shown(path)))
    }
}

/// What SQLite's extended result code means, in words: SQLite's own text
/// for an I/O error is "disk I/O error" whatever failed, and its number
/// alone tells a user nothing.
pub fn sqlite_words(extended: i32) -> &'static str {
    match extended {
        13 => "the disk is full (SQLITE_FULL)",
        266 => "reading the store failed (SQLITE_IOERR_READ)",
        522 => "the store is shorter than SQLite expects (SQLITE_IOERR_SHORT_READ)",
        778 => "writing the store failed (SQLITE_IOERR_WRITE)",
        1034 => "the file system cannot sync the store to disk (SQLITE_IOERR_FSYNC): it is not a file on a disk",
        1290 => "the store's directory cannot be synced (SQLITE_IOERR_DIR_FSYNC)",
        1546 => "the store cannot be truncated (SQLITE_IOERR_TRUNCATE)",
        1802 => "the store's size cannot be read (SQLITE_IOERR_FSTAT)",
        2058 | 2314 | 3594 | 3850 => {
            "the store cannot be locked (SQLITE_IOERR_*LOCK): a file system without POSIX locks?"
        }
        2570 => "a journal file cannot be deleted (SQLITE_IOERR_DELETE)",
        3082 => "SQLite ran out of memory (SQLITE_IOERR_NOMEM)",
        3338 => "the store's files cannot be checked (SQLITE_IOERR_ACCESS)",
        4618 => "the store's -shm file cannot be opened (SQLITE_IOERR_SHMOPEN)",
        4874 => "the store's -shm file cannot grow (SQLITE_IOERR_SHMSIZE): the disk is full?",
        5130 => "the store's -shm file cannot be locked (SQLITE_IOERR_SHMLOCK)",
        5386 => "the store's -shm file cannot be mapped (SQLITE_IOERR_SHMMAP)",
        6154 => "the store cannot be mapped (SQLITE_IOERR_MMAP)",
        14 | 270 | 526 | 782 | 1038 | 1294 => "the file cannot be opened (SQLITE_CANTOPEN)",
        8 | 264 | 520 | 776 | 1032 | 1288 | 1544 => "the store is read-only here (SQLITE_READONLY)",
        5 | 261 | 517 | 773 => "another process holds the store's lock (SQLITE_BUSY)",
        11 | 267 | 523 | 779 => "the store is damaged (SQLITE_CORRUPT)",
        26 => "the file is not an SQLite database (SQLITE_NOTADB)",
        c if c & 0xff == 10 => "reading or writing the store failed (SQLITE_IOERR)",
        _ => "SQLite failed",
    }
}

/// SQLite's extended result code under `e`, if SQLite raised it.
fn sqlite_extended(e: &anyhow::Error) -> Option<i32> {
    e.chain().find_map(|c| match c.downcast_ref::<rusqlite::Error>()? {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.extended_code),
        _ => None,
    })
}

/// SQLite's failure under `e` in words with its code, unless a message
/// in `e` already says what it was: for the last word on an error that
/// reaches the user.
pub fn sqlite_in_words(e: &anyhow::Error) -> Option<String> {
    let code = sqlite_extended(e)?;
    let said = e.chain().any(|c| {
        let t = c.to_string();
        t.contains("(SQLite code") || t.contains("is full") || t.contains("is corrupt") || t.contains("is damaged")
    });
    (!said).then(|| format!("SQLite: {} (code {code})", sqlite_words(code)))
}

/// Whether the file system holding `path` (a file, or a new name in a
/// directory) has less than 64 KiB left for this user.
pub fn disk_full(path: &Path) -> bool {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let at = if path.exists() { path } else { dir };
    rustix::fs::statvfs(at).is_ok_and(|s| s.f_bavail.saturating_mul(s.f_frsize) < 64 << 10)
}

/// `e`, a failed write to the store at `path`, with what it means: a full
/// disk named as such (SQLite says "database or disk is full", or a bare
/// "disk I/O error" where a journal or the -shm file could not grow), with
/// the fix; any other SQLite code in words. `None` where `e` is not
/// SQLite's.
pub fn fault(path: &Path, e: &anyhow::Error) -> Option<String> {
    let code = sqlite_extended(e)?;
    let io = code == 13 || code & 0xff == 10;
    if io && disk_full(path) {
        return Some(full_message(path));
    }
    Some(format!("run store {}: {} (SQLite code {code})", shown(path), sqlite_words(code)))
}

/// What a full disk under the store at `path` is told.
pub fn full_message(path: &Path) -> String {
    format!(
        "the disk holding the run store {} is full: free space there, or point --db at a store on another disk",
        shown(path)
    )
}

/// Whether `e` is a full disk under the store at `path`.
pub fn is_full(path: &Path, e: &anyhow::Error) -> bool {
    sqlite_extended(e).is_some_and(|c| c == 13 || c & 0xff == 10) && disk_full(path)
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
