//! Every open connection of one server, silent or active: the silent set's bound, the slots
//! and who gives way for a newcomer, and the throttles of the server's log lines.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The limits of one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Time to send the first byte, then a complete request head (also the keep-alive idle
    /// time between requests). `None`: no timeout (the target: a low-rate keep-alive client
    /// must never race an idle timeout); idle connections then only give way to newcomers.
    pub header_timeout: Option<Duration>,
    /// Connections that have sent something.
    pub max_connections: usize,
    /// Connections that have sent nothing yet.
    pub silent: usize,
    /// The largest request body; a larger one is answered 413. `None`: any size.
    pub max_body: Option<usize>,
    /// Time to write one response, from its first byte to its last handed to the kernel;
    /// past it the connection is closed (a reader that does not read). `None`: no deadline.
    pub write_timeout: Option<Duration>,
    /// hyper's read buffer per connection (the longest request head); `None`: hyper's own
    /// (about 400 KB).
    pub read_buffer: Option<usize>,
}

/// The daemon's write deadline per response.
pub const DAEMON_WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The daemon's read buffer per connection: 64 KiB (a request head's bound too).
pub const DAEMON_READ_BUFFER: usize = 64 << 10;
/// How long a write must wait on the peer (no byte taken) before the connection counts as a
/// stalled reader: it may then give way to a newcomer, and at most [`MAX_STALLED`] of them
/// are kept (the one stalled longest closes for the next).
pub const STALL_GRACE: Duration = Duration::from_secs(1);
/// Stalled readers kept open at once, each holding its unwritten answer.
pub const MAX_STALLED: usize = 16;

/// Axum's default body limit, which the daemon's routes have always had.
pub const DAEMON_MAX_BODY: usize = 2 << 20;

impl Limits {
    /// The daemon's limits for `server.max_connections` and `header_timeout` under the fd
    /// limit `fds`: `max_connections` lowered to a quarter of the descriptors (the rest is for
    /// the load's own connections, the store and the process), silent ones 16 × that, within
    /// a quarter too.
    pub fn new(header_timeout: Duration, configured: u32, fds: u64) -> Limits {
        let fit = usize::try_from(fds / 4).unwrap_or(usize::MAX).max(8);
        let max_connections = (configured as usize).min(fit);
        Limits {
            header_timeout: Some(header_timeout),
            max_connections,
            silent: max_connections.saturating_mul(16).min(fit),
            max_body: Some(DAEMON_MAX_BODY),
            write_timeout: Some(DAEMON_WRITE_TIMEOUT),
            read_buffer: Some(DAEMON_READ_BUFFER),
        }
    }

    /// A server whose process holds nothing else (the target): every descriptor but
    /// `crate::limits::RESERVED_FDS`, three quarters for slots and one for silent connections;
    /// no timeout, no body limit.
    pub fn whole_process(fds: u64) -> Limits {
        let fit = fds.saturating_sub(crate::limits::RESERVED_FDS);
        let fit = usize::try_from(fit).unwrap_or(usize::MAX);
        Limits {
            header_timeout: None,
            max_connections: (fit / 4 * 3).max(8),
            silent: (fit / 4).max(8),
            max_body: None,
            write_timeout: None,
            read_buffer: None,
        }
    }
}

/// `busy` of a connection that was chosen to give way: no request may start on it.
const EVICTED: u32 = u32::MAX;

/// A connection that has sent a byte: the requests in flight on it and since when it has
/// waited for a request head. Lock-free: a request's start and end are atomic operations on
/// the connection's own cache line.
pub(super) struct Active {
    /// Requests in flight (from its head to the end of its response body), or [`EVICTED`].
    busy: AtomicU32,
    /// Since when it has waited for a head, in nanoseconds after the table's epoch; read
    /// only while `busy` is 0.
    waiting_since: AtomicU64,
    /// Since when its response has been written (nanoseconds after the epoch, plus one), or
    /// 0: the connection's task closes it at the write deadline.
    writing_since: AtomicU64,
    /// Wakes the connection's deadline timer when a response begins to be written, so an
    /// idle connection's task sleeps until then instead of checking every second.
    started: tokio::sync::Notify,
    /// Requests of it that wait for capacity (`server::waiting`): it may give way meanwhile.
    queued: AtomicU32,
    epoch: Instant,
    pub(super) close: CancellationToken,
}

