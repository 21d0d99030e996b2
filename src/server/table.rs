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
}

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
            epoch: self.epoch,
            close,
        });
        t.active.insert(id, a.clone());
        Some(a)
    }

    /// Closes the connection that has waited longest for a head; false (logged) when every
    /// one has a request in flight.
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
        let Some(k) = evicted else {
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
}
