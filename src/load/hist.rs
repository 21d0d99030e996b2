//! The hot-path latency histogram: fixed memory, lock-free recording, k6-style quantiles and
//! Prometheus cumulative buckets.
//!
//! Layout (HDR-style log-linear, in nanoseconds): values below 256 ns each get their own bucket;
//! above that, every power of two is split into 128 equal sub-buckets, so a bucket is at most
//! 1/128 (0.78%) of its lower bound wide and its midpoint is within 0.39% of any value in it.
//! Values from 2^37 ns (≈137.4 s) up share one overflow bucket; `min`/`max`/`sum` stay exact.
//!
//! Memory is bounded at [`BUCKETS`] × 8 = 31,744 bytes of counters plus 32 bytes of
//! count/sum/min/max per [`Histogram`], whatever the run length or request rate. The counters
//! are allocated where values fall, in three levels of one-pointer slots ([`OnceBox`]): the
//! table of chunks at the first value, a chunk per power of two (a table of [`BLOCKS`]
//! pointers), and in it blocks of [`BLOCK`] counters (128 bytes), each made when a value first
//! falls in it. A run's latencies cluster, so a histogram holds a few hundred bytes, not 31 KB:
//! a run has a dozen histograms, and 1,000 profiles starting on the same minute held 400 MB of
//! zeros with dense counters, and 37 MB with one-level chunks of 1 KiB (heaptrack,
//! `bench/scale.py`). A histogram that never records (a sub-metric nothing matched) holds
//! nothing.

use once_cell::race::OnceBox;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const LINEAR: u64 = 256;
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
/// First exponent whose values do not fit the layout; they go to the overflow bucket.
const MAX_EXP: u32 = 37;
/// Number of counters: 256 exact + 128 per power of two from 2^8 to 2^36.
pub const BUCKETS: usize = (LINEAR + (MAX_EXP as u64 - 8) * SUB) as usize;
/// Counters per chunk: one power of two's sub-buckets (the linear part is two).
pub const CHUNK: usize = SUB as usize;
const CHUNKS: usize = BUCKETS.div_ceil(CHUNK);
/// Counters per lazily allocated block.
pub const BLOCK: usize = 16;
/// Blocks per chunk.
pub const BLOCKS: usize = CHUNK / BLOCK;

type Block = [AtomicU64; BLOCK];
/// One power of two's blocks, each made when a value first falls in it.
type Chunk = [OnceBox<Block>; BLOCKS];
/// The table of chunks, made at the first value.
type Chunks = [OnceBox<Chunk>; CHUNKS];

fn index_of(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros();
    if exp >= MAX_EXP {
        return BUCKETS - 1;
    }
    let shift = exp - SUB_BITS;
    let sub = (v >> shift) - SUB;
    (LINEAR + u64::from(exp - 8) * SUB + sub) as usize
}

