//! The metrics registry: every metric name sloburn exposes is defined here ([`FAMILIES`]), the
//! registry is built by `main`/the daemon and passed down (no global), and [`Metrics::encode`]
//! writes the whole exposition in the classic text format or OpenMetrics 1.0.
//!
//! The hot path never takes a lock: a run looks up its [`ProfileMetrics`] (and [`SloMetrics`])
//! once, then records each request with atomic adds into fixed arrays. The maps and the
//! run-level state behind a `Mutex` are touched only by get-or-create, by once-a-run or
//! once-a-minute setters, and by the scrape.
//!
//! Label conventions (bounded sets, values from config names only, never URLs or error text):
//! - `status` is the HTTP code, `"0"` when no response head arrived, `"other"` only past 512
//!   distinct (status, error) pairs of one profile;
//! - `error` is the [`ErrorClass`](crate::http::ErrorClass) label, `"none"` without a transport
//!   error (empty label values are avoided: Prometheus treats `x=""` as an absent label);
//! - `result` is `pass|fail` for checks, `good|bad` for SLO events, `success|failure` for
//!   reloads and store flushes, the run result for runs.
//!
//! Ordering is deterministic: families by name, series by label values in byte order (`le` in
//! numeric order), so golden tests can compare whole lines.

mod accept;
mod process;
mod profile;
mod slo;
mod text;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

pub use process::ProcessStats;
pub use profile::{ERROR_NONE, ProfileMetrics, STATUS_NONE, STATUS_OTHER};
pub use slo::{SloMetrics, window_label};
pub use text::{Family, Kind};

use profile::{HistRead, PHASES_BY_LABEL};
use text::{Encoder, label_set};

const fn family(
    name: &'static str,
    kind: Kind,
    unit: Option<&'static str>,
    help: &'static str,
) -> Family {
    Family {
        name,
        kind,
        unit,
        help,
    }
}

const SECONDS: Option<&str> = Some("seconds");
const BYTES: Option<&str> = Some("bytes");
const RATIO: Option<&str> = Some("ratio");

