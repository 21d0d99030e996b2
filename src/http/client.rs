//! The measuring HTTP client: one HTTP/1.1 connection slot per virtual user (HTTP/2 streams
//! share a few connections, see [`super::h2`]), per-phase timings, and transport failures
//! classified into [`ErrorClass`] instead of returned.
//!
//! Built on hyper's low-level `client::conn` over our own connector (resolver → TCP →
//! rustls), because a pooled client hides exactly what a load tester must measure: which
//! request paid for DNS, connect and handshake, and which reused a connection.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{CONNECTION, HOST, HeaderValue};
use http::{Method, Request, Uri, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout_at};
use tokio_rustls::TlsConnector;

use super::dns::select::{DnsSelect, order};
use super::dns::{Cache, DnsError, Resolver};
use super::h2::{self, HttpVersion, Pool, Sent};
use super::timing::{IoStats, TimingIo};
use super::tls::{Stream, TlsOptions, server_name, shared_client_config};
use super::{ErrorClass, Outcome, Phases};

/// One request to send. The URI is absolute (`http://` or `https://`); `Host` is added from it
/// unless the headers already carry one.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    pub method: Method,
    pub uri: Uri,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// Bounds a whole request, from the connection slot through the last body byte.
    pub timeout: Duration,
    /// false: a new connection per request, sent with `Connection: close` (ab without `-k`).
    pub keep_alive: bool,
    /// How long a lookup is reused, capped by the record's TTL; zero resolves on every new
    /// connection.
    pub dns_ttl: Duration,
    /// The most body bytes read per response, all kept in [`Outcome::body`]. A body that goes
    /// past it is cut there: the request fails as [`ErrorClass::BodyTooLarge`] and its
    /// connection is closed.
    pub max_body: usize,
    /// Skip certificate verification (`tls.insecure`, or `insecure_skip_verify`).
    pub insecure_skip_verify: bool,
    pub http: HttpVersion,
    /// How many HTTP/2 connections this client's users share (`http2.max_connections`).
    pub h2_max_connections: usize,
    pub tls: TlsOptions,
    /// Dial this host and port whatever the URL says; SNI and `Host` stay the URL's.
    pub connect_to: Option<(String, u16)>,
    /// Which address of a multi-address name a new connection tries first.
    pub dns_select: DnsSelect,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            timeout: Duration::from_secs(10),
            keep_alive: true,
            // k6's default DNS TTL.
            dns_ttl: Duration::from_secs(300),
            max_body: 1 << 20,
            insecure_skip_verify: false,
            http: HttpVersion::Auto,
            h2_max_connections: h2::DEFAULT_MAX_CONNECTIONS,
            tls: TlsOptions::default(),
            connect_to: None,
            dns_select: DnsSelect::First,
        }
    }
}

/// Shared configuration: resolver, DNS cache, TLS config. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    opts: ClientOptions,
    resolver: Arc<Resolver>,
    tls: OnceLock<TlsConnector>,
    cache: Mutex<Cache>,
    h2: Pool,
    /// Round-robin turns of `dns_select`.
    turn: AtomicUsize,
    /// `http: auto` on https, and the server picked HTTP/1.1: every user keeps its own.
    h1_only: AtomicBool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("opts", &self.inner.opts)
            .finish_non_exhaustive()
    }
}

impl Client {
    pub fn new(opts: ClientOptions, resolver: Arc<Resolver>) -> Client {
        if opts.insecure_skip_verify {
            tracing::warn!("TLS certificates are not verified (tls.insecure)");
        }
        let h2 = Pool::new(opts.h2_max_connections);
        Client {
            inner: Arc::new(Inner {
                opts,
                resolver,
                tls: OnceLock::new(),
                cache: Mutex::new(Cache::default()),
                h2,
                turn: AtomicUsize::new(0),
                h1_only: AtomicBool::new(false),
            }),
        }
    }

    /// The TLS connector, made at the first https connection: a plain-HTTP target never
    /// builds one.
    fn tls(&self) -> &TlsConnector {
        self.inner.tls.get_or_init(|| {
            let opts = &self.inner.opts;
            let alpn: &[&[u8]] = match opts.http {
                HttpVersion::Auto => &[b"h2", b"http/1.1"],
                HttpVersion::Http1 => &[b"http/1.1"],
                HttpVersion::Http2 => &[b"h2"],
            };
            let config = shared_client_config(&opts.tls, opts.insecure_skip_verify, alpn)
                .unwrap_or_else(|e| {
                    // Config validates the same options, so only a hand-built client gets here.
                    tracing::error!(
                        "TLS options refused ({e}); using the default roots and no client certificate"
                    );
                    shared_client_config(&TlsOptions::default(), opts.insecure_skip_verify, alpn)
                        .expect("the default TLS options always build")
                });
            TlsConnector::from(config)
        })
    }

