//! Per-minute good/bad counts per SLO: reading, flushing deltas exactly once (a
//! [`PendingBatch`] kept until its flush commits), pruning.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::params;

use super::*;

/// SQLite integers are i64. Counts saturate at i64::MAX rather than letting SQLite silently turn an
/// overflowing sum into a lossy REAL that no longer reads back as an integer.
pub(super) const UPSERT: &str =
    "INSERT INTO slo_minutes (slo, minute, good, bad) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (slo, minute) DO UPDATE SET
        good = CASE WHEN good > 9223372036854775807 - excluded.good
                    THEN 9223372036854775807 ELSE good + excluded.good END,
        bad  = CASE WHEN bad > 9223372036854775807 - excluded.bad
                    THEN 9223372036854775807 ELSE bad + excluded.bad END";

impl Store {
    /// Rows of one SLO with `minute >= since_minute`, minutes ascending.
    pub fn load(&self, slo: &str, since_minute: i64) -> Result<MinuteCounts, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT minute, good, bad FROM slo_minutes
                 WHERE slo = ?1 AND minute >= ?2 ORDER BY minute",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(params![slo, since_minute], |r| {
                Ok((r.get(0)?, count(r, 1)?, count(r, 2)?))
            })
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.sql(e))
    }

    /// Rows of every stored SLO with `minute >= since_minute`; SLOs with no such rows are absent.
    pub fn load_all(
        &self,
        since_minute: i64,
    ) -> Result<BTreeMap<String, MinuteCounts>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT slo, minute, good, bad FROM slo_minutes
                 WHERE minute >= ?1 ORDER BY slo, minute",
            )
            .map_err(|e| self.sql(e))?;
        let mut rows = stmt.query([since_minute]).map_err(|e| self.sql(e))?;
        let mut out: BTreeMap<String, MinuteCounts> = BTreeMap::new();
        while let Some(r) = rows.next().map_err(|e| self.sql(e))? {
            let slo: String = r.get(0).map_err(|e| self.sql(e))?;
            let row =
                (|| Ok((r.get(1)?, count(r, 2)?, count(r, 3)?)))().map_err(|e| self.sql(e))?;
            out.entry(slo).or_default().push(row);
        }
        Ok(out)
    }

    /// Adds `(slo, minute, good delta, bad delta)` rows to the stored counts in one transaction.
    /// The same key may appear several times; the deltas add up.
    ///
    /// On `Err` nothing from the batch was applied: keep it and retry later (see
    /// [`PendingBatch`]). Dropping it would silently lose events.
    pub fn flush(&mut self, batch: &[(String, i64, u64, u64)]) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        self.write_deltas(batch.iter().map(|(s, m, g, b)| (s.as_str(), *m, *g, *b)))
    }

    /// Flushes `pending` and clears it only when the transaction committed; on `Err` it is left
    /// exactly as it was, ready for the next attempt. Returns the number of (slo, minute) rows
    /// written.
    pub fn flush_pending(&mut self, pending: &mut PendingBatch) -> Result<usize, StoreError> {
        if pending.is_empty() {
            return Ok(0);
        }
        self.write_deltas(pending.iter())?;
        let n = pending.len();
        pending.clear();
        Ok(n)
    }

    /// Deletes one SLO's minutes strictly before `before_minute` (retention). Returns rows deleted.
    pub fn prune(&mut self, slo: &str, before_minute: i64) -> Result<usize, StoreError> {
        self.conn
            .execute(
                "DELETE FROM slo_minutes WHERE slo = ?1 AND minute < ?2",
                params![slo, before_minute],
            )
            .map_err(|e| self.sql(e))
    }

    /// Deletes every SLO not named in `keep` (SLOs removed from the config). Returns rows deleted.
    pub fn prune_unknown(&mut self, keep: &[&str]) -> Result<usize, StoreError> {
        let keep: BTreeSet<&str> = keep.iter().copied().collect();
        let (tx, sql) = self.write_tx()?;
        let stored: Vec<String> = {
            let mut stmt = tx
                .prepare("SELECT DISTINCT slo FROM slo_minutes")
                .map_err(sql)?;
            let names = stmt.query_map([], |r| r.get(0)).map_err(sql)?;
            names.collect::<Result<_, _>>().map_err(sql)?
        };
        let mut deleted = 0;
        for slo in stored.iter().filter(|s| !keep.contains(s.as_str())) {
            deleted += tx
                .execute("DELETE FROM slo_minutes WHERE slo = ?1", [slo])
                .map_err(sql)?;
        }
        tx.commit().map_err(sql)?;
        Ok(deleted)
    }

    pub(super) fn write_deltas<'a>(
        &mut self,
        rows: impl Iterator<Item = (&'a str, i64, u64, u64)>,
    ) -> Result<(), StoreError> {
        let (tx, sql) = self.write_tx()?;
        {
            let mut stmt = tx.prepare_cached(UPSERT).map_err(sql)?;
            for (slo, minute, good, bad) in rows {
                stmt.execute(params![slo, minute, to_sql_count(good), to_sql_count(bad)])
                    .map_err(sql)?;
            }
        }
        // If COMMIT fails the transaction is rolled back when `tx` drops: all or nothing.
        tx.commit().map_err(sql)
    }
}

