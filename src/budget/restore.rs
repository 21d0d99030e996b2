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