    pub(crate) fn speaks_h1_only(&self) -> bool {
        self.inner.h1_only.load(Ordering::Relaxed)
    }

    pub(crate) fn set_h1_only(&self) {
        self.inner.h1_only.store(true, Ordering::Relaxed);
    }

    /// Whether requests to `target` go over the shared HTTP/2 connections.
    fn wants_h2(&self, target: &Target<'_>) -> bool {
        match self.inner.opts.http {
            HttpVersion::Http1 => false,
            HttpVersion::Http2 => true,
            HttpVersion::Auto => target.tls && !self.speaks_h1_only(),
        }
    }

    pub fn options(&self) -> &ClientOptions {
        &self.inner.opts
    }

    pub fn resolver(&self) -> &Arc<Resolver> {
        &self.inner.resolver
    }

    /// A connection slot for one virtual user.
    pub fn conn(&self) -> Conn {
        Conn {
            client: self.clone(),
            live: None,
            endpoint: None,
            slot: self.inner.h2.assign(),
            // `http: "2"` always goes over the shared connections; auto learns it per request.
            h2_used: self.inner.opts.http == HttpVersion::Http2,
        }
    }

    /// Resolves through the cache (literal IPs never touch it).
    pub async fn resolve(&self, host: &str) -> Result<Vec<IpAddr>, DnsError> {
        let ttl = self.inner.opts.dns_ttl;
        if !ttl.is_zero()
            && let Some(addrs) = self.cache().get(host, Instant::now())
        {
            return Ok(addrs);
        }
        let lookup = self.inner.resolver.lookup(host).await?;
        self.cache().put(host, &lookup, ttl, Instant::now());
        Ok(lookup.addrs)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        // A panic elsewhere while holding the lock leaves a cache that is still consistent.
        self.inner
            .cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// DNS, TCP connect and TLS, recording each phase as it completes. `connect_to` replaces
    /// the host and port dialled, never the name sent as SNI.
    pub(crate) async fn dial(
        &self,
        target: &Target<'_>,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<Dialed, ErrorClass> {
        let opts = &self.inner.opts;
        let (host, port) = match &opts.connect_to {
            Some((host, port)) => (host.as_str(), *port),
            None => (target.host, target.port),
        };
        let t = Instant::now();
        let resolved = timeout_at(deadline, self.resolve(host)).await;
        phases.dns = t.elapsed();
        let mut addrs = match resolved {
            Ok(Ok(addrs)) if !addrs.is_empty() => addrs,
            // No socket for the nameserver: sloburn's own limit, not the name's fault.
            Ok(Err(DnsError::LocalFdExhausted)) => return Err(ErrorClass::LocalFdExhausted),
            _ => return Err(ErrorClass::Dns),
        };
        let turn = match opts.dns_select {
            DnsSelect::First => 0,
            DnsSelect::Random => rand::random::<u32>() as usize,
            DnsSelect::RoundRobin => self.inner.turn.fetch_add(1, Ordering::Relaxed),
        };
        order(&mut addrs, opts.dns_select, turn);

        let t = Instant::now();
        let mut last_err = ErrorClass::ConnectRefused;
        let mut tcp = None;
        for ip in addrs {
            match timeout_at(deadline, TcpStream::connect(SocketAddr::new(ip, port))).await {
                Ok(Ok(stream)) => {
                    tcp = Some(stream);
                    break;
                }
                Ok(Err(e)) => last_err = classify_io(&e, true),
                Err(_) => {
                    phases.connecting = t.elapsed();
                    return Err(ErrorClass::ConnectTimeout);
                }
            }
        }
        phases.connecting = t.elapsed();
        let tcp = tcp.ok_or(last_err)?;
        // Nagle would hold back a request body written after its head.
        let _ = tcp.set_nodelay(true);
        let local_port = tcp.local_addr().map(|a| a.port()).unwrap_or(0);

        if !target.tls {
            return Ok(Dialed {
                stream: Stream::Plain(tcp),
                local_port,
                h2: opts.http == HttpVersion::Http2,
            });
        }
        let t = Instant::now();
        let name = server_name(&opts.tls, target.host).ok_or(ErrorClass::Tls)?;
        let handshake = timeout_at(deadline, self.tls().connect(name, tcp)).await;
        phases.tls_handshaking = t.elapsed();
        let tls = match handshake {
            Ok(Ok(tls)) => tls,
            Ok(Err(_)) => return Err(ErrorClass::Tls),
            Err(_) => return Err(ErrorClass::Timeout),
        };
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        if opts.http == HttpVersion::Http2 && !h2 {
            // Offered only h2 and the server did not take it: no protocol in common.
            return Err(ErrorClass::Tls);
        }
        Ok(Dialed {
            stream: Stream::Tls(Box::new(tls)),
            local_port,
            h2,
        })
    }

    /// An HTTP/1.1 connection on a dialled stream.
    pub(crate) async fn h1_handshake(
        &self,
        dialed: Dialed,
        target: &Target<'_>,
    ) -> Result<Live, ErrorClass> {
        let stats = IoStats::new();
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
}

/// A connected stream, and whether it speaks HTTP/2 (ALPN's pick, or h2c by configuration).
pub(crate) struct Dialed {
    pub(crate) stream: Stream,
    pub(crate) local_port: u16,
    pub(crate) h2: bool,
}

/// Where a request goes, borrowed from its URI.
pub(crate) struct Target<'a> {
    pub(crate) tls: bool,
    pub(crate) host: &'a str,
    pub(crate) port: u16,
    /// The `Host` header: the authority without userinfo.
    pub(crate) authority: &'a str,
}

impl<'a> Target<'a> {
    pub(crate) fn parse(uri: &'a Uri) -> Option<Target<'a>> {
        let tls = is_tls(uri)?;
        let authority = uri.authority()?;
        let host = authority.host();
        if host.is_empty() {
            return None;
        }
        let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let authority = authority
            .as_str()
            .rsplit_once('@')
            .map_or(authority.as_str(), |(_, a)| a);
        Some(Target {
            tls,
            host,
            port,
            authority,
        })
    }
}

/// Whether an absolute URI's scheme is `https` (`Some(false)` for `http`, `None` for anything
/// else).
fn is_tls(uri: &Uri) -> Option<bool> {
    match uri.scheme_str() {
        Some(s) if s.eq_ignore_ascii_case("http") => Some(false),
        Some(s) if s.eq_ignore_ascii_case("https") => Some(true),
        _ => None,
    }
}

/// A URI's scheme and authority, parsed once and kept while a user's requests go to the same
/// place (parsing the authority and building its `Host` value cost more than a request's own
/// bookkeeping).
pub(crate) struct Endpoint {
    /// The authority as written, userinfo included: what the next request's is compared with.
    written: Box<str>,
    tls: bool,
    host: Box<str>,
    port: u16,
    authority: Box<str>,
    /// `Host: authority`; `None` when the authority is no valid header value.
    host_header: Option<HeaderValue>,
}

impl Endpoint {
    fn of(uri: &Uri) -> Option<Endpoint> {
        let t = Target::parse(uri)?;
        Some(Endpoint {
            written: uri.authority()?.as_str().into(),
            tls: t.tls,
            host: t.host.into(),
            port: t.port,
            authority: t.authority.into(),
            host_header: HeaderValue::from_str(t.authority).ok(),
        })
    }

