//! `sloburn run --shard i/N --collect URL`: N processes (an Indexed Job's pods) run one profile
//! once with one verdict. Shard 0 is the collector: it listens (`--collect-listen`, by default
//! every address on the port of `URL`) and the others reach it at `URL`.
//!
//! - Barrier: every other shard joins (`POST /v1/join`, asked again every [`RETRY`] while the
//!   collector is not up yet or still waits for the rest); once all have joined, the collector
//!   picks an instant [`LEAD`] ahead (unix ms) and every shard's plan starts at it. Shards that
//!   have not joined within `--collect-timeout` get no share: the collector starts without them
//!   and the verdict is inconclusive, naming them. A shard waits for the start up to twice
//!   the timeout (the collector may come up late, then wait the timeout for the rest).
//! - Verdict: each shard POSTs its finished figures (its `load::record::RunRecord`, at most
//!   [`MAX_SHARE`]) to `/v1/shares/{i}`; the collector adds them to its own (histogram buckets,
//!   never averaged percentiles), evaluates the thresholds once, prints the merged summary,
//!   writes the merged `--summary-export` and exits 0, 99 or 75 for the whole run. A shard whose
//!   figures have not come [`SLACK`] after the planned end, or do not fit, is named and makes the
//!   run inconclusive (75), never passed. The other shards print their share's summary and exit
//!   0 once the collector has their figures (1 when it could not be told).
//!
//! The collector serves on `crate::server`, hardened as the daemon's own server (idle and
//! half-sent sockets give way, a share's body is held to [`MAX_SHARE`]). With a token
//! (`--collect-token`, else `SLOBURN_COLLECT_TOKEN`) shared by every shard, it refuses a join or
//! a share without `Authorization: Bearer <token>` (401, compared in constant time) and counts
//! the refusals; without one it takes a join and one share per shard index from whoever reaches
//! its port, and says so once.

use crate::config::Secret;
use crate::http::{Client, ClientOptions, RequestSpec, Resolver};
use crate::load::plan::Shard;
use crate::load::record::RunRecord;
use crate::load::runner::RunReport;
use anyhow::{Context, anyhow, bail};
use axum::extract::{DefaultBodyLimit, Path, State};
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

/// How far ahead of the last join the shards start.
pub const LEAD: Duration = Duration::from_millis(1000);
/// How often a shard asks the collector again (to join, or to hand in its figures).
pub const RETRY: Duration = Duration::from_millis(200);
/// How long after the planned end the collector waits for the shards' figures.
pub const SLACK: Duration = Duration::from_secs(30);
/// The largest share a collector reads (a share's figures are a few KiB).
pub const MAX_SHARE: usize = 16 << 20;
/// One call to the collector.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// Where the shards' token comes from without `--collect-token`.
pub const TOKEN_ENV: &str = "SLOBURN_COLLECT_TOKEN";
/// Time for a connection to the collector to send its first byte, then a whole request head
/// (the daemon's default `server.header_timeout`).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The collector's side: who joined, when everyone starts, what came in.
struct Room {
    count: u32,
    profile: String,
    joined: Mutex<BTreeSet<u32>>,
    start_at_ms: Mutex<Option<u64>>,
    shares: Mutex<BTreeMap<u32, RunRecord>>,
    /// The shards' shared token; `None`: anyone who reaches the port may join.
    token: Option<Secret>,
    /// Calls refused for a missing or wrong token.
    refused: AtomicU64,
}

/// A run's part in a collected run, between the barrier and the verdict.
pub struct Collect {
    /// When every shard's plan starts (unix ms).
    pub start_at_ms: u64,
    role: Role,
}

enum Role {
    Collector {
        room: Arc<Room>,
        stop: CancellationToken,
        /// The collector's server and its connections.
        server: TaskTracker,
        /// Shards that had not joined when the run started.
        absent: Vec<u32>,
    },
    Share {
        url: String,
        shard: u32,
        client: Client,
        token: Option<Secret>,
    },
}

/// How a collected run ended for this process.
pub enum Collected {
    /// The collector: its report now holds every share's figures; the shards without figures,
    /// with why, when any.
    Whole { missing: Option<String> },
    /// Another shard: whether the collector has its figures.
    Share { delivered: Result<(), String> },
}

