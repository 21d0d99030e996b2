//! Classic (`le`) bucket bounds: a histogram built with them counts every value in the first
//! bound at or above it, in the same `record` call as its exponential bucket, so classic
//! counts are exact for any configured bound (not only at exponential bucket edges).

/// A histogram's classic bounds, in seconds (sorted, deduplicated, finite, non-negative) and in
/// whole nanoseconds ([`bound_nanos`]) for recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Bounds {
    pub seconds: Vec<f64>,
    pub nanos: Vec<u64>,
}

impl Bounds {
    /// Keeps finite, non-negative bounds, sorted and deduplicated: a config mistake must not
    /// produce an invalid exposition (unsorted or repeated `le`) or a panic.
    pub fn new(buckets: &[f64]) -> Bounds {
        let mut seconds: Vec<f64> = buckets
            .iter()
            .copied()
            .filter(|b| b.is_finite() && *b >= 0.0)
            .collect();
        seconds.sort_by(f64::total_cmp);
        seconds.dedup();
        let nanos = seconds.iter().map(|&b| bound_nanos(b)).collect();
        Bounds { seconds, nanos }
    }

    /// The bucket a value falls in: the first bound ≥ the value (`le` is inclusive); the last
    /// index, `nanos.len()`, is `+Inf`.
    pub fn index(&self, nanos: u64) -> usize {
        self.nanos.partition_point(|&b| b < nanos)
    }
}

/// The largest whole nanosecond count that is still `≤ bound` seconds, so `le` stays inclusive.
/// `0.3 * 1e9` is 299999999.99999994 in floating point: a product within a rounding error of an
/// integer is that integer, or an observation of exactly 300 ms would miss `le="0.3"`.
pub fn bound_nanos(seconds: f64) -> u64 {
    let x = seconds * 1e9;
    let r = x.round();
    let n = if (x - r).abs() <= 1e-6 * r.max(1.0) {
        r
    } else {
        x.floor()
    };
    // `as` saturates for floats beyond u64 (and maps NaN and negatives to 0).
    n as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_inclusive_at_exact_values() {
        let b = Bounds::new(&[0.3, 0.1, 0.1, f64::NAN, -1.0, f64::INFINITY, 0.0]);
        assert_eq!(b.seconds, [0.0, 0.1, 0.3]);
        assert_eq!(b.index(0), 0);
        assert_eq!(b.index(1), 1);
        assert_eq!(b.index(100_000_000), 1);
        assert_eq!(b.index(100_000_001), 2);
        assert_eq!(b.index(300_000_000), 2);
        assert_eq!(b.index(300_000_001), 3);
        assert_eq!(bound_nanos(0.3), 300_000_000);
        assert_eq!(bound_nanos(0.000_000_000_5), 0);
    }
}
