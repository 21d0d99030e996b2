//! One gRPC call as sloburn measures it: a [`Call`] prepared once (method, request messages
//! encoded from JSON, metadata, deadline), sent on a user's [`GrpcConn`], and its result as an
//! [`Outcome`] like an HTTP request's.
//!
//! Every kind of call (unary, client-, server- and bidirectional streaming) goes out the same
//! way: the gRPC wire does not tell them apart, only the method's descriptor does. The request
//! messages are sent as a finite stream and the responses read to the trailers.
//!
//! The outcome: `status` is the gRPC status code (0 = OK), whether it came in the trailers or
//! a trailers-only response; `error` only for a transport failure or the deadline; `headers`
//! the response metadata with the trailers added; `body` the response message as JSON, or a
//! JSON array of the messages for a server-streaming method. Phases: `connecting` and
//! `tls_handshaking` for a new connection (`dns` too), `sending` until the last request
//! message was taken to be sent, `waiting` from there to the first response message (or the
//! end, when none came), `receiving` from the first message to the end.

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{BufMut, Bytes};
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderName, HeaderValue};
use prost::Message as _;
use prost_reflect::{DynamicMessage, MessageDescriptor, MethodDescriptor, SerializeOptions};
use tokio::time::{Instant, timeout_at};
use tokio_stream::Stream;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::MetadataMap;

use super::conn::{GrpcConn, Transport, transport_class};
use crate::http::{ErrorClass, Outcome, Phases};

/// Why a call could not be prepared: the config's fault, reported before any run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("message {index} is not a `{message}`: {reason}")]
    Message {
        index: usize,
        message: String,
        reason: String,
    },
    #[error("`{method}` takes exactly one request message, not {given}")]
    OneMessage { method: String, given: usize },
    #[error("metadata `{0}` is no valid gRPC metadata name (lower case; `-bin` names hold base64)")]
    MetadataName(String),
    #[error("metadata `{0}` has a value that is no valid header value (a control character?)")]
    MetadataValue(String),
    #[error("metadata `{0}` is set by gRPC itself and cannot be given")]
    Reserved(String),
}

/// A call prepared once and sent many times.
#[derive(Debug, Clone)]
pub struct Call {
    method: MethodDescriptor,
    path: PathAndQuery,
    /// The request messages, encoded once.
    messages: Arc<[Bytes]>,
    metadata: HeaderMap,
    timeout: Duration,
    /// The most response bytes kept in the outcome's body (as JSON).
    max_body: usize,
}

impl Call {
    /// A call of `method` sending `messages` (JSON, in protobuf's JSON mapping) with
    /// `metadata`, bounded by `timeout` from the first byte of its connection to its trailers.
    pub fn new(
        method: MethodDescriptor,
        messages: &[serde_json::Value],
        metadata: &[(String, String)],
        timeout: Duration,
    ) -> Result<Call, CallError> {
        if !method.is_client_streaming() && messages.len() != 1 {
            return Err(CallError::OneMessage {
                method: method.full_name().to_string(),
                given: messages.len(),
            });
        }
        let input = method.input();
        let messages = messages
            .iter()
            .enumerate()
            .map(|(index, json)| encode_json(&input, json).map_err(|reason| (index, reason)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|(index, reason)| CallError::Message {
                index,
                message: input.full_name().to_string(),
                reason,
            })?;
        let path = format!("/{}/{}", method.parent_service().full_name(), method.name())
            .parse()
            .map_err(|_| CallError::Message {
                index: 0,
                message: method.full_name().to_string(),
                reason: "the method's path is no valid URI path".into(),
            })?;
        Ok(Call {
            method,
            path,
            messages: messages.into(),
            metadata: metadata_map(metadata)?,
            timeout,
            max_body: 1 << 20,
        })
    }

    /// Keeps at most `max_body` bytes of response JSON; more fails the call as `body_too_large`.
    pub fn with_max_body(mut self, max_body: usize) -> Call {
        self.max_body = max_body;
        self
    }

    pub fn method(&self) -> &MethodDescriptor {
        &self.method
    }

    pub fn metadata(&self) -> &HeaderMap {
        &self.metadata
    }

    /// The same call sending `messages` instead (a journey's rendered body).
    pub fn with_messages(mut self, messages: &[serde_json::Value]) -> Result<Call, CallError> {
        let fresh = Call::new(self.method.clone(), messages, &[], self.timeout)?;
        self.messages = fresh.messages;
        Ok(self)
    }

    /// Adds `headers` to the metadata sent, but for the names gRPC reserves (dropped).
    pub fn add_metadata(&mut self, headers: &HeaderMap) {
        for (name, value) in headers {
            if !RESERVED.contains(&name.as_str()) {
                self.metadata.append(name.clone(), value.clone());
            }
        }
    }
}

/// One JSON value as the protobuf encoding of a `desc` message.
pub fn encode_json(desc: &MessageDescriptor, json: &serde_json::Value) -> Result<Bytes, String> {
    let message = DynamicMessage::deserialize(desc.clone(), json).map_err(|e| e.to_string())?;
    Ok(message.encode_to_vec().into())
}

/// Protobuf bytes of a `desc` message as JSON (every field, defaults too, so a JSON path check
/// finds a zero value instead of nothing).
pub fn decode_to_json(desc: &MessageDescriptor, bytes: &[u8]) -> Result<Vec<u8>, String> {
    let message = DynamicMessage::decode(desc.clone(), bytes).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    write_json(&message, &mut out)?;
    Ok(out)
}

fn write_json(message: &DynamicMessage, out: &mut Vec<u8>) -> Result<(), String> {
    let options = SerializeOptions::new().skip_default_fields(false);
    let mut ser = serde_json::Serializer::new(out);
    message
        .serialize_with_options(&mut ser, &options)
        .map_err(|e| e.to_string())
}

/// Names gRPC reserves for itself (and HTTP/2's connection-specific ones).
const RESERVED: &[&str] = &[
    "content-type",
    "te",
    "grpc-timeout",
    "grpc-encoding",
    "grpc-accept-encoding",
    "grpc-status",
    "grpc-message",
    "connection",
    "transfer-encoding",
    "host",
];

/// Whether gRPC (or HTTP/2) sets this metadata name itself, so a user's would be refused.
pub fn is_reserved_metadata(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    RESERVED.contains(&lower.as_str()) || lower.starts_with(':')
}

fn metadata_map(pairs: &[(String, String)]) -> Result<HeaderMap, CallError> {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        let lower = name.to_ascii_lowercase();
        if is_reserved_metadata(name) {
            return Err(CallError::Reserved(name.clone()));
        }
        let header = HeaderName::from_bytes(lower.as_bytes())
            .map_err(|_| CallError::MetadataName(name.clone()))?;
        let value =
            HeaderValue::from_str(value).map_err(|_| CallError::MetadataValue(name.clone()))?;
        map.append(header, value);
    }
    Ok(map)
}

