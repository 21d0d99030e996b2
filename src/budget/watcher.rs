//! The hot path of the SLO state: a [`Watcher`] per SLO watching a run's traffic classifies
//! each finished request (or journey iteration, or user turned away) and counts it with one
//! relaxed atomic add into [`SloEvents`], the SLO's live state the budget owns. A maintenance
//! window pauses it (one flag the tick sets); a grouped SLO's watcher counts only its own
//! group's events. `/metrics` reads the same state through `metrics::SloSource`, never writes it.

use crate::checks;
use crate::config::{GroupFilter, Sli};
use crate::http::Outcome;
use crate::load::event::IterationResult;
use crate::metrics::SloSource;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// What an SLO counts in a run: every request, one step's requests, or one journey's
/// iterations (good when every step passed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Requests,
    Step(usize),
    Journey(usize),
}

/// An SLO's live state, owned by the budget: its event totals since it was configured (the hot
/// path adds one, the tick folds the difference into the windows) and whether a maintenance
/// window pauses it (the tick sets it). `/metrics` reads it as an [`SloSource`].
#[derive(Debug, Default)]
pub struct SloEvents {
    good: AtomicU64,
    bad: AtomicU64,
    /// Requests counted as no event: past the objective, their latency sloburn's own.
    excused: AtomicU64,
    /// A maintenance window covers the SLO: no event counts.
    paused: AtomicBool,
}

impl SloEvents {
    /// One SLO event. Hot path: one atomic add.
    pub fn event(&self, good: bool) {
        if good {
            self.good.fetch_add(1, Relaxed);
        } else {
            self.bad.fetch_add(1, Relaxed);
        }
    }

    /// `(good, bad)` since the SLO was configured.
    pub fn events(&self) -> (u64, u64) {
        (self.good.load(Relaxed), self.bad.load(Relaxed))
    }

    pub(super) fn pause(&self, paused: bool) {
        self.paused.store(paused, Relaxed);
    }

    pub(super) fn paused(&self) -> bool {
        self.paused.load(Relaxed)
    }
}

impl SloSource for SloEvents {
    fn events(&self) -> (u64, u64) {
        SloEvents::events(self)
    }

    fn in_maintenance(&self) -> bool {
        self.paused()
    }

    fn excused(&self) -> u64 {
        self.excused.load(Relaxed)
    }
}

/// One SLO watching a run's traffic.
#[derive(Clone)]
pub struct Watcher {
    pub(super) events: Arc<SloEvents>,
    pub(super) sli: Sli,
    pub scope: Scope,
    /// A grouped SLO's group (`group_by`): only its events count.
    pub(super) filter: Option<GroupFilter>,
}

impl Watcher {
    /// Whether this watcher counts the requests of `step`.
    pub fn counts_step(&self, step: usize) -> bool {
        match self.scope {
            Scope::Requests => true,
            Scope::Step(s) => s == step,
            Scope::Journey(_) => false,
        }
    }

    /// Whether an event of data row `row` (a request's `status`) is this watcher's: always,
    /// unless it watches one group of a grouped SLO.
    fn admits(&self, row: Option<usize>, status: Option<u16>) -> bool {
        self.filter.as_ref().is_none_or(|f| f.admits(row, status))
    }

    /// Counts one journey iteration (of data row `row`) for a whole-journey SLO: good when
    /// every step passed (a latency SLI: and within `under`, think times included). A dropped
    /// iteration never ran: no event.
    pub fn iteration(
        &self,
        journey: usize,
        row: Option<usize>,
        result: IterationResult,
        took: Duration,
    ) {
        if self.scope != Scope::Journey(journey)
            || result == IterationResult::Dropped
            || self.events.paused()
            || !self.admits(row, None)
        {
            return;
        }
        let ok = result == IterationResult::Ok;
        match &self.sli {
            Sli::Availability => self.events.event(ok),
            Sli::Latency {
                under,
                exclude_failures,
                ..
            } => {
                if !ok {
                    if !exclude_failures {
                        self.events.event(false);
                    }
                } else {
                    self.events.event(took < *under);
                }
            }
        }
    }

    /// A user turned away: the arrival found every VU waiting on the target
    /// (`DropReason::Saturated`). One bad event, for an availability and a latency SLI alike:
    /// the user got no answer at all while the target held everyone before them. `row` is the
    /// data row the user would have taken, as far as it is known (a grouped SLO's share).
    pub fn turned_away(&self, row: Option<usize>) {
        if self.events.paused() || !self.admits(row, None) {
            return;
        }
        self.events.event(false);
    }

    /// Classifies one finished request for this SLO and counts it. A request that failed
    /// because of sloburn itself (a local error class) is no event at all: the target never
    /// saw it, so it neither spends nor earns budget.
    /// A corrected latency SLI counts every phase of the request (`Phases::total`), never the
    /// generator's own lateness.
    /// `row` is the request's iteration's data row (`None` without a data file).
    pub fn observe(
        &self,
        outcome: &Outcome,
        row: Option<usize>,
        target_checks: &[checks::Check],
        results: &[bool],
    ) {
        self.observe_judged(outcome, row, target_checks, results, false);
    }

