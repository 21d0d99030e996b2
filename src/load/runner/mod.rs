//! The runner: drives a pure plan against a target with real requests.
//!
//! - Open model (arrival-rate executors): a scheduler wakes at each intended start, hands the
//!   iteration to a free VU (a semaphore permit plus a pooled connection) and never waits for
//!   one. With no VU free the iteration is dropped and counted, as in k6. A VU that starts late
//!   adds its lateness to the corrected duration (wrk2), so a stalled target shows in its tail.
//!   The generator's own hiccups are kept off the target (`load::pacing`): an arrival reached
//!   later than `max_lateness` is dropped as the generator's overload, and one behind schedule
//!   opens a new connection only within the connect budget.
//! - Closed model (VU and iteration executors): each VU loops on its own connection.
//!
//! One [`CancellationToken`] stops everything; in-flight requests get `graceful_stop` to finish.
//! Thresholds with `abort_on_fail` are evaluated every [`EVAL_INTERVAL`].

use super::iteration::{RunWork, Vu, Walked, Work};
use super::observe::Observers;
use super::pacing::{DropReason, Pacing};
use super::plan::{Plan, Shard};
use super::record::RunRecord;
use super::verdict::Starved;
use crate::config::spec::Executor;
use crate::http::Client;
use crate::thresholds::{ThresholdResult, ThresholdSpec};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod closed;
mod open;
use closed::{closed_vus, iterations};
use open::open_model;

/// How often abort-on-fail thresholds (and guards) are evaluated during a run.
pub const EVAL_INTERVAL: Duration = Duration::from_millis(500);

/// Everything a run needs, already validated.
#[derive(Clone)]
pub struct RunSpec {
    pub profile: String,
    pub executor: Executor,
    /// One request, or a mix of journeys.
    pub work: Arc<Work>,
    pub thresholds: Vec<ThresholdSpec>,
    pub graceful_stop: Duration,
    pub shard: Shard,
    /// The daemon's cap on in-flight requests across all runs (`server.max_in_flight`).
    pub global: Option<Arc<tokio::sync::Semaphore>>,
    /// k6's `startTime`: wait this long before the plan's time zero.
    pub start_time: Duration,
    /// Arrival-rate only: arrivals the scheduler reaches later than this are dropped.
    pub max_lateness: Duration,
    /// OpenTelemetry, when `telemetry:` is set: a run span, and the share of iterations
    /// `traces.sample_ratio` traced (`None`: nothing traced, nothing sent).
    pub tracer: Option<crate::telemetry::Tracer>,
}

/// Why a run ended before its plan did.
#[derive(Debug, Clone, PartialEq)]
pub enum Abort {
    /// A threshold with `abort_on_fail` failed (its source text).
    Threshold(String),
    /// The budget guard stopped it (with the burn it saw).
    Guard(String),
    /// Stopped from outside (signal, API).
    Stopped(String),
    /// A `unique` data file ran out of rows (the journey's name): the run ends normally.
    DataUsedUp(String),
}

#[derive(Debug, Clone)]
pub struct RunReport {
    pub stats: RunRecord,
    /// Judged without the generator-affected requests' latencies (`load::verdict`).
    pub thresholds: Vec<(ThresholdSpec, ThresholdResult)>,
    pub aborted: Option<Abort>,
    /// What sloburn's starvation watch saw during the run, when one judged its requests.
    pub starved: Option<Starved>,
    /// Thresholds (`metric: expr`) that pass without the affected requests' latencies and fail
    /// with them: only sloburn's own stall fails them, so the run is inconclusive.
    pub would_fail: Vec<String>,
}

impl RunReport {
    pub fn thresholds_passed(&self) -> bool {
        self.thresholds.iter().all(|(_, r)| r.passed)
    }

    /// Judges the report's thresholds again on its figures (`load::verdict::judge`): after a
    /// shard merge, on every shard's together.
    pub fn judge_thresholds(&mut self) {
        let specs = self.thresholds.iter().map(|(spec, _)| spec.clone());
        let specs: Vec<_> = specs.collect();
        (self.thresholds, self.would_fail) = super::verdict::judge(&self.stats, specs.into_iter());
    }

