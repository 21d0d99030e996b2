//! Validated executor specifications: what a profile asks the load engine to do, and the
//! defaults of what it leaves out (the VU pool, the lateness bound, the placement).
//!
//! These are produced by `config` (and by `sloburn run`'s ad-hoc flags) and consumed by the pure
//! plan in `load::plan` and by the runner. Rates are always iterations per second here.

use std::time::Duration;

/// An arrival later than this is dropped (k6 has no bound and catches up as far as its VUs
/// allow; wrk2 sends every late request at once). Half a second is far past any timer or
/// runtime delay of a healthy generator, and short enough that a stall's backlog is not
/// replayed at the target.
pub const DEFAULT_MAX_LATENESS: Duration = Duration::from_millis(500);

/// How a profile is spread over the shards of `--shard i/N` (`load::placement` assigns it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// Every shard runs `1/N` of the profile's rate, VUs and iterations.
    #[default]
    Split,
    /// One shard (the rendezvous owner) runs the whole profile; the others do not run it.
    Owned,
}

impl Placement {
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Split => "split",
            Placement::Owned => "owned",
        }
    }
}

impl std::str::FromStr for Placement {
    type Err = String;

    fn from_str(s: &str) -> Result<Placement, String> {
        match s {
            "split" => Ok(Placement::Split),
            "owned" => Ok(Placement::Owned),
            other => Err(format!(
                "`{other}` is not a placement: use `split` (every shard runs its share) or \
                 `owned` (one shard runs it whole)"
            )),
        }
    }
}

/// One stage of a ramping executor: move linearly to `target` over `duration`.
/// For VU executors `target` is a VU count; for arrival-rate executors it is iterations/second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stage {
    pub duration: Duration,
    pub target: f64,
}

/// k6's executors, with k6's meanings.
#[derive(Debug, Clone, PartialEq)]
pub enum Executor {
    ConstantVus {
        vus: u32,
        duration: Duration,
    },
    RampingVus {
        start_vus: u32,
        stages: Vec<Stage>,
        graceful_ramp_down: Duration,
    },
    ConstantArrivalRate {
        /// Iterations per second.
        rate: f64,
        duration: Duration,
        pre_allocated_vus: u32,
        max_vus: u32,
    },
    RampingArrivalRate {
        /// Iterations per second at t = 0.
        start_rate: f64,
        stages: Vec<Stage>,
        pre_allocated_vus: u32,
        max_vus: u32,
    },
    SharedIterations {
        vus: u32,
        iterations: u64,
        max_duration: Duration,
    },
    PerVuIterations {
        vus: u32,
        iterations: u64,
        max_duration: Duration,
    },
}

/// The latency `max_vus` is sized for when a profile does not set it: by Little's law a target
/// answering in this time on average keeps `rate × EXPECTED_LATENCY` requests in flight.
pub const EXPECTED_LATENCY: Duration = Duration::from_millis(50);

/// Room above the expected concurrency: a target twice as slow as expected still gets every
/// arrival.
pub const VU_HEADROOM: f64 = 2.0;

/// The fewest VUs a default pool allows, so that slow low-rate targets still get their load.
pub const MIN_DEFAULT_MAX_VUS: u32 = 100;

/// The most VUs a default pool allows (a profile may set more, up to the VU limit).
pub const MAX_DEFAULT_MAX_VUS: u32 = 100_000;

/// The default `(pre_allocated_vus, max_vus)` of an arrival-rate executor peaking at
/// `peak_rate` iterations per second:
/// - `pre_allocated_vus`: a tenth of a second of arrivals, 1 to 1,000;
/// - `max_vus`: `peak_rate × EXPECTED_LATENCY × VU_HEADROOM` (100 ms of arrivals), at least
///   `MIN_DEFAULT_MAX_VUS` and the pre-allocated VUs, at most `MAX_DEFAULT_MAX_VUS`.
///
/// Not one second of arrivals: that let a stall open 15,000 connections at 15,000/s.
pub fn default_vu_pool(peak_rate: f64) -> (u32, u32) {
    let rate = if peak_rate.is_finite() {
        peak_rate.max(0.0)
    } else {
        0.0
    };
    // `as` saturates; both values are clamped into u32 range first.
    let pre = (rate / 10.0).ceil().clamp(1.0, 1000.0) as u32;
    let sized = (rate * EXPECTED_LATENCY.as_secs_f64() * VU_HEADROOM).ceil();
    let max = sized.clamp(
        f64::from(MIN_DEFAULT_MAX_VUS.max(pre)),
        f64::from(MAX_DEFAULT_MAX_VUS),
    ) as u32;
    (pre, max)
}

/// The pool a healthy target keeps busy: the default `max_vus` before a profile's timeouts
/// are known ([`default_vu_pool`]), 100 ms of arrivals. Below it the open model opens new
/// connections on schedule even while its runtime lags (`load::pacing::Connects`).
pub fn expected_pool(peak_rate: f64) -> u32 {
    default_vu_pool(peak_rate).1
}

