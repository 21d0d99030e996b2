//! One request on an HTTP/3 connection: a stream of its own. `sending` is opening the stream
//! and writing the head and body through its FIN, `waiting` from there to the response head's
//! arrival, `receiving` to the body's end; each end is when the datagram that carried it
//! reached sloburn's socket (the [`Wire`]'s latest), not when sloburn's task got to it.
//!
//! Bounds: the head is read up to 64 KiB (QPACK's field section limit, told the server in
//! SETTINGS), the body up to `max_body` (then the stream is stopped: `body_too_large`).

use bytes::{Buf, Bytes};
use http::header::{CONNECTION, HOST, TRANSFER_ENCODING, UPGRADE};
use http::{Request, Uri, Version};
use tokio::time::{Instant, timeout_at};

use super::super::body::BodySink;
use super::super::client::{Client, DialError, RequestSpec};
use super::super::connect::Target;
use super::super::{ErrorClass, Outcome};
use super::errors::stream_error;
use super::wire::Wire;

/// The most response-head bytes sloburn decodes (SETTINGS_MAX_FIELD_SECTION_SIZE).
pub(crate) const MAX_HEAD: u64 = 64 << 10;

pub(crate) type Sender = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;
type Stream = h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// When what the connection just delivered reached the host: the latest datagram's arrival,
/// no earlier than `floor` and no later than now.
fn arrived(wire: &Wire, floor: Instant) -> Instant {
    let now = crate::clock::tokio_instant();
    wire.last_rx()
        .map_or(now, |rx| rx.clamp(floor.min(now), now))
}

fn timed_out() -> DialError {
    ErrorClass::Timeout.into()
}

/// Sends `req` on a new stream of `sender` and reads the whole answer into `out`. `Err` when
/// it failed (what was measured before is kept in `out`).
pub(crate) async fn exchange(
    client: &Client,
    sender: &mut Sender,
    wire: &Wire,
    req: &RequestSpec,
    target: &Target<'_>,
    deadline: Instant,
    out: &mut Outcome,
) -> Result<(), DialError> {
    let request = build_request(req, target).ok_or(DialError::from(ErrorClass::Template))?;
    let t0 = crate::clock::tokio_instant();
    let sent = timeout_at(deadline, write(sender, request, req.body.clone())).await;
    let handed = crate::clock::tokio_instant();
    out.phases.sending = handed - t0;
    let mut stream = sent.map_err(|_| timed_out())??;
    out.bytes_sent = req.body.len() as u64;
    let head = timeout_at(deadline, stream.recv_response()).await;
    let head_at = match head {
        Ok(Ok(_)) => arrived(wire, handed),
        _ => crate::clock::tokio_instant(),
    };
    out.phases.waiting = head_at.saturating_duration_since(handed);
    let head = head
        .map_err(|_| timed_out())?
        .map_err(|e| stream_error(&e))?;
    let (parts, ()) = head.into_parts();
    out.version = Version::HTTP_3;
    out.status = Some(parts.status.as_u16());
    out.headers = parts.headers;
    let read = read_body(&mut stream, deadline, client.options().max_body, out).await;
    let end = match read {
        Ok(()) => arrived(wire, head_at),
        Err(_) => crate::clock::tokio_instant(),
    };
    out.phases.receiving = end.saturating_duration_since(head_at);
    read
}

/// Opens the stream and writes the request through its end.
async fn write(
    sender: &mut Sender,
    request: Request<()>,
    body: Bytes,
) -> Result<Stream, DialError> {
    let mut stream = sender
        .send_request(request)
        .await
        .map_err(|e| stream_error(&e))?;
    if !body.is_empty() {
        stream.send_data(body).await.map_err(|e| stream_error(&e))?;
    }
    stream.finish().await.map_err(|e| stream_error(&e))?;
    Ok(stream)
}

/// Reads the body into `out`, up to `max` bytes kept; past it the stream is stopped.
async fn read_body(
    stream: &mut Stream,
    deadline: Instant,
    max: usize,
    out: &mut Outcome,
) -> Result<(), DialError> {
    let mut sink = BodySink::new(max);
    let mut result = Ok(());
    loop {
        match timeout_at(deadline, stream.recv_data()).await {
            Ok(Ok(None)) => break,
            Ok(Ok(Some(mut chunk))) => {
                let data = chunk.copy_to_bytes(chunk.remaining());
                out.bytes_received += data.len() as u64;
                if !sink.push(data) {
                    stream.stop_sending(h3::error::Code::H3_REQUEST_CANCELLED);
                    result = Err(ErrorClass::BodyTooLarge.into());
                    break;
                }
            }
            Ok(Err(e)) => {
                let mut e = stream_error(&e);
                if e.class == ErrorClass::Reset {
                    // After the head: the body broke, as a reset HTTP/2 stream's does.
                    e.class = ErrorClass::Body;
                }
                result = Err(e);
                break;
            }
            Err(_) => {
                result = Err(timed_out());
                break;
            }
        }
    }
    (out.body, out.body_discarded) = sink.finish();
    result
}

/// The request as HTTP/3 carries it: `:scheme https`, `:authority` from `Host` when the
/// config wrote one, else the URL's; no connection-specific headers (RFC 9114 §4.2).
fn build_request(req: &RequestSpec, target: &Target<'_>) -> Option<Request<()>> {
    let mut headers = req.headers.clone();
    let authority = match headers.remove(HOST) {
        Some(h) => h.to_str().ok()?.to_string(),
        None => target.authority.to_string(),
    };
    for name in [CONNECTION, TRANSFER_ENCODING, UPGRADE] {
        headers.remove(name);
    }
    headers.remove("keep-alive");
    headers.remove("proxy-connection");
    let path = req.uri.path_and_query().map_or("/", |p| p.as_str());
    let uri = Uri::builder()
        .scheme("https")
        .authority(authority)
        .path_and_query(path)
        .build()
        .ok()?;
    let mut request = Request::new(());
    *request.method_mut() = req.method.clone();
    *request.uri_mut() = uri;
    *request.version_mut() = Version::HTTP_3;
    *request.headers_mut() = headers;
    Some(request)
}
