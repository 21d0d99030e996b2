//! The load engine: executor specs, pure plans, histograms and the runner.

pub mod hist;
pub mod plan;
pub mod presets;
pub mod spec;
