//! `sloburn serve` and `sloburn demo`: the long-running daemon.
//!
//! One room per job, each depending only on the ones listed before it:
//! - `state`: the shared state every task and handler sees, and the API's views;
//! - `discovery`: `dns+http://` peers and locations, looked up at every answer;
//! - `peers`: the other shards' local answers, gathered;
//! - `locations`: the other locations' rows of a quorum SLO, judged;
//! - `runs`: starting a run, feeding its events to `/metrics` and the SLO budgets, the budget
//!   guard, recording how it ended;
//! - `shardrun`: a split profile's run on every shard at one instant, with one verdict;
//! - `schedules`: config generations and the per-profile schedule loops;
//! - `reload`: SIGHUP, API and file-watch reloads;
//! - `restore`: SLO windows rebuilt from Prometheus at start-up (`storage.restore`);
//! - `hooks`: Flagger's webhook (run a profile and answer its verdict, or the live burn);
//! - `api`: the HTTP face (`/metrics`, probes, the admin API, the status page);
//! - `lifecycle`: start-up order, the SLO tick, graceful drain, signals.
//!
//! One [`CancellationToken`](tokio_util::sync::CancellationToken) stops everything; each config
//! generation has a child token that a reload cancels, so schedules restart under the new
//! config while runs in progress finish under the old one. Every task belongs to the daemon's
//! [`TaskTracker`](tokio_util::task::TaskTracker).

mod api;
mod discovery;
mod hooks;
mod lifecycle;
mod locations;
mod peers;
mod reload;
mod restore;
mod runs;
mod schedules;
mod shardrun;
mod state;

pub use lifecycle::{
    Daemon, OnHangup, Options, Startup, command, run_until_signal, start, with_signals,
};
pub use reload::{WATCH_INTERVAL, reload};
pub use runs::{StartError, start_run};
#[doc(hidden)]
pub use state::TEST_CLOCK_ENV;
pub use state::{ProfileView, RunEntry, Shared, Source, ThresholdRecord};
