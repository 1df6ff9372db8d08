//! The run store: SQLite in WAL mode. Schema documented in docs/store.md.
//!
//! A run is inserted as `running` before anything is measured; each
//! checkpoint interval is committed in its own transaction, so a SIGKILL
//! loses at most the interval in progress. A `running` run whose process is
//! gone is marked `partial` the next time the store is opened.

use crate::episode::Episode;
use crate::hist;
use crate::inventory::Inventory;
use crate::run::{Exceedance, Interval, NegHalf, Run, RunHeader, RunStatus, Series, SeriesKey};
use anyhow::{Context, Result, anyhow, bail};
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, Transaction, params};
use std::path::{Path, PathBuf};

/// The schema this build writes. Bump it with a step in `MIGRATIONS`.
pub const SCHEMA_VERSION: i64 = 4;

const SCHEMA: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id              INTEGER PRIMARY KEY,
    uuid            TEXT NOT NULL UNIQUE,
    kind            TEXT NOT NULL,
    status          TEXT NOT NULL,
    exit_code       INTEGER,
    started_unix_ns INTEGER NOT NULL,
    ended_unix_ns   INTEGER,
    start_mono_ns   INTEGER NOT NULL,
    pid             INTEGER NOT NULL,
    process_id      TEXT,
    hostname        TEXT NOT NULL,
    tool_version    TEXT NOT NULL,
    command_line    TEXT NOT NULL,
    representative  INTEGER NOT NULL,
    warnings        TEXT NOT NULL,
    notes           TEXT NOT NULL,
    peak_rss_kb     INTEGER,
    inventory       TEXT NOT NULL,
    plan            TEXT NOT NULL
);
CREATE TABLE series (
    id      INTEGER PRIMARY KEY,
    run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    probe   TEXT NOT NULL,
    metric  TEXT NOT NULL,
    cpu     INTEGER NOT NULL,
    unit    TEXT NOT NULL,
    exceed  TEXT NOT NULL,
    UNIQUE (run_id, probe, metric, cpu)
);
CREATE TABLE intervals (
    series_id        INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE,
    seq              INTEGER NOT NULL,
    start_ns         INTEGER NOT NULL,
    end_ns           INTEGER NOT NULL,
    count            INTEGER NOT NULL,
    min_ns           INTEGER NOT NULL,
    max_ns           INTEGER NOT NULL,
    sum_ns           INTEGER NOT NULL,
    overflows        INTEGER NOT NULL,
    overruns         INTEGER NOT NULL,
    lost_exceedances INTEGER NOT NULL,
    hist             BLOB NOT NULL,
    PRIMARY KEY (series_id, seq)
);
CREATE TABLE exceedances (
    series_id INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE,
    t_ns      INTEGER NOT NULL,
    value_ns  INTEGER NOT NULL
);
CREATE INDEX exceedances_by_series ON exceedances (series_id, t_ns);
";

