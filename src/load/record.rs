//! A run's figures, in one record ([`RunRecord`]) that every reader takes: thresholds (k6's
//! metric names, sub-metrics included), the text summary, the summary export, vegeta's report,
//! the progress line, remote write, OTLP, a daemon run's row in `/api/runs`, and the shard
//! merge: a shard sends its collector its record whole, and `load::merge` adds it to the
//! collector's own. `load::stats` copies a run's live counters into one. Plain data: no
//! atomics, no clock, no I/O.
//!
//! Its serde form is a file format. `version` is [`RunRecord::VERSION`]; a record of a later
//! version is refused, never misread. Counts kept per phase, drop reason, error class, step
//! failure and iteration result are written as maps keyed by name, so a later build that adds
//! a name still reads an older record (the new name empty) and a name this build does not know
//! is refused. A sub-metric is written by its k6 key only and parsed again when read. A
//! histogram is `HistSnapshot`'s own serde form: changing that layout is a new version of the
//! record. `tests/it/golden/record-v{N}.json` holds a record of each version N that every
//! later build must read: version 2 added `classes` (`http_req_duration` per status class) and
//! `plan` (what ran, and when); a version 1 record reads with both empty.

use super::event::{IterationResult, StepFailure};
use super::pacing::DropReason;
use crate::hist::HistSnapshot;
use crate::http::{ErrorClass, Phase, Phases};
use crate::thresholds::{CounterValue, MetricRef, MetricSource, RateValue, Trend};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::time::Duration;

/// A run's figures at one moment (live, for progress and abort-on-fail thresholds) or at its end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// The format version the record was written in; this build writes
    /// [`RunRecord::VERSION`] and reads up to it.
    #[serde(deserialize_with = "known_version")]
    pub version: u32,
    /// What per-second figures divide by (`load::stats::rate_window` for a finished run).
    #[serde(rename = "elapsed_ns", with = "nanos")]
    pub elapsed: Duration,
    /// k6's `http_req_duration`: sending + waiting + receiving.
    pub duration: HistSnapshot,
    /// `http_req_corrected_duration`: every phase of the request.
    pub corrected: HistSnapshot,
    /// By `Phase as usize`, as k6 means each ([`k6_phase`]).
    #[serde(serialize_with = "write_phases", deserialize_with = "read_phases")]
    pub phases: [HistSnapshot; Phase::ALL.len()],
    pub iteration_duration: HistSnapshot,
    /// k6's `group_duration`: every journey's and every step's groups together.
    pub group_duration: HistSnapshot,
    /// `iteration_lateness`: how late arrival-rate iterations started (the generator's own).
    pub lateness: HistSnapshot,
    pub requests: u64,
    pub failed: u64,
    /// Requests that got no response head (status `0`); a request with a status and a body
    /// error counts under its status only.
    pub no_response: u64,
    /// (status, count) for every status seen, ascending.
    pub statuses: Vec<(u16, u64)>,
    /// Requests per error class, for the classes seen.
    #[serde(serialize_with = "write_errors", deserialize_with = "read_errors")]
    pub errors: Vec<(ErrorClass, u64)>,
    /// (name, passes, fails) in check order.
    #[serde(with = "check_counts")]
    pub checks: Vec<(String, u64, u64)>,
    pub data_sent: u64,
    pub data_received: u64,
    /// Requests whose sending the kernel's transmit stamps timed (`http/tx.rs`); the others
    /// were timed from sloburn's own write. Written only when some were (older records: 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kernel_tx: u64,
    pub iterations: u64,
    pub dropped: u64,
    /// Dropped iterations by `DropReason as usize`; they sum to `dropped`.
    #[serde(serialize_with = "write_drops", deserialize_with = "read_drops")]
    pub dropped_by: [u64; DropReason::ALL.len()],
    pub vus: u32,
    /// The lowest and highest busy-VU count since the first VU started (k6's `vus` min, max).
    pub vus_low: u32,
    pub vus_high: u32,
    pub vus_max: u32,
    /// The sub-metrics recorded, `http_req_duration{expected_response:true}` first.
    pub subs: Vec<SubRecord>,
    /// Per step (one, named `request`, for a single-request profile).
    pub steps: Vec<StepRecord>,
    /// Per journey; empty for a single-request profile.
    pub journeys: Vec<JourneyRecord>,
    /// k6's `http_req_duration` per status class (`1xx` to `5xx`), for the classes seen
    /// (version 2; empty in a version 1 record).
    #[serde(default)]
    pub classes: Vec<ClassRecord>,
    /// What ran and when: set on a finished run's record (`sloburn run --record`, the daemon's
    /// `/api/runs/{id}/record`), absent on a live one (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<RunPlan>,
    /// The generator-affected requests (`load::affected`): counted in every figure above, their
    /// latencies also apart so a verdict can leave them out (`load::verdict`). Written only
    /// when there were some (an older record has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affected: Option<Box<super::affected::AffectedRecord>>,
}

