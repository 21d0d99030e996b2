//! [`HistSnapshot`]: a plain copy of a [`Histogram`](super::Histogram), and every reading of
//! it: k6's quantiles, exact min/max/mean/sum, classic `le` counts, native buckets at any
//! schema, OpenTelemetry's exponential buckets, and the exact merge and difference of copies.
//! Its serde form is what shards exchange; one read from a peer is [`HistSnapshot::check`]ed.

use std::time::Duration;

use super::bounds::bound_nanos;
use super::layout::{SLOTS, nanos_of, slot_of};
use super::views::{NativeRead, OtlpView};

/// A point-in-time copy of a histogram; mergeable across tasks, targets or shards.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HistSnapshot {
    /// `(slot, count)` of the non-empty slots, ascending (slot 0 the zero bucket): a snapshot
    /// is as small as the spread of its values.
    buckets: Vec<(u32, u64)>,
    count: u64,
    sum_ns: u64,
    min_ns: u64,
    max_ns: u64,
    /// The classic counts of a histogram made with bounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    classic: Option<ClassicCounts>,
}

/// Classic counts beside the buckets: per bound (whole nanoseconds, ascending), then `+Inf`;
/// not cumulative.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClassicCounts {
    pub bounds_ns: Vec<u64>,
    pub counts: Vec<u64>,
}

impl Default for HistSnapshot {
    fn default() -> Self {
        HistSnapshot {
            buckets: Vec::new(),
            count: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            classic: None,
        }
    }
}

