//! How a run tells its observers what happens, as it happens: a request finished, an iteration
//! was dropped, a VU started or stopped, more VUs were allocated.
//!
//! The runner sends every event through one [`Observers`] fan-out: first to the run's own
//! [`RunStats`] (the summary, thresholds, progress), then to whoever else watches (the daemon's
//! `/metrics` series and SLO counters). Nothing polls the run's figures and copies them up.
//! Events are called on the request path: an observer does atomics only, never a lock or an
//! allocation.

use super::affected::{AffectedRecord, Extremes};
use super::event::{IterationResult, Observer, Sent, StepFailure};
use super::pacing::DropReason;
use super::record::{RunRecord, SubValue, k6_phase};
use super::stats::RunStats;
use crate::http::Outcome;
use crate::starve::{Cause, Starvation};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The run's stats first, then every other observer.
#[derive(Clone)]
pub struct Observers {
    stats: Arc<RunStats>,
    others: Vec<Arc<dyn Observer>>,
    /// The process's starvation watch, when it runs one (`run`, `serve`).
    starvation: Option<Arc<Starvation>>,
    /// The generator-affected requests' latencies and the others' extremes
    /// ([`Observers::keep_affected`]).
    affected: Option<Arc<Apart>>,
}

/// What a run keeps of its generator-affected requests (`load::affected`).
struct Apart {
    /// Their figures, in the run's shape (only their latencies are read).
    twin: RunStats,
    by_cause: [std::sync::atomic::AtomicU64; 3],
    /// The exact extremes of every other request.
    clean: Extremes,
}

impl Observers {
    pub fn new(stats: Arc<RunStats>, others: Vec<Arc<dyn Observer>>) -> Observers {
        Observers {
            stats,
            others,
            starvation: None,
            affected: None,
        }
    }

    /// Judges every answered request against `starvation` (`starve::Starvation::judge`).
    pub fn with_starvation(mut self, starvation: Arc<Starvation>) -> Observers {
        self.starvation = Some(starvation);
        self
    }

    pub fn starvation(&self) -> Option<&Arc<Starvation>> {
        self.starvation.as_ref()
    }

    /// Keeps the generator-affected requests' latencies in `twin` (stats of the run's shape),
    /// so the run's verdict can leave them out. Without it no request is judged affected.
    pub fn keep_affected(mut self, twin: RunStats) -> Observers {
        self.affected = Some(Arc::new(Apart {
            twin,
            by_cause: Default::default(),
            clean: Extremes::default(),
        }));
        self
    }

    /// The run's figures now (`RunStats::snapshot`), with its affected requests beside them.
    pub fn snapshot(&self, elapsed: Duration) -> RunRecord {
        let mut r = self.stats.snapshot(elapsed);
        if let Some(a) = &self.affected {
            r.affected = a.record(elapsed);
        }
        r
    }

    /// Only the run's own stats (`sloburn run`).
    pub fn stats_only(stats: Arc<RunStats>) -> Observers {
        Observers::new(stats, Vec::new())
    }

    pub fn stats(&self) -> &Arc<RunStats> {
        &self.stats
    }

    /// A request finished just now; `row` is its iteration's data row (`None` without a data
    /// file). It began its phases' total ago ([`Observers::request_finished_at`]).
    pub fn request_finished(
        &self,
        step: usize,
        row: Option<usize>,
        outcome: &Outcome,
        lateness: Duration,
        checks: &[bool],
    ) {
        self.request_finished_sent(step, (row, Sent::default()), outcome, lateness, checks);
    }

