//! What one run records: lock-free counters and fixed-memory histograms, written by every VU
//! task without a lock, and read as a [`RunRecord`] for thresholds, summaries and progress.
//! Memory is fixed per run whatever its length: nothing here stores a sample.
//!
//! The k6 names mean what they mean in k6: `http_req_duration` is sending + waiting +
//! receiving, `http_req_blocked` includes the DNS lookup (shown alone as `http_req_dns`), and
//! `iteration_duration` is the iteration's own time. `http_req_corrected_duration` is the
//! latency a user saw: every phase from when the VU began the request (the connection's DNS,
//! connect and TLS included, which k6's duration leaves out), and never the generator's own
//! lateness (its scheduler or runtime falling behind), which is sloburn's, not the target's
//! (`iteration_lateness` shows it). In the open model no arrival waits for a VU: one that finds
//! every VU held by the target is a failed request (`saturated`), not a late one.
//!
//! Sub-metrics (`http_req_duration{status:200}`) live in `load::subs`; the figures a run is
//! read as, in `load::record`.

use super::classes::Classes;
use super::event::{IterationResult, Observer, SINGLE_STEP, StepFailure, StepInfo};
use super::pacing::DropReason;
use super::record::{JourneyRecord, RunRecord, StepRecord, k6_phase};
use super::series::{OnSeries, Series};
use super::subs::Subs;
use crate::checks::{Check, CheckKind};
use crate::config::spec::Executor;
use crate::hist::{HistSnapshot, Histogram};
use crate::http::{ErrorClass, Outcome, Phase};
use crate::thresholds::ThresholdSpec;
use once_cell::race::OnceBox;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// The time per-second figures divide by, as k6 does: the test's duration. A duration-based
/// executor that ran to its end ran for its planned duration, even when its last iteration
/// started (and finished) before it; an iteration executor, or a stopped run, for as long as it
/// actually ran.
pub fn rate_window(executor: &Executor, actual: Duration, stopped: bool) -> Duration {
    match executor {
        Executor::SharedIterations { .. } | Executor::PerVuIterations { .. } => actual,
        _ if stopped => actual,
        _ => actual.max(super::plan::planned_duration(executor)),
    }
}

/// Status codes are counted in an array indexed by code; 0 holds "no response".
const STATUS_SLOTS: usize = 600;
/// Codes per lazily allocated block of status counters: a run that sees only `200` holds one
/// block of 200 bytes, not 4.8 KB for every code (1,000 runs at once held 4.8 MB of zeros).
/// 25 keeps a class's common codes together (200-206, 400-404, 500-504).
const STATUS_BLOCK: usize = 25;
type StatusBlock = [AtomicU64; STATUS_BLOCK];

pub struct RunStats {
    /// k6's `http_req_duration`: sending + waiting + receiving.
    pub duration: Histogram,
    /// `http_req_corrected_duration`: every phase of the request (`Phases::total`).
    pub corrected: Histogram,
    pub phases: [Histogram; 7],
    pub iteration_duration: Histogram,
    /// How late arrival-rate iterations started against their intended time.
    pub lateness: Histogram,
    pub requests: AtomicU64,
    pub failed: AtomicU64,
    statuses: [OnceBox<StatusBlock>; STATUS_SLOTS / STATUS_BLOCK],
    classes: Classes,
    /// Requests without a status (no head arrived, or none a slot holds): apart from the
    /// slots, where 0 is a probe's or gRPC's OK.
    no_response: AtomicU64,
    errors: [AtomicU64; ErrorClass::ALL.len()],
    check_names: Vec<String>,
    checks: Vec<(AtomicU64, AtomicU64)>,
    /// Per step (`load::iteration`): statuses that count as success for `http_req_failed` (k6:
    /// 200-399 unless a status check says otherwise).
    expected: Vec<Vec<(u16, u16)>>,
    /// Per step: where its checks start in `checks`.
    check_base: Vec<usize>,
    steps: Vec<StepStats>,
    /// A journey run counts iterations when they end, not per request.
    journeys: Vec<JourneyStats>,
    pub data_sent: AtomicU64,
    pub data_received: AtomicU64,
    /// Requests timed by the kernel's transmit stamps (`Outcome::kernel_tx`).
    kernel_tx: AtomicU64,
    pub iterations: AtomicU64,
    pub dropped: AtomicU64,
    /// Dropped iterations by `DropReason as usize`.
    dropped_by: [AtomicU64; DropReason::ALL.len()],
    pub vus: AtomicU32,
    /// The lowest and highest `vus` seen since the first VU started.
    vus_low: AtomicU32,
    vus_high: AtomicU32,
    pub vus_max: AtomicU32,
    subs: Subs,
    /// Set when another observer records the latencies ([`RunStats::on_series`]): the run
    /// then records only what the series do not hold.
    series: Option<OnSeries>,
}

