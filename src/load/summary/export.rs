//! k6's `--summary-export` JSON (vus, sub-metrics, MD5 ids) and the `--out json-agg` lines.

use super::checks::{by_name, check_json, k6_id};
use crate::hist::HistSnapshot;
use crate::http::Phase;
use crate::load::record::{RunRecord, SubValue};
use crate::load::runner::RunReport;
use crate::load::subs::EXPECTED_DURATION;
use crate::thresholds::MetricKind;
use serde_json::{Map, Value, json};
use std::time::Duration;

fn trend_json(h: &HistSnapshot) -> Value {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    json!({
        "avg": ms(h.mean()),
        "min": ms(h.min()),
        "med": ms(h.median()),
        "max": ms(h.max()),
        "p(90)": ms(h.quantile(0.90)),
        "p(95)": ms(h.quantile(0.95)),
        "p(99)": ms(h.quantile(0.99)),
    })
}

fn rate_json(hits: u64, total: u64) -> Value {
    json!({
        "value": if total > 0 { hits as f64 / total as f64 } else { 0.0 },
        "passes": hits,
        "fails": total - hits.min(total),
    })
}

/// k6's `--summary-export` shape: `metrics.<name>` with trend aggregates in milliseconds,
/// counters as `count`/`rate`, rates as `value`/`passes`/`fails`, gauges (`vus`, `vus_max`) as
/// `value`/`min`/`max`, each sub-metric under its k6 name (`http_req_duration{status:200}`;
/// `{expected_response:true}` always, others when a threshold names them), and each metric's
/// `thresholds` as `{source: failed}` (k6 writes `true` for a threshold that failed). As in k6,
/// `checks` is left out when the target has no checks and no threshold names it, and
/// `dropped_iterations` when nothing was dropped and no threshold names it. `root_group` and its
/// checks carry k6's `id` (MD5 of the path).
///
/// A journey run's checks are in its steps' groups (`::journey::step`), and the root's list is
/// empty, as in k6 when every check is made inside a group; `group_duration` holds every
/// journey's and step's group durations.
///
/// sloburn's own additions: `http_req_corrected_duration`, `http_req_dns`, and `state`
/// (`testRunDurationMs`, `interrupted` and the `signal` that stopped the run, `null` when none
/// did); k6 v1 writes no `state`.
pub fn export_json(report: &RunReport, interrupted_by: Option<&str>) -> Value {
    let s = &report.stats;
    let mut metrics = Map::new();
    main_metrics(&mut metrics, report);
    sub_metrics(&mut metrics, s);
    for (spec, result) in &report.thresholds {
        if let Some(Value::Object(m)) = metrics.get_mut(&spec.threshold.metric) {
            let entry = m
                .entry("thresholds")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(t) = entry {
                t.insert(spec.threshold.source.clone(), Value::Bool(!result.passed));
            }
        }
    }
    // A journey's checks are in its steps' groups; k6's root lists only checks made outside
    // any group.
    let root_checks = if s.journeys.is_empty() {
        by_name(&s.checks)
    } else {
        Vec::new()
    };
    let checks: Map<String, Value> = root_checks
        .iter()
        .map(|(name, p, f)| (name.clone(), check_json(&format!("::{name}"), name, *p, *f)))
        .collect();
    let mut state = Map::new();
    state.insert(
        "testRunDurationMs".into(),
        json!(s.elapsed.as_secs_f64() * 1000.0),
    );
    state.insert("isStdOutTTY".into(), Value::Bool(false));
    state.insert("isStdErrTTY".into(), Value::Bool(false));
    mark_interrupted(&mut state, interrupted_by);
    let starved = super::starved::json(report);
    if !starved.is_null() {
        state.insert("generator_affected".into(), starved);
    }
    let groups = super::groups::json(s);
    json!({
        "root_group": { "name": "", "path": "", "id": k6_id(""), "groups": groups, "checks": checks },
        "metrics": metrics,
        "state": state,
    })
}

/// A counter as k6 exports it: its count and its rate per second of the run.
fn counter_json(s: &RunRecord, n: u64) -> Value {
    json!({ "count": n, "rate": s.per_second(n) })
}

