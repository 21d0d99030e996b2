//! One run's detail view as data: summary, thresholds with their observed values and verdicts,
//! the timeline, the scatter, phases, status codes, error classes and checks. The daemon keeps
//! it in the store for `/api/runs/{id}`; `sloburn run --report` embeds it in the HTML file.

use super::recorder::{Point, ScatterData};
use crate::http::Phase;
use crate::load::runner::{Abort, RunReport};
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RunDetail {
    /// The daemon's run id; 0 for `sloburn run`.
    pub id: u64,
    pub profile: String,
    pub target: String,
    pub started_at: f64,
    pub finished_at: f64,
    /// passed | failed | aborted | aborted_by_guard | error
    pub result: String,
    pub reason: Option<String>,
    pub summary: Summary,
    pub thresholds: Vec<ThresholdRow>,
    pub timeline: Vec<Point>,
    pub scatter: ScatterData,
    pub phases: Vec<PhaseRow>,
    /// (status, requests), 0 being a probe's or gRPC's OK; requests without a status are in
    /// `no_response` (records from before it hold them under status 0 and no `no_response`).
    pub statuses: Vec<(u16, u64)>,
    #[serde(default)]
    pub no_response: Option<u64>,
    pub errors: Vec<(String, u64)>,
    pub checks: Vec<CheckRow>,
    /// The last failing responses of each step (`evidence.rs`); none in records from before.
    #[serde(default)]
    pub evidence: Vec<super::evidence::Failure>,
    /// How `sloburn run` was set up (the `--report` page says it); none in the daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<RunSetup>,
    /// The daemon's run: its `RunRecord` with the plan, which `/api/runs/{id}/record` serves
    /// (and `/api/runs/{id}` leaves out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<serde_json::Value>,
}

/// What a report names of its run, so a page read later says what was tested and how.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RunSetup {
    /// The URLs requested, as written (secrets as their references), without user part and
    /// query.
    pub urls: Vec<String>,
    /// The load, as k6's scenario line says it (`50.00 iterations/s for 10s (maxVUs: …)`).
    pub load: String,
    /// The command line, values of headers, `-e`, bodies and tokens replaced by `…`.
    pub command: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub requests: u64,
    pub failed: u64,
    pub rate: f64,
    pub duration_seconds: f64,
    pub dropped: u64,
    pub vus_max: u32,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub data_sent_bytes: u64,
    pub data_received_bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ThresholdRow {
    pub metric: String,
    pub threshold: String,
    pub passed: bool,
    /// None when the metric had no samples.
    pub observed: Option<f64>,
    /// `ms` for trends, `ratio` for rates, `count` for counters.
    pub unit: String,
    /// The observed value as the summary prints it (`212.40ms`, `0.0120`, `no data`).
    pub observed_text: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PhaseRow {
    pub phase: String,
    pub avg_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CheckRow {
    pub name: String,
    pub passes: u64,
    pub fails: u64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn unit_of(metric: &str) -> &'static str {
    if metric == "http_req_failed" || metric == "checks" {
        "ratio"
    } else if metric.starts_with("http_req_") || metric.ends_with("_duration") {
        "ms"
    } else {
        "count"
    }
}

/// How a run ended, as the daemon's run records say it, with the failed thresholds named.
pub fn verdict(report: &RunReport) -> (&'static str, Option<String>) {
    let inconclusive = report.inconclusive();
    match &report.aborted {
        Some(Abort::Guard(why)) => ("aborted_by_guard", Some(why.clone())),
        Some(Abort::Stopped(why)) => ("aborted", Some(why.clone())),
        _ if inconclusive.is_some() => ("inconclusive", inconclusive),
        Some(Abort::Threshold(t)) => ("aborted", Some(format!("threshold `{t}` failed"))),
        None | Some(Abort::DataUsedUp(_)) if report.thresholds_passed() => ("passed", None),
        None | Some(Abort::DataUsedUp(_)) => {
            let failed: Vec<String> = report
                .thresholds
                .iter()
                .filter(|(_, r)| !r.passed)
                .map(|(s, _)| format!("{} `{}`", s.threshold.metric, s.threshold.source))
                .collect();
            ("failed", Some(format!("failed: {}", failed.join(", "))))
        }
    }
}

impl RunDetail {
    /// The detail of a finished run.
    pub fn of(
        report: &RunReport,
        timeline: &[Point],
        scatter: ScatterData,
        started_at: f64,
        finished_at: f64,
    ) -> RunDetail {
        let s = &report.stats;
        let has = s.duration.count() > 0;
        let q = |x: f64| has.then(|| ms(s.duration.quantile(x)));
        let (result, reason) = verdict(report);
        let statuses = s.statuses.clone();
        RunDetail {
            id: 0,
            profile: String::new(),
            target: String::new(),
            started_at,
            finished_at,
            result: result.into(),
            reason,
            summary: Summary {
                requests: s.requests,
                failed: s.failed,
                rate: s.per_second(s.requests),
                duration_seconds: s.elapsed.as_secs_f64(),
                dropped: s.dropped,
                vus_max: s.vus_max,
                p50_ms: q(0.5),
                p90_ms: q(0.9),
                p95_ms: q(0.95),
                p99_ms: q(0.99),
                max_ms: has.then(|| ms(s.duration.max())),
                data_sent_bytes: s.data_sent,
                data_received_bytes: s.data_received,
            },
            thresholds: report
                .thresholds
                .iter()
                .map(|(spec, r)| {
                    let metric = &spec.threshold.metric;
                    ThresholdRow {
                        metric: metric.clone(),
                        threshold: spec.threshold.source.clone(),
                        passed: r.passed,
                        observed: (!r.no_data).then_some(r.observed),
                        unit: unit_of(metric).into(),
                        observed_text: if r.no_data {
                            "no data".into()
                        } else {
                            crate::load::summary::observed(metric, r.observed)
                        },
                    }
                })
                .collect(),
            timeline: timeline.to_vec(),
            scatter,
            phases: Phase::ALL
                .iter()
                .map(|p| {
                    let h = &s.phases[*p as usize];
                    let has = h.count() > 0;
                    PhaseRow {
                        phase: p.as_str().into(),
                        avg_ms: has.then(|| ms(h.mean())),
                        p95_ms: has.then(|| ms(h.quantile(0.95))),
                        max_ms: has.then(|| ms(h.max())),
                    }
                })
                .collect(),
            statuses,
            no_response: Some(s.no_response),
            errors: s
                .errors
                .iter()
                .map(|(e, n)| (e.as_str().to_string(), *n))
                .collect(),
            checks: s
                .checks
                .iter()
                .map(|(name, p, f)| CheckRow {
                    name: name.clone(),
                    passes: *p,
                    fails: *f,
                })
                .collect(),
            evidence: Vec::new(),
            setup: None,
            record: None,
        }
    }
}