pub const PROCESS_CPU: Family = family(
    "process_cpu_seconds",
    Kind::Counter,
    SECONDS,
    "Total user and system CPU time spent in seconds.",
);
pub const PROCESS_MAX_FDS: Family = family(
    "process_max_fds",
    Kind::Gauge,
    None,
    "Maximum number of open file descriptors.",
);
pub const PROCESS_OPEN_FDS: Family = family(
    "process_open_fds",
    Kind::Gauge,
    None,
    "Number of open file descriptors.",
);
pub const PROCESS_RESIDENT: Family = family(
    "process_resident_memory_bytes",
    Kind::Gauge,
    BYTES,
    "Resident memory size in bytes.",
);
pub const PROCESS_START: Family = family(
    "process_start_time_seconds",
    Kind::Gauge,
    SECONDS,
    "Start time of the process since unix epoch in seconds.",
);
pub const PROCESS_VIRTUAL: Family = family(
    "process_virtual_memory_bytes",
    Kind::Gauge,
    BYTES,
    "Virtual memory size in bytes.",
);
pub const BUILD_INFO: Family = family(
    "sloburn_build_info",
    Kind::Gauge,
    None,
    "Always 1; the version label names the running sloburn build.",
);
pub const CHECKS: Family = family(
    "sloburn_checks",
    Kind::Counter,
    None,
    "Check results per request, by check name and result (pass or fail).",
);
pub const RELOAD_SUCCESS_TIME: Family = family(
    "sloburn_config_last_reload_success_timestamp_seconds",
    Kind::Gauge,
    SECONDS,
    "Unix time of the last successful configuration load.",
);
pub const RELOAD_SUCCESSFUL: Family = family(
    "sloburn_config_last_reload_successful",
    Kind::Gauge,
    None,
    "Whether the last configuration load succeeded (1) or failed (0).",
);
pub const RELOADS: Family = family(
    "sloburn_config_reloads",
    Kind::Counter,
    None,
    "Configuration loads by result (success or failure).",
);
pub const DATA_RECEIVED: Family = family(
    "sloburn_data_received_bytes",
    Kind::Counter,
    BYTES,
    "Bytes received from the target, headers and body.",
);
pub const DATA_SENT: Family = family(
    "sloburn_data_sent_bytes",
    Kind::Counter,
    BYTES,
    "Bytes sent to the target, headers and body.",
);
pub const DROPPED_ITERATIONS: Family = family(
    "sloburn_dropped_iterations",
    Kind::Counter,
    None,
    "Arrival-rate iterations not started because no VU was free.",
);
pub const HTTP_REQ_DURATION: Family = family(
    "sloburn_http_req_duration_seconds",
    Kind::Histogram,
    SECONDS,
    "Request duration (sending + waiting + receiving, plus any late start) of requests that got \
     a status.",
);
pub const HTTP_REQ_PHASE: Family = family(
    "sloburn_http_req_phase_seconds",
    Kind::Histogram,
    SECONDS,
    "Time per request phase (k6 names, dns split out of blocked) of requests that got a status.",
);
pub const HTTP_REQS: Family = family(
    "sloburn_http_reqs",
    Kind::Counter,
    None,
    "Requests by status (0 = no response) and error class (none = no transport error).",
);
pub const ITERATION_LATENESS: Family = family(
    "sloburn_iteration_lateness_seconds",
    Kind::Histogram,
    SECONDS,
    "How late iterations started against their intended time (0 for closed-model executors).",
);
pub const ITERATIONS: Family = family(
    "sloburn_iterations",
    Kind::Counter,
    None,
    "Completed iterations (one request each).",
);
pub const LAST_RUN_TIME: Family = family(
    "sloburn_last_run_timestamp_seconds",
    Kind::Gauge,
    SECONDS,
    "Unix time the last run of a profile finished, by result.",
);
pub const NEXT_RUN_TIME: Family = family(
    "sloburn_next_run_timestamp_seconds",
    Kind::Gauge,
    SECONDS,
    "Unix time of the next scheduled run of a profile.",
);
pub const RUN_ACTIVE: Family = family(
    "sloburn_run_active",
    Kind::Gauge,
    None,
    "Whether a run of the profile is in progress (1) or not (0).",
);
pub const RUNS: Family = family(
    "sloburn_runs",
    Kind::Counter,
    None,
    "Finished runs by result (passed, failed, aborted, aborted_by_guard, error, skipped).",
);
pub const SLO_ALERT_ACTIVE: Family = family(
    "sloburn_slo_alert_active",
    Kind::Gauge,
    None,
    "Whether the daemon's own evaluation of an alert tier is firing (1) or not (0).",
);
pub const SLO_BURN_RATE: Family = family(
    "sloburn_slo_burn_rate",
    Kind::Gauge,
    None,
    "Error ratio over the window divided by the error budget (0 without events).",
);
pub const SLO_BUDGET_REMAINING: Family = family(
    "sloburn_slo_error_budget_remaining_ratio",
    Kind::Gauge,
    RATIO,
    "Fraction of the period's error budget left (may be negative).",
);
pub const SLO_EVENTS: Family = family(
    "sloburn_slo_events",
    Kind::Counter,
    None,
    "SLO events by result (good or bad); the generated rules compute from this.",
);
pub const SLO_OBJECTIVE: Family = family(
    "sloburn_slo_objective_ratio",
    Kind::Gauge,
    RATIO,
    "The SLO objective as a ratio (0.999 for 99.9 %).",
);
pub const SLO_SLI: Family = family(
    "sloburn_slo_sli_ratio",
    Kind::Gauge,
    RATIO,
    "Good events over all events in the window (NaN without events).",
);
pub const SLO_TIME_TO_EXHAUSTION: Family = family(
    "sloburn_slo_time_to_exhaustion_seconds",
    Kind::Gauge,
    SECONDS,
    "Time until the error budget is spent at the 1h burn rate (absent when it never is).",
);
pub const STORE_FLUSHES: Family = family(
    "sloburn_store_flushes",
    Kind::Counter,
    None,
    "Flushes of SLO windows to the embedded store, by result (success or failure).",
);
pub const STORE_HEALTHY: Family = family(
    "sloburn_store_healthy",
    Kind::Gauge,
    None,
    "Whether the embedded store is writable (1) or not (0).",
);
pub const THRESHOLD_PASSED: Family = family(
    "sloburn_threshold_passed",
    Kind::Gauge,
    None,
    "Whether a threshold of the profile's last run passed (1) or failed (0).",
);
pub const VUS: Family = family(
    "sloburn_vus",
    Kind::Gauge,
    None,
    "Virtual users currently active.",
);
pub const VUS_MAX: Family = family(
    "sloburn_vus_max",
    Kind::Gauge,
    None,
    "Virtual users allocated (the run's maximum).",
);

