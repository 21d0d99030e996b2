//! What one run records: lock-free counters and fixed-memory histograms, written by every VU
//! task without a lock, and read as a [`StatsSnapshot`] for thresholds, summaries and progress.
//! Memory is fixed per run whatever its length: nothing here stores a sample.

use super::hist::{HistSnapshot, Histogram};
use super::observe::Observer;
use super::pacing::DropReason;
use crate::checks::{Check, CheckKind};
use crate::http::{ErrorClass, Outcome, Phase};
use crate::thresholds::{CounterValue, MetricSource, RateValue, Trend};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Status codes are counted in a flat array indexed by code; 0 holds "no response".
const STATUS_SLOTS: usize = 600;

pub struct RunStats {
    pub duration: Histogram,
    pub phases: [Histogram; 7],
    pub iteration_duration: Histogram,
    /// How late arrival-rate iterations started against their intended time.
    pub lateness: Histogram,
    pub requests: AtomicU64,
    pub failed: AtomicU64,
    statuses: Box<[AtomicU64]>,
    errors: [AtomicU64; ErrorClass::ALL.len()],
    check_names: Vec<String>,
    checks: Vec<(AtomicU64, AtomicU64)>,
    /// Statuses that count as success for `http_req_failed` (k6: 200-399 unless a status check
    /// says otherwise).
    expected: Vec<(u16, u16)>,
    pub data_sent: AtomicU64,
    pub data_received: AtomicU64,
    pub iterations: AtomicU64,
    pub dropped: AtomicU64,
    /// Dropped iterations by `DropReason as usize`.
    dropped_by: [AtomicU64; DropReason::ALL.len()],
    pub vus: AtomicU32,
    pub vus_max: AtomicU32,
}

