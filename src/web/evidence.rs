//! Failure evidence: for each step, the last few responses that failed (a bad status, a
//! transport error or a failed check), as the run detail, `/api/runs/{id}` and the HTML
//! report show them. Bounded: [`PER_STEP`] responses per step, each with its headers and the
//! first [`BODY_BYTES`] of its body. Scrubbed before it is kept (`web::scrub`): every value
//! sloburn sent that came from a secret (the config's `${env:…}`/`${file:…}` values, sensitive
//! headers: `Authorization`, cookies, `X-Api-Key`), a data file's cell, or a capture (the
//! iteration's, and what the failing step itself captures) is replaced wherever the target
//! echoes it (body, headers); sensitive response headers are never shown.

use super::scrub::{self, Scrub};
use crate::checks::Check;
use crate::http::Outcome;
use crate::load::event::{Observer, Sent};
use crate::load::stats::RunStats;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Failing responses kept per step.
pub const PER_STEP: usize = 5;
/// Body bytes kept per response.
pub const BODY_BYTES: usize = 1024;
const REDACTED: &str = scrub::REDACTED;

/// One failing response.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Failure {
    pub step: String,
    /// Seconds since the run's start.
    pub at: f64,
    pub status: Option<u16>,
    pub error: Option<String>,
    pub failed_checks: Vec<String>,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// The body was longer than what is kept.
    pub body_truncated: bool,
}

pub struct Evidence {
    started: Instant,
    stats: Arc<RunStats>,
    /// Per step: its name, checks and captures.
    steps: Vec<EvidenceStep>,
    /// The run's fixed values: secrets, sensitive headers, data files' cells (bounded).
    fixed: Scrub,
    kept: Vec<Mutex<VecDeque<Failure>>>,
}

/// A step as its evidence needs it.
pub struct EvidenceStep {
    pub name: String,
    pub checks: Vec<Check>,
    /// What the step captures: a failing answer is scrubbed of the values it would give.
    pub captures: Vec<crate::journey::Source>,
}

impl Evidence {
    /// `steps` in the run's step numbering; `values` the run's fixed values to scrub, in
    /// priority order (`Scrub::new`'s bounds keep the first).
    pub fn new<'a>(
        stats: Arc<RunStats>,
        steps: Vec<EvidenceStep>,
        values: impl IntoIterator<Item = &'a str>,
    ) -> Evidence {
        let kept = steps.iter().map(|_| Mutex::new(VecDeque::new())).collect();
        Evidence {
            started: crate::clock::instant(),
            stats,
            steps,
            fixed: Scrub::new(values),
            kept,
        }
    }

    /// The sensitive values of a request's headers (marked when they came from a secret, or
    /// by name), and their bearer tokens on their own.
    pub fn secrets_of(headers: &http::HeaderMap) -> Vec<String> {
        let mut out = Vec::new();
        for (name, v) in headers {
            let sensitive = v.is_sensitive()
                || matches!(
                    name.as_str(),
                    "authorization" | "proxy-authorization" | "cookie" | "x-api-key"
                );
            if let (true, Ok(text)) = (sensitive, v.to_str()) {
                out.push(text.to_string());
                if let Some((_, token)) = text.split_once(' ') {
                    out.push(token.trim().to_string());
                }
            }
        }
        out
    }

    /// The evidence recorder of a run of `work`, whose target sends `target_headers`, under a
    /// config whose references resolved to `secrets`.
    pub fn for_work(
        stats: Arc<RunStats>,
        work: &crate::load::iteration::Work,
        target_headers: &http::HeaderMap,
        secrets: &[crate::config::Secret],
    ) -> Evidence {
        use crate::load::iteration::Work;
        let mut steps: Vec<EvidenceStep> = work
            .steps()
            .into_iter()
            .map(|s| EvidenceStep {
                name: match &s.journey {
                    Some(j) => format!("{j}::{}", s.name),
                    None => s.name.clone(),
                },
                checks: s.checks,
                captures: Vec::new(),
            })
            .collect();
        let mut values: Vec<String> = secrets.iter().map(|s| s.expose().to_string()).collect();
        values.extend(Evidence::secrets_of(target_headers));
        let mut cells: Vec<&str> = Vec::new();
        match work {
            Work::Single { request, .. } => values.extend(Evidence::secrets_of(&request.headers)),
            Work::Journeys { journeys, .. } => {
                let all = journeys.iter().flat_map(|j| j.steps.iter());
                for (step, into) in all.zip(steps.iter_mut()) {
                    if let Some(req) = &step.fixed {
                        values.extend(Evidence::secrets_of(&req.headers));
                    }
                    into.captures = step
                        .spec
                        .captures
                        .iter()
                        .map(|c| c.source.clone())
                        .collect();
                }
                for (data, _) in journeys.iter().filter_map(|j| j.data.as_ref()) {
                    cells.extend(
                        (0..data.len())
                            .filter_map(|i| data.row(i))
                            .flat_map(|r| r.values()),
                    );
                }
            }
        }
        let fixed = values.iter().map(String::as_str).chain(cells);
        Evidence::new(stats, steps, fixed)
    }

    /// The values of this request's iteration (its row, its captures, and what its step
    /// captures from `outcome`), as a set of their own.
    fn sent_values(&self, step: &EvidenceStep, sent: Sent<'_>, outcome: &Outcome) -> Scrub {
        let taken: Vec<String> = step
            .captures
            .iter()
            .filter_map(|c| c.extract(outcome))
            .collect();
        let row = sent.row.into_iter().flat_map(|r| r.values());
        let captures = sent.captures.iter().flatten().map(String::as_str);
        Scrub::new(row.chain(captures).chain(taken.iter().map(String::as_str)))
    }

    /// Every kept failure, step by step, oldest first.
    pub fn failures(&self) -> Vec<Failure> {
        self.kept
            .iter()
            .flat_map(|k| {
                k.lock()
                    .map(|q| q.iter().cloned().collect::<Vec<_>>())
                    .unwrap_or_default()
            })
            .collect()
    }
}

