//! Run wiring: start a profile's run now, feed its events to `/metrics`, the SLO budgets and
//! the dashboard's recorder (scatter, live figures, the profile's series ring), stop it when
//! its budget guard trips, and record how it ended (in memory and in the store).

use super::state::{Ending, ProfileState, RunEntry, Share, ShareResult, Shared};
use crate::config::{self, Profile};
use crate::load::iteration::Work;
use crate::load::observe::Observers;
use crate::load::placement::Assignment;
use crate::load::runner::{self, RunSpec, Stopper};
use crate::load::stats::RunStats;
use crate::metrics::StepLayout;
use crate::web::{Recording, RunDetail};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

mod capacity;
mod finish;
mod guard;
mod observer;
mod overrides;
pub(crate) use finish::*;
use guard::*;
use observer::*;
pub(crate) use overrides::*;

/// Why a run did not start.
#[derive(Debug, PartialEq)]
pub enum StartError {
    UnknownProfile,
    AlreadyRunning,
    ShuttingDown,
    /// A `placement: owned` profile whose owner is another shard: it never runs here.
    NotHere {
        owner: u32,
        shards: u32,
    },
}

impl StartError {
    /// The refusal of a profile owned by another shard, naming that shard.
    pub fn not_here_message(name: &str, owner: u32, shards: u32) -> String {
        format!(
            "profile `{name}` is owned by shard {owner}/{shards} (placement: owned) and runs only \
             there; send this to that shard"
        )
    }
}

/// A run to start: a profile and its target, as configured or as a hook adjusted them.
pub(super) struct Launch {
    pub profile: Profile,
    pub target: config::Target,
    /// Whether its requests are SLO events (not when a hook sent them to another URL).
    pub slo_events: bool,
    /// Its share of a run on every shard (`daemon::shardrun`), if it is one.
    pub sharded: Option<Sharded>,
}

/// What makes a run a share of a run on every shard.
pub(super) struct Sharded {
    /// The run's id, the same on every shard.
    pub run: String,
    /// When every shard starts its share (unix ms, wall clock).
    pub start_at_ms: u64,
    /// The shard that collects the run and records its one verdict.
    pub collector: u32,
}

/// Starts a run of `name` now. Returns its id.
pub fn start_run(shared: &Arc<Shared>, name: &str, trigger: &str) -> Result<u64, StartError> {
    let launch = launch_of(shared, name)?;
    start(shared, launch, trigger).map(|(id, _)| id)
}

/// Profile `name` of the current config and its target.
pub(super) fn launch_of(shared: &Shared, name: &str) -> Result<Launch, StartError> {
    let cfg = shared.config();
    let profile = cfg
        .profiles
        .get(name)
        .ok_or(StartError::UnknownProfile)?
        .clone();
    if let Assignment::Elsewhere { owner } = shared.assignment(&profile) {
        return Err(StartError::NotHere {
            owner,
            shards: shared.shard.count(),
        });
    }
    let Some(target) = cfg.targets.get(&profile.target).cloned() else {
        return Err(StartError::UnknownProfile);
    };
    Ok(Launch {
        profile,
        target,
        slo_events: true,
        sharded: None,
    })
}

/// Starts `launch` now (one run per profile at a time): its id, and how it ended once it has.
pub(super) fn start(
    shared: &Arc<Shared>,
    launch: Launch,
    trigger: &str,
) -> Result<(u64, Ending), StartError> {
    if shared.shutdown.is_cancelled() {
        return Err(StartError::ShuttingDown);
    }
    let Launch {
        profile,
        target,
        slo_events,
        sharded,
    } = launch;
    let name = profile.name.as_str();
    // The one gate every start passes (schedule, API, hook): never a second copy of an owned run.
    if let Assignment::Elsewhere { owner } = shared.assignment(&profile) {
        return Err(StartError::NotHere {
            owner,
            shards: shared.shard.count(),
        });
    }
    // A hook may have sent a single-request profile elsewhere: its request is the target's.
    let work = if profile.mix.is_empty() {
        Work::single(target.request(), target.checks.clone(), &target.display_url)
    } else {
        Work::of(&shared.config(), &profile).ok_or(StartError::UnknownProfile)?
    };
    let (id, stopper) = claim(shared, &profile)?;
    let record = RunEntry::new(
        id,
        name,
        &target.name,
        trigger,
        shared.clock.unix_secs(),
        "running",
        None,
    );
    // Saved to the store when it ends (one write per run, so a slow start-of-run write can
    // never overwrite the finished record).
    shared.remember(&record);
    let (ended, ending) = tokio::sync::watch::channel(None);
    let report = ShareResult::default();
    let start_at_ms = sharded.as_ref().map(|s| s.start_at_ms);
    let share_of = sharded.as_ref().map(|s| {
        serde_json::json!({ "run": s.run, "shard": shared.shard.index(), "collector": s.collector })
    });
    if let Some(s) = sharded {
        shared.keep_share(
            s.run,
            Share {
                id,
                profile: name.to_string(),
                start_at_ms: s.start_at_ms,
                stopper: stopper.clone(),
                ending: ending.clone(),
                report: report.clone(),
            },
        );
    }
    let shared2 = shared.clone();
    let span = tracing::info_span!("run", profile = %name, run = id, trigger, trace_id = tracing::field::Empty);
    crate::telemetry::daemon::stamp(&span);
    let task = async move {
        // Every run due at this instant is admitted (and its record stamped) before any sets
        // up: the set-ups (client, stats, recorder) queue behind the other schedules' starts
        // instead of delaying them. The plan's time zero stays the end of the run's own
        // set-up, so the queue is never iteration lateness, which a corrected latency SLI
        // would count against the target.
        tokio::task::yield_now().await;
        let (result, detail) = execute_profile(
            &shared2,
            &profile,
            &target,
            Running {
                work,
                slo_events,
                stopper,
                start_at_ms,
                report,
                share_of,
            },
            record,
        )
        .await;
        finish(&shared2, &profile.name, id, result, detail, &ended);
    };
    shared
        .tracker
        .spawn(tracing::Instrument::instrument(task, span));
    Ok((id, ending))
}

