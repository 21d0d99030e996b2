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

/// The system clock now in unix seconds, never shifted.
#[inline]
pub fn unix_secs() -> f64 {
    since_epoch().as_secs_f64()
}

/// The system clock now in whole unix milliseconds, never shifted.
#[inline]
pub fn unix_ms() -> u64 {
    u64::try_from(since_epoch().as_millis()).unwrap_or(u64::MAX)
}

/// How long ago `since` was, on its own clock (std's or tokio's monotonic instant).
#[inline]
pub fn elapsed<I: Monotonic>(since: I) -> Duration {
    since.elapsed_now()
}

/// The wall clock now as a UTC date-time (the system clock, never shifted).
pub fn utc_now() -> chrono::DateTime<chrono::Utc> {
    Clock::system().utc()
}

/// A monotonic instant type this module reads: std's and tokio's.
pub trait Monotonic: Copy {
    fn elapsed_now(self) -> Duration;
}

impl Monotonic for std::time::Instant {
    #[inline]
    fn elapsed_now(self) -> Duration {
        self.elapsed()
    }
}

impl Monotonic for tokio::time::Instant {
    #[inline]
    fn elapsed_now(self) -> Duration {
        self.elapsed()
    }
}

/// A wall clock: the system clock plus a fixed offset (zero unless a test started it elsewhere,
/// [`Clock::starting_at`]), or, for tests under paused tokio time, a clock that starts at a
/// given instant and advances with tokio's clock ([`Clock::on_tokio`]). The daemon keeps one in
/// its shared state; the schedule's ticker reads it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Clock {
    offset_ns: i64,
    /// Unix nanoseconds at a tokio instant: the wall time advances with tokio's clock from it.
    tokio_origin: Option<(i64, tokio::time::Instant)>,
}

impl Clock {
    /// The system clock as it is.
    pub const fn system() -> Clock {
        Clock {
            offset_ns: 0,
            tokio_origin: None,
        }
    }

    /// A clock that reads `start` (unix seconds) now and then runs at real speed.
    pub fn starting_at(start: i64) -> Clock {
        Clock {
            offset_ns: start.saturating_mul(1_000_000_000) - system_nanos(),
            tokio_origin: None,
        }
    }

    /// A clock that reads `start` now and then advances with tokio's clock, so a test under
    /// `#[tokio::test(start_paused = true)]` sees days pass instantly and deterministically.
    pub fn on_tokio(start: chrono::DateTime<chrono::Utc>) -> Clock {
        Clock {
            offset_ns: 0,
            tokio_origin: Some((
                start.timestamp_nanos_opt().unwrap_or(0),
                tokio::time::Instant::now(),
            )),
        }
    }

    /// Steps this clock's wall time by `by` (negative: backwards), as NTP or a suspend would.
    pub fn step(&mut self, by: chrono::TimeDelta) {
        let ns = by.num_nanoseconds().unwrap_or(0);
        self.offset_ns = self.offset_ns.saturating_add(ns);
    }

    fn unix_nanos(&self) -> i64 {
        let base = match self.tokio_origin {
            Some((origin, at)) => {
                origin.saturating_add(i64::try_from(at.elapsed().as_nanos()).unwrap_or(i64::MAX))
            }
            None => system_nanos(),
        };
        base.saturating_add(self.offset_ns)
    }

    /// Now in unix seconds.
    pub fn unix_secs(&self) -> f64 {
        self.unix_nanos() as f64 / 1e9
    }

    /// Now in whole unix seconds.
    pub fn unix_secs_i64(&self) -> i64 {
        self.unix_nanos().div_euclid(1_000_000_000)
    }

    /// Now as a UTC date-time.
    pub fn utc(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::from_timestamp_nanos(self.unix_nanos())
    }

    /// The system clock in unix milliseconds, never shifted: shards agree on start instants
    /// by it, so a shifted clock must not move them.
    pub fn wall_ms(&self) -> u64 {
        u64::try_from(since_epoch().as_millis()).unwrap_or(u64::MAX)
    }
}

fn system_nanos() -> i64 {
    i64::try_from(since_epoch().as_nanos()).unwrap_or(i64::MAX)
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

    #[tokio::test(start_paused = true)]
    async fn a_tokio_clock_advances_with_tokio_time_and_steps() {
        let start = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let mut c = Clock::on_tokio(start);
        assert_eq!(c.utc(), start);
        tokio::time::advance(Duration::from_secs(90)).await;
        assert_eq!(c.unix_secs_i64(), 1_800_000_090);
        c.step(chrono::TimeDelta::minutes(-3));
        assert_eq!(c.unix_secs_i64(), 1_800_000_090 - 180);
        let t = tokio_instant();
        tokio::time::advance(Duration::from_millis(5)).await;
        assert_eq!(elapsed(t), Duration::from_millis(5));
    }
}
