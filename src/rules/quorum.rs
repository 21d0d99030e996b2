//! A quorum SLO's error ratios (issue 49), from every location's events counter: per location,
//! whether its events over the last bucket breach the objective
//! (`slo:location_bad:bool`, one series per `location`, absent while it sent nothing); then
//! whether at least K locations were bad (`slo:quorum_bad:bool`: 1, or 0 when at least K
//! reported and fewer were bad, absent with fewer than K reporting); the SLI error ratio over a
//! window is that flag's average there, so a window counts the evaluations with a verdict, as
//! the daemon counts judged minutes. The bucket rolls with the evaluation instead of being cut
//! at fixed minutes: a bad stretch shorter than a bucket may span two.

use super::text::{num, promql_duration};
use super::yaml::Rule;
use super::{EVENTS_METRIC, RulesOptions};
use crate::config::quote;
use crate::slo::SloDef;
use std::collections::BTreeMap;
use std::time::Duration;

/// What `sloburn rules` needs of an SLO's `quorum`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuorumRule {
    pub k: u32,
    pub bucket: Duration,
}

/// The per-location and the quorum record names.
pub const LOCATION_BAD: &str = "slo:location_bad:bool";
pub const QUORUM_BAD: &str = "slo:quorum_bad:bool";

fn events(slo: &SloDef, opts: &RulesOptions, bad_only: bool) -> String {
    let mut m = Vec::new();
    if let Some(job) = &opts.job {
        m.push(format!("job={}", quote(job)));
    }
    m.push(format!("slo={}", quote(&slo.name)));
    if bad_only {
        m.push("result=\"bad\"".to_string());
    }
    format!("{EVENTS_METRIC}{{{}}}", m.join(","))
}

/// The records that stand for the SLI error ratios of a quorum SLO: the two flags, then
/// `slo:sli_error:ratio_rate<w>` for each of `windows` and the period (`period`).
pub(super) fn records(
    slo: &SloDef,
    opts: &RulesOptions,
    q: &QuorumRule,
    base: &BTreeMap<String, String>,
    sel: &str,
    windows: &[Duration],
) -> Vec<Rule> {
    let b = promql_duration(q.bucket);
    let (bad, all) = (events(slo, opts, true), events(slo, opts, false));
    let mut rules = vec![Rule::Comment(format!(
        "Quorum {k} of the locations (the `location` label): a location is bad when its\n\
         events over the last {b} breach the objective; the SLO's error ratio over a window\n\
         is the share of evaluations in it where at least {k} locations were bad.",
        k = q.k
    ))];
    rules.push(Rule::Record {
        record: LOCATION_BAD.to_string(),
        expr: format!(
            "(\n  (sum by (location) (increase({bad}[{b}])) or 0 * sum by (location) (increase({all}[{b}])))\n  / sum by (location) (increase({all}[{b}]))\n) > bool {budget}\nand on (location)\nsum by (location) (increase({all}[{b}])) > 0\n",
            budget = format_args!("(1 - {})", num(slo.objective)),
        ),
        labels: base.clone(),
    });
    rules.push(Rule::Record {
        record: QUORUM_BAD.to_string(),
        expr: format!(
            "(count({LOCATION_BAD}{sel} == 1) >= {k}) * 0 + 1\nor\n(count({LOCATION_BAD}{sel}) >= {k}) * 0\n",
            k = q.k
        ),
        labels: base.clone(),
    });
    let period = promql_duration(slo.period);
    let mut all_windows: Vec<String> = windows.iter().map(|w| promql_duration(*w)).collect();
    if slo.calendar.is_none() {
        all_windows.push(period);
    }
    for w in all_windows {
        let mut labels = base.clone();
        labels.insert("sloth_window".to_string(), w.clone());
        rules.push(Rule::Record {
            record: format!("slo:sli_error:ratio_rate{w}"),
            expr: format!("avg_over_time({QUORUM_BAD}{sel}[{w}])\n"),
            labels,
        });
    }
    rules
}
