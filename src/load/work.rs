//! The engine's own types built from the config's plain specs: what each iteration of a
//! profile does ([`Work`]), and a journey's steps with the request of each untemplated one
//! built once.

use super::iteration::{Journey, Step, Work, build};
use crate::config::{Config, JourneySpec, Profile, StepSpec};
use crate::http::RequestSpec;
use crate::journey::{Mix, Template, Values};
use std::sync::Arc;

impl Work {
    /// What each iteration of `profile` does: its target's one request, or its journeys.
    /// `None` when the profile names something the config does not have.
    pub fn of(config: &Config, profile: &Profile) -> Option<Work> {
        if profile.mix.is_empty() {
            let t = config.targets.get(&profile.target)?;
            return Some(Work::single(t.request(), t.checks.clone(), &t.display_url));
        }
        let journeys = profile
            .mix
            .iter()
            .map(|(j, _)| Some(Arc::new(Journey::from_spec(config.journeys.get(j)?))))
            .collect::<Option<Vec<_>>>()?;
        let weights: Vec<u32> = profile.mix.iter().map(|(_, w)| *w).collect();
        Some(Work::Journeys {
            journeys,
            mix: Mix::new(&weights),
        })
    }
}

impl Journey {
    /// The journey the config describes, with each untemplated step's request built once.
    pub fn from_spec(spec: &JourneySpec) -> Journey {
        let steps = spec
            .steps
            .iter()
            .map(|s| Step {
                fixed: fixed_request(s).map(Arc::new),
                spec: s.clone(),
            })
            .collect();
        Journey {
            name: spec.name.clone(),
            steps,
            data: spec.data.clone(),
            slots: spec.slots,
        }
    }
}

/// Builds the request of a step without templates, once.
fn fixed_request(step: &StepSpec) -> Option<RequestSpec> {
    let all_static = step.url.is_static()
        && step.headers.iter().all(|(_, t)| t.is_static())
        && step.body.as_ref().is_none_or(Template::is_static);
    if !all_static {
        return None;
    }
    let values = Values {
        vu: 0,
        iter: 0,
        now_ms: 0,
        row: None,
        captures: &[],
    };
    build(step, &values)
}
