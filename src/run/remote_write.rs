//! `--out prometheus-rw=URL`: a one-shot run pushes its figures to Prometheus remote write 1.0
//! (a snappy-compressed protobuf `WriteRequest`), every `--push-interval` and once at the end,
//! so a CI run that exits before any scrape still reaches Prometheus.
//!
//! The series are the `/metrics` families a daemon would expose for the run, with the run's
//! `profile` and `target` labels: requests by status, checks, iterations, dropped iterations by
//! reason, and the duration and corrected-duration histograms on the target's `le` buckets.
//! Each push carries the run's cumulative figures at one timestamp.
//!
//! The pusher is its own task and never holds the load back: a push is bounded by a timeout,
//! ticks missed while one is in flight are skipped, and every sample of a skipped, failed or
//! refused push is counted as dropped and printed at the end.

use crate::http::{Client, ClientOptions, RequestSpec, Resolver};
use crate::load::hist::HistSnapshot;
use crate::load::pacing::DropReason;
use crate::load::stats::{RunStats, StatsSnapshot};
use bytes::Bytes;
use http::header::{CONTENT_ENCODING, CONTENT_TYPE, HeaderName, HeaderValue};
use http::{HeaderMap, Method, Uri};
use prost::Message;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The default push interval (k6's `K6_PROMETHEUS_RW_PUSH_INTERVAL` is 5 s too).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

/// The longest one push may take: past it the push is abandoned and its samples dropped.
const PUSH_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, PartialEq, Message)]
struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    timeseries: Vec<TimeSeries>,
}

#[derive(Clone, PartialEq, Message)]
struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    samples: Vec<Sample>,
}

#[derive(Clone, PartialEq, Message)]
struct Label {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    value: String,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    #[prost(double, tag = "1")]
    value: f64,
    #[prost(int64, tag = "2")]
    timestamp: i64,
}

/// What the pusher did, for the summary.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pushed {
    pub samples: u64,
    pub dropped: u64,
    pub pushes: u64,
    pub failed_pushes: u64,
}

/// The run's series at one moment, with their labels in Prometheus' order (sorted by name,
/// `__name__` first).
struct Series<'a> {
    profile: &'a str,
    target: &'a str,
    at_ms: i64,
    out: Vec<TimeSeries>,
}

impl Series<'_> {
    fn push(&mut self, name: &str, extra: &[(&str, &str)], value: f64) {
        let mut labels = vec![
            ("__name__", name),
            ("profile", self.profile),
            ("target", self.target),
        ];
        labels.extend_from_slice(extra);
        labels[1..].sort_by(|a, b| a.0.cmp(b.0));
        self.out.push(TimeSeries {
            labels: labels
                .into_iter()
                .map(|(n, v)| Label {
                    name: n.to_string(),
                    value: v.to_string(),
                })
                .collect(),
            samples: vec![Sample {
                value,
                timestamp: self.at_ms,
            }],
        });
    }

    fn histogram(&mut self, name: &str, h: &HistSnapshot, bounds: &[f64]) {
        let bucket = format!("{name}_bucket");
        for (le, n) in bounds.iter().zip(h.buckets_le(bounds)) {
            self.push(&bucket, &[("le", &format_le(*le))], n as f64);
        }
        self.push(&bucket, &[("le", "+Inf")], h.count() as f64);
        self.push(&format!("{name}_sum"), &[], h.sum().as_secs_f64());
        self.push(&format!("{name}_count"), &[], h.count() as f64);
    }
}

/// An `le` value as the text exposition writes it (`0.1`, `1`, `2.5`).
fn format_le(le: f64) -> String {
    format!("{le}")
}

/// The series of `s`, stamped `at_ms` (milliseconds since the epoch).
fn series(
    s: &StatsSnapshot,
    profile: &str,
    target: &str,
    bounds: &[f64],
    at_ms: i64,
) -> Vec<TimeSeries> {
    let mut out = Series {
        profile,
        target,
        at_ms,
        out: Vec::new(),
    };
    for (status, n) in &s.statuses {
        out.push(
            "sloburn_http_reqs_total",
            &[("status", &status.to_string())],
            *n as f64,
        );
    }
    for (check, pass, fail) in &s.checks {
        out.push(
            "sloburn_checks_total",
            &[("check", check), ("result", "pass")],
            *pass as f64,
        );
        out.push(
            "sloburn_checks_total",
            &[("check", check), ("result", "fail")],
            *fail as f64,
        );
    }
    out.push("sloburn_iterations_total", &[], s.iterations as f64);
    for reason in DropReason::ALL {
        out.push(
            "sloburn_dropped_iterations_total",
            &[("reason", reason.as_str())],
            s.dropped_by(reason) as f64,
        );
    }
    out.push("sloburn_data_sent_bytes_total", &[], s.data_sent as f64);
    out.push(
        "sloburn_data_received_bytes_total",
        &[],
        s.data_received as f64,
    );
    out.histogram("sloburn_http_req_duration_seconds", &s.duration, bounds);
    out.histogram(
        "sloburn_http_req_corrected_duration_seconds",
        &s.corrected,
        bounds,
    );
    out.out
}

