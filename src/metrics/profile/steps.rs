//! A journey's series: the per-step layout, step counters and the journey's iteration results.

use crate::hist::Histogram;
use crate::http::{Outcome, Phase};
use crate::metrics::text::label_set;
use crate::metrics::wire::Labels;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::*;

/// One step of a profile (`load::iteration`): what its series are called and which checks it has.
#[derive(Debug, Clone, PartialEq)]
pub struct StepLayout {
    /// The journey; `None` for a single-request profile (its series carry no `journey`).
    pub journey: Option<String>,
    pub step: String,
    pub checks: Vec<String>,
}

impl StepLayout {
    /// The one step of a single-request profile.
    pub fn single(checks: &[String]) -> StepLayout {
        StepLayout {
            journey: None,
            step: "request".into(),
            checks: checks.to_vec(),
        }
    }
}

/// The labels of `sloburn_journey_step_failures_total`, in `failures` order.
pub const STEP_FAILURE_REASONS: [&str; 3] = ["check", "capture", "request"];

/// The labels of `sloburn_journey_iterations_total`, in `results` order.
pub const ITERATION_RESULTS: [&str; 3] = ["ok", "failed_step", "dropped"];

/// The per-request series of one step.
#[derive(Debug)]
pub(crate) struct StepSeries {
    pub layout: StepLayout,
    /// `target="..",profile="..",[journey="..",]step=".."`, escaped once.
    pub labels: Labels,
    /// The same with `,phase=".."`, in [`PHASES_BY_LABEL`] order.
    pub phase_labels: [Labels; 7],
    pub duration: Histogram,
    /// The latest sampled request per `duration` bucket (OpenMetrics exemplars), made at the
    /// first: a daemon without tracing holds none, and a scrape then reads none of them.
    pub(super) duration_exemplars: OnceLock<Box<[crate::metrics::exemplar::Slot]>>,
    /// Every phase of the request (`Phases::total`): the latency the user saw, without the
    /// generator's own lateness.
    pub corrected: Histogram,
    /// Indexed by `Phase as usize`.
    pub phases: [Histogram; 7],
    pub(super) reqs: ReqTable,
    /// For each check result index, its counter slot (duplicate names share one).
    pub(super) check_slot: Vec<usize>,
    /// One `[pass, fail]` pair per distinct check name, sorted by name.
    pub(super) checks: Box<[[AtomicU64; 2]]>,
    /// The label set with `,check=".."` per slot.
    pub check_labels: Vec<Labels>,
    /// Failed journey steps by [`STEP_FAILURE_REASONS`].
    pub failures: [AtomicU64; 3],
    pub failure_labels: [Labels; 3],
}

/// One journey's iteration series.
#[derive(Debug)]
pub(crate) struct JourneySeries {
    /// `target="..",profile="..",journey=".."`.
    pub labels: Labels,
    /// Iteration duration: first request to end, think times included.
    pub duration: Histogram,
    /// By [`ITERATION_RESULTS`].
    pub results: [AtomicU64; 3],
    pub result_labels: [Labels; 3],
}

impl StepSeries {
    pub(super) fn new(
        target: &str,
        profile: &str,
        layout: &StepLayout,
        bounds: &Bounds,
    ) -> StepSeries {
        let mut base: Vec<(&str, &str)> = vec![("target", target), ("profile", profile)];
        if let Some(j) = &layout.journey {
            base.push(("journey", j));
        }
        base.push(("step", &layout.step));
        let with = |k: &'static str, v: &str| {
            let mut l = base.clone();
            l.push((k, v));
            Labels::new(label_set(&l))
        };
        let mut distinct: Vec<&String> = layout.checks.iter().collect();
        distinct.sort();
        distinct.dedup();
        let check_slot = layout
            .checks
            .iter()
            .map(|c| distinct.binary_search(&c).unwrap_or(0))
            .collect();
        StepSeries {
            labels: Labels::new(label_set(&base)),
            phase_labels: PHASES_BY_LABEL.map(|p| with("phase", p.as_str())),
            duration: bounds.histogram(),
            duration_exemplars: OnceLock::new(),
            corrected: bounds.histogram(),
            phases: std::array::from_fn(|_| bounds.histogram()),
            reqs: ReqTable::new(),
            check_slot,
            checks: distinct
                .iter()
                .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
                .collect(),
            check_labels: distinct.iter().map(|c| with("check", c)).collect(),
            failures: std::array::from_fn(|_| AtomicU64::new(0)),
            failure_labels: STEP_FAILURE_REASONS.map(|r| with("reason", r)),
            layout: layout.clone(),
        }
    }

    pub(super) fn observe(&self, outcome: &Outcome, results: &[bool]) {
        self.reqs.add(outcome.status, outcome.error);
        if outcome.status.is_some() {
            self.duration.record(outcome.duration());
            self.corrected.record(outcome.phases.total());
            for phase in Phase::ALL {
                if let Some(h) = self.phases.get(phase as usize) {
                    h.record(outcome.phases.get(phase));
                }
            }
        }
        for (&slot, &passed) in self.check_slot.iter().zip(results) {
            if let Some(pair) = self.checks.get(slot) {
                pair[usize::from(!passed)].fetch_add(1, Relaxed);
            }
        }
    }

    /// The exemplar slots per `duration` bucket, once a sampled request wrote one.
    pub(crate) fn exemplars(&self) -> Option<&[crate::metrics::exemplar::Slot]> {
        self.duration_exemplars.get().map(|s| &s[..])
    }

    pub(crate) fn reqs(&self) -> Vec<(String, &'static str, u64)> {
        self.reqs.read()
    }

    /// `(label set with check, pass, fail)` sorted by check name.
    pub(crate) fn checks(&self) -> impl Iterator<Item = (&Labels, u64, u64)> {
        self.check_labels
            .iter()
            .zip(self.checks.iter())
            .map(|(l, [p, f])| (l, p.load(Relaxed), f.load(Relaxed)))
    }
}
