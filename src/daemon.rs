//! `sloburn serve` and `sloburn demo`: the long-running daemon.
//!
//! Start-up order (linkerd2-proxy's): read and validate the config before binding any port
//! (bad config → exit 78), open the SLO store, bind, then start the schedules and mark ready.
//! One [`CancellationToken`] stops everything; each config generation has a child token that
//! a reload cancels, so schedules restart under the new config while runs in progress finish
//! under the old one. Every task belongs to the daemon's [`TaskTracker`].

use crate::budget::{Budget, Watcher};
use crate::config::{self, Config, Profile};
use crate::http::{Outcome, Resolver};
use crate::load::plan::Shard;
use crate::load::runner::{self, Abort, RunReport, RunSpec, Stopper};
use crate::load::stats::RunStats;
use crate::metrics::Metrics;
use crate::schedule::{Decision, Slot, SystemClock, Ticker};
use rand::SeedableRng;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How many finished runs the API keeps.
const RECENT_RUNS: usize = 100;
/// How often the config file is re-read to notice changes (ConfigMap symlink swaps included:
/// the path is re-resolved every time).
const WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// Where the config comes from: a file (reloadable) or a fixed one (the demo).
#[derive(Clone)]
pub enum Source {
    File(PathBuf),
    Fixed(Box<Config>),
}

#[derive(Clone)]
pub struct Options {
    pub source: Source,
    /// Overrides `server.listen`.
    pub listen: Option<SocketAddr>,
    pub shard: Shard,
    /// Reload when the config file changes (besides SIGHUP and the API).
    pub watch: bool,
}

/// What the API shows about one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub id: u64,
    pub profile: String,
    pub target: String,
    pub trigger: String,
    pub started_at: f64,
    pub finished_at: Option<f64>,
    /// running | passed | failed | aborted | aborted_by_guard | error
    pub result: String,
    pub reason: Option<String>,
    pub requests: u64,
    pub rate: f64,
    pub failed_ratio: f64,
    pub dropped: u64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub thresholds: Vec<ThresholdRecord>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ThresholdRecord {
    pub metric: String,
    pub threshold: String,
    pub passed: bool,
    pub observed: f64,
}

struct ProfileState {
    slot: Slot,
    paused: bool,
    active: Option<(u64, Stopper)>,
    next_run: Option<f64>,
}

impl ProfileState {
    fn new(overlap: config::Overlap) -> ProfileState {
        ProfileState {
            slot: Slot::new(overlap),
            paused: false,
            active: None,
            next_run: None,
        }
    }
}

