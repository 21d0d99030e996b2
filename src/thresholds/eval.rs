//! Evaluating thresholds against a run's aggregates, read through [`MetricSource`] and
//! [`Trend`], with k6's no-data rules; `ThresholdSpec`, a metric's thresholds as configured.

use crate::units;
use std::fmt;
use std::time::Duration;

use super::*;

/// Rate samples: `hits` of `total` samples were true (failed requests for `http_req_failed`,
/// passing checks for `checks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateValue {
    pub hits: u64,
    pub total: u64,
}

/// A counter's total and its average per second over the run so far.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CounterValue {
    pub count: f64,
    pub per_second: f64,
}

/// A trend metric's distribution (a histogram read at one moment).
pub trait Trend {
    fn count(&self) -> u64;
    fn mean(&self) -> Duration;
    fn min(&self) -> Duration;
    fn max(&self) -> Duration;
    fn median(&self) -> Duration;
    /// `q` in 0..=1.
    fn quantile(&self, q: f64) -> Duration;
}

/// The run's aggregates, as the runner holds them, looked up by the metric's k6 name
/// ([`MetricRef::key`], so sub-metrics too). `None` means the run never recorded the metric,
/// which evaluates like k6's empty sinks.
pub trait MetricSource {
    fn trend(&self, metric: &str) -> Option<&dyn Trend>;
    fn rate(&self, metric: &str) -> Option<RateValue>;
    fn counter(&self, metric: &str) -> Option<CounterValue>;
    fn gauge(&self, metric: &str) -> Option<f64>;
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThresholdResult {
    pub passed: bool,
    /// The aggregate compared with the limit (milliseconds for trends); 0 when `no_data`.
    pub observed: f64,
    /// The metric had no samples. Trends (and metrics the run does not know) were then
    /// compared as 0, as in k6; a rate threshold passed without a comparison.
    pub no_data: bool,
}

pub(super) fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl Threshold {
    pub fn evaluate(&self, src: &dyn MetricSource) -> ThresholdResult {
        let compare = |observed: f64, no_data: bool| ThresholdResult {
            passed: self.op.holds(observed, self.value),
            observed,
            no_data,
        };
        match self.target.kind {
            MetricKind::Trend => match src.trend(&self.metric) {
                Some(h) if h.count() > 0 => {
                    let d = match self.aggregation {
                        Aggregation::Avg => h.mean(),
                        Aggregation::Min => h.min(),
                        Aggregation::Max => h.max(),
                        Aggregation::Med => h.median(),
                        Aggregation::Percentile(n) => h.quantile(n / 100.0),
                        _ => Duration::ZERO,
                    };
                    compare(millis(d), false)
                }
                _ => compare(0.0, true),
            },
            MetricKind::Counter => match src.counter(&self.metric) {
                // A count of 0 is a real figure, not a missing one.
                Some(c) => compare(
                    if self.aggregation == Aggregation::Count {
                        c.count
                    } else {
                        c.per_second
                    },
                    false,
                ),
                _ => compare(0.0, true),
            },
            MetricKind::Rate => match src.rate(&self.metric) {
                Some(r) if r.total > 0 => compare(r.hits as f64 / r.total as f64, false),
                _ => ThresholdResult {
                    passed: true,
                    observed: 0.0,
                    no_data: true,
                },
            },
            MetricKind::Gauge => match src.gauge(&self.metric) {
                Some(v) => compare(v, false),
                None => compare(0.0, true),
            },
        }
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.metric, self.source)
    }
}

/// A threshold with k6's object-form options (`abortOnFail`, `delayAbortEval`).
#[derive(Debug, Clone, PartialEq)]
pub struct ThresholdSpec {
    pub threshold: Threshold,
    /// Stop the run as soon as this threshold fails (checked while the run is in progress).
    pub abort_on_fail: bool,
    /// How long into the run before a failure may abort it, so early noise cannot.
    pub delay_abort_eval: Duration,
}

impl ThresholdSpec {
    /// The string form `"p(95)<300"` is `ThresholdSpec::parse(m, e, false, None)`; the object
    /// form `{threshold, abortOnFail, delayAbortEval: "10s"}` passes its fields through.
    pub fn parse(
        metric: &str,
        expr: &str,
        abort_on_fail: bool,
        delay_abort_eval: Option<&str>,
    ) -> Result<ThresholdSpec, ThresholdError> {
        let threshold = parse(metric, expr)?;
        let delay_abort_eval = match delay_abort_eval {
            Some(s) => {
                units::parse_duration(s).map_err(|message| ThresholdError::DelayAbortEval {
                    value: s.to_string(),
                    message,
                })?
            }
            None => Duration::ZERO,
        };
        Ok(ThresholdSpec {
            threshold,
            abort_on_fail,
            delay_abort_eval,
        })
    }

    /// Whether this result, observed `elapsed` into the run, must stop the run now.
    pub fn should_abort(&self, result: &ThresholdResult, elapsed: Duration) -> bool {
        self.abort_on_fail && !result.passed && elapsed >= self.delay_abort_eval
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::Histogram;
    use std::collections::HashMap;

    #[derive(Default)]
    struct Source {
        trends: HashMap<&'static str, crate::hist::HistSnapshot>,
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
