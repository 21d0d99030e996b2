//! What sloburn's own CPU starvation did to a run ([`Starved`]): the requests it affected (kept
//! out of the run's figures, `load::observe`), what starved it, and the thresholds that pass on
//! the run's figures but would fail with the affected requests in. Such a threshold makes the
//! run inconclusive (75), never failed: the target was measured fine, sloburn was not.
//!
//! A threshold that fails on the run's own figures fails: the requests measured cleanly failed
//! it. One that passes with the affected requests in passes: sloburn's stall only ever adds
//! time, and the target met the threshold even so.

use super::record::RunRecord;
use crate::starve::{Cause, Quota, Sources, Starvation, Totals};
use crate::thresholds::{ThresholdResult, ThresholdSpec};
use std::time::Duration;

/// A run's generator-affected requests and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Starved {
    /// Requests that overlapped a starvation of sloburn (`RunRecord::generator_affected`).
    pub affected: u64,
    /// Every request the run finished, the affected ones included.
    pub requests: u64,
    /// Thresholds (`metric: expr`) the run's figures pass and the affected requests would fail.
    pub would_fail: Vec<String>,
    /// The longest `http_req_duration` among the affected requests: what the target would
    /// have been charged.
    pub affected_max: Duration,
    /// What the watch saw during the run.
    pub during: Totals,
    /// What the watch could read.
    pub sources: Option<Sources>,
    /// The cgroup's CPU quota, if it has one.
    pub quota: Option<Quota>,
}

impl Starved {
    /// The run's figures are `clean`, the affected requests' own `affected` (of the same
    /// shape); `results` are the thresholds judged on `clean`.
    pub fn of(
        watch: &Starvation,
        before: &Totals,
        clean: &RunRecord,
        affected: Option<RunRecord>,
        results: &[(ThresholdSpec, ThresholdResult)],
    ) -> Starved {
        let mut would_fail = Vec::new();
        let mut affected_max = Duration::ZERO;
        if let Some(a) = affected.filter(|a| a.requests > 0) {
            if a.duration.count() > 0 {
                affected_max = a.duration.max();
            }
            let mut all = clean.clone();
            if all.merge(&a).is_ok() {
                would_fail = results
                    .iter()
                    .filter(|(t, r)| r.passed && !t.threshold.evaluate(&all).passed)
                    .map(|(t, _)| t.threshold.to_string())
                    .collect();
            }
        }
        Starved {
            affected: clean.generator_affected,
            requests: clean.requests + clean.generator_affected,
            would_fail,
            affected_max,
            during: watch.totals().since(before),
            sources: watch.sources().cloned(),
            quota: watch.quota(),
        }
    }

    pub fn share(&self) -> f64 {
        self.affected as f64 / self.requests.max(1) as f64
    }

    /// Why, in a line: each cause that starved sloburn during the run, with its time, and the
    /// cgroup's throttled periods.
    pub fn why(&self) -> String {
        let d = &self.during;
        let mut parts = Vec::new();
        for c in Cause::ALL {
            let t = d.starved[c as usize];
            if t.is_zero() && d.affected[c as usize] == 0 {
                continue;
            }
            let mut part = format!("{} {}", c.as_str(), secs(t));
            if c == Cause::Throttled {
                part.push_str(&format!(
                    " ({} throttled periods, {} by the kernel's count{})",
                    d.throttled_periods,
                    secs(d.throttled),
                    self.quota
                        .map(|q| format!(
                            "; quota {}ms per {}ms = {:.2} CPU",
                            q.quota_us / 1000,
                            q.period_us / 1000,
                            q.cpus()
                        ))
                        .unwrap_or_default()
                ));
            }
            parts.push(part);
        }
        if parts.is_empty() {
            "no starvation seen".into()
        } else {
            parts.join(", ")
        }
    }

    /// What the watch could not read, if anything: its figures lack that witness.
    pub fn blind_spots(&self) -> Vec<String> {
        let mut out = Vec::new();
        match &self.sources {
            None => out.push("the starvation watch never started".to_string()),
            Some(s) => {
                if let Err(why) = &s.cgroup {
                    out.push(format!("no cgroup throttling read: {why}"));
                }
                if !s.schedstat {
                    out.push("no run-queue delay read (/proc/self/task/*/schedstat)".into());
                }
            }
        }
        out
    }

