//! What passes a step: the `--threshold`s and the profile's thresholds (k6 syntax), and the
//! SLOs on the profile's target, read from one step's [`RunRecord`]. Pure: no clock, no I/O.
//!
//! - A threshold on `http_req_duration` (no tag filter) is read from the corrected duration
//!   (`http_req_corrected_duration`: from each arrival's intended start), so a queue in front
//!   of the target, or a VU that started late, counts against the step. A request that got no
//!   answer (a timeout, a reset) or an arrival turned away with every VU held (`saturated`) is
//!   counted slower than any limit, in the thresholds on the whole run's latency and in the
//!   latency SLOs: a target that stops answering past its capacity never passes on the few
//!   answers it still gives.
//! - A latency SLO (`under: U`, objective `o`) passes when `p(100·o)` of its duration is under
//!   `U`; an availability SLO when the step's bad share (failed steps: status, error, check;
//!   and arrivals turned away because every VU waited on the target) is at most `1 − o`.
//! - A step is inconclusive, never passed or failed, when sloburn itself could not hold the
//!   rate, as `run` attributes it (`RunReport::inconclusive`): the generator dropped arrivals
//!   of its own and a condition failed, or more than `INCONCLUSIVE_SHARE` of them; local
//!   errors (descriptors, ports) were most of the requests; or nothing was measured.

use super::search::Verdict;
use crate::config::{Sli, Slo};
use crate::load::record::RunRecord;
use crate::load::runner::{Abort, INCONCLUSIVE_SHARE, RunReport};
use crate::thresholds::{Aggregation, MetricKind, Op, ThresholdSpec};
use serde::Serialize;
use std::time::Duration;

