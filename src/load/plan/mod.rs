//! The pure load plan: what an executor intends to do, as a function of time offsets from the
//! run start. No clock, no I/O: the runner asks the plan "when does iteration k start?" or "how
//! many VUs at t?" and does the waiting itself.
//!
//! Semantics follow k6:
//! - `constant-arrival-rate` starts iteration `k` (0-based) where the integral of the rate
//!   reaches `k` (the first at t = 0); `ramping-arrival-rate` where it reaches `k + 1` (none at
//!   t = 0, the integral rounded down), as k6 1.1 does; no start falls on the plan's end, and
//!   none inside a zero-rate stage (it waits for the rate to resume);
//! - ramping-vus moves one VU at a time, at absolute offsets, truncating toward the stage's
//!   starting count (as k6's `getRawExecutionSteps` does);
//! - shared-iterations hands out exactly `iterations` iteration numbers across all VUs;
//!   per-vu-iterations runs `iterations` on each VU.
//!
//! Sharding (`--shard i/N`) splits every quantity so that the N shards together produce exactly
//! the unsharded plan: arrival iterations by `k mod N`, integer amounts by
//! `floor((v + N - 1 - i) / N)`, which sums to `v` over `i` (Hermite's identity).

mod arrival;
mod iterations;
mod vus;

use std::time::Duration;

use thiserror::Error;

use crate::config::spec::Executor;
pub use arrival::ArrivalPlan;
pub use iterations::{IterationDispenser, IterationMode, IterationPlan};
pub use vus::VuPlan;

/// Why an executor spec cannot be turned into a plan.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PlanError {
    #[error("rate must be a finite number >= 0 iterations/s, got {0}")]
    InvalidRate(f64),
    #[error("VU target must be a finite number between 0 and {max}, got {value}", max = u32::MAX)]
    InvalidVus { value: f64 },
    #[error("shard {index}/{count} is invalid: need count >= 1 and index < count")]
    InvalidShard { index: u32, count: u32 },
    #[error("the {executor} executor has no {plan} plan")]
    WrongExecutor {
        executor: &'static str,
        plan: &'static str,
    },
}

/// Which part of a sharded run this process executes. `Shard::WHOLE` is an unsharded run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    index: u32,
    count: u32,
}

impl Shard {
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    pub fn new(index: u32, count: u32) -> Result<Shard, PlanError> {
        if count == 0 || index >= count {
            return Err(PlanError::InvalidShard { index, count });
        }
        Ok(Shard { index, count })
    }

    pub fn index(self) -> u32 {
        self.index
    }

    pub fn count(self) -> u32 {
        self.count
    }

    /// This shard's part of an integer amount. Shares differ by at most one and sum to `total`.
    pub fn share(self, total: u64) -> u64 {
        let n = u128::from(self.count);
        let spare = u128::from(self.count - 1 - self.index);
        // u128 so that total near u64::MAX cannot overflow; the quotient is <= total.
        ((u128::from(total) + spare) / n) as u64
    }

    pub fn share_u32(self, total: u32) -> u32 {
        // The share never exceeds the total, so it fits back into u32.
        self.share(u64::from(total)) as u32
    }
}

/// k6's name of an executor (`constant-arrival-rate`, …).
pub fn executor_name(executor: &Executor) -> &'static str {
    match executor {
        Executor::ConstantVus { .. } => "constant-vus",
        Executor::RampingVus { .. } => "ramping-vus",
        Executor::ConstantArrivalRate { .. } => "constant-arrival-rate",
        Executor::RampingArrivalRate { .. } => "ramping-arrival-rate",
        Executor::SharedIterations { .. } => "shared-iterations",
        Executor::PerVuIterations { .. } => "per-vu-iterations",
    }
}

pub(super) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

pub(super) fn sum_durations<'a>(it: impl IntoIterator<Item = &'a Duration>) -> Duration {
    it.into_iter()
        .fold(Duration::ZERO, |acc, d| acc.saturating_add(*d))
}

pub(super) fn vu_count(value: f64) -> Result<u32, PlanError> {
    if !value.is_finite() || value < 0.0 || value > f64::from(u32::MAX) {
        return Err(PlanError::InvalidVus { value });
    }
    // Fractional VU targets are rounded; k6 only accepts integers, so this is lenient.
    Ok(value.round() as u32)
}

