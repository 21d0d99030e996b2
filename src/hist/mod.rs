//! The one histogram: every latency sloburn keeps is recorded once, into a [`Histogram`], and
//! every figure is read from it or from its [`HistSnapshot`]:
//! - the summary's k6 quantiles (within 0.27 %) and exact count, sum, min, max and mean;
//! - classic Prometheus `le` counts, exact for the bounds the histogram was made with
//!   ([`Bounds`], inclusive: exactly 300 ms counts in `le="0.3"`);
//! - Prometheus' native buckets at any schema from [`MIN_SCHEMA`] to [`RECORD_SCHEMA`] and
//!   OpenTelemetry's exponential histogram ([`NativeRead`], [`OtlpView`]), exact merges of the
//!   recorded buckets;
//! - the exact merge across shards (`merge`, `since`, `check`, serde).
//!
//! Values are counted in Prometheus' exponential buckets at schema 7 (`layout`), found by
//! comparing against Prometheus' own bound table, in counters allocated where values fall
//! (`record`). Nothing here reads the clock or does I/O.

mod block;
mod bounds;
mod layout;
mod record;
mod snapshot;
mod views;

pub use bounds::{Bounds, bound_nanos};
pub use layout::{MIN_SCHEMA, RECORD_SCHEMA, ZERO_THRESHOLD};
pub use record::Histogram;
#[cfg(test)]
pub use record::records_on_this_thread;
pub use snapshot::{ClassicCounts, HistSnapshot};
pub use views::{NativeRead, OtlpView};

#[cfg(test)]
mod tests;
