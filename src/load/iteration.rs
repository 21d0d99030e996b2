//! What an iteration is: a single request or a journey's steps (`Work`), a run's state over its
//! iterations (`RunWork`: data cursors, step numbering, tracing) and a VU's own (`Vu`: its
//! connection, captures). Running one is in `iterate.rs`.
//!
//! Steps are numbered across the run's journeys (`StepId`), in config order, so observers keep
//! per-step figures in flat arrays. A single-request profile is one step named
//! [`SINGLE_STEP`].

use super::event::{SINGLE_STEP, StepInfo};
use crate::checks::Check;
use crate::config::StepSpec;
use crate::http::{Conn, RequestSpec};
use crate::journey::{Cursor, DataSet, Mix, Order, Values};
use crate::telemetry::RunSpan;
use std::sync::Arc;
use std::time::Duration;

/// One step of a journey as the engine sends it: the config's step and its request.
#[derive(Debug, Clone)]
pub struct Step {
    pub spec: StepSpec,
    /// The request, built once, when nothing in it is templated.
    pub fixed: Option<Arc<RequestSpec>>,
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
    pub(super) cursors: Vec<Option<Cursor>>,
    pub(super) step_base: Vec<usize>,
    /// The run's span when tracing is on: each iteration decides (head sampling) whether it
    /// is traced.
    pub trace: Option<RunSpan>,
}

/// A VU's own state between iterations: its connection, its number, reused buffers.
pub struct Vu {
    pub conn: Conn,
    pub id: u64,
    pub(super) captures: Vec<Option<String>>,
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