impl RunStats {
    /// Stats with no sub-metric but k6's `expected_response:true` duration.
    pub fn new(checks: &[Check]) -> RunStats {
        RunStats::for_run(checks, &[], "", "")
    }

    /// Stats for a run of journeys (or one request, with `journeys` empty): `steps` in
    /// `StepId` order. Also records the sub-metrics `thresholds` name; `scenario` (the
    /// profile) and each step decide the static tags.
    pub fn for_work(
        steps: &[StepInfo],
        journeys: &[String],
        thresholds: &[ThresholdSpec],
        scenario: &str,
    ) -> RunStats {
        let flat: Vec<Check> = steps.iter().flat_map(|s| s.checks.clone()).collect();
        let mut stats = RunStats::plain(&flat);
        let mut base = 0;
        stats.check_base = steps
            .iter()
            .map(|s| {
                let b = base;
                base += s.checks.len();
                b
            })
            .collect();
        stats.expected = steps.iter().map(|s| expected_statuses(&s.checks)).collect();
        stats.steps = steps
            .iter()
            .map(|s| StepStats::new(s.journey.clone(), s.name.clone()))
            .collect();
        stats.journeys = journeys
            .iter()
            .map(|j| JourneyStats::new(j.clone()))
            .collect();
        let groups: Vec<String> = stats.groups().into_iter().map(|(path, _)| path).collect();
        stats.subs = Subs::new(thresholds, scenario, steps, &groups);
        stats
    }

    /// Stats of a single-request run with `method`, recording the sub-metrics `thresholds`
    /// name.
    pub fn for_run(
        checks: &[Check],
        thresholds: &[ThresholdSpec],
        scenario: &str,
        method: &str,
    ) -> RunStats {
        let step = StepInfo {
            journey: None,
            name: SINGLE_STEP.into(),
            checks: checks.to_vec(),
            method: method.into(),
            url: String::new(),
        };
        RunStats::for_work(&[step], &[], thresholds, scenario)
    }

    /// These stats read the latencies `series` hold instead of recording them (the daemon's
    /// profile series, which its run's observer records into): each request's latencies are
    /// recorded once. Call it before the run's first request; `series` must be numbered as
    /// these stats' steps and journeys.
    pub fn on_series(mut self, series: Arc<dyn Series>) -> RunStats {
        self.series = Some(OnSeries::start(
            series,
            self.steps.len(),
            self.journeys.len(),
        ));
        self
    }

    /// k6's `http_req_duration` so far (the progress line and the dashboard read it each
    /// second).
    pub fn duration(&self) -> HistSnapshot {
        match &self.series {
            Some(s) => s.duration(),
            None => self.duration.snapshot(),
        }
    }

    /// k6's groups of the run with their `group_duration`: each journey (`::journey`), then
    /// each journey step (`::journey::step`).
    fn groups(&self) -> Vec<(String, &Histogram)> {
        let journeys = self
            .journeys
            .iter()
            .map(|j| (format!("::{}", j.name), &j.duration));
        let steps = self.steps.iter().filter_map(|s| {
            let path = format!("::{}::{}", s.journey.as_ref()?, s.name);
            Some((path, &s.group_duration))
        });
        journeys.chain(steps).collect()
    }

    /// The figures of [`Self::groups`], in its order: the journeys' from the series when
    /// these stats read them.
    fn group_snapshots(&self) -> Vec<HistSnapshot> {
        let journeys = self.journeys.iter().enumerate().map(|(j, own)| {
            self.series
                .as_ref()
                .map_or_else(|| own.duration.snapshot(), |s| s.journey(j))
        });
        let steps = self.steps.iter().filter(|s| s.journey.is_some());
        journeys
            .chain(steps.map(|s| s.group_duration.snapshot()))
            .collect()
    }

