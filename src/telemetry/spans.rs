//! Run → iteration → request spans for load requests.
//!
//! The runner's hook, in order: [`Tracer::run_span`] once per run; [`RunSpan::iteration`] per
//! iteration (the head-sampling decision: `None`, and nothing else done, when not sampled);
//! [`IterSpan::request`] per request, whose [`ReqSpan::traceparent`] goes on the request;
//! [`ReqSpan::finish`] with the request's [`Outcome`]; [`IterSpan::finish`] and
//! [`RunSpan::finish`] with the run's result.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceId, Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SdkTracer;

use super::propagation::{TRACEPARENT, TRACESTATE, traceparent};
use super::redact::url_full;
use super::{Sampler, TracesConfig};
use crate::http::Outcome;

/// The instrumentation scope of load spans.
pub const SCOPE: &str = "sloburn.load";

/// Makes the spans of runs; cheap to clone.
#[derive(Clone)]
pub struct Tracer {
    tracer: SdkTracer,
    sampler: Sampler,
    propagate: bool,
    tracestate: Option<HeaderValue>,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer")
            .field("sampler", &self.sampler)
            .field("propagate", &self.propagate)
            .finish_non_exhaustive()
    }
}

impl Tracer {
    pub fn new(tracer: SdkTracer, traces: &TracesConfig) -> Tracer {
        Tracer {
            tracer,
            sampler: Sampler::new(traces.sample_ratio),
            propagate: traces.propagate,
            tracestate: traces
                .tracestate
                .as_deref()
                .and_then(|s| HeaderValue::from_str(s).ok()),
        }
    }

    /// The root span of one run (INTERNAL), with `sloburn.profile` and `sloburn.executor`.
    pub fn run_span(&self, profile: &str, executor: &str) -> RunSpan {
        let span = self
            .tracer
            .span_builder(format!("run {profile}"))
            .with_kind(SpanKind::Internal)
            .with_attributes([
                KeyValue::new("sloburn.profile", profile.to_string()),
                KeyValue::new("sloburn.executor", executor.to_string()),
            ])
            .start_with_context(&self.tracer, &Context::new());
        RunSpan {
            tracer: self.clone(),
            cx: Context::new().with_span(span),
        }
    }
}

/// A run's span; its iterations are its children.
pub struct RunSpan {
    tracer: Tracer,
    cx: Context,
}

impl RunSpan {
    /// The head-sampling decision for one iteration: `None` (one random draw, no allocation)
    /// when it is not sampled. `journey` names the iteration's journey once journeys exist.
    pub fn iteration(&self, journey: Option<&str>) -> Option<IterSpan> {
        if !self.tracer.sampler.sample() {
            return None;
        }
        let t = &self.tracer.tracer;
        let mut b = t
            .span_builder(match journey {
                Some(j) => Cow::Owned(format!("iteration {j}")),
                None => Cow::Borrowed("iteration"),
            })
            .with_kind(SpanKind::Internal);
        if let Some(j) = journey {
            b = b.with_attributes([KeyValue::new("sloburn.journey", j.to_string())]);
        }
        let span = b.start_with_context(t, &self.cx);
        Some(IterSpan {
            tracer: self.tracer.clone(),
            cx: self.cx.with_span(span),
            steps: Vec::new(),
        })
    }

    pub fn span_context(&self) -> SpanContext {
        self.cx.span().span_context().clone()
    }

    /// Ends the run span with `sloburn.result` (`passed`, `failed`, `aborted`, …).
    pub fn finish(&self, result: &str) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new("sloburn.result", result.to_string()));
        if result != "passed" {
            span.set_status(Status::error(result.to_string()));
        }
        span.end();
    }
}

/// A sampled iteration's span; its requests are its children.
pub struct IterSpan {
    tracer: Tracer,
    cx: Context,
    steps: Vec<String>,
}

impl IterSpan {
    /// A CLIENT span for one request, started now. `step` names the journey step.
    pub fn request(&mut self, step: Option<&str>) -> ReqSpan {
        let t = &self.tracer.tracer;
        let started = SystemTime::now();
        let mut b = t
            .span_builder("HTTP")
            .with_kind(SpanKind::Client)
            .with_start_time(started);
        if let Some(s) = step {
            self.steps.push(s.to_string());
            b = b.with_attributes([KeyValue::new("sloburn.step", s.to_string())]);
        }
        let span = b.start_with_context(t, &self.cx);
        let sc = span.span_context().clone();
        let (header, state) = if self.tracer.propagate {
            (
                Some(traceparent(sc.trace_id(), sc.span_id())),
                self.tracer.tracestate.clone(),
            )
        } else {
            (None, None)
        };
        ReqSpan {
            span,
            started,
            header,
            state,
        }
    }

