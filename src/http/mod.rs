//! HTTP client with per-phase timings and classified errors.
//!
//! Phases follow k6's names with DNS split out of `blocked`. A transport failure never
//! propagates as an error: it becomes an [`Outcome`] with an [`ErrorClass`].
//!
//! Every protocol sits behind one seam, [`Transport`]: HTTP/1.1 (`http1.rs`), HTTP/2
//! (`h2.rs`), `http: auto`'s ALPN choice between them (`alpn.rs`), gRPC (`grpc/`), WebSocket
//! and the probes (`probe/`). `registry.rs` picks one from a target's scheme and `http:` when a
//! user's [`Conn`] is made; `conn.rs` holds the user's transport state and sends on it.

use std::time::Duration;

/// One timed phase of a request, named as k6 names it (plus `dns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    Blocked,
    Dns,
    Connecting,
    TlsHandshaking,
    Sending,
    Waiting,
    Receiving,
}

impl Phase {
    pub const ALL: [Phase; 7] = [
        Phase::Blocked,
        Phase::Dns,
        Phase::Connecting,
        Phase::TlsHandshaking,
        Phase::Sending,
        Phase::Waiting,
        Phase::Receiving,
    ];

    /// The label value and k6 metric suffix (`http_req_<name>`).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Blocked => "blocked",
            Phase::Dns => "dns",
            Phase::Connecting => "connecting",
            Phase::TlsHandshaking => "tls_handshaking",
            Phase::Sending => "sending",
            Phase::Waiting => "waiting",
            Phase::Receiving => "receiving",
        }
    }
}

/// Time spent in each phase of one request. Reused connections report zero for
/// `dns`, `connecting` and `tls_handshaking`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Phases {
    pub blocked: Duration,
    pub dns: Duration,
    pub connecting: Duration,
    pub tls_handshaking: Duration,
    pub sending: Duration,
    pub waiting: Duration,
    pub receiving: Duration,
}

impl Phases {
    /// k6's `http_req_duration`: sending + waiting + receiving.
    pub fn duration(&self) -> Duration {
        self.sending + self.waiting + self.receiving
    }

    /// Every phase: from when the VU began the request to its end, the wait for a connection
    /// (DNS, connect, TLS, a free HTTP/2 stream or a stale one's retry) included. What a user
    /// who arrived then waited: `http_req_corrected_duration`. A target whose accept queue is
    /// full shows here (its connects retry), never in k6's `duration`.
    pub fn total(&self) -> Duration {
        self.blocked + self.dns + self.connecting + self.tls_handshaking + self.duration()
    }

    pub fn get(&self, phase: Phase) -> Duration {
        match phase {
            Phase::Blocked => self.blocked,
            Phase::Dns => self.dns,
            Phase::Connecting => self.connecting,
            Phase::TlsHandshaking => self.tls_handshaking,
            Phase::Sending => self.sending,
            Phase::Waiting => self.waiting,
            Phase::Receiving => self.receiving,
        }
    }
}

/// Why a request produced no complete response. Never fatal to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorClass {
    Dns,
    ConnectRefused,
    ConnectTimeout,
    /// EADDRNOTAVAIL: the client ran out of ephemeral ports.
    LocalPortsExhausted,
    /// EMFILE or ENFILE: the client ran out of file descriptors (its own or the system's).
    LocalFdExhausted,
    Tls,
    Timeout,
    Reset,
    Body,
    /// The body went past `max_body`: reading stopped there and the connection was closed.
    BodyTooLarge,
    /// The request could not be built as configured: a rendered URL that does not parse, or a
    /// header value that holds a control character (CR, LF, NUL) from a data row, a capture or
    /// a variable. Nothing was sent; sloburn's (its config's or data's) failure, not the target's.
    Template,
    /// HTTP/3: version negotiation found no QUIC version both sides speak.
    QuicVersion,
    /// HTTP/3: the QUIC connection went silent past its idle timeout.
    IdleTimeout,
    /// sloburn could not open or use its own socket (a UDP socket for QUIC): never the
    /// target's failure.
    LocalSocket,
    Other,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 15] = [
        ErrorClass::Dns,
        ErrorClass::ConnectRefused,
        ErrorClass::ConnectTimeout,
        ErrorClass::LocalPortsExhausted,
        ErrorClass::LocalFdExhausted,
        ErrorClass::Tls,
        ErrorClass::Timeout,
        ErrorClass::Reset,
        ErrorClass::Body,
        ErrorClass::BodyTooLarge,
        ErrorClass::Template,
        ErrorClass::QuicVersion,
        ErrorClass::IdleTimeout,
        ErrorClass::LocalSocket,
        ErrorClass::Other,
    ];

    /// The `error` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Dns => "dns",
            ErrorClass::ConnectRefused => "connect_refused",
            ErrorClass::ConnectTimeout => "connect_timeout",
            ErrorClass::LocalPortsExhausted => "local_ports_exhausted",
            ErrorClass::LocalFdExhausted => "local_fd_exhausted",
            ErrorClass::Tls => "tls",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Reset => "reset",
            ErrorClass::Body => "body",
            ErrorClass::BodyTooLarge => "body_too_large",
            ErrorClass::Template => "template",
            ErrorClass::QuicVersion => "quic_version",
            ErrorClass::IdleTimeout => "idle_timeout",
            ErrorClass::LocalSocket => "local_socket",
            ErrorClass::Other => "other",
        }
    }

    /// Whether sloburn itself caused the failure (it ran out of ports or descriptors, or could
    /// not build the configured request), so the target is not to blame: such a request is
    /// never an SLO event.
    pub fn is_local(self) -> bool {
        matches!(
            self,
            ErrorClass::LocalPortsExhausted
                | ErrorClass::LocalFdExhausted
                | ErrorClass::Template
                | ErrorClass::LocalSocket
        )
    }
}

