//! HTTP/1.1 as a [`Transport`]: a user's own connection, kept alive between its requests (no
//! pool, no lock), the retry of a kept-alive connection that died stale under a request, the
//! request as hyper sends it, and an exchange's phases from the IO's own stamps.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{CONNECTION, HOST, HeaderValue};
use http::{Request, Response, Uri, Version};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::time::{Instant, timeout_at};

use super::body::read_body;
use super::classify::classify_hyper;
use super::client::{Client, RequestSpec, is_idempotent};
use super::connect::{Dialed, Endpoint, Live, Target, is_tls};
use super::timing::{IoStats, TimingIo};
use super::transport::Transport;
use super::{ErrorClass, Outcome, Phases};

/// A user's HTTP/1.1 connection slot: at most one open connection, reused while keep-alive is
/// on. Not shared, so sending never waits on another user.
#[derive(Default)]
pub(crate) struct Http1 {
    live: Option<Live>,
    /// Where the last request went.
    endpoint: Option<Arc<Endpoint>>,
}

/// Which attempt of a request this is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Try {
    First,
    /// On the connection just adopted (`http: auto`: the server picked HTTP/1.1 in ALPN).
    Fresh,
    /// Again, on a new connection, after a reused one died under the first.
    Retry,
}

enum Attempt {
    Done,
    /// A reused connection died before any response byte; the caller retries on a fresh one.
    Stale,
}

impl Transport for Http1 {
    fn new(_: &Client) -> Http1 {
        Http1::default()
    }

    fn carries(uri: &Uri) -> bool {
        is_tls(uri).is_some()
    }

    async fn send(&mut self, client: &Client, req: &RequestSpec) -> Outcome {
        let start = crate::clock::tokio_instant();
        let deadline = start + client.options().timeout;
        let Some(endpoint) = self.endpoint_of(&req.uri) else {
            return Outcome {
                error: Some(ErrorClass::Other),
                ..Outcome::default()
            };
        };
        let at = (start, deadline);
        self.send_from(client, req, &endpoint, at, Outcome::default(), Try::First)
            .await
    }

    fn is_open(&self, _: &Client) -> bool {
        self.live.as_ref().is_some_and(|l| !l.sender.is_closed())
    }

    fn close(&mut self) {
        self.live = None;
    }
}

/// What one request on a connection started from: the IO's stats and where they stood.
struct Mark {
    stats: Arc<IoStats>,
    t0: Instant,
    written0: u64,
    read0: u64,
}

impl Mark {
    fn counts(&self, out: &mut Outcome) {
        out.bytes_sent = self.stats.written() - self.written0;
        out.bytes_received = self.stats.read() - self.read0;
    }
}

impl Http1 {
    /// The endpoint of `uri`: the last one when it matches, else parsed and kept.
    pub(super) fn endpoint_of(&mut self, uri: &Uri) -> Option<Arc<Endpoint>> {
        Endpoint::cached(&mut self.endpoint, uri)
    }

    /// Whether the slot holds a connection (open or not yet known closed).
    pub(super) fn holds(&self) -> bool {
        self.live.is_some()
    }

    /// Takes a connection another path opened (`http: auto`'s ALPN pick).
    pub(super) fn adopt(&mut self, live: Live) {
        self.live = Some(live);
    }

    /// Sends `req` to `endpoint` by `at` (start, deadline), `out` holding what was measured
    /// before; once more on a new connection when a kept-alive one died stale under it.
    pub(super) async fn send_from(
        &mut self,
        client: &Client,
        req: &RequestSpec,
        endpoint: &Endpoint,
        at: (Instant, Instant),
        mut out: Outcome,
        how: Try,
    ) -> Outcome {
        if let Attempt::Stale = self.attempt(client, req, endpoint, at, &mut out, how).await {
            // The first attempt's time lands in `blocked`: it was spent before the connection
            // that served the request was opened.
            out = Outcome::default();
            self.attempt(client, req, endpoint, at, &mut out, Try::Retry)
                .await;
        }
        out
    }

