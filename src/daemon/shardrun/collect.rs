//! The collector on the shard that starts a split run: peers asked to start, each share
//! polled until it ends, their records added (`RunRecord::merge`), the verdict once, aborts passed on.

use crate::daemon::peers::{self, PEER_TIMEOUT};
use crate::daemon::runs::{fill, save_verdict, set_threshold_gauges};
use crate::daemon::state::{Ending, RunEntry, Shared};
use crate::http::Client;
use crate::load::record;
use crate::load::runner::Abort;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;

/// A peer's part in one run, as the collector sees it.
pub(super) enum Part {
    /// Its share is going; `misses` polls in a row went unanswered.
    Going { url: String, misses: u32 },
    /// Its share ended: how, and its figures.
    Done {
        result: String,
        reason: Option<String>,
        shares: Box<record::RunRecord>,
    },
    /// No figures will come, and why.
    Missing(String),
}

/// The collector: peers started, shares polled, aborts passed on, figures added, one verdict.
pub(super) async fn collect(
    shared: Arc<Shared>,
    ask: StartShare,
    id: u64,
    mut own: Ending,
    deadline_ms: u64,
    verdict: tokio::sync::watch::Sender<Option<RunEntry>>,
) {
    let me = shared.shard.index();
    let shards = shared.shard.count();
    let client = peers::client(&shared, PEER_TIMEOUT);
    let headers = peers::headers(&shared);
    let mut parts = start_peers(&shared, &client, &headers, &ask).await;
    let mut abort: Option<String> = None;
    let missing_at_start: Vec<u32> = parts
        .iter()
        .filter(|(_, p)| matches!(p, Part::Missing(_)))
        .map(|(i, _)| *i)
        .collect();
    if !missing_at_start.is_empty() {
        abort = Some(format!("shards {missing_at_start:?} did not join the run"));
    }
    let mut told = false;
    // The own share's run task is gone without a record (the daemon is shutting down).
    let mut own_gone = false;
    loop {
        // A daemon shutting down collects nothing more: its drain must not wait for the peers.
        if shared.shutdown.is_cancelled() {
            for p in parts.values_mut() {
                if matches!(p, Part::Going { .. }) {
                    *p = Part::Missing("the collecting shard shut down before it came".into());
                }
            }
            abort.get_or_insert_with(|| "the collecting shard is shutting down".into());
        }
        // A reason to stop: tell every share still going, this shard's own included (once).
        if let Some(why) = &abort
            && !told
        {
            told = true;
            stop_all(&shared, &client, &headers, &ask.run, &parts, why).await;
        }
        let own_done = own_gone || own.borrow().is_some();
        let going = parts.values().any(|p| matches!(p, Part::Going { .. }));
        if own_done && !going {
            break;
        }
        if shared.clock.wall_ms() > deadline_ms {
            for p in parts.values_mut() {
                if matches!(p, Part::Going { .. }) {
                    *p = Part::Missing("its share had not finished by the run's deadline".into());
                }
            }
            if own_done {
                break;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            changed = own.changed(), if !own_done => own_gone = changed.is_err(),
            _ = shared.shutdown.cancelled(), if !told => {}
        }
        poll(&client, &headers, &ask.run, &mut parts).await;
        if abort.is_none() {
            abort = why_stop(&own, &parts);
        }
    }
    let own_record = own.borrow().clone();
    let record = verdict_of(&shared, &ask, id, own_record, parts, abort, me, shards);
    tracing::info!(
        profile = %record.profile,
        run = id,
        shard_run = %ask.run,
        result = %record.result,
        reason = record.reason.as_deref().unwrap_or(""),
        requests = record.requests,
        p95_ms = format!("{:.2}", record.p95_ms),
        "run on every shard finished"
    );
    // The run's history here shows the whole run (a scheduled run has nobody waiting on it),
    // counted once, here: the shares, this shard's own included, counted nothing.
    shared.metrics.run_finished(&record.profile, &record.result);
    shared.remember(&record);
    save_verdict(&shared, &record);
    verdict.send_replace(Some(record));
}

/// POSTs the share to every peer at once; by shard index, each peer's part (going, or missing
/// with why). A peer that turns out to be this shard (a `{i}` list names it too) is left out.
pub(super) async fn start_peers(
    shared: &Shared,
    client: &Client,
    headers: &http::HeaderMap,
    ask: &StartShare,
) -> BTreeMap<u32, Part> {
    let (me, shards) = (shared.shard.index(), shared.shard.count());
    let body = bytes::Bytes::from(serde_json::to_vec(ask).unwrap_or_default());
    // A start heard after the instant would skew the run: the peer refuses it, and waiting
    // longer than the lead helps nobody.
    let timeout = LEAD;
    let mut calls = tokio::task::JoinSet::new();
    for peer in shared.config().server.peer_urls(shards) {
        let url = format!("{peer}/api/shard-runs");
        let (client, headers, body) = (client.clone(), headers.clone(), body.clone());
        calls.spawn(async move {
            let out = peers::call(&client, &headers, http::Method::POST, &url, body, timeout).await;
            (peer, out)
        });
    }
    let mut parts = BTreeMap::new();
    let mut problems = Vec::new();
    while let Some(done) = calls.join_next().await {
        let Ok((peer, out)) = done else { continue };
        let index = match &out {
            Ok((_, v)) => shard_of(v, shards),
            Err(_) => None,
        };
        match (out, index) {
            (Ok((200 | 202, _)), Some(i)) if i == me => {}
            (Ok((200 | 202, _)), Some(i)) if parts.contains_key(&i) => {
                problems.push((peer, format!("says it is shard {i}, as another peer did")));
            }
            (Ok((200 | 202, _)), Some(i)) => {
                parts.insert(
                    i,
                    Part::Going {
                        url: peer,
                        misses: 0,
                    },
                );
            }
            (Ok((code, v)), _) => {
                let why = v["error"].as_str().unwrap_or("no reason given");
                problems.push((peer, format!("refused its share ({code}): {why}")));
            }
            (Err(why), _) => problems.push((peer, why)),
        }
    }
    // Every shard without a share is named, with what its address answered.
    let why: Vec<String> = problems.iter().map(|(p, w)| format!("{p}: {w}")).collect();
    let why = if why.is_empty() {
        "no peer address answered for it".to_string()
    } else {
        why.join("; ")
    };
    for i in (0..shards).filter(|i| *i != me) {
        parts
            .entry(i)
            .or_insert_with(|| Part::Missing(format!("it did not start its share ({why})")));
    }
    parts
}

/// A peer's shard index from its answer, when it is one of this daemon's shards.
pub(super) fn shard_of(v: &Value, shards: u32) -> Option<u32> {
    let i = v["shard"]["index"].as_u64()?;
    let n = v["shard"]["count"].as_u64()?;
    (n == u64::from(shards) && i < n).then_some(i as u32)
}

/// Asks every peer whose share is going how it is; a finished one gives its figures.
pub(super) async fn poll(
    client: &Client,
    headers: &http::HeaderMap,
    run: &str,
    parts: &mut BTreeMap<u32, Part>,
) {
    let mut calls = tokio::task::JoinSet::new();
    for (i, p) in parts.iter() {
        let Part::Going { url, .. } = p else { continue };
        let url = format!("{url}/api/shard-runs/{run}?scope=local");
        let (client, headers, i) = (client.clone(), headers.clone(), *i);
        calls.spawn(async move {
            let out = peers::call(
                &client,
                &headers,
                http::Method::GET,
                &url,
                bytes::Bytes::new(),
                PEER_TIMEOUT,
            )
            .await;
            (i, out)
        });
    }
    while let Some(done) = calls.join_next().await {
        let Ok((i, out)) = done else { continue };
        let Some(part) = parts.get_mut(&i) else {
            continue;
        };
        let Part::Going { misses, .. } = part else {
            continue;
        };
        match out {
            Ok((200, v)) if v["state"] == "running" => *misses = 0,
            Ok((200, v)) if v["state"] == "finished" => *part = finished(v, i),
            Ok((code, v)) if code != 200 => {
                let why = v["error"].as_str().unwrap_or("no reason given");
                *part = Part::Missing(format!("it lost its share ({code}: {why})"));
            }
            Ok(_) => *part = Part::Missing("its answer is no share's state".into()),
            Err(why) => {
                *misses += 1;
                if *misses >= MISSES {
                    *part = Part::Missing(format!(
                        "it stopped answering during the run ({MISSES} polls in a row: {why})"
                    ));
                }
            }
        }
    }
}

/// A finished share's answer as a part.
pub(super) fn finished(mut v: Value, i: u32) -> Part {
    let result = v["result"].as_str().unwrap_or("").to_string();
    let reason = v["reason"].as_str().map(str::to_string);
    if result == "error" {
        return Part::Missing(format!(
            "its share ended in an error: {}",
            reason.unwrap_or_default()
        ));
    }
    match serde_json::from_value::<record::RunRecord>(v["shares"].take()) {
        Ok(shares) => Part::Done {
            result,
            reason,
            shares: Box::new(shares),
        },
        Err(e) => Part::Missing(format!("shard {i}'s figures do not read: {e}")),
    }
}

/// Why the whole run should stop, if it should: a share ended aborted, or a peer is gone.
pub(super) fn why_stop(own: &Ending, parts: &BTreeMap<u32, Part>) -> Option<String> {
    if let Some(r) = own.borrow().as_ref()
        && r.result.starts_with("aborted")
    {
        return Some(format!(
            "the collecting shard's share was aborted: {}",
            r.reason.as_deref().unwrap_or("")
        ));
    }
    parts.iter().find_map(|(i, p)| match p {
        Part::Done {
            result,
            reason: Some(why),
            ..
        } if result.starts_with("aborted") => Some(format!("shard {i}'s share was aborted: {why}")),
        Part::Missing(why) => Some(format!("shard {i} has no share: {why}")),
        _ => None,
    })
}

/// Stops this shard's own share and tells every peer whose share is going.
pub(super) async fn stop_all(
    shared: &Shared,
    client: &Client,
    headers: &http::HeaderMap,
    run: &str,
    parts: &BTreeMap<u32, Part>,
    why: &str,
) {
    stop_local(shared, run, why);
    let body = bytes::Bytes::from(json!({ "reason": why }).to_string());
    let mut calls = tokio::task::JoinSet::new();
    for p in parts.values() {
        let Part::Going { url, .. } = p else { continue };
        let url = format!("{url}/api/shard-runs/{run}/abort");
        let (client, headers, body) = (client.clone(), headers.clone(), body.clone());
        calls.spawn(async move {
            peers::call(
                &client,
                &headers,
                http::Method::POST,
                &url,
                body,
                PEER_TIMEOUT,
            )
            .await
        });
    }
    // A peer that does not hear it finishes its share on its own; its figures still count.
    while calls.join_next().await.is_some() {}
}

/// The one verdict: this shard's figures plus every finished peer's, the thresholds evaluated
/// on the sum, inconclusive when a shard's figures are missing.
#[allow(clippy::too_many_arguments)]
pub(super) fn verdict_of(
    shared: &Shared,
    ask: &StartShare,
    id: u64,
    own: Option<RunEntry>,
    mut parts: BTreeMap<u32, Part>,
    abort: Option<String>,
    me: u32,
    shards: u32,
) -> RunEntry {
    let mut record = own.unwrap_or_else(|| {
        let why = "the daemon stopped before the run ended".to_string();
        RunEntry::new(id, &ask.profile, "", "", 0.0, "error", Some(why))
    });
    // The whole run, no longer this shard's share of it.
    record.share_of = None;
    let own_report = local_report(shared, &ask.run);
    let mut per_shard = vec![json!({
        "index": me,
        "result": record.result,
        "requests": own_report.as_ref().map(|r| r.stats.requests),
    })];
    let merged = own_report.map(|mut report| {
        for (i, p) in parts.iter_mut() {
            let Part::Done { result, shares, .. } = p else {
                continue;
            };
            match report.stats.merge(shares) {
                Ok(()) => {
                    per_shard
                        .push(json!({ "index": i, "result": result, "requests": shares.requests }));
                }
                Err(why) => *p = Part::Missing(why),
            }
        }
        report
    });
    let missing: Vec<(u32, String)> = parts
        .iter()
        .filter_map(|(i, p)| match p {
            Part::Missing(why) => Some((*i, why.clone())),
            _ => None,
        })
        .collect();
    if let Some(mut report) = merged {
        // The thresholds once, on every shard's figures together.
        report.judge_thresholds();
        if report.aborted.is_none() || abort.is_some() {
            report.aborted = abort.clone().map(Abort::Stopped);
        }
        fill(&mut record, &report);
        set_threshold_gauges(shared, &ask.profile, &report);
    } else if record.result != "error" {
        record.result = "error".into();
        record.reason = Some("this shard's own share left no figures".into());
    }
    if !missing.is_empty() {
        let names: Vec<u32> = missing.iter().map(|(i, _)| *i).collect();
        let why: Vec<String> = missing
            .iter()
            .map(|(i, w)| format!("shard {i}: {w}"))
            .collect();
        record.result = "inconclusive".into();
        record.reason = Some(format!(
            "inconclusive: shards {names:?} gave no figures, so the whole run's thresholds cannot \
             be judged ({})",
            why.join("; ")
        ));
    }
    per_shard.sort_by_key(|v| v["index"].as_u64());
    let answered: Vec<u32> = per_shard
        .iter()
        .filter_map(|v| v["index"].as_u64().map(|i| i as u32))
        .collect();
    record.shards = Some(json!({
        "run": ask.run,
        "start_at_ms": ask.start_at_ms,
        "count": shards,
        "collector": me,
        "complete": missing.is_empty(),
        "shards_answered": answered,
        "missing_shards": missing.iter().map(|(i, _)| i).collect::<Vec<_>>(),
        "errors": missing.iter().map(|(i, w)| json!({ "shard": i, "error": w })).collect::<Vec<_>>(),
        "shares": per_shard,
    }));
    record
}