/// The requests of one status class: `2xx` holds every answer from 200 to 299.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassRecord {
    pub class: String,
    /// k6's `http_req_duration` of these requests.
    pub duration: HistSnapshot,
}

/// What a run was: its profile, target (the config's names, never a URL: a URL may hold a
/// secret), its load as k6's scenario line, how long it was planned for and when it started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPlan {
    pub profile: String,
    pub target: String,
    /// k6's scenario line (`load::summary::scenario_line`), e.g.
    /// `100.00 iterations/s for 10s (maxVUs: 100, gracefulStop: 30s)`.
    pub load: String,
    #[serde(rename = "planned_ns", with = "nanos")]
    pub planned: Duration,
    /// When the run started, in milliseconds since the Unix epoch.
    pub start_unix_ms: u64,
    /// `i/N` when the run was one shard's share of a profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
}

/// One step of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepRecord {
    pub name: String,
    pub journey: Option<String>,
    /// This step's checks: (name, passes, fails).
    #[serde(with = "check_counts")]
    pub checks: Vec<(String, u64, u64)>,
    pub requests: u64,
    /// Requests k6 counts in `http_req_failed`.
    pub failed: u64,
    /// k6's `http_req_duration` of this step's requests.
    pub duration: HistSnapshot,
    /// k6's `group_duration` of the step's group.
    pub group_duration: HistSnapshot,
    /// Failed steps by `StepFailure as usize`.
    #[serde(serialize_with = "write_failures", deserialize_with = "read_failures")]
    pub failures: [u64; StepFailure::ALL.len()],
}

/// One journey of a run: its iterations by result and their duration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JourneyRecord {
    pub name: String,
    /// By `IterationResult as usize`.
    #[serde(serialize_with = "write_results", deserialize_with = "read_results")]
    pub results: [u64; IterationResult::ALL.len()],
    pub duration: HistSnapshot,
}

/// One sub-metric of a run: its k6 name, what it filters, and its figures. Written as its key
/// and figures; the filter is parsed from the key again when read.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "SubWire")]
pub struct SubRecord {
    pub key: String,
    #[serde(skip_serializing)]
    pub metric: MetricRef,
    pub value: SubValue,
}

/// A sub-metric's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubValue {
    Trend(HistSnapshot),
    #[serde(with = "rate")]
    Rate(RateValue),
    Counter(u64),
    /// Same figures as the base metric.
    Whole,
    /// Nothing matched it (a static tag differs, or an unknown check).
    Empty,
}

/// A phase as its k6 metric means it (what [`RunRecord::phases`] holds): k6's
/// `http_req_blocked` holds the DNS lookup (k6 has no DNS phase), so sloburn's does too;
/// `http_req_dns` shows the lookup alone.
pub fn k6_phase(p: &Phases, phase: Phase) -> Duration {
    match phase {
        Phase::Blocked => p.blocked + p.dns,
        other => p.get(other),
    }
}

impl RunRecord {
    /// The format version this build writes.
    pub const VERSION: u32 = 2;

