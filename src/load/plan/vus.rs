//! The closed-model plan of `constant-vus` and `ramping-vus`: VUs over time, one VU at a time
//! at absolute offsets, as k6 moves them.

use super::{PlanError, Shard, executor_name, nanos, vu_count};
use crate::config::spec::{Executor, Stage};
use std::time::Duration;

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
