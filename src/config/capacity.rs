//! Whether a config's profiles fit the process's open-file limit: every VU holds a connection.

use super::Config;
use crate::limits::{self, FdLimit};

impl Config {
    /// One line per profile whose VUs cannot all hold a connection under `limit`:
    /// `profiles.NAME: …`, saying what to change.
    pub fn fd_refusals(&self, limit: FdLimit) -> Vec<String> {
        self.profiles
            .values()
            .filter_map(|p| {
                let vus = u64::from(crate::load::plan::max_vus(&p.executor));
                limits::fits(vus, limit)
                    .err()
                    .map(|why| format!("profiles.{}: {why}", p.name))
            })
            .collect()
    }
}