/// Inclusive value range of a bucket, in nanoseconds. The overflow bucket reaches `u64::MAX`.
fn bounds_of(idx: usize) -> (u64, u64) {
    let idx = idx as u64;
    if idx < LINEAR {
        return (idx, idx);
    }
    let j = idx - LINEAR;
    let exp = 8 + j / SUB;
    let sub = SUB + j % SUB;
    let shift = exp - u64::from(SUB_BITS);
    let lo = sub << shift;
    if idx as usize == BUCKETS - 1 {
        return (lo, u64::MAX);
    }
    (lo, ((sub + 1) << shift) - 1)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A latency histogram many VU tasks record into concurrently without a lock.
#[derive(Debug)]
pub struct Histogram {
    /// `CHUNKS` chunks of `BLOCKS` blocks; each exists once a value fell in it.
    chunks: OnceBox<Chunks>,
    count: AtomicU64,
    sum_ns: AtomicU64,
    min_ns: AtomicU64,
    max_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            chunks: OnceBox::new(),
            count: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
            min_ns: AtomicU64::new(u64::MAX),
            max_ns: AtomicU64::new(0),
        }
    }

    /// Record one value. Relaxed ordering suffices: each counter is independent and readers
    /// only need eventual totals, not a consistent cut (see [`Histogram::snapshot`]).
    pub fn record(&self, v: Duration) {
        let ns = nanos(v);
        let idx = index_of(ns);
        let chunks = self
            .chunks
            .get_or_init(|| Box::new(std::array::from_fn(|_| OnceBox::new())));
        if let Some(chunk) = chunks.get(idx / CHUNK) {
            let blocks = chunk.get_or_init(|| Box::new(std::array::from_fn(|_| OnceBox::new())));
            let block = blocks[idx % CHUNK / BLOCK]
                .get_or_init(|| Box::new(std::array::from_fn(|_| AtomicU64::new(0))));
            block[idx % BLOCK].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        // The sum wraps only after 584 years of cumulative latency.
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
        self.min_ns.fetch_min(ns, Ordering::Relaxed);
        self.max_ns.fetch_max(ns, Ordering::Relaxed);
    }

    /// Bytes of chunk tables and counter blocks allocated so far.
    pub fn allocated_bytes(&self) -> usize {
        let Some(chunks) = self.chunks.get() else {
            return 0;
        };
        size_of::<Chunks>()
            + chunks
                .iter()
                .filter_map(OnceBox::get)
                .map(|blocks| {
                    let held = blocks.iter().filter(|b| b.get().is_some()).count();
                    size_of::<Chunk>() + held * size_of::<Block>()
                })
                .sum::<usize>()
    }

    /// Values recorded so far (may run ahead of a concurrent snapshot's bucket total).
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// A plain copy to compute statistics from. Taken while VUs record, the copy is not an
    /// atomic cut: its `count` is the sum of the copied buckets (so quantiles are consistent),
    /// while `sum`/`min`/`max` may include a few values recorded during the copy.
    pub fn snapshot(&self) -> HistSnapshot {
        let mut buckets = Vec::new();
        let chunks = self.chunks.get().map_or(&[][..], |c| &c[..]);
        for (c, chunk) in chunks.iter().enumerate() {
            let Some(blocks) = chunk.get() else { continue };
            for (b, block) in blocks.iter().enumerate() {
                let Some(counters) = block.get() else {
                    continue;
                };
                for (i, counter) in counters.iter().enumerate() {
                    let n = counter.load(Ordering::Relaxed);
                    if n > 0 {
                        buckets.push(((c * CHUNK + b * BLOCK + i) as u32, n));
                    }
                }
            }
        }
        let count = buckets.iter().map(|b| b.1).sum();
        HistSnapshot {
            buckets,
            count,
            sum_ns: self.sum_ns.load(Ordering::Relaxed),
            min_ns: self.min_ns.load(Ordering::Relaxed),
            max_ns: self.max_ns.load(Ordering::Relaxed),
        }
    }
}

/// A point-in-time copy of a [`Histogram`]; mergeable across VUs, targets or shards. Its serde
/// form is what shards exchange (`load::merge`); one read from a peer is [`Self::check`]ed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HistSnapshot {
    /// `(bucket index, count)` of the non-empty buckets, by index: a snapshot is as small as
    /// the spread of its values (a dense copy was 31 KB, and a run's sampler holds two dozen).
    buckets: Vec<(u32, u64)>,
    count: u64,
    sum_ns: u64,
    min_ns: u64,
    max_ns: u64,
}

impl Default for HistSnapshot {
    fn default() -> Self {
        HistSnapshot {
            buckets: Vec::new(),
            count: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }
}

impl crate::thresholds::Trend for HistSnapshot {
    fn count(&self) -> u64 {
        self.count
    }
    fn mean(&self) -> Duration {
        HistSnapshot::mean(self)
    }
    fn min(&self) -> Duration {
        HistSnapshot::min(self)
    }
    fn max(&self) -> Duration {
        HistSnapshot::max(self)
    }
    fn median(&self) -> Duration {
        HistSnapshot::median(self)
    }
    fn quantile(&self, q: f64) -> Duration {
        HistSnapshot::quantile(self, q)
    }
}

impl HistSnapshot {
    /// Non-empty buckets this snapshot holds (each 16 bytes).
    pub fn buckets_held(&self) -> usize {
        self.buckets.len()
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn sum(&self) -> Duration {
        Duration::from_nanos(self.sum_ns)
    }

    /// Exact smallest value, or zero when empty (k6 reports 0 for an empty trend).
    pub fn min(&self) -> Duration {
        if self.count == 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos(self.min_ns)
        }
    }

