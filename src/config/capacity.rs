//! Whether a config's profiles, or one run, fit the process's open-file limit: every VU holds a
//! connection.

use super::Config;
use crate::limits::{self, FdLimit};
use crate::load::plan::{self, Plan, Shard};
use crate::load::spec::Executor;

impl Config {
    /// One line per profile whose VUs cannot all hold a connection under `limit`:
    /// `profiles.NAME: …`, saying what to change.
    pub fn fd_refusals(&self, limit: FdLimit) -> Vec<String> {
        self.profiles
            .values()
            .filter_map(|p| {
                fits(&p.executor, Shard::WHOLE, limit)
                    .err()
                    .map(|why| format!("profiles.{}: {why}", p.name))
            })
            .collect()
    }
}

/// Whether the VUs `executor` needs at most on `shard` can all hold a connection under `limit`;
/// the error says what to change.
pub fn fits(executor: &Executor, shard: Shard, limit: FdLimit) -> Result<(), String> {
    let vus = Plan::new(executor, shard)
        .map(|p| p.max_vus())
        .unwrap_or_else(|_| plan::max_vus(executor));
    limits::fits(u64::from(vus), limit)
}
