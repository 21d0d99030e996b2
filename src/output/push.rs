//! What the two push outputs share (`prometheus_rw`, `opentelemetry`): their options
//! (`URL[?interval=5s&…]`), and [`Push`], the output that encodes the run's figures every
//! `interval` and once at the end and POSTs them, with an [`Encoding`] for the bytes.
//!
//! The load never waits for the receiver: each push is encoded by a ticker task and handed to a
//! sender task through a queue of [`QUEUE`] requests; a push that finds the queue full, or that
//! the receiver refuses or does not answer within the interval (at most 10 s), is dropped and its
//! samples counted. At the end the last push gets [`FINAL_WAIT`] to be sent; what is still
//! queued then is dropped too. Memory: at most `QUEUE + 2` encoded requests, each linear in the
//! run's steps and buckets. Both tasks are the output's (a `JoinSet`) and end with the run's
//! token, an early error included.
//!
//! Dropped samples are never silent: the end line `NAME: N samples sent, M dropped` is
//! followed, when M > 0, by `NAME: dropped because …` with each reason (the receiver's HTTP
//! status and the start of its answer, connection refused, no answer in time, the queue full,
//! the end's wait over) and its pushes and samples; at most [`MAX_REASONS`] reasons, the rest
//! counted together.

use super::sink::{Last, Output, RunInfo};
use crate::http::{Client, ClientOptions, RequestSpec, Resolver};
use crate::load::event::Observer;
use crate::load::record::RunRecord;
use crate::load::stats::RunStats;
use bytes::Bytes;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};
use tokio_util::sync::CancellationToken;

/// Encoded pushes waiting for the sender.
pub const QUEUE: usize = 2;
/// How long the run waits, after its summary figures are final, for the last push.
pub const FINAL_WAIT: Duration = Duration::from_secs(10);
/// Distinct reasons for drops kept (the rest are counted as `other reasons`).
pub const MAX_REASONS: usize = 4;
/// The most characters of a receiver's answer quoted in a reason.
const MAX_ANSWER_CHARS: usize = 160;
/// The default push interval (k6's `K6_PROMETHEUS_RW_PUSH_INTERVAL`).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

/// A push output's receiver and pace.
#[derive(Debug, Clone, PartialEq)]
pub struct PushOptions {
    pub url: http::Uri,
    pub interval: Duration,
}

impl PushOptions {
    /// `URL[?interval=DURATION&…]`: sloburn's options follow the first `?` and are not sent;
    /// the receiver's URL is what comes before it. Options other than `interval` go to
    /// `other`, in order, which refuses those its output does not know.
    pub fn parse(
        value: &str,
        mut other: impl FnMut(&str, &str) -> Result<(), String>,
    ) -> Result<PushOptions, String> {
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
        let mut opts = PushOptions {
            url: uri,
            interval: DEFAULT_INTERVAL,
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, v) = pair.split_once('=').unwrap_or((pair, ""));
            if key != "interval" {
                other(key, v)?;
                continue;
            }
            let d = crate::units::parse_duration(v).map_err(|e| format!("interval=`{v}`: {e}"))?;
            if d < Duration::from_millis(100) || d > Duration::from_secs(3600) {
                return Err(format!(
                    "interval=`{v}`: give a duration from 100ms to 1h, e.g. 5s"
                ));
            }
            opts.interval = d;
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
    /// `--tag NAME=VALUE` pairs.
    pub tags: Vec<(String, String)>,
}

impl RunLabels {
    /// The run's label pairs, then `extra`, leaving out empty values: what both encoders put
    /// on every series (remote write's labels, OTLP's attributes).
    pub fn pairs<'a>(
        &'a self,
        extra: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        [
            ("profile", self.profile.as_str()),
            ("target", self.target.as_str()),
        ]
        .into_iter()
        .chain(self.testid.as_deref().map(|t| ("testid", t)))
        .chain(self.tags.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .chain(extra.iter().copied())
        .filter(|(_, v)| !v.is_empty())
    }
}

/// What every push of one run shares.
#[derive(Debug, Clone)]
pub struct Series {
    pub labels: RunLabels,
    /// The target's classic buckets, in seconds.
    pub buckets: Vec<f64>,
    /// When the run started, ns since the epoch (OTLP's cumulative start).
    pub start_ns: u64,
}

/// One encoded push: its body and the samples (or data points) it holds.
pub struct Batch {
    pub body: Bytes,
    pub samples: u64,
}

/// How a push output turns the figures into a request: pure, no I/O.
pub trait Encoding: Send + Sync + 'static {
    /// Its `--out` name, which also starts the stderr line of its counts.
    fn name(&self) -> &'static str;
    /// Its request's headers besides `content-type` (protobuf) and `user-agent`.
    fn headers(&self) -> &'static [(&'static str, &'static str)];
    /// One push of `snap`'s figures at `now_ms` (ms since the epoch).
    fn encode(&self, snap: &RunRecord, run: &Series, now_ms: i64) -> Batch;
}

