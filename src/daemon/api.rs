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

use super::hooks;
use super::reload::reload as reload_config;
use super::runs::{StartError, start_run};
use super::shardrun;
use super::state::{Shared, unix_now};
use crate::metrics::Metrics;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use maintenance::{close_maintenance, maintenance, open_maintenance};
use serde_json::json;
use std::convert::Infallible;
use std::sync::Arc;
use subtle::ConstantTimeEq;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

type AppState = Arc<Shared>;

pub fn app(shared: AppState) -> Router {
    Router::new()
        .route("/", get(dashboard))
        .route("/assets/{file}", get(asset))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/api/openapi.json", get(openapi))
        .route("/api/profiles", get(profiles))
        .route("/api/runs", get(runs))
        .route("/api/runs/{id}", get(run_detail))
        .route("/api/series", get(series))
        .route("/api/slos", get(slos))
        .route("/api/slos/{name}", get(slo))
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
    check_token(
        shared,
        bearer(headers),
        &[token.expose()],
        "missing `Authorization: Bearer <token>`",
    )
}

/// The hook's token check: the admin or the hook token, from the bearer header or else from
/// the payload's metadata `token`.
fn authorize_hook(
    shared: &Shared,
    headers: &HeaderMap,
    metadata_token: Option<&str>,
) -> Result<(), ApiError> {
    let cfg = shared.config();
    let tokens: Vec<&str> = [&cfg.server.hook_token, &cfg.server.admin_token]
        .into_iter()
        .flatten()
        .map(|t| t.expose())
        .collect();
    if tokens.is_empty() {
        return Err(ApiError(
            StatusCode::FORBIDDEN,
            "the Flagger hook is disabled: set server.hook_token (or server.admin_token)".into(),
        ));
    }
    let given = bearer(headers).or(metadata_token);
    check_token(
        shared,
        given,
        &tokens,
        "missing `Authorization: Bearer <token>` (or metadata `token`)",
    )
}

/// The token of `Authorization: Bearer <token>`, taken as sent: one space after the scheme
/// and nothing trimmed, so `Bearer  <token>` and `Bearer <token> ` are wrong tokens (RFC
/// 6750's `b64token` holds no whitespace), compared and counted like any other.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// `given` against each of `tokens`, with the back-off, the count and the log of wrong ones.
fn check_token(
    shared: &Shared,
    given: Option<&str>,
    tokens: &[&str],
    missing: &str,
) -> Result<(), ApiError> {
    let now = tokio::time::Instant::now();
    if shared.auth_failures.limited(now) {
        return Err(ApiError(
            StatusCode::TOO_MANY_REQUESTS,
            "too many wrong bearer tokens; retry in a second".into(),
        ));
    }
    let Some(given) = given else {
        shared.metrics.admin_auth_failure(true);
        return Err(ApiError(StatusCode::UNAUTHORIZED, missing.into()));
    };
    // `subtle` compares in constant time for equal lengths; the length of a token is not
    // secret. Every token is compared.
    let ok = tokens.iter().fold(false, |ok, t| {
        ok | bool::from(given.as_bytes().ct_eq(t.as_bytes()))
    });
    if ok {
        return Ok(());
    }
    shared.metrics.admin_auth_failure(false);
    if let Some(count) = shared.auth_failures.record(now) {
        log_auth_failures(count);
    }
    Err(ApiError(
        StatusCode::UNAUTHORIZED,
        "wrong bearer token".into(),
    ))
}

/// One warn line for `count` wrong tokens (the daemon's tick logs the rest of a burst).
pub(super) fn log_auth_failures(count: u64) {
    tracing::warn!(
        count,
        "admin API: wrong bearer token ({count} since the last such line)"
    );
}

