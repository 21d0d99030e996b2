//! k6 thresholds: parsing `p(95)<300`-style expressions against sloburn's built-in metrics and
//! their tag-filtered sub-metrics, and evaluating them against a run's aggregates, with k6's
//! semantics. Pure: the runner supplies a [`MetricSource`].
//!
//! Grammar (whitespace allowed between tokens): `aggregation operator value`, where
//! - trend metrics (`http_req_duration`, `http_req_corrected_duration`, `http_req_<phase>`,
//!   `iteration_duration`) take `avg|min|max|med|p(N)` and a plain number of milliseconds;
//! - rate metrics (`http_req_failed`, `checks`) take `rate` and a plain number;
//! - counters (`http_reqs`, `iterations`, `dropped_iterations`, `data_sent`, `data_received`)
//!   take `count` or `rate` (per second) and a plain number;
//! - gauges (`vus`, `vus_max`) take `value`;
//! - operators are `<`, `<=`, `>`, `>=`, `==`, `!=`.
//!
//! As in k6, the limit is a bare number: `p(95)<20ms` is an error (k6 exits 104 on it, "failed
//! parsing threshold expression's right hand side"), and the message says to write `p(95)<20`.
//!
//! A metric name may carry a tag filter, a k6 sub-metric: `http_req_duration{status:200}`,
//! `http_req_failed{expected_response:false}`, `checks{check:status is 200}`, and the tags a
//! request has from its step: `method`, `group` (k6's `::journey::step` path; `""` for a
//! single-request profile and for the root-level metrics `iterations`, `iteration_duration`,
//! `data_sent`, `data_received`), `step` (sloburn's own), `name` (the URL as k6 tags it) and
//! `scenario` (the profile's name). `group_duration` is k6's: one sample per group run.
//!
//! No data, as k6 decides it: a trend with no sample evaluates its aggregates as 0, a counter or
//! gauge as 0, and a rate threshold with no sample passes (k6 finds no `rate` in the empty sink
//! and does not fail it). The result says `no_data`, so nobody prints a made-up `0ns`.

use thiserror::Error;

use crate::units;

mod eval;
mod expr;
mod metrics;
pub use eval::*;
pub use expr::*;
pub use metrics::*;

/// A parsed threshold. `value` is in milliseconds for trend metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The metric's name as k6 writes it: `http_req_duration` or `http_req_duration{status:200}`
    /// (the key in the summary export and the `metric` label).
    pub metric: String,
    /// What `metric` names, parsed.
    pub target: MetricRef,
    pub aggregation: Aggregation,
    pub op: Op,
    pub value: f64,
    /// The expression as written, for summaries and the `threshold` metric label.
    pub source: String,
}

/// Why a threshold was rejected. Expression errors carry the 1-based character column in the
/// expression.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ThresholdError {
    #[error(
        "unknown metric `{metric}`{}; thresholds apply to the built-in metrics only",
        did_you_mean_suffix(.did_you_mean)
    )]
    UnknownMetric {
        metric: String,
        did_you_mean: Option<&'static str>,
    },
    #[error("`{metric}`: {message}")]
    BadFilter { metric: String, message: String },
    #[error("column {column}: {message}")]
    Syntax { column: usize, message: String },
    #[error("invalid delayAbortEval `{value}`: {message}")]
    DelayAbortEval { value: String, message: String },
}

fn did_you_mean_suffix(s: &Option<&'static str>) -> String {
    s.map(|m| format!(" (did you mean `{m}`?)"))
        .unwrap_or_default()
}

impl ThresholdError {
    /// Column (1-based, in characters) within the expression, for expression errors.
    pub fn column(&self) -> Option<usize> {
        match self {
            ThresholdError::Syntax { column, .. } => Some(*column),
            _ => None,
        }
    }
}

