//! The daemon's HTTP surface: `/metrics`, `/healthz`, `/readyz`, the JSON admin API with its
//! OpenAPI description, and the status page.
//!
//! Write endpoints need `Authorization: Bearer <server.admin_token>`, compared in constant
//! time; without a configured token they are disabled (403). Reads are open unless
//! `server.protect_reads` is set; then `/readyz` answers its status to anyone but its reason
//! only with the token. Wrong tokens are logged (at most a line a second, with a count) and,
//! past a few a second, every token check answers 429 for the rest of that second.

use super::reload::reload as reload_config;
use super::runs::{StartError, start_run};
use super::state::Shared;
use crate::metrics::Metrics;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use std::sync::Arc;
use subtle::ConstantTimeEq;

type AppState = Arc<Shared>;

pub fn app(shared: AppState) -> Router {
    Router::new()
        .route("/", get(status_page))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/api/openapi.json", get(openapi))
        .route("/api/profiles", get(profiles))
        .route("/api/runs", get(runs))
        .route("/api/slos", get(slos))
        .route("/api/profiles/{name}/run", post(run_now))
        .route("/api/profiles/{name}/pause", post(pause))
        .route("/api/profiles/{name}/resume", post(resume))
        .route("/api/reload", post(reload))
        .with_state(shared)
}

/// An API error as JSON with its status.
struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.0, axum::Json(json!({ "error": self.1 }))).into_response();
        if self.0 == StatusCode::TOO_MANY_REQUESTS {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        }
        response
    }
}

