//! The summary's account of sloburn's own CPU starvation (`load::affected`, `load::verdict`):
//! how many answered requests it explains (in every figure shown, their latency out of the
//! verdicts), why, and what the watch could not see. Silent for a run nothing affected.

use crate::load::runner::RunReport;
use crate::load::verdict::Starved;
use serde_json::{Value, json};
use std::fmt::Write;

/// The text lines, after the drops and before the verdict.
pub(super) fn text(out: &mut String, report: &RunReport) {
    let s = &report.stats;
    let Some(a) = s.affected.as_deref().filter(|a| a.requests() > 0) else {
        unaffected(out, report);
        return;
    };
    let why = report
        .starved
        .as_ref()
        .map_or_else(|| "seen by a shard".into(), Starved::why);
    let _ = writeln!(
        out,
        "  generator-affected: {} of {} requests ({:.2}%, up to {} each) were answered but \
         their latency is sloburn's own CPU starvation ({why}); they are in every count shown, \
         their latency is in no threshold's verdict and no latency SLO's bad events",
        a.requests(),
        s.requests,
        a.requests() as f64 * 100.0 / s.requests.max(1) as f64,
        super::fmt_duration(a.duration.max()),
    );
    for spot in report.starved.iter().flat_map(Starved::blind_spots) {
        let _ = writeln!(out, "  note: {spot}");
    }
}

/// Starved, and no request's latency holds it: say so, and why (the kernel timed them).
fn unaffected(out: &mut String, report: &RunReport) {
    let Some(st) = &report.starved else {
        return;
    };
    if st.during.starved_most().is_zero() && st.during.throttled_periods == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "  generator starved: {}; no answered request's latency holds it (the kernel's stamps \
         timed {} of {} requests where it took and delivered their bytes)",
        st.why(),
        report.stats.kernel_tx,
        report.stats.requests,
    );
}

/// `generator_affected` in `--summary-export`: the counts, the starved time per cause and the
/// thresholds only the affected requests fail (`null` without a watch).
pub(super) fn json(report: &RunReport) -> Value {
    let Some(st) = &report.starved else {
        return Value::Null;
    };
    let s = &report.stats;
    let a = s.affected.as_deref().cloned().unwrap_or_default();
    let causes = |f: &dyn Fn(usize) -> Value| -> Value {
        crate::starve::Cause::ALL
            .iter()
            .map(|c| (c.as_str().to_string(), f(*c as usize)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    json!({
        "requests": a.requests(),
        "of": s.requests,
        "share": a.requests() as f64 / s.requests.max(1) as f64,
        "max_duration_ms": a.duration.max().as_secs_f64() * 1e3,
        "starved_seconds": causes(&|i| st.during.starved[i].as_secs_f64().into()),
        "affected_by": causes(&|i| a.by_cause[i].into()),
        "throttled_periods": st.during.throttled_periods,
        "throttled_seconds": st.during.throttled.as_secs_f64(),
        "quota_cpus": st.quota.map(|q| q.cpus()),
        "would_fail": report.would_fail,
        "not_watched": st.blind_spots(),
        "kernel_tx_stamped": s.kernel_tx,
    })
}
