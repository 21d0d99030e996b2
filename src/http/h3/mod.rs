//! HTTP/3 (`http: "3"` on `https://`) as a [`Transport`]: QUIC from quinn, HTTP/3 from h3.
//!
//! Each virtual user holds its own QUIC connection (its own UDP socket), made at its first
//! request and kept while it serves the same endpoint; each request is a stream of it. The
//! first request pays `dns`, `connecting` (the Initial's round trip) and `tls_handshaking`
//! (the rest of the handshake), see `dial.rs`. A later connection of the same client resumes
//! its TLS session and, for an idempotent request the server allows, sends it as 0-RTT: then
//! both handshake phases are zero and `Outcome::quic` says `zero_rtt`. A 0-RTT request the
//! server refused is sent again over the completed handshake, once.
//!
//! Files: `wire.rs` the watched UDP socket, `dial.rs` the handshake timed, `stream.rs` one
//! request, `errors.rs` the classes.

mod dial;
mod errors;
mod stream;
mod wire;

use std::sync::Arc;

use http::Uri;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::client::{Client, DialError, RequestSpec, is_idempotent};
use super::connect::{Endpoint, Target, is_tls};
use super::transport::Transport;
use super::{ErrorClass, Outcome, QuicFigures};
use dial::client_config;
use stream::Sender;
use wire::Wire;

/// A user's HTTP/3 connection, when it has one.
pub(crate) struct H3 {
    endpoint: Option<Arc<Endpoint>>,
    live: Option<Live>,
}

/// An open HTTP/3 connection and what drives it.
struct Live {
    /// Keeps the socket's endpoint (its driver) alive as long as the connection.
    _endpoint: quinn::Endpoint,
    conn: quinn::Connection,
    sender: Sender,
    /// Polls the HTTP/3 connection (its control streams); aborted with the connection.
    driver: JoinHandle<()>,
    wire: Arc<Wire>,
    local_port: u16,
    host: Box<str>,
    port: u16,
    /// The first request went as 0-RTT: resolves to whether the server took it.
    early: Option<quinn::ZeroRttAccepted>,
}

impl Live {
    fn serves(&self, t: &Target<'_>) -> bool {
        *self.host == *t.host && self.port == t.port && self.conn.close_reason().is_none()
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.driver.abort();
        self.conn.close(0u32.into(), b"");
    }
}

impl Transport for H3 {
    fn new(_: &Client) -> H3 {
        H3 {
            endpoint: None,
            live: None,
        }
    }

    fn carries(uri: &Uri) -> bool {
        is_tls(uri).is_some()
    }

    async fn send(&mut self, client: &Client, req: &RequestSpec) -> Outcome {
        let start = crate::clock::tokio_instant();
        let deadline = start + client.options().timeout;
        let mut out = Outcome {
            version: http::Version::HTTP_3,
            ..Outcome::default()
        };
        let Some(endpoint) = Endpoint::cached(&mut self.endpoint, &req.uri) else {
            out.error = Some(ErrorClass::Other);
            return out;
        };
        let target = endpoint.target();
        if !target.tls {
            // Config refuses `http: 3` on http://; a journey step's own URL may still be one.
            out.error = Some(ErrorClass::Other);
            out.error_reason = Some("HTTP/3 needs an https:// URL");
            return out;
        }
        let early = is_idempotent(&req.method);
        let mut result = self
            .once(client, req, &target, deadline, &mut out, early)
            .await;
        if result.is_err() && self.refused_early().await {
            // The server turned the 0-RTT data down: the same request over the full handshake.
            let blocked = out.phases.blocked;
            out = Outcome {
                version: http::Version::HTTP_3,
                ..Outcome::default()
            };
            out.phases.blocked = blocked;
            result = self
                .once(client, req, &target, deadline, &mut out, false)
                .await;
        }
        self.finish(client, result, deadline, &mut out).await;
        out
    }

