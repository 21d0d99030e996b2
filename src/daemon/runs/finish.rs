//! A run's end: its record filled from the report and saved to the store, the threshold
//! gauges, the idle heap release.

use crate::daemon::state::{
    DETAILS_IN_MEMORY, RUNS_PER_PROFILE, RunEntry, Shared, ThresholdRecord,
};
use crate::load::runner::{Abort, RunReport};
use crate::store::StoredRun;
use crate::web::RunDetail;
use std::sync::Arc;
use std::time::Duration;

use super::*;

/// Writes a run (and its detail) to the store on a blocking thread, or queues it until the
/// store can take it; keeps the newest details in memory too, for the API meanwhile.
pub(super) fn save(shared: &Arc<Shared>, record: &RunEntry, detail: Option<&RunDetail>) {
    let detail = detail.and_then(|d| serde_json::to_string(d).ok());
    if let Some(d) = &detail
        && let Ok(mut kept) = shared.details.lock()
    {
        kept.push_back((record.id, Arc::from(d.as_str())));
        while kept.len() > DETAILS_IN_MEMORY {
            kept.pop_front();
        }
    }
    let Ok(json) = serde_json::to_string(record) else {
        return;
    };
    let stored = StoredRun {
        id: record.id,
        profile: record.profile.clone(),
        started_at: record.started_at,
        record: json,
    };
    let s = shared.clone();
    // A store that is not open (or fails this write) keeps the run in memory until it can.
    shared
        .tracker
        .spawn_blocking(move || s.budget.save_run(stored, detail, RUNS_PER_PROFILE));
}

/// `sloburn_threshold_passed` of each of the run's thresholds.
pub(super) fn set_threshold_gauges(shared: &Shared, profile: &str, report: &RunReport) {
    for (spec, r) in &report.thresholds {
        shared.metrics.set_threshold(
            profile,
            &spec.threshold.metric,
            &spec.threshold.source,
            r.passed,
        );
    }
}

/// A finished run's figures, thresholds and result in its record.
pub(crate) fn fill(record: &mut RunEntry, report: &RunReport) {
    let s = &report.stats;
    record.requests = s.requests;
    record.rate = s.per_second(s.requests);
    record.failed_ratio = if s.requests > 0 {
        s.failed as f64 / s.requests as f64
    } else {
        0.0
    };
    record.dropped = s.dropped;
    record.p95_ms = s.duration.quantile(0.95).as_secs_f64() * 1000.0;
    record.p99_ms = s.duration.quantile(0.99).as_secs_f64() * 1000.0;
    record.thresholds = report
        .thresholds
        .iter()
        .map(|(spec, r)| ThresholdRecord {
            metric: spec.threshold.metric.clone(),
            threshold: spec.threshold.source.clone(),
            passed: r.passed,
            observed: r.observed,
        })
        .collect();
    let inconclusive = report.inconclusive();
    let (result, reason) = match &report.aborted {
        Some(Abort::Guard(why)) => ("aborted_by_guard", Some(why.clone())),
        Some(Abort::Stopped(why)) => ("aborted", Some(why.clone())),
        _ if inconclusive.is_some() => ("inconclusive", inconclusive),
        Some(Abort::Threshold(t)) => ("aborted", Some(format!("threshold `{t}` failed"))),
        None | Some(Abort::DataUsedUp(_)) if report.thresholds_passed() => ("passed", None),
        None | Some(Abort::DataUsedUp(_)) => ("failed", Some(failed_thresholds(report))),
    };
    record.result = result.into();
    record.reason = reason;
}

/// Names every failed threshold with what was observed, for the run record and its log line.
pub(super) fn failed_thresholds(report: &RunReport) -> String {
    let failed: Vec<String> = report
        .thresholds
        .iter()
        .filter(|(_, r)| !r.passed)
        .map(|(spec, r)| {
            let observed = if r.no_data {
                "no data".to_string()
            } else {
                format!(
                    "observed {}",
                    crate::load::summary::observed(&spec.threshold.metric, r.observed)
                )
            };
            format!(
                "{} `{}` failed ({observed})",
                spec.threshold.metric, spec.threshold.source
            )
        })
        .collect();
    failed.join("; ")
}

/// How long after the last run ends the daemon gives memory back: past the run's own
/// aftermath (its record saved, two SLO store flushes at the default 5 s), which would map the
/// code again.
pub(super) const IDLE_RELEASE_AFTER: Duration = Duration::from_secs(12);

/// The last active run ended: unless another starts within [`IDLE_RELEASE_AFTER`], what the
/// runs freed goes back to the kernel (or an idle daemon keeps the peak of its busiest
/// minute), and so do the code pages they mapped.
pub(super) fn release_when_idle(shared: &Arc<Shared>) {
    let shared = shared.clone();
    let tracker = shared.tracker.clone();
    tracker.spawn(async move {
        tokio::select! {
            _ = tokio::time::sleep(IDLE_RELEASE_AFTER) => {}
            _ = shared.shutdown.cancelled() => return,
        }
        let idle = shared
            .profiles
            .lock()
            .map(|states| states.values().all(|st| st.active.is_none()))
            .unwrap_or(false);
        if idle {
            let _ = tokio::task::spawn_blocking(|| {
                crate::memory::release_free_heap();
                crate::memory::release_idle_code();
            })
            .await;
        }
    });
}

/// Records how the run ended; starts the next one when the overlap policy queued it.
pub(super) fn finish(
    shared: &Arc<Shared>,
    profile: &str,
    id: u64,
    record: RunEntry,
    detail: Option<RunDetail>,
    ended: &tokio::sync::watch::Sender<Option<RunEntry>>,
) {
    shared.metrics.run_finished(profile, &record.result);
    tracing::info!(
        profile = %profile,
        run = id,
        result = %record.result,
        reason = record.reason.as_deref().unwrap_or(""),
        requests = record.requests,
        rate = format!("{:.1}", record.rate),
        failed_ratio = format!("{:.4}", record.failed_ratio),
        p95_ms = format!("{:.2}", record.p95_ms),
        p99_ms = format!("{:.2}", record.p99_ms),
        dropped = record.dropped,
        "run finished"
    );
    shared.remember(&record);
    save(shared, &record, detail.as_ref());
    let (again, idle) = match shared.profiles.lock() {
        Ok(mut states) => {
            let again = match states.get_mut(profile) {
                Some(st) => {
                    st.active = None;
                    st.slot.on_finished() && !st.paused
                }
                None => false,
            };
            (again, states.values().all(|st| st.active.is_none()))
        }
        Err(_) => (false, false),
    };
    if idle && !again {
        release_when_idle(shared);
    }
    // Told after the profile is free again, so a waiter may start the next run at once.
    ended.send_replace(Some(record));
    if again && !shared.shutdown.is_cancelled() {
        let _ = start_run(shared, profile, "queued");
    }
}