impl Evidence {
    /// Keeps `outcome` when it failed, scrubbed of the run's values and of `sent`.
    fn keep(&self, step: usize, outcome: &Outcome, results: &[bool], sent: Sent<'_>) {
        let Some(info) = self.steps.get(step) else {
            return;
        };
        let failed_checks: Vec<String> = info
            .checks
            .iter()
            .zip(results)
            .filter(|(_, ok)| !**ok)
            .map(|(c, _)| c.name.clone())
            .collect();
        if failed_checks.is_empty() && !self.stats.is_failed_at(step, outcome) {
            return;
        }
        let own = self.sent_values(info, sent, outcome);
        let sets = [&self.fixed, &own];
        let headers = outcome
            .headers
            .iter()
            .map(|(k, v)| {
                let shown = match k.as_str() {
                    "set-cookie" | "authorization" | "proxy-authorization" | "cookie" => {
                        REDACTED.to_string()
                    }
                    _ => scrub::redact(&String::from_utf8_lossy(v.as_bytes()), usize::MAX, &sets),
                };
                (k.as_str().to_string(), shown)
            })
            .collect();
        // Scrubbed over the kept part and the longest value past it, so a value that starts
        // inside is found whole; then cut.
        let longest = self.fixed.longest().max(own.longest());
        let window = outcome.body.len().min(BODY_BYTES + longest);
        let text = String::from_utf8_lossy(&outcome.body[..window]);
        let failure = Failure {
            step: info.name.clone(),
            at: crate::clock::elapsed(self.started).as_secs_f64(),
            status: outcome.status,
            // The class, and why where the class alone does not say (`tls: unknown issuer`).
            error: outcome.error.map(|e| match outcome.error_reason {
                Some(why) => format!("{}: {why}", e.as_str()),
                None => e.as_str().to_string(),
            }),
            failed_checks,
            headers,
            body: scrub::redact(&text, BODY_BYTES, &sets),
            body_truncated: outcome.body.len() > BODY_BYTES,
        };
        if let Some(q) = self.kept.get(step)
            && let Ok(mut q) = q.lock()
        {
            if q.len() == PER_STEP {
                q.pop_front();
            }
            q.push_back(failure);
        }
    }
}

impl Observer for Evidence {
    fn request_finished(
        &self,
        step: usize,
        outcome: &Outcome,
        _lateness: Duration,
        results: &[bool],
    ) {
        self.keep(step, outcome, results, Sent::default());
    }

    fn request_finished_sent(
        &self,
        step: usize,
        _row: Option<usize>,
        sent: Sent<'_>,
        outcome: &Outcome,
        _lateness: Duration,
        results: &[bool],
    ) {
        self.keep(step, outcome, results, sent);
    }
}
