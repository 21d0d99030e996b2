//! The k6 v1 text summary: scenario header, THRESHOLDS, TOTAL RESULTS with HTTP, EXECUTION
//! and NETWORK, journeys as groups, then vegeta's report.

use super::*;
use crate::config::spec::Executor;
use crate::hist::HistSnapshot;
use crate::http::Phase;
use crate::load::record::RunRecord;
use crate::load::runner::{Abort, RunReport};
use crate::thresholds::{MetricKind, ThresholdResult, ThresholdSpec};
use std::fmt::Write;
use std::time::Duration;

/// What the summary's header says about the run.
pub struct Header<'a> {
    pub profile: &'a str,
    /// The executor, for k6's `scenarios:` line; `None` leaves the line out.
    pub executor: Option<&'a Executor>,
    pub graceful_stop: Duration,
    /// The `--out` specs, for k6's `output:` line.
    pub outputs: &'a [String],
    /// Lines about how the run was set up (a capped default VU pool), printed as `note:`.
    pub notes: &'a [String],
}

/// k6's scenario line: `main: 10.00 iterations/s for 3s (maxVUs: 2-5, gracefulStop: 30s)`.
pub fn scenario_line(name: &str, e: &Executor, graceful_stop: Duration) -> (String, u32, Duration) {
    let gs = crate::units::format_duration(graceful_stop);
    let d = crate::units::format_duration;
    let total = crate::load::plan::planned_duration(e);
    let (text, max_vus) = match e {
        Executor::ConstantVus { vus, duration } => (
            format!(
                "{vus} looping VUs for {} (gracefulStop: {gs})",
                d(*duration)
            ),
            *vus,
        ),
        Executor::RampingVus {
            start_vus,
            stages,
            graceful_ramp_down,
        } => {
            let max = stages
                .iter()
                .map(|s| s.target.ceil() as u32)
                .fold(*start_vus, u32::max);
            (
                format!(
                    "Up to {max} looping VUs for {} over {} stages (gracefulRampDown: {}, \
                     gracefulStop: {gs})",
                    d(total),
                    stages.len(),
                    d(*graceful_ramp_down)
                ),
                max,
            )
        }
        Executor::ConstantArrivalRate {
            rate,
            duration,
            pre_allocated_vus,
            max_vus,
        } => (
            format!(
                "{rate:.2} iterations/s for {} (maxVUs: {pre_allocated_vus}-{max_vus}, \
                 gracefulStop: {gs})",
                d(*duration)
            ),
            *max_vus,
        ),
        Executor::RampingArrivalRate {
            start_rate,
            stages,
            pre_allocated_vus,
            max_vus,
        } => {
            let max = stages.iter().map(|s| s.target).fold(*start_rate, f64::max);
            (
                format!(
                    "Up to {max:.2} iterations/s for {} over {} stages (maxVUs: \
                     {pre_allocated_vus}-{max_vus}, gracefulStop: {gs})",
                    d(total),
                    stages.len()
                ),
                *max_vus,
            )
        }
        Executor::SharedIterations {
            vus,
            iterations,
            max_duration,
        } => (
            format!(
                "{iterations} iterations shared among {vus} VUs (maxDuration: {}, gracefulStop: \
                 {gs})",
                d(*max_duration)
            ),
            *vus,
        ),
        Executor::PerVuIterations {
            vus,
            iterations,
            max_duration,
        } => (
            format!(
                "{iterations} iterations for each of {vus} VUs (maxDuration: {}, gracefulStop: \
                 {gs})",
                d(*max_duration)
            ),
            *vus,
        ),
    };
    (format!("* {name}: {text}"), max_vus, total + graceful_stop)
}

/// The full text summary printed at the end of `sloburn run`, without the scenario header.
pub fn text(profile: &str, report: &RunReport) -> String {
    text_with(
        &Header {
            profile,
            executor: None,
            graceful_stop: Duration::ZERO,
            outputs: &[],
            notes: &[],
        },
        report,
    )
}

