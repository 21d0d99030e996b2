//! The one table of metric families: every name sloburn exposes, with its type, unit and help.
//! [`FAMILIES`] is the exposition order (sorted by name in both namings, so golden tests can
//! compare whole lines); the encoder walks it and nothing else decides which families exist.

use super::text::{Family, Kind};
use crate::names;

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
    names::PROCESS_CPU,
    Kind::Counter,
    SECONDS,
    "Total user and system CPU time spent in seconds.",
);
pub const PROCESS_MAX_FDS: Family = family(
    names::PROCESS_MAX_FDS,
    Kind::Gauge,
    None,
    "Maximum number of open file descriptors.",
);
pub const PROCESS_OPEN_FDS: Family = family(
    names::PROCESS_OPEN_FDS,
    Kind::Gauge,
    None,
    "Number of open file descriptors.",
);
pub const PROCESS_RESIDENT: Family = family(
    names::PROCESS_RESIDENT,
    Kind::Gauge,
    BYTES,
    "Resident memory size in bytes.",
);
pub const PROCESS_START: Family = family(
    names::PROCESS_START,
    Kind::Gauge,
    SECONDS,
    "Start time of the process since unix epoch in seconds.",
);
pub const PROCESS_VIRTUAL: Family = family(
    names::PROCESS_VIRTUAL,
    Kind::Gauge,
    BYTES,
    "Virtual memory size in bytes.",
);
pub const ADMIN_AUTH_FAILURES: Family = family(
    names::ADMIN_AUTH_FAILURES,
    Kind::Counter,
    None,
    "Admin and protected requests refused for their bearer token, by reason (wrong or \
     missing); requests answered 429 while wrong tokens are limited are not checked.",
);
pub const BUILD_INFO: Family = family(
    names::BUILD_INFO,
    Kind::Gauge,
    None,
    "Always 1; the version label names the running sloburn build.",
);
pub const CHECKS: Family = family(
    names::CHECKS,
    Kind::Counter,
    None,
    "Check results per request, by check name and result (pass or fail).",
);
pub const RELOAD_SUCCESS_TIME: Family = family(
    names::RELOAD_SUCCESS_TIME,
    Kind::Gauge,
    SECONDS,
    "Unix time of the last successful configuration load.",
);
pub const RELOAD_SUCCESSFUL: Family = family(
    names::RELOAD_SUCCESSFUL,
    Kind::Gauge,
    None,
    "Whether the last configuration load succeeded (1) or failed (0).",
);
pub const RELOADS: Family = family(
    names::RELOADS,
    Kind::Counter,
    None,
    "Configuration loads by result (success or failure).",
);
pub const DATA_RECEIVED: Family = family(
    names::DATA_RECEIVED,
    Kind::Counter,
    BYTES,
    "Bytes received from the target, headers and body.",
);
pub const DATA_SENT: Family = family(
    names::DATA_SENT,
    Kind::Counter,
    BYTES,
    "Bytes sent to the target, headers and body.",
);
pub const DROPPED_ITERATIONS: Family = family(
    names::DROPPED_ITERATIONS,
    Kind::Counter,
    None,
    "Arrival-rate iterations not started: every VU was waiting on the target (saturated), \
     sloburn fell behind its schedule, a new connection was over the connect budget, or the \
     daemon's in-flight cap was full.",
);
pub const GENERATOR_OVERLOADED: Family = family(
    names::GENERATOR_OVERLOADED,
    Kind::Counter,
    None,
    "Arrival-rate iterations dropped because of sloburn itself (later than max_lateness, over \
     the connect budget while behind, or the in-flight cap full); also in \
     sloburn_dropped_iterations_total, never SLO events.",
);
pub const GENERATOR_AFFECTED: Family = family(
    names::GENERATOR_AFFECTED,
    Kind::Counter,
    None,
    "Answered requests whose latency a starvation of sloburn itself explains, by cause \
     (cgroup_throttled, run_queue, timer_lateness): in every count, their latency in no \
     threshold's verdict and no latency SLO's bad events.",
);
pub const GENERATOR_THROTTLED: Family = family(
    names::GENERATOR_THROTTLED,
    Kind::Counter,
    SECONDS,
    "Time sloburn's cgroup was throttled by its CPU quota while runs were in progress, as the \
     kernel counts it (cpu.stat; cgroup v1 sums it over CPUs, as cAdvisor's \
     container_cpu_cfs_throttled_seconds_total does); 0 where no cgroup counters can be read \
     (the daemon's log says so at start).",
);
pub const SATURATED_ITERATIONS: Family = family(
    names::SATURATED_ITERATIONS,
    Kind::Counter,
    None,
    "Arrival-rate iterations dropped because every VU was waiting on the target: the target's \
     failure, a bad event for each SLO watching the run; also in \
     sloburn_dropped_iterations_total.",
);
pub const HTTP_REQ_DURATION: Family = family(
    names::HTTP_REQ_DURATION,
    Kind::Histogram,
    SECONDS,
    "Request duration as k6 defines it (sending + waiting + receiving) of requests that got a \
     status.",
);
pub const HTTP_REQ_CORRECTED_DURATION: Family = family(
    names::HTTP_REQ_CORRECTED_DURATION,
    Kind::Histogram,
    SECONDS,
    "The latency a user saw, of requests that got a status: every phase, the wait for a \
     connection (DNS, connect, TLS) included, never sloburn's own lateness.",
);
pub const HTTP_REQ_PHASE: Family = family(
    names::HTTP_REQ_PHASE,
    Kind::Histogram,
    SECONDS,
    "Time per request phase (k6 names, dns split out of blocked) of requests that got a status.",
);
pub const HTTP_REQS: Family = family(
    names::HTTP_REQS,
    Kind::Counter,
    None,
    "Requests by status (0 = no response) and error class (none = no transport error).",
);
pub const ITERATION_DURATION: Family = family(
    names::ITERATION_DURATION,
    Kind::Histogram,
    SECONDS,
    "Journey iterations from their first request to their end, think times included.",
);
pub const ITERATION_LATENESS: Family = family(
    names::ITERATION_LATENESS,
    Kind::Histogram,
    SECONDS,
    "How late iterations started against their intended time (0 for closed-model executors).",
);
pub const ITERATIONS: Family = family(
    names::ITERATIONS,
    Kind::Counter,
    None,
    "Completed iterations (one request each, or one walk through a journey).",
);
pub const JOURNEY_ITERATIONS: Family = family(
    names::JOURNEY_ITERATIONS,
    Kind::Counter,
    None,
    "Journey iterations by result: ok (every step passed), failed_step, dropped (never started).",
);
pub const JOURNEY_STEP_FAILURES: Family = family(
    names::JOURNEY_STEP_FAILURES,
    Kind::Counter,
    None,
    "Failed journey steps by reason: check, capture (a value not found) or request (no good response).",
);
pub const LAST_RUN_TIME: Family = family(
    names::LAST_RUN_TIME,
    Kind::Gauge,
    SECONDS,
    "Unix time the last run of a profile finished, by result.",
);
pub const LOCAL_ERRORS: Family = family(
    names::LOCAL_ERRORS,
    Kind::Counter,
    None,
    "Requests that failed because of sloburn itself (out of file descriptors or local ports, or \
     a request its template could not build), by class; also counted in \
     sloburn_http_reqs_total, never as SLO events.",
);
pub const NEXT_RUN_TIME: Family = family(
    names::NEXT_RUN_TIME,
    Kind::Gauge,
    SECONDS,
    "Unix time of the next scheduled run of a profile.",
);
pub const RUN_ACTIVE: Family = family(
    names::RUN_ACTIVE,
    Kind::Gauge,
    None,
    "Whether a run of the profile is in progress (1) or not (0).",
);
pub const RUNS: Family = family(
    names::RUNS,
    Kind::Counter,
    None,
    "Finished runs by result (passed, failed, aborted, aborted_by_guard, error, skipped).",
);
pub const RUNTIME_TASKS: Family = family(
    names::RUNTIME_TASKS,
    Kind::Gauge,
    None,
    "Tasks alive in the daemon's tokio runtime (run VUs, connection drivers, server \
     connections, schedules); flat between runs when nothing leaks.",
);
pub const SLO_ALERT_ACTIVE: Family = family(
    names::SLO_ALERT_ACTIVE,
    Kind::Gauge,
    None,
    "Whether the daemon's own evaluation of an alert tier is firing (1) or not (0).",
);
pub const SLO_BURN_RATE: Family = family(
    names::SLO_BURN_RATE,
    Kind::Gauge,
    None,
    "Error ratio over the window divided by the error budget (0 without events).",
);
pub const SLO_BUDGET_REMAINING: Family = family(
    names::SLO_BUDGET_REMAINING,
    Kind::Gauge,
    RATIO,
    "Fraction of the period's error budget left (may be negative).",
);
pub const SLO_EVENTS: Family = family(
    names::SLO_EVENTS,
    Kind::Counter,
    None,
    "SLO events by result (good or bad); the generated rules compute from this.",
);
pub const SLO_EXCUSED: Family = family(
    names::SLO_EXCUSED,
    Kind::Counter,
    None,
    "Requests a latency SLO counted as no event: answered past the objective, but their \
     latency is sloburn's own CPU starvation (generator-affected; one that met the objective \
     is good). Never in sloburn_slo_events_total.",
);
pub const SLO_MAINTENANCE: Family = family(
    names::SLO_MAINTENANCE,
    Kind::Gauge,
    None,
    "1 while a maintenance window covers the SLO: its events are not counted and the \
     generated burn alerts are silent.",
);
pub const SLO_OBJECTIVE: Family = family(
    names::SLO_OBJECTIVE,
    Kind::Gauge,
    RATIO,
    "The SLO objective as a ratio (0.999 for 99.9 %).",
);
pub const SLO_RESTORE_GAPS: Family = family(
    names::SLO_RESTORE_GAPS,
    Kind::Gauge,
    SECONDS,
    "Time of the start-up restore's range (whole minutes) that Prometheus had no sample for.",
);
pub const SLO_RESTORE_STATE: Family = family(
    names::SLO_RESTORE_STATE,
    Kind::Gauge,
    None,
    "The start-up restore from Prometheus: 1 for its state (restoring, done or incomplete), \
     0 for the others; absent without storage.restore.",
);
pub const SLO_RESTORED: Family = family(
    names::SLO_RESTORED,
    Kind::Gauge,
    SECONDS,
    "Time of the SLO's windows (whole minutes) rebuilt from Prometheus at start-up, the store \
     having none.",
);
pub const SLO_SLI: Family = family(
    names::SLO_SLI,
    Kind::Gauge,
    RATIO,
    "Good events over all events in the window (NaN without events).",
);
pub const SLO_TIME_TO_EXHAUSTION: Family = family(
    names::SLO_TIME_TO_EXHAUSTION,
    Kind::Gauge,
    SECONDS,
    "Time until the error budget is spent at the 1h burn rate (absent when it never is).",
);
pub const STORE_FLUSHES: Family = family(
    names::STORE_FLUSHES,
    Kind::Counter,
    None,
    "Flushes of SLO windows to the embedded store, by result (success or failure).",
);
pub const STORE_HEALTHY: Family = family(
    names::STORE_HEALTHY,
    Kind::Gauge,
    None,
    "Whether the embedded store is writable (1) or not (0).",
);
pub const TELEMETRY_SPANS_DROPPED: Family = family(
    names::TELEMETRY_SPANS_DROPPED,
    Kind::Counter,
    None,
    "Trace spans that never reached the OTLP collector, by reason (queue_full or export_failed).",
);
pub const TARGET_INFO: Family = family(
    names::TARGET_INFO,
    Kind::Gauge,
    None,
    "Always 1 per configured target; `protocol` says what it speaks (http, websocket, or a \
     tcp, tls or dns probe). Join on `target` to split any family by protocol.",
);
pub const CAPACITY_RATE: Family = family(
    names::CAPACITY_RATE,
    Kind::Gauge,
    None,
    "The capacity at the SLO that a profile's last decided search found, in arrivals a second: \
     bound=\"low\" the highest rate that passed twice (0 when even the lowest step failed), \
     bound=\"high\" the lowest that failed (absent when every step up to max_rate passed).",
);
pub const THRESHOLD_PASSED: Family = family(
    names::THRESHOLD_PASSED,
    Kind::Gauge,
    None,
    "Whether a threshold of the profile's last run passed (1) or failed (0).",
);
pub const VUS: Family = family(
    names::VUS,
    Kind::Gauge,
    None,
    "Virtual users currently active.",
);
pub const VUS_MAX: Family = family(
    names::VUS_MAX,
    Kind::Gauge,
    None,
    "Virtual users allocated (the run's maximum).",
);

