//! OpenTelemetry for load requests and for the daemon itself (issue 14).
//!
//! A layer-2 module: it knows `http` (the [`Outcome`](crate::http::Outcome) a request span
//! records) and nothing above, so `load` can call it. The pieces:
//! - [`TelemetryConfig`]: the validated `telemetry:` section (parsed by `config::telemetry`);
//! - [`sampling::Sampler`]: the per-iteration head-sampling decision (no allocation when not
//!   sampled);
//! - [`propagation`]: W3C `traceparent`/`tracestate` header values;
//! - [`spans::Tracer`]: run → iteration → request spans with the HTTP semantic conventions;
//! - [`export`]: the OTLP exporter behind a bounded, counting batch processor;
//! - [`daemon`]: the `tracing-opentelemetry` layer for the daemon's own spans.

use std::time::Duration;

use http::HeaderValue;

pub mod daemon;
pub mod export;
pub mod propagation;
pub mod redact;
pub mod sampling;
pub mod spans;

pub use export::{ExportStats, Exporter};
pub use sampling::Sampler;
pub use spans::{IterSpan, ReqSpan, RunSpan, StepDesc, Tracer};

/// How spans travel to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/HTTP with protobuf bodies (`http://`, `https://`): the default.
    HttpProtobuf,
    /// OTLP/gRPC (`grpc://`, or `OTEL_EXPORTER_OTLP_PROTOCOL=grpc` without an endpoint).
    Grpc,
}

/// `telemetry.otlp`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OtlpConfig {
    /// As written, `grpc://` turned into `http://` for tonic. `None`: the standard
    /// `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT` variables, then the OTLP default.
    pub endpoint: Option<String>,
    /// `None`: from `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`, else OTLP/HTTP.
    pub protocol: Option<Protocol>,
    /// Sent with every export; values may hold secrets (sensitive `HeaderValue`s).
    pub headers: Vec<(String, HeaderValue)>,
    /// Bounds one export; `None`: `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT`, else 10 s.
    pub timeout: Option<Duration>,
}

/// `telemetry.traces`.
#[derive(Debug, Clone, PartialEq)]
pub struct TracesConfig {
    /// Share of iterations traced, 0 to 1 (head sampling, decided per iteration).
    pub sample_ratio: f64,
    /// Send `traceparent` (and `tracestate` when set) on sampled load requests.
    pub propagate: bool,
    /// Sent as `tracestate` on sampled requests when set (already validated).
    pub tracestate: Option<String>,
    /// Spans waiting for export at most; past it new spans are dropped and counted.
    pub max_queue_size: usize,
    /// Spans per export request at most.
    pub max_export_batch_size: usize,
    /// How long a span waits for its batch at most.
    pub schedule_delay: Duration,
}

impl Default for TracesConfig {
    fn default() -> Self {
        TracesConfig {
            sample_ratio: 0.01,
            propagate: true,
            tracestate: None,
            max_queue_size: 2048,
            max_export_batch_size: 512,
            schedule_delay: Duration::from_secs(1),
        }
    }
}

/// The validated `telemetry:` section.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryConfig {
    pub otlp: OtlpConfig,
    pub traces: TracesConfig,
    /// `resource:` attributes, in config order; they win over every other source.
    pub resource: Vec<(String, String)>,
}

/// Environment variables that the Kubernetes Downward API fills (see `deploy/examples/otel`),
/// and the resource attribute each becomes.
pub const K8S_ENV: [(&str, &str); 3] = [
    ("POD_NAME", "k8s.pod.name"),
    ("POD_NAMESPACE", "k8s.namespace.name"),
    ("NODE_NAME", "k8s.node.name"),
];
