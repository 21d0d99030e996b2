//! The OTLP exporter behind the SDK's batch processor, with a bounded queue whose losses are
//! counted.
//!
//! The SDK's `BatchSpanProcessor` keeps its own drop count private, so a thin processor in
//! front of it admits a span only while fewer than `max_queue_size` spans are queued or being
//! exported (`in_flight`), and the exporter in between gives the slots back when a batch is
//! done. Admission is one atomic add; a span that finds the queue full is dropped and counted
//! at once, a batch the collector refused (or could not be reached for) is counted when its
//! export fails. Nothing blocks the thread that ended the span, so the load never slows.
//!
//! OTLP/HTTP goes through sloburn's own [`crate::http::Client`] (no second HTTP stack), on a
//! one-thread runtime owned by the [`Exporter`]; OTLP/gRPC uses tonic on the same runtime.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use opentelemetry::KeyValue;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanData, SpanExporter,
    SpanProcessor,
};
use tokio::sync::Mutex as AsyncMutex;

use super::{K8S_ENV, Protocol, TelemetryConfig};
use crate::http::{Client, ClientOptions, Conn, RequestSpec, Resolver};

/// Span counts since the exporter started.
#[derive(Debug, Default)]
pub struct ExportStats {
    /// Spans ended and admitted to the queue.
    pub queued: AtomicU64,
    /// Spans the collector accepted.
    pub exported: AtomicU64,
    /// Spans dropped because the queue was full.
    pub dropped_queue_full: AtomicU64,
    /// Spans in batches whose export failed (collector down, refused, timed out).
    pub dropped_export_failed: AtomicU64,
    /// Queued or being exported now; bounded by `max_queue_size`.
    pub in_flight: AtomicU64,
}

impl ExportStats {
    /// `sloburn_telemetry_spans_dropped_total`: every span that never reached the collector.
    pub fn dropped(&self) -> u64 {
        self.dropped_queue_full.load(Ordering::Relaxed)
            + self.dropped_export_failed.load(Ordering::Relaxed)
    }

    pub fn exported(&self) -> u64 {
        self.exported.load(Ordering::Relaxed)
    }
}

/// The tracer provider with its export runtime. Dropping it without [`Exporter::shutdown`]
/// loses the spans still queued.
pub struct Exporter {
    provider: SdkTracerProvider,
    processor: Arc<BoundedProcessor>,
    stats: Arc<ExportStats>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Exporter {
    /// Builds the exporter, the bounded batch processor and the resource. Binds nothing and
    /// sends nothing until the first batch is due. `Err` is a message for the log (a bad
    /// endpoint from the environment, say).
    pub fn start(cfg: &TelemetryConfig) -> Result<Exporter, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .thread_name("sloburn-otlp")
            .build()
            .map_err(|e| format!("starting the OTLP runtime: {e}"))?;
        let handle = runtime.handle().clone();
        let stats = Arc::new(ExportStats::default());
        let inner = build_exporter(cfg, &handle)?;
        let counting = CountingExporter {
            inner,
            stats: stats.clone(),
        };
        let traces = &cfg.traces;
        let max_queue = traces.max_queue_size.max(1);
        let batch = BatchConfigBuilder::default()
            .with_max_queue_size(max_queue)
            .with_max_export_batch_size(traces.max_export_batch_size.clamp(1, max_queue))
            .with_scheduled_delay(traces.schedule_delay)
            .build();
        let mut processor = BatchSpanProcessor::builder(counting)
            .with_batch_config(batch)
            .build();
        let resource = resource(&cfg.resource);
        // Set here rather than by the provider: the processor is shared (the daemon's own
        // spans go through it too), so the provider only sees a handle.
        processor.set_resource(&resource);
        let bounded = Arc::new(BoundedProcessor {
            inner: processor,
            stats: stats.clone(),
            max_queue: max_queue as u64,
        });
        let provider = SdkTracerProvider::builder()
            .with_span_processor(SharedProcessor(bounded.clone()))
            .with_resource(resource)
            .build();
        Ok(Exporter {
            provider,
            processor: bounded,
            stats,
            runtime: Some(runtime),
        })
    }

    pub fn tracer(&self, scope: &'static str) -> SdkTracer {
        use opentelemetry::trace::TracerProvider as _;
        self.provider.tracer(scope)
    }

    pub fn provider(&self) -> &SdkTracerProvider {
        &self.provider
    }

    /// The bounded processor, as a [`SpanProcessor`] another provider can end spans into
    /// (the daemon's `tracing` spans, see `telemetry::daemon`).
    pub fn processor(&self) -> SharedProcessor {
        SharedProcessor(self.processor.clone())
    }