    /// [`Watcher::observe`] of a request that may be generator-affected (`load::affected`):
    /// then its latency is sloburn's own stall, so a latency SLI counts it good when it met the
    /// objective anyway (sloburn's stall only adds time) and counts no event otherwise. Its
    /// availability, and a failed check, count as any request's.
    pub fn observe_judged(
        &self,
        outcome: &Outcome,
        row: Option<usize>,
        target_checks: &[checks::Check],
        results: &[bool],
        affected: bool,
    ) {
        if outcome.error.is_some_and(|e| e.is_local())
            || self.events.paused()
            || !self.admits(row, outcome.status)
        {
            return;
        }
        let succeeded = checks::verdict(target_checks, results, outcome);
        match &self.sli {
            Sli::Availability => self.events.event(succeeded),
            Sli::Latency {
                under,
                exclude_failures,
                corrected,
            } => {
                if !succeeded {
                    if !exclude_failures {
                        self.events.event(false);
                    }
                } else {
                    let latency = if *corrected {
                        outcome.phases.total()
                    } else {
                        outcome.duration()
                    };
                    let good = latency < *under;
                    if good || !affected {
                        self.events.event(good);
                    } else {
                        self.events.excused.fetch_add(1, Relaxed);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::ErrorClass;

    fn watcher(sli: Sli) -> Watcher {
        Watcher {
            events: Arc::new(SloEvents::default()),
            sli,
            scope: Scope::Requests,
            filter: None,
        }
    }

    #[test]
    fn an_affected_request_is_good_when_it_met_the_objective_and_no_event_otherwise() {
        let ok = |ms: u64| Outcome {
            status: Some(200),
            phases: crate::http::Phases {
                waiting: Duration::from_millis(ms),
                ..Default::default()
            },
            ..Outcome::default()
        };
        let w = watcher(Sli::Latency {
            under: Duration::from_millis(50),
            exclude_failures: false,
            corrected: false,
        });
        w.observe_judged(&ok(10), None, &[], &[], true);
        w.observe_judged(&ok(92), None, &[], &[], true);
        assert_eq!(
            w.events.events(),
            (1, 0),
            "met anyway: good; past it: no event"
        );
        assert_eq!(SloSource::excused(&*w.events), 1);
        w.observe_judged(&ok(92), None, &[], &[], false);
        assert_eq!(w.events.events(), (1, 1), "the target's own 92 ms is bad");
        // Availability counts an affected answer as any.
        let a = watcher(Sli::Availability);
        a.observe_judged(&ok(92), None, &[], &[], true);
        assert_eq!(a.events.events(), (1, 0));
    }

    /// Under `ulimit -n 128` the daemon's own EMFILE failures reached 1,680,093 bad events.
    #[test]
    fn local_errors_are_not_slo_events() {
        let slis = [
            Sli::Availability,
            Sli::Latency {
                under: Duration::from_millis(100),
                exclude_failures: false,
                corrected: true,
            },
        ];
        for sli in slis {
            let w = watcher(sli);
            for class in ErrorClass::ALL.into_iter().filter(|c| c.is_local()) {
                let outcome = Outcome {
                    error: Some(class),
                    ..Outcome::default()
                };
                w.observe(&outcome, None, &[], &[]);
            }
            assert_eq!(w.events.events(), (0, 0));
            // The target's own failure is still a bad event.
            let reset = Outcome {
                error: Some(ErrorClass::Reset),
                ..Outcome::default()
            };
            w.observe(&reset, None, &[], &[]);
            assert_eq!(w.events.events(), (0, 1));
        }
    }

    /// A latency SLI counts the corrected latency by default: a request that waited 80 ms to
    /// connect (a full accept queue) and took 50 ms is bad under 100 ms; with
    /// `measure: duration`, k6's duration (50 ms) makes it good.
    #[test]
    fn latency_slis_count_the_connection_wait_unless_told_not_to() {
        let outcome = Outcome {
            status: Some(200),
            phases: crate::http::Phases {
                connecting: Duration::from_millis(80),
                waiting: Duration::from_millis(50),
                ..Default::default()
            },
            ..Outcome::default()
        };
        for (corrected, events) in [(true, (0, 1)), (false, (1, 0))] {
            let w = watcher(Sli::Latency {
                under: Duration::from_millis(100),
                exclude_failures: false,
                corrected,
            });
            w.observe(&outcome, None, &[], &[]);
            assert_eq!(w.events.events(), events, "corrected: {corrected}");
        }
    }

    /// A user turned away by a saturated target is one bad event for either SLI, even one that
    /// leaves failures out of its latency.
    #[test]
    fn a_saturated_arrival_is_a_bad_event_for_every_sli() {
        for sli in [
            Sli::Availability,
            Sli::Latency {
                under: Duration::from_millis(100),
                exclude_failures: true,
                corrected: true,
            },
        ] {
            let w = watcher(sli.clone());
            w.turned_away(None);
            assert_eq!(w.events.events(), (0, 1), "{sli:?}");
        }
    }

    #[test]
    fn events_count_good_and_bad_apart() {
        let s = SloEvents::default();
        s.event(true);
        s.event(false);
        s.event(true);
        assert_eq!(s.events(), (2, 1));
    }
}
