//! The live SLO state of the daemon: request verdicts counted on the hot path, folded once a
//! second into the pure per-minute [`Windows`], persisted to the [`Store`] and exported as
//! gauges.
//!
//! A store unusable at start-up (or later) loses nothing while the daemon runs: counts and run
//! records wait in memory, the daemon tries to open it again with back-off, and writes them
//! once it can (`persist.rs`); what is still unwritten at exit is reported as lost.
//!
//! The hot path is one relaxed atomic add per watching SLO per request
//! ([`Watcher::observe`]). Everything else runs on the daemon's one-second tick, under a mutex
//! nobody on the request path takes.

use crate::checks;
use crate::config::{Config, GroupFilter, Sli};
use crate::http::Outcome;
use crate::load::walk::{IterationResult, StepInfo};
use crate::metrics::{Metrics, SloMetrics};
use crate::slo::{self, SloDef, SloReport, Windows};
use crate::store::{MinuteCounts, PendingBatch, Store, StoreError};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod maintenance;
mod persist;
mod restore;
pub use maintenance::View as MaintenanceView;
pub use persist::Unsaved;
pub use restore::{RestorePhase, RestoreStatus, SloCoverage};

/// What an SLO counts in a run: every request, one step's requests, or one journey's
/// iterations (good when every step passed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Requests,
    Step(usize),
    Journey(usize),
}

/// One SLO watching a run's traffic.
#[derive(Clone)]
pub struct Watcher {
    metrics: Arc<SloMetrics>,
    /// A maintenance window covers the SLO: no event counts.
    paused: Arc<AtomicBool>,
    sli: Sli,
    pub scope: Scope,
    /// A grouped SLO's group (`group_by`): only its events count.
    filter: Option<GroupFilter>,
}

impl Watcher {
    /// Whether this watcher counts the requests of `step`.
    pub fn counts_step(&self, step: usize) -> bool {
        match self.scope {
            Scope::Requests => true,
            Scope::Step(s) => s == step,
            Scope::Journey(_) => false,
        }
    }

    /// Whether an event of data row `row` (a request's `status`) is this watcher's: always,
    /// unless it watches one group of a grouped SLO.
    fn admits(&self, row: Option<usize>, status: Option<u16>) -> bool {
        self.filter.as_ref().is_none_or(|f| f.admits(row, status))
    }

    /// Counts one journey iteration (of data row `row`) for a whole-journey SLO: good when
    /// every step passed (a latency SLI: and within `under`, think times included). A dropped
    /// iteration never ran: no event.
    pub fn iteration(
        &self,
        journey: usize,
        row: Option<usize>,
        result: IterationResult,
        took: Duration,
    ) {
        if self.scope != Scope::Journey(journey)
            || result == IterationResult::Dropped
            || self.paused.load(Relaxed)
            || !self.admits(row, None)
        {
            return;
        }
        let ok = result == IterationResult::Ok;
        match &self.sli {
            Sli::Availability => self.metrics.event(ok),
            Sli::Latency {
                under,
                exclude_failures,
                ..
            } => {
                if !ok {
                    if !exclude_failures {
                        self.metrics.event(false);
                    }
                } else {
                    self.metrics.event(took < *under);
                }
            }
        }
    }

    /// A user turned away: the arrival found every VU waiting on the target
    /// (`DropReason::Saturated`). One bad event, for an availability and a latency SLI alike:
    /// the user got no answer at all while the target held everyone before them. `row` is the
    /// data row the user would have taken, as far as it is known (a grouped SLO's share).
    pub fn turned_away(&self, row: Option<usize>) {
        if self.paused.load(Relaxed) || !self.admits(row, None) {
            return;
        }
        self.metrics.event(false);
    }

    /// Classifies one finished request for this SLO and counts it. A request that failed
    /// because of sloburn itself (a local error class) is no event at all: the target never
    /// saw it, so it neither spends nor earns budget.
    /// A corrected latency SLI counts every phase of the request (`Phases::total`), never the
    /// generator's own lateness.
    /// `row` is the request's iteration's data row (`None` without a data file).
    pub fn observe(
        &self,
        outcome: &Outcome,
        row: Option<usize>,
        target_checks: &[checks::Check],
        results: &[bool],
    ) {
        if outcome.error.is_some_and(|e| e.is_local())
            || self.paused.load(Relaxed)
            || !self.admits(row, outcome.status)
        {
            return;
        }
        let succeeded = checks::verdict(target_checks, results, outcome);
        match &self.sli {
            Sli::Availability => self.metrics.event(succeeded),
            Sli::Latency {
                under,
                exclude_failures,
                corrected,
            } => {
                if !succeeded {
                    if !exclude_failures {
                        self.metrics.event(false);
                    }
                } else {
                    let latency = if *corrected {
                        outcome.phases.total()
                    } else {
                        outcome.duration()
                    };
                    self.metrics.event(latency < *under);
                }
            }
        }
    }
}