/// Sends encoded messages as they are and decodes responses as `output` messages, kept as
/// their protobuf bytes (turned into JSON once the call ended, off the stream's poll).
#[derive(Clone)]
struct RawCodec {
    output: MessageDescriptor,
}

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = DynamicMessage;
    type Encoder = RawEncoder;
    type Decoder = DynamicDecoder;

    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }

    fn decoder(&mut self) -> DynamicDecoder {
        DynamicDecoder(self.output.clone())
    }
}

struct RawEncoder;

impl Encoder for RawEncoder {
    type Item = Bytes;
    type Error = tonic::Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put(item);
        Ok(())
    }
}

struct DynamicDecoder(MessageDescriptor);

impl Decoder for DynamicDecoder {
    type Item = DynamicMessage;
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<DynamicMessage>, tonic::Status> {
        DynamicMessage::decode(self.0.clone(), src)
            .map(Some)
            // A response that is not the method's output type: the body broke, not a status.
            .map_err(|_| tonic::Status::from_error(Box::new(Transport(ErrorClass::Body))))
    }
}

/// The request messages as a stream that notes when its end was taken: the encoder has then
/// taken every message to send.
struct Timed {
    messages: Arc<[Bytes]>,
    next: usize,
    sent: Arc<OnceLock<Instant>>,
}

impl Stream for Timed {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let item = self.messages.get(self.next).cloned();
        self.next += 1;
        if item.is_none() {
            let _ = self.sent.set(crate::clock::tokio_instant());
        }
        Poll::Ready(item)
    }
}

/// The moments of one call; the phases are computed from them.
#[derive(Debug, Clone, Copy)]
pub struct Marks {
    /// The connection was ready (open, or opened).
    pub ready: Instant,
    /// The last request message was taken to be sent.
    pub sent: Option<Instant>,
    pub first_message: Option<Instant>,
    pub end: Instant,
}

/// The sending, waiting and receiving phases from a call's moments. A bidirectional call may
/// answer before its last request went: the phases then never go negative, and still add up to
/// the call's time from `ready` to `end`.
pub fn phases_from(marks: &Marks, phases: &mut Phases) {
    let sent = marks
        .sent
        .unwrap_or(marks.end)
        .clamp(marks.ready, marks.end);
    let first = marks
        .first_message
        .unwrap_or(marks.end)
        .clamp(sent, marks.end);
    phases.sending = sent - marks.ready;
    phases.waiting = first - sent;
    phases.receiving = marks.end - first;
}

