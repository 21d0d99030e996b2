//! The daemon's shared state, handed to the HTTP face and every task: the current config, the
//! metrics registry, the live SLO budgets, each profile's schedule slot and active run, and the
//! run history (the last runs of each profile, kept in the store), each profile's one-hour
//! series ring and live figures for the dashboard. Plus the views the API serialises.

use crate::budget::Budget;
use crate::clock::Clock;
use crate::config::{self, Config};
use crate::http::Resolver;
use crate::load::placement::{self, Assignment};
use crate::load::plan::Shard;
use crate::load::runner::Stopper;
use crate::metrics::Metrics;
use crate::schedule::Slot;
use crate::web::{BurnDown, LiveFigures, Ring};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How many runs of each profile the API and the store keep.
pub const RUNS_PER_PROFILE: usize = 50;

/// Run details kept in memory too (for a daemon whose store is not open).
pub(super) const DETAILS_IN_MEMORY: usize = 8;

/// Where the config comes from: a file (reloadable) or a fixed one (the demo).
#[derive(Clone)]
pub enum Source {
    File(PathBuf),
    Fixed(Box<Config>),
}

/// What the API shows about one run (an `/api/runs` row; its figures are read from the run's
/// [`RunRecord`](crate::load::record::RunRecord)).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunEntry {
    pub id: u64,
    pub profile: String,
    pub target: String,
    pub trigger: String,
    pub started_at: f64,
    pub finished_at: Option<f64>,
    /// running | passed | failed | aborted | aborted_by_guard | inconclusive | error | share
    pub result: String,
    pub reason: Option<String>,
    pub requests: u64,
    pub rate: f64,
    pub failed_ratio: f64,
    pub dropped: u64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub thresholds: Vec<ThresholdRecord>,
    /// A run on every shard (`daemon::shardrun`): its shards, which answered, which did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<serde_json::Value>,
    /// A share of a run on every shard (`{run, shard, collector}`): its figures are part of the
    /// run whose one verdict the collector records; this row is no run of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_of: Option<serde_json::Value>,
    /// A capacity search (`executor: capacity`): `{rate, low, high, limited_by, outcome,
    /// summary, steps, …}`, as `sloburn capacity --summary-export` writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<serde_json::Value>,
}

