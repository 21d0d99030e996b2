//! Run → iteration → request spans for load requests.
//!
//! The runner's hook, in order: [`Tracer::run_span`] once per run, with each step's
//! [`StepDesc`] (its constant attributes are built there, once); [`RunSpan::iteration`] per
//! iteration (the head-sampling decision: `None`, and nothing else done, when not sampled);
//! [`IterSpan::request`] per request, whose [`ReqSpan::traceparent`] goes on the request;
//! [`ReqSpan::finish`] with the request's [`Outcome`]; [`IterSpan::finish`] and
//! [`RunSpan::finish`] with the run's result.
//!
//! A traced request allocates little: its constant attributes (method, `url.full`,
//! `server.*`, step) are reference-counted clones of the run's, in one vector sized once.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceId, Tracer as _,
};
use opentelemetry::{Context, KeyValue, StringValue};
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

/// What a run's step sends, as its spans describe it.
#[derive(Debug, Clone, Copy)]
pub struct StepDesc<'a> {
    pub method: &'a str,
    /// The target's URL as written (secret references kept); its user-info and query values
    /// are redacted in `url.full`.
    pub display_url: &'a str,
    /// The journey step's name; `None` for a single-request profile.
    pub step: Option<&'a str>,
}

/// One step's span name and constant attributes, built once per run.
#[derive(Debug)]
struct StepAttrs {
    name: Cow<'static, str>,
    attrs: Box<[KeyValue]>,
    step: Option<Arc<str>>,
}

/// Attributes a request span adds when it ends (status, protocol, error type); reserved up
/// front so ending a span does not grow its vector.
const END_ATTRS: usize = 3;

impl StepAttrs {
    fn new(d: &StepDesc<'_>) -> StepAttrs {
        let method = d.method.to_ascii_uppercase();
        let name = match method.as_str() {
            "GET" => Cow::Borrowed("GET"),
            "POST" => Cow::Borrowed("POST"),
            "PUT" => Cow::Borrowed("PUT"),
            "DELETE" => Cow::Borrowed("DELETE"),
            "PATCH" => Cow::Borrowed("PATCH"),
            "HEAD" => Cow::Borrowed("HEAD"),
            "OPTIONS" => Cow::Borrowed("OPTIONS"),
            _ => Cow::Owned(method.clone()),
        };
        let url = url_full(d.display_url);
        let mut attrs = vec![KeyValue::new("http.request.method", method)];
        if let Some((host, port)) = server_of(&url) {
            attrs.push(KeyValue::new("server.address", host));
            attrs.push(KeyValue::new("server.port", i64::from(port)));
        }
        attrs.push(KeyValue::new("url.full", url));
        let step: Option<Arc<str>> = d.step.map(Arc::from);
        if let Some(s) = &step {
            attrs.push(KeyValue::new("sloburn.step", s.clone()));
        }
        StepAttrs {
            name,
            attrs: attrs.into_boxed_slice(),
            step,
        }
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
    /// `steps` are the run's steps in their index order (one for a single-request profile).
    pub fn run_span<'a>(
        &self,
        profile: &str,
        executor: &str,
        steps: impl IntoIterator<Item = StepDesc<'a>>,
    ) -> RunSpan {
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
            steps: steps.into_iter().map(|d| StepAttrs::new(&d)).collect(),
        }
    }
}

/// A run's span; its iterations are its children.
pub struct RunSpan {
    tracer: Tracer,
    cx: Context,
    steps: Arc<[StepAttrs]>,
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
            steps: self.steps.clone(),
            walked: Vec::new(),
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
    steps: Arc<[StepAttrs]>,
    /// The step indexes of its requests, in order.
    walked: Vec<usize>,
}

impl IterSpan {
    /// A CLIENT span for one request of step `step` (its index in the run's steps), started
    /// now.
    pub fn request(&mut self, step: usize) -> ReqSpan {
        let t = &self.tracer.tracer;
        let started = crate::clock::system_time();
        let (name, attrs) = match self.steps.get(step) {
            Some(s) => {
                if s.step.is_some() {
                    self.walked.push(step);
                }
                let mut attrs = Vec::with_capacity(s.attrs.len() + END_ATTRS);
                attrs.extend_from_slice(&s.attrs);
                (s.name.clone(), attrs)
            }
            None => (Cow::Borrowed("HTTP"), Vec::with_capacity(END_ATTRS)),
        };
        let span = t
            .span_builder(name)
            .with_kind(SpanKind::Client)
            .with_start_time(started)
            .with_attributes(attrs)
            .start_with_context(t, &self.cx);
        let header = self.tracer.propagate.then(|| {
            let sc = span.span_context();
            traceparent(sc.trace_id(), sc.span_id())
        });
        ReqSpan {
            span,
            started,
            header,
            state: if self.tracer.propagate {
                self.tracer.tracestate.clone()
            } else {
                None
            },
        }
    }

    pub fn span_context(&self) -> SpanContext {
        self.cx.span().span_context().clone()
    }

    /// Ends the iteration span; the step names of its requests go in `sloburn.steps`.
    pub fn finish(self) {
        let span = self.cx.span();
        if !self.walked.is_empty() {
            let steps: Vec<StringValue> = self
                .walked
                .iter()
                .filter_map(|&i| self.steps.get(i)?.step.clone())
                .map(StringValue::from)
                .collect();
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

    /// Ends the span with the rest of the HTTP client semantic conventions (status code,
    /// protocol version, error type) and the phases. `check_failed` names the first failed
    /// check: the span's status becomes an error with it.
    pub fn finish(mut self, outcome: &Outcome, check_failed: Option<&str>) {
        self.span.set_attribute(KeyValue::new(
            "network.protocol.version",
            match outcome.version {
                http::Version::HTTP_2 => "2",
                http::Version::HTTP_10 => "1.0",
                _ => "1.1",
            },
        ));
        if let Some(status) = outcome.status {
            self.span.set_attribute(KeyValue::new(
                "http.response.status_code",
                i64::from(status),
            ));
        }
        let error_type: Option<Cow<'static, str>> = match (outcome.error, outcome.status) {
            (Some(class), _) => Some(Cow::Borrowed(class.as_str())),
            (None, Some(s)) if s >= 400 => Some(Cow::Owned(s.to_string())),
            _ => None,
        };
        if let Some(e) = &error_type {
            self.span
                .set_attribute(KeyValue::new("error.type", e.clone()));
        }
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
