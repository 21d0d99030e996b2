//! The one integration-test binary (matklad's layout): each feature area is a module.

mod alerting;
mod architecture;
mod calendar;
mod config;
mod daemon;
mod dashboards;
mod deploy;
mod fuzz;
mod hardening;
mod http;
mod k6;
mod load;
mod metrics;
mod openslo;
mod panels;
mod restore;
mod rules;
mod secrets;
mod signals;
mod slo;
mod storm;
mod support;
mod target;
mod web;
