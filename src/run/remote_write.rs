//! `--out prometheus-rw=URL[?interval=5s&native=true]`: the run's figures pushed to a Prometheus
//! remote write 1.0 receiver (snappy-compressed `prometheus.WriteRequest`, see `rw_proto`) every
//! `interval` and once at the end, with the final figures of the summary.
//!
//! Series (the `/metrics` names, DESIGN.md "Metrics"), per step with the labels `profile`,
//! `target`, `step`, `journey` (journeys only) and `testid` (`--testid`):
//! `sloburn_http_reqs_total`, `sloburn_http_reqs_failed_total` and the classic histogram
//! `sloburn_http_req_duration_seconds` (the target's buckets); with `native=true` the same name
//! also carries a native histogram (schema 3). Per run (`profile`, `target`, `testid`):
//! `sloburn_iterations_total`, `sloburn_dropped_iterations_total`, `sloburn_vus`,
//! `sloburn_data_sent_bytes_total`, `sloburn_data_received_bytes_total`.
//!
//! The load never waits for the receiver: each push is encoded by a ticker task and handed to a
//! sender task through a queue of [`QUEUE`] requests; a push that finds the queue full, or that
//! the receiver refuses or does not answer within the interval (at most 10 s), is dropped and its
//! samples counted. At the end the last push gets [`FINAL_WAIT`] to be sent; what is still
//! queued then is dropped too. Memory: at most `QUEUE + 2` encoded requests, each linear in the
//! run's steps and buckets.
//!
//! `--out opentelemetry` goes through the same pusher ([`Wire::Otlp`]); its export is built in
//! `otlp_metrics`.

use super::rw_proto::{Histogram, Label, Sample, TimeSeries, WriteRequest};
use crate::hist::HistSnapshot;
use crate::http::{Client, ClientOptions, RequestSpec, Resolver};
use crate::load::record::RunRecord;
use crate::load::stats::RunStats;
use crate::metrics::NativeRead;
use crate::names;
use bytes::Bytes;
use prost::Message;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Encoded pushes waiting for the sender.
pub const QUEUE: usize = 2;
/// How long the run waits, after its summary figures are final, for the last push.
pub const FINAL_WAIT: Duration = Duration::from_secs(10);
/// The default push interval (k6's `K6_PROMETHEUS_RW_PUSH_INTERVAL`).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

/// What a pusher sends: remote write 1.0, or an OTLP/HTTP metrics export (`otlp_metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    RemoteWrite,
    Otlp,
}

impl Wire {
    /// The `--out` name, which also starts the stderr line of its counts.
    pub fn name(self) -> &'static str {
        match self {
            Wire::RemoteWrite => "prometheus-rw",
            Wire::Otlp => "opentelemetry",
        }
    }
}

/// A parsed `prometheus-rw=` or `opentelemetry=` value.
#[derive(Debug, Clone, PartialEq)]
pub struct RwOptions {
    pub url: http::Uri,
    pub interval: Duration,
    pub native: bool,
}

impl RwOptions {
    /// `URL[?interval=DURATION&native=true|false]`: sloburn's options follow the first `?` and
    /// are not sent; the receiver's URL is what comes before it. For OTLP the URL is the
    /// endpoint's base (`/v1/metrics` is added unless the path already ends with it), and
    /// `native` is not an option (its trends are always exponential histograms).
    pub fn parse(value: &str, wire: Wire) -> Result<RwOptions, String> {
        let (url, query) = value.split_once('?').unwrap_or((value, ""));
        let uri = url
            .parse::<http::Uri>()
            .ok()
            .filter(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some())
            .ok_or_else(|| {
                format!(
                    "`{url}`: give an http:// or https:// URL, e.g. \
                     http://prometheus:9090/api/v1/write"
                )
            })?;
        let mut opts = RwOptions {
            url: uri,
            interval: DEFAULT_INTERVAL,
            native: false,
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, v) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "interval" => {
                    let d = crate::units::parse_duration(v)
                        .map_err(|e| format!("interval=`{v}`: {e}"))?;
                    if d < Duration::from_millis(100) || d > Duration::from_secs(3600) {
                        return Err(format!(
                            "interval=`{v}`: give a duration from 100ms to 1h, e.g. 5s"
                        ));
                    }
                    opts.interval = d;
                }
                "native" if wire == Wire::RemoteWrite => {
                    opts.native = match v {
                        "true" => true,
                        "false" => false,
                        _ => return Err(format!("native=`{v}`: use true or false")),
                    }
                }
                _ => {
                    return Err(format!(
                        "unknown option `{key}`: use {}",
                        match wire {
                            Wire::RemoteWrite => "interval=DURATION or native=true|false",
                            Wire::Otlp => "interval=DURATION",
                        }
                    ));
                }
            }
        }
        if wire == Wire::Otlp && !opts.url.path().ends_with("/v1/metrics") {
            let joined = format!(
                "{}/v1/metrics",
                url.split('#').next().unwrap_or(url).trim_end_matches('/')
            );
            opts.url = joined
                .parse()
                .map_err(|e| format!("`{joined}` is not a URL: {e}"))?;
        }
        Ok(opts)
    }
}