    fn plain(checks: &[Check]) -> RunStats {
        let expected = vec![expected_statuses(checks)];
        RunStats {
            duration: Histogram::new(),
            corrected: Histogram::new(),
            phases: std::array::from_fn(|_| Histogram::new()),
            iteration_duration: Histogram::new(),
            lateness: Histogram::new(),
            requests: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            statuses: std::array::from_fn(|_| OnceBox::new()),
            classes: Classes::default(),
            no_response: AtomicU64::new(0),
            errors: std::array::from_fn(|_| AtomicU64::new(0)),
            check_names: checks.iter().map(|c| c.name.clone()).collect(),
            checks: checks
                .iter()
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
            expected,
            check_base: vec![0],
            steps: vec![StepStats::new(None, SINGLE_STEP.into())],
            journeys: Vec::new(),
            data_sent: AtomicU64::new(0),
            kernel_tx: AtomicU64::new(0),
            data_received: AtomicU64::new(0),
            iterations: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            dropped_by: std::array::from_fn(|_| AtomicU64::new(0)),
            vus: AtomicU32::new(0),
            vus_low: AtomicU32::new(u32::MAX),
            vus_high: AtomicU32::new(0),
            vus_max: AtomicU32::new(0),
            subs: Subs::default(),
            series: None,
        }
    }

    /// A single-request run (no journeys): each request is its iteration.
    pub fn is_single(&self) -> bool {
        self.journeys.is_empty()
    }

    /// Whether k6 would count this response (of the first step) in `http_req_failed`.
    pub fn is_failed(&self, outcome: &Outcome) -> bool {
        self.is_failed_at(0, outcome)
    }

    /// Whether k6 would count this response of `step` in `http_req_failed`.
    pub fn is_failed_at(&self, step: usize, outcome: &Outcome) -> bool {
        let expected = self.expected.get(step).map_or(&[][..], Vec::as_slice);
        match (outcome.error, outcome.status) {
            // No status check: 2xx/3xx for HTTP, 0 for a probe.
            (None, Some(_)) if expected.is_empty() => !outcome.status_is_ok(),
            (None, Some(s)) => !expected.iter().any(|(lo, hi)| (*lo..=*hi).contains(&s)),
            _ => true,
        }
    }

    /// Records one finished request and its check results. `lateness` is how far behind its
    /// intended start the request began (zero for closed-model executors): the generator's
    /// own, recorded as `iteration_lateness` only, never in either duration.
    fn record(&self, step: usize, outcome: &Outcome, check_results: &[bool], lateness: Duration) {
        self.requests.fetch_add(1, Relaxed);
        let single = self.is_single();
        self.iterations.fetch_add(u64::from(single), Relaxed);
        self.data_sent.fetch_add(outcome.bytes_sent, Relaxed);
        let stamped = u64::from(outcome.kernel_tx);
        self.kernel_tx.fetch_add(stamped, Relaxed);
        self.data_received
            .fetch_add(outcome.bytes_received, Relaxed);
        match outcome
            .status
            .map(|s| s as usize)
            .filter(|s| *s < STATUS_SLOTS)
        {
            Some(slot) => {
                self.statuses[slot / STATUS_BLOCK]
                    .get_or_init(|| Box::new(std::array::from_fn(|_| AtomicU64::new(0))))
                    [slot % STATUS_BLOCK]
                    .fetch_add(1, Relaxed);
                self.classes.record(slot, outcome.duration());
            }
            None => {
                self.no_response.fetch_add(1, Relaxed);
            }
        }
        if let Some(e) = outcome.error {
            self.errors[e as usize].fetch_add(1, Relaxed);
        }
        let failed = self.is_failed_at(step, outcome);
        if failed {
            self.failed.fetch_add(1, Relaxed);
        }
        let own = self.series.is_none();
        if let Some(s) = self.steps.get(step) {
            s.record(outcome, failed, own);
        }
        if own {
            self.record_latencies(outcome, lateness);
        } else {
            // The series hold the rest (`load::series`).
            if outcome.status.is_some() {
                let blocked = k6_phase(&outcome.phases, Phase::Blocked);
                self.phases[Phase::Blocked as usize].record(blocked);
            } else if single {
                self.iteration_duration.record(outcome.phases.total());
            }
        }
        if !self.subs.is_empty() {
            let journeys = !self.journeys.is_empty();
            self.subs.record(step, outcome, failed, journeys);
        }
        let base = self.check_base.get(step).copied().unwrap_or(0);
        let own = self.checks.get(base..).unwrap_or(&[]);
        for (passed, (pass, fail)) in check_results.iter().zip(own) {
            if *passed {
                pass.fetch_add(1, Relaxed);
            } else {
                fail.fetch_add(1, Relaxed);
            }
        }
    }

