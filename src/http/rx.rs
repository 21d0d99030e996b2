//! The client's TCP stream, which reads with the kernel's receive timestamp.
//!
//! A response's bytes reach the host at one moment and sloburn's task reads them at a later
//! one: when a stalled target releases its backlog at once, hundreds of connections become
//! readable together and the last task to be polled reads its answer tens of milliseconds after
//! it arrived. Timed at the read, that delay (sloburn's own, and worse in a debug build or under
//! a CPU stall) would count against the target. With `SO_TIMESTAMPNS` the kernel stamps every
//! received segment and `recvmsg` hands back the stamp of the last segment it read; [`RxTcp`]
//! reports that moment to the connection's [`IoStats`], which times the response by it.
//!
//! The stamp is wall-clock time (the kernel has no monotonic receive stamp); it is turned into
//! an [`Instant`] by its age at the read, bounded to [`MAX_AGE`] so a stepped clock can never
//! move a reading by more than that, and never later than the read itself. Where the kernel
//! gives no stamp (another OS, a socket option refused) the read's own moment is reported.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::timing::IoStats;

/// The oldest a kernel stamp may be at its read. Bytes can wait in the socket this long while
/// sloburn is stalled; a stamp older than this says the wall clock stepped, and is not used.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(60);

/// The most a single read asks for: the size of each runtime thread's scratch buffer.
const MAX_READ: usize = 64 * 1024;

thread_local! {
    /// Where `recvmsg` writes before the bytes are copied into the caller's buffer. The safe
    /// API takes initialised memory and hyper hands over uninitialised space; zeroing up to
    /// 64 KiB of it for every read cost 7 % of the requests a core sends at saturation, copying
    /// the bytes actually read costs nothing measurable.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; MAX_READ]);
}

/// A client TCP stream that reports each read's arrival time, and each write's moment, to
/// `stats`. A write is timed as it enters the kernel: on loopback the send call itself carries
/// the segment into the server's socket, and a quick server's answer can arrive before the
/// call returns; the request was sent when it was handed over, the rest is the network's.
pub(crate) struct RxTcp {
    inner: TcpStream,
    stats: Arc<IoStats>,
    /// Whether the kernel stamps this socket's reads.
    stamped: bool,
    /// Whether it stamps its writes ([`super::tx`]): the stamps are drained after each write
    /// and before each read.
    tx: bool,
}

impl RxTcp {
    /// A stream with receive stamps; with `tx`, transmit stamps too (where a request's bytes
    /// are the socket's own: plain HTTP/1.1).
    pub(crate) fn with_tx(inner: TcpStream, stats: Arc<IoStats>, tx: bool) -> RxTcp {
        let stamped = enable(&inner);
        let tx = tx && super::tx::enable(&inner);
        RxTcp {
            inner,
            stats,
            stamped,
            tx,
        }
    }

    #[cfg(test)]
    pub(crate) fn stamped(&self) -> bool {
        self.stamped
    }

    #[cfg(test)]
    pub(crate) fn tx_stamped(&self) -> bool {
        self.tx
    }

    /// After `n` bytes went to the kernel: counts them and reads the stamps queued so far.
    fn sent(&self, n: usize) {
        if self.tx {
            self.stats.on_tx_sent(n);
            self.drain_tx();
        }
    }

    /// Reads the transmit stamps queued so far into the connection's stats.
    fn drain_tx(&self) {
        super::tx::drain(&self.inner, |id, wall| {
            let now = crate::clock::tokio_instant();
            let at = stamp_instant(wall, crate::clock::since_epoch(), now);
            self.stats.on_tx_stamp(id, at);
        });
    }
}

#[cfg(target_os = "linux")]
fn enable(s: &TcpStream) -> bool {
    nix::sys::socket::setsockopt(s, nix::sys::socket::sockopt::ReceiveTimestampns, &true).is_ok()
}

#[cfg(not(target_os = "linux"))]
fn enable(_: &TcpStream) -> bool {
    false
}