    /// [`Observers::request_finished`] with `sent`: what the request carried from its row and
    /// the iteration's captures.
    pub fn request_finished_sent(
        &self,
        step: usize,
        (row, sent): (Option<usize>, Sent<'_>),
        outcome: &Outcome,
        lateness: Duration,
        checks: &[bool],
    ) {
        let now = crate::clock::instant();
        let began = now.checked_sub(outcome.phases.total()).unwrap_or(now);
        self.request_finished_at(step, (row, sent), outcome, lateness, checks, began);
    }

    /// [`Observers::request_finished_sent`] of a request its VU began at `began` (its phases
    /// count from there). Every request is in the run's stats; one whose latency sloburn's own
    /// starvation explains goes to the others as `request_affected`.
    pub fn request_finished_at(
        &self,
        step: usize,
        (row, sent): (Option<usize>, Sent<'_>),
        outcome: &Outcome,
        lateness: Duration,
        checks: &[bool],
        began: Instant,
    ) {
        self.stats.request_finished(step, outcome, lateness, checks);
        match self.judge(step, outcome, began) {
            Some((apart, cause)) => {
                apart.twin.request_finished(step, outcome, lateness, checks);
                apart.by_cause[cause as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                for o in &self.others {
                    o.request_affected(step, row, sent, outcome, lateness, checks, cause);
                }
            }
            None => {
                if let Some(apart) = &self.affected {
                    let single = self.stats.is_single();
                    let phase = |p| k6_phase(&outcome.phases, p).as_nanos() as u64;
                    apart.clean.record(outcome, single, phase);
                }
                for o in &self.others {
                    o.request_finished_sent(step, row, sent, outcome, lateness, checks);
                }
            }
        }
    }

    /// Whether this request is generator-affected: answered (no error class, a status its
    /// step's checks accept: a failure is always the target's) and its latency explained by
    /// sloburn's starvation.
    fn judge(&self, step: usize, outcome: &Outcome, began: Instant) -> Option<(&Apart, Cause)> {
        let (watch, apart) = (self.starvation.as_ref()?, self.affected.as_deref()?);
        if outcome.error.is_some() || outcome.status.is_none() {
            return None;
        }
        if self.stats.is_failed_at(step, outcome) {
            return None;
        }
        // Throttling freezes all of sloburn, its transport's own stamps included: judged over the
        // whole request (`starve::Starvation::judge`). Timed by the kernel on both ends (its
        // transmit stamps, `http::tx`, and its receive stamps), a request holds sloburn's stall
        // only in its wait for its own connection: no more of it is counted, whatever starved
        // sloburn around it (`starve::Starvation::judge_within`).
        let took = outcome.phases.total();
        let own = if outcome.kernel_tx {
            outcome.phases.blocked + outcome.phases.dns
        } else {
            took
        };
        let cause = watch.judge_within(
            began,
            (Duration::ZERO, took),
            own_segments(outcome),
            took,
            own,
        )?;
        watch.count(cause);
        Some((apart, cause))
    }

    pub fn request_traced(
        &self,
        step: usize,
        outcome: &Outcome,
        trace_id: opentelemetry::trace::TraceId,
        span_id: opentelemetry::trace::SpanId,
    ) {
        for o in &self.others {
            o.request_traced(step, outcome, trace_id, span_id);
        }
    }

    pub fn step_failed(&self, step: usize, why: StepFailure) {
        self.stats.step_failed(step, why);
        for o in &self.others {
            o.step_failed(step, why);
        }
    }

    pub fn step_finished(&self, step: usize, took: Duration) {
        self.stats.step_finished(step, took);
        for o in &self.others {
            o.step_finished(step, took);
        }
    }

    pub fn iteration_data(&self, journey: usize, sent: u64, received: u64) {
        for o in &self.others {
            o.iteration_data(journey, sent, received);
        }
    }

    pub fn iteration_finished(
        &self,
        journey: usize,
        row: Option<usize>,
        result: IterationResult,
        took: Duration,
    ) {
        self.stats.iteration_finished(journey, result, took);
        for o in &self.others {
            o.iteration_finished_in_row(journey, row, result, took);
        }
    }

    /// An arrival was dropped; `row` is the data row it would have taken, when known.
    pub fn iteration_dropped(&self, reason: DropReason, journey: usize, row: Option<usize>) {
        self.stats.iteration_dropped(reason, journey);
        for o in &self.others {
            o.iteration_dropped_in_row(reason, journey, row);
        }
    }

    pub fn vus_changed(&self, delta: i32) {
        self.stats.vus_changed(delta);
        for o in &self.others {
            o.vus_changed(delta);
        }
    }

    pub fn vus_allocated(&self, n: u32) {
        self.stats.vus_allocated(n);
        for o in &self.others {
            o.vus_allocated(n);
        }
    }

    /// Marks one VU busy until the returned guard is dropped, also when its task is aborted at
    /// the end of the grace period, so the VU gauges never stay above zero after a run.
    pub fn busy(&self) -> Busy<'_> {
        self.vus_changed(1);
        Busy(self)
    }
}

/// The parts of a request's time sloburn drove alone, as `(offset from its start, length)`:
/// waiting for its own HTTP/1 connection to be ready (an HTTP/2 stream's wait is the target's
/// streams, not sloburn's), and writing the request. The lookup, connect and TLS between them
/// are the network's and the peer's; the wait for the answer ends at a kernel stamp.
fn own_segments(outcome: &Outcome) -> [(Duration, Duration); 2] {
    let p = &outcome.phases;
    let blocked = if outcome.version == ::http::Version::HTTP_2 {
        Duration::ZERO
    } else {
        p.blocked
    };
    let sent_from = p.blocked + p.dns + p.connecting + p.tls_handshaking;
    [(Duration::ZERO, blocked), (sent_from, p.sending)]
}

impl Apart {
    /// The affected requests so far, `None` with none.
    fn record(&self, elapsed: Duration) -> Option<Box<AffectedRecord>> {
        let by_cause: [u64; 3] =
            std::array::from_fn(|i| self.by_cause[i].load(std::sync::atomic::Ordering::Relaxed));
        if by_cause.iter().all(|n| *n == 0) {
            return None;
        }
        let t = self.twin.snapshot(elapsed);
        Some(Box::new(AffectedRecord {
            by_cause,
            duration: t.duration,
            corrected: t.corrected,
            phases: t.phases.to_vec(),
            iteration_duration: t.iteration_duration,
            steps: t.steps.into_iter().map(|s| s.duration).collect(),
            subs: t
                .subs
                .into_iter()
                .filter_map(|s| match s.value {
                    SubValue::Trend(h) => Some((s.key, h)),
                    _ => None,
                })
                .collect(),
            clean: self.clean.read(),
        }))
    }
}

/// One busy VU; see [`Observers::busy`].
pub struct Busy<'a>(&'a Observers);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.vus_changed(-1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

    #[derive(Default)]
    struct Count {
        requests: AtomicU64,
        dropped: AtomicU64,
        vus: AtomicI64,
        allocated: AtomicU64,
    }

    impl Observer for Count {
        fn request_finished(&self, _: usize, _: &Outcome, _: Duration, _: &[bool]) {
            self.requests.fetch_add(1, Relaxed);
        }
        fn iteration_dropped(&self, _: DropReason, _: usize) {
            self.dropped.fetch_add(1, Relaxed);
        }
        fn vus_changed(&self, delta: i32) {
            self.vus.fetch_add(i64::from(delta), Relaxed);
        }
        fn vus_allocated(&self, n: u32) {
            self.allocated.fetch_max(u64::from(n), Relaxed);
        }
    }

    #[test]
    fn every_event_reaches_the_stats_and_every_observer() {
        let stats = Arc::new(RunStats::new(&[]));
        let (a, b) = (Arc::new(Count::default()), Arc::new(Count::default()));
        let obs = Observers::new(stats.clone(), vec![a.clone(), b.clone()]);
        obs.request_finished(0, None, &Outcome::default(), Duration::ZERO, &[]);
        obs.iteration_dropped(DropReason::Saturated, 0, None);
        obs.iteration_dropped(DropReason::Late, 0, None);
        obs.vus_allocated(3);
        {
            let _one = obs.busy();
            let _two = obs.busy();
            assert_eq!(stats.vus.load(Relaxed), 2);
            assert_eq!(a.vus.load(Relaxed), 2);
        }
        for c in [&a, &b] {
            assert_eq!(c.requests.load(Relaxed), 1);
            assert_eq!(c.dropped.load(Relaxed), 2);
            assert_eq!(c.vus.load(Relaxed), 0);
            assert_eq!(c.allocated.load(Relaxed), 3);
        }
        let s = stats.snapshot(Duration::from_secs(1));
        assert_eq!((s.requests, s.dropped, s.vus, s.vus_max), (1, 2, 0, 3));
        assert_eq!(s.dropped_by(DropReason::Late), 1);
        assert_eq!(s.dropped_by(DropReason::Saturated), 1);
        assert_eq!(s.dropped_by(DropReason::ConnectPaced), 0);
    }

    /// Sent for 80 ms (sloburn held before its last write), then `ms - 80` waiting.
    fn answered(status: u16, error: Option<crate::http::ErrorClass>, ms: u64) -> Outcome {
        Outcome {
            status: (error.is_none() || status > 0).then_some(status),
            error,
            phases: crate::http::Phases {
                sending: Duration::from_millis(80),
                waiting: Duration::from_millis(ms - 80),
                ..Default::default()
            },
            ..Outcome::default()
        }
    }

    #[test]
    fn only_an_answered_request_is_affected_and_every_request_stays_counted() {
        let watch = Arc::new(Starvation::new());
        let began = crate::clock::instant();
        // 80 ms of throttling from the start of every request below.
        watch.episode(Cause::Throttled, began, began + Duration::from_millis(80));
        let stats = Arc::new(RunStats::new(&[]));
        let seen = Arc::new(Count::default());
        let obs = Observers::new(stats.clone(), vec![seen.clone()])
            .with_starvation(watch.clone())
            .keep_affected(RunStats::new(&[]));
        let row = || (None, Sent::default());
        let ok = answered(200, None, 90);
        obs.request_finished_at(0, row(), &ok, Duration::ZERO, &[], began);
        // A 500, a reset and a timeout under the same starvation: always the target's.
        for failed in [
            answered(500, None, 90),
            answered(0, Some(crate::http::ErrorClass::Reset), 90),
            answered(0, Some(crate::http::ErrorClass::Timeout), 90),
        ] {
            obs.request_finished_at(0, row(), &failed, Duration::ZERO, &[], began);
        }
        // A 1 s answer during which sloburn was held 80 ms: the target's.
        let slow = answered(200, None, 1000);
        obs.request_finished_at(0, row(), &slow, Duration::ZERO, &[], began);
        let r = obs.snapshot(Duration::from_secs(1));
        assert_eq!((r.requests, r.iterations, r.failed), (5, 5, 3));
        assert_eq!(r.duration.count(), 3, "every answer's latency is measured");
        assert_eq!(
            seen.requests.load(Relaxed),
            5,
            "every request reaches the others"
        );
        let a = r.affected.as_deref().expect("one affected");
        assert_eq!(a.by_cause, [1, 0, 0]);
        assert_eq!(a.duration.max(), Duration::from_millis(90));
        assert_eq!(watch.totals().affected, [1, 0, 0]);
        // Without a watch nothing is judged.
        let plain = Observers::new(Arc::new(RunStats::new(&[])), Vec::new())
            .keep_affected(RunStats::new(&[]));
        plain.request_finished_at(0, row(), &ok, Duration::ZERO, &[], began);
        assert!(plain.snapshot(Duration::from_secs(1)).affected.is_none());
    }
}
