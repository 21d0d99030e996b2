//! Sub-metrics: k6's tag filters (`http_req_duration{status:200}`), recorded only for the
//! filters a run's thresholds name, plus [`EXPECTED_DURATION`], which k6 always reports. A tag a
//! request has from its step (`method`, `group`, `step`, `name`, `scenario`) is decided once per
//! step when the run starts; `status` and `expected_response` per request, without a lock or an
//! allocation. `checks` and `group_duration` filters are sums of the run's own counters, taken
//! when a record is.

use super::event::StepInfo;
use super::pacing::DropReason;
use super::record::{SubRecord, SubValue, k6_phase};
use crate::hist::{HistSnapshot, Histogram};
use crate::http::{Outcome, Phase};
use crate::thresholds::{MetricKind, MetricRef, RateValue, Tag, ThresholdSpec};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// The sub-metric k6 always reports: the duration of requests that did not fail.
pub const EXPECTED_DURATION: &str = "http_req_duration{expected_response:true}";

/// Which samples a sub-metric counts: the tags a request has from its step (`method`, `group`,
/// `step`, `name`, `scenario`) are decided once per step; `status` and `expected_response` per
/// request.
#[derive(Debug, Clone, Default)]
struct Matcher {
    /// Per step (`StepId` order): whether its static tags match.
    steps: Vec<bool>,
    status: Option<u16>,
    expected: Option<bool>,
    /// `check:NAME`.
    check: Option<String>,
}

/// Metrics whose samples k6 writes once per iteration, in the root group: their `group` is
/// `""` whatever the journey.
const ROOT_LEVEL: &[&str] = &[
    "iterations",
    "iteration_duration",
    "data_sent",
    "data_received",
    "dropped_iterations",
];

impl Matcher {
    fn new(metric: &MetricRef, scenario: &str, steps: &[StepInfo]) -> Matcher {
        let mut m = Matcher::default();
        let root = ROOT_LEVEL.contains(&metric.base);
        m.steps = steps
            .iter()
            .map(|step| {
                let group = if root { String::new() } else { step.group() };
                metric.tags.iter().all(|tag| match tag {
                    Tag::Status(_) | Tag::Expected(_) | Tag::Check(_) | Tag::Reason(_) => true,
                    Tag::Method(x) => !root && x.eq_ignore_ascii_case(&step.method),
                    Tag::Scenario(x) => x == scenario,
                    Tag::Group(g) => *g == group,
                    Tag::Step(x) => !root && *x == step.name,
                    Tag::Name(x) => !root && *x == crate::journey::k6_name(&step.url),
                })
            })
            .collect();
        for tag in &metric.tags {
            match tag {
                Tag::Status(s) => m.status = Some(*s),
                Tag::Expected(b) => m.expected = Some(*b),
                Tag::Check(name) => m.check = Some(name.clone()),
                _ => {}
            }
        }
        m
    }

    /// No step's static tags match: the sub-metric stays empty.
    fn never(&self) -> bool {
        !self.steps.iter().any(|ok| *ok)
    }

    /// Whether the sub-metric is the whole metric (only static tags, and every step matched).
    fn is_whole(&self) -> bool {
        self.steps.iter().all(|ok| *ok)
            && self.status.is_none()
            && self.expected.is_none()
            && self.check.is_none()
    }

    fn matches(&self, step: usize, status: u16, failed: bool) -> bool {
        self.steps.get(step).copied().unwrap_or(false)
            && self.status.is_none_or(|s| s == status)
            && self.expected.is_none_or(|e| e != failed)
    }
}

enum SubStore {
    Trend(Histogram),
    Rate {
        hits: AtomicU64,
        total: AtomicU64,
    },
    Counter(AtomicU64),
    /// The whole metric, or nothing (static tags only).
    Derived,
    /// `checks`: the sum of these checks' counts (indices into the run's flat check list).
    Checks(Vec<usize>),
    /// `dropped_iterations{reason:…}`: the drops of these reasons (`DropReason as usize`).
    Dropped(Vec<usize>),
    /// `group_duration`: these groups' durations (indices into the run's groups).
    Groups(Vec<usize>),
}

struct Sub {
    key: String,
    metric: MetricRef,
    matcher: Matcher,
    store: SubStore,
}

/// The sub-metrics a run records.
#[derive(Default)]
pub(super) struct Subs(Vec<Sub>);