    pub fn stats(&self) -> &Arc<ExportStats> {
        &self.stats
    }

    /// Exports what is queued, waiting at most `timeout`.
    pub fn flush(&self) -> OTelSdkResult {
        self.provider.force_flush()
    }

    /// Flushes and stops; spans ended later are dropped.
    pub fn shutdown(mut self, timeout: Duration) {
        let _ = self.provider.shutdown_with_timeout(timeout);
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// The resource, lowest precedence first: the SDK's detectors (`OTEL_SERVICE_NAME`,
/// `OTEL_RESOURCE_ATTRIBUTES`), sloburn's defaults (`service.name: sloburn` unless the
/// environment named one, `service.version`), the Downward-API variables of [`K8S_ENV`], and
/// last the config's `resource:`, which wins.
pub fn resource(config: &[(String, String)]) -> Resource {
    let detected = Resource::builder().build();
    let named = detected
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .is_some_and(|v| !v.as_str().starts_with("unknown_service"));
    let mut b = Resource::builder()
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if !named {
        b = b.with_service_name("sloburn");
    }
    for (var, key) in K8S_ENV {
        if let Ok(v) = std::env::var(var)
            && !v.is_empty()
        {
            b = b.with_attribute(KeyValue::new(key, v));
        }
    }
    b.with_attributes(
        config
            .iter()
            .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
    )
    .build()
}

/// The protocol in force: config's, else `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else
/// `OTEL_EXPORTER_OTLP_PROTOCOL`, else OTLP/HTTP.
pub fn protocol(cfg: &TelemetryConfig) -> Protocol {
    if let Some(p) = cfg.otlp.protocol {
        return p;
    }
    for var in [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        if let Ok(v) = std::env::var(var) {
            return if v.trim() == "grpc" {
                Protocol::Grpc
            } else {
                Protocol::HttpProtobuf
            };
        }
    }
    Protocol::HttpProtobuf
}

/// A config endpoint is a base URL as in `OTEL_EXPORTER_OTLP_ENDPOINT`: OTLP/HTTP appends
/// `/v1/traces` when it has no path of its own.
pub fn http_endpoint(base: &str) -> String {
    let trimmed = base.trim_end_matches('/');
    let after_scheme = trimmed.split_once("://").map_or(trimmed, |(_, r)| r);
    if after_scheme.contains('/') {
        trimmed.to_string()
    } else {
        format!("{trimmed}/v1/traces")
    }
}

/// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, else `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds), else
/// the OTLP default of 10 s.
fn env_timeout() -> Duration {
    [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.trim().parse::<u64>().ok())
    .map_or(Duration::from_secs(10), Duration::from_millis)
}

enum AnyExporter {
    Http(opentelemetry_otlp::SpanExporter),
    Grpc(opentelemetry_otlp::SpanExporter),
}

fn build_exporter(
    cfg: &TelemetryConfig,
    rt: &tokio::runtime::Handle,
) -> Result<AnyExporter, String> {
    let otlp = &cfg.otlp;
    let headers: Vec<(HeaderName, HeaderValue)> = otlp
        .headers
        .iter()
        .filter_map(|(k, v)| Some((HeaderName::from_bytes(k.as_bytes()).ok()?, v.clone())))
        .collect();
    match protocol(cfg) {
        Protocol::HttpProtobuf => {
            // The client's own bound: the export timeout as the exporter resolves it.
            let timeout = otlp.timeout.unwrap_or_else(env_timeout);
            let client = OtlpHttpClient::new(rt.clone(), headers.clone(), timeout);
            let mut b = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_http_client(client);
            if let Some(e) = &otlp.endpoint {
                b = b.with_endpoint(http_endpoint(e));
            }
            if let Some(t) = otlp.timeout {
                b = b.with_timeout(t);
            }
            // Config headers also go in here for the exporter's own bookkeeping; the client
            // sets them again on every request so that they win over OTEL_EXPORTER_OTLP_HEADERS.
            let map: HashMap<String, String> = headers
                .iter()
                .filter_map(|(k, v)| Some((k.to_string(), v.to_str().ok()?.to_string())))
                .collect();
            b = b.with_headers(map);
            b.build()
                .map(AnyExporter::Http)
                .map_err(|e| format!("building the OTLP/HTTP exporter: {e}"))
        }
        Protocol::Grpc => {
            let _guard = rt.enter();
            let mut map = http::HeaderMap::new();
            for (k, v) in &headers {
                map.insert(k.clone(), v.clone());
            }
            let meta = opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(map);
            let mut b = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_metadata(meta);
            if let Some(e) = &otlp.endpoint {
                b = b.with_endpoint(e.replacen("grpc://", "http://", 1));
            }
            if let Some(t) = otlp.timeout {
                b = b.with_timeout(t);
            }
            b.build()
                .map(AnyExporter::Grpc)
                .map_err(|e| format!("building the OTLP/gRPC exporter: {e}"))
        }
    }
}

/// Counts the outcome of each batch and gives its queue slots back.
struct CountingExporter {
    inner: AnyExporter,
    stats: Arc<ExportStats>,
}

impl std::fmt::Debug for CountingExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CountingExporter")
    }
}

