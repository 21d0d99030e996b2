//! The daemon's own HTTP server: HTTP/1.1 on hyper, built so that Prometheus and the kubelet
//! always get in, however many idle or slow sockets are open.
//!
//! - A connection is *silent* from its accept until its first byte arrives. It waits in a
//!   small task of its own (no hyper connection, no buffer) for at most `header_timeout`.
//!   Silent connections have a bound of their own (`Limits::silent`); past it the one silent
//!   longest is closed for the newcomer.
//! - A connection that has sent a byte goes to hyper and takes one of `max_connections`
//!   slots. When every slot is taken, the connection that has waited longest for a request
//!   head (a head half-sent, or kept alive between requests) is closed for it. One with a
//!   request in flight never is (its response is written to the end).
//!
//! So a scrape or a probe, which sends its request as soon as it connects, is accepted at once
//! and served, while idle sockets take turns in the silent set and half-sent heads give way.
//! The accept loop never waits on anything but the listener, so the kernel's accept queue does
//! not fill behind idle sockets.

use super::state::Shared;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{AcqRel, Acquire};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The limits of the daemon's own HTTP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Time to send the first byte, then a complete request head (also the keep-alive idle
    /// time between requests).
    pub header_timeout: Duration,
    /// Connections that have sent something: `server.max_connections`, lowered to a quarter of
    /// the soft fd limit (the rest is for the load's own connections, the store and the
    /// process).
    pub max_connections: usize,
    /// Connections that have sent nothing yet: 16 × `max_connections`, within a quarter of the
    /// soft fd limit.
    pub silent: usize,
}

impl Limits {
    /// The limits for `server.max_connections` and `header_timeout` under the fd limit `fds`.
    pub fn new(header_timeout: Duration, configured: u32, fds: u64) -> Limits {
        let fit = usize::try_from(fds / 4).unwrap_or(usize::MAX).max(8);
        let max_connections = (configured as usize).min(fit);
        Limits {
            header_timeout,
            max_connections,
            silent: max_connections.saturating_mul(16).min(fit),
        }
    }
}

/// `busy` of a connection that was chosen to give way: no request may start on it.
const EVICTED: u32 = u32::MAX;

/// A connection that has sent a byte: the requests in flight on it and since when it has
/// waited for a request head.
struct Active {
    /// Requests in flight (from its head to the end of its response body), or [`EVICTED`].
    busy: AtomicU32,
    /// When it last began to wait for a head; read only while `busy` is 0.
    waiting_since: Mutex<Instant>,
    close: CancellationToken,
}

