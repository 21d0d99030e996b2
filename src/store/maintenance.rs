//! Maintenance windows opened through the admin API, schema version 3: one row per open
//! window, written when it opens and deleted when it is closed; a window past its end is
//! pruned when the windows are read back at start-up.

use rusqlite::params;

use super::*;

/// One window as stored: its id, the SLOs it covers (empty: every SLO), `[start, end)` in unix
/// seconds and the operator's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredWindow {
    pub id: u64,
    pub slos: Vec<String>,
    pub start: i64,
    pub end: i64,
    pub reason: String,
}

impl Store {
    /// Saves a window (replacing an earlier save of the same id).
    pub fn save_window(&mut self, w: &StoredWindow) -> Result<(), StoreError> {
        let slos = serde_json::to_string(&w.slos).unwrap_or_else(|_| "[]".into());
        let (tx, sql) = self.write_tx()?;
        tx.execute(
            "INSERT OR REPLACE INTO maintenance (id, slos, start, end, reason)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![w.id as i64, slos, w.start, w.end, w.reason],
        )
        .map_err(sql)?;
        tx.commit().map_err(sql)
    }

    /// Deletes window `id` (closed); nothing when it is not stored.
    pub fn delete_window(&mut self, id: u64) -> Result<(), StoreError> {
        let (tx, sql) = self.write_tx()?;
        tx.execute("DELETE FROM maintenance WHERE id = ?1", [id as i64])
            .map_err(sql)?;
        tx.commit().map_err(sql)
    }

    /// Deletes the windows that ended by `now`, then returns the others in id order. A row whose
    /// SLO list does not parse (written by hand) is skipped, not fatal.
    pub fn load_windows(&mut self, now: i64) -> Result<Vec<StoredWindow>, StoreError> {
        let (tx, sql) = self.write_tx()?;
        tx.execute("DELETE FROM maintenance WHERE end <= ?1", [now])
            .map_err(sql)?;
        let rows = {
            let mut stmt = tx
                .prepare("SELECT id, slos, start, end, reason FROM maintenance ORDER BY id")
                .map_err(sql)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, String>(4)?,
                    ))
                })
                .map_err(sql)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(sql)?
        };
        tx.commit().map_err(sql)?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, slos, start, end, reason)| {
                Some(StoredWindow {
                    id: u64::try_from(id).ok()?,
                    slos: serde_json::from_str(&slos).ok()?,
                    start,
                    end,
                    reason,
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(id: u64, end: i64) -> StoredWindow {
        StoredWindow {
            id,
            slos: vec!["a".into(), "b".into()],
            start: 100,
            end,
            reason: "db upgrade".into(),
        }
    }

    #[test]
    fn windows_survive_a_reopen_until_they_end_or_are_closed() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        for w in [window(1, 1_000), window(2, 2_000), window(3, 150)] {
            store.save_window(&w).unwrap();
        }
        store.delete_window(2).unwrap();
        store.close().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        // Window 3 ended at 150: pruned.
        assert_eq!(store.load_windows(200).unwrap(), vec![window(1, 1_000)]);
        assert_eq!(store.load_windows(1_000).unwrap(), vec![]);
    }
}
