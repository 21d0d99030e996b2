//! [`Histogram`]: the recording side, written by many tasks at once without a lock.
//!
//! Memory: a fixed 72 bytes, then what values need. The exponential counters are allocated
//! where values fall, in three levels of one-pointer slots ([`OnceBox`]): a table of the 42
//! powers of two (336 bytes) at the first value above 0 ns, a table of 8 blocks (64 bytes) per
//! power of two at its first value, and blocks of 16 counters (72 bytes: 32-bit counters that
//! carry into 64 bits past 2^31, [`Block`]) at theirs. A 0 ns value (a phase that did not
//! happen) allocates nothing. Latencies cluster, so a series holds about a kilobyte, never more
//! than 27 KB (and 128 bytes per block one of whose counters passed 2^31). Classic counters, when the histogram has bounds,
//! are one counter per bound and one for `+Inf`, made with the histogram.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use once_cell::race::OnceBox;

use super::block::{BLOCK, Block};
use super::bounds::Bounds;
use super::layout::{OCTAVES, PER_OCTAVE, RECORD_SCHEMA, slot_of};
use super::snapshot::{ClassicCounts, HistSnapshot};
use super::views::NativeRead;

/// Blocks per power of two.
const BLOCKS: usize = PER_OCTAVE / BLOCK;
type Octave = [OnceBox<Block>; BLOCKS];
type Octaves = [OnceBox<Octave>; OCTAVES];
// `Histogram::made` has a bit per power of two.
const _: () = assert!(OCTAVES <= 64);
// A block is a run of keys a coarse bucket holds whole (`native_into`).
const _: () = assert!(BLOCK.is_power_of_two() && PER_OCTAVE.is_multiple_of(BLOCK));