/// The run's identity, on every series.
#[derive(Debug, Clone)]
pub struct RunLabels {
    pub profile: String,
    pub target: String,
    pub testid: Option<String>,
}

/// Samples sent and dropped by a finished pusher.
#[derive(Debug, Default)]
pub struct PushCounts {
    pub sent: AtomicU64,
    pub dropped: AtomicU64,
    /// Samples in pushes queued or being sent.
    queued: AtomicU64,
}

struct Batch {
    body: Bytes,
    samples: u64,
}

/// Everything a push is built from.
struct Source {
    wire: Wire,
    /// When the run started, ns since the epoch (OTLP's cumulative start).
    start_ns: u64,
    labels: RunLabels,
    buckets: Vec<f64>,
    native: bool,
    last_ms: AtomicI64,
}

impl Source {
    /// A timestamp after every earlier push's: the receiver refuses a second sample at the
    /// same millisecond.
    fn timestamp(&self) -> i64 {
        let now = crate::clock::system_time()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let prev = self.last_ms.fetch_max(now, Relaxed);
        if prev >= now {
            self.last_ms.fetch_add(1, Relaxed) + 1
        } else {
            now
        }
    }

    fn batch(&self, snap: &RunRecord) -> Batch {
        if self.wire == Wire::Otlp {
            let now = u64::try_from(self.timestamp()).unwrap_or(0) * 1_000_000;
            let (req, points) =
                super::otlp_metrics::export_request(snap, &self.labels, self.start_ns, now);
            return Batch {
                body: req.encode_to_vec().into(),
                samples: points,
            };
        }
        let req = write_request(
            snap,
            &self.labels,
            &self.buckets,
            self.native,
            self.timestamp(),
        );
        let samples = req
            .timeseries
            .iter()
            .map(|t| (t.samples.len() + t.histograms.len()) as u64)
            .sum();
        // Snappy's block format, as remote write specifies; compressing cannot fail but for
        // inputs past 4 GiB, which a push is not.
        let body = snap::raw::Encoder::new()
            .compress_vec(&req.encode_to_vec())
            .unwrap_or_default();
        Batch {
            body: body.into(),
            samples,
        }
    }
}

/// A running pusher: the ticker and the sender tasks.
pub struct Pusher {
    source: Arc<Source>,
    tx: mpsc::Sender<Batch>,
    counts: Arc<PushCounts>,
    ticker: JoinHandle<()>,
    sender: JoinHandle<()>,
}

impl Pusher {
    pub fn start(
        wire: Wire,
        opts: &RwOptions,
        stats: Arc<RunStats>,
        labels: RunLabels,
        buckets: Vec<f64>,
    ) -> Pusher {
        let start_ns = crate::clock::system_time()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let source = Arc::new(Source {
            wire,
            start_ns,
            labels,
            buckets,
            native: opts.native,
            last_ms: AtomicI64::new(0),
        });
        let counts = Arc::new(PushCounts::default());
        let (tx, rx) = mpsc::channel(QUEUE);
        let timeout = opts.interval.min(Duration::from_secs(10));
        let sender = tokio::spawn(send_all(
            rx,
            wire,
            opts.url.clone(),
            timeout,
            counts.clone(),
        ));
        let ticker = tokio::spawn(tick(
            opts.interval,
            stats,
            source.clone(),
            tx.clone(),
            counts.clone(),
        ));
        Pusher {
            source,
            tx,
            counts,
            ticker,
            sender,
        }
    }

