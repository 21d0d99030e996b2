//! Failure evidence: for each step, the last few responses that failed (a bad status, a
//! transport error or a failed check), as the run detail, `/api/runs/{id}` and the HTML
//! report show them. Bounded: [`PER_STEP`] responses per step, each with its headers and the
//! first [`BODY_BYTES`] of its body. Redacted as secrets are: the values of headers sloburn
//! marks sensitive (from `${env:…}`/`${file:…}`, `Authorization`, cookies) are replaced
//! wherever they appear, and sensitive response headers are never shown.

use crate::checks::Check;
use crate::http::Outcome;
use crate::load::event::Observer;
use crate::load::stats::RunStats;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Failing responses kept per step.
pub const PER_STEP: usize = 5;
/// Body bytes kept per response.
pub const BODY_BYTES: usize = 1024;
const REDACTED: &str = "[redacted]";
/// Shorter secrets are not searched for in bodies (they would match by chance).
const MIN_SECRET: usize = 4;

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
    /// Per step: its name and checks.
    steps: Vec<(String, Vec<Check>)>,
    secrets: Vec<String>,
    kept: Vec<Mutex<VecDeque<Failure>>>,
}

impl Evidence {
    /// `steps` in the run's step numbering; `secrets` the sensitive values its requests carry.
    pub fn new(
        stats: Arc<RunStats>,
        steps: Vec<(String, Vec<Check>)>,
        secrets: Vec<String>,
    ) -> Evidence {
        let kept = steps.iter().map(|_| Mutex::new(VecDeque::new())).collect();
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .filter(|s| s.len() >= MIN_SECRET)
            .collect();
        // Longest first: a secret that holds another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Evidence {
            started: crate::clock::instant(),
            stats,
            steps,
            secrets,
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

    /// The evidence recorder of a run of `work`, whose target sends `target_headers`.
    pub fn for_work(
        stats: Arc<RunStats>,
        work: &crate::load::iteration::Work,
        target_headers: &http::HeaderMap,
    ) -> Evidence {
        use crate::load::iteration::Work;
        let steps = work
            .steps()
            .into_iter()
            .map(|s| {
                let name = match &s.journey {
                    Some(j) => format!("{j}::{}", s.name),
                    None => s.name.clone(),
                };
                (name, s.checks)
            })
            .collect();
        let mut secrets = Evidence::secrets_of(target_headers);
        match work {
            Work::Single { request, .. } => secrets.extend(Evidence::secrets_of(&request.headers)),
            Work::Journeys { journeys, .. } => {
                for step in journeys.iter().flat_map(|j| j.steps.iter()) {
                    if let Some(req) = &step.fixed {
                        secrets.extend(Evidence::secrets_of(&req.headers));
                    }
                }
            }
        }
        Evidence::new(stats, steps, secrets)
    }

    fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), REDACTED);
            }
        }
        out
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

impl Observer for Evidence {
    fn request_finished(
        &self,
        step: usize,
        outcome: &Outcome,
        _lateness: Duration,
        results: &[bool],
    ) {
        let Some((name, checks)) = self.steps.get(step) else {
            return;
        };
        let failed_checks: Vec<String> = checks
            .iter()
            .zip(results)
            .filter(|(_, ok)| !**ok)
            .map(|(c, _)| c.name.clone())
            .collect();
        if failed_checks.is_empty() && !self.stats.is_failed_at(step, outcome) {
            return;
        }
        let headers = outcome
            .headers
            .iter()
            .map(|(k, v)| {
                let shown = match k.as_str() {
                    "set-cookie" | "authorization" | "proxy-authorization" | "cookie" => {
                        REDACTED.to_string()
                    }
                    _ => self.scrub(&String::from_utf8_lossy(v.as_bytes())),
                };
                (k.as_str().to_string(), shown)
            })
            .collect();
        let cut = outcome.body.len().min(BODY_BYTES);
        let failure = Failure {
            step: name.clone(),
            at: crate::clock::elapsed(self.started).as_secs_f64(),
            status: outcome.status,
            error: outcome.error.map(|e| e.as_str().to_string()),
            failed_checks,
            headers,
            body: self.scrub(&String::from_utf8_lossy(&outcome.body[..cut])),
            body_truncated: outcome.body.len() > cut,
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
