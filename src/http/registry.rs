//! The one registry of transports: which [`Transport`] carries a target, or a journey step's
//! own URL, picked from its scheme and `http:` when a user's slot is made, never per request.
//!
//! The table at the bottom is the whole registry: one line per transport, the schemes and
//! `http:` values it serves, in order (the first line that matches wins). The macro makes of it
//! a closed enum of the transports' per-user states with one `match` per method, so sending
//! costs a branch, not a boxed future. Adding a transport (HTTP/3 is next) is its module and
//! one line here.

use http::Uri;

use super::client::{Client, RequestSpec};
use super::transport::Transport;
use super::{HttpVersion, Outcome};
use super::{alpn, grpc, h2, h3, http1, probe};

/// The longest scheme the table names; a longer one matches nothing.
const MAX_SCHEME: usize = 16;

macro_rules! registry {
    ($( $(#[$meta:meta])* $schemes:pat, $http:pat => $name:ident($ty:ty), )*) => {
        /// Which transport: a row of the table.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Kind {
            $( $(#[$meta])* $name, )*
        }

        /// A user's state of one transport.
        pub(crate) enum Slot {
            $( $(#[$meta])* $name($ty), )*
        }

        /// The transport that carries `scheme` (lower case) under `http`.
        fn lookup(scheme: &str, http: HttpVersion) -> Option<Kind> {
            match (scheme, http) {
                $( $(#[$meta])* ($schemes, $http) => Some(Kind::$name), )*
                _ => None,
            }
        }

        impl Kind {
            /// A new user's state of this transport.
            pub(crate) fn open(self, client: &Client) -> Slot {
                match self {
                    $( $(#[$meta])* Kind::$name => Slot::$name(<$ty>::new(client)), )*
                }
            }
        }

        impl Slot {
            pub(crate) fn kind(&self) -> Kind {
                match self {
                    $( $(#[$meta])* Slot::$name(_) => Kind::$name, )*
                }
            }

            /// Whether a request to `uri` is this transport's as its target's.
            pub(crate) fn carries(&self, uri: &Uri) -> bool {
                match self {
                    $( $(#[$meta])* Slot::$name(_) => <$ty>::carries(uri), )*
                }
            }

            pub(crate) async fn send(&mut self, client: &Client, req: &RequestSpec) -> Outcome {
                match self {
                    $( $(#[$meta])* Slot::$name(t) => t.send(client, req).await, )*
                }
            }

            pub(crate) fn is_open(&self, client: &Client) -> bool {
                match self {
                    $( $(#[$meta])* Slot::$name(t) => t.is_open(client), )*
                }
            }

            pub(crate) fn close(&mut self) {
                match self {
                    $( $(#[$meta])* Slot::$name(t) => t.close(), )*
                }
            }
        }
    };
}

registry! {
    "http" | "https", HttpVersion::Http1 => Http1(http1::Http1),
    "http" | "https", HttpVersion::Http2 => H2(h2::H2),
    "http" | "https", HttpVersion::Auto => Alpn(alpn::Alpn),
    "https", HttpVersion::Http3 => H3(h3::H3),
    "grpc" | "grpcs", _ => Grpc(grpc::target::Grpc),
    "tcp", _ => Tcp(probe::Tcp),
    "tls", _ => Tls(probe::Tls),
    "dns", _ => Dns(probe::Dns),
    "ws" | "wss", _ => WebSocket(probe::WebSocket),
    #[cfg(test)]
    "echo", _ => Echo(tests::Echo),
}

/// The transport that carries `scheme` (any case) under `http`, `None` for a scheme no
/// transport serves.
pub(crate) fn pick(scheme: &str, http: HttpVersion) -> Option<Kind> {
    // Lower case on the stack: a step's own scheme is looked up when its slot is found.
    let mut lower = [0u8; MAX_SCHEME];
    let bytes = scheme.as_bytes();
    let lower = lower.get_mut(..bytes.len())?;
    lower.copy_from_slice(bytes);
    lower.make_ascii_lowercase();
    lookup(std::str::from_utf8(lower).ok()?, http)
}

impl Slot {
    /// The gRPC transport's state, for a journey step's own call.
    pub(crate) fn grpc(&mut self) -> Option<&mut grpc::target::Grpc> {
        match self {
            Slot::Grpc(g) => Some(g),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{ClientOptions, ErrorClass, Protocol, Resolver};
    use std::sync::Arc;

    /// A transport added to show what adding one takes: this module (the type and its
    /// `Transport` impl) and its line in the table. It answers every request itself, with the
    /// request's body, and counts the requests its user sent.
    pub(crate) struct Echo {
        sent: u16,
    }

    impl Transport for Echo {
        fn new(_: &Client) -> Echo {
            Echo { sent: 0 }
        }

        async fn send(&mut self, _: &Client, req: &RequestSpec) -> Outcome {
            self.sent += 1;
            let mut out = Outcome {
                status: Some(self.sent),
                body: req.body.clone(),
                ..Outcome::default()
            };
            out.phases.waiting = std::time::Duration::from_millis(1);
            out
        }

        fn is_open(&self, _: &Client) -> bool {
            self.sent > 0
        }
    }

    fn client(opts: ClientOptions) -> Client {
        Client::new(opts, Arc::new(Resolver::system()))
    }

    fn req(uri: &'static str, body: &'static [u8]) -> RequestSpec {
        RequestSpec {
            method: http::Method::POST,
            uri: http::Uri::from_static(uri),
            headers: http::HeaderMap::new(),
            body: bytes::Bytes::from_static(body),
        }
    }

    #[tokio::test]
    async fn a_new_transport_is_a_module_and_a_line() {
        // A journey step's `echo://` URL over an HTTP target goes to the registered transport,
        // through a user's `Conn`, which keeps its state between requests.
        let mut conn = client(ClientOptions::default()).conn();
        let first = conn.send(&req("echo://anywhere/a", b"hello")).await;
        assert_eq!((first.status, &first.body[..]), (Some(1), &b"hello"[..]));
        assert_eq!(first.phases.duration(), std::time::Duration::from_millis(1));
        let second = conn.send(&req("ECHO://anywhere/b", b"again")).await;
        assert_eq!((second.status, &second.body[..]), (Some(2), &b"again"[..]));
        // The target's own transport is untouched: nothing of it is open.
        assert!(!conn.is_open());
        // A scheme no line names is no transport's: the request fails, as a bad URL does.
        let none = conn.send(&req("gopher://anywhere/", b"")).await;
        assert_eq!(none.error, Some(ErrorClass::Other));
    }

    #[test]
    fn every_protocol_and_version_has_its_transport() {
        let versions = [HttpVersion::Auto, HttpVersion::Http1, HttpVersion::Http2];
        let protocols = [
            Protocol::Http,
            Protocol::Tcp,
            Protocol::Tls,
            Protocol::Dns,
            Protocol::Grpc,
            Protocol::WebSocket,
        ];
        for p in protocols {
            assert_eq!(Protocol::of_scheme(p.scheme()), Some(p));
            for v in versions {
                assert!(pick(p.scheme(), v).is_some(), "{p:?} {v:?}");
            }
        }
        let http = |v| pick("HTTPS", v);
        assert_eq!(http(HttpVersion::Http1), Some(Kind::Http1));
        assert_eq!(http(HttpVersion::Http2), Some(Kind::H2));
        assert_eq!(http(HttpVersion::Auto), Some(Kind::Alpn));
        assert_eq!(pick("wss", HttpVersion::Http2), Some(Kind::WebSocket));
        assert_eq!(pick("grpcs", HttpVersion::Auto), Some(Kind::Grpc));
        assert_eq!(pick("ftp", HttpVersion::Auto), None);
        assert_eq!(pick("a-scheme-longer-than-any", HttpVersion::Auto), None);
    }

    #[test]
    fn versions_parse() {
        for v in [HttpVersion::Auto, HttpVersion::Http1, HttpVersion::Http2] {
            assert_eq!(HttpVersion::parse(v.as_str()), Some(v));
        }
        assert_eq!(HttpVersion::parse("3"), Some(HttpVersion::Http3));
        assert_eq!(pick("https", HttpVersion::Http3), Some(Kind::H3));
        // QUIC has no plain form: config refuses `http: 3` on http://, and no line carries it.
        assert_eq!(pick("http", HttpVersion::Http3), None);
        assert_eq!(HttpVersion::parse("4"), None);
    }
}
