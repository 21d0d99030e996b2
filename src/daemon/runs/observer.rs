//! A daemon run's observer: each request and drop to the profile's `/metrics` series and
//! the SLO watchers, and the run's live capture (scatter, figures, series ring).

use crate::budget::{Scope, Watcher};
use crate::checks::Check;
use crate::daemon::state::Shared;
use crate::http::Outcome;
use crate::load::event::{IterationResult, Observer, StepFailure};
use crate::load::pacing::DropReason;
use crate::metrics::ProfileMetrics;
use crate::web::Sample;
use std::sync::Arc;
use std::time::Duration;

/// A daemon run's observer: the profile's `/metrics` series and every SLO watching its traffic.
pub(super) struct Live {
    pub(super) clock: crate::clock::Clock,
    pub(super) metrics: Arc<ProfileMetrics>,
    pub(super) watchers: Vec<Watcher>,
    /// Each step's checks (`load::iteration` numbering).
    pub(super) checks: Vec<Vec<Check>>,
    /// Each step's journey, by its index in the mix's journeys (0 for a single request).
    pub(super) step_journey: Vec<usize>,
}

impl Observer for Live {
    fn request_finished(
        &self,
        step: usize,
        outcome: &Outcome,
        lateness: Duration,
        results: &[bool],
    ) {
        self.request_finished_in_row(step, None, outcome, lateness, results);
    }

    fn request_finished_in_row(
        &self,
        step: usize,
        row: Option<usize>,
        outcome: &Outcome,
        lateness: Duration,
        results: &[bool],
    ) {
        self.metrics.observe_step(step, outcome, lateness, results);
        let checks = self.checks.get(step).map_or(&[][..], Vec::as_slice);
        for w in self.watchers.iter().filter(|w| w.counts_step(step)) {
            w.observe(outcome, row, checks, results);
        }
    }

    fn step_failed(&self, step: usize, why: StepFailure) {
        self.metrics.step_failed(step, why as usize);
    }

    fn request_traced(
        &self,
        step: usize,
        outcome: &Outcome,
        trace_id: opentelemetry::trace::TraceId,
        span_id: opentelemetry::trace::SpanId,
    ) {
        let took = outcome.duration().as_secs_f64();
        self.metrics.exemplar(step, took, trace_id, span_id);
    }

    fn iteration_finished(&self, journey: usize, result: IterationResult, took: Duration) {
        self.iteration_finished_in_row(journey, None, result, took);
    }

    fn iteration_finished_in_row(
        &self,
        journey: usize,
        row: Option<usize>,
        result: IterationResult,
        took: Duration,
    ) {
        self.metrics
            .iteration_finished(journey, result as usize, took);
        for w in &self.watchers {
            w.iteration(journey, row, result, took);
        }
    }

    fn iteration_dropped(&self, reason: DropReason, journey: usize) {
        self.iteration_dropped_in_row(reason, journey, None);
    }

    fn iteration_dropped_in_row(&self, reason: DropReason, journey: usize, row: Option<usize>) {
        // A drop of the generator's own is never an SLO event.
        if reason.is_generator() {
            self.metrics
                .generator_overloaded(self.clock.unix_secs() as u64);
            return;
        }
        // A user turned away by a saturated target: a bad event for each SLO that would have
        // counted the journey (or a step of it) the user was to walk.
        self.metrics.saturated();
        for w in &self.watchers {
            let counts = match w.scope {
                Scope::Requests => true,
                Scope::Step(s) => self.step_journey.get(s) == Some(&journey),
                Scope::Journey(j) => j == journey,
            };
            if counts {
                w.turned_away(row);
            }
        }
    }

    fn vus_changed(&self, delta: i32) {
        self.metrics.add_vus(delta);
    }

    fn vus_allocated(&self, n: u32) {
        self.metrics.raise_vus_max(n);
    }
}

/// The recorder's once-a-second callback: the run's live figures and, every 10 s, a point of
/// the profile's series ring.
pub(super) fn on_sample(
    shared: &Arc<Shared>,
    profile: &str,
    id: u64,
) -> crate::web::recording::OnSample {
    let shared = Arc::downgrade(shared);
    let profile = profile.to_string();
    Arc::new(move |sample: Sample| {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if let Ok(mut series) = shared.series.lock() {
            let s = series.entry(profile.clone()).or_default();
            s.live = Some((id, sample.live));
            s.ring.extend(sample.slot);
        }
    })
}
