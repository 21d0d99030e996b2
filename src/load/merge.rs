//! The sum of a run's records across shards: a sharded run's verdict is the profile's
//! thresholds evaluated once on every shard's figures added together (histogram buckets,
//! counts, check passes and fails, error classes), never on averaged percentiles. Pure: no I/O.
//!
//! A shard sends its collector its [`RunRecord`] whole. Every shard runs the same profile, so
//! its checks, sub-metrics, steps and journeys come in the same order with the same names; a
//! record that differs (another config) is refused, never added in the wrong place, and so is
//! one holding a histogram no `Histogram` makes.

use super::record::{ClassRecord, JourneyRecord, RunRecord, StepRecord, SubValue};
use crate::hist::HistSnapshot;
use crate::http::ErrorClass;
use crate::thresholds::RateValue;

impl RunRecord {
    /// Adds `other`, another shard's record of the same run, to this one (this shard's own).
    /// Nothing is added when it does not fit.
    pub fn merge(&mut self, other: &RunRecord) -> Result<(), String> {
        self.fits(other)?;
        self.add(other);
        Ok(())
    }

    /// Whether `other` is the same run's shape, with histograms a `Histogram` could make.
    fn fits(&self, other: &RunRecord) -> Result<(), String> {
        same_checks(&self.checks, &other.checks, "the run")?;
        if self.subs.len() != other.subs.len()
            || self.steps.len() != other.steps.len()
            || self.journeys.len() != other.journeys.len()
        {
            return Err(differ("sub-metrics, steps or journeys"));
        }
        for (a, b) in self.subs.iter().zip(&other.subs) {
            if a.key != b.key || !same_kind(&a.value, &b.value) {
                return Err(differ(&format!("sub-metric `{}`", b.key)));
            }
        }
        for (a, b) in self.steps.iter().zip(&other.steps) {
            if a.name != b.name || a.journey != b.journey {
                return Err(differ(&format!("step `{}`", b.name)));
            }
            same_checks(&a.checks, &b.checks, &format!("step `{}`", b.name))?;
        }
        for (a, b) in self.journeys.iter().zip(&other.journeys) {
            if a.name != b.name {
                return Err(differ(&format!("journey `{}`", b.name)));
            }
        }
        for (what, h) in histograms(other) {
            h.check()
                .map_err(|e| format!("its `{what}` histogram is broken: {e}"))?;
        }
        if let Some(a) = &other.affected {
            a.check()
                .map_err(|e| format!("its generator-affected histograms are broken: {e}"))?;
        }
        Ok(())
    }

    /// Adds a record that [`Self::fits`].
    fn add(&mut self, other: &RunRecord) {
        // A run that lasted longer reads rates over its own window; the shards ran the same plan.
        self.elapsed = self.elapsed.max(other.elapsed);
        self.duration.merge(&other.duration);
        self.corrected.merge(&other.corrected);
        for (a, b) in self.phases.iter_mut().zip(&other.phases) {
            a.merge(b);
        }
        self.iteration_duration.merge(&other.iteration_duration);
        self.group_duration.merge(&other.group_duration);
        self.lateness.merge(&other.lateness);
        match (&mut self.affected, &other.affected) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (mine @ None, Some(theirs)) => *mine = Some(theirs.clone()),
            _ => {}
        }
        for (a, b) in [
            (&mut self.requests, other.requests),
            (&mut self.failed, other.failed),
            (&mut self.no_response, other.no_response),
            (&mut self.data_sent, other.data_sent),
            (&mut self.data_received, other.data_received),
            (&mut self.kernel_tx, other.kernel_tx),
            (&mut self.iterations, other.iterations),
            (&mut self.dropped, other.dropped),
        ] {
            *a = a.saturating_add(b);
        }
        add_keyed(&mut self.statuses, &other.statuses);
        add_errors(&mut self.errors, &other.errors);
        add_checks(&mut self.checks, &other.checks);
        add_counts(&mut self.dropped_by, &other.dropped_by);
        // Every shard's users at once: the run's VUs are the shards' sum.
        self.vus = self.vus.saturating_add(other.vus);
        self.vus_low = self.vus_low.saturating_add(other.vus_low);
        self.vus_high = self.vus_high.saturating_add(other.vus_high);
        self.vus_max = self.vus_max.saturating_add(other.vus_max);
        for (a, b) in self.subs.iter_mut().zip(&other.subs) {
            add_sub(&mut a.value, &b.value);
        }
        for (a, b) in self.steps.iter_mut().zip(&other.steps) {
            add_step(a, b);
        }
        for (a, b) in self.journeys.iter_mut().zip(&other.journeys) {
            add_journey(a, b);
        }
        add_classes(&mut self.classes, &other.classes);
    }
}

/// Adds each status class's histogram to the same class's, keeping them in class order.
fn add_classes(into: &mut Vec<ClassRecord>, from: &[ClassRecord]) {
    for c in from {
        match into.iter_mut().find(|a| a.class == c.class) {
            Some(a) => a.duration.merge(&c.duration),
            None => into.push(c.clone()),
        }
    }
    into.sort_by(|a, b| a.class.cmp(&b.class));
}

/// Why a record cannot be added: it is not the same run's shape.
fn differ(what: &str) -> String {
    format!("its figures do not fit this run ({what}): is it running another config?")
}