/// Reads into `dst` with `recvmsg`, returning the count and the kernel's stamp of the last
/// segment read, as wall-clock time since the epoch.
#[cfg(target_os = "linux")]
fn recv_stamped(s: &TcpStream, dst: &mut [u8]) -> io::Result<(usize, Option<Duration>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::io::IoSliceMut;
    use std::os::fd::AsRawFd;

    /// Room for one `SCM_TIMESTAMPNS` message (32 bytes on 64-bit Linux) and the
    /// `SCM_TIMESTAMPING` (64) a socket with transmit stamps also gets, aligned as `cmsghdr`:
    /// on the stack, where `cmsg_space!` would allocate for every read. Were it too small, the
    /// kernel would truncate, `cmsgs()` would refuse, and the read be timed as it ran (the
    /// unit tests here and in `tx.rs` would fail).
    #[repr(C, align(8))]
    struct Control([u8; 128]);
    let mut cmsg = Control([0; 128]);
    let mut iov = [IoSliceMut::new(dst)];
    let msg = recvmsg::<()>(
        s.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg.0),
        MsgFlags::MSG_DONTWAIT,
    )
    .map_err(io::Error::from)?;
    let mut at = None;
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            if let ControlMessageOwned::ScmTimestampns(ts) = c {
                let (sec, nsec) = (ts.tv_sec(), ts.tv_nsec());
                if let (Ok(sec), Ok(nsec)) = (u64::try_from(sec), u32::try_from(nsec)) {
                    at = Some(Duration::new(sec, nsec));
                }
            }
        }
    }
    Ok((msg.bytes, at))
}

#[cfg(not(target_os = "linux"))]
fn recv_stamped(_: &TcpStream, _: &mut [u8]) -> io::Result<(usize, Option<Duration>)> {
    Err(io::ErrorKind::Unsupported.into())
}

/// The [`Instant`] a wall-clock stamp stands for, given the wall clock and the monotonic clock
/// read together now: `now` less the stamp's age, the age bounded to `0..=MAX_AGE` (a stamp
/// past that says the wall clock stepped; then the read's own moment is used).
pub(crate) fn stamp_instant(stamp: Duration, wall_now: Duration, now: Instant) -> Instant {
    match wall_now.checked_sub(stamp) {
        Some(age) if age <= MAX_AGE => now.checked_sub(age).unwrap_or(now),
        _ => now,
    }
}

