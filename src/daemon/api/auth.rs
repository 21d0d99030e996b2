//! Who may call what: the admin bearer token (compared first, in constant time, by
//! `crate::server::token_matches`), `protect_reads`, the hook's token (admin or
//! `server.hook_token`), and wrong tokens limited and logged by their source
//! (`crate::server::WrongTokens`).

use crate::daemon::state::Shared;
use crate::server::{Source, token_matches};
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use std::net::SocketAddr;

use super::*;

/// A request's headers and the address it came from (none without a socket: `oneshot`).
pub(super) struct Caller {
    pub headers: HeaderMap,
    pub source: Source,
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Caller, Self::Rejection> {
        let ip = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip());
        Ok(Caller {
            headers: parts.headers.clone(),
            source: Source::of(ip),
        })
    }
}

pub(super) fn authorize(shared: &Shared, caller: &Caller, write: bool) -> Result<(), ApiError> {
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
        caller.source,
        bearer(&caller.headers),
        &[token.expose()],
        "missing `Authorization: Bearer <token>`",
    )
}

/// The hook's token check: the admin or the hook token, from the bearer header or else from
/// the payload's metadata `token`.
pub(super) fn authorize_hook(
    shared: &Shared,
    caller: &Caller,
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
    let given = bearer(&caller.headers).or(metadata_token);
    check_token(
        shared,
        caller.source,
        given,
        &tokens,
        "missing `Authorization: Bearer <token>` (or metadata `token`)",
    )
}

/// Whether the caller sent the admin token (no count, no limiter: for what a read shows more
/// of with the token, such as failure evidence).
pub(super) fn holds_admin_token(shared: &Shared, caller: &Caller) -> bool {
    let cfg = shared.config();
    match (&cfg.server.admin_token, bearer(&caller.headers)) {
        (Some(token), Some(given)) => token_matches(given, &[token.expose()]),
        _ => false,
    }
}

/// The token of `Authorization: Bearer <token>`, taken as sent: one space after the scheme
/// and nothing trimmed, so `Bearer  <token>` and `Bearer <token> ` are wrong tokens (RFC
/// 6750's `b64token` holds no whitespace), compared and counted like any other.
pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// `given` against each of `tokens`, compared first: a right token is served whatever the
/// limiter holds. A wrong or missing one from a source past its limit is answered 429
/// (uncounted); else a wrong one is counted, logged (throttled) and answered 401.
pub(super) fn check_token(
    shared: &Shared,
    source: Source,
    given: Option<&str>,
    tokens: &[&str],
    missing: &str,
) -> Result<(), ApiError> {
    if given.is_some_and(|g| token_matches(g, tokens)) {
        return Ok(());
    }
    let now = crate::clock::tokio_instant();
    if shared.auth_failures.limited(source, now) {
        return Err(ApiError(
            StatusCode::TOO_MANY_REQUESTS,
            "too many wrong bearer tokens; retry in a second".into(),
        ));
    }
    if given.is_none() {
        shared.metrics.admin_auth_failure(true);
        return Err(ApiError(StatusCode::UNAUTHORIZED, missing.into()));
    }
    shared.metrics.admin_auth_failure(false);
    if let Some(count) = shared.auth_failures.record(source, now) {
        log_auth_failures(count);
    }
    Err(ApiError(
        StatusCode::UNAUTHORIZED,
        "wrong bearer token".into(),
    ))
}

/// One warn line for `count` wrong tokens (the daemon's tick logs the rest of a burst).
pub(crate) fn log_auth_failures(count: u64) {
    tracing::warn!(
        count,
        "admin API: wrong bearer token ({count} since the last such line)"
    );
}
