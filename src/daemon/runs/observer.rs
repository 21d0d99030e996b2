//! A daemon run's observer: each request and drop to the profile's `/metrics` series and
//! the SLO watchers, and the run's live capture (scatter, figures, series ring).

use crate::budget::{Scope, Watcher};
use crate::checks::Check;
use crate::daemon::state::Shared;
use crate::hist::Histogram;
use crate::http::Outcome;
use crate::load::event::{IterationResult, Observer, Sent, StepFailure};
use crate::load::pacing::DropReason;
use crate::load::series::{Series, StepHists};
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
        self.observe(step, row, outcome, lateness, results, false);
    }

    /// In the profile's series as measured; a latency SLO counts it only when it met the
    /// objective anyway (`Watcher::observe_judged`).
    fn request_affected(
        &self,
        step: usize,
        row: Option<usize>,
        _: Sent<'_>,
        outcome: &Outcome,
        lateness: Duration,
        results: &[bool],
        _: crate::starve::Cause,
    ) {
        self.observe(step, row, outcome, lateness, results, true);
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

impl Live {
    fn observe(
        &self,
        step: usize,
        row: Option<usize>,
        outcome: &Outcome,
        lateness: Duration,
        results: &[bool],
        affected: bool,
    ) {
        self.metrics.observe_step(step, outcome, lateness, results);
        let checks = self.checks.get(step).map_or(&[][..], Vec::as_slice);
        for w in self.watchers.iter().filter(|w| w.counts_step(step)) {
            w.observe_judged(outcome, row, checks, results, affected);
        }
    }
}

/// A daemon run reads its latencies from the profile's series (`load::series`): the series
/// record each request once, for `/metrics` and for the run.
impl Series for ProfileMetrics {
    fn step(&self, step: usize) -> Option<StepHists<'_>> {
        let (duration, corrected, phases) = self.step_histograms(step)?;
        Some(StepHists {
            duration,
            corrected,
            phases,
        })
    }

    fn lateness(&self) -> &Histogram {
        self.lateness_histogram()
    }

    fn journey(&self, journey: usize) -> Option<&Histogram> {
        self.journey_histogram(journey)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::CheckKind;
    use crate::hist::records_on_this_thread;
    use crate::http::{ErrorClass, Phases};
    use crate::load::event::StepInfo;
    use crate::load::observe::Observers;
    use crate::load::record::RunRecord;
    use crate::load::stats::RunStats;
    use crate::metrics::{Metrics, StepLayout};

    fn steps(journeys: bool) -> (Vec<StepInfo>, Vec<String>) {
        let check = Check {
            name: "ok".into(),
            kind: CheckKind::Status(vec![(200, 200)]),
        };
        let step = |journey: Option<&str>, name: &str| StepInfo {
            journey: journey.map(String::from),
            name: name.into(),
            checks: vec![check.clone()],
            method: "GET".into(),
            url: format!("http://shop/{name}"),
        };
        if !journeys {
            return (vec![step(None, "request")], Vec::new());
        }
        let steps = vec![
            step(Some("buy"), "login"),
            step(Some("buy"), "cart"),
            step(Some("browse"), "home"),
        ];
        (steps, vec!["buy".into(), "browse".into()])
    }

    /// Sub-metrics of figures the series hold and of those the run keeps.
    fn thresholds() -> Vec<crate::thresholds::ThresholdSpec> {
        [
            ("http_req_duration{status:200}", "p(95)<1"),
            ("http_req_blocked{step:cart}", "p(95)<1"),
            ("group_duration{group:::buy}", "p(95)<1"),
            ("iteration_duration{scenario:shop}", "p(95)<1"),
        ]
        .into_iter()
        .map(|(m, e)| crate::thresholds::ThresholdSpec::parse(m, e, false, None).unwrap())
        .collect()
    }

    /// A daemon run's observers as `runs::execute` wires them: the live series and, with
    /// `on_series`, the run's stats reading them (else recording their own, as before).
    fn daemon_run(
        pm: &Arc<ProfileMetrics>,
        journeys: bool,
        on_series: bool,
        thresholds: &[crate::thresholds::ThresholdSpec],
    ) -> (Arc<RunStats>, Observers) {
        let (steps, names) = steps(journeys);
        let mut stats = RunStats::for_work(&steps, &names, thresholds, "shop");
        if on_series {
            stats = stats.on_series(pm.clone());
        }
        let stats = Arc::new(stats);
        let live = Live {
            clock: crate::clock::Clock::system(),
            metrics: pm.clone(),
            watchers: Vec::new(),
            checks: steps.iter().map(|s| s.checks.clone()).collect(),
            step_journey: vec![0; steps.len()],
        };
        let others: Vec<Arc<dyn Observer>> = vec![Arc::new(live)];
        (stats.clone(), Observers::new(stats, others))
    }

    fn series(m: &Metrics, journeys: bool) -> Arc<ProfileMetrics> {
        let (steps, names) = steps(journeys);
        let layout: Vec<StepLayout> = steps
            .iter()
            .map(|s| StepLayout {
                journey: s.journey.clone(),
                step: s.name.clone(),
                checks: vec!["ok".into()],
            })
            .collect();
        m.profile_steps("t", "shop", &[0.005, 0.05, 0.5], &layout, &names)
    }

    /// Request `i`: mostly 200s over a spread of latencies, some 500s, some without a status,
    /// a DNS lookup on every fifth (k6's blocked holds it, the series' blocked does not).
    fn outcome(i: u64) -> Outcome {
        let (status, error) = match i % 11 {
            0 => (None, Some(ErrorClass::Timeout)),
            1 => (Some(500), None),
            _ => (Some(200), None),
        };
        let us = Duration::from_micros;
        Outcome {
            phases: Phases {
                blocked: us(i % 7),
                dns: if i.is_multiple_of(5) {
                    us(300 + i)
                } else {
                    Duration::ZERO
                },
                connecting: us(i % 3 * 100),
                waiting: us(1_000 + (i * 7919) % 200_000),
                receiving: us(20 + i % 50),
                ..Phases::default()
            },
            status,
            error,
            ..Outcome::default()
        }
    }

    /// `n` iterations from `from`: a single request each, or each journey walked in turn (a
    /// failed step, a drop now and then).
    fn drive(events: &Observers, journeys: bool, from: u64, n: u64) {
        let ms = Duration::from_millis;
        for i in from..from + n {
            let o = outcome(i);
            let ok = [o.status == Some(200)];
            if !journeys {
                events.request_finished(0, None, &o, ms(i % 4), &ok);
                continue;
            }
            if i.is_multiple_of(9) {
                events.iteration_finished((i % 2) as usize, None, IterationResult::Dropped, ms(0));
                continue;
            }
            let walk: &[usize] = if i.is_multiple_of(2) { &[0, 1] } else { &[2] };
            for (k, &step) in walk.iter().enumerate() {
                let late = if k == 0 { ms(i % 4) } else { Duration::ZERO };
                events.request_finished(step, None, &outcome(i + k as u64), late, &ok);
                events.step_finished(step, ms(3 + i % 20));
            }
            let result = if ok[0] {
                IterationResult::Ok
            } else {
                IterationResult::FailedStep
            };
            events.iteration_finished((i % 2) as usize, None, result, ms(5 + i % 40));
        }
    }

    fn json(r: &RunRecord) -> serde_json::Value {
        serde_json::to_value(r).unwrap()
    }

    /// Issue 42: a daemon request's latencies go into the profile's series once, and the run's
    /// figures are read from them. Before, the run's stats recorded the same latencies again:
    /// 24 histogram records for one response, where 13 remain: the series' duration, corrected
    /// duration, seven phases and lateness, and the run's own k6 `http_req_blocked` (with DNS),
    /// `http_req_duration{expected_response:true}` and its status class's duration (the run
    /// record's `classes`, which no series holds).
    #[test]
    fn a_daemon_request_is_recorded_once() {
        let count = |on_series: bool| {
            let m = Metrics::new("test");
            let pm = series(&m, false);
            let (_, events) = daemon_run(&pm, false, on_series, &[]);
            let o = outcome(2);
            let before = records_on_this_thread();
            events.request_finished(0, None, &o, Duration::from_millis(1), &[true]);
            records_on_this_thread() - before
        };
        assert_eq!(count(false), 24, "the run's stats recording their own copy");
        assert_eq!(count(true), 13);
    }

    /// The run's record read from the series is the record its own histograms made (exact
    /// counts, sums, extremes and quantiles), for two runs one after the other on the same
    /// series, while the series keep counting both (`/metrics` only grows).
    #[test]
    fn a_daemon_runs_figures_read_from_the_series_are_its_own() {
        for journeys in [false, true] {
            let m = Metrics::new("test");
            let pm = series(&m, journeys);
            for (run, from) in [(1, 0), (2, 500)] {
                let (stats, events) = daemon_run(&pm, journeys, true, &thresholds());
                let (steps, names) = steps(journeys);
                let own = Arc::new(RunStats::for_work(&steps, &names, &thresholds(), "shop"));
                let alone = Observers::stats_only(own.clone());
                drive(&events, journeys, from, 400);
                drive(&alone, journeys, from, 400);
                let (got, want) = (stats.snapshot(ONE_SECOND), own.snapshot(ONE_SECOND));
                assert!(got.requests >= 400, "{}", got.requests);
                assert_eq!(
                    got.subs.len(),
                    5,
                    "four sub-metrics and k6's expected_response"
                );
                assert_eq!(json(&got), json(&want), "run {run}, journeys: {journeys}");
                assert_eq!(stats.duration(), want.duration);
            }
            let first = pm.step_histograms(0).unwrap().0.snapshot();
            let (stats, events) = daemon_run(&pm, journeys, false, &[]);
            drive(&events, journeys, 0, 400);
            drive(&events, journeys, 500, 400);
            let both = stats.snapshot(ONE_SECOND).steps[0].duration.count();
            assert_eq!(first.count(), both, "the series count both runs");
        }
    }

    const ONE_SECOND: Duration = Duration::from_secs(1);
}