/// What a call has measured and read so far: kept whole when the deadline drops the exchange.
struct Progress {
    out: Outcome,
    marks: Marks,
    /// Set by the request stream when it has handed over its last message.
    sent: Arc<OnceLock<Instant>>,
    messages: Vec<DynamicMessage>,
    /// Protobuf bytes of the messages read.
    kept: usize,
}

impl GrpcConn {
    /// Sends `call` and waits for its end, at most its timeout. Never fails: a transport
    /// failure or the deadline is the outcome's `error`.
    pub async fn call(&mut self, call: &Call) -> Outcome {
        let start = crate::clock::tokio_instant();
        let deadline = start + call.timeout;
        let mut p = Progress {
            out: Outcome {
                version: http::Version::HTTP_2,
                ..Outcome::default()
            },
            marks: Marks {
                ready: start,
                sent: None,
                first_message: None,
                end: start,
            },
            sent: Arc::new(OnceLock::new()),
            messages: Vec::new(),
            kept: 0,
        };
        let timed_out = timeout_at(deadline, self.exchange(call, deadline, &mut p))
            .await
            .is_err();
        let Progress {
            mut out,
            mut marks,
            sent,
            messages,
            ..
        } = p;
        marks.end = crate::clock::tokio_instant();
        marks.sent = sent.get().copied();
        if timed_out {
            out.error = Some(ErrorClass::Timeout);
            out.status = None;
        }
        if out.local_port.is_some() {
            // A connection was had: the rest of the time is the exchange's. (A failed connect
            // left its time in `dns`, `connecting` and `tls_handshaking`.)
            phases_from(&marks, &mut out.phases);
        }
        out.body = self::body(call, &messages, &mut out.error);
        if matches!(out.error, Some(ErrorClass::Reset | ErrorClass::Other)) {
            // The connection may be what broke: the next call opens a new one.
            self.close();
        }
        out
    }

    async fn exchange(&mut self, call: &Call, deadline: Instant, p: &mut Progress) {
        let Progress {
            out,
            marks,
            sent,
            messages,
            kept,
        } = p;
        let ready = match self.ready(deadline, &mut out.phases).await {
            Ok(ready) => ready,
            Err(class) => {
                out.error = Some(class);
                return;
            }
        };
        marks.ready = crate::clock::tokio_instant();
        out.reused = ready.reused;
        out.local_port = Some(ready.local_port);
        let (written, read) = (ready.stats.written(), ready.stats.read());
        let stats = ready.stats.clone();
        // A message longer than the body bound is refused from its 5-byte prefix, before any
        // of it is buffered (tonic's own default, 4 MiB, would answer it as status 11).
        let limit = call.max_body.max(1);
        let mut grpc =
            tonic::client::Grpc::with_origin(ready.service, self.client().origin().clone())
                .max_decoding_message_size(limit);
        let request = tonic::Request::from_parts(
            MetadataMap::from_headers(call.metadata.clone()),
            http::Extensions::default(),
            Timed {
                messages: call.messages.clone(),
                next: 0,
                sent: sent.clone(),
            },
        );
        let codec = RawCodec {
            output: call.method.output(),
        };
        let result = async {
            grpc.ready()
                .await
                .map_err(|t| tonic::Status::from_error(Box::new(t)))?;
            let response = grpc.streaming(request, call.path.clone(), codec).await?;
            let (metadata, mut stream, _) = response.into_parts();
            out.headers = metadata.into_headers();
            while let Some(message) = stream.message().await? {
                if marks.first_message.is_none() {
                    marks.first_message = Some(crate::clock::tokio_instant());
                }
                *kept += message.encoded_len();
                messages.push(message);
                if *kept > call.max_body {
                    return Err(tonic::Status::from_error(Box::new(Transport(
                        ErrorClass::BodyTooLarge,
                    ))));
                }
            }
            if let Some(trailers) = stream.trailers().await? {
                extend(&mut out.headers, trailers.into_headers());
            }
            Ok::<(), tonic::Status>(())
        }
        .await;
        match result {
            Ok(()) => out.status = Some(tonic::Code::Ok as u16),
            Err(status) if past_own_limit(&status, limit) => {
                out.error = Some(ErrorClass::BodyTooLarge);
            }
            Err(status) => match transport_class(&status) {
                Some(class) => out.error = Some(class),
                None => {
                    out.status = Some(status.code() as u16);
                    extend(&mut out.headers, status.metadata().clone().into_headers());
                }
            },
        }
        out.bytes_sent = stats.written().saturating_sub(written);
        out.bytes_received = stats.read().saturating_sub(read);
    }
}

/// Whether `status` is tonic's own refusal of a message longer than `limit`: the client's
/// bound, which the server never sent (its text names our limit, to the byte).
fn past_own_limit(status: &tonic::Status, limit: usize) -> bool {
    status.code() == tonic::Code::OutOfRange
        && status
            .message()
            .starts_with("Error, decoded message length too large")
        && status
            .message()
            .ends_with(&format!("the limit is: {limit} bytes"))
}

