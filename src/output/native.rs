//! The run's histogram read as exponential (native) buckets, for the two push encodings:
//! Prometheus' native histograms and OTLP's exponential histograms.

use crate::load::hist::HistSnapshot;
use crate::metrics::NativeRead;

/// `h` as native (exponential) histogram buckets at `schema`: each of its buckets (0.78 % wide)
/// is counted in the native bucket holding its midpoint, so a value lands at most one native
/// bucket off its own (see `metrics::native` for the keys).
pub fn native_buckets(h: &HistSnapshot, schema: i32) -> NativeRead {
    let mut read = NativeRead::default();
    let per_octave = 2f64.powi(schema);
    for (lo, hi, n) in h.ranges() {
        if hi == 0 {
            read.zero += n;
            continue;
        }
        let seconds = (lo as f64 + hi as f64) / 2.0 / 1e9;
        let key = (seconds.log2() * per_octave).ceil() as i64;
        match read.buckets.last_mut() {
            Some((k, c)) if *k == key => *c += n,
            _ => read.buckets.push((key, n)),
        }
    }
    read
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn native_buckets_hold_every_value_within_a_bucket_of_its_own() {
        let h = crate::load::hist::Histogram::new();
        let values_ns = [
            0u64,
            1_000,
            1_999_000,
            2_000_000,
            2_100_000,
            7_000_000,
            3_000_000_000,
        ];
        for ns in values_ns {
            h.record(Duration::from_nanos(ns));
        }
        let read = native_buckets(&h.snapshot(), 3);
        assert_eq!(read.zero, 1);
        assert_eq!(read.total(), values_ns.len() as u64);
        // Keys ascend, and each value's count sits in a key at most one off its exact one.
        assert!(read.buckets.windows(2).all(|w| w[0].0 < w[1].0));
        for ns in values_ns.into_iter().filter(|&n| n > 0) {
            let exact = ((ns as f64 / 1e9).log2() * 8.0).ceil() as i64;
            assert!(
                read.buckets.iter().any(|(k, _)| (k - exact).abs() <= 1),
                "{ns} ns: {read:?}"
            );
        }
    }
}
