//! `sloburn target`: the fault-injecting HTTP/1.1 test server used by tests, benchmarks and the
//! demo. It owns the accept loop, per-connection serving on hyper's `http1`, the fault plan of
//! each request (latency distributions, injected errors, resets, stalls, large or slow bodies,
//! with per-request query-string overrides) and the `/stats` counters.
//!
//! The request path is lock-free and allocation-light so the load engine can push it past 100k
//! req/s: faults are a `Copy` struct, bodies come from static buffers, randomness is a `SmallRng`
//! owned by each connection, and counters are relaxed atomics.

mod body;
mod faults;
mod parse;

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::signals::{Caught, Signals};
use anyhow::Context as _;
use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::{Body, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use body::TargetBody;
pub use faults::{Distribution, Faults, Stall};
pub use parse::{parse_duration, parse_ratio, parse_size, parse_status};

use body::{InFlight, Layout};

/// How long `run_blocking` lets in-flight requests finish after SIGINT/SIGTERM.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Flags of `sloburn target`. Every default means "no fault". Each fault can also be set per
/// request in the query string: `?latency=20ms&jitter=5ms&distribution=normal&status=503&
/// error_ratio=0.5&error_status=502&reset=1&body_size=1MiB&bytes_per_sec=20000`.
#[derive(clap::Args, Debug, Clone)]
pub struct TargetOptions {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Fixed delay added before every response, e.g. `20ms`.
    #[arg(long, value_parser = parse_duration, default_value = "0")]
    pub latency: Duration,
    /// Random spread of the delay, drawn per --distribution, e.g. `5ms`.
    #[arg(long, value_parser = parse_duration, default_value = "0")]
    pub jitter: Duration,
    /// uniform: latency±jitter; normal: jitter is the std dev around latency; exponential and
    /// lognormal: latency is the floor and jitter the mean of the extra delay. Never negative.
    #[arg(long, value_enum, default_value_t = Distribution::Uniform)]
    pub distribution: Distribution,
    /// Probability (0..1) of answering with --error-status.
    #[arg(long, value_parser = parse_ratio, default_value = "0")]
    pub error_ratio: f64,
    /// Status of injected errors.
    #[arg(long, value_parser = parse_status, default_value = "500")]
    pub error_status: u16,
    /// Period of wall-clock stalls since server start, e.g. `10s`. Needs --stall-for.
    #[arg(long, value_parser = parse_duration, requires = "stall_for")]
    pub stall_every: Option<Duration>,
    /// Length of each stall: during [k*every, k*every+for) every request waits for its end.
    #[arg(long, value_parser = parse_duration, requires = "stall_every")]
    pub stall_for: Option<Duration>,
    /// Probability (0..1) of resetting the connection (RST) instead of answering.
    #[arg(long, value_parser = parse_ratio, default_value = "0")]
    pub reset_ratio: f64,
    /// Exact body size (`512`, `4KiB`, `1MiB`); the body stays valid JSON.
    #[arg(long, value_parser = parse_size)]
    pub body_size: Option<u64>,
    /// Trickle the body at this many bytes per second (`20000`, `1MiB`). 0 = unthrottled.
    #[arg(long, value_parser = parse_size)]
    pub bytes_per_sec: Option<u64>,
    /// Tokio worker threads for the standalone command (default: one per core).
    #[arg(long, value_parser = parse_workers)]
    pub workers: Option<usize>,
}

fn parse_workers(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "workers `{s}` must be a whole number of at least 1"
        )),
    }
}

impl Default for TargetOptions {
    /// The same values as the flag defaults, except that the port is 0 (tests and the demo
    /// embed the target and must not collide on 8080).
    fn default() -> Self {
        let faults = Faults::default();
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            latency: faults.latency,
            jitter: faults.jitter,
            distribution: faults.distribution,
            error_ratio: faults.error_ratio,
            error_status: faults.error_status,
            stall_every: None,
            stall_for: None,
            reset_ratio: faults.reset_ratio,
            body_size: faults.body_size,
            bytes_per_sec: faults.bytes_per_sec,
            workers: None,
        }
    }
}

