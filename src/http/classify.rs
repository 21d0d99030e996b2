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
