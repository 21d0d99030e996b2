//! One accepted connection: silent until its first byte, then a slot and hyper's HTTP/1.1 on
//! it, each request counted from its head to the end of its response body.

use super::table::{Active, Table};
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::Limited;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// A request's body as a served service sees it: hyper's, held to the server's
/// `Limits::max_body` (past it a read fails with `http_body_util::LengthLimitError`, which
/// axum answers 413).
pub type RequestBody = Limited<Incoming>;

/// The errors hyper takes from a service and a body.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a server serves. For each connection that has sent its first byte and got a slot,
/// `serve` wraps the socket as it likes, builds its hyper service and hands both to
/// [`Connection::serve`]; one value serves every connection of a server.
pub trait Handler: Send + Sync + 'static {
    /// A connection was accepted (before it sent anything).
    fn accepted(&self) {}

    /// Serves one connection: `conn.serve(io, service).await`.
    fn serve(&self, stream: TcpStream, conn: Connection) -> impl Future<Output = ()> + Send;
}

/// An axum app: the socket as it is and the router's clone on each connection. Each request
/// carries its peer's address as axum's `ConnectInfo<SocketAddr>` (the token limiter keys
/// wrong tokens by it).
impl Handler for axum::Router {
    async fn serve(&self, stream: TcpStream, conn: Connection) {
        let peer = stream.peer_addr().ok();
        let router = self.clone();
        let service = hyper::service::service_fn(move |mut req: Request<RequestBody>| {
            if let Some(peer) = peer {
                req.extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
            }
            // A `Router` is always ready: no `poll_ready` to wait on.
            tower_service::Service::call(&mut router.clone(), req)
        });
        conn.serve(stream, service).await;
    }
}

/// What one connection's task needs from its server.
pub(super) struct Server<H> {
    pub(super) handler: Arc<H>,
    pub(super) http: Arc<http1::Builder>,
    pub(super) table: Arc<Table>,
    pub(super) shutdown: CancellationToken,
}

impl<H> Clone for Server<H> {
    fn clone(&self) -> Self {
        Server {
            handler: self.handler.clone(),
            http: self.http.clone(),
            table: self.table.clone(),
            shutdown: self.shutdown.clone(),
        }
    }
}

impl<H: Handler> Server<H> {
    /// The connection `id`, admitted silent with its `silent` token: waits for its first
    /// byte, takes a slot and is served by the handler until it closes, gives way, or the
    /// server stops.
    pub(super) async fn serve(self, stream: TcpStream, id: u64, silent: CancellationToken) {
        if !self.first_byte(&stream, &silent).await {
            self.table.leave_silent(id);
            return;
        }
        let Some(active) = self.table.promote(id) else {
            return;
        };
        let conn = Connection {
            id,
            active,
            http: self.http.clone(),
            table: self.table.clone(),
            shutdown: self.shutdown.clone(),
        };
        self.handler.serve(stream, conn).await;
    }

    /// Whether the connection sent a byte before its header timeout, its eviction from the
    /// silent set or the server's stop. A peek, not `readable()`, which may wake without data
    /// (tokio documents false positives, and a fresh socket gets them): only a byte moves a
    /// connection on; one closed before it sent a byte just ends here.
    async fn first_byte(&self, stream: &TcpStream, silent: &CancellationToken) -> bool {
        let mut first = [0u8; 1];
        let timeout = async {
            match self.table.limits.header_timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = stream.peek(&mut first) => matches!(r, Ok(n) if n > 0),
            _ = timeout => false,
            _ = silent.cancelled() => false,
            _ = self.shutdown.cancelled() => false,
        }
    }
}

/// A connection that has sent its first byte and holds a slot, for its handler to serve.
pub struct Connection {
    id: u64,
    active: Arc<Active>,
    http: Arc<http1::Builder>,
    table: Arc<Table>,
    shutdown: CancellationToken,
}

impl Drop for Connection {
    /// The slot is free once the connection is served (or was never served at all).
    fn drop(&mut self) {
        self.table.leave_active(self.id);
    }
}