    /// Why this run cannot judge its target, if it cannot: the generator dropped arrivals as
    /// its own overload (late, paced or over the in-flight cap; `load::pacing`), and either a
    /// threshold failed (sloburn's stall may have caused it: a starved generator reads its
    /// responses late) or more than [`INCONCLUSIVE_SHARE`] of the arrivals went unmeasured (a
    /// pass on what was left would be a guess). Never a failed target, never a passed one.
    pub fn inconclusive(&self) -> Option<String> {
        let s = &self.stats;
        let ran_out = matches!(self.aborted, None | Some(Abort::DataUsedUp(_)));
        if ran_out && s.requests == 0 && s.dropped == 0 {
            // Nothing measured (every request still open when the run ended, or none sent):
            // never a pass on no evidence.
            return Some(
                "inconclusive: no request finished, so nothing was measured (each one outlived \
                 the run, or none was sent)"
                    .into(),
            );
        }
        let overloaded = s.generator_overloaded();
        let starved = || Starved::inconclusive(self.starved.as_ref(), s, &self.would_fail);
        if overloaded == 0 {
            return starved();
        }
        let arrivals = (s.iterations + s.dropped).max(1);
        let share = overloaded as f64 / arrivals as f64;
        let failed = !self.thresholds_passed() || matches!(self.aborted, Some(Abort::Threshold(_)));
        if !failed && share <= INCONCLUSIVE_SHARE {
            return starved();
        }
        let what = if failed {
            "a threshold failed while sloburn was overloaded"
        } else {
            "too few arrivals were measured"
        };
        Some(format!(
            "inconclusive: {what}: the generator dropped {overloaded} of {arrivals} arrivals \
             ({:.2}%) because it fell behind (not the target's doing); give it more CPU or a \
             lower rate and run again",
            share * 100.0
        ))
    }
}

/// The share of a run's arrivals the generator may drop as its own overload and still pass a
/// run whose thresholds passed.
pub const INCONCLUSIVE_SHARE: f64 = 0.01;

/// A handle to stop a run from outside with a reason (signals, API, guards).
#[derive(Clone, Default)]
pub struct Stopper {
    token: CancellationToken,
    reason: Arc<Mutex<Option<Abort>>>,
}

impl Stopper {
    pub fn new() -> Stopper {
        Stopper::default()
    }

    /// Stops the run; the first reason given wins.
    pub fn stop(&self, reason: Abort) {
        if let Ok(mut r) = self.reason.lock()
            && r.is_none()
        {
            *r = Some(reason);
        }
        self.token.cancel();
    }

    pub fn is_stopped(&self) -> bool {
        self.token.is_cancelled()
    }

    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    fn reason(&self) -> Option<Abort> {
        self.reason.lock().ok().and_then(|r| r.clone())
    }
}

/// Runs one profile to completion (or until stopped) and returns its report. Every request,
/// drop and VU change goes to `events` as it happens.
pub async fn run(
    spec: &RunSpec,
    client: &Client,
    events: Observers,
    stopper: Stopper,
) -> Result<RunReport, super::plan::PlanError> {
    let plan = Plan::new(&spec.executor, spec.shard)?;
    if !spec.start_time.is_zero() {
        tokio::select! {
            _ = tokio::time::sleep(spec.start_time) => {}
            _ = stopper.token().cancelled() => {}
        }
    }
    let start = crate::clock::tokio_instant();
    let (events, before) = keep_affected_apart(events, spec);
    let _watching = events.starvation().map(|w| w.active());
    let mut work = RunWork::new(spec.work.clone());
    work.trace = spec.tracer.as_ref().map(|t| {
        t.run_span(
            &spec.profile,
            super::plan::executor_name(&spec.executor),
            spec.work.span_steps(),
        )
    });
    let ctx = Arc::new(VuCtx {
        global: spec.global.clone(),
        work,
        events,
        stopper: stopper.clone(),
        next: std::sync::atomic::AtomicU64::new(0),
    });
    let mut monitors = JoinSet::new();
    monitors.spawn(monitor(
        spec.thresholds.clone(),
        ctx.events.clone(),
        start,
        stopper.clone(),
    ));
    match plan {
        Plan::Arrival(p) => {
            let pacing = Pacing::for_rate(spec.executor.peak_rate(), Some(spec.max_lateness));
            let grace = spec.graceful_stop;
            open_model(p, client, &ctx, &stopper, grace, start, pacing).await
        }
        Plan::Vus(p) => closed_vus(p, client, &ctx, &stopper, spec.graceful_stop, start).await,
        Plan::Iterations(p) => {
            iterations(p, client, &ctx, &stopper, spec.graceful_stop, start).await
        }
    }
    monitors.abort_all();
    // Per-second figures divide by the test's duration, as k6's do.
    let window = super::stats::rate_window(
        &spec.executor,
        crate::clock::elapsed(start),
        stopper.is_stopped(),
    );
    let snapshot = ctx.events.snapshot(window);
    let (thresholds, would_fail) =
        super::verdict::judge(&snapshot, spec.thresholds.iter().cloned());
    let starved = ctx
        .events
        .starvation()
        .zip(before)
        .map(|(w, before)| Starved {
            during: w.totals().since(&before),
            sources: w.sources().cloned(),
            quota: w.quota(),
        });
    if let Some(span) = &ctx.work.trace {
        let result = match stopper.reason() {
            Some(Abort::DataUsedUp(_)) | None if thresholds.iter().all(|(_, r)| r.passed) => {
                "passed"
            }
            Some(Abort::DataUsedUp(_)) | None => "failed",
            Some(_) => "aborted",
        };
        span.finish(result);
    }
    Ok(RunReport {
        stats: snapshot,
        thresholds,
        aborted: stopper.reason(),
        starved,
        would_fail,
    })
}

