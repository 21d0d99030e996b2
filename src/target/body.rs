//! Response bodies of the target, generated from static buffers so that even a 1 GiB body
//! costs no allocation: JSON of an exact requested length, optionally trickled at a byte rate
//! and frozen during stalls. Also the in-flight guard that completes a request's accounting
//! when hyper drops the body.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use super::Shared;
use super::faults::Stall;

const UP: &[u8] = br#"{"status":"up"}"#;
const ERROR: &[u8] = br#"{"status":"error"}"#;
const UP_PAD: &[u8] = br#"{"status":"up","pad":""#;
const ERROR_PAD: &[u8] = br#"{"status":"error","pad":""#;
const PAD_TAIL: &[u8] = br#""}"#;

/// Largest frame handed to hyper; bigger bodies are split into frames of this size.
const FRAME: usize = 64 * 1024;
/// One frame of `x`, made at first use (a static array would be 64 KiB of the binary).
fn xs() -> &'static [u8] {
    static XS: std::sync::OnceLock<Box<[u8]>> = std::sync::OnceLock::new();
    XS.get_or_init(|| vec![b'x'; FRAME].into_boxed_slice())
}
static SPACES: [u8; 64] = [b' '; 64];

/// A body of the form `head + fill + tail`, every part static.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    head: &'static [u8],
    fill: &'static [u8],
    fill_len: u64,
    tail: &'static [u8],
}

impl Layout {
    /// The body for a response, `size` bytes exactly when given. It stays valid JSON for every
    /// size >= 1: `0`, then `{}` padded with spaces, then the status object padded with spaces,
    /// then `{"status":"up","pad":"xxx…"}` once the size allows it.
    pub(crate) fn new(size: Option<u64>, error: bool) -> Self {
        let (plain, pad_head) = if error {
            (ERROR, ERROR_PAD)
        } else {
            (UP, UP_PAD)
        };
        let Some(n) = size else {
            return Self::fixed(plain);
        };
        let len = |s: &[u8]| s.len() as u64;
        if n >= len(pad_head) + len(PAD_TAIL) {
            Self {
                head: pad_head,
                fill: xs(),
                fill_len: n - len(pad_head) - len(PAD_TAIL),
                tail: PAD_TAIL,
            }
        } else if n >= len(plain) {
            Self::spaced(plain, n - len(plain))
        } else if n >= 2 {
            Self::spaced(b"{}", n - 2)
        } else if n == 1 {
            Self::fixed(b"0")
        } else {
            Self::fixed(b"")
        }
    }

    fn fixed(head: &'static [u8]) -> Self {
        Self {
            head,
            fill: xs(),
            fill_len: 0,
            tail: b"",
        }
    }

    fn spaced(head: &'static [u8], spaces: u64) -> Self {
        Self {
            head,
            fill: &SPACES,
            fill_len: spaces,
            tail: b"",
        }
    }

    pub(crate) fn len(&self) -> u64 {
        self.head.len() as u64 + self.fill_len + self.tail.len() as u64
    }

    /// Up to `max` bytes starting at `pos`, never crossing a part boundary.
    fn chunk(&self, pos: u64, max: usize) -> Bytes {
        let head = self.head.len() as u64;
        let take = |part: &'static [u8], offset: u64| {
            let start = usize::try_from(offset)
                .unwrap_or(part.len())
                .min(part.len());
            let end = start.saturating_add(max).min(part.len());
            Bytes::from_static(&part[start..end])
        };
        if pos < head {
            take(self.head, pos)
        } else if pos < head + self.fill_len {
            let left = self.fill_len - (pos - head);
            let n = usize::try_from(left).unwrap_or(usize::MAX).min(max);
            Bytes::from_static(&self.fill[..n.min(self.fill.len())])
        } else {
            take(self.tail, pos - head - self.fill_len)
        }
    }
}

/// Decrements `in_flight` when dropped; counts the request as completed only if the body was
/// fully produced (a client that hangs up mid-body did not get a completed request).
pub(crate) struct InFlight {
    shared: Arc<Shared>,
    completed: bool,
}

