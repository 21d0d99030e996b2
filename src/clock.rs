//! The one clock: every read of the system clock and of a monotonic instant in sloburn goes
//! through this module (`clippy.toml` disallows `SystemTime::now`, `std::time::Instant::now`
//! and `tokio::time::Instant::now` anywhere else), so the places that read time are found in one
//! search and the pure cores provably take it as an input.
//!
//! The hot-path reads (`instant`, `tokio_instant`) are `#[inline]` calls of the std and tokio
//! functions: no indirection, no state. [`Clock`] is the daemon's wall clock, a value in its
//! shared state, which the `SLOBURN_TEST_CLOCK_START` test hook may shift.

#![allow(clippy::disallowed_methods)] // the one place allowed to read the clock

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A monotonic instant now (`std::time::Instant::now`).
#[inline]
pub fn instant() -> std::time::Instant {
    std::time::Instant::now()
}

/// A monotonic instant now on tokio's clock (`tokio::time::Instant::now`), which paused tests
/// can advance.
#[inline]
pub fn tokio_instant() -> tokio::time::Instant {
    tokio::time::Instant::now()
}

/// The system clock now (`SystemTime::now`), never shifted.
#[inline]
pub fn system_time() -> SystemTime {
    SystemTime::now()
}

/// Time since the unix epoch on the system clock; zero if the clock is before 1970.
#[inline]
pub fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
}

/// A wall clock in unix seconds: the system clock plus a fixed offset, zero unless a test
/// started it elsewhere ([`Clock::starting_at`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Clock {
    offset_secs: f64,
}

impl Clock {
    /// The system clock as it is.
    pub const fn system() -> Clock {
        Clock { offset_secs: 0.0 }
    }

    /// A clock that reads `start` (unix seconds) now and then runs at real speed.
    pub fn starting_at(start: i64) -> Clock {
        Clock {
            offset_secs: start as f64 - since_epoch().as_secs_f64(),
        }
    }

    /// Now in unix seconds.
    pub fn unix_secs(&self) -> f64 {
        since_epoch().as_secs_f64() + self.offset_secs
    }

    /// Now in whole unix seconds.
    pub fn unix_secs_i64(&self) -> i64 {
        self.unix_secs().floor() as i64
    }

    /// The system clock in unix milliseconds, never shifted: shards agree on start instants
    /// by it, so a shifted clock must not move them.
    pub fn wall_ms(&self) -> u64 {
        u64::try_from(since_epoch().as_millis()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_started_clock_reads_its_start_and_runs_at_real_speed() {
        let c = Clock::starting_at(1_000_000);
        let t = c.unix_secs();
        assert!((1_000_000.0..1_000_001.0).contains(&t), "{t}");
        assert!(c.wall_ms() > 1_600_000_000_000, "wall_ms is never shifted");
        let s = Clock::system().unix_secs();
        assert!((s - since_epoch().as_secs_f64()).abs() < 1.0);
    }
}
