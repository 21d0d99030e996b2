//! Reading a response body up to `max_body`: what is kept, what went past the cap and why
//! reading stopped.

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::time::{Instant, timeout_at};

use super::ErrorClass;

/// A response body as read: what was kept, what went past the cap, and why reading stopped.
pub(crate) struct ReadBody {
    pub(crate) body: Bytes,
    pub(crate) discarded: u64,
    /// Body bytes received, kept or not.
    pub(crate) received: u64,
    pub(crate) error: Option<ErrorClass>,
}

/// Reads a body up to `max` bytes, by the request's deadline.
pub(crate) async fn read_body(body: &mut Incoming, deadline: Instant, max: usize) -> ReadBody {
    let mut sink = BodySink::new(max);
    let mut received = 0u64;
    let mut error = None;
    loop {
        match timeout_at(deadline, body.frame()).await {
            Ok(None) => break,
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    received += data.len() as u64;
                    if !sink.push(data) {
                        // A read cap, not only a keep cap: a 200 MB body must not be read to
                        // the end. The rest is unread, so the connection cannot be reused.
                        error = Some(ErrorClass::BodyTooLarge);
                        break;
                    }
                }
            }
            Ok(Some(Err(_))) => {
                // Also an HTTP/2 stream reset after the head: the body broke.
                error = Some(ErrorClass::Body);
                break;
            }
            Err(_) => {
                error = Some(ErrorClass::Timeout);
                break;
            }
        }
    }
    let (body, discarded) = sink.finish();
    ReadBody {
        body,
        discarded,
        received,
        error,
    }
}

/// Keeps the first `max` body bytes without copying a body that arrives in one frame, and says
/// when the body goes past them.
pub(super) struct BodySink {
    pub(super) max: usize,
    pub(super) first: Bytes,
    pub(super) rest: Option<BytesMut>,
    pub(super) discarded: u64,
}

impl BodySink {
    pub(super) fn new(max: usize) -> BodySink {
        BodySink {
            max,
            first: Bytes::new(),
            rest: None,
            discarded: 0,
        }
    }

    pub(super) fn kept(&self) -> usize {
        self.rest.as_ref().map_or(self.first.len(), BytesMut::len)
    }

    /// Keeps what fits; false once the body has gone past `max` (the caller stops reading).
    pub(super) fn push(&mut self, mut data: Bytes) -> bool {
        let room = self.max.saturating_sub(self.kept());
        if data.len() > room {
            self.discarded += (data.len() - room) as u64;
            data.truncate(room);
        }
        let fits = self.discarded == 0;
        if data.is_empty() {
            return fits;
        }
        if self.rest.is_none() && self.first.is_empty() {
            self.first = data;
            return fits;
        }
        let rest = self.rest.get_or_insert_with(|| {
            let mut buf = BytesMut::with_capacity(self.first.len() + data.len());
            buf.extend_from_slice(&self.first);
            buf
        });
        rest.extend_from_slice(&data);
        fits
    }

    pub(super) fn finish(self) -> (Bytes, u64) {
        let body = self.rest.map_or(self.first, BytesMut::freeze);
        (body, self.discarded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_sink_keeps_the_prefix_and_says_when_the_body_is_too_large() {
        let mut sink = BodySink::new(10);
        assert!(sink.push(Bytes::from_static(b"0123")));
        assert!(!sink.push(Bytes::from_static(b"456789abc")));
        assert_eq!(sink.finish(), (Bytes::from_static(b"0123456789"), 3));
        let mut exact = BodySink::new(10);
        assert!(exact.push(Bytes::from_static(b"01234")));
        assert!(exact.push(Bytes::from_static(b"56789")));
        assert!(exact.push(Bytes::new()));
        assert_eq!(exact.finish(), (Bytes::from_static(b"0123456789"), 0));
        let mut one = BodySink::new(10);
        assert!(!one.push(Bytes::from_static(b"0123456789a")));
        assert_eq!(one.finish(), (Bytes::from_static(b"0123456789"), 1));
    }
}
