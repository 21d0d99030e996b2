//! Maintenance windows as the budget sees them: those of the config, and those an operator
//! opens through the admin API (until a time, or until closed). While one covers an SLO, its
//! watchers count no event (the hot path reads one flag the one-second tick sets).

use crate::config::Maintenance;

/// At most this many windows opened through the API at once.
pub const MAX_ADHOC: usize = 100;

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
            let known = |name: &str| {
                inner.slos.contains_key(name)
                    || inner
                        .slos
                        .values()
                        .any(|s| s.group.as_ref().is_some_and(|g| g.parent == name))
            };
            if let Some(bad) = slos.iter().find(|s| !known(s)) {
                return Err(format!("no SLO `{bad}`"));
            }
            inner.maintenance.open(slos, now_unix, end, reason)?
        };
        self.tick(now_unix);
        Ok(id)
    }

    /// Closes a window opened through the API; false when there is none of that id.
    pub fn close_maintenance(&self, id: u64, now_unix: i64) -> bool {
        let closed = self
            .inner
            .lock()
            .map(|mut i| i.maintenance.close(id))
            .unwrap_or(false);
        if closed {
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
