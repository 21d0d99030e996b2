//! `run --collect`'s collector side: the room (who joined, the start instant, the shares that
//! came in), its server on `crate::server`, the join and share endpoints, and the sum of the
//! shares at the end. `run::collect` runs the barrier and the hand-in around it.

use super::shares::{Bounds, Share, signal_name};
use crate::config::Secret;
use crate::load::runner::RunReport;
use anyhow::Context;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::http::StatusCode;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The largest share a collector reads (a share's figures are a few KiB).
pub const MAX_SHARE: usize = 16 << 20;
/// Where the shards' token comes from without `--collect-token`.
pub const TOKEN_ENV: &str = "SLOBURN_COLLECT_TOKEN";
/// Time for a connection to the collector to send its first byte, then a whole request head
/// (the daemon's default `server.header_timeout`).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Time for a call's body, once its head came (a join is a line, a share a few KiB).
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// The collector's side: who joined, when everyone starts, what came in.
pub(super) struct Room {
    pub count: u32,
    pub profile: String,
    pub joined: Mutex<BTreeSet<u32>>,
    pub start_at_ms: Mutex<Option<u64>>,
    /// Each shard's share, with the bytes it came in (a retry of the same bytes is no
    /// second share).
    pub shares: Mutex<BTreeMap<u32, (bytes::Bytes, Share)>>,
    /// Shares handed in twice with other figures: the run cannot say which are the shard's.
    pub conflicts: Mutex<Vec<(u32, String)>>,
    /// Each shard's plan, by index: what its figures may hold.
    pub bounds: Vec<Bounds>,
    /// The shards' shared token; `None`: anyone who reaches the port may join.
    pub token: Option<Secret>,
    /// Calls refused for a missing or wrong token.
    pub refused: AtomicU64,
}

/// Where the collector listens: `--collect-listen`; else, with a token, every address on the
/// URL's port; without one, loopback only (a `--collect` URL elsewhere is refused: the other
/// shards could not reach it, and an open port would take anyone's figures).
pub(super) fn listen_addr(
    url: &str,
    listen: Option<SocketAddr>,
    port: u16,
    token: bool,
) -> anyhow::Result<SocketAddr> {
    if let Some(addr) = listen {
        return Ok(addr);
    }
    if token {
        return Ok(SocketAddr::from(([0, 0, 0, 0], port)));
    }
    let host = url
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| u.host().map(|h| h.trim_matches(['[', ']']).to_string()))
        .unwrap_or_default();
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) if ip.is_loopback() => Ok(SocketAddr::new(ip, port)),
        _ if host.eq_ignore_ascii_case("localhost") => Ok(SocketAddr::from(([127, 0, 0, 1], port))),
        _ => Err(super::resolve::Usage(format!(
            "--collect {url} without a token: shard 0 would take anyone's figures on every \
             address; give every shard --collect-token (or {TOKEN_ENV}), or name the address \
             to listen on unauthenticated with --collect-listen"
        ))
        .into()),
    }
}

/// The collector's server on `addr`: the daemon's hardening, a share's size as its body limit,
/// stopped by the returned token.
pub(super) fn listen(
    addr: SocketAddr,
    room: &Arc<Room>,
) -> anyhow::Result<(CancellationToken, TaskTracker)> {
    let listener = crate::server::bind(addr)
        .with_context(|| format!("--collect-listen {addr}: cannot listen"))?;
    let app = axum::Router::new()
        .route("/v1/join", axum::routing::post(on_join))
        .route("/v1/shares/{shard}", axum::routing::post(on_share))
        .with_state(room.clone());
    let fds = crate::limits::nofile().map_or(1024, |l| l.soft);
    let slots = room.count.saturating_mul(2).max(64);
    let limits = crate::server::Limits {
        max_body: Some(MAX_SHARE),
        ..crate::server::Limits::new(HEADER_TIMEOUT, slots, fds)
    };
    let stop = CancellationToken::new();
    let server = TaskTracker::new();
    server.spawn(crate::server::serve(
        listener,
        app,
        limits,
        stop.clone(),
        server.clone(),
    ));
    Ok((stop, server))
}

/// `POST /v1/join`: `{shard, count, profile}`; 200 with the start instant once it is set, 202
/// while the collector waits for the others, 409 when the shard cannot join this run.
async fn on_join(
    State(room): State<Arc<Room>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> (StatusCode, axum::Json<Value>) {
    let refuse = |code, why: String| (code, axum::Json(json!({ "error": why })));
    if let Err(why) = authorize(&room, &headers) {
        return refuse(StatusCode::UNAUTHORIZED, why.into());
    }
    let body = match read_body(body).await {
        Ok(b) => b,
        Err((code, why)) => return refuse(code, why),
    };
    let v: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, format!("not a join: {e}")),
    };
    let (Some(shard), Some(count), Some(profile)) = (
        v["shard"].as_u64(),
        v["count"].as_u64(),
        v["profile"].as_str(),
    ) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "a join names `shard`, `count` and `profile`".into(),
        );
    };
    if count != u64::from(room.count) || profile != room.profile || shard == 0 || shard >= count {
        return refuse(
            StatusCode::CONFLICT,
            format!(
                "this collector runs profile `{}` over {} shards; shard {shard}/{count} of `{profile}` is not one of them",
                room.profile, room.count
            ),
        );
    }
    let start = room.start_at_ms.lock().ok().and_then(|s| *s);
    match start {
        None => {
            if let Ok(mut j) = room.joined.lock() {
                j.insert(shard as u32);
            }
            (StatusCode::ACCEPTED, axum::Json(json!({ "waiting": true })))
        }
        Some(at)
            if room
                .joined
                .lock()
                .is_ok_and(|j| j.contains(&(shard as u32))) =>
        {
            (StatusCode::OK, axum::Json(json!({ "start_at_ms": at })))
        }
        Some(_) => refuse(
            StatusCode::CONFLICT,
            format!("shard {shard} joined too late: the run started without it"),
        ),
    }
}

