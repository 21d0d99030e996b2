//! The daemon's shared state, handed to the HTTP face and every task: the current config, the
//! metrics registry, the live SLO budgets, each profile's schedule slot and active run, and the
//! recent runs the API shows. Plus the views the API serialises.

use crate::budget::Budget;
use crate::config::{self, Config};
use crate::http::Resolver;
use crate::load::plan::Shard;
use crate::load::runner::Stopper;
use crate::metrics::Metrics;
use crate::schedule::Slot;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How many finished runs the API keeps.
pub(super) const RECENT_RUNS: usize = 100;

/// Where the config comes from: a file (reloadable) or a fixed one (the demo).
#[derive(Clone)]
pub enum Source {
    File(PathBuf),
    Fixed(Box<Config>),
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

#[derive(Debug, Clone, Serialize)]
pub struct ProfileView {
    pub name: String,
    pub target: String,
    pub schedule: Option<String>,
    pub paused: bool,
    pub running: bool,
    pub next_run: Option<f64>,
}

/// One profile's schedule slot, pause flag and active run.
pub(super) struct ProfileState {
    pub slot: Slot,
    pub paused: bool,
    pub active: Option<(u64, Stopper)>,
    pub next_run: Option<f64>,
}

impl ProfileState {
    pub fn new(overlap: config::Overlap) -> ProfileState {
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
    pub(super) resolver: Arc<Resolver>,
    /// The current config generation's token: a reload cancels it to stop the old schedules.
    pub(super) generation: Mutex<CancellationToken>,
    pub(super) profiles: Mutex<BTreeMap<String, ProfileState>>,
    pub(super) recent: Mutex<VecDeque<RunRecord>>,
    pub(super) next_id: AtomicU64,
    pub(super) ready: AtomicBool,
    /// The config text last read, so the watch reloads only on a change.
    pub(super) last_config_text: Mutex<Option<String>>,
}

pub(super) fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Shared {
    pub(super) fn new(
        cfg: &Config,
        metrics: Metrics,
        budget: Budget,
        source: Source,
        shard: Shard,
        text: Option<String>,
    ) -> Shared {
        Shared {
            config: RwLock::new(Arc::new(cfg.clone())),
            metrics,
            budget,
            source,
            shard,
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
        }
    }

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

    /// The stoppers of every run in progress.
    pub(super) fn active_runs(&self) -> Vec<Stopper> {
        self.profiles
            .lock()
            .map(|s| {
                s.values()
                    .filter_map(|p| p.active.as_ref().map(|a| a.1.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }
}
