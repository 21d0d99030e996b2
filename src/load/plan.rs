//! The pure load plan: what an executor intends to do, as a function of time offsets from the
//! run start. No clock, no I/O: the runner asks the plan "when does iteration k start?" or "how
//! many VUs at t?" and does the waiting itself.
//!
//! Semantics follow k6:
//! - arrival-rate executors start iteration `k` (0-based) at the first instant the integral of
//!   the rate exceeds `k`, so the first iteration starts at t = 0 when the rate there is positive
//!   and an iteration never starts inside a zero-rate stage (it waits for the rate to resume);
//! - ramping-vus moves one VU at a time, at absolute offsets, truncating toward the stage's
//!   starting count (as k6's `getRawExecutionSteps` does);
//! - shared-iterations hands out exactly `iterations` iteration numbers across all VUs;
//!   per-vu-iterations runs `iterations` on each VU.
//!
//! Sharding (`--shard i/N`) splits every quantity so that the N shards together produce exactly
//! the unsharded plan: arrival iterations by `k mod N`, integer amounts by
//! `floor((v + N - 1 - i) / N)`, which sums to `v` over `i` (Hermite's identity).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use thiserror::Error;

use super::spec::{Executor, Stage};

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

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn sum_durations<'a>(it: impl IntoIterator<Item = &'a Duration>) -> Duration {
    it.into_iter()
        .fold(Duration::ZERO, |acc, d| acc.saturating_add(*d))
}

fn vu_count(value: f64) -> Result<u32, PlanError> {
    if !value.is_finite() || value < 0.0 || value > f64::from(u32::MAX) {
        return Err(PlanError::InvalidVus { value });
    }
    // Fractional VU targets are rounded; k6 only accepts integers, so this is lenient.
    Ok(value.round() as u32)
}

