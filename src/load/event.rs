//! What a run tells its observers, as it happens: the [`Observer`] trait and the plain types its
//! events carry (a step's place in the run, why a step failed, how an iteration ended).
//!
//! Every part of the engine that records or walks a run speaks this vocabulary: the iteration
//! sends it, `load::observe` fans it out, `load::stats` and `load::subs` record it, the run
//! record names its counts by it. It imports none of them.
//!
//! Steps are numbered across the run's journeys (`StepId`), in config order, so observers keep
//! per-step figures in flat arrays. A single-request profile is one step named
//! [`SINGLE_STEP`].

use super::pacing::DropReason;
use crate::checks::Check;
use crate::http::Outcome;
use std::time::Duration;

/// The `step` label of a single-request profile's series.
pub const SINGLE_STEP: &str = "request";

/// A step's place in the run: which journey (none for a single request), its name, checks,
/// and what k6 would tag its samples with (method, URL, group).
#[derive(Debug, Clone)]
pub struct StepInfo {
    pub journey: Option<String>,
    pub name: String,
    pub checks: Vec<Check>,
    pub method: String,
    /// k6's `url` tag: the URL as written (templates and references kept), without its user
    /// part and query, where a secret may sit. Its `name` tag is `journey::k6_name` of it.
    pub url: String,
}

impl StepInfo {
    /// k6's group path of the step's samples: `::journey::step`, or `""` (the root group) for a
    /// single request.
    pub fn group(&self) -> String {
        match &self.journey {
            Some(j) => format!("::{j}::{}", self.name),
            None => String::new(),
        }
    }
}

/// How an iteration ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IterationResult {
    /// Every step passed.
    Ok,
    /// A step failed (a check, a capture, the request).
    FailedStep,
    /// Never started (no VU, generator overload, data used up).
    Dropped,
}

impl IterationResult {
    pub const ALL: [IterationResult; 3] = [
        IterationResult::Ok,
        IterationResult::FailedStep,
        IterationResult::Dropped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            IterationResult::Ok => "ok",
            IterationResult::FailedStep => "failed_step",
            IterationResult::Dropped => "dropped",
        }
    }
}

/// Why a step failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepFailure {
    /// A check failed.
    Check,
    /// A capture found nothing.
    Capture,
    /// No good response: a transport error, an unexpected status.
    Request,
}

impl StepFailure {
    pub const ALL: [StepFailure; 3] = [
        StepFailure::Check,
        StepFailure::Capture,
        StepFailure::Request,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StepFailure::Request => "request",
            StepFailure::Check => "check",
            StepFailure::Capture => "capture",
        }
    }
}

/// What an iteration's request carried from its data row and its capture slots: observers
/// that keep a response's text scrub these values from it (`web::evidence`).
#[derive(Clone, Copy, Default)]
pub struct Sent<'a> {
    pub row: Option<crate::journey::Row<'a>>,
    pub captures: &'a [Option<String>],
}

/// Someone who watches a run.
pub trait Observer: Send + Sync {
    /// A request finished. `step` is its step in the run (`load::iteration`; 0 for a single-request
    /// profile); `lateness` is how far behind its intended start it began (zero in
    /// closed-model executors and after a journey's first step); `checks` are its step's check
    /// results, in check order.
    fn request_finished(&self, step: usize, outcome: &Outcome, lateness: Duration, checks: &[bool]);

    /// A traced request finished (after `request_finished`): its span's trace and span ids,
    /// for exemplars. Only sampled requests send it.
    fn request_traced(
        &self,
        _step: usize,
        _outcome: &Outcome,
        _trace_id: opentelemetry::trace::TraceId,
        _span_id: opentelemetry::trace::SpanId,
    ) {
    }

    /// A journey's step failed (and, unless `on_failure: continue`, ended its iteration).
    fn step_failed(&self, _step: usize, _why: StepFailure) {}

    /// A journey's step ended (its request, checks and captures; not the think time after
    /// it): `took` is k6's `group_duration` of the step's group. Single-request profiles send
    /// none.
    fn step_finished(&self, _step: usize, _took: Duration) {}

    /// A journey's iteration ended, just before `iteration_finished` (a dropped one sends
    /// none): the bytes its requests sent and received. k6 writes `data_sent` and
    /// `data_received` once per iteration.
    fn iteration_data(&self, _journey: usize, _sent: u64, _received: u64) {}

    /// A journey's iteration ended: `journey` is its index in the mix, `took` its time from
    /// its first request to its end, think times included. Single-request profiles send none.
    fn iteration_finished(&self, _journey: usize, _result: IterationResult, _took: Duration) {}

    /// An arrival-rate iteration was dropped, and why (`DropReason`: a saturated target, whose
    /// SLOs count a user turned away as a bad event, or sloburn falling behind). `journey` is
    /// the journey it would have walked (0 for a single request).
    fn iteration_dropped(&self, _reason: DropReason, _journey: usize) {}

    /// `request_finished` of an iteration that walked data row `row` (`None` without a data
    /// file). Observers that split events by row (a grouped SLO's watchers) take this one;
    /// the rest get `request_finished`.
    fn request_finished_in_row(
        &self,
        step: usize,
        _row: Option<usize>,
        outcome: &Outcome,
        lateness: Duration,
        checks: &[bool],
    ) {
        self.request_finished(step, outcome, lateness, checks);
    }

    /// `request_finished_in_row` with what the request carried from its iteration's data row
    /// and captures ([`Sent`]). Observers that keep response text take this one.
    fn request_finished_sent(
        &self,
        step: usize,
        row: Option<usize>,
        _sent: Sent<'_>,
        outcome: &Outcome,
        lateness: Duration,
        checks: &[bool],
    ) {
        self.request_finished_in_row(step, row, outcome, lateness, checks);
    }

    /// An answered request whose latency sloburn's own CPU starvation explains
    /// (`starve::Starvation::judge`): **generator-affected**. It is in every count as any
    /// request; only its latency leaves the verdicts, so it is no latency SLO event unless it
    /// met the objective anyway. By default told as any request (`request_finished_sent`).
    #[allow(clippy::too_many_arguments)]
    fn request_affected(
        &self,
        step: usize,
        row: Option<usize>,
        sent: Sent<'_>,
        outcome: &Outcome,
        lateness: Duration,
        checks: &[bool],
        _cause: crate::starve::Cause,
    ) {
        self.request_finished_sent(step, row, sent, outcome, lateness, checks);
    }

    /// `iteration_finished` with the iteration's data row, as `request_finished_in_row`.
    fn iteration_finished_in_row(
        &self,
        journey: usize,
        _row: Option<usize>,
        result: IterationResult,
        took: Duration,
    ) {
        self.iteration_finished(journey, result, took);
    }

    /// `iteration_dropped` with the data row the iteration would have taken, as far as it is
    /// known (`RunWork::row_of_dropped`).
    fn iteration_dropped_in_row(&self, reason: DropReason, journey: usize, _row: Option<usize>) {
        self.iteration_dropped(reason, journey);
    }

    /// One more VU is busy (`+1`) or one is idle again (`-1`).
    fn vus_changed(&self, _delta: i32) {}

    /// The run has allocated `n` VUs so far (it only grows during a run).
    fn vus_allocated(&self, _n: u32) {}
}
