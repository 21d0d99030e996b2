//! The daemon's own spans (a run, a reload, a store flush) through `tracing-opentelemetry`.
//!
//! Logging starts before the config is read, so the subscriber gets an empty reloadable slot
//! ([`layer`]) and `serve` fills it once it knows `telemetry:` ([`install`]). Log lines carry
//! the trace id through a `trace_id` field on those spans ([`stamp`]): the text format prints
//! it in the span context (`run{profile=p trace_id=…}: …`), the JSON format under `span`.

use std::sync::OnceLock;

use opentelemetry_sdk::trace::SdkTracer;
use tracing_subscriber::{Registry, reload};

type OtelLayer = tracing_opentelemetry::OpenTelemetryLayer<Registry, SdkTracer>;

static HANDLE: OnceLock<reload::Handle<Option<OtelLayer>, Registry>> = OnceLock::new();

/// The slot for the OpenTelemetry layer, first on the registry; empty until [`install`].
pub fn layer() -> reload::Layer<Option<OtelLayer>, Registry> {
    let (layer, handle) = reload::Layer::new(None);
    let _ = HANDLE.set(handle);
    layer
}

/// Sends the daemon's spans to `tracer` from now on. False when logging was set up without
/// [`layer`] (a library test) or the slot could not be filled.
pub fn install(tracer: SdkTracer) -> bool {
    let Some(handle) = HANDLE.get() else {
        return false;
    };
    handle
        .reload(Some(tracing_opentelemetry::layer().with_tracer(tracer)))
        .is_ok()
}

/// Records the span's OpenTelemetry trace id in its `trace_id` field (declared
/// `trace_id = tracing::field::Empty`), so the log lines inside it carry the id. Does nothing
/// while no tracer is installed.
pub fn stamp(span: &tracing::Span) {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    if sc.is_valid() {
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
            install(e.tracer(SCOPE));
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
