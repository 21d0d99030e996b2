//! QUIC and HTTP/3 failures named: quinn's connection errors and h3's stream errors to an
//! [`ErrorClass`] and, where the class alone does not say, a reason for the evidence.
//!
//! A version the server does not speak is `quic_version`; a failed handshake `tls` (QUIC's
//! handshake is TLS's), its reason saying which part failed; a connection the server let go quiet `idle_timeout`; a stream or connection the server reset
//! or closed `reset`.

use quinn::ConnectionError as C;

use super::super::ErrorClass;
use super::super::client::DialError;

fn named(class: ErrorClass, reason: &'static str) -> DialError {
    DialError {
        class,
        reason: Some(reason),
    }
}

/// A connection that could not be started at all.
pub(crate) fn connect_error(e: quinn::ConnectError) -> DialError {
    match e {
        quinn::ConnectError::InvalidServerName(_) => named(
            ErrorClass::Tls,
            "the server name is not a DNS name or an IP address",
        ),
        quinn::ConnectError::UnsupportedVersion => {
            named(ErrorClass::QuicVersion, "QUIC version not supported")
        }
        _ => named(ErrorClass::Other, "QUIC connection refused locally"),
    }
}

/// A connection that ended, `handshaking` while it was being set up.
pub(crate) fn connection_error(e: &C, handshaking: bool) -> DialError {
    let tls = match e {
        C::TransportError(t) => tls_reason(t.code, &t.reason, true),
        C::ConnectionClosed(c) => tls_reason(c.error_code, "", false),
        _ => None,
    };
    if let Some(reason) = tls {
        return named(ErrorClass::Tls, reason);
    }
    match e {
        C::VersionMismatch => named(
            ErrorClass::QuicVersion,
            "version negotiation: the server speaks no QUIC version sloburn offers",
        ),
        C::TimedOut => named(ErrorClass::IdleTimeout, "the QUIC connection went idle"),
        _ if handshaking => named(ErrorClass::Tls, "the QUIC handshake failed"),
        C::Reset | C::ConnectionClosed(_) | C::ApplicationClosed(_) => {
            named(ErrorClass::Reset, "the server closed the QUIC connection")
        }
        C::TransportError(_) => named(ErrorClass::Other, "QUIC protocol error"),
        C::LocallyClosed | C::CidsExhausted => named(ErrorClass::Other, "closed by sloburn"),
    }
}

/// TLS's verdict inside QUIC: a crypto error code (0x100 + the TLS alert). `local`: sloburn's
/// rustls raised it, and its text names the cause; else the server's alert does.
fn tls_reason(code: quinn::TransportErrorCode, text: &str, local: bool) -> Option<&'static str> {
    let code = u64::from(code);
    if !(0x100..0x200).contains(&code) {
        return None;
    }
    let alert = (code - 0x100) as u8;
    let by_text = [
        ("UnknownIssuer", "unknown issuer"),
        ("Expired", "expired"),
        ("NotValidYet", "not yet valid"),
        ("NotValidForName", "name mismatch"),
        ("BadSignature", "bad signature"),
        ("invalid peer certificate", "bad certificate"),
        ("NoApplicationProtocol", "no common protocol (ALPN)"),
    ];
    if local {
        return Some(
            by_text
                .iter()
                .find(|(needle, _)| text.contains(needle))
                .map_or("handshake", |(_, reason)| reason),
        );
    }
    // The server's alert (RFC 8446 §6).
    Some(match alert {
        40 => "handshake refused by the server",
        116 => "client certificate required",
        48 | 42 | 46 => "client certificate refused",
        120 => "no common protocol (ALPN)",
        70 => "incompatible (version or ciphers)",
        _ => "alert from the server",
    })
}

/// An HTTP/3 stream's failure: the server reset it (`reset`), its connection ended (as
/// [`connection_error`]), or the response broke the protocol or sloburn's bounds (`other`).
pub(crate) fn stream_error(e: &h3::error::StreamError) -> DialError {
    use h3::error::StreamError as S;
    match e {
        S::RemoteTerminate { .. } => named(ErrorClass::Reset, "the server reset the stream"),
        S::RemoteClosing { .. } => named(ErrorClass::Reset, "the server is going away (GOAWAY)"),
        S::HeaderTooBig { .. } => named(
            ErrorClass::Other,
            "the response head is larger than sloburn reads (64 KiB)",
        ),
        S::ConnectionError { 0: e, .. } => h3_connection_error(e),
        _ => named(ErrorClass::Other, "HTTP/3 protocol error"),
    }
}

/// The HTTP/3 connection's end, as a stream or the setup sees it.
pub(crate) fn h3_connection_error(e: &h3::error::ConnectionError) -> DialError {
    use h3::error::ConnectionError as H;
    match e {
        H::Timeout { .. } => named(ErrorClass::IdleTimeout, "the QUIC connection went idle"),
        H::Remote { 0: remote, .. } => incoming(remote),
        _ => named(ErrorClass::Other, "the connection was closed locally"),
    }
}

fn incoming(e: &h3::quic::ConnectionErrorIncoming) -> DialError {
    use h3::quic::ConnectionErrorIncoming as I;
    match e {
        I::ApplicationClose { .. } => {
            named(ErrorClass::Reset, "the server closed the HTTP/3 connection")
        }
        I::Timeout => named(ErrorClass::IdleTimeout, "the QUIC connection went idle"),
        I::Undefined(inner) => match inner.downcast_ref::<C>() {
            Some(c) => connection_error(c, false),
            None => named(ErrorClass::Other, "QUIC error"),
        },
        _ => named(ErrorClass::Other, "QUIC error"),
    }
}