impl InFlight {
    pub(crate) fn start(shared: Arc<Shared>) -> Self {
        shared.stats.in_flight.fetch_add(1, Ordering::Relaxed);
        Self {
            shared,
            completed: false,
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let stats = &self.shared.stats;
        if self.completed {
            stats.requests.fetch_add(1, Ordering::Relaxed);
        }
        stats.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Pacing and stall state, present only when the body must wait for something.
struct Timing {
    /// When the first byte was allowed out; byte `p` is released at `start + p / rate`.
    start: Instant,
    bytes_per_sec: Option<u64>,
    stall: Option<(Stall, Instant)>,
    timer: Option<Pin<Box<Sleep>>>,
}

pub struct TargetBody {
    layout: Layout,
    pos: u64,
    once: Option<Bytes>,
    timing: Option<Timing>,
    in_flight: Option<InFlight>,
}

impl TargetBody {
    /// A small owned body (`/stats`, 400 messages); not counted as a request.
    pub(crate) fn once(bytes: Bytes) -> Self {
        Self {
            layout: Layout::fixed(b""),
            pos: 0,
            once: Some(bytes),
            timing: None,
            in_flight: None,
        }
    }

    pub(crate) fn generated(
        layout: Layout,
        bytes_per_sec: Option<u64>,
        stall: Option<(Stall, Instant)>,
        in_flight: InFlight,
    ) -> Self {
        let bytes_per_sec = bytes_per_sec.filter(|&r| r > 0);
        let timing = (bytes_per_sec.is_some() || stall.is_some()).then(|| Timing {
            start: crate::clock::tokio_instant(),
            bytes_per_sec,
            stall,
            timer: None,
        });
        let mut body = Self {
            layout,
            pos: 0,
            once: None,
            timing,
            in_flight: Some(in_flight),
        };
        body.mark_if_done();
        body
    }

    fn mark_if_done(&mut self) {
        if self.pos >= self.layout.len()
            && let Some(guard) = &mut self.in_flight
        {
            guard.completed = true;
        }
    }

    /// When the next chunk of `n` bytes may go out, if that is later than `now`.
    fn hold_until(&self, timing: &Timing, n: usize, now: Instant) -> Option<Instant> {
        if let Some((stall, started)) = timing.stall
            && let Some(left) = stall.remaining(now.saturating_duration_since(started))
        {
            return Some(later(now, left));
        }
        let rate = timing.bytes_per_sec?;
        let offset = Duration::try_from_secs_f64((self.pos + n as u64) as f64 / rate as f64)
            .unwrap_or(Duration::MAX);
        let release = later(timing.start, offset);
        (release > now).then_some(release)
    }
}

/// `base + by`, saturating at a year out: absurd flag values must not overflow `Instant`.
fn later(base: Instant, by: Duration) -> Instant {
    const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
    base.checked_add(by.min(YEAR)).unwrap_or(base)
}

impl Body for TargetBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Some(bytes) = this.once.take() {
            return Poll::Ready(Some(Ok(Frame::data(bytes))));
        }
        let len = this.layout.len();
        if this.pos >= len {
            return Poll::Ready(None);
        }
        let left = usize::try_from(len - this.pos).unwrap_or(usize::MAX);
        let max = match this.timing.as_ref().and_then(|t| t.bytes_per_sec) {
            // About 50 chunks a second: smooth enough, few wakeups.
            Some(rate) => usize::try_from(rate / 50).unwrap_or(FRAME).clamp(1, FRAME),
            None => FRAME,
        }
        .min(left);
        if let Some(mut timing) = this.timing.take() {
            loop {
                if let Some(timer) = &mut timing.timer
                    && timer.as_mut().poll(cx).is_pending()
                {
                    this.timing = Some(timing);
                    return Poll::Pending;
                }
                // A stall may have begun while we waited for the rate, so check again.
                match this.hold_until(&timing, max, crate::clock::tokio_instant()) {
                    None => break,
                    Some(deadline) => match &mut timing.timer {
                        Some(timer) => timer.as_mut().reset(deadline),
                        None => timing.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
                    },
                }
            }
            this.timing = Some(timing);
        }
        let chunk = this.layout.chunk(this.pos, max);
        this.pos += chunk.len() as u64;
        this.mark_if_done();
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.once.is_none() && self.pos >= self.layout.len()
    }

    fn size_hint(&self) -> SizeHint {
        match &self.once {
            Some(bytes) => SizeHint::with_exact(bytes.len() as u64),
            None => SizeHint::with_exact(self.layout.len().saturating_sub(self.pos)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(layout: Layout) -> Vec<u8> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < layout.len() {
            let chunk = layout.chunk(pos, 1000);
            assert!(!chunk.is_empty(), "no progress at {pos}");
            pos += chunk.len() as u64;
            out.extend_from_slice(&chunk);
        }
        out
    }

    #[test]
    fn every_size_is_exact_and_valid_json() {
        let sizes = (0..40).chain([1000, 65_536, 65_537, 200_000]);
        for error in [false, true] {
            for n in sizes.clone() {
                let body = render(Layout::new(Some(n), error));
                assert_eq!(body.len() as u64, n, "size {n}");
                if n > 0 {
                    let parsed: Result<serde_json::Value, _> = serde_json::from_slice(&body);
                    assert!(
                        parsed.is_ok(),
                        "size {n}: {:?}",
                        String::from_utf8_lossy(&body)
                    );
                }
            }
        }
        assert_eq!(render(Layout::new(None, false)), UP);
        assert_eq!(render(Layout::new(None, true)), ERROR);
        let padded = render(Layout::new(Some(100), false));
        let v: serde_json::Value = serde_json::from_slice(&padded).unwrap();
        assert_eq!(v["status"], "up");
    }
}