/// The built-in metrics: trends, counters, rates and the VU gauges; `checks`,
/// `group_duration` and `dropped_iterations` only when the run has them or a threshold names
/// them.
fn main_metrics(metrics: &mut Map<String, Value>, report: &RunReport) {
    let s = &report.stats;
    let named = |m: &str| {
        report
            .thresholds
            .iter()
            .any(|(t, _)| t.threshold.metric == m)
    };
    for phase in Phase::ALL {
        metrics.insert(
            format!("http_req_{}", phase.as_str()),
            trend_json(&s.phases[phase as usize]),
        );
    }
    metrics.insert("http_req_duration".into(), trend_json(&s.duration));
    metrics.insert(
        "http_req_corrected_duration".into(),
        trend_json(&s.corrected),
    );
    metrics.insert(
        "iteration_duration".into(),
        trend_json(&s.iteration_duration),
    );
    if !s.journeys.is_empty() || named("group_duration") {
        metrics.insert("group_duration".into(), trend_json(&s.group_duration));
    }
    metrics.insert("http_reqs".into(), counter_json(s, s.requests));
    metrics.insert("iterations".into(), counter_json(s, s.iterations));
    if s.dropped > 0 || named("dropped_iterations") {
        metrics.insert("dropped_iterations".into(), counter_json(s, s.dropped));
    }
    let overloaded = s.generator_overloaded();
    if overloaded > 0 {
        metrics.insert(
            "generator_overloaded_iterations".into(),
            counter_json(s, overloaded),
        );
    }
    metrics.insert("data_sent".into(), counter_json(s, s.data_sent));
    metrics.insert("data_received".into(), counter_json(s, s.data_received));
    let (failed, total) = s.failed_with_saturated();
    metrics.insert("http_req_failed".into(), rate_json(failed, total));
    let (cp, cf) = s.checks_total();
    if !s.checks.is_empty() || named("checks") {
        metrics.insert("checks".into(), rate_json(cp, cp + cf));
    }
    metrics.insert(
        "vus".into(),
        json!({ "value": s.vus, "min": s.vus_low, "max": s.vus_high }),
    );
    metrics.insert(
        "vus_max".into(),
        json!({ "value": s.vus_max, "min": s.vus_max, "max": s.vus_max }),
    );
}

/// Each recorded sub-metric under its k6 name; `http_req_duration{expected_response:true}`
/// once.
fn sub_metrics(metrics: &mut Map<String, Value>, s: &RunRecord) {
    for sub in &s.subs {
        let value = match (sub.metric.kind, &sub.value) {
            (MetricKind::Trend, _) => {
                trend_json(s.trend_of(&sub.key).unwrap_or(&HistSnapshot::default()))
            }
            (MetricKind::Rate, _) => {
                let r = s.rate_of(&sub.key).unwrap_or_default();
                rate_json(r.hits, r.total)
            }
            (_, SubValue::Empty) => counter_json(s, 0),
            _ => counter_json(s, s.count_of(&sub.key).unwrap_or(0)),
        };
        if sub.key != EXPECTED_DURATION || !metrics.contains_key(&sub.key) {
            metrics.insert(sub.key.clone(), value);
        }
    }
}

/// `interrupted` and `signal`: whether a signal stopped the run, and which.
fn mark_interrupted(obj: &mut Map<String, Value>, interrupted_by: Option<&str>) {
    obj.insert("interrupted".into(), Value::Bool(interrupted_by.is_some()));
    obj.insert(
        "signal".into(),
        interrupted_by.map_or(Value::Null, |s| Value::String(s.into())),
    );
}

/// One JSON line for `--out json-agg=FILE`: the figures of one time bucket (deltas since
/// `prev`).
pub fn bucket_json(now: &RunRecord, prev: &RunRecord, unix_secs: f64) -> Value {
    json!({
        "time": unix_secs,
        "elapsed_s": now.elapsed.as_secs_f64(),
        "http_reqs": now.requests - prev.requests.min(now.requests),
        "http_req_failed": now.failed - prev.failed.min(now.failed),
        "dropped_iterations": now.dropped - prev.dropped.min(now.dropped),
        "data_sent": now.data_sent - prev.data_sent.min(now.data_sent),
        "data_received": now.data_received - prev.data_received.min(now.data_received),
        "vus": now.vus,
        "http_req_duration_ms": trend_json(&now.duration),
    })
}

/// The last `--out json-agg` line: the run's final partial bucket, with the interrupted mark.
pub fn last_bucket_json(
    now: &RunRecord,
    prev: &RunRecord,
    unix_secs: f64,
    interrupted_by: Option<&str>,
) -> Value {
    let mut line = bucket_json(now, prev, unix_secs);
    if let Value::Object(m) = &mut line {
        mark_interrupted(m, interrupted_by);
    }
    line
}