    async fn attempt(
        &mut self,
        client: &Client,
        req: &RequestSpec,
        endpoint: &Endpoint,
        (start, deadline): (Instant, Instant),
        out: &mut Outcome,
        how: Try,
    ) -> Attempt {
        let target = &endpoint.target();
        let Some(reused) = self
            .connection(client, target, start, deadline, out, how)
            .await
        else {
            return Attempt::Done;
        };
        let keep_alive = client.options().keep_alive;
        let Some(live) = self.live.as_mut() else {
            out.error = Some(ErrorClass::Other);
            return Attempt::Done;
        };
        out.reused = reused;
        out.local_port = Some(live.local_port);
        out.version = Version::HTTP_11;
        let Some(request) = build_request(req, endpoint.host_header.as_ref(), keep_alive) else {
            out.error = Some(ErrorClass::Other);
            return Attempt::Done;
        };
        let stats = live.stats.clone();
        stats.arm();
        let (written0, read0) = (stats.written(), stats.read());
        let t0 = crate::clock::tokio_instant();
        let mark = Mark {
            stats,
            t0,
            written0,
            read0,
        };
        let sent = timeout_at(deadline, live.sender.send_request(request)).await;
        let head_at = crate::clock::tokio_instant();
        let class = match sent {
            Ok(Ok(response)) => {
                self.receive(client, response, deadline, &mark, head_at, out)
                    .await;
                return Attempt::Done;
            }
            Ok(Err(e)) => classify_hyper(&e),
            Err(_) => ErrorClass::Timeout,
        };
        let first_reuse = reused && how != Try::Retry;
        let resendable = is_idempotent(&req.method);
        self.failed(class, first_reuse, resendable, &mark, head_at, out)
    }

    /// The user's connection for this attempt, ready to send on: the live one while it still
    /// serves `target`, else a new one (its dns, connecting and tls phases in `out`).
    /// `Some(reused)`, or `None` with `out.error` set.
    async fn connection(
        &mut self,
        client: &Client,
        target: &Target<'_>,
        start: Instant,
        deadline: Instant,
        out: &mut Outcome,
        how: Try,
    ) -> Option<bool> {
        if how == Try::Fresh {
            // Adopted from the HTTP/2 path, whose outcome already holds its phases.
            return Some(false);
        }
        let stale = |l: &Live| !l.serves(target) || l.sender.is_closed();
        if how == Try::Retry || self.live.as_ref().is_some_and(stale) {
            self.live = None;
        }
        if let Some(live) = self.live.as_mut() {
            let ready = timeout_at(deadline, live.sender.ready()).await;
            out.phases.blocked = crate::clock::elapsed(start);
            match ready {
                Ok(Ok(())) => return Some(true),
                // Closed while idle: noticed before sending, so just reconnect.
                Ok(Err(_)) => self.live = None,
                Err(_) => {
                    out.error = Some(ErrorClass::Timeout);
                    return None;
                }
            }
        }
        out.phases.blocked = crate::clock::elapsed(start);
        let connected = match client.dial(target, deadline, &mut out.phases).await {
            Ok(dialed) => handshake(dialed, target).await,
            Err(e) => Err(out.dial_failed(e)),
        };
        match connected {
            Ok(live) => {
                self.live = Some(live);
                Some(false)
            }
            Err(class) => {
                out.error = Some(class);
                None
            }
        }
    }

    /// A send that failed before the response head. A reused connection that died before
    /// reading anything (and before writing anything, unless the method may be resent) was
    /// stale: [`Attempt::Stale`], and the caller retries.
    fn failed(
        &mut self,
        class: ErrorClass,
        first_reuse: bool,
        resendable: bool,
        mark: &Mark,
        head_at: Instant,
        out: &mut Outcome,
    ) -> Attempt {
        let nothing_read = mark.stats.first_read().is_none();
        let nothing_written = mark.stats.written() == mark.written0;
        self.live = None;
        if class != ErrorClass::Timeout
            && first_reuse
            && nothing_read
            && (nothing_written || resendable)
        {
            return Attempt::Stale;
        }
        out.kernel_tx = out
            .phases
            .set_exchange(mark.t0, &mark.stats, head_at, head_at);
        mark.counts(out);
        out.error = Some(class);
        Attempt::Done
    }

