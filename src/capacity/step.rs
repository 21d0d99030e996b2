//! One step of the search, for real: the resolved profile's work at one constant arrival rate
//! for the step's duration, through the engine's runner (`load::runner::run`), as `run` sends
//! it. Each step has its own figures (a fresh `RunStats`) and its own VU pool, sized for its
//! rate as `run --rate` sizes one (`rate × timeout` within the default bounds, capped by the
//! open-file limit), unless `--max-vus` fixes it.

use super::judge::Condition;
use crate::config::spec::{Executor, default_vu_pool, stall_pool};
use crate::http::Client;
use crate::load::observe::Observers;
use crate::load::runner::{self, RunReport, RunSpec, Stopper};
use crate::load::stats::RunStats;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Runs steps of one resolved profile.
pub struct Stepper {
    base: RunSpec,
    client: Client,
    /// `--max-vus`: every step's pool; `None` sizes each step's own.
    max_vus: Option<u32>,
    /// How long the target may hold an arrival (its timeout): a defaulted pool holds every
    /// arrival that long.
    hold: Duration,
}

impl Stepper {
    /// Steps of `r`, judged by `conditions` (the thresholds among them stop a step early once
    /// it has run half its length and fails them).
    /// `hold` is how long the target may hold an arrival (its timeout).
    pub fn new(
        spec: &RunSpec,
        client: Client,
        hold: Duration,
        conditions: &[Condition],
        max_vus: Option<u32>,
    ) -> Stepper {
        let mut base = spec.clone();
        base.thresholds = conditions
            .iter()
            .filter_map(|c| match c {
                Condition::Threshold { spec, .. } => Some(spec.clone()),
                Condition::Slo { .. } => None,
            })
            .collect();
        base.start_time = Duration::ZERO;
        Stepper {
            base,
            client,
            max_vus,
            hold,
        }
    }

    /// The step's executor: `rate` for `duration`, its pool sized for it.
    fn executor(&self, rate: f64, duration: Duration) -> Executor {
        let (pre, _) = default_vu_pool(rate);
        let max = match self.max_vus {
            Some(max) => max,
            None => stall_pool(rate, self.hold).max(pre),
        };
        let mut executor = Executor::ConstantArrivalRate {
            rate,
            duration,
            pre_allocated_vus: pre.min(max),
            max_vus: max,
        };
        if self.max_vus.is_none() {
            let limit = crate::limits::nofile().ok();
            crate::load::capacity::cap_default_pool(
                &mut executor,
                Some(self.hold),
                self.base.shard,
                limit,
            );
        }
        executor
    }

    /// The client steps send with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// One step's spec: the profile's at `rate` for `duration`, its thresholds stopping it
    /// once it has run half its length and fails them.
    pub fn spec_at(&self, rate: f64, duration: Duration) -> RunSpec {
        let mut spec = self.base.clone();
        spec.executor = self.executor(rate, duration);
        let half = duration / 2;
        for t in &mut spec.thresholds {
            t.abort_on_fail = true;
            t.delay_abort_eval = t.delay_abort_eval.max(half);
        }
        spec
    }
}

/// What runs a step: [`Stepper`] alone for `sloburn capacity`; the daemon's run machinery (its
/// profile's series, SLO events and dashboard) for `executor: capacity`.
pub trait Steps {
    /// Runs one step to its end; `None` when `stop` was cancelled first (the step is dropped
    /// at once, its VUs with it, as a second signal cuts a run: its figures are not used).
    fn run(
        &self,
        rate: f64,
        duration: Duration,
        stop: &CancellationToken,
    ) -> impl Future<Output = anyhow::Result<Option<RunReport>>> + Send;
}

impl Steps for Stepper {
    async fn run(
        &self,
        rate: f64,
        duration: Duration,
        stop: &CancellationToken,
    ) -> anyhow::Result<Option<RunReport>> {
        let spec = self.spec_at(rate, duration);
        let stats = Arc::new(RunStats::for_work(
            &spec.work.steps(),
            &spec.work.journey_names(),
            &spec.thresholds,
            &spec.profile,
        ));
        let run = runner::run(
            &spec,
            &self.client,
            Observers::new(stats, Vec::new()),
            Stopper::new(),
        );
        tokio::select! {
            r = run => r.map(Some).map_err(|e| anyhow::anyhow!("step at {rate}/s: {e}")),
            () = stop.cancelled() => Ok(None),
        }
    }
}