fn authorize(shared: &Shared, headers: &HeaderMap, write: bool) -> Result<(), ApiError> {
    let cfg = shared.config();
    if !write && !cfg.server.protect_reads {
        return Ok(());
    }
    let Some(token) = &cfg.server.admin_token else {
        return Err(ApiError(
            StatusCode::FORBIDDEN,
            "write endpoints are disabled: set server.admin_token".into(),
        ));
    };
    let now = tokio::time::Instant::now();
    if shared.auth_failures.limited(now) {
        return Err(ApiError(
            StatusCode::TOO_MANY_REQUESTS,
            "too many wrong bearer tokens; retry in a second".into(),
        ));
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match given {
        // `subtle` compares in constant time for equal lengths; the length of a token is not
        // secret.
        Some(g) if bool::from(g.as_bytes().ct_eq(token.expose().as_bytes())) => Ok(()),
        Some(_) => {
            if let Some(count) = shared.auth_failures.record(now) {
                log_auth_failures(count);
            }
            Err(ApiError(
                StatusCode::UNAUTHORIZED,
                "wrong bearer token".into(),
            ))
        }
        None => Err(ApiError(
            StatusCode::UNAUTHORIZED,
            "missing `Authorization: Bearer <token>`".into(),
        )),
    }
}

/// One warn line for `count` wrong tokens (the daemon's tick logs the rest of a burst).
pub(super) fn log_auth_failures(count: u64) {
    tracing::warn!(
        count,
        "admin API: wrong bearer token ({count} since the last such line)"
    );
}

async fn metrics(State(shared): State<AppState>, headers: HeaderMap) -> Response {
    let om = Metrics::wants_openmetrics(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    let body = shared.metrics.encode(om);
    ([(header::CONTENT_TYPE, Metrics::content_type(om))], body).into_response()
}

/// The status for anyone; the reason (which may name the store's path) only where reads are
/// open or with the token.
async fn readyz(State(shared): State<AppState>, headers: HeaderMap) -> Response {
    match shared.readiness() {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(why) if authorize(&shared, &headers, false).is_ok() => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        )
            .into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response(),
    }
}

async fn profiles(
    State(shared): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authorize(&shared, &headers, false)?;
    Ok(axum::Json(json!({ "profiles": shared.profiles() })).into_response())
}

async fn runs(State(shared): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    authorize(&shared, &headers, false)?;
    Ok(axum::Json(json!({ "runs": shared.recent_runs() })).into_response())
}

fn finite(x: f64) -> serde_json::Value {
    if x.is_finite() {
        json!(x)
    } else {
        serde_json::Value::Null
    }
}

async fn slos(State(shared): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    authorize(&shared, &headers, false)?;
    let reports: Vec<serde_json::Value> = shared
        .budget
        .reports()
        .iter()
        .map(|r| {
            let window = |s: &crate::slo::SloStatus| {
                json!({
                    "window": crate::units::format_duration(s.window),
                    "good": s.good,
                    "bad": s.bad,
                    "sli": finite(s.sli),
                    "burn_rate": finite(s.burn_rate),
                })
            };
            // A calendar period names itself and its bounds (RFC 3339, in its zone).
            let period = |r: &crate::slo::SloReport| {
                let mut p = window(&r.period);
                if let Some((c, start, end)) = &r.calendar {
                    p["window"] = json!(c.unit.as_str());
                    p["calendar"] = json!(c.unit.as_str());
                    p["timezone"] = json!(c.tz.name());
                    p["start"] = json!(crate::slo::rfc3339_in(c.tz, *start));
                    p["end"] = json!(crate::slo::rfc3339_in(c.tz, *end));
                }
                p
            };
            json!({
                "name": r.name,
                "objective": r.objective,
                "error_budget": r.error_budget,
                "budget_remaining": finite(r.budget_remaining),
                "time_to_exhaustion_seconds": r.time_to_exhaustion.map(|d| d.as_secs_f64()),
                "windows": r.windows.iter().map(window).collect::<Vec<_>>(),
                "period": period(r),
                "tiers": r.tiers.iter().map(|t| json!({
                    "name": t.name,
                    "severity": t.severity.as_str(),
                    "factor": t.factor,
                    "active": t.active,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    Ok(axum::Json(json!({ "slos": reports })).into_response())
}

async fn run_now(
    State(shared): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authorize(&shared, &headers, true)?;
    match start_run(&shared, &name, "api") {
        Ok(id) => Ok((
            StatusCode::ACCEPTED,
            axum::Json(json!({ "run": id, "profile": name })),
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
    }
}

async fn pause(
    State(shared): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    set_paused(&shared, &name, &headers, true)
}

async fn resume(
    State(shared): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    set_paused(&shared, &name, &headers, false)
}

fn set_paused(
    shared: &Shared,
    name: &str,
    headers: &HeaderMap,
    paused: bool,
) -> Result<Response, ApiError> {
    authorize(shared, headers, true)?;
    if shared.set_paused(name, paused) {
        Ok(axum::Json(json!({ "profile": name, "paused": paused })).into_response())
    } else {
        Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no profile `{name}`"),
        ))
    }
}

async fn reload(State(shared): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    authorize(&shared, &headers, true)?;
    match reload_config(&shared) {
        Ok(true) => Ok(axum::Json(json!({ "reloaded": true })).into_response()),
        Ok(false) => Err(ApiError(
            StatusCode::CONFLICT,
            "this daemon's config is built in (demo); nothing to reload".into(),
        )),
        Err(e) => Err(ApiError(StatusCode::UNPROCESSABLE_ENTITY, e)),
    }
}

async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        include_str!("openapi.json"),
    )
        .into_response()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:.3}%", x * 100.0)
    } else {
        "–".into()
    }
}

/// A server-rendered page: SLOs with budget and burn, profiles, recent runs. Refreshes itself.
async fn status_page(
    State(shared): State<AppState>,
    headers: HeaderMap,
) -> Result<Html<String>, ApiError> {
    authorize(&shared, &headers, false)?;
    let mut html = String::from(
        "<!doctype html><html><head><meta charset=utf-8><meta http-equiv=refresh content=5>\
         <title>sloburn</title><style>body{font:14px system-ui,sans-serif;margin:2em;color:#222}\
         table{border-collapse:collapse;margin-bottom:2em}td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left}\
         .bad{color:#b00020;font-weight:600}.ok{color:#1b5e20}</style></head><body><h1>sloburn</h1>",
    );
    if let Err(why) = shared.readiness() {
        html.push_str(&format!("<p class=bad>not ready: {}</p>", esc(&why)));
    }
    html.push_str("<h2>SLOs</h2><table id=slos><tr><th>SLO</th><th>objective</th><th>SLI (period)</th><th>budget left</th><th>burn 5m</th><th>burn 1h</th><th>alerts</th></tr>");
    for r in shared.budget.reports() {
        let burn = |d: u64| {
            r.window(std::time::Duration::from_secs(d))
                .map(|s| format!("{:.2}×", s.burn_rate))
                .unwrap_or_default()
        };
        let active: Vec<&str> = r
            .tiers
            .iter()
            .filter(|t| t.active)
            .map(|t| t.name.as_str())
            .collect();
        let class = if r.budget_remaining < 0.0 || !active.is_empty() {
            "bad"
        } else {
            "ok"
        };
        html.push_str(&format!(
            "<tr class={class}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.name),
            pct(r.objective),
            pct(r.period.sli),
            pct(r.budget_remaining),
            burn(300),
            burn(3600),
            esc(&active.join(", "))
        ));
    }
    html.push_str("</table><h2>Profiles</h2><table id=profiles><tr><th>profile</th><th>target</th><th>schedule</th><th>state</th></tr>");
    for p in shared.profiles() {
        let state = if p.running {
            "running"
        } else if p.paused {
            "paused"
        } else {
            "idle"
        };
        html.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{state}</td></tr>",
            esc(&p.name),
            esc(&p.target),
            esc(p.schedule.as_deref().unwrap_or("on demand"))
        ));
    }
    html.push_str("</table><h2>Recent runs</h2><table id=runs><tr><th>#</th><th>profile</th><th>result</th><th>requests</th><th>req/s</th><th>failed</th><th>p95</th><th>p99</th></tr>");
    for r in shared.recent_runs().iter().take(20) {
        html.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td><td>{:.2} ms</td><td>{:.2} ms</td></tr>",
            r.id,
            esc(&r.profile),
            esc(&r.result),
            r.requests,
            r.rate,
            pct(r.failed_ratio),
            r.p95_ms,
            r.p99_ms
        ));
    }
    html.push_str("</table><p><a href=/metrics>/metrics</a> · <a href=/api/slos>/api/slos</a> · <a href=/api/runs>/api/runs</a> · <a href=/api/openapi.json>OpenAPI</a></p></body></html>");
    Ok(Html(html))
}