/// Every family, in exposition order (sorted by name).
pub const FAMILIES: [Family; 35] = [
    PROCESS_CPU,
    PROCESS_MAX_FDS,
    PROCESS_OPEN_FDS,
    PROCESS_RESIDENT,
    PROCESS_START,
    PROCESS_VIRTUAL,
    BUILD_INFO,
    CHECKS,
    RELOAD_SUCCESS_TIME,
    RELOAD_SUCCESSFUL,
    RELOADS,
    DATA_RECEIVED,
    DATA_SENT,
    DROPPED_ITERATIONS,
    HTTP_REQ_DURATION,
    HTTP_REQ_PHASE,
    HTTP_REQS,
    ITERATION_LATENESS,
    ITERATIONS,
    LAST_RUN_TIME,
    NEXT_RUN_TIME,
    RUN_ACTIVE,
    RUNS,
    SLO_ALERT_ACTIVE,
    SLO_BURN_RATE,
    SLO_BUDGET_REMAINING,
    SLO_EVENTS,
    SLO_OBJECTIVE,
    SLO_SLI,
    SLO_TIME_TO_EXHAUSTION,
    STORE_FLUSHES,
    STORE_HEALTHY,
    THRESHOLD_PASSED,
    VUS,
    VUS_MAX,
];

/// The `result` values `init_profile` pre-creates, so `increase()` and absent-alerts work
/// before the first run.
const INITIAL_RUN_RESULTS: [&str; 2] = ["passed", "failed"];

/// A poisoned lock only means another thread panicked mid-update of plain numbers; the
/// metrics are still worth serving, so never propagate the panic to a scrape.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Run-level and daemon-level values: few, set rarely, so a `Mutex` and maps are fine.
#[derive(Debug, Default, Clone)]
struct State {
    /// (profile, result) → count.
    runs: BTreeMap<(String, String), u64>,
    run_active: BTreeMap<String, bool>,
    /// (profile, result) → unix seconds.
    last_run: BTreeMap<(String, String), f64>,
    /// (profile, metric, threshold) → passed.
    thresholds: BTreeMap<(String, String, String), bool>,
    next_run: BTreeMap<String, f64>,
    /// [success, failure].
    reloads: [u64; 2],
    last_reload_ok: Option<bool>,
    last_reload_success: Option<f64>,
    store_healthy: Option<bool>,
    /// [success, failure].
    store_flushes: [u64; 2],
}

impl State {
    fn retain_profiles(&mut self, keep: &BTreeSet<&str>) {
        self.runs.retain(|(p, _), _| keep.contains(p.as_str()));
        self.run_active.retain(|p, _| keep.contains(p.as_str()));
        self.last_run.retain(|(p, _), _| keep.contains(p.as_str()));
        self.thresholds
            .retain(|(p, _, _), _| keep.contains(p.as_str()));
        self.next_run.retain(|p, _| keep.contains(p.as_str()));
    }
}