    /// Reads the response's head and body into `out`; its end is when its last bytes reached
    /// the host.
    async fn receive(
        &mut self,
        client: &Client,
        response: Response<Incoming>,
        deadline: Instant,
        mark: &Mark,
        head_at: Instant,
        out: &mut Outcome,
    ) {
        let (parts, mut body) = response.into_parts();
        out.status = Some(parts.status.as_u16());
        out.headers = parts.headers;
        let opts = client.options();
        let read = read_body(&mut body, deadline, opts.max_body).await;
        let broken = read.error;
        let now = crate::clock::tokio_instant();
        // A whole response ended when its last bytes arrived, however late its task ran.
        let end = match (broken, mark.stats.last_read()) {
            (None, Some(last)) => last.clamp(mark.t0, now),
            _ => now,
        };
        out.kernel_tx = out.phases.set_exchange(mark.t0, &mark.stats, head_at, end);
        mark.counts(out);
        (out.body, out.body_discarded) = (read.body, read.discarded);
        out.error = broken;
        if broken.is_some() || !opts.keep_alive {
            self.live = None;
        }
    }
}

/// An HTTP/1.1 connection on a dialled stream.
pub(super) async fn handshake(dialed: Dialed, target: &Target<'_>) -> Result<Live, ErrorClass> {
    let stats = dialed.stats;
    let io = TokioIo::new(TimingIo::new(dialed.stream, stats.clone()));
    let (sender, connection) = hyper::client::conn::http1::Builder::new()
        .handshake(io)
        .await
        .map_err(|e| classify_hyper(&e))?;
    // The driver's errors surface through `send_request`; its own result carries nothing new.
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(Live {
        sender,
        stats,
        local_port: dialed.local_port,
        tls: target.tls,
        host: target.host.to_string(),
        port: target.port,
        driver,
    })
}

impl Phases {
    /// Splits `t0..end` into sending, waiting and receiving at the IO's last write and first
    /// read, so that `duration()` is exactly `end - t0`. Where the kernel stamped every byte
    /// of the request ([`super::tx`]), sending runs from when it took the first to when it took
    /// the last, and the request starts there: sloburn's own delay before its write is no
    /// part of it. Returns whether it did.
    fn set_exchange(
        &mut self,
        t0: Instant,
        stats: &IoStats,
        head_at: Instant,
        end: Instant,
    ) -> bool {
        let first_read = stats.first_read().unwrap_or(head_at).clamp(t0, head_at);
        let span = stats.tx_span();
        let (start, last_write) = match span {
            Some((first, last)) => {
                let first = first.clamp(t0, first_read);
                (first, last.clamp(first, first_read))
            }
            // A server may answer before the request is fully written; sending stops there.
            None => (t0, stats.last_write().unwrap_or(t0).clamp(t0, first_read)),
        };
        self.sending = last_write - start;
        self.waiting = first_read - last_write;
        self.receiving = end.saturating_duration_since(first_read);
        span.is_some()
    }
}

/// `host`: the `Host` value of the request's authority (`None`: not a valid header value, and
/// the request cannot be sent unless its headers carry one).
fn build_request(
    req: &RequestSpec,
    host: Option<&HeaderValue>,
    keep_alive: bool,
) -> Option<Request<Full<Bytes>>> {
    // Origin form; `PathAndQuery` clones share the URI's bytes.
    let mut parts = http::uri::Parts::default();
    parts.path_and_query = Some(
        req.uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/")),
    );
    let path = Uri::from_parts(parts).ok()?;
    let mut request = Request::new(Full::new(req.body.clone()));
    *request.method_mut() = req.method.clone();
    *request.uri_mut() = path;
    // Sized for the two headers added here: growing a map while inserting costs a rehash.
    let headers = request.headers_mut();
    headers.try_reserve(req.headers.len() + 2).ok()?;
    for (name, value) in &req.headers {
        headers.try_append(name, value.clone()).ok()?;
    }
    if !headers.contains_key(HOST) {
        headers.try_insert(HOST, host?.clone()).ok()?;
    }
    if !keep_alive {
        headers
            .try_insert(CONNECTION, HeaderValue::from_static("close"))
            .ok()?;
    }
    Some(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn exchange_phases_sum_to_the_whole() {
        let stats = IoStats::new();
        let t0 = crate::clock::tokio_instant();
        let end = t0 + Duration::from_millis(50);
        let mut p = Phases::default();
        // Nothing recorded by the IO (error before writing): all of it is waiting.
        p.set_exchange(t0, &stats, end, end);
        assert_eq!(p.duration(), Duration::from_millis(50));
        assert_eq!(p.sending, Duration::ZERO);
    }
}
