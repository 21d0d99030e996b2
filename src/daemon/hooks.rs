//! Flagger's webhook (`POST /api/hooks/flagger`): what a call asks for and its answer. The
//! HTTP face (`api`) checks the token and hands the body here.
//!
//! Flagger posts `{name, namespace, phase, checksum, metadata}`, where `metadata` is the
//! webhook's map of strings, and counts any non-2xx answer as a failed check. The metadata
//! picks the mode:
//! - `profile: NAME` (with optional `url`, `rate`, `duration` overrides) runs that profile now
//!   and answers when the run ends: 200 when every threshold passed, 412 when one failed or the
//!   run was aborted (the body names the failed thresholds with their observed values), 503
//!   when the run was inconclusive (sloburn fell behind and dropped arrivals of its own: no
//!   verdict on the canary, `reason` names the overload), 500 when the run ended in an error.
//!   A second call with the same canary, phase, checksum and metadata while the first one's
//!   run is going waits for that run and gets its answer
//!   (`"joined": true`): one run, however often Flagger retries. A run planned to last longer
//!   than the call's `timeout` (metadata, or the `Sloburn-Timeout` header; Flagger's own default
//!   of 10s when neither is given) is refused up front with 422. A split profile of a shard
//!   with `server.peers` runs on every shard at once (`shardrun`): the answer is the one
//!   verdict on every shard's figures, with `shards` naming them, 503 when one is missing.
//!   With `compare: last_passed` the run is also compared with the profile's last passing run
//!   (kept in `/api/runs`), as `sloburn compare` compares two records: a row `regressed` makes
//!   the answer 412, naming the metric and its change (`comparison.regressed`); without a
//!   passing run to compare with, the answer says so and stands on the thresholds.
//! - `slo: NAME` with `max_burn_rate` and `window` answers at once from the live burn rate
//!   (counting events not yet folded into the minute windows, as budget guards do): 200 when it
//!   is at most `max_burn_rate`, else 412. It starts no run. A window without events burns 0.
//!
//! Other metadata keys (Flagger's, or a load tester's `cmd`) are ignored and listed in the
//! answer as `ignored_metadata`. Bad JSON or a bad value is a 400 with the reason; an unknown
//! profile or SLO a 404.

use super::runs::{Launch, StartError, launch_of, start, with_overrides};
use super::state::{RunEntry, Shared};
use crate::load::plan::planned_duration;
use crate::load::record::RunRecord;
use axum::http::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Flagger's webhook timeout when the webhook sets none.
pub const FLAGGER_DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The request header that may carry the caller's timeout (for callers other than Flagger,
/// which sends no headers of its own).
pub const TIMEOUT_HEADER: &str = "sloburn-timeout";

/// The metadata keys this endpoint reads (`token` is read by the token check).
const KEYS: &[&str] = &[
    "profile",
    "url",
    "rate",
    "duration",
    "timeout",
    "slo",
    "max_burn_rate",
    "window",
    "compare",
    "token",
];

/// Flagger's webhook payload (`CanaryWebhookPayload`); fields Flagger may add are ignored.
#[derive(Debug, serde::Deserialize)]
pub struct Payload {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub phase: String,
    #[serde(default)]
    pub checksum: String,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// The payload, or why it is not one (for a 400).
pub fn parse(body: &[u8]) -> Result<Payload, String> {
    serde_json::from_slice(body).map_err(|e| format!("the body is not Flagger's webhook JSON: {e}"))
}

/// An answer: its status and JSON body.
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
}

fn refuse(status: StatusCode, why: impl Into<String>) -> Answer {
    Answer {
        status,
        body: json!({ "error": why.into() }),
    }
}

/// 421 for a profile another shard owns, naming it: the webhook must call the owner's pod.
pub(super) fn not_here(profile: &str, owner: u32, shards: u32) -> Answer {
    Answer {
        status: StatusCode::MISDIRECTED_REQUEST,
        body: json!({
            "error": StartError::not_here_message(profile, owner, shards),
            "profile": profile,
            "owner": owner,
            "shards": shards,
        }),
    }
}

