//! Start-up, the SLO tick, graceful drain and signals.
//!
//! Start-up order (linkerd2-proxy's): read and validate the config before binding any port
//! (bad config → exit 78), open the SLO store, bind, then start the schedules and mark ready.
//! SIGTERM or SIGINT drains: no new runs, runs in progress finish within the grace period, the
//! SLO state is flushed; a second signal flushes the SLO state (for at most 2 s) and exits 130.
//! SIGHUP reloads.
//!
//! A store that could not be opened is tried again from the SLO tick, after 1 s, then twice as
//! long each time up to `REOPEN_MAX` (one log line per attempt); once open, what waited in
//! memory is written. Still unusable at exit: the daemon logs what it loses and exits 74
//! (`exit::STATE_LOST`), never 0.
//!
//! The daemon serves its API on `crate::server`, which idle or half-sent connections cannot
//! lock out.

use super::reload::{load_text, reload, watch};
use super::schedules::apply;
use super::state::{Shared, Source};
use crate::budget::{Budget, Unsaved};
use crate::load::plan::Shard;
use crate::load::runner::Abort;
use crate::metrics::Metrics;
use crate::signals::{Caught, Signals};
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

impl std::fmt::Display for Startup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Startup::Config(diagnostics) => f.write_str(diagnostics),
            Startup::Bind(why) => f.write_str(why),
        }
    }
}

/// A running daemon, for `serve`, `demo` and tests.
pub struct Daemon {
    pub shared: Arc<Shared>,
    pub addr: SocketAddr,
}

