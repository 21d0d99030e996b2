//! How a run's generator-affected requests (`load::affected`) enter its verdict. Every count
//! stays as measured; a threshold is judged on the run's figures with the affected requests'
//! latencies taken out ([`judged`]: each trend minus theirs, with the exact extremes of the
//! rest). A threshold that passes so but fails on every request measured is one only sloburn's
//! own stall fails: the run is inconclusive (75), named ([`Starved::inconclusive`]), never
//! failed and never passed. One that fails on the rest fails: the target failed it.
//!
//! Pure: no clock, no I/O.

use super::affected::{self, AffectedRecord};
use super::record::{RunRecord, SubValue};
use crate::hist::HistSnapshot;
use crate::http::Phase;
use crate::starve::{Cause, Quota, Sources, Totals};
use crate::thresholds::{ThresholdResult, ThresholdSpec};
use std::borrow::Cow;
use std::time::Duration;

/// The figures a latency verdict reads: `r` with the affected requests' latencies taken out of
/// every trend (counts untouched); `r` itself when none was affected.
pub fn judged(r: &RunRecord) -> Cow<'_, RunRecord> {
    let Some(a) = r.affected.as_deref().filter(|a| a.requests() > 0) else {
        return Cow::Borrowed(r);
    };
    let mut j = r.clone();
    j.affected = None;
    let clean = |i: usize| a.clean.get(i).copied().unwrap_or((u64::MAX, 0));
    without(
        &mut j.duration,
        &a.duration,
        Some(clean(affected::DURATION)),
    );
    without(
        &mut j.corrected,
        &a.corrected,
        Some(clean(affected::CORRECTED)),
    );
    for p in Phase::ALL {
        if let Some(part) = a.phases.get(p as usize) {
            let exact = clean(affected::PHASES + p as usize);
            without(&mut j.phases[p as usize], part, Some(exact));
        }
    }
    if j.journeys.is_empty() {
        let exact = clean(affected::ITERATION);
        without(
            &mut j.iteration_duration,
            &a.iteration_duration,
            Some(exact),
        );
    }
    for (step, part) in j.steps.iter_mut().zip(&a.steps) {
        without(&mut step.duration, part, None);
    }
    for sub in &mut j.subs {
        if let (SubValue::Trend(h), Some((_, part))) =
            (&mut sub.value, a.subs.iter().find(|(k, _)| *k == sub.key))
        {
            without(h, part, None);
        }
    }
    Cow::Owned(j)
}

/// `all` minus `part`; its extremes the exact `(min, max)` of the rest where kept, else its
/// outer buckets' bounds (within 0.54 %).
fn without(all: &mut HistSnapshot, part: &HistSnapshot, exact: Option<(u64, u64)>) {
    if part.count() == 0 {
        return;
    }
    *all = match exact {
        Some((min, max)) if min <= max => all.interval(part, min, max),
        _ => all.since(part),
    };
}

/// Judges `specs` on `r` ([`judged`]); also returns the thresholds (`metric: expr`) that pass so
/// but fail on every request measured.
pub fn judge(
    r: &RunRecord,
    specs: impl Iterator<Item = ThresholdSpec>,
) -> (Vec<(ThresholdSpec, ThresholdResult)>, Vec<String>) {
    let j = judged(r);
    let results: Vec<_> = specs
        .map(|t| {
            let result = t.threshold.evaluate(&*j);
            (t, result)
        })
        .collect();
    let would_fail = match &j {
        Cow::Borrowed(_) => Vec::new(),
        Cow::Owned(_) => results
            .iter()
            .filter(|(t, res)| res.passed && !t.threshold.evaluate(r).passed)
            .map(|(t, _)| t.threshold.to_string())
            .collect(),
    };
    (results, would_fail)
}

/// What sloburn's starvation watch saw during a run: its starved time per cause and the
/// cgroup's throttling, what it could read, and the CPU quota.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Starved {
    pub during: Totals,
    pub sources: Option<Sources>,
    pub quota: Option<Quota>,
}