fn check_rate(rate: f64) -> Result<f64, PlanError> {
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

/// One VU stage with integer bounds, in nanoseconds from the run start.
#[derive(Debug, Clone, PartialEq)]
struct VuStage {
    start_ns: u64,
    len_ns: u64,
    from: u32,
    to: u32,
}

impl VuStage {
    /// k6 moves one VU at a time: the i-th change happens at start + ceil(i·len/|Δ|), so the
    /// count is `from ± floor(|Δ|·elapsed/len)`, truncated toward the stage's starting count.
    fn vus_at(&self, elapsed_ns: u64) -> u32 {
        let diff = u128::from(self.from.abs_diff(self.to));
        if self.len_ns == 0 {
            return self.to;
        }
        let steps =
            (diff * u128::from(elapsed_ns.min(self.len_ns)) / u128::from(self.len_ns)) as u32; // <= diff, which fits in u32
        if self.to >= self.from {
            self.from + steps
        } else {
            self.from - steps
        }
    }

    fn step_time_ns(&self, i: u64) -> u64 {
        let diff = u128::from(self.from.abs_diff(self.to));
        let t = (u128::from(i) * u128::from(self.len_ns)).div_ceil(diff.max(1));
        self.start_ns.saturating_add(t as u64)
    }
}

/// The closed-model plan of `constant-vus` and `ramping-vus`.
#[derive(Debug, Clone, PartialEq)]
pub struct VuPlan {
    start_vus: u32,
    stages: Vec<VuStage>,
    duration: Duration,
    graceful_ramp_down: Duration,
    shard: Shard,
}

impl VuPlan {
    pub fn new(executor: &Executor) -> Result<VuPlan, PlanError> {
        let (start_vus, raw, graceful_ramp_down) = match executor {
            Executor::ConstantVus { vus, duration } => (
                *vus,
                vec![Stage {
                    duration: *duration,
                    target: f64::from(*vus),
                }],
                Duration::ZERO,
            ),
            Executor::RampingVus {
                start_vus,
                stages,
                graceful_ramp_down,
            } => (*start_vus, stages.clone(), *graceful_ramp_down),
            other => {
                return Err(PlanError::WrongExecutor {
                    executor: executor_name(other),
                    plan: "VU",
                });
            }
        };
        let mut stages = Vec::with_capacity(raw.len());
        let mut from = start_vus;
        let mut start_ns = 0u64;
        for stage in &raw {
            let to = vu_count(stage.target)?;
            let len_ns = nanos(stage.duration).min(u64::MAX - start_ns);
            stages.push(VuStage {
                start_ns,
                len_ns,
                from,
                to,
            });
            start_ns += len_ns;
            from = to;
        }
        Ok(VuPlan {
            start_vus,
            stages,
            duration: Duration::from_nanos(start_ns),
            graceful_ramp_down,
            shard: Shard::WHOLE,
        })
    }

    pub fn with_shard(self, index: u32, count: u32) -> Result<VuPlan, PlanError> {
        Ok(self.sharded(Shard::new(index, count)?))
    }

    pub fn sharded(mut self, shard: Shard) -> VuPlan {
        self.shard = shard;
        self
    }

    /// Stage index covering `t_ns`. At a boundary the later stage wins, so a zero-length stage
    /// takes effect at its offset.
    fn stage_at(&self, t_ns: u64) -> Option<&VuStage> {
        let i = self.stages.partition_point(|s| s.start_ns <= t_ns);
        i.checked_sub(1).and_then(|i| self.stages.get(i))
    }

    fn global_vus_at(&self, t: Duration) -> u32 {
        let t_ns = nanos(t);
        if t >= self.duration {
            return 0;
        }
        match self.stage_at(t_ns) {
            Some(stage) => stage.vus_at(t_ns - stage.start_ns),
            None => self.start_vus,
        }
    }

    /// VUs this shard should run at offset `t`. The plan covers `[0, duration)`; at and after
    /// `duration` it is 0 (in-flight iterations then get the graceful ramp-down/stop).
    pub fn vus_at(&self, t: Duration) -> u32 {
        self.shard.share_u32(self.global_vus_at(t))
    }

    /// The next offset after `t` at which the whole plan's VU count changes (the runner sleeps
    /// until then), or `None` if it never changes again. The drop to 0 at `duration()` is not
    /// reported: the runner ends the plan there anyway.
    pub fn next_change_after(&self, t: Duration) -> Option<Duration> {
        let t_ns = nanos(t);
        let start = self
            .stages
            .partition_point(|s| s.start_ns + s.len_ns <= t_ns);
        for stage in self.stages.iter().skip(start.saturating_sub(1)) {
            let diff = u64::from(stage.from.abs_diff(stage.to));
            if diff == 0 {
                continue;
            }
            if stage.len_ns == 0 {
                if stage.start_ns > t_ns {
                    return Some(Duration::from_nanos(stage.start_ns));
                }
                continue;
            }
            let elapsed = t_ns.saturating_sub(stage.start_ns).min(stage.len_ns);
            let done = (u128::from(diff) * u128::from(elapsed) / u128::from(stage.len_ns)) as u64;
            // Step `done` happened at or before t (ceil(done·len/Δ) <= elapsed), so the next
            // one is the candidate.
            if done < diff {
                let at = stage.step_time_ns(done + 1);
                if at > t_ns {
                    return Some(Duration::from_nanos(at));
                }
            }
        }
        None
    }

    pub fn duration(&self) -> Duration {
        self.duration
    }

    pub fn graceful_ramp_down(&self) -> Duration {
        self.graceful_ramp_down
    }

    /// The most VUs this shard runs at once. Shares are monotone in the total, so this is the
    /// share of the global maximum.
    pub fn max_vus(&self) -> u32 {
        let global = self
            .stages
            .iter()
            .map(|s| s.to)
            .fold(self.start_vus, u32::max);
        self.shard.share_u32(global)
    }
}

/// Which iteration-count executor an [`IterationPlan`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IterationMode {
    /// `shared-iterations`: VUs take iteration numbers from one pool until it is empty.
    Shared,
    /// `per-vu-iterations`: every VU runs the same number of iterations.
    PerVu,
}

