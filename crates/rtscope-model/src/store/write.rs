//! Writing runs: a run as it is measured (header, series, checkpoints,
//! episodes, documents, its end) and a whole imported run.

use super::{EpisodeKey, Store, i, load_col};
use crate::episode::Episode;
use crate::inventory::{Inventory, Warning};
use crate::run::{Exceedance, Interval, Run, RunHeader, RunStatus, SeriesKey};
use anyhow::{Result, bail};
use rusqlite::{Connection, OptionalExtension, Transaction, params};

impl Store {
    /// Inserts a new run (status from `header`) and returns its id.
    pub fn create_run(&mut self, header: &RunHeader, inventory: &Inventory, plan: &serde_json::Value) -> Result<i64> {
        let done = (|| {
            let tx = self.write()?;
            let id = insert_header(&tx, header, inventory, plan, process_identity(header.pid))?;
            tx.commit()?;
            Ok(id)
        })();
        self.said(done)
    }

    /// `done`, a write's outcome, with what its failure means ([`super::fault`]:
    /// a full disk named, SQLite's codes in words).
    fn said<T>(&self, done: Result<T>) -> Result<T> {
        done.map_err(|e| match super::fault(&self.path, &e) {
            Some(m) => e.context(m),
            None => e,
        })
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
        let done = (|| {
            let tx = self.write()?;
            for (series, iv) in intervals {
                insert_interval(&tx, *series, iv)?;
            }
            for (series, list) in exceedances {
                insert_exceedances(&tx, *series, list)?;
            }
            tx.commit()?;
            Ok(())
        })();
        self.said(done)
    }

