//! The IO wrapper that timestamps a connection: when the request's last byte was written and
//! when the response's first byte was read, plus byte counts.
//!
//! hyper drives the connection in its own task, so the client cannot see these moments from
//! the outside; the wrapper records them where they happen, in atomics the client reads after
//! the response head arrives. It sits above TLS so that TLS records which carry no HTTP bytes
//! (session tickets, handshake) do not count as the first response byte.
//!
//! A read is timed by when its bytes reached the host, not when sloburn's task ran it: the TCP
//! stream below ([`super::rx::RxTcp`]) reports each read's kernel receive stamp, and a read
//! above it takes the latest one (TLS plaintext can come from no earlier a TCP read).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// Shared between a connection's IO and the `Conn` that sends on it. Times are stored as
/// nanoseconds since `base` plus one, so zero means "not yet".
#[derive(Debug)]
pub(crate) struct IoStats {
    base: Instant,
    written: AtomicU64,
    read: AtomicU64,
    last_write: AtomicU64,
    first_read: AtomicU64,
    /// When the bytes of the latest read with data arrived.
    last_read: AtomicU64,
    /// When the bytes of the transport's latest read arrived (kernel stamp), zero while the
    /// transport reports none.
    rx: AtomicU64,
    /// When the transport last handed bytes to the kernel for this request, zero while it has
    /// not (TLS may still hold them).
    tx: AtomicU64,
    /// Set by a write, cleared by the flush that pushes it out (TLS buffers writes).
    unflushed: AtomicBool,
    /// Kernel transmit stamps ([`super::tx`]), where the transport has them: bytes handed to
    /// the stamped socket so far, that count when the request was armed (its first byte's id),
    /// its bytes' first and latest stamps, and the latest stamped byte's id plus one.
    tx_sent: AtomicU64,
    tx_from: AtomicU64,
    tx_first: AtomicU64,
    tx_last: AtomicU64,
    tx_upto: AtomicU64,
}

impl IoStats {
    pub(crate) fn new() -> Arc<IoStats> {
        Arc::new(IoStats {
            base: crate::clock::tokio_instant(),
            written: AtomicU64::new(0),
            read: AtomicU64::new(0),
            last_write: AtomicU64::new(0),
            first_read: AtomicU64::new(0),
            last_read: AtomicU64::new(0),
            rx: AtomicU64::new(0),
            tx: AtomicU64::new(0),
            unflushed: AtomicBool::new(false),
            tx_sent: AtomicU64::new(0),
            tx_from: AtomicU64::new(0),
            tx_first: AtomicU64::new(0),
            tx_last: AtomicU64::new(0),
            tx_upto: AtomicU64::new(0),
        })
    }

    /// Starts a new request: forgets the previous request's moments.
    pub(crate) fn arm(&self) {
        self.last_write.store(0, Ordering::Release);
        self.first_read.store(0, Ordering::Release);
        self.last_read.store(0, Ordering::Release);
        self.tx.store(0, Ordering::Release);
        self.tx_first.store(0, Ordering::Release);
        self.tx_last.store(0, Ordering::Release);
        self.tx_upto.store(0, Ordering::Release);
        self.tx_from
            .store(self.tx_sent.load(Ordering::Acquire), Ordering::Release);
    }

    pub(crate) fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    pub(crate) fn read(&self) -> u64 {
        self.read.load(Ordering::Acquire)
    }

    /// When the request's last bytes went out: the transport's write when it reports one (the
    /// moment they reached the kernel, whatever hyper did next), else the wrapper's own.
    pub(crate) fn last_write(&self) -> Option<Instant> {
        self.decode(self.tx.load(Ordering::Acquire))
            .or_else(|| self.decode(self.last_write.load(Ordering::Acquire)))
    }

    pub(crate) fn first_read(&self) -> Option<Instant> {
        self.decode(self.first_read.load(Ordering::Acquire))
    }

    /// When the bytes of the latest read arrived: a response that ended with that read ended
    /// then, however late sloburn's task got to it.
    pub(crate) fn last_read(&self) -> Option<Instant> {
        self.decode(self.last_read.load(Ordering::Acquire))
    }

    /// When the transport's latest read's bytes arrived, if it reports any. For HTTP/2, whose
    /// streams share the reads: a response delivered now arrived no later than this.
    pub(crate) fn latest_rx(&self) -> Option<Instant> {
        self.decode(self.rx.load(Ordering::Acquire))
    }

    /// The transport read bytes that reached the host `at`.
    pub(crate) fn on_rx(&self, at: Instant) {
        self.rx.store(self.encode(at), Ordering::Release);
    }

    /// The transport handed bytes to the kernel `at`.
    pub(crate) fn on_tx(&self, at: Instant) {
        self.tx.store(self.encode(at), Ordering::Release);
    }

    /// The stamped transport handed `n` more bytes to the kernel.
    pub(crate) fn on_tx_sent(&self, n: usize) {
        self.tx_sent.fetch_add(n as u64, Ordering::AcqRel);
    }

