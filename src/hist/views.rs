//! Pure views of recorded buckets for the expositions: Prometheus' native buckets at any
//! schema from [`MIN_SCHEMA`] to [`RECORD_SCHEMA`] and OpenTelemetry's exponential histogram.
//! Both are exact merges of the recorded buckets: each coarser bucket is the union of
//! `2^(RECORD_SCHEMA - schema)` recorded ones.

use super::layout::{MIN_SCHEMA, RECORD_SCHEMA, coarse_key, key_of_slot};

/// A schema's native buckets: the zero bucket's count, then `(key, count)` of every bucket
/// that holds any, keys ascending (Prometheus' keys: bucket `k` holds `(b^(k-1), b^k]`
/// seconds with `b = 2^(2^-schema)`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NativeRead {
    pub schema: i32,
    pub zero: u64,
    pub buckets: Vec<(i64, u64)>,
}

impl NativeRead {
    /// Empties the read for slots added in ascending order at `schema` (clamped).
    pub(super) fn begin(&mut self, schema: i32) {
        self.schema = schema.clamp(MIN_SCHEMA, RECORD_SCHEMA);
        self.zero = 0;
        self.buckets.clear();
    }

    /// Adds `n` values of a recorded slot; slots come in ascending order.
    pub(super) fn add_slot(&mut self, slot: usize, n: u64) {
        if slot == 0 {
            self.zero = self.zero.wrapping_add(n);
            return;
        }
        let key = i64::from(coarse_key(key_of_slot(slot), self.schema));
        match self.buckets.last_mut() {
            Some((k, total)) if *k == key => *total = total.wrapping_add(n),
            _ => self.buckets.push((key, n)),
        }
    }

    pub fn total(&self) -> u64 {
        self.buckets
            .iter()
            .fold(self.zero, |t, (_, n)| t.wrapping_add(*n))
    }

    /// The buckets as Prometheus' spans (`(offset, length)`) and deltas, into `spans` and
    /// `deltas` (their buffers reused).
    pub fn spans_and_deltas_into(&self, spans: &mut Vec<(i32, u32)>, deltas: &mut Vec<i64>) {
        spans.clear();
        deltas.clear();
        let mut previous_key: Option<i64> = None;
        let mut previous_count = 0i64;
        for &(key, count) in &self.buckets {
            match (previous_key, spans.last_mut()) {
                (Some(p), Some(last)) if key == p + 1 => last.1 += 1,
                _ => spans.push(((key - previous_key.map_or(0, |p| p + 1)) as i32, 1)),
            }
            let count = count as i64;
            deltas.push(count.wrapping_sub(previous_count));
            previous_count = count;
            previous_key = Some(key);
        }
    }

    /// The same buckets as OpenTelemetry's exponential histogram: its index `i` holds
    /// `(b^i, b^(i+1)]`, Prometheus' key `i + 1`.
    pub fn otlp(&self) -> OtlpView {
        let (offset, counts) = match (self.buckets.first(), self.buckets.last()) {
            (Some(&(first, _)), Some(&(last, _))) => {
                let mut counts = vec![0u64; (last - first + 1) as usize];
                for &(key, n) in &self.buckets {
                    counts[(key - first) as usize] = n;
                }
                ((first - 1) as i32, counts)
            }
            _ => (0, Vec::new()),
        };
        OtlpView {
            scale: self.schema,
            zero_count: self.zero,
            offset,
            counts,
        }
    }
}

/// An OpenTelemetry exponential histogram's buckets (`ExponentialHistogramDataPoint`): the
/// scale (Prometheus' schema), the zero count, and the positive buckets from `offset`, dense.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OtlpView {
    pub scale: i32,
    pub zero_count: u64,
    pub offset: i32,
    pub counts: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_deltas_follow_prometheus_encoding() {
        let r = NativeRead {
            schema: 3,
            zero: 0,
            buckets: vec![(-3, 2), (-2, 5), (4, 1), (5, 1), (9, 4)],
        };
        let (mut spans, mut deltas) = (vec![(9, 9)], vec![7]);
        r.spans_and_deltas_into(&mut spans, &mut deltas);
        assert_eq!(spans, vec![(-3, 2), (5, 2), (3, 1)]);
        assert_eq!(deltas, vec![2, 3, -4, 0, 3]);
        let otlp = r.otlp();
        assert_eq!((otlp.scale, otlp.offset, otlp.zero_count), (3, -4, 0));
        assert_eq!(otlp.counts, [2, 5, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 4]);
        assert_eq!(NativeRead::default().otlp().counts, Vec::<u64>::new());
    }
}