/// What a target speaks, from its URL's scheme: HTTP (`http://`, `https://`), gRPC
/// (`grpc://`, `grpcs://` over TLS, see [`grpc`]), WebSocket (`ws://`, `wss://`) or a probe
/// (`tcp://`, `tls://`, `dns://`); WebSocket and the probes in [`probe`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Protocol {
    #[default]
    Http,
    Tcp,
    Tls,
    Dns,
    Grpc,
    WebSocket,
}

impl Protocol {
    /// The protocol of a URL's scheme; `None` for a scheme sloburn does not speak.
    pub fn of_scheme(scheme: &str) -> Option<Protocol> {
        Some(match scheme.to_ascii_lowercase().as_str() {
            "http" | "https" => Protocol::Http,
            "tcp" => Protocol::Tcp,
            "tls" => Protocol::Tls,
            "dns" => Protocol::Dns,
            "grpc" | "grpcs" => Protocol::Grpc,
            "ws" | "wss" => Protocol::WebSocket,
            _ => return None,
        })
    }

    /// The scheme a target of this protocol is written with (its plain form): what the
    /// [`Transport`] registry picks the target's transport by.
    pub fn scheme(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Tcp => "tcp",
            Protocol::Tls => "tls",
            Protocol::Dns => "dns",
            Protocol::Grpc => "grpc",
            Protocol::WebSocket => "ws",
        }
    }

    /// The `protocol` label value, and the `method` a probe's samples carry (upper case).
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Tcp => "tcp",
            Protocol::Tls => "tls",
            Protocol::Dns => "dns",
            Protocol::Grpc => "grpc",
            Protocol::WebSocket => "websocket",
        }
    }

    /// Whether [`probe`] sends it (WebSocket and the probes): measured as a whole exchange,
    /// connection included. HTTP and gRPC measure a request on a connection that may be kept.
    pub fn is_probe(self) -> bool {
        !matches!(self, Protocol::Http | Protocol::Grpc)
    }
}

/// Which HTTP version a target speaks (`http:`): with the scheme, what picks its transport.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HttpVersion {
    /// https: ALPN offers h2 and http/1.1 and the server picks; http://: HTTP/1.1.
    #[default]
    Auto,
    Http1,
    /// https: ALPN offers only h2; http://: h2c with prior knowledge.
    Http2,
    /// HTTP/3 over QUIC (https:// only): `h3` in ALPN.
    Http3,
}

impl HttpVersion {
    pub fn parse(s: &str) -> Option<HttpVersion> {
        Some(match s {
            "auto" => HttpVersion::Auto,
            "1.1" | "1" => HttpVersion::Http1,
            "2" | "2.0" => HttpVersion::Http2,
            "3" | "3.0" => HttpVersion::Http3,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            HttpVersion::Auto => "auto",
            HttpVersion::Http1 => "1.1",
            HttpVersion::Http2 => "2",
            HttpVersion::Http3 => "3",
        }
    }
}

/// What a target asks of the client and its transports: the vocabulary config hands the
/// layer (the client's own settings, then each transport's: `http`, `probe`, `grpc`).
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
    /// What the target's URL names (HTTP, gRPC, WebSocket or a probe): with `http`, which
    /// transport the registry gives its users.
    pub protocol: Protocol,
    /// A probe's own settings.
    pub probe: probe::ProbeOptions,
    /// A gRPC target's call (`grpc://` and `grpcs://`).
    pub grpc: Option<grpc::GrpcSpec>,
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
            h2_max_connections: connect::DEFAULT_MAX_CONNECTIONS,
            tls: TlsOptions::default(),
            connect_to: None,
            dns_select: DnsSelect::First,
            protocol: Protocol::Http,
            probe: probe::ProbeOptions::default(),
            grpc: None,
        }
    }
}

