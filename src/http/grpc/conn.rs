//! A user's gRPC connection: one HTTP/2 connection per user (a VU), opened through sloburn's
//! own dialler (`http::Client::dial`: DNS, TCP connect and TLS timed apart, `connect_to`, the
//! kernel receive stamps) and kept for the user's next call, as HTTP keep-alive is.
//!
//! tonic's `Grpc` drives the calls on it through [`H2Service`], a `tower` service over hyper's
//! `SendRequest`. Every transport failure crosses tonic as a [`Transport`] carrying its
//! [`ErrorClass`], so a status the server sent and one tonic made up for a broken connection
//! are told apart by the status's source, never by its code.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Uri;
use http_body_util::BodyExt;
use http_body_util::combinators::MapErr;
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout_at};

use crate::http::connect::Target;
use crate::http::timing::{IoStats, TimingIo};
use crate::http::{Client, ErrorClass, Phases, classify_hyper};

/// A transport failure, as the error of [`H2Service`] and of its response bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("transport failure: {}", .0.as_str())]
pub struct Transport(pub ErrorClass);

fn to_transport(e: hyper::Error) -> Transport {
    Transport(classify_hyper(&e))
}

/// The response body type: hyper's, with its errors made [`Transport`].
pub type ResponseBody = MapErr<Incoming, fn(hyper::Error) -> Transport>;

/// tonic's view of one HTTP/2 connection.
#[derive(Clone)]
pub struct H2Service(SendRequest<tonic::body::Body>);

impl tower_service::Service<http::Request<tonic::body::Body>> for H2Service {
    type Response = http::Response<ResponseBody>;
    type Error = Transport;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Transport>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Transport>> {
        self.0.poll_ready(cx).map_err(to_transport)
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let sent = self.0.send_request(req);
        Box::pin(async move {
            let response = sent.await.map_err(to_transport)?;
            Ok(response.map(|body| body.map_err(to_transport as fn(hyper::Error) -> Transport)))
        })
    }
}

/// The class of a transport failure inside a tonic status, `None` when the status is one a
/// server sent (or tonic read from one).
pub fn transport_class(status: &tonic::Status) -> Option<ErrorClass> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(err) = source {
        if let Some(t) = err.downcast_ref::<Transport>() {
            return Some(t.0);
        }
        source = err.source();
    }
    None
}

/// Where calls go and how their connections are made; shared by a profile's users.
#[derive(Clone, Debug)]
pub struct GrpcClient {
    http: Client,
    /// `http[s]://host:port` dialled.
    dial: Uri,
    /// `http[s]://authority`: `:scheme` and `:authority` of every call.
    origin: Uri,
}

/// Why a client could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("`{0}` is no gRPC address: write `host:port` (an IPv6 host in brackets)")]
    Address(String),
    #[error("`{0}` is no authority: write `host[:port]`")]
    Authority(String),
}

impl GrpcClient {
    /// A client of `address` (`host:port`), over TLS when `tls`, sending `authority` (else the
    /// address) as `:authority`. `http` brings the resolver, the TLS options and the timeout;
    /// it must speak HTTP/2 only (`HttpVersion::Http2`), so TLS offers only `h2` in ALPN.
    pub fn new(
        http: Client,
        address: &str,
        tls: bool,
        authority: Option<&str>,
    ) -> Result<GrpcClient, AddressError> {
        let scheme = if tls { "https" } else { "http" };
        let uri = |authority: &str| -> Option<Uri> {
            let uri: Uri = format!("{scheme}://{authority}").parse().ok()?;
            let ok = uri.path() == "/" && uri.query().is_none() && Target::parse(&uri).is_some();
            ok.then_some(uri)
        };
        let dial = uri(address)
            .filter(|u| u.port_u16().is_some())
            .ok_or_else(|| AddressError::Address(address.to_string()))?;
        let origin = match authority {
            Some(a) => uri(a).ok_or_else(|| AddressError::Authority(a.to_string()))?,
            None => dial.clone(),
        };
        Ok(GrpcClient { http, dial, origin })
    }

    pub fn http(&self) -> &Client {
        &self.http
    }

