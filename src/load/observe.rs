//! How a run tells its observers what happens, as it happens: a request finished, an iteration
//! was dropped, a VU started or stopped, more VUs were allocated.
//!
//! The runner sends every event through one [`Observers`] fan-out: first to the run's own
//! [`RunStats`] (the summary, thresholds, progress), then to whoever else watches (the daemon's
//! `/metrics` series and SLO counters). Nothing polls the run's figures and copies them up.
//! Events are called on the request path: an observer does atomics only, never a lock or an
//! allocation.

use super::event::{IterationResult, Observer, Sent, StepFailure};
use super::pacing::DropReason;
use super::stats::RunStats;
use crate::http::Outcome;
use std::sync::Arc;
use std::time::Duration;

/// The run's stats first, then every other observer.
#[derive(Clone)]
pub struct Observers {
    stats: Arc<RunStats>,
    others: Vec<Arc<dyn Observer>>,
}

impl Observers {
    pub fn new(stats: Arc<RunStats>, others: Vec<Arc<dyn Observer>>) -> Observers {
        Observers { stats, others }
    }

    /// Only the run's own stats (`sloburn run`).
    pub fn stats_only(stats: Arc<RunStats>) -> Observers {
        Observers::new(stats, Vec::new())
    }

    pub fn stats(&self) -> &Arc<RunStats> {
        &self.stats
    }

    /// A request finished; `row` is its iteration's data row (`None` without a data file).
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
        self.stats.request_finished(step, outcome, lateness, checks);
        for o in &self.others {
            o.request_finished_sent(step, row, sent, outcome, lateness, checks);
        }
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
}
