//! Maintenance windows as the budget sees them: those of the config, and those an operator
//! opens through the admin API (until a time, or until closed). While one covers an SLO, its
//! watchers count no event (the hot path reads one flag the one-second tick sets).
//!
//! Bounds (issue 44: 100 windows of 200,000 repeated names took 1.15 GB, and listing them
//! answered 100 MB): at most [`MAX_ADHOC`] API windows, each naming configured SLOs only, each
//! once, at most [`MAX_NAMES`] of them. An API window is kept in the store, so it outlives a
//! restart; one the store could not take lives in memory and is written when the store opens.

use crate::config::Maintenance;
use crate::store::{Store, StoredWindow};
use std::collections::BTreeSet;

/// At most this many windows opened through the API at once.
pub const MAX_ADHOC: usize = 100;

/// At most this many SLO names in one window opened through the API (after repeats are
/// dropped; each must be a configured SLO or group).
pub const MAX_NAMES: usize = 1_000;

/// A name quoted in an error: cut, and escaped, so a hostile name is not echoed whole.
fn shown(name: &str) -> String {
    let cut: String = name.chars().take(64).collect();
    let more = if cut.len() < name.len() { "…" } else { "" };
    format!("{:?}{more}", cut)
}

/// The names of an API window: each once, in order, at most [`MAX_NAMES`], each known.
pub(super) fn checked_names(
    names: Vec<String>,
    known: impl Fn(&str) -> bool,
) -> Result<Vec<String>, String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for name in names {
        if seen.contains(name.as_str()) {
            continue;
        }
        if !known(&name) {
            return Err(format!("no SLO {}", shown(&name)));
        }
        if out.len() == MAX_NAMES {
            return Err(format!(
                "at most {MAX_NAMES} SLOs in one window; omit `slos` for every SLO"
            ));
        }
        seen.insert(name.clone());
        out.push(name);
    }
    Ok(out)
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Adhoc {
    pub id: u64,
    /// Empty: every SLO.
    pub slos: Vec<String>,
    pub start: i64,
    pub end: i64,
    pub reason: String,
}

/// One window as `/api/maintenance` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct View {
    pub name: String,
    /// `config` or `api`.
    pub source: &'static str,
    pub slos: Vec<String>,
    pub active: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<i64>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

#[derive(Debug, Default)]
pub struct Windows {
    pub configured: Vec<Maintenance>,
    adhoc: Vec<Adhoc>,
    next_id: u64,
}

impl Windows {
    /// Whether a window is open for `slo` at `now`.
    pub fn covers(&self, slo: &str, now: i64) -> bool {
        self.configured.iter().any(|w| w.covers(slo, now))
            || self.adhoc.iter().any(|w| {
                (w.slos.is_empty() || w.slos.iter().any(|s| s == slo))
                    && (w.start..w.end).contains(&now)
            })
    }

    /// Opens a window now until `end`; its id.
    pub fn open(
        &mut self,
        slos: Vec<String>,
        now: i64,
        end: i64,
        reason: String,
    ) -> Result<u64, String> {
        self.adhoc.retain(|w| w.end > now);
        if self.adhoc.len() >= MAX_ADHOC {
            return Err(format!("at most {MAX_ADHOC} open maintenance windows"));
        }
        self.next_id += 1;
        let id = self.next_id;
        self.adhoc.push(Adhoc {
            id,
            slos,
            start: now,
            end,
            reason,
        });
        Ok(id)
    }

    /// The open API window `id`, as the store keeps it.
    fn stored(&self, id: u64) -> Option<StoredWindow> {
        self.adhoc
            .iter()
            .find(|w| w.id == id)
            .map(|w| StoredWindow {
                id: w.id,
                slos: w.slos.clone(),
                start: w.start,
                end: w.end,
                reason: w.reason.clone(),
            })
    }

    /// Takes the windows the store kept (those not open here yet), and numbers new ones after
    /// them; what was stored past [`MAX_ADHOC`] is left out.
    fn adopt(&mut self, stored: Vec<StoredWindow>, now: i64) {
        for w in stored {
            self.next_id = self.next_id.max(w.id);
            if w.end <= now || self.adhoc.iter().any(|a| a.id == w.id) {
                continue;
            }
            if self.adhoc.len() < MAX_ADHOC {
                self.adhoc.push(Adhoc {
                    id: w.id,
                    slos: w.slos,
                    start: w.start,
                    end: w.end,
                    reason: w.reason,
                });
            }
        }
        self.adhoc.sort_by_key(|w| w.id);
    }