    pub fn origin(&self) -> &Uri {
        &self.origin
    }

    /// A user's connection, opened at its first call.
    pub fn conn(&self) -> GrpcConn {
        GrpcConn {
            client: self.clone(),
            live: None,
        }
    }
}

/// One open HTTP/2 connection.
struct Live {
    sender: SendRequest<tonic::body::Body>,
    stats: Arc<IoStats>,
    local_port: u16,
    driver: JoinHandle<()>,
}

impl Drop for Live {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// What [`GrpcConn::ready`] hands a call: the service, the byte counters (HTTP/2 frames with
/// their headers, above TLS: one call at a time per connection, so a call's difference is its
/// own plus any ping or window update) and the port.
pub(crate) struct Ready {
    pub service: H2Service,
    pub stats: Arc<IoStats>,
    pub local_port: u16,
    /// Whether the connection was opened by an earlier call.
    pub reused: bool,
}

/// A user's connection slot: empty until the first call, replaced when it closed.
pub struct GrpcConn {
    client: GrpcClient,
    live: Option<Live>,
}

impl GrpcConn {
    pub fn client(&self) -> &GrpcClient {
        &self.client
    }

    /// The open connection, or a new one (its DNS, connect and TLS time in `phases`).
    pub(crate) async fn ready(
        &mut self,
        deadline: Instant,
        phases: &mut Phases,
    ) -> Result<Ready, ErrorClass> {
        if self.live.as_ref().is_some_and(|l| l.sender.is_closed()) {
            self.live = None;
        }
        let reused = self.live.is_some();
        if self.live.is_none() {
            let target = Target::parse(&self.client.dial).ok_or(ErrorClass::Other)?;
            let dialed = self.client.http.dial(&target, deadline, phases).await?;
            let stats = dialed.stats.clone();
            let local_port = dialed.local_port;
            let handshake = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                .handshake(TokioIo::new(TimingIo::new(dialed.stream, stats.clone())));
            let (sender, connection) = match timeout_at(deadline, handshake).await {
                Ok(Ok(pair)) => pair,
                Ok(Err(e)) => return Err(classify_hyper(&e)),
                Err(_) => return Err(ErrorClass::Timeout),
            };
            let driver = tokio::spawn(async move {
                let _ = connection.await;
            });
            self.live = Some(Live {
                sender,
                stats,
                local_port,
                driver,
            });
        }
        let live = self.live.as_ref().ok_or(ErrorClass::Other)?;
        Ok(Ready {
            service: H2Service(live.sender.clone()),
            stats: live.stats.clone(),
            local_port: live.local_port,
            reused,
        })
    }

    /// Drops the connection: the next call opens a new one.
    pub fn close(&mut self) {
        self.live = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{ClientOptions, HttpVersion, Resolver};

    fn http() -> Client {
        Client::new(
            ClientOptions {
                http: HttpVersion::Http2,
                ..ClientOptions::default()
            },
            Arc::new(Resolver::system()),
        )
    }

    #[test]
    fn addresses_and_authorities() {
        let c = GrpcClient::new(http(), "127.0.0.1:50051", false, None).unwrap();
        assert_eq!(c.origin().to_string(), "http://127.0.0.1:50051/");
        let c = GrpcClient::new(http(), "[::1]:443", true, Some("api.example")).unwrap();
        assert_eq!(c.origin().to_string(), "https://api.example/");
        for bad in ["", "host", "host:port", "h:1/path", "http://h:1", "h:99999"] {
            assert_eq!(
                GrpcClient::new(http(), bad, false, None).unwrap_err(),
                AddressError::Address(bad.to_string()),
                "{bad}"
            );
        }
        assert!(matches!(
            GrpcClient::new(http(), "h:1", false, Some("a b")),
            Err(AddressError::Authority(_))
        ));
    }

    #[test]
    fn a_status_from_a_transport_failure_carries_its_class() {
        let status = tonic::Status::from_error(Box::new(Transport(ErrorClass::Reset)));
        assert_eq!(transport_class(&status), Some(ErrorClass::Reset));
        assert_eq!(transport_class(&tonic::Status::unavailable("down")), None);
    }
}
