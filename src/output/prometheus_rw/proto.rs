//! The `prometheus.WriteRequest` messages of Prometheus' remote write 1.0 (`prompb/remote.proto`
//! and `prompb/types.proto`), as `prost` types. Only the messages and fields sloburn sends are
//! declared; tags and types are the schema's. The schema's `oneof`s (`count`, `zero_count`) are
//! `optional` fields here: on the wire a set `oneof` member and a set optional field are the same
//! bytes. `BucketSpan` is the exposition's (same tags and types). Declared, not generated: no
//! maintained crate publishes these messages for the prost sloburn builds with.

use crate::metrics::proto::BucketSpan;

#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

/// One series: its labels (`__name__` included, sorted by name) and its samples or histograms.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    pub histograms: Vec<Histogram>,
}

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, prost::Message)]
pub struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Milliseconds since the Unix epoch.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// A native histogram with integer counts.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Histogram {
    #[prost(uint64, optional, tag = "1")]
    pub count_int: Option<u64>,
    #[prost(double, tag = "3")]
    pub sum: f64,
    #[prost(sint32, tag = "4")]
    pub schema: i32,
    #[prost(double, tag = "5")]
    pub zero_threshold: f64,
    #[prost(uint64, optional, tag = "6")]
    pub zero_count_int: Option<u64>,
    #[prost(message, repeated, tag = "11")]
    pub positive_spans: Vec<BucketSpan>,
    #[prost(sint64, repeated, packed = "true", tag = "12")]
    pub positive_deltas: Vec<i64>,
    #[prost(int64, tag = "15")]
    pub timestamp: i64,
}
