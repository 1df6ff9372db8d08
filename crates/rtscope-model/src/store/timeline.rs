//! A run's timeline of its whole traced window ([`Timeline`]), stored as the
//! run's document `timeline`: each cell's added to those before it at its
//! end. While a cell folds, its settled spans are stored as they come
//! ([`Part`]: documents `timeline part ID` and `timeline part ID span N`),
//! and taken into `timeline` at its end: a run killed before then keeps
//! them. Read and written as text, not through a JSON value (a run's holds
//! hundreds of thousands of items).

use super::Store;
use crate::episode::timeline::{Part, Span, Timeline};
use anyhow::{Context, Result};
use rusqlite::{OptionalExtension, params};
use std::collections::BTreeMap;

/// The name of part `id`'s head, and the prefix of its spans' names.
fn head_name(id: u64) -> String {
    format!("timeline part {id}")
}

fn span_name(id: u64, index: u64) -> String {
    format!("timeline part {id} span {index}")
}

impl Store {
    /// The run's timeline: the cells' stored at their ends, with what a
    /// cell killed before its end stored of it. None where it has none
    /// (untraced, or stored before timelines were kept).
    pub fn timeline(&self, run_id: i64) -> Result<Option<Timeline>> {
        let mut all = self.ended_timeline(run_id)?;
        for t in self.timeline_parts(run_id)? {
            match &mut all {
                Some(a) => a.absorb(t),
                None => all = Some(t),
            }
        }
        Ok(all)
    }

    /// The timeline of the cells that reached their ends.
    fn ended_timeline(&self, run_id: i64) -> Result<Option<Timeline>> {
        let doc: Option<String> = self
            .conn
            .query_row("SELECT doc FROM run_data WHERE run_id=?1 AND name='timeline'", [run_id], |r| r.get(0))
            .optional()?;
        doc.map(|d| serde_json::from_str(&d)).transpose().with_context(|| format!("stored timeline of run {run_id}"))
    }

    /// The timelines of cells that stored parts and no end, each put back
    /// together.
    fn timeline_parts(&self, run_id: i64) -> Result<Vec<Timeline>> {
        let mut q =
            self.conn.prepare("SELECT name, doc FROM run_data WHERE run_id=?1 AND name LIKE 'timeline part %'")?;
        let rows = q.query_map([run_id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        let mut parts: BTreeMap<u64, (Option<Timeline>, Vec<Span>)> = BTreeMap::new();
        for row in rows {
            let (name, doc) = row?;
            let what = || format!("stored timeline part '{name}' of run {run_id}");
            let mut words = name.trim_start_matches("timeline part ").split(" span ");
            let id: u64 = words.next().unwrap_or_default().parse().with_context(what)?;
            let entry = parts.entry(id).or_default();
            match words.next() {
                None => entry.0 = Some(serde_json::from_str(&doc).with_context(what)?),
                Some(_) => entry.1.push(serde_json::from_str(&doc).with_context(what)?),
            }
        }
        Ok(parts.into_values().filter_map(|(head, spans)| Some(Timeline::from_parts(head?, spans))).collect())
    }

    /// Stores what a folding cell's timeline settled since its last part,
    /// atomically.
    pub fn add_timeline_part(&mut self, run_id: i64, part: &Part) -> Result<()> {
        let tx = self.write()?;
        for s in &part.spans {
            tx.execute(
                "INSERT OR REPLACE INTO run_data (run_id, name, doc) VALUES (?1, ?2, ?3)",
                params![run_id, span_name(part.id, s.index), serde_json::to_string(s)?],
            )?;
        }
        for &index in &part.gone {
            tx.execute("DELETE FROM run_data WHERE run_id=?1 AND name=?2", params![run_id, span_name(part.id, index)])?;
        }
        tx.execute(
            "INSERT OR REPLACE INTO run_data (run_id, name, doc) VALUES (?1, ?2, ?3)",
            params![run_id, head_name(part.id), serde_json::to_string(&part.head)?],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Adds a cell's timeline to the run's, under the larger of their
    /// limits, and lets the parts it stored meanwhile go, atomically.
    pub fn add_timeline(&mut self, run_id: i64, cell: Timeline) -> Result<()> {
        let id = cell.part_id;
        let all = match self.ended_timeline(run_id)? {
            Some(mut t) => {
                t.absorb(cell);
                t
            }
            None => cell,
        };
        let tx = self.write()?;
        tx.execute(
            "DELETE FROM run_data WHERE run_id=?1 AND (name=?2 OR name LIKE ?3)",
            params![run_id, head_name(id), format!("{} span %", head_name(id))],
        )?;
        tx.execute(
            "INSERT OR REPLACE INTO run_data (run_id, name, doc) VALUES (?1, 'timeline', ?2)",
            params![run_id, serde_json::to_string(&all)?],
        )?;
        tx.commit()?;
        Ok(())
    }
}