/// A push output: [`PushOptions`] and an [`Encoding`].
pub struct Push<E: Encoding> {
    opts: PushOptions,
    encoding: Arc<E>,
    running: Option<Pusher<E>>,
}

impl<E: Encoding> Push<E> {
    pub fn new(opts: PushOptions, encoding: E) -> Push<E> {
        Push {
            opts,
            encoding: Arc::new(encoding),
            running: None,
        }
    }

    pub fn options(&self) -> &PushOptions {
        &self.opts
    }

    pub fn encoding(&self) -> &E {
        &self.encoding
    }
}

#[async_trait::async_trait]
impl<E: Encoding> Output for Push<E> {
    fn name(&self) -> &'static str {
        self.encoding.name()
    }

    fn start(&mut self, run: &RunInfo<'_>) -> anyhow::Result<Vec<Arc<dyn Observer>>> {
        let series = Series {
            labels: RunLabels {
                profile: run.profile.to_string(),
                target: run.target.to_string(),
                testid: run.testid.map(str::to_string),
                tags: run.tags.to_vec(),
            },
            buckets: run.buckets.to_vec(),
            start_ns: u64::try_from(crate::clock::since_epoch().as_nanos()).unwrap_or(u64::MAX),
        };
        self.running = Some(Pusher::start(
            &self.opts,
            self.encoding.clone(),
            series,
            run.stats.clone(),
            run.token,
        ));
        Ok(Vec::new())
    }

    async fn stop(&mut self, last: &Last<'_>) -> anyhow::Result<Vec<String>> {
        let Some(p) = self.running.take() else {
            return Ok(Vec::new());
        };
        let (sent, dropped, why) = p.finish(&last.report.stats).await;
        let name = self.encoding.name();
        let mut lines = vec![format!("{name}: {sent} samples sent, {dropped} dropped")];
        if dropped > 0 {
            lines.push(format!("{name}: dropped because {why}"));
        }
        Ok(lines)
    }
}

/// Samples sent and dropped by a pusher, and why they were dropped.
#[derive(Debug, Default)]
struct PushCounts {
    sent: AtomicU64,
    dropped: AtomicU64,
    /// Samples in pushes queued or being sent.
    queued: AtomicU64,
    /// (reason, pushes, samples), in the order first seen.
    why: std::sync::Mutex<Vec<(String, u64, u64)>>,
}

impl PushCounts {
    /// Counts a push of `samples` as dropped, for `reason`.
    fn drop_push(&self, samples: u64, reason: impl FnOnce() -> String) {
        self.dropped.fetch_add(samples, Relaxed);
        let Ok(mut why) = self.why.lock() else { return };
        let reason = reason();
        let at = match why.iter().position(|(r, _, _)| *r == reason) {
            Some(at) => at,
            None if why.len() < MAX_REASONS => {
                why.push((reason, 0, 0));
                why.len() - 1
            }
            None => {
                if why.len() == MAX_REASONS {
                    why.push(("other reasons".into(), 0, 0));
                }
                MAX_REASONS
            }
        };
        why[at].1 += 1;
        why[at].2 += samples;
    }

