//! The budget guard: a run stopped when an SLO it feeds burns past the guard's limit.

use crate::config;
use crate::daemon::state::{Shared, unix_now};
use crate::load::runner::{self, Abort, Stopper};
use std::sync::Arc;

/// Stops the run when its SLO burns faster than the guard allows; checked every
/// [`runner::EVAL_INTERVAL`] until the run ends.
pub(super) async fn guard(shared: Arc<Shared>, g: config::Guard, stopper: Stopper) {
    let mut tick = tokio::time::interval(runner::EVAL_INTERVAL);
    // Peer calls may take up to their timeout: no burst of checks after a slow one.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = unix_now() as i64;
        // With peers, the whole SLO's burn (this shard's events and every answering peer's);
        // a peer that does not answer leaves its events out and is named in the reason.
        let (burn, missing) = if crate::daemon::peers::peered(&shared) {
            match crate::daemon::peers::whole_totals(&shared, &g.slo, g.window, now).await {
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