impl Active {
    /// A request begins; false when the connection is closing for another.
    fn begin(&self) -> bool {
        let mut n = self.busy.load(Acquire);
        loop {
            if n == EVICTED {
                return false;
            }
            match self.busy.compare_exchange_weak(n, n + 1, AcqRel, Acquire) {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
    }

    /// A request's response was written to its end (or dropped).
    fn end(&self) {
        if let Ok(mut w) = self.waiting_since.lock() {
            *w = crate::clock::tokio_instant();
        }
        self.busy.fetch_sub(1, AcqRel);
    }
}

/// Every open connection of the server, silent or active, and its log throttles.
struct Table {
    limits: Limits,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    /// Silent connections by id (ids grow with accept time, so the first is the oldest).
    silent: BTreeMap<u64, CancellationToken>,
    active: HashMap<u64, Arc<Active>>,
    silent_closed: LogEvery,
    active_closed: LogEvery,
    refused: LogEvery,
}

impl Table {
    /// Registers a new silent connection; closes the one silent longest past the bound.
    fn admit_silent(&self) -> Option<(u64, CancellationToken)> {
        let mut t = self.inner.lock().ok()?;
        let id = t.next_id;
        t.next_id += 1;
        let close = CancellationToken::new();
        if t.silent.len() >= self.limits.silent
            && let Some((_, oldest)) = t.silent.pop_first()
        {
            oldest.cancel();
            if let Some(n) = t.silent_closed.note() {
                tracing::warn!(
                    silent = self.limits.silent,
                    count = n,
                    "HTTP server: too many connections that sent nothing; closing the one silent longest for each new one"
                );
            }
        }
        t.silent.insert(id, close.clone());
        Some((id, close))
    }

    fn leave_silent(&self, id: u64) {
        if let Ok(mut t) = self.inner.lock() {
            t.silent.remove(&id);
        }
    }

    /// A slot for connection `id`, which has sent a byte: a free one, or the one of the
    /// connection that has waited longest for a head, which is closed. `None` when every slot
    /// has a request in flight.
    fn admit_active(&self, id: u64) -> Option<Arc<Active>> {
        let mut t = self.inner.lock().ok()?;
        if t.active.len() >= self.limits.max_connections {
            let oldest = t
                .active
                .iter()
                .filter(|(_, a)| a.busy.load(Acquire) == 0)
                .filter_map(|(k, a)| a.waiting_since.lock().ok().map(|w| (*w, *k)))
                .min();
            // The one chosen gives way only if no request began on it meanwhile.
            let evicted = oldest.and_then(|(_, k)| {
                let a = t.active.get(&k)?;
                a.busy.compare_exchange(0, EVICTED, AcqRel, Acquire).ok()?;
                Some(k)
            });
            let Some(k) = evicted else {
                if let Some(n) = t.refused.note() {
                    tracing::warn!(
                        max_connections = self.limits.max_connections,
                        count = n,
                        "HTTP server: every connection has a request in flight; closing new connections"
                    );
                }
                return None;
            };
            if let Some(a) = t.active.remove(&k) {
                a.close.cancel();
            }
            if let Some(n) = t.active_closed.note() {
                tracing::warn!(
                    max_connections = self.limits.max_connections,
                    count = n,
                    "HTTP server: connection cap reached; closing the connection waiting longest for a request head for each new one"
                );
            }
        }
        let a = Arc::new(Active {
            busy: AtomicU32::new(0),
            waiting_since: Mutex::new(crate::clock::tokio_instant()),
            close: CancellationToken::new(),
        });
        t.active.insert(id, a.clone());
        Some(a)
    }

    fn leave_active(&self, id: u64) {
        if let Ok(mut t) = self.inner.lock() {
            t.active.remove(&id);
        }
    }
}

/// A response body that tells its connection when it has been written to the end (or
/// dropped): until then the connection has a request in flight and never gives way.
pub struct Tracked {
    inner: axum::body::Body,
    /// `None` for the answer to a request that never began.
    conn: Option<Arc<Active>>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(c) = &self.conn {
            c.end();
        }
    }
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The listen backlog asked for (the kernel caps it at `net.core.somaxconn`, 4096 by default
/// since Linux 5.4): room for a burst of connections while the accept loop catches up, so a
/// scrape's SYN is not dropped (and retried a second later) behind a crowd of idle sockets.
const BACKLOG: u32 = 4096;

/// Binds the server's listener (`SO_REUSEADDR`, as `TcpListener::bind` does) with [`BACKLOG`].
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// How often the server may log the same kind of trouble.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Counts events and says when a log line is due: the first one, then at most one per
/// `LOG_EVERY`, with the count since the last line.
#[derive(Default)]
struct LogEvery {
    last: Option<Instant>,
    count: u64,
}

impl LogEvery {
    fn note(&mut self) -> Option<u64> {
        self.count += 1;
        let now = crate::clock::tokio_instant();
        if self.last.is_none_or(|l| now.duration_since(l) >= LOG_EVERY) {
            self.last = Some(now);
            Some(std::mem::take(&mut self.count))
        } else {
            None
        }
    }
}

/// Accepts until the shutdown token and serves each connection on its own task (see the
/// module's doc). An accept error (EMFILE: the fds are used up) pauses the loop for 50 ms
/// rather than spinning on it; the kernel's backlog waits meanwhile. On shutdown silent
/// connections close, and each active one finishes its request in flight and closes (hyper's
/// graceful shutdown); the tracker waits for them.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    limits: Limits,
    shared: Arc<Shared>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let http = Arc::new(http);
    let table = Arc::new(Table {
        limits,
        inner: Mutex::default(),
    });
    let mut accept_errors = LogEvery::default();
    let shutdown = shared.shutdown.clone();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.cancelled() => return,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                if let Some(n) = accept_errors.note() {
                    tracing::warn!(error = %e, count = n, "HTTP server: cannot accept a connection; retrying in 50 ms");
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(50)) => continue,
                    _ = shutdown.cancelled() => return,
                }
            }
        };
        let Some((id, silent)) = table.admit_silent() else {
            continue;
        };
        let (http, app, shutdown, table) =
            (http.clone(), app.clone(), shutdown.clone(), table.clone());
        shared.tracker.spawn(async move {
            // A peek, not `readable()`, which may wake without data (tokio documents false
            // positives, and a fresh socket gets them): only a byte moves a connection on; a
            // connection closed before it sent one just ends here.
            let mut first = [0u8; 1];
            let spoke = tokio::select! {
                r = stream.peek(&mut first) => matches!(r, Ok(n) if n > 0),
                _ = tokio::time::sleep(limits.header_timeout) => false,
                _ = silent.cancelled() => false,
                _ = shutdown.cancelled() => false,
            };
            table.leave_silent(id);
            if !spoke {
                return;
            }
            let Some(conn) = table.admit_active(id) else {
                return;
            };
            let close = conn.close.clone();
            let app = hyper_util::service::TowerToHyperService::new(app);
            let service = hyper::service::service_fn(move |req| {
                let conn = conn.clone();
                let call = {
                    use hyper::service::Service;
                    app.call(req)
                };
                async move {
                    if !conn.begin() {
                        // Chosen to give way just as this head arrived: closed, nothing served.
                        let mut refused = http::Response::new(axum::body::Body::empty());
                        *refused.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
                        refused.headers_mut().insert(
                            http::header::CONNECTION,
                            http::HeaderValue::from_static("close"),
                        );
                        return Ok::<_, std::convert::Infallible>(
                            refused.map(|inner| Tracked { inner, conn: None }),
                        );
                    }
                    let response = call.await?;
                    Ok(response.map(|inner| Tracked {
                        inner,
                        conn: Some(conn),
                    }))
                }
            });
            let served = http.serve_connection(TokioIo::new(stream), service);
            let mut served = std::pin::pin!(served);
            let result = tokio::select! {
                r = served.as_mut() => r,
                _ = close.cancelled() => Ok(()),
                _ = shutdown.cancelled() => {
                    served.as_mut().graceful_shutdown();
                    served.await
                }
            };
            table.leave_active(id);
            if let Err(e) = result {
                tracing::debug!(error = %e, "HTTP connection closed");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(max: usize, silent: usize) -> Table {
        Table {
            limits: Limits {
                header_timeout: Duration::from_secs(10),
                max_connections: max,
                silent,
            },
            inner: Mutex::default(),
        }
    }

    #[test]
    fn limits_keep_to_a_quarter_of_the_descriptors() {
        let l = Limits::new(Duration::from_secs(10), 512, 1 << 20);
        assert_eq!((l.max_connections, l.silent), (512, 8192));
        let l = Limits::new(Duration::from_secs(10), 512, 256);
        assert_eq!((l.max_connections, l.silent), (64, 64));
        let l = Limits::new(Duration::from_secs(10), 512, 4);
        assert_eq!((l.max_connections, l.silent), (8, 8));
    }

    #[test]
    fn the_connection_silent_longest_gives_way() {
        let t = table(4, 2);
        let (a, ca) = t.admit_silent().unwrap();
        let (_, cb) = t.admit_silent().unwrap();
        let (_, cc) = t.admit_silent().unwrap();
        assert!(ca.is_cancelled() && !cb.is_cancelled() && !cc.is_cancelled());
        t.leave_silent(a);
        assert_eq!(t.inner.lock().unwrap().silent.len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_server_closes_the_longest_waiting_idle_connection_never_a_busy_one() {
        let t = table(2, 2);
        let busy = t.admit_active(1).unwrap();
        tokio::time::advance(Duration::from_millis(10)).await;
        let idle = t.admit_active(2).unwrap();
        assert!(busy.begin());
        // Full: the idle one gives way, although the busy one has waited longer.
        let third = t.admit_active(3).unwrap();
        assert!(idle.close.is_cancelled() && !idle.begin());
        assert!(!busy.close.is_cancelled());
        // Both in flight: nothing gives way, the newcomer is refused.
        assert!(third.begin());
        assert!(t.admit_active(4).is_none());
        // A response written to its end makes its connection idle again, and the one waiting
        // longest goes first.
        third.end();
        tokio::time::advance(Duration::from_millis(10)).await;
        busy.end();
        let fifth = t.admit_active(5).unwrap();
        assert!(third.close.is_cancelled() && !busy.close.is_cancelled());
        assert!(!fifth.close.is_cancelled());
    }
}
