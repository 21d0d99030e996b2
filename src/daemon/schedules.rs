//! Config generations and schedule loops: applying a config starts one loop per scheduled
//! profile under a fresh generation token (a reload cancels the old one), and each due time
//! starts, skips or queues a run by the profile's overlap policy.
//!
//! A split profile of a peered shard (`server.peers`) runs on every shard with one verdict:
//! its scheduled runs are started by shard 0, the scheduled runs' collector, through the same
//! start barrier as the API and the hook (`shardrun`). Every other shard, at its own due time,
//! leaves the run to shard 0 and only checks, once shard 0 had time to ask (the lead, the
//! profile's jitter and 2 s), that its share began; if not (shard 0 down or unreachable), it
//! runs its share alone, with a warning: a missed scheduled run would hide the target more
//! than a share judged on its own. `run_on_start` runs stay each shard's own: pods start one
//! by one.

use super::runs::{launch_of, start_run};
use super::shardrun;
use super::state::{ProfileState, Shared};
use crate::config::spec::Placement;
use crate::config::{Config, Profile};
use crate::load::placement::Assignment;
use crate::schedule::{Decision, Slot, Ticker};
use rand::SeedableRng;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Applies the config the daemon starts with: every `run_on_start` profile runs now.
pub(super) fn apply(shared: &Arc<Shared>, cfg: Arc<Config>) {
    apply_with(shared, cfg, &|_| true);
}

/// Applies a reloaded config. `run_on_start` means "when the daemon starts": a reload runs it
/// only for profiles that are new in this config, so re-applying an unchanged ConfigMap sends
/// no unplanned load.
pub(super) fn reapply(shared: &Arc<Shared>, cfg: Arc<Config>) {
    let before = shared.config();
    apply_with(shared, cfg, &|name| !before.profiles.contains_key(name));
}

/// SLOs, metrics series, and the schedules of a new generation; `run_now(name)` says whether
/// a `run_on_start` profile starts a run right away.
fn apply_with(shared: &Arc<Shared>, cfg: Arc<Config>, run_now: &dyn Fn(&str) -> bool) {
    if let Ok(mut slot) = shared.config.write() {
        *slot = cfg.clone();
    }
    shared
        .budget
        .configure(&cfg, shared.clock.unix_secs() as i64);
    shared
        .metrics
        .set_native_options(cfg.server.native_histograms);
    shared.metrics.set_targets(
        cfg.targets
            .values()
            .map(|t| (t.name.clone(), t.protocol.as_str())),
    );
    // Profiles another shard owns are not run here: no schedule, no series on /metrics.
    let here = |p: &Profile| shared.assignment(p).run_shard().is_some();
    log_placement(shared, &cfg);
    let keep: Vec<(String, String)> = cfg
        .profiles
        .values()
        .filter(|p| here(p))
        .map(|p| (p.target.clone(), p.name.clone()))
        .collect();
    shared.metrics.retain_profiles(&keep);
    // The dashboard series of profiles this config removed (or gave another shard) go.
    if let Ok(mut series) = shared.series.lock() {
        series.retain(|name, _| cfg.profiles.get(name).is_some_and(here));
    }
    // The daemon runs what it is given, but says when a profile's VUs cannot all connect.
    if let Ok(limit) = crate::limits::nofile() {
        for why in crate::load::capacity::fd_refusals(&cfg, limit) {
            tracing::warn!(problem = %why, "a profile does not fit the open-file limit");
        }
        for why in crate::load::capacity::pool_caps(&cfg, Some(limit)) {
            tracing::warn!(problem = %why, "a profile's default VU pool is capped");
        }
    }
    let generation = shared.shutdown.child_token();
    if let Ok(mut g) = shared.generation.lock() {
        g.cancel();
        *g = generation.clone();
    }
    if let Ok(mut states) = shared.profiles.lock() {
        states.retain(|name, st| cfg.profiles.contains_key(name) || st.active.is_some());
        for p in cfg.profiles.values() {
            let st = states
                .entry(p.name.clone())
                .or_insert_with(|| ProfileState::new(p.overlap));
            if st.slot.policy() != p.overlap {
                st.slot = Slot::new(p.overlap);
            }
            st.next_run = None;
        }
    }
    for p in cfg.profiles.values().filter(|p| here(p)) {
        shared.metrics.init_profile(&p.name);
        let start_now = p.run_on_start && run_now(&p.name);
        if p.schedule.is_none() && !start_now {
            shared.metrics.set_next_run(&p.name, None);
            continue;
        }
        let shared2 = shared.clone();
        let token = generation.clone();
        let profile = p.clone();
        shared
            .tracker
            .spawn(async move { profile_loop(shared2, profile, start_now, token).await });
    }
}

/// At most this many profile names in the placement log line (`/api/profiles` has them all).
const NAMES_IN_LOG: usize = 100;

/// With `--shard i/N`, or owned profiles: which profiles this shard runs whole, which it runs
/// its share of, and how many other shards own.
fn log_placement(shared: &Shared, cfg: &Config) {
    let mut owned = Vec::new();
    let mut split = 0usize;
    let mut elsewhere = 0usize;
    for p in cfg.profiles.values() {
        match shared.assignment(p) {
            Assignment::Whole if p.placement == Placement::Owned => owned.push(p.name.as_str()),
            Assignment::Whole | Assignment::Share(_) => split += 1,
            Assignment::Elsewhere { .. } => elsewhere += 1,
        }
    }
    if shared.shard.count() == 1 && owned.is_empty() {
        return;
    }
    let shown = owned
        .iter()
        .take(NAMES_IN_LOG)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    let more = owned.len().saturating_sub(NAMES_IN_LOG);
    tracing::info!(
        shard = %format!("{}/{}", shared.shard.index(), shared.shard.count()),
        owned = owned.len(),
        split,
        owned_elsewhere = elsewhere,
        "placement: this shard owns {} profile(s){}{}; runs its share of {split} split profile(s); \
         {elsewhere} profile(s) are owned by other shards",
        owned.len(),
        if owned.is_empty() { String::new() } else { format!(": {shown}") },
        if more > 0 { format!(" and {more} more") } else { String::new() },
    );
}

