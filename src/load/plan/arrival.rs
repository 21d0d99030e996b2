//! The open-model plan of `constant-arrival-rate` and `ramping-arrival-rate`: start times from
//! the iteration number alone, by the closed-form integral of a piecewise-linear rate.

use super::{PlanError, Shard, check_rate, executor_name, nanos};
use crate::config::spec::{Executor, Stage};
use std::time::Duration;

/// One piecewise-linear piece of the rate with positive area.
#[derive(Debug, Clone, PartialEq)]
struct RateSegment {
    start_ns: u64,
    end_ns: u64,
    /// Seconds; kept as f64 since the quadratic is solved in seconds.
    len_s: f64,
    r0: f64,
    r1: f64,
    /// Iterations (integral of the rate) before this segment starts.
    cum0: f64,
    cum1: f64,
}

impl RateSegment {
    /// Seconds into the segment at which the integral since its start reaches `a`
    /// (0 <= a <= area). Exact for linear ramps: solves r0·x + (r1−r0)/(2·len)·x² = a.
    fn solve(&self, a: f64) -> f64 {
        if a <= 0.0 {
            return 0.0;
        }
        let slope = (self.r1 - self.r0) / self.len_s;
        let x = if slope == 0.0 {
            a / self.r0
        } else {
            // The rationalised root 2a / (r0 + √(r0² + 2·s·a)) avoids the cancellation of
            // (−r0 + √…)/s when the slope is tiny, and handles r0 = 0 and falling ramps alike.
            let disc = (self.r0 * self.r0 + 2.0 * slope * a).max(0.0);
            let denom = self.r0 + disc.sqrt();
            if denom > 0.0 {
                2.0 * a / denom
            } else {
                self.len_s
            }
        };
        x.clamp(0.0, self.len_s)
    }
}

/// The open-model plan of `constant-arrival-rate` and `ramping-arrival-rate`.
///
/// Start times are computed from the iteration number alone (no running sum), so there is no
/// drift however many iterations run; each lookup is a binary search over the stages.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrivalPlan {
    segments: Vec<RateSegment>,
    /// The integral of the rate at which iteration 0 starts; iteration `k` starts where it
    /// reaches `first + k`. `constant-arrival-rate` starts at t = 0 (0), as k6 does;
    /// `ramping-arrival-rate` starts its i-th iteration where the integral reaches i (1), as
    /// k6 does, so a ramp from 0 starts nothing at t = 0 and sends the integral rounded down.
    first: f64,
    global_total: u64,
    duration: Duration,
    pre_allocated_vus: u32,
    max_vus: u32,
    shard: Shard,
}

impl ArrivalPlan {
    pub fn new(executor: &Executor) -> Result<ArrivalPlan, PlanError> {
        let (start_rate, stages, pre_allocated_vus, max_vus, first) = match executor {
            Executor::ConstantArrivalRate {
                rate,
                duration,
                pre_allocated_vus,
                max_vus,
            } => (
                *rate,
                vec![Stage {
                    duration: *duration,
                    target: *rate,
                }],
                *pre_allocated_vus,
                *max_vus,
                0.0,
            ),
            Executor::RampingArrivalRate {
                start_rate,
                stages,
                pre_allocated_vus,
                max_vus,
            } => (
                *start_rate,
                stages.clone(),
                *pre_allocated_vus,
                *max_vus,
                1.0,
            ),
            other => {
                return Err(PlanError::WrongExecutor {
                    executor: executor_name(other),
                    plan: "arrival-rate",
                });
            }
        };
        let mut from = check_rate(start_rate)?;
        let mut segments = Vec::with_capacity(stages.len());
        let mut start_ns = 0u64;
        let mut cum = 0.0f64;
        for stage in &stages {
            let to = check_rate(stage.target)?;
            let end_ns = start_ns.saturating_add(nanos(stage.duration));
            let len_s = (end_ns - start_ns) as f64 / 1e9;
            let area = (from + to) / 2.0 * len_s;
            if area > 0.0 {
                segments.push(RateSegment {
                    start_ns,
                    end_ns,
                    len_s,
                    r0: from,
                    r1: to,
                    cum0: cum,
                    cum1: cum + area,
                });
                cum += area;
            }
            start_ns = end_ns;
            from = to;
        }
        // Starts strictly before the end: those at `first + k < cum`.
        let global_total = count_below(cum).saturating_sub(first as u64);
        Ok(ArrivalPlan {
            segments,
            first,
            global_total,
            duration: Duration::from_nanos(start_ns),
            pre_allocated_vus,
            max_vus: max_vus.max(pre_allocated_vus),
            shard: Shard::WHOLE,
        })
    }

