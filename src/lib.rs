//! sloburn: a Prometheus-native SLO load-test daemon.
//!
//! The binary (`main.rs`) only parses the command line and maps errors to exit codes; all work
//! lives in this library so that integration tests drive it in-process.

pub mod budget;
pub mod capacity;
pub mod checks;
pub mod cli;
pub mod clock;
pub mod compare;
pub mod config;
pub mod daemon;
pub mod demo;
pub mod exit;
pub mod hist;
pub mod http;
pub mod importers;
pub mod journey;
pub mod limits;
pub mod load;
pub mod memory;
pub mod metrics;
pub mod names;
pub mod output;
pub mod rules;
pub mod run;
pub mod schedule;
pub mod server;
pub mod signals;
pub mod slo;
pub mod starve;
pub mod store;
pub mod target;
pub mod telemetry;
pub mod thresholds;
pub mod timer;
pub mod units;
pub mod web;
pub mod zone;
