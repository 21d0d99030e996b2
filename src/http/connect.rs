//! Where a request goes and the connection it goes over: the endpoint of a URI (scheme,
//! authority, `Host`), the dial target, a dialled stream and a live HTTP/1.1 connection.

use std::sync::Arc;

use bytes::Bytes;
use http::Uri;
use http::header::HeaderValue;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;
use tokio::task::JoinHandle;

use super::timing::IoStats;
use super::tls::Stream;

/// A connected stream, and whether it speaks HTTP/2 (ALPN's pick, or h2c by configuration).
pub(crate) struct Dialed {
    pub(crate) stream: Stream,
    /// What the stream's reads and writes report to (its TCP layer, the receive stamps).
    pub(crate) stats: Arc<IoStats>,
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
pub(super) fn is_tls(uri: &Uri) -> Option<bool> {
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
    pub(super) written: Box<str>,
    pub(super) tls: bool,
    pub(super) host: Box<str>,
    pub(super) port: u16,
    pub(super) authority: Box<str>,
    /// `Host: authority`; `None` when the authority is no valid header value.
    pub(super) host_header: Option<HeaderValue>,
}

impl Endpoint {
    pub(super) fn of(uri: &Uri) -> Option<Endpoint> {
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
    pub(super) fn matches(&self, uri: &Uri) -> bool {
        is_tls(uri) == Some(self.tls)
            && uri
                .authority()
                .is_some_and(|a| a.as_str() == &*self.written)
    }

    pub(super) fn target(&self) -> Target<'_> {
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
    pub(super) sender: SendRequest<Full<Bytes>>,
    pub(super) stats: Arc<IoStats>,
    pub(super) local_port: u16,
    pub(super) tls: bool,
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) driver: JoinHandle<()>,
}

impl Live {
    pub(super) fn serves(&self, t: &Target<'_>) -> bool {
        self.tls == t.tls && self.port == t.port && self.host == t.host
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        // The driver owns the socket; a dropped slot must not leave it open.
        self.driver.abort();
    }
}
