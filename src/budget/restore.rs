//! Where the start-up restore from Prometheus (`storage.restore`, `daemon::restore`) is and
//! how much of each SLO's period it covered: what `/readyz`, the log and the metrics show.

use std::collections::BTreeMap;

/// Where the start-up restore from Prometheus is (`storage.restore`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestorePhase {
    /// Querying Prometheus; `/readyz` is not ready meanwhile, for at most the timeout.
    Restoring,
    /// Every SLO's range was answered (gaps are minutes Prometheus had no data for).
    Done,
    /// Timed out or failed; the daemon serves with what it has. The reason.
    Incomplete(String),
}

/// How much of one SLO's period came back from Prometheus.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SloCoverage {
    /// Whole minutes asked for (the current minute, not yet whole, is asked for besides).
    pub planned: u64,
    /// Whole minutes Prometheus had a sample for (zero counts included).
    pub restored: u64,
    /// Minutes without one, as inclusive unix-minute runs, oldest first.
    pub gaps: Vec<(i64, i64)>,
    /// Events restored.
    pub good: u64,
    pub bad: u64,
    /// Minutes whose samples were rejected (no number, negative, implausibly many events),
    /// with why: never seeded nor stored.
    pub rejected: Vec<(i64, String)>,
}

impl SloCoverage {
    pub fn gap_minutes(&self) -> u64 {
        self.gaps
            .iter()
            .map(|(a, b)| u64::try_from(b - a + 1).unwrap_or(0))
            .sum()
    }
}

/// The restore's state and coverage, for `/readyz`, the log and the metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreStatus {
    pub phase: RestorePhase,
    /// The SLOs being restored, by name.
    pub slos: BTreeMap<String, SloCoverage>,
    /// SLOs the store already had minutes for (the store wins).
    pub from_store: Vec<String>,
}

use crate::slo;
use std::time::Duration;

impl super::Budget {
    /// The SLOs the store had no minute for when they were configured, with the span their
    /// windows hold: what `storage.restore` may seed.
    pub fn restore_candidates(&self) -> Vec<(String, Duration)> {
        let Ok(inner) = self.inner.lock() else {
            return Vec::new();
        };
        inner
            .slos
            .iter()
            .filter(|(_, s)| s.restorable)
            .map(|(n, s)| (n.clone(), s.def.span()))
            .collect()
    }

    /// The names of every configured SLO.
    pub fn slo_names(&self) -> Vec<String> {
        self.inner
            .lock()
            .map(|inner| inner.slos.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Adds restored `(minute, good, bad)` counts to an SLO's windows and to the pending batch
    /// (the next flush writes them to the store, so the next start needs no Prometheus), then
    /// re-evaluates it. Only an SLO still [`restore_candidates`](Self::restore_candidates)
    /// takes them; returns whether it did.
    pub fn seed(&self, name: &str, minutes: &[(i64, u64, u64)], now_unix: i64) -> bool {
        let now_minute = slo::minute_of(now_unix);
        let Ok(mut guard) = self.inner.lock() else {
            return false;
        };
        let inner = &mut *guard;
        let Some(s) = inner.slos.get_mut(name).filter(|s| s.restorable) else {
            return false;
        };
        for &(minute, good, bad) in minutes {
            s.windows.record(minute, good, bad);
            inner.seeded.add(name, minute, good, bad);
        }
        let report = slo::evaluate(
            &s.def,
            &s.windows,
            now_minute.max(s.windows.newest_minute().unwrap_or(now_minute)),
        );
        s.series.set_report(&report);
        s.report = Some(report);
        // Evaluated at the newest seeded minute, which may not be the tick's.
        s.evaluated = None;
        true
    }

    /// Ends seeding: no later restore may add to any SLO.
    pub fn end_restore(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.slos.values_mut().for_each(|s| s.restorable = false);
        }
    }

    pub fn set_restore(&self, status: RestoreStatus) {
        let phase = match &status.phase {
            RestorePhase::Restoring => "restoring",
            RestorePhase::Done => "done",
            RestorePhase::Incomplete(_) => "incomplete",
        };
        let coverage = status
            .slos
            .iter()
            .map(|(n, c)| (n.clone(), (c.restored, c.gap_minutes())))
            .collect();
        self.metrics.set_restore(phase, coverage);
        if let Ok(mut slot) = self.restore.lock() {
            *slot = Some(status);
        }
    }

    pub fn restore_status(&self) -> Option<RestoreStatus> {
        self.restore.lock().ok().and_then(|s| s.clone())
    }
}