impl SpanExporter for CountingExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let result = match &self.inner {
            AnyExporter::Http(e) | AnyExporter::Grpc(e) => e.export(batch).await,
        };
        match &result {
            Ok(()) => self.stats.exported.fetch_add(n, Ordering::Relaxed),
            Err(_) => self
                .stats
                .dropped_export_failed
                .fetch_add(n, Ordering::Relaxed),
        };
        self.stats.in_flight.fetch_sub(n, Ordering::Relaxed);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        match &self.inner {
            AnyExporter::Http(e) | AnyExporter::Grpc(e) => e.shutdown_with_timeout(timeout),
        }
    }

    fn set_resource(&mut self, resource: &Resource) {
        match &mut self.inner {
            AnyExporter::Http(e) | AnyExporter::Grpc(e) => e.set_resource(resource),
        }
    }
}

/// A handle on an [`Exporter`]'s bounded processor; its resource is the exporter's.
#[derive(Debug, Clone)]
pub struct SharedProcessor(Arc<BoundedProcessor>);

impl SpanProcessor for SharedProcessor {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.0.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        self.0.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
}

/// Admits a span to the batch processor only while its queue has room.
#[derive(Debug)]
struct BoundedProcessor {
    inner: BatchSpanProcessor,
    stats: Arc<ExportStats>,
    max_queue: u64,
}

impl SpanProcessor for BoundedProcessor {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        let before = self.stats.in_flight.fetch_add(1, Ordering::Relaxed);
        if before >= self.max_queue {
            self.stats.in_flight.fetch_sub(1, Ordering::Relaxed);
            self.stats
                .dropped_queue_full
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.stats.queued.fetch_add(1, Ordering::Relaxed);
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }
}

/// OTLP/HTTP over sloburn's client, one kept-alive connection, on the exporter's runtime.
#[derive(Clone)]
struct OtlpHttpClient {
    rt: tokio::runtime::Handle,
    client: Client,
    conn: Arc<AsyncMutex<Option<Conn>>>,
    headers: Arc<Vec<(HeaderName, HeaderValue)>>,
}

impl std::fmt::Debug for OtlpHttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OtlpHttpClient")
    }
}

impl OtlpHttpClient {
    fn new(
        rt: tokio::runtime::Handle,
        headers: Vec<(HeaderName, HeaderValue)>,
        timeout: Duration,
    ) -> Self {
        let opts = ClientOptions {
            timeout,
            max_body: 64 << 10,
            ..ClientOptions::default()
        };
        OtlpHttpClient {
            rt,
            client: Client::new(opts, Arc::new(Resolver::system())),
            conn: Arc::new(AsyncMutex::new(None)),
            headers: Arc::new(headers),
        }
    }
}

#[async_trait::async_trait]
impl HttpClient for OtlpHttpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let this = self.clone();
        let task = self.rt.spawn(async move {
            let (parts, body) = request.into_parts();
            let mut headers = parts.headers;
            for (k, v) in this.headers.iter() {
                headers.insert(k.clone(), v.clone());
            }
            let spec = RequestSpec {
                method: parts.method,
                uri: parts.uri,
                headers,
                body,
            };
            let mut slot = this.conn.lock().await;
            let conn = slot.get_or_insert_with(|| this.client.conn());
            let out = conn.send(&spec).await;
            if let Some(class) = out.error {
                *slot = None;
                return Err(format!("OTLP export: {}", class.as_str()));
            }
            let mut resp = Response::builder().status(out.status.unwrap_or(500));
            if let Some(h) = resp.headers_mut() {
                *h = out.headers;
            }
            resp.body(out.body).map_err(|e| e.to_string())
        });
        match task.await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(e.into()),
            Err(e) => Err(format!("OTLP export task: {e}").into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::http_endpoint;

    #[test]
    fn endpoint_path() {
        assert_eq!(http_endpoint("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(http_endpoint("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            http_endpoint("http://c:4318/custom"),
            "http://c:4318/custom"
        );
    }
}
