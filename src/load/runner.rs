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

use super::observe::Observers;
use super::pacing::{DropReason, Pacing};
use super::plan::{ArrivalPlan, IterationMode, IterationPlan, Plan, Shard, VuPlan};
use super::spec::Executor;
use super::stats::{RunStats, StatsSnapshot};
use super::walk::{RunWork, Vu, Walked, Work};
use crate::http::Client;
use crate::thresholds::{ThresholdResult, ThresholdSpec};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How often abort-on-fail thresholds (and guards) are evaluated during a run.
pub const EVAL_INTERVAL: Duration = Duration::from_millis(500);

/// How early an arrival may be released: one tick of tokio's timer wheel.
const DISPATCH_WINDOW: Duration = Duration::from_millis(1);

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
    pub stats: StatsSnapshot,
    pub thresholds: Vec<(ThresholdSpec, ThresholdResult)>,
    pub aborted: Option<Abort>,
}

impl RunReport {
    pub fn thresholds_passed(&self) -> bool {
        self.thresholds.iter().all(|(_, r)| r.passed)
    }

    /// Why this run cannot judge its target, if it cannot: the generator dropped arrivals as
    /// its own overload (late, paced or over the in-flight cap; `load::pacing`), and either a
    /// threshold failed (sloburn's stall may have caused it: a starved generator reads its
    /// responses late) or more than [`INCONCLUSIVE_SHARE`] of the arrivals went unmeasured (a
    /// pass on what was left would be a guess). Never a failed target, never a passed one.
    pub fn inconclusive(&self) -> Option<String> {
        let s = &self.stats;
        let overloaded = s.generator_overloaded();
        if overloaded == 0 {
            return None;
        }
        let arrivals = (s.iterations + s.dropped).max(1);
        let share = overloaded as f64 / arrivals as f64;
        let failed = !self.thresholds_passed() || matches!(self.aborted, Some(Abort::Threshold(_)));
        if !failed && share <= INCONCLUSIVE_SHARE {
            return None;
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
    let start = Instant::now();
    let stats = events.stats().clone();
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
        stats.clone(),
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
    let window = super::stats::rate_window(&spec.executor, start.elapsed(), stopper.is_stopped());
    let snapshot = stats.snapshot(window);
    let thresholds: Vec<_> = spec
        .thresholds
        .iter()
        .map(|t| (t.clone(), t.threshold.evaluate(&snapshot)))
        .collect();
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
    })
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
                super::walk::IterationResult::Dropped,
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

/// Evaluates abort-on-fail thresholds while the run goes on.
async fn monitor(
    thresholds: Vec<ThresholdSpec>,
    stats: Arc<RunStats>,
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
        let elapsed = start.elapsed();
        let snapshot = stats.snapshot(elapsed);
        for t in &thresholds {
            let result = t.threshold.evaluate(&snapshot);
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

/// How many arrivals the scheduler handles in a row without a wait before it yields, so that
/// VU tasks on the same worker finish and hand their connections back while it catches up.
const YIELD_EVERY: u32 = 64;

async fn open_model(
    plan: ArrivalPlan,
    client: &Client,
    ctx: &Arc<VuCtx>,
    stopper: &Stopper,
    grace: Duration,
    start: Instant,
    pacing: Pacing,
) {
    let max_vus = plan.max_vus().max(1);
    let permits = Arc::new(tokio::sync::Semaphore::new(max_vus as usize));
    // LIFO keeps the warmest connections busy; pre-allocated VUs are idle connection slots
    // (with no connection open and no task until their first request).
    let pool = Arc::new(Mutex::new(Idle {
        vus: (0..plan.pre_allocated_vus().min(max_vus))
            .map(|i| IdleVu {
                vu: Vu::new(client.conn(), u64::from(i) + 1),
                inbox: None,
            })
            .collect(),
        closed: false,
    }));
    let allocated = Arc::new(std::sync::atomic::AtomicU32::new(
        plan.pre_allocated_vus().min(max_vus),
    ));
    ctx.events.vus_allocated(allocated.load(Relaxed));
    // Without keep-alive every request opens a connection by the user's choice: nothing to pace.
    let paced = client.options().keep_alive;
    let mut connects = pacing.connects();
    // How long a spawned VU task waits to be polled (ns, smoothed): the runtime's own lag.
    let lag = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut set = JoinSet::new();
    let mut j = 0u64;
    let mut prev_due = start;
    let mut unbroken = 0u32;
    let cancel = stopper.token();
    while let Some(offset) = plan.start_of(j) {
        let k = j;
        j += 1;
        let due = start + offset;
        // Starts are released in batches once per timer tick: everything due within the next
        // tick goes now (at most one tick early), so the scheduler wakes at most 1000 times a
        // second whatever the rate, and a start is never late by more than the runtime's own
        // delay, which is measured as lateness.
        // At low rates (gaps of 2 ms and more) a precise sleep to the exact start costs little
        // and keeps lateness near zero.
        let now = Instant::now();
        let gap = due.saturating_duration_since(prev_due);
        prev_due = due;
        if gap >= crate::timer::FINE_WINDOW && due > now {
            unbroken = 0;
            tokio::select! {
                _ = crate::timer::sleep_until(due) => {}
                _ = cancel.cancelled() => break,
            }
        } else if due > now + DISPATCH_WINDOW {
            unbroken = 0;
            tokio::select! {
                _ = tokio::time::sleep_until(due - DISPATCH_WINDOW) => {}
                _ = cancel.cancelled() => break,
            }
        } else if cancel.is_cancelled() {
            break;
        } else {
            unbroken += 1;
            if unbroken >= YIELD_EVERY {
                unbroken = 0;
                tokio::task::yield_now().await;
            }
        }
        // Reap finished tasks so the set's memory stays bounded by max_vus.
        while set.try_join_next().is_some() {}
        let now = Instant::now();
        let late = now.saturating_duration_since(due);
        let lagging = Duration::from_nanos(lag.load(Relaxed));
        // A VU, and the daemon-wide cap. No VU free: every VU waits on the target (its
        // failure), unless the generator is the one behind (`Pacing::admit`). The cap full:
        // a limit of sloburn's own configuration, never the target's doing.
        let permit = permits.clone().try_acquire_owned().ok();
        let (permit, global) = match (pacing.admit(late, lagging, permit.is_some()), permit) {
            (Ok(()), Some(permit)) => match &ctx.global {
                Some(g) => match g.clone().try_acquire_owned() {
                    Ok(g) => (permit, Some(g)),
                    Err(_) => {
                        ctx.dropped(k, DropReason::InFlightCap);
                        continue;
                    }
                },
                None => (permit, None),
            },
            (Err(reason), _) => {
                ctx.dropped(k, reason);
                continue;
            }
            (Ok(()), None) => {
                ctx.dropped(k, DropReason::Saturated);
                continue;
            }
        };
        // An idle open connection first; a new one freely on schedule, behind it only within
        // the connect budget (`Connects::may_open`). Behind means the scheduler is late; the
        // runtime's lag counts only past the pool a healthy target needs, as a target sharing
        // the machine (or, in tests, the runtime) makes it lag without any backlog to replay.
        let behind = late;
        let elapsed = now - start;
        let busy = max_vus.saturating_sub(permits.available_permits() as u32);
        let conn = match pool.lock() {
            Ok(mut idle) => match idle.vus.pop() {
                Some(c) if !paced || c.vu.conn.is_open() => Some(c),
                Some(c) if connects.may_open(behind, lagging, busy, elapsed) => Some(c),
                Some(c) => {
                    idle.vus.push(c);
                    None
                }
                None if !paced || connects.may_open(behind, lagging, busy, elapsed) => {
                    let n = allocated.fetch_add(1, Relaxed) + 1;
                    ctx.events.vus_allocated(n);
                    Some(IdleVu {
                        vu: Vu::new(client.conn(), u64::from(n)),
                        inbox: None,
                    })
                }
                None => None,
            },
            Err(_) => None,
        };
        let Some(IdleVu { vu, inbox }) = conn else {
            ctx.dropped(k, DropReason::ConnectPaced);
            continue;
        };
        let job = Job {
            vu,
            k,
            due,
            handed: now,
            permit,
            global,
            reply: None,
        };
        // A VU on the idle stack has an idle task, whose one slot is free; a VU without a task
        // (new, or its task aborted) gets one.
        let unsent = match &inbox {
            Some(tx) => hand(tx, job),
            None => Some(job),
        };
        if let Some(job) = unsent {
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            // A new channel's one slot is free.
            let _ = hand(&tx, job);
            set.spawn(vu_task(rx, ctx.clone(), pool.clone(), lag.clone()));
        }
    }
    // Idle VUs drop their connections and their task's only sender, so idle tasks end now;
    // busy ones end when their iteration does.
    if let Ok(mut idle) = pool.lock() {
        idle.closed = true;
        idle.vus.clear();
    }
    drain(&mut set, grace).await;
}

/// The open model's idle VUs (LIFO), each with the inbox of its task once it has one.
struct Idle {
    vus: Vec<IdleVu>,
    /// The scheduler is done: a VU that finishes is dropped, not put back.
    closed: bool,
}

struct IdleVu {
    vu: Vu,
    inbox: Option<tokio::sync::mpsc::Sender<Job>>,
}

/// One arrival handed to a VU's task, with everything the iteration holds while it runs.
struct Job {
    vu: Vu,
    k: u64,
    due: Instant,
    /// When the scheduler handed it over: the task's wait to be polled is the runtime's lag.
    handed: Instant,
    permit: tokio::sync::OwnedSemaphorePermit,
    global: Option<tokio::sync::OwnedSemaphorePermit>,
    /// The task's own inbox, which goes back to the idle stack with the VU (set by [`hand`]).
    /// The task holds no other sender, so it ends once the idle stack drops this one.
    reply: Option<tokio::sync::mpsc::Sender<Job>>,
}

/// Hands `job` to the task behind `inbox`, with the inbox to return to; gives the job back
/// when the task is gone.
fn hand(inbox: &tokio::sync::mpsc::Sender<Job>, mut job: Job) -> Option<Job> {
    job.reply = Some(inbox.clone());
    inbox.try_send(job).err().map(|e| e.into_inner())
}

/// A VU's task in the open model: runs the arrivals handed to it one at a time, and after
/// each puts its VU back on the idle stack before releasing the VU's slot. One task per VU
/// rather than one per arrival: handing an arrival over a one-slot channel costs a fraction of
/// spawning a task.
async fn vu_task(
    mut inbox: tokio::sync::mpsc::Receiver<Job>,
    ctx: Arc<VuCtx>,
    pool: Arc<Mutex<Idle>>,
    lag: Arc<std::sync::atomic::AtomicU64>,
) {
    while let Some(job) = inbox.recv().await {
        let Job {
            mut vu,
            k,
            due,
            handed,
            permit,
            global,
            reply,
        } = job;
        let polled = Instant::now();
        let waited = u64::try_from(polled.saturating_duration_since(handed).as_nanos());
        lag.store(
            super::pacing::smooth_lag(lag.load(Relaxed), waited.unwrap_or(u64::MAX)),
            Relaxed,
        );
        {
            let _busy = ctx.events.busy();
            let lateness = Instant::now().saturating_duration_since(due);
            ctx.iteration(&mut vu, Some(k), lateness, true).await;
        }
        // Back on the stack before the slot is released: a free slot always finds its VU.
        if let Ok(mut idle) = pool.lock()
            && !idle.closed
        {
            idle.vus.push(IdleVu { vu, inbox: reply });
        }
        drop(global);
        drop(permit);
    }
}

async fn closed_vus(
    plan: VuPlan,
    client: &Client,
    ctx: &Arc<VuCtx>,
    stopper: &Stopper,
    grace: Duration,
    start: Instant,
) {
    let plan = Arc::new(plan);
    let end = start + plan.duration();
    let stop_starting = CancellationToken::new();
    let mut set = JoinSet::new();
    ctx.events.vus_allocated(plan.max_vus());
    for index in 0..plan.max_vus() {
        let (plan, ctx, stop, outer) = (
            plan.clone(),
            ctx.clone(),
            stop_starting.clone(),
            stopper.token().clone(),
        );
        let mut vu = Vu::new(client.conn(), u64::from(index) + 1);
        set.spawn(async move {
            let mut busy = None;
            loop {
                if stop.is_cancelled() || outer.is_cancelled() {
                    break;
                }
                let now = Instant::now();
                let t = now.saturating_duration_since(start);
                if now >= end {
                    break;
                }
                if index >= plan.vus_at(t) {
                    if busy.take().is_some() {
                        vu.conn.close();
                    }
                    let wake = plan
                        .next_change_after(t)
                        .map(|d| start + d)
                        .unwrap_or(end)
                        .min(end);
                    tokio::select! {
                        _ = tokio::time::sleep_until(wake) => {}
                        _ = stop.cancelled() => break,
                        _ = outer.cancelled() => break,
                    }
                    continue;
                }
                if busy.is_none() {
                    busy = Some(ctx.events.busy());
                }
                ctx.iteration(&mut vu, None, Duration::ZERO, false).await;
            }
        });
    }
    tokio::select! {
        _ = tokio::time::sleep_until(end) => {}
        _ = stopper.token().cancelled() => {}
    }
    stop_starting.cancel();
    drain(&mut set, grace).await;
}

async fn iterations(
    plan: IterationPlan,
    client: &Client,
    ctx: &Arc<VuCtx>,
    stopper: &Stopper,
    grace: Duration,
    start: Instant,
) {
    let end = start + plan.max_duration();
    let dispenser = Arc::new(plan.dispenser());
    let per_vu = plan.iterations_per_vu();
    let shared = plan.mode() == IterationMode::Shared;
    let stop_starting = CancellationToken::new();
    let mut set = JoinSet::new();
    ctx.events.vus_allocated(plan.vus());
    for index in 0..plan.vus() {
        let (ctx, dispenser, stop, outer) = (
            ctx.clone(),
            dispenser.clone(),
            stop_starting.clone(),
            stopper.token().clone(),
        );
        let mut vu = Vu::new(client.conn(), u64::from(index) + 1);
        set.spawn(async move {
            let _busy = ctx.events.busy();
            let mut done = 0u64;
            loop {
                if stop.is_cancelled() || outer.is_cancelled() {
                    break;
                }
                let more = if shared {
                    dispenser.claim().is_some()
                } else {
                    per_vu.is_some_and(|n| done < n)
                };
                if !more {
                    break;
                }
                done += 1;
                ctx.iteration(&mut vu, None, Duration::ZERO, false).await;
            }
        });
    }
    let all_done = async { while set.join_next().await.is_some() {} };
    tokio::select! {
        _ = all_done => return,
        _ = tokio::time::sleep_until(end) => {}
        _ = stopper.token().cancelled() => {}
    }
    stop_starting.cancel();
    drain(&mut set, grace).await;
}