/// The plan of `shared-iterations` and `per-vu-iterations`.
#[derive(Debug, Clone, PartialEq)]
pub struct IterationPlan {
    mode: IterationMode,
    global_vus: u32,
    /// Shared: the pool size; per-VU: iterations per VU.
    global_iterations: u64,
    max_duration: Duration,
    shard: Shard,
}

impl IterationPlan {
    pub fn new(executor: &Executor) -> Result<IterationPlan, PlanError> {
        let (mode, vus, iterations, max_duration) = match executor {
            Executor::SharedIterations {
                vus,
                iterations,
                max_duration,
            } => (IterationMode::Shared, *vus, *iterations, *max_duration),
            Executor::PerVuIterations {
                vus,
                iterations,
                max_duration,
            } => (IterationMode::PerVu, *vus, *iterations, *max_duration),
            other => {
                return Err(PlanError::WrongExecutor {
                    executor: executor_name(other),
                    plan: "iteration",
                });
            }
        };
        Ok(IterationPlan {
            mode,
            global_vus: vus,
            global_iterations: iterations,
            max_duration,
            shard: Shard::WHOLE,
        })
    }

    pub fn with_shard(self, index: u32, count: u32) -> Result<IterationPlan, PlanError> {
        Ok(self.sharded(Shard::new(index, count)?))
    }

    pub fn sharded(mut self, shard: Shard) -> IterationPlan {
        self.shard = shard;
        self
    }

    pub fn mode(&self) -> IterationMode {
        self.mode
    }

    pub fn vus(&self) -> u32 {
        self.shard.share_u32(self.global_vus)
    }

    pub fn max_duration(&self) -> Duration {
        self.max_duration
    }

    /// For shared-iterations, the pool is split only among shards that have at least one VU
    /// (shards `0..min(vus, N)`), so no iterations are stranded on a shard that cannot run them.
    fn pool_shard(&self) -> Option<Shard> {
        let holders = self.global_vus.min(self.shard.count);
        (self.shard.index < holders).then_some(Shard {
            index: self.shard.index,
            count: holders,
        })
    }

    /// Iterations each VU of this shard runs (per-vu-iterations only).
    pub fn iterations_per_vu(&self) -> Option<u64> {
        (self.mode == IterationMode::PerVu).then_some(self.global_iterations)
    }

    /// Iterations this shard runs in total if `max_duration` does not cut it short.
    pub fn total_iterations(&self) -> u64 {
        match self.mode {
            IterationMode::Shared => self
                .pool_shard()
                .map_or(0, |s| s.share(self.global_iterations)),
            IterationMode::PerVu => u64::from(self.vus()).saturating_mul(self.global_iterations),
        }
    }

    /// The pool VUs draw from. For per-vu-iterations it simply counts all this shard's
    /// iterations; each VU should still stop after [`Self::iterations_per_vu`].
    pub fn dispenser(&self) -> IterationDispenser {
        IterationDispenser {
            next: AtomicU64::new(0),
            total: self.total_iterations(),
        }
    }
}

/// Hands out iteration numbers `0..total`, each exactly once, to concurrent VUs without a lock.
#[derive(Debug)]
pub struct IterationDispenser {
    next: AtomicU64,
    total: u64,
}

impl IterationDispenser {
    /// The next iteration number, or `None` once all have been handed out.
    pub fn claim(&self) -> Option<u64> {
        // A bounded CAS instead of fetch_add: the counter never runs past `total`, so claims
        // after exhaustion cannot wrap it around.
        self.next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.total).then_some(n + 1)
            })
            .ok()
    }

    pub fn claimed(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    pub fn total(&self) -> u64 {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