/// The steps from each schema version to the next, applied in order to a
/// new store (after `SCHEMA`, which is version 1) and to an older one.
const MIGRATIONS: [(i64, &str); 3] = [
    (
        // 2: signed series (the negative half of each interval) and the
        // probes' own per-series figures. NULL for unsigned series and for
        // series without extra figures, so version-1 rows stay as they are.
        2,
        "ALTER TABLE series ADD COLUMN extra TEXT;
     ALTER TABLE intervals ADD COLUMN neg_count INTEGER;
     ALTER TABLE intervals ADD COLUMN neg_min_ns INTEGER;
     ALTER TABLE intervals ADD COLUMN neg_max_ns INTEGER;
     ALTER TABLE intervals ADD COLUMN neg_sum_ns INTEGER;
     ALTER TABLE intervals ADD COLUMN neg_overflows INTEGER;
     ALTER TABLE intervals ADD COLUMN neg_hist BLOB;",
    ),
    (
        // 3: cause episodes of traced runs, and per-run documents (the
        // trace summary).
        3,
        "CREATE TABLE episodes (
            run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            probe      TEXT NOT NULL,
            metric     TEXT NOT NULL,
            cpu        INTEGER NOT NULL,
            sample     INTEGER NOT NULL,
            woke_ns    INTEGER NOT NULL,
            latency_ns INTEGER NOT NULL,
            verdict    TEXT NOT NULL,
            doc        TEXT NOT NULL,
            PRIMARY KEY (run_id, probe, metric, cpu, sample)
        );
        CREATE TABLE run_data (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            name   TEXT NOT NULL,
            doc    TEXT NOT NULL,
            PRIMARY KEY (run_id, name)
        );",
    ),
    (
        // 4: the workload dimension of an assessment: a series and an
        // episode are also keyed by the load they were measured under.
        // SQLite cannot change a table's key in place: each table is
        // rebuilt (with foreign keys off, see `init`) and its rows copied;
        // older rows get load '' (none: a single probe's run).
        4,
        "CREATE TABLE series_v4 (
            id      INTEGER PRIMARY KEY,
            run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            probe   TEXT NOT NULL,
            metric  TEXT NOT NULL,
            cpu     INTEGER NOT NULL,
            unit    TEXT NOT NULL,
            exceed  TEXT NOT NULL,
            extra   TEXT,
            load    TEXT NOT NULL DEFAULT '',
            UNIQUE (run_id, probe, metric, cpu, load)
        );
        INSERT INTO series_v4 (id, run_id, probe, metric, cpu, unit, exceed, extra)
            SELECT id, run_id, probe, metric, cpu, unit, exceed, extra FROM series;
        DROP TABLE series;
        ALTER TABLE series_v4 RENAME TO series;
        CREATE TABLE episodes_v4 (
            run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            load       TEXT NOT NULL DEFAULT '',
            probe      TEXT NOT NULL,
            metric     TEXT NOT NULL,
            cpu        INTEGER NOT NULL,
            sample     INTEGER NOT NULL,
            woke_ns    INTEGER NOT NULL,
            latency_ns INTEGER NOT NULL,
            verdict    TEXT NOT NULL,
            doc        TEXT NOT NULL,
            PRIMARY KEY (run_id, load, probe, metric, cpu, sample)
        );
        INSERT INTO episodes_v4 (run_id, probe, metric, cpu, sample, woke_ns, latency_ns, verdict, doc)
            SELECT run_id, probe, metric, cpu, sample, woke_ns, latency_ns, verdict, doc FROM episodes;
        DROP TABLE episodes;
        ALTER TABLE episodes_v4 RENAME TO episodes;",
    ),
];

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

/// A run as listed by `rtscope runs`.
#[derive(Clone, Debug)]
pub struct RunListing {
    pub header: RunHeader,
    pub series: usize,
    pub samples: u64,
}