impl Subs {
    /// The sub-metrics `thresholds` name, plus k6's [`EXPECTED_DURATION`]: `scenario` (the
    /// profile) and each step (`StepId` order) decide the static tags; `groups` are the run's
    /// k6 group paths, in the order of the durations [`Subs::snapshot`] is given.
    pub(super) fn new(
        thresholds: &[ThresholdSpec],
        scenario: &str,
        steps: &[StepInfo],
        groups: &[String],
    ) -> Subs {
        let mut subs: Vec<Sub> = Vec::new();
        let expected = crate::thresholds::parse_metric(EXPECTED_DURATION).expect("a valid name");
        let wanted = std::iter::once(expected).chain(
            thresholds
                .iter()
                .map(|t| t.threshold.target.clone())
                .filter(|m| !m.tags.is_empty()),
        );
        for metric in wanted {
            let key = metric.key();
            if subs.iter().any(|s| s.key == key) {
                continue;
            }
            let matcher = Matcher::new(&metric, scenario, steps);
            let store = if metric.base == "checks" {
                let names = steps
                    .iter()
                    .enumerate()
                    .flat_map(|(i, st)| st.checks.iter().map(move |c| (i, c.name.as_str())));
                SubStore::Checks(
                    names
                        .enumerate()
                        .filter(|(_, (step, name))| {
                            matcher.steps[*step]
                                && matcher.check.as_deref().is_none_or(|c| c == *name)
                        })
                        .map(|(i, _)| i)
                        .collect(),
                )
            } else if metric.base == "dropped_iterations" && !matcher.never() {
                let reason = metric.tags.iter().find_map(|t| match t {
                    Tag::Reason(r) => Some(r.as_str()),
                    _ => None,
                });
                SubStore::Dropped(
                    DropReason::ALL
                        .into_iter()
                        .filter(|r| reason.is_none_or(|x| x == r.as_str()))
                        .map(|r| r as usize)
                        .collect(),
                )
            } else if metric.base == "group_duration" {
                SubStore::Groups(
                    groups
                        .iter()
                        .enumerate()
                        .filter(|(_, path)| {
                            metric.tags.iter().all(|tag| match tag {
                                Tag::Group(g) => g == *path,
                                Tag::Scenario(x) => x == scenario,
                                _ => false,
                            })
                        })
                        .map(|(i, _)| i)
                        .collect(),
                )
            } else if matcher.is_whole() || matcher.never() {
                SubStore::Derived
            } else {
                match metric.kind {
                    MetricKind::Trend => SubStore::Trend(Histogram::new()),
                    MetricKind::Rate => SubStore::Rate {
                        hits: AtomicU64::new(0),
                        total: AtomicU64::new(0),
                    },
                    MetricKind::Counter | MetricKind::Gauge => SubStore::Counter(AtomicU64::new(0)),
                }
            };
            subs.push(Sub {
                key,
                metric,
                matcher,
                store,
            });
        }
        Subs(subs)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Records one request of `step` (`failed`: as `http_req_failed` counts it) in every
    /// sub-metric that selects it; a journey run's `iteration_duration` comes per iteration.
    pub(super) fn record(&self, step: usize, outcome: &Outcome, failed: bool, journeys: bool) {
        let status = outcome.status.unwrap_or(0);
        for sub in &self.0 {
            if !sub.matcher.matches(step, status, failed)
                || (sub.metric.base == "iteration_duration" && journeys)
            {
                continue;
            }
            match &sub.store {
                SubStore::Trend(h) => {
                    if let Some(d) = trend_sample(sub.metric.base, outcome) {
                        h.record(d);
                    }
                }
                SubStore::Rate { hits, total } => {
                    // `http_req_failed` is the only per-request rate metric with tags.
                    total.fetch_add(1, Relaxed);
                    if failed {
                        hits.fetch_add(1, Relaxed);
                    }
                }
                SubStore::Counter(n) => {
                    let by = match sub.metric.base {
                        "data_sent" => outcome.bytes_sent,
                        "data_received" => outcome.bytes_received,
                        _ => 1,
                    };
                    n.fetch_add(by, Relaxed);
                }
                SubStore::Derived
                | SubStore::Checks(_)
                | SubStore::Dropped(_)
                | SubStore::Groups(_) => {}
            }
        }
    }

    /// The histograms the sub-metrics hold (for a run's memory figure).
    pub(super) fn histograms(&self) -> impl Iterator<Item = &Histogram> {
        self.0.iter().filter_map(|s| match &s.store {
            SubStore::Trend(h) => Some(h),
            _ => None,
        })
    }

    /// Every sub-metric's figures, given the run's `checks` (flat, in check order), each
    /// group's duration (in the order of the `groups` given to [`Subs::new`]) and the drops by
    /// `DropReason as usize`.
    pub(super) fn snapshot(
        &self,
        checks: &[(String, u64, u64)],
        groups: &[HistSnapshot],
        dropped_by: &[u64],
    ) -> Vec<SubRecord> {
        self.0
            .iter()
            .map(|sub| SubRecord {
                key: sub.key.clone(),
                metric: sub.metric.clone(),
                value: match &sub.store {
                    SubStore::Trend(h) => SubValue::Trend(h.snapshot()),
                    SubStore::Rate { hits, total } => SubValue::Rate(RateValue {
                        hits: hits.load(Relaxed),
                        total: total.load(Relaxed),
                    }),
                    SubStore::Counter(n) => SubValue::Counter(n.load(Relaxed)),
                    SubStore::Derived if sub.matcher.never() => SubValue::Empty,
                    SubStore::Derived => SubValue::Whole,
                    SubStore::Checks(idx) if idx.is_empty() => SubValue::Empty,
                    SubStore::Checks(idx) => {
                        let (hits, fails) = idx
                            .iter()
                            .filter_map(|i| checks.get(*i))
                            .fold((0, 0), |(p, f), (_, cp, cf)| (p + cp, f + cf));
                        SubValue::Rate(RateValue {
                            hits,
                            total: hits + fails,
                        })
                    }
                    SubStore::Dropped(idx) => {
                        SubValue::Counter(idx.iter().filter_map(|i| dropped_by.get(*i)).sum())
                    }
                    SubStore::Groups(idx) if idx.is_empty() => SubValue::Empty,
                    SubStore::Groups(idx) => SubValue::Trend(HistSnapshot::merged(
                        idx.iter().filter_map(|i| groups.get(*i)),
                    )),
                },
            })
            .collect()
    }
}

/// The value one request adds to trend metric `base`, if it adds one.
fn trend_sample(base: &str, outcome: &Outcome) -> Option<Duration> {
    let p = &outcome.phases;
    if base == "iteration_duration" {
        return Some(p.total());
    }
    outcome.status?;
    match base {
        "http_req_duration" => Some(p.duration()),
        "http_req_corrected_duration" => Some(p.total()),
        other => {
            let name = other.strip_prefix("http_req_")?;
            Phase::ALL
                .iter()
                .find(|ph| ph.as_str() == name)
                .map(|ph| k6_phase(p, *ph))
        }
    }
}
