//! The measuring HTTP client: one HTTP/1.1 connection slot per virtual user (HTTP/2 streams
//! share a few connections, see [`super::h2`]), per-phase timings, and transport failures
//! classified into [`ErrorClass`] instead of returned.
//!
//! Built on hyper's low-level `client::conn` over our own connector (resolver → TCP →
//! rustls), because a pooled client hides exactly what a load tester must measure: which
//! request paid for DNS, connect and handshake, and which reused a connection.
//!
//! This file holds the client and its dialling; a user's slot is in `conn.rs`, endpoints and
//! live connections in `connect.rs`, body reading in `body.rs`, error classes in
//! `classify.rs`.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};
use tokio_rustls::TlsConnector;

pub(crate) use super::body::read_body;
pub use super::classify::{classify_errno, classify_hyper, classify_io};
pub use super::conn::Conn;
pub(crate) use super::conn::is_idempotent;
pub(crate) use super::connect::{Dialed, Endpoint, Live, Target};
use super::dns::select::{DnsSelect, order};
use super::dns::{Cache, DnsError, Resolver};
use super::h2::{self, HttpVersion, Pool};
use super::rx::RxTcp;
use super::timing::{IoStats, TimingIo};
use super::tls::{Stream, TlsOptions, server_name, shared_client_config};
use super::{ErrorClass, Phases};

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
    /// HTTP, or the probe the target's URL names.
    pub protocol: super::Protocol,
    /// A probe's own settings.
    pub probe: super::probe::ProbeOptions,
    /// A gRPC target's call (`grpc://` and `grpcs://`).
    pub grpc: Option<super::grpc::GrpcSpec>,
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
            protocol: super::Protocol::Http,
            probe: super::probe::ProbeOptions::default(),
            grpc: None,
        }
    }
}

/// Shared configuration: resolver, DNS cache, TLS config. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) opts: ClientOptions,
    pub(super) resolver: Arc<Resolver>,
    pub(super) tls: OnceLock<TlsConnector>,
    pub(super) cache: Mutex<Cache>,
    pub(super) h2: Pool,
    /// Round-robin turns of `dns_select`.
    pub(super) turn: AtomicUsize,
    /// `http: auto` on https, and the server picked HTTP/1.1: every user keeps its own.
    pub(super) h1_only: AtomicBool,
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
    pub(super) fn tls(&self) -> &TlsConnector {
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
    pub(super) fn wants_h2(&self, target: &Target<'_>) -> bool {
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
            grpc: None,
        }
    }

    /// Resolves through the cache (literal IPs never touch it).
    pub async fn resolve(&self, host: &str) -> Result<Vec<IpAddr>, DnsError> {
        let ttl = self.inner.opts.dns_ttl;
        if !ttl.is_zero()
            && let Some(addrs) = self.cache().get(host, crate::clock::tokio_instant())
        {
            return Ok(addrs);
        }
        let lookup = self.inner.resolver.lookup(host).await?;
        self.cache()
            .put(host, &lookup, ttl, crate::clock::tokio_instant());
        Ok(lookup.addrs)
    }

    pub(super) fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
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
        let t = crate::clock::tokio_instant();
        let resolved = timeout_at(deadline, self.resolve(host)).await;
        phases.dns = crate::clock::elapsed(t);
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

        let t = crate::clock::tokio_instant();
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
                    phases.connecting = crate::clock::elapsed(t);
                    return Err(ErrorClass::ConnectTimeout);
                }
            }
        }
        phases.connecting = crate::clock::elapsed(t);
        let tcp = tcp.ok_or(last_err)?;
        // Nagle would hold back a request body written after its head.
        let _ = tcp.set_nodelay(true);
        let local_port = tcp.local_addr().map(|a| a.port()).unwrap_or(0);
        let stats = IoStats::new();
        let tcp = RxTcp::new(tcp, stats.clone());

        if !target.tls {
            return Ok(Dialed {
                stream: Stream::Plain(tcp),
                stats,
                local_port,
                h2: opts.http == HttpVersion::Http2,
            });
        }
        let t = crate::clock::tokio_instant();
        let name = server_name(&opts.tls, target.host).ok_or(ErrorClass::Tls)?;
        let handshake = timeout_at(deadline, self.tls().connect(name, tcp)).await;
        phases.tls_handshaking = crate::clock::elapsed(t);
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
            stats,
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::body::BodySink;
    use std::io;

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
        let t0 = crate::clock::tokio_instant();
        let end = t0 + Duration::from_millis(50);
        let mut p = Phases::default();
        // Nothing recorded by the IO (error before writing): all of it is waiting.
        p.set_exchange(t0, &stats, end, end);
        assert_eq!(p.duration(), Duration::from_millis(50));
        assert_eq!(p.sending, Duration::ZERO);
    }
}
