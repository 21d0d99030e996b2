//! What a search found, as the output says it: a line per step, the answer's line, and the
//! `"capacity"` object of `--summary-export` (`rate`, `low`, `high`, `limited_by`, `steps`).
//! `rate` is only ever a rate that passed twice with a failure above it within the precision:
//! above `--max-rate`, below the lowest step, inconclusive or undecided, it is `null` and
//! `outcome` says why.

use super::judge::{Figure, Judgement};
use super::search::{Outcome, Probe, Purpose, Undecided, Verdict, rate};
use crate::load::runner::RunReport;
use serde::Serialize;
use std::time::Duration;

/// One step as the export keeps it.
#[derive(Debug, Clone, Serialize)]
pub struct StepRecord {
    /// 1, 2, …
    pub step: usize,
    pub rate: f64,
    pub duration_s: f64,
    pub purpose: Purpose,
    /// The same step again after an inconclusive one.
    pub retry: bool,
    pub verdict: Verdict,
    pub requests: u64,
    /// Requests per second the step measured.
    pub achieved_rate: f64,
    /// Arrivals sloburn dropped as its own overload (never the target's).
    pub generator_dropped: u64,
    /// Arrivals turned away because every VU waited on the target (failed requests).
    pub saturated: u64,
    /// The figure that decided the step.
    pub deciding: Option<Figure>,
    pub figures: Vec<Figure>,
    /// Why the step is inconclusive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl StepRecord {
    pub fn new(
        step: usize,
        probe: Probe,
        duration: Duration,
        r: &RunReport,
        j: &Judgement,
    ) -> StepRecord {
        let s = &r.stats;
        StepRecord {
            step,
            rate: probe.rate,
            duration_s: duration.as_secs_f64(),
            purpose: probe.purpose,
            retry: probe.retry,
            verdict: j.verdict,
            requests: s.requests,
            achieved_rate: s.per_second(s.requests),
            generator_dropped: s.generator_overloaded(),
            saturated: s.dropped_by(crate::load::pacing::DropReason::Saturated),
            deciding: j.deciding().cloned(),
            figures: j.figures.clone(),
            why: j.why.clone(),
        }
    }

    /// The progress line: rate, verdict, the figure that decided it.
    pub fn line(&self) -> String {
        let again = if self.retry { ", again" } else { "" };
        let head = format!(
            "step {}: {} for {} ({}{again}): {}",
            self.step,
            rate(self.rate),
            crate::units::format_duration(Duration::from_secs_f64(self.duration_s)),
            self.purpose.as_str(),
            self.verdict.as_str()
        );
        let figure = match (&self.why, &self.deciding) {
            (Some(why), _) => why.clone(),
            (None, Some(f)) => f.said(),
            (None, None) => "no condition".into(),
        };
        format!(
            "{head}, {figure}; {} requests ({:.1}/s)",
            self.requests, self.achieved_rate
        )
    }
}

/// The `"capacity"` object.
#[derive(Debug, Clone, Serialize)]
pub struct Capacity {
    /// The capacity at the SLO: a rate that passed twice, under a failure within the
    /// precision. `None` unless `outcome` is `found`.
    pub rate: Option<f64>,
    /// The highest rate that passed (and still stands).
    pub low: Option<f64>,
    /// The lowest rate that failed.
    pub high: Option<f64>,
    /// The condition that failed at `high`, or `--max-rate`.
    pub limited_by: Option<String>,
    /// `found`, `above_max_rate`, `below_lowest`, `inconclusive`, `undecided`, `interrupted`.
    pub outcome: &'static str,
    /// The answer's line.
    pub summary: String,
    pub precision: f64,
    pub max_rate: f64,
    pub elapsed_s: f64,
    pub steps: Vec<StepRecord>,
}