/// One pass condition of a step.
#[derive(Debug, Clone)]
pub enum Condition {
    /// `shown` is the threshold as the user wrote it (`http_req_duration: p(95)<50`); `spec` is
    /// what is evaluated (its metric corrected, see the module header).
    Threshold { shown: String, spec: ThresholdSpec },
    Slo {
        name: String,
        objective: f64,
        kind: SloKind,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum SloKind {
    Availability,
    Latency { under: Duration, corrected: bool },
}

impl Condition {
    /// A threshold as capacity reads it, or why it cannot decide a capacity: a counter or
    /// gauge grows with the rate it is given, whatever the target does.
    pub fn threshold(spec: &ThresholdSpec) -> Result<Condition, String> {
        let t = &spec.threshold;
        let shown = t.to_string();
        match t.target.kind {
            MetricKind::Counter if t.metric == "dropped_iterations" => {}
            MetricKind::Counter | MetricKind::Gauge => {
                return Err(format!(
                    "threshold `{shown}` cannot decide a capacity: `{}` follows the rate each \
                     step is given, not how the target holds it; use a latency \
                     (http_req_duration), http_req_failed or checks threshold",
                    t.metric
                ));
            }
            _ => {}
        }
        let mut spec = spec.clone();
        if t.metric == "http_req_duration" {
            let source = t.source.clone();
            spec.threshold = crate::thresholds::parse("http_req_corrected_duration", &source)
                .map_err(|e| format!("threshold `{shown}`: {e}"))?;
        }
        Ok(Condition::Threshold { shown, spec })
    }

    /// The SLO as a step's condition.
    pub fn slo(slo: &Slo) -> Condition {
        let kind = match &slo.sli {
            Sli::Availability => SloKind::Availability,
            Sli::Latency {
                under, corrected, ..
            } => SloKind::Latency {
                under: *under,
                corrected: *corrected,
            },
        };
        Condition::Slo {
            name: slo.name.clone(),
            objective: slo.objective / 100.0,
            kind,
        }
    }

    /// What the output names it by.
    pub fn name(&self) -> String {
        match self {
            Condition::Threshold { shown, .. } => shown.clone(),
            Condition::Slo { name, .. } => format!("SLO {name}"),
        }
    }

    /// Requests a step needs for this condition's figure to mean something: twenty beyond a
    /// percentile (400 for p(95)), twenty bad ones for a ratio.
    pub fn requests_needed(&self) -> u64 {
        let tail = match self {
            Condition::Threshold { spec, .. } => match spec.threshold.aggregation {
                Aggregation::Percentile(n) => 1.0 - n / 100.0,
                Aggregation::Rate if spec.threshold.value > 0.0 => spec
                    .threshold
                    .value
                    .min(1.0 - spec.threshold.value)
                    .max(1e-4),
                _ => 0.2,
            },
            Condition::Slo { objective, .. } => 1.0 - objective,
        };
        (20.0 / tail.max(1e-4)).ceil() as u64
    }

    fn evaluate(&self, stats: &RunRecord) -> Figure {
        match self {
            Condition::Threshold { shown, spec } => {
                let t = &spec.threshold;
                let r = t.evaluate(stats);
                let unit = match t.target.kind {
                    MetricKind::Trend => "ms",
                    MetricKind::Rate => "ratio",
                    _ => "count",
                };
                let unanswered = unanswered(stats);
                if let Some(observed) = latency_with_unanswered(t, stats, unanswered) {
                    let mut f = Figure::new(shown.clone(), observed, t.value, unit, t.op);
                    f.unanswered = unanswered;
                    return f;
                }
                let mut f = Figure::new(shown.clone(), r.observed, t.value, unit, t.op);
                // k6's no-data rules decide (a rate with no sample passes).
                f.passed = r.passed;
                f.no_data = r.no_data;
                f
            }
            Condition::Slo {
                name,
                objective,
                kind,
            } => slo_figure(name, *objective, kind, stats),
        }
    }
}

/// Requests with no latency: no response head (a timeout, a reset, a refused connection) and
/// arrivals turned away because every VU waited on the target.
fn unanswered(stats: &RunRecord) -> u64 {
    stats.no_response + stats.dropped_by(crate::load::pacing::DropReason::Saturated)
}

/// A whole-run latency threshold (`http_req_duration`, read corrected, or
/// `http_req_corrected_duration`, no tag filter) with the unanswered requests counted as slower
/// than any limit: else a target that stops answering past its capacity would pass on the few
/// answers it still gives. `None` for other thresholds, or when every request was answered.
fn latency_with_unanswered(
    t: &crate::thresholds::Threshold,
    stats: &RunRecord,
    unanswered: u64,
) -> Option<f64> {
    if unanswered == 0 || t.metric != "http_req_corrected_duration" {
        return None;
    }
    let h = &stats.corrected;
    let answered = h.count();
    let quantile = |q: f64| quantile_with(h, unanswered, q);
    Some(match t.aggregation {
        Aggregation::Percentile(n) => quantile(n / 100.0),
        Aggregation::Med => quantile(0.5),
        Aggregation::Min if answered > 0 => h.min().as_secs_f64() * 1e3,
        _ => f64::INFINITY,
    })
}

/// The `q` quantile in milliseconds of `h`'s latencies and `unanswered` more, slower than any.
fn quantile_with(h: &crate::hist::HistSnapshot, unanswered: u64, q: f64) -> f64 {
    let answered = h.count();
    let rank = (q * (answered + unanswered) as f64).ceil().max(1.0);
    if rank > answered as f64 {
        f64::INFINITY
    } else {
        h.quantile(rank / answered as f64).as_secs_f64() * 1e3
    }
}

fn slo_figure(name: &str, objective: f64, kind: &SloKind, stats: &RunRecord) -> Figure {
    let shown = format!("SLO {name}");
    match kind {
        SloKind::Latency { under, corrected } => {
            let h = if *corrected {
                &stats.corrected
            } else {
                &stats.duration
            };
            let unanswered = unanswered(stats);
            let observed = quantile_with(h, unanswered, objective);
            let mut f = Figure::new(shown, observed, under.as_secs_f64() * 1e3, "ms", Op::Le);
            f.no_data = h.count() == 0 && unanswered == 0;
            f.unanswered = unanswered;
            f.condition = format!("{} (p({}) of its latency)", f.condition, objective * 100.0);
            f
        }
        SloKind::Availability => {
            let saturated = stats.dropped_by(crate::load::pacing::DropReason::Saturated);
            let bad: u64 = stats
                .steps
                .iter()
                .map(|s| s.failures.iter().sum::<u64>())
                .sum::<u64>()
                + saturated;
            let total = stats.requests + saturated;
            let ratio = if total > 0 {
                bad as f64 / total as f64
            } else {
                0.0
            };
            let mut f = Figure::new(shown, ratio, 1.0 - objective, "ratio", Op::Le);
            f.no_data = total == 0;
            f.condition = format!("{} (bad share)", f.condition);
            f
        }
    }
}

/// One condition's figure in one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    pub condition: String,
    /// Milliseconds for latencies, a ratio for rates.
    pub observed: f64,
    pub limit: f64,
    pub unit: &'static str,
    pub passed: bool,
    pub no_data: bool,
    /// How near the limit, 1 at it: observed ÷ limit for an upper bound, its inverse for a
    /// lower one.
    pub load: f64,
    /// Requests counted with no latency (slower than any limit) in a latency figure.
    pub unanswered: u64,
}

impl Figure {
    fn new(condition: String, observed: f64, limit: f64, unit: &'static str, op: Op) -> Figure {
        let passed = op.holds(observed, limit);
        let ratio = |a: f64, b: f64| {
            if b > 0.0 {
                a / b
            } else if a > 0.0 {
                f64::INFINITY
            } else {
                0.0
            }
        };
        let load = match op {
            Op::Lt | Op::Le => ratio(observed, limit),
            Op::Gt | Op::Ge => ratio(limit, observed),
            _ if passed => 0.0,
            _ => f64::INFINITY,
        };
        Figure {
            condition,
            observed,
            limit,
            unit,
            passed,
            no_data: false,
            load,
            unanswered: 0,
        }
    }

