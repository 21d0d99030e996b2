//! The other shards, reached through their own HTTP APIs (`server.peers`): no coordinator, no
//! transport of our own. A whole-SLO answer asks every peer for its *local* figures
//! (`?scope=local`, which never asks further, so no call recurses) concurrently, with the admin
//! token and a short timeout, and adds them to this shard's own.
//!
//! A peer's shard index is what it says it is (its `shard` in the local answer), never guessed
//! from its address. A shard that did not answer is named (`missing_shards`, `complete:
//! false`), never counted as zero events without saying so.

use super::state::Shared;
use crate::http::{Client, ClientOptions, RequestSpec};
use crate::slo::Counts;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long one peer may take to answer; a peer slower than this is missing from the answer.
pub(super) const PEER_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest local answer read from a peer (its `/api/slos`, a few KiB an SLO).
const MAX_ANSWER: usize = 16 << 20;

/// Whether answers are the whole SLO's: this daemon is one of several shards and knows peers.
pub(super) fn peered(shared: &Shared) -> bool {
    shared.shard.count() > 1 && !shared.config().server.peers.is_empty()
}

/// What the peers answered to one local query.
pub(super) struct Gathered {
    shard: u32,
    shards: u32,
    /// By shard index (as the peer said), its local answer.
    pub answers: BTreeMap<u32, Value>,
    /// Peers (as configured, expanded) that gave no usable answer, and why.
    problems: Vec<(String, String)>,
}

impl Gathered {
    /// Shard indices neither this shard nor any answering peer.
    pub fn missing(&self) -> Vec<u32> {
        (0..self.shards)
            .filter(|i| *i != self.shard && !self.answers.contains_key(i))
            .collect()
    }

    /// A peer's answer is unusable after all (another config): it counts as missing.
    pub fn drop_answer(&mut self, index: u32, why: String) {
        self.answers.remove(&index);
        self.problems.push((format!("shard {index}"), why));
    }

    /// The fields every whole-SLO answer carries: which shards it sums, which it lacks, why.
    pub fn describe(&self, v: &mut Value) {
        let missing = self.missing();
        let mut answered: Vec<u32> = self.answers.keys().copied().collect();
        answered.push(self.shard);
        answered.sort_unstable();
        v["scope"] = json!("whole");
        v["shard"] = json!({ "index": self.shard, "count": self.shards });
        v["complete"] = json!(missing.is_empty());
        v["shards_answered"] = json!(answered);
        v["missing_shards"] = json!(missing);
        v["peer_errors"] = self
            .problems
            .iter()
            .map(|(peer, error)| json!({ "peer": peer, "error": error }))
            .collect();
    }
}

/// The client peer calls go through: `timeout` a call, answers up to [`MAX_ANSWER`].
pub(super) fn client(shared: &Shared, timeout: Duration) -> Client {
    Client::new(
        ClientOptions {
            timeout,
            max_body: MAX_ANSWER,
            ..ClientOptions::default()
        },
        shared.resolver.clone(),
    )
}

/// JSON accepted, and the admin token when the daemon has one (peers check it).
pub(super) fn headers(shared: &Shared) -> http::HeaderMap {
    let cfg = shared.config();
    let mut headers = http::HeaderMap::from_iter([
        (
            http::header::ACCEPT,
            http::HeaderValue::from_static("application/json"),
        ),
        (
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        ),
    ]);
    if let Some(t) = &cfg.server.admin_token
        && let Ok(mut v) = http::HeaderValue::from_str(&format!("Bearer {}", t.expose()))
    {
        v.set_sensitive(true);
        headers.insert(http::header::AUTHORIZATION, v);
    }
    headers
}

/// One call to one peer within `timeout`: its status and JSON answer, or why there is none.
pub(super) async fn call(
    client: &Client,
    headers: &http::HeaderMap,
    method: http::Method,
    url: &str,
    body: bytes::Bytes,
    timeout: Duration,
) -> Result<(u16, Value), String> {
    let uri = url
        .parse::<http::Uri>()
        .map_err(|_| "not a valid URL".to_string())?;
    let req = RequestSpec {
        method,
        uri,
        headers: headers.clone(),
        body,
    };
    let mut conn = client.conn();
    let o = tokio::time::timeout(timeout, conn.send(&req))
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))?;
    match (o.error, o.status) {
        (Some(e), _) => Err(format!("cannot reach it: {}", e.as_str())),
        (None, Some(code)) => serde_json::from_slice::<Value>(&o.body)
            .map(|v| (code, v))
            .map_err(|e| format!("it answered {code}, not JSON: {e}")),
        (None, None) => Err("no response".to_string()),
    }
}

