//! A run's figures at one moment ([`StatsSnapshot`]), as `load::stats` copies them out: what
//! thresholds evaluate (k6's metric names, sub-metrics included), the summaries print and the
//! progress line shows. Plain data: no atomics.

use super::iteration::{IterationResult, StepFailure};
use super::pacing::DropReason;
use super::subs::{SubSnapshot, SubValue};
use crate::hist::HistSnapshot;
use crate::http::{ErrorClass, Phase};
use crate::thresholds::{CounterValue, MetricSource, RateValue, Trend};
use std::time::Duration;

/// A consistent-enough copy of a run's figures at one moment.
#[derive(Debug, Clone)]
pub struct StatsSnapshot {
    /// What per-second figures divide by (see [`super::stats::rate_window`] for a finished run).
    pub elapsed: Duration,
    pub duration: HistSnapshot,
    pub corrected: HistSnapshot,
    pub phases: [HistSnapshot; 7],
    pub iteration_duration: HistSnapshot,
    /// k6's `group_duration`: every journey's and every step's groups together.
    pub group_duration: HistSnapshot,
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
    /// The lowest and highest busy-VU count since the first VU started (k6's `vus` min, max).
    pub vus_low: u32,
    pub vus_high: u32,
    pub vus_max: u32,
    /// The sub-metrics recorded, `http_req_duration{expected_response:true}` first.
    pub subs: Vec<SubSnapshot>,
    /// Per step (one, named `request`, for a single-request profile).
    pub steps: Vec<StepSnapshot>,
    /// Per journey; empty for a single-request profile.
    pub journeys: Vec<JourneySnapshot>,
}

impl StatsSnapshot {
    pub fn sub(&self, key: &str) -> Option<&SubSnapshot> {
        self.subs.iter().find(|s| s.key == key)
    }

    /// The total passes and fails over every check.
    pub fn checks_total(&self) -> (u64, u64) {
        self.checks
            .iter()
            .fold((0, 0), |(p, f), (_, cp, cf)| (p + cp, f + cf))
    }

    pub fn per_second(&self, n: u64) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 { n as f64 / secs } else { 0.0 }
    }

    pub fn dropped_by(&self, reason: DropReason) -> u64 {
        self.dropped_by[reason as usize]
    }

    /// `http_req_failed` as (failed, total): the requests that failed, and the arrivals turned
    /// away because every VU was waiting on the target (`saturated`), which failed too.
    pub fn failed_with_saturated(&self) -> (u64, u64) {
        let saturated = self.dropped_by(DropReason::Saturated);
        (self.failed + saturated, self.requests + saturated)
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

impl StatsSnapshot {
    fn base_trend(&self, metric: &str) -> Option<&HistSnapshot> {
        Some(match metric {
            "http_req_duration" => &self.duration,
            "http_req_corrected_duration" => &self.corrected,
            "iteration_duration" => &self.iteration_duration,
            "group_duration" => &self.group_duration,
            other => {
                let phase = other.strip_prefix("http_req_")?;
                Phase::ALL
                    .iter()
                    .find(|p| p.as_str() == phase)
                    .map(|p| &self.phases[*p as usize])?
            }
        })
    }

    fn base_rate(&self, metric: &str) -> Option<RateValue> {
        match metric {
            "http_req_failed" => {
                let (hits, total) = self.failed_with_saturated();
                Some(RateValue { hits, total })
            }
            "checks" => {
                let (p, f) = self.checks_total();
                Some(RateValue {
                    hits: p,
                    total: p + f,
                })
            }
            _ => None,
        }
    }

    fn base_count(&self, metric: &str) -> Option<u64> {
        Some(match metric {
            "http_reqs" => self.requests,
            "iterations" => self.iterations,
            "dropped_iterations" => self.dropped,
            "data_sent" => self.data_sent,
            "data_received" => self.data_received,
            _ => return None,
        })
    }

    /// A trend by k6 name, sub-metrics included.
    pub fn trend_of(&self, metric: &str) -> Option<&HistSnapshot> {
        match self.sub(metric).map(|s| (&s.value, s.metric.base)) {
            Some((SubValue::Trend(h), _)) => Some(h),
            Some((SubValue::Whole, base)) => self.base_trend(base),
            Some(_) => None,
            None => self.base_trend(metric),
        }
    }

    pub fn rate_of(&self, metric: &str) -> Option<RateValue> {
        match self.sub(metric).map(|s| (&s.value, s.metric.base)) {
            Some((SubValue::Rate(r), _)) => Some(*r),
            Some((SubValue::Whole, base)) => self.base_rate(base),
            Some(_) => None,
            None => self.base_rate(metric),
        }
    }

    pub fn count_of(&self, metric: &str) -> Option<u64> {
        match self.sub(metric).map(|s| (&s.value, s.metric.base)) {
            Some((SubValue::Counter(n), _)) => Some(*n),
            Some((SubValue::Whole, base)) => self.base_count(base),
            Some(_) => Some(0),
            None => self.base_count(metric),
        }
    }
}

impl MetricSource for StatsSnapshot {
    fn trend(&self, metric: &str) -> Option<&dyn Trend> {
        self.trend_of(metric).map(|h| h as &dyn Trend)
    }

    fn rate(&self, metric: &str) -> Option<RateValue> {
        self.rate_of(metric)
    }

    fn counter(&self, metric: &str) -> Option<CounterValue> {
        let count = self.count_of(metric)?;
        Some(CounterValue {
            count: count as f64,
            per_second: self.per_second(count),
        })
    }

    fn gauge(&self, metric: &str) -> Option<f64> {
        match metric {
            "vus" => Some(f64::from(self.vus)),
            "vus_max" => Some(f64::from(self.vus_max)),
            _ => None,
        }
    }
}

/// One step of a snapshot.
#[derive(Debug, Clone)]
pub struct StepSnapshot {
    /// This step's checks: (name, passes, fails).
    pub checks: Vec<(String, u64, u64)>,
    pub journey: Option<String>,
    pub name: String,
    pub requests: u64,
    /// Requests k6 counts in `http_req_failed`.
    pub failed: u64,
    /// k6's `http_req_duration` of this step's requests.
    pub duration: HistSnapshot,
    /// k6's `group_duration` of the step's group.
    pub group_duration: HistSnapshot,
    /// Failed steps by `StepFailure as usize`.
    pub failures: [u64; StepFailure::ALL.len()],
}

/// One journey of a snapshot: its iterations by result and their duration.
#[derive(Debug, Clone)]
pub struct JourneySnapshot {
    pub name: String,
    /// By `IterationResult as usize`.
    pub results: [u64; IterationResult::ALL.len()],
    pub duration: HistSnapshot,
}