impl Active {
    /// A request begins; false when the connection is closing for another.
    pub(super) fn begin(&self) -> bool {
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

    /// A response begins to be written (`true`) or is written whole (`false`).
    pub(super) fn writing(&self, on: bool) {
        let at = if on {
            nanos_since(self.epoch).saturating_add(1)
        } else {
            0
        };
        self.writing_since.store(at, Relaxed);
        if on {
            // Stores a permit when the timer is not waiting yet: a start is never missed.
            self.started.notify_one();
        }
    }

    /// Until a response may have begun to be written (at most one spurious wake per start).
    pub(super) async fn write_may_have_started(&self) {
        self.started.notified().await;
    }

    /// When the response being written began, if one is.
    pub(super) fn write_started(&self) -> Option<Instant> {
        let n = self.writing_since.load(Relaxed);
        (n > 0).then(|| self.epoch + Duration::from_nanos(n - 1))
    }

    /// A request of it begins (`true`) or ends (`false`) to wait for capacity.
    pub(super) fn queue(&self, on: bool) {
        if on {
            self.queued.fetch_add(1, AcqRel);
        } else {
            self.queued.fetch_sub(1, AcqRel);
        }
    }

    /// No request in flight.
    pub(super) fn idle(&self) -> bool {
        self.busy.load(Acquire) == 0
    }

    /// A request's response was written to its end (or dropped).
    pub(super) fn end(&self) {
        self.waiting_since.store(nanos_since(self.epoch), Relaxed);
        self.busy.fetch_sub(1, AcqRel);
    }
}

fn nanos_since(epoch: Instant) -> u64 {
    u64::try_from(crate::clock::elapsed(epoch).as_nanos()).unwrap_or(u64::MAX)
}

/// Every open connection of the server, silent or active, and its log throttles.
pub(super) struct Table {
    pub(super) limits: Limits,
    epoch: Instant,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    /// Silent connections by id (ids grow with accept time, so the first is the oldest).
    silent: BTreeMap<u64, CancellationToken>,
    active: HashMap<u64, Arc<Active>>,
    /// Connections whose write has waited on the peer past [`STALL_GRACE`], by the order they
    /// stalled in (the first stalled longest).
    stalled: BTreeMap<u64, u64>,
    next_stall: u64,
    stalled_closed: LogEvery,
    silent_closed: LogEvery,
    active_closed: LogEvery,
    refused: LogEvery,
}

impl Table {
    pub(super) fn new(limits: Limits) -> Table {
        Table {
            limits,
            epoch: crate::clock::tokio_instant(),
            inner: Mutex::default(),
        }
    }

