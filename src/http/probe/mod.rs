//! Probes: targets that are not HTTP, measured with the same executors, checks, SLOs and
//! metrics. The URL's scheme says which:
//!
//! - `tcp://host:port`: connect; with a body, send it; with `expect`, read until it arrives
//!   (or the first answer, without). Status 0 once connected and exchanged.
//! - `tls://host:port`: the same over TLS; the certificate chain the server sent must verify
//!   (else the probe fails as `tls`), and its earliest expiry is kept for the warning tier
//!   (`Outcome::cert_not_after`) and shown in the body as JSON for checks.
//! - `dns://server[:port]/name?type=A`: one query (RFC 4501's URI form) to that server, over
//!   UDP and again over TCP when truncated. Status is the answer's RCODE (0 NOERROR,
//!   3 NXDOMAIN); the body is the answers' data, one per line, for `body_*` checks.
//!
//! - `ws://` and `wss://`: a WebSocket session (`ws.rs`): the upgrade, the body sent as one
//!   message, messages read until one holds `expect`. Status is the upgrade's (101).
//!
//! A probe always opens its own connection (or socket): what it measures is the connect. Its
//! duration is the whole probe ([`Outcome::duration`](super::Outcome::duration)). Each is a
//! [`Transport`](super::Transport) of its own, registered in `registry.rs`.

mod dns;
mod stream;
mod ws;

pub(crate) use dns::Dns;
pub(crate) use stream::{Tcp, Tls};
pub(crate) use ws::WebSocket;

use std::time::Duration;

use bytes::Bytes;

/// A probe target's own settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeOptions {
    /// `tcp://` and `tls://`: read until these bytes arrive.
    pub expect: Option<Bytes>,
    /// `tls://`: how long before its expiry a certificate raises the warning tier.
    pub expiry_warning: Duration,
}

/// The warning tier's default: two weeks before a certificate expires.
pub const DEFAULT_EXPIRY_WARNING: Duration = Duration::from_secs(14 * 86_400);

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            expect: None,
            expiry_warning: DEFAULT_EXPIRY_WARNING,
        }
    }
}

/// The DNS query a `dns://` URL asks: the name (a trailing dot added) and the record type.
pub fn dns_query(uri: &http::Uri) -> Result<(String, hickory_proto::rr::RecordType), String> {
    dns::query_of(uri)
}
