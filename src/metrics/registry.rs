//! The registry: a cheap, shared handle built by `main`/the daemon and passed down (no global).
//! It holds the per-(target, profile) and per-SLO series and the run- and daemon-level values,
//! and hands a [`Snapshot`] of them to the encoder at each scrape.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use super::accept::{self, Format};
use super::encode::{self, Snapshot};
use super::encoder::{CHUNK, Sink};
use super::process::{self, ProcessStats};
use super::profile::{LocalTotals, ProfileMetrics, StepLayout};
use super::slo::SloMetrics;
use super::state::{RestoreCoverage, State, lock};
use super::text::label_set;
use crate::config::NativeOptions;

/// The `result` values `init_profile` pre-creates, so `increase()` and absent-alerts work
/// before the first run.
const INITIAL_RUN_RESULTS: [&str; 2] = ["passed", "failed"];

struct Inner {
    build_labels: String,
    /// `location="NAME"` (`server.location`), which every sample carries; empty without one.
    constant_labels: Mutex<String>,
    /// Local errors of every series ever created, by `ErrorClass as usize`: a series dropped
    /// by a reload takes its own counts with it, these stay (for `/readyz`).
    local_totals: Arc<LocalTotals>,
    profiles: Mutex<BTreeMap<(String, String), Arc<ProfileMetrics>>>,
    slos: Mutex<BTreeMap<String, Arc<SloMetrics>>>,
    state: Mutex<State>,
}