    /// The latencies of a request when these stats keep their own.
    fn record_latencies(&self, outcome: &Outcome, lateness: Duration) {
        if outcome.status.is_some() {
            self.duration.record(outcome.duration());
            self.corrected.record(outcome.phases.total());
            for phase in Phase::ALL {
                self.phases[phase as usize].record(k6_phase(&outcome.phases, phase));
            }
        }
        if self.journeys.is_empty() {
            self.iteration_duration.record(outcome.phases.total());
            self.lateness.record(lateness);
        }
    }

    /// Bytes of counters made lazily so far: every histogram's tables and blocks, and the
    /// status-code blocks. A run's memory beyond its fixed struct; 1,000 runs hold it at once.
    pub fn counter_bytes(&self) -> usize {
        let trends = [&self.duration, &self.corrected]
            .into_iter()
            .chain(&self.phases)
            .chain([&self.iteration_duration, &self.lateness])
            .chain(self.classes.histograms())
            .chain(self.steps.iter().map(|s| &s.duration))
            .chain(self.steps.iter().map(|s| &s.group_duration))
            .chain(self.journeys.iter().map(|j| &j.duration))
            .chain(self.subs.histograms());
        let statuses = self.statuses.iter().filter(|b| b.get().is_some()).count();
        trends.map(Histogram::allocated_bytes).sum::<usize>()
            + statuses * size_of::<StatusBlock>()
            + self.classes.held_bytes()
    }

    /// Requests per error class, for the classes seen (as [`RunRecord::errors`]).
    pub fn errors(&self) -> Vec<(ErrorClass, u64)> {
        ErrorClass::ALL
            .iter()
            .filter_map(|e| {
                let n = self.errors[*e as usize].load(Relaxed);
                (n > 0).then_some((*e, n))
            })
            .collect()
    }

    pub fn snapshot(&self, elapsed: Duration) -> RunRecord {
        let checks: Vec<(String, u64, u64)> = self
            .check_names
            .iter()
            .zip(&self.checks)
            .map(|(name, (p, f))| (name.clone(), p.load(Relaxed), f.load(Relaxed)))
            .collect();
        let groups = self.group_snapshots();
        let group_duration = HistSnapshot::merged(groups.iter());
        let dropped_by = std::array::from_fn(|i| self.dropped_by[i].load(Relaxed));
        let subs = self.subs.snapshot(&checks, &groups, &dropped_by);
        let steps = self
            .steps
            .iter()
            .enumerate()
            .map(|(i, st)| {
                let from = self.check_base.get(i).copied().unwrap_or(0);
                let to = self.check_base.get(i + 1).copied().unwrap_or(checks.len());
                st.snapshot(checks.get(from..to.max(from)).unwrap_or(&[]).to_vec())
            })
            .collect();
        let low = self.vus_low.load(Relaxed);
        let mut record = RunRecord {
            version: RunRecord::VERSION,
            elapsed,
            duration: self.duration.snapshot(),
            corrected: self.corrected.snapshot(),
            phases: std::array::from_fn(|i| self.phases[i].snapshot()),
            iteration_duration: self.iteration_duration.snapshot(),
            group_duration,
            lateness: self.lateness.snapshot(),
            requests: self.requests.load(Relaxed),
            failed: self.failed.load(Relaxed),
            no_response: self.no_response.load(Relaxed),
            statuses: self
                .statuses
                .iter()
                .enumerate()
                .filter_map(|(b, block)| Some((b * STATUS_BLOCK, block.get()?)))
                .flat_map(|(first, block)| {
                    block.iter().enumerate().filter_map(move |(i, n)| {
                        let (code, n) = (first + i, n.load(Relaxed));
                        (n > 0).then_some((code as u16, n))
                    })
                })
                .collect(),
            errors: self.errors(),
            checks,
            data_sent: self.data_sent.load(Relaxed),
            kernel_tx: self.kernel_tx.load(Relaxed),
            data_received: self.data_received.load(Relaxed),
            iterations: self.iterations.load(Relaxed),
            dropped: self.dropped.load(Relaxed),
            dropped_by,
            vus: self.vus.load(Relaxed),
            vus_low: if low == u32::MAX { 0 } else { low },
            vus_high: self.vus_high.load(Relaxed),
            vus_max: self.vus_max.load(Relaxed),
            subs,
            steps,
            journeys: self.journeys.iter().map(JourneyStats::snapshot).collect(),
            classes: self.classes.snapshot(),
            plan: None,
            affected: None,
        };
        if let Some(s) = &self.series {
            s.fill(&mut record);
        }
        record
    }
}

