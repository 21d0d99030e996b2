//! Who may call what: the admin bearer token (compared by `subtle`), `protect_reads`, the
//! hook's token (admin or `server.hook_token`), and the rate-limited log of failures.

use crate::daemon::state::Shared;
use axum::http::{HeaderMap, StatusCode, header};
use subtle::ConstantTimeEq;

use super::*;

pub(super) fn authorize(shared: &Shared, headers: &HeaderMap, write: bool) -> Result<(), ApiError> {
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
pub(super) fn authorize_hook(
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
pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// `given` against each of `tokens`, with the back-off, the count and the log of wrong ones.
pub(super) fn check_token(
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
pub(crate) fn log_auth_failures(count: u64) {
    tracing::warn!(
        count,
        "admin API: wrong bearer token ({count} since the last such line)"
    );
}