    /// Whether `uri` goes where this endpoint does, written the same way.
    fn matches(&self, uri: &Uri) -> bool {
        is_tls(uri) == Some(self.tls)
            && uri
                .authority()
                .is_some_and(|a| a.as_str() == &*self.written)
    }

    fn target(&self) -> Target<'_> {
        Target {
            tls: self.tls,
            host: &self.host,
            port: self.port,
            authority: &self.authority,
        }
    }
}

/// An open connection: hyper's sender, the driver task, and the stats its IO reports to.
pub(crate) struct Live {
    sender: SendRequest<Full<Bytes>>,
    stats: Arc<IoStats>,
    local_port: u16,
    tls: bool,
    host: String,
    port: u16,
    driver: JoinHandle<()>,
}

impl Live {
    fn serves(&self, t: &Target<'_>) -> bool {
        self.tls == t.tls && self.port == t.port && self.host == t.host
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        // The driver owns the socket; a dropped slot must not leave it open.
        self.driver.abort();
    }
}

/// A virtual user's connection slot: at most one open connection, reused while keep-alive is
/// on. Not shared, so sending never waits on another user.
pub struct Conn {
    client: Client,
    live: Option<Live>,
    /// Where the last request went.
    endpoint: Option<Arc<Endpoint>>,
    /// This user's HTTP/2 connection slot.
    slot: usize,
    /// Whether its last request went over HTTP/2 (then `is_open` asks the pool).
    h2_used: bool,
}

/// Which attempt of a request this is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Try {
    First,
    /// On the connection the HTTP/2 path just opened (the server picked HTTP/1.1).
    Fresh,
    /// Again, on a new connection, after a reused one died under the first.
    Retry,
}

