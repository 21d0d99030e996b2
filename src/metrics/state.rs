//! The registry's run- and daemon-level state, which the encoder reads at each scrape, and the
//! one way to take the registry's locks.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::config::NativeOptions;

/// A poisoned lock only means another thread panicked mid-update of plain numbers; the
/// metrics are still worth serving, so never propagate the panic to a scrape.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Per SLO, the minutes a start-up restore filled and the minutes it found no data for.
pub type RestoreCoverage = BTreeMap<String, (u64, u64)>;

/// Run-level and daemon-level values: few, set rarely, so a `Mutex` and maps are fine.
#[derive(Debug, Default, Clone)]
pub(super) struct State {
    /// (profile, result) → count.
    pub(super) runs: BTreeMap<(String, String), u64>,
    pub(super) run_active: BTreeMap<String, bool>,
    /// (profile, result) → unix seconds.
    pub(super) last_run: BTreeMap<(String, String), f64>,
    /// (profile, metric, threshold) → passed.
    pub(super) thresholds: BTreeMap<(String, String, String), bool>,
    pub(super) next_run: BTreeMap<String, f64>,
    /// (profile, bound: `low` or `high`) → arrivals a second.
    pub(super) capacity: BTreeMap<(String, &'static str), f64>,
    /// Each configured target's protocol (`http`, `tcp`, `tls`, `dns`, `websocket`).
    pub(super) targets: BTreeMap<String, &'static str>,
    /// [success, failure].
    pub(super) reloads: [u64; 2],
    pub(super) last_reload_ok: Option<bool>,
    pub(super) last_reload_success: Option<f64>,
    pub(super) store_healthy: Option<bool>,
    /// [success, failure].
    pub(super) store_flushes: [u64; 2],
    /// Refused bearer tokens: [missing, wrong].
    pub(super) auth_failures: [u64; 2],
    /// The OTLP exporter's counts, once `telemetry:` started one.
    pub(super) telemetry: Option<Arc<crate::telemetry::ExportStats>>,
    /// The daemon's starvation watch, once it runs one.
    pub(super) starvation: Option<Arc<crate::starve::Starvation>>,
    /// The start-up restore from Prometheus: its phase and, per SLO, (restored, gap) minutes.
    pub(super) restore: Option<(&'static str, RestoreCoverage)>,
    /// How the protobuf format writes histograms (`server.native_histograms`).
    pub(super) native: NativeOptions,
}

impl State {
    pub(super) fn retain_profiles(&mut self, keep: &BTreeSet<&str>) {
        self.runs.retain(|(p, _), _| keep.contains(p.as_str()));
        self.run_active.retain(|p, _| keep.contains(p.as_str()));
        self.last_run.retain(|(p, _), _| keep.contains(p.as_str()));
        self.thresholds
            .retain(|(p, _, _), _| keep.contains(p.as_str()));
        self.next_run.retain(|p, _| keep.contains(p.as_str()));
        self.capacity.retain(|(p, _), _| keep.contains(p.as_str()));
    }
}