impl RunStats {
    pub fn new(checks: &[Check]) -> RunStats {
        let expected = checks
            .iter()
            .find_map(|c| match &c.kind {
                CheckKind::Status(r) => Some(r.clone()),
                _ => None,
            })
            .unwrap_or_else(|| vec![(200, 399)]);
        RunStats {
            duration: Histogram::new(),
            phases: std::array::from_fn(|_| Histogram::new()),
            iteration_duration: Histogram::new(),
            lateness: Histogram::new(),
            requests: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            statuses: (0..STATUS_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            errors: std::array::from_fn(|_| AtomicU64::new(0)),
            check_names: checks.iter().map(|c| c.name.clone()).collect(),
            checks: checks
                .iter()
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
            expected,
            data_sent: AtomicU64::new(0),
            data_received: AtomicU64::new(0),
            iterations: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            dropped_by: std::array::from_fn(|_| AtomicU64::new(0)),
            vus: AtomicU32::new(0),
            vus_max: AtomicU32::new(0),
        }
    }

    /// Whether k6 would count this response in `http_req_failed`.
    pub fn is_failed(&self, outcome: &Outcome) -> bool {
        match (outcome.error, outcome.status) {
            (None, Some(s)) => !self
                .expected
                .iter()
                .any(|(lo, hi)| (*lo..=*hi).contains(&s)),
            _ => true,
        }
    }

    /// Records one finished request and its check results. `lateness` is how far behind its
    /// intended start the request began (zero for closed-model executors); it is added to the
    /// reported duration so a stalled target shows in the tail (wrk2 semantics).
    fn record(&self, outcome: &Outcome, check_results: &[bool], lateness: Duration) {
        self.requests.fetch_add(1, Relaxed);
        self.iterations.fetch_add(1, Relaxed);
        self.data_sent.fetch_add(outcome.bytes_sent, Relaxed);
        self.data_received
            .fetch_add(outcome.bytes_received, Relaxed);
        let slot = outcome
            .status
            .map(|s| s as usize)
            .filter(|s| *s < STATUS_SLOTS)
            .unwrap_or(0);
        self.statuses[slot].fetch_add(1, Relaxed);
        if let Some(e) = outcome.error {
            self.errors[e as usize].fetch_add(1, Relaxed);
        }
        let failed = self.is_failed(outcome);
        if failed {
            self.failed.fetch_add(1, Relaxed);
        }
        if outcome.status.is_some() {
            self.duration.record(outcome.phases.duration() + lateness);
            for phase in Phase::ALL {
                self.phases[phase as usize].record(outcome.phases.get(phase));
            }
        }
        self.iteration_duration.record(
            outcome.phases.blocked
                + outcome.phases.dns
                + outcome.phases.connecting
                + outcome.phases.tls_handshaking
                + outcome.phases.duration()
                + lateness,
        );
        self.lateness.record(lateness);
        for (passed, (pass, fail)) in check_results.iter().zip(&self.checks) {
            if *passed {
                pass.fetch_add(1, Relaxed);
            } else {
                fail.fetch_add(1, Relaxed);
            }
        }
    }

    pub fn snapshot(&self, elapsed: Duration) -> StatsSnapshot {
        StatsSnapshot {
            elapsed,
            duration: self.duration.snapshot(),
            phases: std::array::from_fn(|i| self.phases[i].snapshot()),
            iteration_duration: self.iteration_duration.snapshot(),
            lateness: self.lateness.snapshot(),
            requests: self.requests.load(Relaxed),
            failed: self.failed.load(Relaxed),
            no_response: self.statuses[0].load(Relaxed),
            statuses: self
                .statuses
                .iter()
                .enumerate()
                .filter_map(|(code, n)| {
                    let n = n.load(Relaxed);
                    (n > 0 && code > 0).then_some((code as u16, n))
                })
                .collect(),
            errors: ErrorClass::ALL
                .iter()
                .filter_map(|e| {
                    let n = self.errors[*e as usize].load(Relaxed);
                    (n > 0).then_some((*e, n))
                })
                .collect(),
            checks: self
                .check_names
                .iter()
                .zip(&self.checks)
                .map(|(name, (p, f))| (name.clone(), p.load(Relaxed), f.load(Relaxed)))
                .collect(),
            data_sent: self.data_sent.load(Relaxed),
            data_received: self.data_received.load(Relaxed),
            iterations: self.iterations.load(Relaxed),
            dropped: self.dropped.load(Relaxed),
            dropped_by: std::array::from_fn(|i| self.dropped_by[i].load(Relaxed)),
            vus: self.vus.load(Relaxed),
            vus_max: self.vus_max.load(Relaxed),
        }
    }
}

impl Observer for RunStats {
    fn request_finished(&self, outcome: &Outcome, lateness: Duration, checks: &[bool]) {
        self.record(outcome, checks, lateness);
    }

    fn iteration_dropped(&self, reason: DropReason) {
        self.dropped.fetch_add(1, Relaxed);
        self.dropped_by[reason as usize].fetch_add(1, Relaxed);
    }

    fn vus_changed(&self, delta: i32) {
        // Two's complement: adding `-1 as u32` subtracts one.
        self.vus.fetch_add(delta as u32, Relaxed);
    }

    fn vus_allocated(&self, n: u32) {
        self.vus_max.fetch_max(n, Relaxed);
    }
}

/// A consistent-enough copy of a run's figures at one moment.
#[derive(Debug, Clone)]
pub struct StatsSnapshot {
    pub elapsed: Duration,
    pub duration: HistSnapshot,
    pub phases: [HistSnapshot; 7],
    pub iteration_duration: HistSnapshot,
    pub lateness: HistSnapshot,
    pub requests: u64,
    pub failed: u64,
    /// Requests that got no response head (status `0`); a request with a status and a body
    /// error counts under its status only.
    pub no_response: u64,
    /// (status, count) for every status seen, ascending.
    pub statuses: Vec<(u16, u64)>,
    pub errors: Vec<(ErrorClass, u64)>,
    /// (name, passes, fails) in check order.
    pub checks: Vec<(String, u64, u64)>,
    pub data_sent: u64,
    pub data_received: u64,
    pub iterations: u64,
    pub dropped: u64,
    /// Dropped iterations by `DropReason as usize`; they sum to `dropped`.
    pub dropped_by: [u64; DropReason::ALL.len()],
    pub vus: u32,
    pub vus_max: u32,
}

impl StatsSnapshot {
    pub fn per_second(&self, n: u64) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 { n as f64 / secs } else { 0.0 }
    }

