//! Run wiring: start a profile's run now, feed its events to `/metrics`, the SLO budgets and
//! the dashboard's recorder (scatter, live figures, the profile's series ring), stop it when
//! its budget guard trips, and record how it ended (in memory and in the store).

use super::state::{
    DETAILS_IN_MEMORY, Ending, ProfileState, RUNS_PER_PROFILE, RunRecord, Share, ShareResult,
    Shared, ThresholdRecord, unix_now,
};
use crate::budget::{Scope, Watcher};
use crate::checks::Check;
use crate::config::{self, Profile};
use crate::http::Outcome;
use crate::load::observe::{Observer, Observers};
use crate::load::pacing::DropReason;
use crate::load::placement::Assignment;
use crate::load::plan::max_vus;
use crate::load::runner::{self, Abort, RunReport, RunSpec, Stopper};
use crate::load::spec::{Executor, default_vu_pool, stall_pool};
use crate::load::stats::RunStats;
use crate::load::walk::{IterationResult, StepFailure, Work};
use crate::metrics::{ProfileMetrics, StepLayout};
use crate::store::StoredRun;
use crate::web::{Capture, RunDetail, Sample};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

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
    let cfg = shared.config();
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
        cfg.work(&profile).ok_or(StartError::UnknownProfile)?
    };
    let id = shared.next_id.fetch_add(1, Relaxed) + 1;
    let stopper = Stopper::new();
    {
        let Ok(mut states) = shared.profiles.lock() else {
            return Err(StartError::ShuttingDown);
        };
        let st = states
            .entry(name.to_string())
            .or_insert_with(|| ProfileState::new(profile.overlap));
        if st.active.is_some() {
            return Err(StartError::AlreadyRunning);
        }
        st.active = Some((id, stopper.clone()));
        st.last_started = id;
    }
    let record = RunRecord::new(id, name, &target.name, trigger, unix_now(), "running", None);
    // Saved to the store when it ends (one write per run, so a slow start-of-run write can
    // never overwrite the finished record).
    shared.remember(&record);
    let (ended, ending) = tokio::sync::watch::channel(None);
    let report = ShareResult::default();
    let start_at_ms = sharded.as_ref().map(|s| s.start_at_ms);
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
        let (result, detail) = execute(
            &shared2,
            &profile,
            &target,
            Running {
                work,
                slo_events,
                stopper,
                start_at_ms,
                report,
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

/// A daemon run's observer: the profile's `/metrics` series and every SLO watching its traffic.
struct Live {
    metrics: Arc<ProfileMetrics>,
    watchers: Vec<Watcher>,
    /// Each step's checks (`load::walk` numbering).
    checks: Vec<Vec<Check>>,
    /// Each step's journey, by its index in the mix's journeys (0 for a single request).
    step_journey: Vec<usize>,
}

impl Observer for Live {
    fn request_finished(
        &self,
        step: usize,
        outcome: &Outcome,
        lateness: Duration,
        results: &[bool],
    ) {
        self.request_finished_in_row(step, None, outcome, lateness, results);
    }

    fn request_finished_in_row(
        &self,
        step: usize,
        row: Option<usize>,
        outcome: &Outcome,
        lateness: Duration,
        results: &[bool],
    ) {
        self.metrics.observe_step(step, outcome, lateness, results);
        let checks = self.checks.get(step).map_or(&[][..], Vec::as_slice);
        for w in self.watchers.iter().filter(|w| w.counts_step(step)) {
            w.observe(outcome, row, checks, results);
        }
    }

    fn step_failed(&self, step: usize, why: StepFailure) {
        self.metrics.step_failed(step, why as usize);
    }

    fn request_traced(
        &self,
        step: usize,
        outcome: &Outcome,
        trace_id: opentelemetry::trace::TraceId,
        span_id: opentelemetry::trace::SpanId,
    ) {
        let took = outcome.duration().as_secs_f64();
        self.metrics.exemplar(step, took, trace_id, span_id);
    }

    fn iteration_finished(&self, journey: usize, result: IterationResult, took: Duration) {
        self.iteration_finished_in_row(journey, None, result, took);
    }

    fn iteration_finished_in_row(
        &self,
        journey: usize,
        row: Option<usize>,
        result: IterationResult,
        took: Duration,
    ) {
        self.metrics
            .iteration_finished(journey, result as usize, took);
        for w in &self.watchers {
            w.iteration(journey, row, result, took);
        }
    }

    fn iteration_dropped(&self, reason: DropReason, journey: usize) {
        self.iteration_dropped_in_row(reason, journey, None);
    }

    fn iteration_dropped_in_row(&self, reason: DropReason, journey: usize, row: Option<usize>) {
        // A drop of the generator's own is never an SLO event.
        if reason.is_generator() {
            self.metrics.generator_overloaded(unix_now() as u64);
            return;
        }
        // A user turned away by a saturated target: a bad event for each SLO that would have
        // counted the journey (or a step of it) the user was to walk.
        self.metrics.saturated();
        for w in &self.watchers {
            let counts = match w.scope {
                Scope::Requests => true,
                Scope::Step(s) => self.step_journey.get(s) == Some(&journey),
                Scope::Journey(j) => j == journey,
            };
            if counts {
                w.turned_away(row);
            }
        }
    }

    fn vus_changed(&self, delta: i32) {
        self.metrics.add_vus(delta);
    }

    fn vus_allocated(&self, n: u32) {
        self.metrics.raise_vus_max(n);
    }
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

/// Stops the run when its SLO burns faster than the guard allows; checked every
/// [`runner::EVAL_INTERVAL`] until the run ends.
async fn guard(shared: Arc<Shared>, g: config::Guard, stopper: Stopper) {
    let mut tick = tokio::time::interval(runner::EVAL_INTERVAL);
    // Peer calls may take up to their timeout: no burst of checks after a slow one.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = unix_now() as i64;
        // With peers, the whole SLO's burn (this shard's events and every answering peer's);
        // a peer that does not answer leaves its events out and is named in the reason.
        let (burn, missing) = if super::peers::peered(&shared) {
            match super::peers::whole_totals(&shared, &g.slo, g.window, now).await {
                Some((good, bad, budget, gathered)) => (
                    Some(crate::slo::burn_rate(good, bad, budget)),
                    gathered.missing(),
                ),
                None => (None, Vec::new()),
            }
        } else {
            (shared.budget.burn_rate(&g.slo, g.window, now), Vec::new())
        };
        if let Some(burn) = burn
            && burn > g.max_burn_rate
        {
            let scope = if missing.is_empty() {
                String::new()
            } else {
                format!(" (without shards {missing:?}, which did not answer)")
            };
            stopper.stop(Abort::Guard(format!(
                "SLO `{}` burns at {burn:.1}× over {} (limit {}×){scope}",
                g.slo,
                crate::units::format_duration(g.window),
                g.max_burn_rate
            )));
            return;
        }
    }
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
}

async fn execute(
    shared: &Arc<Shared>,
    profile: &Profile,
    target: &config::Target,
    running: Running,
    mut record: RunRecord,
) -> (RunRecord, Option<RunDetail>) {
    let Running {
        work,
        slo_events,
        stopper,
        start_at_ms,
        report: share,
    } = running;
    let work = Arc::new(work);
    let steps = work.steps();
    let journeys = work.journey_names();
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
        &journeys,
    );
    pm.set_vus(0);
    pm.set_vus_max(0);
    let live = Live {
        metrics: pm,
        watchers: if slo_events {
            shared
                .budget
                .watchers_of(&target.name, &profile.name, &steps, &journeys)
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
    };
    let stats = Arc::new(RunStats::for_work(
        &steps,
        &journeys,
        &profile.thresholds,
        &profile.name,
    ));
    let capture = Capture::start(
        stats.clone(),
        Some(on_sample(shared, &profile.name, record.id)),
    )
    .with_evidence(crate::web::evidence::Evidence::for_work(
        stats.clone(),
        &work,
        &target.headers,
    ));
    let mut observers: Vec<Arc<dyn crate::load::observe::Observer>> = vec![Arc::new(live)];
    observers.extend(capture.observers());
    let events = Observers::new(stats, observers);
    let mut executor = profile.executor.clone();
    // Its share of a split profile; the whole of an owned one (`start` refused the others).
    let shard = shared
        .assignment(profile)
        .run_shard()
        .unwrap_or(shared.shard);
    // A defaulted pool past the open-file limit is capped (the config load logged it).
    let _ = crate::config::capacity::cap_default_pool(
        &mut executor,
        profile.vu_hold,
        shard,
        crate::limits::nofile().ok(),
    );
    let spec = RunSpec {
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
    let client = target.client(shared.resolver.clone());
    // The barrier: set-up done, the plan waits for the instant every shard starts at (a share
    // whose instant has passed starts at once; the collecting shard sees its start time).
    let mut spec = spec;
    if let Some(at) = start_at_ms {
        let wait = Duration::from_millis(at.saturating_sub(super::state::wall_ms()));
        spec.start_time = spec.start_time.saturating_add(wait);
    }
    shared.metrics.run_started(&profile.name);
    // The guard lives exactly as long as the run: dropping the set aborts it.
    let mut guards = tokio::task::JoinSet::new();
    if let Some(g) = profile.guard.clone() {
        guards.spawn(guard(shared.clone(), g, stopper.clone()));
    }
    let outcome = runner::run(&spec, &client, events, stopper).await;
    guards.abort_all();
    record.finished_at = Some(unix_now());
    let detail = match outcome {
        Ok(report) => {
            fill(&mut record, &report);
            set_threshold_gauges(shared, &profile.name, &report);
            let (mut detail, slot) = capture.finish(&report);
            detail.id = record.id;
            detail.profile = record.profile.clone();
            detail.target = record.target.clone();
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

/// The recorder's once-a-second callback: the run's live figures and, every 10 s, a point of
/// the profile's series ring.
fn on_sample(shared: &Arc<Shared>, profile: &str, id: u64) -> crate::web::capture::OnSample {
    let shared = Arc::downgrade(shared);
    let profile = profile.to_string();
    Arc::new(move |sample: Sample| {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if let Ok(mut series) = shared.series.lock() {
            let s = series.entry(profile.clone()).or_default();
            s.live = Some((id, sample.live));
            s.ring.extend(sample.slot);
        }
    })
}

/// Writes a run (and its detail) to the store on a blocking thread, or queues it until the
/// store can take it; keeps the newest details in memory too, for the API meanwhile.
fn save(shared: &Arc<Shared>, record: &RunRecord, detail: Option<&RunDetail>) {
    let detail = detail.and_then(|d| serde_json::to_string(d).ok());
    if let Some(d) = &detail
        && let Ok(mut kept) = shared.details.lock()
    {
        kept.push_back((record.id, Arc::from(d.as_str())));
        while kept.len() > DETAILS_IN_MEMORY {
            kept.pop_front();
        }
    }
    let Ok(json) = serde_json::to_string(record) else {
        return;
    };
    let stored = StoredRun {
        id: record.id,
        profile: record.profile.clone(),
        started_at: record.started_at,
        record: json,
    };
    let s = shared.clone();
    // A store that is not open (or fails this write) keeps the run in memory until it can.
    shared
        .tracker
        .spawn_blocking(move || s.budget.save_run(stored, detail, RUNS_PER_PROFILE));
}

/// `sloburn_threshold_passed` of each of the run's thresholds.
fn set_threshold_gauges(shared: &Shared, profile: &str, report: &RunReport) {
    for (spec, r) in &report.thresholds {
        shared.metrics.set_threshold(
            profile,
            &spec.threshold.metric,
            &spec.threshold.source,
            r.passed,
        );
    }
}

/// A finished run's figures, thresholds and result in its record.
pub(super) fn fill(record: &mut RunRecord, report: &RunReport) {
    let s = &report.stats;
    record.requests = s.requests;
    record.rate = s.per_second(s.requests);
    record.failed_ratio = if s.requests > 0 {
        s.failed as f64 / s.requests as f64
    } else {
        0.0
    };
    record.dropped = s.dropped;
    record.p95_ms = s.duration.quantile(0.95).as_secs_f64() * 1000.0;
    record.p99_ms = s.duration.quantile(0.99).as_secs_f64() * 1000.0;
    record.thresholds = report
        .thresholds
        .iter()
        .map(|(spec, r)| ThresholdRecord {
            metric: spec.threshold.metric.clone(),
            threshold: spec.threshold.source.clone(),
            passed: r.passed,
            observed: r.observed,
        })
        .collect();
    let inconclusive = report.inconclusive();
    let (result, reason) = match &report.aborted {
        Some(Abort::Guard(why)) => ("aborted_by_guard", Some(why.clone())),
        Some(Abort::Stopped(why)) => ("aborted", Some(why.clone())),
        _ if inconclusive.is_some() => ("inconclusive", inconclusive),
        Some(Abort::Threshold(t)) => ("aborted", Some(format!("threshold `{t}` failed"))),
        None | Some(Abort::DataUsedUp(_)) if report.thresholds_passed() => ("passed", None),
        None | Some(Abort::DataUsedUp(_)) => ("failed", Some(failed_thresholds(report))),
    };
    record.result = result.into();
    record.reason = reason;
}

/// Names every failed threshold with what was observed, for the run record and its log line.
fn failed_thresholds(report: &RunReport) -> String {
    let failed: Vec<String> = report
        .thresholds
        .iter()
        .filter(|(_, r)| !r.passed)
        .map(|(spec, r)| {
            let observed = if r.no_data {
                "no data".to_string()
            } else {
                format!(
                    "observed {}",
                    crate::load::summary::observed(&spec.threshold.metric, r.observed)
                )
            };
            format!(
                "{} `{}` failed ({observed})",
                spec.threshold.metric, spec.threshold.source
            )
        })
        .collect();
    failed.join("; ")
}

/// How long after the last run ends the daemon gives memory back: past the run's own
/// aftermath (its record saved, two SLO store flushes at the default 5 s), which would map the
/// code again.
const IDLE_RELEASE_AFTER: Duration = Duration::from_secs(12);

/// The last active run ended: unless another starts within [`IDLE_RELEASE_AFTER`], what the
/// runs freed goes back to the kernel (or an idle daemon keeps the peak of its busiest
/// minute), and so do the code pages they mapped.
fn release_when_idle(shared: &Arc<Shared>) {
    let shared = shared.clone();
    let tracker = shared.tracker.clone();
    tracker.spawn(async move {
        tokio::select! {
            _ = tokio::time::sleep(IDLE_RELEASE_AFTER) => {}
            _ = shared.shutdown.cancelled() => return,
        }
        let idle = shared
            .profiles
            .lock()
            .map(|states| states.values().all(|st| st.active.is_none()))
            .unwrap_or(false);
        if idle {
            let _ = tokio::task::spawn_blocking(|| {
                crate::memory::release_free_heap();
                crate::memory::release_idle_code();
            })
            .await;
        }
    });
}

/// Records how the run ended; starts the next one when the overlap policy queued it.
fn finish(
    shared: &Arc<Shared>,
    profile: &str,
    id: u64,
    record: RunRecord,
    detail: Option<RunDetail>,
    ended: &tokio::sync::watch::Sender<Option<RunRecord>>,
) {
    shared.metrics.run_finished(profile, &record.result);
    tracing::info!(
        profile = %profile,
        run = id,
        result = %record.result,
        reason = record.reason.as_deref().unwrap_or(""),
        requests = record.requests,
        rate = format!("{:.1}", record.rate),
        failed_ratio = format!("{:.4}", record.failed_ratio),
        p95_ms = format!("{:.2}", record.p95_ms),
        p99_ms = format!("{:.2}", record.p99_ms),
        dropped = record.dropped,
        "run finished"
    );
    shared.remember(&record);
    save(shared, &record, detail.as_ref());
    let (again, idle) = match shared.profiles.lock() {
        Ok(mut states) => {
            let again = match states.get_mut(profile) {
                Some(st) => {
                    st.active = None;
                    st.slot.on_finished() && !st.paused
                }
                None => false,
            };
            (again, states.values().all(|st| st.active.is_none()))
        }
        Err(_) => (false, false),
    };
    if idle && !again {
        release_when_idle(shared);
    }
    // Told after the profile is free again, so a waiter may start the next run at once.
    ended.send_replace(Some(record));
    if again && !shared.shutdown.is_cancelled() {
        let _ = start_run(shared, profile, "queued");
    }
}

/// Applies metadata `url`, `rate` and `duration`, checked as the config checks them.
pub(super) fn with_overrides(
    mut launch: Launch,
    m: &BTreeMap<String, String>,
) -> Result<Launch, String> {
    let name = launch.profile.name.clone();
    if let Some(rate) = m.get("rate") {
        let r = crate::units::parse_rate(rate.trim())
            .map_err(|e| format!("metadata `rate` `{rate}`: {e}"))?;
        if r.is_nan() || r <= 0.0 {
            return Err(format!(
                "metadata `rate` `{rate}`: the rate must be above zero"
            ));
        }
        match &mut launch.profile.executor {
            Executor::ConstantArrivalRate {
                rate,
                pre_allocated_vus,
                max_vus,
                ..
            } => {
                *rate = r;
                // A higher rate needs the pool a profile without its own VU settings would get:
                // a defaulted pool grows with the rate over the same hold time.
                let (pre, mut max) = default_vu_pool(r);
                if let Some(hold) = launch.profile.vu_hold {
                    max = max.max(stall_pool(r, hold));
                }
                *pre_allocated_vus = (*pre_allocated_vus).max(pre);
                *max_vus = (*max_vus).max(max).max(*pre_allocated_vus);
            }
            other => {
                return Err(format!(
                    "metadata `rate` overrides a constant-arrival-rate profile; `{name}` is {}",
                    crate::load::plan::executor_name(other)
                ));
            }
        }
    }
    if let Some(d) = m.get("duration") {
        let dur = crate::units::parse_duration(d.trim())
            .map_err(|e| format!("metadata `duration` `{d}`: {e}"))?;
        if dur.is_zero() {
            return Err(format!(
                "metadata `duration` `{d}`: must be longer than zero"
            ));
        }
        match &mut launch.profile.executor {
            Executor::ConstantArrivalRate { duration, .. }
            | Executor::ConstantVus { duration, .. } => *duration = dur,
            other => {
                return Err(format!(
                    "metadata `duration` overrides a constant-vus or constant-arrival-rate \
                     profile; `{name}` is {}",
                    crate::load::plan::executor_name(other)
                ));
            }
        }
    }
    if let Some(u) = m.get("url") {
        override_url(&mut launch, u)?;
    }
    // A defaulted pool is capped to the limit when the run starts; one the profile set must fit.
    if let Ok(limit) = crate::limits::nofile()
        && launch.profile.vu_hold.is_none()
    {
        crate::limits::fits(u64::from(max_vus(&launch.profile.executor)), limit)
            .map_err(|e| format!("profile `{name}` with these overrides: {e}"))?;
    }
    Ok(launch)
}

/// Sends the run to `url` instead of the target's URL. Its requests are then no SLO events
/// (the SLOs watch the target, not a canary beside it). A target with secret headers keeps
/// them for its own host: sending them elsewhere is refused.
fn override_url(launch: &mut Launch, written: &str) -> Result<(), String> {
    let written = written.trim();
    if !launch.profile.mix.is_empty() {
        return Err(format!(
            "metadata `url` `{written}`: profile `{}` walks journeys, whose steps name their              own paths; `url` overrides a single-request profile",
            launch.profile.name
        ));
    }
    if written.contains("${") {
        return Err(format!(
            "metadata `url` `{written}`: references (`${{env:..}}`, `${{file:..}}`) are only \
             expanded in the config, never from a webhook"
        ));
    }
    let uri: http::Uri = written
        .parse()
        .map_err(|e| format!("metadata `url` `{written}` is not a URL: {e}"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(format!(
            "metadata `url` `{written}`: use an absolute http:// or https:// URL"
        ));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("metadata `url` `{written}` has no host"));
    }
    let t = &mut launch.target;
    let same_place = uri.scheme() == t.uri.scheme() && uri.authority() == t.uri.authority();
    if !same_place && t.headers.values().any(|v| v.is_sensitive()) {
        return Err(format!(
            "metadata `url` `{written}`: target `{}` sends secret headers, which go only to \
             its own host",
            t.name
        ));
    }
    t.uri = uri;
    t.display_url = written.to_string();
    launch.slo_events = false;
    Ok(())
}