/// The registry: a cheap, `Clone`, `Send + Sync` handle shared by the daemon, the runs and the
/// HTTP server.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    pub fn new(version: &str) -> Metrics {
        Metrics {
            inner: Arc::new(Inner {
                build_labels: label_set(&[("version", version)]),
                constant_labels: Mutex::new(String::new()),
                local_totals: Arc::default(),
                profiles: Mutex::new(BTreeMap::new()),
                slos: Mutex::new(BTreeMap::new()),
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// Get-or-create the series of one (target, profile). The same `Arc` comes back while the
    /// buckets and checks stay the same; a changed layout (after a reload) replaces the series,
    /// because a histogram cannot change its buckets in place (Prometheus sees a counter reset).
    /// `buckets` are upper bounds in seconds; `checks` are the check names in result order.
    pub fn profile(
        &self,
        target: &str,
        profile: &str,
        buckets: &[f64],
        checks: &[String],
    ) -> Arc<ProfileMetrics> {
        self.profile_steps(target, profile, buckets, &[StepLayout::single(checks)], &[])
    }

    /// The series of a profile whose iterations walk `journeys` over `steps` (or one request:
    /// one step, no journeys); kept across runs while the layout stays the same.
    pub fn profile_steps(
        &self,
        target: &str,
        profile: &str,
        buckets: &[f64],
        steps: &[StepLayout],
        journeys: &[String],
    ) -> Arc<ProfileMetrics> {
        let mut profiles = lock(&self.inner.profiles);
        let key = (target.to_string(), profile.to_string());
        if let Some(p) = profiles.get(&key)
            && p.same_layout(buckets, steps, journeys)
        {
            return Arc::clone(p);
        }
        let p = Arc::new(ProfileMetrics::new(
            target,
            profile,
            buckets,
            steps,
            journeys,
            Arc::clone(&self.inner.local_totals),
        ));
        profiles.insert(key, Arc::clone(&p));
        p
    }

    /// Drops the series of every (target, profile) not in `keep`, and the run-level series of
    /// every profile not named there. A run still holding a dropped `Arc` records into it
    /// harmlessly; it is no longer exposed.
    pub fn retain_profiles(&self, keep: &[(String, String)]) {
        let pairs: BTreeSet<(&str, &str)> =
            keep.iter().map(|(t, p)| (t.as_str(), p.as_str())).collect();
        lock(&self.inner.profiles).retain(|(t, p), _| pairs.contains(&(t.as_str(), p.as_str())));
        let names: BTreeSet<&str> = keep.iter().map(|(_, p)| p.as_str()).collect();
        lock(&self.inner.state).retain_profiles(&names);
    }

    /// The profiles whose generator fell behind (dropped late arrivals) at or after
    /// `unix_secs`, sorted, for `/readyz`.
    pub fn overloaded_since(&self, unix_secs: u64) -> Vec<String> {
        let mut names: Vec<String> = lock(&self.inner.profiles)
            .values()
            .filter(|p| p.overloaded_since(unix_secs))
            .map(|p| p.profile().to_string())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// Get-or-create one SLO's series; its good/bad counters are pre-created at 0. A changed
    /// objective updates the kept series.
    pub fn slo(&self, name: &str, objective_ratio: f64) -> Arc<SloMetrics> {
        let mut slos = lock(&self.inner.slos);
        if let Some(s) = slos.get(name) {
            s.set_objective(objective_ratio);
            return Arc::clone(s);
        }
        let s = Arc::new(SloMetrics::new(name, objective_ratio));
        slos.insert(name.to_string(), Arc::clone(&s));
        s
    }

    pub fn retain_slos(&self, keep: &[String]) {
        lock(&self.inner.slos).retain(|name, _| keep.contains(name));
    }

    pub fn run_started(&self, profile: &str) {
        lock(&self.inner.state)
            .run_active
            .insert(profile.to_string(), true);
    }

    /// `result` is one of passed, failed, aborted, aborted_by_guard, error, skipped.
    pub fn run_finished(&self, profile: &str, result: &str) {
        let mut st = lock(&self.inner.state);
        let key = (profile.to_string(), result.to_string());
        *st.runs.entry(key.clone()).or_insert(0) += 1;
        st.run_active.insert(profile.to_string(), false);
        st.last_run.insert(key, crate::clock::unix_secs());
    }

    /// A share of a run on every shard ended: the profile is idle again, and the run is
    /// counted (`run_finished`) by the shard that collects it, once.
    pub fn share_finished(&self, profile: &str) {
        lock(&self.inner.state)
            .run_active
            .insert(profile.to_string(), false);
    }

    /// Pre-creates `sloburn_runs_total{result="passed"|"failed"}` at 0 and `run_active` at 0.
    pub fn init_profile(&self, profile: &str) {
        let mut st = lock(&self.inner.state);
        for result in INITIAL_RUN_RESULTS {
            st.runs
                .entry((profile.to_string(), result.to_string()))
                .or_insert(0);
        }
        st.run_active.entry(profile.to_string()).or_insert(false);
    }

    pub fn set_threshold(&self, profile: &str, metric: &str, threshold: &str, passed: bool) {
        lock(&self.inner.state).thresholds.insert(
            (
                profile.to_string(),
                metric.to_string(),
                threshold.to_string(),
            ),
            passed,
        );
    }

    /// A capacity search's bracket (`sloburn_capacity_rate`): `high` `None` removes its series
    /// (nothing failed up to the ceiling).
    pub fn set_capacity(&self, profile: &str, low: f64, high: Option<f64>) {
        let mut st = lock(&self.inner.state);
        st.capacity.insert((profile.to_string(), "low"), low);
        match high {
            Some(h) => st.capacity.insert((profile.to_string(), "high"), h),
            None => st.capacity.remove(&(profile.to_string(), "high")),
        };
    }

    /// The configured targets and their protocols: `sloburn_target_info`.
    pub fn set_targets(&self, targets: impl IntoIterator<Item = (String, &'static str)>) {
        lock(&self.inner.state).targets = targets.into_iter().collect();
    }

    /// `None` removes the series (no run is scheduled).
    pub fn set_next_run(&self, profile: &str, unix_secs: Option<f64>) {
        let mut st = lock(&self.inner.state);
        match unix_secs {
            Some(t) => st.next_run.insert(profile.to_string(), t),
            None => st.next_run.remove(profile),
        };
    }

    /// A configuration load (the first one included) and whether it succeeded. Until the
    /// first call the gauges are absent; the counters exist at 0 from the start.
    pub fn reload(&self, ok: bool) {
        let mut st = lock(&self.inner.state);
        st.reloads[usize::from(!ok)] += 1;
        st.last_reload_ok = Some(ok);
        if ok {
            st.last_reload_success = Some(crate::clock::unix_secs());
        }
    }

    pub fn set_store_healthy(&self, ok: bool) {
        lock(&self.inner.state).store_healthy = Some(ok);
    }

    /// The start-up restore's phase (`restoring`, `done` or `incomplete`) and, per SLO, the
    /// minutes restored and the minutes Prometheus had no data for.
    pub fn set_restore(&self, phase: &'static str, coverage: RestoreCoverage) {
        lock(&self.inner.state).restore = Some((phase, coverage));
    }

    /// A bearer token refused: `missing` when none was sent, else a wrong one.
    pub fn admin_auth_failure(&self, missing: bool) {
        lock(&self.inner.state).auth_failures[usize::from(!missing)] += 1;
    }

    /// `(class, count)` of every local error class since the registry was made, across all
    /// profiles (those a reload removed included), zeros too, in label order.
    pub fn local_errors(&self) -> Vec<(&'static str, u64)> {
        self.inner.local_totals.read()
    }

    /// The daemon's starvation watch: `sloburn_generator_affected_requests_total` and
    /// `sloburn_generator_throttled_seconds_total` read it at each scrape.
    pub fn set_starvation(&self, watch: Arc<crate::starve::Starvation>) {
        lock(&self.inner.state).starvation = Some(watch);
    }

    /// Exposes the exporter's losses as `sloburn_telemetry_spans_dropped_total`.
    pub fn set_telemetry(&self, stats: Arc<crate::telemetry::ExportStats>) {
        lock(&self.inner.state).telemetry = Some(stats);
    }

    pub fn store_flush(&self, ok: bool) {
        lock(&self.inner.state).store_flushes[usize::from(!ok)] += 1;
    }

    /// The protobuf format's histogram options, from the config (at start and each reload).
    pub fn set_native_options(&self, opts: NativeOptions) {
        lock(&self.inner.state).native = opts;
    }

    /// The format an `Accept` header prefers (see [`accept::negotiate`]).
    pub fn negotiate(accept_header: Option<&str>) -> Format {
        accept::negotiate(accept_header)
    }

    pub fn format_content_type(format: Format) -> &'static str {
        accept::format_content_type(format)
    }

    /// The whole protobuf exposition (tests; `/metrics` streams it).
    pub fn encode_protobuf(&self) -> Vec<u8> {
        self.with_snapshot(&process::read(), runtime_tasks(), |snapshot| {
            encode::encode_protobuf(snapshot, snapshot.state.native, None)
        })
    }

    /// The exposition in `format`, in chunks to `sink` (the `/metrics` endpoint).
    pub fn encode_format_streamed(&self, format: Format, sink: Sink) {
        match format {
            Format::Text => self.encode_streamed(false, sink),
            Format::OpenMetrics => self.encode_streamed(true, sink),
            Format::Protobuf => {
                self.with_snapshot(&process::read(), runtime_tasks(), |snapshot| {
                    encode::encode_protobuf(snapshot, snapshot.state.native, Some(sink));
                });
            }
        }
    }

    pub fn content_type(openmetrics: bool) -> &'static str {
        accept::content_type(openmetrics)
    }

    /// `server.location`: every series gets `location="NAME"` (none with `None`).
    pub fn set_location(&self, location: Option<&str>) {
        *lock(&self.inner.constant_labels) =
            location.map_or_else(String::new, |l| label_set(&[("location", l)]));
    }

    pub fn wants_openmetrics(accept_header: Option<&str>) -> bool {
        accept::wants_openmetrics(accept_header)
    }

    /// The whole exposition in one string, with the process figures and the runtime's task
    /// count read now (tests and examples; `/metrics` streams it, [`Metrics::encode_streamed`]).
    pub fn encode(&self, openmetrics: bool) -> String {
        self.with_snapshot(&process::read(), runtime_tasks(), |snapshot| {
            encode::encode(snapshot, openmetrics, CHUNK)
        })
    }

    /// [`Metrics::encode`] in chunks of about [`CHUNK`] bytes handed to `sink` as they
    /// are written (the `/metrics` endpoint): a scrape of 1,000 profiles holds a few chunks,
    /// not its 21 MB. A sink that answers false (its reader left) gets nothing more.
    pub fn encode_streamed(&self, openmetrics: bool, sink: Sink) {
        self.with_snapshot(&process::read(), runtime_tasks(), |snapshot| {
            encode::encode_streamed(snapshot, openmetrics, sink);
        });
    }

    /// [`Metrics::encode`] with given process figures (tests pass fixed ones for golden text)
    /// and no task count.
    pub fn encode_with(&self, openmetrics: bool, process: &ProcessStats) -> String {
        self.with_snapshot(process, None, |snapshot| {
            encode::encode(snapshot, openmetrics, 4096)
        })
    }

    fn with_snapshot<R>(
        &self,
        process: &ProcessStats,
        runtime_tasks: Option<f64>,
        write: impl FnOnce(&Snapshot) -> R,
    ) -> R {
        // Copy the handles and values out so no lock is held while formatting.
        let profiles = lock(&self.inner.profiles).values().cloned().collect();
        let slos: Vec<Arc<SloMetrics>> = lock(&self.inner.slos).values().cloned().collect();
        let constant_labels = lock(&self.inner.constant_labels).clone();
        let snapshot = Snapshot {
            build_labels: &self.inner.build_labels,
            constant_labels: &constant_labels,
            process,
            runtime_tasks,
            profiles,
            slos: slos
                .into_iter()
                .map(|s| {
                    let report = lock(&s.report).clone();
                    (s, report)
                })
                .collect(),
            state: lock(&self.inner.state).clone(),
        };
        write(&snapshot)
    }
}

/// The runtime's alive tasks, when called on (or from a blocking thread of) a runtime.
fn runtime_tasks() -> Option<f64> {
    tokio::runtime::Handle::try_current()
        .ok()
        .map(|h| h.metrics().num_alive_tasks() as f64)
}
