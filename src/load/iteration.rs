//! What one iteration does: send one request (a single-request profile), or walk one journey's
//! steps in order, with captures, templates, data rows and think times.
//!
//! Steps are numbered across the run's journeys (`StepId`), in config order, so observers keep
//! per-step figures in flat arrays. A single-request profile is one step named
//! [`SINGLE_STEP`].

use super::event::{IterationResult, SINGLE_STEP, StepFailure, StepInfo};
use super::observe::Observers;
use crate::checks::{self, Check};
use crate::config::StepSpec;
use crate::http::{Conn, Outcome, RequestSpec};
use crate::journey::{Cursor, DataSet, Mix, Order, Values};
use crate::telemetry::RunSpan;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// One step of a journey as the engine sends it: the config's step and its request.
#[derive(Debug, Clone)]
pub struct Step {
    pub spec: StepSpec,
    /// The request, built once, when nothing in it is templated.
    pub fixed: Option<Arc<RequestSpec>>,
}

impl Step {
    /// Sends `req`, the step's request, on `conn`: as the step's own gRPC call when it has one.
    async fn send(&self, conn: &mut Conn, req: &RequestSpec) -> Outcome {
        match &self.spec.grpc {
            Some(spec) => conn.send_grpc(spec, req).await,
            None => conn.send(req).await,
        }
    }
}

/// A journey as the engine walks it.
#[derive(Debug, Clone)]
pub struct Journey {
    pub name: String,
    pub steps: Vec<Step>,
    pub data: Option<(Arc<DataSet>, Order)>,
    /// How many capture slots an iteration needs.
    pub slots: usize,
}

/// What each iteration of a run does.
#[derive(Debug, Clone)]
pub enum Work {
    Single {
        request: Arc<RequestSpec>,
        checks: Arc<Vec<Check>>,
        /// The target's URL as written, for spans.
        display_url: Arc<str>,
    },
    Journeys {
        journeys: Vec<Arc<Journey>>,
        mix: Mix,
    },
}

/// A URL as k6's `url` and `name` tags may show it: no user part, no query, no fragment.
pub fn tag_url(written: &str) -> String {
    let base = written.split(['?', '#']).next().unwrap_or(written);
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[after_scheme..]
        .find('/')
        .map_or(base.len(), |i| after_scheme + i);
    match base[after_scheme..authority_end].rfind('@') {
        Some(at) => format!(
            "{}{}",
            &base[..after_scheme],
            &base[after_scheme + at + 1..]
        ),
        None => base.to_string(),
    }
}

impl Work {
    pub fn single(request: RequestSpec, checks: Vec<Check>, display_url: &str) -> Work {
        Work::Single {
            request: Arc::new(request),
            checks: Arc::new(checks),
            display_url: Arc::from(display_url),
        }
    }

    /// Every step of the run in `StepId` order.
    pub fn steps(&self) -> Vec<StepInfo> {
        match self {
            Work::Single {
                request,
                checks,
                display_url,
            } => vec![StepInfo {
                journey: None,
                name: SINGLE_STEP.into(),
                checks: checks.to_vec(),
                method: request.method.to_string(),
                url: tag_url(display_url),
            }],
            Work::Journeys { journeys, .. } => journeys
                .iter()
                .flat_map(|j| {
                    j.steps.iter().map(|s| StepInfo {
                        journey: Some(j.name.clone()),
                        name: s.spec.name.clone(),
                        checks: s.spec.checks.clone(),
                        method: s.spec.method.to_string(),
                        url: tag_url(&s.spec.display_url),
                    })
                })
                .collect(),
        }
    }