/// The full text summary: header, k6's groups, then vegeta's report.
pub fn text_with(h: &Header, report: &RunReport) -> String {
    let s = &report.stats;
    let mut out = String::new();
    header(&mut out, h);
    how_it_ended(&mut out, h, report);
    let _ = writeln!(out, "\n  █ TOTAL RESULTS \n");
    checks_block(&mut out, s);
    http_block(&mut out, s);
    execution_block(&mut out, s);
    network_block(&mut out, s);
    super::groups::text(&mut out, s);
    let _ = writeln!(out);
    super::vegeta::vegeta(&mut out, s);
    out
}

/// k6's header: execution, profile, outputs and (with an executor) the scenario line.
fn header(out: &mut String, h: &Header) {
    let _ = writeln!(out);
    let _ = writeln!(out, "     execution: local");
    let _ = writeln!(out, "       profile: {}", h.profile);
    let _ = writeln!(
        out,
        "        output: {}",
        if h.outputs.is_empty() {
            "-".to_string()
        } else {
            h.outputs.join(", ")
        }
    );
    if let Some(e) = h.executor {
        let (line, max_vus, max_duration) = scenario_line(h.profile, e, h.graceful_stop);
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "     scenarios: (100.00%) 1 scenario, {max_vus} max VUs, {} max duration (incl. \
             graceful stop):",
            crate::units::format_duration(max_duration)
        );
        let _ = writeln!(out, "              {line}");
    }
    let _ = writeln!(out);
}

/// Why the run ended early, what failed inside sloburn, drops, an inconclusive verdict, the
/// set-up notes, then the THRESHOLDS block.
fn how_it_ended(out: &mut String, h: &Header, report: &RunReport) {
    let s = &report.stats;
    match &report.aborted {
        Some(Abort::Threshold(t)) => {
            let _ = writeln!(out, "  aborted: threshold `{t}` failed (abort_on_fail)");
        }
        Some(Abort::Stopped(why)) => {
            let _ = writeln!(out, "  stopped: {why}");
        }
        Some(Abort::Guard(why)) => {
            let _ = writeln!(out, "  aborted by the budget guard: {why}");
        }
        Some(Abort::DataUsedUp(journey)) => {
            let _ = writeln!(
                out,
                "  ended: journey `{journey}` used every row of its `unique` data file"
            );
        }
        None => {}
    }
    if s.local_errors_dominate() {
        local_errors(out, s);
    }
    overload(out, s);
    timing(out, s);
    super::starved::text(out, report);
    if let Some(why) = report.inconclusive() {
        let _ = writeln!(out, "  {why}");
    }
    for note in h.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    if !report.thresholds.is_empty() {
        thresholds_block(out, report);
    }
}

/// How many requests the kernel's transmit stamps timed, and what the others were timed by.
fn timing(out: &mut String, s: &RunRecord) {
    if s.requests == 0 {
        return;
    }
    let _ = write!(
        out,
        "  timing: kernel TX stamps on {} of {} requests",
        s.kernel_tx, s.requests
    );
    if s.kernel_tx < s.requests {
        let _ = write!(
            out,
            "; the other {} timed from sloburn's own write (TLS, HTTP/2, gRPC, a probe, or no \
             stamp from the kernel), where a stall of sloburn before the kernel took the bytes \
             is in their sending",
            s.requests - s.kernel_tx
        );
    }
    out.push('\n');
}

/// Most requests failed inside sloburn, not at the target: why, and what to do.
fn local_errors(out: &mut String, s: &RunRecord) {
    let template: u64 = s
        .errors
        .iter()
        .filter(|(e, _)| *e == crate::http::ErrorClass::Template)
        .map(|(_, n)| n)
        .sum();
    let (why, fix) = if template * 2 > s.local_errors() {
        (
            "a step's request could not be built from its template",
            "a header value held CR/LF or a rendered URL did not parse: fix the data file, \
             the capture or the template",
        )
    } else {
        (
            "out of file descriptors or local ports",
            "raise `ulimit -n` or use fewer VUs",
        )
    };
    let _ = writeln!(
        out,
        "  failed: {} of {} requests failed inside sloburn ({why}), not at the target; {fix}",
        s.local_errors(),
        s.requests
    );
}

