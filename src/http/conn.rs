//! A virtual user's connection slot: sending a request on its live connection (or a new one),
//! the retry of a stale kept-alive connection, the request as hyper sends it, and the phases
//! of an exchange.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{CONNECTION, HOST, HeaderValue};
use http::{Method, Request, Uri, Version};
use http_body_util::Full;
use tokio::time::{Instant, timeout_at};

use super::client::*;
use super::h2::{self, Sent};
use super::timing::IoStats;
use super::{ErrorClass, Outcome, Phases};

/// A virtual user's connection slot: at most one open connection, reused while keep-alive is
/// on. Not shared, so sending never waits on another user.
pub struct Conn {
    pub(super) client: Client,
    pub(super) live: Option<Live>,
    /// Where the last request went.
    pub(super) endpoint: Option<Arc<Endpoint>>,
    /// This user's HTTP/2 connection slot.
    pub(super) slot: usize,
    /// Whether its last request went over HTTP/2 (then `is_open` asks the pool).
    pub(super) h2_used: bool,
    /// A gRPC target's connection, this user's own.
    pub(super) grpc: super::grpc::target::Slot,
}

/// Which attempt of a request this is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Try {
    First,
    /// On the connection the HTTP/2 path just opened (the server picked HTTP/1.1).
    Fresh,
    /// Again, on a new connection, after a reused one died under the first.
    Retry,
}

pub(super) enum Attempt {
    Done,
    /// A reused connection died before any response byte; the caller retries on a fresh one.
    Stale,
}

impl Conn {
    /// Sends one request and reads the whole response. Never fails: a transport failure is
    /// `Outcome::error`, and whatever was measured before it is kept.
    pub async fn send(&mut self, req: &RequestSpec) -> Outcome {
        let protocol = self.client.inner.opts.protocol;
        if protocol.is_probe() {
            return super::probe::send(&self.client, protocol, req).await;
        }
        if protocol == super::Protocol::Grpc {
            return super::grpc::target::send(&self.client, &mut self.grpc, req).await;
        }
        let start = crate::clock::tokio_instant();
        let deadline = start + self.client.inner.opts.timeout;
        let mut out = Outcome::default();
        let Some(endpoint) = self.endpoint_of(&req.uri) else {
            // A journey step may name another protocol in its own `url` (`ws://…`).
            if let Some(p) = req.uri.scheme_str().and_then(super::Protocol::of_scheme)
                && p.is_probe()
            {
                return super::probe::send(&self.client, p, req).await;
            }
            out.error = Some(ErrorClass::Other);
            return out;
        };
        let target = endpoint.target();
        let mut fresh = false;
        if self.live.is_none() && self.client.wants_h2(&target) {
            let client = self.client.clone();
            let pool = &client.inner.h2;
            match h2::send(&client, pool, self.slot, req, &target, start, deadline).await {
                Sent::Done(out) => {
                    self.h2_used = true;
                    return out;
                }
                Sent::Http1(Some((live, opened))) => {
                    (self.live, out, fresh) = (Some(live), opened, true);
                }
                Sent::Http1(None) => {}
            }
        }
        self.h2_used = false;
        if let Attempt::Stale = self
            .attempt(
                req,
                &endpoint,
                start,
                deadline,
                &mut out,
                if fresh { Try::Fresh } else { Try::First },
            )
            .await
        {
            // The first attempt's time lands in `blocked`: it was spent before the connection
            // that served the request was opened.
            out = Outcome::default();
            self.attempt(req, &endpoint, start, deadline, &mut out, Try::Retry)
                .await;
        }
        out
    }

    /// Sends one call of `spec`, a journey step's own gRPC call, to `req.uri` (`grpc://` or
    /// `grpcs://`) over this user's gRPC connection, whatever the target's protocol: the
    /// target's client dials it (its resolver, timeout and TLS options).
    pub async fn send_grpc(&mut self, spec: &super::grpc::GrpcSpec, req: &RequestSpec) -> Outcome {
        super::grpc::target::send_with(&self.client, spec, &mut self.grpc, req).await
    }

    /// The endpoint of `uri`: the last one when it matches, else parsed and kept.
    pub(super) fn endpoint_of(&mut self, uri: &Uri) -> Option<Arc<Endpoint>> {
        match &self.endpoint {
            Some(e) if e.matches(uri) => Some(e.clone()),
            _ => {
                let e = Arc::new(Endpoint::of(uri)?);
                self.endpoint = Some(e.clone());
                Some(e)
            }
        }
    }

    /// Whether a connection is open and usable: the next request then connects nothing.
    pub fn is_open(&self) -> bool {
        self.live.as_ref().is_some_and(|l| !l.sender.is_closed())
            || (self.h2_used && self.client.inner.h2.is_open(self.slot))
    }

