//! A hook's overrides of a profile's `url`, `rate` and `duration` for one run.

use crate::config::spec::{Executor, default_vu_pool, stall_pool};
use crate::load::plan::max_vus;
use std::collections::BTreeMap;

use super::*;

/// Applies metadata `url`, `rate` and `duration`, checked as the config checks them.
pub(crate) fn with_overrides(
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
pub(super) fn override_url(launch: &mut Launch, written: &str) -> Result<(), String> {
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
