//! The open model (arrival-rate executors): the scheduler releasing arrivals at their intended
//! times, the LIFO stack of idle VUs each with its own task and one-slot inbox, and drops by
//! reason as `load::pacing` decides them.

use crate::http::Client;
use crate::load::iteration::Vu;
use crate::load::pacing::{Connects, DropReason, Pacing};
use crate::load::plan::ArrivalPlan;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;

/// How early an arrival may be released: one tick of tokio's timer wheel.
pub(super) const DISPATCH_WINDOW: Duration = Duration::from_millis(1);

/// How many arrivals the scheduler handles in a row without a wait before it yields, so that
/// VU tasks on the same worker finish and hand their connections back while it catches up.
pub(super) const YIELD_EVERY: u32 = 64;

pub(super) async fn open_model(
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
    let vus = VuPool::new(&plan, client, ctx, max_vus);
    let mut connects = pacing.connects();
    // How long a spawned VU task waits to be polled (ns, smoothed): the runtime's own lag.
    let lag = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut set = JoinSet::new();
    let mut j = 0u64;
    let mut release = Release {
        prev_due: start,
        unbroken: 0,
    };
    let cancel = stopper.token();
    while let Some(offset) = plan.start_of(j) {
        let k = j;
        j += 1;
        let due = start + offset;
        if !release.until(due, cancel).await {
            break;
        }
        // Reap finished tasks so the set's memory stays bounded by max_vus.
        while set.try_join_next().is_some() {}
        let now = crate::clock::tokio_instant();
        let late = now.saturating_duration_since(due);
        let lagging = Duration::from_nanos(lag.load(Relaxed));
        let Some((permit, global)) = admit(ctx, &pacing, &permits, k, late, lagging) else {
            continue;
        };
        let busy = max_vus.saturating_sub(permits.available_permits() as u32);
        let Some(IdleVu { vu, inbox }) = vus.take(&mut connects, late, lagging, busy, now - start)
        else {
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
        dispatch(&mut set, job, inbox.as_ref(), ctx, &vus.idle, &lag);
    }
    // Idle VUs drop their connections and their task's only sender, so idle tasks end now;
    // busy ones end when their iteration does.
    if let Ok(mut idle) = vus.idle.lock() {
        idle.closed = true;
        idle.vus.clear();
    }
    drain(&mut set, grace).await;
}

/// When the scheduler releases an arrival. Starts are released in batches once per timer
/// tick: everything due within the next tick goes now (at most one tick early), so the
/// scheduler wakes at most 1000 times a second whatever the rate, and a start is never late by
/// more than the runtime's own delay, which is measured as lateness. At low rates (gaps of
/// 2 ms and more) a precise sleep to the exact start costs little and keeps lateness near zero.
struct Release {
    prev_due: Instant,
    /// Arrivals released in a row without a wait.
    unbroken: u32,
}

impl Release {
    /// Waits until the arrival due at `due` may go: `false` when the run was stopped first.
    async fn until(&mut self, due: Instant, cancel: &CancellationToken) -> bool {
        let now = crate::clock::tokio_instant();
        let gap = due.saturating_duration_since(self.prev_due);
        self.prev_due = due;
        if gap >= crate::timer::FINE_WINDOW && due > now {
            self.unbroken = 0;
            tokio::select! {
                _ = crate::timer::sleep_until(due) => true,
                _ = cancel.cancelled() => false,
            }
        } else if due > now + DISPATCH_WINDOW {
            self.unbroken = 0;
            tokio::select! {
                _ = tokio::time::sleep_until(due - DISPATCH_WINDOW) => true,
                _ = cancel.cancelled() => false,
            }
        } else if cancel.is_cancelled() {
            false
        } else {
            self.unbroken += 1;
            if self.unbroken >= YIELD_EVERY {
                self.unbroken = 0;
                tokio::task::yield_now().await;
            }
            true
        }
    }
}

/// Arrival `k`'s VU slot and its slot under the daemon-wide cap, or `None` with the arrival
/// dropped. No VU free: every VU waits on the target (its failure), unless the generator is
/// the one behind (`Pacing::admit`). The cap full: a limit of sloburn's own configuration,
/// never the target's doing.
fn admit(
    ctx: &VuCtx,
    pacing: &Pacing,
    permits: &Arc<tokio::sync::Semaphore>,
    k: u64,
    late: Duration,
    lagging: Duration,
) -> Option<(
    tokio::sync::OwnedSemaphorePermit,
    Option<tokio::sync::OwnedSemaphorePermit>,
)> {
    let permit = permits.clone().try_acquire_owned().ok();
    match (pacing.admit(late, lagging, permit.is_some()), permit) {
        (Ok(()), Some(permit)) => match &ctx.global {
            Some(g) => match g.clone().try_acquire_owned() {
                Ok(g) => Some((permit, Some(g))),
                Err(_) => {
                    ctx.dropped(k, DropReason::InFlightCap);
                    None
                }
            },
            None => Some((permit, None)),
        },
        (Err(reason), _) => {
            ctx.dropped(k, reason);
            None
        }
        (Ok(()), None) => {
            ctx.dropped(k, DropReason::Saturated);
            None
        }
    }
}

/// The open model's VUs: the idle stack and how many were ever allocated.
struct VuPool<'a> {
    /// LIFO keeps the warmest connections busy; pre-allocated VUs are idle connection slots
    /// (with no connection open and no task until their first request).
    idle: Arc<Mutex<Idle>>,
    allocated: std::sync::atomic::AtomicU32,
    /// Without keep-alive every request opens a connection by the user's choice: nothing to
    /// pace.
    paced: bool,
    client: &'a Client,
    ctx: &'a VuCtx,
}

