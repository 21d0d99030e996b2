//! The daemon's own spans (a run, a reload, a store flush) through `tracing-opentelemetry`.
//!
//! Logging starts before the config is read, so the subscriber's layer ([`layer`]) ends its
//! spans into a slot that `serve` fills once it knows `telemetry:` ([`install`]); until then
//! every span is dropped by the sampler. Log lines carry
//! the trace id through a `trace_id` field on those spans ([`stamp`]): the text format prints
//! it in the span context (`run{profile=p trace_id=…}: …`), the JSON format under `span`.

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::trace::{Link, SpanKind, TraceId, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    SamplingDecision, SamplingResult, SdkTracer, SdkTracerProvider, ShouldSample, SpanData,
    SpanProcessor,
};

use super::export::SharedProcessor;

/// Where the daemon's spans end, once `serve` has an exporter.
static SLOT: OnceLock<SharedProcessor> = OnceLock::new();
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Forwards to the installed exporter; drops everything before.
#[derive(Debug)]
struct Deferred;

impl SpanProcessor for Deferred {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &Context) {
        if let Some(p) = SLOT.get() {
            p.on_start(span, cx);
        }
    }

    fn on_end(&self, span: SpanData) {
        if let Some(p) = SLOT.get() {
            p.on_end(span);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        SLOT.get().map_or(Ok(()), |p| p.force_flush())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

/// Samples every daemon span once an exporter is installed, none before (so a daemon without
/// `telemetry:` records nothing).
#[derive(Debug, Clone)]
struct Installed;

impl ShouldSample for Installed {
    fn should_sample(
        &self,
        parent: Option<&Context>,
        _trace_id: TraceId,
        _name: &str,
        _kind: &SpanKind,
        _attributes: &[KeyValue],
        _links: &[Link],
    ) -> SamplingResult {
        use opentelemetry::trace::TraceContextExt as _;
        SamplingResult {
            decision: if SLOT.get().is_some() {
                SamplingDecision::RecordAndSample
            } else {
                SamplingDecision::Drop
            },
            attributes: Vec::new(),
            trace_state: parent
                .map(|c| c.span().span_context().trace_state().clone())
                .unwrap_or_default(),
        }
    }
}

/// The `tracing-opentelemetry` layer for the subscriber set-up; its spans reach a collector
/// only after [`install`].
pub fn layer<S>() -> tracing_opentelemetry::OpenTelemetryLayer<S, SdkTracer>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let provider = PROVIDER.get_or_init(|| {
        SdkTracerProvider::builder()
            .with_span_processor(Deferred)
            .with_sampler(Installed)
            .build()
    });
    tracing_opentelemetry::layer().with_tracer(provider.tracer(SCOPE))
}

/// Sends the daemon's spans through `processor` from now on (the first call wins).
pub fn install(processor: SharedProcessor) -> bool {
    SLOT.set(processor).is_ok()
}

/// Records the span's OpenTelemetry trace id in its `trace_id` field (declared
/// `trace_id = tracing::field::Empty`), so the log lines inside it carry the id. Does nothing
/// while no tracer is installed.
pub fn stamp(span: &tracing::Span) {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    if sc.is_valid() && sc.is_sampled() {
        span.record("trace_id", tracing::field::display(sc.trace_id()));
    }
}

static EXPORTER: OnceLock<super::Exporter> = OnceLock::new();

/// The scope of the daemon's own spans (runs, reloads, store flushes).
pub const SCOPE: &str = "sloburn.daemon";

/// Starts the process's exporter from the start-up config (once: `telemetry:` changes need a
/// restart, a reload keeps the exporter it has) and sends the daemon's own spans to it. `None`
/// when the exporter could not be built (logged: tracing is never worth refusing to start).
pub fn start(cfg: &super::TelemetryConfig) -> Option<&'static super::Exporter> {
    if let Some(e) = EXPORTER.get() {
        return Some(e);
    }
    match super::Exporter::start(cfg) {
        Ok(e) => {
            let e = EXPORTER.get_or_init(|| e);
            install(e.processor());
            Some(e)
        }
        Err(message) => {
            tracing::error!(error = %message, "telemetry disabled: the OTLP exporter did not start");
            None
        }
    }
}

/// The exporter [`start`] made, for the load's [`super::Tracer`].
pub fn exporter() -> Option<&'static super::Exporter> {
    EXPORTER.get()
}

/// Exports what is queued (blocking, bounded by the exporter's timeout); call on shutdown.
pub fn flush() {
    if let Some(e) = EXPORTER.get() {
        let _ = e.flush();
    }
}
