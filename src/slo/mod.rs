//! The pure SLO engine: SLO definitions and alert tiers, per-minute good/bad windows, and the math
//! (SLI, error ratio, burn rate, remaining budget, tier states) from DESIGN.md "SLO math".
//!
//! Nothing here does I/O or reads the clock: callers pass time in as a unix minute index
//! (`unix_seconds.div_euclid(60)`, see [`minute_of`]).

mod calendar;
mod math;
mod merge;
pub mod quorum;
pub mod restore;
mod tiers;
mod window;

use std::collections::BTreeMap;
use std::time::Duration;

pub use calendar::{Calendar, CalendarUnit, rfc3339_in};
pub use math::{
    SloReport, SloStatus, TierStatus, burn_rate, error_ratio, evaluate, sli, time_to_exhaustion,
};
pub use merge::{Counts, merged};
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
    /// A rolling period's length; for a calendar period its nominal length (7d, 30d, 90d),
    /// which scales the default tiers and `slo:time_period:days`.
    pub period: Duration,
    /// `Some` for a calendar-aligned period budget (the tiers' windows stay rolling).
    pub calendar: Option<Calendar>,
    pub tiers: Vec<Tier>,
    pub labels: BTreeMap<String, String>,
    pub description: String,
}

impl SloDef {
    /// B = 1 − objective: the fraction of events allowed to be bad.
    pub fn error_budget(&self) -> f64 {
        1.0 - self.objective
    }

    /// How many minutes the windows must hold: the period, or the longest calendar period.
    pub fn span(&self) -> Duration {
        self.calendar.map_or(self.period, |c| c.longest())
    }

    /// `[start, end)` unix minutes of the period budget at `now_minute`: rolling, the period
    /// ending now (`end` is the next minute); calendar, the calendar period containing it.
    pub fn period_bounds(&self, now_minute: i64) -> (i64, i64) {
        match self.calendar {
            None => (
                now_minute - window::window_minutes(self.period) + 1,
                now_minute + 1,
            ),
            Some(c) => {
                let (s, e) = c.bounds(now_minute.saturating_mul(60));
                (s.div_euclid(60), e.div_euclid(60))
            }
        }
    }

    /// The window the period budget covers at `now_minute`: the period itself when rolling;
    /// from the calendar period's first minute to now (inclusive) otherwise.
    pub fn period_window(&self, now_minute: i64) -> Duration {
        match self.calendar {
            None => self.period,
            Some(_) => {
                let (start, _) = self.period_bounds(now_minute);
                let minutes = (now_minute - start + 1).max(1);
                Duration::from_secs(u64::try_from(minutes).unwrap_or(1) * 60)
            }
        }
    }
}

/// Unix minute index of a unix timestamp in seconds; negative timestamps round down so that a
/// minute always covers `[60·m, 60·m + 60)`.
pub fn minute_of(unix_seconds: i64) -> i64 {
    unix_seconds.div_euclid(60)
}