    /// Exact largest value, or zero when empty.
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max_ns)
    }

    /// Exact mean (from the exact sum), or zero when empty.
    pub fn mean(&self) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(self.sum_ns / self.count)
    }

    /// The value at sorted position `rank` (0-based): the exact min or max at the ends, else its
    /// bucket's midpoint clamped to [min, max].
    fn value_at_rank(&self, rank: u64) -> f64 {
        if rank == 0 {
            return self.min_ns as f64;
        }
        if rank + 1 >= self.count {
            return self.max_ns as f64;
        }
        let mut seen = 0u64;
        for &(idx, c) in &self.buckets {
            seen += c;
            if seen > rank {
                let (lo, hi) = bounds_of(idx as usize);
                let hi = hi.min(self.max_ns).max(lo);
                let mid = lo as f64 + (hi - lo) as f64 / 2.0;
                return mid.clamp(self.min_ns as f64, self.max_ns as f64);
            }
        }
        self.max_ns as f64
    }

    /// k6's `p(N)` with `q = N / 100`: linear interpolation between the closest ranks, i.e.
    /// position `q·(n−1)` in the sorted values, interpolated between its floor and ceil
    /// neighbours (k6's `TrendSink.P`). Each neighbour comes from its bucket, so the result is
    /// within 0.39% of the exact k6 value (exact below 256 ns and at q = 0 or 1). Zero when
    /// empty; `q` is clamped to [0, 1] and NaN counts as 0.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
        let pos = q * (self.count - 1) as f64;
        let lower = pos.floor();
        let frac = pos - lower;
        let a = self.value_at_rank(lower as u64);
        let b = if frac > 0.0 {
            self.value_at_rank(pos.ceil() as u64)
        } else {
            a
        };
        Duration::from_nanos((a + (b - a) * frac).round() as u64)
    }

    /// k6's `med`.
    pub fn median(&self) -> Duration {
        self.quantile(0.5)
    }

    /// What was recorded after `earlier` (a snapshot of the same histogram): bucket counts
    /// subtracted. The interval's exact min and max are not known, so they are its outermost
    /// non-empty buckets' bounds, clamped to the cumulative max; quantiles stay within a
    /// bucket's width. Lets a one-second sampler read interval percentiles from one cumulative
    /// histogram without resetting it under the VUs that record into it.
    pub fn since(&self, earlier: &HistSnapshot) -> HistSnapshot {
        let buckets = combine(&self.buckets, &earlier.buckets, u64::saturating_sub);
        let count = buckets.iter().map(|b| b.1).sum();
        let (first, last) = (buckets.first(), buckets.last());
        let (min_ns, max_ns) = match (first, last) {
            (Some(f), Some(l)) => {
                let lo = bounds_of(f.0 as usize).0.min(self.max_ns);
                let hi = bounds_of(l.0 as usize).1.min(self.max_ns).max(lo);
                (lo, hi)
            }
            _ => (u64::MAX, 0),
        };
        HistSnapshot {
            buckets,
            count,
            sum_ns: self.sum_ns.saturating_sub(earlier.sum_ns),
            min_ns,
            max_ns,
        }
    }

    /// Whether this snapshot (read from elsewhere) is one a [`Histogram`] could have made:
    /// bucket indices ascending and in range, no empty bucket, the count their sum, the
    /// extremes inside the outer buckets' bounds. Quantiles of anything else are meaningless.
    pub fn check(&self) -> Result<(), String> {
        let mut total = 0u64;
        let mut last: Option<u32> = None;
        for &(idx, c) in &self.buckets {
            if idx as usize >= BUCKETS || last.is_some_and(|l| l >= idx) || c == 0 {
                return Err(format!(
                    "bucket {idx} is out of order, out of range or empty"
                ));
            }
            last = Some(idx);
            total = total
                .checked_add(c)
                .ok_or_else(|| "bucket counts overflow".to_string())?;
        }
        if total != self.count {
            return Err(format!(
                "count {} is not the sum of its buckets ({total})",
                self.count
            ));
        }
        if let (Some(&(first, _)), Some(&(last, _))) = (self.buckets.first(), self.buckets.last()) {
            let (lo, _) = bounds_of(first as usize);
            let (_, hi) = bounds_of(last as usize);
            if self.min_ns < lo || self.min_ns > self.max_ns || self.max_ns > hi.max(lo) {
                return Err("min or max lies outside its buckets".to_string());
            }
        }
        Ok(())
    }

    pub fn merge(&mut self, other: &HistSnapshot) {
        self.buckets = combine(&self.buckets, &other.buckets, |a, b| a + b);
        self.count += other.count;
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// The samples of `all` together.
    pub fn merged<'a>(all: impl Iterator<Item = &'a HistSnapshot>) -> HistSnapshot {
        all.fold(HistSnapshot::default(), |mut sum, h| {
            sum.merge(h);
            sum
        })
    }

    /// Cumulative counts for Prometheus `le` bounds given in seconds (any order; the `+Inf`
    /// bucket is [`Self::count`]). A value is counted toward bound `b` only if its whole bucket
    /// lies at or below `b`, so a count is never too high: it can miss only values in the
    /// bucket that straddles `b`, i.e. values within 0.78% below `b`. Counts are exact when
    /// `b` is below 256 ns, below the minimum, at or above the maximum, or on a bucket edge.
    /// NaN and negative bounds count nothing.
    pub fn buckets_le(&self, bounds: &[f64]) -> Vec<u64> {
        // Counts of the buckets up to and including `i`.
        let up_to = |i: usize| {
            self.buckets
                .iter()
                .take_while(|b| b.0 as usize <= i)
                .map(|b| b.1)
                .sum::<u64>()
        };
        bounds
            .iter()
            .map(|&b| {
                let ns = b * 1e9;
                if ns.is_nan() || ns < 0.0 || self.count == 0 {
                    return 0;
                }
                if ns >= self.max_ns as f64 {
                    return self.count;
                }
                if ns < self.min_ns as f64 {
                    return 0;
                }
                // `as` saturates; the bound is below max here, so it fits.
                let ns = ns.floor() as u64;
                let idx = index_of(ns);
                let (_, hi) = bounds_of(idx);
                let last_full = if hi <= ns {
                    Some(idx)
                } else {
                    idx.checked_sub(1)
                };
                last_full.map_or(0, up_to)
            })
            .collect()
    }
}