    /// The status class of a status code, as [`ClassRecord::class`] names it (`None` outside
    /// 100 to 599).
    pub fn class_of(status: u16) -> Option<&'static str> {
        const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];
        CLASSES
            .get(usize::from(status / 100).checked_sub(1)?)
            .copied()
    }

    pub fn sub(&self, key: &str) -> Option<&SubRecord> {
        self.subs.iter().find(|s| s.key == key)
    }

    /// The total passes and fails over every check.
    pub fn checks_total(&self) -> (u64, u64) {
        self.checks
            .iter()
            .fold((0, 0), |(p, f), (_, cp, cf)| (p + cp, f + cf))
    }

    pub fn per_second(&self, n: u64) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 { n as f64 / secs } else { 0.0 }
    }

    pub fn dropped_by(&self, reason: DropReason) -> u64 {
        self.dropped_by[reason as usize]
    }

    /// `http_req_failed` as (failed, total): the requests that failed, and the arrivals turned
    /// away because every VU was waiting on the target (`saturated`), which failed too.
    pub fn failed_with_saturated(&self) -> (u64, u64) {
        let saturated = self.dropped_by(DropReason::Saturated);
        (self.failed + saturated, self.requests + saturated)
    }

    /// Iterations dropped because the generator itself fell behind (a CPU stall, an overloaded
    /// runtime): not the target's doing, never an SLO event.
    pub fn generator_overloaded(&self) -> u64 {
        DropReason::ALL
            .into_iter()
            .filter(|r| r.is_generator())
            .map(|r| self.dropped_by(r))
            .sum()
    }

    pub fn errors_total(&self) -> u64 {
        self.errors.iter().map(|(_, n)| n).sum()
    }

    /// Requests that failed because of sloburn itself (out of descriptors or ports).
    pub fn local_errors(&self) -> u64 {
        self.errors
            .iter()
            .filter(|(e, _)| e.is_local())
            .map(|(_, n)| n)
            .sum()
    }

    /// More than half of the requests failed locally: the run measured sloburn's own limits,
    /// not the target, and must not pass.
    pub fn local_errors_dominate(&self) -> bool {
        self.local_errors() > self.requests / 2
    }
}

impl RunRecord {
    fn base_trend(&self, metric: &str) -> Option<&HistSnapshot> {
        Some(match metric {
            "http_req_duration" => &self.duration,
            "http_req_corrected_duration" => &self.corrected,
            "iteration_duration" => &self.iteration_duration,
            "group_duration" => &self.group_duration,
            other => {
                let phase = other.strip_prefix("http_req_")?;
                Phase::ALL
                    .iter()
                    .find(|p| p.as_str() == phase)
                    .map(|p| &self.phases[*p as usize])?
            }
        })
    }

    fn base_rate(&self, metric: &str) -> Option<RateValue> {
        match metric {
            "http_req_failed" => {
                let (hits, total) = self.failed_with_saturated();
                Some(RateValue { hits, total })
            }
            "checks" => {
                let (p, f) = self.checks_total();
                Some(RateValue {
                    hits: p,
                    total: p + f,
                })
            }
            _ => None,
        }
    }

    fn base_count(&self, metric: &str) -> Option<u64> {
        Some(match metric {
            "http_reqs" => self.requests,
            "iterations" => self.iterations,
            "dropped_iterations" => self.dropped,
            "data_sent" => self.data_sent,
            "data_received" => self.data_received,
            _ => return None,
        })
    }

    /// A trend by k6 name, sub-metrics included.
    pub fn trend_of(&self, metric: &str) -> Option<&HistSnapshot> {
        match self.sub(metric).map(|s| (&s.value, s.metric.base)) {
            Some((SubValue::Trend(h), _)) => Some(h),
            Some((SubValue::Whole, base)) => self.base_trend(base),
            Some(_) => None,
            None => self.base_trend(metric),
        }
    }

    pub fn rate_of(&self, metric: &str) -> Option<RateValue> {
        match self.sub(metric).map(|s| (&s.value, s.metric.base)) {
            Some((SubValue::Rate(r), _)) => Some(*r),
            Some((SubValue::Whole, base)) => self.base_rate(base),
            Some(_) => None,
            None => self.base_rate(metric),
        }
    }

    pub fn count_of(&self, metric: &str) -> Option<u64> {
        match self.sub(metric).map(|s| (&s.value, s.metric.base)) {
            Some((SubValue::Counter(n), _)) => Some(*n),
            Some((SubValue::Whole, base)) => self.base_count(base),
            Some(_) => Some(0),
            None => self.base_count(metric),
        }
    }
}

impl MetricSource for RunRecord {
    fn trend(&self, metric: &str) -> Option<&dyn Trend> {
        self.trend_of(metric).map(|h| h as &dyn Trend)
    }

    fn rate(&self, metric: &str) -> Option<RateValue> {
        self.rate_of(metric)
    }

