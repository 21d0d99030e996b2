//! A profile's classic bucket bounds: the histogram's [`crate::hist::Bounds`] every series of
//! the profile counts under, and their `le` values rendered once for the text formats.

use std::sync::Arc;

use crate::hist::{self, Histogram};
use crate::metrics::text::{escape_label_into, le_value};

#[derive(Debug)]
pub(crate) struct Bounds {
    pub hist: Arc<hist::Bounds>,
    /// Each `le` value (`+Inf` last) escaped and closed, `0.25"} `: what follows `le="` on a
    /// bucket line, so the scrape writes a bucket as three pasted strings and a count.
    pub le_tail_classic: Vec<String>,
    /// The same with OpenMetrics' canonical values (`1.0`, not `1`).
    pub le_tail_openmetrics: Vec<String>,
}

impl Bounds {
    /// Keeps finite, non-negative bounds, sorted and deduplicated ([`hist::Bounds::new`]).
    pub fn new(buckets: &[f64]) -> Bounds {
        let hist = Arc::new(hist::Bounds::new(buckets));
        let tails = |openmetrics: bool| -> Vec<String> {
            let les = hist.seconds.iter().map(|&b| le_value(b, openmetrics));
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
            hist,
        }
    }

    pub fn seconds(&self) -> &[f64] {
        &self.hist.seconds
    }

    /// The bucket a value falls in (`le` inclusive); the last index is `+Inf`.
    pub fn index(&self, nanos: u64) -> usize {
        self.hist.index(nanos)
    }

    /// A series' histogram: exponential buckets and a counter per bound.
    pub fn histogram(&self) -> Histogram {
        Histogram::with_bounds(Arc::clone(&self.hist))
    }
}
