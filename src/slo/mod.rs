//! The pure SLO engine: SLO definitions and alert tiers, per-minute good/bad windows, and the math
//! (SLI, error ratio, burn rate, remaining budget, tier states) from DESIGN.md "SLO math".
//!
//! Nothing here does I/O or reads the clock: callers pass time in as a unix minute index
//! (`unix_seconds.div_euclid(60)`, see [`minute_of`]).

mod math;
mod tiers;
mod window;

use std::collections::BTreeMap;
use std::time::Duration;

pub use math::{
    SloReport, SloStatus, TierStatus, burn_rate, error_ratio, evaluate, sli, time_to_exhaustion,
};
pub use tiers::{Severity, Tier, default_tiers};
pub use window::{STANDARD_WINDOWS, Windows, window_minutes};

/// One SLO, already validated by `config` (objective is a ratio in (0, 1), period non-zero).
#[derive(Debug, Clone, PartialEq)]
pub struct SloDef {
    pub name: String,
    /// The target name; becomes `sloth_service` in the generated rules.
    pub service: String,
    /// Ratio, e.g. `0.999` for 99.9 %.
    pub objective: f64,
    pub period: Duration,
    pub tiers: Vec<Tier>,
    pub labels: BTreeMap<String, String>,
    pub description: String,
}

impl SloDef {
    /// B = 1 − objective: the fraction of events allowed to be bad.
    pub fn error_budget(&self) -> f64 {
        1.0 - self.objective
    }
}

/// Unix minute index of a unix timestamp in seconds; negative timestamps round down so that a
/// minute always covers `[60·m, 60·m + 60)`.
pub fn minute_of(unix_seconds: i64) -> i64 {
    unix_seconds.div_euclid(60)
}
