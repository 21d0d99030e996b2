//! Reading the live SLO state: every SLO's report, and one SLO's totals and burn over a window
//! (the API, the Flagger hook's SLO mode, guards and peers).

use super::Budget;
use crate::slo::{self, SloReport};
use crate::store::MinuteCounts;
use std::time::Duration;

impl Budget {
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
        let (good, bad) = s.events.events();
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
}