    /// Restrict the plan to shard `index` of `count`: it then yields the iterations
    /// k ≡ index (mod count) of the whole plan.
    pub fn with_shard(self, index: u32, count: u32) -> Result<ArrivalPlan, PlanError> {
        Ok(self.sharded(Shard::new(index, count)?))
    }

    pub fn sharded(mut self, shard: Shard) -> ArrivalPlan {
        self.shard = shard;
        self
    }

    pub fn shard(&self) -> Shard {
        self.shard
    }

    /// Intended start offset of this shard's `j`-th iteration (0-based), or `None` past the end.
    pub fn start_of(&self, j: u64) -> Option<Duration> {
        self.global_index(j).map(|k| self.global_start_of(k))
    }

    /// The iteration number in the whole (unsharded) plan of this shard's `j`-th iteration.
    pub fn global_index(&self, j: u64) -> Option<u64> {
        let k = j
            .checked_mul(u64::from(self.shard.count))?
            .checked_add(u64::from(self.shard.index))?;
        (k < self.global_total).then_some(k)
    }

    fn global_start_of(&self, k: u64) -> Duration {
        let kf = k as f64 + self.first;
        // First segment whose cumulative count exceeds k: iteration k starts inside it.
        let i = self.segments.partition_point(|s| s.cum1 <= kf);
        let Some(seg) = self.segments.get(i).or(self.segments.last()) else {
            return Duration::ZERO;
        };
        let x = seg.solve(kf - seg.cum0);
        let ns = seg.start_ns as f64 + (x * 1e9).round();
        Duration::from_nanos((ns as u64).clamp(seg.start_ns, seg.end_ns))
    }

    /// Iterations this shard starts over the whole plan.
    pub fn total_iterations(&self) -> u64 {
        let (i, n) = (u64::from(self.shard.index), u64::from(self.shard.count));
        if self.global_total > i {
            (self.global_total - i).div_ceil(n)
        } else {
            0
        }
    }

    /// Iterations of the whole plan, all shards together.
    pub fn global_total_iterations(&self) -> u64 {
        self.global_total
    }

    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// This shard's share of `preAllocatedVUs`. A shard whose `max_vus` share is zero drops all
    /// its iterations, so config validation should require `max_vus >= shard count`.
    pub fn pre_allocated_vus(&self) -> u32 {
        self.shard.share_u32(self.pre_allocated_vus)
    }

    /// This shard's share of `maxVUs`.
    pub fn max_vus(&self) -> u32 {
        self.shard.share_u32(self.max_vus)
    }

    /// This shard's start offsets in order.
    pub fn starts(&self) -> impl Iterator<Item = Duration> + '_ {
        (0..self.total_iterations()).filter_map(move |j| self.start_of(j))
    }
}

/// Number of non-negative integers k with k < total, tolerating float noise in `total`
/// (10/s for 2s must give exactly 20 iterations even if the area comes out as 20.000000000004).
fn count_below(total: f64) -> u64 {
    if total <= 0.0 {
        return 0;
    }
    let eps = 1e-9 * total.max(1.0);
    let nearest = total.round();
    if (total - nearest).abs() <= eps {
        nearest as u64
    } else {
        total.ceil() as u64
    }
}