/// The checks' totals and one line per check, when the run made any.
fn checks_block(out: &mut String, s: &RunRecord) {
    if s.checks.is_empty() {
        return;
    }
    let (cp, cf) = s.checks_total();
    let total = cp + cf;
    row(
        out,
        4,
        "checks_total",
        39,
        &fmt_count_rate(total, s.per_second(total)),
    );
    row(out, 4, "checks_succeeded", 39, &fmt_rate(cp, total));
    row(out, 4, "checks_failed", 39, &fmt_rate(cf, total));
    let _ = writeln!(out);
    for (name, p, f) in &by_name(&s.checks) {
        let _ = writeln!(out, "    {} {name}", if *f == 0 { "✓" } else { "✗" });
        if *f > 0 {
            let pct = 100 * p / (p + f).max(1);
            let _ = writeln!(out, "      ↳  {pct}% — ✓ {p} / ✗ {f}");
        }
    }
    let _ = writeln!(out);
}

/// k6's HTTP group: durations, failures, requests and every phase, each with its sub-metrics.
fn http_block(out: &mut String, s: &RunRecord) {
    let _ = writeln!(out, "    HTTP");
    trend_row(out, "http_req_corrected_duration", &s.corrected);
    trend_row(out, "http_req_duration", &s.duration);
    subs_rows(out, s, "http_req_duration");
    // Saturated arrivals failed too (`dropped_iterations{reason:saturated}` counts them).
    let (failed, total) = s.failed_with_saturated();
    row(out, 4, "http_req_failed", WIDTH, &fmt_rate(failed, total));
    subs_rows(out, s, "http_req_failed");
    row(
        out,
        4,
        "http_reqs",
        WIDTH,
        &fmt_count_rate(s.requests, s.per_second(s.requests)),
    );
    subs_rows(out, s, "http_reqs");
    for phase in Phase::ALL {
        let name = format!("http_req_{}", phase.as_str());
        trend_row(out, &name, &s.phases[phase as usize]);
        subs_rows(out, s, &name);
    }
}

/// k6's EXECUTION group: drops, iterations and VUs.
fn execution_block(out: &mut String, s: &RunRecord) {
    let _ = writeln!(out, "\n    EXECUTION");
    row(
        out,
        4,
        "dropped_iterations",
        WIDTH,
        &fmt_count_rate(s.dropped, s.per_second(s.dropped)),
    );
    trend_row(out, "iteration_duration", &s.iteration_duration);
    trend_row(out, "iteration_lateness", &s.lateness);
    row(
        out,
        4,
        "iterations",
        WIDTH,
        &fmt_count_rate(s.iterations, s.per_second(s.iterations)),
    );
    row(
        out,
        4,
        "vus",
        WIDTH,
        &format!("{:<7} min={:<8} max={}", s.vus, s.vus_low, s.vus_high),
    );
    row(
        out,
        4,
        "vus_max",
        WIDTH,
        &format!("{:<7} min={:<8} max={}", s.vus_max, s.vus_max, s.vus_max),
    );
}

/// k6's NETWORK group: bytes received and sent.
fn network_block(out: &mut String, s: &RunRecord) {
    let _ = writeln!(out, "\n    NETWORK");
    for (name, bytes) in [
        ("data_received", s.data_received),
        ("data_sent", s.data_sent),
    ] {
        row(
            out,
            4,
            name,
            WIDTH,
            &format!(
                "{:<7} {}/s",
                fmt_bytes(bytes as f64),
                fmt_bytes(s.per_second(bytes))
            ),
        );
    }
}

