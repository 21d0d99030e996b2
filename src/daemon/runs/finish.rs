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
    if let Some(d) = &detail {
        keep_detail(shared, record.id, d);
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

/// A run on every shard's one verdict, saved under the collecting shard's own share (whose
/// row it replaces), with that share's detail (kept in memory when the share ended) showing the
/// verdict's result.
pub(crate) fn save_verdict(shared: &Arc<Shared>, record: &RunEntry) {
    let detail = shared.details.lock().ok().and_then(|kept| {
        kept.iter()
            .find(|(id, _)| *id == record.id)
            .and_then(|(_, d)| serde_json::from_str::<RunDetail>(d).ok())
    });
    let detail = detail.map(|mut d| {
        d.result = record.result.clone();
        d.reason = record.reason.clone();
        d
    });
    save(shared, record, detail.as_ref());
}

/// A share's row: its figures are part of a run judged once, by the shard that collects it
/// (`share_of`), so the share is not judged against the whole run's thresholds. How it ended
/// stays when something stopped it (aborted, the guard, an error); otherwise it is a `share`.
pub(crate) fn as_share(record: &mut RunEntry) {
    if !matches!(record.result.as_str(), "passed" | "failed" | "inconclusive") {
        return;
    }
    let link = record.share_of.clone().unwrap_or_default();
    record.result = "share".into();
    record.reason = Some(format!(
        "shard {}'s share of run {}: the whole run's verdict is shard {}'s",
        link["shard"],
        link["run"].as_str().unwrap_or(""),
        link["collector"]
    ));
    record.thresholds.clear();
}

/// `sloburn_threshold_passed` of each of the run's thresholds.
pub(crate) fn set_threshold_gauges(shared: &Shared, profile: &str, report: &RunReport) {
    for (spec, r) in &report.thresholds {
        shared.metrics.set_threshold(
            profile,
            &spec.threshold.metric,
            &spec.threshold.source,
            r.passed,
        );
    }
}

/// A run's detail in memory (the newest [`DETAILS_IN_MEMORY`]): for the API while the store
/// cannot take it, and for the collecting shard's own share until its verdict saves it.
fn keep_detail(shared: &Shared, id: u64, detail: &str) {
    if let Ok(mut kept) = shared.details.lock() {
        kept.retain(|(i, _)| *i != id);
        kept.push_back((id, Arc::from(detail)));
        while kept.len() > DETAILS_IN_MEMORY {
            kept.pop_front();
        }
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
    // A share is no run of its own: the shard that collects it counts the run, once, and
    // saves its verdict (with this share's detail) under this id.
    let collects = record
        .share_of
        .as_ref()
        .map(|s| s["collector"].as_u64() == Some(u64::from(shared.shard.index())));
    match collects {
        None => shared.metrics.run_finished(profile, &record.result),
        Some(_) => shared.metrics.share_finished(profile),
    }
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
    if collects == Some(true) {
        if let Some(d) = detail.as_ref().and_then(|d| serde_json::to_string(d).ok()) {
            keep_detail(shared, id, &d);
        }
    } else {
        save(shared, &record, detail.as_ref());
    }
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
