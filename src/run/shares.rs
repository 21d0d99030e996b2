//! What a shard of `run --collect` hands its collector, and the collector's checks of it.
//!
//! A share is its figures (`load::record::RunRecord`) and how its run ended: `stopped` says
//! why it ended before its plan did (a signal, an `abort_on_fail` threshold), `signal` which
//! signal stopped it. The collector knows every shard's plan (the same profile, split by
//! `load::plan`), so it refuses figures no share of that plan can make ([`Bounds::check`]:
//! more iterations than the share plans, more requests than those iterations send) and says
//! how much of its plan a stopped share did not run ([`Bounds::shortfall`]).

use crate::config::spec::Executor;
use crate::load::plan::{Plan, Shard};
use crate::load::record::RunRecord;
use crate::load::runner::Abort;
use serde::{Deserialize, Serialize};

/// One shard's share as it is sent to `POST /v1/shares/{i}`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Share {
    /// Why the share's run ended before its plan did; `None` when it ran the plan out.
    #[serde(default)]
    pub stopped: Option<String>,
    /// The signal that stopped it (`SIGTERM`, `SIGINT`), if one did.
    #[serde(default)]
    pub signal: Option<String>,
    pub record: RunRecord,
}

impl Share {
    /// This process's share: its figures and why its run stopped early, if it did (a `unique`
    /// data file used up is a run's normal end).
    pub fn of(record: &RunRecord, aborted: Option<&Abort>, signal: Option<&str>) -> Share {
        let stopped = match aborted {
            Some(Abort::Stopped(why) | Abort::Guard(why)) => Some(why.clone()),
            Some(Abort::Threshold(t)) => {
                Some(format!("its threshold `{t}` failed (abort_on_fail)"))
            }
            Some(Abort::DataUsedUp(_)) | None => None,
        };
        Share {
            stopped,
            signal: signal.map(str::to_string),
            record: record.clone(),
        }
    }
}

/// The signal names a share may report, as the `'static` names the outputs take.
pub fn signal_name(s: &str) -> &'static str {
    match s {
        "SIGTERM" => "SIGTERM",
        "SIGINT" => "SIGINT",
        _ => "a signal",
    }
}

/// What one shard's plan allows its figures to hold.
pub struct Bounds {
    plan: Plan,
    /// The most requests one iteration sends (every step of every journey; 1 for one request).
    per_iteration: u64,
}

impl Bounds {
    /// Shard `shard`'s plan of `executor`, whose iterations send at most `per_iteration`
    /// requests each.
    pub fn of(executor: &Executor, shard: Shard, per_iteration: usize) -> anyhow::Result<Bounds> {
        Ok(Bounds {
            plan: Plan::new(executor, shard)?,
            per_iteration: per_iteration.max(1) as u64,
        })
    }

    /// The iterations this shard's plan starts, when the plan fixes them (arrival rates,
    /// iteration counts); a closed model's (`constant-vus`, `ramping-vus`) depend on the target.
    fn planned_iterations(&self) -> Option<u64> {
        match &self.plan {
            Plan::Arrival(p) => Some(p.total_iterations()),
            Plan::Iterations(p) => Some(p.total_iterations()),
            Plan::Vus(_) => None,
        }
    }

    /// Whether `r` can be this shard's figures: counts that agree with each other, and no
    /// more iterations (started or dropped) or requests than its plan makes.
    pub fn check(&self, r: &RunRecord) -> Result<(), String> {
        if r.failed > r.requests || r.no_response > r.requests {
            return Err(format!(
                "{} failed and {} unanswered of {} requests",
                r.failed, r.no_response, r.requests
            ));
        }
        let Some(planned) = self.planned_iterations() else {
            return Ok(());
        };
        let arrivals = r.iterations.saturating_add(r.dropped);
        if arrivals > planned {
            return Err(format!(
                "{} iterations and {} dropped for a share that plans {planned}",
                r.iterations, r.dropped
            ));
        }
        let most = planned.saturating_mul(self.per_iteration);
        if r.requests > most {
            return Err(format!(
                "{} requests for a share of at most {most} ({planned} iterations of at most {} \
                 requests each)",
                r.requests, self.per_iteration
            ));
        }
        Ok(())
    }