/// Answers one call whose token was accepted. `header_timeout` is the `Sloburn-Timeout`
/// header, if sent.
pub async fn answer(
    shared: &Arc<Shared>,
    payload: &Payload,
    header_timeout: Option<&str>,
) -> Answer {
    let ignored: Vec<&str> = payload
        .metadata
        .keys()
        .map(String::as_str)
        .filter(|k| !KEYS.contains(k))
        .collect();
    let m = &payload.metadata;
    let mut answer = match (m.get("profile"), m.get("slo")) {
        (Some(_), Some(_)) => refuse(
            StatusCode::BAD_REQUEST,
            "metadata sets both `profile` and `slo`: one webhook is one mode",
        ),
        (None, None) => refuse(
            StatusCode::BAD_REQUEST,
            "metadata needs `profile` (run a load test now) or `slo` (check the live burn rate)",
        ),
        (Some(profile), None) => run_profile(shared, payload, profile, header_timeout).await,
        (None, Some(slo)) => slo_burn(shared, m, slo).await,
    };
    if !ignored.is_empty()
        && let Some(obj) = answer.body.as_object_mut()
    {
        obj.insert("ignored_metadata".into(), json!(ignored));
    }
    answer
}

/// Profile mode: validate, refuse what cannot finish in time, start (or join) the run, wait.
async fn run_profile(
    shared: &Arc<Shared>,
    payload: &Payload,
    profile: &str,
    header_timeout: Option<&str>,
) -> Answer {
    let baseline = match payload.metadata.get("compare").map(String::as_str) {
        None => None,
        Some("last_passed") => Some(last_passed(shared, profile).await),
        Some(other) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!(
                    "metadata `compare` `{other}`: `last_passed` compares the run with the \
                     profile's last passing run"
                ),
            );
        }
    };
    let (id, mut ending, joined) = match admit(shared, payload, profile, header_timeout) {
        Ok(started) => started,
        Err(refused) => return refused,
    };
    tracing::info!(
        profile,
        run = id,
        joined,
        canary = %format!("{}.{}", payload.name, payload.namespace),
        phase = %payload.phase,
        "flagger webhook"
    );
    let record = match ending.wait_for(Option::is_some).await {
        Ok(r) => r.clone(),
        Err(_) => None,
    };
    match record {
        Some(r) => {
            let mut answer = verdict(&r, joined);
            if let Some(baseline) = baseline {
                compared(shared, &mut answer, baseline, r.id).await;
            }
            answer
        }
        None => refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("run {id} did not finish: the daemon is shutting down"),
        ),
    }
}

/// A finished run's detail JSON, kept in memory or else in the store.
pub(super) async fn kept_detail(shared: &Arc<Shared>, id: u64) -> Option<Arc<str>> {
    let cached = shared
        .details
        .lock()
        .ok()
        .and_then(|d| d.iter().find(|(i, _)| *i == id).map(|(_, d)| d.clone()));
    if cached.is_some() {
        return cached;
    }
    let s = shared.clone();
    tokio::task::spawn_blocking(move || s.budget.with_store(|st| st.run_detail(id)))
        .await
        .ok()
        .flatten()
        .and_then(Result::ok)
        .flatten()
        .map(Arc::from)
}

/// A finished run's `RunRecord` (in its detail), if it has one.
async fn kept_record(shared: &Arc<Shared>, id: u64) -> Option<RunRecord> {
    let detail = kept_detail(shared, id).await?;
    let mut v: Value = serde_json::from_str(&detail).ok()?;
    serde_json::from_value(v.get_mut("record")?.take()).ok()
}

/// The profile's last passing run with a record: its id and record, or `None` (said in the
/// answer).
async fn last_passed(shared: &Arc<Shared>, profile: &str) -> Option<(u64, RunRecord)> {
    let passed: Vec<u64> = shared
        .recent_runs(Some(profile))
        .iter()
        .filter(|r| r.result == "passed")
        .map(|r| r.id)
        .collect();
    for id in passed {
        if let Some(record) = kept_record(shared, id).await {
            return Some((id, record));
        }
    }
    None
}

/// Compares run `id` with `baseline` (`compare: last_passed`): the rows in the answer's
/// `comparison`, and 412 naming each regressed metric and its change.
async fn compared(
    shared: &Arc<Shared>,
    answer: &mut Answer,
    baseline: Option<(u64, RunRecord)>,
    id: u64,
) {
    let Some((against, old)) = baseline else {
        answer.body["comparison"] = json!({ "note": "no passing run of the profile to compare with: judged on its thresholds" });
        return;
    };
    let Some(new) = kept_record(shared, id).await else {
        answer.body["comparison"] = json!({ "against": against, "note": "this run has no record" });
        return;
    };
    let c = match crate::compare::compare(&old, &new, &crate::compare::Options::default()) {
        Ok(c) => c,
        Err(why) => {
            answer.body["comparison"] = json!({ "against": against, "note": why });
            return;
        }
    };
    let regressed: Vec<Value> = c
        .regressed()
        .map(|r| json!({ "metric": r.name(), "change": r.headline() }))
        .collect();
    if let Some(named) = c.regressions() {
        answer.status = StatusCode::PRECONDITION_FAILED;
        answer.body["passed"] = json!(false);
        answer.body["reason"] = json!(format!("regressed against run {against}: {named}"));
    }
    answer.body["comparison"] =
        json!({ "against": against, "regressed": regressed, "rows": c.rows });
}