impl TargetOptions {
    /// Checks the options that clap cannot (the struct may also be built in code) and turns
    /// them into the server-wide fault defaults.
    pub fn validate(&self) -> Result<(Faults, Option<Stall>), String> {
        for (name, ratio) in [
            ("--error-ratio", self.error_ratio),
            ("--reset-ratio", self.reset_ratio),
        ] {
            if !(0.0..=1.0).contains(&ratio) {
                return Err(format!("{name} must be between 0 and 1, got {ratio}"));
            }
        }
        parse_status(&self.error_status.to_string()).map_err(|e| format!("--error-status: {e}"))?;
        let stall = match (self.stall_every, self.stall_for) {
            (None, None) => None,
            (Some(every), Some(len)) => Some(Stall::new(every, len)?),
            _ => return Err("--stall-every and --stall-for go together".into()),
        };
        let faults = Faults {
            latency: self.latency,
            jitter: self.jitter,
            distribution: self.distribution,
            error_ratio: self.error_ratio,
            error_status: self.error_status,
            status: None,
            reset_ratio: self.reset_ratio,
            body_size: self.body_size,
            bytes_per_sec: self.bytes_per_sec,
        };
        Ok((faults, stall))
    }
}

/// Counters served on `/stats`. `/stats` itself is not counted.
#[derive(Debug, Default)]
struct Stats {
    requests: AtomicU64,
    in_flight: AtomicU64,
    errors_injected: AtomicU64,
    resets: AtomicU64,
    connections: AtomicU64,
    traceparents_received: AtomicU64,
    /// The last [`TRACEPARENTS_KEPT`] `traceparent` values received, oldest first.
    traceparents: std::sync::Mutex<std::collections::VecDeque<String>>,
}

/// How many received `traceparent` values `/stats` lists (the count covers all of them).
pub const TRACEPARENTS_KEPT: usize = 256;

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    /// Responses whose body was fully handed to the connection.
    pub requests: u64,
    /// Requests received and not yet finished (waiting, stalled or streaming their body).
    pub in_flight: u64,
    /// Responses whose status came from `error_ratio`.
    pub errors_injected: u64,
    /// Connections reset instead of answered.
    pub resets: u64,
    /// Connections accepted.
    pub connections: u64,
    /// Requests that carried a `traceparent` header.
    #[serde(default)]
    pub traceparents_received: u64,
}

/// `/stats`: the counters and the last `traceparent` values received (oldest first, at most
/// [`TRACEPARENTS_KEPT`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsBody {
    #[serde(flatten)]
    pub counters: StatsSnapshot,
    #[serde(default)]
    pub traceparents: Vec<String>,
}

impl Stats {
    fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            requests: self.requests.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            errors_injected: self.errors_injected.load(Ordering::Relaxed),
            resets: self.resets.load(Ordering::Relaxed),
            connections: self.connections.load(Ordering::Relaxed),
            traceparents_received: self.traceparents_received.load(Ordering::Relaxed),
        }
    }

    fn body(&self) -> StatsBody {
        let traceparents = match self.traceparents.lock() {
            Ok(q) => q.iter().cloned().collect(),
            Err(p) => p.into_inner().iter().cloned().collect(),
        };
        StatsBody {
            counters: self.snapshot(),
            traceparents,
        }
    }

    /// Counts the header and keeps its value (bounded); only requests that carry one pay.
    fn record_traceparent(&self, value: &http::HeaderValue) {
        self.traceparents_received.fetch_add(1, Ordering::Relaxed);
        let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
        let mut q = match self.traceparents.lock() {
            Ok(q) => q,
            Err(p) => p.into_inner(),
        };
        if q.len() == TRACEPARENTS_KEPT {
            q.pop_front();
        }
        q.push_back(text);
    }
}

/// State shared by every connection of one server.
pub(crate) struct Shared {
    stats: Stats,
    faults: Faults,
    stall: Option<Stall>,
    started: Instant,
    seed: u64,
}

impl Shared {
    /// Time left in the current stall, if one is on now.
    fn stall_left(&self) -> Option<Duration> {
        self.stall?.remaining(self.started.elapsed())
    }

    async fn wait_out_stall(&self) {
        if let Some(left) = self.stall_left() {
            tokio::time::sleep(left).await;
        }
    }
}

/// A running target. Dropping it does not stop the server: cancel the token given to [`spawn`].
pub struct Target {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    tracker: TaskTracker,
}

impl Target {
    pub fn stats(&self) -> StatsSnapshot {
        self.shared.stats.snapshot()
    }

    /// The last `traceparent` values received, oldest first (as on `/stats`).
    pub fn traceparents(&self) -> Vec<String> {
        self.shared.stats.body().traceparents
    }