    /// How much of its plan a share that stopped early did not run: when it stopped (of the
    /// planned duration), and the planned iterations it never started, when the plan fixes them.
    pub fn shortfall(&self, r: &RunRecord) -> String {
        let when = format!(
            "it stopped at {:.1} s of its planned {:.1} s",
            r.elapsed.as_secs_f64(),
            self.plan.duration().as_secs_f64()
        );
        match self.planned_iterations() {
            Some(planned) if planned > 0 => {
                let ran = r.iterations.saturating_add(r.dropped).min(planned);
                let missing = planned - ran;
                format!(
                    "{when}: {missing} of its {planned} planned iterations ({:.1}%) never ran",
                    missing as f64 * 100.0 / planned as f64
                )
            }
            _ => when,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rate(per_second: f64, secs: u64) -> Executor {
        Executor::ConstantArrivalRate {
            rate: per_second,
            duration: Duration::from_secs(secs),
            pre_allocated_vus: 10,
            max_vus: 10,
        }
    }

    fn record(requests: u64, failed: u64, iterations: u64, dropped: u64) -> RunRecord {
        // Read at run time: an `include_str!` from tests/ would make the image's build (which
        // copies no tests/) embed a file it does not have.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/it/golden/record-v1.json"
        );
        let mut r: RunRecord =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        r.requests = requests;
        r.failed = failed;
        r.no_response = 0;
        r.iterations = iterations;
        r.dropped = dropped;
        r.elapsed = Duration::from_secs(8);
        r
    }

    #[test]
    fn figures_past_a_shards_plan_are_refused_and_saying_why() {
        // 30/s for 10 s over 3 shards: shard 1 starts 100 iterations of one request.
        let b = Bounds::of(&rate(30.0, 10), Shard::new(1, 3).unwrap(), 1).unwrap();
        assert_eq!(b.check(&record(100, 3, 98, 2)), Ok(()));
        let e = b.check(&record(1_000_000, 1_000_000, 100, 0)).unwrap_err();
        assert!(
            e.contains("1000000 requests for a share of at most 100"),
            "{e}"
        );
        let e = b.check(&record(50, 0, 90, 20)).unwrap_err();
        assert!(e.contains("plans 100"), "{e}");
        let e = b.check(&record(5, 6, 5, 0)).unwrap_err();
        assert!(e.contains("6 failed"), "{e}");
        // A journey of three steps may send three requests an iteration.
        let b = Bounds::of(&rate(30.0, 10), Shard::new(1, 3).unwrap(), 3).unwrap();
        assert_eq!(b.check(&record(300, 0, 100, 0)), Ok(()));
        assert!(b.check(&record(301, 0, 100, 0)).is_err());
    }

    #[test]
    fn a_stopped_share_says_how_much_of_its_plan_never_ran() {
        let b = Bounds::of(&rate(30.0, 20), Shard::new(2, 3).unwrap(), 1).unwrap();
        let said = b.shortfall(&record(80, 0, 80, 0));
        assert!(
            said.contains("stopped at 8.0 s of its planned 20.0 s"),
            "{said}"
        );
        assert!(
            said.contains("120 of its 200 planned iterations (60.0%)"),
            "{said}"
        );
        let s = Share::of(
            &record(80, 0, 80, 0),
            Some(&Abort::Stopped("interrupted by SIGTERM".into())),
            Some("SIGTERM"),
        );
        assert_eq!(s.stopped.as_deref(), Some("interrupted by SIGTERM"));
        let ended = Share::of(
            &record(80, 0, 80, 0),
            Some(&Abort::DataUsedUp("j".into())),
            None,
        );
        assert_eq!(ended.stopped, None);
    }
}