/// Every histogram of a record, named for a message.
fn histograms(r: &RunRecord) -> impl Iterator<Item = (&str, &HistSnapshot)> {
    let run = [
        ("http_req_duration", &r.duration),
        ("http_req_corrected_duration", &r.corrected),
        ("iteration_duration", &r.iteration_duration),
        ("group_duration", &r.group_duration),
        ("iteration_lateness", &r.lateness),
    ];
    let subs = r.subs.iter().filter_map(|s| match &s.value {
        SubValue::Trend(h) => Some((s.key.as_str(), h)),
        _ => None,
    });
    run.into_iter()
        .chain(r.phases.iter().map(|h| ("phase", h)))
        .chain(subs)
        .chain(r.steps.iter().map(|s| ("step duration", &s.duration)))
        .chain(
            r.steps
                .iter()
                .map(|s| ("step group_duration", &s.group_duration)),
        )
        .chain(r.journeys.iter().map(|j| ("journey duration", &j.duration)))
        .chain(
            r.classes
                .iter()
                .map(|c| ("status class duration", &c.duration)),
        )
}

fn same_checks(
    a: &[(String, u64, u64)],
    b: &[(String, u64, u64)],
    what: &str,
) -> Result<(), String> {
    if a.len() != b.len() || a.iter().zip(b).any(|(x, y)| x.0 != y.0) {
        return Err(differ(&format!("the checks of {what}")));
    }
    Ok(())
}

fn same_kind(a: &SubValue, b: &SubValue) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

fn add_checks(into: &mut [(String, u64, u64)], from: &[(String, u64, u64)]) {
    for (a, b) in into.iter_mut().zip(from) {
        a.1 = a.1.saturating_add(b.1);
        a.2 = a.2.saturating_add(b.2);
    }
}

fn add_counts(into: &mut [u64], from: &[u64]) {
    for (a, b) in into.iter_mut().zip(from) {
        *a = a.saturating_add(*b);
    }
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

/// Adds requests per error class, kept in `ErrorClass as usize` order (as `load::stats` lists
/// them).
fn add_errors(into: &mut Vec<(ErrorClass, u64)>, from: &[(ErrorClass, u64)]) {
    for (class, n) in from {
        match into.iter_mut().find(|(e, _)| e == class) {
            Some(e) => e.1 = e.1.saturating_add(*n),
            None => into.push((*class, *n)),
        }
    }
    into.sort_by_key(|(e, _)| *e as usize);
}

fn add_sub(into: &mut SubValue, from: &SubValue) {
    match (into, from) {
        (SubValue::Trend(h), SubValue::Trend(o)) => h.merge(o),
        (SubValue::Rate(r), SubValue::Rate(o)) => {
            *r = RateValue {
                hits: r.hits.saturating_add(o.hits),
                total: r.total.saturating_add(o.total),
            };
        }
        (SubValue::Counter(n), SubValue::Counter(o)) => *n = n.saturating_add(*o),
        // The same kind ([`RunRecord::fits`]): nothing to add to a whole or an empty one.
        _ => {}
    }
}

fn add_step(a: &mut StepRecord, b: &StepRecord) {
    add_checks(&mut a.checks, &b.checks);
    a.requests = a.requests.saturating_add(b.requests);
    a.failed = a.failed.saturating_add(b.failed);
    a.duration.merge(&b.duration);
    a.group_duration.merge(&b.group_duration);
    add_counts(&mut a.failures, &b.failures);
}

fn add_journey(a: &mut JourneyRecord, b: &JourneyRecord) {
    add_counts(&mut a.results, &b.results);
    a.duration.merge(&b.duration);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::Check;
    use crate::hist::Histogram;
    use crate::load::stats::RunStats;
    use std::time::Duration;

    fn hist(values_ms: impl IntoIterator<Item = u64>) -> HistSnapshot {
        let h = Histogram::new();
        for v in values_ms {
            h.record(Duration::from_millis(v));
        }
        h.snapshot()
    }

    fn record(values_ms: &[u64]) -> RunRecord {
        let mut s = RunStats::new(&[] as &[Check]).snapshot(Duration::from_secs(1));
        s.duration = hist(values_ms.iter().copied());
        s.requests = values_ms.len() as u64;
        s
    }

    /// What a shard sends its collector: the record, through its serde form.
    fn wire(r: &RunRecord) -> RunRecord {
        serde_json::from_str(&serde_json::to_string(r).unwrap()).unwrap()
    }

    #[test]
    fn the_sum_of_shares_has_the_p95_of_every_value_not_the_average_of_p95s() {
        // Three shards, each with its own latency: 10 ms, 20 ms and 100 ms.
        let parts: Vec<Vec<u64>> = vec![vec![10; 100], vec![20; 100], vec![100; 100]];
        let mut whole = record(&parts[0]);
        for p in &parts[1..] {
            whole.merge(&wire(&record(p))).unwrap();
        }
        let all = hist(parts.concat());
        assert_eq!(whole.duration, all);
        assert_eq!(whole.requests, 300);
        let p95 = whole.duration.quantile(0.95).as_secs_f64() * 1000.0;
        assert!((p95 - 100.0).abs() < 0.5, "{p95}");
    }

    #[test]
    fn a_share_of_another_shape_or_a_broken_histogram_is_refused() {
        let mut whole = record(&[10]);
        let mut other = record(&[10]);
        other.checks.push(("status".into(), 1, 0));
        assert!(whole.clone().merge(&other).unwrap_err().contains("checks"));
        let mut broken = record(&[10, 20]);
        broken.duration = serde_json::from_value(serde_json::json!({
            "buckets": [[5, 1]], "count": 7, "sum_ns": 5, "min_ns": 5, "max_ns": 5
        }))
        .unwrap();
        assert!(whole.merge(&broken).unwrap_err().contains("broken"));
        // Nothing of a refused share was added.
        assert_eq!((whole.requests, whole.duration.count()), (1, 1));
    }
}