    /// Resolves once the shutdown token is cancelled and every connection has finished its
    /// in-flight request. Before cancellation it waits forever.
    pub async fn wait(&self) {
        self.tracker.wait().await;
    }
}

/// Binds `opts.listen`, starts serving in the background on the current runtime and returns
/// at once. Cancelling `shutdown` stops accepting; in-flight requests finish, then connections
/// close. Invalid options are refused with `InvalidInput` before anything is bound.
pub async fn spawn(opts: TargetOptions, shutdown: CancellationToken) -> io::Result<Target> {
    let (faults, stall) = opts
        .validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let listener = TcpListener::bind(opts.listen).await?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared {
        stats: Stats::default(),
        faults,
        stall,
        started: Instant::now(),
        seed: rand::random(),
    });
    let tracker = TaskTracker::new();
    tracker.spawn(accept_loop(
        listener,
        shared.clone(),
        shutdown,
        tracker.clone(),
    ));
    // Closing only arms `wait`; the accept loop can still spawn connection tasks.
    tracker.close();
    Ok(Target {
        addr,
        shared,
        tracker,
    })
}

/// The standalone command: own runtime with `--workers` threads, serves until SIGINT/SIGTERM,
/// then drains in-flight requests for up to 10 s. SIGHUP is ignored (logged), so a closing
/// terminal does not stop a target that a run depends on.
pub fn run_blocking(opts: TargetOptions) -> anyhow::Result<()> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(workers) = opts.workers {
        builder.worker_threads(workers);
    }
    let runtime = builder
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(async {
        // Installed before the address is printed: whoever reads it may signal at once.
        let signals = Signals::install().context("installing the signal handlers")?;
        let shutdown = CancellationToken::new();
        let listen = opts.listen;
        let target = spawn(opts, shutdown.clone())
            .await
            .with_context(|| format!("starting the target on {listen}"))?;
        println!("sloburn target listening on http://{}", target.addr);
        wait_for_stop(signals).await;
        shutdown.cancel();
        if tokio::time::timeout(SHUTDOWN_GRACE, target.wait())
            .await
            .is_err()
        {
            tracing::warn!("requests still in flight after {SHUTDOWN_GRACE:?}; exiting anyway");
        }
        Ok(())
    })
}