/// The protobuf `WriteRequest` of `series`, snappy-compressed (block format, as remote write
/// 1.0 requires).
fn encode(series: Vec<TimeSeries>) -> Vec<u8> {
    let body = WriteRequest { timeseries: series }.encode_to_vec();
    // The only failure is an input over ~4 GB; a run's figures are a few kilobytes.
    snap::raw::Encoder::new()
        .compress_vec(&body)
        .unwrap_or_default()
}

/// Checks a `prometheus-rw=URL` value: an absolute http or https URL.
pub fn parse_url(url: &str) -> Result<Uri, String> {
    let uri: Uri = url
        .parse()
        .map_err(|e| format!("`{url}` is no URL ({e})"))?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.authority().is_some() => Ok(uri),
        _ => Err(format!(
            "`{url}`: give an http(s) URL of a remote-write receiver, e.g. \
             http://prometheus:9090/api/v1/write"
        )),
    }
}

/// The running pusher: stop it with [`Pusher::finish`].
pub struct Pusher {
    done: CancellationToken,
    task: JoinHandle<Pushed>,
}

impl Pusher {
    pub fn start(
        url: Uri,
        interval: Duration,
        stats: Arc<RunStats>,
        profile: String,
        target: String,
        bounds: Vec<f64>,
    ) -> Pusher {
        let done = CancellationToken::new();
        let stop = done.clone();
        let task = tokio::spawn(async move {
            let client = Client::new(
                ClientOptions {
                    timeout: PUSH_TIMEOUT,
                    max_body: 64 << 10,
                    ..ClientOptions::default()
                },
                Arc::new(Resolver::system()),
            );
            let mut conn = client.conn();
            let start = Instant::now();
            let mut pushed = Pushed::default();
            let mut tick = tokio::time::interval_at(start + interval, interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut last_tick = start;
            // Series in the last push: what a skipped tick would have sent.
            let mut last_n = 0u64;
            loop {
                let last = tokio::select! {
                    biased;
                    () = stop.cancelled() => true,
                    t = tick.tick() => {
                        // Ticks skipped while a push was in flight: their samples never went.
                        let gap = t.saturating_duration_since(last_tick).as_nanos();
                        let skipped = (gap / interval.as_nanos().max(1)).saturating_sub(1);
                        pushed.dropped += last_n * u64::try_from(skipped).unwrap_or(0);
                        last_tick = t;
                        false
                    }
                };
                let snapshot = stats.snapshot(start.elapsed());
                let batch = series(&snapshot, &profile, &target, &bounds, unix_ms());
                let n = batch.len() as u64;
                last_n = n;
                // A push still in flight when the run ends is abandoned for the final one.
                let ok = tokio::select! {
                    ok = send(&mut conn, &url, encode(batch)) => ok,
                    () = stop.cancelled(), if !last => false,
                };
                pushed.pushes += 1;
                if ok {
                    pushed.samples += n;
                } else {
                    pushed.failed_pushes += 1;
                    pushed.dropped += n;
                    conn = client.conn();
                }
                if last {
                    return pushed;
                }
            }
        });
        Pusher { done, task }
    }

    /// Pushes the final figures (bounded by the push timeout) and returns what was pushed.
    pub async fn finish(self) -> Pushed {
        self.done.cancel();
        self.task.await.unwrap_or_default()
    }
}

/// One POST; true when the receiver took it (2xx).
async fn send(conn: &mut crate::http::Conn, url: &Uri, body: Vec<u8>) -> bool {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_ENCODING, HeaderValue::from_static("snappy"));
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/x-protobuf"),
    );
    headers.insert(
        HeaderName::from_static("x-prometheus-remote-write-version"),
        HeaderValue::from_static("0.1.0"),
    );
    let spec = RequestSpec {
        method: Method::POST,
        uri: url.clone(),
        headers,
        body: Bytes::from(body),
    };
    let out = conn.send(&spec).await;
    out.error.is_none() && out.status.is_some_and(|s| (200..300).contains(&s))
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_request_round_trips_through_snappy_and_protobuf() {
        let batch = vec![TimeSeries {
            labels: vec![Label {
                name: "__name__".into(),
                value: "sloburn_iterations_total".into(),
            }],
            samples: vec![Sample {
                value: 3.0,
                timestamp: 1_700_000_000_000,
            }],
        }];
        let wire = encode(batch.clone());
        let raw = snap::raw::Decoder::new().decompress_vec(&wire).unwrap();
        let back = WriteRequest::decode(raw.as_slice()).unwrap();
        assert_eq!(back.timeseries, batch);
    }

    #[test]
    fn le_values_are_written_as_the_text_exposition_writes_them() {
        assert_eq!(format_le(0.1), "0.1");
        assert_eq!(format_le(1.0), "1");
        assert_eq!(format_le(2.5), "2.5");
    }

    #[test]
    fn only_http_urls_are_receivers() {
        assert!(parse_url("http://127.0.0.1:9090/api/v1/write").is_ok());
        assert!(parse_url("https://p/api/v1/write").is_ok());
        assert!(parse_url("ftp://p/x").is_err());
        assert!(parse_url("/api/v1/write").is_err());
    }
}
