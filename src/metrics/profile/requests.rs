//! The request table: one atomic counter per (status, error class) pair, in fixed slots,
//! and the label values it writes.

use crate::http::ErrorClass;
use once_cell::race::OnceBox;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// Slots of the (status, error) table; a power of two. 512 covers every pair a real target
/// produces many times over; past that, pairs share `status="other"` (see [`STATUS_OTHER`]).
pub(super) const REQ_SLOTS: usize = 512;

/// The `status` label of requests counted after the (status, error) table filled up.
pub const STATUS_OTHER: &str = "other";

/// The `status` label of a request that got no response head.
pub const STATUS_NONE: &str = "0";

/// The `error` label of a request without a transport error.
pub const ERROR_NONE: &str = "none";

/// Slots per lazily made chunk of the table.
const CHUNK: usize = 16;

/// A fixed-size, insert-only, lock-free hash table from a (status, error) pair to a counter.
///
/// Keys are claimed with one compare-exchange and never removed (a config reload replaces the
/// whole [`ProfileMetrics`]), so a reader sees a key either absent or final. The slots are
/// made 16 at a time where keys land: a target that answers with a few pairs holds a few
/// chunks of 192 bytes, not the 6 KB of all 512 slots (a daemon holds a table per step).
#[derive(Debug)]
pub(super) struct ReqTable {
    chunks: [OnceBox<Chunk>; REQ_SLOTS / CHUNK],
    /// Indexed by error code (0 = none, 1 + ErrorClass index) when the table is full.
    pub(super) overflow: [AtomicU64; 1 + ErrorClass::ALL.len()],
}

#[derive(Debug)]
struct Chunk {
    keys: [AtomicU32; CHUNK],
    counts: [AtomicU64; CHUNK],
}

// The error code (1 + its index) fits the key's four low bits.
const _: () = assert!(ErrorClass::ALL.len() < 16);

/// `(status + 1) << 4 | error code`: never 0, which marks an empty slot.
pub(super) fn req_key(status: Option<u16>, error: Option<ErrorClass>) -> u32 {
    let status = status.map_or(0, u32::from);
    ((status + 1) << 4) | error_code(error)
}

pub(super) fn error_code(error: Option<ErrorClass>) -> u32 {
    error.map_or(0, |e| 1 + e as u32)
}

pub(super) fn error_label(code: u32) -> &'static str {
    match code.checked_sub(1) {
        None => ERROR_NONE,
        Some(i) => ErrorClass::ALL
            .get(i as usize)
            .map_or(ERROR_NONE, |e| e.as_str()),
    }
}

impl ReqTable {
    pub(super) fn new() -> ReqTable {
        ReqTable {
            chunks: std::array::from_fn(|_| OnceBox::new()),
            overflow: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    pub(super) fn add(&self, status: Option<u16>, error: Option<ErrorClass>) {
        let key = req_key(status, error);
        // Fibonacci hashing: consecutive status codes land far apart.
        let start = (key.wrapping_mul(0x9E37_79B1) >> (32 - REQ_SLOTS.trailing_zeros())) as usize;
        for probe in 0..REQ_SLOTS {
            let i = (start + probe) & (REQ_SLOTS - 1);
            let Some(chunk) = self.chunks.get(i / CHUNK) else {
                break;
            };
            let chunk = chunk.get_or_init(|| {
                Box::new(Chunk {
                    keys: std::array::from_fn(|_| AtomicU32::new(0)),
                    counts: std::array::from_fn(|_| AtomicU64::new(0)),
                })
            });
            let (k, c) = (&chunk.keys[i % CHUNK], &chunk.counts[i % CHUNK]);
            let mut seen = k.load(Relaxed);
            if seen == 0 {
                // Acquire/Release is not needed: the count is read independently of the key,
                // and a key read before its first increment shows a 0 counter, which is true.
                seen = match k.compare_exchange(0, key, Relaxed, Relaxed) {
                    Ok(_) => key,
                    Err(actual) => actual,
                };
            }
            if seen == key {
                c.fetch_add(1, Relaxed);
                return;
            }
        }
        if let Some(o) = self.overflow.get(error_code(error) as usize) {
            o.fetch_add(1, Relaxed);
        }
    }

    /// (status label, error label, count), sorted by labels.
    pub(super) fn read(&self) -> Vec<(String, &'static str, u64)> {
        let slots = self
            .chunks
            .iter()
            .filter_map(OnceBox::get)
            .flat_map(|c| c.keys.iter().zip(c.counts.iter()));
        let mut rows: Vec<(String, &'static str, u64)> = slots
            .filter_map(|(k, c)| {
                let key = k.load(Relaxed);
                (key != 0).then(|| {
                    let status = (key >> 4) - 1;
                    (status.to_string(), error_label(key & 15), c.load(Relaxed))
                })
            })
            .collect();
        for (code, o) in self.overflow.iter().enumerate() {
            let n = o.load(Relaxed);
            if n > 0 {
                rows.push((STATUS_OTHER.into(), error_label(code as u32), n));
            }
        }
        rows.sort_unstable();
        rows
    }
}