impl HistSnapshot {
    /// `(lowest ns, highest ns, count)` of each non-empty bucket, ascending: for readers that
    /// re-bucket the values (remote write's native histograms).
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.buckets.iter().map(|&(idx, n)| {
            let (lo, hi) = bounds_of(idx as usize);
            (lo, hi, n)
        })
    }
}

/// Merges two sparse bucket lists (sorted by index) with `f(a, b)` per index, a missing
/// bucket counting 0; empty results are left out, so the list stays sparse and sorted.
fn combine(a: &[(u32, u64)], b: &[(u32, u64)], f: impl Fn(u64, u64) -> u64) -> Vec<(u32, u64)> {
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let (idx, x, y) = match (a.get(i), b.get(j)) {
            (Some(&(ia, x)), Some(&(ib, y))) if ia == ib => {
                i += 1;
                j += 1;
                (ia, x, y)
            }
            (Some(&(ia, x)), Some(&(ib, _))) if ia < ib => {
                i += 1;
                (ia, x, 0)
            }
            (Some(&(ia, x)), None) => {
                i += 1;
                (ia, x, 0)
            }
            (_, Some(&(ib, y))) => {
                j += 1;
                (ib, 0, y)
            }
            (None, None) => break,
        };
        let v = f(x, y);
        if v > 0 {
            out.push((idx, v));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_follows_the_spread_of_the_values_not_the_layout() {
        let h = Histogram::new();
        assert_eq!(h.allocated_bytes(), 0);
        let (top, table, block) = (size_of::<Chunks>(), size_of::<Chunk>(), size_of::<Block>());
        // Every table is one pointer per slot.
        assert_eq!((top, table, block), (CHUNKS * 8, BLOCKS * 8, BLOCK * 8));
        // A cluster of values: the top table, one block of one chunk.
        for ns in 600_000..600_100 {
            h.record(Duration::from_nanos(ns));
        }
        assert_eq!(h.allocated_bytes(), top + table + block);
        // With two-word `OnceLock` slots and 256-byte blocks this was 816 bytes.
        assert!(h.allocated_bytes() <= 440, "{}", h.allocated_bytes());
        // 1.0 ms to 1.9 ms: two powers of two (2^19..2^20 ns covers 0.52-1.05 ms, 2^20.. the
        // rest), so at most two chunks and all their blocks.
        for us in 1000..1900 {
            h.record(Duration::from_micros(us));
        }
        assert!(
            h.allocated_bytes() <= top + 2 * (table + BLOCKS * block),
            "{} bytes",
            h.allocated_bytes()
        );
        let before = h.allocated_bytes();
        h.record(Duration::from_secs(3600));
        h.record(Duration::from_nanos(3));
        assert_eq!(h.allocated_bytes(), before + 2 * (table + block));
        let snap = h.snapshot();
        assert_eq!(snap.count(), 1002);
        // The snapshot holds the non-empty buckets only.
        assert!(
            snap.buckets_held() <= 2 * CHUNK + 2,
            "{}",
            snap.buckets_held()
        );
        let mut merged = HistSnapshot::default();
        merged.merge(&snap);
        merged.merge(&snap);
        assert_eq!(merged.since(&snap), snap.since(&HistSnapshot::default()));
        assert_eq!(merged.count(), 2 * 1002);
        assert_eq!(
            snap.buckets_le(&[0.000_001, 0.002, f64::INFINITY]),
            vec![1, 1001, 1002]
        );
    }

    /// splitmix64: a seeded generator so failures reproduce.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        fn unit(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// k6's TrendSink.P on exact sorted values.
    fn exact_quantile(sorted: &[u64], q: f64) -> f64 {
        let i = q * (sorted.len() - 1) as f64;
        let j = sorted[i.floor() as usize] as f64;
        let k = sorted[i.ceil() as usize] as f64;
        j + (k - j) * (i - i.floor())
    }

    fn latencies(seed: u64, n: usize) -> Vec<u64> {
        let mut rng = Rng(seed);
        // Log-uniform from 1 µs to 100 s: exercises every exponent the layout covers.
        (0..n)
            .map(|_| (1e3 * 1e8f64.powf(rng.unit())) as u64)
            .collect()
    }

    #[test]
    fn layout_is_contiguous_and_precise() {
        assert_eq!(BUCKETS, 3968);
        let mut expected_lo = 0;
        for idx in 0..BUCKETS {
            let (lo, hi) = bounds_of(idx);
            assert_eq!(lo, expected_lo, "bucket {idx}");
            assert_eq!(index_of(lo), idx);
            assert_eq!(index_of(hi), idx);
            if idx < BUCKETS - 1 {
                assert!((hi - lo) as f64 <= lo as f64 / 128.0 + 1.0);
                expected_lo = hi + 1;
            }
        }
        assert_eq!(index_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_are_within_1_percent_of_exact_on_random_data() {
        for seed in [1, 2, 3, 42] {
            let values = latencies(seed, 20_001);
            let h = Histogram::new();
            for &v in &values {
                h.record(Duration::from_nanos(v));
            }
            let mut sorted = values.clone();
            sorted.sort_unstable();
            let snap = h.snapshot();
            for q in [0.0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0] {
                let exact = exact_quantile(&sorted, q);
                let got = snap.quantile(q).as_nanos() as f64;
                assert!(
                    (got - exact).abs() <= exact * 0.01,
                    "seed {seed} q {q}: got {got}, exact {exact}"
                );
            }
            assert_eq!(snap.quantile(0.5), snap.median());
        }
    }

    #[test]
    fn min_max_sum_and_mean_are_exact() {
        let values = latencies(7, 5_000);
        let h = Histogram::new();
        for &v in &values {
            h.record(Duration::from_nanos(v));
        }
        let snap = h.snapshot();
        let sum: u64 = values.iter().sum();
        assert_eq!(snap.count(), 5_000);
        assert_eq!(snap.min().as_nanos() as u64, *values.iter().min().unwrap());
        assert_eq!(snap.max().as_nanos() as u64, *values.iter().max().unwrap());
        assert_eq!(snap.sum(), Duration::from_nanos(sum));
        assert_eq!(snap.mean(), Duration::from_nanos(sum / 5_000));
        assert_eq!(snap.quantile(0.0), snap.min());
        assert_eq!(snap.quantile(1.0), snap.max());
    }

    #[test]
    fn empty_histogram_reports_zeroes() {
        let snap = Histogram::new().snapshot();
        assert_eq!(snap.count(), 0);
        assert_eq!(snap.min(), Duration::ZERO);
        assert_eq!(snap.max(), Duration::ZERO);
        assert_eq!(snap.mean(), Duration::ZERO);
        assert_eq!(snap.quantile(0.95), Duration::ZERO);
        assert_eq!(snap.buckets_le(&[0.1, 1.0]), vec![0, 0]);
    }

    #[test]
    fn k6_interpolation_between_ranks() {
        let h = Histogram::new();
        for v in [100u64, 200] {
            h.record(Duration::from_nanos(v));
        }
        let snap = h.snapshot();
        // Exact buckets below 256 ns: p(25) = 100 + 0.25 · 100.
        assert_eq!(snap.quantile(0.25), Duration::from_nanos(125));
        assert_eq!(snap.quantile(f64::NAN), Duration::from_nanos(100));
        assert_eq!(snap.quantile(7.0), Duration::from_nanos(200));
    }

    #[test]
    fn huge_values_land_in_overflow_without_corrupting_bounds() {
        let h = Histogram::new();
        h.record(Duration::from_secs(500));
        h.record(Duration::from_secs(1));
        let snap = h.snapshot();
        assert_eq!(snap.max(), Duration::from_secs(500));
        assert_eq!(snap.quantile(1.0), Duration::from_secs(500));
        assert_eq!(
            snap.buckets_le(&[200.0, 500.0, f64::INFINITY]),
            vec![1, 2, 2]
        );
    }

    #[test]
    fn concurrent_recording_sums_exactly() {
        let h = Histogram::new();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let h = &h;
                s.spawn(move || {
                    for i in 0..25_000u64 {
                        h.record(Duration::from_micros(1 + (i * 7 + t) % 5_000));
                    }
                });
            }
        });
        let snap = h.snapshot();
        assert_eq!(snap.count(), 100_000);
        assert_eq!(h.count(), 100_000);
        let expected: u64 = (0..4u64)
            .flat_map(|t| (0..25_000u64).map(move |i| 1_000 * (1 + (i * 7 + t) % 5_000)))
            .sum();
        assert_eq!(snap.sum(), Duration::from_nanos(expected));
        assert_eq!(snap.min(), Duration::from_micros(1));
        assert_eq!(snap.max(), Duration::from_micros(5_000));
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let (a, b, all) = (Histogram::new(), Histogram::new(), Histogram::new());
        for (i, v) in latencies(9, 4_000).into_iter().enumerate() {
            let d = Duration::from_nanos(v);
            if i % 3 == 0 { &a } else { &b }.record(d);
            all.record(d);
        }
        let mut merged = a.snapshot();
        merged.merge(&b.snapshot());
        assert_eq!(merged, all.snapshot());
        let mut empty = HistSnapshot::default();
        empty.merge(&merged);
        assert_eq!(empty, merged);
    }

    #[test]
    fn buckets_le_never_overcount_and_miss_only_values_just_below_the_bound() {
        let values = latencies(11, 30_000);
        let h = Histogram::new();
        for &v in &values {
            h.record(Duration::from_nanos(v));
        }
        let bounds = [
            0.000_5, 0.005, 0.01, 0.025, 0.1, 0.25, 0.3, 1.0, 2.5, 10.0, 1e9,
        ];
        let got = h.snapshot().buckets_le(&bounds);
        for (b, got) in bounds.iter().zip(got) {
            let ns = b * 1e9;
            let exact = values.iter().filter(|&&v| v as f64 <= ns).count() as u64;
            let lower = values
                .iter()
                .filter(|&&v| (v as f64) <= ns * (1.0 - 1.0 / 128.0))
                .count() as u64;
            assert!(
                got <= exact && got >= lower,
                "le {b}: {got} not in [{lower}, {exact}]"
            );
        }
        assert_eq!(h.snapshot().buckets_le(&[-1.0, f64::NAN]), vec![0, 0]);
    }
}