/// Deltas waiting to be flushed, merged by (slo, minute). The engine adds to it as events are
/// counted and calls [`Store::flush_pending`] periodically; after a failed flush the deltas stay
/// here and later additions merge into them, so memory is bounded by distinct (slo, minute) keys.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PendingBatch {
    deltas: BTreeMap<String, BTreeMap<i64, (u64, u64)>>,
    len: usize,
}

impl PendingBatch {
    pub fn new() -> PendingBatch {
        PendingBatch::default()
    }

    /// Adds deltas for one minute of one SLO, merging with any pending deltas for the same key.
    /// Zero deltas add nothing: an absent minute already reads as zero.
    pub fn add(&mut self, slo: &str, minute: i64, good: u64, bad: u64) {
        if good == 0 && bad == 0 {
            return;
        }
        // Look up by &str first so the common case (SLO already pending) allocates nothing.
        let minutes = match self.deltas.get_mut(slo) {
            Some(m) => m,
            None => self.deltas.entry(slo.to_owned()).or_default(),
        };
        let entry = minutes.entry(minute).or_insert_with(|| {
            self.len += 1;
            (0, 0)
        });
        entry.0 = entry.0.saturating_add(good);
        entry.1 = entry.1.saturating_add(bad);
    }

    /// Pending deltas for one key, if any.
    pub fn get(&self, slo: &str, minute: i64) -> Option<(u64, u64)> {
        self.deltas.get(slo)?.get(&minute).copied()
    }

    /// Number of distinct (slo, minute) keys pending.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pending `(minute, good, bad)` rows of one SLO, minutes ascending.
    pub fn rows_of(&self, slo: &str) -> MinuteCounts {
        self.deltas
            .get(slo)
            .map(|m| m.iter().map(|(k, (g, b))| (*k, *g, *b)).collect())
            .unwrap_or_default()
    }

    /// Drops every pending row of one SLO.
    pub fn remove(&mut self, slo: &str) {
        if let Some(m) = self.deltas.remove(slo) {
            self.len -= m.len();
        }
    }

    /// Drops the rows of `slo` older than `since` (minutes that left its period: the store
    /// would prune them anyway); returns the events dropped. Bounds what a store that stays
    /// unusable costs: one row per SLO per minute of its period.
    pub fn drop_before(&mut self, slo: &str, since: i64) -> u64 {
        let Some(m) = self.deltas.get_mut(slo) else {
            return 0;
        };
        let kept = m.split_off(&since);
        let old = std::mem::replace(m, kept);
        self.len -= old.len();
        if m.is_empty() {
            self.deltas.remove(slo);
        }
        old.values()
            .fold(0u64, |n, (g, b)| n.saturating_add(*g).saturating_add(*b))
    }

    /// `(SLOs, rows, good, bad)` pending.
    pub fn summary(&self) -> (usize, usize, u64, u64) {
        let (good, bad) = self.iter().fold((0u64, 0u64), |(g, b), (_, _, dg, db)| {
            (g.saturating_add(dg), b.saturating_add(db))
        });
        (self.deltas.len(), self.len, good, bad)
    }

    /// Adds every row of `other`.
    pub fn merge(&mut self, other: &PendingBatch) {
        for (slo, minute, good, bad) in other.iter() {
            self.add(slo, minute, good, bad);
        }
    }

    /// Pending rows in (slo, minute) order, in the shape [`Store::flush`] takes.
    pub fn to_batch(&self) -> Vec<(String, i64, u64, u64)> {
        self.iter()
            .map(|(s, m, g, b)| (s.to_owned(), m, g, b))
            .collect()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, i64, u64, u64)> {
        self.deltas.iter().flat_map(|(slo, minutes)| {
            minutes
                .iter()
                .map(move |(m, (g, b))| (slo.as_str(), *m, *g, *b))
        })
    }

    pub(super) fn clear(&mut self) {
        self.deltas.clear();
        self.len = 0;
    }
}

/// Reads a count column. Negative values cannot come from this code; reported rather than wrapped.
pub(super) fn count(row: &rusqlite::Row<'_>, idx: usize) -> rusqlite::Result<u64> {
    let n: i64 = row.get(idx)?;
    u64::try_from(n).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(idx, n))
}

pub(super) fn to_sql_count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