    /// Pushes the run's final figures and waits up to [`FINAL_WAIT`] for what is queued;
    /// returns the samples sent and dropped.
    pub async fn finish(self, last: &RunRecord) -> (u64, u64) {
        self.ticker.abort();
        let batch = self.source.batch(last);
        let samples = batch.samples;
        let deadline = crate::clock::tokio_instant() + FINAL_WAIT;
        self.counts.queued.fetch_add(samples, Relaxed);
        if tokio::time::timeout_at(deadline, self.tx.send(batch))
            .await
            .map_or(true, |r| r.is_err())
        {
            self.counts.queued.fetch_sub(samples, Relaxed);
            self.counts.dropped.fetch_add(samples, Relaxed);
        }
        drop(self.tx);
        let mut sender = self.sender;
        if tokio::time::timeout_at(deadline, &mut sender)
            .await
            .is_err()
        {
            sender.abort();
            // Its queued samples are counted below; the abort's outcome says nothing more.
            let _ = sender.await;
        }
        let stranded = self.counts.queued.swap(0, Relaxed);
        let dropped = self.counts.dropped.fetch_add(stranded, Relaxed) + stranded;
        (self.counts.sent.load(Relaxed), dropped)
    }
}

async fn tick(
    every: Duration,
    stats: Arc<RunStats>,
    source: Arc<Source>,
    tx: mpsc::Sender<Batch>,
    counts: Arc<PushCounts>,
) {
    let start = crate::clock::tokio_instant();
    let mut interval = tokio::time::interval_at(start + every, every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        interval.tick().await;
        let batch = source.batch(&stats.snapshot(crate::clock::elapsed(start)));
        let samples = batch.samples;
        counts.queued.fetch_add(samples, Relaxed);
        if tx.try_send(batch).is_err() {
            counts.queued.fetch_sub(samples, Relaxed);
            counts.dropped.fetch_add(samples, Relaxed);
        }
    }
}

async fn send_all(
    mut rx: mpsc::Receiver<Batch>,
    wire: Wire,
    url: http::Uri,
    timeout: Duration,
    counts: Arc<PushCounts>,
) {
    let client = Client::new(
        ClientOptions {
            timeout,
            max_body: 64 << 10,
            ..ClientOptions::default()
        },
        Arc::new(Resolver::system()),
    );
    let mut conn = client.conn();
    let mut headers = http::HeaderMap::new();
    let wire_headers: &[(&str, &str)] = match wire {
        Wire::RemoteWrite => &[
            ("content-encoding", "snappy"),
            ("x-prometheus-remote-write-version", "0.1.0"),
        ],
        Wire::Otlp => &[],
    };
    for &(name, value) in wire_headers.iter().chain(&[
        ("content-type", "application/x-protobuf"),
        ("user-agent", concat!("sloburn/", env!("CARGO_PKG_VERSION"))),
    ]) {
        headers.insert(name, http::HeaderValue::from_static(value));
    }
    while let Some(batch) = rx.recv().await {
        let outcome = conn
            .send(&RequestSpec {
                method: http::Method::POST,
                uri: url.clone(),
                headers: headers.clone(),
                body: batch.body,
            })
            .await;
        let ok = outcome.error.is_none() && outcome.status.is_some_and(|s| (200..300).contains(&s));
        if !ok {
            tracing::debug!(status = ?outcome.status, error = ?outcome.error, out = wire.name(), "push failed");
        }
        counts.queued.fetch_sub(batch.samples, Relaxed);
        let slot = if ok { &counts.sent } else { &counts.dropped };
        slot.fetch_add(batch.samples, Relaxed);
    }
}

/// `h` as native (exponential) histogram buckets at `schema`: each of its buckets (0.78 % wide)
/// is counted in the native bucket holding its midpoint, so a value lands at most one native
/// bucket off its own (see `metrics::native` for the keys).
pub fn native_buckets(h: &HistSnapshot, schema: i32) -> NativeRead {
    let mut read = NativeRead::default();
    let per_octave = 2f64.powi(schema);
    for (lo, hi, n) in h.ranges() {
        if hi == 0 {
            read.zero += n;
            continue;
        }
        let seconds = (lo as f64 + hi as f64) / 2.0 / 1e9;
        let key = (seconds.log2() * per_octave).ceil() as i64;
        match read.buckets.last_mut() {
            Some((k, c)) if *k == key => *c += n,
            _ => read.buckets.push((key, n)),
        }
    }
    read
}