struct Inner {
    build_labels: String,
    profiles: Mutex<BTreeMap<(String, String), Arc<ProfileMetrics>>>,
    slos: Mutex<BTreeMap<String, Arc<SloMetrics>>>,
    state: Mutex<State>,
    /// The size of the last exposition, to allocate the next one in one go.
    last_len: AtomicUsize,
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
                profiles: Mutex::new(BTreeMap::new()),
                slos: Mutex::new(BTreeMap::new()),
                state: Mutex::new(State::default()),
                last_len: AtomicUsize::new(0),
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
        let mut profiles = lock(&self.inner.profiles);
        let key = (target.to_string(), profile.to_string());
        if let Some(p) = profiles.get(&key)
            && p.same_layout(buckets, checks)
        {
            return Arc::clone(p);
        }
        let p = Arc::new(ProfileMetrics::new(target, profile, buckets, checks));
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
        st.last_run.insert(key, unix_now());
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
            st.last_reload_success = Some(unix_now());
        }
    }

    pub fn set_store_healthy(&self, ok: bool) {
        lock(&self.inner.state).store_healthy = Some(ok);
    }

    pub fn store_flush(&self, ok: bool) {
        lock(&self.inner.state).store_flushes[usize::from(!ok)] += 1;
    }

    pub fn content_type(openmetrics: bool) -> &'static str {
        accept::content_type(openmetrics)
    }

    pub fn wants_openmetrics(accept_header: Option<&str>) -> bool {
        accept::wants_openmetrics(accept_header)
    }

    /// The whole exposition, with the process figures read now.
    pub fn encode(&self, openmetrics: bool) -> String {
        self.encode_with(openmetrics, &process::read())
    }

    /// [`Metrics::encode`] with given process figures (tests pass fixed ones for golden text).
    pub fn encode_with(&self, openmetrics: bool, process: &ProcessStats) -> String {
        // Copy the handles out so no lock is held while formatting.
        let profiles: Vec<Arc<ProfileMetrics>> =
            lock(&self.inner.profiles).values().cloned().collect();
        let slos: Vec<Arc<SloMetrics>> = lock(&self.inner.slos).values().cloned().collect();
        let st = lock(&self.inner.state).clone();
        let capacity = self.inner.last_len.load(Relaxed) + 4096;
        let mut e = Encoder::new(openmetrics, capacity);

        encode_process(&mut e, process);
        gauge(
            &mut e,
            &BUILD_INFO,
            [(self.inner.build_labels.clone(), 1.0)],
        );
        encode_checks(&mut e, &profiles);
        gauge(
            &mut e,
            &RELOAD_SUCCESS_TIME,
            st.last_reload_success.map(|t| (String::new(), t)),
        );
        gauge(
            &mut e,
            &RELOAD_SUCCESSFUL,
            st.last_reload_ok
                .map(|ok| (String::new(), f64::from(u8::from(ok)))),
        );
        success_failure(&mut e, &RELOADS, st.reloads);
        per_profile_counter(&mut e, &DATA_RECEIVED, &profiles, |p| {
            p.data_received.load(Relaxed)
        });
        per_profile_counter(&mut e, &DATA_SENT, &profiles, |p| p.data_sent.load(Relaxed));
        per_profile_counter(&mut e, &DROPPED_ITERATIONS, &profiles, |p| {
            p.dropped.load(Relaxed)
        });
        encode_histograms(&mut e, &HTTP_REQ_DURATION, &profiles, |p| {
            vec![(&p.labels, p.duration.read())]
        });
        encode_histograms(&mut e, &HTTP_REQ_PHASE, &profiles, |p| {
            PHASES_BY_LABEL
                .iter()
                .zip(&p.phase_labels)
                .filter_map(|(phase, labels)| Some((labels, p.phases.get(*phase as usize)?.read())))
                .collect()
        });
        encode_reqs(&mut e, &profiles);
        encode_histograms(&mut e, &ITERATION_LATENESS, &profiles, |p| {
            vec![(&p.labels, p.lateness.read())]
        });
        per_profile_counter(&mut e, &ITERATIONS, &profiles, |p| {
            p.iterations.load(Relaxed)
        });
        gauge(
            &mut e,
            &LAST_RUN_TIME,
            st.last_run
                .iter()
                .map(|((p, r), t)| (label_set(&[("profile", p), ("result", r)]), *t)),
        );
        gauge(
            &mut e,
            &NEXT_RUN_TIME,
            st.next_run
                .iter()
                .map(|(p, t)| (label_set(&[("profile", p)]), *t)),
        );
        gauge(
            &mut e,
            &RUN_ACTIVE,
            st.run_active
                .iter()
                .map(|(p, a)| (label_set(&[("profile", p)]), f64::from(u8::from(*a)))),
        );
        counter(
            &mut e,
            &RUNS,
            st.runs
                .iter()
                .map(|((p, r), n)| (label_set(&[("profile", p), ("result", r)]), *n)),
        );
        encode_slos(&mut e, &slos);
        success_failure(&mut e, &STORE_FLUSHES, st.store_flushes);
        gauge(
            &mut e,
            &STORE_HEALTHY,
            st.store_healthy
                .map(|ok| (String::new(), f64::from(u8::from(ok)))),
        );
        gauge(
            &mut e,
            &THRESHOLD_PASSED,
            st.thresholds.iter().map(|((p, m, t), ok)| {
                (
                    label_set(&[("profile", p), ("metric", m), ("threshold", t)]),
                    f64::from(u8::from(*ok)),
                )
            }),
        );
        per_profile_gauge(&mut e, &VUS, &profiles, |p| p.vus.load(Relaxed));
        per_profile_gauge(&mut e, &VUS_MAX, &profiles, |p| p.vus_max.load(Relaxed));

        let out = e.finish();
        self.inner.last_len.store(out.len(), Relaxed);
        out
    }
}

