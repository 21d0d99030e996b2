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