    /// `reason (N pushes, M samples); …`.
    fn reasons(&self) -> String {
        let Ok(why) = self.why.lock() else {
            return "unknown".into();
        };
        let parts: Vec<String> = why
            .iter()
            .map(|(r, pushes, samples)| {
                let s = if *pushes == 1 { "" } else { "es" };
                format!("{r} ({pushes} push{s}, {samples} samples)")
            })
            .collect();
        parts.join("; ")
    }
}

/// Why a push the receiver was sent did not count as sent: its status and the start of its
/// answer (control characters shown as `?`), or the transport's failure.
fn failure(outcome: &crate::http::Outcome, timeout: Duration) -> String {
    use crate::http::ErrorClass;
    // A refusal's answer longer than the client reads (64 KiB) still has its status.
    let refused = outcome.status.filter(|s| !(200..300).contains(s));
    match (
        outcome.error.filter(|_| refused.is_none()),
        refused.or(outcome.status),
    ) {
        (Some(ErrorClass::ConnectRefused), _) => "connection refused".into(),
        (Some(ErrorClass::Timeout), _) => format!(
            "no answer within {}",
            crate::units::format_duration(timeout)
        ),
        (Some(ErrorClass::ConnectTimeout), _) => "the connect timed out".into(),
        (Some(ErrorClass::Dns), _) => "the receiver's name did not resolve".into(),
        (Some(class), _) => format!("the request failed ({})", class.as_str()),
        (None, Some(status)) => {
            let text = String::from_utf8_lossy(&outcome.body);
            let mut answer: String = text
                .chars()
                .take(MAX_ANSWER_CHARS)
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            answer = answer.trim().to_string();
            if text.chars().nth(MAX_ANSWER_CHARS).is_some() {
                answer.push('…');
            }
            if answer.is_empty() {
                format!("HTTP {status}")
            } else {
                format!("HTTP {status}: {answer:?}")
            }
        }
        (None, None) => "no answer".into(),
    }
}

/// Everything a push is built from.
struct Source<E> {
    encoding: Arc<E>,
    series: Series,
    last_ms: AtomicI64,
}

impl<E: Encoding> Source<E> {
    /// A timestamp after every earlier push's: the receiver refuses a second sample at the
    /// same millisecond.
    fn timestamp(&self) -> i64 {
        let now = crate::clock::since_epoch().as_millis() as i64;
        let prev = self.last_ms.fetch_max(now, Relaxed);
        if prev >= now {
            self.last_ms.fetch_add(1, Relaxed) + 1
        } else {
            now
        }
    }

    fn batch(&self, snap: &RunRecord) -> Batch {
        self.encoding.encode(snap, &self.series, self.timestamp())
    }
}

/// A running pusher: the ticker and the sender, both in its own set.
struct Pusher<E> {
    source: Arc<Source<E>>,
    tx: mpsc::Sender<Batch>,
    counts: Arc<PushCounts>,
    tasks: JoinSet<()>,
    ticker: AbortHandle,
}

