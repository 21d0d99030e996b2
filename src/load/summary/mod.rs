//! End-of-test output: the text summary (k6 v1's grouped layout: scenario header, THRESHOLDS,
//! TOTAL RESULTS with HTTP, EXECUTION and NETWORK; then vegeta's report), the k6
//! `--summary-export` JSON shape, and the live progress line. Pure formatting of a
//! [`RunReport`]; no I/O.

use crate::hist::HistSnapshot;
use crate::thresholds::{MetricKind, ThresholdResult, ThresholdSpec};
use std::fmt::Write;
use std::time::Duration;

mod checks;
mod export;
mod groups;
mod progress;
mod starved;
mod text;
mod vegeta;

use checks::by_name;
pub use export::{bucket_json, export_json, last_bucket_json};
pub use progress::progress;
pub use text::{Header, scenario_line, text, text_with};
pub use vegeta::error_set;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::{Check, CheckKind};
    use crate::config::spec::Executor;
    use crate::http::{ErrorClass, Outcome, Phases};
    use crate::load::event::Observer;
    use crate::load::pacing::DropReason;
    use crate::load::runner::RunReport;
    use crate::load::stats::RunStats;
    use crate::thresholds::ThresholdSpec;

    /// A fixed run: 10 s of a constant-arrival-rate profile, 100 requests (90 answered 200 in
    /// 1 to 90 ms, 8 answered 500, 2 refused), a status check, three thresholds (one failing)
    /// and two drops of each kind of owner.
    fn fixed_report() -> RunReport {
        let checks = vec![Check {
            name: "status is 200".into(),
            kind: CheckKind::Status(vec![(200, 200)]),
        }];
        let specs: Vec<ThresholdSpec> = [
            ("http_req_duration", "p(95)<80"),
            ("http_req_failed", "rate<0.05"),
            ("http_req_duration{status:500}", "max<100"),
        ]
        .iter()
        .map(|(m, e)| ThresholdSpec::parse(m, e, false, None).unwrap())
        .collect();
        let stats = RunStats::for_run(&checks, &specs, "canary", "GET");
        stats.vus_allocated(5);
        stats.vus_changed(3);
        let ms = Duration::from_millis;
        for i in 0..100u64 {
            let (status, error) = match i {
                0..90 => (Some(200), None),
                90..98 => (Some(500), None),
                _ => (None, Some(ErrorClass::ConnectRefused)),
            };
            let outcome = Outcome {
                status,
                error,
                phases: Phases {
                    blocked: ms(i % 3),
                    connecting: ms(u64::from(i < 5)),
                    sending: ms(0),
                    waiting: ms(1 + i % 90),
                    receiving: ms(i % 2),
                    ..Phases::default()
                },
                bytes_sent: 120,
                bytes_received: if status.is_some() { 300 } else { 0 },
                // The refused connects wrote nothing the kernel could stamp.
                kernel_tx: status.is_some(),
                ..Outcome::default()
            };
            let passed = [status == Some(200)];
            // A single-request iteration is its request: nothing else reports it.
            stats.request_finished(0, &outcome, ms(i % 4), &passed);
        }
        stats.iteration_dropped(DropReason::Saturated, 0);
        stats.iteration_dropped(DropReason::Late, 0);
        let snapshot = stats.snapshot(Duration::from_secs(10));
        let thresholds = specs
            .into_iter()
            .map(|spec| {
                let result = spec.threshold.evaluate(&snapshot);
                (spec, result)
            })
            .collect();
        RunReport {
            stats: snapshot,
            thresholds,
            aborted: None,
            starved: None,
            would_fail: Vec::new(),
        }
    }

    /// Compares with the golden file `tests/it/golden/NAME`; `UPDATE_GOLDEN=1` rewrites it.
    fn golden(name: &str, actual: &str) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/it/golden")
            .join(name);
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&path, actual).unwrap();
            return;
        }
        let expected = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1)", path.display()));
        assert!(
            expected == actual,
            "{} drifted; review and rerun with UPDATE_GOLDEN=1\n{actual}",
            path.display()
        );
    }

    #[test]
    fn the_text_summary_of_a_fixed_run_matches_its_golden_file() {
        let executor = Executor::ConstantArrivalRate {
            rate: 10.0,
            duration: Duration::from_secs(10),
            pre_allocated_vus: 2,
            max_vus: 5,
        };
        let notes = ["the default pool was capped".to_string()];
        let header = Header {
            profile: "canary",
            executor: Some(&executor),
            graceful_stop: Duration::from_secs(30),
            outputs: &[],
            notes: &notes,
        };
        golden("summary.txt", &text_with(&header, &fixed_report()));
    }

    #[test]
    fn the_summary_export_of_a_fixed_run_matches_its_golden_file() {
        let v = export_json(&fixed_report(), None);
        let text = serde_json::to_string_pretty(&v).unwrap() + "\n";
        golden("summary-export.json", &text);
    }

    #[test]
    fn durations_are_formatted_like_k6() {
        assert_eq!(fmt_duration(Duration::from_micros(812)), "812.00µs");
        assert_eq!(fmt_duration(Duration::from_micros(12_340)), "12.34ms");
        assert_eq!(fmt_duration(Duration::from_millis(1500)), "1.50s");
        assert_eq!(fmt_duration(Duration::from_secs(125)), "2m05s");
        assert_eq!(fmt_bytes(1_500_000.0), "1.5 MB");
    }
}