fn extend(headers: &mut HeaderMap, more: HeaderMap) {
    let mut last = None;
    for (name, value) in more {
        if let Some(name) = name {
            last = Some(name);
        }
        if let Some(name) = &last {
            headers.append(name.clone(), value);
        }
    }
}

/// The response messages as JSON: the one message of a unary (or client-streaming) method, an
/// array for a server-streaming one. A message JSON cannot say (a non-finite float in a field
/// JSON has no number for, say) fails the call as `body`.
fn body(call: &Call, messages: &[DynamicMessage], error: &mut Option<ErrorClass>) -> Bytes {
    let mut out = Vec::new();
    let result = if call.method.is_server_streaming() {
        out.push(b'[');
        messages
            .iter()
            .enumerate()
            .try_for_each(|(i, m)| {
                if i > 0 {
                    out.push(b',');
                }
                write_json(m, &mut out)
            })
            .map(|()| out.push(b']'))
    } else {
        messages.first().map_or(Ok(()), |m| write_json(m, &mut out))
    };
    if result.is_err() && error.is_none() {
        *error = Some(ErrorClass::Body);
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::grpc::schema::{HEALTH_CHECK, find_method, health};
    use serde_json::json;

    fn check() -> MethodDescriptor {
        find_method(&health(), HEALTH_CHECK).unwrap()
    }

    #[test]
    fn json_round_trips_through_protobuf_with_defaults_shown() {
        let input = check().input();
        let bytes = encode_json(&input, &json!({"service": "svc"})).unwrap();
        assert_eq!(&bytes[..], b"\x0a\x03svc");
        let output = check().output();
        let json = decode_to_json(&output, b"\x08\x01").unwrap();
        assert_eq!(json, br#"{"status":"SERVING"}"#);
        let json = decode_to_json(&output, b"").unwrap();
        assert_eq!(json, br#"{"status":"UNKNOWN"}"#);
    }

    #[test]
    fn a_bad_message_is_named_with_its_index_and_type() {
        let err = Call::new(
            check(),
            &[json!({"servce": 1})],
            &[],
            Duration::from_secs(1),
        )
        .unwrap_err();
        let CallError::Message {
            index,
            message,
            reason,
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!(
            (*index, message.as_str()),
            (0, "grpc.health.v1.HealthCheckRequest")
        );
        assert!(reason.contains("servce"), "{reason}");
        let err = Call::new(
            check(),
            &[json!({}), json!({})],
            &[],
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "`grpc.health.v1.Health.Check` takes exactly one request message, not 2"
        );
    }

    #[test]
    fn metadata_names_are_checked_and_reserved_ones_refused() {
        let call = |pairs: &[(&str, &str)]| {
            let pairs: Vec<_> = pairs
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect();
            Call::new(check(), &[json!({})], &pairs, Duration::from_secs(1))
        };
        let ok = call(&[("X-Token", "abc"), ("x-token", "def")]).unwrap();
        assert_eq!(ok.metadata.get_all("x-token").iter().count(), 2);
        assert_eq!(
            call(&[("grpc-timeout", "1S")]).unwrap_err(),
            CallError::Reserved("grpc-timeout".into())
        );
        assert_eq!(
            call(&[("a b", "x")]).unwrap_err(),
            CallError::MetadataName("a b".into())
        );
        assert_eq!(
            call(&[("a", "x\ny")]).unwrap_err(),
            CallError::MetadataValue("a".into())
        );
    }

    #[test]
    fn phases_add_up_and_never_go_negative() {
        let t0 = crate::clock::tokio_instant();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut p = Phases::default();
        phases_from(
            &Marks {
                ready: t0,
                sent: Some(ms(2)),
                first_message: Some(ms(10)),
                end: ms(15),
            },
            &mut p,
        );
        assert_eq!(
            (p.sending, p.waiting, p.receiving),
            (
                Duration::from_millis(2),
                Duration::from_millis(8),
                Duration::from_millis(5)
            )
        );
        // A bidirectional call answered before its last message went.
        let mut p = Phases::default();
        phases_from(
            &Marks {
                ready: t0,
                sent: Some(ms(12)),
                first_message: Some(ms(10)),
                end: ms(15),
            },
            &mut p,
        );
        assert_eq!(
            p.sending + p.waiting + p.receiving,
            Duration::from_millis(15)
        );
        assert_eq!(p.waiting, Duration::ZERO);
        // No message came: the wait runs to the end.
        let mut p = Phases::default();
        phases_from(
            &Marks {
                ready: t0,
                sent: Some(ms(1)),
                first_message: None,
                end: ms(9),
            },
            &mut p,
        );
        assert_eq!(
            (p.waiting, p.receiving),
            (Duration::from_millis(8), Duration::ZERO)
        );
    }
}
