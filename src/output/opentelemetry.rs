//! `--out opentelemetry[=URL[?interval=5s]]`: the run's figures as an OTLP/HTTP metrics export
//! (`opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest`, protobuf), pushed
//! as remote write is (`push`). Trends are exponential histograms (scale 3, cumulative), rates
//! monotonic cumulative sums; every point carries the run's labels as attributes (`profile`,
//! `target`, `step`, `journey`, `testid`).
//!
//! The messages are the `opentelemetry-proto` crate's, generated from the published
//! `opentelemetry/proto` (the same crate the trace exporter sends with).

use super::push::{Batch, Encoding, Push, PushOptions, RunLabels, Series};
use crate::hist::HistSnapshot;
use crate::load::record::RunRecord;
use crate::names;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, ExponentialHistogram, ExponentialHistogramDataPoint, Metric,
    NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum, exponential_histogram_data_point, metric,
    number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

/// The `--out` name.
pub const NAME: &str = "opentelemetry";
/// The exponential histograms' scale (OTLP's name for Prometheus' schema).
pub const SCALE: i32 = 3;
const CUMULATIVE: i32 = AggregationTemporality::Cumulative as i32;

/// OTLP/HTTP metrics, protobuf.
pub struct Otlp;

/// Where `opentelemetry` with no value sends: where the OpenTelemetry SDKs send by default.
pub fn default_endpoint() -> String {
    std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or_else(|_| "http://localhost:4318".into())
}

/// The output of an `opentelemetry=` value, `URL[?interval=DURATION]`: the URL is the
/// endpoint's base (`/v1/metrics` is added unless the path already ends with it); `native` is
/// not an option (its trends are always exponential histograms).
pub fn output(value: &str) -> Result<Push<Otlp>, String> {
    let mut opts = PushOptions::parse(value, |key, _| {
        Err(format!("unknown option `{key}`: use interval=DURATION"))
    })?;
    if !opts.url.path().ends_with("/v1/metrics") {
        let url = value.split_once('?').map_or(value, |(url, _)| url);
        let joined = format!(
            "{}/v1/metrics",
            url.split('#').next().unwrap_or(url).trim_end_matches('/')
        );
        opts.url = joined
            .parse()
            .map_err(|e| format!("`{joined}` is not a URL: {e}"))?;
    }
    Ok(Push::new(opts, Otlp))
}

impl Encoding for Otlp {
    fn name(&self) -> &'static str {
        NAME
    }

    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    fn encode(&self, snap: &RunRecord, run: &Series, now_ms: i64) -> Batch {
        let now = u64::try_from(now_ms).unwrap_or(0) * 1_000_000;
        let (req, points) = export_request(snap, &run.labels, run.start_ns, now);
        Batch {
            body: req.encode_to_vec().into(),
            samples: points,
        }
    }
}

fn string_value(v: &str) -> Option<AnyValue> {
    Some(AnyValue {
        value: Some(any_value::Value::StringValue(v.to_string())),
    })
}

fn attributes(run: &RunLabels, extra: &[(&str, &str)]) -> Vec<KeyValue> {
    run.pairs(extra)
        .map(|(k, v)| KeyValue {
            key: k.to_string(),
            value: string_value(v),
            ..KeyValue::default()
        })
        .collect()
}

/// `h` as an OTLP exponential histogram point: the histogram's own buckets merged exactly to
/// [`SCALE`].
fn exp_point(
    h: &HistSnapshot,
    attributes: Vec<KeyValue>,
    start: u64,
    now: u64,
) -> ExponentialHistogramDataPoint {
    let view = h.otlp(SCALE);
    let positive = (!view.counts.is_empty()).then_some(exponential_histogram_data_point::Buckets {
        offset: view.offset,
        bucket_counts: view.counts,
    });
    let seconds = |d: std::time::Duration| d.as_secs_f64();
    ExponentialHistogramDataPoint {
        attributes,
        start_time_unix_nano: start,
        time_unix_nano: now,
        count: h.count(),
        sum: Some(seconds(h.sum())),
        scale: view.scale,
        zero_count: view.zero_count,
        positive,
        min: (h.count() > 0).then(|| seconds(h.min())),
        max: (h.count() > 0).then(|| seconds(h.max())),
        ..ExponentialHistogramDataPoint::default()
    }
}

