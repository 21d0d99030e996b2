//! A run's outputs behind one seam: [`Output`] (start, samples, stop), as k6's
//! `output.Output` or vector's sinks. Each `--out` and the `--report` is one module here:
//! `json` (k6's NDJSON samples), `json_agg` (one aggregate line a second), `prometheus_rw`
//! (remote write 1.0) and `opentelemetry` (OTLP/HTTP metrics), both pushed by `push`, and
//! `report` (the HTML report, rendered by `web`). `list` parses the `--out` values into
//! [`Outputs`], which the run starts, feeds (the observers they return) and stops.
//!
//! Every task an output spawns is its own (a `JoinSet` it holds) and ends on the run's
//! `CancellationToken`, so a run that fails after its outputs started leaves none running.
//! The encoders (`prometheus_rw::write_request`, `opentelemetry::export_request`) are pure
//! functions from the run's figures to messages.
//!
//! Layering: `output` sits above `load`, `metrics` and `web` and below `run` and `daemon`, so
//! either may use it; it imports neither.

pub mod json;
pub mod json_agg;
mod list;
pub mod opentelemetry;
pub mod prometheus_rw;
pub mod push;
pub mod report;
mod sink;

pub use list::{BadSpec, Outputs, shown};
pub use sink::{Last, Output, RunInfo};