    /// The verdict's reason when a threshold fails only through affected requests, or when
    /// every request was affected (nothing measured cleanly: never a pass on no evidence).
    pub fn inconclusive(&self) -> Option<String> {
        if self.affected > 0 && self.affected == self.requests && self.would_fail.is_empty() {
            return Some(format!(
                "inconclusive: all {} requests overlapped sloburn's own CPU starvation ({}), so \
                 none measured the target alone; give sloburn more CPU or a lower rate and run \
                 again",
                self.affected,
                self.why()
            ));
        }
        if self.would_fail.is_empty() {
            return None;
        }
        Some(format!(
            "inconclusive: threshold(s) {} fail only with the {} generator-affected requests \
             ({:.2}%) that overlapped sloburn's own CPU starvation ({}); the requests measured \
             cleanly pass. Give sloburn more CPU (a higher limits.cpu, no busier process on its \
             cores) or a lower rate and run again",
            self.would_fail
                .iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", "),
            self.affected,
            self.share() * 100.0,
            self.why()
        ))
    }
}

fn secs(d: Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{Outcome, Phases};
    use crate::load::event::Observer;
    use crate::load::stats::RunStats;
    use crate::starve::Starvation;

    fn ok(ms: u64) -> Outcome {
        Outcome {
            status: Some(200),
            phases: Phases {
                waiting: Duration::from_millis(ms),
                ..Phases::default()
            },
            ..Outcome::default()
        }
    }

    fn judged(spec: &ThresholdSpec, clean: &RunStats, affected: &RunStats) -> Starved {
        let record = clean.snapshot(Duration::from_secs(1));
        let results = vec![(spec.clone(), spec.threshold.evaluate(&record))];
        let watch = Starvation::new();
        let before = watch.totals();
        let a = affected.snapshot(Duration::from_secs(1));
        Starved::of(&watch, &before, &record, Some(a), &results)
    }

    #[test]
    fn a_threshold_only_affected_requests_fail_is_inconclusive_never_failed() {
        let spec = ThresholdSpec::parse("http_req_duration", "max<50", false, None).unwrap();
        let clean = RunStats::new(&[]);
        let affected = RunStats::new(&[]);
        for _ in 0..99 {
            clean.request_finished(0, &ok(1), Duration::ZERO, &[]);
        }
        // A request held 92 ms by sloburn's quota: its own figures, counted in the run's.
        affected.request_finished(0, &ok(92), Duration::ZERO, &[]);
        clean.request_affected(0, None, &ok(92), Duration::ZERO, &[], Cause::Throttled);
        let st = judged(&spec, &clean, &affected);
        assert_eq!((st.affected, st.requests), (1, 100));
        assert_eq!(st.would_fail, vec!["http_req_duration: max<50".to_string()]);
        assert_eq!(st.affected_max, Duration::from_millis(92));
        let why = st.inconclusive().unwrap();
        assert!(why.contains("`http_req_duration: max<50`"), "{why}");
        assert!(
            why.contains("1 generator-affected requests (1.00%)"),
            "{why}"
        );
        // One the clean requests fail is the target's: not the starvation's to excuse.
        clean.request_finished(0, &ok(70), Duration::ZERO, &[]);
        let st = judged(&spec, &clean, &affected);
        assert!(st.would_fail.is_empty());
        assert_eq!(st.inconclusive(), None);
    }

    #[test]
    fn a_threshold_that_passes_with_the_affected_requests_in_passes() {
        let spec = ThresholdSpec::parse("http_req_duration", "max<100", false, None).unwrap();
        let clean = RunStats::new(&[]);
        let affected = RunStats::new(&[]);
        clean.request_finished(0, &ok(1), Duration::ZERO, &[]);
        affected.request_finished(0, &ok(92), Duration::ZERO, &[]);
        let st = judged(&spec, &clean, &affected);
        assert!(st.would_fail.is_empty());
        assert_eq!(st.inconclusive(), None);
    }

    #[test]
    fn a_run_whose_every_request_was_affected_is_never_passed() {
        let spec = ThresholdSpec::parse("http_req_duration", "max<100", false, None).unwrap();
        let clean = RunStats::new(&[]);
        let affected = RunStats::new(&[]);
        affected.request_finished(0, &ok(92), Duration::ZERO, &[]);
        clean.request_affected(0, None, &ok(92), Duration::ZERO, &[], Cause::RunQueue);
        let st = judged(&spec, &clean, &affected);
        assert!(st.would_fail.is_empty());
        let why = st.inconclusive().unwrap();
        assert!(why.contains("all 1 requests overlapped"), "{why}");
    }
}