/// Validates the config, opens the store, binds, starts everything. Config errors come back
/// as `Err(Startup::Config)` before any port is bound.
pub async fn start(opts: Options) -> Result<Daemon, Startup> {
    // Before the port is bound: the restore reads Prometheus up to here, so the daemon's own
    // new series (scraped once it listens) never counts twice.
    let clock = super::state::daemon_clock();
    let started = clock.unix_secs_i64();
    let (cfg, text) = match &opts.source {
        Source::File(path) => {
            let text = crate::config::read_config(path).map_err(|e| {
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
    metrics.set_location(cfg.server.locations.me.as_deref());
    if let Some(t) = &cfg.telemetry
        && let Some(exporter) = crate::telemetry::daemon::start(t)
    {
        metrics.set_telemetry(exporter.stats().clone());
    }
    let budget = Budget::open(&cfg.storage.path, metrics.clone());
    let listen = opts.listen.unwrap_or(cfg.server.listen);
    let listener = crate::server::bind(listen)
        .map_err(|e| Startup::Bind(format!("cannot listen on {listen}: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Startup::Bind(e.to_string()))?;
    let flush_every = cfg.storage.flush_interval;
    let restore = cfg.storage.restore.clone();
    let shared = Arc::new(Shared::new(
        &cfg,
        metrics,
        budget,
        opts.source.clone(),
        opts.shard,
        text,
        clock,
    ));
    let app = super::api::app(shared.clone());
    let fds = crate::limits::nofile().map_or(1024, |l| l.soft);
    let limits =
        crate::server::Limits::new(cfg.server.header_timeout, cfg.server.max_connections, fds);
    shared.tracker.spawn(crate::server::serve(
        listener,
        app,
        limits,
        shared.shutdown.clone(),
        shared.tracker.clone(),
    ));
    shared
        .tracker
        .spawn(shared.starvation.clone().sample(shared.shutdown.clone()));
    shared.metrics.set_starvation(shared.starvation.clone());
    warn_cpu_quota(&shared, &cfg);
    apply(&shared, Arc::new(cfg));
    shared.metrics.reload(true);
    shared
        .tracker
        .spawn(budget_loop(shared.clone(), flush_every));
    if opts.watch {
        shared.tracker.spawn(watch(shared.clone()));
    }
    if let Some(r) = restore {
        super::restore::begin(&shared);
        shared
            .tracker
            .spawn(super::restore::run(shared.clone(), r, started));
    }
    shared.ready.store(true, Relaxed);
    tracing::info!(%addr, "sloburn ready");
    Ok(Daemon { shared, addr })
}

/// The first wait before opening an unusable store again; it doubles up to `REOPEN_MAX`.
const REOPEN_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between two attempts to open an unusable store.
const REOPEN_MAX: Duration = Duration::from_secs(30);

/// When to try opening an unusable store again.
struct Reopen {
    at: tokio::time::Instant,
    wait: Duration,
    attempts: u32,
}

impl Reopen {
    fn new() -> Reopen {
        Reopen {
            at: crate::clock::tokio_instant() + REOPEN_FIRST,
            wait: REOPEN_FIRST,
            attempts: 0,
        }
    }

    fn failed(&mut self) {
        self.attempts += 1;
        self.wait = (self.wait * 2).min(REOPEN_MAX);
        self.at = crate::clock::tokio_instant() + self.wait;
    }
}

/// Opens the store that was unusable: its minutes join the windows, the run history is read
/// back, and what waited in memory is written. Returns the reason when it is still unusable.
async fn reopen_store(shared: &Arc<Shared>) -> Result<(), String> {
    let s = shared.clone();
    let opened = tokio::task::spawn_blocking(move || {
        let kept = s.budget.unsaved();
        s.budget.reopen(s.clock.unix_secs() as i64)?;
        s.restore_history();
        s.budget.tick(s.clock.unix_secs() as i64);
        let written = s.budget.flush();
        Ok::<_, String>((kept, written))
    })
    .await
    .map_err(|e| e.to_string())?;
    let (kept, written) = opened?;
    match written {
        Ok(_) => {
            tracing::info!(written = %kept, "SLO store usable again; what was kept in memory is written")
        }
        Err(e) => {
            tracing::warn!(error = %e, "SLO store opened, but writing what was kept in memory failed; retrying at the next flush")
        }
    }
    Ok(())
}

/// The once-a-second SLO tick, periodic flushes and prunes, and attempts to open a store that
/// was unusable; also writes the count of the last burst of wrong tokens, which the API logs
/// at most once a second.
async fn budget_loop(shared: Arc<Shared>, flush_every: Duration) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut last_flush = crate::clock::tokio_instant();
    let mut last_prune = crate::clock::tokio_instant();
    let mut reopen = Reopen::new();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shared.shutdown.cancelled() => return,
        }
        // Off the async workers: at a minute's turn every SLO is evaluated again (about 15 µs
        // each), which with thousands of SLOs would hold a worker for tens of milliseconds just
        // when the minute's schedules fire.
        let s = shared.clone();
        let _ =
            tokio::task::spawn_blocking(move || s.budget.tick(s.clock.unix_secs() as i64)).await;
        if let Some(n) = shared
            .auth_failures
            .take_unlogged(crate::clock::tokio_instant())
        {
            super::api::log_auth_failures(n);
        }
        if !shared.budget.store_is_open()
            && crate::clock::tokio_instant() >= reopen.at
            && let Err(e) = reopen_store(&shared).await
        {
            reopen.failed();
            tracing::warn!(
                error = %e,
                attempt = reopen.attempts,
                next_in = ?reopen.wait,
                kept_in_memory = %shared.budget.unsaved(),
                "SLO store still unusable; counts and runs kept in memory"
            );
        }
        if crate::clock::elapsed(last_flush) >= flush_every {
            last_flush = crate::clock::tokio_instant();
            let s = shared.clone();
            let _ = tokio::task::spawn_blocking(move || s.budget.flush()).await;
        }
        if crate::clock::elapsed(last_prune) >= Duration::from_secs(600) {
            last_prune = crate::clock::tokio_instant();
            let s = shared.clone();
            let _ = tokio::task::spawn_blocking(move || {
                s.budget.prune(s.clock.unix_secs() as i64);
                // The prune mapped the store's code again: an idle daemon gives it back now,
                // not after its next run.
                if s.active_runs().is_empty() {
                    crate::memory::release_free_heap();
                    crate::memory::release_idle_code();
                }
            })
            .await;
        }
    }
}

impl Daemon {
    /// Graceful stop: no new runs, running ones drain within the grace period, the SLO state
    /// is flushed, the server stops. Returns what could not be written to the store (which was
    /// unusable to the end), if anything: it is lost, and logged here.
    pub async fn shutdown(self) -> Option<Unsaved> {
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
        shared.budget.tick(shared.clock.unix_secs() as i64);
        if !shared.budget.store_is_open() {
            // One last try: the disk may have been freed since the last attempt.
            let _ = reopen_store(&shared).await;
        }
        let s = shared.clone();
        let lost = tokio::task::spawn_blocking(move || {
            let flushed = s.budget.flush();
            let unsaved = s.budget.unsaved();
            s.budget.close();
            (!unsaved.is_empty()).then(|| {
                let why = flushed
                    .err()
                    .unwrap_or_else(|| "the SLO store is not open".into());
                (unsaved, why)
            })
        })
        .await
        .ok()
        .flatten();
        if let Some((unsaved, why)) = &lost {
            tracing::error!(lost = %unsaved, error = %why, "sloburn stopped; SLO state LOST: the store could not be written");
        } else {
            tracing::info!("sloburn stopped");
        }
        lost.map(|(u, _)| u)
    }
}

/// Folds the counters into the SLO windows and writes them to the store, waiting at most
/// `SECOND_SIGNAL_FLUSH`; a store that does not answer in time is given up on (logged).
async fn flush_now(shared: &Arc<Shared>) {
    let s = shared.clone();
    let flush = tokio::task::spawn_blocking(move || {
        s.budget.tick(s.clock.unix_secs() as i64);
        s.budget.flush()
    });
    match tokio::time::timeout(SECOND_SIGNAL_FLUSH, flush).await {
        Ok(Ok(Ok(minutes))) => tracing::info!(minutes, "SLO state flushed"),
        Ok(Ok(Err(e))) => {
            tracing::error!(error = %e, lost = %shared.budget.unsaved(), "SLO state not flushed")
        }
        Ok(Err(e)) => tracing::error!(error = %e, "SLO state not flushed"),
        Err(_) => tracing::error!(
            limit = ?SECOND_SIGNAL_FLUSH,
            "SLO state not flushed: the store did not answer in time"
        ),
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
        run_until_signal(daemon, &mut signals, OnHangup::Reload).await
    })
}

/// Builds the daemon's runtime, installs the signal handlers first (so a signal during
/// start-up is not lost) and runs `main` with them; returns its exit code.
pub fn with_signals<F, Fut>(main: F) -> i32
where
    F: FnOnce(Signals) -> Fut,
    Fut: Future<Output = i32>,
{
    // Before the runtime's threads exist, so none of them gets an arena past the cap.
    crate::memory::cap_arenas(crate::memory::SERVE_ARENAS);
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
    let code = runtime.block_on(async move {
        let signals = match Signals::install() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: cannot install signal handlers: {e}");
                return crate::exit::ERROR;
            }
        };
        main(signals).await
    });
    // A blocking task still running (a store write stuck after a second signal) must not
    // hold the exit.
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

enum Sig {
    Stop(&'static str),
    Reload,
}

/// What SIGHUP means: `serve` reloads its config; `demo`, started from a terminal, stops when
/// the terminal closes rather than sending load with no one to see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnHangup {
    Reload,
    Stop,
}

/// SIGTERM and SIGINT stop, SIGHUP as `hangup` says. With no more signals possible, waits
/// forever.
async fn next(signals: &mut Signals, hangup: OnHangup) -> Sig {
    match signals.next().await {
        Some(Caught::Stop(name)) => Sig::Stop(name),
        Some(Caught::Hangup) if hangup == OnHangup::Stop => Sig::Stop("SIGHUP"),
        Some(Caught::Hangup) => Sig::Reload,
        None => std::future::pending().await,
    }
}

/// How long a second signal waits for the SLO state to reach the store.
const SECOND_SIGNAL_FLUSH: Duration = Duration::from_secs(2);

/// Serves until a stop signal, reloading on SIGHUP (or stopping, per `hangup`); a second stop signal flushes the SLO
/// state (bounded by `SECOND_SIGNAL_FLUSH`) and exits 130 without waiting for runs.
pub async fn run_until_signal(daemon: Daemon, signals: &mut Signals, hangup: OnHangup) -> i32 {
    let shared = daemon.shared.clone();
    loop {
        match next(signals, hangup).await {
            Sig::Reload => {
                let _ = reload(&daemon.shared).await;
            }
            Sig::Stop(name) => {
                tracing::info!(
                    signal = name,
                    "shutting down; a second signal flushes the SLO state and exits"
                );
                break;
            }
        }
    }
    let mut shutdown = std::pin::pin!(daemon.shutdown());
    loop {
        tokio::select! {
            lost = &mut shutdown => {
                let _ = tokio::task::spawn_blocking(crate::telemetry::daemon::flush).await;
                if let Some(lost) = lost {
                    eprintln!("error: the SLO store could not be written; lost {lost}");
                    return crate::exit::STATE_LOST;
                }
                return crate::exit::OK;
            }
            sig = next(signals, hangup) => if let Sig::Stop(name) = sig {
                tracing::warn!(signal = name, "second signal: flushing the SLO state, then exiting");
                flush_now(&shared).await;
                return crate::exit::SECOND_SIGNAL;
            },
        }
    }
}

/// Warns when the cgroup's CPU quota is below what the busiest profile's rate needs
/// (`starve::quota_warning`): short of it, its runs are throttled and inconclusive.
fn warn_cpu_quota(shared: &Shared, cfg: &crate::config::Config) {
    if let Err(why) = crate::starve::cgroup::Cgroup::find() {
        tracing::info!("CPU throttling is not watched: {why}");
    }
    let quota = shared.starvation.quota();
    let busiest = cfg
        .profiles
        .values()
        .map(|p| {
            let steps = p
                .mix
                .iter()
                .filter_map(|(j, _)| cfg.journeys.get(j).map(|j| j.steps.len()))
                .max()
                .unwrap_or(1)
                .max(1);
            let share = p.executor.peak_rate() / f64::from(shared.shard.count());
            (share * steps as f64, &p.name)
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((rate, name)) = busiest
        && let Some(w) = crate::starve::quota_warning(quota, rate, &format!("profile `{name}`"))
    {
        eprintln!("warning: {w}");
        tracing::warn!("{w}");
    }
}
