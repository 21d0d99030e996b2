//! Capacity at the SLO (`sloburn capacity`, and `executor: capacity` in the daemon): the highest arrival rate a target serves within its thresholds or SLOs.
//! (Not `load::capacity`, which is whether a run's VUs fit the open-file limit.)
//!
//! The same target inputs as `run` (`--url …` or `FILE --profile NAME`, resolved by
//! `run::resolve`); the open model only. The search (`search`, pure) grows the rate
//! geometrically until a step fails, bisects to `--precision`, and confirms the answer with a
//! second step at its rate; each step (`step`) is a real constant-arrival-rate run through the
//! engine, judged (`judge`) by the thresholds (latency from the corrected duration) and the
//! SLOs on the profile's target. A step sloburn itself could not hold is inconclusive, never a
//! pass or a fail. `drive` is the loop with its budget and cool-downs; `export` the lines, the
//! `--summary-export` object and the exit code; `report` the `--report` page.
//!
//! The command's front (flags, `run::resolve`, the pass conditions) is `run::capacity`; the
//! daemon runs a profile with `executor: capacity` through its own run machinery
//! (`daemon::runs::capacity`) with the same search and judge.
//!
//! Exit codes: 0 with an answer (also "above --max-rate"), 99 when even the lowest step
//! failed, 75 when no decision was reached (the generator could not hold a rate twice, or the
//! budget ran out), 105 on SIGTERM/SIGINT (the export still written), 2 on bad flags, 78 on a
//! bad config.

mod drive;
mod export;
mod judge;
mod report;
mod search;
mod step;

pub use drive::{Plan, drive};
pub use export::{Capacity, StepRecord};
pub use judge::{Condition, Figure, Judgement, judge};
pub use report::html;
pub use search::{Next, Outcome, Probe, Purpose, Search, SearchConfig, Undecided, Verdict, rate};
pub use step::{Stepper, Steps};

/// A search never runs more steps than this.
pub const MAX_STEPS: usize = 40;

/// The pass conditions of a profile: its thresholds, and the SLOs on its target that count its
/// traffic (a journey's SLO is not a step's condition); why a threshold cannot decide one.
pub fn conditions_of<'a>(
    thresholds: &[crate::thresholds::ThresholdSpec],
    slos: impl IntoIterator<Item = &'a crate::config::Slo>,
    target: &str,
    profile: &str,
) -> Result<Vec<Condition>, String> {
    let mut out = Vec::new();
    for t in thresholds {
        out.push(Condition::threshold(t)?);
    }
    for slo in slos {
        let ours = slo.target == target
            && (slo.profiles.is_empty() || slo.profiles.iter().any(|p| p == profile));
        if ours && slo.journey.is_none() {
            out.push(Condition::slo(slo));
        }
    }
    Ok(out)
}

/// The bracket `sloburn_capacity_rate` shows for a search's `"capacity"` object: `(low,
/// high)` when it decided (found, above `max_rate`, or below the lowest step: low 0); `None`
/// when it did not (inconclusive, undecided, interrupted), which leaves the last one shown.
pub fn gauge_of(c: &serde_json::Value) -> Option<(f64, Option<f64>)> {
    let high = c["high"].as_f64();
    match c["outcome"].as_str()? {
        "found" | "above_max_rate" => Some((c["low"].as_f64()?, high)),
        "below_lowest" => Some((0.0, high)),
        _ => None,
    }
}