/// The profile's one run at a time: a new id and its stopper, marked active; refused while
/// another run of it is.
fn claim(shared: &Shared, profile: &Profile) -> Result<(u64, Stopper), StartError> {
    let id = shared.next_id.fetch_add(1, Relaxed) + 1;
    let stopper = Stopper::new();
    let Ok(mut states) = shared.profiles.lock() else {
        return Err(StartError::ShuttingDown);
    };
    let st = states
        .entry(profile.name.clone())
        .or_insert_with(|| ProfileState::new(profile.overlap));
    if st.active.is_some() {
        return Err(StartError::AlreadyRunning);
    }
    st.active = Some((id, stopper.clone()));
    st.last_started = id;
    Ok((id, stopper))
}

/// The load tracer, when `serve` started an exporter from `telemetry:`.
fn tracer(shared: &Shared) -> Option<crate::telemetry::Tracer> {
    let exporter = crate::telemetry::daemon::exporter()?;
    let cfg = shared.config();
    let traces = &cfg.telemetry.as_ref()?.traces;
    Some(crate::telemetry::Tracer::new(
        exporter.tracer(crate::telemetry::spans::SCOPE),
        traces,
    ))
}

/// What one run carries into its execution besides its profile and target.
struct Running {
    work: Work,
    slo_events: bool,
    stopper: Stopper,
    /// A share's barrier: the plan's time zero is this instant (unix ms), not the end of set-up.
    start_at_ms: Option<u64>,
    /// Where a share leaves its report for the shard that collects it.
    report: ShareResult,
    /// A share's link to its run (`RunEntry::share_of`): its row is no run of its own.
    share_of: Option<serde_json::Value>,
}

/// A capacity search (`executor: capacity`, no detail view: its record holds every step), or
/// a run.
async fn execute_profile(
    shared: &Arc<Shared>,
    profile: &Profile,
    target: &config::Target,
    running: Running,
    record: RunEntry,
) -> (RunEntry, Option<RunDetail>) {
    let Some(c) = &profile.capacity else {
        return execute(shared, profile, target, running, record).await;
    };
    let Running {
        work,
        slo_events,
        stopper,
        ..
    } = running;
    let how = (work, slo_events, stopper);
    let record = capacity::execute(shared, profile, target, c, how, record).await;
    (record, None)
}

async fn execute(
    shared: &Arc<Shared>,
    profile: &Profile,
    target: &config::Target,
    running: Running,
    mut record: RunEntry,
) -> (RunEntry, Option<RunDetail>) {
    let Running {
        work,
        slo_events,
        stopper,
        start_at_ms,
        report: share,
        share_of,
    } = running;
    let work = Arc::new(work);
    let steps = work.steps();
    let journeys = work.journey_names();
    let live = live(shared, profile, target, &steps, &journeys, slo_events);
    // The run's latencies are the series' (recorded once, by `live`).
    let series: Arc<dyn crate::load::series::Series> = live.metrics.clone();
    let stats = Arc::new(
        RunStats::for_work(&steps, &journeys, &profile.thresholds, &profile.name).on_series(series),
    );
    let capture = Recording::start(
        stats.clone(),
        Some(on_sample(shared, &profile.name, record.id)),
    )
    .with_evidence(crate::web::evidence::Evidence::for_work(
        stats.clone(),
        &work,
        &target.headers,
        &shared.config().secrets,
    ));
    let mut observers: Vec<Arc<dyn crate::load::event::Observer>> = vec![Arc::new(live)];
    observers.extend(capture.observers());
    let events = Observers::new(stats, observers).with_starvation(shared.starvation.clone());
    let client = target.client(shared.resolver.clone());
    // Last in the set-up: a share's barrier counts from here.
    let spec = run_spec(shared, profile, work, start_at_ms);
    shared.metrics.run_started(&profile.name);
    // The guard lives exactly as long as the run: dropping the set aborts it.
    let mut guards = tokio::task::JoinSet::new();
    if let Some(g) = profile.guard.clone() {
        guards.spawn(guard(shared.clone(), g, stopper.clone()));
    }
    let outcome = runner::run(&spec, &client, events, stopper).await;
    guards.abort_all();
    record.finished_at = Some(shared.clock.unix_secs());
    record.share_of = share_of;
    let detail = match outcome {
        Ok(report) => {
            fill(&mut record, &report);
            if record.share_of.is_some() {
                // Judged once, on every shard's figures, by the collector.
                as_share(&mut record);
            } else {
                set_threshold_gauges(shared, &profile.name, &report);
            }
            let (mut detail, slot) = capture.finish(&report);
            detail.id = record.id;
            detail.profile = record.profile.clone();
            detail.target = record.target.clone();
            detail.record = with_plan(&report, &spec, &record);
            detail.result = record.result.clone();
            detail.reason = record.reason.clone();
            if let Ok(mut series) = shared.series.lock() {
                let s = series.entry(profile.name.clone()).or_default();
                s.ring.extend(slot);
                s.live = None;
            }
            let _ = share.set(report);
            Some(detail)
        }
        Err(e) => {
            record.result = "error".into();
            record.reason = Some(e.to_string());
            None
        }
    };
    if let Ok(mut series) = shared.series.lock()
        && let Some(s) = series.get_mut(&profile.name)
    {
        s.live = None;
    }
    (record, detail)
}

