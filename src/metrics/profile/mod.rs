//! Per (target, profile) series: fixed arrays of atomics written on every request without a lock,
//! a lookup or an allocation. The label sets are escaped once here, when the series are created,
//! so a scrape only pastes strings and loads atomics.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use super::text::label_set;
use super::wire::Labels;
use crate::hist::Histogram;
use crate::http::{ErrorClass, Outcome, Phase};

mod bounds;
mod requests;
mod steps;
pub(crate) use bounds::*;
pub use requests::*;
pub use steps::*;

/// Phases in label order (byte order of their names), so the scrape needs no sort.
pub(super) const PHASES_BY_LABEL: [Phase; 7] = {
    let mut p = Phase::ALL;
    // blocked, connecting, dns, receiving, sending, tls_handshaking, waiting.
    p[1] = Phase::Connecting;
    p[2] = Phase::Dns;
    p[3] = Phase::Receiving;
    p[4] = Phase::Sending;
    p[5] = Phase::TlsHandshaking;
    p[6] = Phase::Waiting;
    p
};

/// Everything sloburn exposes about one (target, profile), written on the hot path.
#[derive(Debug)]
pub struct ProfileMetrics {
    pub(super) target: String,
    pub(super) profile: String,
    /// `target="..",profile=".."`, escaped once.
    pub(super) labels: Labels,
    pub(super) bounds: Bounds,
    /// Per step (`load::iteration` numbering): one, `step="request"`, for a single request.
    pub(super) steps: Vec<StepSeries>,
    /// Per journey of the mix; empty for a single request.
    pub(super) journeys: Vec<JourneySeries>,
    pub(super) lateness: Histogram,
    /// Requests with a local error class, indexed by `ErrorClass as usize` (only local slots
    /// move).
    local_errors: [AtomicU64; ErrorClass::ALL.len()],
    /// The registry's totals of the same, shared by every series.
    local_totals: Arc<LocalTotals>,
    pub(super) iterations: AtomicU64,
    pub(super) dropped: AtomicU64,
    /// Dropped because the generator fell behind (also in `dropped`).
    pub(super) overloaded: AtomicU64,
    /// Dropped because every VU waited on the target (also in `dropped`).
    pub(super) saturated: AtomicU64,
    /// Unix seconds of the last such drop (0: never), for `/readyz`.
    overloaded_at: AtomicU64,
    pub(super) data_sent: AtomicU64,
    pub(super) data_received: AtomicU64,
    pub(super) vus: AtomicU32,
    pub(super) vus_max: AtomicU32,
}

/// Local errors by class across every series of a registry: one more relaxed add per local
/// error (never on a request that went well).
#[derive(Debug, Default)]
pub(super) struct LocalTotals([AtomicU64; ErrorClass::ALL.len()]);

impl LocalTotals {
    fn add(&self, e: ErrorClass) {
        if let Some(n) = self.0.get(e as usize) {
            n.fetch_add(1, Relaxed);
        }
    }

    pub(super) fn read(&self) -> Vec<(&'static str, u64)> {
        local_counts(&self.0)
    }
}

/// `(class, count)` of the local classes in `slots` (indexed by `ErrorClass as usize`), in
/// label order.
fn local_counts(slots: &[AtomicU64; ErrorClass::ALL.len()]) -> Vec<(&'static str, u64)> {
    let mut local: Vec<ErrorClass> = ErrorClass::ALL
        .into_iter()
        .filter(|e| e.is_local())
        .collect();
    local.sort_by_key(|e| e.as_str());
    local
        .into_iter()
        .map(|e| {
            (
                e.as_str(),
                slots.get(e as usize).map_or(0, |n| n.load(Relaxed)),
            )
        })
        .collect()
}

