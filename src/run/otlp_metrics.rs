//! `--out opentelemetry`: the run's figures as an OTLP/HTTP metrics export
//! (`opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest`, protobuf), pushed by
//! the same pusher as remote write (`remote_write`). Trends are exponential histograms (scale 3,
//! cumulative), rates monotonic cumulative sums; every point carries the run's labels as
//! attributes (`profile`, `target`, `step`, `journey`, `testid`).
//!
//! The messages are `prost` types declared here with the tags and types of the published
//! `opentelemetry/proto/metrics/v1/metrics.proto`, only the fields sent (see docs/internals.md
//! for why they are declared rather than generated). The schema's `oneof`s (`Metric.data`,
//! `NumberDataPoint.value`, `AnyValue.value`) are optional fields: the same bytes on the wire.

use super::remote_write::{RunLabels, native_buckets};
use crate::hist::HistSnapshot;
use crate::load::record::RunRecord;
use crate::names;

/// The exponential histograms' scale (OTLP's name for Prometheus' schema).
pub const SCALE: i32 = 3;
/// `AGGREGATION_TEMPORALITY_CUMULATIVE`.
const CUMULATIVE: i32 = 2;

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportMetricsServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub resource_metrics: Vec<ResourceMetrics>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ResourceMetrics {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_metrics: Vec<ScopeMetrics>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ScopeMetrics {
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub metrics: Vec<Metric>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct InstrumentationScope {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub version: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Metric {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub description: String,
    #[prost(string, tag = "3")]
    pub unit: String,
    #[prost(message, optional, tag = "7")]
    pub sum: Option<Sum>,
    #[prost(message, optional, tag = "10")]
    pub exponential_histogram: Option<ExponentialHistogram>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Sum {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
    #[prost(int32, tag = "2")]
    pub aggregation_temporality: i32,
    #[prost(bool, tag = "3")]
    pub is_monotonic: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NumberDataPoint {
    #[prost(fixed64, tag = "2")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    #[prost(sfixed64, optional, tag = "6")]
    pub as_int: Option<i64>,
    #[prost(message, repeated, tag = "7")]
    pub attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExponentialHistogram {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<ExponentialHistogramDataPoint>,
    #[prost(int32, tag = "2")]
    pub aggregation_temporality: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExponentialHistogramDataPoint {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
    #[prost(fixed64, tag = "2")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    #[prost(fixed64, tag = "4")]
    pub count: u64,
    #[prost(double, optional, tag = "5")]
    pub sum: Option<f64>,
    #[prost(sint32, tag = "6")]
    pub scale: i32,
    #[prost(fixed64, tag = "7")]
    pub zero_count: u64,
    #[prost(message, optional, tag = "8")]
    pub positive: Option<Buckets>,
    #[prost(double, optional, tag = "12")]
    pub min: Option<f64>,
    #[prost(double, optional, tag = "13")]
    pub max: Option<f64>,
}

/// Consecutive bucket counts from `offset`: bucket `offset + i` holds `(base^(offset+i),
/// base^(offset+i+1)]`, `base = 2^(2^-scale)`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Buckets {
    #[prost(sint32, tag = "1")]
    pub offset: i32,
    #[prost(uint64, repeated, packed = "true", tag = "2")]
    pub bucket_counts: Vec<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AnyValue {
    #[prost(string, optional, tag = "1")]
    pub string_value: Option<String>,
}

fn attributes(run: &RunLabels, extra: &[(&str, &str)]) -> Vec<KeyValue> {
    [
        ("profile", run.profile.as_str()),
        ("target", run.target.as_str()),
    ]
    .into_iter()
    .chain(run.testid.as_deref().map(|t| ("testid", t)))
    .chain(extra.iter().copied())
    .filter(|(_, v)| !v.is_empty())
    .map(|(k, v)| KeyValue {
        key: k.to_string(),
        value: Some(AnyValue {
            string_value: Some(v.to_string()),
        }),
    })
    .collect()
}

/// `h` as an OTLP exponential histogram point; OTLP's bucket `i` is Prometheus' key `i + 1`.
fn exp_point(
    h: &HistSnapshot,
    attributes: Vec<KeyValue>,
    start: u64,
    now: u64,
) -> ExponentialHistogramDataPoint {
    let read = native_buckets(h, SCALE);
    let positive = match (read.buckets.first(), read.buckets.last()) {
        (Some(&(first, _)), Some(&(last, _))) => {
            let mut counts = vec![0u64; (last - first + 1) as usize];
            for &(key, n) in &read.buckets {
                counts[(key - first) as usize] = n;
            }
            Some(Buckets {
                offset: (first - 1) as i32,
                bucket_counts: counts,
            })
        }
        _ => None,
    };
    let seconds = |d: std::time::Duration| d.as_secs_f64();
    ExponentialHistogramDataPoint {
        attributes,
        start_time_unix_nano: start,
        time_unix_nano: now,
        count: h.count(),
        sum: Some(seconds(h.sum())),
        scale: SCALE,
        zero_count: read.zero,
        positive,
        min: (h.count() > 0).then(|| seconds(h.min())),
        max: (h.count() > 0).then(|| seconds(h.max())),
    }
}

fn sum_metric(name: &str, unit: &str, points: Vec<NumberDataPoint>) -> Metric {
    Metric {
        name: name.to_string(),
        description: String::new(),
        unit: unit.to_string(),
        sum: Some(Sum {
            data_points: points,
            aggregation_temporality: CUMULATIVE,
            is_monotonic: true,
        }),
        exponential_histogram: None,
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
        as_int: Some(i64::try_from(v).unwrap_or(i64::MAX)),
        attributes: attributes(run, extra),
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
            description: String::new(),
            unit: "s".into(),
            sum: None,
            exponential_histogram: Some(ExponentialHistogram {
                data_points: durations,
                aggregation_temporality: CUMULATIVE,
            }),
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
    let points = metrics
        .iter()
        .map(|m| {
            m.sum.as_ref().map_or(0, |s| s.data_points.len())
                + m.exponential_histogram
                    .as_ref()
                    .map_or(0, |h| h.data_points.len())
        })
        .sum::<usize>() as u64;
    let request = ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![KeyValue {
                    key: "service.name".into(),
                    value: Some(AnyValue {
                        string_value: Some("sloburn".into()),
                    }),
                }],
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "sloburn".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                }),
                metrics,
            }],
        }],
    };
    (request, points)
}
