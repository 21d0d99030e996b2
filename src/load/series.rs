//! A run whose latencies another owner records: the daemon profile's `/metrics` series. The
//! series are cumulative (a scrape's counters only grow, across runs and reloads); a run reads
//! its own figures from them as what was recorded since it began ([`Histogram::restart`],
//! [`Histogram::since`]), so each request's latencies are recorded once, for both.
//!
//! What the series hold and the run reads from them: each step's `http_req_duration`,
//! corrected duration and phases, the iterations' lateness and each journey's duration. What
//! they do not hold, the run still records itself: k6's `http_req_blocked` (blocked plus the
//! DNS lookup; the series keep the two apart), the `iteration_duration` of a single request
//! that got no status (the corrected duration holds the others), step groups and sub-metrics.

use std::sync::Arc;

use super::record::RunRecord;
use crate::hist::{HistSnapshot, Histogram};
use crate::http::Phase;

/// One step's histograms in a [`Series`].
pub struct StepHists<'a> {
    /// k6's `http_req_duration` (sending + waiting + receiving) of responses.
    pub duration: &'a Histogram,
    /// Every phase of a response (`Phases::total`).
    pub corrected: &'a Histogram,
    /// By `Phase as usize`, each phase alone (`blocked` without DNS).
    pub phases: &'a [Histogram; Phase::ALL.len()],
}

/// Cumulative histograms a run records into through another observer, in the run's step and
/// journey numbering. Only one run at a time may read one: [`Histogram::restart`] makes the
/// extremes the run's.
pub trait Series: Send + Sync {
    fn step(&self, step: usize) -> Option<StepHists<'_>>;
    /// An iteration's lateness, recorded on its first request.
    fn lateness(&self) -> &Histogram;
    /// A journey's iteration durations (every iteration that ran).
    fn journey(&self, journey: usize) -> Option<&Histogram>;
}

/// Where each histogram of the series stood when the run began.
struct StepBase {
    duration: HistSnapshot,
    corrected: HistSnapshot,
    phases: [HistSnapshot; Phase::ALL.len()],
}

/// A run's reading of a [`Series`]: the series and where it stood at the start.
pub(super) struct OnSeries {
    source: Arc<dyn Series>,
    steps: Vec<StepBase>,
    lateness: HistSnapshot,
    journeys: Vec<HistSnapshot>,
}

impl OnSeries {
    /// Begins the run's interval on every histogram of `source` it reads.
    pub(super) fn start(source: Arc<dyn Series>, steps: usize, journeys: usize) -> OnSeries {
        let steps = (0..steps)
            .map(|i| match source.step(i) {
                Some(s) => StepBase {
                    duration: s.duration.restart(),
                    corrected: s.corrected.restart(),
                    phases: std::array::from_fn(|p| s.phases[p].restart()),
                },
                None => StepBase {
                    duration: HistSnapshot::default(),
                    corrected: HistSnapshot::default(),
                    phases: std::array::from_fn(|_| HistSnapshot::default()),
                },
            })
            .collect();
        let journeys = (0..journeys)
            .map(|j| {
                source
                    .journey(j)
                    .map(Histogram::restart)
                    .unwrap_or_default()
            })
            .collect();
        OnSeries {
            lateness: source.lateness().restart(),
            steps,
            journeys,
            source,
        }
    }

    /// The run's `http_req_duration` so far: every step's.
    pub(super) fn duration(&self) -> HistSnapshot {
        let steps: Vec<HistSnapshot> = (0..self.steps.len())
            .filter_map(|i| Some(self.source.step(i)?.duration.since(&self.steps[i].duration)))
            .collect();
        HistSnapshot::merged(steps.iter())
    }

    /// Journey `journey`'s iteration durations in the run.
    pub(super) fn journey(&self, journey: usize) -> HistSnapshot {
        match (self.source.journey(journey), self.journeys.get(journey)) {
            (Some(h), Some(base)) => h.since(base),
            _ => HistSnapshot::default(),
        }
    }

    /// Fills the figures the series hold into `r`, made by the run's own recording of the
    /// rest: `r.iteration_duration` holds a single request's iterations without a status.
    pub(super) fn fill(&self, r: &mut RunRecord) {
        let single = self.journeys.is_empty();
        let mut duration = HistSnapshot::default();
        let mut corrected = HistSnapshot::default();
        let mut phases: [HistSnapshot; Phase::ALL.len()] = Default::default();
        for (i, base) in self.steps.iter().enumerate() {
            let Some(s) = self.source.step(i) else {
                continue;
            };
            let d = s.duration.since(&base.duration);
            duration.merge(&d);
            if let Some(step) = r.steps.get_mut(i) {
                step.duration = d;
            }
            corrected.merge(&s.corrected.since(&base.corrected));
            for (p, sum) in phases.iter_mut().enumerate() {
                sum.merge(&s.phases[p].since(&base.phases[p]));
            }
        }
        // k6's blocked holds the DNS lookup: the run's own.
        phases[Phase::Blocked as usize] = std::mem::take(&mut r.phases[Phase::Blocked as usize]);
        r.phases = phases;
        r.lateness = self.source.lateness().since(&self.lateness);
        for (j, rec) in r.journeys.iter_mut().enumerate() {
            rec.duration = self.journey(j);
        }
        if single {
            r.iteration_duration.merge(&corrected);
        } else {
            r.iteration_duration = HistSnapshot::merged(r.journeys.iter().map(|j| &j.duration));
        }
        r.duration = duration;
        r.corrected = corrected;
    }
}