impl ProfileMetrics {
    pub(super) fn new(
        target: &str,
        profile: &str,
        buckets: &[f64],
        steps: &[StepLayout],
        journeys: &[String],
        local_totals: Arc<LocalTotals>,
    ) -> ProfileMetrics {
        let bounds = Bounds::new(buckets);
        let steps = steps
            .iter()
            .map(|s| StepSeries::new(target, profile, s, &bounds))
            .collect();
        let journeys = journeys
            .iter()
            .map(|j| {
                let base = [
                    ("target", target),
                    ("profile", profile),
                    ("journey", j.as_str()),
                ];
                JourneySeries {
                    labels: Labels::new(label_set(&base)),
                    duration: bounds.histogram(),
                    results: std::array::from_fn(|_| AtomicU64::new(0)),
                    result_labels: ITERATION_RESULTS.map(|r| {
                        let mut l = base.to_vec();
                        l.push(("result", r));
                        Labels::new(label_set(&l))
                    }),
                }
            })
            .collect();
        ProfileMetrics {
            target: target.into(),
            profile: profile.into(),
            labels: Labels::new(label_set(&[("target", target), ("profile", profile)])),
            steps,
            journeys,
            lateness: bounds.histogram(),
            bounds,
            local_errors: std::array::from_fn(|_| AtomicU64::new(0)),
            local_totals,
            iterations: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            overloaded: AtomicU64::new(0),
            saturated: AtomicU64::new(0),
            overloaded_at: AtomicU64::new(0),
            data_sent: AtomicU64::new(0),
            data_received: AtomicU64::new(0),
            vus: AtomicU32::new(0),
            vus_max: AtomicU32::new(0),
        }
    }

    /// Records a sampled request of step `step` as the exemplar of the
    /// `sloburn_http_req_duration_seconds` bucket its duration falls in (the latest one wins).
    /// Call it only for sampled requests that got a status (as `observe` records the
    /// duration); atomics only, after the step's first (which makes its slots).
    pub fn exemplar(
        &self,
        step: usize,
        duration_seconds: f64,
        trace_id: opentelemetry::trace::TraceId,
        span_id: opentelemetry::trace::SpanId,
    ) {
        let Some(s) = self.steps.get(step) else {
            return;
        };
        let d = Duration::try_from_secs_f64(duration_seconds).unwrap_or_default();
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let unix_millis = crate::clock::system_time()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
        let slots = s.duration_exemplars.get_or_init(|| {
            (0..=self.bounds.seconds().len())
                .map(|_| super::exemplar::Slot::default())
                .collect()
        });
        if let Some(slot) = slots.get(self.bounds.index(nanos)) {
            slot.write(super::exemplar::Exemplar {
                trace_id: u128::from_be_bytes(trace_id.to_bytes()),
                span_id: u64::from_be_bytes(span_id.to_bytes()),
                value_nanos: nanos,
                unix_millis,
            });
        }
    }

    /// Whether this was built for the same buckets, steps and journeys (after sanitising).
    pub(super) fn same_layout(
        &self,
        buckets: &[f64],
        steps: &[StepLayout],
        journeys: &[String],
    ) -> bool {
        Bounds::new(buckets).seconds() == self.bounds.seconds()
            && self.steps.len() == steps.len()
            && self.steps.iter().zip(steps).all(|(s, l)| s.layout == *l)
            && self.journeys.len() == journeys.len()
    }

    /// A single-request profile's request (its one step).
    pub fn observe(&self, outcome: &Outcome, lateness: Duration, check_results: &[bool]) {
        self.observe_step(0, outcome, lateness, check_results);
    }

    /// A request of step `step` (`load::iteration` numbering); `lateness` is how late its
    /// iteration started (zero after a journey's first step).
    pub fn observe_step(
        &self,
        step: usize,
        outcome: &Outcome,
        lateness: Duration,
        check_results: &[bool],
    ) {
        let single = self.journeys.is_empty();
        if single {
            self.iterations.fetch_add(1, Relaxed);
        }
        self.data_sent.fetch_add(outcome.bytes_sent, Relaxed);
        self.data_received
            .fetch_add(outcome.bytes_received, Relaxed);
        if let Some(e) = outcome.error.filter(|e| e.is_local())
            && let Some(n) = self.local_errors.get(e as usize)
        {
            n.fetch_add(1, Relaxed);
            self.local_totals.add(e);
        }
        if let Some(s) = self.steps.get(step) {
            s.observe(outcome, check_results);
        }
        // An iteration's lateness, once: on a journey's first step.
        if single || self.first_step(step) {
            self.lateness.record(lateness);
        }
    }

