//! What waits in memory for the store, and the store's late opening (issue 30, item 5).
//!
//! A store unusable at start-up (a full disk, a read-only or missing directory, an I/O error)
//! or later never loses what the daemon counted while it runs: per-minute counts wait in the
//! pending batches (at most one row per SLO per minute of its period: older minutes are pruned
//! as the store would prune them), run records in a [`RunQueue`] (the newest
//! `RUNS_PER_PROFILE` of each profile, as the store keeps; the details of the newest
//! [`DETAILS_QUEUED`] only). The daemon calls [`Budget::reopen`] with back-off until the store
//! opens; then the store's own minutes of each SLO are read back into its windows (the store
//! wins over minutes restored from Prometheus meanwhile, as at start-up) and the next flush
//! writes everything. What is still unwritten when the daemon exits is [`Unsaved`]: it is
//! logged and the exit code says so (`exit::STATE_LOST`).

use super::Budget;
use super::flush::describe;
use crate::slo::{self, Windows};
use crate::store::{Store, StoredRun};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;

/// Run details kept with queued runs: the newest this many (a detail is the run's scatter and
/// timeline, up to a few hundred KB); older queued runs keep their record only.
pub const DETAILS_QUEUED: usize = 8;

/// Run records waiting for the store, by id.
#[derive(Debug, Default)]
pub struct RunQueue {
    runs: BTreeMap<u64, (StoredRun, Option<String>)>,
    /// The runs of a profile the store keeps (the last `push`'s).
    keep: usize,
}

impl RunQueue {
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    pub fn len(&self) -> usize {
        self.runs.len()
    }

    /// Queues a run (replacing an earlier one of the same id), keeping the newest `keep` of its
    /// profile and the details of the newest [`DETAILS_QUEUED`] runs.
    fn push(&mut self, run: StoredRun, detail: Option<String>, keep: usize) {
        let profile = run.profile.clone();
        self.keep = keep;
        self.runs.insert(run.id, (run, detail));
        let ids: Vec<u64> = self
            .runs
            .values()
            .filter(|(r, _)| r.profile == profile)
            .map(|(r, _)| r.id)
            .collect();
        for id in ids.iter().take(ids.len().saturating_sub(keep)) {
            self.runs.remove(id);
        }
        for (_, detail) in self.runs.values_mut().rev().skip(DETAILS_QUEUED) {
            *detail = None;
        }
    }
}

/// What the store has not got yet: counts of `slos` SLOs over `minutes` (SLO, minute) rows,
/// and run records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unsaved {
    pub slos: usize,
    pub minutes: usize,
    pub good: u64,
    pub bad: u64,
    pub runs: usize,
}

impl Unsaved {
    pub fn is_empty(&self) -> bool {
        self.minutes == 0 && self.runs == 0
    }
}

impl std::fmt::Display for Unsaved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} good and {} bad events of {} SLOs over {} minutes, and {} run records",
            self.good, self.bad, self.slos, self.minutes, self.runs
        )
    }
}

impl Budget {
    /// What waits in memory for the store.
    pub fn unsaved(&self) -> Unsaved {
        let mut u = Unsaved::default();
        if let Ok(inner) = self.inner.lock() {
            let mut all = inner.pending.clone();
            all.merge(&inner.seeded);
            (u.slos, u.minutes, u.good, u.bad) = all.summary();
        }
        if let Ok(q) = self.unsaved_runs.lock() {
            u.runs = q.len();
        }
        u
    }

    /// Saves a finished run (and its detail), keeping the newest `keep` of its profile; when
    /// the store is not open or the write fails, the run waits in memory for the next flush.
    pub fn save_run(&self, run: StoredRun, detail: Option<String>, keep: usize) {
        // A file renamed or removed under the daemon would take the run where nobody finds it:
        // put the store back in place first, as a flush does.
        let written = self
            .with_store(|st| {
                if let Some(what) = st.keep_in_place()?
                    && let Ok(mut p) = self.problem.lock()
                {
                    *p = Some(what);
                }
                st.save_run(&run, detail.as_deref(), keep)
            })
            .unwrap_or_else(|| Err("the SLO store is not open".into()));
        if let Err(e) = written {
            tracing::warn!(run = run.id, error = %e, "cannot save the run to the store yet; kept in memory");
            if let Ok(mut q) = self.unsaved_runs.lock() {
                q.push(run, detail, keep);
            }
        }
    }

    /// Writes the queued runs, oldest first, while the store takes them; returns how many.
    pub(super) fn save_queued_runs(&self, st: &mut Store) -> Result<usize, String> {
        let Ok(mut q) = self.unsaved_runs.lock() else {
            return Ok(0);
        };
        let (mut saved, keep) = (0, q.keep);
        while let Some((&id, (run, detail))) = q.runs.iter().next() {
            st.save_run(run, detail.as_deref(), keep)
                .map_err(|e| describe(&e))?;
            q.runs.remove(&id);
            saved += 1;
        }
        Ok(saved)
    }

