//! Generator-affected requests (issue 43): answered requests whose latency sloburn's own CPU
//! starvation explains (`starve::Starvation::judge`). Such a request stays in every count of the
//! run (requests, iterations, checks, failed rate, statuses, every histogram as measured); only
//! its latency leaves the verdicts. The run keeps the affected requests' latencies apart
//! ([`AffectedRecord`], beside the run's figures in `RunRecord::affected`) and the exact
//! extremes of every other request ([`Extremes`]), so `load::verdict` judges a latency threshold
//! on "all minus affected" without recording any request twice.
//!
//! Plain data and atomics: no clock, no I/O.

use crate::hist::HistSnapshot;
use crate::http::{Outcome, Phase};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The trends whose exact extremes are kept for the requests that were not affected, by index:
/// `http_req_duration`, `http_req_corrected_duration`, each phase (as k6 means it), and a
/// single request's `iteration_duration`.
pub const TRENDS: usize = 3 + Phase::ALL.len();
pub const DURATION: usize = 0;
pub const CORRECTED: usize = 1;
pub const ITERATION: usize = 2;
/// Phase `p` is at `PHASES + p as usize`.
pub const PHASES: usize = 3;

/// The exact smallest and largest value of each of [`TRENDS`] among the requests that were not
/// affected, recorded on the request path (a load, and a `fetch_min`/`fetch_max` only when it
/// moves an extreme).
pub struct Extremes {
    min: [AtomicU64; TRENDS],
    max: [AtomicU64; TRENDS],
}

impl Default for Extremes {
    fn default() -> Extremes {
        Extremes {
            min: std::array::from_fn(|_| AtomicU64::new(u64::MAX)),
            max: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Extremes {
    fn one(&self, i: usize, ns: u64) {
        if ns < self.min[i].load(Relaxed) {
            self.min[i].fetch_min(ns, Relaxed);
        }
        if ns > self.max[i].load(Relaxed) {
            self.max[i].fetch_max(ns, Relaxed);
        }
    }

    /// A request that was not affected, as `load::stats` records its latencies: a response's
    /// durations and phases; a single request's iteration whatever its answer.
    pub fn record(&self, outcome: &Outcome, single: bool, k6_phase: impl Fn(Phase) -> u64) {
        let total = outcome.phases.total().as_nanos() as u64;
        if outcome.status.is_some() {
            self.one(DURATION, outcome.duration().as_nanos() as u64);
            self.one(CORRECTED, total);
            for p in Phase::ALL {
                self.one(PHASES + p as usize, k6_phase(p));
            }
        }
        if single {
            self.one(ITERATION, total);
        }
    }

    /// `(min, max)` in nanoseconds per trend; `(u64::MAX, 0)` where none was recorded.
    pub fn read(&self) -> Vec<(u64, u64)> {
        (0..TRENDS)
            .map(|i| (self.min[i].load(Relaxed), self.max[i].load(Relaxed)))
            .collect()
    }
}

/// The affected requests of a run (or of several shards' merged): how many, by cause, their
/// latencies in the run's shape, and the exact extremes of the other requests. Its serde form
/// rides in `RunRecord::affected` (absent when nothing was affected: an older record reads).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AffectedRecord {
    /// Affected requests, by cause (`starve::Cause::ALL` order).
    pub by_cause: [u64; 3],
    pub duration: HistSnapshot,
    pub corrected: HistSnapshot,
    /// By `Phase as usize`.
    pub phases: Vec<HistSnapshot>,
    /// A single request's iterations (empty for journeys, whose iterations stay whole).
    pub iteration_duration: HistSnapshot,
    /// Each step's `http_req_duration`.
    pub steps: Vec<HistSnapshot>,
    /// Each trend sub-metric's, by its k6 key.
    pub subs: Vec<(String, HistSnapshot)>,
    /// The exact `(min, max)` ns of each of [`TRENDS`] among the requests not affected.
    pub clean: Vec<(u64, u64)>,
}

impl AffectedRecord {
    pub fn requests(&self) -> u64 {
        self.by_cause.iter().sum()
    }

    /// Adds another shard's (counts, histograms, the extremes of both).
    pub fn merge(&mut self, other: &AffectedRecord) {
        for (a, b) in self.by_cause.iter_mut().zip(other.by_cause) {
            *a = a.saturating_add(b);
        }
        self.duration.merge(&other.duration);
        self.corrected.merge(&other.corrected);
        self.iteration_duration.merge(&other.iteration_duration);
        merge_list(&mut self.phases, &other.phases);
        merge_list(&mut self.steps, &other.steps);
        for (key, h) in &other.subs {
            match self.subs.iter_mut().find(|(k, _)| k == key) {
                Some((_, mine)) => mine.merge(h),
                None => self.subs.push((key.clone(), h.clone())),
            }
        }
        if self.clean.len() < other.clean.len() {
            self.clean.resize(other.clean.len(), (u64::MAX, 0));
        }
        for (mine, theirs) in self.clean.iter_mut().zip(&other.clean) {
            *mine = (mine.0.min(theirs.0), mine.1.max(theirs.1));
        }
    }

    /// Whether every histogram is one a histogram could have made (a shard's, read from the
    /// wire).
    pub fn check(&self) -> Result<(), String> {
        let all = [&self.duration, &self.corrected, &self.iteration_duration]
            .into_iter()
            .chain(&self.phases)
            .chain(&self.steps)
            .chain(self.subs.iter().map(|(_, h)| h));
        for h in all {
            h.check()?;
        }
        Ok(())
    }
}

fn merge_list(mine: &mut Vec<HistSnapshot>, theirs: &[HistSnapshot]) {
    if mine.len() < theirs.len() {
        mine.resize(theirs.len(), HistSnapshot::default());
    }
    for (m, t) in mine.iter_mut().zip(theirs) {
        m.merge(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Phases;
    use std::time::Duration;

    fn ok(ms: u64) -> Outcome {
        Outcome {
            status: Some(200),
            phases: Phases {
                waiting: Duration::from_millis(ms),
                ..Phases::default()
            },
            ..Outcome::default()
        }
    }

    #[test]
    fn extremes_are_exact_and_merge_takes_both() {
        let e = Extremes::default();
        assert_eq!(e.read()[DURATION], (u64::MAX, 0));
        for ms in [7, 2, 9] {
            e.record(&ok(ms), true, |_| 0);
        }
        // No answer: only a single request's iteration.
        e.record(&Outcome::default(), true, |_| 0);
        let read = e.read();
        assert_eq!(read[DURATION], (2_000_000, 9_000_000));
        assert_eq!(read[ITERATION], (0, 9_000_000));
        let mut a = AffectedRecord {
            by_cause: [1, 0, 0],
            clean: read,
            ..AffectedRecord::default()
        };
        let b = AffectedRecord {
            by_cause: [0, 2, 1],
            clean: vec![(1_000_000, 3_000_000); TRENDS],
            ..AffectedRecord::default()
        };
        a.merge(&b);
        assert_eq!(a.requests(), 4);
        assert_eq!(a.clean[DURATION], (1_000_000, 9_000_000));
        assert!(a.check().is_ok());
    }
}