    fn first_step(&self, step: usize) -> bool {
        let prev = step.checked_sub(1).and_then(|p| self.steps.get(p));
        match (self.steps.get(step), prev) {
            (Some(_), None) => true,
            (Some(s), Some(prev)) => s.layout.journey != prev.layout.journey,
            _ => false,
        }
    }

    /// A journey step failed; `reason` indexes [`STEP_FAILURE_REASONS`].
    pub fn step_failed(&self, step: usize, reason: usize) {
        if let Some(n) = self.steps.get(step).and_then(|s| s.failures.get(reason)) {
            n.fetch_add(1, Relaxed);
        }
    }

    /// A journey iteration ended; `result` indexes [`ITERATION_RESULTS`] (2: dropped, which
    /// never ran and has no duration).
    pub fn iteration_finished(&self, journey: usize, result: usize, took: Duration) {
        let Some(j) = self.journeys.get(journey) else {
            return;
        };
        if let Some(n) = j.results.get(result) {
            n.fetch_add(1, Relaxed);
        }
        if result != 2 {
            self.iterations.fetch_add(1, Relaxed);
            j.duration.record(took);
        }
    }

    /// An arrival-rate iteration that found no free VU (k6's `dropped_iterations`).
    pub fn dropped(&self) {
        self.dropped.fetch_add(1, Relaxed);
    }

    /// An arrival-rate iteration dropped because every VU was waiting on the target; counted in
    /// `sloburn_dropped_iterations_total` too.
    pub fn saturated(&self) {
        self.dropped();
        self.saturated.fetch_add(1, Relaxed);
    }

    /// An arrival-rate iteration dropped because sloburn itself fell behind, at `unix_secs`;
    /// counted in `sloburn_dropped_iterations_total` too.
    pub fn generator_overloaded(&self, unix_secs: u64) {
        self.dropped();
        self.overloaded.fetch_add(1, Relaxed);
        self.overloaded_at.fetch_max(unix_secs, Relaxed);
    }

    /// Whether the generator fell behind on this profile at or after `unix_secs`.
    pub fn overloaded_since(&self, unix_secs: u64) -> bool {
        let at = self.overloaded_at.load(Relaxed);
        at > 0 && at >= unix_secs
    }

    pub fn set_vus(&self, n: u32) {
        self.vus.store(n, Relaxed);
    }

    /// One more busy VU (`+1`) or one fewer (`-1`).
    pub fn add_vus(&self, delta: i32) {
        // Two's complement: adding `-1 as u32` subtracts one.
        self.vus.fetch_add(delta as u32, Relaxed);
    }

    pub fn set_vus_max(&self, n: u32) {
        self.vus_max.store(n, Relaxed);
    }

    /// The run has allocated `n` VUs so far; the gauge keeps the run's largest.
    pub fn raise_vus_max(&self, n: u32) {
        self.vus_max.fetch_max(n, Relaxed);
    }

    pub fn target(&self) -> &str {
        &self.target
    }

    pub fn profile(&self) -> &str {
        &self.profile
    }

    /// Step `step`'s latency histograms: `http_req_duration`, the corrected duration and
    /// the phases by `Phase as usize` (a daemon run reads its own figures from them).
    pub fn step_histograms(
        &self,
        step: usize,
    ) -> Option<(&Histogram, &Histogram, &[Histogram; 7])> {
        let s = self.steps.get(step)?;
        Some((&s.duration, &s.corrected, &s.phases))
    }

    /// The iterations' lateness (on each iteration's first request).
    pub fn lateness_histogram(&self) -> &Histogram {
        &self.lateness
    }

    /// Journey `journey`'s iteration durations.
    pub fn journey_histogram(&self, journey: usize) -> Option<&Histogram> {
        self.journeys.get(journey).map(|j| &j.duration)
    }