/// The run's record with its plan, as `/api/runs/{id}/record` serves it.
fn with_plan(
    report: &crate::load::runner::RunReport,
    spec: &crate::load::runner::RunSpec,
    entry: &RunEntry,
) -> Option<serde_json::Value> {
    let mut record = report.stats.clone();
    let (load, _, _) =
        crate::load::summary::scenario_line(&spec.profile, &spec.executor, spec.graceful_stop);
    let shard = spec.shard;
    record.plan = Some(crate::load::record::RunPlan {
        profile: entry.profile.clone(),
        target: entry.target.clone(),
        load,
        planned: crate::load::plan::planned_duration(&spec.executor),
        start_unix_ms: (entry.started_at * 1000.0) as u64,
        shard: (shard.count() > 1).then(|| format!("{}/{}", shard.index(), shard.count())),
    });
    serde_json::to_value(&record).ok()
}

/// The run's live observer: its `/metrics` series (VUs at zero) and, when its requests are
/// SLO events, the watchers of the SLOs it feeds.
fn live(
    shared: &Shared,
    profile: &Profile,
    target: &config::Target,
    steps: &[crate::load::event::StepInfo],
    journeys: &[String],
    slo_events: bool,
) -> Live {
    let layout: Vec<StepLayout> = steps
        .iter()
        .map(|s| StepLayout {
            journey: s.journey.clone(),
            step: s.name.clone(),
            checks: s.checks.iter().map(|c| c.name.clone()).collect(),
        })
        .collect();
    let pm = shared.metrics.profile_steps(
        &target.name,
        &profile.name,
        &target.buckets,
        &layout,
        journeys,
    );
    pm.set_vus(0);
    pm.set_vus_max(0);
    Live {
        clock: shared.clock,
        metrics: pm,
        watchers: if slo_events {
            shared
                .budget
                .watchers_of(&target.name, &profile.name, steps, journeys)
        } else {
            Vec::new()
        },
        checks: steps.iter().map(|s| s.checks.clone()).collect(),
        step_journey: steps
            .iter()
            .map(|s| {
                s.journey
                    .as_ref()
                    .and_then(|j| journeys.iter().position(|n| n == j))
                    .unwrap_or(0)
            })
            .collect(),
    }
}

/// What the runner runs: this shard's share (a defaulted pool capped to the open-file limit),
/// its grace within the daemon's, and a share's start moved to the instant every shard starts.
fn run_spec(
    shared: &Arc<Shared>,
    profile: &Profile,
    work: Arc<Work>,
    start_at_ms: Option<u64>,
) -> RunSpec {
    let mut executor = profile.executor.clone();
    // Its share of a split profile; the whole of an owned one (`start` refused the others).
    let shard = shared
        .assignment(profile)
        .run_shard()
        .unwrap_or(shared.shard);
    // A defaulted pool past the open-file limit is capped (the config load logged it).
    let _ = crate::load::capacity::cap_default_pool(
        &mut executor,
        profile.vu_hold,
        shard,
        crate::limits::nofile().ok(),
    );
    let mut spec = RunSpec {
        profile: profile.name.clone(),
        executor,
        work,
        thresholds: profile.thresholds.clone(),
        graceful_stop: profile
            .graceful_stop
            .min(shared.config().server.grace_period),
        shard,
        global: Some(shared.in_flight.clone()),
        start_time: profile.start_time,
        max_lateness: profile.max_lateness,
        tracer: tracer(shared),
    };
    // The barrier: set-up done, the plan waits for the instant every shard starts at (a share
    // whose instant has passed starts at once; the collecting shard sees its start time).
    if let Some(at) = start_at_ms {
        let wait = Duration::from_millis(at.saturating_sub(shared.clock.wall_ms()));
        spec.start_time = spec.start_time.saturating_add(wait);
    }
    spec
}
