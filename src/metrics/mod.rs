//! Metrics: every family sloburn exposes ([`FAMILIES`], in `families`), the registry
//! ([`Metrics`], in `registry`: built by `main`/the daemon and passed down, no global), and the
//! exposition in the classic text format, OpenMetrics 1.0 (`encode`, over the `text` writer)
//! or protobuf with native histograms (`protobuf`, `proto`), every histogram a
//! [`crate::hist::Histogram`].
//!
//! The hot path never takes a lock: a run looks up its [`ProfileMetrics`] (and [`SloMetrics`])
//! once, then records each request with atomic adds into fixed arrays. The maps and the
//! run-level state behind a `Mutex` are touched only by get-or-create, by once-a-run or
//! once-a-minute setters, and by the scrape.
//!
//! Label conventions (bounded sets, values from config names only, never URLs or error text):
//! - `status` is the HTTP code, `"0"` when no response head arrived, `"other"` only past 512
//!   distinct (status, error) pairs of one profile;
//! - `error` is the [`ErrorClass`](crate::http::ErrorClass) label, `"none"` without a transport
//!   error (empty label values are avoided: Prometheus treats `x=""` as an absent label);
//! - `result` is `pass|fail` for checks, `good|bad` for SLO events, `success|failure` for
//!   reloads and store flushes, the run result for runs.

mod accept;
mod encode;
mod encoder;
mod exemplar;
mod families;
mod process;
mod profile;
pub mod proto;
mod protobuf;
mod registry;
mod slo;
mod state;
mod text;
mod wire;

pub use crate::hist::{MIN_SCHEMA, NativeRead, ZERO_THRESHOLD};
pub use accept::{Format, PROTOBUF};
pub use encoder::{CHUNK, Sink};
pub use families::*;
pub use process::ProcessStats;
pub use profile::{
    ERROR_NONE, ITERATION_RESULTS, ProfileMetrics, STATUS_NONE, STATUS_OTHER, STEP_FAILURE_REASONS,
    StepLayout,
};
pub use registry::Metrics;
pub use slo::{SloMetrics, SloSource, window_label};
pub use text::{Family, Kind, le_value};
