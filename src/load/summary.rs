//! End-of-test output: the text summary (k6's metric list, then vegeta's report), the k6
//! `--summary-export` JSON shape, and the live progress line. Pure formatting of a
//! [`RunReport`]; no I/O.

use super::hist::HistSnapshot;
use super::runner::{Abort, RunReport};
use super::stats::StatsSnapshot;
use crate::http::Phase;
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

fn trend_line(h: &HistSnapshot) -> String {
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

fn row(out: &mut String, name: &str, value: &str) {
    let dots = 32usize.saturating_sub(name.len() + 2);
    let _ = writeln!(out, "  {name}{}: {value}", ".".repeat(dots.max(1)));
}

/// A threshold's observed value with its unit: a duration for trend metrics (evaluated in
/// milliseconds), a plain number otherwise.
pub fn observed(metric: &str, value: f64) -> String {
    if metric.starts_with("http_req_") && metric != "http_req_failed"
        || metric == "iteration_duration"
    {
        fmt_duration(Duration::from_secs_f64(value.max(0.0) / 1000.0))
    } else {
        format!("{value:.4}")
    }
}

/// The full text summary printed at the end of `sloburn run`.
pub fn text(profile: &str, report: &RunReport) -> String {
    let s = &report.stats;
    let mut out = String::new();
    let _ = writeln!(out, "\n  profile: {profile}");
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
        None => {}
    }
    if s.local_errors_dominate() {
        let _ = writeln!(
            out,
            "  failed: {} of {} requests failed inside sloburn (out of file descriptors or local \
             ports), not at the target; raise `ulimit -n` or use fewer VUs",
            s.local_errors(),
            s.requests
        );
    }
    overload(&mut out, s);
    if !report.thresholds.is_empty() {
        let _ = writeln!(out, "\n  thresholds:");
        for (spec, result) in &report.thresholds {
            let mark = if result.passed { "✓" } else { "✗" };
            let t = &spec.threshold;
            let observed = observed(&t.metric, result.observed);
            let _ = writeln!(
                out,
                "    {mark} {} {}  (observed {observed}{})",
                t.metric,
                t.source,
                if result.no_data { ", no data" } else { "" }
            );
        }
    }
    let _ = writeln!(out);
    let (cp, cf) = s
        .checks
        .iter()
        .fold((0u64, 0u64), |(p, f), (_, a, b)| (p + a, f + b));
    if cp + cf > 0 {
        row(
            &mut out,
            "checks",
            &format!("{:.2}% ✓ {cp} ✗ {cf}", 100.0 * cp as f64 / (cp + cf) as f64),
        );
        for (name, p, f) in &s.checks {
            let _ = writeln!(
                out,
                "    {} {name}: ✓ {p} ✗ {f}",
                if *f == 0 { "✓" } else { "✗" }
            );
        }
    }
    row(
        &mut out,
        "data_received",
        &format!(
            "{} {}/s",
            fmt_bytes(s.data_received as f64),
            fmt_bytes(s.per_second(s.data_received))
        ),
    );
    row(
        &mut out,
        "data_sent",
        &format!(
            "{} {}/s",
            fmt_bytes(s.data_sent as f64),
            fmt_bytes(s.per_second(s.data_sent))
        ),
    );
    row(
        &mut out,
        "dropped_iterations",
        &format!("{} {:.2}/s", s.dropped, s.per_second(s.dropped)),
    );
    for phase in Phase::ALL {
        row(
            &mut out,
            &format!("http_req_{}", phase.as_str()),
            &trend_line(&s.phases[phase as usize]),
        );
    }
    row(&mut out, "http_req_duration", &trend_line(&s.duration));
    row(
        &mut out,
        "http_req_failed",
        &format!(
            "{:.2}% ✓ {} ✗ {}",
            if s.requests > 0 {
                100.0 * s.failed as f64 / s.requests as f64
            } else {
                0.0
            },
            s.failed,
            s.requests - s.failed.min(s.requests)
        ),
    );
    row(
        &mut out,
        "http_reqs",
        &format!("{} {:.2}/s", s.requests, s.per_second(s.requests)),
    );
    row(
        &mut out,
        "iteration_duration",
        &trend_line(&s.iteration_duration),
    );
    row(
        &mut out,
        "iterations",
        &format!("{} {:.2}/s", s.iterations, s.per_second(s.iterations)),
    );
    row(&mut out, "iteration_lateness", &trend_line(&s.lateness));
    row(&mut out, "vus_max", &s.vus_max.to_string());
    let _ = writeln!(out);
    vegeta(&mut out, s);
    out
}

