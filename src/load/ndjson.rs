//! `--out json=FILE`: k6's per-sample NDJSON, which k6 tooling reads. One `{"type":"Metric",…}`
//! definition per metric first, then `{"type":"Point","metric":…,"data":{"time":…,"value":…,
//! "tags":{…}}}` lines: per request `http_reqs`, `http_req_duration` and the phases,
//! `http_req_failed`, one `checks` point per check; per iteration `data_sent`,
//! `data_received`, `iteration_duration`, `iterations` (a single-request profile's iteration is
//! its request); per journey step and per journey walked k6's `group_duration`; per dropped
//! iteration `dropped_iterations`; every second `vus` and `vus_max`. sloburn's own
//! `http_req_dns` and `http_req_corrected_duration` come along.
//!
//! Each sample is tagged as k6 tags it: a request with its own step's `method`, `url`, `name`
//! and `group` (`::journey::step`), a check with its step's group, the per-iteration samples
//! in the root group (`""`). Records carry the step's number only; the writer thread turns it
//! into tags.
//!
//! The request path stays free of locks and allocation: the observer copies a request's figures
//! into a fixed-size record and hands it to a bounded channel; one writer thread formats and
//! writes. When the writer falls behind, samples are dropped and counted (the run is never
//! slowed down to feed a file), and `finish` reports how many. `sample` keeps a fraction of the
//! requests, evenly spread (every k-th, not at random).

use super::iteration::{IterationResult, StepInfo};
use super::observe::Observer;
use super::stats::RunStats;
use crate::http::{ErrorClass, Outcome, Phase};
use serde_json::{Value, json};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, SystemTime};

/// Records waiting for the writer; past this, samples are dropped and counted.
const QUEUE: usize = 1 << 16;
/// Checks per request that fit the record (a bit each); later ones are not written.
const MAX_CHECKS: usize = 64;

/// What the request path sends the writer: plain numbers only.
enum Record {
    Request {
        time: SystemTime,
        /// The request's step (`load::iteration`'s `StepId`).
        step: u32,
        status: u16,
        error: Option<ErrorClass>,
        failed: bool,
        phases: [Duration; 7],
        duration: Duration,
        /// `http_req_corrected_duration`: every phase (`Phases::total`), no lateness.
        corrected: Duration,
        sent: u64,
        received: u64,
        checks: u64,
        n_checks: u8,
        /// k6's `proto` tag.
        proto: &'static str,
    },
    /// A journey step's group ended.
    Step {
        time: SystemTime,
        step: u32,
        took: Duration,
    },
    /// A journey iteration's bytes.
    Data {
        time: SystemTime,
        sent: u64,
        received: u64,
    },
    /// A journey iteration ended (not a dropped one).
    Iteration {
        time: SystemTime,
        journey: u32,
        took: Duration,
    },
    Dropped(SystemTime),
}

/// What the writer turns step and journey numbers into.
pub struct Tags {
    /// k6's `scenario`: the profile's name.
    pub scenario: String,
    /// Every step of the run, in `StepId` order (`Work::steps`).
    pub steps: Vec<StepInfo>,
    /// The journeys, in mix order (empty for a single-request profile).
    pub journeys: Vec<String>,
}

/// The observer half: cheap, on the request path.
pub struct NdjsonOut {
    tx: SyncSender<Record>,
    stats: Arc<RunStats>,
    sample: f64,
    seen: AtomicU64,
    dropped: Arc<AtomicU64>,
}

/// The writer half: joins the thread and says how it went.
pub struct NdjsonWriter {
    handle: std::thread::JoinHandle<std::io::Result<u64>>,
    dropped: Arc<AtomicU64>,
}

/// How the file came out.
pub struct NdjsonDone {
    pub lines: u64,
    /// Samples the writer could not keep up with.
    pub dropped: u64,
}

