//! The search's loop: asks the pure search (`search`) for a rate, runs the step (`step`),
//! judges it (`judge`), prints its line, and so on until the search ends or its budget does.
//!
//! Bounds: at most `SearchConfig::max_steps` steps (plus one retry); a step never starts when
//! it and its cool-down would end past `--max-duration`, and a step still running when the
//! budget ends is cut then (its figures unused): the loop never outlives its budget by more
//! than the time to drop a step. Between steps a cool-down lets the target drain what the last
//! step queued.

use super::export::{Capacity, StepRecord};
use super::judge::{Condition, judge};
use super::search::{Next, Search, SearchConfig, Undecided};
use super::step::Steps;
use std::io::Write;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A step shorter than this has too few requests for any percentile.
pub const MIN_AUTO_STEP: Duration = Duration::from_secs(5);
/// A step chosen by the default never runs longer than this.
pub const MAX_AUTO_STEP: Duration = Duration::from_secs(60);

/// How a search is run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub search: SearchConfig,
    /// `--step-duration`; `None` chooses each step's from its rate.
    pub step_duration: Option<Duration>,
    pub cool_down: Duration,
    pub max_duration: Duration,
}

impl Plan {
    /// The search of a profile with `executor: capacity`.
    pub fn of(c: &crate::config::CapacitySpec) -> Plan {
        Plan {
            search: SearchConfig {
                start: c.start_rate,
                max_rate: c.max_rate,
                precision: c.precision,
                growth: 2.0,
                max_steps: super::MAX_STEPS,
            },
            step_duration: c.step_duration,
            cool_down: c.cool_down,
            max_duration: c.max_duration,
        }
    }

    /// A step's length: `--step-duration`, or long enough for the requests the conditions
    /// need at `rate` (`Condition::requests_needed`), within 5 s and 60 s.
    pub fn step_len(&self, rate: f64, conditions: &[Condition]) -> Duration {
        if let Some(d) = self.step_duration {
            return d;
        }
        let needed = conditions
            .iter()
            .map(Condition::requests_needed)
            .max()
            .unwrap_or(100);
        let secs = (needed as f64 / rate.max(1e-9)).min(MAX_AUTO_STEP.as_secs_f64());
        Duration::from_secs_f64(secs).clamp(MIN_AUTO_STEP, MAX_AUTO_STEP)
    }
}

/// Runs the search to its end; prints a line per step on `out`. `stop` (a signal) ends it.
pub async fn drive(
    plan: &Plan,
    stepper: &impl Steps,
    conditions: &[Condition],
    out: &mut (dyn Write + Send),
    stop: &CancellationToken,
) -> anyhow::Result<Capacity> {
    let started = crate::clock::tokio_instant();
    let deadline = started + plan.max_duration;
    let (mut search, mut probe) = Search::new(plan.search).map_err(anyhow::Error::msg)?;
    let mut steps: Vec<StepRecord> = Vec::new();
    let outcome = loop {
        let duration = plan.step_len(probe.rate, conditions);
        let cool = if steps.is_empty() {
            Duration::ZERO
        } else {
            plan.cool_down
        };
        if crate::clock::tokio_instant() + cool + duration > deadline {
            break search.finish(Undecided::Budget);
        }
        if !cool.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(cool) => {}
                () = stop.cancelled() => {}
            }
        }
        if stop.is_cancelled() {
            break search.finish(Undecided::Interrupted);
        }
        let report = tokio::select! {
            r = stepper.run(probe.rate, duration, stop) => r?,
            () = tokio::time::sleep_until(deadline) => None,
        };
        let Some(report) = report else {
            let why = if stop.is_cancelled() {
                Undecided::Interrupted
            } else {
                Undecided::Budget
            };
            break search.finish(why);
        };
        let judged = judge(conditions, &report);
        let record = StepRecord::new(steps.len() + 1, probe, duration, &report, &judged);
        let _ = writeln!(out, "{}", record.line()).and_then(|()| out.flush());
        steps.push(record);
        match search.record(judged.verdict) {
            Next::Probe(p) => probe = p,
            Next::Done(outcome) => break outcome,
        }
    };
    Ok(Capacity::new(
        &outcome,
        steps,
        plan.search.precision,
        plan.search.max_rate,
        crate::clock::elapsed(started),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thresholds::ThresholdSpec;

    #[test]
    fn a_default_step_holds_enough_requests_for_its_percentile() {
        let plan = Plan {
            search: SearchConfig {
                start: 1.0,
                max_rate: 10.0,
                precision: 0.05,
                growth: 2.0,
                max_steps: 10,
            },
            step_duration: None,
            cool_down: Duration::ZERO,
            max_duration: Duration::from_secs(60),
        };
        let p = |e: &str| {
            let spec = ThresholdSpec::parse("http_req_duration", e, false, None).unwrap();
            vec![Condition::threshold(&spec).unwrap()]
        };
        // p(95): 400 requests; at 40/s that is 10 s.
        assert_eq!(plan.step_len(40.0, &p("p(95)<50")), Duration::from_secs(10));
        assert_eq!(plan.step_len(4000.0, &p("p(95)<50")), MIN_AUTO_STEP);
        assert_eq!(plan.step_len(1.0, &p("p(99)<50")), MAX_AUTO_STEP);
        let fixed = Plan {
            step_duration: Some(Duration::from_secs(2)),
            ..plan
        };
        assert_eq!(fixed.step_len(1.0, &p("p(99)<50")), Duration::from_secs(2));
    }
}