pub(super) fn check_rate(rate: f64) -> Result<f64, PlanError> {
    if rate.is_finite() && rate >= 0.0 {
        Ok(rate)
    } else {
        Err(PlanError::InvalidRate(rate))
    }
}

/// The most VUs an executor can use at once, before sharding.
pub fn max_vus(executor: &Executor) -> u32 {
    match executor {
        Executor::ConstantVus { vus, .. }
        | Executor::SharedIterations { vus, .. }
        | Executor::PerVuIterations { vus, .. } => *vus,
        Executor::RampingVus {
            start_vus, stages, ..
        } => stages
            .iter()
            // `as` saturates and maps NaN to 0, which is the right clamp for an upper bound.
            .map(|s| s.target.round() as u32)
            .fold(*start_vus, u32::max),
        Executor::ConstantArrivalRate {
            pre_allocated_vus,
            max_vus,
            ..
        }
        | Executor::RampingArrivalRate {
            pre_allocated_vus,
            max_vus,
            ..
        } => (*pre_allocated_vus).max(*max_vus),
    }
}

/// How long the executor's schedule lasts, excluding graceful stop and graceful ramp-down (the
/// runner adds those). For the iteration executors this is `max_duration`, an upper bound.
pub fn planned_duration(executor: &Executor) -> Duration {
    match executor {
        Executor::ConstantVus { duration, .. } | Executor::ConstantArrivalRate { duration, .. } => {
            *duration
        }
        Executor::RampingVus { stages, .. } | Executor::RampingArrivalRate { stages, .. } => {
            sum_durations(stages.iter().map(|s| &s.duration))
        }
        Executor::SharedIterations { max_duration, .. }
        | Executor::PerVuIterations { max_duration, .. } => *max_duration,
    }
}

/// A plan for any executor, for a given shard.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    Arrival(ArrivalPlan),
    Vus(VuPlan),
    Iterations(IterationPlan),
}

impl Plan {
    pub fn new(executor: &Executor, shard: Shard) -> Result<Plan, PlanError> {
        Ok(match executor {
            Executor::ConstantArrivalRate { .. } | Executor::RampingArrivalRate { .. } => {
                Plan::Arrival(ArrivalPlan::new(executor)?.sharded(shard))
            }
            Executor::ConstantVus { .. } | Executor::RampingVus { .. } => {
                Plan::Vus(VuPlan::new(executor)?.sharded(shard))
            }
            Executor::SharedIterations { .. } | Executor::PerVuIterations { .. } => {
                Plan::Iterations(IterationPlan::new(executor)?.sharded(shard))
            }
        })
    }

    /// VUs this shard needs at most.
    pub fn max_vus(&self) -> u32 {
        match self {
            Plan::Arrival(p) => p.max_vus(),
            Plan::Vus(p) => p.max_vus(),
            Plan::Iterations(p) => p.vus(),
        }
    }