enum Attempt {
    Done,
    /// A reused connection died before any response byte; the caller retries on a fresh one.
    Stale,
}

impl Conn {
    /// Sends one request and reads the whole response. Never fails: a transport failure is
    /// `Outcome::error`, and whatever was measured before it is kept.
    pub async fn send(&mut self, req: &RequestSpec) -> Outcome {
        let start = Instant::now();
        let deadline = start + self.client.inner.opts.timeout;
        let mut out = Outcome::default();
        let Some(endpoint) = self.endpoint_of(&req.uri) else {
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

    /// The endpoint of `uri`: the last one when it matches, else parsed and kept.
    fn endpoint_of(&mut self, uri: &Uri) -> Option<Arc<Endpoint>> {
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

    async fn attempt(
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
                    out.phases.blocked = start.elapsed();
                    out.error = Some(ErrorClass::Timeout);
                    return Attempt::Done;
                }
            }
        }
        if !fresh {
            out.phases.blocked = start.elapsed();
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
        let t0 = Instant::now();
        let sent = timeout_at(deadline, live.sender.send_request(request)).await;
        let head_at = Instant::now();
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
        let end = Instant::now();
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
    fn set_exchange(&mut self, t0: Instant, stats: &IoStats, head_at: Instant, end: Instant) {
        let first_read = stats.first_read().unwrap_or(head_at).clamp(t0, head_at);
        // A server may answer before the request is fully written; sending stops there.
        let last_write = stats.last_write().unwrap_or(t0).clamp(t0, first_read);
        self.sending = last_write - t0;
        self.waiting = first_read - last_write;
        self.receiving = end.saturating_duration_since(first_read);
    }
}

/// A response body as read: what was kept, what went past the cap, and why reading stopped.
pub(crate) struct ReadBody {
    pub(crate) body: Bytes,
    pub(crate) discarded: u64,
    /// Body bytes received, kept or not.
    pub(crate) received: u64,
    pub(crate) error: Option<ErrorClass>,
}

/// Reads a body up to `max` bytes, by the request's deadline.
pub(crate) async fn read_body(body: &mut Incoming, deadline: Instant, max: usize) -> ReadBody {
    let mut sink = BodySink::new(max);
    let mut received = 0u64;
    let mut error = None;
    loop {
        match timeout_at(deadline, body.frame()).await {
            Ok(None) => break,
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    received += data.len() as u64;
                    if !sink.push(data) {
                        // A read cap, not only a keep cap: a 200 MB body must not be read to
                        // the end. The rest is unread, so the connection cannot be reused.
                        error = Some(ErrorClass::BodyTooLarge);
                        break;
                    }
                }
            }
            Ok(Some(Err(_))) => {
                // Also an HTTP/2 stream reset after the head: the body broke.
                error = Some(ErrorClass::Body);
                break;
            }
            Err(_) => {
                error = Some(ErrorClass::Timeout);
                break;
            }
        }
    }
    let (body, discarded) = sink.finish();
    ReadBody {
        body,
        discarded,
        received,
        error,
    }
}

/// Keeps the first `max` body bytes without copying a body that arrives in one frame, and says
/// when the body goes past them.
struct BodySink {
    max: usize,
    first: Bytes,
    rest: Option<BytesMut>,
    discarded: u64,
}

impl BodySink {
    fn new(max: usize) -> BodySink {
        BodySink {
            max,
            first: Bytes::new(),
            rest: None,
            discarded: 0,
        }
    }

    fn kept(&self) -> usize {
        self.rest.as_ref().map_or(self.first.len(), BytesMut::len)
    }