/// GETs `path_and_query` (a `?scope=local` one) from every peer at once.
pub(super) async fn gather(shared: &Shared, path_and_query: &str) -> Gathered {
    let cfg = shared.config();
    let (shard, shards) = (shared.shard.index(), shared.shard.count());
    let client = client(shared, PEER_TIMEOUT);
    let headers = headers(shared);
    // The set dies with this call: no peer call outlives the answer it was for.
    let mut calls = tokio::task::JoinSet::new();
    for peer in cfg.server.peer_urls(shards) {
        let url = format!("{peer}{path_and_query}");
        let (client, headers) = (client.clone(), headers.clone());
        calls.spawn(async move {
            let answer = call(
                &client,
                &headers,
                http::Method::GET,
                &url,
                bytes::Bytes::new(),
                PEER_TIMEOUT,
            )
            .await
            .and_then(|(code, v)| match code {
                200 => Ok(v),
                code => Err(format!("it answered {code}")),
            });
            (peer, answer)
        });
    }
    let mut g = Gathered {
        shard,
        shards,
        answers: BTreeMap::new(),
        problems: Vec::new(),
    };
    while let Some(done) = calls.join_next().await {
        let Ok((peer, answer)) = done else { continue };
        let v = match answer {
            Ok(v) => v,
            Err(why) => {
                g.problems.push((peer, why));
                continue;
            }
        };
        let index = v["shard"]["index"].as_u64();
        let count = v["shard"]["count"].as_u64();
        match (index, count) {
            (Some(i), Some(n)) if n == u64::from(shards) && i < n => {
                let i = i as u32;
                if i == shard {
                    // This daemon itself, listed among the peers (a `{i}` entry names every pod).
                } else if let std::collections::btree_map::Entry::Vacant(e) = g.answers.entry(i) {
                    e.insert(v);
                } else {
                    g.problems
                        .push((peer, format!("says it is shard {i}, as another peer did")));
                }
            }
            (Some(i), Some(n)) => g.problems.push((
                peer,
                format!("it is shard {i}/{n}, not one of this daemon's {shards} shards"),
            )),
            _ => g.problems.push((
                peer,
                "its answer names no shard (`shard.index`)".to_string(),
            )),
        }
    }
    g.problems.sort();
    g
}

/// One SLO's events per window as a shard's local `/api/slos` element shows them.
pub(super) fn counts_of(slo: &Value) -> Option<Counts> {
    let pair = |w: &Value| Some((w["good"].as_u64()?, w["bad"].as_u64()?));
    let mut c = Counts {
        period: pair(&slo["period"])?,
        ..Counts::default()
    };
    let tiers = slo["tiers"].as_array()?;
    let tier_windows = tiers.iter().flat_map(|t| [&t["long"], &t["short"]]);
    for w in slo["windows"].as_array()?.iter().chain(tier_windows) {
        let d = crate::units::parse_duration(w["window"].as_str()?).ok()?;
        c.windows.insert(d, pair(w)?);
    }
    Some(c)
}

/// The whole SLO's good and bad events over `window` right now: this shard's own (live, as its
/// guard reads them) plus each answering peer's, with what was asked. `None` when this shard
/// has no live state for the SLO.
pub(super) async fn whole_totals(
    shared: &Shared,
    slo: &str,
    window: Duration,
    now_unix: i64,
) -> Option<(u64, u64, f64, Gathered)> {
    let (mut good, mut bad, budget) = shared.budget.totals(slo, window, now_unix)?;
    let w = crate::units::format_duration(window);
    let mut g = gather(shared, &format!("/api/slos/{slo}?scope=local&window={w}")).await;
    let indices: Vec<u32> = g.answers.keys().copied().collect();
    for i in indices {
        let asked = &g.answers[&i]["asked"];
        match (asked["good"].as_u64(), asked["bad"].as_u64()) {
            (Some(pg), Some(pb)) if asked["window"].as_str() == Some(w.as_str()) => {
                good = good.saturating_add(pg);
                bad = bad.saturating_add(pb);
            }
            _ => g.drop_answer(i, format!("no `{w}` figures for SLO `{slo}`")),
        }
    }
    Some((good, bad, budget, g))
}
