//! One run's figures as shards exchange them ([`Shares`]), and their sum: a sharded run's
//! verdict is the profile's thresholds evaluated once on every shard's figures added together
//! (histogram buckets, counts, check passes and fails, error classes), never on averaged
//! percentiles. Pure: no I/O.
//!
//! The wire form is the [`StatsSnapshot`] minus what a shard can rebuild from its own config
//! (the sub-metrics' parsed names): every shard runs the same profile, so its steps, checks and
//! sub-metrics come in the same order with the same names, and a share that differs (another
//! config) is refused, never added in the wrong place.

use super::iteration::{IterationResult, StepFailure};
use super::pacing::DropReason;
use super::snapshot::{JourneySnapshot, StatsSnapshot, StepSnapshot};
use super::subs::SubValue;
use crate::hist::HistSnapshot;
use crate::http::ErrorClass;
use crate::thresholds::RateValue;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A finished share of a run, as one shard reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Shares {
    pub elapsed_ns: u64,
    pub duration: HistSnapshot,
    pub corrected: HistSnapshot,
    pub phases: Vec<HistSnapshot>,
    pub iteration_duration: HistSnapshot,
    pub group_duration: HistSnapshot,
    pub lateness: HistSnapshot,
    pub requests: u64,
    pub failed: u64,
    pub no_response: u64,
    pub statuses: Vec<(u16, u64)>,
    /// By the error class's name (`ErrorClass::as_str`).
    pub errors: Vec<(String, u64)>,
    pub checks: Vec<(String, u64, u64)>,
    pub data_sent: u64,
    pub data_received: u64,
    pub iterations: u64,
    pub dropped: u64,
    pub dropped_by: Vec<u64>,
    pub vus: u32,
    pub vus_low: u32,
    pub vus_high: u32,
    pub vus_max: u32,
    /// Each sub-metric's key and figures, in the snapshot's order.
    pub subs: Vec<(String, SubShare)>,
    pub steps: Vec<StepShare>,
    pub journeys: Vec<JourneyShare>,
}

