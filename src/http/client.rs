//! The measuring HTTP/1.1 client: one connection slot per virtual user, per-phase timings, and
//! transport failures classified into [`ErrorClass`] instead of returned.
//!
//! Built on hyper's low-level `client::conn::http1` over our own connector (resolver → TCP →
//! rustls), because a pooled client hides exactly what a load tester must measure: which
//! request paid for DNS, connect and handshake, and which reused a connection.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{CONNECTION, HOST, HeaderValue};
use http::{Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout_at};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::dns::{Cache, DnsError, Resolver};
use super::timing::{IoStats, TimingIo};
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
    pub insecure_skip_verify: bool,
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
    tls: TlsConnector,
    cache: Mutex<Cache>,
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
        let tls = TlsConnector::from(Arc::new(tls_config(opts.insecure_skip_verify)));
        Client {
            inner: Arc::new(Inner {
                opts,
                resolver,
                tls,
                cache: Mutex::new(Cache::default()),
            }),
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

    /// DNS, TCP connect and TLS, recording each phase as it completes.
    async fn connect(
        &self,
        target: &Target<'_>,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<Live, ErrorClass> {
        let t = Instant::now();
        let resolved = timeout_at(deadline, self.resolve(target.host)).await;
        phases.dns = t.elapsed();
        let addrs = match resolved {
            Ok(Ok(addrs)) if !addrs.is_empty() => addrs,
            // No socket for the nameserver: sloburn's own limit, not the name's fault.
            Ok(Err(DnsError::LocalFdExhausted)) => return Err(ErrorClass::LocalFdExhausted),
            _ => return Err(ErrorClass::Dns),
        };

        let t = Instant::now();
        let mut last_err = ErrorClass::ConnectRefused;
        let mut tcp = None;
        for ip in addrs {
            match timeout_at(
                deadline,
                TcpStream::connect(SocketAddr::new(ip, target.port)),
            )
            .await
            {
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

        let stream = if target.tls {
            let t = Instant::now();
            let host = target
                .host
                .trim_start_matches('[')
                .trim_end_matches([']', '.']);
            let name = ServerName::try_from(host.to_string()).map_err(|_| ErrorClass::Tls)?;
            let handshake = timeout_at(deadline, self.inner.tls.connect(name, tcp)).await;
            phases.tls_handshaking = t.elapsed();
            match handshake {
                Ok(Ok(tls)) => Stream::Tls(Box::new(tls)),
                Ok(Err(_)) => return Err(ErrorClass::Tls),
                Err(_) => return Err(ErrorClass::Timeout),
            }
        } else {
            Stream::Plain(tcp)
        };

        let stats = IoStats::new();
        let io = TokioIo::new(TimingIo::new(stream, stats.clone()));
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
            local_port,
            tls: target.tls,
            host: target.host.to_string(),
            port: target.port,
            driver,
        })
    }
}

fn tls_config(insecure: bool) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("the ring provider supports rustls' default protocol versions");
    let mut config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SkipVerify(provider)))
            .with_no_client_auth()
    } else {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

/// Accepts any certificate but still checks handshake signatures, so the handshake costs what
/// a verified one does minus the chain walk.
#[derive(Debug)]
struct SkipVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for SkipVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Where a request goes, borrowed from its URI.
struct Target<'a> {
    tls: bool,
    host: &'a str,
    port: u16,
    /// The `Host` header: the authority without userinfo.
    authority: &'a str,
}

impl<'a> Target<'a> {
    fn parse(uri: &'a Uri) -> Option<Target<'a>> {
        let tls = match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("http") => false,
            Some(s) if s.eq_ignore_ascii_case("https") => true,
            _ => return None,
        };
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

/// An open connection: hyper's sender, the driver task, and the stats its IO reports to.
struct Live {
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
        let Some(target) = Target::parse(&req.uri) else {
            out.error = Some(ErrorClass::Other);
            return out;
        };
        if let Attempt::Stale = self
            .attempt(req, &target, start, deadline, &mut out, false)
            .await
        {
            // The first attempt's time lands in `blocked`: it was spent before the connection
            // that served the request was opened.
            out = Outcome::default();
            self.attempt(req, &target, start, deadline, &mut out, true)
                .await;
        }
        out
    }

    /// Whether a connection is open and usable: the next request then connects nothing.
    pub fn is_open(&self) -> bool {
        self.live.as_ref().is_some_and(|l| !l.sender.is_closed())
    }

    /// Drops the open connection, if any; the next request connects afresh.
    pub fn close(&mut self) {
        self.live = None;
    }

    async fn attempt(
        &mut self,
        req: &RequestSpec,
        target: &Target<'_>,
        start: Instant,
        deadline: Instant,
        out: &mut Outcome,
        retrying: bool,
    ) -> Attempt {
        let keep_alive = self.client.inner.opts.keep_alive;
        if retrying
            || self
                .live
                .as_ref()
                .is_some_and(|l| !l.serves(target) || l.sender.is_closed())
        {
            self.live = None;
        }
        let mut reused = false;
        if let Some(live) = self.live.as_mut() {
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
        out.phases.blocked = start.elapsed();
        if !reused {
            match self.client.connect(target, deadline, &mut out.phases).await {
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

        let Some(request) = build_request(req, target, keep_alive) else {
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
        let mut sink = BodySink::new(self.client.inner.opts.max_body);
        let mut broken = None;
        loop {
            match timeout_at(deadline, body.frame()).await {
                Ok(None) => break,
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data()
                        && !sink.push(data)
                    {
                        // A read cap, not only a keep cap: a 200 MB body must not be read to
                        // the end. The rest is unread, so the connection cannot be reused.
                        broken = Some(ErrorClass::BodyTooLarge);
                        break;
                    }
                }
                Ok(Some(Err(_))) => {
                    broken = Some(ErrorClass::Body);
                    break;
                }
                Err(_) => {
                    broken = Some(ErrorClass::Timeout);
                    break;
                }
            }
        }
        let end = Instant::now();
        out.phases.set_exchange(t0, &stats, head_at, end);
        out.bytes_sent = stats.written() - written0;
        out.bytes_received = stats.read() - read0;
        (out.body, out.body_discarded) = sink.finish();
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

fn build_request(
    req: &RequestSpec,
    target: &Target<'_>,
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
    *request.headers_mut() = req.headers.clone();
    let headers = request.headers_mut();
    if !headers.contains_key(HOST) {
        headers.insert(HOST, HeaderValue::from_str(target.authority).ok()?);
    }
    if !keep_alive {
        headers.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    Some(request)
}

/// Methods a client may resend after a connection died under it (RFC 9110 §9.2.2).
fn is_idempotent(m: &Method) -> bool {
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

/// Plain TCP or TLS over TCP, as one stream type for hyper.
enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
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
        assert_eq!(remote.count(), ErrorClass::ALL.len() - 2);
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
