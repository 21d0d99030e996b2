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