/// A gauge family from `(label set, value)` rows already in label order; no rows, no family.
fn gauge(e: &mut Encoder, f: &Family, rows: impl IntoIterator<Item = (String, f64)>) {
    let name = f.sample_name();
    let mut rows = rows.into_iter().peekable();
    if rows.peek().is_some() {
        e.header(f);
    }
    for (labels, v) in rows {
        e.f64_sample(&name, "", &labels, v);
    }
}

fn counter(e: &mut Encoder, f: &Family, rows: impl IntoIterator<Item = (String, u64)>) {
    let name = f.sample_name();
    let mut rows = rows.into_iter().peekable();
    if rows.peek().is_some() {
        e.header(f);
    }
    for (labels, v) in rows {
        e.u64_sample(&name, "", &labels, v);
    }
}

fn success_failure(e: &mut Encoder, f: &Family, [success, failure]: [u64; 2]) {
    counter(
        e,
        f,
        [
            (label_set(&[("result", "failure")]), failure),
            (label_set(&[("result", "success")]), success),
        ],
    );
}

fn per_profile_counter(
    e: &mut Encoder,
    f: &Family,
    profiles: &[Arc<ProfileMetrics>],
    get: impl Fn(&ProfileMetrics) -> u64,
) {
    if profiles.is_empty() {
        return;
    }
    e.header(f);
    let name = f.sample_name();
    for p in profiles {
        e.u64_sample(&name, "", &p.labels, get(p));
    }
}

fn per_profile_gauge(
    e: &mut Encoder,
    f: &Family,
    profiles: &[Arc<ProfileMetrics>],
    get: impl Fn(&ProfileMetrics) -> u32,
) {
    per_profile_counter(e, f, profiles, |p| u64::from(get(p)));
}

fn encode_process(e: &mut Encoder, p: &ProcessStats) {
    let one = |v: Option<f64>| v.map(|v| (String::new(), v));
    // process_cpu_seconds is a counter of fractional seconds.
    if let Some(cpu) = p.cpu_seconds {
        e.header(&PROCESS_CPU);
        e.f64_sample(&PROCESS_CPU.sample_name(), "", "", cpu);
    }
    gauge(e, &PROCESS_MAX_FDS, one(p.max_fds));
    gauge(e, &PROCESS_OPEN_FDS, one(p.open_fds));
    gauge(e, &PROCESS_RESIDENT, one(p.resident_memory_bytes));
    gauge(e, &PROCESS_START, one(p.start_time_seconds));
    gauge(e, &PROCESS_VIRTUAL, one(p.virtual_memory_bytes));
}

fn encode_checks(e: &mut Encoder, profiles: &[Arc<ProfileMetrics>]) {
    if profiles.iter().all(|p| p.check_labels.is_empty()) {
        return;
    }
    e.header(&CHECKS);
    let name = CHECKS.sample_name();
    for p in profiles {
        for (labels, pass, fail) in p.checks() {
            // "fail" < "pass" in byte order.
            for (result, n) in [("fail", fail), ("pass", pass)] {
                e.start(&name, "", labels, Some(("result", result)));
                text::write_u64(&mut e.out, n);
                e.out.push('\n');
            }
        }
    }
}

