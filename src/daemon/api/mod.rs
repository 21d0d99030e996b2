//! The daemon's HTTP surface: `/metrics`, `/healthz`, `/readyz`, the JSON admin API with its
//! OpenAPI description, and the dashboard (`/` and its embedded `/assets/*`).
//!
//! The dashboard's page and assets hold no data, so they are open; the page reads everything
//! through the API, which `protect_reads` guards (the page asks for the token once, keeps it in
//! the tab's session storage and sends it as a bearer header).
//!
//! Write endpoints need `Authorization: Bearer <server.admin_token>`, compared in constant
//! time; without a configured token they are disabled (403). Reads are open unless
//! `server.protect_reads` is set; then `/readyz` answers its status to anyone but its reason
//! only with the token. Wrong tokens are logged (at most a line a second, with a count) and,
//! past a few a second, every token check answers 429 for the rest of that second.
//!
//! `POST /api/hooks/flagger` takes the admin token or `server.hook_token`, which grants that
//! endpoint and nothing else; as a bearer header or, since Flagger sends no headers of its own,
//! as the webhook's metadata `token`.

mod maintenance;

use super::state::Shared;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use maintenance::{close_maintenance, maintenance, open_maintenance};
use serde_json::json;
use std::sync::Arc;

mod actions;
mod auth;
mod probes;
mod profiles;
mod quorum;
mod scrape;
mod slos;
use actions::*;
pub(crate) use auth::*;
use probes::*;
use profiles::*;
use slos::*;

type AppState = Arc<Shared>;

pub fn app(shared: AppState) -> Router {
    let scrapes = axum::Extension(Arc::new(scrape::Scrapes::new()));
    Router::new()
        .route("/", get(dashboard))
        .route("/assets/{file}", get(asset))
        .route("/metrics", get(scrape::metrics).layer(scrapes))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/api/openapi.json", get(openapi))
        .route("/api/profiles", get(profiles))
        .route("/api/runs", get(runs))
        .route("/api/runs/{id}", get(run_detail))
        .route("/api/runs/{id}/record", get(run_record))
        .route("/api/series", get(series))
        .route("/api/slos", get(slos))
        .route("/api/slos/{name}", get(slo))
        .route("/api/location/{slo}", get(quorum::location_rows))
        .route("/api/hooks/flagger", post(flagger_hook))
        .route("/api/profiles/{name}/run", post(run_now))
        .route("/api/shard-runs", post(shard_run_start))
        .route("/api/shard-runs/{run}", get(shard_run))
        .route("/api/shard-runs/{run}/abort", post(shard_run_abort))
        .route("/api/profiles/{name}/pause", post(pause))
        .route("/api/profiles/{name}/resume", post(resume))
        .route("/api/reload", post(reload))
        .route("/api/maintenance", get(maintenance).post(open_maintenance))
        .route(
            "/api/maintenance/{id}",
            axum::routing::delete(close_maintenance),
        )
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

async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        include_str!("openapi.json"),
    )
        .into_response()
}

/// The dashboard's page shell (no data in it; the page reads the API). It says whether reads
/// are protected, so the page asks for the token before its first request instead of after
/// a 401.
async fn dashboard(State(shared): State<AppState>) -> Response {
    let page = crate::web::assets::DASHBOARD_HTML;
    let page = if shared.config().server.protect_reads {
        std::borrow::Cow::Owned(page.replace(
            r#"<meta name="sloburn-protect-reads" content="false">"#,
            r#"<meta name="sloburn-protect-reads" content="true">"#,
        ))
    } else {
        std::borrow::Cow::Borrowed(page)
    };
    ([(header::CACHE_CONTROL, "no-cache")], Html(page)).into_response()
}

/// The dashboard's embedded script, style and uPlot.
async fn asset(Path(file): Path<String>) -> Response {
    match crate::web::assets::asset(&file) {
        Some((kind, body)) => (
            [
                (header::CONTENT_TYPE, kind),
                (header::CACHE_CONTROL, "max-age=300"),
            ],
            body,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such asset\n").into_response(),
    }
}