fn closest(word: &str, candidates: impl IntoIterator<Item = &'static str>) -> Option<&'static str> {
    let limit = (word.chars().count() / 3).max(2);
    candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(word, c), c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Parse one threshold expression for `metric` (which may carry a tag filter).
pub fn parse(metric: &str, expr: &str) -> Result<Threshold, ThresholdError> {
    let target = parse_metric(metric)?;
    let kind = target.kind;
    let metric = target.key();
    let mut p = Parser {
        chars: expr.chars().collect(),
        pos: 0,
    };
    p.skip_ws();
    if p.at_end() {
        return Err(p.error(format!(
            "empty threshold; expected e.g. `{}`",
            match kind {
                MetricKind::Trend => "p(95)<300",
                MetricKind::Rate => "rate<0.01",
                MetricKind::Counter => "count>0",
                MetricKind::Gauge => "value<100",
            }
        )));
    }
    let agg_col = p.pos;
    let aggregation = p.aggregation(&metric, kind)?;
    if !aggregation.valid_for(kind) {
        return Err(ThresholdError::Syntax {
            column: agg_col + 1,
            message: format!(
                "`{aggregation}` is not valid for {} metric `{metric}`; use {}",
                kind.name(),
                kind.allowed()
            ),
        });
    }
    p.skip_ws();
    let op = p.op(&aggregation)?;
    p.skip_ws();
    let value = p.value(kind, op)?;
    p.skip_ws();
    if !p.at_end() {
        let rest: String = p.chars[p.pos..].iter().collect();
        if rest.starts_with('%') {
            return Err(p.error(format!(
                "percent signs are not supported; write {}% as {}",
                value,
                value / 100.0
            )));
        }
        if kind == MetricKind::Trend && units::duration_unit(rest.trim_end()).is_some() {
            return Err(p.error(unit_message(value, rest.trim_end())));
        }
        return Err(p.error(format!(
            "unexpected `{}` after the value; write one expression per threshold entry",
            rest.trim_end()
        )));
    }
    Ok(Threshold {
        metric,
        target,
        aggregation,
        op,
        value,
        source: expr.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Phase;
    use crate::load::hist::Histogram;
    use std::collections::HashMap;
    use std::time::Duration;

    fn render(metric: &str, expr: &str) -> String {
        match parse(metric, expr) {
            Ok(t) => format!(
                "ok: {} {} {} {}",
                t.metric,
                t.aggregation,
                t.op,
                match t.target.kind {
                    MetricKind::Trend => format!("{}ms", t.value),
                    _ => format!("{}", t.value),
                }
            ),
            Err(e) => format!("error: {e}"),
        }
    }

    const CASES: &[(&str, &str)] = &[
        ("http_req_duration", "p(95)<300"),
        ("http_req_duration", "p(99.9) <= 1500"),
        ("http_req_duration", "  avg < 200  "),
        ("http_req_duration", "med>=0.5"),
        ("http_req_duration", "max!=120000"),
        ("http_req_duration", "min==0"),
        ("http_req_corrected_duration", "p(99)<1000"),
        ("http_req_dns", "p(90)<50"),
        ("http_req_tls_handshaking", "p( 50 )<100"),
        ("iteration_duration", "avg<1e3"),
        ("http_req_failed", "rate<0.01"),
        ("checks", "rate>0.99"),
        ("http_reqs", "count>=100"),
        ("http_reqs", "rate>50"),
        ("dropped_iterations", "count==0"),
        ("data_received", "count>1000000"),
        ("vus", "value<10"),
        ("vus_max", "value>=1"),
        ("http_req_duration{status:200}", "p(95)<300"),
        ("http_req_duration{ status: 200 }", "p(95)<300"),
        ("http_req_duration{expected_response:true}", "max<1000"),
        ("http_req_failed{status:500}", "rate>0.5"),
        ("http_reqs{status:404}", "count==0"),
        ("checks{check:status is 200}", "rate>0.9"),
        ("http_req_waiting{method:GET,scenario:canary}", "p(95)<300"),
        ("http_req_duration{group:::buy::login}", "p(95)<300"),
        ("http_reqs{step:cart,method:POST}", "count>0"),
        ("http_req_failed{name:http://shop/login}", "rate<0.01"),
        ("checks{check:status is 200,group:::buy::cart}", "rate>0.9"),
        ("group_duration{group:::buy}", "p(95)<2000"),
        ("iterations{group:}", "count>0"),
        ("dropped_iterations{reason:saturated}", "count==0"),
        (
            "dropped_iterations{reason:late,scenario:canary}",
            "count<10",
        ),
        ("http_req_duration", "p(95)<300ms"),
        ("http_req_duration", "p(95)<1.5s"),
        ("http_req_duration", "p(95)<500us"),
        ("http_req_duration", ""),
        ("http_req_duration", "p95<300"),
        ("http_req_duration", "p(95<300"),
        ("http_req_duration", "p(101)<300"),
        ("http_req_duration", "p()<300"),
        ("http_req_duration", "avgg<300"),
        ("http_req_duration", "rate<0.1"),
        ("http_req_duration", "count<10"),
        ("http_req_duration", "p(95)=300"),
        ("http_req_duration", "p(95)"),
        ("http_req_duration", "p(95) 300"),
        ("http_req_duration", "p(95)<"),
        ("http_req_duration", "p(95)<fast"),
        ("http_req_duration", "p(95)<300 ms"),
        ("http_req_duration", "p(95)<300sec"),
        ("http_req_duration", "p(95)<300 && avg<100"),
        ("http_req_failed", "rate<1%"),
        ("http_req_failed", "rate<0.01s"),
        ("http_req_failed", "avg<0.1"),
        ("checks", "count>0"),
        ("http_reqs", "p(95)<10"),
        ("vus", "avg<10"),
        ("vus_max", "value<10s"),
        ("http_req_durations", "p(95)<300"),
        ("http_req_dsn", "p(95)<300"),
        ("http_req_duration{status:abc}", "p(95)<300"),
        ("http_req_duration{status:200", "p(95)<300"),
        ("http_req_duration{}", "p(95)<300"),
        ("http_req_duration{url:http://x}", "p(95)<300"),
        ("http_req_duration{status:200,status:201}", "p(95)<300"),
        ("checks{status:200}", "rate>0.9"),
        ("group_duration{method:GET}", "p(95)<300"),
        ("iterations{step:cart}", "count>0"),
        ("dropped_iterations{reason:no_vu}", "count==0"),
        ("http_req_failed{reason:saturated}", "rate<0.01"),
        ("vus{scenario:a}", "value<10"),
        ("http_req_duration{expected_response:yes}", "p(95)<300"),
        ("http_req_duration", "p(95)<1.2.3"),
        ("http_req_duration", "p(95)<µ"),
    ];

    #[test]
    fn parser_golden() {
        let mut out = String::new();
        for (metric, expr) in CASES {
            out.push_str(&format!("{metric} {expr:?}\n  {}\n", render(metric, expr)));
        }
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/golden/thresholds/parse.txt"
        );
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(std::path::Path::new(path).parent().unwrap()).unwrap();
            std::fs::write(path, &out).unwrap();
        }
        let golden = std::fs::read_to_string(path).unwrap_or_default();
        assert_eq!(
            out, golden,
            "parser output differs from {path}; rerun with UPDATE_GOLDEN=1 and review the diff"
        );
    }

    #[test]
    fn every_phase_has_a_trend_metric() {
        for phase in Phase::ALL {
            let name = format!("http_req_{}", phase.as_str());
            assert_eq!(metric_kind(&name), Some(MetricKind::Trend), "{name}");
        }
    }

    #[test]
    fn errors_report_the_column_in_the_expression() {
        assert_eq!(
            parse("http_req_duration", "p(95) =300")
                .unwrap_err()
                .column(),
            Some(7)
        );
        assert_eq!(
            parse("http_req_duration", "avg<3x").unwrap_err().column(),
            Some(6)
        );
        assert_eq!(
            parse("http_req_duration", "p(95)<20ms")
                .unwrap_err()
                .column(),
            Some(9)
        );
        assert_eq!(
            parse("http_req_failed", "rate<0.1s").unwrap_err().column(),
            Some(9)
        );
        assert_eq!(parse("nope", "rate<0.1").unwrap_err().column(), None);
    }

    #[test]
    fn negative_threshold_durations_are_rejected() {
        let err = parse("http_req_duration", "p(95)<-20").unwrap_err();
        assert_eq!(err.column(), Some(7));
        assert_eq!(
            err.to_string(),
            "column 7: `-20` is negative; the limit is a duration, never below zero"
        );
        assert_eq!(
            parse("http_req_waiting", "avg < -1").unwrap_err().column(),
            Some(7)
        );
        assert_eq!(
            parse("http_req_failed", "rate<-0.1").unwrap_err().column(),
            Some(6)
        );
        assert_eq!(
            parse("dropped_iterations", "count<=-0")
                .unwrap_err()
                .column(),
            Some(8)
        );
        assert_eq!(parse("http_reqs", "rate>-5").unwrap_err().column(), Some(6));
        // A negative exponent is not a negative value.
        assert_eq!(parse("http_req_failed", "rate<1e-3").unwrap().value, 0.001);
        assert_eq!(parse("http_req_duration", "p(95)<+20").unwrap().value, 20.0);
    }

    #[derive(Default)]
    struct Source {
        trends: HashMap<&'static str, crate::load::hist::HistSnapshot>,
        rates: HashMap<&'static str, RateValue>,
        counters: HashMap<&'static str, CounterValue>,
        gauges: HashMap<&'static str, f64>,
    }

    impl MetricSource for Source {
        fn trend(&self, metric: &str) -> Option<&dyn Trend> {
            self.trends.get(metric).map(|h| h as &dyn Trend)
        }
        fn rate(&self, metric: &str) -> Option<RateValue> {
            self.rates.get(metric).copied()
        }
        fn counter(&self, metric: &str) -> Option<CounterValue> {
            self.counters.get(metric).copied()
        }
        fn gauge(&self, metric: &str) -> Option<f64> {
            self.gauges.get(metric).copied()
        }
    }

    fn source() -> Source {
        let h = Histogram::new();
        for ms in 1..=100u64 {
            h.record(Duration::from_millis(ms));
        }
        let mut src = Source::default();
        src.trends.insert("http_req_duration", h.snapshot());
        src.trends
            .insert("http_req_duration{status:200}", Histogram::new().snapshot());
        src.gauges.insert("vus_max", 4.0);
        src.rates.insert(
            "http_req_failed",
            RateValue {
                hits: 3,
                total: 200,
            },
        );
        src.counters.insert(
            "http_reqs",
            CounterValue {
                count: 200.0,
                per_second: 20.0,
            },
        );
        src
    }

    fn eval(metric: &str, expr: &str, src: &Source) -> ThresholdResult {
        parse(metric, expr).expect("valid threshold").evaluate(src)
    }

    #[test]
    fn evaluation_uses_the_right_aggregate() {
        let src = source();
        let r = eval("http_req_duration", "max<=100", &src);
        assert!(r.passed && r.observed == 100.0 && !r.no_data);
        assert!(!eval("http_req_duration", "max<100", &src).passed);
        assert!(eval("http_req_duration", "min==1", &src).passed);
        // k6 p(95) of 1..=100 ms: 95.05 ms; buckets keep it within 0.39%.
        let p95 = eval("http_req_duration", "p(95)<1000", &src).observed;
        assert!((p95 - 95.05).abs() < 95.05 * 0.004, "{p95}");
        assert!(eval("http_req_duration", "avg==50.5", &src).passed);
        assert!(!eval("http_req_duration", "med>60", &src).passed);
        assert!(eval("vus_max", "value==4", &src).passed);
        assert!(!eval("vus_max", "value<4", &src).passed);
        let failed = eval("http_req_failed", "rate<0.01", &src);
        assert!(!failed.passed && failed.observed == 0.015);
        assert!(eval("http_reqs", "count==200", &src).passed);
        assert!(eval("http_reqs", "rate>=20", &src).passed);
        assert!(!eval("http_reqs", "rate>20", &src).passed);
    }

    #[test]
    fn missing_metrics_evaluate_like_empty_k6_sinks() {
        let src = Source::default();
        let r = eval("http_req_duration", "p(95)<300", &src);
        assert!(r.passed && r.no_data && r.observed == 0.0);
        // k6: an empty trend compares as 0, so a lower bound fails.
        let r = eval("http_req_duration", "avg>1", &src);
        assert!(!r.passed && r.no_data);
        // k6: a rate with no samples passes whatever the bound.
        let r = eval("checks", "rate>0.99", &src);
        assert!(r.passed && r.no_data);
        assert!(eval("http_req_failed", "rate<0.01", &src).passed);
        assert!(eval("dropped_iterations", "count==0", &src).passed);
        assert!(!eval("vus_max", "value>0", &src).passed);
        // A registered sub-metric that saw nothing is no data too.
        let with = source();
        let r = eval("http_req_duration{status:200}", "p(95)<300", &with);
        assert!(r.passed && r.no_data);
    }

    #[test]
    fn abort_on_fail_waits_for_delay_abort_eval() {
        let spec = ThresholdSpec::parse("http_req_failed", "rate<0.01", true, Some("1m30s"))
            .expect("valid spec");
        assert_eq!(spec.delay_abort_eval, Duration::from_secs(90));
        let failing = spec.threshold.evaluate(&source());
        assert!(!spec.should_abort(&failing, Duration::from_secs(89)));
        assert!(spec.should_abort(&failing, Duration::from_secs(90)));
        let passing = ThresholdResult {
            passed: true,
            observed: 0.0,
            no_data: false,
        };
        assert!(!spec.should_abort(&passing, Duration::from_secs(100)));
        let plain = ThresholdSpec::parse("http_req_failed", "rate<0.01", false, None).unwrap();
        assert!(!plain.should_abort(&failing, Duration::from_secs(100)));
    }

    #[test]
    fn trend_values_are_bare_milliseconds() {
        // As k6: the limit is a bare number of milliseconds, and a unit is an error that says
        // what to write.
        let err = |expr| parse("http_req_duration", expr).unwrap_err().to_string();
        assert!(err("p(95)<500us").contains("write `0.5` for 500us"));
        assert!(err("p(95)<500µs").contains("write `0.5`"));
        assert!(err("p(95)<1.5s").contains("write `1500` for 1.5s"));
        assert!(err("p(95)<2m").contains("write `120000`"));
        assert!(err("p(95)<20ms").contains("k6 rejects `20ms`"));
        assert_eq!(
            parse("http_req_duration", "p(95)<300").unwrap().value,
            300.0
        );
    }

    #[test]
    fn delay_abort_eval_uses_the_shared_duration_grammar() {
        let d = |s| {
            ThresholdSpec::parse("checks", "rate>0.9", true, Some(s)).map(|t| t.delay_abort_eval)
        };
        assert_eq!(d("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(d("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(d("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(d("1.5h"), Ok(Duration::from_secs(5_400)));
        assert_eq!(d("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(d("0"), Ok(Duration::ZERO));
        assert!(d("10").is_err());
        assert!(d("10 parsecs").is_err());
        assert!(d("").is_err());
        let err = ThresholdSpec::parse("checks", "rate>0.9", true, Some("soon")).unwrap_err();
        assert!(matches!(err, ThresholdError::DelayAbortEval { .. }));
    }
}
