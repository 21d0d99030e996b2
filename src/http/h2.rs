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
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http::header::{CONNECTION, HOST, TRANSFER_ENCODING, UPGRADE};
use http::{Request, Uri, Version};
use http_body_util::Full;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout_at};

use super::client::{Client, Dialed, Live, RequestSpec, Target, is_idempotent, read_body};
use super::timing::IoStats;
use super::{ErrorClass, Outcome, classify_hyper};

/// When what the connection has just delivered reached the host: its latest read's receive
/// stamp, no earlier than `floor` (the stream's own start) and no later than now.
fn arrived(stats: &IoStats, floor: Instant) -> Instant {
    let now = crate::clock::tokio_instant();
    stats
        .latest_rx()
        .map_or(now, |rx| rx.clamp(floor.min(now), now))
}

/// Which HTTP version a target speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HttpVersion {
    /// https: ALPN offers h2 and http/1.1 and the server picks; http://: HTTP/1.1.
    #[default]
    Auto,
    Http1,
    /// https: ALPN offers only h2; http://: h2c with prior knowledge.
    Http2,
}

impl HttpVersion {
    pub fn parse(s: &str) -> Option<HttpVersion> {
        Some(match s {
            "auto" => HttpVersion::Auto,
            "1.1" | "1" => HttpVersion::Http1,
            "2" | "2.0" => HttpVersion::Http2,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            HttpVersion::Auto => "auto",
            HttpVersion::Http1 => "1.1",
            HttpVersion::Http2 => "2",
        }
    }
}

/// The default `http2.max_connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4;

/// A client's HTTP/2 connection slots.
pub(crate) struct Pool {
    slots: Vec<tokio::sync::Mutex<Option<H2Live>>>,
    next: AtomicUsize,
}

impl Pool {
    pub(crate) fn new(max_connections: usize) -> Pool {
        Pool {
            slots: (0..max_connections.max(1))
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// The slot of a new `Conn`.
    pub(crate) fn assign(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len()
    }

    /// Whether a request on `slot` would open nothing: its connection is open, or another user
    /// holds the slot (it is sending on it or opening it).
    pub(crate) fn is_open(&self, slot: usize) -> bool {
        match self.slots[slot % self.slots.len()].try_lock() {
            Ok(live) => live.as_ref().is_some_and(|l| !l.sender.is_closed()),
            Err(_) => true,
        }
    }
}

/// One open HTTP/2 connection.
pub(crate) struct H2Live {
    sender: SendRequest<Full<Bytes>>,
    /// The connection's receive stamps: a stream's answer arrived no later than the latest.
    stats: Arc<IoStats>,
    local_port: u16,
    tls: bool,
    host: String,
    port: u16,
    driver: JoinHandle<()>,
}

impl Drop for H2Live {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// What the HTTP/2 path did.
pub(crate) enum Sent {
    Done(Outcome),
    /// The server picked HTTP/1.1 in ALPN (or already had): the caller sends over HTTP/1.1, on
    /// the connection given (phases so far in the outcome) or on one of its own.
    Http1(Option<(Live, Outcome)>),
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
    pool: &Pool,
    slot: usize,
    req: &RequestSpec,
    target: &Target<'_>,
    start: Instant,
    deadline: Instant,
) -> Sent {
    let slot = &pool.slots[slot % pool.slots.len()];
    let mut out = Outcome::default();
    for retrying in [false, true] {
        out = Outcome::default();
        let Ok(mut guard) = timeout_at(deadline, slot.lock()).await else {
            out.phases.blocked = crate::clock::elapsed(start);
            out.error = Some(ErrorClass::Timeout);
            return Sent::Done(out);
        };
        if client.speaks_h1_only() {
            return Sent::Http1(None);
        }
        if guard.as_ref().is_some_and(|l| {
            l.sender.is_closed()
                || l.tls != target.tls
                || l.port != target.port
                || l.host != target.host
        }) {
            *guard = None;
        }
        let reused = guard.is_some();
        out.phases.blocked = crate::clock::elapsed(start);
        if !reused {
            let dialed = match client.dial(target, deadline, &mut out.phases).await {
                Ok(d) => d,
                Err(class) => {
                    out.error = Some(class);
                    return Sent::Done(out);
                }
            };
            if !dialed.h2 {
                client.set_h1_only();
                drop(guard);
                return match client.h1_handshake(dialed, target).await {
                    Ok(live) => Sent::Http1(Some((live, out))),
                    Err(class) => {
                        out.error = Some(class);
                        Sent::Done(out)
                    }
                };
            }
            match timeout_at(deadline, handshake(dialed, target)).await {
                Ok(Ok(live)) => *guard = Some(live),
                failed => {
                    out.error = Some(match failed {
                        Ok(Err(class)) => class,
                        _ => ErrorClass::Timeout,
                    });
                    return Sent::Done(out);
                }
            }
        }
        let Some(live) = guard.as_ref() else {
            out.error = Some(ErrorClass::Other);
            return Sent::Done(out);
        };
        let mut sender = live.sender.clone();
        let stats = live.stats.clone();
        out.local_port = Some(live.local_port);
        drop(guard);
        out.reused = reused;
        out.version = Version::HTTP_2;
        let Some(request) = build_request(req, target) else {
            out.error = Some(ErrorClass::Other);
            return Sent::Done(out);
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
        let response = match sent {
            Ok(Ok(response)) => response,
            failed => {
                let class = match failed {
                    Ok(Err(e)) => classify_hyper(&e),
                    _ => ErrorClass::Timeout,
                };
                // The connection itself died (GOAWAY, reset socket): a fresh one may serve it.
                if class == ErrorClass::Reset
                    && reused
                    && !retrying
                    && sender.is_closed()
                    && is_idempotent(&req.method)
                {
                    continue;
                }
                out.phases.waiting = head_at
                    .saturating_duration_since(t0)
                    .saturating_sub(out.phases.sending);
                out.error = Some(class);
                return Sent::Done(out);
            }
        };
        out.phases.waiting = head_at
            .saturating_duration_since(t0)
            .saturating_sub(out.phases.sending);
        let (parts, mut body) = response.into_parts();
        out.version = parts.version;
        out.status = Some(parts.status.as_u16());
        out.headers = parts.headers;
        let read = read_body(&mut body, deadline, client.options().max_body).await;
        let end = match read.error {
            None => arrived(&stats, head_at),
            Some(_) => crate::clock::tokio_instant(),
        };
        out.phases.receiving = end.saturating_duration_since(head_at);
        out.bytes_sent = req.body.len() as u64;
        out.bytes_received = read.received;
        (out.body, out.body_discarded) = (read.body, read.discarded);
        out.error = read.error;
        return Sent::Done(out);
    }
    Sent::Done(out)
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
    fn versions_parse() {
        for v in [HttpVersion::Auto, HttpVersion::Http1, HttpVersion::Http2] {
            assert_eq!(HttpVersion::parse(v.as_str()), Some(v));
        }
        assert_eq!(HttpVersion::parse("3"), None);
    }

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

    #[test]
    fn slots_are_assigned_round_robin() {
        let pool = Pool::new(3);
        let got: Vec<usize> = (0..7).map(|_| pool.assign()).collect();
        assert_eq!(got, [0, 1, 2, 0, 1, 2, 0]);
        assert!(!pool.is_open(1));
        assert_eq!(Pool::new(0).slots.len(), 1);
    }
}
