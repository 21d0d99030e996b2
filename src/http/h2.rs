//! HTTP/2: a client's few shared connections (its pool) and one stream's exchange on them.
//!
//! A client holds `max_connections` slots; each `Conn` is given one at creation (round robin),
//! so its virtual user's streams share that slot's connection with the other users of the
//! slot. The request that finds a slot empty or its connection dead opens a new one and pays
//! its dns, connecting and tls phases; users that arrive meanwhile wait for it in `blocked`.
//! Per stream: `sending` is handing the request to the connection, `waiting` from there to the
//! response head, `receiving` to the end of the body. Bytes count bodies only: the frames of
//! many streams share one connection.
//!
//! Errors: a GOAWAY or RST_STREAM from the server is `reset`; a protocol error sloburn's side
//! detects is `other`; an IO error is classified by its errno as on HTTP/1.1.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{CONNECTION, HOST, TRANSFER_ENCODING, UPGRADE};
use http::{Request, Response, Uri, Version};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::Mutex;
use tokio::time::{Instant, timeout_at};

use super::body::read_body;
use super::classify::classify_hyper;
use super::client::{Client, RequestSpec, is_idempotent};
pub use super::connect::DEFAULT_MAX_CONNECTIONS;
use super::connect::{Dialed, Endpoint, H2Live, Target, is_tls};
use super::timing::IoStats;
use super::transport::Transport;
use super::{ErrorClass, Outcome};

/// When what the connection has just delivered reached the host: its latest read's receive
/// stamp, no earlier than `floor` (the stream's own start) and no later than now.
fn arrived(stats: &IoStats, floor: Instant) -> Instant {
    let now = crate::clock::tokio_instant();
    stats
        .latest_rx()
        .map_or(now, |rx| rx.clamp(floor.min(now), now))
}

/// A user's place among the client's HTTP/2 connections: its slot (`http: "2"`; h2c on
/// `http://`, ALPN `h2` only on `https://`).
pub(crate) struct H2 {
    pub(super) slot: usize,
    /// Where the last request went.
    endpoint: Option<Arc<Endpoint>>,
}

impl Transport for H2 {
    fn new(client: &Client) -> H2 {
        H2 {
            slot: client.inner.h2.assign(),
            endpoint: None,
        }
    }

    fn carries(uri: &Uri) -> bool {
        is_tls(uri).is_some()
    }

    async fn send(&mut self, client: &Client, req: &RequestSpec) -> Outcome {
        let start = crate::clock::tokio_instant();
        let deadline = start + client.options().timeout;
        let failed = Outcome {
            error: Some(ErrorClass::Other),
            ..Outcome::default()
        };
        let Some(endpoint) = Endpoint::cached(&mut self.endpoint, &req.uri) else {
            return failed;
        };
        match send(client, self.slot, req, &endpoint.target(), start, deadline).await {
            Sent::Done(out) => out,
            // Only ALPN's choice falls back (`alpn.rs`): offering only h2, a server without it
            // fails the handshake, and h2c speaks HTTP/2 by configuration.
            Sent::Http1(_) => failed,
        }
    }

    fn is_open(&self, client: &Client) -> bool {
        client.inner.h2.is_open(self.slot)
    }
}

/// What the HTTP/2 path did.
pub(crate) enum Sent {
    Done(Outcome),
    /// The server picked HTTP/1.1 in ALPN (or already had): the caller sends over HTTP/1.1, on
    /// the stream dialled (phases so far in the outcome) or on a connection of its own.
    Http1(Option<(Dialed, Outcome)>),
}

/// What a stream goes over: the slot's connection as it was when the stream took it.
struct Opened {
    sender: SendRequest<Full<Bytes>>,
    stats: Arc<IoStats>,
    reused: bool,
}

/// How one stream's exchange ended.
enum Ended {
    Done,
    /// The connection died under a reused idempotent request: a fresh one may serve it.
    Stale,
}

