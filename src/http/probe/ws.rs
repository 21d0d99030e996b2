//! `ws://` and `wss://` targets: a WebSocket session per request. The client's own dialling
//! (DNS, connect, TLS), the upgrade (`sending`: request to `101`), then the body sent as one
//! message and messages read until one holds `expect` (without it: the first one). The
//! round trip, send to first message, is `waiting`; the rest of the session `receiving`; the
//! session's whole time its duration. Frames and the upgrade are tokio-tungstenite's.

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::time::{Instant, timeout_at};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::http::client::{Client, RequestSpec, Target};
use crate::http::{ErrorClass, Outcome, classify_io};

pub(super) async fn session(client: &Client, req: &RequestSpec, tls: bool) -> Outcome {
    let opts = client.options();
    let start = crate::clock::tokio_instant();
    let deadline = start + opts.timeout;
    let mut out = Outcome::default();
    let Some(authority) = req.uri.authority() else {
        out.error = Some(ErrorClass::Other);
        return out;
    };
    let target = Target {
        tls,
        host: authority.host(),
        port: authority.port_u16().unwrap_or(if tls { 443 } else { 80 }),
        authority: authority.as_str(),
    };
    let Ok(mut request) = req.uri.clone().into_client_request() else {
        out.error = Some(ErrorClass::Template);
        return out;
    };
    for (name, value) in &req.headers {
        request.headers_mut().append(name.clone(), value.clone());
    }
    let dialed = match client.dial(&target, deadline, &mut out.phases).await {
        Ok(d) => d,
        Err(class) => {
            out.error = Some(class);
            return out;
        }
    };
    out.local_port = Some(dialed.local_port);
    let t = crate::clock::tokio_instant();
    let upgrade = timeout_at(
        deadline,
        tokio_tungstenite::client_async(request, dialed.stream),
    )
    .await;
    out.phases.sending = crate::clock::elapsed(t);
    let mut ws = match upgrade {
        Ok(Ok((ws, response))) => {
            out.status = Some(response.status().as_u16());
            out.headers = response.headers().clone();
            ws
        }
        // The server answered, and not with 101: its status is the outcome.
        Ok(Err(WsError::Http(response))) => {
            out.status = Some(response.status().as_u16());
            out.headers = response.headers().clone();
            out.body = response.body().clone().map(Bytes::from).unwrap_or_default();
            return out;
        }
        Ok(Err(e)) => {
            out.error = Some(classify(&e));
            return out;
        }
        Err(_) => {
            out.error = Some(ErrorClass::Timeout);
            return out;
        }
    };
    let expect = opts.probe.expect.as_deref();
    let sent_at = crate::clock::tokio_instant();
    if !req.body.is_empty() {
        let msg = match std::str::from_utf8(&req.body) {
            Ok(text) => Message::text(text),
            Err(_) => Message::binary(req.body.clone()),
        };
        match timeout_at(deadline, ws.send(msg)).await {
            Ok(Ok(())) => out.bytes_sent = req.body.len() as u64,
            Ok(Err(e)) => {
                out.error = Some(classify(&e));
                return out;
            }
            Err(_) => {
                out.error = Some(ErrorClass::Timeout);
                return out;
            }
        }
    }
    let mut first: Option<Instant> = None;
    let result = if req.body.is_empty() && expect.is_none() {
        Ok(())
    } else {
        loop {
            let data = match timeout_at(deadline, ws.next()).await {
                Ok(Some(Ok(Message::Text(t)))) => Bytes::from(t),
                Ok(Some(Ok(Message::Binary(b)))) => b,
                // Pings are answered by tungstenite as the next read goes on.
                Ok(Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)))) => continue,
                // Closed before what was expected: the `expect` check fails on what came.
                Ok(Some(Ok(Message::Close(_)))) | Ok(None) => break Ok(()),
                Ok(Some(Err(e))) => break Err(classify(&e)),
                Err(_) => break Err(ErrorClass::Timeout),
            };
            first.get_or_insert_with(crate::clock::tokio_instant);
            out.bytes_received += data.len() as u64;
            let done = match expect {
                Some(e) => memchr::memmem::find(&data, e).is_some(),
                None => true,
            };
            out.body = data;
            if done {
                break Ok(());
            }
        }
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

fn classify(e: &WsError) -> ErrorClass {
    match e {
        WsError::Io(io) => classify_io(io, false),
        WsError::Tls(_) => ErrorClass::Tls,
        WsError::ConnectionClosed | WsError::AlreadyClosed => ErrorClass::Reset,
        WsError::Capacity(_) | WsError::Protocol(_) | WsError::Utf8(_) => ErrorClass::Body,
        WsError::Url(_) => ErrorClass::Template,
        _ => ErrorClass::Other,
    }
}