    /// Tries to open the store that was not usable. On success the store's own minutes of
    /// each SLO are read back (for an SLO the store has minutes of, its windows become those
    /// plus what this daemon counted; minutes restored from Prometheus meanwhile are dropped,
    /// the store wins); the caller flushes next. Returns the reason on failure.
    pub fn reopen(&self, now_unix: i64) -> Result<(), String> {
        if self.store_open.load(Relaxed) {
            return Ok(());
        }
        let (store, error) = Store::open_or_recover(&self.dir);
        let notice = error.map(|e| describe(&e));
        let Some(store) = store else {
            let why = notice.unwrap_or_else(|| "the SLO store is not open".into());
            if let Ok(mut p) = self.problem.lock() {
                *p = Some(why.clone());
            }
            return Err(why);
        };
        let now_minute = slo::minute_of(now_unix);
        if let Ok(mut guard) = self.inner.lock() {
            let inner = &mut *guard;
            for (name, s) in inner.slos.iter_mut() {
                let since = now_minute - slo::window_minutes(s.def.span()) + 1;
                match store.load(name, since) {
                    Ok(rows) if !rows.is_empty() => {
                        let live = inner.pending.rows_of(name);
                        s.windows = Windows::restore(s.def.span(), rows.into_iter().chain(live));
                        inner.seeded.remove(name);
                        s.restorable = false;
                        s.evaluated = None;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(slo = %name, error = %describe(&e), "cannot read the SLO's stored minutes")
                    }
                }
            }
        }
        let mut store = store;
        self.sync_maintenance(&mut store, now_unix);
        if let Ok(mut slot) = self.store.lock() {
            *slot = Some(store);
        }
        self.store_open.store(true, Relaxed);
        if let Ok(mut p) = self.problem.lock() {
            *p = notice;
        }
        if let Ok(mut e) = self.flush_error.lock() {
            *e = None;
        }
        self.metrics.set_store_healthy(self.problem().is_none());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    fn run(id: u64, profile: &str) -> StoredRun {
        StoredRun {
            id,
            profile: profile.into(),
            started_at: id as f64,
            record: format!("{{\"id\":{id}}}"),
        }
    }

    #[test]
    fn the_queue_keeps_the_newest_runs_of_each_profile_and_few_details() {
        let mut q = RunQueue::default();
        for id in 1..=20 {
            q.push(run(id, "a"), Some(format!("detail {id}")), 5);
        }
        q.push(run(21, "b"), Some("b".into()), 5);
        let ids: Vec<u64> = q.runs.keys().copied().collect();
        assert_eq!(ids, vec![16, 17, 18, 19, 20, 21]);
        let details = q.runs.values().filter(|(_, d)| d.is_some()).count();
        assert_eq!(details, 6.min(DETAILS_QUEUED));
        // The same id again replaces it.
        q.push(run(21, "b"), None, 5);
        assert_eq!(q.len(), 6);
    }

    /// A store that opens late: its own minutes join the windows with what the daemon
    /// counted meanwhile, minutes restored from Prometheus meanwhile give way to them (the
    /// store wins, as at start-up), and one flush writes the counts and the queued run.
    #[test]
    fn a_late_store_wins_over_restored_minutes_and_takes_what_was_kept() {
        let root = tempfile::tempdir().unwrap();
        let blocker = root.path().join("state");
        std::fs::write(&blocker, b"x").unwrap();
        let dir = blocker.join("data");
        let cfg = crate::config::from_str(
            "targets:\n  a: { url: http://127.0.0.1:1/ }\n\
             profiles:\n  p: { target: a, rate: 1/s, duration: 1s }\n\
             slos:\n  s: { target: a, sli: availability, objective: 99, period: 1d }\n",
            "c.yaml",
            std::path::Path::new("."),
            &crate::config::Env::from_map(BTreeMap::new(), 1),
        )
        .unwrap_or_else(|e| panic!("{e}"))
        .config;
        let budget = Budget::open(&dir, Metrics::new("test"));
        assert!(!budget.store_is_open());
        let t = 1_800_000_000; // the start of a minute
        let m = slo::minute_of(t);
        budget.configure(&cfg, t);
        assert_eq!(budget.restore_candidates().len(), 1);
        assert!(budget.seed("s", &[(m - 5, 100, 0)], t));
        let watcher = budget.watchers("a", "p").pop().unwrap();
        (0..7).for_each(|_| watcher.events.event(true));
        budget.tick(t + 1);
        budget.save_run(run(1, "p"), Some("detail".into()), 50);
        assert_eq!(budget.period_totals("s", t + 1), Some((107, 0)));
        let kept = budget.unsaved();
        assert_eq!((kept.good, kept.bad, kept.runs), (107, 0, 1));
        assert!(budget.flush().is_err());
        let why = budget.problem().unwrap();
        assert!(
            why.contains("Not a directory") && why.contains("kept in memory"),
            "{why}"
        );

        // The directory turns up, with a store that has a minute of its own.
        std::fs::remove_file(&blocker).unwrap();
        let mut other = Store::open(&dir).unwrap();
        other.flush(&[("s".into(), m - 10, 50, 1)]).unwrap();
        other.close().unwrap();
        budget.reopen(t + 2).unwrap();
        assert!(budget.store_is_open() && budget.problem().is_none());
        assert_eq!(budget.period_totals("s", t + 2), Some((57, 1)));
        assert!(budget.restore_candidates().is_empty());
        budget.flush().unwrap();
        assert!(budget.unsaved().is_empty());
        budget.close();
        let store = Store::open(&dir).unwrap();
        assert_eq!(
            store.load("s", 0).unwrap(),
            vec![(m - 10, 50, 1), (m, 7, 0)]
        );
        assert_eq!(store.load_runs(50).unwrap(), vec![run(1, "p")]);
        assert_eq!(store.run_detail(1).unwrap().as_deref(), Some("detail"));
    }
}