    /// Registers a new silent connection; closes the one silent longest past the bound.
    pub(super) fn admit_silent(&self) -> Option<(u64, CancellationToken)> {
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

    pub(super) fn leave_silent(&self, id: u64) {
        if let Ok(mut t) = self.inner.lock() {
            t.silent.remove(&id);
        }
    }

    /// A slot for the silent connection `id`, which has sent a byte: a free one, or the one of
    /// the connection that has waited longest for a head, which is closed. `None` when every
    /// slot has a request in flight, or when `id` was closed for a newcomer meanwhile. Its
    /// silent token closes it from now on.
    pub(super) fn promote(&self, id: u64) -> Option<Arc<Active>> {
        let mut t = self.inner.lock().ok()?;
        let close = t.silent.remove(&id)?;
        if t.active.len() >= self.limits.max_connections && !self.make_room(&mut t) {
            return None;
        }
        let a = Arc::new(Active {
            busy: AtomicU32::new(0),
            waiting_since: AtomicU64::new(nanos_since(self.epoch)),
            writing_since: AtomicU64::new(0),
            started: tokio::sync::Notify::new(),
            queued: AtomicU32::new(0),
            epoch: self.epoch,
            close,
        });
        t.active.insert(id, a.clone());
        Some(a)
    }

    /// Closes the connection that has waited longest for a head, else the reader stalled
    /// longest, else the request that has waited longest for capacity; false (logged) when
    /// every one has a request being served.
    fn make_room(&self, t: &mut Inner) -> bool {
        let oldest = t
            .active
            .iter()
            .filter(|(_, a)| a.busy.load(Acquire) == 0)
            .map(|(k, a)| (a.waiting_since.load(Relaxed), *k))
            .min();
        // The one chosen gives way only if no request began on it meanwhile.
        let evicted = oldest.and_then(|(_, k)| {
            let a = t.active.get(&k)?;
            a.busy.compare_exchange(0, EVICTED, AcqRel, Acquire).ok()?;
            Some(k)
        });
        // Else the reader stalled longest: its answer waits on a peer that does not read.
        let stalled = || {
            t.stalled
                .values()
                .find(|id| t.active.contains_key(id))
                .copied()
        };
        // Else the one that has waited longest for capacity (`server::waiting`): its request
        // has nothing yet, and may be asked again.
        let queued = || {
            t.active
                .iter()
                .filter(|(_, a)| a.queued.load(Acquire) > 0)
                .map(|(k, _)| *k)
                .min()
        };
        let Some(k) = evicted.or_else(stalled).or_else(queued) else {
            if let Some(n) = t.refused.note() {
                tracing::warn!(
                    max_connections = self.limits.max_connections,
                    count = n,
                    "HTTP server: every connection has a request in flight; closing new connections"
                );
            }
            return false;
        };
        if let Some(a) = t.active.remove(&k) {
            a.close.cancel();
        }
        t.stalled.retain(|_, id| *id != k);
        if let Some(n) = t.active_closed.note() {
            tracing::warn!(
                max_connections = self.limits.max_connections,
                count = n,
                "HTTP server: connection cap reached; closing the connection waiting longest for a request head for each new one"
            );
        }
        true
    }

    pub(super) fn leave_active(&self, id: u64) {
        if let Ok(mut t) = self.inner.lock() {
            t.active.remove(&id);
        }
    }

    /// The connection `id` has waited on its peer past [`STALL_GRACE`]: it may give way to a
    /// newcomer from now on, and past [`MAX_STALLED`] the one stalled longest is closed.
    /// Returns its key for [`Table::unstall`].
    pub(super) fn stall(&self, id: u64) -> Option<u64> {
        let mut t = self.inner.lock().ok()?;
        let key = t.next_stall;
        t.next_stall += 1;
        t.stalled.insert(key, id);
        while t.stalled.len() > MAX_STALLED {
            let Some((_, oldest)) = t.stalled.pop_first() else {
                break;
            };
            if let Some(a) = t.active.remove(&oldest) {
                a.close.cancel();
            }
            if let Some(n) = t.stalled_closed.note() {
                tracing::warn!(
                    max_stalled = MAX_STALLED,
                    count = n,
                    "HTTP server: too many readers that do not read their answers; closing the one stalled longest for each new one"
                );
            }
        }
        Some(key)
    }

    /// The stalled write `key` went on (or its connection ended).
    pub(super) fn unstall(&self, key: u64) {
        if let Ok(mut t) = self.inner.lock() {
            t.stalled.remove(&key);
        }
    }
}

/// How often the server may log the same kind of trouble.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Counts events and says when a log line is due: the first one, then at most one per
/// `LOG_EVERY`, with the count since the last line.
#[derive(Default)]
pub(super) struct LogEvery {
    last: Option<Instant>,
    count: u64,
}

impl LogEvery {
    pub(super) fn note(&mut self) -> Option<u64> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn table(max: usize, silent: usize) -> Table {
        Table::new(Limits {
            header_timeout: Some(Duration::from_secs(10)),
            max_connections: max,
            silent,
            max_body: None,
            write_timeout: None,
            read_buffer: None,
        })
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
    fn a_whole_process_server_keeps_the_reserve_and_has_no_timeout() {
        let l = Limits::whole_process(1024 + crate::limits::RESERVED_FDS);
        assert_eq!((l.max_connections, l.silent), (768, 256));
        assert_eq!((l.header_timeout, l.max_body), (None, None));
        let l = Limits::whole_process(16);
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

    /// A connection that sent a byte at once.
    fn admit_active(t: &Table) -> Option<Arc<Active>> {
        let (id, _) = t.admit_silent()?;
        t.promote(id)
    }

    #[test]
    fn a_connection_closed_while_silent_gets_no_slot() {
        let t = table(4, 1);
        let (a, ca) = t.admit_silent().unwrap();
        let (b, _) = t.admit_silent().unwrap();
        assert!(ca.is_cancelled());
        assert!(t.promote(a).is_none());
        let active = t.promote(b).unwrap();
        assert!(!active.close.is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_server_closes_the_longest_waiting_idle_connection_never_a_busy_one() {
        let t = table(2, 2);
        let busy = admit_active(&t).unwrap();
        tokio::time::advance(Duration::from_millis(10)).await;
        let idle = admit_active(&t).unwrap();
        assert!(busy.begin());
        // Full: the idle one gives way, although the busy one has waited longer.
        let third = admit_active(&t).unwrap();
        assert!(idle.close.is_cancelled() && !idle.begin());
        assert!(!busy.close.is_cancelled());
        // Both in flight: nothing gives way, the newcomer is refused.
        assert!(third.begin());
        assert!(admit_active(&t).is_none());
        // A response written to its end makes its connection idle again, and the one waiting
        // longest goes first.
        third.end();
        tokio::time::advance(Duration::from_millis(10)).await;
        busy.end();
        let fifth = admit_active(&t).unwrap();
        assert!(third.close.is_cancelled() && !busy.close.is_cancelled());
        assert!(!fifth.close.is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_waiting_for_capacity_gives_way_after_idle_ones_never_one_being_served() {
        let t = table(3, 3);
        let served = admit_active(&t).unwrap();
        let queued = admit_active(&t).unwrap();
        let idle = admit_active(&t).unwrap();
        assert!(served.begin() && queued.begin());
        queued.queue(true);
        // The idle one goes first.
        let fourth = admit_active(&t).unwrap();
        assert!(idle.close.is_cancelled() && !queued.close.is_cancelled());
        assert!(fourth.begin());
        // Then the waiting one; the one being served never.
        let fifth = admit_active(&t).unwrap();
        assert!(queued.close.is_cancelled() && !served.close.is_cancelled());
        assert!(fifth.begin());
        assert!(admit_active(&t).is_none());
        // A wait that ended is a request being served again.
        fifth.queue(true);
        fifth.queue(false);
        assert!(admit_active(&t).is_none());
        assert!(!fifth.close.is_cancelled());
    }
}
