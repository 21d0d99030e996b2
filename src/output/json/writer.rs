//! The writer's half of `--out json`: turns [`Record`]s into k6's NDJSON lines on one blocking
//! thread. The metric definitions come first; then each record's points, tagged as k6 tags
//! them (the step numbers become their tags here, built once per step), and the VU gauges
//! once a second and at the end.

use super::record::{Record, Request};
use crate::http::Phase;
use crate::load::event::StepInfo;
use crate::load::stats::RunStats;
use serde_json::{Value, json};
use std::io::Write;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// What the writer turns step and journey numbers into.
pub struct Tags {
    /// k6's `scenario`: the profile's name.
    pub scenario: String,
    /// Every step of the run, in `StepId` order (`Work::steps`).
    pub steps: Vec<StepInfo>,
    /// The journeys, in mix order (empty for a single-request profile).
    pub journeys: Vec<String>,
    /// `--tag NAME=VALUE`: on every point's tags.
    pub extra: Vec<(String, String)>,
}

/// k6's RFC 3339 time with nanoseconds, in UTC.
fn rfc3339(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Every metric the file may hold, with its k6 type and what it contains.
const DEFINITIONS: &[(&str, &str, &str)] = &[
    ("http_reqs", "counter", "default"),
    ("http_req_duration", "trend", "time"),
    ("http_req_corrected_duration", "trend", "time"),
    ("http_req_blocked", "trend", "time"),
    ("http_req_dns", "trend", "time"),
    ("http_req_connecting", "trend", "time"),
    ("http_req_tls_handshaking", "trend", "time"),
    ("http_req_sending", "trend", "time"),
    ("http_req_waiting", "trend", "time"),
    ("http_req_receiving", "trend", "time"),
    ("http_req_failed", "rate", "default"),
    ("checks", "rate", "default"),
    ("data_sent", "counter", "data"),
    ("data_received", "counter", "data"),
    ("iteration_duration", "trend", "time"),
    ("group_duration", "trend", "time"),
    ("iterations", "counter", "default"),
    ("dropped_iterations", "counter", "default"),
    ("vus", "gauge", "default"),
    ("vus_max", "gauge", "default"),
];

struct Lines<W: Write> {
    out: W,
    n: u64,
}

impl<W: Write> Lines<W> {
    fn line(&mut self, v: &Value) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, v)?;
        self.out.write_all(b"\n")?;
        self.n += 1;
        Ok(())
    }

    fn point(&mut self, metric: &str, time: &str, value: f64, tags: &Value) -> std::io::Result<()> {
        self.line(&json!({
            "metric": metric,
            "type": "Point",
            "data": { "time": time, "value": value, "tags": tags },
        }))
    }

    /// k6's VU gauges, which carry no tags.
    fn gauges(&mut self, stats: &RunStats) -> std::io::Result<()> {
        let now = rfc3339(crate::clock::system_time());
        let none = json!({});
        self.point("vus", &now, f64::from(stats.vus.load(Relaxed)), &none)?;
        self.point(
            "vus_max",
            &now,
            f64::from(stats.vus_max.load(Relaxed)),
            &none,
        )
    }
}

/// k6's `submetrics` of a metric definition: `{expected_response:true}` on
/// `http_req_duration`, and every sub-metric a threshold names; `null` when there is none.
fn submetrics(name: &str, thresholds: &[(String, String)]) -> Value {
    let mut keys: Vec<String> = thresholds
        .iter()
        .filter_map(|(m, _)| crate::thresholds::parse_metric(m).ok())
        .filter(|m| m.base == name && !m.tags.is_empty())
        .map(|m| m.key())
        .collect();
    if name == "http_req_duration" {
        keys.insert(0, crate::load::subs::EXPECTED_DURATION.to_string());
    }
    keys.dedup();
    let subs: Vec<Value> = keys
        .iter()
        .filter_map(|key| {
            let metric = crate::thresholds::parse_metric(key).ok()?;
            let tags: serde_json::Map<String, Value> = metric
                .tags
                .iter()
                .filter_map(|t| {
                    let text = t.to_string();
                    let (k, v) = text.split_once(':')?;
                    Some((k.to_string(), Value::String(v.to_string())))
                })
                .collect();
            let suffix = key.strip_prefix(name)?.trim_matches(['{', '}']).to_string();
            Some(json!({ "name": key, "suffix": suffix, "tags": tags }))
        })
        .collect();
    if subs.is_empty() {
        Value::Null
    } else {
        Value::Array(subs)
    }
}