/// The collector URL's `http://host:port` (no path), checked.
pub fn collector_url(s: &str) -> anyhow::Result<(String, u16)> {
    let uri: http::Uri = s
        .parse()
        .map_err(|e| anyhow!("--collect `{s}` is not a URL: {e}"))?;
    if uri.scheme_str() != Some("http") || uri.host().is_none_or(str::is_empty) {
        bail!("--collect `{s}`: write it as http://HOST:PORT (shard 0's address)");
    }
    let port = uri.port_u16().ok_or_else(|| {
        anyhow!("--collect `{s}`: name the port, e.g. http://sloburn-job-0.sloburn-job:9091")
    })?;
    let host = uri.host().unwrap_or_default();
    Ok((format!("http://{host}:{port}"), port))
}

/// The shards' shared token: `--collect-token` (`${env:NAME}` and `${file:PATH}` expanded, as
/// in `--url`), else [`TOKEN_ENV`] when set; `None` without either.
pub fn token(flag: Option<&str>) -> anyhow::Result<Option<Secret>> {
    let value = match flag {
        Some(f) => crate::config::expand_flag(f, &crate::config::Env::process())
            .map_err(|e| anyhow!("--collect-token: {e}"))?,
        None => match std::env::var(TOKEN_ENV) {
            Ok(v) => v,
            Err(std::env::VarError::NotPresent) => return Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => bail!("{TOKEN_ENV} is not UTF-8"),
        },
    };
    if value.is_empty() {
        bail!("--collect-token (or {TOKEN_ENV}) is empty: give every shard the same token");
    }
    if http::HeaderValue::from_str(&value).is_err() || value.contains(' ') {
        bail!("--collect-token (or {TOKEN_ENV}) holds spaces or characters HTTP does not allow");
    }
    Ok(Some(Secret::new(value)))
}

/// The barrier: the collector listens and waits for every shard to join, the others join it;
/// both within `timeout`. Returns the start instant and this process's part.
pub async fn join(
    url: &str,
    args: &super::args::RunArgs,
    shard: Shard,
    profile: &str,
    timeout: Duration,
) -> anyhow::Result<Collect> {
    let (base, port) = collector_url(url)?;
    let token = token(args.collect_token.as_deref())?;
    if shard.index() == 0 {
        let addr = args
            .collect_listen
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], port)));
        let room = Room {
            count: shard.count(),
            profile: profile.to_string(),
            joined: Mutex::new(BTreeSet::new()),
            start_at_ms: Mutex::new(None),
            shares: Mutex::new(BTreeMap::new()),
            token,
            refused: AtomicU64::new(0),
        };
        collect_joins(addr, room, timeout).await
    } else {
        join_collector(&base, shard, profile, timeout, token).await
    }
}