impl<'a> VuPool<'a> {
    fn new(plan: &ArrivalPlan, client: &'a Client, ctx: &'a VuCtx, max_vus: u32) -> VuPool<'a> {
        let pre = plan.pre_allocated_vus().min(max_vus);
        let idle = Arc::new(Mutex::new(Idle {
            vus: (0..pre)
                .map(|i| IdleVu {
                    vu: Vu::new(client.conn(), u64::from(i) + 1),
                    inbox: None,
                })
                .collect(),
            closed: false,
        }));
        ctx.events.vus_allocated(pre);
        VuPool {
            idle,
            allocated: std::sync::atomic::AtomicU32::new(pre),
            paced: client.options().keep_alive,
            client,
            ctx,
        }
    }

    /// An idle open connection first; a new one freely on schedule, behind it only within the
    /// connect budget (`Connects::may_open`). Behind means the scheduler is `late`; the
    /// runtime's lag counts only past the pool a healthy target needs, as a target sharing
    /// the machine (or, in tests, the runtime) makes it lag without any backlog to replay.
    /// `None`: no connection may open now.
    fn take(
        &self,
        connects: &mut Connects,
        late: Duration,
        lagging: Duration,
        busy: u32,
        elapsed: Duration,
    ) -> Option<IdleVu> {
        let paced = self.paced;
        let Ok(mut idle) = self.idle.lock() else {
            return None;
        };
        match idle.vus.pop() {
            Some(c) if !paced || c.vu.conn.is_open() => Some(c),
            Some(c) if connects.may_open(late, lagging, busy, elapsed) => Some(c),
            Some(c) => {
                idle.vus.push(c);
                None
            }
            None if !paced || connects.may_open(late, lagging, busy, elapsed) => {
                let n = self.allocated.fetch_add(1, Relaxed) + 1;
                self.ctx.events.vus_allocated(n);
                Some(IdleVu {
                    vu: Vu::new(self.client.conn(), u64::from(n)),
                    inbox: None,
                })
            }
            None => None,
        }
    }
}

/// A VU on the idle stack has an idle task, whose one slot is free: the job goes there. A VU
/// without a task (new, or its task aborted) gets one.
fn dispatch(
    set: &mut JoinSet<()>,
    job: Job,
    inbox: Option<&tokio::sync::mpsc::Sender<Job>>,
    ctx: &Arc<VuCtx>,
    pool: &Arc<Mutex<Idle>>,
    lag: &Arc<std::sync::atomic::AtomicU64>,
) {
    let unsent = match inbox {
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

/// The open model's idle VUs (LIFO), each with the inbox of its task once it has one.
pub(super) struct Idle {
    pub(super) vus: Vec<IdleVu>,
    /// The scheduler is done: a VU that finishes is dropped, not put back.
    pub(super) closed: bool,
}

pub(super) struct IdleVu {
    pub(super) vu: Vu,
    pub(super) inbox: Option<tokio::sync::mpsc::Sender<Job>>,
}

/// One arrival handed to a VU's task, with everything the iteration holds while it runs.
pub(super) struct Job {
    pub(super) vu: Vu,
    pub(super) k: u64,
    pub(super) due: Instant,
    /// When the scheduler handed it over: the task's wait to be polled is the runtime's lag.
    pub(super) handed: Instant,
    pub(super) permit: tokio::sync::OwnedSemaphorePermit,
    pub(super) global: Option<tokio::sync::OwnedSemaphorePermit>,
    /// The task's own inbox, which goes back to the idle stack with the VU (set by [`hand`]).
    /// The task holds no other sender, so it ends once the idle stack drops this one.
    pub(super) reply: Option<tokio::sync::mpsc::Sender<Job>>,
}

/// Hands `job` to the task behind `inbox`, with the inbox to return to; gives the job back
/// when the task is gone.
pub(super) fn hand(inbox: &tokio::sync::mpsc::Sender<Job>, mut job: Job) -> Option<Job> {
    job.reply = Some(inbox.clone());
    inbox.try_send(job).err().map(|e| e.into_inner())
}

/// A VU's task in the open model: runs the arrivals handed to it one at a time, and after
/// each puts its VU back on the idle stack before releasing the VU's slot. One task per VU
/// rather than one per arrival: handing an arrival over a one-slot channel costs a fraction of
/// spawning a task.
pub(super) async fn vu_task(
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
        let polled = crate::clock::tokio_instant();
        let waited = u64::try_from(polled.saturating_duration_since(handed).as_nanos());
        lag.store(
            crate::load::pacing::smooth_lag(lag.load(Relaxed), waited.unwrap_or(u64::MAX)),
            Relaxed,
        );
        {
            let _busy = ctx.events.busy();
            let lateness = crate::clock::tokio_instant().saturating_duration_since(due);
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
