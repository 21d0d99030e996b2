//! The load engine: pure plans from the config's executor specs, histograms and the runner.

pub mod affected;
pub mod capacity;
mod classes;
pub mod event;
mod iterate;
pub mod iteration;
pub mod merge;
pub mod observe;
pub mod pacing;
pub mod placement;
pub mod plan;
pub mod record;
pub mod runner;
pub mod series;
pub mod stats;
pub mod subs;
pub mod summary;
pub mod verdict;
mod work;
