//! The read side of profiles and runs: `/api/profiles`, `/api/runs`, `/api/runs/{id}`,
//! `/api/series` with the SLO burn-downs.

use crate::daemon::state::Shared;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::sync::Arc;

use super::*;

pub(super) async fn profiles(
    State(shared): State<AppState>,
    caller: Caller,
) -> Result<Response, ApiError> {
    authorize(&shared, &caller, false)?;
    Ok(axum::Json(json!({ "profiles": shared.profiles() })).into_response())
}

#[derive(serde::Deserialize)]
pub(super) struct RunsQuery {
    pub(super) profile: Option<String>,
}

pub(super) async fn runs(
    State(shared): State<AppState>,
    caller: Caller,
    Query(q): Query<RunsQuery>,
) -> Result<Response, ApiError> {
    authorize(&shared, &caller, false)?;
    Ok(axum::Json(json!({ "runs": shared.recent_runs(q.profile.as_deref()) })).into_response())
}

/// One run's record and its detail view (none while it runs, or when it ended in an error).
pub(super) async fn run_detail(
    State(shared): State<AppState>,
    Path(id): Path<String>,
    caller: Caller,
) -> Result<Response, ApiError> {
    authorize(&shared, &caller, false)?;
    let not_found = || ApiError(StatusCode::NOT_FOUND, format!("no run `{id}` is kept"));
    let n: u64 = id.parse().map_err(|_| not_found())?;
    let record = shared.run_record(n).ok_or_else(not_found)?;
    let detail = crate::daemon::hooks::kept_detail(&shared, n).await;
    let mut detail = detail
        .and_then(|d| serde_json::from_str::<serde_json::Value>(&d).ok())
        .unwrap_or(serde_json::Value::Null);
    withhold_evidence(&shared, &caller, &mut detail);
    if let Some(d) = detail.as_object_mut() {
        // Served whole at `/api/runs/{id}/record`.
        d.remove("record");
    }
    Ok(axum::Json(json!({ "run": record, "detail": detail })).into_response())
}

/// One finished run's `RunRecord` (`sloburn compare` reads it), under the same token rules as
/// `/api/runs/{id}`; 404 while it runs, when it ended in an error, or for a run kept from
/// before records were.
pub(super) async fn run_record(
    State(shared): State<AppState>,
    Path(id): Path<String>,
    caller: Caller,
) -> Result<Response, ApiError> {
    authorize(&shared, &caller, false)?;
    let not_found = |why: &str| ApiError(StatusCode::NOT_FOUND, format!("run `{id}`: {why}"));
    let n: u64 = id.parse().map_err(|_| not_found("no such run is kept"))?;
    shared
        .run_record(n)
        .ok_or_else(|| not_found("no such run is kept"))?;
    let detail = crate::daemon::hooks::kept_detail(&shared, n).await;
    let record = detail
        .and_then(|d| serde_json::from_str::<serde_json::Value>(&d).ok())
        .and_then(|mut d| d.get_mut("record").map(serde_json::Value::take))
        .ok_or_else(|| {
            not_found("no record: it is running, ended in an error, or predates records")
        })?;
    Ok(axum::Json(record).into_response())
}

/// What the target answered (failure evidence, scrubbed) is shown only with the admin token,
/// unless `server.public_evidence`; without it the detail says why its evidence is empty.
fn withhold_evidence(shared: &Shared, caller: &Caller, detail: &mut serde_json::Value) {
    let Some(d) = detail.as_object_mut() else {
        return;
    };
    if shared.config().server.public_evidence || holds_admin_token(shared, caller) {
        return;
    }
    let had = d
        .get("evidence")
        .and_then(|e| e.as_array())
        .is_some_and(|e| !e.is_empty());
    d.insert("evidence".into(), json!([]));
    if had {
        d.insert(
            "evidence_withheld".into(),
            json!("failure evidence needs the admin token (or server.public_evidence: true)"),
        );
    }
}

/// Each profile's last hour (10 s points from its ring), its run in progress, and each SLO's
/// budget burn-down. Nothing is computed here but the JSON: the rings are filled by the runs'
/// samplers, and the burn-downs are redrawn at most once a minute.
pub(super) async fn series(
    State(shared): State<AppState>,
    caller: Caller,
) -> Result<Response, ApiError> {
    authorize(&shared, &caller, false)?;
    let now = crate::clock::since_epoch().as_secs() as i64;
    let last_runs: std::collections::BTreeMap<String, crate::daemon::state::RunEntry> = {
        let mut m = std::collections::BTreeMap::new();
        for r in shared.recent_runs(None) {
            if r.result != "running" {
                m.entry(r.profile.clone()).or_insert(r);
            }
        }
        m
    };
    let profiles: Vec<serde_json::Value> = {
        let views = shared.profiles();
        let series = shared.series.lock().ok();
        views
            .iter()
            .map(|p| {
                let s = series.as_ref().and_then(|s| s.get(&p.name));
                let live = s.and_then(|s| s.live.as_ref()).map(|(id, l)| {
                    let mut v = json!(l);
                    v["run"] = json!(id);
                    v
                });
                let points = s.map_or_else(
                    || crate::web::Ring::default().columns(now),
                    |s| s.ring.columns(now),
                );
                json!({
                    "name": p.name,
                    "target": p.target,
                    "schedule": p.schedule,
                    "paused": p.paused,
                    "running": p.running,
                    "next_run": p.next_run,
                    "last_run": last_runs.get(&p.name).map(|r| json!({
                        "id": r.id, "result": r.result, "finished_at": r.finished_at,
                    })),
                    "live": live,
                    "points": points,
                })
            })
            .collect()
    };
    let slos: Vec<serde_json::Value> = burn_downs(&shared, now)
        .iter()
        .map(|(name, b)| {
            json!({
                "name": name,
                "burn_down": { "t": b.t, "budget_remaining": b.remaining },
            })
        })
        .collect();
    Ok(axum::Json(json!({
        "now": now,
        "resolution_seconds": crate::web::recorder::SLOT_SECONDS,
        "window_seconds": crate::web::series::WINDOW_SECONDS,
        "profiles": profiles,
        "slos": slos,
    }))
    .into_response())
}

/// The SLOs' burn-downs, redrawn when the minute has changed since the last drawing.
pub(super) fn burn_downs(shared: &Shared, now: i64) -> Arc<Vec<(String, crate::web::BurnDown)>> {
    let minute = crate::slo::minute_of(now);
    let Ok(mut cache) = shared.burn_downs.lock() else {
        return Arc::default();
    };
    if let Some((at, drawn)) = cache.as_ref()
        && *at == minute
    {
        return drawn.clone();
    }
    let drawn: Vec<(String, crate::web::BurnDown)> = shared
        .config()
        .slos
        .keys()
        .filter_map(|name| {
            let (minutes, period, budget) = shared.budget.period_minutes(name)?;
            Some((
                name.clone(),
                crate::web::burn_down(&minutes, minute, period, budget),
            ))
        })
        .collect();
    let drawn = Arc::new(drawn);
    *cache = Some((minute, drawn.clone()));
    drawn
}
