//! Where a request goes and the connections it goes over, as every transport and the client
//! see them: the endpoint of a URI (scheme, authority, `Host`), the dial target, a dialled
//! stream, a user's live HTTP/1.1 connection and a client's HTTP/2 connection slots.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http::Uri;
use http::header::HeaderValue;
use http_body_util::Full;
use hyper::client::conn::{http1, http2};
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

    /// The endpoint of `uri`: the one kept in `last` when it matches, else parsed and kept there.
    pub(super) fn cached(last: &mut Option<Arc<Endpoint>>, uri: &Uri) -> Option<Arc<Endpoint>> {
        match last {
            Some(e) if e.matches(uri) => Some(e.clone()),
            _ => {
                let e = Arc::new(Endpoint::of(uri)?);
                *last = Some(e.clone());
                Some(e)
            }
        }
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

/// An open HTTP/1.1 connection: hyper's sender, the driver task, and the stats its IO reports
/// to.
pub(crate) struct Live {
    pub(super) sender: http1::SendRequest<Full<Bytes>>,
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

/// The default `http2.max_connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4;

/// A client's HTTP/2 connection slots, shared by its users: each user is given one slot when
/// its `Conn` is made (round robin), and its streams share that slot's connection.
pub(crate) struct Pool {
    slots: Vec<tokio::sync::Mutex<Option<H2Live>>>,
    next: AtomicUsize,
}

impl Pool {
    pub(crate) fn new(max_connections: usize) -> Pool {
        Pool {
            slots: (0..max_connections.max(1))
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// The slot of a new user.
    pub(crate) fn assign(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len()
    }

    pub(super) fn slot(&self, slot: usize) -> &tokio::sync::Mutex<Option<H2Live>> {
        &self.slots[slot % self.slots.len()]
    }

    /// Whether a request on `slot` would open nothing: its connection is open, or another user
    /// holds the slot (it is sending on it or opening it).
    pub(crate) fn is_open(&self, slot: usize) -> bool {
        match self.slot(slot).try_lock() {
            Ok(live) => live.as_ref().is_some_and(|l| !l.sender.is_closed()),
            Err(_) => true,
        }
    }
}

/// One open HTTP/2 connection.
pub(crate) struct H2Live {
    pub(super) sender: http2::SendRequest<Full<Bytes>>,
    /// The connection's receive stamps: a stream's answer arrived no later than the latest.
    pub(super) stats: Arc<IoStats>,
    pub(super) local_port: u16,
    pub(super) tls: bool,
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) driver: JoinHandle<()>,
}

impl H2Live {
    /// Whether it is open and goes where `t` does.
    pub(super) fn serves(&self, t: &Target<'_>) -> bool {
        !self.sender.is_closed() && self.tls == t.tls && self.port == t.port && self.host == t.host
    }
}

impl Drop for H2Live {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn slots_are_assigned_round_robin() {
        let pool = Pool::new(3);
        let got: Vec<usize> = (0..7).map(|_| pool.assign()).collect();
        assert_eq!(got, [0, 1, 2, 0, 1, 2, 0]);
        assert!(!pool.is_open(1));
        assert_eq!(Pool::new(0).slots.len(), 1);
    }
}