/// The collector's server on `addr`: the daemon's hardening, a share's size as its body limit,
/// stopped by the returned token.
fn listen(addr: SocketAddr, room: &Arc<Room>) -> anyhow::Result<(CancellationToken, TaskTracker)> {
    let listener = crate::server::bind(addr)
        .with_context(|| format!("--collect-listen {addr}: cannot listen"))?;
    let app = axum::Router::new()
        .route("/v1/join", axum::routing::post(on_join))
        .route("/v1/shares/{shard}", axum::routing::post(on_share))
        .layer(DefaultBodyLimit::max(MAX_SHARE))
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

async fn collect_joins(addr: SocketAddr, room: Room, timeout: Duration) -> anyhow::Result<Collect> {
    let room = Arc::new(room);
    let (count, profile) = (room.count, room.profile.as_str());
    let (stop, server) = listen(addr, &room)?;
    if room.token.is_none() {
        eprintln!(
            "warning: the collector on {addr} is unauthenticated: whoever reaches it can join and hand in figures; give every shard --collect-token (or {TOKEN_ENV})"
        );
    }
    eprintln!(
        "collecting shards 1..{count} of profile `{profile}` on {addr}; waiting up to {} for them to join",
        crate::units::format_duration(timeout)
    );
    let until = crate::clock::tokio_instant() + timeout;
    loop {
        let n = room.joined.lock().map(|j| j.len()).unwrap_or(0);
        if n + 1 >= count as usize || crate::clock::tokio_instant() >= until {
            break;
        }
        tokio::time::sleep(RETRY / 4).await;
    }
    let start_at_ms = crate::clock::unix_ms().saturating_add(LEAD.as_millis() as u64);
    let absent: Vec<u32> = {
        let mut at = room.start_at_ms.lock().map_err(|_| anyhow!("poisoned"))?;
        *at = Some(start_at_ms);
        let joined = room.joined.lock().map_err(|_| anyhow!("poisoned"))?;
        (1..count).filter(|i| !joined.contains(i)).collect()
    };
    if !absent.is_empty() {
        eprintln!("warning: shards {absent:?} did not join in time; the run starts without them");
    }
    Ok(Collect {
        start_at_ms,
        role: Role::Collector {
            room,
            stop,
            server,
            absent,
        },
    })
}

/// `POST /v1/join`: `{shard, count, profile}`; 200 with the start instant once it is set, 202
/// while the collector waits for the others, 409 when the shard cannot join this run.
async fn on_join(
    State(room): State<Arc<Room>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> (StatusCode, axum::Json<Value>) {
    let refuse = |code, why: String| (code, axum::Json(json!({ "error": why })));
    if let Err(why) = authorize(&room, &headers) {
        return refuse(StatusCode::UNAUTHORIZED, why.into());
    }
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

/// `POST /v1/shares/{shard}`: a joined shard's finished figures, once.
async fn on_share(
    State(room): State<Arc<Room>>,
    Path(shard): Path<u32>,
    headers: HeaderMap,
    body: axum::body::Bytes,
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
    let shares: RunRecord = match serde_json::from_slice(&body) {
        Ok(s) => s,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!("not a share's figures: {e}"),
            );
        }
    };
    match room.shares.lock() {
        Ok(mut all) => {
            all.entry(shard).or_insert(shares);
            (StatusCode::OK, axum::Json(json!({ "received": shard })))
        }
        Err(_) => refuse(StatusCode::INTERNAL_SERVER_ERROR, "poisoned".into()),
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

fn client() -> Client {
    Client::new(
        ClientOptions {
            timeout: CALL_TIMEOUT,
            max_body: 1 << 20,
            ..ClientOptions::default()
        },
        Arc::new(Resolver::system()),
    )
}

async fn post(
    client: &Client,
    url: &str,
    token: Option<&Secret>,
    body: Vec<u8>,
) -> Result<(u16, Value), String> {
    let mut headers = http::HeaderMap::from_iter([(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    )]);
    if let Some(t) = token {
        let mut bearer = http::HeaderValue::from_str(&format!("Bearer {}", t.expose()))
            .map_err(|_| "the token is no header value".to_string())?;
        bearer.set_sensitive(true);
        headers.insert(http::header::AUTHORIZATION, bearer);
    }
    let req = RequestSpec {
        method: http::Method::POST,
        uri: url.parse().map_err(|_| format!("`{url}` is not a URL"))?,
        headers,
        body: bytes::Bytes::from(body),
    };
    let mut conn = client.conn();
    let o = tokio::time::timeout(CALL_TIMEOUT, conn.send(&req))
        .await
        .map_err(|_| format!("no answer within {CALL_TIMEOUT:?}"))?;
    match (o.error, o.status) {
        (Some(e), _) => Err(format!("cannot reach it: {}", e.as_str())),
        (None, Some(code)) => Ok((code, serde_json::from_slice(&o.body).unwrap_or_default())),
        (None, None) => Err("no response".into()),
    }
}

async fn join_collector(
    base: &str,
    shard: Shard,
    profile: &str,
    timeout: Duration,
    token: Option<Secret>,
) -> anyhow::Result<Collect> {
    let client = client();
    let url = format!("{base}/v1/join");
    let body = json!({ "shard": shard.index(), "count": shard.count(), "profile": profile })
        .to_string()
        .into_bytes();
    // The collector itself may wait `timeout` for the others after this shard joined.
    let until = crate::clock::tokio_instant() + timeout * 2 + LEAD;
    let mut last = String::from("not asked yet");
    while crate::clock::tokio_instant() < until {
        match post(&client, &url, token.as_ref(), body.clone()).await {
            Ok((200, v)) => {
                let at = v["start_at_ms"]
                    .as_u64()
                    .ok_or_else(|| anyhow!("the collector at {base} sent no start instant"))?;
                return Ok(Collect {
                    start_at_ms: at,
                    role: Role::Share {
                        url: format!("{base}/v1/shares/{}", shard.index()),
                        shard: shard.index(),
                        client,
                        token,
                    },
                });
            }
            Ok((202, _)) => last = "it waits for the other shards".into(),
            Ok((code, v)) if (400..500).contains(&code) => {
                bail!(
                    "the collector at {base} refused shard {}/{}: {}",
                    shard.index(),
                    shard.count(),
                    v["error"].as_str().unwrap_or("no reason given")
                );
            }
            Ok((code, _)) => last = format!("it answered {code}"),
            Err(why) => last = why,
        }
        tokio::time::sleep(RETRY).await;
    }
    bail!(
        "the collector at {base} did not start the run within {} ({last})",
        crate::units::format_duration(timeout * 2 + LEAD)
    )
}

impl Collect {
    /// After the run: a share hands its figures in; the collector waits for every share (until
    /// [`SLACK`] past `planned` after the start) and adds them to `report`, thresholds
    /// evaluated again on the sum.
    pub async fn finish(self, report: &mut RunReport, planned: Duration) -> Collected {
        match self.role {
            Role::Share {
                url,
                shard,
                client,
                token,
            } => {
                let body = serde_json::to_vec(&report.stats).unwrap_or_default();
                let mut last = String::new();
                // A few tries: the collector is up (it started this run) unless it died.
                for _ in 0..10 {
                    match post(&client, &url, token.as_ref(), body.clone()).await {
                        Ok((200, _)) => return Collected::Share { delivered: Ok(()) },
                        Ok((code, v)) => {
                            last = format!(
                                "it answered {code}: {}",
                                v["error"].as_str().unwrap_or("")
                            );
                            if (400..500).contains(&code) {
                                break;
                            }
                        }
                        Err(why) => last = why,
                    }
                    tokio::time::sleep(RETRY).await;
                }
                Collected::Share {
                    delivered: Err(format!(
                        "shard {shard}'s figures did not reach the collector: {last}"
                    )),
                }
            }
            Role::Collector {
                room,
                stop,
                server,
                absent,
            } => {
                let deadline = self
                    .start_at_ms
                    .saturating_add((planned + SLACK).as_millis() as u64);
                let expected: Vec<u32> = (1..room.count).filter(|i| !absent.contains(i)).collect();
                loop {
                    let have = room.shares.lock().map(|s| s.len()).unwrap_or(0);
                    if have >= expected.len() || crate::clock::unix_ms() > deadline {
                        break;
                    }
                    tokio::time::sleep(RETRY / 4).await;
                }
                stop.cancel();
                server.close();
                server.wait().await;
                let refused = room.refused.load(Relaxed);
                if refused > 0 {
                    eprintln!(
                        "warning: the collector refused {refused} calls without the shards' token"
                    );
                }
                let shares = room
                    .shares
                    .lock()
                    .map(|mut s| std::mem::take(&mut *s))
                    .unwrap_or_default();
                let mut missing: Vec<(u32, String)> = absent
                    .iter()
                    .map(|i| (*i, "it did not join in time".to_string()))
                    .collect();
                for i in &expected {
                    match shares.get(i) {
                        None => missing.push((*i, "its figures did not come in time".into())),
                        Some(s) => {
                            if let Err(why) = report.stats.merge(s) {
                                missing.push((*i, why));
                            }
                        }
                    }
                }
                report.thresholds = report
                    .thresholds
                    .iter()
                    .map(|(spec, _)| (spec.clone(), spec.threshold.evaluate(&report.stats)))
                    .collect();
                missing.sort();
                let missing = (!missing.is_empty()).then(|| {
                    let names: Vec<u32> = missing.iter().map(|(i, _)| *i).collect();
                    let why: Vec<String> =
                        missing.iter().map(|(i, w)| format!("shard {i}: {w}")).collect();
                    format!(
                        "inconclusive: shards {names:?} gave no figures, so the whole run cannot be judged ({})",
                        why.join("; ")
                    )
                });
                Collected::Whole { missing }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_collector_url_is_plain_http_with_a_port_and_bad_ones_say_why() {
        assert_eq!(
            collector_url("http://sloburn-job-0.sloburn-job:9091").unwrap(),
            ("http://sloburn-job-0.sloburn-job:9091".to_string(), 9091)
        );
        for (bad, says) in [
            ("https://a:1", "http://HOST:PORT"),
            ("http://a", "name the port"),
            ("not a url at all", "not a URL"),
        ] {
            let e = collector_url(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