fn labels_of(name: &str, run: &RunLabels, extra: &[(&str, &str)]) -> Vec<Label> {
    let mut labels: Vec<Label> = [
        ("__name__", name),
        ("profile", run.profile.as_str()),
        ("target", run.target.as_str()),
    ]
    .into_iter()
    .chain(run.testid.as_deref().map(|t| ("testid", t)))
    .chain(extra.iter().copied())
    .filter(|(_, v)| !v.is_empty())
    .map(|(n, v)| Label {
        name: n.to_string(),
        value: v.to_string(),
    })
    .collect();
    labels.sort();
    labels
}

fn series(name: &str, run: &RunLabels, extra: &[(&str, &str)], value: f64, ts: i64) -> TimeSeries {
    TimeSeries {
        labels: labels_of(name, run, extra),
        samples: vec![Sample {
            value,
            timestamp: ts,
        }],
        histograms: Vec::new(),
    }
}

/// One push of `snap`'s figures at `ts` (ms since the epoch).
pub fn write_request(
    snap: &RunRecord,
    run: &RunLabels,
    buckets: &[f64],
    native: bool,
    ts: i64,
) -> WriteRequest {
    let mut out = Vec::new();
    for (name, value) in [
        (names::ITERATIONS_TOTAL, snap.iterations as f64),
        (names::DROPPED_ITERATIONS_TOTAL, snap.dropped as f64),
        (names::VUS, f64::from(snap.vus)),
        (names::DATA_SENT_TOTAL, snap.data_sent as f64),
        (names::DATA_RECEIVED_TOTAL, snap.data_received as f64),
    ] {
        out.push(series(name, run, &[], value, ts));
    }
    const DURATION: &str = names::HTTP_REQ_DURATION;
    for step in &snap.steps {
        let at = [
            ("journey", step.journey.as_deref().unwrap_or("")),
            ("step", step.name.as_str()),
        ];
        out.push(series(
            names::HTTP_REQS_TOTAL,
            run,
            &at,
            step.requests as f64,
            ts,
        ));
        out.push(series(
            names::HTTP_REQS_FAILED_TOTAL,
            run,
            &at,
            step.failed as f64,
            ts,
        ));
        let h = &step.duration;
        let sum = h.sum().as_secs_f64();
        for (le, n) in buckets.iter().zip(h.buckets_le(buckets)) {
            let le = crate::metrics::le_value(*le, false);
            let with_le = [at[0], at[1], ("le", le.as_str())];
            out.push(series(
                &format!("{DURATION}_bucket"),
                run,
                &with_le,
                n as f64,
                ts,
            ));
        }
        let inf = [at[0], at[1], ("le", "+Inf")];
        out.push(series(
            &format!("{DURATION}_bucket"),
            run,
            &inf,
            h.count() as f64,
            ts,
        ));
        out.push(series(
            &format!("{DURATION}_count"),
            run,
            &at,
            h.count() as f64,
            ts,
        ));
        out.push(series(&format!("{DURATION}_sum"), run, &at, sum, ts));
        if native {
            let read = native_buckets(h, crate::config::NativeOptions::DEFAULT_SCHEMA);
            let (mut spans, mut positive_deltas) = (Vec::new(), Vec::new());
            read.spans_and_deltas_into(&mut spans, &mut positive_deltas);
            let positive_spans = spans
                .into_iter()
                .map(|(offset, length)| crate::metrics::proto::BucketSpan {
                    offset: Some(offset),
                    length: Some(length),
                })
                .collect();
            out.push(TimeSeries {
                labels: labels_of(DURATION, run, &at),
                samples: Vec::new(),
                histograms: vec![Histogram {
                    count_int: Some(h.count()),
                    sum,
                    schema: crate::config::NativeOptions::DEFAULT_SCHEMA,
                    zero_threshold: crate::metrics::ZERO_THRESHOLD,
                    zero_count_int: Some(read.zero),
                    positive_spans,
                    positive_deltas,
                    timestamp: ts,
                }],
            });
        }
    }
    WriteRequest { timeseries: out }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl RwOptions {
        fn parse_rw(value: &str) -> Result<RwOptions, String> {
            RwOptions::parse(value, Wire::RemoteWrite)
        }
    }

    #[test]
    fn otlp_urls_are_the_endpoint_with_v1_metrics_and_take_no_native() {
        for (given, url) in [
            ("http://c:4318", "http://c:4318/v1/metrics"),
            ("http://c:4318/", "http://c:4318/v1/metrics"),
            (
                "http://c:4318/v1/metrics?interval=1s",
                "http://c:4318/v1/metrics",
            ),
        ] {
            let o = RwOptions::parse(given, Wire::Otlp).unwrap();
            assert_eq!(o.url.to_string(), url);
        }
        let e = RwOptions::parse("http://c:4318?native=true", Wire::Otlp).unwrap_err();
        assert!(
            e.contains("unknown option `native`: use interval=DURATION"),
            "{e}"
        );
    }

    #[test]
    fn options_default_to_5s_classic_and_bad_ones_say_why() {
        let o = RwOptions::parse_rw("http://127.0.0.1:9090/api/v1/write").unwrap();
        assert_eq!((o.interval, o.native), (DEFAULT_INTERVAL, false));
        assert_eq!(o.url.path(), "/api/v1/write");
        let o = RwOptions::parse_rw("https://m/push?interval=2s&native=true").unwrap();
        assert_eq!(
            (o.interval, o.native, o.url.query()),
            (Duration::from_secs(2), true, None)
        );
        for (bad, why) in [
            ("", "give an http:// or https:// URL"),
            ("/api/v1/write", "give an http:// or https:// URL"),
            ("http://m/?interval=2h", "from 100ms to 1h"),
            ("http://m/?native=1", "use true or false"),
            ("http://m/?x", "unknown option `x`"),
        ] {
            let e = RwOptions::parse_rw(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn native_buckets_hold_every_value_within_a_bucket_of_its_own() {
        let h = crate::hist::Histogram::new();
        let values_ns = [
            0u64,
            1_000,
            1_999_000,
            2_000_000,
            2_100_000,
            7_000_000,
            3_000_000_000,
        ];
        for ns in values_ns {
            h.record(Duration::from_nanos(ns));
        }
        let read = native_buckets(&h.snapshot(), 3);
        assert_eq!(read.zero, 1);
        assert_eq!(read.total(), values_ns.len() as u64);
        // Keys ascend, and each value's count sits in a key at most one off its exact one.
        assert!(read.buckets.windows(2).all(|w| w[0].0 < w[1].0));
        for ns in values_ns.into_iter().filter(|&n| n > 0) {
            let exact = ((ns as f64 / 1e9).log2() * 8.0).ceil() as i64;
            assert!(
                read.buckets.iter().any(|(k, _)| (k - exact).abs() <= 1),
                "{ns} ns: {read:?}"
            );
        }
    }

    #[test]
    fn a_push_has_sorted_labels_the_run_labels_and_cumulative_buckets() {
        let stats = RunStats::new(&[]);
        for ms in [1u64, 3, 30] {
            stats.duration.record(Duration::from_millis(ms));
        }
        let mut snap = stats.snapshot(Duration::from_secs(1));
        snap.steps[0].duration = snap.duration.clone();
        snap.steps[0].requests = 3;
        let run = RunLabels {
            profile: "p".into(),
            target: "t".into(),
            testid: Some("id".into()),
        };
        let req = write_request(&snap, &run, &[0.002, 0.01], true, 7);
        for t in &req.timeseries {
            let mut sorted = t.labels.clone();
            sorted.sort();
            assert_eq!(t.labels, sorted);
            assert!(t.labels.iter().all(|l| !l.value.is_empty()));
            assert!(t.labels.contains(&Label {
                name: "testid".into(),
                value: "id".into()
            }));
        }
        let value = |name: &str, le: Option<&str>| {
            req.timeseries
                .iter()
                .find(|t| {
                    t.labels
                        .iter()
                        .any(|l| l.name == "__name__" && l.value == name)
                        && le.is_none_or(|le| {
                            t.labels.iter().any(|l| l.name == "le" && l.value == le)
                        })
                })
                .map(|t| t.samples[0].value)
        };
        assert_eq!(value("sloburn_http_reqs_total", None), Some(3.0));
        let bucket = "sloburn_http_req_duration_seconds_bucket";
        assert_eq!(value(bucket, Some("0.002")), Some(1.0));
        assert_eq!(value(bucket, Some("0.01")), Some(2.0));
        assert_eq!(value(bucket, Some("+Inf")), Some(3.0));
        let native: Vec<&Histogram> = req.timeseries.iter().flat_map(|t| &t.histograms).collect();
        assert_eq!(native.len(), 1);
        assert_eq!(
            (native[0].count_int, native[0].schema, native[0].timestamp),
            (Some(3), 3, 7)
        );
    }
}