pub(crate) async fn handshake(dialed: Dialed, target: &Target<'_>) -> Result<H2Live, ErrorClass> {
    let io = TokioIo::new(dialed.stream);
    let (sender, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .handshake(io)
        .await
        .map_err(|e| classify_hyper(&e))?;
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(H2Live {
        sender,
        stats: dialed.stats,
        local_port: dialed.local_port,
        tls: target.tls,
        host: target.host.to_string(),
        port: target.port,
        driver,
    })
}

/// Sends one request as a stream on the slot's connection, opening the connection when the
/// slot has none. A connection that died under a reused idempotent request is replaced and the
/// request sent once more.
pub(crate) async fn send(
    client: &Client,
    slot: usize,
    req: &RequestSpec,
    target: &Target<'_>,
    start: Instant,
    deadline: Instant,
) -> Sent {
    let slot = client.inner.h2.slot(slot);
    let mut out = Outcome::default();
    for retrying in [false, true] {
        out = Outcome::default();
        let opened = match connection(client, slot, target, start, deadline, &mut out).await {
            Ok(opened) => opened,
            Err(sent) => return sent,
        };
        out.reused = opened.reused;
        out.version = Version::HTTP_2;
        let stale_ok = !retrying && is_idempotent(&req.method);
        if let Ended::Done =
            exchange(client, opened, req, target, deadline, &mut out, stale_ok).await
        {
            return Sent::Done(out);
        }
    }
    Sent::Done(out)
}

/// The slot's connection, or a new one (its dns, connecting and tls phases in `out`; the
/// wait for the slot in `blocked`). `Err` when the request ends here: a failure, or the
/// server's pick of HTTP/1.1.
async fn connection(
    client: &Client,
    slot: &Mutex<Option<H2Live>>,
    target: &Target<'_>,
    start: Instant,
    deadline: Instant,
    out: &mut Outcome,
) -> Result<Opened, Sent> {
    let fail = |out: &mut Outcome, class| {
        out.error = Some(class);
        Sent::Done(std::mem::take(out))
    };
    let Ok(mut guard) = timeout_at(deadline, slot.lock()).await else {
        out.phases.blocked = crate::clock::elapsed(start);
        return Err(fail(out, ErrorClass::Timeout));
    };
    if client.speaks_h1_only() {
        return Err(Sent::Http1(None));
    }
    if guard.as_ref().is_some_and(|l| !l.serves(target)) {
        *guard = None;
    }
    let reused = guard.is_some();
    out.phases.blocked = crate::clock::elapsed(start);
    if !reused {
        let dialed = match client.dial(target, deadline, &mut out.phases).await {
            Ok(d) => d,
            Err(e) => {
                let class = out.dial_failed(e);
                return Err(fail(out, class));
            }
        };
        if !dialed.h2 {
            client.set_h1_only();
            return Err(Sent::Http1(Some((dialed, std::mem::take(out)))));
        }
        match timeout_at(deadline, handshake(dialed, target)).await {
            Ok(Ok(live)) => *guard = Some(live),
            Ok(Err(class)) => return Err(fail(out, class)),
            Err(_) => return Err(fail(out, ErrorClass::Timeout)),
        }
    }
    let Some(live) = guard.as_ref() else {
        return Err(fail(out, ErrorClass::Other));
    };
    out.local_port = Some(live.local_port);
    Ok(Opened {
        sender: live.sender.clone(),
        stats: live.stats.clone(),
        reused,
    })
}

/// One stream: `sending` is handing the request to the connection, `waiting` from there to
/// the head's arrival, `receiving` to the body's. `stale_ok`: a reused connection that died
/// under it may be retried.
async fn exchange(
    client: &Client,
    opened: Opened,
    req: &RequestSpec,
    target: &Target<'_>,
    deadline: Instant,
    out: &mut Outcome,
    stale_ok: bool,
) -> Ended {
    let Opened {
        mut sender,
        stats,
        reused,
    } = opened;
    let Some(request) = build_request(req, target) else {
        out.error = Some(ErrorClass::Other);
        return Ended::Done;
    };
    let t0 = crate::clock::tokio_instant();
    let ready = timeout_at(deadline, sender.ready()).await;
    let sent = match ready {
        Ok(Ok(())) => {
            let response = sender.send_request(request);
            let handed = crate::clock::tokio_instant();
            out.phases.sending = handed - t0;
            timeout_at(deadline, response).await
        }
        Ok(Err(e)) => Ok(Err(e)),
        Err(e) => Err(e),
    };
    // An answer arrived when its bytes did; a failure is timed when it is seen.
    let head_at = match sent {
        Ok(Ok(_)) => arrived(&stats, t0 + out.phases.sending),
        _ => crate::clock::tokio_instant(),
    };
    out.phases.waiting = head_at
        .saturating_duration_since(t0)
        .saturating_sub(out.phases.sending);
    let class = match sent {
        Ok(Ok(response)) => {
            receive(client, response, req, &stats, head_at, deadline, out).await;
            return Ended::Done;
        }
        Ok(Err(e)) => classify_hyper(&e),
        Err(_) => ErrorClass::Timeout,
    };
    // The connection itself died (GOAWAY, reset socket): a fresh one may serve it.
    if class == ErrorClass::Reset && reused && stale_ok && sender.is_closed() {
        return Ended::Stale;
    }
    out.error = Some(class);
    Ended::Done
}

/// Reads the response's head and body into `out`; its end is when its last bytes reached the
/// host. Bytes count bodies only: the frames of many streams share one connection.
async fn receive(
    client: &Client,
    response: Response<Incoming>,
    req: &RequestSpec,
    stats: &IoStats,
    head_at: Instant,
    deadline: Instant,
    out: &mut Outcome,
) {
    let (parts, mut body) = response.into_parts();
    out.version = parts.version;
    out.status = Some(parts.status.as_u16());
    out.headers = parts.headers;
    let read = read_body(&mut body, deadline, client.options().max_body).await;
    let end = match read.error {
        None => arrived(stats, head_at),
        Some(_) => crate::clock::tokio_instant(),
    };
    out.phases.receiving = end.saturating_duration_since(head_at);
    out.bytes_sent = req.body.len() as u64;
    out.bytes_received = read.received;
    (out.body, out.body_discarded) = (read.body, read.discarded);
    out.error = read.error;
}

/// The request in the form hyper's HTTP/2 client wants: an absolute URI (its scheme and
/// authority become `:scheme` and `:authority`; a `Host` header written in the config becomes
/// the authority), no connection-specific headers.
fn build_request(req: &RequestSpec, target: &Target<'_>) -> Option<Request<Full<Bytes>>> {
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
    let path = req
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let uri = Uri::builder()
        .scheme(if target.tls { "https" } else { "http" })
        .authority(authority)
        .path_and_query(path)
        .build()
        .ok()?;
    let mut request = Request::new(Full::new(req.body.clone()));
    *request.method_mut() = req.method.clone();
    *request.uri_mut() = uri;
    *request.version_mut() = Version::HTTP_2;
    *request.headers_mut() = headers;
    Some(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn the_host_header_becomes_the_authority_and_connection_headers_go() {
        let uri: Uri = "https://127.0.0.1:8443/a?b=1".parse().unwrap();
        let target = Target::parse(&uri).unwrap();
        let mut headers = http::HeaderMap::new();
        headers.insert(HOST, "shop.internal".parse().unwrap());
        headers.insert(CONNECTION, "close".parse().unwrap());
        headers.insert("x-a", "1".parse().unwrap());
        let req = RequestSpec {
            method: Method::POST,
            uri: uri.clone(),
            headers,
            body: Bytes::from_static(b"x"),
        };
        let r = build_request(&req, &target).unwrap();
        assert_eq!(r.uri().to_string(), "https://shop.internal/a?b=1");
        assert!(r.headers().get(HOST).is_none());
        assert!(r.headers().get(CONNECTION).is_none());
        assert_eq!(r.headers()["x-a"], "1");
        let plain = RequestSpec {
            headers: http::HeaderMap::new(),
            ..req
        };
        let r = build_request(&plain, &target).unwrap();
        assert_eq!(r.uri().to_string(), "https://127.0.0.1:8443/a?b=1");
    }
}