    fn counter(&self, metric: &str) -> Option<CounterValue> {
        let count = self.count_of(metric)?;
        Some(CounterValue {
            count: count as f64,
            per_second: self.per_second(count),
        })
    }

    fn gauge(&self, metric: &str) -> Option<f64> {
        match metric {
            "vus" => Some(f64::from(self.vus)),
            "vus_max" => Some(f64::from(self.vus_max)),
            _ => None,
        }
    }
}

/// A sub-metric as written: its key and figures.
#[derive(Deserialize)]
struct SubWire {
    key: String,
    value: SubValue,
}

impl TryFrom<SubWire> for SubRecord {
    type Error = String;

    fn try_from(w: SubWire) -> Result<SubRecord, String> {
        let metric = crate::thresholds::parse_metric(&w.key)
            .map_err(|e| format!("sub-metric `{}`: {e}", w.key))?;
        Ok(SubRecord {
            key: w.key,
            metric,
            value: w.value,
        })
    }
}

fn known_version<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let v = u32::deserialize(d)?;
    if v == 0 || v > RunRecord::VERSION {
        return Err(D::Error::custom(format!(
            "a run record of format version {v}: this build reads versions 1 to {}",
            RunRecord::VERSION
        )));
    }
    Ok(v)
}

/// A duration as whole nanoseconds.
mod nanos {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_nanos)
    }
}

/// A rate as `{hits, total}`.
mod rate {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Wire {
        hits: u64,
        total: u64,
    }

