//! One accepted connection: hyper's HTTP/1.1 server over it, each request's fault plan
//! (latency, status, body, reset) and the reset-on-drop stream under it.

use crate::server::{Connection, RequestBody};
pub use body::TargetBody;
use body::{InFlight, Layout};
use bytes::Bytes;
pub use faults::Faults;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Body;
use hyper::service::service_fn;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::*;

/// The target's side of `crate::server`: counts connections and serves each with a [`Conn`]
/// of its own (its RNG seeded from the server's seed and the connection's number) over a
/// socket that can be reset.
pub(super) struct Handler {
    shared: Arc<Shared>,
    next_conn: AtomicU64,
}

impl Handler {
    pub(super) fn new(shared: Arc<Shared>) -> Handler {
        Handler {
            shared,
            next_conn: AtomicU64::new(0),
        }
    }
}

impl crate::server::Handler for Handler {
    fn accepted(&self) {
        self.shared
            .stats
            .connections
            .fetch_add(1, Ordering::Relaxed);
    }

    // Errors on a connection are the client's (hang-ups, bad requests) or our own injected
    // resets; the server logs them at debug level.
    async fn serve(&self, stream: TcpStream, conn: Connection) {
        // Small request/response pairs on keep-alive would otherwise wait on Nagle.
        let _ = stream.set_nodelay(true);
        let n = self
            .next_conn
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1);
        let rng = SmallRng::seed_from_u64(self.shared.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let c = Conn {
            shared: self.shared.clone(),
            rng: Cell::new(Some(rng)),
            reset: Arc::new(AtomicBool::new(false)),
        };
        let io = ResetOnDrop {
            stream,
            reset: c.reset.clone(),
        };
        conn.serve(io, service_fn(move |req| c.handle(req))).await;
    }
}

/// Per-connection service state. `Cell` works because hyper calls a connection's service from
/// that connection's task only, so the RNG needs no lock.
pub(super) struct Conn {
    pub(super) shared: Arc<Shared>,
    pub(super) rng: Cell<Option<SmallRng>>,
    pub(super) reset: Arc<AtomicBool>,
}

/// Returned by the service to make hyper drop the connection without writing a response.
#[derive(Debug, thiserror::Error)]
#[error("connection reset by fault injection")]
pub(super) struct ResetConnection;

/// What a request will get, decided synchronously in `call` where the RNG is at hand.
pub(super) enum Plan {
    Respond(Response<TargetBody>),
    Fault {
        faults: Faults,
        delay: Duration,
        error: bool,
        reset: Option<Arc<AtomicBool>>,
        in_flight: InFlight,
    },
}

impl Conn {
    pub(super) fn handle(
        &self,
        req: Request<RequestBody>,
    ) -> impl Future<Output = Result<Response<TargetBody>, ResetConnection>> + Send + use<> {
        let plan = self.plan(&req);
        let body = req.into_body();
        async move {
            let (faults, delay, error, reset, in_flight) = match plan {
                Plan::Respond(response) => return Ok(response),
                Plan::Fault {
                    faults,
                    delay,
                    error,
                    reset,
                    in_flight,
                } => (faults, delay, error, reset, in_flight),
            };
            if !body.is_end_stream() {
                drain(body).await;
            }
            let shared = in_flight.shared().clone();
            shared.wait_out_stall().await;
            if !delay.is_zero() {
                crate::timer::sleep(delay).await;
                // A stall that began while we slept freezes this request too.
                shared.wait_out_stall().await;
            }
            if let Some(flag) = reset {
                flag.store(true, Ordering::Relaxed);
                shared.stats.resets.fetch_add(1, Ordering::Relaxed);
                return Err(ResetConnection);
            }
            let status = if error {
                shared.stats.errors_injected.fetch_add(1, Ordering::Relaxed);
                faults.error_status
            } else {
                faults.status.unwrap_or(200)
            };
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let layout = if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
                Layout::new(Some(0), false)
            } else {
                Layout::new(faults.body_size, status.as_u16() >= 400)
            };
            let stall = shared.stall.map(|s| (s, shared.started));
            let body = TargetBody::generated(layout, faults.bytes_per_sec, stall, in_flight);
            Ok(response(status, "application/json", body))
        }
    }

    pub(super) fn plan(&self, req: &Request<RequestBody>) -> Plan {
        let uri = req.uri();
        if uri.path() == "/stats" {
            let json = serde_json::to_vec(&self.shared.stats.body()).unwrap_or_default();
            return Plan::Respond(response(
                StatusCode::OK,
                "application/json",
                TargetBody::once(Bytes::from(json)),
            ));
        }
        if let Some(tp) = req.headers().get("traceparent") {
            self.shared.stats.record_traceparent(tp);
        }
        let faults = match uri.query() {
            None => self.shared.faults,
            Some(query) => match self.shared.faults.with_query(query) {
                Ok(f) => f,
                Err(message) => {
                    return Plan::Respond(response(
                        StatusCode::BAD_REQUEST,
                        "text/plain; charset=utf-8",
                        TargetBody::once(Bytes::from(message + "\n")),
                    ));
                }
            },
        };
        let mut rng = self
            .rng
            .take()
            .unwrap_or_else(|| SmallRng::seed_from_u64(self.shared.seed));
        let delay = faults.sample_delay(&mut rng);
        let reset = Faults::draw(faults.reset_ratio, &mut rng);
        let error = !reset && Faults::draw(faults.error_ratio, &mut rng);
        self.rng.set(Some(rng));
        Plan::Fault {
            faults,
            delay,
            error,
            reset: reset.then(|| self.reset.clone()),
            in_flight: InFlight::start(self.shared.clone()),
        }
    }
}

pub(super) fn response(
    status: StatusCode,
    content_type: &'static str,
    body: TargetBody,
) -> Response<TargetBody> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// Reads and discards a request body so the connection stays reusable.
pub(super) async fn drain(mut body: RequestBody) {
    while let Some(frame) = body.frame().await {
        if frame.is_err() {
            return;
        }
    }
}

/// The connection's socket. When the service asked for a reset it sets SO_LINGER 0 on drop,
/// which turns the close into an RST: the client sees a reset, not a clean EOF.
pub(super) struct ResetOnDrop {
    pub(super) stream: TcpStream,
    pub(super) reset: Arc<AtomicBool>,
}

impl Drop for ResetOnDrop {
    fn drop(&mut self) {
        if self.reset.load(Ordering::Relaxed) {
            let _ = self.stream.set_zero_linger();
        }
    }
}

impl AsyncRead for ResetOnDrop {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for ResetOnDrop {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
