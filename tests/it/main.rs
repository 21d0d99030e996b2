//! The one integration-test binary (matklad's layout): each feature area is a module.

// Tests time what they watch from outside the library: clippy.toml's clock rule is for src/.
#![allow(clippy::disallowed_methods)]

mod alerting;
mod architecture;
mod argo;
mod calendar;
mod capacity;
mod collect;
mod config;
mod daemon;
mod dashboards;
mod data_files;
mod deploy;
mod first_hour;
mod flagger;
mod fuzz;
mod groups;
mod grpc;
mod guard;
mod h2;
mod hardening;
mod hardening_config;
mod hostile_imports;
mod hostile_peers;
mod http;
mod import;
mod journeys;
mod k6;
mod k6_journeys;
mod load;
mod maintenance;
mod metrics;
mod native;
mod native_rules;
mod openslo;
mod otel;
mod owned;
mod panels;
mod probes;
mod remote_write;
mod restore;
mod rules;
mod secrets;
mod shardrun;
mod shards;
mod signals;
mod slo;
mod stall;
mod store_heal;
mod storm;
mod support;
mod target;
mod tls;
mod untruths;
mod web;