/// With a starvation watch, the run keeps its generator-affected requests' latencies apart
/// (`load::affected`); returns the watch's totals at the start.
fn keep_affected_apart(
    events: Observers,
    spec: &RunSpec,
) -> (Observers, Option<crate::starve::Totals>) {
    let Some(before) = events.starvation().map(|w| w.totals()) else {
        return (events, None);
    };
    let twin = super::stats::RunStats::for_work(
        &spec.work.steps(),
        &spec.work.journey_names(),
        &spec.thresholds,
        &spec.profile,
    );
    (events.keep_affected(twin), Some(before))
}

struct VuCtx {
    global: Option<Arc<tokio::sync::Semaphore>>,
    work: RunWork,
    events: Observers,
    stopper: Stopper,
    /// The next iteration number of closed-model executors.
    next: std::sync::atomic::AtomicU64,
}

impl VuCtx {
    /// Arrival `k` was dropped; a journey run also counts it against the journey it would walk.
    fn dropped(&self, k: u64, reason: DropReason) {
        let j = self.work.journey_of(k);
        let row = self.work.row_of_dropped(k, j);
        self.events.iteration_dropped(reason, j, row);
        if !self.work.work.is_single() {
            self.events.iteration_finished(
                j,
                row,
                super::event::IterationResult::Dropped,
                Duration::ZERO,
            );
        }
    }

    /// One iteration (`k`, or the next number when `None`): one request or one journey.
    /// Closed-model VUs wait for a global slot; the open model takes its slot before dispatch
    /// (or drops the iteration) and passes `held = true`.
    async fn iteration(&self, vu: &mut Vu, k: Option<u64>, lateness: Duration, held: bool) {
        let _slot = match (&self.global, held) {
            (Some(g), false) => g.clone().acquire_owned().await.ok(),
            _ => None,
        };
        let k = k.unwrap_or_else(|| self.next.fetch_add(1, Relaxed));
        let walked = self
            .work
            .iteration(k, vu, lateness, &self.events, self.stopper.token())
            .await;
        if let Walked::DataUsedUp(j) = walked {
            let name = self.work.work.journey_names().get(j).cloned();
            self.stopper
                .stop(Abort::DataUsedUp(name.unwrap_or_default()));
        }
    }
}

/// Evaluates abort-on-fail thresholds while the run goes on, without the generator-affected
/// requests' latencies (`load::verdict`).
async fn monitor(
    thresholds: Vec<ThresholdSpec>,
    events: Observers,
    start: Instant,
    stopper: Stopper,
) {
    if !thresholds.iter().any(|t| t.abort_on_fail) {
        return;
    }
    let mut tick = tokio::time::interval(EVAL_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let elapsed = crate::clock::elapsed(start);
        let snapshot = events.snapshot(elapsed);
        let snapshot = super::verdict::judged(&snapshot);
        for t in &thresholds {
            let result = t.threshold.evaluate(&*snapshot);
            if t.should_abort(&result, elapsed) {
                stopper.stop(Abort::Threshold(t.threshold.source.clone()));
                return;
            }
        }
    }
}

/// Waits for in-flight work up to `grace`, then aborts what is left.
async fn drain(set: &mut JoinSet<()>, grace: Duration) {
    let all = async { while set.join_next().await.is_some() {} };
    if tokio::time::timeout(grace, all).await.is_err() {
        set.abort_all();
        while set.join_next().await.is_some() {}
    }
}