async fn profile_loop(
    shared: Arc<Shared>,
    profile: Profile,
    start_now: bool,
    token: CancellationToken,
) {
    if start_now {
        // At start-up each shard runs its own share: the pods of a StatefulSet come up one by
        // one, so no barrier could hold them together.
        due(&shared, &profile.name, false);
    }
    let Some(schedule) = profile.schedule.clone() else {
        return;
    };
    let mut rng = rand::rngs::SmallRng::seed_from_u64(rand::random());
    let mut ticker = Ticker::new(schedule.clone(), profile.jitter, shared.clock);
    loop {
        let next = schedule.next_after(shared.clock.utc());
        let next_unix = next.map(|t| t.timestamp_millis() as f64 / 1000.0);
        shared.metrics.set_next_run(&profile.name, next_unix);
        if let Ok(mut states) = shared.profiles.lock()
            && let Some(st) = states.get_mut(&profile.name)
        {
            st.next_run = next_unix;
        }
        tokio::select! {
            tick = ticker.tick(&mut rng) => match tick {
                Some(_) => due(&shared, &profile.name, true),
                None => break,
            },
            _ = token.cancelled() => break,
        }
    }
}

/// A schedule fired: start, skip or queue according to the overlap policy. With `together` (a
/// schedule tick, not the daemon's start), a shard other than 0 with a split profile among
/// peers leaves the run to shard 0 (whose overlap policy then decides for the whole run) and
/// only waits to see its share begin.
fn due(shared: &Arc<Shared>, name: &str, together: bool) {
    if together
        && shared.shard.index() != 0
        && let Ok(launch) = launch_of(shared, name)
        && shardrun::everywhere(shared, &launch)
    {
        let paused = shared
            .profiles
            .lock()
            .ok()
            .is_some_and(|states| states.get(name).is_some_and(|st| st.paused));
        if !paused {
            await_shard0(shared, name, launch.profile.jitter);
        }
        return;
    }
    let decision = match shared.profiles.lock() {
        Ok(mut states) => match states.get_mut(name) {
            Some(st) if st.paused => None,
            Some(st) => Some(st.slot.on_due(st.active.is_some())),
            None => None,
        },
        Err(_) => None,
    };
    match decision {
        Some(Decision::Start) if together => start_due(shared, name, "schedule"),
        Some(Decision::Start) => {
            if let Err(e) = start_run(shared, name, "schedule") {
                tracing::warn!(profile = %name, error = ?e, "scheduled run did not start");
            }
        }
        Some(Decision::Skip) => {
            tracing::info!(profile = %name, "previous run still going; skipped (overlap: skip)");
            shared.metrics.run_finished(name, "skipped");
        }
        Some(Decision::Enqueue) => {
            tracing::info!(profile = %name, "previous run still going; queued (overlap: queue)");
        }
        None => {}
    }
}

/// A scheduled run of `name` that this shard starts (a run queued by `overlap: queue` starts
/// here alone: `runs` may not reach up to the schedules): here alone, or, on shard 0
/// with a split profile among peers, on every shard.
pub(super) fn start_due(shared: &Arc<Shared>, name: &str, trigger: &str) {
    let launch = match launch_of(shared, name) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(profile = %name, error = ?e, "scheduled run did not start");
            return;
        }
    };
    if !shardrun::everywhere(shared, &launch) {
        if let Err(e) = start_run(shared, name, trigger) {
            tracing::warn!(profile = %name, error = ?e, "scheduled run did not start");
        }
        return;
    }
    if let Err(e) = shardrun::start_everywhere(shared, launch, Default::default(), trigger) {
        tracing::warn!(profile = %name, error = ?e, "scheduled run did not start");
    }
}

/// On a shard other than 0: once shard 0 had time to start the scheduled run everywhere, runs
/// this shard's share alone if it has not begun.
fn await_shard0(shared: &Arc<Shared>, name: &str, jitter: Duration) {
    let before = last_started(shared, name);
    let wait = shardrun::LEAD + jitter + SHARD0_GRACE;
    let (shared, name) = (shared.clone(), name.to_string());
    let token = shared.shutdown.clone();
    shared.clone().tracker.spawn(async move {
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = token.cancelled() => return,
        }
        if last_started(&shared, &name) > before {
            return;
        }
        tracing::warn!(
            profile = %name,
            "shard 0 did not start the scheduled run within {wait:?}; this shard runs its share \
             alone, judged on its own"
        );
        if let Err(e) = start_run(&shared, &name, "schedule (shard 0 silent)") {
            tracing::warn!(profile = %name, error = ?e, "scheduled run did not start");
        }
    });
}

/// What a shard waits, past the start lead and the profile's jitter, for shard 0 to start a
/// scheduled run on every shard before it runs its own share alone.
const SHARD0_GRACE: Duration = Duration::from_secs(2);

fn last_started(shared: &Shared, name: &str) -> u64 {
    shared
        .profiles
        .lock()
        .ok()
        .and_then(|states| states.get(name).map(|st| st.last_started))
        .unwrap_or(0)
}
