//! Transport failures named: errno, `io::Error` and hyper's errors to an [`ErrorClass`].

use std::io;

use super::ErrorClass;

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

/// Why a TLS handshake failed, for failure evidence and logs: the class stays `tls` (the
/// `error` label set is a contract), the reason says which of the usual causes it was.
pub fn tls_reason(e: &io::Error) -> &'static str {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(e) => rustls_reason(e),
        // The peer closed or reset the connection mid-handshake.
        None => "handshake",
    }
}

/// [`tls_reason`] of a rustls error.
pub fn rustls_reason(e: &rustls::Error) -> &'static str {
    use rustls::{AlertDescription as A, CertificateError as C, Error as E};
    match e {
        E::InvalidCertificate(c) => match c {
            C::UnknownIssuer => "unknown issuer",
            C::Expired | C::ExpiredContext { .. } => "expired",
            C::NotValidYet | C::NotValidYetContext { .. } => "not yet valid",
            C::NotValidForName | C::NotValidForNameContext { .. } => "name mismatch",
            C::Revoked => "revoked",
            C::BadSignature => "bad signature",
            _ => "bad certificate",
        },
        E::NoCertificatesPresented => "no certificate",
        E::NoApplicationProtocol => "no common protocol (ALPN)",
        E::PeerIncompatible(_) => "incompatible (version or ciphers)",
        E::AlertReceived(A::HandshakeFailure) => "handshake refused by the server",
        E::AlertReceived(A::CertificateRequired) => "client certificate required",
        E::AlertReceived(A::ProtocolVersion) => "incompatible (version or ciphers)",
        E::AlertReceived(A::UnknownCA | A::BadCertificate | A::CertificateUnknown) => {
            "client certificate refused"
        }
        E::AlertReceived(_) => "alert from the server",
        _ => "handshake",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TLS failure said only `error=tls`: its reason is named, its class unchanged.
    #[test]
    fn tls_failures_have_a_reason() {
        use rustls::{CertificateError as C, Error as E};
        let io = |e: E| io::Error::new(io::ErrorKind::InvalidData, e);
        let cases = [
            (E::InvalidCertificate(C::UnknownIssuer), "unknown issuer"),
            (E::InvalidCertificate(C::Expired), "expired"),
            (E::InvalidCertificate(C::NotValidForName), "name mismatch"),
            (E::InvalidCertificate(C::NotValidYet), "not yet valid"),
            (
                E::AlertReceived(rustls::AlertDescription::HandshakeFailure),
                "handshake refused by the server",
            ),
            (E::DecryptError, "handshake"),
        ];
        for (e, reason) in cases {
            let e = io(e);
            assert_eq!(tls_reason(&e), reason, "{e}");
            assert_eq!(classify_io(&e, false), ErrorClass::Tls);
        }
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(tls_reason(&reset), "handshake");
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
        assert!(ErrorClass::LocalSocket.is_local());
        let remote = ErrorClass::ALL.iter().filter(|c| !c.is_local());
        assert_eq!(remote.count(), ErrorClass::ALL.len() - 4);
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
}