/// The call's run, started or joined: its id, how it ends, and whether it was joined; or the
/// answer refusing the call.
fn admit(
    shared: &Arc<Shared>,
    payload: &Payload,
    profile: &str,
    header_timeout: Option<&str>,
) -> Result<(u64, super::state::Ending, bool), Answer> {
    let launch = match launch_of(shared, profile) {
        Ok(l) => l,
        Err(StartError::NotHere { owner, shards }) => return Err(not_here(profile, owner, shards)),
        Err(_) => {
            let known: Vec<String> = shared.config().profiles.keys().cloned().collect();
            return Err(refuse(
                StatusCode::NOT_FOUND,
                format!("no profile `{profile}` (profiles: {})", known.join(", ")),
            ));
        }
    };
    let launch = with_overrides(launch, &payload.metadata)
        .map_err(|why| refuse(StatusCode::BAD_REQUEST, why))?;
    let timeout = call_timeout(payload.metadata.get("timeout"), header_timeout)
        .map_err(|why| refuse(StatusCode::BAD_REQUEST, why))?;
    fits(shared, &launch, profile, timeout)?;
    start_or_join(shared, payload, launch, profile)
}

/// Refuses a run that may outlast the webhook's `timeout`: start time, planned duration and
/// the rest of its last iterations (and a split run's lead).
fn fits(
    shared: &Arc<Shared>,
    launch: &Launch,
    profile: &str,
    timeout: Duration,
) -> Result<(), Answer> {
    let worst = {
        let cfg = shared.config();
        let iteration = crate::config::longest_iteration(
            &launch.profile.target,
            &launch.profile.mix,
            &cfg.targets,
            &cfg.journeys,
        );
        let lead = if super::shardrun::everywhere(shared, launch) {
            super::shardrun::LEAD
        } else {
            Duration::ZERO
        };
        worst_case(launch, iteration, cfg.server.grace_period).saturating_add(lead)
    };
    if worst > timeout {
        return Err(refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!(
                "profile `{profile}` may take up to {} (start time, planned duration and the \
                 rest of its last iterations: steps' timeouts and think times, or the graceful \
                 stop), longer than the webhook's timeout of \
                 {}: raise the webhook's `timeout` and set the same in metadata `timeout`",
                crate::units::format_duration(worst),
                crate::units::format_duration(timeout)
            ),
        ));
    }
    Ok(())
}

/// Joins the run an identical call (same canary, phase, checksum and metadata) started and
/// that has not ended, else starts one.
fn start_or_join(
    shared: &Arc<Shared>,
    payload: &Payload,
    launch: Launch,
    profile: &str,
) -> Result<(u64, super::state::Ending, bool), Answer> {
    let key = serde_json::to_string(&(
        &payload.namespace,
        &payload.name,
        &payload.phase,
        &payload.checksum,
        &payload.metadata,
    ))
    .unwrap_or_default();
    let Ok(mut runs) = shared.hook_runs.lock() else {
        return Err(refuse(StatusCode::SERVICE_UNAVAILABLE, "shutting down"));
    };
    runs.retain(|_, (_, e)| e.borrow().is_none());
    if let Some((id, e)) = runs.get(&key) {
        return Ok((*id, e.clone(), true));
    }
    match start_one(shared, launch, &payload.metadata) {
        Ok((id, e)) => {
            runs.insert(key, (id, e.clone()));
            Ok((id, e, false))
        }
        Err(StartError::AlreadyRunning) => Err(refuse(
            StatusCode::CONFLICT,
            format!(
                "profile `{profile}` is running already (started by its schedule, \
                 the API or another webhook); retry when it ends"
            ),
        )),
        Err(StartError::UnknownProfile) => Err(refuse(
            StatusCode::NOT_FOUND,
            format!("no profile `{profile}`"),
        )),
        Err(StartError::ShuttingDown) => {
            Err(refuse(StatusCode::SERVICE_UNAVAILABLE, "shutting down"))
        }
        Err(StartError::NotHere { owner, shards }) => Err(not_here(profile, owner, shards)),
    }
}

