//! The closed models: VUs that loop (`constant-vus`, `ramping-vus`) and the iteration
//! executors (`shared-iterations`, `per-vu-iterations`).

use crate::http::Client;
use crate::load::iteration::Vu;
use crate::load::plan::{IterationMode, IterationPlan, VuPlan};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;

pub(super) async fn closed_vus(
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
                let now = crate::clock::tokio_instant();
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

pub(super) async fn iterations(
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