    /// What each step sends, in `StepId` order, for its spans.
    pub fn span_steps(&self) -> Vec<crate::telemetry::StepDesc<'_>> {
        match self {
            Work::Single {
                request,
                display_url,
                ..
            } => vec![crate::telemetry::StepDesc {
                method: request.method.as_str(),
                display_url,
                step: None,
            }],
            Work::Journeys { journeys, .. } => journeys
                .iter()
                .flat_map(|j| {
                    j.steps.iter().map(|s| crate::telemetry::StepDesc {
                        method: s.spec.method.as_str(),
                        display_url: &s.spec.display_url,
                        step: Some(&s.spec.name),
                    })
                })
                .collect(),
        }
    }

    /// The journeys' names, in mix order (empty for a single request).
    pub fn journey_names(&self) -> Vec<String> {
        match self {
            Work::Single { .. } => Vec::new(),
            Work::Journeys { journeys, .. } => journeys.iter().map(|j| j.name.clone()).collect(),
        }
    }

    /// Whether an iteration is one request.
    pub fn is_single(&self) -> bool {
        matches!(self, Work::Single { .. })
    }

    /// The shortest and longest think time of one iteration (the sum over its steps).
    pub fn think_bounds(&self) -> (Duration, Duration) {
        match self {
            Work::Single { .. } => (Duration::ZERO, Duration::ZERO),
            Work::Journeys { journeys, .. } => {
                let sums = journeys.iter().map(|j| {
                    j.steps
                        .iter()
                        .filter_map(|s| s.spec.think)
                        .fold((Duration::ZERO, Duration::ZERO), |(lo, hi), t| {
                            (lo + t.min, hi + t.max)
                        })
                });
                sums.fold((Duration::MAX, Duration::ZERO), |(lo, hi), (a, b)| {
                    (lo.min(a), hi.max(b))
                })
            }
        }
    }
}

/// A run's work with its per-run state: the data cursors and each journey's first `StepId`.
pub struct RunWork {
    pub work: Arc<Work>,
    cursors: Vec<Option<Cursor>>,
    step_base: Vec<usize>,
    /// The run's span when tracing is on: each iteration decides (head sampling) whether it
    /// is traced.
    pub trace: Option<RunSpan>,
}

/// A VU's own state between iterations: its connection, its number, reused buffers.
pub struct Vu {
    pub conn: Conn,
    pub id: u64,
    captures: Vec<Option<String>>,
}

impl Vu {
    pub fn new(conn: Conn, id: u64) -> Vu {
        Vu {
            conn,
            id,
            captures: Vec::new(),
        }
    }
}

/// What happened when an iteration was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walked {
    Done,
    /// A `unique` data file has no rows left: the run should end (the journey's name index).
    DataUsedUp(usize),
}

impl RunWork {
    pub fn new(work: Arc<Work>) -> RunWork {
        let (cursors, step_base) = match &*work {
            Work::Single { .. } => (vec![None], vec![0]),
            Work::Journeys { journeys, .. } => {
                let mut base = 0;
                let bases = journeys
                    .iter()
                    .map(|j| {
                        let b = base;
                        base += j.steps.len();
                        b
                    })
                    .collect();
                let cursors = journeys
                    .iter()
                    .map(|j| j.data.as_ref().map(|(d, o)| Cursor::new(*o, d.len())))
                    .collect();
                (cursors, bases)
            }
        };
        RunWork {
            work,
            cursors,
            step_base,
            trace: None,
        }
    }

    /// Rows taken from each journey's data file so far (`None` without one).
    pub fn rows_taken(&self) -> Vec<Option<u64>> {
        self.cursors
            .iter()
            .map(|c| c.as_ref().map(Cursor::taken))
            .collect()
    }

    /// The data row an arrival `k` of journey `j` that was dropped before it took one stands
    /// for: `k` over the file's rows, so each group of rows gets its share of the drops (a
    /// grouped SLO counts a user turned away in one group). `None` without a data file.
    pub fn row_of_dropped(&self, k: u64, j: usize) -> Option<usize> {
        let Work::Journeys { journeys, .. } = &*self.work else {
            return None;
        };
        let (data, _) = journeys.get(j)?.data.as_ref()?;
        let rows = u64::try_from(data.len()).ok().filter(|n| *n > 0)?;
        usize::try_from(k % rows).ok()
    }

    /// The journey iteration `k` walks.
    pub fn journey_of(&self, k: u64) -> usize {
        match &*self.work {
            Work::Single { .. } => 0,
            Work::Journeys { mix, .. } => mix.pick(k),
        }
    }

