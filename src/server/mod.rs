//! The one HTTP server of sloburn: the daemon's API, `run --collect`'s collector and
//! `sloburn target` all serve on it. HTTP/1.1 on hyper, built so that a client that sends its
//! request gets in, however many idle or slow sockets are open.
//!
//! - A connection is *silent* from its accept until its first byte arrives. It waits in a
//!   small task of its own (no hyper connection, no buffer) for at most `header_timeout`.
//!   Silent connections have a bound of their own (`Limits::silent`); past it the one silent
//!   longest is closed for the newcomer.
//! - A connection that has sent a byte goes to hyper and takes one of `max_connections`
//!   slots. When every slot is taken, the connection that has waited longest for a request
//!   head (a head half-sent, or kept alive between requests) is closed for it. One with a
//!   request in flight never is (its response is written to the end).
//! - A request body past `max_body` is answered 413 (by its `Content-Length` at once, else
//!   when the read passes the limit).
//! - A response has `write_timeout` from its first byte written to its last (`deadline`):
//!   past it the connection closes. A write that waits on its peer for [`STALL_GRACE`] makes
//!   the connection a stalled reader, which gives way to a newcomer after idle ones; at most
//!   [`MAX_STALLED`] are kept. hyper's read buffer is `read_buffer` per connection.
//! - A request that waits for its handler's capacity ([`waiting`]) gives way last.
//!
//! So a scrape or a probe, which sends its request as soon as it connects, is accepted at once
//! and served, while idle sockets take turns in the silent set and half-sent heads give way.
//! The accept loop never waits on anything but the listener, so the kernel's accept queue does
//! not fill behind idle sockets. Every connection is a task of the caller's `TaskTracker`, and
//! the caller's token stops them all: silent ones close, active ones finish the request in
//! flight (hyper's graceful shutdown).
//!
//! What is served is a [`Handler`]: an axum `Router` (the daemon, the collector), or a
//! handler of its own that wraps the socket and builds a hyper service per connection (the
//! target). A request costs the server two atomic operations on its connection: no lock, no
//! allocation.

mod conn;
mod deadline;
mod table;
mod tokens;
mod waiting;

pub use conn::{BoxError, Connection, Handler, RequestBody};
pub use table::{
    DAEMON_MAX_BODY, DAEMON_READ_BUFFER, DAEMON_WRITE_TIMEOUT, Limits, MAX_STALLED, STALL_GRACE,
};
pub use tokens::{MAX_SOURCES, PER_SOURCE_PER_SECOND, Source, WrongTokens, token_matches};
pub use waiting::waiting;

use conn::Server;
use hyper_util::rt::TokioTimer;
use std::sync::Arc;
use std::time::Duration;
use table::{LogEvery, Table};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The listen backlog asked for (the kernel caps it at `net.core.somaxconn`, 4096 by default
/// since Linux 5.4): room for a burst of connections while the accept loop catches up, so a
/// scrape's SYN is not dropped (and retried a second later) behind a crowd of idle sockets.
const BACKLOG: u32 = 4096;

/// Binds a server's listener (`SO_REUSEADDR`, as `TcpListener::bind` does) with [`BACKLOG`].
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// How long the accept loop pauses after an accept error.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// Accepts until `shutdown` and serves each connection on its own task of `tracker` (see the
/// module's doc). An accept error (EMFILE: the fds are used up) pauses the loop for 50 ms
/// rather than spinning on it; the kernel's backlog waits meanwhile. On shutdown silent
/// connections close, and each active one finishes its request in flight and closes; the
/// tracker waits for them.
pub async fn serve<H: Handler>(
    listener: TcpListener,
    handler: H,
    limits: Limits,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    if let Some(n) = limits.read_buffer {
        http.max_buf_size(n);
    }
    let server = Server {
        handler: Arc::new(handler),
        http: Arc::new(http),
        table: Arc::new(Table::new(limits)),
        shutdown,
    };
    let mut accept_errors = LogEvery::default();
    while let Some(stream) = accept(&listener, &server.shutdown, &mut accept_errors).await {
        server.handler.accepted();
        let Some((id, silent)) = server.table.admit_silent() else {
            continue;
        };
        tracker.spawn(server.clone().serve(stream, id, silent));
    }
}

/// The next accepted connection; `None` once `shutdown` is cancelled.
async fn accept(
    listener: &TcpListener,
    shutdown: &CancellationToken,
    errors: &mut LogEvery,
) -> Option<tokio::net::TcpStream> {
    loop {
        let accepted = tokio::select! {
            biased;
            _ = shutdown.cancelled() => return None,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((stream, _)) => return Some(stream),
            Err(e) => {
                if let Some(n) = errors.note() {
                    tracing::warn!(error = %e, count = n, "HTTP server: cannot accept a connection; retrying in 50 ms");
                }
                tokio::select! {
                    _ = tokio::time::sleep(ACCEPT_PAUSE) => {}
                    _ = shutdown.cancelled() => return None,
                }
            }
        }
    }
}