    /// The kernel stamped the write whose last byte has id `id` (the socket's byte count from
    /// zero, modulo 2^32) at `at`. A stamp of an earlier request's bytes is ignored.
    pub(crate) fn on_tx_stamp(&self, id: u32, at: Instant) {
        let from = self.tx_from.load(Ordering::Acquire) as u32;
        if id.wrapping_sub(from) >= 1 << 31 {
            return;
        }
        let at = self.encode(at);
        let _ = self
            .tx_first
            .compare_exchange(0, at, Ordering::AcqRel, Ordering::Acquire);
        self.tx_last.fetch_max(at, Ordering::AcqRel);
        self.tx_upto.store(u64::from(id) + 1, Ordering::Release);
    }

    /// When the kernel took the request's first and its last bytes, once every byte it wrote
    /// is stamped; `None` while any is not (or the transport stamps nothing).
    pub(crate) fn tx_span(&self) -> Option<(Instant, Instant)> {
        let sent = self.tx_sent.load(Ordering::Acquire);
        let from = self.tx_from.load(Ordering::Acquire);
        let upto = self.tx_upto.load(Ordering::Acquire);
        if sent <= from || upto == 0 || (upto - 1) as u32 != sent.wrapping_sub(1) as u32 {
            return None;
        }
        let first = self.decode(self.tx_first.load(Ordering::Acquire))?;
        let last = self.decode(self.tx_last.load(Ordering::Acquire))?;
        Some((first, last.max(first)))
    }

    fn encode(&self, at: Instant) -> u64 {
        let nanos = at.saturating_duration_since(self.base).as_nanos();
        u64::try_from(nanos)
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1)
    }

    fn stamp(&self) -> u64 {
        let nanos =
            u64::try_from(crate::clock::elapsed(self.base).as_nanos()).unwrap_or(u64::MAX - 1);
        nanos.saturating_add(1)
    }

    fn decode(&self, v: u64) -> Option<Instant> {
        (v != 0).then(|| self.base + Duration::from_nanos(v - 1))
    }

    fn on_write(&self, n: usize) {
        if n > 0 {
            self.written.fetch_add(n as u64, Ordering::AcqRel);
            self.last_write.store(self.stamp(), Ordering::Release);
            self.unflushed.store(true, Ordering::Release);
        }
    }

    fn on_flush(&self) {
        if self.unflushed.swap(false, Ordering::AcqRel) {
            self.last_write.store(self.stamp(), Ordering::Release);
        }
    }

    fn on_read(&self, n: usize) {
        if n > 0 {
            self.read.fetch_add(n as u64, Ordering::AcqRel);
            // The transport's stamp when it gives one: it is never later than now.
            let at = match self.rx.load(Ordering::Acquire) {
                0 => self.stamp(),
                rx => rx,
            };
            self.last_read.store(at, Ordering::Release);
            if self.first_read.load(Ordering::Acquire) == 0 {
                let _ =
                    self.first_read
                        .compare_exchange(0, at, Ordering::AcqRel, Ordering::Acquire);
            }
        }
    }
}

/// Wraps a byte stream and reports to [`IoStats`].
pub(crate) struct TimingIo<S> {
    inner: S,
    stats: Arc<IoStats>,
}

impl<S> TimingIo<S> {
    pub(crate) fn new(inner: S, stats: Arc<IoStats>) -> TimingIo<S> {
        TimingIo { inner, stats }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for TimingIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = res {
            self.stats
                .on_read(buf.filled().len().saturating_sub(before));
        }
        res
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for TimingIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = res {
            self.stats.on_write(n);
        }
        res
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = res {
            self.stats.on_write(n);
        }
        res
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let res = Pin::new(&mut self.inner).poll_flush(cx);
        if let Poll::Ready(Ok(())) = res {
            self.stats.on_flush();
        }
        res
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn records_bytes_last_write_and_first_read() {
        let (client, mut server) = tokio::io::duplex(64);
        let stats = IoStats::new();
        let mut io = TimingIo::new(client, stats.clone());
        stats.arm();
        assert!(stats.last_write().is_none() && stats.first_read().is_none());
        io.write_all(b"hello").await.unwrap();
        io.flush().await.unwrap();
        let wrote_at = stats.last_write().unwrap();
        let mut buf = [0u8; 5];
        server.read_exact(&mut buf).await.unwrap();
        server.write_all(b"hi").await.unwrap();
        let mut got = [0u8; 2];
        io.read_exact(&mut got).await.unwrap();
        let first = stats.first_read().unwrap();
        assert!(first >= wrote_at);
        server.write_all(b"!").await.unwrap();
        io.read_exact(&mut got[..1]).await.unwrap();
        assert_eq!(
            stats.first_read(),
            Some(first),
            "only the first read counts"
        );
        assert_eq!((stats.written(), stats.read()), (5, 3));
        stats.arm();
        assert!(stats.first_read().is_none());
    }
}