/// Why iterations were dropped, and by whom: a saturated drop is the target's (every VU
/// waited on it: a failed request, a bad SLO event); a generator drop is sloburn's, never the
/// target's, and never an SLO event.
fn overload(out: &mut String, s: &RunRecord) {
    use crate::load::pacing::DropReason;
    let saturated = s.dropped_by(DropReason::Saturated);
    if saturated > 0 {
        let _ = writeln!(
            out,
            "  target saturated: {saturated} {} found all {} VUs waiting on the target and \
             {} turned away; they count as failed requests (http_req_failed) and as bad SLO \
             events. Raise max_vus only if the target is meant to hold that many users at once",
            if saturated == 1 {
                "arrival"
            } else {
                "arrivals"
            },
            s.vus_max,
            if saturated == 1 { "was" } else { "were" },
        );
    }
    let late = s.generator_overloaded();
    if late > 0 {
        let _ = writeln!(
            out,
            "  generator overloaded: {late} {} dropped because sloburn fell behind its own \
             schedule (not the target's doing); give it more CPU or a lower rate",
            if late == 1 {
                "arrival was"
            } else {
                "arrivals were"
            }
        );
    }
    if s.dropped > 0 {
        let reasons: Vec<String> = DropReason::ALL
            .into_iter()
            .filter(|r| s.dropped_by(*r) > 0)
            .map(|r| format!("{} {}", r.as_str(), s.dropped_by(r)))
            .collect();
        let _ = writeln!(out, "  dropped iterations: {}", reasons.join(", "));
    }
}

fn trend_row(out: &mut String, name: &str, h: &HistSnapshot) {
    row(out, 4, name, WIDTH, &trend_line(h));
}

/// The recorded sub-metrics of `base`, k6's `{ status:200 }` rows under it.
fn subs_rows(out: &mut String, s: &RunRecord, base: &str) {
    for sub in s.subs.iter().filter(|x| x.metric.base == base) {
        let tags: Vec<String> = sub.metric.tags.iter().map(|t| t.to_string()).collect();
        let label = format!("{{ {} }}", tags.join(", "));
        let value = match sub.metric.kind {
            MetricKind::Trend => s
                .trend_of(&sub.key)
                .filter(|h| h.count() > 0)
                .map(trend_line)
                .unwrap_or_else(|| "no data".into()),
            MetricKind::Rate => match s.rate_of(&sub.key) {
                Some(r) => fmt_rate(r.hits, r.total),
                None => "no data".into(),
            },
            _ => {
                let n = s.count_of(&sub.key).unwrap_or(0);
                fmt_count_rate(n, s.per_second(n))
            }
        };
        row(out, 6, &label, WIDTH, &value);
    }
}

/// k6's THRESHOLDS block: metrics in name order, each sub-metric under its base.
fn thresholds_block(out: &mut String, report: &RunReport) {
    let _ = writeln!(out, "  █ THRESHOLDS \n");
    let mut bases: Vec<&str> = report
        .thresholds
        .iter()
        .map(|(t, _)| t.threshold.target.base)
        .collect();
    bases.sort_unstable();
    bases.dedup();
    for base in bases {
        let own: Vec<_> = report
            .thresholds
            .iter()
            .filter(|(t, _)| t.threshold.metric == base)
            .collect();
        let mut subs: Vec<&str> = report
            .thresholds
            .iter()
            .filter(|(t, _)| t.threshold.target.base == base && t.threshold.metric != base)
            .map(|(t, _)| t.threshold.metric.as_str())
            .collect();
        subs.sort_unstable();
        subs.dedup();
        let line =
            |out: &mut String, indent: &str, (spec, r): &(ThresholdSpec, ThresholdResult)| {
                let _ = writeln!(
                    out,
                    "{indent}{} '{}' {}",
                    if r.passed { "✓" } else { "✗" },
                    spec.threshold.source,
                    threshold_value(spec, r)
                );
            };
        if !own.is_empty() {
            let _ = writeln!(out, "    {base}");
            for t in &own {
                line(out, "    ", t);
            }
            let _ = writeln!(out);
        }
        for sub in subs {
            let (header, indent) = if own.is_empty() {
                (format!("    {sub}"), "    ")
            } else {
                (format!("      {}", &sub[base.len()..]), "      ")
            };
            let _ = writeln!(out, "{header}");
            for t in report
                .thresholds
                .iter()
                .filter(|(t, _)| t.threshold.metric == sub)
            {
                line(out, indent, t);
            }
            let _ = writeln!(out);
        }
    }
}