impl RunEntry {
    /// A run with no figures yet: `result` (`running` as it starts) and why.
    pub(super) fn new(
        id: u64,
        profile: &str,
        target: &str,
        trigger: &str,
        started_at: f64,
        result: &str,
        reason: Option<String>,
    ) -> RunEntry {
        RunEntry {
            id,
            profile: profile.to_string(),
            target: target.to_string(),
            trigger: trigger.to_string(),
            started_at,
            finished_at: None,
            result: result.to_string(),
            reason,
            requests: 0,
            rate: 0.0,
            failed_ratio: 0.0,
            dropped: 0,
            p95_ms: 0.0,
            p99_ms: 0.0,
            thresholds: Vec::new(),
            shards: None,
            share_of: None,
            capacity: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// `split` or `owned` (the profile's `placement`).
    pub placement: &'static str,
    /// An owned profile's owner: the shard index that runs it whole.
    pub owner: Option<u32>,
    /// Whether this daemon runs it (its share, or the whole owned profile).
    pub here: bool,
}

/// How a run ended, once it has: `None` while it runs.
pub(super) type Ending = tokio::sync::watch::Receiver<Option<RunEntry>>;

/// Every SLO's burn-down, by name.
pub(super) type BurnDowns = Arc<Vec<(String, BurnDown)>>;

/// A profile's last hour of 10-second points, and the figures of its run in progress.
#[derive(Default)]
pub(super) struct ProfileSeries {
    pub ring: Ring,
    pub live: Option<(u64, LiveFigures)>,
}

/// One profile's schedule slot, pause flag and active run.
pub(super) struct ProfileState {
    pub slot: Slot,
    pub paused: bool,
    pub active: Option<(u64, Stopper)>,
    pub next_run: Option<f64>,
    /// The id of the profile's latest run to start here (0: none yet): how a shard waiting on
    /// another's scheduled run sees that its share has begun.
    pub last_started: u64,
}

impl ProfileState {
    pub fn new(overlap: config::Overlap) -> ProfileState {
        ProfileState {
            slot: Slot::new(overlap),
            paused: false,
            active: None,
            next_run: None,
            last_started: 0,
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
    /// The wall clock of SLO minutes, run times and the API (shifted by the test hook).
    pub clock: Clock,
    /// `server.max_in_flight` across all runs (fixed at start; a reload does not resize it).
    pub in_flight: Arc<tokio::sync::Semaphore>,
    pub(super) resolver: Arc<Resolver>,
    /// The current config generation's token: a reload cancels it to stop the old schedules.
    pub(super) generation: Mutex<CancellationToken>,
    pub(super) profiles: Mutex<BTreeMap<String, ProfileState>>,
    /// The last [`RUNS_PER_PROFILE`] runs of each profile, oldest first (also in the store).
    pub(super) history: Mutex<BTreeMap<String, VecDeque<RunEntry>>>,
    /// The newest run details, for a store that is not open: `(run id, detail JSON)`.
    pub(super) details: Mutex<VecDeque<(u64, Arc<str>)>>,
    /// Each profile's last hour and its run in progress.
    pub(super) series: Mutex<BTreeMap<String, ProfileSeries>>,
    /// SLO burn-downs and the minute they were drawn at (redrawn once a minute at most).
    pub(super) burn_downs: Mutex<Option<(i64, BurnDowns)>>,
    pub(super) next_id: AtomicU64,
    pub(super) ready: AtomicBool,
    /// The config text last read, so the watch reloads only on a change.
    pub(super) last_config_text: Mutex<Option<String>>,
    /// Wrong bearer tokens by source: counted for the log and the back-off.
    pub(super) auth_failures: crate::server::WrongTokens,
    /// Runs started by the Flagger hook, by call (canary, phase, checksum, metadata), so a
    /// second call with the same key waits for the first one's run: `(run id, its ending)`.
    pub(super) hook_runs: Mutex<BTreeMap<String, (u64, Ending)>>,
    /// This shard's shares of runs on every shard (`daemon::shardrun`), by the run's id,
    /// oldest first; at most [`SHARES_KEPT`].
    pub(super) shares: Mutex<VecDeque<(String, Share)>>,
    /// The verdicts of runs on every shard this shard collects, by run id, oldest first; at
    /// most [`SHARES_KEPT`].
    pub(super) verdicts: Mutex<VecDeque<(String, Ending)>>,
    /// When sloburn itself was starved of CPU: every run's requests are judged against it.
    pub starvation: Arc<crate::starve::Starvation>,
}

/// How many shares of runs on every shard a shard keeps for their askers: the newest ones.
pub const SHARES_KEPT: usize = 32;

/// A finished share's figures and how it ended, for the shard that collects them.
pub(super) type ShareResult = std::sync::Arc<std::sync::OnceLock<crate::load::runner::RunReport>>;

/// This shard's share of a run on every shard.
pub(super) struct Share {
    /// The local run carrying it.
    pub id: u64,
    pub profile: String,
    /// When every shard starts (unix ms): the barrier.
    pub start_at_ms: u64,
    pub stopper: crate::load::runner::Stopper,
    pub ending: Ending,
    /// Set when the share's run finished with a report.
    pub report: ShareResult,
}

/// Test hook, not a user setting: `SLOBURN_TEST_CLOCK_START=<unix seconds>` starts the daemon's
/// clock (SLO minutes, run times) at that instant; it then runs at real speed. Read once. The
/// calendar-period test uses it to cross a month boundary in seconds.
#[doc(hidden)]
pub const TEST_CLOCK_ENV: &str = "SLOBURN_TEST_CLOCK_START";

/// The daemon's clock: the system clock, started at [`TEST_CLOCK_ENV`]'s instant if that is set
/// (read once, at start-up).
pub(super) fn daemon_clock() -> Clock {
    std::env::var(TEST_CLOCK_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok())
        .map_or(Clock::system(), Clock::starting_at)
}

impl Shared {
    /// Keeps this shard's share of run `run` for the shard collecting it; the oldest past
    /// [`SHARES_KEPT`] is forgotten (its asker, long done, would get a 404).
    pub(super) fn keep_share(&self, run: String, share: Share) {
        if let Ok(mut kept) = self.shares.lock() {
            kept.push_back((run, share));
            while kept.len() > SHARES_KEPT {
                kept.pop_front();
            }
        }
    }

    pub(super) fn new(
        cfg: &Config,
        metrics: Metrics,
        budget: Budget,
        source: Source,
        shard: Shard,
        text: Option<String>,
        clock: Clock,
    ) -> Shared {
        let shared = Shared {
            config: RwLock::new(Arc::new(cfg.clone())),
            metrics,
            budget,
            source,
            shard,
            shutdown: CancellationToken::new(),
            tracker: TaskTracker::new(),
            clock,
            in_flight: Arc::new(tokio::sync::Semaphore::new(
                cfg.server.max_in_flight as usize,
            )),
            resolver: Arc::new(Resolver::system()),
            generation: Mutex::new(CancellationToken::new()),
            profiles: Mutex::new(BTreeMap::new()),
            history: Mutex::new(BTreeMap::new()),
            details: Mutex::new(VecDeque::new()),
            series: Mutex::new(BTreeMap::new()),
            burn_downs: Mutex::new(None),
            next_id: AtomicU64::new(0),
            ready: AtomicBool::new(false),
            last_config_text: Mutex::new(text),
            auth_failures: crate::server::WrongTokens::default(),
            hook_runs: Mutex::new(BTreeMap::new()),
            shares: Mutex::new(VecDeque::new()),
            verdicts: Mutex::new(VecDeque::new()),
            starvation: Arc::new(crate::starve::Starvation::new()),
        };
        shared.restore_history();
        if !shared.budget.store_is_open() {
            // Without the store's largest id, number runs from the start time in milliseconds:
            // a store that opens later (counting from 1) never holds one of these ids.
            let ms = (shared.clock.unix_secs() * 1000.0).max(0.0) as u64;
            shared.next_id.fetch_max(ms, Relaxed);
        }
        shared
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
        if let Some(r) = self.budget.restore_status()
            && r.phase == crate::budget::RestorePhase::Restoring
        {
            return Err("restoring from prometheus…".into());
        }
        match self.budget.problem() {
            Some(p) => Err(format!("SLO store: {p}")),
            None => Ok(()),
        }
    }

    /// Every kept run, newest first; only `profile`'s when given.
    pub fn recent_runs(&self, profile: Option<&str>) -> Vec<RunEntry> {
        let mut runs: Vec<RunEntry> = self
            .history
            .lock()
            .map(|h| {
                h.iter()
                    .filter(|(p, _)| profile.is_none_or(|want| want == p.as_str()))
                    .flat_map(|(_, runs)| runs.iter().cloned())
                    .collect()
            })
            .unwrap_or_default();
        runs.sort_by_key(|r| std::cmp::Reverse(r.id));
        runs
    }

    /// One kept run.
    pub fn run_record(&self, id: u64) -> Option<RunEntry> {
        let h = self.history.lock().ok()?;
        h.values()
            .flat_map(|r| r.iter())
            .find(|r| r.id == id)
            .cloned()
    }

    /// Adds or replaces a run in the history, dropping the profile's oldest past the limit.
    pub(super) fn remember(&self, record: &RunEntry) {
        if let Ok(mut h) = self.history.lock() {
            let runs = h.entry(record.profile.clone()).or_default();
            match runs.iter_mut().find(|r| r.id == record.id) {
                Some(slot) => *slot = record.clone(),
                None => runs.push_back(record.clone()),
            }
            while runs.len() > RUNS_PER_PROFILE {
                runs.pop_front();
            }
        }
    }

    /// Reads the run history back from the store at start-up, or when a store unusable at
    /// start-up opens (runs are saved when they end). Run ids continue after the largest
    /// stored one.
    pub(super) fn restore_history(&self) {
        let loaded = self
            .budget
            .with_store(|st| Ok((st.load_runs(RUNS_PER_PROFILE)?, st.max_run_id()?)));
        let (runs, max_id) = match loaded {
            Some(Ok(x)) => x,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "cannot read the run history; starting without it");
                return;
            }
            None => return,
        };
        self.next_id.fetch_max(max_id, Relaxed);
        for stored in runs.iter().rev() {
            match serde_json::from_str::<RunEntry>(&stored.record) {
                Ok(r) => self.remember(&r),
                Err(e) => {
                    tracing::warn!(run = stored.id, error = %e, "skipping an unreadable stored run")
                }
            }
        }
        // Merged with this life's runs (a late store): oldest first again, newest kept.
        if let Ok(mut h) = self.history.lock() {
            for runs in h.values_mut() {
                runs.make_contiguous().sort_by_key(|r| r.id);
                while runs.len() > RUNS_PER_PROFILE {
                    runs.pop_front();
                }
                // `sloburn_capacity_rate` survives a restart: the newest decided search.
                let decided = runs.iter().rev().find_map(|r| {
                    let c = r.capacity.as_ref()?;
                    Some((r.profile.as_str(), crate::capacity::gauge_of(c)?))
                });
                if let Some((profile, (low, high))) = decided {
                    self.metrics.set_capacity(profile, low, high);
                }
            }
        }
    }

    /// `(name, target, paused, running, next_run)` for every profile of the current config.
    pub fn profiles(&self) -> Vec<ProfileView> {
        let cfg = self.config();
        let states = self.profiles.lock();
        cfg.profiles
            .values()
            .map(|p| {
                let st = states.as_ref().ok().and_then(|s| s.get(&p.name));
                let assignment = self.assignment(p);
                let owner = match assignment {
                    Assignment::Whole => Some(self.shard.index()),
                    Assignment::Elsewhere { owner } => Some(owner),
                    Assignment::Share(_) => None,
                };
                ProfileView {
                    name: p.name.clone(),
                    target: p.target.clone(),
                    schedule: p.schedule.as_ref().map(|s| s.to_string()),
                    paused: st.is_some_and(|s| s.paused),
                    running: st.is_some_and(|s| s.active.is_some()),
                    next_run: st.and_then(|s| s.next_run),
                    placement: p.placement.as_str(),
                    owner,
                    here: assignment.run_shard().is_some(),
                }
            })
            .collect()
    }

    /// What this daemon's shard does with `profile`: its share, the whole, or nothing.
    pub fn assignment(&self, profile: &config::Profile) -> Assignment {
        placement::assign(&profile.name, profile.placement, self.shard)
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