    pub fn dropped_by(&self, reason: DropReason) -> u64 {
        self.dropped_by[reason as usize]
    }

    /// Iterations dropped because the generator itself fell behind (a CPU stall, an overloaded
    /// runtime): not the target's doing, never an SLO event.
    pub fn generator_overloaded(&self) -> u64 {
        DropReason::ALL
            .into_iter()
            .filter(|r| r.is_generator())
            .map(|r| self.dropped_by(r))
            .sum()
    }

    pub fn errors_total(&self) -> u64 {
        self.errors.iter().map(|(_, n)| n).sum()
    }

    /// Requests that failed because of sloburn itself (out of descriptors or ports).
    pub fn local_errors(&self) -> u64 {
        self.errors
            .iter()
            .filter(|(e, _)| e.is_local())
            .map(|(_, n)| n)
            .sum()
    }

    /// More than half of the requests failed locally: the run measured sloburn's own limits,
    /// not the target, and must not pass.
    pub fn local_errors_dominate(&self) -> bool {
        self.local_errors() > self.requests / 2
    }
}

impl MetricSource for StatsSnapshot {
    fn trend(&self, metric: &str) -> Option<&dyn Trend> {
        let h = match metric {
            "http_req_duration" => &self.duration,
            "iteration_duration" => &self.iteration_duration,
            other => {
                let phase = other.strip_prefix("http_req_")?;
                Phase::ALL
                    .iter()
                    .find(|p| p.as_str() == phase || (phase == "dns" && **p == Phase::Dns))
                    .map(|p| &self.phases[*p as usize])?
            }
        };
        Some(h)
    }

    fn rate(&self, metric: &str) -> Option<RateValue> {
        match metric {
            "http_req_failed" => Some(RateValue {
                hits: self.failed,
                total: self.requests,
            }),
            "checks" => {
                let (p, f) = self
                    .checks
                    .iter()
                    .fold((0, 0), |(p, f), (_, cp, cf)| (p + cp, f + cf));
                Some(RateValue {
                    hits: p,
                    total: p + f,
                })
            }
            _ => None,
        }
    }

    fn counter(&self, metric: &str) -> Option<CounterValue> {
        let count = match metric {
            "http_reqs" => self.requests,
            "iterations" => self.iterations,
            "dropped_iterations" => self.dropped,
            "data_sent" => self.data_sent,
            "data_received" => self.data_received,
            _ => return None,
        };
        Some(CounterValue {
            count: count as f64,
            per_second: self.per_second(count),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(stats: &RunStats, error: Option<ErrorClass>, n: usize) {
        let outcome = Outcome {
            status: error.is_none().then_some(200),
            error,
            ..Outcome::default()
        };
        for _ in 0..n {
            stats.request_finished(&outcome, Duration::ZERO, &[]);
        }
    }

    #[test]
    fn local_errors_dominate_past_half_of_the_requests() {
        let stats = RunStats::new(&[]);
        assert!(!stats.snapshot(Duration::ZERO).local_errors_dominate());
        record(&stats, None, 5);
        record(&stats, Some(ErrorClass::LocalFdExhausted), 3);
        record(&stats, Some(ErrorClass::LocalPortsExhausted), 2);
        record(&stats, Some(ErrorClass::Reset), 10);
        let s = stats.snapshot(Duration::ZERO);
        assert_eq!(s.local_errors(), 5);
        assert!(!s.local_errors_dominate(), "5 of 20");
        record(&stats, Some(ErrorClass::LocalFdExhausted), 11);
        assert!(
            stats.snapshot(Duration::ZERO).local_errors_dominate(),
            "16 of 31"
        );
    }
}
