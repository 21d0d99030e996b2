//! The one integration-test binary (matklad's layout): each feature area is a module.

mod config;
mod dashboards;
mod deploy;
mod http;
mod load;
mod rules;
mod target;
