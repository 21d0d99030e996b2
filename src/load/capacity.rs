//! Whether a config's profiles, or one run, fit the process's open-file limit: every VU holds a
//! connection.

use super::plan::{self, Plan, Shard};
use crate::config::Config;
use crate::config::spec::{Executor, MAX_DEFAULT_MAX_VUS, stall_pool_wanted};
use crate::limits::{self, FdLimit};
use std::time::Duration;

/// One line per profile of `config` whose VUs cannot all hold a connection under `limit`:
/// `profiles.NAME: …`, saying what to change. A defaulted pool is never refused: it is
/// capped ([`pool_caps`]).
pub fn fd_refusals(config: &Config, limit: FdLimit) -> Vec<String> {
    config
        .profiles
        .values()
        .filter(|p| p.vu_hold.is_none())
        .filter_map(|p| {
            fits(&p.executor, Shard::WHOLE, limit)
                .err()
                .map(|why| format!("profiles.{}: {why}", p.name))
        })
        .collect()
}

/// One line per profile of `config` whose default pool was capped (by
/// [`MAX_DEFAULT_MAX_VUS`] or by `limit`), saying what it means: `profiles.NAME: …`. `check`
/// prints them as warnings.
pub fn pool_caps(config: &Config, limit: Option<FdLimit>) -> Vec<String> {
    config
        .profiles
        .values()
        .filter_map(|p| {
            let mut executor = p.executor.clone();
            cap_default_pool(&mut executor, p.vu_hold, Shard::WHOLE, limit)
                .map(|why| format!("profiles.{}: {why}", p.name))
        })
        .collect()
}

/// Caps the default pool of an arrival-rate profile (`hold` is `Profile::vu_hold`: `None`
/// when the profile set `max_vus` itself, which is refused rather than capped) to what the
/// open-file limit lets this shard hold, and says so when the pool is smaller than
/// `rate × hold`: then a stall that holds more VUs than that shows as `saturated` drops (the
/// target's failure, still counted against its SLOs) instead of as latency.
pub fn cap_default_pool(
    executor: &mut Executor,
    hold: Option<Duration>,
    shard: Shard,
    limit: Option<FdLimit>,
) -> Option<String> {
    let hold = hold?;
    let rate = executor.peak_rate();
    let wanted = stall_pool_wanted(rate, hold);
    let whole = plan::max_vus(executor);
    let room = limit.map(|l| l.soft.saturating_sub(limits::RESERVED_FDS));
    let here = u64::from(shard.share_u32(whole));
    let by_fds = room.filter(|r| here > *r);
    if let Some(room) = by_fds {
        // Scale the whole pool so this shard's share fits.
        let capped = u64::from(whole) * room / here.max(1);
        executor.cap_pool(u32::try_from(capped).unwrap_or(u32::MAX).max(1));
    }
    let now = plan::max_vus(executor);
    if u64::from(now) >= wanted {
        return None;
    }
    let secs = crate::units::format_duration(hold);
    let why = match (by_fds, limit) {
        (Some(_), Some(l)) => format!(
            "the open-file limit ({}, sloburn keeps {} for itself)",
            l.soft,
            limits::RESERVED_FDS
        ),
        _ => format!("the default pool's cap ({MAX_DEFAULT_MAX_VUS})"),
    };
    Some(format!(
        "max_vus defaults to rate × {secs} (the longest a target may hold an iteration) = {wanted} \
         VUs, capped at {now} by {why}: a stall holding more than {now} users at once shows as \
         `saturated` drops (counted as failed, against the SLOs) rather than as latency; set \
         max_vus, raise `ulimit -n` or lower the timeout"
    ))
}

/// Whether the VUs `executor` needs at most on `shard` can all hold a connection under `limit`;
/// the error says what to change.
pub fn fits(executor: &Executor, shard: Shard, limit: FdLimit) -> Result<(), String> {
    let vus = Plan::new(executor, shard)
        .map(|p| p.max_vus())
        .unwrap_or_else(|_| plan::max_vus(executor));
    limits::fits(u64::from(vus), limit)
}
