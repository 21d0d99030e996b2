//! End-of-test output: the text summary (k6 v1's grouped layout: scenario header, THRESHOLDS,
//! TOTAL RESULTS with HTTP, EXECUTION and NETWORK; then vegeta's report), the k6
//! `--summary-export` JSON shape, and the live progress line. Pure formatting of a
//! [`RunReport`]; no I/O.

use super::hist::HistSnapshot;
use super::runner::{Abort, RunReport};
use super::spec::Executor;
use super::stats::{EXPECTED_DURATION, StatsSnapshot, SubValue};
use crate::http::Phase;
use crate::thresholds::{MetricKind, ThresholdResult, ThresholdSpec};
use md5::{Digest, Md5};
use serde_json::{Map, Value, json};
use std::fmt::Write;
use std::time::Duration;

/// Human duration with k6's precision: `812µs`, `12.34ms`, `1.5s`.
pub fn fmt_duration(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 1e3 {
        format!("{ns:.0}ns")
    } else if ns < 1e6 {
        format!("{:.2}µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2}ms", ns / 1e6)
    } else if ns < 60e9 {
        format!("{:.2}s", ns / 1e9)
    } else {
        let s = d.as_secs();
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

fn fmt_bytes(n: f64) -> String {
    if n < 1e3 {
        format!("{n:.0} B")
    } else if n < 1e6 {
        format!("{:.1} kB", n / 1e3)
    } else if n < 1e9 {
        format!("{:.1} MB", n / 1e6)
    } else {
        format!("{:.1} GB", n / 1e9)
    }
}

pub(super) fn trend_line(h: &HistSnapshot) -> String {
    format!(
        "avg={} min={} med={} max={} p(90)={} p(95)={} p(99)={}",
        fmt_duration(h.mean()),
        fmt_duration(h.min()),
        fmt_duration(h.median()),
        fmt_duration(h.max()),
        fmt_duration(h.quantile(0.90)),
        fmt_duration(h.quantile(0.95)),
        fmt_duration(h.quantile(0.99)),
    )
}

/// `key.....: value`, k6's dotted rows.
pub(super) fn row(out: &mut String, indent: usize, name: &str, width: usize, value: &str) {
    let dots = width.saturating_sub(name.chars().count() + indent);
    let _ = writeln!(
        out,
        "{}{name}{}: {value}",
        " ".repeat(indent),
        ".".repeat(dots.max(1))
    );
}

/// Rows of the HTTP, EXECUTION and NETWORK groups: k6 pads them to this width.
pub(super) const WIDTH: usize = 76;

/// A threshold's observed value with its unit: a duration for trend metrics (evaluated in
/// milliseconds), a plain number otherwise.
pub fn observed(metric: &str, value: f64) -> String {
    let kind = crate::thresholds::parse_metric(metric).map(|m| m.kind);
    match kind {
        Ok(MetricKind::Trend) => fmt_duration(Duration::from_secs_f64(value.max(0.0) / 1000.0)),
        _ => format!("{value:.4}"),
    }
}

/// k6's way of showing the value a threshold compared: `p(95)=2.27ms`, `rate=67.74%`,
/// `count=0`, `rate=3.5/s`, `value=2`; `no data` instead of an aggregate of nothing.
fn threshold_value(spec: &ThresholdSpec, r: &ThresholdResult) -> String {
    let t = &spec.threshold;
    let agg = t.aggregation.to_string();
    if r.no_data && t.target.kind != MetricKind::Counter {
        return if t.target.kind == MetricKind::Rate {
            format!("{agg}: no data (k6 passes a rate with no samples)")
        } else {
            format!("{agg}: no data (compared as 0, as k6 does)")
        };
    }
    let v = match (t.target.kind, t.aggregation) {
        (MetricKind::Trend, _) => observed(&t.metric, r.observed),
        (MetricKind::Rate, _) => format!("{:.2}%", 100.0 * r.observed),
        (MetricKind::Counter, crate::thresholds::Aggregation::Rate) => {
            format!("{}/s", fmt_number(r.observed))
        }
        _ => fmt_number(r.observed),
    };
    format!("{agg}={v}")
}

/// k6's numbers: whole numbers bare, others with up to six decimals.
fn fmt_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.6}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn fmt_count_rate(n: u64, per_second: f64) -> String {
    format!("{:<7} {}/s", n, fmt_number(per_second))
}

pub(super) fn fmt_rate(hits: u64, total: u64) -> String {
    let pct = if total > 0 {
        100.0 * hits as f64 / total as f64
    } else {
        0.0
    };
    format!("{:<7} {hits} out of {total}", format!("{pct:.2}%"))
}

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
fn scenario_line(name: &str, e: &Executor, graceful_stop: Duration) -> (String, u32, Duration) {
    let gs = crate::units::format_duration(graceful_stop);
    let d = crate::units::format_duration;
    let total = super::plan::planned_duration(e);
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
    overload(&mut out, s);
    if let Some(why) = report.inconclusive() {
        let _ = writeln!(out, "  {why}");
    }
    for note in h.notes {
        let _ = writeln!(out, "  note: {note}");
    }
    if !report.thresholds.is_empty() {
        thresholds_block(&mut out, report);
    }
    let _ = writeln!(out, "\n  █ TOTAL RESULTS \n");
    let (cp, cf) = s.checks_total();
    if !s.checks.is_empty() {
        let total = cp + cf;
        row(
            &mut out,
            4,
            "checks_total",
            39,
            &fmt_count_rate(total, s.per_second(total)),
        );
        row(&mut out, 4, "checks_succeeded", 39, &fmt_rate(cp, total));
        row(&mut out, 4, "checks_failed", 39, &fmt_rate(cf, total));
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
    let _ = writeln!(out, "    HTTP");
    trend_row(&mut out, "http_req_corrected_duration", &s.corrected);
    trend_row(&mut out, "http_req_duration", &s.duration);
    subs_rows(&mut out, s, "http_req_duration");
    // Saturated arrivals failed too (`dropped_iterations{reason:saturated}` counts them).
    let (failed, total) = s.failed_with_saturated();
    row(
        &mut out,
        4,
        "http_req_failed",
        WIDTH,
        &fmt_rate(failed, total),
    );
    subs_rows(&mut out, s, "http_req_failed");
    row(
        &mut out,
        4,
        "http_reqs",
        WIDTH,
        &fmt_count_rate(s.requests, s.per_second(s.requests)),
    );
    subs_rows(&mut out, s, "http_reqs");
    for phase in Phase::ALL {
        let name = format!("http_req_{}", phase.as_str());
        trend_row(&mut out, &name, &s.phases[phase as usize]);
        subs_rows(&mut out, s, &name);
    }
    let _ = writeln!(out, "\n    EXECUTION");
    row(
        &mut out,
        4,
        "dropped_iterations",
        WIDTH,
        &fmt_count_rate(s.dropped, s.per_second(s.dropped)),
    );
    trend_row(&mut out, "iteration_duration", &s.iteration_duration);
    trend_row(&mut out, "iteration_lateness", &s.lateness);
    row(
        &mut out,
        4,
        "iterations",
        WIDTH,
        &fmt_count_rate(s.iterations, s.per_second(s.iterations)),
    );
    row(
        &mut out,
        4,
        "vus",
        WIDTH,
        &format!("{:<7} min={:<8} max={}", s.vus, s.vus_low, s.vus_high),
    );
    row(
        &mut out,
        4,
        "vus_max",
        WIDTH,
        &format!("{:<7} min={:<8} max={}", s.vus_max, s.vus_max, s.vus_max),
    );
    let _ = writeln!(out, "\n    NETWORK");
    row(
        &mut out,
        4,
        "data_received",
        WIDTH,
        &format!(
            "{:<7} {}/s",
            fmt_bytes(s.data_received as f64),
            fmt_bytes(s.per_second(s.data_received))
        ),
    );
    row(
        &mut out,
        4,
        "data_sent",
        WIDTH,
        &format!(
            "{:<7} {}/s",
            fmt_bytes(s.data_sent as f64),
            fmt_bytes(s.per_second(s.data_sent))
        ),
    );
    super::groups::text(&mut out, s);
    let _ = writeln!(out);
    vegeta(&mut out, s);
    out
}

/// Why iterations were dropped, and by whom: a saturated drop is the target's (every VU
/// waited on it: a failed request, a bad SLO event); a generator drop is sloburn's, never the
/// target's, and never an SLO event.
fn overload(out: &mut String, s: &StatsSnapshot) {
    use super::pacing::DropReason;
    let saturated = s.dropped_by(DropReason::Saturated);
    if saturated > 0 {
        let _ = writeln!(
            out,
            "  target saturated: {saturated} arrivals found all {} VUs waiting on the target and \
             were turned away; they count as failed requests (http_req_failed) and as bad SLO \
             events. Raise max_vus only if the target is meant to hold that many users at once",
            s.vus_max
        );
    }
    let late = s.generator_overloaded();
    if late > 0 {
        let _ = writeln!(
            out,
            "  generator overloaded: {late} arrivals were dropped because sloburn fell behind its \
             own schedule (not the target's doing); give it more CPU or a lower rate"
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
fn subs_rows(out: &mut String, s: &StatsSnapshot, base: &str) {
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

/// vegeta's text report, which many users read first.
fn vegeta(out: &mut String, s: &StatsSnapshot) {
    let wait = s.duration.mean();
    let ok = s.requests - s.failed.min(s.requests);
    let _ = writeln!(
        out,
        "  Requests      [total, rate, throughput]         {}, {:.2}, {:.2}",
        s.requests,
        s.per_second(s.requests),
        s.per_second(ok)
    );
    let _ = writeln!(
        out,
        "  Duration      [total, attack, wait]             {}, {}, {}",
        fmt_duration(s.elapsed),
        fmt_duration(s.elapsed.saturating_sub(wait)),
        fmt_duration(wait)
    );
    let d = &s.duration;
    let _ = writeln!(
        out,
        "  Latencies     [min, mean, 50, 90, 95, 99, max]  {}, {}, {}, {}, {}, {}, {}",
        fmt_duration(d.min()),
        fmt_duration(d.mean()),
        fmt_duration(d.median()),
        fmt_duration(d.quantile(0.90)),
        fmt_duration(d.quantile(0.95)),
        fmt_duration(d.quantile(0.99)),
        fmt_duration(d.max())
    );
    let per = |n: u64| {
        if s.requests > 0 {
            n as f64 / s.requests as f64
        } else {
            0.0
        }
    };
    let _ = writeln!(
        out,
        "  Bytes In      [total, mean]                     {}, {:.2}",
        s.data_received,
        per(s.data_received)
    );
    let _ = writeln!(
        out,
        "  Bytes Out     [total, mean]                     {}, {:.2}",
        s.data_sent,
        per(s.data_sent)
    );
    let _ = writeln!(
        out,
        "  Success       [ratio]                           {:.2}%",
        100.0 * per(ok)
    );
    // Each request once: under its status, or under 0 when no head arrived. Counting every
    // error under 0 too showed `200:30  0:30` for 30 requests whose bodies broke.
    let codes: Vec<String> = s.statuses.iter().map(|(c, n)| format!("{c}:{n}")).collect();
    let _ = writeln!(
        out,
        "  Status Codes  [code:count]                      {}{}",
        codes.join("  "),
        if s.no_response > 0 {
            format!("  0:{}", s.no_response)
        } else {
            String::new()
        }
    );
    let _ = writeln!(out, "  Error Set:");
    for line in error_set(s) {
        let _ = writeln!(out, "  {line}");
    }
}

/// vegeta's error set: a status outside 200-399 is an error named by its status line
/// (`500 Internal Server Error`), as vegeta names it; transport errors by their class. Each with
/// its count.
pub fn error_set(s: &StatsSnapshot) -> Vec<String> {
    let mut lines: Vec<String> = s
        .statuses
        .iter()
        .filter(|(c, _)| !(200..400).contains(c))
        .map(|(c, n)| {
            let reason = http::StatusCode::from_u16(*c)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("");
            format!("{}: {n}", format!("{c} {reason}").trim_end())
        })
        .collect();
    lines.extend(
        s.errors
            .iter()
            .map(|(class, n)| format!("{}: {n}", class.as_str())),
    );
    lines
}

fn trend_json(h: &HistSnapshot) -> Value {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    json!({
        "avg": ms(h.mean()),
        "min": ms(h.min()),
        "med": ms(h.median()),
        "max": ms(h.max()),
        "p(90)": ms(h.quantile(0.90)),
        "p(95)": ms(h.quantile(0.95)),
        "p(99)": ms(h.quantile(0.99)),
    })
}

/// Checks counted under their name, as k6 counts one name in one group: a name used twice
/// (two steps, or two checks of a step) is one check with both counts, in first-seen order.
pub(super) fn by_name(checks: &[(String, u64, u64)]) -> Vec<(String, u64, u64)> {
    let mut out: Vec<(String, u64, u64)> = Vec::new();
    for (name, p, f) in checks {
        match out.iter_mut().find(|(n, _, _)| n == name) {
            Some((_, op, of)) => {
                *op += p;
                *of += f;
            }
            None => out.push((name.clone(), *p, *f)),
        }
    }
    out
}

/// k6's ids: the MD5 of a group's or check's path.
/// A check as k6's summary-export writes it, at `path` (`::name`, `::group::name`).
pub(super) fn check_json(path: &str, name: &str, passes: u64, fails: u64) -> Value {
    json!({ "name": name, "path": path, "id": k6_id(path), "passes": passes, "fails": fails })
}

pub(super) fn k6_id(path: &str) -> String {
    Md5::digest(path.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn rate_json(hits: u64, total: u64) -> Value {
    json!({
        "value": if total > 0 { hits as f64 / total as f64 } else { 0.0 },
        "passes": hits,
        "fails": total - hits.min(total),
    })
}

/// k6's `--summary-export` shape: `metrics.<name>` with trend aggregates in milliseconds,
/// counters as `count`/`rate`, rates as `value`/`passes`/`fails`, gauges (`vus`, `vus_max`) as
/// `value`/`min`/`max`, each sub-metric under its k6 name (`http_req_duration{status:200}`;
/// `{expected_response:true}` always, others when a threshold names them), and each metric's
/// `thresholds` as `{source: failed}` (k6 writes `true` for a threshold that failed). As in k6,
/// `checks` is left out when the target has no checks and no threshold names it, and
/// `dropped_iterations` when nothing was dropped and no threshold names it. `root_group` and its
/// checks carry k6's `id` (MD5 of the path).
///
/// A journey run's checks are in its steps' groups (`::journey::step`), and the root's list is
/// empty, as in k6 when every check is made inside a group; `group_duration` holds every
/// journey's and step's group durations.
///
/// sloburn's own additions: `http_req_corrected_duration`, `http_req_dns`, and `state`
/// (`testRunDurationMs`, `interrupted` and the `signal` that stopped the run, `null` when none
/// did); k6 v1 writes no `state`.
pub fn export_json(report: &RunReport, interrupted_by: Option<&str>) -> Value {
    let s = &report.stats;
    let named = |m: &str| {
        report
            .thresholds
            .iter()
            .any(|(t, _)| t.threshold.metric == m)
    };
    let mut metrics = Map::new();
    for phase in Phase::ALL {
        metrics.insert(
            format!("http_req_{}", phase.as_str()),
            trend_json(&s.phases[phase as usize]),
        );
    }
    metrics.insert("http_req_duration".into(), trend_json(&s.duration));
    metrics.insert(
        "http_req_corrected_duration".into(),
        trend_json(&s.corrected),
    );
    metrics.insert(
        "iteration_duration".into(),
        trend_json(&s.iteration_duration),
    );
    if !s.journeys.is_empty() || named("group_duration") {
        metrics.insert("group_duration".into(), trend_json(&s.group_duration));
    }
    let counter = |n: u64| json!({ "count": n, "rate": s.per_second(n) });
    metrics.insert("http_reqs".into(), counter(s.requests));
    metrics.insert("iterations".into(), counter(s.iterations));
    if s.dropped > 0 || named("dropped_iterations") {
        metrics.insert("dropped_iterations".into(), counter(s.dropped));
    }
    let overloaded = s.generator_overloaded();
    if overloaded > 0 {
        metrics.insert(
            "generator_overloaded_iterations".into(),
            counter(overloaded),
        );
    }
    metrics.insert("data_sent".into(), counter(s.data_sent));
    metrics.insert("data_received".into(), counter(s.data_received));
    let (failed, total) = s.failed_with_saturated();
    metrics.insert("http_req_failed".into(), rate_json(failed, total));
    let (cp, cf) = s.checks_total();
    if !s.checks.is_empty() || named("checks") {
        metrics.insert("checks".into(), rate_json(cp, cp + cf));
    }
    metrics.insert(
        "vus".into(),
        json!({ "value": s.vus, "min": s.vus_low, "max": s.vus_high }),
    );
    metrics.insert(
        "vus_max".into(),
        json!({ "value": s.vus_max, "min": s.vus_max, "max": s.vus_max }),
    );
    for sub in &s.subs {
        let value = match (sub.metric.kind, &sub.value) {
            (MetricKind::Trend, _) => {
                trend_json(s.trend_of(&sub.key).unwrap_or(&HistSnapshot::default()))
            }
            (MetricKind::Rate, _) => {
                let r = s.rate_of(&sub.key).unwrap_or_default();
                rate_json(r.hits, r.total)
            }
            (_, SubValue::Empty) => counter(0),
            _ => counter(s.count_of(&sub.key).unwrap_or(0)),
        };
        if sub.key != EXPECTED_DURATION || !metrics.contains_key(&sub.key) {
            metrics.insert(sub.key.clone(), value);
        }
    }
    for (spec, result) in &report.thresholds {
        if let Some(Value::Object(m)) = metrics.get_mut(&spec.threshold.metric) {
            let entry = m
                .entry("thresholds")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(t) = entry {
                t.insert(spec.threshold.source.clone(), Value::Bool(!result.passed));
            }
        }
    }
    // A journey's checks are in its steps' groups; k6's root lists only checks made outside
    // any group.
    let root_checks = if s.journeys.is_empty() {
        by_name(&s.checks)
    } else {
        Vec::new()
    };
    let checks: Map<String, Value> = root_checks
        .iter()
        .map(|(name, p, f)| (name.clone(), check_json(&format!("::{name}"), name, *p, *f)))
        .collect();
    let mut state = Map::new();
    state.insert(
        "testRunDurationMs".into(),
        json!(s.elapsed.as_secs_f64() * 1000.0),
    );
    state.insert("isStdOutTTY".into(), Value::Bool(false));
    state.insert("isStdErrTTY".into(), Value::Bool(false));
    mark_interrupted(&mut state, interrupted_by);
    let groups = super::groups::json(s);
    json!({
        "root_group": { "name": "", "path": "", "id": k6_id(""), "groups": groups, "checks": checks },
        "metrics": metrics,
        "state": state,
    })
}

/// `interrupted` and `signal`: whether a signal stopped the run, and which.
fn mark_interrupted(obj: &mut Map<String, Value>, interrupted_by: Option<&str>) {
    obj.insert("interrupted".into(), Value::Bool(interrupted_by.is_some()));
    obj.insert(
        "signal".into(),
        interrupted_by.map_or(Value::Null, |s| Value::String(s.into())),
    );
}

/// One JSON line for `--out json-agg=FILE`: the figures of one time bucket (deltas since
/// `prev`).
pub fn bucket_json(now: &StatsSnapshot, prev: &StatsSnapshot, unix_secs: f64) -> Value {
    json!({
        "time": unix_secs,
        "elapsed_s": now.elapsed.as_secs_f64(),
        "http_reqs": now.requests - prev.requests.min(now.requests),
        "http_req_failed": now.failed - prev.failed.min(now.failed),
        "dropped_iterations": now.dropped - prev.dropped.min(now.dropped),
        "data_sent": now.data_sent - prev.data_sent.min(now.data_sent),
        "data_received": now.data_received - prev.data_received.min(now.data_received),
        "vus": now.vus,
        "http_req_duration_ms": trend_json(&now.duration),
    })
}

/// The last `--out json-agg` line: the run's final partial bucket, with the interrupted mark.
pub fn last_bucket_json(
    now: &StatsSnapshot,
    prev: &StatsSnapshot,
    unix_secs: f64,
    interrupted_by: Option<&str>,
) -> Value {
    let mut line = bucket_json(now, prev, unix_secs);
    if let Value::Object(m) = &mut line {
        mark_interrupted(m, interrupted_by);
    }
    line
}

/// The live progress line shown on a terminal, k6 style.
pub fn progress(s: &StatsSnapshot, planned: Duration) -> String {
    format!(
        "running ({}/{}), {}/{} VUs, {} complete, {} dropped, {} errors, {:.0} req/s",
        fmt_duration(s.elapsed),
        fmt_duration(planned),
        s.vus,
        s.vus_max,
        s.iterations,
        s.dropped,
        s.errors_total(),
        s.per_second(s.requests)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_formatted_like_k6() {
        assert_eq!(fmt_duration(Duration::from_micros(812)), "812.00µs");
        assert_eq!(fmt_duration(Duration::from_micros(12_340)), "12.34ms");
        assert_eq!(fmt_duration(Duration::from_millis(1500)), "1.50s");
        assert_eq!(fmt_duration(Duration::from_secs(125)), "2m05s");
        assert_eq!(fmt_bytes(1_500_000.0), "1.5 MB");
    }
}