    /// Runs iteration `k` on `vu`. `lateness` (how late it started) goes to its first request.
    pub async fn iteration(
        &self,
        k: u64,
        vu: &mut Vu,
        lateness: Duration,
        events: &Observers,
        cancel: &CancellationToken,
    ) -> Walked {
        let journeys = match &*self.work {
            Work::Single {
                request,
                checks,
                display_url: _,
            } => {
                // One random draw decides; an untraced request is sent as built, untouched.
                let mut traced = self.trace.as_ref().and_then(|r| r.iteration(None));
                let span = traced.as_mut().map(|it| it.request(0));
                let outcome = match &span {
                    Some(s) => {
                        let mut req = RequestSpec::clone(request);
                        s.inject(&mut req.headers);
                        vu.conn.send(&req).await
                    }
                    None => vu.conn.send(request).await,
                };
                let results = checks::Results::of(checks, &outcome);
                events.request_finished(0, None, &outcome, lateness, results.as_slice());
                if let Some(s) = span {
                    finish_span(s, 0, &outcome, checks, &results, events);
                }
                if let Some(it) = traced {
                    it.finish();
                }
                return Walked::Done;
            }
            Work::Journeys { journeys, .. } => journeys,
        };
        let j = self.journey_of(k);
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
            let step_started = crate::clock::tokio_instant();
            let values = Values {
                vu: vu.id,
                iter: k,
                now_ms: crate::clock::unix_ms(),
                row,
                captures: &vu.captures,
            };
            let span = traced.as_mut().map(|it| it.request(base + i));
            let outcome = match (&step.fixed, &span) {
                (Some(req), None) => step.send(&mut vu.conn, req).await,
                (Some(req), Some(s)) => {
                    let mut req = RequestSpec::clone(req);
                    s.inject(&mut req.headers);
                    step.send(&mut vu.conn, &req).await
                }
                (None, _) => match build(&step.spec, &values) {
                    Some(mut req) => {
                        if let Some(s) = &span {
                            s.inject(&mut req.headers);
                        }
                        step.send(&mut vu.conn, &req).await
                    }
                    // A rendered URL that does not parse, or a header value with a control
                    // character: never sent as something else (a header left out), the
                    // target never saw it, and the step fails.
                    None => Outcome {
                        error: Some(crate::http::ErrorClass::Template),
                        ..Outcome::default()
                    },
                },
            };
            sent += outcome.bytes_sent;
            received += outcome.bytes_received;
            let results = checks::Results::of(&step.spec.checks, &outcome);
            let first = if i == 0 { lateness } else { Duration::ZERO };
            events.request_finished(base + i, row_index, &outcome, first, results.as_slice());
            if let Some(s) = span {
                finish_span(s, base + i, &outcome, &step.spec.checks, &results, events);
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
            events.step_finished(base + i, crate::clock::elapsed(step_started));
            if let Some(f) = failure {
                events.step_failed(base + i, f);
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

/// Renders a templated step into a request; `None` when the URL does not parse or a header's
/// value is no valid header value (CR, LF or another control character from a value): the
/// request as configured cannot be sent, and a request without that header would be another.
pub(super) fn build(step: &StepSpec, values: &Values<'_>) -> Option<RequestSpec> {
    let mut text = String::with_capacity(64);
    step.url.render(values, &mut text);
    let uri: http::Uri = text.parse().ok()?;
    let mut headers = http::HeaderMap::with_capacity(step.headers.len());
    for (name, t) in &step.headers {
        text.clear();
        t.render(values, &mut text);
        let mut v = http::HeaderValue::from_str(&text).ok()?;
        v.set_sensitive(t.sensitive || t.carries_values());
        headers.insert(name.clone(), v);
    }
    let body = match &step.body {
        Some(t) => {
            let mut b = String::new();
            t.render(values, &mut b);
            bytes::Bytes::from(b)
        }
        None => bytes::Bytes::new(),
    };
    Some(RequestSpec {
        method: step.method.clone(),
        uri,
        headers,
        body,
    })
}