impl AsyncRead for RxTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.tx {
            // The request's stamps are queued before its answer can arrive.
            this.drain_tx();
        }
        if !this.stamped {
            let before = buf.filled().len();
            ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
            if buf.filled().len() > before {
                this.stats.on_rx(crate::clock::tokio_instant());
            }
            return Poll::Ready(Ok(()));
        }
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            ready!(this.inner.poll_read_ready(cx))?;
            let want = buf.remaining().min(MAX_READ);
            let inner = &this.inner;
            let read = SCRATCH.with_borrow_mut(|scratch| {
                let dst = &mut scratch[..want];
                let got = inner.try_io(tokio::io::Interest::READABLE, || recv_stamped(inner, dst));
                if let Ok((n, _)) = got {
                    buf.put_slice(&dst[..n]);
                }
                got
            });
            match read {
                Ok((n, stamp)) => {
                    if n > 0 {
                        let now = crate::clock::tokio_instant();
                        let at = stamp
                            .map_or(now, |s| stamp_instant(s, crate::clock::since_epoch(), now));
                        this.stats.on_rx(at);
                    }
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for RxTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let handed = crate::clock::tokio_instant();
        let n = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        if n > 0 {
            this.stats.on_tx(handed);
            this.sent(n);
        }
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let handed = crate::clock::tokio_instant();
        let n = ready!(Pin::new(&mut this.inner).poll_write_vectored(cx, bufs))?;
        if n > 0 {
            this.stats.on_tx(handed);
            this.sent(n);
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn a_stamp_is_placed_by_its_age_and_never_after_the_read() {
        let now = crate::clock::tokio_instant();
        let wall = Duration::from_secs(1_800_000_000);
        let ms = Duration::from_millis;
        assert_eq!(stamp_instant(wall - ms(40), wall, now), now - ms(40));
        // A stamp from the future (the wall clock stepped back) is the read's own moment.
        assert_eq!(stamp_instant(wall + ms(5), wall, now), now);
        // As is one older than any socket holds bytes (the wall clock stepped forward).
        assert_eq!(stamp_instant(wall - MAX_AGE - ms(1), wall, now), now);
        assert_eq!(stamp_instant(wall - MAX_AGE, wall, now), now - MAX_AGE);
    }

    /// Bytes that wait in the socket while the reader is busy are timed when they arrived,
    /// not when they were read.
    #[tokio::test]
    async fn a_read_reports_when_its_bytes_arrived_not_when_it_ran() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (mut server, _) = accepted.unwrap();
        let stats = IoStats::new();
        let mut rx = RxTcp::with_tx(client.unwrap(), stats.clone(), false);
        assert!(rx.stamped(), "Linux stamps TCP reads");
        // The first socket to ask turns the kernel's stamping on from a work queue: wait until
        // a byte that waited in the socket comes back stamped (bounded).
        let mut one = [0u8; 1];
        for _ in 0..100 {
            server.write_all(b".").await.unwrap();
            std::thread::sleep(Duration::from_millis(20));
            rx.read_exact(&mut one).await.unwrap();
            let at = stats.latest_rx().unwrap();
            if crate::clock::tokio_instant() - at >= Duration::from_millis(15) {
                break;
            }
        }
        server.write_all(b"hello").await.unwrap();
        let sent = crate::clock::tokio_instant();
        // The reader is late: the bytes sat in the socket for this long.
        std::thread::sleep(Duration::from_millis(150));
        let mut got = [0u8; 5];
        rx.read_exact(&mut got).await.unwrap();
        let read_at = crate::clock::tokio_instant();
        let arrived = stats.latest_rx().expect("the read was reported");
        assert_eq!(&got, b"hello");
        assert!(
            arrived <= sent + Duration::from_millis(50),
            "arrival reported {:?} after the write, read {:?} after it",
            arrived.saturating_duration_since(sent),
            read_at - sent
        );
        assert!(read_at - arrived >= Duration::from_millis(100));
        // Writes pass through.
        rx.write_all(b"ok").await.unwrap();
        let mut back = [0u8; 2];
        server.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"ok");
    }

    /// A request's bytes are timed where the kernel took them: a writer stalled between its
    /// start and its write is not charged for the stall, and every byte is covered.
    #[tokio::test]
    async fn a_write_is_timed_where_the_kernel_took_it() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (mut server, _) = accepted.unwrap();
        let stats = IoStats::new();
        let mut tcp = RxTcp::with_tx(client.unwrap(), stats.clone(), true);
        assert!(tcp.tx_stamped(), "Linux stamps TCP writes");
        for round in 0..3u32 {
            stats.arm();
            let t0 = crate::clock::tokio_instant();
            // The writer's own stall before its write.
            std::thread::sleep(Duration::from_millis(30));
            tcp.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
            let wrote = crate::clock::tokio_instant();
            let mut got = [0u8; 18];
            server.read_exact(&mut got).await.unwrap();
            server.write_all(b"x").await.unwrap();
            let mut one = [0u8; 1];
            tcp.read_exact(&mut one).await.unwrap();
            let (first, last) = stats
                .tx_span()
                .unwrap_or_else(|| panic!("round {round}: every byte stamped"));
            assert!(first >= t0 + Duration::from_millis(25), "round {round}");
            assert!(first <= last && last <= wrote, "round {round}");
        }
        // Nothing stamped for a request that wrote nothing yet.
        stats.arm();
        assert!(stats.tx_span().is_none());
    }
}
