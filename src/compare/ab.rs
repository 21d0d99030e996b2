//! A/B under one load (`sloburn run --url NEW --baseline-url OLD`): one arrival process sends
//! each iteration to one side, the two sides as two journeys of one request each, picked by
//! the mix's golden-ratio sequence at equal weights (`journey::Mix`): any stretch of
//! iterations splits within a fraction of a percent, so whatever the minute does to latency
//! it does to both. The run's record holds each side's step; [`sides`] makes of them two
//! records of the same shape, which `compare` judges as it judges two runs.

use crate::config::StepSpec;
use crate::hist::HistSnapshot;
use crate::http::RequestSpec;
use crate::journey::{Mix, Template};
use crate::load::event::SINGLE_STEP;
use crate::load::iteration::{Journey, Step, Work};
use crate::load::pacing::DropReason;
use crate::load::record::{RunRecord, StepRecord};
use std::sync::Arc;

/// The journey of the side under test.
pub const CANDIDATE: &str = "candidate";
/// The journey of the side it is compared with.
pub const BASELINE: &str = "baseline";

/// One side: its request and its URL as written (for spans and the summary).
pub struct Side {
    pub request: RequestSpec,
    pub display_url: String,
}

/// The work of an A/B run: two journeys of one request each, every check on both.
pub fn work(candidate: Side, baseline: Side, checks: &[crate::checks::Check]) -> Work {
    let journey = |name: &str, side: Side| {
        let spec = StepSpec {
            name: SINGLE_STEP.to_string(),
            method: side.request.method.clone(),
            url: Template::literal(&side.request.uri.to_string()),
            headers: Vec::new(),
            body: None,
            checks: checks.to_vec(),
            captures: Vec::new(),
            think: None,
            keep_going: false,
            display_url: side.display_url,
            grpc: None,
        };
        Arc::new(Journey {
            name: name.to_string(),
            steps: vec![Step {
                spec,
                fixed: Some(Arc::new(side.request)),
            }],
            data: None,
            slots: 0,
        })
    };
    Work::Journeys {
        journeys: vec![journey(CANDIDATE, candidate), journey(BASELINE, baseline)],
        mix: Mix::new(&[1, 1]),
    }
}

/// The (baseline, candidate) records of an A/B run's record, each a single-request run of its
/// side's requests over the run's whole time; `None` when the record is not an A/B run's.
pub fn sides(r: &RunRecord) -> Option<(RunRecord, RunRecord)> {
    let side = |name: &str| -> Option<RunRecord> {
        let step = r
            .steps
            .iter()
            .find(|s| s.journey.as_deref() == Some(name))?;
        let journey = r.journeys.iter().find(|j| j.name == name)?;
        Some(RunRecord {
            version: r.version,
            elapsed: r.elapsed,
            duration: step.duration.clone(),
            corrected: HistSnapshot::default(),
            phases: std::array::from_fn(|_| HistSnapshot::default()),
            iteration_duration: journey.duration.clone(),
            group_duration: step.group_duration.clone(),
            lateness: HistSnapshot::default(),
            requests: step.requests,
            failed: step.failed,
            no_response: 0,
            statuses: Vec::new(),
            errors: Vec::new(),
            checks: step.checks.clone(),
            data_sent: 0,
            data_received: 0,
            kernel_tx: 0,
            iterations: journey.results.iter().sum(),
            dropped: 0,
            dropped_by: [0; DropReason::ALL.len()],
            vus: 0,
            vus_low: 0,
            vus_high: 0,
            vus_max: 0,
            subs: Vec::new(),
            steps: vec![StepRecord {
                journey: None,
                ..step.clone()
            }],
            journeys: Vec::new(),
            classes: Vec::new(),
            plan: r.plan.clone(),
            // Which of a side's requests were generator-affected is not kept per journey.
            affected: None,
        })
    };
    Some((side(BASELINE)?, side(CANDIDATE)?))
}
