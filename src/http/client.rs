//! The measuring client: what a target's users share (options, resolver, DNS cache, TLS
//! connector, the HTTP/2 slots) and the one dialler every transport connects through
//! (resolver → TCP → rustls, each phase timed), with the request a transport sends.
//!
//! Built on hyper's low-level `client::conn` over our own connector, because a pooled client
//! hides exactly what a load tester must measure: which request paid for DNS, connect and
//! handshake, and which reused a connection. A user's slot is in `conn.rs`, the transports
//! behind it in `registry.rs`.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use http::{Method, Uri};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};
use tokio_rustls::TlsConnector;

use super::classify::classify_io;
use super::connect::{Dialed, Pool, Target};
use super::dns::select::{DnsSelect, order};
use super::dns::{Cache, DnsError, Resolver};
use super::rx::RxTcp;
use super::timing::IoStats;
use super::tls::{Stream, TlsOptions, server_name, shared_client_config};
use super::{ClientOptions, ErrorClass, HttpVersion, Phases};

/// One request to send. The URI is absolute (`http://` or `https://`); `Host` is added from it
/// unless the headers already carry one.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    pub method: Method,
    pub uri: Uri,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

/// Methods a client may resend after a connection died under it (RFC 9110 §9.2.2).
pub(crate) fn is_idempotent(m: &Method) -> bool {
    matches!(
        *m,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// Sees every exchange a client's users make, once its outcome is known (`sloburn run
/// --http-debug` prints them). A client has one only when asked: the others pay one branch
/// per request.
pub trait Tap: Send + Sync {
    fn exchange(&self, req: &RequestSpec, outcome: &super::Outcome);
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
    pub(super) tap: Option<Arc<dyn Tap>>,
    /// `http: auto` on https, and the server picked HTTP/1.1: every user keeps its own.
    pub(super) h1_only: AtomicBool,
    /// HTTP/3's QUIC configuration, made at the first QUIC connection and shared by every
    /// user, so that a later connection resumes an earlier one's TLS session (0-RTT).
    pub(super) quic: OnceLock<Result<quinn::ClientConfig, &'static str>>,
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
        Client::tapped(opts, resolver, None)
    }

    /// A client whose exchanges `tap` sees (when given).
    pub fn tapped(
        opts: ClientOptions,
        resolver: Arc<Resolver>,
        tap: Option<Arc<dyn Tap>>,
    ) -> Client {
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
                quic: OnceLock::new(),
                tap,
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
                // QUIC builds its own TLS (`quic_config`); a TCP dial of such a client offers h2.
                HttpVersion::Http3 => &[b"h2"],
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

    pub fn options(&self) -> &ClientOptions {
        &self.inner.opts
    }

    pub fn resolver(&self) -> &Arc<Resolver> {
        &self.inner.resolver
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

    /// DNS, TCP connect and TLS, recording each phase as it completes. A failure is its class
    /// and, for TLS, its reason ([`Outcome::dial_failed`] keeps both). `connect_to` replaces
    /// the host and port dialled, never the name sent as SNI.
    pub(crate) async fn dial(
        &self,
        target: &Target<'_>,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<Dialed, DialError> {
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
            Ok(Err(DnsError::LocalFdExhausted)) => return Err(ErrorClass::LocalFdExhausted.into()),
            _ => return Err(ErrorClass::Dns.into()),
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
                    return Err(ErrorClass::ConnectTimeout.into());
                }
            }
        }
        phases.connecting = crate::clock::elapsed(t);
        let tcp = tcp.ok_or(last_err)?;
        // The kernel's handshake time, where it has one: not the moment sloburn's task woke.
        if let Some(kernel) = super::tx::connect_time(&tcp) {
            phases.connecting = phases.connecting.min(kernel);
        }
        // Nagle would hold back a request body written after its head.
        let _ = tcp.set_nodelay(true);
        let local_port = tcp.local_addr().map(|a| a.port()).unwrap_or(0);
        let stats = IoStats::new();
        // Transmit stamps where a request's bytes are the socket's own: plain HTTP/1.1.
        let tx = !target.tls && opts.http != HttpVersion::Http2;
        let tcp = RxTcp::with_tx(tcp, stats.clone(), tx);

        if !target.tls {
            return Ok(Dialed {
                stream: Stream::Plain(tcp),
                stats,
                local_port,
                h2: opts.http == HttpVersion::Http2,
            });
        }
        let t = crate::clock::tokio_instant();
        let name = server_name(&opts.tls, target.host).ok_or(DialError::tls(
            "the server name is not a DNS name or an IP address",
        ))?;
        let handshake = timeout_at(deadline, self.tls().connect(name, tcp)).await;
        phases.tls_handshaking = crate::clock::elapsed(t);
        let tls = match handshake {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => return Err(DialError::tls(super::tls_reason(&e))),
            Err(_) => return Err(ErrorClass::Timeout.into()),
        };
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        if opts.http == HttpVersion::Http2 && !h2 {
            // Offered only h2 and the server did not take it: no protocol in common.
            return Err(DialError::tls("no common protocol (ALPN)"));
        }
        Ok(Dialed {
            stream: Stream::Tls(Box::new(tls)),
            stats,
            local_port,
            h2,
        })
    }
}

/// A dial that failed: its class, and for TLS why (`unknown issuer`, `expired`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DialError {
    pub class: ErrorClass,
    pub reason: Option<&'static str>,
}

impl DialError {
    fn tls(reason: &'static str) -> DialError {
        DialError {
            class: ErrorClass::Tls,
            reason: Some(reason),
        }
    }
}

impl From<ErrorClass> for DialError {
    fn from(class: ErrorClass) -> DialError {
        DialError {
            class,
            reason: None,
        }
    }
}

impl From<DialError> for ErrorClass {
    fn from(e: DialError) -> ErrorClass {
        e.class
    }
}

impl super::Outcome {
    /// Records a failed dial (its reason with it); its class, for the caller to return.
    pub(crate) fn dial_failed(&mut self, e: DialError) -> ErrorClass {
        self.error_reason = e.reason;
        e.class
    }
}