/// Everything measured about one request.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub phases: Phases,
    /// The status, when an answer arrived: the HTTP status; the gRPC status code (0 OK); for a
    /// probe its protocol's code, 0 meaning OK (a DNS answer's RCODE, 0 for a TCP exchange or
    /// TLS handshake that completed).
    pub status: Option<u16>,
    pub protocol: Protocol,
    /// A TLS probe's earliest certificate expiry in the chain the server sent (Unix seconds).
    pub cert_not_after: Option<i64>,
    /// Seconds from the handshake to `cert_not_after` (negative once expired), read on the
    /// clock when the chain arrived, so the certificate check needs no clock of its own.
    pub cert_seconds_left: Option<i64>,
    /// Set when the request failed in transport (no status, or the body broke).
    pub error: Option<ErrorClass>,
    /// Why, where the class alone does not say: a TLS failure's reason (`unknown issuer`,
    /// `expired`, `name mismatch`, `handshake`…), shown in failure evidence, never a label.
    pub error_reason: Option<&'static str>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub local_port: Option<u16>,
    /// True when the request went over a connection opened by an earlier request.
    pub reused: bool,
    /// The HTTP version the response came in (HTTP/1.1 until a response says otherwise);
    /// tracing's `network.protocol.version`.
    pub version: ::http::Version,
    pub headers: ::http::HeaderMap,
    /// The body, up to the configured limit.
    pub body: bytes::Bytes,
    /// HTTP/3: the QUIC connection's figures after the request.
    pub quic: Option<QuicFigures>,
    /// Bytes of the last frame read past the limit and discarded (reading stops at the frame
    /// that crosses `max_body`, so this is at most one frame).
    pub body_discarded: u64,
    /// True when the kernel stamped every byte of the request as it took them (`http/tx.rs`):
    /// its `sending` and the start of `waiting` are the kernel's, not sloburn's task's.
    pub kernel_tx: bool,
}

/// A QUIC connection's own figures as quinn keeps them, read after a request on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuicFigures {
    /// The smoothed round-trip time.
    pub rtt: Duration,
    /// Packets declared lost on the connection so far.
    pub lost_packets: u64,
    /// Congestion events (the window cut) on the connection so far.
    pub congestion_events: u64,
    /// This request went as 0-RTT on a resumed session, and the server took it.
    pub zero_rtt: bool,
}

impl Outcome {
    /// What the latency histograms, `duration_under` checks and latency SLIs read: k6's
    /// `http_req_duration` (sending + waiting + receiving) for HTTP; for a probe the whole
    /// probe (its lookup, connect, handshake and exchange), which is what a probe measures.
    pub fn duration(&self) -> Duration {
        if self.protocol.is_probe() {
            self.phases.total() - self.phases.blocked
        } else {
            self.phases.duration()
        }
    }

    /// Whether the status counts as expected when no `status` check says otherwise: below 400
    /// for HTTP, 101 (the upgrade) for a WebSocket, 0 (OK) for gRPC and a probe.
    pub fn status_is_ok(&self) -> bool {
        match (self.protocol, self.status) {
            (_, None) => false,
            (Protocol::Http, Some(s)) => s < 400,
            (Protocol::WebSocket, Some(s)) => s == 101,
            (_, Some(s)) => s == 0,
        }
    }
}

mod alpn;
mod body;
mod classify;
pub mod client;
mod conn;
mod connect;
pub mod dns;
pub mod grpc;
pub mod h2;
mod h3;
mod http1;
pub mod probe;
mod registry;
mod rx;
mod timing;
pub mod tls;
mod transport;
mod tx;

pub use classify::{classify_errno, classify_hyper, classify_io, tls_reason};
pub use client::{Client, RequestSpec, Tap};
pub use conn::Conn;
pub use dns::select::DnsSelect;
pub use dns::{DnsError, HostsFile, Lookup, Resolver, ResolverConfig, ndots_warning, system_ndots};
pub use tls::{ClientCert, TlsOptions, TlsVersion};
pub use transport::Transport;