/// Every family, in exposition order (sorted by name).
pub const FAMILIES: [Family; 54] = [
    PROCESS_CPU,
    PROCESS_MAX_FDS,
    PROCESS_OPEN_FDS,
    PROCESS_RESIDENT,
    PROCESS_START,
    PROCESS_VIRTUAL,
    ADMIN_AUTH_FAILURES,
    BUILD_INFO,
    CAPACITY_RATE,
    CHECKS,
    RELOAD_SUCCESS_TIME,
    RELOAD_SUCCESSFUL,
    RELOADS,
    DATA_RECEIVED,
    DATA_SENT,
    DROPPED_ITERATIONS,
    GENERATOR_AFFECTED,
    GENERATOR_OVERLOADED,
    GENERATOR_THROTTLED,
    HTTP_REQ_CORRECTED_DURATION,
    HTTP_REQ_DURATION,
    HTTP_REQ_PHASE,
    HTTP_REQS,
    ITERATION_DURATION,
    ITERATION_LATENESS,
    ITERATIONS,
    JOURNEY_ITERATIONS,
    JOURNEY_STEP_FAILURES,
    LAST_RUN_TIME,
    LOCAL_ERRORS,
    NEXT_RUN_TIME,
    RUN_ACTIVE,
    RUNS,
    RUNTIME_TASKS,
    SATURATED_ITERATIONS,
    SLO_ALERT_ACTIVE,
    SLO_BURN_RATE,
    SLO_BUDGET_REMAINING,
    SLO_EVENTS,
    SLO_EXCUSED,
    SLO_MAINTENANCE,
    SLO_OBJECTIVE,
    SLO_RESTORE_GAPS,
    SLO_RESTORE_STATE,
    SLO_RESTORED,
    SLO_SLI,
    SLO_TIME_TO_EXHAUSTION,
    STORE_FLUSHES,
    STORE_HEALTHY,
    TARGET_INFO,
    TELEMETRY_SPANS_DROPPED,
    THRESHOLD_PASSED,
    VUS,
    VUS_MAX,
];

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