struct SloState {
    def: SloDef,
    /// Set by the tick while a maintenance window covers this SLO.
    paused: Arc<AtomicBool>,
    sli: Sli,
    target: String,
    journey: Option<String>,
    step: Option<String>,
    profiles: Vec<String>,
    windows: Windows,
    metrics: Arc<SloMetrics>,
    /// A grouped SLO's group: its filter, and its parent, whose maintenance windows cover it.
    group: Option<crate::config::SloGroup>,
    /// Event totals already folded into `windows`.
    folded: (u64, u64),
    report: Option<SloReport>,
    /// The minute `report` was evaluated at, while nothing has changed since: the next tick in
    /// that minute with no new events has nothing to re-evaluate.
    evaluated: Option<i64>,
    /// The store had no minute of this SLO's period when it was configured: `storage.restore`
    /// may seed it (once).
    restorable: bool,
}

struct Inner {
    slos: BTreeMap<String, SloState>,
    /// The SLOs of each target, by name: a run's start looks up its own instead of walking
    /// every SLO (1,000 profiles starting at once made that quadratic).
    by_target: HashMap<String, Vec<String>>,
    pending: PendingBatch,
    maintenance: maintenance::Windows,
    /// Minutes restored from Prometheus, not yet written: kept apart from `pending` until the
    /// store is open, since a store that turns up late with minutes of its own wins over them.
    seeded: PendingBatch,
}

pub struct Budget {
    inner: Mutex<Inner>,
    store: Mutex<Option<Store>>,
    /// Whether `store` holds an open store (read without its lock, by `problem`).
    store_open: AtomicBool,
    /// Run records (with their details) waiting for the store.
    unsaved_runs: Mutex<persist::RunQueue>,
    dir: PathBuf,
    /// Why the store is not healthy since start-up (corrupt file moved aside, unwritable):
    /// sticky until restart, so an operator sees it.
    problem: Mutex<Option<String>>,
    /// The last flush error; cleared by the next successful flush (a disk that filled up and
    /// was freed).
    flush_error: Mutex<Option<String>>,
    /// The start-up restore from Prometheus, when `storage.restore` is set.
    restore: Mutex<Option<RestoreStatus>>,
    metrics: Metrics,
}

impl Budget {
    /// Opens (or recovers) the store under `dir`. A broken store never stops the daemon: the
    /// problem is kept for `/readyz`, the log and `sloburn_store_healthy`.
    pub fn open(dir: &Path, metrics: Metrics) -> Budget {
        let (store, error) = Store::open_or_recover(dir);
        let problem = error.map(|e| describe(&e));
        if let Some(p) = &problem {
            tracing::error!(problem = %p, "SLO store problem; load and metrics go on");
        }
        metrics.set_store_healthy(problem.is_none());
        Budget {
            inner: Mutex::new(Inner {
                slos: BTreeMap::new(),
                by_target: HashMap::new(),
                pending: PendingBatch::new(),
                maintenance: maintenance::Windows::default(),
                seeded: PendingBatch::new(),
            }),
            store_open: AtomicBool::new(store.is_some()),
            store: Mutex::new(store),
            unsaved_runs: Mutex::new(persist::RunQueue::default()),
            dir: dir.to_path_buf(),
            problem: Mutex::new(problem),
            flush_error: Mutex::new(None),
            restore: Mutex::new(None),
            metrics,
        }
    }

    /// Why the store is not healthy, if it is not; while it is not open, with what waits in
    /// memory for it. Takes neither the store's lock nor holds two at once.
    pub fn problem(&self) -> Option<String> {
        let sticky = self.problem.lock().ok().and_then(|p| p.clone());
        let p = sticky.or_else(|| self.flush_error.lock().ok().and_then(|p| p.clone()));
        if self.store_open.load(Relaxed) {
            return p;
        }
        let p = p.unwrap_or_else(|| "the SLO store is not open".into());
        Some(format!(
            "{p}; retrying with back-off; kept in memory until then: {}",
            self.unsaved()
        ))
    }

