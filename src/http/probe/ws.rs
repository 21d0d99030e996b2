//! `ws://` and `wss://` targets: a WebSocket session per request. The client's own dialling
//! (DNS, connect, TLS), the upgrade (`sending`: request to `101`), then the body sent as one
//! message and messages read until one holds `expect` (without it: the first one). The
//! round trip, send to first message, is `waiting`; the rest of the session `receiving`; the
//! session's whole time its duration. Frames and the upgrade are tokio-tungstenite's.
//!
//! Bounds, whatever the server sends: the target's `timeout` ends the session (checked before
//! every read, so a stream of frames that never holds `expect`, or of pings, cannot hold it
//! open); a message (and a frame) is read up to `max_body`, past it the session fails as
//! `body_too_large`; the write buffer holds the body and [`WRITE_SLACK`] more, so pongs to a
//! server that floods pings and never reads are dropped once it is full (tungstenite keeps
//! the newest one waiting), answered only as fast as the server reads them.

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::time::{Instant, timeout_at};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::http::client::{Client, RequestSpec};
use crate::http::connect::Target;
use crate::http::tls::Stream;
use crate::http::transport::Transport;
use crate::http::{ErrorClass, Outcome, Protocol, classify_io};

/// Room in the write buffer beside the body: control frames (pongs, the close) queue there,
/// and past it wait (the newest pong only) for the server to read.
pub(crate) const WRITE_SLACK: usize = 64 << 10;

/// The session's frame limits: messages and frames up to `max_body`, the write buffer the
/// body and [`WRITE_SLACK`], written out as soon as they are sent.
fn config(max_body: usize, body: usize) -> WebSocketConfig {
    let max_body = max_body.max(1);
    WebSocketConfig::default()
        .write_buffer_size(0)
        .max_write_buffer_size(body.saturating_add(WRITE_SLACK))
        .max_message_size(Some(max_body))
        .max_frame_size(Some(max_body))
}

/// `ws://` and `wss://`: a session per request.
pub(crate) struct WebSocket;

impl Transport for WebSocket {
    fn new(_: &Client) -> WebSocket {
        WebSocket
    }

    async fn send(&mut self, client: &Client, req: &RequestSpec) -> Outcome {
        let tls = req
            .uri
            .scheme_str()
            .is_some_and(|s| s.eq_ignore_ascii_case("wss"));
        Outcome {
            protocol: Protocol::WebSocket,
            ..session(client, req, tls).await
        }
    }
}

async fn session(client: &Client, req: &RequestSpec, tls: bool) -> Outcome {
    let start = crate::clock::tokio_instant();
    let deadline = start + client.options().timeout;
    let mut out = Outcome::default();
    let Some(mut ws) = upgrade(client, req, tls, deadline, &mut out).await else {
        return out;
    };
    let expect = client.options().probe.expect.as_deref();
    let sent_at = crate::clock::tokio_instant();
    if !req.body.is_empty()
        && let Err(class) = send_body(&mut ws, &req.body, deadline, &mut out).await
    {
        out.error = Some(class);
        return out;
    }
    let mut first: Option<Instant> = None;
    let result = if req.body.is_empty() && expect.is_none() {
        Ok(())
    } else {
        read_until(&mut ws, expect, deadline, &mut first, &mut out).await
    };
    let end = crate::clock::tokio_instant();
    let first = first.unwrap_or(end);
    out.phases.waiting = first - sent_at;
    out.phases.receiving = end - first;
    if let Err(class) = result {
        out.error = Some(class);
    }
    // A polite close, bounded by what is left of the timeout; its fate is not measured.
    let _ = timeout_at(deadline, ws.close(None)).await;
    out
}