fn sum_metric(name: &str, unit: &str, points: Vec<NumberDataPoint>) -> Metric {
    Metric {
        name: name.to_string(),
        unit: unit.to_string(),
        data: Some(metric::Data::Sum(Sum {
            data_points: points,
            aggregation_temporality: CUMULATIVE,
            is_monotonic: true,
        })),
        ..Metric::default()
    }
}

/// The data points a metric holds.
fn points_of(m: &Metric) -> usize {
    match &m.data {
        Some(metric::Data::Sum(s)) => s.data_points.len(),
        Some(metric::Data::ExponentialHistogram(h)) => h.data_points.len(),
        _ => 0,
    }
}

/// One export of `snap`'s figures at `now` (ns since the epoch), cumulative since `start`;
/// with the number of data points it holds.
pub fn export_request(
    snap: &RunRecord,
    run: &RunLabels,
    start: u64,
    now: u64,
) -> (ExportMetricsServiceRequest, u64) {
    let point = |extra: &[(&str, &str)], v: u64| NumberDataPoint {
        start_time_unix_nano: start,
        time_unix_nano: now,
        value: Some(number_data_point::Value::AsInt(
            i64::try_from(v).unwrap_or(i64::MAX),
        )),
        attributes: attributes(run, extra),
        ..NumberDataPoint::default()
    };
    let mut reqs = Vec::new();
    let mut failed = Vec::new();
    let mut durations = Vec::new();
    for step in &snap.steps {
        let at = [
            ("journey", step.journey.as_deref().unwrap_or("")),
            ("step", step.name.as_str()),
        ];
        reqs.push(point(&at, step.requests));
        failed.push(point(&at, step.failed));
        durations.push(exp_point(&step.duration, attributes(run, &at), start, now));
    }
    let mut metrics = vec![
        sum_metric(names::HTTP_REQS_TOTAL, "1", reqs),
        sum_metric(names::HTTP_REQS_FAILED_TOTAL, "1", failed),
        Metric {
            name: names::HTTP_REQ_DURATION.into(),
            unit: "s".into(),
            data: Some(metric::Data::ExponentialHistogram(ExponentialHistogram {
                data_points: durations,
                aggregation_temporality: CUMULATIVE,
            })),
            ..Metric::default()
        },
    ];
    for (name, unit, v) in [
        (names::ITERATIONS_TOTAL, "1", snap.iterations),
        (names::DROPPED_ITERATIONS_TOTAL, "1", snap.dropped),
        (names::DATA_SENT_TOTAL, "By", snap.data_sent),
        (names::DATA_RECEIVED_TOTAL, "By", snap.data_received),
    ] {
        metrics.push(sum_metric(name, unit, vec![point(&[], v)]));
    }
    let points = metrics.iter().map(points_of).sum::<usize>() as u64;
    let request = ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![KeyValue {
                    key: "service.name".into(),
                    value: string_value("sloburn"),
                    ..KeyValue::default()
                }],
                ..Resource::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "sloburn".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..InstrumentationScope::default()
                }),
                metrics,
                ..ScopeMetrics::default()
            }],
            ..ResourceMetrics::default()
        }],
    };
    (request, points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn otlp_urls_are_the_endpoint_with_v1_metrics_and_take_no_native() {
        for (given, url) in [
            ("http://c:4318", "http://c:4318/v1/metrics"),
            ("http://c:4318/", "http://c:4318/v1/metrics"),
            (
                "http://c:4318/v1/metrics?interval=1s",
                "http://c:4318/v1/metrics",
            ),
        ] {
            let o = output(given).unwrap();
            assert_eq!(o.options().url.to_string(), url);
        }
        let e = output("http://c:4318?native=true").err().unwrap();
        assert!(
            e.contains("unknown option `native`: use interval=DURATION"),
            "{e}"
        );
    }
}