    /// `(class, count)` for every local error class, zeros included, in label order.
    pub(super) fn local_errors(&self) -> impl Iterator<Item = (&'static str, u64)> {
        local_counts(&self.local_errors).into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_by_label_are_sorted_and_complete() {
        let names: Vec<&str> = PHASES_BY_LABEL.iter().map(|p| p.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names, sorted);
        assert_eq!(names.len(), Phase::ALL.len());
    }

    #[test]
    fn bounds_are_inclusive_at_exact_values() {
        let b = Bounds::new(&[0.3, 0.1, 0.1, f64::NAN, -1.0, f64::INFINITY, 0.0]);
        assert_eq!(b.seconds(), [0.0, 0.1, 0.3]);
        assert_eq!(b.index(0), 0);
        assert_eq!(b.index(1), 1);
        assert_eq!(b.index(100_000_000), 1);
        assert_eq!(b.index(100_000_001), 2);
        assert_eq!(b.index(300_000_000), 2);
        assert_eq!(b.index(300_000_001), 3);
        assert_eq!(
            b.le_tail_classic,
            ["0\"} ", "0.1\"} ", "0.3\"} ", "+Inf\"} "]
        );
        assert_eq!(
            b.le_tail_openmetrics,
            ["0.0\"} ", "0.1\"} ", "0.3\"} ", "+Inf\"} "]
        );
    }

    #[test]
    fn local_error_totals_outlive_the_series_that_counted_them() {
        let totals: Arc<LocalTotals> = Arc::default();
        let failed = Outcome {
            error: Some(ErrorClass::LocalPortsExhausted),
            ..Outcome::default()
        };
        for name in ["a", "b"] {
            let p = ProfileMetrics::new(
                "t",
                name,
                &[0.1],
                &[StepLayout::single(&[])],
                &[],
                Arc::clone(&totals),
            );
            p.observe(&failed, Duration::ZERO, &[]);
            p.observe(&Outcome::default(), Duration::ZERO, &[]);
        }
        assert_eq!(
            totals.read(),
            [
                ("local_fd_exhausted", 0),
                ("local_ports_exhausted", 2),
                ("local_socket", 0),
                ("template", 0)
            ]
        );
    }

    #[test]
    fn local_errors_are_counted_by_class_beside_http_reqs() {
        let p = ProfileMetrics::new(
            "t",
            "p",
            &[0.1],
            &[StepLayout::single(&[])],
            &[],
            Arc::default(),
        );
        let failed = |e| Outcome {
            error: Some(e),
            ..Outcome::default()
        };
        p.observe(&failed(ErrorClass::LocalFdExhausted), Duration::ZERO, &[]);
        p.observe(&failed(ErrorClass::LocalFdExhausted), Duration::ZERO, &[]);
        p.observe(&failed(ErrorClass::Reset), Duration::ZERO, &[]);
        let local: Vec<_> = p.local_errors().collect();
        assert_eq!(
            local,
            [
                ("local_fd_exhausted", 2),
                ("local_ports_exhausted", 0),
                ("local_socket", 0),
                ("template", 0)
            ]
        );
        assert_eq!(
            p.steps[0].reqs(),
            [
                ("0".to_string(), "local_fd_exhausted", 2),
                ("0".to_string(), "reset", 1),
            ]
        );
    }

    #[test]
    fn req_table_counts_every_pair_and_overflows_to_other() {
        let t = ReqTable::new();
        t.add(Some(200), None);
        t.add(Some(200), None);
        t.add(None, Some(ErrorClass::ConnectRefused));
        t.add(Some(200), Some(ErrorClass::Body));
        assert_eq!(
            t.read(),
            [
                ("0".to_string(), "connect_refused", 1),
                ("200".to_string(), "body", 1),
                ("200".to_string(), "none", 2),
            ]
        );
        // Fill the table with every status 0..=600 under two errors: 1202 pairs, 512 slots.
        let t = ReqTable::new();
        for s in 0..=600u16 {
            t.add(Some(s), None);
            t.add(Some(s), Some(ErrorClass::Reset));
        }
        let rows = t.read();
        let total: u64 = rows.iter().map(|r| r.2).sum();
        assert_eq!(total, 1202);
        assert_eq!(
            rows.iter().filter(|r| r.0 != STATUS_OTHER).count(),
            REQ_SLOTS
        );
        assert!(rows.iter().any(|r| r.0 == STATUS_OTHER && r.1 == "reset"));
        // u16::MAX is a valid key too.
        let t = ReqTable::new();
        t.add(Some(u16::MAX), Some(ErrorClass::Other));
        assert_eq!(t.read(), [("65535".to_string(), "other", 1)]);
    }
}