impl Capacity {
    pub fn new(
        outcome: &Outcome,
        steps: Vec<StepRecord>,
        precision: f64,
        max_rate: f64,
        elapsed: Duration,
    ) -> Capacity {
        let failed_at = |high: Option<f64>| {
            let high = high?;
            steps
                .iter()
                .rev()
                .find(|s| s.rate == high && s.verdict == Verdict::Fail)
                .and_then(|s| s.deciding.as_ref())
                .map(|f| f.condition.clone())
        };
        let (rate_, low, high, limited_by, name) = match *outcome {
            Outcome::Capacity {
                rate: r,
                high: Some(h),
            } => (Some(r), Some(r), Some(h), failed_at(Some(h)), "found"),
            Outcome::Capacity {
                rate: r,
                high: None,
            } => (
                None,
                Some(r),
                None,
                Some("--max-rate".to_string()),
                "above_max_rate",
            ),
            Outcome::BelowLowest { high, .. } => (
                None,
                None,
                Some(high),
                failed_at(Some(high)),
                "below_lowest",
            ),
            Outcome::GeneratorLimited { low, high, .. } => {
                (None, low, high, failed_at(high), "inconclusive")
            }
            Outcome::Undecided { low, high, why } => (
                None,
                low,
                high,
                failed_at(high),
                if why == Undecided::Interrupted {
                    "interrupted"
                } else {
                    "undecided"
                },
            ),
        };
        let mut c = Capacity {
            rate: rate_,
            low,
            high,
            limited_by,
            outcome: name,
            summary: String::new(),
            precision,
            max_rate,
            elapsed_s: elapsed.as_secs_f64(),
            steps,
        };
        c.summary = c.line(outcome);
        c
    }

    fn line(&self, outcome: &Outcome) -> String {
        let limited = self.limited_by.as_deref().unwrap_or("no condition");
        let bracket = |low: Option<f64>, high: Option<f64>| match (low, high) {
            (Some(l), Some(h)) => format!("; it lies between {} and {}", rate(l), rate(h)),
            (Some(l), None) => format!("; {} passed", rate(l)),
            (None, Some(h)) => format!("; {} failed", rate(h)),
            (None, None) => String::new(),
        };
        match *outcome {
            Outcome::Capacity {
                rate: r,
                high: Some(h),
            } => format!(
                "capacity at SLO: {} (between {} and {}; limited by {limited})",
                rate(r),
                rate(r),
                rate(h)
            ),
            Outcome::Capacity {
                rate: r,
                high: None,
            } => format!(
                "capacity at SLO: above --max-rate {} (every step up to it passed, confirmed; \
                 raise --max-rate to find the limit)",
                rate(r)
            ),
            Outcome::BelowLowest { lowest, .. } => format!(
                "capacity at SLO: below {}: even the lowest step failed (limited by {limited}); \
                 lower --start-rate",
                rate(lowest)
            ),
            Outcome::GeneratorLimited { rate: r, low, high } => format!(
                "capacity at SLO: inconclusive: sloburn could not hold {} itself (twice), so the \
                 target was not judged there{}; give sloburn more CPU (--workers) or run it \
                 nearer the target",
                rate(r),
                bracket(low, high)
            ),
            Outcome::Undecided { low, high, why } => {
                let what = match why {
                    Undecided::Budget => "--max-duration ran out",
                    Undecided::Steps => "the step limit was reached",
                    Undecided::Interrupted => "interrupted",
                };
                format!(
                    "capacity at SLO: undecided: {what} before a confirmed answer{}",
                    bracket(low, high)
                )
            }
        }
    }

    /// The process's exit code: 0 with an answer, 99 when the lowest step failed, 75 when
    /// no decision was reached, 105 when a signal stopped the search.
    pub fn exit_code(&self) -> i32 {
        match self.outcome {
            "found" | "above_max_rate" => crate::exit::OK,
            "below_lowest" => crate::exit::THRESHOLDS,
            "interrupted" => crate::exit::INTERRUPTED,
            _ => crate::exit::INCONCLUSIVE,
        }
    }

    /// `--summary-export`'s document.
    pub fn export_json(&self) -> serde_json::Value {
        serde_json::json!({ "capacity": self })
    }
}
