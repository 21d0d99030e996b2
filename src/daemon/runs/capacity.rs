//! A run of a profile with `executor: capacity` (issue 47): the pure search of `sloburn
//! capacity` (`capacity::drive`, `capacity::search`, `capacity::judge`), each step a run of the
//! profile at one arrival rate through the daemon's machinery: its requests feed the profile's
//! `/metrics` series and the dashboard's ring (never the SLOs' events: a search overloads the
//! target on purpose), its figures are
//! read from the series (`RunStats::on_series`), one step after another inside the profile's
//! one run (so never beside another run of it). The search's answer is the run's record
//! (`capacity`, with every step, saved to the store with the run) and `sloburn_capacity_rate`.
//!
//! Bounds: the search's own (at most `capacity::MAX_STEPS` steps, `max_duration` for the
//! whole); the run's stopper (the API, the budget guard, shutdown) ends it between or during
//! steps, as an interrupted search.

use super::{Live, guard, live, run_spec};
use crate::capacity::{self, Condition, Plan, Stepper, Steps};
use crate::config::{self, CapacitySpec, Profile};
use crate::daemon::state::{RunEntry, Shared};
use crate::load::event::{Observer, StepInfo};
use crate::load::iteration::Work;
use crate::load::observe::Observers;
use crate::load::runner::{self, RunReport, Stopper};
use crate::load::series::Series;
use crate::load::stats::RunStats;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The daemon's steps: the profile's work at a step's rate, recorded into its series.
struct DaemonSteps {
    stepper: Stepper,
    observers: Vec<Arc<dyn Observer>>,
    series: Arc<dyn Series>,
    steps: Vec<StepInfo>,
    journeys: Vec<String>,
    profile: String,
}

impl Steps for DaemonSteps {
    async fn run(
        &self,
        rate: f64,
        duration: Duration,
        stop: &CancellationToken,
    ) -> anyhow::Result<Option<RunReport>> {
        let spec = self.stepper.spec_at(rate, duration);
        // Each step's figures are what the series gained since it began.
        let stats = Arc::new(
            RunStats::for_work(&self.steps, &self.journeys, &spec.thresholds, &self.profile)
                .on_series(self.series.clone()),
        );
        let events = Observers::new(stats, self.observers.clone());
        // A step's own stopper: a threshold that aborts the step never stops the search.
        let run = runner::run(&spec, self.stepper.client(), events, Stopper::new());
        tokio::select! {
            r = run => r.map(Some).map_err(|e| anyhow::anyhow!("step at {rate}/s: {e}")),
            () = stop.cancelled() => Ok(None),
        }
    }
}

/// Runs the search as run `record` of `profile`; its record filled with the answer.
pub(super) async fn execute(
    shared: &Arc<Shared>,
    profile: &Profile,
    target: &config::Target,
    c: &CapacitySpec,
    (work, _, stopper): (Work, bool, Stopper),
    mut record: RunEntry,
) -> RunEntry {
    let cfg = shared.config();
    let conditions = match capacity::conditions_of(
        &profile.thresholds,
        cfg.slos.values(),
        &target.name,
        &profile.name,
    ) {
        Ok(c) if !c.is_empty() => c,
        // `check` refuses both; a config from elsewhere (the demo's) is told here.
        Ok(_) => return errored(shared, record, "nothing decides a capacity step".into()),
        Err(why) => return errored(shared, record, why),
    };
    let work = Arc::new(work);
    let steps = work.steps();
    let journeys = work.journey_names();
    // A search drives the target past its SLO on purpose: its requests are never SLO events
    // (a nightly search would otherwise burn the budget and page). The SLOs still decide its
    // steps, from each step's own figures.
    let live: Live = live(shared, profile, target, &steps, &journeys, false);
    let series: Arc<dyn Series> = live.metrics.clone();
    let base = run_spec(shared, profile, work, None);
    let hold = profile
        .vu_hold
        .unwrap_or(target.timeout)
        .max(target.timeout);
    let client = target.client(shared.resolver.clone());
    let runner = DaemonSteps {
        stepper: Stepper::new(&base, client, hold, &conditions, c.max_vus),
        observers: vec![Arc::new(live)],
        series,
        steps,
        journeys,
        profile: profile.name.clone(),
    };
    shared.metrics.run_started(&profile.name);
    let mut guards = tokio::task::JoinSet::new();
    if let Some(g) = profile.guard.clone() {
        guards.spawn(guard(shared.clone(), g, stopper.clone()));
    }
    let stop = stopper.token().clone();
    let mut lines = StepLog(&profile.name, Vec::new());
    let found = capacity::drive(&Plan::of(c), &runner, &conditions, &mut lines, &stop).await;
    guards.abort_all();
    record.finished_at = Some(shared.clock.unix_secs());
    match found {
        Ok(answer) => fill(shared, &mut record, &answer, &conditions),
        Err(e) => {
            record.result = "error".into();
            record.reason = Some(format!("{e:#}"));
        }
    }
    record
}

/// A run that could not search.
fn errored(shared: &Shared, mut record: RunEntry, why: String) -> RunEntry {
    record.finished_at = Some(shared.clock.unix_secs());
    record.result = "error".into();
    record.reason = Some(why);
    record
}

/// The run's record from the search's answer, and `sloburn_capacity_rate` when it decided.
fn fill(shared: &Shared, record: &mut RunEntry, c: &capacity::Capacity, conditions: &[Condition]) {
    let requests: u64 = c.steps.iter().map(|s| s.requests).sum();
    record.requests = requests;
    record.rate = if c.elapsed_s > 0.0 {
        requests as f64 / c.elapsed_s
    } else {
        0.0
    };
    record.dropped = c
        .steps
        .iter()
        .map(|s| s.generator_dropped + s.saturated)
        .sum();
    // found and above max_rate are answers; below the lowest step fails; a signal or the
    // API stopped it; the rest is no decision (never a pass or a fail).
    record.result = match c.outcome {
        "found" | "above_max_rate" => "passed",
        "below_lowest" => "failed",
        "interrupted" => "aborted",
        _ => "inconclusive",
    }
    .into();
    record.reason = Some(c.summary.clone());
    let mut value = serde_json::to_value(c).unwrap_or_default();
    value["conditions"] = conditions.iter().map(Condition::name).collect();
    if let Some((low, high)) = capacity::gauge_of(&value) {
        shared.metrics.set_capacity(&record.profile, low, high);
    }
    record.capacity = Some(value);
}

/// Each step's line, logged as it is written.
struct StepLog<'a>(&'a str, Vec<u8>);

impl std::io::Write for StepLog<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // A step's line is short; a longer one is cut, never kept past this.
        if self.1.len() < 64 * 1024 {
            self.1.extend_from_slice(buf);
        }
        while let Some(end) = self.1.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.1.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line[..end]);
            tracing::info!(profile = %self.0, "capacity {line}");
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