    pub fn serialize<S: Serializer>(r: &RateValue, s: S) -> Result<S::Ok, S::Error> {
        Wire {
            hits: r.hits,
            total: r.total,
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<RateValue, D::Error> {
        let w = Wire::deserialize(d)?;
        Ok(RateValue {
            hits: w.hits,
            total: w.total,
        })
    }
}

/// Checks as `[{name, passes, fails}]`, in check order.
mod check_counts {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Wire<N> {
        name: N,
        passes: u64,
        fails: u64,
    }

    pub fn serialize<S: Serializer>(c: &[(String, u64, u64)], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(c.iter().map(|(name, passes, fails)| Wire {
            name: name.as_str(),
            passes: *passes,
            fails: *fails,
        }))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<(String, u64, u64)>, D::Error> {
        let all = Vec::<Wire<String>>::deserialize(d)?;
        Ok(all
            .into_iter()
            .map(|w| (w.name, w.passes, w.fails))
            .collect())
    }
}

/// Writes an array indexed by an enum as a map from the enum's names.
fn write_keyed<S: Serializer, T: Serialize>(
    names: impl Iterator<Item = &'static str>,
    values: &[T],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(names.zip(values))
}

/// Reads what [`write_keyed`] wrote: a name missing is empty (an older record, before that
/// name), a name not in `names` is refused.
fn read_keyed<'de, D, T, const N: usize>(
    names: [&'static str; N],
    what: &str,
    d: D,
) -> Result<[T; N], D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    let mut out: [T; N] = std::array::from_fn(|_| T::default());
    for (name, value) in BTreeMap::<String, T>::deserialize(d)? {
        let i = names
            .iter()
            .position(|n| *n == name)
            .ok_or_else(|| D::Error::custom(format!("unknown {what} `{name}`")))?;
        out[i] = value;
    }
    Ok(out)
}

fn write_phases<S: Serializer>(v: &[HistSnapshot], s: S) -> Result<S::Ok, S::Error> {
    write_keyed(Phase::ALL.into_iter().map(Phase::as_str), v, s)
}

fn read_phases<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<[HistSnapshot; Phase::ALL.len()], D::Error> {
    read_keyed(Phase::ALL.map(Phase::as_str), "phase", d)
}

fn write_drops<S: Serializer>(v: &[u64], s: S) -> Result<S::Ok, S::Error> {
    write_keyed(DropReason::ALL.into_iter().map(DropReason::as_str), v, s)
}

fn read_drops<'de, D: Deserializer<'de>>(d: D) -> Result<[u64; DropReason::ALL.len()], D::Error> {
    read_keyed(DropReason::ALL.map(DropReason::as_str), "drop reason", d)
}

fn write_failures<S: Serializer>(v: &[u64], s: S) -> Result<S::Ok, S::Error> {
    write_keyed(StepFailure::ALL.into_iter().map(StepFailure::as_str), v, s)
}

fn read_failures<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<[u64; StepFailure::ALL.len()], D::Error> {
    read_keyed(StepFailure::ALL.map(StepFailure::as_str), "step failure", d)
}

fn write_results<S: Serializer>(v: &[u64], s: S) -> Result<S::Ok, S::Error> {
    write_keyed(
        IterationResult::ALL
            .into_iter()
            .map(IterationResult::as_str),
        v,
        s,
    )
}

fn read_results<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<[u64; IterationResult::ALL.len()], D::Error> {
    read_keyed(
        IterationResult::ALL.map(IterationResult::as_str),
        "iteration result",
        d,
    )
}

/// Error classes as a map from their names, for the classes seen.
fn write_errors<S: Serializer>(v: &[(ErrorClass, u64)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(v.iter().map(|(e, n)| (e.as_str(), n)))
}

fn read_errors<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(ErrorClass, u64)>, D::Error> {
    let by_name = BTreeMap::<String, u64>::deserialize(d)?;
    let mut out = Vec::with_capacity(by_name.len());
    // In `ErrorClass::ALL` order, as `load::stats` lists them.
    for class in ErrorClass::ALL {
        if let Some(n) = by_name.get(class.as_str()) {
            out.push((class, *n));
        }
    }
    if let Some(name) = by_name
        .keys()
        .find(|k| !ErrorClass::ALL.iter().any(|e| e.as_str() == k.as_str()))
    {
        return Err(D::Error::custom(format!("unknown error class `{name}`")));
    }
    Ok(out)
}

/// A trend as the thresholds read it (k6's aggregations), from the one histogram.
impl Trend for HistSnapshot {
    fn count(&self) -> u64 {
        HistSnapshot::count(self)
    }
    fn mean(&self) -> Duration {
        HistSnapshot::mean(self)
    }
    fn min(&self) -> Duration {
        HistSnapshot::min(self)
    }
    fn max(&self) -> Duration {
        HistSnapshot::max(self)
    }
    fn median(&self) -> Duration {
        HistSnapshot::median(self)
    }
    fn quantile(&self, q: f64) -> Duration {
        HistSnapshot::quantile(self, q)
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::{Check, CheckKind};
    use crate::http::Outcome;
    use crate::load::event::{Observer, StepInfo};
    use crate::load::stats::RunStats;
    use crate::thresholds::ThresholdSpec;
    use std::path::PathBuf;

    fn fixture(version: u32) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/it/golden")
            .join(format!("record-v{version}.json"))
    }

    /// Pretty JSON with each `[bucket, count]` and `[status, count]` pair on one line.
    fn pretty(r: &RunRecord) -> String {
        let text = serde_json::to_string_pretty(r).unwrap();
        let pair = regex::Regex::new(r"\[\s*(\d+),\s*(\d+)\s*\]").unwrap();
        pair.replace_all(&text, "[$1, $2]").into_owned() + "\n"
    }

    fn step(journey: &str, name: &str, method: &str) -> StepInfo {
        StepInfo {
            journey: Some(journey.into()),
            name: name.into(),
            checks: vec![Check {
                name: "ok".into(),
                kind: CheckKind::Status(vec![(200, 200)]),
            }],
            method: method.into(),
            url: format!("http://shop/{name}"),
        }
    }

    /// A fixed run of two journeys (`buy`: login then cart; `browse`: home) with a sub-metric of
    /// every kind: 30 requests (24 answered 200 in 1 to 24 ms, 4 answered 500, 2 refused), a
    /// check per step, two drops of each owner.
    fn fixed_record() -> RunRecord {
        let steps = [
            step("buy", "login", "POST"),
            step("buy", "cart", "GET"),
            step("browse", "home", "GET"),
        ];
        let thresholds: Vec<ThresholdSpec> = [
            ("http_req_duration{status:500}", "max<100"),
            ("http_req_failed{status:500}", "rate<1"),
            ("http_reqs{step:login}", "count>0"),
            ("http_reqs{method:DELETE}", "count==0"),
            ("http_req_waiting{scenario:shop}", "p(95)<100"),
            ("checks{check:ok}", "rate>0.5"),
            ("group_duration{group:::buy}", "p(95)<1000"),
            ("dropped_iterations{reason:saturated}", "count<5"),
        ]
        .iter()
        .map(|(m, e)| ThresholdSpec::parse(m, e, false, None).unwrap())
        .collect();
        let journeys = ["buy".to_string(), "browse".to_string()];
        let stats = RunStats::for_work(&steps, &journeys, &thresholds, "shop");
        stats.vus_allocated(4);
        stats.vus_changed(2);
        let ms = Duration::from_millis;
        for i in 0..30u64 {
            let (status, error) = match i {
                0..24 => (Some(200), None),
                24..28 => (Some(500), None),
                _ => (None, Some(ErrorClass::ConnectRefused)),
            };
            let outcome = Outcome {
                status,
                error,
                phases: Phases {
                    blocked: ms(i % 2),
                    dns: ms(1),
                    waiting: ms(1 + i % 24),
                    ..Phases::default()
                },
                bytes_sent: 100,
                bytes_received: if status.is_some() { 200 } else { 0 },
                ..Outcome::default()
            };
            let step = (i % 3) as usize;
            stats.request_finished(step, &outcome, ms(i % 4), &[status == Some(200)]);
            stats.step_finished(step, ms(2 + i % 24));
            if status != Some(200) {
                stats.step_failed(step, StepFailure::Check);
            }
            if step != 0 {
                let journey = step - 1;
                let result = if status == Some(200) {
                    IterationResult::Ok
                } else {
                    IterationResult::FailedStep
                };
                stats.iteration_finished(journey, result, ms(5 + i));
            }
        }
        stats.iteration_dropped(DropReason::Saturated, 0);
        stats.iteration_dropped(DropReason::Saturated, 1);
        stats.iteration_dropped(DropReason::Late, 0);
        stats.iteration_dropped(DropReason::ConnectPaced, 1);
        let mut r = stats.snapshot(Duration::from_secs(10));
        r.plan = Some(RunPlan {
            profile: "shop".into(),
            target: "shop".into(),
            load: "5.00 iterations/s for 10s (maxVUs: 4, gracefulStop: 30s)".into(),
            planned: Duration::from_secs(10),
            start_unix_ms: 1_780_000_000_000,
            shard: None,
        });
        r
    }

    /// This build writes its version as the fixture of that version holds it; a reviewer reads
    /// the file as the format's documentation. `UPDATE_GOLDEN=1` rewrites the current version's
    /// fixture only: an older version's file is never rewritten.
    #[test]
    fn this_build_writes_its_version_as_its_fixture() {
        let text = pretty(&fixed_record());
        let path = fixture(RunRecord::VERSION);
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&path, &text).unwrap();
            return;
        }
        let expected = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1)", path.display()));
        assert!(
            expected == text,
            "{} drifted: a change to the record's form is a new version\n{text}",
            path.display()
        );
    }