impl Connection {
    /// Serves HTTP/1.1 with `service` over `io` (the connection's socket, or a wrapper of it)
    /// until the connection closes, gives way to a newcomer, or the server stops (then the
    /// request in flight finishes first).
    pub async fn serve<Io, S, B>(self, io: Io, service: S)
    where
        Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
        S: hyper::service::Service<Request<RequestBody>, Response = Response<B>> + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: Body<Data = Bytes, Error: Into<BoxError>> + Unpin + Send + 'static,
    {
        let active = self.active.clone();
        match self.table.limits.write_timeout {
            Some(t) => {
                let table = self.table.clone();
                let io = super::deadline::Guarded::new(io, self.id, active.clone(), table, t);
                super::waiting::scope(active, self.serve_io(io, service)).await
            }
            None => super::waiting::scope(active, self.serve_io(io, service)).await,
        }
    }

    async fn serve_io<Io, S, B>(self, io: Io, service: S)
    where
        Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
        S: hyper::service::Service<Request<RequestBody>, Response = Response<B>> + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: Body<Data = Bytes, Error: Into<BoxError>> + Unpin + Send + 'static,
    {
        let close = self.active.close.clone();
        let service = tracked(service, self.active.clone(), self.table.limits.max_body);
        let served = self.http.serve_connection(TokioIo::new(io), service);
        let mut served = std::pin::pin!(served);
        let deadline = super::deadline::expired(&self.active, self.table.limits.write_timeout);
        let result = tokio::select! {
            r = served.as_mut() => r,
            _ = close.cancelled() => Ok(()),
            _ = deadline => {
                tracing::debug!("HTTP connection closed: its response's write deadline passed");
                Ok(())
            }
            _ = self.shutdown.cancelled() => {
                served.as_mut().graceful_shutdown();
                served.await
            }
        };
        if let Err(e) = result {
            tracing::debug!(error = %e, "HTTP connection closed");
        }
    }
}

/// `service` with each request counted on `conn` from its head to the end of its response
/// body (so the connection never gives way with a request in flight), and its body held to
/// `max_body`. No lock and no allocation per request: an atomic begin and end on `conn`.
fn tracked<S, B>(
    service: S,
    conn: Arc<Active>,
    max_body: Option<usize>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<Tracked<B>>,
    Error = S::Error,
    Future: Send + 'static,
> + Send
+ 'static
where
    S: hyper::service::Service<Request<RequestBody>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Unpin,
{
    hyper::service::service_fn(move |req: Request<Incoming>| {
        let start = start(&service, &conn, max_body, req);
        async move {
            match start {
                Start::Refused(status) => Ok(refuse(status)),
                Start::Call(call, begun) => Ok(call.await?.map(|inner| Tracked {
                    inner: Some(inner),
                    _begun: Some(begun),
                })),
            }
        }
    })
}

/// How a request starts.
enum Start<F> {
    /// The service's call, with the request counted on its connection.
    Call(F, Begun),
    /// Answered by the server itself: a connection closing for another, a body over the limit.
    Refused(StatusCode),
}

fn start<S, B>(
    service: &S,
    conn: &Arc<Active>,
    max_body: Option<usize>,
    req: Request<Incoming>,
) -> Start<S::Future>
where
    S: hyper::service::Service<Request<RequestBody>, Response = Response<B>>,
{
    if !conn.begin() {
        // Chosen to give way just as this head arrived: closed, nothing served.
        return Start::Refused(StatusCode::SERVICE_UNAVAILABLE);
    }
    let begun = Begun(conn.clone());
    let limit = match max_body {
        None => usize::MAX,
        Some(max) if declared_length(&req).is_some_and(|n| n > max as u64) => {
            return Start::Refused(StatusCode::PAYLOAD_TOO_LARGE);
        }
        Some(max) => max,
    };
    Start::Call(
        service.call(req.map(|body| Limited::new(body, limit))),
        begun,
    )
}

fn declared_length<T>(req: &Request<T>) -> Option<u64> {
    req.headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// An empty answer that closes the connection.
fn refuse<B>(status: StatusCode) -> Response<Tracked<B>> {
    let mut refused = Response::new(Tracked {
        inner: None,
        _begun: None,
    });
    *refused.status_mut() = status;
    refused
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    refused
}

/// A request in flight on its connection, until dropped (with its response body, or with the
/// call when it failed or was cancelled).
struct Begun(Arc<Active>);

impl Drop for Begun {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// A response body that tells its connection when it has been written to the end (or
/// dropped): until then the connection has a request in flight and never gives way.
pub(super) struct Tracked<B> {
    /// `None`: an empty answer of the server's own.
    inner: Option<B>,
    _begun: Option<Begun>,
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        match &mut self.inner {
            Some(inner) => Pin::new(inner).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}