/// The `Metric` lines: one per metric the file may hold.
fn definitions<W: Write>(
    w: &mut Lines<W>,
    journeys: bool,
    thresholds: &[(String, String)],
) -> std::io::Result<()> {
    for (name, kind, contains) in DEFINITIONS {
        // k6 defines a metric with its first sample: no groups, no `group_duration`.
        if *name == "group_duration" && !journeys {
            continue;
        }
        let own: Vec<&str> = thresholds
            .iter()
            .filter(|(m, _)| m == name)
            .map(|(_, s)| s.as_str())
            .collect();
        w.line(&json!({
            "type": "Metric",
            "data": {
                "name": name, "type": kind, "contains": contains,
                "thresholds": own, "submetrics": submetrics(name, thresholds),
            },
            "metric": name,
        }))?;
    }
    Ok(())
}

/// One step's tags, built once on the writer thread.
struct StepTags {
    /// A request's tags without those of its response.
    http: serde_json::Map<String, Value>,
    /// One per check of the step, in check order.
    checks: Vec<Value>,
    /// Its `group_duration`'s.
    group: Value,
}

impl StepTags {
    fn new(step: &StepInfo, scenario: &str) -> StepTags {
        let group = step.group();
        let mut http = serde_json::Map::new();
        http.insert("group".into(), Value::String(group.clone()));
        http.insert("method".into(), Value::String(step.method.clone()));
        http.insert(
            "name".into(),
            Value::String(crate::journey::k6_name(&step.url)),
        );
        http.insert("scenario".into(), Value::String(scenario.into()));
        http.insert("url".into(), Value::String(step.url.clone()));
        // sloburn's own tag: the journey step (k6 has only the group path).
        if step.journey.is_some() {
            http.insert("step".into(), Value::String(step.name.clone()));
        }
        let checks = step
            .checks
            .iter()
            .map(|c| {
                let mut t = json!({ "check": c.name, "group": group, "scenario": scenario });
                if step.journey.is_some() {
                    t["step"] = Value::String(step.name.clone());
                }
                t
            })
            .collect();
        StepTags {
            http,
            checks,
            group: json!({ "group": group, "scenario": scenario }),
        }
    }
}

/// Every tag set the writer puts on points, built once.
struct Tagged {
    /// Whether the run walks journeys (a single request is its own iteration).
    journeys: bool,
    /// k6's root group: the per-iteration samples.
    base: Value,
    /// Per step: its requests' static tags, its checks' tags, its group's.
    steps: Vec<StepTags>,
    journey_groups: Vec<Value>,
}

impl Tagged {
    fn new(tags: &Tags) -> Tagged {
        let mut tagged = Tagged::of_steps(tags);
        if !tags.extra.is_empty() {
            tagged.add(&tags.extra);
        }
        tagged
    }

    /// `--tag`s on every tag set.
    fn add(&mut self, extra: &[(String, String)]) {
        let put = |m: &mut serde_json::Map<String, Value>| {
            for (k, v) in extra {
                m.insert(k.clone(), Value::String(v.clone()));
            }
        };
        let mut values: Vec<&mut Value> = vec![&mut self.base];
        values.extend(self.journey_groups.iter_mut());
        for st in &mut self.steps {
            put(&mut st.http);
            values.push(&mut st.group);
            values.extend(st.checks.iter_mut());
        }
        for v in values {
            if let Value::Object(m) = v {
                put(m);
            }
        }
    }

    fn of_steps(tags: &Tags) -> Tagged {
        Tagged {
            journeys: !tags.journeys.is_empty(),
            base: json!({ "group": "", "scenario": tags.scenario }),
            steps: tags
                .steps
                .iter()
                .map(|st| StepTags::new(st, &tags.scenario))
                .collect(),
            journey_groups: tags
                .journeys
                .iter()
                .map(|j| json!({ "group": format!("::{j}"), "scenario": tags.scenario }))
                .collect(),
        }
    }

