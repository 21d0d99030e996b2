//! `/metrics`: the exposition encoded on a blocking thread and streamed, with at most
//! [`MAX_ENCODINGS`] encodings at once. A scrape waits up to [`ENCODING_WAIT`] for one (its
//! connection may give way to a newcomer meanwhile, `server::waiting`), else it is answered
//! 503 with `Retry-After`. So a crowd of scrapes that never read (issue 44 item 5) takes two
//! threads' CPU and a few chunks each, not the cores and the exposition times the crowd.
//!
//! Bounds: an encoding holds its chunk being written, the two queued for the reader
//! ([`QUEUED_CHUNKS`] of [`crate::metrics::CHUNK`]) and what hyper writes; a reader that takes
//! no chunk for [`SCRAPE_STALL`] gives the encoding (and its permit) back, and the answer ends
//! in an error, never short and whole. The server's write deadline closes the connection.

use crate::metrics::Metrics;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use super::*;

/// Encodings of the exposition at once (each on a blocking thread).
pub const MAX_ENCODINGS: usize = 2;
/// How long a scrape waits for an encoding before it is answered 503.
pub const ENCODING_WAIT: Duration = Duration::from_secs(5);
/// How long a scrape's reader may leave a chunk untaken before the encoding gives up.
pub const SCRAPE_STALL: Duration = Duration::from_secs(2);
/// Chunks queued between the encoding and the scrape's reader.
const QUEUED_CHUNKS: usize = 2;
/// How long a scrape may take to read its exposition: past it, the encoding stops (the
/// server's write deadline closes the connection before).
const SCRAPE_WRITE_LIMIT: Duration = Duration::from_secs(120);

/// The daemon's encodings of `/metrics`: the permits and the scrapes refused for want of one.
pub(super) struct Scrapes {
    permits: Arc<Semaphore>,
    refused: AtomicU64,
    /// When a refusal was last logged (seconds since the Unix epoch).
    logged: AtomicU64,
}

impl Scrapes {
    pub(super) fn new() -> Scrapes {
        Scrapes {
            permits: Arc::new(Semaphore::new(MAX_ENCODINGS)),
            refused: AtomicU64::new(0),
            logged: AtomicU64::new(0),
        }
    }

    /// An encoding, within [`ENCODING_WAIT`]; `None` (logged at most every 10 s) when none
    /// came free.
    async fn permit(&self) -> Option<OwnedSemaphorePermit> {
        let wait = tokio::time::timeout(ENCODING_WAIT, self.permits.clone().acquire_owned());
        if let Ok(Ok(permit)) = crate::server::waiting(wait).await {
            return Some(permit);
        }
        let n = self.refused.fetch_add(1, Relaxed) + 1;
        let now = crate::clock::unix_secs() as u64;
        let last = self.logged.load(Relaxed);
        if now >= last + 10
            && self
                .logged
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
        {
            tracing::warn!(
                refused = n,
                max_encodings = MAX_ENCODINGS,
                "/metrics: every encoding busy for {} s; scrape answered 503 (refused since start: {n})",
                ENCODING_WAIT.as_secs()
            );
        }
        None
    }
}

/// The exposition in the format the scrape accepts, encoded on a blocking thread in chunks
/// ([`crate::metrics::CHUNK`]) that go out while the rest is written: a scrape of 1,000
/// profiles holds a few chunks, not 21 MB, and no runtime worker (where the runs' requests
/// are timed) stalls for the tens of milliseconds the encoding takes.
pub(super) async fn metrics(
    State(shared): State<AppState>,
    axum::Extension(scrapes): axum::Extension<Arc<Scrapes>>,
    caller: Caller,
) -> Response {
    let format = Metrics::negotiate(
        caller
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok()),
    );
    let Some(permit) = scrapes.permit().await else {
        return busy();
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(QUEUED_CHUNKS);
    let metrics = shared.metrics.clone();
    let runtime = tokio::runtime::Handle::current();
    let cut = Arc::new(AtomicBool::new(false));
    let cut_by_encoder = cut.clone();
    shared.tracker.spawn_blocking(move || {
        let _permit = permit;
        let deadline = crate::clock::tokio_instant() + SCRAPE_WRITE_LIMIT;
        let sink = move |chunk: Vec<u8>| {
            let by = deadline.min(crate::clock::tokio_instant() + SCRAPE_STALL);
            let sent = runtime.block_on(tokio::time::timeout_at(by, tx.send(Bytes::from(chunk))));
            let ok = matches!(sent, Ok(Ok(())));
            if !ok {
                cut_by_encoder.store(true, Relaxed);
            }
            ok
        };
        metrics.encode_format_streamed(format, Box::new(sink));
    });
    // The end: an error when the encoding gave up, so the answer is never taken as whole.
    let end = futures_util::stream::once(async move {
        cut.load(Relaxed)
            .then(|| Err(std::io::Error::other("the scrape's reader stalled")))
    })
    .filter_map(|end| end);
    let body = Body::from_stream(ReceiverStream::new(rx).map(Ok).chain(end));
    let content_type = Metrics::format_content_type(format);
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// 503 with `Retry-After`, and the connection closed: every encoding was busy.
fn busy() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [
            (header::RETRY_AFTER, ENCODING_WAIT.as_secs().to_string()),
            // Its slot is free at once, not held by an idle keep-alive.
            (header::CONNECTION, "close".to_string()),
        ],
        "every encoding of /metrics is busy; retry later\n",
    )
        .into_response()
}