    pub fn duration(&self) -> Duration {
        match self {
            Plan::Arrival(p) => p.duration(),
            Plan::Vus(p) => p.duration(),
            Plan::Iterations(p) => p.max_duration(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::spec::Stage;
    use proptest::prelude::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn secs(v: u64) -> Duration {
        Duration::from_secs(v)
    }

    fn stage(duration: Duration, target: f64) -> Stage {
        Stage { duration, target }
    }

    fn ramping_rate(start_rate: f64, stages: Vec<Stage>) -> ArrivalPlan {
        let ex = Executor::RampingArrivalRate {
            start_rate,
            stages,
            pre_allocated_vus: 10,
            max_vus: 100,
        };
        ArrivalPlan::new(&ex).expect("valid plan")
    }

    #[test]
    fn constant_arrival_rate_starts_every_period_from_zero() {
        let ex = Executor::ConstantArrivalRate {
            rate: 10.0,
            duration: secs(2),
            pre_allocated_vus: 5,
            max_vus: 20,
        };
        let plan = ArrivalPlan::new(&ex).unwrap();
        assert_eq!(plan.total_iterations(), 20);
        assert_eq!(plan.duration(), secs(2));
        let starts: Vec<_> = plan.starts().collect();
        let expected: Vec<_> = (0..20).map(|i| ms(100 * i)).collect();
        assert_eq!(starts, expected);
        assert_eq!(plan.start_of(20), None);
    }

    #[test]
    fn constant_arrival_rate_has_no_drift_over_millions_of_iterations() {
        let ex = Executor::ConstantArrivalRate {
            rate: 3.0,
            duration: secs(3_000_000),
            pre_allocated_vus: 1,
            max_vus: 1,
        };
        let plan = ArrivalPlan::new(&ex).unwrap();
        assert_eq!(plan.total_iterations(), 9_000_000);
        // 3/s: iteration 3n starts at exactly n seconds.
        assert_eq!(plan.start_of(8_999_997), Some(secs(2_999_999)));
        assert_eq!(plan.start_of(1), Some(Duration::from_nanos(333_333_333)));
        assert_eq!(plan.start_of(9_000_000), None);
    }

    #[test]
    fn ramp_from_zero_follows_the_square_root_law() {
        // 0 -> 100/s over 10s: rate 10·t, integral 5·t², so iteration k starts where it reaches
        // k + 1, at √((k + 1)/5): nothing at t = 0, and the 500th would start at the end.
        let plan = ramping_rate(0.0, vec![stage(secs(10), 100.0)]);
        assert_eq!(plan.total_iterations(), 499);
        assert_eq!(
            plan.start_of(0),
            Some(Duration::from_secs_f64(0.2f64.sqrt()))
        );
        assert_eq!(plan.start_of(4), Some(secs(1)));
        assert_eq!(plan.start_of(19), Some(secs(2)));
        let exact = Duration::from_secs_f64((499.0f64 / 5.0).sqrt());
        let got = plan.start_of(498).unwrap();
        assert!(
            got.abs_diff(exact) <= Duration::from_nanos(1),
            "{got:?} vs {exact:?}"
        );
    }

    #[test]
    fn ramp_down_to_zero_is_exact() {
        // 100 -> 0/s over 10s: integral 100t − 5t² = 500 at t = 10.
        let plan = ramping_rate(100.0, vec![stage(secs(10), 0.0)]);
        assert_eq!(plan.total_iterations(), 499);
        // 100t − 5t² = 320 → t = 4.
        assert_eq!(plan.start_of(319), Some(secs(4)));
        // 5t² − 100t + 499 = 0 → t = 10 − √20 / 10.
        let exact = Duration::from_secs_f64(10.0 - 20f64.sqrt() / 10.0);
        let last = plan.start_of(498).unwrap();
        assert!(
            last.abs_diff(exact) <= Duration::from_nanos(1),
            "{last:?} vs {exact:?}"
        );
    }

    #[test]
    fn zero_rate_stage_pauses_until_the_rate_resumes() {
        let plan = ramping_rate(
            10.0,
            vec![
                stage(secs(1), 10.0),
                stage(Duration::ZERO, 0.0),
                stage(secs(5), 0.0),
                stage(Duration::ZERO, 10.0),
                stage(secs(1), 10.0),
            ],
        );
        assert_eq!(plan.duration(), secs(7));
        assert_eq!(plan.total_iterations(), 19);
        assert_eq!(plan.start_of(8), Some(ms(900)));
        // Integral reaches 10 at 1s but the next iteration waits for the rate to resume.
        assert_eq!(plan.start_of(9), Some(secs(6)));
        assert_eq!(plan.start_of(18), Some(ms(6_900)));
    }

    #[test]
    fn leading_zero_stage_delays_the_first_iteration() {
        let plan = ramping_rate(0.0, vec![stage(secs(2), 0.0), stage(secs(2), 20.0)]);
        // The ramp's integral 5t² reaches 1 at t = √0.2.
        assert_eq!(
            plan.start_of(0),
            Some(secs(2) + Duration::from_secs_f64(0.2f64.sqrt()))
        );
        assert_eq!(plan.total_iterations(), 19);
    }

    /// The counts k6 1.1 sent for the same stages (issue 34, measured against its
    /// `ramping-arrival-rate`): the integral rounded down, whatever the start rate; and
    /// `constant-arrival-rate` starting at t = 0.
    #[test]
    fn ramping_arrival_rate_sends_what_k6_sends() {
        // 0 → 20/s over 1s, 20/s for 1s, 20 → 0/s over 0.98s: 10 + 20 + 9.8 = 39.8.
        let up_hold_down = ramping_rate(
            0.0,
            vec![
                stage(secs(1), 20.0),
                stage(secs(1), 20.0),
                stage(ms(980), 0.0),
            ],
        );
        assert_eq!(up_hold_down.total_iterations(), 39);
        // From 10/s: 10 → 20/s over 1s (15), 20/s for 1s (20), 20 → 0/s over 0.98s (9.8).
        let from_ten = ramping_rate(
            10.0,
            vec![
                stage(secs(1), 20.0),
                stage(secs(1), 20.0),
                stage(ms(980), 0.0),
            ],
        );
        assert_eq!(from_ten.total_iterations(), 44);
        assert_eq!(
            from_ten.start_of(0),
            Some(Duration::from_secs_f64(
                // 10t + 5t² = 1
                (-10.0 + (100.0f64 + 20.0).sqrt()) / 10.0
            ))
        );
        let constant = ArrivalPlan::new(&Executor::ConstantArrivalRate {
            rate: 20.0,
            duration: ms(2_990),
            pre_allocated_vus: 1,
            max_vus: 1,
        })
        .unwrap();
        assert_eq!(constant.start_of(0), Some(Duration::ZERO));
        assert_eq!(constant.total_iterations(), 60);
    }

    #[test]
    fn all_zero_rate_plans_run_nothing() {
        let plan = ramping_rate(0.0, vec![stage(secs(5), 0.0)]);
        assert_eq!(plan.total_iterations(), 0);
        assert_eq!(plan.start_of(0), None);
        assert_eq!(plan.duration(), secs(5));
    }

    #[test]
    fn invalid_rates_and_executors_are_errors_not_panics() {
        let ex = Executor::ConstantArrivalRate {
            rate: f64::NAN,
            duration: secs(1),
            pre_allocated_vus: 1,
            max_vus: 1,
        };
        assert!(matches!(
            ArrivalPlan::new(&ex),
            Err(PlanError::InvalidRate(_))
        ));
        let ex = Executor::ConstantVus {
            vus: 1,
            duration: secs(1),
        };
        assert!(matches!(
            ArrivalPlan::new(&ex),
            Err(PlanError::WrongExecutor { .. })
        ));
        assert!(Shard::new(3, 3).is_err());
        assert!(Shard::new(0, 0).is_err());
    }

    #[test]
    fn arrival_shards_partition_the_plan_exactly() {
        let plan = ramping_rate(
            7.0,
            vec![
                stage(secs(3), 50.0),
                stage(secs(2), 0.0),
                stage(secs(4), 33.0),
            ],
        );
        let all: Vec<_> = plan.starts().collect();
        for n in 1..=5u32 {
            let mut merged = Vec::new();
            for i in 0..n {
                let shard = plan.clone().with_shard(i, n).unwrap();
                merged.extend(shard.starts());
            }
            merged.sort();
            assert_eq!(merged, all, "N = {n}");
            let vus: u32 = (0..n)
                .map(|i| plan.clone().with_shard(i, n).unwrap().max_vus())
                .sum();
            assert_eq!(vus, 100);
        }
    }

    #[test]
    fn shard_shares_sum_to_the_total() {
        for n in 1..=9 {
            for total in [0u64, 1, 2, 7, 8, 9, 100, u64::MAX] {
                let sum: u128 = (0..n)
                    .map(|i| u128::from(Shard::new(i, n).unwrap().share(total)))
                    .sum();
                assert_eq!(sum, u128::from(total));
            }
        }
    }

    fn ramping_vus(start_vus: u32, stages: Vec<Stage>) -> VuPlan {
        VuPlan::new(&Executor::RampingVus {
            start_vus,
            stages,
            graceful_ramp_down: secs(30),
        })
        .unwrap()
    }

    #[test]
    fn ramping_vus_at_stage_boundaries() {
        let plan = ramping_vus(
            0,
            vec![
                stage(secs(10), 10.0),
                stage(secs(10), 10.0),
                stage(secs(5), 0.0),
            ],
        );
        assert_eq!(plan.duration(), secs(25));
        assert_eq!(plan.max_vus(), 10);
        assert_eq!(plan.graceful_ramp_down(), secs(30));
        assert_eq!(plan.vus_at(Duration::ZERO), 0);
        // One VU per second on the way up, truncated toward the start count.
        assert_eq!(plan.vus_at(ms(999)), 0);
        assert_eq!(plan.vus_at(secs(1)), 1);
        assert_eq!(plan.vus_at(ms(5_500)), 5);
        assert_eq!(plan.vus_at(secs(10)), 10);
        assert_eq!(plan.vus_at(secs(20)), 10);
        // Two VUs per second on the way down, truncated toward the stage's start count (10).
        assert_eq!(plan.vus_at(ms(20_499)), 10);
        assert_eq!(plan.vus_at(ms(20_500)), 9);
        assert_eq!(plan.vus_at(ms(24_999)), 1);
        assert_eq!(plan.vus_at(secs(25)), 0);
    }

    #[test]
    fn zero_length_vu_stage_jumps_at_its_offset() {
        let plan = ramping_vus(
            2,
            vec![
                stage(secs(3), 2.0),
                stage(Duration::ZERO, 6.0),
                stage(secs(3), 6.0),
            ],
        );
        assert_eq!(plan.vus_at(ms(2_999)), 2);
        assert_eq!(plan.vus_at(secs(3)), 6);
        assert_eq!(plan.next_change_after(secs(1)), Some(secs(3)));
        assert_eq!(plan.next_change_after(secs(3)), None);
    }

    #[test]
    fn next_change_matches_vus_at() {
        let plan = ramping_vus(1, vec![stage(secs(3), 8.0), stage(secs(7), 2.0)]);
        let mut t = Duration::ZERO;
        let mut changes = 0;
        while let Some(next) = plan.next_change_after(t) {
            assert!(next > t);
            assert_eq!(plan.vus_at(next - Duration::from_nanos(1)), plan.vus_at(t));
            assert_ne!(plan.vus_at(next), plan.vus_at(t));
            t = next;
            changes += 1;
        }
        assert_eq!(changes, 7 + 6);
    }

    #[test]
    fn constant_vus_plan() {
        let plan = VuPlan::new(&Executor::ConstantVus {
            vus: 7,
            duration: secs(4),
        })
        .unwrap();
        assert_eq!(plan.vus_at(Duration::ZERO), 7);
        assert_eq!(plan.vus_at(ms(3_999)), 7);
        assert_eq!(plan.vus_at(secs(4)), 0);
        assert_eq!(plan.next_change_after(Duration::ZERO), None);
        let shares: u32 = (0..3)
            .map(|i| plan.clone().with_shard(i, 3).unwrap().vus_at(secs(1)))
            .sum();
        assert_eq!(shares, 7);
    }

    #[test]
    fn vu_shards_sum_to_the_total_at_every_instant() {
        let plan = ramping_vus(3, vec![stage(secs(5), 17.0), stage(secs(5), 0.0)]);
        for n in 1..=6 {
            let shards: Vec<_> = (0..n)
                .map(|i| plan.clone().with_shard(i, n).unwrap())
                .collect();
            for step in 0..=110u64 {
                let t = ms(step * 100);
                let sum: u32 = shards.iter().map(|s| s.vus_at(t)).sum();
                assert_eq!(sum, plan.vus_at(t), "t = {t:?}, N = {n}");
            }
        }
    }

    #[test]
    fn invalid_vu_targets_are_errors() {
        let ex = Executor::RampingVus {
            start_vus: 0,
            stages: vec![stage(secs(1), -3.0)],
            graceful_ramp_down: secs(1),
        };
        assert!(matches!(
            VuPlan::new(&ex),
            Err(PlanError::InvalidVus { .. })
        ));
    }

    #[test]
    fn shared_iterations_hand_out_exactly_n_across_threads() {
        let plan = IterationPlan::new(&Executor::SharedIterations {
            vus: 8,
            iterations: 10_000,
            max_duration: secs(60),
        })
        .unwrap();
        assert_eq!(plan.total_iterations(), 10_000);
        let pool = plan.dispenser();
        let claimed: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| std::iter::from_fn(|| pool.claim()).collect::<Vec<_>>()))
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("worker"))
                .collect()
        });
        let mut sorted = claimed;
        sorted.sort_unstable();
        assert_eq!(sorted, (0..10_000).collect::<Vec<_>>());
        assert_eq!(pool.claim(), None);
        assert_eq!(pool.claimed(), 10_000);
    }

    #[test]
    fn shared_iterations_shards_never_strand_iterations_on_vu_less_shards() {
        let ex = Executor::SharedIterations {
            vus: 2,
            iterations: 11,
            max_duration: secs(10),
        };
        let shards: Vec<_> = (0..5)
            .map(|i| Plan::new(&ex, Shard::new(i, 5).unwrap()).unwrap())
            .collect();
        let mut total = 0;
        for plan in &shards {
            let Plan::Iterations(p) = plan else {
                panic!("wrong plan kind")
            };
            if p.vus() == 0 {
                assert_eq!(p.total_iterations(), 0);
            }
            total += p.total_iterations();
        }
        assert_eq!(total, 11);
    }

    #[test]
    fn per_vu_iterations_shards_sum_exactly() {
        let ex = Executor::PerVuIterations {
            vus: 7,
            iterations: 13,
            max_duration: secs(10),
        };
        let whole = IterationPlan::new(&ex).unwrap();
        assert_eq!(whole.total_iterations(), 91);
        assert_eq!(whole.iterations_per_vu(), Some(13));
        let sum: u64 = (0..4)
            .map(|i| whole.clone().with_shard(i, 4).unwrap().total_iterations())
            .sum();
        assert_eq!(sum, 91);
    }

    #[test]
    fn executor_summaries() {
        let ex = Executor::RampingVus {
            start_vus: 4,
            stages: vec![stage(secs(10), 12.0), stage(secs(5), 0.0)],
            graceful_ramp_down: secs(30),
        };
        assert_eq!(max_vus(&ex), 12);
        assert_eq!(planned_duration(&ex), secs(15));
        let ex = Executor::ConstantArrivalRate {
            rate: 5.0,
            duration: secs(60),
            pre_allocated_vus: 30,
            max_vus: 10,
        };
        assert_eq!(max_vus(&ex), 30);
        assert_eq!(planned_duration(&ex), secs(60));
        let plan = Plan::new(&ex, Shard::WHOLE).unwrap();
        assert_eq!(plan.max_vus(), 30);
        assert_eq!(plan.duration(), secs(60));
    }

    /// Numerical integral of the piecewise-linear rate with a fine midpoint rule, deliberately
    /// independent of the closed form the plan uses.
    fn numeric_integral(start_rate: f64, stages: &[(u64, f64)]) -> f64 {
        let mut from = start_rate;
        let mut total = 0.0;
        for &(len_ms, to) in stages {
            let steps = 1000;
            let dt = len_ms as f64 / 1000.0 / steps as f64;
            for i in 0..steps {
                let f = (i as f64 + 0.5) / steps as f64;
                total += (from + (to - from) * f) * dt;
            }
            from = to;
        }
        total
    }

    proptest! {
        #[test]
        fn ramping_arrival_rate_integrates_to_the_expected_count_within_1_percent(
            start_rate in 0.0f64..200.0,
            raw in prop::collection::vec((0u64..20_000, 0.0f64..200.0), 1..6),
        ) {
            let stages: Vec<Stage> = raw.iter().map(|&(l, r)| stage(ms(l), r)).collect();
            let plan = ramping_rate(start_rate, stages);
            let expected = numeric_integral(start_rate, &raw);
            let got = plan.total_iterations() as f64;
            prop_assert!((got - expected).abs() <= (expected * 0.01).max(1.0),
                "got {got}, expected {expected}");
            // Start times are non-decreasing and inside the plan.
            let mut prev = Duration::ZERO;
            for j in (0..plan.total_iterations()).step_by(7) {
                let t = plan.start_of(j).unwrap();
                prop_assert!(t >= prev && t <= plan.duration());
                prev = t;
            }
        }

        #[test]
        fn starts_before_t_match_the_integral_up_to_t(
            start_rate in 0.0f64..100.0,
            raw in prop::collection::vec((1u64..5_000, 0.0f64..100.0), 1..5),
            cut in 0.0f64..1.0,
        ) {
            let stages: Vec<Stage> = raw.iter().map(|&(l, r)| stage(ms(l), r)).collect();
            let plan = ramping_rate(start_rate, stages);
            // A whole number of milliseconds, so the reference integral below sees the same t.
            let t = ms((plan.duration().as_millis() as f64 * cut) as u64);
            let started = plan.starts().filter(|s| *s < t).count() as f64;
            // Integral up to t, by the midpoint rule on truncated stages.
            let mut left = t.as_millis() as u64;
            let mut truncated = Vec::new();
            let mut from = start_rate;
            for &(l, r) in &raw {
                let take = l.min(left);
                if take > 0 {
                    truncated.push((take, from + (r - from) * take as f64 / l as f64));
                }
                left -= take;
                from = r;
                if take < l { break; }
            }
            let expected = numeric_integral(start_rate, &truncated);
            prop_assert!((started - expected).abs() <= 1.0 + expected * 0.01,
                "started {started}, expected {expected}");
        }
    }
}