#[cfg(test)]
thread_local! {
    /// `record` calls on this thread: how a test counts the recordings a request makes.
    static RECORDS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// `record` calls made on this thread so far (test builds only).
#[cfg(test)]
pub fn records_on_this_thread() -> u64 {
    RECORDS.with(std::cell::Cell::get)
}

/// A histogram many tasks record into concurrently: exponential buckets, exact count, sum,
/// min and max, and classic counts when built [`Histogram::with_bounds`].
#[derive(Debug)]
pub struct Histogram {
    octaves: OnceBox<Octaves>,
    /// Bit `o` set once power of two `o` is allocated: a read visits those alone.
    made: AtomicU64,
    zero: AtomicU64,
    sum_ns: AtomicU64,
    min_ns: AtomicU64,
    max_ns: AtomicU64,
    classic: Option<Classic>,
}

#[derive(Debug)]
struct Classic {
    bounds: Arc<Bounds>,
    /// Per bound, then `+Inf`; not cumulative.
    counts: Box<[AtomicU64]>,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

fn nanos(v: Duration) -> u64 {
    u64::try_from(v.as_nanos()).unwrap_or(u64::MAX)
}

impl Histogram {
    /// A histogram without classic bounds.
    pub fn new() -> Histogram {
        Histogram {
            octaves: OnceBox::new(),
            made: AtomicU64::new(0),
            zero: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
            min_ns: AtomicU64::new(u64::MAX),
            max_ns: AtomicU64::new(0),
            classic: None,
        }
    }

    /// A histogram that also counts each value under the first of `bounds` at or above it.
    pub fn with_bounds(bounds: Arc<Bounds>) -> Histogram {
        let counts = (0..=bounds.nanos.len())
            .map(|_| AtomicU64::new(0))
            .collect();
        Histogram {
            classic: Some(Classic { bounds, counts }),
            ..Histogram::new()
        }
    }

    /// The classic bounds this histogram counts under, if any.
    pub fn bounds(&self) -> Option<&Arc<Bounds>> {
        self.classic.as_ref().map(|c| &c.bounds)
    }

    /// Record one value. Relaxed ordering suffices: each counter is independent and readers
    /// only need eventual totals, not a consistent cut (see [`Histogram::snapshot`]).
    pub fn record(&self, v: Duration) {
        #[cfg(test)]
        RECORDS.with(|n| n.set(n.get() + 1));
        let ns = nanos(v);
        let slot = slot_of(ns);
        if slot == 0 {
            self.zero.fetch_add(1, Relaxed);
        } else {
            let (block, i) = self.block_of(slot - 1);
            block.add(i);
        }
        if let Some(c) = &self.classic
            && let Some(n) = c.counts.get(c.bounds.index(ns))
        {
            n.fetch_add(1, Relaxed);
        }
        // No count of its own: the count is the buckets' total (one atomic fewer per value).
        // The sum wraps only after 584 years of cumulative latency.
        self.sum_ns.fetch_add(ns, Relaxed);
        // `fetch_min`/`fetch_max` are compare-and-swap loops on x86: a load first keeps the
        // common case (neither a new minimum nor a new maximum) to a read of a shared line.
        if ns < self.min_ns.load(Relaxed) {
            self.min_ns.fetch_min(ns, Relaxed);
        }
        if ns > self.max_ns.load(Relaxed) {
            self.max_ns.fetch_max(ns, Relaxed);
        }
    }

    /// The block of key index `i` (slot − 1), made if it is the first, and `i`'s place in it.
    fn block_of(&self, i: usize) -> (&Block, usize) {
        let octaves = self
            .octaves
            .get_or_init(|| Box::new(std::array::from_fn(|_| OnceBox::new())));
        let o = i / PER_OCTAVE;
        let blocks = octaves[o].get_or_init(|| {
            self.made.fetch_or(1 << o, Relaxed);
            Box::new(std::array::from_fn(|_| OnceBox::new()))
        });
        let block = blocks[i % PER_OCTAVE / BLOCK].get_or_init(|| Box::new(Block::new()));
        (block, i % BLOCK)
    }

    /// Values recorded so far: the total of the buckets (a read, not a hot-path figure).
    pub fn count(&self) -> u64 {
        let mut total = 0u64;
        self.each_slot(|_, n| total = total.wrapping_add(n));
        total
    }

    /// The sum of the values in seconds.
    pub fn sum_seconds(&self) -> f64 {
        self.sum_ns.load(Relaxed) as f64 / 1e9
    }

    /// Bytes allocated beyond the struct: the tables and blocks values made, and the classic
    /// counters.
    pub fn allocated_bytes(&self) -> usize {
        let classic = self.classic.as_ref().map_or(0, |c| c.counts.len() * 8);
        let Some(octaves) = self.octaves.get() else {
            return classic;
        };
        let made = octaves.iter().filter_map(OnceBox::get).map(|blocks| {
            let held = blocks.iter().filter_map(OnceBox::get).map(Block::bytes);
            size_of::<Octave>() + held.sum::<usize>()
        });
        classic + size_of::<Octaves>() + made.sum::<usize>()
    }

    /// Calls `f(slot, count)` for every non-empty slot, ascending, reading only the blocks made
    /// (the zero bucket first).
    fn each_slot(&self, mut f: impl FnMut(usize, u64)) {
        let zero = self.zero.load(Relaxed);
        if zero > 0 {
            f(0, zero);
        }
        self.each_block(|first, counters| {
            for (i, &n) in counters.iter().enumerate() {
                if n > 0 {
                    f(first + i, n);
                }
            }
        });
    }

    /// Calls `f(first slot, counts)` for every block made, ascending.
    fn each_block(&self, mut f: impl FnMut(usize, &[u64; BLOCK])) {
        let Some(octaves) = self.octaves.get() else {
            return;
        };
        // The bit is set inside the table's initialisation: a power of two whose bit is seen
        // is there (one made concurrently is read at the next read, like any later value).
        let mut made = self.made.load(Relaxed);
        while made != 0 {
            let o = made.trailing_zeros() as usize;
            made &= made - 1;
            let Some(blocks) = octaves.get(o).and_then(OnceBox::get) else {
                continue;
            };
            for (b, block) in blocks.iter().enumerate() {
                if let Some(counters) = block.get() {
                    f(1 + o * PER_OCTAVE + b * BLOCK, &counters.read());
                }
            }
        }
    }

    /// A plain copy to compute statistics from. Taken while tasks record, the copy is not an
    /// atomic cut: its `count` is the sum of the copied buckets (so quantiles are consistent),
    /// while `sum`/`min`/`max` and the classic counts may include a few values recorded during
    /// the copy.
    pub fn snapshot(&self) -> HistSnapshot {
        let mut buckets = Vec::new();
        self.each_slot(|slot, n| buckets.push((slot as u32, n)));
        let classic = self.classic.as_ref().map(|c| ClassicCounts {
            bounds_ns: c.bounds.nanos.clone(),
            counts: c.counts.iter().map(|n| n.load(Relaxed)).collect(),
        });
        HistSnapshot::from_parts(
            buckets,
            self.sum_ns.load(Relaxed),
            self.min_ns.load(Relaxed),
            self.max_ns.load(Relaxed),
            classic,
        )
    }

    /// Begins an interval: returns the snapshot so far (the interval's base for
    /// [`Histogram::since`]) and starts min and max anew. Counts, sum and classic counts are
    /// untouched, so a reader of the cumulative figures (a scrape) sees nothing change; the
    /// extremes become the interval's, so only one interval at a time may be open (the daemon:
    /// one run per profile).
    pub fn restart(&self) -> HistSnapshot {
        let base = self.snapshot();
        self.min_ns.store(u64::MAX, Relaxed);
        self.max_ns.store(0, Relaxed);
        base
    }

    /// What was recorded since `base` (what [`Histogram::restart`] returned): exact counts,
    /// sum, min and max of the interval, without classic counts.
    pub fn since(&self, base: &HistSnapshot) -> HistSnapshot {
        let (min, max) = (self.min_ns.load(Relaxed), self.max_ns.load(Relaxed));
        self.snapshot().interval(base, min, max)
    }

    /// The cumulative classic counts (one per bound, then `+Inf`) into `cumulative`, replacing
    /// what it held (a scrape reuses one buffer); empty without bounds.
    pub fn classic_into(&self, cumulative: &mut Vec<u64>) {
        cumulative.clear();
        let Some(c) = &self.classic else {
            return;
        };
        let mut total = 0u64;
        cumulative.extend(c.counts.iter().map(|n| {
            total = total.wrapping_add(n.load(Relaxed));
            total
        }));
    }

    /// The native buckets at `schema` (clamped to the readable range) into `out`, its buffer
    /// reused: the exact merge of the recorded buckets, read in place.
    pub fn native_into(&self, schema: i32, out: &mut NativeRead) {
        out.begin(schema);
        if out.schema > RECORD_SCHEMA - BLOCK.trailing_zeros() as i32 {
            self.each_slot(|slot, n| out.add_slot(slot, n));
            return;
        }
        // A block's 16 keys lie in one bucket at this schema (blocks start at multiples of 16
        // keys): its counters are summed and the bucket found once.
        let zero = self.zero.load(Relaxed);
        if zero > 0 {
            out.add_slot(0, zero);
        }
        self.each_block(|first, counters| {
            let n = counters.iter().fold(0u64, |t, c| t.wrapping_add(*c));
            if n > 0 {
                out.add_slot(first, n);
            }
        });
    }
}