    /// A request's points: k6's `http_*` with its response's tags, its checks, and (for a
    /// single request, its own iteration) the per-iteration points.
    fn request<W: Write>(&self, w: &mut Lines<W>, r: &Request) -> std::io::Result<()> {
        let Some(st) = self.steps.get(r.step as usize) else {
            return Ok(());
        };
        let t = rfc3339(r.time);
        let http = response_tags(st.http.clone(), r);
        w.point("http_reqs", &t, 1.0, &http)?;
        if r.status != 0 {
            w.point("http_req_duration", &t, ms(r.duration), &http)?;
            w.point("http_req_corrected_duration", &t, ms(r.corrected), &http)?;
            for p in Phase::ALL {
                w.point(
                    &format!("http_req_{}", p.as_str()),
                    &t,
                    ms(r.phases[p as usize]),
                    &http,
                )?;
            }
        }
        w.point("http_req_failed", &t, f64::from(u8::from(r.failed)), &http)?;
        for (i, ct) in st.checks.iter().take(r.n_checks.into()).enumerate() {
            let passed = r.checks >> i & 1 == 1;
            w.point("checks", &t, f64::from(u8::from(passed)), ct)?;
        }
        if !self.journeys {
            // A single request is its iteration.
            w.point("data_sent", &t, r.sent as f64, &self.base)?;
            w.point("data_received", &t, r.received as f64, &self.base)?;
            // Every phase of the request: the corrected duration's figure.
            w.point("iteration_duration", &t, ms(r.corrected), &self.base)?;
            w.point("iterations", &t, 1.0, &self.base)?;
        }
        Ok(())
    }

    fn record<W: Write>(&self, w: &mut Lines<W>, record: Record) -> std::io::Result<()> {
        match record {
            Record::Request(r) => self.request(w, &r)?,
            Record::Step { time, step, took } => {
                if let Some(st) = self.steps.get(step as usize) {
                    w.point("group_duration", &rfc3339(time), ms(took), &st.group)?;
                }
            }
            Record::Data {
                time,
                sent,
                received,
            } => {
                let t = rfc3339(time);
                w.point("data_sent", &t, sent as f64, &self.base)?;
                w.point("data_received", &t, received as f64, &self.base)?;
            }
            Record::Iteration {
                time,
                journey,
                took,
            } => {
                let t = rfc3339(time);
                if let Some(g) = self.journey_groups.get(journey as usize) {
                    w.point("group_duration", &t, ms(took), g)?;
                }
                w.point("iteration_duration", &t, ms(took), &self.base)?;
                w.point("iterations", &t, 1.0, &self.base)?;
            }
            Record::Dropped(time) => {
                w.point("dropped_iterations", &rfc3339(time), 1.0, &self.base)?;
            }
        }
        Ok(())
    }
}

/// A request's step tags with those of its response: `expected_response`, `proto`,
/// `status`, and k6's error codes (1000 + the status for a 4xx or 5xx answer, 1000, its
/// generic code, for a transport error, named in `error`).
fn response_tags(mut tags: serde_json::Map<String, Value>, r: &Request) -> Value {
    tags.insert(
        "expected_response".into(),
        Value::String((!r.failed).to_string()),
    );
    tags.insert("proto".into(), Value::String(r.proto.into()));
    tags.insert("status".into(), Value::String(r.status.to_string()));
    if let Some(e) = r.error {
        tags.insert("error".into(), Value::String(e.as_str().into()));
        tags.insert("error_code".into(), Value::String("1000".into()));
    } else if r.status >= 400 {
        let code = 1000 + u32::from(r.status);
        tags.insert("error_code".into(), Value::String(code.to_string()));
    }
    Value::Object(tags)
}

/// Writes the file until every sender is gone (or `token` is cancelled); returns the lines
/// written.
pub fn write_all(
    rx: Receiver<Record>,
    file: std::fs::File,
    stats: &RunStats,
    tags: &Tags,
    thresholds: &[(String, String)],
    token: &CancellationToken,
) -> std::io::Result<u64> {
    let mut w = Lines {
        out: std::io::BufWriter::new(file),
        n: 0,
    };
    definitions(&mut w, !tags.journeys.is_empty(), thresholds)?;
    let tagged = Tagged::new(tags);
    let mut last_gauge = crate::clock::instant();
    while !token.is_cancelled() {
        let record = match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(r) => Some(r),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        if crate::clock::elapsed(last_gauge) >= Duration::from_secs(1) {
            last_gauge = crate::clock::instant();
            w.gauges(stats)?;
        }
        if let Some(record) = record {
            tagged.record(&mut w, record)?;
        }
    }
    w.gauges(stats)?;
    w.out.flush()?;
    w.out.get_ref().sync_all()?;
    Ok(w.n)
}