    /// Whether the store is open.
    pub fn store_is_open(&self) -> bool {
        self.store_open.load(Relaxed)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Adopts the SLOs of a (new) config. SLOs that stay keep their windows; new ones are
    /// restored from the store; removed ones are dropped with their series.
    pub fn configure(&self, cfg: &Config, now_unix: i64) {
        let now_minute = slo::minute_of(now_unix);
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        inner.slos.retain(|name, _| cfg.slos.contains_key(name));
        inner.maintenance.configured = cfg.maintenance.clone();
        for s in cfg.slos.values() {
            let def = s.def();
            let keep = inner
                .slos
                .get(&s.name)
                .is_some_and(|old| old.def.span() == def.span());
            let metrics = self.metrics.slo(&s.name, def.objective);
            if keep {
                if let Some(state) = inner.slos.get_mut(&s.name) {
                    state.def = def;
                    state.sli = s.sli.clone();
                    state.target = s.target.clone();
                    state.journey = s.journey.clone();
                    state.step = s.step.clone();
                    state.profiles = s.profiles.clone();
                    state.group = s.group.clone();
                    state.evaluated = None;
                }
                continue;
            }
            let since = now_minute - slo::window_minutes(def.span()) + 1;
            let restored = self
                .store
                .lock()
                .ok()
                .and_then(|st| st.as_ref().map(|st| st.load(&s.name, since)));
            let restorable = match &restored {
                None => true,
                Some(Ok(m)) => m.is_empty(),
                Some(Err(_)) => false,
            };
            let windows = match restored {
                Some(Ok(minutes)) => Windows::restore(def.span(), minutes),
                Some(Err(e)) => {
                    self.set_problem(format!("cannot restore SLO `{}`: {e}", s.name));
                    Windows::new(def.span())
                }
                None => Windows::new(def.span()),
            };
            let folded = metrics.events();
            inner.slos.insert(
                s.name.clone(),
                SloState {
                    def,
                    paused: Arc::new(AtomicBool::new(false)),
                    sli: s.sli.clone(),
                    target: s.target.clone(),
                    journey: s.journey.clone(),
                    step: s.step.clone(),
                    profiles: s.profiles.clone(),
                    windows,
                    metrics,
                    group: s.group.clone(),
                    folded,
                    report: None,
                    evaluated: None,
                    restorable,
                },
            );
        }
        let names: Vec<String> = inner.slos.keys().cloned().collect();
        let mut by_target: HashMap<String, Vec<String>> = HashMap::new();
        for (name, s) in &inner.slos {
            by_target
                .entry(s.target.clone())
                .or_default()
                .push(name.clone());
        }
        inner.by_target = by_target;
        self.metrics.retain_slos(&names);
        drop(inner);
        self.tick(now_unix);
    }

    /// Opens a maintenance window now for `slos` (every SLO when empty) until `end`; its id.
    /// It takes effect at once (the next tick is this call's).
    pub fn open_maintenance(
        &self,
        slos: Vec<String>,
        now_unix: i64,
        end: i64,
        reason: String,
    ) -> Result<u64, String> {
        let id = {
            let mut inner = self
                .inner
                .lock()
                .map_err(|_| "the SLO state is poisoned".to_string())?;
            // A grouped SLO's name (its parent) covers all its groups.
            let known = |name: &str| {
                inner.slos.contains_key(name)
                    || inner
                        .slos
                        .values()
                        .any(|s| s.group.as_ref().is_some_and(|g| g.parent == name))
            };
            if let Some(bad) = slos.iter().find(|s| !known(s)) {
                return Err(format!("no SLO `{bad}`"));
            }
            inner.maintenance.open(slos, now_unix, end, reason)?
        };
        self.tick(now_unix);
        Ok(id)
    }

    /// Closes a window opened through the API; false when there is none of that id.
    pub fn close_maintenance(&self, id: u64, now_unix: i64) -> bool {
        let closed = self
            .inner
            .lock()
            .map(|mut i| i.maintenance.close(id))
            .unwrap_or(false);
        if closed {
            self.tick(now_unix);
        }
        closed
    }

    /// The configured and open windows, each with whether it is active.
    pub fn maintenance(&self, now_unix: i64) -> Vec<MaintenanceView> {
        self.inner
            .lock()
            .map(|i| i.maintenance.list(now_unix))
            .unwrap_or_default()
    }

    /// Whether a maintenance window covers `slo` now.
    pub fn in_maintenance(&self, slo: &str) -> bool {
        self.inner
            .lock()
            .ok()
            .and_then(|i| i.slos.get(slo).map(|s| s.paused.load(Relaxed)))
            .unwrap_or(false)
    }

    /// The SLOs the store had no minute for when they were configured, with the span their
    /// windows hold: what `storage.restore` may seed.
    pub fn restore_candidates(&self) -> Vec<(String, Duration)> {
        let Ok(inner) = self.inner.lock() else {
            return Vec::new();
        };
        inner
            .slos
            .iter()
            .filter(|(_, s)| s.restorable)
            .map(|(n, s)| (n.clone(), s.def.span()))
            .collect()
    }

    /// The names of every configured SLO.
    pub fn slo_names(&self) -> Vec<String> {
        self.inner
            .lock()
            .map(|inner| inner.slos.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Adds restored `(minute, good, bad)` counts to an SLO's windows and to the pending batch
    /// (the next flush writes them to the store, so the next start needs no Prometheus), then
    /// re-evaluates it. Only an SLO still [`restore_candidates`](Self::restore_candidates)
    /// takes them; returns whether it did.
    pub fn seed(&self, name: &str, minutes: &[(i64, u64, u64)], now_unix: i64) -> bool {
        let now_minute = slo::minute_of(now_unix);
        let Ok(mut guard) = self.inner.lock() else {
            return false;
        };
        let inner = &mut *guard;
        let Some(s) = inner.slos.get_mut(name).filter(|s| s.restorable) else {
            return false;
        };
        for &(minute, good, bad) in minutes {
            s.windows.record(minute, good, bad);
            inner.seeded.add(name, minute, good, bad);
        }
        let report = slo::evaluate(
            &s.def,
            &s.windows,
            now_minute.max(s.windows.newest_minute().unwrap_or(now_minute)),
        );
        s.metrics.set_report(&report);
        s.report = Some(report);
        // Evaluated at the newest seeded minute, which may not be the tick's.
        s.evaluated = None;
        true
    }

    /// Ends seeding: no later restore may add to any SLO.
    pub fn end_restore(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.slos.values_mut().for_each(|s| s.restorable = false);
        }
    }

    pub fn set_restore(&self, status: RestoreStatus) {
        let phase = match &status.phase {
            RestorePhase::Restoring => "restoring",
            RestorePhase::Done => "done",
            RestorePhase::Incomplete(_) => "incomplete",
        };
        let coverage = status
            .slos
            .iter()
            .map(|(n, c)| (n.clone(), (c.restored, c.gap_minutes())))
            .collect();
        self.metrics.set_restore(phase, coverage);
        if let Ok(mut slot) = self.restore.lock() {
            *slot = Some(status);
        }
    }

    pub fn restore_status(&self) -> Option<RestoreStatus> {
        self.restore.lock().ok().and_then(|s| s.clone())
    }

    /// The SLOs that count traffic from `profile` on `target`.
    pub fn watchers(&self, target: &str, profile: &str) -> Vec<Watcher> {
        self.watchers_of(target, profile, &[], &[])
    }

    /// The SLOs that count traffic from `profile` on `target`, whose iterations walk
    /// `journeys` over `steps` (`load::walk` numbering; both empty for one request): a journey
    /// SLO watches only a run of its journey, and a step SLO only that step's requests.
    pub fn watchers_of(
        &self,
        target: &str,
        profile: &str,
        steps: &[StepInfo],
        journeys: &[String],
    ) -> Vec<Watcher> {
        let Ok(inner) = self.inner.lock() else {
            return Vec::new();
        };
        let Some(names) = inner.by_target.get(target) else {
            return Vec::new();
        };
        names
            .iter()
            .filter_map(|name| inner.slos.get(name))
            .filter(|s| s.profiles.is_empty() || s.profiles.iter().any(|p| p == profile))
            .filter_map(|s| {
                let scope =
                    match (&s.journey, &s.step) {
                        (None, _) => Scope::Requests,
                        (Some(j), None) => Scope::Journey(journeys.iter().position(|n| n == j)?),
                        (Some(j), Some(st)) => Scope::Step(steps.iter().position(|i| {
                            i.journey.as_deref() == Some(j.as_str()) && i.name == *st
                        })?),
                    };
                Some(Watcher {
                    metrics: s.metrics.clone(),
                    paused: s.paused.clone(),
                    sli: s.sli.clone(),
                    scope,
                    filter: s.group.as_ref().map(|g| g.filter.clone()),
                })
            })
            .collect()
    }

    /// Folds the counters into the windows and the pending batch, then re-evaluates each SLO
    /// whose windows changed: new events, or a new minute. An SLO between runs is evaluated
    /// once a minute instead of every second (its report is a function of its windows and the
    /// minute only).
    pub fn tick(&self, now_unix: i64) {
        let now_minute = slo::minute_of(now_unix);
        let Ok(mut guard) = self.inner.lock() else {
            return;
        };
        let inner = &mut *guard;
        for (name, s) in inner.slos.iter_mut() {
            let covered = inner.maintenance.covers(name, now_unix)
                || s.group
                    .as_ref()
                    .is_some_and(|g| inner.maintenance.covers(&g.parent, now_unix));
            s.paused.store(covered, Relaxed);
            s.metrics.set_maintenance(covered);
            let (good, bad) = s.metrics.events();
            let dg = good.saturating_sub(s.folded.0);
            let db = bad.saturating_sub(s.folded.1);
            s.folded = (good, bad);
            if dg + db == 0 && s.evaluated == Some(now_minute) {
                continue;
            }
            s.windows.advance(now_minute);
            if dg + db > 0 {
                s.windows.record(now_minute, dg, db);
                inner.pending.add(name, now_minute, dg, db);
            }
            let report = slo::evaluate(&s.def, &s.windows, now_minute);
            s.metrics.set_report(&report);
            s.report = Some(report);
            s.evaluated = Some(now_minute);
        }
    }

    /// Writes pending minutes (and runs waiting for the store) to the store. On failure the
    /// batch is kept for the next try. While the store is not open nothing moves: the reopen
    /// attempts (`reopen`) say why, and `problem` what waits.
    pub fn flush(&self) -> Result<usize, String> {
        if !self.store_open.load(Relaxed) {
            return Err(self
                .problem()
                .unwrap_or_else(|| "the SLO store is not open".into()));
        }
        let mut batch = match self.inner.lock() {
            Ok(mut inner) => {
                let mut batch = std::mem::take(&mut inner.pending);
                batch.merge(&std::mem::take(&mut inner.seeded));
                batch
            }
            Err(_) => return Err("SLO state lock poisoned".into()),
        };
        let has_runs = self.unsaved_runs.lock().is_ok_and(|q| !q.is_empty());
        if batch.is_empty() && !has_runs {
            return Ok(0);
        }
        let span = tracing::info_span!("store_flush", trace_id = tracing::field::Empty);
        crate::telemetry::daemon::stamp(&span);
        let _in_span = span.enter();
        let result = match self.store.lock() {
            Ok(mut store) => match store.as_mut() {
                Some(st) => match st.keep_in_place() {
                    // A swapped file is reported until restart, like a corrupt one.
                    Ok(swapped) => {
                        if let Some(what) = swapped
                            && let Ok(mut p) = self.problem.lock()
                        {
                            *p = Some(what);
                        }
                        st.flush_pending(&mut batch)
                            .map_err(|e| describe(&e))
                            .and_then(|n| self.save_queued_runs(st).map(|_| n))
                    }
                    Err(e) => Err(describe(&e)),
                },
                None => Err("the SLO store is not open".into()),
            },
            Err(_) => Err("store lock poisoned".into()),
        };
        // Whatever was not written goes back, merged with what arrived meanwhile.
        if !batch.is_empty()
            && let Ok(mut inner) = self.inner.lock()
        {
            inner.pending.merge(&batch);
        }
        self.metrics.store_flush(result.is_ok());
        let failure = result.as_ref().err().cloned();
        if let Some(e) = &failure {
            tracing::warn!(error = %e, "SLO store flush failed; counts kept in memory");
        }
        if let Ok(mut slot) = self.flush_error.lock() {
            *slot = failure;
        }
        self.metrics.set_store_healthy(self.problem().is_none());
        result
    }

    /// Drops minutes older than each SLO's period from the store, and from what waits in
    /// memory for it.
    pub fn prune(&self, now_unix: i64) {
        let now_minute = slo::minute_of(now_unix);
        let periods: Vec<(String, i64)> = match self.inner.lock() {
            Ok(mut guard) => {
                let inner = &mut *guard;
                let periods: Vec<(String, i64)> = inner
                    .slos
                    .iter()
                    .map(|(n, s)| (n.clone(), now_minute - slo::window_minutes(s.def.span())))
                    .collect();
                for (name, before) in &periods {
                    inner.pending.drop_before(name, before + 1);
                    inner.seeded.drop_before(name, before + 1);
                }
                periods
            }
            Err(_) => return,
        };
        if let Ok(mut store) = self.store.lock()
            && let Some(st) = store.as_mut()
        {
            for (name, before) in &periods {
                if let Err(e) = st.prune(name, *before) {
                    tracing::warn!(slo = %name, error = %describe(&e), "prune failed");
                }
            }
            let keep: Vec<&str> = periods.iter().map(|(n, _)| n.as_str()).collect();
            if let Err(e) = st.prune_unknown(&keep) {
                tracing::warn!(error = %describe(&e), "prune of removed SLOs failed");
            }
        }
    }

    /// Closes the store cleanly (after a final flush by the caller).
    pub fn close(&self) {
        if let Ok(mut store) = self.store.lock()
            && let Some(st) = store.take()
        {
            self.store_open.store(false, Relaxed);
            if let Err(e) = st.close() {
                tracing::warn!(error = %describe(&e), "closing the SLO store failed");
            }
        }
    }

    pub fn reports(&self) -> Vec<SloReport> {
        match self.inner.lock() {
            Ok(inner) => inner
                .slos
                .values()
                .filter_map(|s| s.report.clone())
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Event totals over the period budget (rolling, or since the calendar period's start), as
    /// the windows hold them (for tests and the API).
    pub fn period_totals(&self, name: &str, now_unix: i64) -> Option<(u64, u64)> {
        let inner = self.inner.lock().ok()?;
        let s = inner.slos.get(name)?;
        let now = slo::minute_of(now_unix);
        Some(s.windows.totals(s.def.period_window(now), now))
    }

    /// The burn rate of `name` over `window` right now, counting not-yet-folded events too,
    /// for budget guards that must react within seconds.
    pub fn burn_rate(&self, name: &str, window: Duration, now_unix: i64) -> Option<f64> {
        let (g, b, budget) = self.totals(name, window, now_unix)?;
        Some(slo::burn_rate(g, b, budget))
    }

    /// Good and bad events of `name` over `window` right now, not-yet-folded ones included,
    /// with its error budget: what [`Budget::burn_rate`] divides, and what a shard tells its
    /// peers so they can add it up.
    pub fn totals(&self, name: &str, window: Duration, now_unix: i64) -> Option<(u64, u64, f64)> {
        let inner = self.inner.lock().ok()?;
        let s = inner.slos.get(name)?;
        let (g, b) = s.windows.totals(window, slo::minute_of(now_unix));
        let (good, bad) = s.metrics.events();
        let g = g.saturating_add(good.saturating_sub(s.folded.0));
        let b = b.saturating_add(bad.saturating_sub(s.folded.1));
        Some((g, b, s.def.error_budget()))
    }

    /// An SLO's per-minute counts over its period, oldest first, with the period in minutes
    /// and the error budget: what a budget burn-down is drawn from.
    pub fn period_minutes(&self, name: &str) -> Option<(MinuteCounts, i64, f64)> {
        let inner = self.inner.lock().ok()?;
        let s = inner.slos.get(name)?;
        Some((
            s.windows.minutes().collect(),
            s.windows.period_minutes(),
            s.def.error_budget(),
        ))
    }

    /// Runs `f` on the open store (run history shares the SLO database); `None` when the
    /// store is not open.
    pub fn with_store<R>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<R, StoreError>,
    ) -> Option<Result<R, String>> {
        let mut guard = self.store.lock().ok()?;
        let store = guard.as_mut()?;
        Some(f(store).map_err(|e| describe(&e)))
    }

    fn set_problem(&self, p: String) {
        if let Ok(mut slot) = self.problem.lock() {
            *slot = Some(p);
        }
        self.metrics.set_store_healthy(false);
    }
}

fn describe(e: &StoreError) -> String {
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::ErrorClass;

    /// A config from YAML text, without environment.
    fn config(text: &str) -> Config {
        crate::config::from_str(
            text,
            "c.yaml",
            std::path::Path::new("."),
            &crate::config::Env::from_map(BTreeMap::new(), 1),
        )
        .unwrap_or_else(|e| panic!("{e}"))
        .config
    }

    fn watcher(sli: Sli) -> Watcher {
        Watcher {
            metrics: Metrics::new("test").slo("s", 0.99),
            paused: Arc::new(AtomicBool::new(false)),
            sli,
            scope: Scope::Requests,
            filter: None,
        }
    }

    /// A run's watchers are its target's SLOs, narrowed by `profiles:`, and they follow a
    /// reload that moves an SLO to another target or removes it.
    #[test]
    fn watchers_are_the_targets_slos() {
        let load = |slos: &str| {
            config(&format!(
                "targets:\n  a: {{ url: http://127.0.0.1:1/ }}\n  b: {{ url: http://127.0.0.1:1/ }}\n\
                 profiles:\n  p: {{ target: a, rate: 1/s, duration: 1s }}\n  \
                 q: {{ target: a, rate: 1/s, duration: 1s }}\nslos:\n{slos}"
            ))
        };
        let dir = tempfile::tempdir().unwrap();
        let metrics = Metrics::new("test");
        let budget = Budget::open(dir.path(), metrics.clone());
        let names = |target: &str, profile: &str| -> Vec<&str> {
            let watchers = budget.watchers(target, profile);
            let named = ["a1", "a2", "b1"].into_iter().filter(|n| {
                let m = metrics.slo(n, 0.99);
                watchers.iter().any(|w| Arc::ptr_eq(&w.metrics, &m))
            });
            assert_eq!(named.clone().count(), watchers.len(), "an unnamed watcher");
            named.collect()
        };
        budget.configure(
            &load(
                "  a1: { target: a, sli: availability, objective: 99 }\n  \
                 a2: { target: a, profiles: [q], sli: availability, objective: 99 }\n  \
                 b1: { target: b, sli: availability, objective: 99 }\n",
            ),
            1_800_000_000,
        );
        assert_eq!(names("a", "p"), ["a1"]);
        assert_eq!(names("a", "q"), ["a1", "a2"]);
        assert_eq!(names("b", "p"), ["b1"]);
        assert!(names("c", "p").is_empty());
        budget.configure(
            &load("  a1: { target: b, sli: availability, objective: 99 }\n"),
            1_800_000_060,
        );
        assert!(names("a", "q").is_empty());
        assert_eq!(names("b", "p"), ["a1"]);
    }

    /// A grouped SLO's watchers each count only their own group: a request by its status
    /// class, a turned-away user by the row it would have taken (none when unknown); a
    /// maintenance window on the SLO as written covers every group.
    #[test]
    fn each_group_counts_only_its_own_events() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.csv"), "tenant\nacme\nbeta\nacme\n").unwrap();
        let cfg = crate::config::from_str(
            "targets:\n  a: { url: http://127.0.0.1:1/ }\n\
             journeys:\n  j: { target: a, data: { file: t.csv }, steps: [ { name: s, path: / } ] }\n\
             profiles:\n  p: { journey: j, rate: 1/s, duration: 1s }\n\
             slos:\n  by-class: { target: a, sli: availability, objective: 99, group_by: status_class }\n  \
             by-tenant: { journey: j, sli: availability, objective: 99, group_by: tenant }\n",
            "c.yaml",
            dir.path(),
            &crate::config::Env::from_map(BTreeMap::new(), 1),
        )
        .unwrap_or_else(|e| panic!("{e}"))
        .config;
        let metrics = Metrics::new("test");
        let budget = Budget::open(dir.path(), metrics.clone());
        let t = 1_800_000_000;
        budget.configure(&cfg, t);
        let steps = [StepInfo {
            journey: Some("j".into()),
            name: "s".into(),
            checks: Vec::new(),
            method: "GET".into(),
            url: "/".into(),
        }];
        let watchers = budget.watchers_of("a", "p", &steps, &["j".to_string()]);
        assert_eq!(watchers.len(), 6 + 2, "six status classes, two tenants");
        let of = |name: &str| metrics.slo(name, 0.99).events();
        let status = |s: Option<u16>| Outcome {
            status: s,
            error: s.is_none().then_some(ErrorClass::ConnectRefused),
            ..Outcome::default()
        };
        for o in [
            status(Some(200)),
            status(Some(503)),
            status(Some(503)),
            status(None),
        ] {
            // As a run's observer does: a whole-journey SLO counts no request.
            for w in watchers.iter().filter(|w| w.counts_step(0)) {
                w.observe(&o, Some(1), &[], &[]);
            }
        }
        assert_eq!(of("by-class:2xx"), (1, 0));
        assert_eq!(of("by-class:5xx"), (0, 2));
        assert_eq!(of("by-class:none"), (0, 1));
        assert_eq!(of("by-class:4xx"), (0, 0));
        for w in &watchers {
            w.iteration(0, Some(0), IterationResult::Ok, Duration::ZERO);
            w.iteration(0, Some(2), IterationResult::FailedStep, Duration::ZERO);
            w.iteration(0, Some(1), IterationResult::Ok, Duration::ZERO);
            w.turned_away(Some(1));
            w.turned_away(None);
        }
        assert_eq!(of("by-tenant:acme"), (1, 1));
        assert_eq!(of("by-tenant:beta"), (1, 1));
        assert_eq!(of("by-class:none"), (0, 3), "turned away: no status");

        let id = budget
            .open_maintenance(vec!["by-tenant".into()], t + 1, t + 600, String::new())
            .unwrap();
        assert!(budget.in_maintenance("by-tenant:acme") && budget.in_maintenance("by-tenant:beta"));
        assert!(!budget.in_maintenance("by-class:5xx"));
        for w in &watchers {
            w.iteration(0, Some(0), IterationResult::FailedStep, Duration::ZERO);
        }
        assert_eq!(of("by-tenant:acme"), (1, 1), "paused");
        assert!(budget.close_maintenance(id, t + 2));
    }

    /// A tick skips an SLO only when neither its events nor its minute changed: new events in
    /// the same minute, a reload's new objective and a new minute with no events are all
    /// evaluated again.
    #[test]
    fn a_tick_evaluates_again_whatever_changed() {
        let load = |objective: &str| {
            config(&format!(
                "targets:\n  a: {{ url: http://127.0.0.1:1/ }}\n\
                 profiles:\n  p: {{ target: a, rate: 1/s, duration: 1s }}\n\
                 slos:\n  s: {{ target: a, sli: availability, objective: {objective} }}\n"
            ))
        };
        let dir = tempfile::tempdir().unwrap();
        let budget = Budget::open(dir.path(), Metrics::new("test"));
        let t = 1_800_000_000; // the start of a minute
        budget.configure(&load("99"), t);
        let watcher = budget.watchers("a", "p").pop().expect("the SLO watches p");
        let five_minutes = || {
            let r = budget.reports().pop().expect("one report");
            let w = &r.windows[0];
            assert_eq!(w.window, Duration::from_secs(300));
            (r.objective, w.good, w.bad)
        };
        let events = |good: u64, bad: u64| {
            (0..good).for_each(|_| watcher.metrics.event(true));
            (0..bad).for_each(|_| watcher.metrics.event(false));
        };
        events(9, 1);
        budget.tick(t + 10);
        assert_eq!(five_minutes(), (0.99, 9, 1));
        events(5, 0);
        budget.tick(t + 20);
        assert_eq!(
            five_minutes(),
            (0.99, 14, 1),
            "new events in the same minute"
        );
        budget.tick(t + 30);
        assert_eq!(five_minutes(), (0.99, 14, 1), "nothing new");
        budget.configure(&load("95"), t + 40);
        assert_eq!(five_minutes(), (0.95, 14, 1), "a reload's objective");
        budget.tick(t + 6 * 60);
        assert_eq!(
            five_minutes(),
            (0.95, 0, 0),
            "the events left the 5-minute window"
        );
        events(0, 2);
        budget.tick(t + 6 * 60 + 1);
        assert_eq!(five_minutes(), (0.95, 0, 2));
    }

    /// Under `ulimit -n 128` the daemon's own EMFILE failures reached 1,680,093 bad events.
    #[test]
    fn local_errors_are_not_slo_events() {
        let slis = [
            Sli::Availability,
            Sli::Latency {
                under: Duration::from_millis(100),
                exclude_failures: false,
                corrected: true,
            },
        ];
        for sli in slis {
            let w = watcher(sli);
            for class in ErrorClass::ALL.into_iter().filter(|c| c.is_local()) {
                let outcome = Outcome {
                    error: Some(class),
                    ..Outcome::default()
                };
                w.observe(&outcome, None, &[], &[]);
            }
            assert_eq!(w.metrics.events(), (0, 0));
            // The target's own failure is still a bad event.
            let reset = Outcome {
                error: Some(ErrorClass::Reset),
                ..Outcome::default()
            };
            w.observe(&reset, None, &[], &[]);
            assert_eq!(w.metrics.events(), (0, 1));
        }
    }

    /// A latency SLI counts the corrected latency by default: a request that waited 80 ms to
    /// connect (a full accept queue) and took 50 ms is bad under 100 ms; with
    /// `measure: duration`, k6's duration (50 ms) makes it good.
    #[test]
    fn latency_slis_count_the_connection_wait_unless_told_not_to() {
        let outcome = Outcome {
            status: Some(200),
            phases: crate::http::Phases {
                connecting: Duration::from_millis(80),
                waiting: Duration::from_millis(50),
                ..Default::default()
            },
            ..Outcome::default()
        };
        for (corrected, events) in [(true, (0, 1)), (false, (1, 0))] {
            let w = watcher(Sli::Latency {
                under: Duration::from_millis(100),
                exclude_failures: false,
                corrected,
            });
            w.observe(&outcome, None, &[], &[]);
            assert_eq!(w.metrics.events(), events, "corrected: {corrected}");
        }
    }

    /// A user turned away by a saturated target is one bad event for either SLI, even one that
    /// leaves failures out of its latency.
    #[test]
    fn a_saturated_arrival_is_a_bad_event_for_every_sli() {
        for sli in [
            Sli::Availability,
            Sli::Latency {
                under: Duration::from_millis(100),
                exclude_failures: true,
                corrected: true,
            },
        ] {
            let w = watcher(sli.clone());
            w.turned_away(None);
            assert_eq!(w.metrics.events(), (0, 1), "{sli:?}");
        }
    }
}
