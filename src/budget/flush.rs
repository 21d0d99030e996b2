//! Writing the SLO state down: pending minutes and queued run records to the store, pruning
//! what left every period, closing, and the store's problems as the daemon reports them.

use super::Budget;
use crate::slo;
use crate::store::{Store, StoreError};
use std::sync::atomic::Ordering::Relaxed;

impl Budget {
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

    pub(super) fn set_problem(&self, p: String) {
        if let Ok(mut slot) = self.problem.lock() {
            *slot = Some(p);
        }
        self.metrics.set_store_healthy(false);
    }
}

pub(super) fn describe(e: &StoreError) -> String {
    e.to_string()
}