/// The daemon's shared state, handed to the HTTP server and every task.
pub struct Shared {
    pub config: RwLock<Arc<Config>>,
    pub metrics: Metrics,
    pub budget: Budget,
    pub source: Source,
    pub shard: Shard,
    pub shutdown: CancellationToken,
    pub tracker: TaskTracker,
    /// `server.max_in_flight` across all runs (fixed at start; a reload does not resize it).
    pub in_flight: Arc<tokio::sync::Semaphore>,
    resolver: Arc<Resolver>,
    generation: Mutex<CancellationToken>,
    profiles: Mutex<BTreeMap<String, ProfileState>>,
    recent: Mutex<VecDeque<RunRecord>>,
    next_id: AtomicU64,
    ready: AtomicBool,
    last_config_text: Mutex<Option<String>>,
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Shared {
    pub fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .map(|c| c.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Ready once the config is loaded and the store is healthy; otherwise the reason.
    pub fn readiness(&self) -> Result<(), String> {
        if !self.ready.load(Relaxed) {
            return Err("starting".into());
        }
        match self.budget.problem() {
            Some(p) => Err(format!("SLO store: {p}")),
            None => Ok(()),
        }
    }

    pub fn recent_runs(&self) -> Vec<RunRecord> {
        let mut runs: Vec<RunRecord> = self
            .recent
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default();
        runs.reverse();
        runs
    }

    /// `(name, target, paused, running, next_run)` for every profile of the current config.
    pub fn profiles(&self) -> Vec<ProfileView> {
        let cfg = self.config();
        let states = self.profiles.lock();
        cfg.profiles
            .values()
            .map(|p| {
                let st = states.as_ref().ok().and_then(|s| s.get(&p.name));
                ProfileView {
                    name: p.name.clone(),
                    target: p.target.clone(),
                    schedule: p.schedule.as_ref().map(|s| s.to_string()),
                    paused: st.is_some_and(|s| s.paused),
                    running: st.is_some_and(|s| s.active.is_some()),
                    next_run: st.and_then(|s| s.next_run),
                }
            })
            .collect()
    }

    /// Pauses or resumes a profile's schedule. Unknown profile → false.
    pub fn set_paused(&self, name: &str, paused: bool) -> bool {
        if !self.config().profiles.contains_key(name) {
            return false;
        }
        if let Ok(mut states) = self.profiles.lock() {
            let st = states
                .entry(name.to_string())
                .or_insert_with(|| ProfileState::new(config::Overlap::Skip));
            st.paused = paused;
        }
        true
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ProfileView {
    pub name: String,
    pub target: String,
    pub schedule: Option<String>,
    pub paused: bool,
    pub running: bool,
    pub next_run: Option<f64>,
}

/// Why a run did not start.
#[derive(Debug, PartialEq)]
pub enum StartError {
    UnknownProfile,
    AlreadyRunning,
    ShuttingDown,
}

/// Starts a run of `name` now. Returns its id.
pub fn start_run(shared: &Arc<Shared>, name: &str, trigger: &str) -> Result<u64, StartError> {
    if shared.shutdown.is_cancelled() {
        return Err(StartError::ShuttingDown);
    }
    let cfg = shared.config();
    let profile = cfg
        .profiles
        .get(name)
        .ok_or(StartError::UnknownProfile)?
        .clone();
    let Some(target) = cfg.targets.get(&profile.target).cloned() else {
        return Err(StartError::UnknownProfile);
    };
    let id = shared.next_id.fetch_add(1, Relaxed) + 1;
    let stopper = Stopper::new();
    {
        let Ok(mut states) = shared.profiles.lock() else {
            return Err(StartError::ShuttingDown);
        };
        let st = states
            .entry(name.to_string())
            .or_insert_with(|| ProfileState::new(profile.overlap));
        if st.active.is_some() {
            return Err(StartError::AlreadyRunning);
        }
        st.active = Some((id, stopper.clone()));
    }
    let record = RunRecord {
        id,
        profile: name.to_string(),
        target: target.name.clone(),
        trigger: trigger.to_string(),
        started_at: unix_now(),
        finished_at: None,
        result: "running".into(),
        reason: None,
        requests: 0,
        rate: 0.0,
        failed_ratio: 0.0,
        dropped: 0,
        p95_ms: 0.0,
        p99_ms: 0.0,
        thresholds: Vec::new(),
    };
    if let Ok(mut recent) = shared.recent.lock() {
        recent.push_back(record.clone());
        while recent.len() > RECENT_RUNS {
            recent.pop_front();
        }
    }
    let shared2 = shared.clone();
    shared.tracker.spawn(async move {
        let result = execute(&shared2, &profile, &target, stopper, record).await;
        finish(&shared2, &profile.name, id, result);
    });
    Ok(id)
}

async fn execute(
    shared: &Arc<Shared>,
    profile: &Profile,
    target: &config::Target,
    stopper: Stopper,
    mut record: RunRecord,
) -> RunRecord {
    let checks: Vec<String> = target.checks.iter().map(|c| c.name.clone()).collect();
    let pm = shared
        .metrics
        .profile(&target.name, &profile.name, &target.buckets, &checks);
    let watchers: Vec<Watcher> = shared.budget.watchers(&target.name, &profile.name);
    let checks_arc = Arc::new(target.checks.clone());
    let stats = Arc::new(RunStats::new(&target.checks));
    let observer: runner::Observer = {
        let pm = pm.clone();
        let checks = checks_arc.clone();
        Arc::new(
            move |outcome: &Outcome, lateness: Duration, results: &[bool]| {
                pm.observe(outcome, lateness, results);
                for w in &watchers {
                    w.observe(outcome, &checks, results);
                }
            },
        )
    };
    let spec = RunSpec {
        profile: profile.name.clone(),
        executor: profile.executor.clone(),
        request: Arc::new(crate::run::request_for(target)),
        checks: checks_arc,
        thresholds: profile.thresholds.clone(),
        graceful_stop: profile
            .graceful_stop
            .min(shared.config().server.grace_period),
        shard: shared.shard,
        global: Some(shared.in_flight.clone()),
        start_time: profile.start_time,
    };
    let client = crate::run::client_for(target, shared.resolver.clone());
    shared.metrics.run_started(&profile.name);
    // The budget guard: stop this run when its SLO burns faster than allowed.
    let guard_task = profile.guard.clone().map(|g| {
        let shared = shared.clone();
        let stopper = stopper.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(runner::EVAL_INTERVAL);
            loop {
                tick.tick().await;
                let now = unix_now() as i64;
                if let Some(burn) = shared.budget.burn_rate(&g.slo, g.window, now)
                    && burn > g.max_burn_rate
                {
                    stopper.stop(Abort::Guard(format!(
                        "SLO `{}` burns at {burn:.1}× over {} (limit {}×)",
                        g.slo,
                        crate::units::format_duration(g.window),
                        g.max_burn_rate
                    )));
                    return;
                }
            }
        })
    });
    // Dropped iterations happen in the scheduler, not in a request: publish them each second.
    let reported = Arc::new(AtomicU64::new(0));
    let sync_dropped = {
        let (stats, pm, reported) = (stats.clone(), pm.clone(), reported.clone());
        move || {
            let now = stats.dropped.load(Relaxed);
            let before = reported.swap(now, Relaxed);
            pm.add_dropped(now.saturating_sub(before));
        }
    };
    let vus_task = {
        let (stats, pm, sync_dropped) = (stats.clone(), pm.clone(), sync_dropped.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                pm.set_vus(stats.vus.load(Relaxed));
                pm.set_vus_max(stats.vus_max.load(Relaxed));
                sync_dropped();
            }
        })
    };
    let outcome = runner::run(&spec, &client, stats.clone(), Some(observer), stopper).await;
    if let Some(t) = guard_task {
        t.abort();
    }
    vus_task.abort();
    pm.set_vus(0);
    sync_dropped();
    record.finished_at = Some(unix_now());
    match outcome {
        Ok(report) => fill(&mut record, &report, shared, &profile.name),
        Err(e) => {
            record.result = "error".into();
            record.reason = Some(e.to_string());
        }
    }
    record
}