impl Starved {
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
                let quota = self.quota.map(|q| {
                    format!(
                        "; quota {}ms per {}ms = {:.2} CPU",
                        q.quota_us / 1000,
                        q.period_us / 1000,
                        q.cpus()
                    )
                });
                part.push_str(&format!(
                    " ({} throttled periods, {} by the kernel's count{})",
                    d.throttled_periods,
                    secs(d.throttled),
                    quota.unwrap_or_default()
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

    /// What the watch could not read, if anything: its figures lack that witness. Kernel
    /// transmit stamps are not taken yet: `sending` is timed in user space.
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

    /// The verdict's reason when thresholds (`would_fail`) fail only with the affected
    /// requests' latencies in.
    pub fn inconclusive(
        starved: Option<&Starved>,
        r: &RunRecord,
        would_fail: &[String],
    ) -> Option<String> {
        if would_fail.is_empty() {
            return None;
        }
        let affected = r.affected.as_deref().map_or(0, AffectedRecord::requests);
        let why = starved.map_or_else(|| "seen by a shard".into(), Starved::why);
        Some(format!(
            "inconclusive: threshold(s) {} fail only with the latencies of the {affected} \
             generator-affected requests ({:.2}%) that sloburn's own CPU starvation explains \
             ({why}); the other requests pass. Give sloburn more CPU (a higher limits.cpu, no \
             busier process on its cores) or a lower rate and run again",
            would_fail
                .iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", "),
            affected as f64 * 100.0 / r.requests.max(1) as f64,
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
    use crate::load::affected::Extremes;
    use crate::load::event::Observer;
    use crate::load::stats::RunStats;

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

    /// A run of `clean` and `affected` latencies (ms): every request in the run's figures, the
    /// affected ones also apart.
    fn run(clean: &[u64], hit: &[u64]) -> RunRecord {
        let all = RunStats::new(&[]);
        let twin = RunStats::new(&[]);
        let extremes = Extremes::default();
        for ms in clean {
            all.request_finished(0, &ok(*ms), Duration::ZERO, &[]);
            extremes.record(&ok(*ms), true, |_| 0);
        }
        for ms in hit {
            all.request_finished(0, &ok(*ms), Duration::ZERO, &[]);
            twin.request_finished(0, &ok(*ms), Duration::ZERO, &[]);
        }
        let mut r = all.snapshot(Duration::from_secs(1));
        let t = twin.snapshot(Duration::from_secs(1));
        r.affected = (!hit.is_empty()).then(|| {
            Box::new(AffectedRecord {
                by_cause: [hit.len() as u64, 0, 0],
                duration: t.duration,
                corrected: t.corrected,
                phases: t.phases.to_vec(),
                iteration_duration: t.iteration_duration,
                steps: t.steps.into_iter().map(|s| s.duration).collect(),
                subs: Vec::new(),
                clean: extremes.read(),
            })
        });
        r
    }

    fn spec(expr: &str) -> ThresholdSpec {
        ThresholdSpec::parse("http_req_duration", expr, false, None).unwrap()
    }

    #[test]
    fn a_threshold_only_affected_latencies_fail_is_inconclusive_and_counts_stay() {
        let mut clean = vec![1; 98];
        clean.push(7);
        let r = run(&clean, &[92]);
        let j = judged(&r);
        // Every count as measured; the latency verdict without the 92 ms, its max exact.
        assert_eq!((r.requests, j.requests, j.iterations), (100, 100, 100));
        assert_eq!(j.duration.count(), 99);
        assert_eq!(j.duration.max(), Duration::from_millis(7));
        assert_eq!(r.duration.max(), Duration::from_millis(92));
        let (results, would_fail) = judge(&r, [spec("max<50"), spec("p(50)<5")].into_iter());
        assert!(results.iter().all(|(_, res)| res.passed));
        assert_eq!(would_fail, vec!["http_req_duration: max<50".to_string()]);
        let why = Starved::inconclusive(None, &r, &would_fail).unwrap();
        assert!(why.contains("`http_req_duration: max<50`"), "{why}");
        assert!(
            why.contains("the 1 generator-affected requests (1.00%)"),
            "{why}"
        );
    }

    #[test]
    fn a_threshold_the_other_requests_fail_fails_and_one_all_pass_passes() {
        // The target's own 70 ms fails max<50 whatever sloburn did.
        let r = run(&[1, 70], &[92]);
        let (results, would_fail) = judge(&r, [spec("max<50"), spec("max<100")].into_iter());
        assert!(!results[0].1.passed);
        assert!(results[1].1.passed);
        assert!(would_fail.is_empty());
        // Nothing affected: the record itself, nothing to excuse.
        let r = run(&[1, 2], &[]);
        assert!(matches!(judged(&r), Cow::Borrowed(_)));
        assert!(judge(&r, [spec("max<1")].into_iter()).1.is_empty());
    }
}
