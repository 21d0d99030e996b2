//! Start-up, the SLO tick, graceful drain and signals.
//!
//! Start-up order (linkerd2-proxy's): read and validate the config before binding any port
//! (bad config → exit 78), open the SLO store, bind, then start the schedules and mark ready.
//! SIGTERM or SIGINT drains: no new runs, runs in progress finish within the grace period, the
//! SLO state is flushed; a second signal exits at once. SIGHUP reloads.

use super::reload::{load_text, reload, watch};
use super::schedules::apply;
use super::state::{Shared, Source, unix_now};
use crate::budget::Budget;
use crate::load::plan::Shard;
use crate::load::runner::Abort;
use crate::metrics::Metrics;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

#[derive(Clone)]
pub struct Options {
    pub source: Source,
    /// Overrides `server.listen`.
    pub listen: Option<SocketAddr>,
    pub shard: Shard,
    /// Reload when the config file changes (besides SIGHUP and the API).
    pub watch: bool,
}

/// Why the daemon did not start.
#[derive(Debug)]
pub enum Startup {
    /// Rendered diagnostics; exit 78.
    Config(String),
    Bind(String),
}

/// A running daemon, for `serve`, `demo` and tests.
pub struct Daemon {
    pub shared: Arc<Shared>,
    pub addr: SocketAddr,
}

/// Validates the config, opens the store, binds, starts everything. Config errors come back
/// as `Err(Startup::Config)` before any port is bound.
pub async fn start(opts: Options) -> Result<Daemon, Startup> {
    let (cfg, text) = match &opts.source {
        Source::File(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Startup::Config(format!(
                    "{}:1:1: cannot read the config file: {e}",
                    path.display()
                ))
            })?;
            let cfg = load_text(path, &text).map_err(Startup::Config)?;
            (cfg, Some(text))
        }
        Source::Fixed(cfg) => ((**cfg).clone(), None),
    };
    let metrics = Metrics::new(env!("CARGO_PKG_VERSION"));
    let budget = Budget::open(&cfg.storage.path, metrics.clone());
    let listen = opts.listen.unwrap_or(cfg.server.listen);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Startup::Bind(format!("cannot listen on {listen}: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Startup::Bind(e.to_string()))?;
    let flush_every = cfg.storage.flush_interval;
    let shared = Arc::new(Shared::new(
        &cfg,
        metrics,
        budget,
        opts.source.clone(),
        opts.shard,
        text,
    ));
    let app = super::api::app(shared.clone());
    let token = shared.shutdown.clone();
    shared.tracker.spawn(async move {
        let result = axum::serve(listener, app)
            .with_graceful_shutdown(async move { token.cancelled().await })
            .await;
        if let Err(e) = result {
            tracing::error!(error = %e, "HTTP server failed");
        }
    });
    apply(&shared, Arc::new(cfg));
    shared.metrics.reload(true);
    shared
        .tracker
        .spawn(budget_loop(shared.clone(), flush_every));
    if opts.watch {
        shared.tracker.spawn(watch(shared.clone()));
    }
    shared.ready.store(true, Relaxed);
    tracing::info!(%addr, "sloburn ready");
    Ok(Daemon { shared, addr })
}

/// The once-a-second SLO tick, periodic flushes and prunes.
async fn budget_loop(shared: Arc<Shared>, flush_every: Duration) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut last_flush = tokio::time::Instant::now();
    let mut last_prune = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shared.shutdown.cancelled() => return,
        }
        shared.budget.tick(unix_now() as i64);
        if last_flush.elapsed() >= flush_every {
            last_flush = tokio::time::Instant::now();
            let s = shared.clone();
            let _ = tokio::task::spawn_blocking(move || s.budget.flush()).await;
        }
        if last_prune.elapsed() >= Duration::from_secs(600) {
            last_prune = tokio::time::Instant::now();
            let s = shared.clone();
            let _ = tokio::task::spawn_blocking(move || s.budget.prune(unix_now() as i64)).await;
        }
    }
}

impl Daemon {
    /// Graceful stop: no new runs, running ones drain within the grace period, the SLO state
    /// is flushed, the server stops.
    pub async fn shutdown(self) {
        let shared = self.shared;
        let grace = shared.config().server.grace_period;
        if let Ok(g) = shared.generation.lock() {
            g.cancel();
        }
        for s in shared.active_runs() {
            s.stop(Abort::Stopped("shutdown".into()));
        }
        // Runs drain their in-flight requests (bounded by the grace period) before the
        // server and the tick stop, so their last events are counted and flushed.
        let runs_done = async {
            while !shared.active_runs().is_empty() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let _ = tokio::time::timeout(grace + Duration::from_secs(1), runs_done).await;
        shared.shutdown.cancel();
        shared.tracker.close();
        let _ = tokio::time::timeout(Duration::from_secs(5), shared.tracker.wait()).await;
        shared.budget.tick(unix_now() as i64);
        let s = shared.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let _ = s.budget.flush();
            s.budget.close();
        })
        .await;
        tracing::info!("sloburn stopped");
    }
}

/// `sloburn serve`: runs until SIGTERM/SIGINT; SIGHUP reloads. Returns the exit code.
pub fn command(opts: Options) -> i32 {
    with_signals(|mut signals| async move {
        let daemon = match start(opts).await {
            Ok(d) => d,
            Err(Startup::Config(e)) => {
                println!("{e}");
                return crate::exit::CONFIG;
            }
            Err(Startup::Bind(e)) => {
                eprintln!("error: {e}");
                return crate::exit::ERROR;
            }
        };
        run_until_signal(daemon, &mut signals).await
    })
}

/// Builds the daemon's runtime, installs the signal handlers first (so a signal during
/// start-up is not lost) and runs `main` with them; returns its exit code.
pub fn with_signals<F, Fut>(main: F) -> i32
where
    F: FnOnce(Signals) -> Fut,
    Fut: Future<Output = i32>,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return crate::exit::ERROR;
        }
    };
    runtime.block_on(async move {
        let signals = match Signals::new() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: cannot install signal handlers: {e}");
                return crate::exit::ERROR;
            }
        };
        main(signals).await
    })
}

/// SIGTERM, SIGINT and SIGHUP as one stream.
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

enum Sig {
    Stop(&'static str),
    Reload,
}

impl Signals {
    pub fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    async fn next(&mut self) -> Sig {
        tokio::select! {
            _ = self.term.recv() => Sig::Stop("SIGTERM"),
            _ = self.int.recv() => Sig::Stop("SIGINT"),
            _ = self.hup.recv() => Sig::Reload,
        }
    }
}

/// Serves until a stop signal, reloading on SIGHUP; a second stop signal exits at once.
pub async fn run_until_signal(daemon: Daemon, signals: &mut Signals) -> i32 {
    loop {
        match signals.next().await {
            Sig::Reload => {
                let _ = reload(&daemon.shared);
            }
            Sig::Stop(name) => {
                tracing::info!(
                    signal = name,
                    "shutting down; a second signal exits at once"
                );
                break;
            }
        }
    }
    let mut shutdown = std::pin::pin!(daemon.shutdown());
    loop {
        tokio::select! {
            _ = &mut shutdown => return crate::exit::OK,
            sig = signals.next() => if let Sig::Stop(name) = sig {
                tracing::warn!(signal = name, "second signal: exiting now");
                return crate::exit::SECOND_SIGNAL;
            },
        }
    }
}