    pub fn span_context(&self) -> SpanContext {
        self.cx.span().span_context().clone()
    }

    /// Ends the iteration span; the step names of its requests go in `sloburn.steps`.
    pub fn finish(self) {
        let span = self.cx.span();
        if !self.steps.is_empty() {
            let steps: Vec<opentelemetry::StringValue> =
                self.steps.into_iter().map(Into::into).collect();
            span.set_attribute(KeyValue::new(
                "sloburn.steps",
                opentelemetry::Value::Array(steps.into()),
            ));
        }
        span.end();
    }
}

/// One request's CLIENT span.
pub struct ReqSpan {
    span: opentelemetry_sdk::trace::Span,
    started: SystemTime,
    header: Option<HeaderValue>,
    state: Option<HeaderValue>,
}

/// The phases as span events, in the order they happen (names as in the issue).
const PHASE_EVENTS: [&str; 6] = [
    "dns",
    "connecting",
    "tls",
    "sending",
    "waiting",
    "receiving",
];

impl ReqSpan {
    /// The `traceparent` to send, `None` with `propagate: false`.
    pub fn traceparent(&self) -> Option<&HeaderValue> {
        self.header.as_ref()
    }

    /// Adds `traceparent` (and `tracestate` when configured) to a request's headers; does
    /// nothing with `propagate: false`.
    pub fn inject(&self, headers: &mut HeaderMap) {
        if let Some(h) = &self.header {
            headers.insert(TRACEPARENT, h.clone());
            if let Some(s) = &self.state {
                headers.insert(TRACESTATE, s.clone());
            }
        }
    }

    pub fn trace_id(&self) -> TraceId {
        self.span.span_context().trace_id()
    }

    pub fn span_id(&self) -> SpanId {
        self.span.span_context().span_id()
    }

    /// Ends the span with the HTTP client semantic conventions. `display_url` is the target's
    /// URL as written (secret references kept); its user-info and query values are redacted.
    /// `check_failed` names the first failed check: the span's status becomes an error with it.
    pub fn finish(
        mut self,
        outcome: &Outcome,
        method: &str,
        display_url: &str,
        check_failed: Option<&str>,
    ) {
        let method = method.to_ascii_uppercase();
        self.span.update_name(method.clone());
        let url = url_full(display_url);
        let mut attrs = vec![
            KeyValue::new("http.request.method", method),
            KeyValue::new(
                "network.protocol.version",
                match outcome.version {
                    http::Version::HTTP_2 => "2",
                    http::Version::HTTP_10 => "1.0",
                    _ => "1.1",
                },
            ),
        ];
        if let Some((host, port)) = server_of(&url) {
            attrs.push(KeyValue::new("server.address", host));
            attrs.push(KeyValue::new("server.port", i64::from(port)));
        }
        attrs.push(KeyValue::new("url.full", url));
        if let Some(status) = outcome.status {
            attrs.push(KeyValue::new(
                "http.response.status_code",
                i64::from(status),
            ));
        }
        let error_type = match (outcome.error, outcome.status) {
            (Some(class), _) => Some(class.as_str().to_string()),
            (None, Some(s)) if s >= 400 => Some(s.to_string()),
            _ => None,
        };
        if let Some(e) = &error_type {
            attrs.push(KeyValue::new("error.type", e.clone()));
        }
        self.span.set_attributes(attrs);
        let p = &outcome.phases;
        let phases = [
            p.dns,
            p.connecting,
            p.tls_handshaking,
            p.sending,
            p.waiting,
            p.receiving,
        ];
        let mut at = self.started + p.blocked;
        for (name, d) in PHASE_EVENTS.iter().zip(phases) {
            at += d;
            self.span.add_event_with_timestamp(
                *name,
                at,
                vec![KeyValue::new(
                    "sloburn.phase.duration_seconds",
                    d.as_secs_f64(),
                )],
            );
        }
        if let Some(check) = check_failed {
            self.span
                .set_status(Status::error(format!("check failed: {check}")));
            self.span
                .set_attribute(KeyValue::new("sloburn.check.failed", check.to_string()));
        } else if let Some(e) = error_type {
            self.span.set_status(Status::error(e));
        }
        let total: Duration = phases.iter().sum::<Duration>() + p.blocked;
        self.span.end_with_timestamp(self.started + total);
    }
}

/// `server.address` and `server.port` of a URL (default port from the scheme).
fn server_of(url: &str) -> Option<(String, u16)> {
    let uri: http::Uri = url.parse().ok()?;
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    Some((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::server_of;

    #[test]
    fn server() {
        assert_eq!(server_of("http://a:81/x"), Some(("a".into(), 81)));
        assert_eq!(server_of("https://[::1]/x"), Some(("::1".into(), 443)));
        assert_eq!(server_of("http://h/"), Some(("h".into(), 80)));
    }
}