/// Starts the writer on `file`. `sample` in (0, 1] is the fraction of requests written.
pub fn start(
    file: std::fs::File,
    stats: Arc<RunStats>,
    tags: Tags,
    thresholds: Vec<(String, String)>,
    sample: f64,
) -> (Arc<NdjsonOut>, NdjsonWriter) {
    let (tx, rx) = sync_channel(QUEUE);
    let dropped = Arc::new(AtomicU64::new(0));
    let writer_stats = stats.clone();
    let handle = std::thread::Builder::new()
        .name("out-json".into())
        .spawn(move || write_all(rx, file, &writer_stats, &tags, &thresholds))
        .expect("spawning the --out json writer thread");
    (
        Arc::new(NdjsonOut {
            tx,
            stats,
            sample: sample.clamp(f64::MIN_POSITIVE, 1.0),
            seen: AtomicU64::new(0),
            dropped: dropped.clone(),
        }),
        NdjsonWriter { handle, dropped },
    )
}

impl NdjsonWriter {
    /// Waits for the writer once every sender is gone (drop the run's observers first).
    pub fn finish(self) -> std::io::Result<NdjsonDone> {
        let lines = self
            .handle
            .join()
            .map_err(|_| std::io::Error::other("the --out json writer panicked"))??;
        Ok(NdjsonDone {
            lines,
            dropped: self.dropped.load(Relaxed),
        })
    }
}

impl NdjsonOut {
    fn send(&self, r: Record) {
        if let Err(TrySendError::Full(_)) = self.tx.try_send(r) {
            self.dropped.fetch_add(1, Relaxed);
        }
    }

    /// Systematic sampling: request k is kept when `floor((k+1)·f) > floor(k·f)`.
    fn keep(&self) -> bool {
        if self.sample >= 1.0 {
            return true;
        }
        let k = self.seen.fetch_add(1, Relaxed) as f64;
        ((k + 1.0) * self.sample).floor() > (k * self.sample).floor()
    }
}

impl Observer for NdjsonOut {
    fn request_finished(
        &self,
        step: usize,
        outcome: &Outcome,
        _lateness: Duration,
        checks: &[bool],
    ) {
        if !self.keep() {
            return;
        }
        let mut bits = 0u64;
        for (i, passed) in checks.iter().take(MAX_CHECKS).enumerate() {
            bits |= u64::from(*passed) << i;
        }
        self.send(Record::Request {
            time: crate::clock::system_time(),
            step: step as u32,
            status: outcome.status.unwrap_or(0),
            error: outcome.error,
            failed: self.stats.is_failed_at(step, outcome),
            phases: Phase::ALL.map(|p| super::record::k6_phase(&outcome.phases, p)),
            duration: outcome.duration(),
            corrected: outcome.phases.total(),
            sent: outcome.bytes_sent,
            received: outcome.bytes_received,
            checks: bits,
            n_checks: checks.len().min(MAX_CHECKS) as u8,
            proto: if outcome.version == http::Version::HTTP_2 {
                "HTTP/2.0"
            } else {
                "HTTP/1.1"
            },
        });
    }

    fn step_finished(&self, step: usize, took: Duration) {
        self.send(Record::Step {
            time: crate::clock::system_time(),
            step: step as u32,
            took,
        });
    }

    fn iteration_data(&self, _journey: usize, sent: u64, received: u64) {
        self.send(Record::Data {
            time: crate::clock::system_time(),
            sent,
            received,
        });
    }

    fn iteration_finished(&self, journey: usize, result: IterationResult, took: Duration) {
        if result != IterationResult::Dropped {
            self.send(Record::Iteration {
                time: crate::clock::system_time(),
                journey: journey as u32,
                took,
            });
        }
    }