fn fill(record: &mut RunRecord, report: &RunReport, shared: &Shared, profile: &str) {
    let s = &report.stats;
    record.requests = s.requests;
    record.rate = s.per_second(s.requests);
    record.failed_ratio = if s.requests > 0 {
        s.failed as f64 / s.requests as f64
    } else {
        0.0
    };
    record.dropped = s.dropped;
    record.p95_ms = s.duration.quantile(0.95).as_secs_f64() * 1000.0;
    record.p99_ms = s.duration.quantile(0.99).as_secs_f64() * 1000.0;
    record.thresholds = report
        .thresholds
        .iter()
        .map(|(spec, r)| {
            shared.metrics.set_threshold(
                profile,
                &spec.threshold.metric,
                &spec.threshold.source,
                r.passed,
            );
            ThresholdRecord {
                metric: spec.threshold.metric.clone(),
                threshold: spec.threshold.source.clone(),
                passed: r.passed,
                observed: r.observed,
            }
        })
        .collect();
    let (result, reason) = match &report.aborted {
        Some(Abort::Guard(why)) => ("aborted_by_guard", Some(why.clone())),
        Some(Abort::Threshold(t)) => ("aborted", Some(format!("threshold `{t}` failed"))),
        Some(Abort::Stopped(why)) => ("aborted", Some(why.clone())),
        None if report.thresholds_passed() => ("passed", None),
        None => ("failed", None),
    };
    record.result = result.into();
    record.reason = reason;
}