fn encode_reqs(e: &mut Encoder, profiles: &[Arc<ProfileMetrics>]) {
    let rows: Vec<_> = profiles.iter().map(|p| (p, p.reqs())).collect();
    if rows.iter().all(|(_, r)| r.is_empty()) {
        return;
    }
    e.header(&HTTP_REQS);
    let name = HTTP_REQS.sample_name();
    let mut labels = String::new();
    for (p, reqs) in rows {
        for (status, error, n) in reqs {
            labels.clear();
            labels.push_str(&p.labels);
            labels.push_str(",status=\"");
            labels.push_str(&status);
            labels.push('"');
            e.start(&name, "", &labels, Some(("error", error)));
            text::write_u64(&mut e.out, n);
            e.out.push('\n');
        }
    }
}

fn encode_histograms<'a>(
    e: &mut Encoder,
    f: &Family,
    profiles: &'a [Arc<ProfileMetrics>],
    series: impl Fn(&'a ProfileMetrics) -> Vec<(&'a String, HistRead)>,
) {
    if profiles.is_empty() {
        return;
    }
    e.header(f);
    for p in profiles {
        let le = if e.openmetrics {
            &p.bounds.le_openmetrics
        } else {
            &p.bounds.le_classic
        };
        for (labels, h) in series(p) {
            for (le, n) in le.iter().zip(&h.cumulative) {
                e.start(f.name, "_bucket", labels, Some(("le", le)));
                text::write_u64(&mut e.out, *n);
                e.out.push('\n');
            }
            e.f64_sample(f.name, "_sum", labels, h.sum_seconds);
            e.u64_sample(
                f.name,
                "_count",
                labels,
                h.cumulative.last().copied().unwrap_or(0),
            );
        }
    }
}

fn encode_slos(e: &mut Encoder, slos: &[Arc<SloMetrics>]) {
    let reports: Vec<_> = slos.iter().map(|s| (s, lock(&s.report))).collect();
    let with_report = || reports.iter().filter_map(|(s, r)| Some((*s, r.as_ref()?)));
    gauge(
        e,
        &SLO_ALERT_ACTIVE,
        with_report().flat_map(|(_, r)| {
            r.alerts
                .iter()
                .map(|(l, a)| (l.clone(), f64::from(u8::from(*a))))
        }),
    );
    gauge(
        e,
        &SLO_BURN_RATE,
        with_report().flat_map(|(_, r)| r.windows.iter().map(|(l, _, burn)| (l.clone(), *burn))),
    );
    gauge(
        e,
        &SLO_BUDGET_REMAINING,
        with_report().map(|(s, r)| (s.labels.clone(), r.budget_remaining)),
    );
    counter(
        e,
        &SLO_EVENTS,
        slos.iter().flat_map(|s| {
            let (good, bad) = s.events();
            // "bad" < "good" in byte order.
            [(s.bad_labels.clone(), bad), (s.good_labels.clone(), good)]
        }),
    );
    gauge(
        e,
        &SLO_OBJECTIVE,
        slos.iter().map(|s| (s.labels.clone(), s.objective())),
    );
    gauge(
        e,
        &SLO_SLI,
        with_report().flat_map(|(_, r)| r.windows.iter().map(|(l, sli, _)| (l.clone(), *sli))),
    );
    gauge(
        e,
        &SLO_TIME_TO_EXHAUSTION,
        with_report().filter_map(|(s, r)| Some((s.labels.clone(), r.time_to_exhaustion?))),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_sorted_in_both_namings_and_unique() {
        for naming in [
            |f: &Family| f.name.to_string(),
            |f: &Family| f.sample_name(),
        ] {
            let names: Vec<String> = FAMILIES.iter().map(naming).collect();
            let mut sorted = names.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(names, sorted);
        }
    }

    #[test]
    fn family_names_follow_prometheus_conventions() {
        for f in FAMILIES {
            assert!(
                f.name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{}",
                f.name
            );
            assert!(!f.name.ends_with("_total"), "{}", f.name);
            if let Some(unit) = f.unit {
                assert!(f.name.ends_with(&format!("_{unit}")), "{}", f.name);
            }
            if f.kind == Kind::Histogram {
                assert_eq!(f.unit, Some("seconds"), "{}", f.name);
            }
        }
    }
}
