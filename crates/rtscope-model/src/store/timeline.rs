//! A run's timeline of its whole traced window ([`Timeline`]), stored as the
//! run's document `timeline`: each cell's added to those before it. Read
//! and written as text, not through a JSON value (a run's holds hundreds of
//! thousands of items).

use super::Store;
use crate::episode::timeline::Timeline;
use anyhow::{Context, Result};
use rusqlite::{OptionalExtension, params};

impl Store {
    /// The run's timeline, None where it has none (untraced, or stored
    /// before timelines were kept).
    pub fn timeline(&self, run_id: i64) -> Result<Option<Timeline>> {
        let doc: Option<String> = self
            .conn
            .query_row("SELECT doc FROM run_data WHERE run_id=?1 AND name='timeline'", [run_id], |r| r.get(0))
            .optional()?;
        doc.map(|d| serde_json::from_str(&d)).transpose().with_context(|| format!("stored timeline of run {run_id}"))
    }

    /// Adds a cell's timeline to the run's, under the larger of their
    /// limits.
    pub fn add_timeline(&mut self, run_id: i64, cell: Timeline) -> Result<()> {
        let all = match self.timeline(run_id)? {
            Some(mut t) => {
                t.absorb(cell);
                t
            }
            None => cell,
        };
        self.conn.execute(
            "INSERT OR REPLACE INTO run_data (run_id, name, doc) VALUES (?1, 'timeline', ?2)",
            params![run_id, serde_json::to_string(&all)?],
        )?;
        Ok(())
    }
}
