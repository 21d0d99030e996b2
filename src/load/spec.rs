//! Validated executor specifications: what a profile asks the load engine to do.
//!
//! These are produced by `config` (and by `sloburn run`'s ad-hoc flags) and consumed by the pure
//! plan in `load::plan` and by the runner. Rates are always iterations per second here.

use std::time::Duration;

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

/// The default `max_vus` of an arrival-rate executor whose iterations each walk a journey of
/// `steps` requests and `think` of pauses (the longest of the mix): a VU is held for the whole
/// walk, so the pool is sized for `steps × EXPECTED_LATENCY + think`, with the same headroom.
pub fn journey_vu_pool(peak_rate: f64, steps: usize, think: Duration) -> u32 {
    let (_, single) = default_vu_pool(peak_rate);
    let rate = if peak_rate.is_finite() {
        peak_rate.max(0.0)
    } else {
        0.0
    };
    let walk = EXPECTED_LATENCY.as_secs_f64() * steps.max(1) as f64 + think.as_secs_f64();
    let sized = (rate * walk * VU_HEADROOM).ceil();
    (sized.clamp(f64::from(single), f64::from(MAX_DEFAULT_MAX_VUS))) as u32
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
        // 20/s over 3 steps and up to 800 ms of thinking: (150 ms + 800 ms) × 20 × 2 = 38.
        assert_eq!(journey_vu_pool(10.0, 3, Duration::ZERO), 100);
        assert_eq!(journey_vu_pool(200.0, 3, Duration::from_millis(800)), 380);
        assert_eq!(default_vu_pool(f64::NAN), (1, 100));
        for rate in [1.0, 99.0, 1234.5, 9e9] {
            let (pre, max) = default_vu_pool(rate);
            assert!(pre <= max, "{rate}");
        }
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