/// Why iterations were dropped, and whether the generator itself fell behind: those drops are
/// sloburn's, never the target's, and never SLO events.
fn overload(out: &mut String, s: &StatsSnapshot) {
    use super::pacing::DropReason;
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
    for (class, n) in &s.errors {
        let _ = writeln!(out, "  {}: {n}", class.as_str());
    }
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

/// k6's `--summary-export` shape: `metrics.<name>` with trend aggregates in milliseconds,
/// counters as `count`/`rate`, rates as `value`/`passes`/`fails`, and each metric's
/// `thresholds` as `{source: failed}` (k6 writes `true` for a threshold that failed).
/// `state` adds two fields of sloburn's own: `interrupted`, and the `signal` that stopped the run
/// (`null` when none did).
pub fn export_json(report: &RunReport, interrupted_by: Option<&str>) -> Value {
    let s = &report.stats;
    let mut metrics = Map::new();
    for phase in Phase::ALL {
        metrics.insert(
            format!("http_req_{}", phase.as_str()),
            trend_json(&s.phases[phase as usize]),
        );
    }
    metrics.insert("http_req_duration".into(), trend_json(&s.duration));
    metrics.insert(
        "iteration_duration".into(),
        trend_json(&s.iteration_duration),
    );
    let counter = |n: u64| json!({ "count": n, "rate": s.per_second(n) });
    metrics.insert("http_reqs".into(), counter(s.requests));
    metrics.insert("iterations".into(), counter(s.iterations));
    metrics.insert("dropped_iterations".into(), counter(s.dropped));
    metrics.insert(
        "generator_overloaded_iterations".into(),
        counter(s.generator_overloaded()),
    );
    metrics.insert("data_sent".into(), counter(s.data_sent));
    metrics.insert("data_received".into(), counter(s.data_received));
    let rate = |hits: u64, total: u64| {
        json!({
            "value": if total > 0 { hits as f64 / total as f64 } else { 0.0 },
            "passes": hits,
            "fails": total - hits.min(total),
        })
    };
    metrics.insert("http_req_failed".into(), rate(s.failed, s.requests));
    let (cp, cf) = s
        .checks
        .iter()
        .fold((0u64, 0u64), |(p, f), (_, a, b)| (p + a, f + b));
    metrics.insert("checks".into(), rate(cp, cp + cf));
    metrics.insert(
        "vus_max".into(),
        json!({ "value": s.vus_max, "min": s.vus_max, "max": s.vus_max }),
    );
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
    let checks: Map<String, Value> = s
        .checks
        .iter()
        .map(|(name, p, f)| {
            (
                name.clone(),
                json!({ "name": name, "path": format!("::{name}"), "passes": p, "fails": f }),
            )
        })
        .collect();
    let mut state = Map::new();
    state.insert(
        "testRunDurationMs".into(),
        json!(s.elapsed.as_secs_f64() * 1000.0),
    );
    state.insert("isStdOutTTY".into(), Value::Bool(false));
    state.insert("isStdErrTTY".into(), Value::Bool(false));
    mark_interrupted(&mut state, interrupted_by);
    json!({
        "root_group": { "name": "", "path": "", "groups": {}, "checks": checks },
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

/// One JSON line for `--out json=FILE`: the figures of one time bucket (deltas since `prev`).
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

/// The last `--out json` line: the run's final partial bucket, with the interrupted mark.
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
