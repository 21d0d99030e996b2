//! What the target counts for `/stats`: requests, bytes, connections and the last
//! `TRACEPARENTS_KEPT` `traceparent` headers received.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters served on `/stats`. `/stats` itself is not counted.
#[derive(Debug, Default)]
pub(super) struct Stats {
    pub(super) requests: AtomicU64,
    pub(super) in_flight: AtomicU64,
    pub(super) errors_injected: AtomicU64,
    pub(super) resets: AtomicU64,
    pub(super) connections: AtomicU64,
    pub(super) traceparents_received: AtomicU64,
    /// The last [`TRACEPARENTS_KEPT`] `traceparent` values received, oldest first.
    pub(super) traceparents: std::sync::Mutex<std::collections::VecDeque<String>>,
}

/// How many received `traceparent` values `/stats` lists (the count covers all of them).
pub const TRACEPARENTS_KEPT: usize = 256;

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    /// Responses whose body was fully handed to the connection.
    pub requests: u64,
    /// Requests received and not yet finished (waiting, stalled or streaming their body).
    pub in_flight: u64,
    /// Responses whose status came from `error_ratio`.
    pub errors_injected: u64,
    /// Connections reset instead of answered.
    pub resets: u64,
    /// Connections accepted.
    pub connections: u64,
    /// Requests that carried a `traceparent` header.
    #[serde(default)]
    pub traceparents_received: u64,
}

/// `/stats`: the counters and the last `traceparent` values received (oldest first, at most
/// [`TRACEPARENTS_KEPT`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsBody {
    #[serde(flatten)]
    pub counters: StatsSnapshot,
    #[serde(default)]
    pub traceparents: Vec<String>,
}

impl Stats {
    pub(super) fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            requests: self.requests.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            errors_injected: self.errors_injected.load(Ordering::Relaxed),
            resets: self.resets.load(Ordering::Relaxed),
            connections: self.connections.load(Ordering::Relaxed),
            traceparents_received: self.traceparents_received.load(Ordering::Relaxed),
        }
    }

    pub(super) fn body(&self) -> StatsBody {
        let traceparents = match self.traceparents.lock() {
            Ok(q) => q.iter().cloned().collect(),
            Err(p) => p.into_inner().iter().cloned().collect(),
        };
        StatsBody {
            counters: self.snapshot(),
            traceparents,
        }
    }

    /// Counts the header and keeps its value (bounded); only requests that carry one pay.
    pub(super) fn record_traceparent(&self, value: &http::HeaderValue) {
        self.traceparents_received.fetch_add(1, Ordering::Relaxed);
        let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
        let mut q = match self.traceparents.lock() {
            Ok(q) => q,
            Err(p) => p.into_inner(),
        };
        if q.len() == TRACEPARENTS_KEPT {
            q.pop_front();
        }
        q.push_back(text);
    }
}