    /// Keeps what fits; false once the body has gone past `max` (the caller stops reading).
    fn push(&mut self, mut data: Bytes) -> bool {
        let room = self.max.saturating_sub(self.kept());
        if data.len() > room {
            self.discarded += (data.len() - room) as u64;
            data.truncate(room);
        }
        let fits = self.discarded == 0;
        if data.is_empty() {
            return fits;
        }
        if self.rest.is_none() && self.first.is_empty() {
            self.first = data;
            return fits;
        }
        let rest = self.rest.get_or_insert_with(|| {
            let mut buf = BytesMut::with_capacity(self.first.len() + data.len());
            buf.extend_from_slice(&self.first);
            buf
        });
        rest.extend_from_slice(&data);
        fits
    }

    fn finish(self) -> (Bytes, u64) {
        let body = self.rest.map_or(self.first, BytesMut::freeze);
        (body, self.discarded)
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

/// Methods a client may resend after a connection died under it (RFC 9110 §9.2.2).
pub(crate) fn is_idempotent(m: &Method) -> bool {
    matches!(
        *m,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// Classifies an errno. `connecting` tells a connect timeout from one on an open connection.
pub fn classify_errno(errno: i32, connecting: bool) -> Option<ErrorClass> {
    Some(match errno {
        libc::ECONNREFUSED => ErrorClass::ConnectRefused,
        libc::EADDRNOTAVAIL => ErrorClass::LocalPortsExhausted,
        // Per process (RLIMIT_NOFILE) or system-wide: either way sloburn's own limit.
        libc::EMFILE | libc::ENFILE => ErrorClass::LocalFdExhausted,
        libc::ETIMEDOUT if connecting => ErrorClass::ConnectTimeout,
        libc::ETIMEDOUT => ErrorClass::Timeout,
        libc::ECONNRESET | libc::EPIPE | libc::ECONNABORTED => ErrorClass::Reset,
        _ => return None,
    })
}

/// Classifies an IO error by errno first, then by kind (errors built without an errno).
pub fn classify_io(e: &io::Error, connecting: bool) -> ErrorClass {
    // A TLS alert after the handshake (TLS 1.3 reports a refused client certificate only then).
    if e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) {
        return ErrorClass::Tls;
    }
    if let Some(class) = e.raw_os_error().and_then(|n| classify_errno(n, connecting)) {
        return class;
    }
    match e.kind() {
        io::ErrorKind::ConnectionRefused => ErrorClass::ConnectRefused,
        io::ErrorKind::AddrNotAvailable => ErrorClass::LocalPortsExhausted,
        io::ErrorKind::TimedOut if connecting => ErrorClass::ConnectTimeout,
        io::ErrorKind::TimedOut => ErrorClass::Timeout,
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof => ErrorClass::Reset,
        _ => ErrorClass::Other,
    }
}

/// Classifies a hyper error from before the response head: the IO cause when there is one,
/// else what hyper says happened.
pub fn classify_hyper(e: &hyper::Error) -> ErrorClass {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(h2) = err.downcast_ref::<::h2::Error>() {
            if let Some(io) = h2.get_io() {
                return classify_io(io, false);
            }
            // GOAWAY or RST_STREAM: the server dropped the stream; else our side's protocol
            // check failed.
            return if h2.is_go_away() || h2.is_reset() {
                ErrorClass::Reset
            } else {
                ErrorClass::Other
            };
        }
        if let Some(io) = err.downcast_ref::<io::Error>() {
            return classify_io(io, false);
        }
        source = err.source();
    }
    if e.is_incomplete_message() || e.is_canceled() || e.is_closed() {
        ErrorClass::Reset
    } else if e.is_timeout() {
        ErrorClass::Timeout
    } else {
        ErrorClass::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The load runner spawns one task per virtual user, each owning a `Conn`.
    #[test]
    fn conn_and_its_send_future_are_send() {
        fn is_send<T: Send>(_: &T) {}
        let client = Client::new(
            ClientOptions::default(),
            Arc::new(Resolver::new(
                crate::http::ResolverConfig::default(),
                crate::http::HostsFile::default(),
            )),
        );
        let mut conn = client.conn();
        is_send(&conn);
        let req = RequestSpec {
            method: Method::GET,
            uri: Uri::from_static("http://127.0.0.1:9/"),
            headers: http::HeaderMap::new(),
            body: Bytes::new(),
        };
        is_send(&conn.send(&req));
    }

    #[test]
    fn errno_mapping() {
        let cases = [
            (libc::ECONNREFUSED, true, Some(ErrorClass::ConnectRefused)),
            (
                libc::EADDRNOTAVAIL,
                true,
                Some(ErrorClass::LocalPortsExhausted),
            ),
            (libc::ETIMEDOUT, true, Some(ErrorClass::ConnectTimeout)),
            (libc::ETIMEDOUT, false, Some(ErrorClass::Timeout)),
            (libc::ECONNRESET, false, Some(ErrorClass::Reset)),
            (libc::EPIPE, false, Some(ErrorClass::Reset)),
            (libc::ECONNABORTED, false, Some(ErrorClass::Reset)),
            (libc::ENOENT, false, None),
        ];
        for (errno, connecting, expected) in cases {
            assert_eq!(classify_errno(errno, connecting), expected, "errno {errno}");
            let io = io::Error::from_raw_os_error(errno);
            assert_eq!(
                classify_io(&io, connecting),
                expected.unwrap_or(ErrorClass::Other),
                "io errno {errno}"
            );
        }
    }

    /// `ulimit -n 64` gave 334,177 errors of class `other`: EMFILE was never named.
    #[test]
    fn emfile_and_enfile_are_local_fd_exhausted_not_other() {
        for errno in [libc::EMFILE, libc::ENFILE] {
            for connecting in [true, false] {
                let class = classify_io(&io::Error::from_raw_os_error(errno), connecting);
                assert_eq!(class, ErrorClass::LocalFdExhausted, "errno {errno}");
                assert!(class.is_local());
            }
        }
        assert!(ErrorClass::LocalPortsExhausted.is_local());
        let remote = ErrorClass::ALL.iter().filter(|c| !c.is_local());
        assert_eq!(remote.count(), ErrorClass::ALL.len() - 3);
    }

    #[test]
    fn io_kinds_without_errno() {
        let kind = |k| classify_io(&io::Error::from(k), false);
        assert_eq!(kind(io::ErrorKind::UnexpectedEof), ErrorClass::Reset);
        assert_eq!(kind(io::ErrorKind::BrokenPipe), ErrorClass::Reset);
        assert_eq!(
            kind(io::ErrorKind::ConnectionRefused),
            ErrorClass::ConnectRefused
        );
        assert_eq!(
            kind(io::ErrorKind::AddrNotAvailable),
            ErrorClass::LocalPortsExhausted
        );
        assert_eq!(kind(io::ErrorKind::InvalidData), ErrorClass::Other);
        assert_eq!(
            classify_io(&io::Error::from(io::ErrorKind::TimedOut), true),
            ErrorClass::ConnectTimeout
        );
    }

    #[test]
    fn target_parsing() {
        let uri: Uri = "https://user:pw@Example.com:8443/a?b".parse().unwrap();
        let t = Target::parse(&uri).unwrap();
        assert!(t.tls);
        assert_eq!(
            (t.host, t.port, t.authority),
            ("Example.com", 8443, "Example.com:8443")
        );
        let uri: Uri = "http://[::1]/".parse().unwrap();
        let t = Target::parse(&uri).unwrap();
        assert_eq!((t.host, t.port, t.tls), ("[::1]", 80, false));
        assert!(Target::parse(&"/relative".parse().unwrap()).is_none());
        assert!(Target::parse(&"ftp://x/".parse().unwrap()).is_none());
    }

    #[test]
    fn body_sink_keeps_the_prefix_and_says_when_the_body_is_too_large() {
        let mut sink = BodySink::new(10);
        assert!(sink.push(Bytes::from_static(b"0123")));
        assert!(!sink.push(Bytes::from_static(b"456789abc")));
        assert_eq!(sink.finish(), (Bytes::from_static(b"0123456789"), 3));
        let mut exact = BodySink::new(10);
        assert!(exact.push(Bytes::from_static(b"01234")));
        assert!(exact.push(Bytes::from_static(b"56789")));
        assert!(exact.push(Bytes::new()));
        assert_eq!(exact.finish(), (Bytes::from_static(b"0123456789"), 0));
        let mut one = BodySink::new(10);
        assert!(!one.push(Bytes::from_static(b"0123456789a")));
        assert_eq!(one.finish(), (Bytes::from_static(b"0123456789"), 1));
    }

    #[test]
    fn exchange_phases_sum_to_the_whole() {
        let stats = IoStats::new();
        let t0 = Instant::now();
        let end = t0 + Duration::from_millis(50);
        let mut p = Phases::default();
        // Nothing recorded by the IO (error before writing): all of it is waiting.
        p.set_exchange(t0, &stats, end, end);
        assert_eq!(p.duration(), Duration::from_millis(50));
        assert_eq!(p.sending, Duration::ZERO);
    }
}