/// VUs the open model needs so that no arrival finds them all busy while the target holds
/// each iteration for up to `hold` (its timeout, or a whole journey's timeouts and think
/// times): `peak_rate × hold`, unclamped. A stall shorter than `hold` is then measured, never
/// dropped.
pub fn stall_pool_wanted(peak_rate: f64, hold: Duration) -> u64 {
    let rate = if peak_rate.is_finite() {
        peak_rate.max(0.0)
    } else {
        0.0
    };
    // `as` saturates.
    (rate * hold.as_secs_f64()).ceil() as u64
}

/// The default `max_vus` of an arrival-rate profile that does not set it:
/// [`stall_pool_wanted`], at least [`expected_pool`], at most [`MAX_DEFAULT_MAX_VUS`]. VUs
/// and their connections are made as arrivals need them, so a large pool costs nothing until
/// the target holds it.
pub fn stall_pool(peak_rate: f64, hold: Duration) -> u32 {
    let wanted = stall_pool_wanted(peak_rate, hold).min(u64::from(MAX_DEFAULT_MAX_VUS));
    u32::try_from(wanted)
        .unwrap_or(MAX_DEFAULT_MAX_VUS)
        .max(expected_pool(peak_rate))
}

impl Executor {
    /// Raises the default `max_vus` of an arrival-rate executor to `at_least` (a journey
    /// profile that did not set it).
    pub fn widen_default_pool(&mut self, at_least: u32) {
        match self {
            Executor::ConstantArrivalRate { max_vus, .. }
            | Executor::RampingArrivalRate { max_vus, .. } => {
                *max_vus = (*max_vus).max(at_least);
            }
            _ => {}
        }
    }

    /// Lowers the VU pool of an arrival-rate executor to at most `cap` VUs (its pre-allocated
    /// VUs with it).
    pub fn cap_pool(&mut self, cap: u32) {
        match self {
            Executor::ConstantArrivalRate {
                max_vus,
                pre_allocated_vus,
                ..
            }
            | Executor::RampingArrivalRate {
                max_vus,
                pre_allocated_vus,
                ..
            } => {
                *max_vus = (*max_vus).min(cap);
                *pre_allocated_vus = (*pre_allocated_vus).min(*max_vus);
            }
            _ => {}
        }
    }

    /// Whether this is an open-model (arrival-rate) executor.
    pub fn is_arrival_rate(&self) -> bool {
        matches!(
            self,
            Executor::ConstantArrivalRate { .. } | Executor::RampingArrivalRate { .. }
        )
    }

    /// The highest arrival rate of an arrival-rate executor (iterations per second); zero for
    /// the others.
    pub fn peak_rate(&self) -> f64 {
        match self {
            Executor::ConstantArrivalRate { rate, .. } => *rate,
            Executor::RampingArrivalRate {
                start_rate, stages, ..
            } => stages.iter().map(|s| s.target).fold(*start_rate, f64::max),
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_max_vus_is_a_tenth_of_a_second_of_arrivals_not_one_second() {
        assert_eq!(default_vu_pool(15_000.0), (1000, 1500));
        assert_eq!(default_vu_pool(2_000.0), (200, 200));
        // Floors: low rates still get 100 VUs for a slow target.
        assert_eq!(default_vu_pool(10.0), (1, 100));
        assert_eq!(default_vu_pool(0.0), (1, 100));
        // Caps.
        assert_eq!(default_vu_pool(5e6), (1000, 100_000));
        assert_eq!(default_vu_pool(f64::NAN), (1, 100));
        for rate in [1.0, 99.0, 1234.5, 9e9] {
            let (pre, max) = default_vu_pool(rate);
            assert!(pre <= max, "{rate}");
        }
    }

    #[test]
    fn the_stall_pool_holds_every_arrival_for_the_hold_time() {
        let s = Duration::from_secs;
        // 500/s with a 10 s timeout: 5,000 VUs, so a 1 s stall holds 500 and drops none.
        assert_eq!(stall_pool(500.0, s(10)), 5_000);
        assert_eq!(stall_pool_wanted(500.0, s(10)), 5_000);
        // Never below the pool a healthy target needs.
        assert_eq!(stall_pool(10.0, Duration::from_millis(100)), 100);
        assert_eq!(
            stall_pool(15_000.0, Duration::ZERO),
            expected_pool(15_000.0)
        );
        // Capped; the wanted figure says by how much.
        assert_eq!(stall_pool(15_000.0, s(10)), MAX_DEFAULT_MAX_VUS);
        assert_eq!(stall_pool_wanted(15_000.0, s(10)), 150_000);
        assert_eq!(stall_pool(f64::NAN, s(10)), 100);
        assert_eq!(stall_pool(f64::INFINITY, s(10)), 100);
        assert_eq!(stall_pool(1e300, s(10)), MAX_DEFAULT_MAX_VUS);
    }

    #[test]
    fn peak_rate_of_a_ramp_is_its_highest_stage() {
        let ex = Executor::RampingArrivalRate {
            start_rate: 5.0,
            stages: vec![
                Stage {
                    duration: Duration::from_secs(1),
                    target: 40.0,
                },
                Stage {
                    duration: Duration::from_secs(1),
                    target: 0.0,
                },
            ],
            pre_allocated_vus: 1,
            max_vus: 1,
        };
        assert_eq!(ex.peak_rate(), 40.0);
        let closed = Executor::ConstantVus {
            vus: 3,
            duration: Duration::from_secs(1),
        };
        assert_eq!(closed.peak_rate(), 0.0);
    }
}