/// Whether `step` is the first step of its journey (lateness belongs to an iteration's start).
fn step_is_first(steps: &[StepStats], step: usize) -> bool {
    step == 0
        || match (
            steps.get(step),
            step.checked_sub(1).and_then(|p| steps.get(p)),
        ) {
            (Some(s), Some(prev)) => s.journey != prev.journey,
            _ => false,
        }
}

fn expected_statuses(checks: &[Check]) -> Vec<(u16, u16)> {
    checks
        .iter()
        .find_map(|c| match &c.kind {
            CheckKind::Status(r) => Some(r.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// One step's figures: k6 shows these per group.
struct StepStats {
    journey: Option<String>,
    name: String,
    requests: AtomicU64,
    failed: AtomicU64,
    duration: Histogram,
    /// k6's `group_duration` of the step's group: request, checks and captures.
    group_duration: Histogram,
    failures: [AtomicU64; StepFailure::ALL.len()],
}

impl StepStats {
    fn new(journey: Option<String>, name: String) -> StepStats {
        StepStats {
            journey,
            name,
            requests: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            duration: Histogram::new(),
            group_duration: Histogram::new(),
            failures: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    fn record(&self, outcome: &Outcome, failed: bool, own: bool) {
        self.requests.fetch_add(1, Relaxed);
        if failed {
            self.failed.fetch_add(1, Relaxed);
        }
        if own && outcome.status.is_some() {
            self.duration.record(outcome.duration());
        }
    }

    fn snapshot(&self, checks: Vec<(String, u64, u64)>) -> StepRecord {
        StepRecord {
            checks,
            journey: self.journey.clone(),
            name: self.name.clone(),
            requests: self.requests.load(Relaxed),
            failed: self.failed.load(Relaxed),
            duration: self.duration.snapshot(),
            group_duration: self.group_duration.snapshot(),
            failures: std::array::from_fn(|i| self.failures[i].load(Relaxed)),
        }
    }
}

struct JourneyStats {
    name: String,
    results: [AtomicU64; IterationResult::ALL.len()],
    duration: Histogram,
}

impl JourneyStats {
    fn new(name: String) -> JourneyStats {
        JourneyStats {
            name,
            results: std::array::from_fn(|_| AtomicU64::new(0)),
            duration: Histogram::new(),
        }
    }

    fn snapshot(&self) -> JourneyRecord {
        JourneyRecord {
            name: self.name.clone(),
            results: std::array::from_fn(|i| self.results[i].load(Relaxed)),
            duration: self.duration.snapshot(),
        }
    }
}

impl Observer for RunStats {
    fn request_finished(
        &self,
        step: usize,
        outcome: &Outcome,
        lateness: Duration,
        checks: &[bool],
    ) {
        self.record(step, outcome, checks, lateness);
        let own = self.series.is_none();
        if own && step_is_first(&self.steps, step) && !self.journeys.is_empty() {
            self.lateness.record(lateness);
        }
    }

    fn step_finished(&self, step: usize, took: Duration) {
        if let Some(s) = self.steps.get(step) {
            s.group_duration.record(took);
        }
    }

    fn step_failed(&self, step: usize, why: StepFailure) {
        if let Some(s) = self.steps.get(step) {
            s.failures[why as usize].fetch_add(1, Relaxed);
        }
    }

    fn iteration_finished(&self, journey: usize, result: IterationResult, took: Duration) {
        // With series, they hold each journey's durations and so the iterations'.
        let own = self.series.is_none();
        let ran = result != IterationResult::Dropped;
        if let Some(j) = self.journeys.get(journey) {
            j.results[result as usize].fetch_add(1, Relaxed);
            if ran && own {
                j.duration.record(took);
            }
        }
        if ran {
            self.iterations.fetch_add(1, Relaxed);
            if own {
                self.iteration_duration.record(took);
            }
        }
    }

    fn iteration_dropped(&self, reason: DropReason, _journey: usize) {
        self.dropped.fetch_add(1, Relaxed);
        self.dropped_by[reason as usize].fetch_add(1, Relaxed);
    }

    fn vus_changed(&self, delta: i32) {
        // Two's complement: adding `-1 as u32` subtracts one.
        let now = self
            .vus
            .fetch_add(delta as u32, Relaxed)
            .wrapping_add(delta as u32);
        self.vus_high.fetch_max(now, Relaxed);
        self.vus_low.fetch_min(now, Relaxed);
    }

    fn vus_allocated(&self, n: u32) {
        self.vus_max.fetch_max(n, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thresholds::RateValue;

    fn record(stats: &RunStats, error: Option<ErrorClass>, n: usize) {
        let outcome = Outcome {
            status: error.is_none().then_some(200),
            error,
            ..Outcome::default()
        };
        for _ in 0..n {
            stats.request_finished(0, &outcome, Duration::ZERO, &[]);
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

    fn outcome(status: Option<u16>, waiting_ms: u64, dns_ms: u64) -> Outcome {
        Outcome {
            status,
            error: status.is_none().then_some(ErrorClass::ConnectRefused),
            phases: crate::http::Phases {
                blocked: Duration::from_millis(1),
                dns: Duration::from_millis(dns_ms),
                waiting: Duration::from_millis(waiting_ms),
                ..Default::default()
            },
            ..Outcome::default()
        }
    }

    /// A short run at 1/s holds a few KB, not its layout: 1,000 runs starting on the same
    /// minute are the daemon's peak (issue 17: RSS ≤ 150 MB). Before the lazy status blocks,
    /// one-pointer slots and 128-byte blocks, this run held about 21 KB (4.8 KB of status
    /// counters, 13 × 496 bytes of chunk tables, 31 chunks of 64 bytes and 256-byte blocks).
    #[test]
    fn a_short_run_holds_a_few_kilobytes_of_counters() {
        let fresh = RunStats::for_run(&[], &[], "p", "GET");
        assert_eq!(fresh.counter_bytes(), 0);
        // 1,560: a counter per error class (15 since HTTP/3's three).
        assert!(size_of::<RunStats>() <= 1560, "{}", size_of::<RunStats>());
        let stats = RunStats::for_run(&[], &[], "p", "GET");
        for ms in [1, 2, 2, 3, 40] {
            stats.request_finished(0, &outcome(Some(200), ms, 0), Duration::ZERO, &[]);
        }
        let held = stats.counter_bytes();
        assert!(held <= 10 * 1024, "{held} bytes");
        // One status block, however many distinct 2xx codes.
        stats.request_finished(0, &outcome(Some(204), 1, 0), Duration::ZERO, &[]);
        stats.request_finished(0, &outcome(None, 0, 0), Duration::ZERO, &[]);
        let s = stats.snapshot(Duration::from_secs(1));
        assert_eq!(s.statuses, vec![(200, 5), (204, 1)]);
        assert_eq!(s.no_response, 1);
        stats.request_finished(0, &outcome(Some(599), 1, 0), Duration::ZERO, &[]);
        stats.request_finished(0, &outcome(Some(600), 1, 0), Duration::ZERO, &[]);
        let s = stats.snapshot(Duration::from_secs(1));
        assert_eq!(s.statuses, vec![(200, 5), (204, 1), (599, 1)]);
        assert_eq!(
            s.no_response, 2,
            "a code past the table counts as no response"
        );
    }

    /// k6's names keep k6's meanings: the duration leaves the connection's phases out (the
    /// corrected duration has them), `http_req_blocked` holds the DNS lookup. The generator's
    /// own lateness is in neither: it is sloburn's, shown as `iteration_lateness`.
    #[test]
    fn k6_names_mean_what_k6_means() {
        let stats = RunStats::new(&[]);
        stats.request_finished(
            0,
            &outcome(Some(200), 10, 5),
            Duration::from_millis(40),
            &[],
        );
        let s = stats.snapshot(Duration::from_secs(1));
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        assert!((ms(s.duration.max()) - 10.0).abs() < 0.1);
        assert!((ms(s.corrected.max()) - 16.0).abs() < 0.1);
        assert!((ms(s.lateness.max()) - 40.0).abs() < 0.3);
        assert!((ms(s.phases[Phase::Blocked as usize].max()) - 6.0).abs() < 0.1);
        assert!((ms(s.phases[Phase::Dns as usize].max()) - 5.0).abs() < 0.1);
        assert!((ms(s.iteration_duration.max()) - 16.0).abs() < 0.1);
    }

    #[test]
    fn sub_metrics_record_what_their_tags_select() {
        let names = |list: &[&str]| -> Vec<ThresholdSpec> {
            list.iter()
                .map(|m| {
                    let (metric, expr) = m.split_once('=').unwrap();
                    ThresholdSpec::parse(metric, expr, false, None).unwrap()
                })
                .collect()
        };
        let thresholds = names(&[
            "http_req_duration{status:500}=p(95)<1",
            "http_req_failed{status:500}=rate<1",
            "http_reqs{expected_response:false}=count<1",
            "http_req_waiting{method:POST}=p(95)<1",
            "http_req_waiting{method:get,scenario:canary}=p(95)<1",
        ]);
        let stats = RunStats::for_run(&[], &thresholds, "canary", "GET");
        stats.request_finished(0, &outcome(Some(200), 10, 0), Duration::ZERO, &[]);
        stats.request_finished(0, &outcome(Some(500), 30, 0), Duration::ZERO, &[]);
        stats.request_finished(0, &outcome(None, 0, 0), Duration::ZERO, &[]);
        let s = stats.snapshot(Duration::from_secs(1));
        let h = s.trend_of("http_req_duration{status:500}").unwrap();
        assert_eq!(h.count(), 1);
        let ok = s.trend_of(crate::load::subs::EXPECTED_DURATION).unwrap();
        assert_eq!(ok.count(), 1);
        assert_eq!(
            s.rate_of("http_req_failed{status:500}"),
            Some(RateValue { hits: 1, total: 1 })
        );
        assert_eq!(s.count_of("http_reqs{expected_response:false}"), Some(2));
        // A static tag that differs: nothing; one that matches: the whole metric.
        assert!(s.trend_of("http_req_waiting{method:POST}").is_none());
        let all = s
            .trend_of("http_req_waiting{method:get,scenario:canary}")
            .unwrap();
        assert_eq!(all.count(), 2);
    }

    /// `dropped_iterations{reason:…}` counts one reason's drops; saturated arrivals are failed
    /// requests in `http_req_failed` too, the generator's own drops are not.
    #[test]
    fn drops_filter_by_reason_and_saturated_ones_fail() {
        let spec = |m: &str, e: &str| ThresholdSpec::parse(m, e, false, None).unwrap();
        let thresholds = [
            spec("dropped_iterations{reason:saturated}", "count==0"),
            spec("dropped_iterations{reason:late}", "count==0"),
            spec("dropped_iterations{scenario:other}", "count==0"),
        ];
        let stats = RunStats::for_run(&[], &thresholds, "canary", "GET");
        stats.request_finished(0, &outcome(Some(200), 10, 0), Duration::ZERO, &[]);
        for reason in [
            DropReason::Saturated,
            DropReason::Saturated,
            DropReason::Late,
            DropReason::ConnectPaced,
        ] {
            stats.iteration_dropped(reason, 0);
        }
        let s = stats.snapshot(Duration::from_secs(1));
        assert_eq!(s.count_of("dropped_iterations{reason:saturated}"), Some(2));
        assert_eq!(s.count_of("dropped_iterations{reason:late}"), Some(1));
        assert_eq!(s.count_of("dropped_iterations{scenario:other}"), Some(0));
        assert_eq!(s.count_of("dropped_iterations"), Some(4));
        assert_eq!(s.generator_overloaded(), 2);
        assert_eq!(
            s.rate_of("http_req_failed"),
            Some(RateValue { hits: 2, total: 3 })
        );
    }
}

#[cfg(test)]
mod journey_tests {
    use super::*;
    use crate::thresholds::MetricKind;

    fn step(journey: &str, name: &str, method: &str, checks: &[&str]) -> StepInfo {
        StepInfo {
            journey: Some(journey.into()),
            name: name.into(),
            checks: checks
                .iter()
                .map(|c| Check {
                    name: (*c).into(),
                    kind: CheckKind::Status(vec![(200, 200)]),
                })
                .collect(),
            method: method.into(),
            url: format!("http://shop/{name}"),
        }
    }

    /// Issue 29: every filter saw the first step's method, and `checks{check:NAME}` only the
    /// first step's check of that name.
    #[test]
    fn filters_see_each_requests_own_step() {
        let steps = [
            step("buy", "login", "POST", &["ok", "has token"]),
            step("buy", "cart", "GET", &["ok"]),
            step("browse", "home", "GET", &["ok"]),
        ];
        let thresholds: Vec<ThresholdSpec> = [
            "http_reqs{method:GET}",
            "http_reqs{method:post}",
            "http_reqs{group:::buy::cart}",
            "http_reqs{step:home}",
            "http_reqs{name:http://shop/login}",
            "http_reqs{group:::buy}",
            "http_req_duration{method:GET,status:200}",
            "checks{check:ok}",
            "checks{group:::buy::login}",
            "checks{check:ok,step:cart}",
            "group_duration{group:::buy}",
            "group_duration{group:::buy::cart}",
            "iterations{group:}",
            "iterations{group:::buy}",
        ]
        .iter()
        .map(|m| {
            let expr = match crate::thresholds::parse_metric(m).unwrap().kind {
                MetricKind::Trend => "p(95)<1",
                MetricKind::Rate => "rate>0",
                _ => "count>0",
            };
            ThresholdSpec::parse(m, expr, false, None).unwrap()
        })
        .collect();
        let journeys = ["buy".to_string(), "browse".to_string()];
        let stats = RunStats::for_work(&steps, &journeys, &thresholds, "shop");
        let ok = Outcome {
            status: Some(200),
            ..Outcome::default()
        };
        let ms = Duration::from_millis;
        for _ in 0..3 {
            stats.request_finished(0, &ok, Duration::ZERO, &[true, false]);
            stats.step_finished(0, ms(10));
            stats.request_finished(1, &ok, Duration::ZERO, &[true]);
            stats.step_finished(1, ms(20));
            stats.iteration_finished(0, IterationResult::FailedStep, ms(40));
        }
        stats.request_finished(2, &ok, Duration::ZERO, &[false]);
        stats.step_finished(2, ms(5));
        stats.iteration_finished(1, IterationResult::FailedStep, ms(5));
        let s = stats.snapshot(Duration::from_secs(1));
        assert_eq!(s.count_of("http_reqs{method:GET}"), Some(4));
        assert_eq!(s.count_of("http_reqs{method:post}"), Some(3));
        assert_eq!(s.count_of("http_reqs{group:::buy::cart}"), Some(3));
        assert_eq!(s.count_of("http_reqs{step:home}"), Some(1));
        assert_eq!(s.count_of("http_reqs{name:http://shop/login}"), Some(3));
        // Requests are in their steps' groups, never in the journey's own.
        assert_eq!(s.count_of("http_reqs{group:::buy}"), Some(0));
        let get_ok = s.trend_of("http_req_duration{method:GET,status:200}");
        assert_eq!(get_ok.map(|h| h.count()), Some(4));
        let rate = |m: &str| s.rate_of(m).map(|r| (r.hits, r.total));
        assert_eq!(rate("checks{check:ok}"), Some((6, 7)));
        assert_eq!(rate("checks{group:::buy::login}"), Some((3, 6)));
        assert_eq!(rate("checks{check:ok,step:cart}"), Some((3, 3)));
        let buy = s.trend_of("group_duration{group:::buy}").unwrap();
        assert_eq!((buy.count(), buy.max()), (3, ms(40)));
        let cart = s.trend_of("group_duration{group:::buy::cart}").unwrap();
        assert_eq!((cart.count(), cart.min()), (3, ms(20)));
        // Two journeys' and three steps' groups.
        assert_eq!(s.group_duration.count(), 4 + 7);
        // Iterations are in the root group.
        assert_eq!(s.count_of("iterations{group:}"), Some(4));
        assert_eq!(s.count_of("iterations{group:::buy}"), Some(0));
    }
}
