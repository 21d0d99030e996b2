//! Every metric family name sloburn exposes, once: the registry's family table
//! (`metrics::families`) and everything else that writes a name (the generated rules, the
//! remote-write and OTLP pushers) read them from here, so a rename is one edit. A counter has
//! its family name (OpenMetrics: without `_total`) and its samples' name (`…_TOTAL`), both
//! from one literal.

/// Whether `name` is a valid, non-reserved Prometheus label name. Config validation rejects
/// SLO labels failing this; rule generation sanitizes them as a last resort.
pub fn label_name_is_valid(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("__")
}

/// A counter's family name and its samples' name, `_total` appended to the one literal.
macro_rules! counter {
    ($family:ident, $samples:ident, $name:literal) => {
        pub const $family: &str = $name;
        pub const $samples: &str = concat!($name, "_total");
    };
}

counter!(PROCESS_CPU, PROCESS_CPU_TOTAL, "process_cpu_seconds");
pub const PROCESS_MAX_FDS: &str = "process_max_fds";
pub const PROCESS_OPEN_FDS: &str = "process_open_fds";
pub const PROCESS_RESIDENT: &str = "process_resident_memory_bytes";
pub const PROCESS_START: &str = "process_start_time_seconds";
pub const PROCESS_VIRTUAL: &str = "process_virtual_memory_bytes";
counter!(
    ADMIN_AUTH_FAILURES,
    ADMIN_AUTH_FAILURES_TOTAL,
    "sloburn_admin_auth_failures"
);
pub const BUILD_INFO: &str = "sloburn_build_info";
counter!(CHECKS, CHECKS_TOTAL, "sloburn_checks");
pub const RELOAD_SUCCESS_TIME: &str = "sloburn_config_last_reload_success_timestamp_seconds";
pub const RELOAD_SUCCESSFUL: &str = "sloburn_config_last_reload_successful";
counter!(RELOADS, RELOADS_TOTAL, "sloburn_config_reloads");
counter!(
    DATA_RECEIVED,
    DATA_RECEIVED_TOTAL,
    "sloburn_data_received_bytes"
);
counter!(DATA_SENT, DATA_SENT_TOTAL, "sloburn_data_sent_bytes");
counter!(
    DROPPED_ITERATIONS,
    DROPPED_ITERATIONS_TOTAL,
    "sloburn_dropped_iterations"
);
counter!(
    GENERATOR_OVERLOADED,
    GENERATOR_OVERLOADED_TOTAL,
    "sloburn_generator_overloaded_iterations"
);
counter!(
    GENERATOR_AFFECTED,
    GENERATOR_AFFECTED_TOTAL,
    "sloburn_generator_affected_requests"
);
counter!(
    GENERATOR_THROTTLED,
    GENERATOR_THROTTLED_TOTAL,
    "sloburn_generator_throttled_seconds"
);
counter!(
    SATURATED_ITERATIONS,
    SATURATED_ITERATIONS_TOTAL,
    "sloburn_saturated_iterations"
);
pub const HTTP_REQ_DURATION: &str = "sloburn_http_req_duration_seconds";
pub const HTTP_REQ_CORRECTED_DURATION: &str = "sloburn_http_req_corrected_duration_seconds";
pub const HTTP_REQ_PHASE: &str = "sloburn_http_req_phase_seconds";
counter!(HTTP_REQS, HTTP_REQS_TOTAL, "sloburn_http_reqs");
pub const ITERATION_DURATION: &str = "sloburn_iteration_duration_seconds";
pub const ITERATION_LATENESS: &str = "sloburn_iteration_lateness_seconds";
counter!(ITERATIONS, ITERATIONS_TOTAL, "sloburn_iterations");
counter!(
    JOURNEY_ITERATIONS,
    JOURNEY_ITERATIONS_TOTAL,
    "sloburn_journey_iterations"
);
counter!(
    JOURNEY_STEP_FAILURES,
    JOURNEY_STEP_FAILURES_TOTAL,
    "sloburn_journey_step_failures"
);
pub const LAST_RUN_TIME: &str = "sloburn_last_run_timestamp_seconds";
counter!(LOCAL_ERRORS, LOCAL_ERRORS_TOTAL, "sloburn_local_errors");
pub const NEXT_RUN_TIME: &str = "sloburn_next_run_timestamp_seconds";
pub const RUN_ACTIVE: &str = "sloburn_run_active";
counter!(RUNS, RUNS_TOTAL, "sloburn_runs");
pub const RUNTIME_TASKS: &str = "sloburn_runtime_alive_tasks";
pub const SLO_ALERT_ACTIVE: &str = "sloburn_slo_alert_active";
pub const SLO_BURN_RATE: &str = "sloburn_slo_burn_rate";
pub const SLO_BUDGET_REMAINING: &str = "sloburn_slo_error_budget_remaining_ratio";
counter!(SLO_EVENTS, SLO_EVENTS_TOTAL, "sloburn_slo_events");
counter!(SLO_EXCUSED, SLO_EXCUSED_TOTAL, "sloburn_slo_excused_events");
pub const SLO_MAINTENANCE: &str = "sloburn_slo_maintenance";
pub const SLO_OBJECTIVE: &str = "sloburn_slo_objective_ratio";
pub const SLO_RESTORE_GAPS: &str = "sloburn_slo_restore_gap_seconds";
pub const SLO_RESTORE_STATE: &str = "sloburn_slo_restore_state";
pub const SLO_RESTORED: &str = "sloburn_slo_restored_seconds";
pub const SLO_SLI: &str = "sloburn_slo_sli_ratio";
pub const SLO_TIME_TO_EXHAUSTION: &str = "sloburn_slo_time_to_exhaustion_seconds";
counter!(STORE_FLUSHES, STORE_FLUSHES_TOTAL, "sloburn_store_flushes");
pub const STORE_HEALTHY: &str = "sloburn_store_healthy";
counter!(
    TELEMETRY_SPANS_DROPPED,
    TELEMETRY_SPANS_DROPPED_TOTAL,
    "sloburn_telemetry_spans_dropped"
);
pub const TARGET_INFO: &str = "sloburn_target_info";
pub const THRESHOLD_PASSED: &str = "sloburn_threshold_passed";
pub const CAPACITY_RATE: &str = "sloburn_capacity_rate";
pub const VUS: &str = "sloburn_vus";
pub const VUS_MAX: &str = "sloburn_vus_max";

// Pushed only (`--out prometheus-rw`, `--out opentelemetry`): a run's failed requests, as k6's
// `http_req_failed`; the daemon's `/metrics` tells them by `status` and `error` instead.
counter!(
    HTTP_REQS_FAILED,
    HTTP_REQS_FAILED_TOTAL,
    "sloburn_http_reqs_failed"
);
