//! A connection's socket as the server writes to it: each response has a write deadline
//! (`Limits::write_timeout`, from its first byte written to its last handed to the kernel),
//! and a write that waits on the peer past `STALL_GRACE` marks the connection a stalled
//! reader in the table (it may then give way to a newcomer; `MAX_STALLED` of them at most).
//!
//! The deadline is armed by the first write of a response and disarmed once everything
//! written is flushed with no request in flight, or when a new request's bytes arrive on a
//! connection with none. Past it a write fails (`TimedOut`) and hyper closes the connection,
//! dropping the unwritten answer.

use super::table::{Active, STALL_GRACE, Table};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

pub(super) struct Guarded<Io> {
    io: Io,
    id: u64,
    active: Arc<Active>,
    table: Arc<Table>,
    timeout: Duration,
    /// The response's write deadline, while armed.
    deadline: Option<Pin<Box<Sleep>>>,
    /// Since a write began to wait on the peer: when it becomes a stall.
    waiting: Option<Pin<Box<Sleep>>>,
    /// Its key in the table's stalled set, once stalled.
    stalled: Option<u64>,
}

impl<Io> Guarded<Io> {
    pub(super) fn new(
        io: Io,
        id: u64,
        active: Arc<Active>,
        table: Arc<Table>,
        timeout: Duration,
    ) -> Self {
        Guarded {
            io,
            id,
            active,
            table,
            timeout,
            deadline: None,
            waiting: None,
            stalled: None,
        }
    }

    fn progressed(&mut self) {
        self.waiting = None;
        if let Some(key) = self.stalled.take() {
            self.table.unstall(key);
        }
    }

    /// A write waits on the peer: the deadline and the stall timer wake the task; `Err` once
    /// the deadline has passed.
    fn waits(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if let Some(d) = &mut self.deadline
            && d.as_mut().poll(cx).is_ready()
        {
            return Err(passed());
        }
        if self.stalled.is_none() {
            let waiting = self
                .waiting
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(STALL_GRACE)));
            if waiting.as_mut().poll(cx).is_ready() {
                self.stalled = self.table.stall(self.id);
            }
        }
        Ok(())
    }
}

impl<Io: AsyncWrite + Unpin> Guarded<Io> {
    /// One write through `f`, under the response's deadline (armed by its first write) and
    /// the stall timer.
    fn write(
        &mut self,
        cx: &mut Context<'_>,
        f: impl FnOnce(Pin<&mut Io>, &mut Context<'_>) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        let timeout = self.timeout;
        let active = &self.active;
        let deadline = self.deadline.get_or_insert_with(|| {
            active.writing(true);
            Box::pin(tokio::time::sleep(timeout))
        });
        if deadline.is_elapsed() {
            return Poll::Ready(Err(passed()));
        }
        match f(Pin::new(&mut self.io), cx) {
            Poll::Pending => match self.waits(cx) {
                Ok(()) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e)),
            },
            done => {
                self.progressed();
                done
            }
        }
    }
}

fn passed() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the response's write deadline passed",
    )
}

impl<Io> Drop for Guarded<Io> {
    fn drop(&mut self) {
        if let Some(key) = self.stalled.take() {
            self.table.unstall(key);
        }
    }
}

impl<Io: AsyncRead + Unpin> AsyncRead for Guarded<Io> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before && self.active.idle() {
            // A new request on a connection with none in flight: its answer has its own
            // deadline.
            self.deadline = None;
            self.active.writing(false);
        }
        r
    }
}

impl<Io: AsyncWrite + Unpin> AsyncWrite for Guarded<Io> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.write(cx, |io, cx| io.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.write(cx, |io, cx| io.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_flush(cx);
        if matches!(r, Poll::Ready(Ok(()))) && self.active.idle() {
            // Everything written and no request in flight: the response is done.
            self.deadline = None;
            self.active.writing(false);
        }
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The connection's write deadline, as a timer of its task (a response whose body waits
/// makes no write that would notice it): ends once the response being written has taken
/// `timeout`; never without one.
pub(super) async fn expired(active: &Active, timeout: Option<Duration>) {
    let Some(timeout) = timeout else {
        return std::future::pending().await;
    };
    loop {
        match active.write_started() {
            Some(since) if crate::clock::elapsed(since) >= timeout => return,
            Some(since) => tokio::time::sleep_until(since + timeout).await,
            None => tokio::time::sleep(timeout.min(Duration::from_secs(1))).await,
        }
    }
}
