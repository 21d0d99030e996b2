//! Journeys in a run's summary, as k6 shows groups: a block per journey with its steps in the
//! text summary, and `::journey::step` groups in the summary-export's `root_group`.

use super::checks::{by_name, check_json, k6_id};
use super::{WIDTH, fmt_rate, row, trend_line};
use crate::load::event::StepFailure;
use crate::load::record::RunRecord;
use serde_json::{Map, Value, json};
use std::fmt::Write as _;

/// Per journey and step, as k6 shows groups: iterations by result, then each step's requests,
/// failures and latency.
pub(super) fn text(out: &mut String, s: &RunRecord) {
    for journey in &s.journeys {
        let [ok, failed, dropped] = journey.results;
        let _ = writeln!(out, "\n  █ JOURNEY {}\n", journey.name);
        row(
            out,
            4,
            "iterations",
            WIDTH,
            &format!("{ok} ok, {failed} failed_step, {dropped} dropped"),
        );
        row(
            out,
            4,
            "iteration_duration",
            WIDTH,
            &trend_line(&journey.duration),
        );
        let steps = s
            .steps
            .iter()
            .filter(|st| st.journey.as_deref() == Some(journey.name.as_str()));
        for st in steps {
            let failures: Vec<String> = StepFailure::ALL
                .iter()
                .zip(st.failures)
                .filter(|(_, n)| *n > 0)
                .map(|(f, n)| format!("{n} {}", f.as_str()))
                .collect();
            let failed = if failures.is_empty() {
                String::new()
            } else {
                format!(", failed: {}", failures.join(", "))
            };
            let _ = writeln!(out, "\n    ↳ {}", st.name);
            row(
                out,
                6,
                "http_reqs",
                WIDTH - 2,
                &format!(
                    "{} ({} failed){failed}",
                    st.requests,
                    fmt_rate(st.failed, st.requests)
                ),
            );
            row(
                out,
                6,
                "http_req_duration",
                WIDTH - 2,
                &trend_line(&st.duration),
            );
            for (name, p, f) in &by_name(&st.checks) {
                let mark = if *f == 0 { '✓' } else { '✗' };
                let _ = writeln!(out, "      {mark} {name}: {p} passed, {f} failed");
            }
        }
    }
}

/// The summary-export's groups: one per journey (`::journey`), one per step inside it
/// (`::journey::step`), each step with its checks.
pub(super) fn json(s: &RunRecord) -> Map<String, Value> {
    let mut groups = Map::new();
    for journey in &s.journeys {
        let jpath = format!("::{}", journey.name);
        let mut steps = Map::new();
        for st in s
            .steps
            .iter()
            .filter(|st| st.journey.as_deref() == Some(journey.name.as_str()))
        {
            let spath = format!("{jpath}::{}", st.name);
            let checks: Map<String, Value> = by_name(&st.checks)
                .iter()
                .map(|(name, p, f)| {
                    (
                        name.clone(),
                        check_json(&format!("{spath}::{name}"), name, *p, *f),
                    )
                })
                .collect();
            steps.insert(
                st.name.clone(),
                json!({ "name": st.name, "path": spath, "id": k6_id(&spath), "groups": {}, "checks": checks }),
            );
        }
        groups.insert(
            journey.name.clone(),
            json!({ "name": journey.name, "path": jpath, "id": k6_id(&jpath), "groups": steps, "checks": {} }),
        );
    }
    groups
}