/// A sub-metric's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum SubShare {
    Trend(HistSnapshot),
    Rate { hits: u64, total: u64 },
    Counter(u64),
    Whole,
    Empty,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepShare {
    pub name: String,
    pub journey: Option<String>,
    pub checks: Vec<(String, u64, u64)>,
    pub requests: u64,
    pub failed: u64,
    pub duration: HistSnapshot,
    pub group_duration: HistSnapshot,
    pub failures: Vec<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JourneyShare {
    pub name: String,
    pub results: Vec<u64>,
    pub duration: HistSnapshot,
}

impl Shares {
    /// The wire form of a finished snapshot.
    pub fn of(s: &StatsSnapshot) -> Shares {
        Shares {
            elapsed_ns: u64::try_from(s.elapsed.as_nanos()).unwrap_or(u64::MAX),
            duration: s.duration.clone(),
            corrected: s.corrected.clone(),
            phases: s.phases.to_vec(),
            iteration_duration: s.iteration_duration.clone(),
            group_duration: s.group_duration.clone(),
            lateness: s.lateness.clone(),
            requests: s.requests,
            failed: s.failed,
            no_response: s.no_response,
            statuses: s.statuses.clone(),
            errors: s
                .errors
                .iter()
                .map(|(e, n)| (e.as_str().to_string(), *n))
                .collect(),
            checks: s.checks.clone(),
            data_sent: s.data_sent,
            data_received: s.data_received,
            iterations: s.iterations,
            dropped: s.dropped,
            dropped_by: s.dropped_by.to_vec(),
            vus: s.vus,
            vus_low: s.vus_low,
            vus_high: s.vus_high,
            vus_max: s.vus_max,
            subs: s
                .subs
                .iter()
                .map(|sub| {
                    let v = match &sub.value {
                        SubValue::Trend(h) => SubShare::Trend(h.clone()),
                        SubValue::Rate(r) => SubShare::Rate {
                            hits: r.hits,
                            total: r.total,
                        },
                        SubValue::Counter(n) => SubShare::Counter(*n),
                        SubValue::Whole => SubShare::Whole,
                        SubValue::Empty => SubShare::Empty,
                    };
                    (sub.key.clone(), v)
                })
                .collect(),
            steps: s
                .steps
                .iter()
                .map(|st| StepShare {
                    name: st.name.clone(),
                    journey: st.journey.clone(),
                    checks: st.checks.clone(),
                    requests: st.requests,
                    failed: st.failed,
                    duration: st.duration.clone(),
                    group_duration: st.group_duration.clone(),
                    failures: st.failures.to_vec(),
                })
                .collect(),
            journeys: s
                .journeys
                .iter()
                .map(|j| JourneyShare {
                    name: j.name.clone(),
                    results: j.results.to_vec(),
                    duration: j.duration.clone(),
                })
                .collect(),
        }
    }
}

/// Why a share cannot be added: it is not the same run's shape, or not a histogram's data.
fn differ(what: &str) -> String {
    format!("its figures do not fit this run ({what}): is it running another config?")
}

fn add_hist(into: &mut HistSnapshot, from: &HistSnapshot, what: &str) -> Result<(), String> {
    from.check()
        .map_err(|e| format!("its `{what}` histogram is broken: {e}"))?;
    into.merge(from);
    Ok(())
}

fn add_checks(
    into: &mut [(String, u64, u64)],
    from: &[(String, u64, u64)],
    what: &str,
) -> Result<(), String> {
    if into.len() != from.len() || into.iter().zip(from).any(|(a, b)| a.0 != b.0) {
        return Err(differ(&format!("the checks of {what}")));
    }
    for (a, b) in into.iter_mut().zip(from) {
        a.1 = a.1.saturating_add(b.1);
        a.2 = a.2.saturating_add(b.2);
    }
    Ok(())
}

fn add_counts(into: &mut [u64], from: &[u64], what: &str) -> Result<(), String> {
    if into.len() != from.len() {
        return Err(differ(what));
    }
    for (a, b) in into.iter_mut().zip(from) {
        *a = a.saturating_add(*b);
    }
    Ok(())
}

/// Adds `(key, count)` lists, keyed by `key`, kept in ascending key order.
fn add_keyed<K: Ord + Clone>(into: &mut Vec<(K, u64)>, from: &[(K, u64)]) {
    for (k, n) in from {
        match into.binary_search_by(|(x, _)| x.cmp(k)) {
            Ok(i) => into[i].1 = into[i].1.saturating_add(*n),
            Err(i) => into.insert(i, (k.clone(), *n)),
        }
    }
}

/// Adds another shard's share of the same run to `into` (this shard's own, which knows the
/// sub-metrics' parsed names). On an error `into` may hold part of the share: the caller
/// merges into a copy and keeps it only on success.
pub fn add(into: &mut StatsSnapshot, from: &Shares) -> Result<(), String> {
    let s = into;
    if from.phases.len() != s.phases.len()
        || from.dropped_by.len() != DropReason::ALL.len()
        || from.subs.len() != s.subs.len()
        || from.steps.len() != s.steps.len()
        || from.journeys.len() != s.journeys.len()
    {
        return Err(differ(
            "phases, drop reasons, sub-metrics, steps or journeys",
        ));
    }
    // A run that lasted longer reads rates over its own window; the shards ran the same plan.
    s.elapsed = s.elapsed.max(Duration::from_nanos(from.elapsed_ns));
    add_hist(&mut s.duration, &from.duration, "http_req_duration")?;
    add_hist(
        &mut s.corrected,
        &from.corrected,
        "http_req_corrected_duration",
    )?;
    for (a, b) in s.phases.iter_mut().zip(&from.phases) {
        add_hist(a, b, "phase")?;
    }
    add_hist(
        &mut s.iteration_duration,
        &from.iteration_duration,
        "iteration_duration",
    )?;
    add_hist(
        &mut s.group_duration,
        &from.group_duration,
        "group_duration",
    )?;
    add_hist(&mut s.lateness, &from.lateness, "iteration_lateness")?;
    for (a, b) in [
        (&mut s.requests, from.requests),
        (&mut s.failed, from.failed),
        (&mut s.no_response, from.no_response),
        (&mut s.data_sent, from.data_sent),
        (&mut s.data_received, from.data_received),
        (&mut s.iterations, from.iterations),
        (&mut s.dropped, from.dropped),
    ] {
        *a = a.saturating_add(b);
    }
    add_keyed(&mut s.statuses, &from.statuses);
    let mut errors = Vec::with_capacity(from.errors.len());
    for (name, n) in &from.errors {
        let class = ErrorClass::ALL
            .into_iter()
            .find(|e| e.as_str() == name)
            .ok_or_else(|| differ(&format!("error class `{name}`")))?;
        errors.push((class, *n));
    }
    for (class, n) in errors {
        match s.errors.iter_mut().find(|(e, _)| *e == class) {
            Some(e) => e.1 = e.1.saturating_add(n),
            None => s.errors.push((class, n)),
        }
    }
    add_checks(&mut s.checks, &from.checks, "the run")?;
    add_counts(&mut s.dropped_by, &from.dropped_by, "drop reasons")?;
    // Every shard's users at once: the run's VUs are the shards' sum.
    s.vus = s.vus.saturating_add(from.vus);
    s.vus_low = s.vus_low.saturating_add(from.vus_low);
    s.vus_high = s.vus_high.saturating_add(from.vus_high);
    s.vus_max = s.vus_max.saturating_add(from.vus_max);
    for (a, (key, b)) in s.subs.iter_mut().zip(&from.subs) {
        if &a.key != key {
            return Err(differ(&format!("sub-metric `{key}`")));
        }
        match (&mut a.value, b) {
            (SubValue::Trend(h), SubShare::Trend(o)) => add_hist(h, o, key)?,
            (SubValue::Rate(r), SubShare::Rate { hits, total }) => {
                *r = RateValue {
                    hits: r.hits.saturating_add(*hits),
                    total: r.total.saturating_add(*total),
                };
            }
            (SubValue::Counter(n), SubShare::Counter(o)) => *n = n.saturating_add(*o),
            (SubValue::Whole, SubShare::Whole) | (SubValue::Empty, SubShare::Empty) => {}
            _ => return Err(differ(&format!("sub-metric `{key}`"))),
        }
    }
    for (a, b) in s.steps.iter_mut().zip(&from.steps) {
        add_step(a, b)?;
    }
    for (a, b) in s.journeys.iter_mut().zip(&from.journeys) {
        add_journey(a, b)?;
    }
    Ok(())
}

fn add_step(a: &mut StepSnapshot, b: &StepShare) -> Result<(), String> {
    if a.name != b.name || a.journey != b.journey || b.failures.len() != StepFailure::ALL.len() {
        return Err(differ(&format!("step `{}`", b.name)));
    }
    add_checks(&mut a.checks, &b.checks, &format!("step `{}`", b.name))?;
    a.requests = a.requests.saturating_add(b.requests);
    a.failed = a.failed.saturating_add(b.failed);
    add_hist(&mut a.duration, &b.duration, "step duration")?;
    add_hist(
        &mut a.group_duration,
        &b.group_duration,
        "step group_duration",
    )?;
    add_counts(&mut a.failures, &b.failures, "step failures")
}

fn add_journey(a: &mut JourneySnapshot, b: &JourneyShare) -> Result<(), String> {
    if a.name != b.name || b.results.len() != IterationResult::ALL.len() {
        return Err(differ(&format!("journey `{}`", b.name)));
    }
    add_counts(&mut a.results, &b.results, "journey results")?;
    add_hist(&mut a.duration, &b.duration, "journey duration")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::Check;
    use crate::hist::Histogram;
    use crate::load::stats::RunStats;

    fn hist(values_ms: impl IntoIterator<Item = u64>) -> HistSnapshot {
        let h = Histogram::new();
        for v in values_ms {
            h.record(Duration::from_millis(v));
        }
        h.snapshot()
    }

    fn snapshot(values_ms: &[u64]) -> StatsSnapshot {
        let mut s = RunStats::new(&[] as &[Check]).snapshot(Duration::from_secs(1));
        s.duration = hist(values_ms.iter().copied());
        s.requests = values_ms.len() as u64;
        s
    }

    #[test]
    fn the_sum_of_shares_has_the_p95_of_every_value_not_the_average_of_p95s() {
        // Three shards, each with its own latency: 10 ms, 20 ms and 100 ms.
        let parts: Vec<Vec<u64>> = vec![vec![10; 100], vec![20; 100], vec![100; 100]];
        let mut whole = snapshot(&parts[0]);
        for p in &parts[1..] {
            let wire = serde_json::to_string(&Shares::of(&snapshot(p))).unwrap();
            add(&mut whole, &serde_json::from_str(&wire).unwrap()).unwrap();
        }
        let all = hist(parts.concat());
        assert_eq!(whole.duration, all);
        assert_eq!(whole.requests, 300);
        let p95 = whole.duration.quantile(0.95).as_secs_f64() * 1000.0;
        assert!((p95 - 100.0).abs() < 0.5, "{p95}");
    }

    #[test]
    fn a_share_of_another_shape_or_a_broken_histogram_is_refused() {
        let mut whole = snapshot(&[10]);
        let mut other = Shares::of(&snapshot(&[10]));
        other.checks.push(("status".into(), 1, 0));
        assert!(
            add(&mut whole.clone(), &other)
                .unwrap_err()
                .contains("checks")
        );
        let mut broken = Shares::of(&snapshot(&[10, 20]));
        broken.duration = serde_json::from_value(serde_json::json!({
            "buckets": [[5, 1]], "count": 7, "sum_ns": 5, "min_ns": 5, "max_ns": 5
        }))
        .unwrap();
        assert!(add(&mut whole, &broken).unwrap_err().contains("broken"));
    }
}
