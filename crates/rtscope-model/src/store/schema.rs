//! The schema: the tables a new store starts from and the steps that bring an
//! older store up to this build's version (see docs/store.md).

use anyhow::Result;
use rusqlite::Transaction;

/// The schema this build writes. Bump it with a step in `MIGRATIONS`.
pub const SCHEMA_VERSION: i64 = 6;

pub(super) const SCHEMA: &str = "
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
pub(super) const MIGRATIONS: [(i64, &str); 5] = [
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
    (
        // 5: the sums of each half of a finished run's series (two rows
        // per series, laid out as intervals: each with the seq of the
        // half's first interval), so that a read need not inflate every
        // interval's histogram. A cache: a read checks them against the
        // intervals' statistics and folds the intervals when they differ;
        // older runs have none.
        5,
        "CREATE TABLE series_sums (
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
            neg_count        INTEGER,
            neg_min_ns       INTEGER,
            neg_max_ns       INTEGER,
            neg_sum_ns       INTEGER,
            neg_overflows    INTEGER,
            neg_hist         BLOB,
            PRIMARY KEY (series_id, seq)
        );",
    ),
    (
        // 6: the sums of contiguous runs of a series' intervals (chunks:
        // one per --summary-span of a monitor's raw intervals), laid out
        // as intervals, each with the seq of its first interval and
        // `last_seq` its last's, so that a read of a run that never
        // finishes (a monitor's) need not inflate every interval's
        // histogram. A cache, as `series_sums`: checked against the
        // intervals' statistics when read.
        6,
        "CREATE TABLE series_chunks (
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
            neg_count        INTEGER,
            neg_min_ns       INTEGER,
            neg_max_ns       INTEGER,
            neg_sum_ns       INTEGER,
            neg_overflows    INTEGER,
            neg_hist         BLOB,
            last_seq         INTEGER NOT NULL,
            PRIMARY KEY (series_id, seq)
        );",
    ),
];

/// Applies every step of `MIGRATIONS` above `from`, and records the version.
pub(super) fn migrate(tx: &Transaction, from: i64) -> Result<()> {
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > from) {
        tx.execute_batch(sql)?;
        tx.execute("UPDATE meta SET value=?1 WHERE key='schema_version'", [version.to_string()])?;
    }
    Ok(())
}