fn finish(shared: &Arc<Shared>, profile: &str, id: u64, record: RunRecord) {
    shared.metrics.run_finished(profile, &record.result);
    tracing::info!(
        profile = %profile,
        run = id,
        result = %record.result,
        reason = record.reason.as_deref().unwrap_or(""),
        requests = record.requests,
        rate = format!("{:.1}", record.rate),
        failed_ratio = format!("{:.4}", record.failed_ratio),
        p95_ms = format!("{:.2}", record.p95_ms),
        p99_ms = format!("{:.2}", record.p99_ms),
        dropped = record.dropped,
        "run finished"
    );
    if let Ok(mut recent) = shared.recent.lock()
        && let Some(slot) = recent.iter_mut().find(|r| r.id == id)
    {
        *slot = record;
    }
    let again = match shared.profiles.lock() {
        Ok(mut states) => match states.get_mut(profile) {
            Some(st) => {
                st.active = None;
                st.slot.on_finished() && !st.paused
            }
            None => false,
        },
        Err(_) => false,
    };
    if again && !shared.shutdown.is_cancelled() {
        let _ = start_run(shared, profile, "queued");
    }
}

/// Applies a config: SLOs, metrics series, and the schedules of a new generation.
fn apply(shared: &Arc<Shared>, cfg: Arc<Config>) {
    if let Ok(mut slot) = shared.config.write() {
        *slot = cfg.clone();
    }
    shared.budget.configure(&cfg, unix_now() as i64);
    let keep: Vec<(String, String)> = cfg
        .profiles
        .values()
        .map(|p| (p.target.clone(), p.name.clone()))
        .collect();
    shared.metrics.retain_profiles(&keep);
    let generation = shared.shutdown.child_token();
    if let Ok(mut g) = shared.generation.lock() {
        g.cancel();
        *g = generation.clone();
    }
    if let Ok(mut states) = shared.profiles.lock() {
        states.retain(|name, st| cfg.profiles.contains_key(name) || st.active.is_some());
        for p in cfg.profiles.values() {
            let st = states
                .entry(p.name.clone())
                .or_insert_with(|| ProfileState::new(p.overlap));
            if st.slot.policy() != p.overlap {
                st.slot = Slot::new(p.overlap);
            }
            st.next_run = None;
        }
    }
    for p in cfg.profiles.values() {
        shared.metrics.init_profile(&p.name);
        if p.schedule.is_none() && !p.run_on_start {
            shared.metrics.set_next_run(&p.name, None);
            continue;
        }
        let shared2 = shared.clone();
        let token = generation.clone();
        let profile = p.clone();
        shared
            .tracker
            .spawn(async move { profile_loop(shared2, profile, token).await });
    }
}

async fn profile_loop(shared: Arc<Shared>, profile: Profile, token: CancellationToken) {
    if profile.run_on_start {
        due(&shared, &profile.name);
    }
    let Some(schedule) = profile.schedule.clone() else {
        return;
    };
    let mut rng = rand::rngs::SmallRng::seed_from_u64(rand::random());
    let mut ticker = Ticker::new(schedule.clone(), profile.jitter, SystemClock);
    loop {
        let next = schedule.next_after(chrono::Utc::now());
        let next_unix = next.map(|t| t.timestamp_millis() as f64 / 1000.0);
        shared.metrics.set_next_run(&profile.name, next_unix);
        if let Ok(mut states) = shared.profiles.lock()
            && let Some(st) = states.get_mut(&profile.name)
        {
            st.next_run = next_unix;
        }
        tokio::select! {
            tick = ticker.tick(&mut rng) => match tick {
                Some(_) => due(&shared, &profile.name),
                None => break,
            },
            _ = token.cancelled() => break,
        }
    }
}

/// A schedule fired: start, skip or queue according to the overlap policy.
fn due(shared: &Arc<Shared>, name: &str) {
    let decision = match shared.profiles.lock() {
        Ok(mut states) => match states.get_mut(name) {
            Some(st) if st.paused => None,
            Some(st) => Some(st.slot.on_due(st.active.is_some())),
            None => None,
        },
        Err(_) => None,
    };
    match decision {
        Some(Decision::Start) => {
            if let Err(e) = start_run(shared, name, "schedule") {
                tracing::warn!(profile = %name, error = ?e, "scheduled run did not start");
            }
        }
        Some(Decision::Skip) => {
            tracing::info!(profile = %name, "previous run still going; skipped (overlap: skip)");
            shared.metrics.run_finished(name, "skipped");
        }
        Some(Decision::Enqueue) => {
            tracing::info!(profile = %name, "previous run still going; queued (overlap: queue)");
        }
        None => {}
    }
}