    /// Later builds read older records: version 1, as its fixture holds it, reads with every
    /// figure, and thresholds evaluate on it.
    #[test]
    fn a_version_1_record_reads() {
        let text = std::fs::read_to_string(fixture(1)).unwrap();
        let r: RunRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(r.version, 1);
        assert_eq!(r.elapsed, Duration::from_secs(10));
        assert_eq!((r.requests, r.failed, r.no_response), (30, 6, 2));
        assert_eq!(r.statuses, vec![(200, 24), (500, 4)]);
        assert_eq!(r.errors, vec![(ErrorClass::ConnectRefused, 2)]);
        assert_eq!(r.checks_total(), (24, 6));
        assert_eq!((r.data_sent, r.data_received), (3000, 5600));
        assert_eq!((r.dropped, r.dropped_by(DropReason::Saturated)), (4, 2));
        assert_eq!(r.generator_overloaded(), 2);
        assert_eq!((r.vus, r.vus_low, r.vus_high, r.vus_max), (2, 2, 2, 4));
        assert_eq!(r.duration.count(), 28);
        assert_eq!(r.duration.max(), Duration::from_millis(24));
        let blocked = &r.phases[Phase::Blocked as usize];
        assert_eq!(
            blocked.max(),
            Duration::from_millis(2),
            "blocked holds the DNS"
        );
        assert_eq!(r.phases[Phase::Dns as usize].count(), 28);
        assert_eq!(r.iterations, 20);
        let names: Vec<(&str, Option<&str>)> = r
            .steps
            .iter()
            .map(|s| (s.name.as_str(), s.journey.as_deref()))
            .collect();
        assert_eq!(
            names,
            [
                ("login", Some("buy")),
                ("cart", Some("buy")),
                ("home", Some("browse"))
            ]
        );
        assert_eq!(r.steps[0].requests, 10);
        assert_eq!(r.steps[0].checks, vec![("ok".to_string(), 8, 2)]);
        assert_eq!(r.steps[1].failures[StepFailure::Check as usize], 2);
        let buy = &r.journeys[0];
        assert_eq!(buy.name, "buy");
        assert_eq!(buy.results[IterationResult::Ok as usize], 8);
        assert_eq!(buy.results[IterationResult::FailedStep as usize], 2);
        // Every kind of sub-metric, by its k6 name.
        assert_eq!(
            r.trend_of("http_req_duration{status:500}").unwrap().count(),
            4
        );
        let failed_500 = r.rate_of("http_req_failed{status:500}").unwrap();
        assert_eq!((failed_500.hits, failed_500.total), (4, 4));
        assert_eq!(r.count_of("http_reqs{step:login}"), Some(10));
        assert_eq!(r.count_of("http_reqs{method:DELETE}"), Some(0));
        assert_eq!(
            r.trend_of("http_req_waiting{scenario:shop}")
                .unwrap()
                .count(),
            28
        );
        let ok = r.rate_of("checks{check:ok}").unwrap();
        assert_eq!((ok.hits, ok.total), (24, 30));
        assert_eq!(
            r.trend_of("group_duration{group:::buy}").unwrap().count(),
            10
        );
        assert_eq!(r.count_of("dropped_iterations{reason:saturated}"), Some(2));
        let spec = ThresholdSpec::parse("http_req_duration{status:500}", "max<100", false, None);
        assert!(spec.unwrap().threshold.evaluate(&r).passed);
        // What version 2 added reads empty.
        assert!(r.classes.is_empty() && r.plan.is_none());
    }

