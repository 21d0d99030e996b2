//! This shard's share of a split run: started at the agreed instant, stopped, and viewed by
//! the collector (`?scope=local`).

use crate::daemon::runs::{Sharded, StartError, start};
use crate::daemon::state::Shared;
use crate::load::placement::Assignment;
use crate::load::runner::{Abort, RunReport};
use serde_json::{Value, json};
use std::sync::Arc;

use super::*;

/// Stops this shard's share of `run`, if it has one going. Whether it had one.
pub(crate) fn stop_local(shared: &Shared, run: &str, why: &str) -> bool {
    let Ok(kept) = shared.shares.lock() else {
        return false;
    };
    match kept.iter().find(|(r, _)| r == run) {
        Some((_, share)) => {
            share
                .stopper
                .stop(Abort::Stopped(format!("stopped on every shard: {why}")));
            true
        }
        None => false,
    }
}

/// This shard's own finished report of `run`.
pub(super) fn local_report(shared: &Shared, run: &str) -> Option<RunReport> {
    let kept = shared.shares.lock().ok()?;
    let (_, share) = kept.iter().find(|(r, _)| r == run)?;
    share.report.get().cloned()
}

/// A peer's share as `GET /api/shard-runs/{run}?scope=local` shows it: going, or finished
/// with its figures. `None` when this shard has no such share.
pub(crate) fn local_view(shared: &Shared, run: &str) -> Option<Value> {
    let kept = shared.shares.lock().ok()?;
    let (_, share) = kept.iter().find(|(r, _)| r == run)?;
    let mut v = json!({
        "run": run,
        "scope": "local",
        "shard": { "index": shared.shard.index(), "count": shared.shard.count() },
        "profile": share.profile,
        "local_run": share.id,
        "start_at_ms": share.start_at_ms,
    });
    let ended = share.ending.borrow().clone();
    match ended {
        None => v["state"] = json!("running"),
        Some(r) => {
            v["state"] = json!("finished");
            v["result"] = json!(r.result);
            v["reason"] = json!(r.reason);
            if let Some(report) = share.report.get() {
                v["shares"] = serde_json::to_value(&report.stats).unwrap_or_default();
            }
        }
    }
    Some(v)
}

/// `GET /api/shard-runs/{run}` on the collector: the run's one verdict, or that it is going.
pub(crate) fn verdict_view(shared: &Shared, run: &str) -> Option<Value> {
    let kept = shared.verdicts.lock().ok()?;
    let (_, ending) = kept.iter().find(|(r, _)| r == run)?;
    let record = ending.borrow().clone();
    Some(match record {
        None => json!({ "run": run, "scope": "whole", "state": "running" }),
        Some(r) => json!({ "run": run, "scope": "whole", "state": "finished", "verdict": r }),
    })
}

/// Whether this shard already holds a share of `run` (a collector's own share, asked again
/// through a peer list that names every shard, this one included).
pub(crate) fn holds(shared: &Shared, run: &str) -> bool {
    shared
        .shares
        .lock()
        .map(|kept| kept.iter().any(|(r, _)| r == run))
        .unwrap_or(false)
}

/// A peer's side of `POST /api/shard-runs`: starts this shard's share of the collector's run
/// for the agreed instant. The status and JSON answer.
pub(crate) fn start_share(shared: &Arc<Shared>, ask: StartShare) -> (http::StatusCode, Value) {
    use http::StatusCode as S;
    let me = json!({ "index": shared.shard.index(), "count": shared.shard.count() });
    let refuse = |code: S, why: String| (code, json!({ "error": why, "shard": me }));
    if !valid_run_id(&ask.run) {
        return refuse(
            S::BAD_REQUEST,
            format!("`run` must be 1 to {MAX_RUN_ID} letters, digits or `-`"),
        );
    }
    if holds(shared, &ask.run) {
        // Asked twice (a retry, or a collector listed among its own peers): one share.
        return (
            S::OK,
            json!({ "run": ask.run, "joined": true, "shard": me }),
        );
    }
    let now = shared.clock.wall_ms();
    if ask.start_at_ms < now {
        return refuse(
            S::CONFLICT,
            format!(
                "the run's start instant passed {} ms ago: its share here would start late",
                now - ask.start_at_ms
            ),
        );
    }
    if ask.start_at_ms - now > 10 * LEAD.as_millis() as u64 {
        return refuse(
            S::BAD_REQUEST,
            format!(
                "`start_at_ms` is {} ms ahead, more than {} ms: are the shards' clocks apart?",
                ask.start_at_ms - now,
                10 * LEAD.as_millis()
            ),
        );
    }
    let launch = match crate::daemon::runs::launch_of(shared, &ask.profile) {
        Ok(l) => l,
        Err(StartError::NotHere { owner, .. }) => {
            return refuse(
                S::MISDIRECTED_REQUEST,
                format!(
                    "profile `{}` is owned by shard {owner}, not split",
                    ask.profile
                ),
            );
        }
        Err(_) => return refuse(S::NOT_FOUND, format!("no profile `{}`", ask.profile)),
    };
    if !matches!(shared.assignment(&launch.profile), Assignment::Share(_)) {
        return refuse(
            S::CONFLICT,
            format!(
                "profile `{}` is not split over the shards here",
                ask.profile
            ),
        );
    }
    let mut launch = match crate::daemon::runs::with_overrides(launch, &ask.overrides) {
        Ok(l) => l,
        Err(why) => return refuse(S::BAD_REQUEST, why),
    };
    launch.sharded = Some(Sharded {
        run: ask.run.clone(),
        start_at_ms: ask.start_at_ms,
        collector: ask.from,
    });
    let trigger = format!("shard {}", ask.from);
    match start(shared, launch, &trigger) {
        Ok((id, _)) => (
            S::ACCEPTED,
            json!({ "run": ask.run, "local_run": id, "start_at_ms": ask.start_at_ms, "shard": me }),
        ),
        Err(StartError::AlreadyRunning) => refuse(
            S::CONFLICT,
            format!("profile `{}` is running already here", ask.profile),
        ),
        Err(StartError::ShuttingDown) => refuse(S::SERVICE_UNAVAILABLE, "shutting down".into()),
        Err(_) => refuse(S::NOT_FOUND, format!("no profile `{}`", ask.profile)),
    }
}