impl<E: Encoding> Pusher<E> {
    fn start(
        opts: &PushOptions,
        encoding: Arc<E>,
        series: Series,
        stats: Arc<RunStats>,
        token: &CancellationToken,
    ) -> Pusher<E> {
        let headers = headers(encoding.headers());
        let source = Arc::new(Source {
            encoding,
            series,
            last_ms: AtomicI64::new(0),
        });
        let counts = Arc::new(PushCounts::default());
        let (tx, rx) = mpsc::channel(QUEUE);
        let timeout = opts.interval.min(Duration::from_secs(10));
        let mut tasks = JoinSet::new();
        let sender = Sender {
            url: opts.url.clone(),
            headers,
            timeout,
            counts: counts.clone(),
            name: source.encoding.name(),
        };
        let t = token.clone();
        tasks.spawn(async move {
            tokio::select! {
                () = sender.send_all(rx) => {}
                () = t.cancelled() => {}
            }
        });
        let t = token.clone();
        let ticking = tick(
            opts.interval,
            stats,
            source.clone(),
            tx.clone(),
            counts.clone(),
        );
        let ticker = tasks.spawn(async move {
            tokio::select! {
                () = ticking => {}
                () = t.cancelled() => {}
            }
        });
        Pusher {
            source,
            tx,
            counts,
            tasks,
            ticker,
        }
    }

    /// Pushes the run's final figures and waits up to [`FINAL_WAIT`] for what is queued;
    /// returns the samples sent and dropped, and why they were dropped.
    async fn finish(mut self, last: &RunRecord) -> (u64, u64, String) {
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
            self.counts.drop_push(samples, || {
                "the last push found the queue full until the end's wait was over".into()
            });
        }
        drop(self.tx);
        let all_done = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout_at(deadline, all_done).await.is_err() {
            // Its queued samples are counted below; the abort's outcome says nothing more.
            self.tasks.shutdown().await;
        }
        let stranded = self.counts.queued.swap(0, Relaxed);
        if stranded > 0 {
            self.counts.drop_push(stranded, || {
                format!(
                    "still queued or being sent {} after the run",
                    crate::units::format_duration(FINAL_WAIT)
                )
            });
        }
        let (sent, dropped) = (
            self.counts.sent.load(Relaxed),
            self.counts.dropped.load(Relaxed),
        );
        (sent, dropped, self.counts.reasons())
    }
}

fn headers(own: &[(&'static str, &'static str)]) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    for &(name, value) in own.iter().chain(&[
        ("content-type", "application/x-protobuf"),
        ("user-agent", concat!("sloburn/", env!("CARGO_PKG_VERSION"))),
    ]) {
        headers.insert(name, http::HeaderValue::from_static(value));
    }
    headers
}

async fn tick<E: Encoding>(
    every: Duration,
    stats: Arc<RunStats>,
    source: Arc<Source<E>>,
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
            counts.drop_push(samples, || {
                format!(
                    "the queue was full (the receiver took longer than the {} interval)",
                    crate::units::format_duration(every)
                )
            });
        }
    }
}

/// The sender's settings: where, how, and what it counts in.
struct Sender {
    url: http::Uri,
    headers: http::HeaderMap,
    timeout: Duration,
    counts: Arc<PushCounts>,
    name: &'static str,
}

impl Sender {
    async fn send_all(self, mut rx: mpsc::Receiver<Batch>) {
        let client = Client::new(
            ClientOptions {
                timeout: self.timeout,
                max_body: 64 << 10,
                ..ClientOptions::default()
            },
            Arc::new(Resolver::system()),
        );
        let mut conn = client.conn();
        while let Some(batch) = rx.recv().await {
            let outcome = conn
                .send(&RequestSpec {
                    method: http::Method::POST,
                    uri: self.url.clone(),
                    headers: self.headers.clone(),
                    body: batch.body,
                })
                .await;
            let ok =
                outcome.error.is_none() && outcome.status.is_some_and(|s| (200..300).contains(&s));
            if !ok {
                tracing::debug!(status = ?outcome.status, error = ?outcome.error, out = self.name, "push failed");
            }
            self.counts.queued.fetch_sub(batch.samples, Relaxed);
            if ok {
                self.counts.sent.fetch_add(batch.samples, Relaxed);
            } else {
                self.counts
                    .drop_push(batch.samples, || failure(&outcome, self.timeout));
            }
        }
    }
}