/// The standalone command stops on SIGTERM or SIGINT; SIGHUP does not stop it.
async fn wait_for_stop(mut signals: Signals) {
    loop {
        match signals.next().await {
            Some(Caught::Hangup) => tracing::info!("SIGHUP ignored; still serving"),
            Some(Caught::Stop(_)) | None => return,
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let mut builder = http1::Builder::new();
    // No header-read timeout: hyper arms it while a keep-alive connection sits idle, so it
    // would close idle connections after 30 s and race with low-rate keep-alive clients,
    // injecting errors nobody asked for. A test server has no slowloris to fear.
    builder.header_read_timeout(None).keep_alive(true);
    let mut next_conn: u64 = 0;
    loop {
        let accepted = tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning; the server keeps running.
                tracing::warn!(error = %e, "target: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Small request/response pairs on keep-alive would otherwise wait on Nagle.
        let _ = stream.set_nodelay(true);
        shared.stats.connections.fetch_add(1, Ordering::Relaxed);
        next_conn = next_conn.wrapping_add(1);
        let rng =
            SmallRng::seed_from_u64(shared.seed ^ next_conn.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        tracker.spawn(serve(
            stream,
            builder.clone(),
            Conn {
                shared: shared.clone(),
                rng: Cell::new(Some(rng)),
                reset: Arc::new(AtomicBool::new(false)),
            },
            shutdown.clone(),
        ));
    }
}

async fn serve(
    stream: TcpStream,
    builder: http1::Builder,
    conn: Conn,
    shutdown: CancellationToken,
) {
    let io = TokioIo::new(ResetOnDrop {
        stream,
        reset: conn.reset.clone(),
    });
    let connection = builder.serve_connection(io, service_fn(move |req| conn.handle(req)));
    tokio::pin!(connection);
    // Errors here are the client's (hang-ups, bad requests) or our own injected resets.
    tokio::select! {
        _ = connection.as_mut() => {}
        () = shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

/// Per-connection service state. `Cell` works because hyper calls a connection's service from
/// that connection's task only, so the RNG needs no lock.
struct Conn {
    shared: Arc<Shared>,
    rng: Cell<Option<SmallRng>>,
    reset: Arc<AtomicBool>,
}

/// Returned by the service to make hyper drop the connection without writing a response.
#[derive(Debug, thiserror::Error)]
#[error("connection reset by fault injection")]
struct ResetConnection;

/// What a request will get, decided synchronously in `call` where the RNG is at hand.
enum Plan {
    Respond(Response<TargetBody>),
    Fault {
        faults: Faults,
        delay: Duration,
        error: bool,
        reset: Option<Arc<AtomicBool>>,
        in_flight: InFlight,
    },
}

impl Conn {
    fn handle(
        &self,
        req: Request<Incoming>,
    ) -> impl Future<Output = Result<Response<TargetBody>, ResetConnection>> + Send + use<> {
        let plan = self.plan(&req);
        let body = req.into_body();
        async move {
            let (faults, delay, error, reset, in_flight) = match plan {
                Plan::Respond(response) => return Ok(response),
                Plan::Fault {
                    faults,
                    delay,
                    error,
                    reset,
                    in_flight,
                } => (faults, delay, error, reset, in_flight),
            };
            if !body.is_end_stream() {
                drain(body).await;
            }
            let shared = in_flight.shared().clone();
            shared.wait_out_stall().await;
            if !delay.is_zero() {
                crate::timer::sleep(delay).await;
                // A stall that began while we slept freezes this request too.
                shared.wait_out_stall().await;
            }
            if let Some(flag) = reset {
                flag.store(true, Ordering::Relaxed);
                shared.stats.resets.fetch_add(1, Ordering::Relaxed);
                return Err(ResetConnection);
            }
            let status = if error {
                shared.stats.errors_injected.fetch_add(1, Ordering::Relaxed);
                faults.error_status
            } else {
                faults.status.unwrap_or(200)
            };
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let layout = if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
                Layout::new(Some(0), false)
            } else {
                Layout::new(faults.body_size, status.as_u16() >= 400)
            };
            let stall = shared.stall.map(|s| (s, shared.started));
            let body = TargetBody::generated(layout, faults.bytes_per_sec, stall, in_flight);
            Ok(response(status, "application/json", body))
        }
    }

    fn plan(&self, req: &Request<Incoming>) -> Plan {
        let uri = req.uri();
        if uri.path() == "/stats" {
            let json = serde_json::to_vec(&self.shared.stats.body()).unwrap_or_default();
            return Plan::Respond(response(
                StatusCode::OK,
                "application/json",
                TargetBody::once(Bytes::from(json)),
            ));
        }
        if let Some(tp) = req.headers().get("traceparent") {
            self.shared.stats.record_traceparent(tp);
        }
        let faults = match uri.query() {
            None => self.shared.faults,
            Some(query) => match self.shared.faults.with_query(query) {
                Ok(f) => f,
                Err(message) => {
                    return Plan::Respond(response(
                        StatusCode::BAD_REQUEST,
                        "text/plain; charset=utf-8",
                        TargetBody::once(Bytes::from(message + "\n")),
                    ));
                }
            },
        };
        let mut rng = self
            .rng
            .take()
            .unwrap_or_else(|| SmallRng::seed_from_u64(self.shared.seed));
        let delay = faults.sample_delay(&mut rng);
        let reset = Faults::draw(faults.reset_ratio, &mut rng);
        let error = !reset && Faults::draw(faults.error_ratio, &mut rng);
        self.rng.set(Some(rng));
        Plan::Fault {
            faults,
            delay,
            error,
            reset: reset.then(|| self.reset.clone()),
            in_flight: InFlight::start(self.shared.clone()),
        }
    }
}

fn response(
    status: StatusCode,
    content_type: &'static str,
    body: TargetBody,
) -> Response<TargetBody> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// Reads and discards a request body so the connection stays reusable.
async fn drain(mut body: Incoming) {
    while let Some(frame) = body.frame().await {
        if frame.is_err() {
            return;
        }
    }
}

/// The connection's socket. When the service asked for a reset it sets SO_LINGER 0 on drop,
/// which turns the close into an RST: the client sees a reset, not a clean EOF.
struct ResetOnDrop {
    stream: TcpStream,
    reset: Arc<AtomicBool>,
}

impl Drop for ResetOnDrop {
    fn drop(&mut self) {
        if self.reset.load(Ordering::Relaxed) {
            let _ = self.stream.set_zero_linger();
        }
    }
}

impl AsyncRead for ResetOnDrop {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for ResetOnDrop {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
