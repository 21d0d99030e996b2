//! Running one iteration: a single-request profile's request, or a journey's steps in order
//! (the mix's pick, a data row, templates rendered, captures taken, think times), each request
//! sent on the VU's connection and told to the observers.

use super::event::{IterationResult, Sent, StepFailure};
use super::iteration::{Journey, RunWork, Step, Vu, Walked, Work, build};
use super::observe::Observers;
use crate::checks::{self, Check};
use crate::http::{Conn, Outcome, RequestSpec};
use crate::journey::{Row, Values};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

impl RunWork {
    /// Runs iteration `k` on `vu`. `lateness` (how late it started) goes to its first request.
    pub async fn iteration(
        &self,
        k: u64,
        vu: &mut Vu,
        lateness: Duration,
        events: &Observers,
        cancel: &CancellationToken,
    ) -> Walked {
        match &*self.work {
            Work::Single {
                request, checks, ..
            } => {
                self.single(request, checks, vu, lateness, events).await;
                Walked::Done
            }
            Work::Journeys { journeys, .. } => {
                let at = Start { k, lateness };
                self.walk(journeys, at, vu, events, cancel).await
            }
        }
    }

    /// A single-request profile's iteration: its one request, checked and recorded.
    async fn single(
        &self,
        request: &Arc<RequestSpec>,
        checks: &[Check],
        vu: &mut Vu,
        lateness: Duration,
        events: &Observers,
    ) {
        // One random draw decides; an untraced request is sent as built, untouched.
        let mut traced = self.trace.as_ref().and_then(|r| r.iteration(None));
        let span = traced.as_mut().map(|it| it.request(0));
        let began = crate::clock::instant();
        let outcome = match &span {
            Some(s) => {
                let mut req = RequestSpec::clone(request);
                s.inject(&mut req.headers);
                vu.conn.send(&req).await
            }
            None => vu.conn.send(request).await,
        };
        let results = checks::Results::of(checks, &outcome);
        let row = (None, crate::load::event::Sent::default());
        events.request_finished_at(0, row, &outcome, lateness, results.as_slice(), began);
        if let Some(s) = span {
            finish_span(s, 0, &outcome, checks, &results, events);
        }
        if let Some(it) = traced {
            it.finish();
        }
    }

    /// A journey's iteration: the mix picks the journey, its data file a row, and its steps
    /// run in order until one fails (unless it may), the run is cancelled or the last ends.
    async fn walk(
        &self,
        journeys: &[Arc<Journey>],
        at: Start,
        vu: &mut Vu,
        events: &Observers,
        cancel: &CancellationToken,
    ) -> Walked {
        let j = self.journey_of(at.k);
        let Some(journey) = journeys.get(j) else {
            return Walked::Done;
        };
        let mut traced = self
            .trace
            .as_ref()
            .and_then(|r| r.iteration(Some(&journey.name)));
        let (row, row_index) = match (self.cursors.get(j).and_then(Option::as_ref), &journey.data) {
            (Some(cursor), Some((data, _))) => match cursor.take() {
                Some(i) => (data.row(i), Some(i)),
                None => {
                    events.iteration_finished(j, None, IterationResult::Dropped, Duration::ZERO);
                    return Walked::DataUsedUp(j);
                }
            },
            _ => (None, None),
        };
        vu.captures.clear();
        vu.captures.resize(journey.slots, None);
        let base = self.step_base.get(j).copied().unwrap_or(0);
        let started = crate::clock::tokio_instant();
        let mut result = IterationResult::Ok;
        let (mut sent, mut received) = (0, 0);
        for (i, step) in journey.steps.iter().enumerate() {
            if cancel.is_cancelled() {
                break;
            }
            let place = Place {
                started: crate::clock::tokio_instant(),
                id: base + i,
                row,
                row_index,
                // How late the iteration started goes to its first request only.
                lateness: if i == 0 { at.lateness } else { Duration::ZERO },
            };
            let span = traced.as_mut().map(|it| it.request(place.id));
            let outcome = run_step(step, at.k, &place, vu, span, events).await;
            sent += outcome.bytes_sent;
            received += outcome.bytes_received;
            if outcome.failed {
                result = IterationResult::FailedStep;
                if !step.spec.keep_going {
                    break;
                }
            }
            if let Some(think) = step.spec.think {
                let pause = think.pick(rand::random::<f64>());
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = cancel.cancelled() => break,
                }
            }
        }
        events.iteration_data(j, sent, received);
        events.iteration_finished(j, row_index, result, crate::clock::elapsed(started));
        if let Some(it) = traced {
            it.finish();
        }
        Walked::Done
    }
}