fn i(v: u64) -> i64 {
    v as i64
}
fn u(v: i64) -> u64 {
    v as u64
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

    fn open_read_only(path: &Path) -> Result<Store> {
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
    fn check_read_only(&self) -> Result<()> {
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
        let version: i64 = self
            .conn
            .query_row("SELECT value FROM meta WHERE key='schema_version'", [], |r| r.get::<_, String>(0))
            .context("no schema_version in meta")?
            .parse()
            .context("bad schema_version in meta")?;
        if version > SCHEMA_VERSION {
            bail!(
                "schema version {version} is newer than this rtscope understands ({SCHEMA_VERSION}); upgrade rtscope"
            );
        }
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

    fn init(&mut self) -> Result<()> {
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

    fn create_or_migrate(&mut self) -> Result<()> {
        // The write lock first, then the look: two processes that open a
        // new store at once (a run starting, a `show` polling it) must not
        // both find it empty and both create it.
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
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
        let version: i64 = tx
            .query_row("SELECT value FROM meta WHERE key='schema_version'", [], |r| r.get::<_, String>(0))
            .context("no schema_version in meta")?
            .parse()
            .context("bad schema_version in meta")?;
        if version > SCHEMA_VERSION {
            bail!(
                "schema version {version} is newer than this rtscope understands ({SCHEMA_VERSION}); upgrade rtscope"
            );
        }
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

    fn mark_dead_runs(&mut self) -> Result<()> {
        let running: Vec<(i64, i64, Option<String>)> = {
            let mut st = self.conn.prepare("SELECT id, pid, process_id FROM runs WHERE status='running'")?;
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<Result<_, _>>()?
        };
        for (id, pid, ident) in running {
            if process_identity(pid as u32) != ident {
                let tx = self.conn.transaction()?;
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
                let note = "the process died before the run ended (SIGKILL, crash or power loss): data up to its last checkpoint";
                append_note(&tx, id, note)?;
                tx.execute("UPDATE runs SET status='partial', ended_unix_ns=?2 WHERE id=?1", params![id, ended])?;
                tx.commit()?;
            }
        }
        Ok(())
    }

    /// Inserts a new run (status from `header`) and returns its id.
    pub fn create_run(&mut self, header: &RunHeader, inventory: &Inventory, plan: &serde_json::Value) -> Result<i64> {
        let tx = self.conn.transaction()?;
        let id = insert_header(&tx, header, inventory, plan, process_identity(header.pid))?;
        tx.commit()?;
        Ok(id)
    }

    /// Declares a series of a run; returns its id.
    pub fn add_series(&mut self, run_id: i64, key: &SeriesKey, unit: &str, exceed: &str) -> Result<i64> {
        insert_series(&self.conn, run_id, key, unit, exceed)
    }

    /// Stores a series' extra figures (a JSON object), replacing any.
    pub fn set_series_extra(
        &mut self,
        series_id: i64,
        extra: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<()> {
        set_extra(&self.conn, series_id, extra)
    }

    /// Commits one checkpoint: intervals and exceedances, atomically.
    pub fn commit_checkpoint(
        &mut self,
        intervals: &[(i64, &Interval)],
        exceedances: &[(i64, &[Exceedance])],
    ) -> Result<()> {
        let tx = self.conn.transaction()?;
        for (series, iv) in intervals {
            insert_interval(&tx, *series, iv)?;
        }
        for (series, list) in exceedances {
            insert_exceedances(&tx, *series, list)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Keeps new cause episodes and drops those pushed out of the worst-N
    /// (`(probe, metric, cpu, sample)`), atomically.
    pub fn store_episodes(&mut self, run_id: i64, keep: &[Episode], drop: &[EpisodeKey]) -> Result<()> {
        let tx = self.conn.transaction()?;
        for (load, probe, metric, cpu, sample) in drop {
            tx.execute(
                "DELETE FROM episodes WHERE run_id=?1 AND load=?2 AND probe=?3 AND metric=?4 AND cpu=?5 AND sample=?6",
                params![run_id, load_col(load), probe, metric, cpu, i(*sample)],
            )?;
        }
        for e in keep {
            insert_episode(&tx, run_id, e)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Stores a named document with a run (e.g. `trace`), replacing it.
    pub fn put_run_data(&mut self, run_id: i64, name: &str, doc: &serde_json::Value) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO run_data (run_id, name, doc) VALUES (?1, ?2, ?3)",
            params![run_id, name, doc.to_string()],
        )?;
        Ok(())
    }

    fn run_data(&self, run_id: i64, name: &str) -> Result<Option<serde_json::Value>> {
        let doc: Option<String> = self
            .conn
            .query_row("SELECT doc FROM run_data WHERE run_id=?1 AND name=?2", params![run_id, name], |r| r.get(0))
            .optional()?;
        doc.map(|d| serde_json::from_str(&d).with_context(|| format!("stored {name} of run {run_id}"))).transpose()
    }

    /// A run's episodes, worst first.
    pub fn episodes(&self, run_id: i64) -> Result<Vec<Episode>> {
        let mut st =
            self.conn.prepare("SELECT doc FROM episodes WHERE run_id=?1 ORDER BY latency_ns DESC, cpu, sample")?;
        let docs: Vec<String> = st.query_map([run_id], |r| r.get(0))?.collect::<Result<_, _>>()?;
        docs.iter().map(|d| serde_json::from_str(d).context("stored episode")).collect()
    }

    /// Ends a run: status, exit code, end time, notes, peak RSS.
    pub fn finish_run(
        &mut self,
        run_id: i64,
        status: RunStatus,
        exit_code: Option<i32>,
        ended_unix_ns: i64,
        notes: &[String],
        peak_rss_kb: Option<u64>,
    ) -> Result<()> {
        let tx = self.conn.transaction()?;
        for n in notes {
            append_note(&tx, run_id, n)?;
        }
        tx.execute(
            "UPDATE runs SET status=?2, exit_code=?3, ended_unix_ns=?4, peak_rss_kb=?5 WHERE id=?1",
            params![run_id, status.as_str(), exit_code, ended_unix_ns, peak_rss_kb.map(i)],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// All runs, oldest first.
    pub fn list_runs(&self) -> Result<Vec<RunListing>> {
        let ids: Vec<i64> = {
            let mut st = self.conn.prepare("SELECT id FROM runs ORDER BY id")?;
            st.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?
        };
        let mut out = Vec::new();
        for id in ids {
            let header = self.header(id)?;
            let (series, samples): (i64, Option<i64>) = self.conn.query_row(
                "SELECT (SELECT count(*) FROM series WHERE run_id=?1),
                        (SELECT sum(i.count) FROM intervals i JOIN series s ON s.id=i.series_id WHERE s.run_id=?1)",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            out.push(RunListing { header, series: series as usize, samples: samples.unwrap_or(0) as u64 });
        }
        Ok(out)
    }

    /// Resolves `last` or a numeric id to an existing run id.
    pub fn resolve(&self, spec: &str) -> Result<i64> {
        let id = if spec == "last" {
            self.conn
                .query_row("SELECT max(id) FROM runs", [], |r| r.get::<_, Option<i64>>(0))?
                .ok_or_else(|| anyhow!("the run store {} holds no runs yet", self.path.display()))?
        } else {
            spec.parse::<i64>()
                .map_err(|_| anyhow!("RUN '{spec}' is neither a run id nor 'last' (see `rtscope runs`)"))?
        };
        let exists: bool = self
            .conn
            .query_row("SELECT count(*) FROM runs WHERE id=?1", [id], |r| r.get::<_, i64>(0))
            .map(|n| n > 0)?;
        if !exists {
            bail!("no run {id} in {} (see `rtscope runs`)", self.path.display());
        }
        Ok(id)
    }

    fn header(&self, id: i64) -> Result<RunHeader> {
        self.conn
            .query_row(
                "SELECT uuid, tool_version, command_line, kind, hostname, started_unix_ns, ended_unix_ns,
                        start_mono_ns, status, exit_code, pid, representative, warnings, notes, peak_rss_kb
                 FROM runs WHERE id=?1",
                [id],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, i64>(5)?,
                        r.get::<_, Option<i64>>(6)?,
                        r.get::<_, i64>(7)?,
                        r.get::<_, String>(8)?,
                        r.get::<_, Option<i32>>(9)?,
                        r.get::<_, i64>(10)?,
                        r.get::<_, bool>(11)?,
                        r.get::<_, String>(12)?,
                        r.get::<_, String>(13)?,
                        r.get::<_, Option<i64>>(14)?,
                    ))
                },
            )
            .optional()?
            .ok_or_else(|| anyhow!("no run {id}"))
            .and_then(|t| {
                Ok(RunHeader {
                    id,
                    uuid: t.0,
                    tool_version: t.1,
                    command_line: serde_json::from_str(&t.2)?,
                    kind: t.3,
                    hostname: t.4,
                    started_unix_ns: t.5,
                    ended_unix_ns: t.6,
                    start_mono_ns: u(t.7),
                    status: RunStatus::parse(&t.8).ok_or_else(|| anyhow!("run {id}: unknown status {}", t.8))?,
                    exit_code: t.9,
                    pid: t.10 as u32,
                    representative: t.11,
                    warnings: serde_json::from_str(&t.12)?,
                    notes: serde_json::from_str(&t.13)?,
                    peak_rss_kb: t.14.map(u),
                })
            })
    }

    /// Loads a whole run: header, inventory, plan, every series with its
    /// intervals and exceedances.
    pub fn load_run(&self, id: i64) -> Result<Run> {
        let header = self.header(id)?;
        let (inv, plan): (String, String) =
            self.conn
                .query_row("SELECT inventory, plan FROM runs WHERE id=?1", [id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let mut st = self.conn.prepare(
            "SELECT id, probe, metric, cpu, unit, exceed, extra, load FROM series WHERE run_id=?1
             ORDER BY probe, metric, cpu, load",
        )?;
        type Row = (i64, SeriesKey, String, String, Option<String>);
        let rows: Vec<Row> = st
            .query_map([id], |r| {
                Ok((
                    r.get(0)?,
                    SeriesKey { probe: r.get(1)?, metric: r.get(2)?, cpu: r.get(3)?, load: load_of(r.get(7)?) },
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            })?
            .collect::<Result<_, _>>()?;
        // Read every series' rows, then build the series (summing their
        // histograms) on every core; the first error in the series' order
        // is the one reported, as when they were read one at a time.
        let mut read = Vec::new();
        let mut unread = None;
        for (sid, key, unit, exceed, extra) in rows {
            match self.series_rows(id, sid) {
                Ok((intervals, exceedances)) => read.push((key, unit, exceed, extra, intervals, exceedances)),
                Err(e) => {
                    unread = Some(e);
                    break;
                }
            }
        }
        let built = crate::par::map_into(read, |(key, unit, exceed, extra, intervals, exceedances)| {
            let what = format!("run {id}, {}", key.describe());
            (Series::new(key, unit, exceed, intervals, exceedances), extra, what)
        });
        let mut series = Vec::new();
        for (s, extra, what) in built {
            let mut s = s.map_err(|e| anyhow!("{what}: {e}"))?;
            if let Some(text) = extra {
                s.extra = serde_json::from_str(&text).with_context(|| format!("{what}: stored extra figures"))?;
            }
            series.push(s);
        }
        if let Some(e) = unread {
            return Err(e);
        }
        let trace =
            self.run_data(id, "trace")?.map(serde_json::from_value).transpose().context("stored trace summary")?;
        let characterisation = self
            .run_data(id, "characterisation")?
            .map(serde_json::from_value)
            .transpose()
            .context("stored characterisation")?
            .unwrap_or_default();
        let cpu_score =
            self.run_data(id, "cpu_score")?.map(serde_json::from_value).transpose().context("stored CPU score")?;
        Ok(Run {
            header,
            inventory: serde_json::from_str(&inv).context("stored inventory")?,
            plan: serde_json::from_str(&plan).context("stored plan")?,
            series,
            episodes: self.episodes(id)?,
            trace,
            characterisation,
            cpu_score,
        })
    }

    /// A stored series' intervals and exceedances, in order.
    fn series_rows(&self, id: i64, sid: i64) -> Result<(Vec<Interval>, Vec<Exceedance>)> {
        let intervals = load_intervals(&self.conn, id, sid, i64::MAX)?;
        let mut est =
            self.conn.prepare_cached("SELECT t_ns, value_ns FROM exceedances WHERE series_id=?1 ORDER BY t_ns")?;
        let exceedances = est
            .query_map([sid], |r| Ok(Exceedance { t_ns: u(r.get(0)?), value_ns: u(r.get(1)?) }))?
            .collect::<Result<_, _>>()?;
        Ok((intervals, exceedances))
    }

    /// Inserts a whole run (from `rtscope import`) with the header of
    /// [`imported_header`]; returns its new id.
    pub fn insert_run(&mut self, run: &Run) -> Result<i64> {
        let dup: Option<i64> =
            self.conn.query_row("SELECT id FROM runs WHERE uuid=?1", [&run.header.uuid], |r| r.get(0)).optional()?;
        if let Some(dup) = dup {
            bail!("run {} is already in {} as run {dup}", run.header.uuid, self.path.display());
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(dup) = run.series.iter().find(|s| !seen.insert(&s.key)) {
            bail!("run {} lists {} twice", run.header.uuid, dup.key.describe());
        }
        let header = imported_header(run);
        let tx = self.conn.transaction()?;
        let id = insert_header(&tx, &header, &run.inventory, &run.plan, None)?;
        for s in &run.series {
            let sid = insert_series(&tx, id, &s.key, &s.unit, &s.exceed)?;
            set_extra(&tx, sid, &s.extra)?;
            for iv in &s.intervals {
                insert_interval(&tx, sid, iv)?;
            }
            insert_exceedances(&tx, sid, &s.exceedances)?;
        }
        for e in &run.episodes {
            insert_episode(&tx, id, e)?;
        }
        let mut docs = Vec::new();
        if let Some(t) = &run.trace {
            docs.push(("trace", serde_json::to_string(t)?));
        }
        if !run.characterisation.is_empty() {
            docs.push(("characterisation", serde_json::to_string(&run.characterisation)?));
        }
        if let Some(c) = &run.cpu_score {
            docs.push(("cpu_score", serde_json::to_string(c)?));
        }
        for (name, doc) in docs {
            tx.execute("INSERT INTO run_data (run_id, name, doc) VALUES (?1, ?2, ?3)", params![id, name, doc])?;
        }
        tx.commit()?;
        Ok(id)
    }
}

/// Applies every step of `MIGRATIONS` above `from`, and records the version.
/// The SQLite error code under `e`, if SQLite raised it.
fn sqlite_code(e: &anyhow::Error) -> Option<ErrorCode> {
    e.chain().find_map(|c| c.downcast_ref::<rusqlite::Error>()).and_then(rusqlite::Error::sqlite_error_code)
}

/// The header an imported run is stored with: a run still measuring
/// elsewhere (or dead there) is partial here, and so is a run said to be
/// complete whose file holds no sample (a measurement always has some; a
/// `load` run has none by nature).
pub fn imported_header(run: &Run) -> RunHeader {
    let mut header = run.header.clone();
    if header.status == RunStatus::Running {
        header.status = RunStatus::Partial;
        header.notes.push("imported while its run was still going or had died: data up to its last checkpoint".into());
    }
    let samples: u64 = run.series.iter().flat_map(|s| &s.intervals).map(|i| i.stats.count).sum();
    if header.status == RunStatus::Complete && samples == 0 && header.kind != "load" {
        header.status = RunStatus::Partial;
        header.notes.push("imported without a single sample: the file holds none of the run's data".into());
    }
    header
}

/// Whether `e` says the store (or its -wal/-shm files) cannot be written.
fn unwritable(e: &anyhow::Error) -> bool {
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
fn explain(path: &Path, e: anyhow::Error) -> anyhow::Error {
    if corrupt(&e) {
        e.context(corrupt_message(path))
    } else if unwritable(&e) {
        e.context(format!("cannot write run store {} (pick a writable --db PATH)", path.display()))
    } else {
        e.context(format!("run store {} is not usable", path.display()))
    }
}

fn explain_read_only(path: &Path, e: anyhow::Error) -> anyhow::Error {
    if corrupt(&e) {
        e.context(corrupt_message(path))
    } else {
        e.context(format!("cannot read run store {} (opened read-only: this user cannot write it)", path.display()))
    }
}

/// Whether `path`'s write-ahead log holds anything.
fn wal_has_frames(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(wal).is_ok_and(|m| m.len() > 0)
}

/// `file:PATH?query` with PATH percent-encoded (SQLite's URI filenames).
fn sqlite_uri(path: &Path, query: &str) -> String {
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

fn migrate(tx: &Transaction, from: i64) -> Result<()> {
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > from) {
        tx.execute_batch(sql)?;
        tx.execute("UPDATE meta SET value=?1 WHERE key='schema_version'", [version.to_string()])?;
    }
    Ok(())
}

fn insert_header(
    tx: &Transaction,
    h: &RunHeader,
    inventory: &Inventory,
    plan: &serde_json::Value,
    process: Option<String>,
) -> Result<i64> {
    tx.execute(
        "INSERT INTO runs (uuid, kind, status, exit_code, started_unix_ns, ended_unix_ns, start_mono_ns, pid,
                           process_id, hostname, tool_version, command_line, representative, warnings, notes,
                           peak_rss_kb, inventory, plan)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
        params![
            h.uuid,
            h.kind,
            h.status.as_str(),
            h.exit_code,
            h.started_unix_ns,
            h.ended_unix_ns,
            i(h.start_mono_ns),
            h.pid,
            process,
            h.hostname,
            h.tool_version,
            serde_json::to_string(&h.command_line)?,
            h.representative,
            serde_json::to_string(&h.warnings)?,
            serde_json::to_string(&h.notes)?,
            h.peak_rss_kb.map(i),
            serde_json::to_string(inventory)?,
            serde_json::to_string(plan)?,
        ],
    )?;
    Ok(tx.last_insert_rowid())
}

fn insert_series(conn: &Connection, run_id: i64, key: &SeriesKey, unit: &str, exceed: &str) -> Result<i64> {
    conn.execute(
        "INSERT INTO series (run_id, probe, metric, cpu, unit, exceed, load) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![run_id, key.probe, key.metric, key.cpu, unit, exceed, load_col(&key.load)],
    )?;
    Ok(conn.last_insert_rowid())
}

fn set_extra(conn: &Connection, series: i64, extra: &serde_json::Map<String, serde_json::Value>) -> Result<()> {
    let text = (!extra.is_empty()).then(|| serde_json::to_string(extra)).transpose()?;
    conn.execute("UPDATE series SET extra=?2 WHERE id=?1", params![series, text])?;
    Ok(())
}

fn insert_interval(tx: &Transaction, series: i64, iv: &Interval) -> Result<()> {
    let mut st = tx.prepare_cached(
        "INSERT INTO intervals (series_id, seq, start_ns, end_ns, count, min_ns, max_ns, sum_ns, overflows,
                                overruns, lost_exceedances, hist,
                                neg_count, neg_min_ns, neg_max_ns, neg_sum_ns, neg_overflows, neg_hist)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
    )?;
    let neg = iv.neg.as_ref();
    st.execute(params![
        series,
        iv.seq,
        i(iv.start_ns),
        i(iv.end_ns),
        i(iv.stats.count),
        i(iv.stats.min),
        i(iv.stats.max),
        i(iv.stats.sum),
        i(iv.stats.overflows),
        i(iv.overruns),
        i(iv.lost_exceedances),
        iv.hdr,
        neg.map(|n| i(n.stats.count)),
        neg.map(|n| i(n.stats.min)),
        neg.map(|n| i(n.stats.max)),
        neg.map(|n| i(n.stats.sum)),
        neg.map(|n| i(n.stats.overflows)),
        neg.map(|n| &n.hdr),
    ])?;
    Ok(())
}

fn insert_episode(tx: &Transaction, run: i64, e: &Episode) -> Result<()> {
    tx.execute(
        "INSERT OR REPLACE INTO episodes (run_id, probe, metric, cpu, sample, woke_ns, latency_ns, verdict, doc, load)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            run,
            e.probe,
            e.metric,
            e.cpu,
            i(e.sample),
            i(e.woke_ns),
            i(e.latency_ns),
            e.verdict,
            serde_json::to_string(e)?,
            load_col(&e.load),
        ],
    )?;
    Ok(())
}

/// The intervals of series `sid` (of run `id`) that end at or before
/// `end_at_most` (CLOCK_MONOTONIC ns), in order.
fn load_intervals(conn: &Connection, id: i64, sid: i64, end_at_most: i64) -> Result<Vec<Interval>> {
    let mut ist = conn.prepare_cached(
        "SELECT seq, start_ns, end_ns, count, min_ns, max_ns, sum_ns, overflows, overruns, lost_exceedances, hist,
                neg_count, neg_min_ns, neg_max_ns, neg_sum_ns, neg_overflows, neg_hist
         FROM intervals WHERE series_id=?1 AND end_ns<=?2 ORDER BY seq",
    )?;
    let intervals = ist
        .query_map([sid, end_at_most], |r| {
            Ok((
                r.get::<_, u32>(0)?,
                [
                    r.get::<_, i64>(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                    r.get(9)?,
                ],
                r.get::<_, Vec<u8>>(10)?,
                [r.get::<_, Option<i64>>(11)?, r.get(12)?, r.get(13)?, r.get(14)?, r.get(15)?],
                r.get::<_, Option<Vec<u8>>>(16)?,
            ))
        })?
        .map(|row| {
            let (seq, n, blob, neg, neg_blob) = row?;
            let neg = match (neg, neg_blob) {
                ([Some(count), Some(min), Some(max), Some(sum), Some(overflows)], Some(hdr)) => Some(NegHalf {
                    stats: hist::Stats {
                        count: u(count),
                        min: u(min),
                        max: u(max),
                        sum: u(sum),
                        overflows: u(overflows),
                    },
                    hdr,
                }),
                ([None, None, None, None, None], None) => None,
                _ => bail!("run {id}: interval {seq} has a partial negative half"),
            };
            Ok(Interval {
                seq,
                start_ns: u(n[0]),
                end_ns: u(n[1]),
                stats: hist::Stats { count: u(n[2]), min: u(n[3]), max: u(n[4]), sum: u(n[5]), overflows: u(n[6]) },
                overruns: u(n[7]),
                lost_exceedances: u(n[8]),
                hdr: blob,
                neg,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(intervals)
}

fn insert_exceedances(tx: &Transaction, series: i64, list: &[Exceedance]) -> Result<()> {
    let mut st = tx.prepare_cached("INSERT INTO exceedances (series_id, t_ns, value_ns) VALUES (?1, ?2, ?3)")?;
    for e in list {
        st.execute(params![series, i(e.t_ns), i(e.value_ns)])?;
    }
    Ok(())
}

fn append_note(tx: &Transaction, run: i64, note: &str) -> Result<()> {
    let notes: String = tx.query_row("SELECT notes FROM runs WHERE id=?1", [run], |r| r.get(0))?;
    let mut list: Vec<String> = serde_json::from_str(&notes)?;
    list.push(note.to_string());
    tx.execute("UPDATE runs SET notes=?2 WHERE id=?1", params![run, serde_json::to_string(&list)?])?;
    Ok(())
}

/// Who a process is, beyond its pid (which the kernel reuses): the boot id
/// and the process's start time in clock ticks since boot.
pub fn process_identity(pid: u32) -> Option<String> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 (starttime) counts from after the ")" that closes the name.
    let after = &stat[stat.rfind(')')? + 1..];
    let start = after.split_whitespace().nth(19)?;
    Some(format!("{}:{start}", boot.trim()))
}

/// A small run with two CPUs, three intervals each and overflows, for tests.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;
    use crate::hist::Tally;

    pub(crate) fn sample_run() -> Run {
        let mut series = Vec::new();
        for cpu in 0..2 {
            let mut intervals = Vec::new();
            for seq in 0..3u32 {
                let mut t = Tally::new();
                for v in 0..1000u64 {
                    t.record(2_000 + v * 7 + u64::from(seq) * 13 + cpu as u64);
                }
                t.record(150_000_000_000);
                intervals.push(Interval::new(
                    seq,
                    1_000 + u64::from(seq) * 10_000_000_000,
                    1_000 + u64::from(seq + 1) * 10_000_000_000,
                    &t,
                    u64::from(seq),
                    0,
                ));
            }
            let key = SeriesKey::new("wakeup", "latency", cpu);
            let exceedances =
                vec![Exceedance { t_ns: 5_000, value_ns: 9_000 }, Exceedance { t_ns: 7_000, value_ns: 8_990 }];
            series.push(Series::new(key, "ns".into(), "adaptive".into(), intervals, exceedances).unwrap());
        }
        Run {
            header: RunHeader {
                id: 0,
                uuid: format!("test-{}-{}", std::process::id(), series.len()),
                tool_version: "0.1.0".into(),
                command_line: vec!["rtscope".into(), "wakeup".into()],
                kind: "wakeup".into(),
                hostname: "box".into(),
                started_unix_ns: 1_700_000_000_000_000_000,
                ended_unix_ns: Some(1_700_000_030_000_000_000),
                start_mono_ns: 1_000,
                status: RunStatus::Complete,
                exit_code: Some(0),
                pid: 1,
                representative: true,
                warnings: vec![],
                notes: vec!["a note".into()],
                peak_rss_kb: Some(4096),
            },
            inventory: Inventory::default(),
            plan: serde_json::json!({"interval_ns": 1_000_000}),
            series,
            episodes: vec![crate::episode::tests::sample_episode()],
            trace: Some(crate::episode::TraceSummary {
                instance: "rtscope-1".into(),
                clock: "mono".into(),
                per_cpu: vec![crate::episode::TraceCpu { cpu: 1, events: 10, lost: 2, ..Default::default() }],
                ..Default::default()
            }),
            characterisation: vec![],
            cpu_score: None,
        }
    }

    /// A run with a signed series (negative values included) and extra
    /// figures beside an unsigned one.
    pub(crate) fn signed_run() -> Run {
        let mut run = sample_run();
        run.header.uuid.push_str("-signed");
        let mut intervals = Vec::new();
        for seq in 0..2u32 {
            let mut t = Tally::new_signed();
            for v in -500..1500i64 {
                t.record_signed(v * 11 + i64::from(seq));
            }
            intervals.push(Interval::new(seq, u64::from(seq) * 100, u64::from(seq + 1) * 100, &t, 0, 0));
        }
        let key = SeriesKey::new("sleep", "nanosleep@5ms", 1);
        let mut s = Series::new(key, "ns".into(), "adaptive".into(), intervals, vec![]).unwrap();
        s.extra.insert("timer_slack_ns".into(), 50_000.into());
        // The store lists series by probe, metric and CPU.
        run.series.insert(0, s);
        run
    }

    /// An assessment: the sample run's series under two loads, their
    /// characterisation and a CPU score.
    pub(crate) fn matrix_run() -> Run {
        use crate::characterisation::{Accumulator, CpuScore};
        let mut run = sample_run();
        run.header.uuid.push_str("-matrix");
        run.header.kind = "run".into();
        let mut series = Vec::new();
        for load in ["cpu", "idle"] {
            for s in &run.series {
                let mut s = s.clone();
                s.key.load = Some(load.into());
                series.push(s);
            }
        }
        // The store lists them by probe, metric, CPU, then load.
        series.sort_by(|a, b| a.key.cmp(&b.key));
        run.series = series;
        for e in &mut run.episodes {
            e.load = Some("cpu".into());
        }
        run.characterisation = ["idle", "cpu"].iter().map(|l| Accumulator::new(l, &[0, 1]).finish()).collect();
        run.cpu_score = Some(CpuScore {
            score: 41_000,
            method: "test".into(),
            version: 1,
            cpu: 0,
            slices: 10,
            slice_ms: 200,
            min: 40_000,
            max: 42_000,
        });
        run
    }
}

#[path = "store_retention.rs"]
mod retention;
pub use retention::Summarised;

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
