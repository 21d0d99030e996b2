//! `/readyz` with its local-error and overload lines (`/metrics` is `scrape`).

use crate::daemon::state::Shared;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::*;

/// The status for anyone; the details (the reason, which may name the store's path, and the
/// local errors) only where reads are open or with the token.
pub(super) async fn readyz(State(shared): State<AppState>, caller: Caller) -> Response {
    let status = shared.readiness();
    let code = if status.is_ok() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    // A probe without a token (the kubelet's) is no failed login: only a token sent is checked.
    let probe =
        shared.config().server.protect_reads && !caller.headers.contains_key(header::AUTHORIZATION);
    let details = !probe && authorize(&shared, &caller, false).is_ok();
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
        .map(|r| format!("{}\n", crate::daemon::restore::readyz_line(&r)))
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
pub(super) fn local_errors_line(shared: &Shared) -> String {
    let counts: Vec<String> = shared
        .metrics
        .local_errors()
        .iter()
        .map(|(class, n)| format!("{class} {n}"))
        .collect();
    format!("local errors since start: {}", counts.join(", "))
}

/// How long `/readyz` keeps saying "generator overloaded" after the last late arrival.
pub(super) const OVERLOAD_SHOWN_FOR: u64 = 10;

/// While the generator falls behind on some profile (it dropped late arrivals in the last
/// [`OVERLOAD_SHOWN_FOR`] seconds) a line saying so, else nothing; the daemon stays ready,
/// since its own surface still works and nothing of this counts against an SLO. Profile names
/// only with the details (reads open, or the token).
pub(super) fn overload_line(shared: &Shared, details: bool) -> String {
    let since = (shared.clock.unix_secs() as u64).saturating_sub(OVERLOAD_SHOWN_FOR);
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