/// The client's dialling, then the upgrade (`sending`: request to `101`). `None` when the
/// session did not open: the outcome says why (a status other than 101 is the outcome's).
async fn upgrade(
    client: &Client,
    req: &RequestSpec,
    tls: bool,
    deadline: Instant,
    out: &mut Outcome,
) -> Option<WebSocketStream<Stream>> {
    let Some(authority) = req.uri.authority() else {
        out.error = Some(ErrorClass::Other);
        return None;
    };
    let target = Target {
        tls,
        host: authority.host(),
        port: authority.port_u16().unwrap_or(if tls { 443 } else { 80 }),
        authority: authority.as_str(),
    };
    let Ok(mut request) = req.uri.clone().into_client_request() else {
        out.error = Some(ErrorClass::Template);
        return None;
    };
    for (name, value) in &req.headers {
        request.headers_mut().append(name.clone(), value.clone());
    }
    let dialed = match client.dial(&target, deadline, &mut out.phases).await {
        Ok(d) => d,
        Err(e) => {
            out.error = Some(out.dial_failed(e));
            return None;
        }
    };
    out.local_port = Some(dialed.local_port);
    let t = crate::clock::tokio_instant();
    let config = config(client.options().max_body, req.body.len());
    let upgrade = timeout_at(
        deadline,
        tokio_tungstenite::client_async_with_config(request, dialed.stream, Some(config)),
    )
    .await;
    out.phases.sending = crate::clock::elapsed(t);
    match upgrade {
        Ok(Ok((ws, response))) => {
            out.status = Some(response.status().as_u16());
            out.headers = response.headers().clone();
            Some(ws)
        }
        // The server answered, and not with 101: its status is the outcome.
        Ok(Err(WsError::Http(response))) => {
            out.status = Some(response.status().as_u16());
            out.headers = response.headers().clone();
            out.body = response.body().clone().map(Bytes::from).unwrap_or_default();
            None
        }
        Ok(Err(e)) => {
            out.error = Some(classify(&e));
            None
        }
        Err(_) => {
            out.error = Some(ErrorClass::Timeout);
            None
        }
    }
}

/// The body as one message: text when it is UTF-8, else binary.
async fn send_body(
    ws: &mut WebSocketStream<Stream>,
    body: &Bytes,
    deadline: Instant,
    out: &mut Outcome,
) -> Result<(), ErrorClass> {
    let msg = match std::str::from_utf8(body) {
        Ok(text) => Message::text(text),
        Err(_) => Message::binary(body.clone()),
    };
    match timeout_at(deadline, ws.send(msg)).await {
        Ok(Ok(())) => {
            out.bytes_sent = body.len() as u64;
            Ok(())
        }
        Ok(Err(e)) => Err(classify(&e)),
        Err(_) => Err(ErrorClass::Timeout),
    }
}

/// Reads messages until one holds `expect` (without it: the first), or the session ends; the
/// last message read is the outcome's body, `first` when the first one came. The deadline is
/// checked before each read: a read that is always ready (a flood) never outlives it.
async fn read_until(
    ws: &mut WebSocketStream<Stream>,
    expect: Option<&[u8]>,
    deadline: Instant,
    first: &mut Option<Instant>,
    out: &mut Outcome,
) -> Result<(), ErrorClass> {
    loop {
        if crate::clock::tokio_instant() >= deadline {
            return Err(ErrorClass::Timeout);
        }
        let data = match timeout_at(deadline, ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => Bytes::from(t),
            Ok(Some(Ok(Message::Binary(b)))) => b,
            // Pings are answered by tungstenite as the next read goes on.
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)))) => continue,
            // Closed before what was expected: the `expect` check fails on what came.
            Ok(Some(Ok(Message::Close(_)))) | Ok(None) => return Ok(()),
            Ok(Some(Err(e))) => return Err(classify(&e)),
            Err(_) => return Err(ErrorClass::Timeout),
        };
        first.get_or_insert_with(crate::clock::tokio_instant);
        out.bytes_received += data.len() as u64;
        let done = match expect {
            Some(e) => memchr::memmem::find(&data, e).is_some(),
            None => true,
        };
        out.body = data;
        if done {
            return Ok(());
        }
    }
}

fn classify(e: &WsError) -> ErrorClass {
    match e {
        WsError::Io(io) => classify_io(io, false),
        WsError::Tls(_) => ErrorClass::Tls,
        WsError::ConnectionClosed | WsError::AlreadyClosed => ErrorClass::Reset,
        // A message or frame past `max_body`: the client's bound, as for an HTTP body.
        WsError::Capacity(_) => ErrorClass::BodyTooLarge,
        WsError::Protocol(_) | WsError::Utf8(_) => ErrorClass::Body,
        WsError::Url(_) => ErrorClass::Template,
        _ => ErrorClass::Other,
    }
}
