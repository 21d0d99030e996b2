//! One run of a split profile on every shard, with one verdict (issue 31): the shard that was
//! asked (the Flagger hook, `POST /api/profiles/NAME/run`) is the run's collector.
//!
//! - Start barrier: the collector picks an instant [`LEAD`] ahead on the wall clock (unix ms),
//!   starts its own share for that instant and POSTs the same run id, instant, profile and
//!   overrides to every peer (`POST /api/shard-runs`); each shard's plan starts at the instant
//!   ([`super::runs`] turns it into the plan's start time once its set-up is done). A peer
//!   that refuses, does not answer within [`LEAD`], or is asked after the instant has passed
//!   has no share: the run is stopped everywhere and the verdict is inconclusive, naming it.
//! - Results: each shard keeps its finished share (`state::Share`, the last
//!   [`SHARES_KEPT`](super::state::SHARES_KEPT)); the collector polls
//!   `GET /api/shard-runs/{run}?scope=local` every [`POLL`] for its figures
//!   (its `load::record::RunRecord`, under `shares`: histogram buckets, counts, checks, error
//!   classes), adds them to
//!   its own (never averaging a percentile) and evaluates the profile's thresholds once.
//! - Abort: a share that ends aborted (an `abort_on_fail` threshold, its guard, the API) or a
//!   shard that stops answering ([`MISSES`] polls in a row) stops every other share
//!   (`POST /api/shard-runs/{run}/abort`); the first reason is the run's.
//! - A shard whose figures are missing (never answered, stopped answering, not finished by the
//!   deadline, figures of another shape) makes the verdict `inconclusive`, naming it: never
//!   passed, never failed.
//!
//! Every peer call is bounded by a timeout, and the collector runs as one task of the
//! daemon's tracker; a peer's answer is size-capped (`peers::MAX_ANSWER`) and validated.

use super::peers;
use super::runs::{Launch, Sharded, StartError, start};
use super::state::{Ending, Shared};
use crate::load::placement::Assignment;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod collect;
mod share;
use collect::*;
pub(crate) use share::*;

/// How far ahead of the asking the shards start: time for every peer to hear of the run and
/// set up its share.
pub const LEAD: Duration = Duration::from_millis(1000);
/// How often the collector asks the peers how their shares are going.
pub const POLL: Duration = Duration::from_millis(250);
/// Polls in a row a peer may miss before it counts as gone.
pub const MISSES: u32 = 3;
/// How long after its planned end a share may still report before it counts as missing.
const SLACK: Duration = Duration::from_secs(30);
/// The longest run id a peer accepts.
const MAX_RUN_ID: usize = 64;

/// Whether a run of `launch` here should run on every shard: a split profile of a daemon that
/// is one of several shards and knows its peers.
pub(super) fn everywhere(shared: &Shared, launch: &Launch) -> bool {
    peers::peered(shared) && matches!(shared.assignment(&launch.profile), Assignment::Share(_))
}

/// The request a collector sends to each peer to start its share.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct StartShare {
    pub run: String,
    pub profile: String,
    pub start_at_ms: u64,
    /// The hook's overrides (`url`, `rate`, `duration`), applied on every shard alike.
    #[serde(default)]
    pub overrides: BTreeMap<String, String>,
    /// The collector's shard index.
    pub from: u32,
}

/// Whether `run` can be a run id: short, letters, digits and `-`.
pub(super) fn valid_run_id(run: &str) -> bool {
    !run.is_empty()
        && run.len() <= MAX_RUN_ID
        && run.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Starts `launch` on every shard: its own share now (for the barrier), the peers' through
/// their APIs, and a collector task that sends the one verdict to the returned ending.
/// `overrides` are the metadata the launch was adjusted with, for the peers to do the same.
pub(super) fn start_everywhere(
    shared: &Arc<Shared>,
    mut launch: Launch,
    overrides: BTreeMap<String, String>,
    trigger: &str,
) -> Result<(u64, String, Ending), StartError> {
    let run = format!("{}-{:016x}", shared.shard.index(), rand::random::<u64>());
    let start_at_ms = shared
        .clock
        .wall_ms()
        .saturating_add(LEAD.as_millis() as u64);
    launch.sharded = Some(Sharded {
        run: run.clone(),
        start_at_ms,
        collector: shared.shard.index(),
    });
    let profile = launch.profile.clone();
    let (id, own) = start(shared, launch, trigger)?;
    let (tx, rx) = tokio::sync::watch::channel(None);
    let ask = StartShare {
        run,
        profile: profile.name.clone(),
        start_at_ms,
        overrides,
        from: shared.shard.index(),
    };
    let deadline = start_at_ms
        .saturating_add(planned(&profile, shared).as_millis() as u64)
        .saturating_add(SLACK.as_millis() as u64);
    if let Ok(mut kept) = shared.verdicts.lock() {
        kept.push_back((ask.run.clone(), rx.clone()));
        while kept.len() > super::state::SHARES_KEPT {
            kept.pop_front();
        }
    }
    let run = ask.run.clone();
    let task = collect(shared.clone(), ask, id, own, deadline, tx);
    shared.tracker.spawn(task);
    Ok((id, run, rx))
}

/// The longest a share may run: start time, planned duration, graceful stop.
fn planned(profile: &crate::config::Profile, shared: &Shared) -> Duration {
    profile
        .start_time
        .saturating_add(crate::load::plan::planned_duration(&profile.executor))
        .saturating_add(
            profile
                .graceful_stop
                .min(shared.config().server.grace_period),
        )
}
