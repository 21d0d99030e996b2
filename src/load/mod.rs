//! The load engine: executor specs, pure plans, histograms and the runner.

mod groups;
pub mod iteration;
pub mod merge;
pub mod ndjson;
pub mod observe;
pub mod pacing;
pub mod placement;
pub mod plan;
pub mod presets;
pub mod record;
pub mod runner;
pub mod spec;
pub mod stats;
pub mod subs;
pub mod summary;