impl HistSnapshot {
    /// A snapshot of the buckets read; its count is their sum.
    pub(super) fn from_parts(
        buckets: Vec<(u32, u64)>,
        sum_ns: u64,
        min_ns: u64,
        max_ns: u64,
        classic: Option<ClassicCounts>,
    ) -> HistSnapshot {
        HistSnapshot {
            count: buckets.iter().map(|b| b.1).sum(),
            buckets,
            sum_ns,
            min_ns,
            max_ns,
            classic,
        }
    }

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
        for &(slot, c) in &self.buckets {
            seen += c;
            if seen > rank {
                let (lo, hi) = nanos_of(slot as usize);
                let hi = hi.min(self.max_ns).max(lo);
                let mid = lo as f64 + (hi - lo) as f64 / 2.0;
                return mid.clamp(self.min_ns as f64, self.max_ns as f64);
            }
        }
        self.max_ns as f64
    }

    /// k6's `p(N)` with `q = N / 100`: linear interpolation between the closest ranks, i.e.
    /// position `q·(n−1)` in the sorted values, interpolated between its floor and ceil
    /// neighbours (k6's `TrendSink.P`). Each neighbour comes from its bucket (0.54 % wide), so
    /// the result is within 0.27 % of the exact k6 value (exact at q = 0 or 1 and below
    /// 185 ns, where every whole nanosecond has a bucket). Zero when empty; `q` is clamped to
    /// [0, 1] and NaN counts as 0.
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

    /// What was recorded after `earlier` (a snapshot of the same histogram): bucket and classic
    /// counts subtracted. The interval's exact min and max are not known, so they are its
    /// outermost non-empty buckets' bounds, clamped to the cumulative max; quantiles stay
    /// within a bucket's width. Lets a one-second sampler read interval percentiles from one
    /// cumulative histogram without resetting it under the tasks that record into it.
    pub fn since(&self, earlier: &HistSnapshot) -> HistSnapshot {
        let buckets = combine(&self.buckets, &earlier.buckets, u64::saturating_sub);
        let count = buckets.iter().map(|b| b.1).sum();
        let (min_ns, max_ns) = match (buckets.first(), buckets.last()) {
            (Some(f), Some(l)) => {
                let lo = nanos_of(f.0 as usize).0.min(self.max_ns);
                let hi = nanos_of(l.0 as usize).1.min(self.max_ns).max(lo);
                (lo, hi)
            }
            _ => (u64::MAX, 0),
        };
        let classic = match (&self.classic, &earlier.classic) {
            (Some(now), Some(then)) if now.bounds_ns == then.bounds_ns => Some(ClassicCounts {
                bounds_ns: now.bounds_ns.clone(),
                counts: pairwise(&now.counts, &then.counts, u64::saturating_sub),
            }),
            (Some(now), None) if earlier.count == 0 => Some(now.clone()),
            _ => None,
        };
        HistSnapshot {
            buckets,
            count,
            sum_ns: self.sum_ns.saturating_sub(earlier.sum_ns),
            min_ns,
            max_ns,
            classic,
        }
    }

    /// [`Self::since`] with the interval's own extremes, read from a histogram whose min and max
    /// began anew with the interval ([`Histogram::restart`](super::Histogram::restart)), and
    /// without classic counts. Each extreme is kept inside its outer bucket, so a value recorded
    /// while the copy was read cannot make a snapshot [`Self::check`] refuses.
    pub fn interval(&self, base: &HistSnapshot, min_ns: u64, max_ns: u64) -> HistSnapshot {
        let mut s = self.since(base);
        s.classic = None;
        if let (Some(f), Some(l)) = (s.buckets.first(), s.buckets.last()) {
            let (first_lo, first_hi) = nanos_of(f.0 as usize);
            let (last_lo, last_hi) = nanos_of(l.0 as usize);
            s.min_ns = min_ns.clamp(first_lo, first_hi.max(first_lo));
            s.max_ns = max_ns.clamp(last_lo, last_hi.max(last_lo)).max(s.min_ns);
        }
        s
    }

    /// Whether this snapshot (read from elsewhere) is one a histogram could have made: slots
    /// ascending and in range, no empty bucket, the count their sum, the extremes inside the
    /// outer buckets' bounds, classic counts (if any) over ascending bounds summing to the
    /// count. Quantiles of anything else are meaningless.
    pub fn check(&self) -> Result<(), String> {
        let mut total = 0u64;
        let mut last: Option<u32> = None;
        for &(slot, c) in &self.buckets {
            if slot as usize >= SLOTS || last.is_some_and(|l| l >= slot) || c == 0 {
                return Err(format!(
                    "bucket {slot} is out of order, out of range or empty"
                ));
            }
            last = Some(slot);
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
            let (lo, _) = nanos_of(first as usize);
            let (_, hi) = nanos_of(last as usize);
            if self.min_ns < lo || self.min_ns > self.max_ns || self.max_ns > hi.max(lo) {
                return Err("min or max lies outside its buckets".to_string());
            }
        }
        if let Some(c) = &self.classic {
            let ascending = c.bounds_ns.windows(2).all(|w| w[0] < w[1]);
            let sum = c.counts.iter().try_fold(0u64, |t, n| t.checked_add(*n));
            if !ascending || c.counts.len() != c.bounds_ns.len() + 1 || sum != Some(self.count) {
                return Err("classic counts do not match the buckets".to_string());
            }
        }
        Ok(())
    }

    pub fn merge(&mut self, other: &HistSnapshot) {
        self.classic = match (self.classic.take(), &other.classic) {
            (Some(mut mine), Some(theirs)) if mine.bounds_ns == theirs.bounds_ns => {
                mine.counts = pairwise(&mine.counts, &theirs.counts, u64::wrapping_add);
                Some(mine)
            }
            (None, Some(theirs)) if self.count == 0 => Some(theirs.clone()),
            (mine, None) if other.count == 0 => mine,
            _ => None,
        };
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
    /// bucket is [`Self::count`]). Exact for a bound the histogram was made with (its classic
    /// counts), below the minimum, at or above the maximum, and at an exponential bucket's
    /// edge. For another bound, a value is counted only if its whole bucket lies at or below
    /// it, so a count is never too high: it can miss only values within 0.54 % below the
    /// bound. NaN and negative bounds count nothing.
    pub fn buckets_le(&self, bounds: &[f64]) -> Vec<u64> {
        let classic = self.classic.as_ref().map(|c| {
            let mut total = 0u64;
            let cumulative: Vec<u64> = c
                .counts
                .iter()
                .map(|n| {
                    total += n;
                    total
                })
                .collect();
            (&c.bounds_ns, cumulative)
        });
        bounds
            .iter()
            .map(|&b| {
                if b.is_nan() || b < 0.0 || self.count == 0 {
                    return 0;
                }
                let ns = bound_nanos(b);
                if ns >= self.max_ns {
                    return self.count;
                }
                if ns < self.min_ns {
                    return 0;
                }
                if let Some((bounds_ns, cumulative)) = &classic
                    && let Ok(i) = bounds_ns.binary_search(&ns)
                {
                    return cumulative[i];
                }
                // Slots wholly at or below `ns`.
                let slot = slot_of(ns);
                let last_full = if nanos_of(slot).1 <= ns {
                    Some(slot)
                } else {
                    slot.checked_sub(1)
                };
                last_full.map_or(0, |last| {
                    let below = self.buckets.iter().take_while(|b| b.0 as usize <= last);
                    below.map(|b| b.1).sum()
                })
            })
            .collect()
    }

    /// `(lowest ns, highest ns, count)` of each non-empty bucket, ascending: for readers that
    /// re-bucket the values.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.buckets.iter().map(|&(slot, n)| {
            let (lo, hi) = nanos_of(slot as usize);
            (lo, hi, n)
        })
    }

    /// The native buckets at `schema` (clamped to [`MIN_SCHEMA`](super::MIN_SCHEMA) ..=
    /// [`RECORD_SCHEMA`](super::RECORD_SCHEMA)): the exact merge of the recorded ones.
    pub fn native(&self, schema: i32) -> NativeRead {
        let mut out = NativeRead::default();
        out.begin(schema);
        for &(slot, n) in &self.buckets {
            out.add_slot(slot as usize, n);
        }
        out
    }

    /// OpenTelemetry's exponential histogram buckets at `scale` (a schema, clamped likewise).
    pub fn otlp(&self, scale: i32) -> OtlpView {
        self.native(scale).otlp()
    }
}

/// Merges two sparse bucket lists (sorted by slot) with `f(a, b)` per slot, a missing
/// bucket counting 0; empty results are left out, so the list stays sparse and sorted.
fn combine(a: &[(u32, u64)], b: &[(u32, u64)], f: impl Fn(u64, u64) -> u64) -> Vec<(u32, u64)> {
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let (slot, x, y) = match (a.get(i), b.get(j)) {
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
            out.push((slot, v));
        }
    }
    out
}

/// `f` of the counts at each index of two lists of the same bounds.
fn pairwise(a: &[u64], b: &[u64], f: impl Fn(u64, u64) -> u64) -> Vec<u64> {
    a.iter().zip(b).map(|(x, y)| f(*x, *y)).collect()
}
