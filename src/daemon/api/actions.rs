//! The write side: run a profile now, the Flagger hook, a split profile's shard runs
//! (start, share, abort), pause and resume, reload.

use crate::daemon::hooks;
use crate::daemon::reload::reload as reload_config;
use crate::daemon::runs::{StartError, start_run};
use crate::daemon::shardrun;
use crate::daemon::state::Shared;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;

use super::*;

/// Flagger's webhook: the token check (header or metadata `token`), then [`hooks::answer`].
pub(super) async fn flagger_hook(
    State(shared): State<AppState>,
    caller: Caller,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let payload = hooks::parse(&body);
    let metadata_token = payload
        .as_ref()
        .ok()
        .and_then(|p| p.metadata.get("token"))
        .map(String::as_str);
    authorize_hook(&shared, &caller, metadata_token)?;
    let payload = payload.map_err(|e| ApiError(StatusCode::BAD_REQUEST, e))?;
    let header_timeout = caller
        .headers
        .get(hooks::TIMEOUT_HEADER)
        .map(|v| v.to_str().unwrap_or("(not text)"));
    let answer = hooks::answer(&shared, &payload, header_timeout).await;
    Ok((answer.status, axum::Json(answer.body)).into_response())
}

pub(super) async fn run_now(
    State(shared): State<AppState>,
    Path(name): Path<String>,
    caller: Caller,
) -> Result<Response, ApiError> {
    authorize(&shared, &caller, true)?;
    // A split profile over peers runs on every shard at once (`shardrun`), with one verdict
    // at `/api/shard-runs/{shard_run}` here.
    let everywhere = crate::daemon::runs::launch_of(&shared, &name)
        .ok()
        .filter(|l| shardrun::everywhere(&shared, l));
    let started = match everywhere {
        Some(l) => shardrun::start_everywhere(&shared, l, Default::default(), "api")
            .map(|(id, run, _)| (id, Some(run))),
        None => start_run(&shared, &name, "api").map(|id| (id, None)),
    };
    match started {
        Ok((id, run)) => Ok((
            StatusCode::ACCEPTED,
            axum::Json(json!({ "run": id, "profile": name, "shard_run": run })),
        )
            .into_response()),
        Err(StartError::UnknownProfile) => Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no profile `{name}`"),
        )),
        Err(StartError::AlreadyRunning) => Err(ApiError(
            StatusCode::CONFLICT,
            format!("profile `{name}` is already running"),
        )),
        Err(StartError::ShuttingDown) => Err(ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting down".into(),
        )),
        Err(StartError::NotHere { owner, shards }) => {
            let a = hooks::not_here(&name, owner, shards);
            Ok((a.status, axum::Json(a.body)).into_response())
        }
    }
}

/// A collector starting this shard's share of a run on every shard (`shardrun`).
pub(super) async fn shard_run_start(
    State(shared): State<AppState>,
    caller: Caller,
    body: Bytes,
) -> Result<Response, ApiError> {
    authorize(&shared, &caller, true)?;
    let ask = serde_json::from_slice(&body).map_err(|e| {
        ApiError(
            StatusCode::BAD_REQUEST,
            format!("the body is no share of a run to start: {e}"),
        )
    })?;
    let (code, v) = shardrun::start_share(&shared, ask);
    Ok((code, axum::Json(v)).into_response())
}

/// A run on every shard: `?scope=local` this shard's share (what the collector polls), else
/// the one verdict, on the shard that collects it.
pub(super) async fn shard_run(
    State(shared): State<AppState>,
    Path(run): Path<String>,
    Query(q): Query<SloQuery>,
    caller: Caller,
) -> Result<Response, ApiError> {
    authorize(&shared, &caller, false)?;
    q.local(&shared)?;
    let local = q.scope.as_deref() == Some("local");
    let view = if local {
        shardrun::local_view(&shared, &run)
    } else {
        shardrun::verdict_view(&shared, &run)
    };
    let what = if local {
        "share of run"
    } else {
        "run collected"
    };
    view.map(|v| axum::Json(v).into_response()).ok_or_else(|| {
        ApiError(
            StatusCode::NOT_FOUND,
            format!("no {what} `{run}` here (only the newest are kept)"),
        )
    })
}

/// Stops this shard's share of a run on every shard (the collector passing an abort on).
pub(super) async fn shard_run_abort(
    State(shared): State<AppState>,
    Path(run): Path<String>,
    caller: Caller,
    body: Bytes,
) -> Result<Response, ApiError> {
    authorize(&shared, &caller, true)?;
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let reason: String = v["reason"]
        .as_str()
        .unwrap_or("asked by the collecting shard")
        .chars()
        .take(500)
        .collect();
    if shardrun::stop_local(&shared, &run, &reason) {
        Ok(axum::Json(json!({ "run": run, "stopped": true })).into_response())
    } else {
        Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no share of run `{run}` here"),
        ))
    }
}

pub(super) async fn pause(
    State(shared): State<AppState>,
    Path(name): Path<String>,
    caller: Caller,
) -> Result<Response, ApiError> {
    set_paused(&shared, &name, &caller, true)
}

pub(super) async fn resume(
    State(shared): State<AppState>,
    Path(name): Path<String>,
    caller: Caller,
) -> Result<Response, ApiError> {
    set_paused(&shared, &name, &caller, false)
}

pub(super) fn set_paused(
    shared: &Shared,
    name: &str,
    caller: &Caller,
    paused: bool,
) -> Result<Response, ApiError> {
    authorize(shared, caller, true)?;
    if shared.set_paused(name, paused) {
        Ok(axum::Json(json!({ "profile": name, "paused": paused })).into_response())
    } else {
        Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no profile `{name}`"),
        ))
    }
}

pub(super) async fn reload(
    State(shared): State<AppState>,
    caller: Caller,
) -> Result<Response, ApiError> {
    authorize(&shared, &caller, true)?;
    match reload_config(&shared).await {
        Ok(true) => Ok(axum::Json(json!({ "reloaded": true })).into_response()),
        Ok(false) => Err(ApiError(
            StatusCode::CONFLICT,
            "this daemon's config is built in (demo); nothing to reload".into(),
        )),
        Err(e) => Err(ApiError(StatusCode::UNPROCESSABLE_ENTITY, e)),
    }
}
