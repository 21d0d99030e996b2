//! The plans of `shared-iterations` and `per-vu-iterations`: how many iterations, on how many
//! VUs, and the dispenser that hands out exactly that many iteration numbers.

use super::{PlanError, Shard, executor_name};
use crate::config::spec::Executor;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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