/// A call's body, at most [`MAX_SHARE`] and within [`BODY_TIMEOUT`] (a stalled body gives
/// its slot back).
async fn read_body(body: axum::body::Body) -> Result<bytes::Bytes, (StatusCode, String)> {
    match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, MAX_SHARE)).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(e)) => Err((
            StatusCode::BAD_REQUEST,
            format!("cannot read the body (at most {MAX_SHARE} bytes): {e}"),
        )),
        Err(_) => Err((
            StatusCode::REQUEST_TIMEOUT,
            format!("the body did not come within {BODY_TIMEOUT:?}"),
        )),
    }
}

/// `POST /v1/shares/{shard}`: a joined shard's finished figures (`run::shares::Share`), once,
/// and only figures its plan can make.
async fn on_share(
    State(room): State<Arc<Room>>,
    Path(shard): Path<u32>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> (StatusCode, axum::Json<Value>) {
    let refuse = |code, why: String| (code, axum::Json(json!({ "error": why })));
    if let Err(why) = authorize(&room, &headers) {
        return refuse(StatusCode::UNAUTHORIZED, why.into());
    }
    if !room.joined.lock().is_ok_and(|j| j.contains(&shard)) {
        return refuse(
            StatusCode::CONFLICT,
            format!("shard {shard} is not in this run"),
        );
    }
    let body = match read_body(body).await {
        Ok(b) => b,
        Err((code, why)) => return refuse(code, why),
    };
    let share: Share = match serde_json::from_slice(&body) {
        Ok(s) => s,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!("not a share's figures: {e}"),
            );
        }
    };
    if let Some(Err(why)) = room
        .bounds
        .get(shard as usize)
        .map(|b| b.check(&share.record))
    {
        return refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("shard {shard}'s figures do not fit its plan: {why}"),
        );
    }
    let Ok(mut all) = room.shares.lock() else {
        return refuse(StatusCode::INTERNAL_SERVER_ERROR, "poisoned".into());
    };
    match all.get(&shard) {
        None => {
            all.insert(shard, (body, share));
            (StatusCode::OK, axum::Json(json!({ "received": shard })))
        }
        // A retry whose answer was lost: the same share, taken once.
        Some((first, _)) if *first == body => {
            (StatusCode::OK, axum::Json(json!({ "received": shard })))
        }
        Some(_) => {
            // One entry a shard: the list stays as long as the run has shards.
            if let Ok(mut c) = room.conflicts.lock()
                && !c.iter().any(|(i, _)| *i == shard)
            {
                c.push((
                    shard,
                    "a second share with other figures came for it".into(),
                ));
            }
            refuse(
                StatusCode::CONFLICT,
                format!(
                    "shard {shard}'s share is in already: a second one is refused, and the run \
                     cannot be judged"
                ),
            )
        }
    }
}

/// The bearer token of a call against the room's, as the daemon's admin token is checked: one
/// space after the scheme, nothing trimmed, compared in constant time (`subtle`).
fn authorize(room: &Room, headers: &HeaderMap) -> Result<(), &'static str> {
    let Some(token) = &room.token else {
        return Ok(());
    };
    let given = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let why = match given {
        Some(g) if bool::from(g.as_bytes().ct_eq(token.expose().as_bytes())) => return Ok(()),
        Some(_) => "wrong bearer token",
        None => {
            "missing `Authorization: Bearer <token>`: give every shard the collector's --collect-token"
        }
    };
    room.refused.fetch_add(1, Relaxed);
    Err(why)
}

/// The collector's sum: every share's figures added to `report` and the thresholds evaluated
/// on it; the shards whose figures are missing, do not fit, came twice, or cover only part of
/// their plan, named with why.
pub(super) fn add_up(
    room: &Room,
    report: &mut RunReport,
    absent: &[u32],
    expected: &[u32],
) -> (Option<String>, Option<&'static str>) {
    let shares = room
        .shares
        .lock()
        .map(|mut s| std::mem::take(&mut *s))
        .unwrap_or_default();
    let mut missing: Vec<(u32, String)> = absent
        .iter()
        .map(|i| (*i, "it did not join in time".to_string()))
        .collect();
    missing.extend(room.conflicts.lock().map(|c| c.clone()).unwrap_or_default());
    let mut signal = None;
    for i in expected {
        let Some((_, share)) = shares.get(i) else {
            missing.push((*i, "its figures did not come in time".into()));
            continue;
        };
        if let Err(why) = report.stats.merge(&share.record) {
            missing.push((*i, why));
            continue;
        }
        if let Some(why) = &share.stopped {
            let short = room
                .bounds
                .get(*i as usize)
                .map(|b| b.shortfall(&share.record));
            missing.push((*i, format!("{why}: {}", short.unwrap_or_default())));
            signal = signal.or(share.signal.as_deref().map(signal_name));
        }
    }
    report.judge_thresholds();
    missing.sort();
    let missing = (!missing.is_empty()).then(|| {
        let mut names: Vec<u32> = missing.iter().map(|(i, _)| *i).collect();
        names.dedup();
        let why: Vec<String> = missing
            .iter()
            .map(|(i, w)| format!("shard {i}: {w}"))
            .collect();
        format!(
            "inconclusive: shards {names:?} gave no figures or only part of their plan's, so the \
             whole run cannot be judged ({})",
            why.join("; ")
        )
    });
    (missing, signal)
}