    /// Closes an API window; false when there is none of that id.
    pub fn close(&mut self, id: u64) -> bool {
        let before = self.adhoc.len();
        self.adhoc.retain(|w| w.id != id);
        self.adhoc.len() != before
    }

    pub fn list(&self, now: i64) -> Vec<View> {
        let mut out: Vec<View> = self
            .configured
            .iter()
            .map(|w| View {
                name: w.name.clone(),
                source: "config",
                slos: w.slos.clone(),
                active: w.active_at(now),
                id: None,
                end: None,
                reason: String::new(),
            })
            .collect();
        out.extend(self.adhoc.iter().filter(|w| w.end > now).map(|w| View {
            name: format!("api-{}", w.id),
            source: "api",
            slos: w.slos.clone(),
            active: (w.start..w.end).contains(&now),
            id: Some(w.id),
            end: Some(w.end),
            reason: w.reason.clone(),
        }));
        out
    }
}

impl super::Budget {
    /// Opens a maintenance window now for `slos` (every SLO when empty) until `end`; its id.
    /// It takes effect at once (the next tick is this call's).
    pub fn open_maintenance(
        &self,
        slos: Vec<String>,
        now_unix: i64,
        end: i64,
        reason: String,
    ) -> Result<u64, String> {
        let id = {
            let mut inner = self
                .inner
                .lock()
                .map_err(|_| "the SLO state is poisoned".to_string())?;
            // A grouped SLO's name (its parent) covers all its groups.
            let parents: BTreeSet<&str> = inner
                .slos
                .values()
                .filter_map(|s| s.group.as_ref().map(|g| g.parent.as_str()))
                .collect();
            let known = |name: &str| inner.slos.contains_key(name) || parents.contains(name);
            let slos = checked_names(slos, known)?;
            let id = inner.maintenance.open(slos, now_unix, end, reason)?;
            (id, inner.maintenance.stored(id))
        };
        let (id, stored) = id;
        if let Some(w) = stored {
            match self.with_store(|st| st.save_window(&w)) {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    tracing::warn!(id, error = %e, "cannot keep the maintenance window in the store: a restart would end it")
                }
                None => {
                    tracing::warn!(
                        id,
                        "the SLO store is not open: the maintenance window is kept in memory until it is"
                    )
                }
            }
        }
        self.tick(now_unix);
        Ok(id)
    }

    /// Reads back the API windows the store kept (pruning those that ended) and writes those
    /// only held in memory: at start-up, and when a store that was not usable opens.
    pub(super) fn sync_maintenance(&self, st: &mut Store, now_unix: i64) {
        let stored = match st.load_windows(now_unix) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the maintenance windows from the store");
                return;
            }
        };
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let held: Vec<StoredWindow> = inner
            .maintenance
            .adhoc
            .iter()
            .filter(|a| stored.iter().all(|s| s.id != a.id))
            .filter_map(|a| inner.maintenance.stored(a.id))
            .collect();
        inner.maintenance.adopt(stored, now_unix);
        drop(inner);
        for w in held {
            if let Err(e) = st.save_window(&w) {
                tracing::warn!(id = w.id, error = %e, "cannot keep the maintenance window in the store");
            }
        }
    }

    /// Closes a window opened through the API; false when there is none of that id.
    pub fn close_maintenance(&self, id: u64, now_unix: i64) -> bool {
        let closed = self
            .inner
            .lock()
            .map(|mut i| i.maintenance.close(id))
            .unwrap_or(false);
        if closed {
            if let Some(Err(e)) = self.with_store(|st| st.delete_window(id)) {
                tracing::warn!(id, error = %e, "cannot remove the closed maintenance window from the store");
            }
            self.tick(now_unix);
        }
        closed
    }

    /// The configured and open windows, each with whether it is active.
    pub fn maintenance(&self, now_unix: i64) -> Vec<View> {
        self.inner
            .lock()
            .map(|i| i.maintenance.list(now_unix))
            .unwrap_or_default()
    }

    /// Whether a maintenance window covers `slo` now.
    pub fn in_maintenance(&self, slo: &str) -> bool {
        self.inner
            .lock()
            .ok()
            .and_then(|i| i.slos.get(slo).map(|s| s.events.paused()))
            .unwrap_or(false)
    }
}