    fn is_open(&self, _: &Client) -> bool {
        self.live
            .as_ref()
            .is_some_and(|l| l.conn.close_reason().is_none())
    }

    fn close(&mut self) {
        self.live = None;
    }
}

impl H3 {
    /// One try: the user's connection (dialled when it has none) and one stream on it.
    async fn once(
        &mut self,
        client: &Client,
        req: &RequestSpec,
        target: &Target<'_>,
        deadline: Instant,
        out: &mut Outcome,
        early: bool,
    ) -> Result<(), DialError> {
        if self.live.as_ref().is_some_and(|l| !l.serves(target)) {
            self.live = None;
        }
        out.reused = self.live.is_some();
        if self.live.is_none() {
            self.live = Some(open(client, target, deadline, out, early).await?);
        }
        let Some(live) = self.live.as_mut() else {
            return Err(ErrorClass::Other.into());
        };
        out.local_port = Some(live.local_port);
        let wire = live.wire.clone();
        stream::exchange(client, &mut live.sender, &wire, req, target, deadline, out).await
    }

    /// Whether the connection's first request went as 0-RTT and the server refused it (then
    /// the connection is dropped: its HTTP/3 control streams went the same way).
    async fn refused_early(&mut self) -> bool {
        let Some(accepted) = self.live.as_mut().and_then(|l| l.early.take()) else {
            return false;
        };
        let refused = !accepted.await;
        if refused {
            self.live = None;
        }
        refused
    }

    /// The request's end: its error and figures (0-RTT's verdict awaited by the deadline) in `out`; a connection that failed, or any
    /// without keep-alive, is dropped.
    async fn finish(
        &mut self,
        client: &Client,
        result: Result<(), DialError>,
        deadline: Instant,
        out: &mut Outcome,
    ) {
        if let Err(e) = result {
            out.error = Some(out.dial_failed(e));
        }
        if let Some(live) = self.live.as_mut() {
            // A request sent as 0-RTT counts once the handshake says the server took it.
            let zero_rtt = match live.early.take() {
                Some(accepted) => {
                    matches!(tokio::time::timeout_at(deadline, accepted).await, Ok(true))
                }
                None => false,
            };
            let path = live.conn.stats().path;
            out.quic = Some(QuicFigures {
                rtt: path.rtt,
                lost_packets: path.lost_packets,
                congestion_events: path.congestion_events,
                zero_rtt,
            });
        }
        if out.error.is_some() || !client.options().keep_alive {
            self.live = None;
        }
    }
}

/// A new connection to `target`, its phases in `out`, with HTTP/3 set up on it.
async fn open(
    client: &Client,
    target: &Target<'_>,
    deadline: Instant,
    out: &mut Outcome,
    early: bool,
) -> Result<Live, DialError> {
    let config = client
        .inner
        .quic
        .get_or_init(|| client_config(client))
        .clone()
        .map_err(|reason| DialError {
            class: ErrorClass::Tls,
            reason: Some(reason),
        })?;
    let dialled = dial::dial(client, &config, target, deadline, &mut out.phases, early).await?;
    let mut builder = h3::client::builder();
    builder.max_field_section_size(stream::MAX_HEAD);
    let built =
        builder.build::<_, _, bytes::Bytes>(h3_quinn::Connection::new(dialled.conn.clone()));
    let (mut driver, sender) = tokio::time::timeout_at(deadline, built)
        .await
        .map_err(|_| DialError::from(ErrorClass::Timeout))?
        .map_err(|e| errors::h3_connection_error(&e))?;
    let driver = tokio::spawn(async move {
        let _ = driver.wait_idle().await;
    });
    Ok(Live {
        _endpoint: dialled.endpoint,
        conn: dialled.conn,
        sender,
        driver,
        wire: dialled.wire,
        local_port: dialled.local_port,
        host: target.host.into(),
        port: target.port,
        early: dialled.early,
    })
}