/// Starts the hook's run: on every shard when the profile is split over peers
/// (`shardrun`, one verdict), else here.
fn start_one(
    shared: &Arc<Shared>,
    launch: Launch,
    metadata: &BTreeMap<String, String>,
) -> Result<(u64, super::state::Ending), StartError> {
    if super::shardrun::everywhere(shared, &launch) {
        let overrides = metadata
            .iter()
            .filter(|(k, _)| ["url", "rate", "duration"].contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        super::shardrun::start_everywhere(shared, launch, overrides, "flagger")
            .map(|(id, _, ending)| (id, ending))
    } else {
        start(shared, launch, "flagger")
    }
}

/// The answer for a finished run.
fn verdict(r: &RunEntry, joined: bool) -> Answer {
    let status = match r.result.as_str() {
        "passed" => StatusCode::OK,
        "error" => StatusCode::INTERNAL_SERVER_ERROR,
        // sloburn fell behind: no verdict on the canary either way (`reason` says why).
        "inconclusive" => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::PRECONDITION_FAILED,
    };
    let failed: Vec<Value> = r
        .thresholds
        .iter()
        .filter(|t| !t.passed)
        .map(|t| json!({ "metric": t.metric, "threshold": t.threshold, "observed": finite(t.observed) }))
        .collect();
    Answer {
        status,
        body: json!({
            "mode": "profile",
            "profile": r.profile,
            "run": r.id,
            "joined": joined,
            "passed": status == StatusCode::OK,
            "result": r.result,
            "reason": r.reason,
            "failed_thresholds": failed,
            "thresholds": r.thresholds.iter().map(|t| json!({
                "metric": t.metric,
                "threshold": t.threshold,
                "passed": t.passed,
                "observed": finite(t.observed),
            })).collect::<Vec<_>>(),
            "requests": r.requests,
            "failed_ratio": r.failed_ratio,
            "p95_ms": r.p95_ms,
            "p99_ms": r.p99_ms,
            "shards": r.shards,
        }),
    }
}

fn finite(x: f64) -> Value {
    if x.is_finite() { json!(x) } else { Value::Null }
}

/// The caller's timeout: the smaller of metadata `timeout` and the header; Flagger's default
/// when neither is given.
fn call_timeout(meta: Option<&String>, header: Option<&str>) -> Result<Duration, String> {
    let parse = |what: &str, s: &str| match crate::units::parse_duration(s.trim()) {
        Ok(d) if d.is_zero() => Err(format!("{what} `{s}` must be longer than zero")),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{what} `{s}`: {e}")),
    };
    let meta = meta.map(|s| parse("metadata `timeout`", s)).transpose()?;
    let header = header
        .map(|s| parse("header `Sloburn-Timeout`", s))
        .transpose()?;
    Ok(match (meta, header) {
        (Some(a), Some(b)) => a.min(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => FLAGGER_DEFAULT_TIMEOUT,
    })
}

/// How long the run may take at most: its start time and planned duration, then the rest of
/// its last iterations (`iteration`: the longest one may take, a journey's every step and
/// think time included), bounded by the graceful stop.
fn worst_case(launch: &Launch, iteration: Duration, grace_period: Duration) -> Duration {
    let p = &launch.profile;
    let tail = p.graceful_stop.min(grace_period).min(iteration);
    p.start_time
        .saturating_add(planned_duration(&p.executor))
        .saturating_add(tail)
}

/// SLO mode on a quorum SLO: the quorum's burn across the locations (`locations.rs`).
async fn quorum_burn(shared: &Shared, slo: &str, window: Duration, max: f64) -> Answer {
    let (status, body) = super::locations::hook_answer(shared, slo, window, max).await;
    Answer { status, body }
}

/// SLO mode: the live burn rate over `window` against `max_burn_rate`.
async fn slo_burn(shared: &Shared, m: &BTreeMap<String, String>, slo: &str) -> Answer {
    let cfg = shared.config();
    let Some(def) = cfg.slos.get(slo) else {
        let known: Vec<String> = cfg.slos.keys().cloned().collect();
        return refuse(
            StatusCode::NOT_FOUND,
            format!("no SLO `{slo}` (SLOs: {})", known.join(", ")),
        );
    };
    let max = match m.get("max_burn_rate") {
        None => return refuse(StatusCode::BAD_REQUEST, "SLO mode needs `max_burn_rate`"),
        Some(s) => match s.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => x,
            _ => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    format!("metadata `max_burn_rate` `{s}` must be a number of at least 0"),
                );
            }
        },
    };
    let period = def.period;
    let window = match m.get("window") {
        None => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "SLO mode needs `window`, e.g. `5m`",
            );
        }
        Some(s) => match crate::units::parse_duration(s.trim()) {
            Ok(w) if w >= Duration::from_secs(60) && w <= period => w,
            Ok(_) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "metadata `window` `{s}` must be from 1m to the SLO's period ({})",
                        crate::units::format_duration(period)
                    ),
                );
            }
            Err(e) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    format!("metadata `window` `{s}`: {e}"),
                );
            }
        },
    };
    if super::locations::quorum_of(shared, slo).is_some() {
        return quorum_burn(shared, slo, window, max).await;
    }
    let now = shared.clock.unix_secs() as i64;
    let no_state = || {
        refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("SLO `{slo}` has no live state yet"),
        )
    };
    // With peers, the whole SLO's events (every shard's), else this daemon's.
    let (burn, shards) = if super::peers::peered(shared) {
        let Some((good, bad, budget, g)) =
            super::peers::whole_totals(shared, slo, window, now).await
        else {
            return no_state();
        };
        (crate::slo::burn_rate(good, bad, budget), Some(g))
    } else {
        match shared.budget.burn_rate(slo, window, now) {
            Some(b) => (b, None),
            None => return no_state(),
        }
    };
    let passed = burn <= max;
    let mut body = json!({
        "mode": "slo",
        "slo": slo,
        "window": crate::units::format_duration(window),
        "burn_rate": finite(burn),
        "max_burn_rate": max,
        "passed": passed,
    });
    let mut status = if passed {
        StatusCode::OK
    } else {
        StatusCode::PRECONDITION_FAILED
    };
    if let Some(g) = shards {
        g.describe(&mut body);
        // A shard's events unknown: no verdict on the canary either way.
        if !g.missing().is_empty() {
            status = StatusCode::SERVICE_UNAVAILABLE;
            body["passed"] = Value::Null;
            body["reason"] = json!(format!(
                "inconclusive: shards {:?} did not answer, so the whole SLO's burn is unknown",
                g.missing()
            ));
        }
    }
    Answer { status, body }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inconclusive_run_is_a_503_naming_why_never_a_failed_canary() {
        let record = |result: &str, reason: Option<&str>| RunEntry {
            id: 1,
            profile: "p".into(),
            target: "t".into(),
            trigger: "flagger".into(),
            started_at: 0.0,
            finished_at: Some(1.0),
            result: result.into(),
            reason: reason.map(str::to_string),
            requests: 1,
            rate: 1.0,
            failed_ratio: 0.0,
            dropped: 0,
            p95_ms: 1.0,
            p99_ms: 1.0,
            thresholds: Vec::new(),
            shards: None,
            share_of: None,
            capacity: None,
        };
        let why = "inconclusive: the generator dropped 10 of 100 arrivals";
        let a = verdict(&record("inconclusive", Some(why)), false);
        assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(a.body["passed"], false);
        assert_eq!(a.body["reason"], why);
        assert_eq!(
            verdict(&record("passed", None), false).status,
            StatusCode::OK
        );
        assert_eq!(
            verdict(&record("failed", None), false).status,
            StatusCode::PRECONDITION_FAILED
        );
    }

    #[test]
    fn the_timeout_is_the_smaller_given_and_flaggers_default_without_one() {
        let m = |s: &str| Some(s.to_string());
        assert_eq!(call_timeout(None, None), Ok(FLAGGER_DEFAULT_TIMEOUT));
        assert_eq!(
            call_timeout(m("2m").as_ref(), None),
            Ok(Duration::from_secs(120))
        );
        assert_eq!(
            call_timeout(m("2m").as_ref(), Some("30s")),
            Ok(Duration::from_secs(30))
        );
        assert_eq!(
            call_timeout(None, Some(" 45s ")),
            Ok(Duration::from_secs(45))
        );
        assert!(
            call_timeout(m("0s").as_ref(), None)
                .unwrap_err()
                .contains("longer than zero")
        );
        assert!(
            call_timeout(None, Some("soon"))
                .unwrap_err()
                .contains("Sloburn-Timeout")
        );
    }

    #[test]
    fn flaggers_payload_reads_with_extra_fields_and_refuses_non_string_metadata() {
        let p = parse(
            br#"{"name":"podinfo","namespace":"test","phase":"Progressing","checksum":"85d5","buildId":"7","metadata":{"profile":"canary"}}"#,
        )
        .unwrap();
        assert_eq!(
            (p.name.as_str(), p.phase.as_str()),
            ("podinfo", "Progressing")
        );
        assert_eq!(p.metadata["profile"], "canary");
        assert!(parse(br#"{"metadata":{"rate":20}}"#).is_err());
        assert!(parse(b"").is_err());
    }
}
