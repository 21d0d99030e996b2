//! `/api/maintenance`: list, open and close maintenance windows (the budget keeps them).

use super::{ApiError, AppState, Caller, authorize};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The configured and API-opened maintenance windows, each with whether it is active.
pub(super) async fn maintenance(
    State(shared): State<AppState>,
    caller: Caller,
) -> Result<Response, ApiError> {
    authorize(&shared, &caller, false)?;
    let windows = shared
        .budget
        .maintenance(crate::clock::since_epoch().as_secs() as i64);
    Ok(axum::Json(json!({ "windows": windows })).into_response())
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenMaintenance {
    /// How long, e.g. `30m` (at most 7 days).
    duration: String,
    /// A set: repeats are dropped as the body is read (200,000 repeats of one name are one).
    #[serde(default)]
    slos: std::collections::BTreeSet<String>,
    #[serde(default)]
    reason: String,
}

/// Opens a maintenance window now: the SLOs named (all, when none) count no event until it
/// ends or is closed. Each name once, configured SLOs only, at most `budget`'s `MAX_NAMES`;
/// the window is kept in the store, so it outlives a restart.
pub(super) async fn open_maintenance(
    State(shared): State<AppState>,
    caller: Caller,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    authorize(&shared, &caller, true)?;
    let bad = |m: String| ApiError(StatusCode::BAD_REQUEST, m);
    let req: OpenMaintenance = serde_json::from_slice(&body).map_err(|e| {
        bad(format!(
            "expected {{\"duration\": \"30m\", \"slos\": [..], \"reason\": \"..\"}}: {e}"
        ))
    })?;
    let d = crate::units::parse_duration_within(
        &req.duration,
        std::time::Duration::from_secs(7 * 86_400),
    )
    .map_err(|e| bad(format!("duration `{}`: {e}", req.duration)))?;
    if d.is_zero() {
        return Err(bad("duration must be above zero".into()));
    }
    let now = crate::clock::since_epoch().as_secs() as i64;
    let end = now + d.as_secs().max(1) as i64;
    let reason: String = req.reason.chars().take(200).collect();
    let slos: Vec<String> = req.slos.into_iter().collect();
    let id = shared
        .budget
        .open_maintenance(slos.clone(), now, end, reason.clone())
        .map_err(bad)?;
    tracing::info!(id, slos = ?slos, end, reason = %reason, "maintenance window opened");
    Ok((
        StatusCode::CREATED,
        axum::Json(json!({ "id": id, "slos": slos, "start": now, "end": end })),
    )
        .into_response())
}

pub(super) async fn close_maintenance(
    State(shared): State<AppState>,
    Path(id): Path<u64>,
    caller: Caller,
) -> Result<Response, ApiError> {
    authorize(&shared, &caller, true)?;
    if shared
        .budget
        .close_maintenance(id, crate::clock::since_epoch().as_secs() as i64)
    {
        tracing::info!(id, "maintenance window closed");
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no open maintenance window {id}"),
        ))
    }
}