    /// Version 2, as its fixture holds it: `http_req_duration` per status class, and the plan.
    #[test]
    fn a_version_2_record_reads_with_its_classes_and_plan() {
        let text = std::fs::read_to_string(fixture(2)).unwrap();
        let r: RunRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(r.version, 2);
        let classes: Vec<(&str, u64)> = r
            .classes
            .iter()
            .map(|c| (c.class.as_str(), c.duration.count()))
            .collect();
        assert_eq!(classes, [("2xx", 24), ("5xx", 4)]);
        let plan = r.plan.unwrap();
        assert_eq!(
            (plan.profile.as_str(), plan.planned),
            ("shop", Duration::from_secs(10))
        );
        assert_eq!(plan.start_unix_ms, 1_780_000_000_000);
        assert_eq!(r.duration.count(), 28);
        assert_eq!(RunRecord::class_of(0), None);
        assert_eq!(RunRecord::class_of(404), Some("4xx"));
        assert_eq!(RunRecord::class_of(600), None);
    }

    /// A record this build cannot read rightly is refused, never misread.
    #[test]
    fn a_later_version_or_an_unknown_name_is_refused() {
        let good = serde_json::to_value(fixed_record()).unwrap();
        let read = |edit: &dyn Fn(&mut serde_json::Value)| {
            let mut v = good.clone();
            edit(&mut v);
            serde_json::from_value::<RunRecord>(v)
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        assert_eq!(read(&|_| {}), Ok(()));
        let err = read(&|v| v["version"] = 3.into()).unwrap_err();
        assert!(err.contains("format version 3"), "{err}");
        let err = read(&|v| v["phases"]["warp"] = v["duration"].clone()).unwrap_err();
        assert!(err.contains("unknown phase `warp`"), "{err}");
        let err = read(&|v| v["errors"]["gremlins"] = 1.into()).unwrap_err();
        assert!(err.contains("unknown error class `gremlins`"), "{err}");
        let err = read(&|v| v["subs"][0]["key"] = "http_req_nap{status:200}".into()).unwrap_err();
        assert!(err.contains("http_req_nap"), "{err}");
        // An older record, before a name was added, reads with it empty.
        let mut older = good.clone();
        older["dropped_by"].as_object_mut().unwrap().remove("late");
        let r: RunRecord = serde_json::from_value(older).unwrap();
        assert_eq!(r.dropped_by(DropReason::Late), 0);
    }
}