    /// Drops the open connection, if any; the next request connects afresh.
    pub fn close(&mut self) {
        self.live = None;
    }

    pub(super) async fn attempt(
        &mut self,
        req: &RequestSpec,
        endpoint: &Endpoint,
        start: Instant,
        deadline: Instant,
        out: &mut Outcome,
        how: Try,
    ) -> Attempt {
        let target = &endpoint.target();
        let (retrying, fresh) = (how == Try::Retry, how == Try::Fresh);
        let keep_alive = self.client.inner.opts.keep_alive;
        if !fresh
            && (retrying
                || self
                    .live
                    .as_ref()
                    .is_some_and(|l| !l.serves(target) || l.sender.is_closed()))
        {
            self.live = None;
        }
        let mut reused = false;
        if fresh {
            // Opened by the HTTP/2 path, whose outcome already holds its phases.
        } else if let Some(live) = self.live.as_mut() {
            match timeout_at(deadline, live.sender.ready()).await {
                Ok(Ok(())) => reused = true,
                // Closed while idle: noticed before sending, so just reconnect.
                Ok(Err(_)) => self.live = None,
                Err(_) => {
                    out.phases.blocked = crate::clock::elapsed(start);
                    out.error = Some(ErrorClass::Timeout);
                    return Attempt::Done;
                }
            }
        }
        if !fresh {
            out.phases.blocked = crate::clock::elapsed(start);
        }
        if !reused && !fresh {
            let client = &self.client;
            let connected = match client.dial(target, deadline, &mut out.phases).await {
                Ok(dialed) => client.h1_handshake(dialed, target).await,
                Err(class) => Err(class),
            };
            match connected {
                Ok(live) => self.live = Some(live),
                Err(class) => {
                    out.error = Some(class);
                    return Attempt::Done;
                }
            }
        }
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
        let sent = timeout_at(deadline, live.sender.send_request(request)).await;
        let head_at = crate::clock::tokio_instant();
        let response = match sent {
            Ok(Ok(response)) => response,
            failed => {
                let class = match failed {
                    Ok(Err(e)) => classify_hyper(&e),
                    _ => ErrorClass::Timeout,
                };
                let nothing_read = stats.first_read().is_none();
                let nothing_written = stats.written() == written0;
                self.live = None;
                if class != ErrorClass::Timeout
                    && reused
                    && !retrying
                    && nothing_read
                    && (nothing_written || is_idempotent(&req.method))
                {
                    return Attempt::Stale;
                }
                out.phases.set_exchange(t0, &stats, head_at, head_at);
                out.bytes_sent = stats.written() - written0;
                out.bytes_received = stats.read() - read0;
                out.error = Some(class);
                return Attempt::Done;
            }
        };

        let (parts, mut body) = response.into_parts();
        out.status = Some(parts.status.as_u16());
        out.headers = parts.headers;
        let read = read_body(&mut body, deadline, self.client.inner.opts.max_body).await;
        let broken = read.error;
        let now = crate::clock::tokio_instant();
        // A whole response ended when its last bytes arrived, however late its task ran.
        let end = match (broken, stats.last_read()) {
            (None, Some(last)) => last.clamp(t0, now),
            _ => now,
        };
        out.phases.set_exchange(t0, &stats, head_at, end);
        out.bytes_sent = stats.written() - written0;
        out.bytes_received = stats.read() - read0;
        (out.body, out.body_discarded) = (read.body, read.discarded);
        out.error = broken;
        if broken.is_some() || !keep_alive {
            self.live = None;
        }
        Attempt::Done
    }
}

impl Phases {
    /// Splits `t0..end` into sending, waiting and receiving at the IO's last write and first
    /// read, so that `duration()` is exactly `end - t0`.
    pub(super) fn set_exchange(
        &mut self,
        t0: Instant,
        stats: &IoStats,
        head_at: Instant,
        end: Instant,
    ) {
        let first_read = stats.first_read().unwrap_or(head_at).clamp(t0, head_at);
        // A server may answer before the request is fully written; sending stops there.
        let last_write = stats.last_write().unwrap_or(t0).clamp(t0, first_read);
        self.sending = last_write - t0;
        self.waiting = first_read - last_write;
        self.receiving = end.saturating_duration_since(first_read);
    }
}

/// `host`: the `Host` value of the request's authority (`None`: not a valid header value, and
/// the request cannot be sent unless its headers carry one).
pub(super) fn build_request(
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

/// Methods a client may resend after a connection died under it (RFC 9110 §9.2.2).
pub(crate) fn is_idempotent(m: &Method) -> bool {
    matches!(
        *m,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}
