//! The load engine: executor specs, pure plans, histograms and the runner.

pub mod spec;
