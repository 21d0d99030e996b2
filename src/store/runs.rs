//! The run history: the last runs of each profile as JSON, schema version 2.

use rusqlite::params;

use super::*;

/// One saved run: its id, profile, start (unix seconds) and record (JSON the daemon wrote).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRun {
    pub id: u64,
    pub profile: String,
    pub started_at: f64,
    pub record: String,
}

impl Store {
    /// Saves one run (replacing an earlier save of the same id) and drops that profile's runs
    /// older than its newest `keep`, in one transaction.
    pub fn save_run(
        &mut self,
        run: &StoredRun,
        detail: Option<&str>,
        keep: usize,
    ) -> Result<(), StoreError> {
        let (tx, sql) = self.write_tx()?;
        tx.execute(
            "INSERT OR REPLACE INTO runs (id, profile, started_at, record, detail)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                run.id as i64,
                run.profile,
                run.started_at,
                run.record,
                detail
            ],
        )
        .map_err(sql)?;
        tx.execute(
            "DELETE FROM runs WHERE profile = ?1 AND id NOT IN
                (SELECT id FROM runs WHERE profile = ?1 ORDER BY id DESC LIMIT ?2)",
            params![run.profile, keep as i64],
        )
        .map_err(sql)?;
        tx.commit().map_err(sql)
    }

    /// The newest `per_profile` runs of every profile, newest first.
    pub fn load_runs(&self, per_profile: usize) -> Result<Vec<StoredRun>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT id, profile, started_at, record FROM runs r WHERE id IN
                    (SELECT id FROM runs WHERE profile = r.profile ORDER BY id DESC LIMIT ?1)
                 ORDER BY id DESC",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([per_profile as i64], |r| {
                Ok(StoredRun {
                    id: r.get::<_, i64>(0)?.max(0) as u64,
                    profile: r.get(1)?,
                    started_at: r.get(2)?,
                    record: r.get(3)?,
                })
            })
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.sql(e))
    }

    /// The detail saved with run `id`, if the run and a detail are stored.
    pub fn run_detail(&self, id: u64) -> Result<Option<String>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT detail FROM runs WHERE id = ?1")
            .map_err(|e| self.sql(e))?;
        let mut rows = stmt.query([id as i64]).map_err(|e| self.sql(e))?;
        match rows.next().map_err(|e| self.sql(e))? {
            Some(r) => r.get(0).map_err(|e| self.sql(e)),
            None => Ok(None),
        }
    }

    /// The largest stored run id (0 when none), so ids stay unique across restarts.
    pub fn max_run_id(&self) -> Result<u64, StoreError> {
        self.conn
            .query_row("SELECT COALESCE(MAX(id), 0) FROM runs", [], |r| {
                r.get::<_, i64>(0)
            })
            .map(|v| v.max(0) as u64)
            .map_err(|e| self.sql(e))
    }
}
