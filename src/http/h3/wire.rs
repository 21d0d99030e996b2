//! A QUIC connection's UDP socket, watched: quinn's own socket (`quinn-udp`) under a wrapper
//! that notes when the first datagram came back (the end of the handshake's first round trip),
//! and when the latest did (a response delivered now arrived no later).
//!
//! One socket per connection (as one TCP socket per HTTP/1.1 or HTTP/2 connection), so what
//! it sees is that connection's alone. The wrapper keeps two atomics: no buffer of its own.

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use tokio::time::Instant;

/// What a connection's socket saw. Times are nanoseconds since `base` plus one (zero: not yet).
#[derive(Debug)]
pub(crate) struct Wire {
    base: Instant,
    first_rx: AtomicU64,
    last_rx: AtomicU64,
}

impl Wire {
    pub(crate) fn new() -> Arc<Wire> {
        Arc::new(Wire {
            base: crate::clock::tokio_instant(),
            first_rx: AtomicU64::new(0),
            last_rx: AtomicU64::new(0),
        })
    }

    /// When the first datagram from the server arrived: `None` while none has.
    pub(crate) fn first_rx(&self) -> Option<Instant> {
        self.decode(self.first_rx.load(Ordering::Acquire))
    }

    /// When the latest datagram arrived.
    pub(crate) fn last_rx(&self) -> Option<Instant> {
        self.decode(self.last_rx.load(Ordering::Acquire))
    }

    fn decode(&self, v: u64) -> Option<Instant> {
        (v != 0).then(|| self.base + Duration::from_nanos(v - 1))
    }

    fn on_rx(&self) {
        let at = u64::try_from(crate::clock::elapsed(self.base).as_nanos())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1);
        self.last_rx.store(at, Ordering::Release);
        let _ = self
            .first_rx
            .compare_exchange(0, at, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// quinn's socket for one connection, reporting to its [`Wire`].
pub(crate) struct Watched {
    inner: Arc<dyn AsyncUdpSocket>,
    wire: Arc<Wire>,
}

impl Watched {
    pub(crate) fn new(inner: Arc<dyn AsyncUdpSocket>, wire: Arc<Wire>) -> Arc<Watched> {
        Arc::new(Watched { inner, wire })
    }
}

impl fmt::Debug for Watched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watched").field("wire", &self.wire).finish()
    }
}

impl AsyncUdpSocket for Watched {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        self.inner.try_send(transmit)
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let res = self.inner.poll_recv(cx, bufs, meta);
        if let Poll::Ready(Ok(n)) = res
            && n > 0
        {
            self.wire.on_rx();
        }
        res
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}