    /// Keeps new cause episodes and drops those pushed out of the worst-N
    /// (`(probe, metric, cpu, sample)`), atomically.
    pub fn store_episodes(&mut self, run_id: i64, keep: &[Episode], drop: &[EpisodeKey]) -> Result<()> {
        let tx = self.write()?;
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

    /// Ends a run: status, exit code, end time, notes, the warnings learnt
    /// at its end, peak RSS.
    #[allow(clippy::too_many_arguments)]
    pub fn finish_run(
        &mut self,
        run_id: i64,
        status: RunStatus,
        exit_code: Option<i32>,
        ended_unix_ns: i64,
        notes: &[String],
        warnings: &[Warning],
        peak_rss_kb: Option<u64>,
    ) -> Result<()> {
        let done = (|| {
            let tx = self.write()?;
            for n in notes {
                append_note(&tx, run_id, n)?;
            }
            for w in warnings {
                append_warning(&tx, run_id, w)?;
            }
            tx.execute(
                "UPDATE runs SET status=?2, exit_code=?3, ended_unix_ns=?4, peak_rss_kb=?5 WHERE id=?1",
                params![run_id, status.as_str(), exit_code, ended_unix_ns, peak_rss_kb.map(i)],
            )?;
            tx.commit()?;
            Ok(())
        })();
        self.said(done)
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
        let tx = self.write()?;
        let id = insert_header(&tx, &header, &run.inventory, &run.plan, None)?;
        for s in &run.series {
            let sid = insert_series(&tx, id, &s.key, &s.unit, &s.exceed)?;
            set_extra(&tx, sid, &s.extra)?;
            for iv in &s.intervals {
                insert_interval(&tx, sid, iv)?;
            }
            for half in s.halves().and_then(|h| h.as_intervals(&s.intervals)).iter().flatten() {
                insert_interval_into(&tx, "series_sums", sid, half)?;
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

pub(super) fn insert_header(
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

pub(super) fn insert_series(conn: &Connection, run_id: i64, key: &SeriesKey, unit: &str, exceed: &str) -> Result<i64> {
    conn.execute(
        "INSERT INTO series (run_id, probe, metric, cpu, unit, exceed, load) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![run_id, key.probe, key.metric, key.cpu, unit, exceed, load_col(&key.load)],
    )?;
    Ok(conn.last_insert_rowid())
}

pub(super) fn set_extra(
    conn: &Connection,
    series: i64,
    extra: &serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    let text = (!extra.is_empty()).then(|| serde_json::to_string(extra)).transpose()?;
    conn.execute("UPDATE series SET extra=?2 WHERE id=?1", params![series, text])?;
    Ok(())
}

pub(super) fn insert_interval(tx: &Transaction, series: i64, iv: &Interval) -> Result<()> {
    insert_interval_into(tx, "intervals", series, iv)
}

/// Inserts `iv` of `series` into `table`: `intervals`, or `series_sums`
/// (a half of a series, laid out as an interval).
pub(super) fn insert_interval_into(tx: &Transaction, table: &str, series: i64, iv: &Interval) -> Result<()> {
    insert_row(tx, table, series, iv, None)
}

/// Inserts the chunk `iv` of `series` (the sum of its intervals from
/// `iv.seq` to `last_seq`) into `series_chunks`.
pub(super) fn insert_chunk(tx: &Transaction, series: i64, iv: &Interval, last_seq: u32) -> Result<()> {
    insert_row(tx, "series_chunks", series, iv, Some(last_seq))
}

/// Inserts `iv` of `series` into `table`, with `last_seq` where given.
fn insert_row(tx: &Transaction, table: &str, series: i64, iv: &Interval, last_seq: Option<u32>) -> Result<()> {
    let (column, value) = if last_seq.is_some() { (", last_seq", ", ?19") } else { ("", "") };
    let mut st = tx.prepare_cached(&format!(
        "INSERT INTO {table} (series_id, seq, start_ns, end_ns, count, min_ns, max_ns, sum_ns, overflows,
                                overruns, lost_exceedances, hist,
                                neg_count, neg_min_ns, neg_max_ns, neg_sum_ns, neg_overflows, neg_hist{column})
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18{value})"
    ))?;
    let neg = iv.neg.as_ref();
    let values: [&dyn rusqlite::ToSql; 19] = [
        &series,
        &iv.seq,
        &i(iv.start_ns),
        &i(iv.end_ns),
        &i(iv.stats.count),
        &i(iv.stats.min),
        &i(iv.stats.max),
        &i(iv.stats.sum),
        &i(iv.stats.overflows),
        &i(iv.overruns),
        &i(iv.lost_exceedances),
        &iv.hdr,
        &neg.map(|n| i(n.stats.count)),
        &neg.map(|n| i(n.stats.min)),
        &neg.map(|n| i(n.stats.max)),
        &neg.map(|n| i(n.stats.sum)),
        &neg.map(|n| i(n.stats.overflows)),
        &neg.map(|n| &n.hdr),
        &last_seq,
    ];
    st.execute(&values[..if last_seq.is_some() { 19 } else { 18 }])?;
    Ok(())
}

pub(super) fn insert_episode(tx: &Transaction, run: i64, e: &Episode) -> Result<()> {
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

pub(super) fn insert_exceedances(tx: &Transaction, series: i64, list: &[Exceedance]) -> Result<()> {
    let mut st = tx.prepare_cached("INSERT INTO exceedances (series_id, t_ns, value_ns) VALUES (?1, ?2, ?3)")?;
    for e in list {
        st.execute(params![series, i(e.t_ns), i(e.value_ns)])?;
    }
    Ok(())
}

/// Adds `warning` to the run's warnings (one learnt at its end).
pub(super) fn append_warning(tx: &Transaction, run: i64, warning: &Warning) -> Result<()> {
    let text: String = tx.query_row("SELECT warnings FROM runs WHERE id=?1", [run], |r| r.get(0))?;
    let mut list: Vec<Warning> = serde_json::from_str(&text)?;
    list.push(warning.clone());
    tx.execute("UPDATE runs SET warnings=?2 WHERE id=?1", params![run, serde_json::to_string(&list)?])?;
    Ok(())
}

pub(super) fn append_note(tx: &Transaction, run: i64, note: &str) -> Result<()> {
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
