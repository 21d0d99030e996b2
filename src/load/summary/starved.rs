//! The summary's account of sloburn's own CPU starvation (`load::affected`): how many requests
//! it affected (kept out of every figure shown), why, and what the watch could not see. Silent
//! for a run nothing affected.

use crate::load::affected::Starved;
use crate::load::runner::RunReport;
use serde_json::{Value, json};
use std::fmt::Write;

/// The text lines, after the drops and before the verdict.
pub(super) fn text(out: &mut String, report: &RunReport) {
    let Some(st) = report.starved.as_ref().filter(|s| s.affected > 0) else {
        return;
    };
    let _ = writeln!(
        out,
        "  generator-affected: {} of {} requests ({:.2}%, up to {} each) overlapped sloburn's \
         own CPU starvation ({}); they are in none of the figures below and never SLO events",
        st.affected,
        st.requests,
        st.share() * 100.0,
        super::fmt_duration(st.affected_max),
        st.why()
    );
    for spot in st.blind_spots() {
        let _ = writeln!(out, "  note: {spot}");
    }
}

/// `generator_affected` in `--summary-export`: the counts, the starved time per cause and the
/// thresholds only the affected requests fail (`null` without a watch).
pub(super) fn json(report: &RunReport) -> Value {
    let Some(st) = &report.starved else {
        return Value::Null;
    };
    json!({
        "requests": st.affected,
        "of": st.requests,
        "share": st.share(),
        "max_duration_ms": st.affected_max.as_secs_f64() * 1e3,
        "starved_seconds": causes(st, |st, i| st.during.starved[i].as_secs_f64().into()),
        "affected_by": causes(st, |st, i| st.during.affected[i].into()),
        "throttled_periods": st.during.throttled_periods,
        "throttled_seconds": st.during.throttled.as_secs_f64(),
        "quota_cpus": st.quota.map(|q| q.cpus()),
        "would_fail": st.would_fail,
        "not_watched": st.blind_spots(),
    })
}

fn causes(st: &Starved, f: impl Fn(&Starved, usize) -> Value) -> Value {
    crate::starve::Cause::ALL
        .iter()
        .map(|c| (c.as_str().to_string(), f(st, *c as usize)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}
