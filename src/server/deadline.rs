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
            None => active.write_may_have_started().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::table::{Limits, Table};
    use super::*;
    use std::future::Future;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    /// A future that counts how often its task polls it.
    struct Polls<F> {
        inner: Pin<Box<F>>,
        n: Arc<AtomicUsize>,
    }

    impl<F: Future> Future for Polls<F> {
        type Output = F::Output;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            self.n.fetch_add(1, Relaxed);
            self.inner.as_mut().poll(cx)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_connections_deadline_timer_sleeps_until_a_response_begins() {
        let timeout = Duration::from_secs(10);
        let table = Table::new(Limits {
            header_timeout: None,
            max_connections: 4,
            silent: 4,
            max_body: None,
            write_timeout: Some(timeout),
            read_buffer: None,
        });
        let (id, _) = table.admit_silent().unwrap();
        let active = table.promote(id).unwrap();
        let polls = Arc::new(AtomicUsize::new(0));
        let a = active.clone();
        let timer = tokio::spawn(Polls {
            inner: Box::pin(async move { expired(&a, Some(timeout)).await }),
            n: polls.clone(),
        });
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert_eq!(polls.load(Relaxed), 1, "an idle connection's timer woke");
        assert!(!timer.is_finished());

        active.writing(true);
        tokio::time::sleep(timeout / 2).await;
        assert!(!timer.is_finished(), "ended before the deadline");
        tokio::time::sleep(timeout).await;
        assert!(
            timer.is_finished(),
            "the response's deadline did not end it"
        );

        // A response written whole before its deadline never ends the timer.
        let a = active.clone();
        let timer = tokio::spawn(async move { expired(&a, Some(timeout)).await });
        active.writing(false);
        active.writing(true);
        active.writing(false);
        tokio::time::sleep(timeout * 3).await;
        assert!(!timer.is_finished());
    }
}