/// Which iteration this is, and how late it started.
#[derive(Clone, Copy)]
struct Start {
    k: u64,
    lateness: Duration,
}

/// Where a journey's step runs: when it began, its `StepId`, the iteration's data row, and the
/// lateness its request carries.
struct Place<'a> {
    started: tokio::time::Instant,
    id: usize,
    row: Option<Row<'a>>,
    row_index: Option<usize>,
    lateness: Duration,
}

/// What a step left its iteration: its bytes, and whether it failed.
struct StepEnd {
    bytes_sent: u64,
    bytes_received: u64,
    failed: bool,
}

/// One step of a journey: its request rendered (or the fixed one) and sent, checked, recorded,
/// its span ended, its captures taken into the user's slots.
async fn run_step(
    step: &Step,
    k: u64,
    place: &Place<'_>,
    vu: &mut Vu,
    span: Option<crate::telemetry::ReqSpan>,
    events: &Observers,
) -> StepEnd {
    let began = crate::clock::instant();
    let outcome = send_step(step, k, place.row, vu, span.as_ref()).await;
    let results = checks::Results::of(&step.spec.checks, &outcome);
    let id = place.id;
    let sent = Sent {
        row: place.row,
        captures: &vu.captures,
    };
    events.request_finished_at(
        id,
        (place.row_index, sent),
        &outcome,
        place.lateness,
        results.as_slice(),
        began,
    );
    if let Some(s) = span {
        finish_span(s, id, &outcome, &step.spec.checks, &results, events);
    }
    let mut failure = None;
    if !checks::verdict(&step.spec.checks, results.as_slice(), &outcome) {
        failure = Some(if results.as_slice().iter().any(|p| !p) {
            StepFailure::Check
        } else {
            StepFailure::Request
        });
    }
    for c in &step.spec.captures {
        match c.source.extract(&outcome) {
            Some(v) => {
                if let Some(slot) = vu.captures.get_mut(c.slot) {
                    *slot = Some(v);
                }
            }
            None => {
                failure.get_or_insert(StepFailure::Capture);
            }
        }
    }
    // k6's group of the step ends here: its think time is in the journey's group only.
    events.step_finished(id, crate::clock::elapsed(place.started));
    if let Some(f) = failure {
        events.step_failed(id, f);
    }
    StepEnd {
        bytes_sent: outcome.bytes_sent,
        bytes_received: outcome.bytes_received,
        failed: failure.is_some(),
    }
}

/// Sends a step's request on the user's connection: the fixed one as built (a copy when a
/// span's context goes into its headers), else rendered from the iteration's values.
async fn send_step(
    step: &Step,
    k: u64,
    row: Option<Row<'_>>,
    vu: &mut Vu,
    span: Option<&crate::telemetry::ReqSpan>,
) -> Outcome {
    let built = match (&step.fixed, span) {
        (Some(req), None) => return send(step, &mut vu.conn, req).await,
        (Some(req), Some(_)) => Some(RequestSpec::clone(req)),
        (None, _) => {
            let values = Values {
                vu: vu.id,
                iter: k,
                now_ms: crate::clock::unix_ms(),
                row,
                captures: &vu.captures,
            };
            build(&step.spec, &values)
        }
    };
    match built {
        Some(mut req) => {
            if let Some(s) = span {
                s.inject(&mut req.headers);
            }
            send(step, &mut vu.conn, &req).await
        }
        // A rendered URL that does not parse, or a header value with a control character:
        // never sent as something else (a header left out), the target never saw it, and the
        // step fails.
        None => Outcome {
            error: Some(crate::http::ErrorClass::Template),
            ..Outcome::default()
        },
    }
}

/// Ends a traced request's span (semantic conventions, phases, the first failed check) and
/// tells the observers its ids, for exemplars.
fn finish_span(
    span: crate::telemetry::ReqSpan,
    step: usize,
    outcome: &Outcome,
    checks: &[Check],
    results: &checks::Results,
    events: &Observers,
) {
    if outcome.status.is_some() {
        events.request_traced(step, outcome, span.trace_id(), span.span_id());
    }
    let failed = checks
        .iter()
        .zip(results.as_slice())
        .find(|(_, ok)| !**ok)
        .map(|(c, _)| c.name.as_str());
    span.finish(outcome, failed);
}

/// Sends `req`, a step's request, on `conn`: as the step's own gRPC call when it has one.
async fn send(step: &Step, conn: &mut Conn, req: &RequestSpec) -> Outcome {
    match &step.spec.grpc {
        Some(spec) => conn.send_grpc(spec, req).await,
        None => conn.send(req).await,
    }
}