/// How long a scrape may take to read its exposition: past it, the encoding stops and the
/// response ends short (a reader that stalls must not hold its encoding thread for ever).
const SCRAPE_WRITE_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// The exposition, encoded on a blocking thread in chunks ([`crate::metrics::CHUNK`]) that go
/// out while the rest is written: a scrape of 1,000 profiles holds a few chunks, not 21 MB, at
/// the moment the runs peak, and no runtime worker (where the runs' requests are timed) stalls
/// for the tens of milliseconds the encoding takes.
async fn metrics(State(shared): State<AppState>, headers: HeaderMap) -> Response {
    let format = Metrics::negotiate(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(2);
    let metrics = shared.metrics.clone();
    let runtime = tokio::runtime::Handle::current();
    shared.tracker.spawn_blocking(move || {
        let deadline = tokio::time::Instant::now() + SCRAPE_WRITE_LIMIT;
        let sink = move |chunk: Vec<u8>| {
            let sent = runtime.block_on(tokio::time::timeout_at(
                deadline,
                tx.send(Bytes::from(chunk)),
            ));
            matches!(sent, Ok(Ok(())))
        };
        metrics.encode_format_streamed(format, Box::new(sink));
    });
    let body = Body::from_stream(ReceiverStream::new(rx).map(Ok::<_, Infallible>));
    let content_type = Metrics::format_content_type(format);
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// The status for anyone; the details (the reason, which may name the store's path, and the
/// local errors) only where reads are open or with the token.
async fn readyz(State(shared): State<AppState>, headers: HeaderMap) -> Response {
    let status = shared.readiness();
    let code = if status.is_ok() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    // A probe without a token (the kubelet's) is no failed login: only a token sent is checked.
    let probe =
        shared.config().server.protect_reads && !headers.contains_key(header::AUTHORIZATION);
    let details = !probe && authorize(&shared, &headers, false).is_ok();
    if !details {
        let short = if status.is_ok() {
            "ready\n"
        } else {
            "not ready\n"
        };
        return (code, format!("{short}{}", overload_line(&shared, false))).into_response();
    }
    let head = match status {
        Ok(()) => "ready".to_string(),
        Err(why) => format!("not ready: {why}"),
    };
    let overload = overload_line(&shared, true);
    let restore = shared
        .budget
        .restore_status()
        .map(|r| format!("{}\n", super::restore::readyz_line(&r)))
        .unwrap_or_default();
    (
        code,
        format!(
            "{head}\n{overload}{restore}{}\n",
            local_errors_line(&shared)
        ),
    )
        .into_response()
}

/// Requests that failed because of sloburn itself since the daemon started, by class: they
/// are no SLO event, so this is where an operator sees the generator's own limits.
fn local_errors_line(shared: &Shared) -> String {
    let counts: Vec<String> = shared
        .metrics
        .local_errors()
        .iter()
        .map(|(class, n)| format!("{class} {n}"))
        .collect();
    format!("local errors since start: {}", counts.join(", "))
}

/// How long `/readyz` keeps saying "generator overloaded" after the last late arrival.
const OVERLOAD_SHOWN_FOR: u64 = 10;

/// While the generator falls behind on some profile (it dropped late arrivals in the last
/// [`OVERLOAD_SHOWN_FOR`] seconds) a line saying so, else nothing; the daemon stays ready,
/// since its own surface still works and nothing of this counts against an SLO. Profile names
/// only with the details (reads open, or the token).
fn overload_line(shared: &Shared, details: bool) -> String {
    let since = (unix_now() as u64).saturating_sub(OVERLOAD_SHOWN_FOR);
    let profiles = shared.metrics.overloaded_since(since);
    if profiles.is_empty() {
        String::new()
    } else if details {
        format!(
            "generator overloaded: {} (late arrivals dropped in the last {OVERLOAD_SHOWN_FOR} s, not counted against any SLO)\n",
            profiles.join(", ")
        )
    } else {
        "generator overloaded\n".into()
    }
}

async fn profiles(
    State(shared): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authorize(&shared, &headers, false)?;
    Ok(axum::Json(json!({ "profiles": shared.profiles() })).into_response())
}

#[derive(serde::Deserialize)]
struct RunsQuery {
    profile: Option<String>,
}

async fn runs(
    State(shared): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<RunsQuery>,
) -> Result<Response, ApiError> {
    authorize(&shared, &headers, false)?;
    Ok(axum::Json(json!({ "runs": shared.recent_runs(q.profile.as_deref()) })).into_response())
}

/// One run's record and its detail view (none while it runs, or when it ended in an error).
async fn run_detail(
    State(shared): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authorize(&shared, &headers, false)?;
    let not_found = || ApiError(StatusCode::NOT_FOUND, format!("no run `{id}` is kept"));
    let n: u64 = id.parse().map_err(|_| not_found())?;
    let record = shared.run_record(n).ok_or_else(not_found)?;
    let cached = shared
        .details
        .lock()
        .ok()
        .and_then(|d| d.iter().find(|(i, _)| *i == n).map(|(_, d)| d.clone()));
    let detail: Option<Arc<str>> = match cached {
        Some(d) => Some(d),
        None => {
            let s = shared.clone();
            tokio::task::spawn_blocking(move || s.budget.with_store(|st| st.run_detail(n)))
                .await
                .ok()
                .flatten()
                .and_then(Result::ok)
                .flatten()
                .map(Arc::from)
        }
    };
    let detail = detail
        .and_then(|d| serde_json::from_str::<serde_json::Value>(&d).ok())
        .unwrap_or(serde_json::Value::Null);
    Ok(axum::Json(json!({ "run": record, "detail": detail })).into_response())
}

/// Each profile's last hour (10 s points from its ring), its run in progress, and each SLO's
/// budget burn-down. Nothing is computed here but the JSON: the rings are filled by the runs'
/// samplers, and the burn-downs are redrawn at most once a minute.
async fn series(State(shared): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    authorize(&shared, &headers, false)?;
    let now = unix_now_secs();
    let last_runs: std::collections::BTreeMap<String, super::state::RunRecord> = {
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

fn unix_now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The SLOs' burn-downs, redrawn when the minute has changed since the last drawing.
fn burn_downs(shared: &Shared, now: i64) -> Arc<Vec<(String, crate::web::BurnDown)>> {
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

fn finite(x: f64) -> serde_json::Value {
    if x.is_finite() {
        json!(x)
    } else {
        serde_json::Value::Null
    }
}

/// One SLO's live state as the API shows it (an element of `/api/slos`, and `/api/slos/{name}`).
/// `burn_rates` maps each standard window (`5m` … `3d`) to its burn rate.
fn slo_json(r: &crate::slo::SloReport) -> serde_json::Value {
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
    let burn_rates: serde_json::Map<String, serde_json::Value> = r
        .windows
        .iter()
        .map(|s| (crate::units::format_duration(s.window), finite(s.burn_rate)))
        .collect();
    json!({
        "name": r.name,
        "objective": r.objective,
        "error_budget": r.error_budget,
        "budget_remaining": finite(r.budget_remaining),
        "time_to_exhaustion_seconds": r.time_to_exhaustion.map(|d| d.as_secs_f64()),
        "windows": r.windows.iter().map(window).collect::<Vec<_>>(),
        "burn_rates": burn_rates,
        "period": period(r),
        "tiers": r.tiers.iter().map(|t| json!({
            "name": t.name,
            "severity": t.severity.as_str(),
            "factor": t.factor,
            "active": t.active,
            "long": window(&t.long),
            "short": window(&t.short),
        })).collect::<Vec<_>>(),
    })
}

/// `?scope=local` (this shard's own figures, what a peer asks for) and `?window=` (with
/// `scope=local` on one SLO: its live events over that window, for a peer's guard or hook).
#[derive(serde::Deserialize, Default)]
struct SloQuery {
    scope: Option<String>,
    window: Option<String>,
}

impl SloQuery {
    /// Whether the answer is this shard's own: asked for, or no peers to ask.
    fn local(&self, shared: &Shared) -> Result<bool, ApiError> {
        match self.scope.as_deref() {
            Some("local") => Ok(true),
            Some("whole") | None => Ok(!super::peers::peered(shared)),
            Some(other) => Err(ApiError(
                StatusCode::BAD_REQUEST,
                format!(
                    "scope `{other}`: `local` (this shard's events) or `whole` (every shard's)"
                ),
            )),
        }
    }
}

/// The `scope` and `shard` fields of a local answer: which shard's events these are.
fn local_scope(shared: &Shared, v: &mut serde_json::Value) {
    v["scope"] = json!("local");
    v["shard"] = json!({ "index": shared.shard.index(), "count": shared.shard.count() });
}

/// Every SLO: this shard's figures, or with peers the whole SLO's (every shard's events added
/// up, ratios recomputed), naming any shard that did not answer.
async fn slos(
    State(shared): State<AppState>,
    Query(q): Query<SloQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authorize(&shared, &headers, false)?;
    let reports = shared.budget.reports();
    if q.local(&shared)? {
        let mut v = json!({ "slos": reports.iter().map(slo_json).collect::<Vec<_>>() });
        local_scope(&shared, &mut v);
        mark_maintenance(&shared, &mut v);
        return Ok(axum::Json(v).into_response());
    }
    let mut g = super::peers::gather(&shared, "/api/slos?scope=local").await;
    let mut merged = Vec::with_capacity(reports.len());
    for r in &reports {
        merged.push(slo_json(&whole(r, &mut g)));
    }
    let mut v = json!({ "slos": merged });
    g.describe(&mut v);
    mark_maintenance(&shared, &mut v);
    Ok(axum::Json(v).into_response())
}

/// Each SLO of a `/api/slos` answer, [`enrich`]ed.
fn mark_maintenance(shared: &Shared, v: &mut serde_json::Value) {
    let cfg = shared.config();
    if let Some(list) = v["slos"].as_array_mut() {
        for slo in list {
            enrich(shared, &cfg, slo);
        }
    }
}

/// What the daemon adds to an SLO's figures: whether a maintenance window covers it now, and
/// each tier's alert as `sloburn rules` writes it (its PromQL and `for`), for the dashboard's
/// alerts table.
fn enrich(shared: &Shared, cfg: &crate::config::Config, slo: &mut serde_json::Value) {
    let name = slo["name"].as_str().unwrap_or_default().to_string();
    slo["maintenance"] = json!(shared.budget.in_maintenance(&name));
    let Some(conf) = cfg.slos.get(&name) else {
        return;
    };
    if let Some(g) = &conf.group {
        slo["group"] = json!({"slo": g.parent, "label": g.label, "value": g.value});
    }
    let def = conf.def();
    let alerts = crate::rules::alert_exprs(&def, &crate::rules::RulesOptions::default());
    if let Some(tiers) = slo["tiers"].as_array_mut() {
        for t in tiers {
            let tier = t["name"].as_str().unwrap_or_default().to_string();
            if let Some((_, expr, r#for)) = alerts.iter().find(|(n, _, _)| *n == tier) {
                t["expr"] = json!(expr);
                t["for"] = json!(r#for.map_or("0s".to_string(), crate::units::format_duration));
            }
        }
    }
}

/// `local` plus every answering peer's figures of the same SLO. A peer whose answer lacks them,
/// or a window of them (another config), is dropped from `g`, so it is named missing, never
/// taken as zero.
fn whole(local: &crate::slo::SloReport, g: &mut super::peers::Gathered) -> crate::slo::SloReport {
    let need = crate::slo::Counts::of(local);
    let mut parts = Vec::new();
    let mut unusable = Vec::new();
    for (i, answer) in &g.answers {
        // A peer's `/api/slos` holds a list; its `/api/slos/{name}` is the one SLO.
        let found = match answer["slos"].as_array() {
            Some(list) => list.iter().find(|s| s["name"] == local.name.as_str()),
            None => Some(answer).filter(|a| a["name"] == local.name.as_str()),
        };
        match found.and_then(super::peers::counts_of) {
            Some(c) => match need.windows.keys().find(|w| !c.windows.contains_key(w)) {
                None => parts.push(c),
                Some(w) => unusable.push((
                    *i,
                    format!(
                        "no `{}` window for SLO `{}`",
                        crate::units::format_duration(*w),
                        local.name
                    ),
                )),
            },
            None => unusable.push((*i, format!("no figures for SLO `{}`", local.name))),
        }
    }
    for (i, why) in unusable {
        g.drop_answer(i, why);
    }
    // Every part holds every window `local` has, so the merge cannot lack one.
    crate::slo::merged(local, &parts).unwrap_or_else(|_| local.clone())
}

/// One SLO: the same object as its element of `/api/slos` (for Argo Rollouts' web metrics).
async fn slo(
    State(shared): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<SloQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authorize(&shared, &headers, false)?;
    let local = q.local(&shared)?;
    let reports = shared.budget.reports();
    let Some(r) = reports.iter().find(|r| r.name == name) else {
        return if shared.config().slos.contains_key(&name) {
            Err(ApiError(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("SLO `{name}` has no report yet (the first one-second tick is due)"),
            ))
        } else {
            Err(ApiError(StatusCode::NOT_FOUND, format!("no SLO `{name}`")))
        };
    };
    if local {
        let mut v = slo_json(r);
        enrich(&shared, &shared.config(), &mut v);
        // Asked for explicitly (as a peer does), it says whose figures these are; otherwise
        // it stays exactly its element of `/api/slos` (Argo's web metrics read both).
        if q.scope.is_some() {
            local_scope(&shared, &mut v);
        }
        if let Some(w) = &q.window {
            let window = crate::units::parse_duration(w.trim())
                .map_err(|e| ApiError(StatusCode::BAD_REQUEST, format!("window `{w}`: {e}")))?;
            if let Some((good, bad, _)) = shared.budget.totals(&name, window, unix_now() as i64) {
                v["asked"] = json!({
                    "window": crate::units::format_duration(window),
                    "good": good,
                    "bad": bad,
                });
            }
        }
        return Ok(axum::Json(v).into_response());
    }
    let mut g = super::peers::gather(&shared, &format!("/api/slos/{name}?scope=local")).await;
    let mut v = slo_json(&whole(r, &mut g));
    g.describe(&mut v);
    enrich(&shared, &shared.config(), &mut v);
    Ok(axum::Json(v).into_response())
}

/// Flagger's webhook: the token check (header or metadata `token`), then [`hooks::answer`].
async fn flagger_hook(
    State(shared): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let payload = hooks::parse(&body);
    let metadata_token = payload
        .as_ref()
        .ok()
        .and_then(|p| p.metadata.get("token"))
        .map(String::as_str);
    authorize_hook(&shared, &headers, metadata_token)?;
    let payload = payload.map_err(|e| ApiError(StatusCode::BAD_REQUEST, e))?;
    let header_timeout = headers
        .get(hooks::TIMEOUT_HEADER)
        .map(|v| v.to_str().unwrap_or("(not text)"));
    let answer = hooks::answer(&shared, &payload, header_timeout).await;
    Ok((answer.status, axum::Json(answer.body)).into_response())
}

async fn run_now(
    State(shared): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authorize(&shared, &headers, true)?;
    // A split profile over peers runs on every shard at once (`shardrun`), with one verdict
    // at `/api/shard-runs/{shard_run}` here.
    let everywhere = super::runs::launch_of(&shared, &name)
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
async fn shard_run_start(
    State(shared): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    authorize(&shared, &headers, true)?;
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
async fn shard_run(
    State(shared): State<AppState>,
    Path(run): Path<String>,
    Query(q): Query<SloQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    authorize(&shared, &headers, false)?;
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
async fn shard_run_abort(
    State(shared): State<AppState>,
    Path(run): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    authorize(&shared, &headers, true)?;
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
    match reload_config(&shared).await {
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