/// Re-reads the config source; applies it when valid. Returns the error text otherwise.
pub fn reload(shared: &Arc<Shared>) -> Result<bool, String> {
    let Source::File(path) = &shared.source else {
        return Ok(false);
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let result = load_text(path, &text);
    match result {
        Ok(cfg) => {
            if let Ok(mut last) = shared.last_config_text.lock() {
                *last = Some(text);
            }
            apply(shared, Arc::new(cfg));
            shared.metrics.reload(true);
            tracing::info!(config = %path.display(), "config reloaded");
            Ok(true)
        }
        Err(e) => {
            if let Ok(mut last) = shared.last_config_text.lock() {
                *last = Some(text);
            }
            shared.metrics.reload(false);
            tracing::error!(config = %path.display(), errors = %e, "config reload rejected; the previous config keeps running");
            Err(e)
        }
    }
}

fn load_text(path: &std::path::Path, text: &str) -> Result<Config, String> {
    let base = path.parent().unwrap_or(std::path::Path::new("."));
    config::from_str(
        text,
        &path.display().to_string(),
        base,
        &config::Env::process(),
    )
    .map(|l| l.config)
    .map_err(|e| e.to_string())
}

/// Polls the config file; reloads when its content changed.
async fn watch(shared: Arc<Shared>) {
    let Source::File(path) = shared.source.clone() else {
        return;
    };
    let mut tick = tokio::time::interval(WATCH_INTERVAL);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shared.shutdown.cancelled() => return,
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let changed = shared
            .last_config_text
            .lock()
            .map(|last| last.as_deref() != Some(text.as_str()))
            .unwrap_or(false);
        if changed {
            let _ = reload(&shared);
        }
    }
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
    let shared = Arc::new(Shared {
        config: RwLock::new(Arc::new(cfg.clone())),
        metrics,
        budget,
        source: opts.source.clone(),
        shard: opts.shard,
        shutdown: CancellationToken::new(),
        tracker: TaskTracker::new(),
        in_flight: Arc::new(tokio::sync::Semaphore::new(
            cfg.server.max_in_flight as usize,
        )),
        resolver: Arc::new(Resolver::system()),
        generation: Mutex::new(CancellationToken::new()),
        profiles: Mutex::new(BTreeMap::new()),
        recent: Mutex::new(VecDeque::new()),
        next_id: AtomicU64::new(0),
        ready: AtomicBool::new(false),
        last_config_text: Mutex::new(text),
    });
    let app = crate::server::app(shared.clone());
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

#[derive(Debug)]
pub enum Startup {
    /// Rendered diagnostics; exit 78.
    Config(String),
    Bind(String),
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
        let stoppers: Vec<Stopper> = shared
            .profiles
            .lock()
            .map(|s| {
                s.values()
                    .filter_map(|p| p.active.as_ref().map(|a| a.1.clone()))
                    .collect()
            })
            .unwrap_or_default();
        for s in stoppers {
            s.stop(Abort::Stopped("shutdown".into()));
        }
        // Runs drain their in-flight requests (bounded by the grace period) before the
        // server and the tick stop, so their last events are counted and flushed.
        let runs_done = async {
            loop {
                let active = shared
                    .profiles
                    .lock()
                    .map(|s| s.values().any(|p| p.active.is_some()))
                    .unwrap_or(false);
                if !active {
                    break;
                }
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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return 1;
        }
    };
    runtime.block_on(async move {
        // Signal handlers first, so a signal during start-up is not lost.
        let mut signals = match Signals::new() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: cannot install signal handlers: {e}");
                return 1;
            }
        };
        let daemon = match start(opts).await {
            Ok(d) => d,
            Err(Startup::Config(e)) => {
                println!("{e}");
                return crate::cli::EXIT_CONFIG;
            }
            Err(Startup::Bind(e)) => {
                eprintln!("error: {e}");
                return 1;
            }
        };
        run_until_signal(daemon, &mut signals).await
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
            _ = &mut shutdown => return 0,
            sig = signals.next() => if let Sig::Stop(name) = sig {
                tracing::warn!(signal = name, "second signal: exiting now");
                return 130;
            },
        }
    }
}
