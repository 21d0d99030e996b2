//! `sloburn target`: the fault-injecting HTTP/1.1 test server used by tests, benchmarks and the
//! demo, on `crate::server` (accepting, connection limits, graceful shutdown). It owns each
//! connection's service, the fault plan of each request (latency distributions, injected errors, resets, stalls, large or slow bodies,
//! with per-request query-string overrides) and the `/stats` counters.
//!
//! The request path is lock-free and allocation-light so the load engine can push it past 100k
//! req/s: faults are a `Copy` struct, bodies come from static buffers, randomness is a `SmallRng`
//! owned by each connection, and counters are relaxed atomics.

mod body;
mod faults;
mod parse;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::signals::{Caught, Signals};
use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use body::TargetBody;
pub use faults::{Distribution, Faults, Stall};
pub use parse::{parse_duration, parse_ratio, parse_size, parse_status};

mod conn;
mod stats;
pub use conn::*;
pub use stats::*;

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
        self.stall?.remaining(crate::clock::elapsed(self.started))
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
        started: crate::clock::tokio_instant(),
        seed: rand::random(),
    });
    let fds = crate::limits::nofile().map_or(1024, |l| l.soft);
    let tracker = TaskTracker::new();
    tracker.spawn(crate::server::serve(
        listener,
        Handler::new(shared.clone()),
        crate::server::Limits::whole_process(fds),
        shutdown,
        tracker.clone(),
    ));
    // Closing only arms `wait`; the server can still spawn connection tasks.
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
