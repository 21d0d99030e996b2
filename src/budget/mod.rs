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

use crate::config::{Config, Sli};
use crate::load::event::StepInfo;
use crate::metrics::{Metrics, SloMetrics};
use crate::slo::{self, SloDef, SloReport, Windows};
use crate::store::{PendingBatch, Store};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

mod flush;
use flush::describe;
mod maintenance;
mod persist;
mod read;
mod restore;
mod transitions;
mod watcher;
pub use maintenance::View as MaintenanceView;
pub use persist::Unsaved;
pub use restore::{RestorePhase, RestoreStatus, SloCoverage};
pub use watcher::{Scope, SloEvents, Watcher};

struct SloState {
    def: SloDef,
    /// The live state: event totals and the maintenance pause (set by the tick).
    events: Arc<SloEvents>,
    sli: Sli,
    target: String,
    journey: Option<String>,
    step: Option<String>,
    profiles: Vec<String>,
    windows: Windows,
    /// Where the tick publishes the SLO's objective and report for `/metrics`.
    series: Arc<SloMetrics>,
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
        let budget = Budget {
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
        };
        let now = crate::clock::since_epoch().as_secs() as i64;
        budget.with_store(|st| {
            budget.sync_maintenance(st, now);
            Ok(())
        });
        budget
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
            let series = self.metrics.slo(&s.name, def.objective);
            if keep {
                if let Some(state) = inner.slos.get_mut(&s.name) {
                    series.read_from(state.events.clone());
                    state.series = series;
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
            // A changed period starts new windows, not new totals: the counter goes on.
            let events = inner
                .slos
                .get(&s.name)
                .map_or_else(Default::default, |old| old.events.clone());
            series.read_from(events.clone());
            let folded = events.events();
            inner.slos.insert(
                s.name.clone(),
                SloState {
                    def,
                    events,
                    sli: s.sli.clone(),
                    target: s.target.clone(),
                    journey: s.journey.clone(),
                    step: s.step.clone(),
                    profiles: s.profiles.clone(),
                    windows,
                    series,
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

    /// The SLOs that count traffic from `profile` on `target`.
    pub fn watchers(&self, target: &str, profile: &str) -> Vec<Watcher> {
        self.watchers_of(target, profile, &[], &[])
    }

    /// The SLOs that count traffic from `profile` on `target`, whose iterations walk
    /// `journeys` over `steps` (`load::iteration` numbering; both empty for one request): a journey
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
                    events: s.events.clone(),
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
            // A window opening or closing changes the report (its tiers silenced or not).
            let turned = s.events.paused() != covered;
            s.events.pause(covered);
            let (good, bad) = s.events.events();
            let dg = good.saturating_sub(s.folded.0);
            let db = bad.saturating_sub(s.folded.1);
            s.folded = (good, bad);
            if dg + db == 0 && s.evaluated == Some(now_minute) && !turned {
                continue;
            }
            s.windows.advance(now_minute);
            if dg + db > 0 {
                s.windows.record(now_minute, dg, db);
                inner.pending.add(name, now_minute, dg, db);
            }
            let mut report = slo::evaluate(&s.def, &s.windows, now_minute);
            if covered {
                report.silence();
            }
            s.series.set_report(&report);
            transitions::log(s.report.as_ref(), &report);
            s.report = Some(report);
            s.evaluated = Some(now_minute);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{ErrorClass, Outcome};
    use crate::load::event::IterationResult;
    use std::time::Duration;

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
                let inner = budget.inner.lock().unwrap();
                let Some(m) = inner.slos.get(*n).map(|s| s.events.clone()) else {
                    return false;
                };
                watchers.iter().any(|w| Arc::ptr_eq(&w.events, &m))
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
            (0..good).for_each(|_| watcher.events.event(true));
            (0..bad).for_each(|_| watcher.events.event(false));
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
}
