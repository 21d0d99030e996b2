//! A QUIC connection dialled and timed: the name resolved (`dns`), a UDP socket of its own,
//! the handshake split where the server's first datagram came back: `connecting` is the
//! Initial's round trip (the path, as TCP's SYN's), `tls_handshaking` the rest of the
//! handshake as quinn completes it (the server's certificate flights, the client's Finished),
//! so the two add up to the whole handshake, ending at the first byte the client may send
//! under 1-RTT keys. A resumed session may send at once (0-RTT): then both are zero.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

use quinn::{Runtime, TokioRuntime};
use tokio::time::{Instant, timeout_at};

use super::super::client::{Client, DialError};
use super::super::connect::Target;
use super::super::dns::DnsError;
use super::super::{ErrorClass, Phases, classify_io};
use super::errors::{connect_error, connection_error};
use super::wire::{Watched, Wire};

/// What no answer to the Initial says (the request's class is `connect_timeout`).
pub(super) const NO_UDP_ANSWER: &str =
    "no answer over UDP: the QUIC Initial went unanswered (is UDP blocked on the path?)";

/// A QUIC connection up (or sending 0-RTT while its handshake completes).
pub(crate) struct Dialled {
    pub(crate) endpoint: quinn::Endpoint,
    pub(crate) conn: quinn::Connection,
    pub(crate) wire: Arc<Wire>,
    pub(crate) local_port: u16,
    /// Set when the request goes as 0-RTT: resolves to whether the server took it.
    pub(crate) early: Option<quinn::ZeroRttAccepted>,
}

/// The client's QUIC configuration: its TLS options (trust, client certificate, `insecure`)
/// with only `h3` in ALPN, TLS 1.3 (QUIC knows no other), early data allowed, and the transport's
/// windows bounded. Made once per client so that its session tickets serve later connections.
pub(crate) fn client_config(client: &Client) -> Result<quinn::ClientConfig, &'static str> {
    let opts = client.options();
    let mut tls = super::super::tls::client_config(&opts.tls, opts.insecure_skip_verify, &[b"h3"])
        .map_err(|_| "TLS options refused")?;
    tls.enable_early_data = true;
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|_| "the TLS options leave QUIC no TLS 1.3 cipher suite")?;
    let mut config = quinn::ClientConfig::new(Arc::new(quic));
    config.transport_config(Arc::new(transport(opts.max_body)));
    Ok(config)
}

/// Flow control as the bound on what a server may make sloburn buffer: a stream's window
/// holds a body up to `max_body` (and no less than 64 KiB), the connection's four of them; the
/// server may open no request streams and a few unidirectional ones (control, QPACK).
fn transport(max_body: usize) -> quinn::TransportConfig {
    let stream = (max_body as u64).clamp(64 << 10, 16 << 20);
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window(quinn::VarInt::from_u64(stream).unwrap_or(quinn::VarInt::MAX))
        .receive_window(quinn::VarInt::from_u64(stream * 4).unwrap_or(quinn::VarInt::MAX))
        .max_concurrent_bidi_streams(0u32.into())
        .max_concurrent_uni_streams(8u32.into())
        .max_idle_timeout(Duration::from_secs(30).try_into().ok());
    t
}

/// Resolves, binds and handshakes, recording `dns`, `connecting` and `tls_handshaking`.
/// `early`: the request may go as 0-RTT when a ticket allows (idempotent requests only).
pub(crate) async fn dial(
    client: &Client,
    config: &quinn::ClientConfig,
    target: &Target<'_>,
    deadline: Instant,
    phases: &mut Phases,
    early: bool,
) -> Result<Dialled, DialError> {
    let addr = resolve(client, target, deadline, phases).await?;
    let wire = Wire::new();
    let (endpoint, local_port) = bind(addr, wire.clone())?;
    let name = client
        .options()
        .tls
        .server_name
        .as_deref()
        .unwrap_or(target.host);
    let name = name.trim_start_matches('[').trim_end_matches(']');
    let t = crate::clock::tokio_instant();
    let connecting = endpoint
        .connect_with(config.clone(), addr, name)
        .map_err(connect_error)?;
    let connecting = if early {
        match connecting.into_0rtt() {
            Ok((conn, accepted)) => {
                return Ok(Dialled {
                    endpoint,
                    conn,
                    wire,
                    local_port,
                    early: Some(accepted),
                });
            }
            Err(connecting) => connecting,
        }
    } else {
        connecting
    };
    let done = timeout_at(deadline, connecting).await;
    let end = crate::clock::tokio_instant();
    let first = wire.first_rx().map(|at| at.clamp(t, end));
    phases.connecting = first.unwrap_or(end).saturating_duration_since(t);
    phases.tls_handshaking = first.map_or(Duration::ZERO, |f| end.saturating_duration_since(f));
    let unanswered = || DialError {
        class: ErrorClass::ConnectTimeout,
        reason: Some(NO_UDP_ANSWER),
    };
    match done {
        Ok(Ok(conn)) => Ok(Dialled {
            endpoint,
            conn,
            wire,
            local_port,
            early: None,
        }),
        Ok(Err(quinn::ConnectionError::TimedOut)) | Err(_) if first.is_none() => Err(unanswered()),
        Ok(Err(e)) => Err(connection_error(&e, true)),
        Err(_) => Err(DialError {
            class: ErrorClass::Timeout,
            reason: Some("the QUIC handshake did not finish by the request's timeout"),
        }),
    }
}

/// The address dialled: `connect_to`'s, else the URL host's first (`dns` timed).
async fn resolve(
    client: &Client,
    target: &Target<'_>,
    deadline: Instant,
    phases: &mut Phases,
) -> Result<SocketAddr, DialError> {
    let (host, port) = match &client.options().connect_to {
        Some((host, port)) => (host.as_str(), *port),
        None => (target.host, target.port),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let t = crate::clock::tokio_instant();
    let resolved = timeout_at(deadline, client.resolve(host)).await;
    phases.dns = crate::clock::elapsed(t);
    match resolved {
        Ok(Ok(addrs)) if !addrs.is_empty() => Ok(SocketAddr::new(addrs[0], port)),
        Ok(Err(DnsError::LocalFdExhausted)) => Err(ErrorClass::LocalFdExhausted.into()),
        _ => Err(ErrorClass::Dns.into()),
    }
}

/// A UDP socket of the connection's own, watched, under a client-only quinn endpoint. A
/// failure here is sloburn's (descriptors, ports, the socket layer), never the target's.
fn bind(peer: SocketAddr, wire: Arc<Wire>) -> Result<(quinn::Endpoint, u16), DialError> {
    let local = match peer.ip() {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let local_error = |e: std::io::Error| {
        let class = classify_io(&e, true);
        DialError {
            class: if class.is_local() {
                class
            } else {
                ErrorClass::LocalSocket
            },
            reason: Some("sloburn could not open its UDP socket"),
        }
    };
    let socket = UdpSocket::bind(SocketAddr::new(local, 0)).map_err(local_error)?;
    let port = socket.local_addr().map(|a| a.port()).unwrap_or(0);
    let runtime = Arc::new(TokioRuntime);
    let socket = runtime.wrap_udp_socket(socket).map_err(local_error)?;
    let endpoint = quinn::Endpoint::new_with_abstract_socket(
        quinn::EndpointConfig::default(),
        None,
        Watched::new(socket, wire),
        runtime,
    )
    .map_err(local_error)?;
    Ok((endpoint, port))
}