    fn iteration_dropped(&self, _reason: super::pacing::DropReason, _journey: usize) {
        self.send(Record::Dropped(crate::clock::system_time()));
    }
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
        keys.insert(0, super::subs::EXPECTED_DURATION.to_string());
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
        http.insert("name".into(), Value::String(step.url.clone()));
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

fn write_all(
    rx: Receiver<Record>,
    file: std::fs::File,
    stats: &RunStats,
    tags: &Tags,
    thresholds: &[(String, String)],
) -> std::io::Result<u64> {
    let mut w = Lines {
        out: std::io::BufWriter::new(file),
        n: 0,
    };
    let journeys = !tags.journeys.is_empty();
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
    // k6's root group: the per-iteration samples.
    let base = json!({ "group": "", "scenario": tags.scenario });
    // Per step: its requests' static tags, its checks' tags, its group's.
    let steps: Vec<StepTags> = tags
        .steps
        .iter()
        .map(|st| StepTags::new(st, &tags.scenario))
        .collect();
    let journey_groups: Vec<Value> = tags
        .journeys
        .iter()
        .map(|j| json!({ "group": format!("::{j}"), "scenario": tags.scenario }))
        .collect();
    // k6's VU gauges carry no tags.
    let none = json!({});
    let mut last_gauge = crate::clock::instant();
    loop {
        let record = match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(r) => Some(r),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        if crate::clock::elapsed(last_gauge) >= Duration::from_secs(1) {
            last_gauge = crate::clock::instant();
            let now = rfc3339(crate::clock::system_time());
            let vus = stats.vus.load(Relaxed);
            w.point("vus", &now, f64::from(vus), &none)?;
            w.point(
                "vus_max",
                &now,
                f64::from(stats.vus_max.load(Relaxed)),
                &none,
            )?;
        }
        match record {
            Some(Record::Request {
                time,
                step,
                status,
                error,
                failed,
                phases,
                duration,
                corrected,
                sent,
                received,
                checks,
                n_checks,
                proto,
            }) => {
                let Some(st) = steps.get(step as usize) else {
                    continue;
                };
                let t = rfc3339(time);
                let mut tags = st.http.clone();
                tags.insert(
                    "expected_response".into(),
                    Value::String((!failed).to_string()),
                );
                tags.insert("proto".into(), Value::String(proto.into()));
                tags.insert("status".into(), Value::String(status.to_string()));
                // k6's error codes: 1000 + the status for a 4xx or 5xx answer, 1000 (its
                // generic code) for a transport error, named in `error`.
                if let Some(e) = error {
                    tags.insert("error".into(), Value::String(e.as_str().into()));
                    tags.insert("error_code".into(), Value::String("1000".into()));
                } else if status >= 400 {
                    let code = 1000 + u32::from(status);
                    tags.insert("error_code".into(), Value::String(code.to_string()));
                }
                let http = Value::Object(tags);
                w.point("http_reqs", &t, 1.0, &http)?;
                if status != 0 {
                    w.point("http_req_duration", &t, ms(duration), &http)?;
                    w.point("http_req_corrected_duration", &t, ms(corrected), &http)?;
                    for p in Phase::ALL {
                        w.point(
                            &format!("http_req_{}", p.as_str()),
                            &t,
                            ms(phases[p as usize]),
                            &http,
                        )?;
                    }
                }
                w.point("http_req_failed", &t, f64::from(u8::from(failed)), &http)?;
                for (i, ct) in st.checks.iter().take(n_checks.into()).enumerate() {
                    let passed = checks >> i & 1 == 1;
                    w.point("checks", &t, f64::from(u8::from(passed)), ct)?;
                }
                if !journeys {
                    // A single request is its iteration.
                    w.point("data_sent", &t, sent as f64, &base)?;
                    w.point("data_received", &t, received as f64, &base)?;
                    // Every phase of the request: the corrected duration's figure.
                    w.point("iteration_duration", &t, ms(corrected), &base)?;
                    w.point("iterations", &t, 1.0, &base)?;
                }
            }
            Some(Record::Step { time, step, took }) => {
                if let Some(st) = steps.get(step as usize) {
                    w.point("group_duration", &rfc3339(time), ms(took), &st.group)?;
                }
            }
            Some(Record::Data {
                time,
                sent,
                received,
            }) => {
                let t = rfc3339(time);
                w.point("data_sent", &t, sent as f64, &base)?;
                w.point("data_received", &t, received as f64, &base)?;
            }
            Some(Record::Iteration {
                time,
                journey,
                took,
            }) => {
                let t = rfc3339(time);
                if let Some(g) = journey_groups.get(journey as usize) {
                    w.point("group_duration", &t, ms(took), g)?;
                }
                w.point("iteration_duration", &t, ms(took), &base)?;
                w.point("iterations", &t, 1.0, &base)?;
            }
            Some(Record::Dropped(time)) => {
                w.point("dropped_iterations", &rfc3339(time), 1.0, &base)?;
            }
            None => {}
        }
    }
    let now = rfc3339(crate::clock::system_time());
    w.point("vus", &now, f64::from(stats.vus.load(Relaxed)), &none)?;
    w.point(
        "vus_max",
        &now,
        f64::from(stats.vus_max.load(Relaxed)),
        &none,
    )?;
    w.out.flush()?;
    w.out.get_ref().sync_all()?;
    Ok(w.n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(sample: f64, requests: usize) -> Vec<Value> {
        let dir = std::env::temp_dir().join(format!(
            "sloburn-ndjson-{}-{sample}-{requests}",
            std::process::id()
        ));
        let file = std::fs::File::create(&dir).unwrap();
        let stats = Arc::new(RunStats::new(&[]));
        let tags = Tags {
            scenario: "canary".into(),
            steps: vec![StepInfo {
                journey: None,
                name: super::super::iteration::SINGLE_STEP.into(),
                checks: vec![crate::checks::Check {
                    name: "ok".into(),
                    kind: crate::checks::CheckKind::Status(vec![(200, 200)]),
                }],
                method: "GET".into(),
                url: "http://127.0.0.1:1/".into(),
            }],
            journeys: Vec::new(),
        };
        let (out, writer) = start(
            file,
            stats,
            tags,
            vec![("http_req_duration".into(), "p(95)<300".into())],
            sample,
        );
        let ok = Outcome {
            status: Some(200),
            phases: crate::http::Phases {
                connecting: Duration::from_millis(3),
                ..Default::default()
            },
            ..Outcome::default()
        };
        for _ in 0..requests {
            out.request_finished(0, &ok, Duration::from_millis(3), &[true]);
        }
        out.iteration_dropped(super::super::pacing::DropReason::Saturated, 0);
        drop(out);
        let done = writer.finish().unwrap();
        let text = std::fs::read_to_string(&dir).unwrap();
        let _ = std::fs::remove_file(&dir);
        let v: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(done.lines as usize, v.len());
        v
    }

    #[test]
    fn definitions_then_points_in_k6_shape() {
        let v = lines(1.0, 3);
        assert_eq!(v[0]["type"], "Metric");
        assert_eq!(v[0]["data"]["type"], "counter");
        let dur = v
            .iter()
            .find(|l| l["metric"] == "http_req_duration")
            .unwrap();
        assert_eq!(dur["data"]["thresholds"], json!(["p(95)<300"]));
        let points: Vec<&Value> = v.iter().filter(|l| l["type"] == "Point").collect();
        let reqs = points.iter().filter(|p| p["metric"] == "http_reqs").count();
        assert_eq!(reqs, 3);
        let corrected = points
            .iter()
            .find(|p| p["metric"] == "http_req_corrected_duration")
            .unwrap();
        assert_eq!(corrected["data"]["value"], 3.0);
        let d = points
            .iter()
            .find(|p| p["metric"] == "http_req_duration")
            .unwrap();
        assert_eq!(
            d["data"]["value"], 0.0,
            "k6's duration leaves the connection out"
        );
        assert_eq!(d["data"]["tags"]["status"], "200");
        assert_eq!(d["data"]["tags"]["expected_response"], "true");
        assert_eq!(d["data"]["tags"]["scenario"], "canary");
        let t = d["data"]["time"].as_str().unwrap();
        assert!(chrono::DateTime::parse_from_rfc3339(t).is_ok(), "{t}");
        let check = points.iter().find(|p| p["metric"] == "checks").unwrap();
        assert_eq!(check["data"]["tags"]["check"], "ok");
        assert_eq!(check["data"]["value"], 1.0);
        assert_eq!(
            points
                .iter()
                .filter(|p| p["metric"] == "dropped_iterations")
                .count(),
            1
        );
        assert!(points.iter().any(|p| p["metric"] == "vus_max"));
    }

    #[test]
    fn sampling_keeps_an_even_fraction() {
        let v = lines(0.25, 100);
        let reqs = v
            .iter()
            .filter(|l| l["type"] == "Point" && l["metric"] == "http_reqs")
            .count();
        assert_eq!(reqs, 25);
    }
}