    /// `p(95)<50: 21.3ms (43% of the limit)`.
    pub fn said(&self) -> String {
        let value = match self.unit {
            "ms" => format!("{:.2}ms", self.observed),
            "ratio" => format!("{:.4}", self.observed),
            _ => format!("{}", self.observed),
        };
        if self.no_data {
            return format!("{} had no data", self.condition);
        }
        if self.observed.is_infinite() {
            return format!(
                "{} failed: {} requests got no answer (counted slower than any limit)",
                self.condition, self.unanswered
            );
        }
        let load = if self.load.is_finite() {
            format!(" ({:.0}% of the limit)", self.load * 100.0)
        } else {
            String::new()
        };
        format!("{} was {value}{load}", self.condition)
    }
}

/// How one step judged the target.
#[derive(Debug, Clone)]
pub struct Judgement {
    pub verdict: Verdict,
    pub figures: Vec<Figure>,
    /// The figure that decided: the failed one nearest past its limit, or on a pass the one
    /// nearest its limit.
    pub deciding: Option<usize>,
    /// Why the step is inconclusive.
    pub why: Option<String>,
}

impl Judgement {
    pub fn deciding(&self) -> Option<&Figure> {
        self.deciding.map(|i| &self.figures[i])
    }
}

/// Judges one step's report against `conditions`.
pub fn judge(conditions: &[Condition], report: &RunReport) -> Judgement {
    let s = &report.stats;
    let figures: Vec<Figure> = conditions.iter().map(|c| c.evaluate(s)).collect();
    let aborted = matches!(report.aborted, Some(Abort::Threshold(_)));
    let failed = aborted || figures.iter().any(|f| !f.passed);
    let nearest = |only_failed: bool| {
        figures
            .iter()
            .enumerate()
            .filter(|(_, f)| !only_failed || !f.passed)
            .max_by(|a, b| a.1.load.total_cmp(&b.1.load))
            .map(|(i, _)| i)
    };
    let deciding = if failed {
        nearest(true).or(nearest(false))
    } else {
        nearest(false)
    };
    let why = generator_limited(s, failed);
    let verdict = match (&why, failed) {
        (Some(_), _) => Verdict::Inconclusive,
        (None, true) => Verdict::Fail,
        (None, false) => Verdict::Pass,
    };
    Judgement {
        verdict,
        figures,
        deciding,
        why,
    }
}

/// Why sloburn, not the target, decided this step, if it did (`RunReport::inconclusive`'s rule,
/// with every condition of the step, SLOs included).
fn generator_limited(s: &RunRecord, failed: bool) -> Option<String> {
    if s.requests == 0 && s.dropped == 0 {
        return Some("no request finished, so nothing was measured".into());
    }
    if s.local_errors_dominate() {
        return Some(format!(
            "{} of {} requests failed in sloburn itself (out of descriptors or ports)",
            s.local_errors(),
            s.requests
        ));
    }
    let overloaded = s.generator_overloaded();
    let arrivals = (s.iterations + s.dropped).max(1);
    let share = overloaded as f64 / arrivals as f64;
    if overloaded == 0 || (!failed && share <= INCONCLUSIVE_SHARE) {
        return None;
    }
    Some(format!(
        "sloburn fell behind and dropped {overloaded} of {arrivals} arrivals ({:.1}%): not the \
         target's doing",
        share * 100.0
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::pacing::DropReason;

    fn record(latencies_ms: &[u64], failed: u64) -> RunRecord {
        let h = crate::hist::Histogram::new();
        for ms in latencies_ms {
            h.record(Duration::from_millis(*ms));
        }
        let mut r = crate::load::stats::RunStats::new(&[]).snapshot(Duration::from_secs(1));
        r.duration = h.snapshot();
        r.corrected = h.snapshot();
        r.requests = latencies_ms.len() as u64;
        r.iterations = r.requests;
        r.failed = failed;
        r.dropped = 0;
        r.dropped_by = [0; DropReason::ALL.len()];
        r.errors.clear();
        r.subs.clear();
        r
    }

    fn report(stats: RunRecord) -> RunReport {
        RunReport {
            stats,
            thresholds: Vec::new(),
            aborted: None,
            starved: None,
            would_fail: Vec::new(),
        }
    }

    fn p95_under(ms: &str) -> Condition {
        let spec =
            ThresholdSpec::parse("http_req_duration", &format!("p(95)<{ms}"), false, None).unwrap();
        Condition::threshold(&spec).unwrap()
    }

    #[test]
    fn a_latency_threshold_reads_the_corrected_duration_and_decides() {
        let c = [p95_under("50")];
        let mut r = record(&[10; 100], 0);
        assert_eq!(judge(&c, &report(r.clone())).verdict, Verdict::Pass);
        // Same responses, but the arrivals waited: the corrected duration fails it.
        let slow = crate::hist::Histogram::new();
        for _ in 0..100 {
            slow.record(Duration::from_millis(80));
        }
        r.corrected = slow.snapshot();
        let j = judge(&c, &report(r));
        assert_eq!(j.verdict, Verdict::Fail);
        let d = j.deciding().unwrap();
        assert!((d.observed - 80.0).abs() < 1.0, "{d:?}");
        assert_eq!(d.condition, "http_req_duration: p(95)<50");
        assert!(d.said().contains("was 80"), "{}", d.said());
    }

    #[test]
    fn the_generators_own_drops_make_a_failed_step_inconclusive() {
        let c = [p95_under("50")];
        let mut r = record(&[80; 100], 0);
        r.dropped = 5;
        r.dropped_by[DropReason::Late as usize] = 5;
        let j = judge(&c, &report(r.clone()));
        assert_eq!(j.verdict, Verdict::Inconclusive);
        assert!(j.why.unwrap().contains("dropped 5 of 105"));
        // Saturated drops are the target's: a plain fail.
        r.dropped_by = [0; DropReason::ALL.len()];
        r.dropped_by[DropReason::Saturated as usize] = 5;
        assert_eq!(judge(&c, &report(r)).verdict, Verdict::Fail);
        // Nothing measured is never a pass.
        let empty = record(&[], 0);
        assert_eq!(judge(&c, &report(empty)).verdict, Verdict::Inconclusive);
    }

    /// A target that stops answering past its capacity must not pass on the answers it gave.
    #[test]
    fn unanswered_requests_are_slower_than_any_limit() {
        let c = [p95_under("50")];
        let mut r = record(&[10; 100], 0);
        r.no_response = 3;
        r.requests = 103;
        let j = judge(&c, &report(r.clone()));
        assert_eq!(j.verdict, Verdict::Pass, "3 of 103 are within the 5 %");
        r.no_response = 10;
        r.requests = 110;
        let j = judge(&c, &report(r));
        assert_eq!(j.verdict, Verdict::Fail);
        let d = j.deciding().unwrap();
        assert!(d.observed.is_infinite() && d.unanswered == 10, "{d:?}");
        assert!(
            d.said().contains("10 requests got no answer"),
            "{}",
            d.said()
        );
    }

    #[test]
    fn slos_are_conditions() {
        let latency = Condition::Slo {
            name: "lat".into(),
            objective: 0.9,
            kind: SloKind::Latency {
                under: Duration::from_millis(30),
                corrected: true,
            },
        };
        let avail = Condition::Slo {
            name: "up".into(),
            objective: 0.99,
            kind: SloKind::Availability,
        };
        let mut lat = vec![10; 95];
        lat.extend([100; 5]);
        let r = record(&lat, 0);
        let j = judge(&[latency.clone(), avail.clone()], &report(r));
        assert_eq!(j.verdict, Verdict::Pass, "{:?}", j.figures);
        let mut lat = vec![10; 80];
        lat.extend([100; 20]);
        let j = judge(&[latency, avail], &report(record(&lat, 0)));
        assert_eq!(j.verdict, Verdict::Fail);
        assert_eq!(
            j.deciding().unwrap().condition,
            "SLO lat (p(90) of its latency)"
        );
    }

    #[test]
    fn counters_and_gauges_cannot_decide_a_capacity() {
        let spec = ThresholdSpec::parse("http_reqs", "rate>100", false, None).unwrap();
        let e = Condition::threshold(&spec).unwrap_err();
        assert!(e.contains("cannot decide a capacity"), "{e}");
        let spec = ThresholdSpec::parse("vus", "value<10", false, None).unwrap();
        assert!(Condition::threshold(&spec).is_err());
        let spec = ThresholdSpec::parse("http_req_failed", "rate<0.01", false, None).unwrap();
        let c = Condition::threshold(&spec).unwrap();
        assert_eq!(c.requests_needed(), 2000);
        assert_eq!(p95_under("50").requests_needed(), 400);
    }
}
