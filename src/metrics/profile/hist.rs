//! A duration histogram's bucket bounds and its per-series atomic counters.

use crate::metrics::native::NativeCounts;
use crate::metrics::text::{escape_label_into, le_value};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Bucket bounds of one histogram layout, as nanoseconds for recording and as `le` values.
#[derive(Debug)]
pub(crate) struct Bounds {
    pub seconds: Vec<f64>,
    pub(super) nanos: Vec<u64>,
    /// Each `le` value (`+Inf` last) escaped and closed, `0.25"} `: what follows `le="` on a
    /// bucket line, so the scrape writes a bucket as three pasted strings and a count.
    pub le_tail_classic: Vec<String>,
    /// The same with OpenMetrics' canonical values (`1.0`, not `1`).
    pub le_tail_openmetrics: Vec<String>,
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
        let tails = |openmetrics: bool| -> Vec<String> {
            let les = seconds.iter().map(|&b| le_value(b, openmetrics));
            les.chain(["+Inf".to_string()])
                .map(|le| {
                    let mut t = String::new();
                    escape_label_into(&mut t, &le);
                    t.push_str("\"} ");
                    t
                })
                .collect()
        };
        Bounds {
            le_tail_classic: tails(false),
            le_tail_openmetrics: tails(true),
            seconds,
            nanos,
        }
    }

    /// The bucket a value falls in: the first bound ≥ the value (`le` is inclusive); the last
    /// index is `+Inf`.
    pub(super) fn index(&self, nanos: u64) -> usize {
        self.nanos.partition_point(|&b| b < nanos)
    }
}

/// The largest whole nanosecond count that is still `≤ bound` seconds, so `le` stays inclusive.
/// `0.3 * 1e9` is 299999999.99999994 in floating point: a product within a rounding error of an
/// integer is that integer, or an observation of exactly 300 ms would miss `le="0.3"`.
pub(super) fn bound_nanos(seconds: f64) -> u64 {
    let x = seconds * 1e9;
    let r = x.round();
    let n = if (x - r).abs() <= 1e-6 * r.max(1.0) {
        r
    } else {
        x.floor()
    };
    // `as` saturates for floats beyond u64.
    n as u64
}

/// A cumulative-at-encode histogram: one atomic per bucket and the sum in nanoseconds.
///
/// There is no separate count: `_count` is the sum of the buckets at scrape time, so it always
/// equals the `+Inf` bucket even while requests are being recorded (a separate counter could be
/// read one increment apart). The u64 nanosecond sum wraps after 584 years of summed request
/// time, which Prometheus would read as one counter reset.
#[derive(Debug)]
pub(crate) struct Hist {
    pub(super) buckets: Box<[AtomicU64]>,
    pub(super) sum_nanos: AtomicU64,
    /// The same observations in native buckets, for the protobuf exposition.
    pub native: NativeCounts,
}

impl Hist {
    pub(super) fn new(bounds: &Bounds) -> Hist {
        Hist {
            buckets: (0..=bounds.nanos.len())
                .map(|_| AtomicU64::new(0))
                .collect(),
            sum_nanos: AtomicU64::new(0),
            native: NativeCounts::default(),
        }
    }

    pub(super) fn record(&self, bounds: &Bounds, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        if let Some(b) = self.buckets.get(bounds.index(nanos)) {
            b.fetch_add(1, Relaxed);
        }
        self.native.record(nanos);
        self.sum_nanos.fetch_add(nanos, Relaxed);
    }

    /// Reads the histogram at one moment: its cumulative bucket counts into `cumulative`
    /// (replacing what it held: the scrape reuses one buffer), and its sum in seconds.
    pub fn read_into(&self, cumulative: &mut Vec<u64>) -> f64 {
        cumulative.clear();
        let mut total = 0u64;
        cumulative.extend(self.buckets.iter().map(|b| {
            total = total.wrapping_add(b.load(Relaxed));
            total
        }));
        self.sum_seconds()
    }

    /// The sum of the values in seconds.
    pub fn sum_seconds(&self) -> f64 {
        self.sum_nanos.load(Relaxed) as f64 / 1e9
    }
}
