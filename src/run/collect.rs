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
//!   [`MAX_SHARE`](super::room::MAX_SHARE)) to `/v1/shares/{i}`; the collector adds them to its own (histogram buckets,
//!   never averaged percentiles), evaluates the thresholds once, prints the merged summary,
//!   writes the merged `--summary-export` and exits 0, 99 or 75 for the whole run. A shard whose
//!   figures have not come [`SLACK`] after the planned end, or do not fit, or that stopped
//!   before its plan's end (a signal, an abort: `run::shares`), is named (with how much of its
//!   plan never ran) and makes the run inconclusive (75), never passed; a share stopped by a
//!   signal marks the whole run's record `interrupted`. The other shards print their share's
//!   summary and exit 0 once the collector has their figures (1 when it could not be told).
//! - Intake: one share per joined shard. A second one is refused (409) and, unless it is the
//!   same bytes again (a retry whose answer was lost), makes the run inconclusive: somebody
//!   else reached the collector. Figures no share of that shard's plan can make (more
//!   iterations or requests than it plans) are refused (422) and wait for the right ones.
//! - A start instant more than [`MAX_AHEAD`] away is refused by the shard (as the daemon's
//!   `POST /api/shard-runs` refuses it), never waited for.
//!
//! The collector serves on `crate::server`, hardened as the daemon's own server (idle and
//! half-sent sockets give way, a share's body is held to [`MAX_SHARE`](super::room::MAX_SHARE) and read within
//! [`BODY_TIMEOUT`](super::room::BODY_TIMEOUT)). With a token (`--collect-token`, else `SLOBURN_COLLECT_TOKEN`) shared by
//! every shard, it listens on every address (the URL's port) and refuses a join or a share
//! without `Authorization: Bearer <token>` (401, compared in constant time, before the body is
//! read) and counts the refusals. Without one it listens on loopback only (refusing a
//! `--collect` URL that is not loopback unless `--collect-listen` names the address), takes a
//! join and one share per shard index from whoever reaches it, and says so once.

pub use super::room::TOKEN_ENV;
use super::room::{Room, add_up, listen, listen_addr};
use super::shares::{Bounds, Share};
use crate::config::Secret;
use crate::http::{Client, ClientOptions, RequestSpec, Resolver};
use crate::load::plan::Shard;
use crate::load::runner::{RunReport, RunSpec};
use anyhow::{anyhow, bail};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How far ahead of the last join the shards start.
pub const LEAD: Duration = Duration::from_millis(1000);
/// How often a shard asks the collector again (to join, or to hand in its figures).
pub const RETRY: Duration = Duration::from_millis(200);
/// How long after the planned end the collector waits for the shards' figures.
pub const SLACK: Duration = Duration::from_secs(30);
/// One call to the collector.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// The farthest ahead a start instant may be (the daemon's `POST /api/shard-runs` bound): past
/// it the shards' clocks are apart, or the collector is not one.
pub const MAX_AHEAD: Duration = Duration::from_secs(10);

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
    /// The collector: its report now holds every share's figures; the shards without figures
    /// or with only part of their plan's, with why, when any; the signal that stopped a share.
    Whole {
        missing: Option<String>,
        signal: Option<&'static str>,
    },
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
    spec: &RunSpec,
    profile: &str,
    timeout: Duration,
) -> anyhow::Result<Collect> {
    let (base, port) = collector_url(url)?;
    let token = token(args.collect_token.as_deref())?;
    let shard = spec.shard;
    if shard.index() == 0 {
        let addr = listen_addr(url, args.collect_listen, port, token.is_some())?;
        let per_iteration = spec.work.steps().len();
        let bounds = (0..shard.count())
            .map(|i| Bounds::of(&spec.executor, Shard::new(i, shard.count())?, per_iteration))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let room = Room {
            count: shard.count(),
            profile: profile.to_string(),
            joined: Mutex::new(BTreeSet::new()),
            start_at_ms: Mutex::new(None),
            shares: Mutex::new(BTreeMap::new()),
            conflicts: Mutex::new(Vec::new()),
            bounds,
            token,
            refused: AtomicU64::new(0),
        };
        collect_joins(addr, room, timeout).await
    } else {
        join_collector(&base, shard, profile, timeout, token).await
    }
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
                let ahead = at.saturating_sub(crate::clock::unix_ms());
                if ahead > MAX_AHEAD.as_millis() as u64 {
                    bail!(
                        "the collector at {base} set the run's start {} s ahead, more than {} s: \
                         are the shards' clocks apart? (shard {} does not wait for it)",
                        ahead / 1000,
                        MAX_AHEAD.as_secs(),
                        shard.index()
                    );
                }
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
    /// After the run: a share hands its figures in (with why it stopped early, `stopped`, and
    /// the `signal` that did, if any); the collector waits for every share (until [`SLACK`]
    /// past `planned` after the start) and adds them to `report`, thresholds evaluated again on
    /// the sum.
    pub async fn finish(
        self,
        report: &mut RunReport,
        planned: Duration,
        signal: Option<&str>,
    ) -> Collected {
        match self.role {
            Role::Share {
                url,
                shard,
                client,
                token,
            } => {
                let share = Share::of(&report.stats, report.aborted.as_ref(), signal);
                let delivered = hand_in(&client, &url, token.as_ref(), &share)
                    .await
                    .map_err(|last| {
                        format!("shard {shard}'s figures did not reach the collector: {last}")
                    });
                Collected::Share { delivered }
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
                let (missing, signal) = add_up(&room, report, &absent, &expected);
                Collected::Whole { missing, signal }
            }
        }
    }
}

/// Sends this shard's share, a few tries (the collector is up: it started this run, unless it
/// died); a refusal (4xx) is final. Why it did not get there, if it did not.
async fn hand_in(
    client: &Client,
    url: &str,
    token: Option<&Secret>,
    share: &Share,
) -> Result<(), String> {
    let body = serde_json::to_vec(share).map_err(|e| e.to_string())?;
    let mut last = String::new();
    for _ in 0..10 {
        match post(client, url, token, body.clone()).await {
            Ok((200, _)) => return Ok(()),
            Ok((code, v)) => {
                last = format!("it answered {code}: {}", v["error"].as_str().unwrap_or(""));
                if (400..500).contains(&code) {
                    break;
                }
            }
            Err(why) => last = why,
        }
        tokio::time::sleep(RETRY).await;
    }
    Err(last)
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
